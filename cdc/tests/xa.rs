//! XA transactions: a two-phase XA COMMIT (rows logged at PREPARE) is reported as untrusted
//! (evict all), prepared rows are never delivered as committed, the stream continues after
//! it, and a one-phase XA COMMIT is an ordinary batch.

mod common;

use common::*;
use freshet_cdc::{CdcError, StreamEvent};
use freshet_dataflow::Value;
use mysql_async::prelude::Queryable;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xa_commit_is_untrusted_and_one_phase_is_a_batch() {
    let (db, mut c) = fresh_db("xa").await;
    c.query_drop("CREATE TABLE cdc_x (id INT PRIMARY KEY)").await.unwrap();
    let mut s = stream(&db).await;
    c.query_drop("XA START 'cdc1'; INSERT INTO cdc_x VALUES (1); XA END 'cdc1'; XA PREPARE 'cdc1'; XA COMMIT 'cdc1'").await.unwrap();
    c.query_drop("XA START 'cdc2'; INSERT INTO cdc_x VALUES (2); XA END 'cdc2'; XA COMMIT 'cdc2' ONE PHASE").await.unwrap();
    c.query_drop("INSERT INTO cdc_x VALUES (3)").await.unwrap();
    let mut untrusted = 0;
    let mut ids = Vec::new();
    within(20, "xa events", async {
        while ids.len() < 2 {
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
    assert_eq!(untrusted, 1);
    assert_eq!(ids, vec![2, 3], "prepared rows are not delivered; one-phase and plain commits are");
    drop_db(&db).await;
}
