//! XA transactions: a two-phase XA COMMIT delivers the rows its XA PREPARE logged, as a batch
//! at the commit (until then they are not committed, and their row locks keep other writes
//! off them); XA ROLLBACK delivers nothing; a one-phase XA COMMIT is an ordinary batch. A
//! commit whose prepare the stream did not read (prepared before it started) is reported as
//! untrusted (evict all), and the stream continues after it. An XA transaction of another
//! database is as any other: nothing to deliver, nothing to distrust. A transaction the
//! binlog logs with its rows and then `ROLLBACK` delivers nothing either.

mod common;

use common::*;
use freshet_cdc::{BinlogStream, CdcError, StreamEvent};
use freshet_dataflow::Value;
use mysql_async::prelude::Queryable;

/// One test at a time: each stream reads the whole binlog, and the commit of an XA
/// transaction one test prepared before its stream started is one no stream read the
/// prepare of (untrusted in all of them, whatever its database).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Reads until the batches hold `want` rows; the first column of each, in order, and how many
/// groups were reported untrusted.
async fn ids_and_untrusted(s: &mut BinlogStream, want: usize) -> (Vec<i64>, usize) {
    let mut untrusted = 0;
    let mut ids = Vec::new();
    within(20, "xa events", async {
        while ids.len() < want {
            match s.next().await {
                Ok(StreamEvent::Batch(b)) => ids.extend(b.changes.iter().map(|ch| match ch.row[0] {
                    Value::Int(i) => i,
                    ref v => panic!("{v:?}"),
                })),
                Ok(_) => {}
                Err(CdcError::Untrusted(_)) => untrusted += 1,
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await;
    (ids, untrusted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_phase_xa_commit_delivers_its_rows_at_the_commit() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (db, mut c) = fresh_db("xa").await;
    c.query_drop("CREATE TABLE cdc_x (id INT PRIMARY KEY)").await.unwrap();
    let mut s = stream(&db).await;
    c.query_drop("XA START 'cdc1', 'b', 3; INSERT INTO cdc_x VALUES (1); XA END 'cdc1', 'b', 3; XA PREPARE 'cdc1', 'b', 3").await.unwrap();
    // Committed while cdc1 is prepared: delivered first.
    let mut other = mysql_async::Conn::new(opts_for(Some(&db))).await.unwrap();
    other.query_drop("INSERT INTO cdc_x VALUES (5)").await.unwrap();
    c.query_drop("XA COMMIT 'cdc1', 'b', 3").await.unwrap();
    c.query_drop("XA START X'0102'; INSERT INTO cdc_x VALUES (2); XA END X'0102'; XA PREPARE X'0102'; XA ROLLBACK X'0102'").await.unwrap();
    c.query_drop("XA START 'cdc3'; INSERT INTO cdc_x VALUES (3); XA END 'cdc3'; XA COMMIT 'cdc3' ONE PHASE").await.unwrap();
    c.query_drop("INSERT INTO cdc_x VALUES (4)").await.unwrap();
    let (ids, untrusted) = ids_and_untrusted(&mut s, 4).await;
    assert_eq!(untrusted, 0);
    assert_eq!(ids, vec![5, 1, 3, 4], "prepared rows at their commit, rolled back ones never");
    drop_db(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xa_transaction_of_another_database_is_not_untrusted() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (db, mut c) = fresh_db("xa_ours").await;
    let (elsewhere, mut e) = fresh_db("xa_theirs").await;
    c.query_drop("CREATE TABLE cdc_x (id INT PRIMARY KEY)").await.unwrap();
    e.query_drop("CREATE TABLE other (id INT PRIMARY KEY)").await.unwrap();
    let mut s = stream(&db).await;
    for i in 0..3 {
        e.query_drop(format!("XA START 'x{i}'; INSERT INTO other VALUES ({i}); XA END 'x{i}'; XA PREPARE 'x{i}'; XA COMMIT 'x{i}'"))
            .await
            .unwrap();
    }
    c.query_drop("INSERT INTO cdc_x VALUES (7)").await.unwrap();
    let (ids, untrusted) = ids_and_untrusted(&mut s, 1).await;
    assert_eq!((ids, untrusted), (vec![7], 0), "another database's XA transactions make no cache stale");
    drop_db(&db).await;
    drop_db(&elsewhere).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xa_commit_whose_prepare_was_not_read_is_untrusted() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (db, mut c) = fresh_db("xa_before").await;
    c.query_drop("CREATE TABLE cdc_x (id INT PRIMARY KEY)").await.unwrap();
    c.query_drop("XA START 'early'; INSERT INTO cdc_x VALUES (1); XA END 'early'; XA PREPARE 'early'").await.unwrap();
    let mut s = stream(&db).await;
    c.query_drop("XA COMMIT 'early'").await.unwrap();
    c.query_drop("INSERT INTO cdc_x VALUES (2)").await.unwrap();
    let (ids, untrusted) = ids_and_untrusted(&mut s, 1).await;
    assert_eq!(untrusted, 1);
    assert_eq!(ids, vec![2], "its rows are in no event the stream read; the stream goes on");
    drop_db(&db).await;
}

/// MariaDB logs a rolled-back transaction, rows and all, followed by a `ROLLBACK` query
/// event, where it cannot drop the transaction's cache: a temporary table created or dropped
/// in it (row format), a non-transactional table written in it, an XA transaction that wrote
/// one and was rolled back before its prepare (logged as BEGIN ... ROLLBACK), a session that
/// ends inside such a transaction (a disconnect or a KILL: a second audit). Its InnoDB rows
/// were undone; the stream took the ROLLBACK for a COMMIT and delivered them (an audit: views
/// kept rows the server never committed, lost deleted ones, and counted ids twice, while the
/// status said caught up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_logged_with_its_rollback_delivers_nothing() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (db, mut c) = fresh_db("rolled_back").await;
    c.query_drop("CREATE TABLE cdc_rb (id INT PRIMARY KEY)").await.unwrap();
    c.query_drop("CREATE TABLE cdc_rb_nt (id INT) ENGINE = MyISAM").await.unwrap();
    let mut s = stream(&db).await;
    c.query_drop("BEGIN; INSERT INTO cdc_rb VALUES (1); CREATE TEMPORARY TABLE rb_tmp (a INT); ROLLBACK").await.unwrap();
    c.query_drop("BEGIN; INSERT INTO cdc_rb VALUES (2); DROP TEMPORARY TABLE rb_tmp; ROLLBACK").await.unwrap();
    c.query_drop("XA START 'rb'; INSERT INTO cdc_rb VALUES (3); INSERT INTO cdc_rb_nt VALUES (3); XA END 'rb'; XA ROLLBACK 'rb'")
        .await
        .unwrap();
    // A session that ends (or is killed) inside such a transaction: the same group.
    let mut gone = mysql_async::Conn::new(opts_for(Some(&db))).await.unwrap();
    gone.query_drop("SET autocommit = 0; CREATE TEMPORARY TABLE rb_tmp2 (a INT) ENGINE = InnoDB; INSERT INTO cdc_rb VALUES (6)")
        .await
        .unwrap();
    gone.disconnect().await.unwrap();
    // Committed: delivered.
    c.query_drop("BEGIN; INSERT INTO cdc_rb VALUES (4); COMMIT").await.unwrap();
    let mut last = mysql_async::Conn::new(opts_for(Some(&db))).await.unwrap();
    last.query_drop("INSERT INTO cdc_rb VALUES (5)").await.unwrap();
    let (ids, untrusted) = ids_and_untrusted(&mut s, 2).await;
    assert_eq!(untrusted, 0);
    assert_eq!(ids, vec![4, 5], "rolled back rows are never delivered");
    drop_db(&db).await;
}
