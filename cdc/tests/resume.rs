//! Reconnect and resume: killing the binlog connection mid-stream (KILL from another
//! connection) loses and duplicates nothing; a resume position that no longer exists is
//! reported as position-gone, distinctly, and a stream restarted at a delivered position
//! continues exactly after it.

mod common;

use common::*;
use freshet_cdc::{BinlogPos, BinlogStream, CdcError, StartAt, StreamConfig, StreamEvent};
use freshet_dataflow::Value;
use mysql_async::prelude::Queryable;

const TXNS: i64 = 3_000;
const ROWS_PER_TXN: i64 = 3;

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_binlog_connection_loses_and_duplicates_nothing() {
    let (db, mut c) = fresh_db("kill").await;
    c.query_drop("CREATE TABLE cdc_seq (txn BIGINT, i INT, PRIMARY KEY (txn, i))").await.unwrap();
    let mut s = stream(&db).await;
    let wdb = db.clone();
    // The writer stays at most AHEAD transactions ahead of the reader: events a killed
    // connection had already sent are still read before its end is seen, so a writer far
    // ahead (an idle machine) would let the next kill land on the same, already dead,
    // connection.
    const AHEAD: i64 = 100;
    let delivered = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let read = delivered.clone();
    let writer = tokio::spawn(async move {
        let mut w = mysql_async::Conn::new(opts_for(Some(&wdb))).await.unwrap();
        for t in 0..TXNS {
            while t - read.load(std::sync::atomic::Ordering::Relaxed) > AHEAD {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            let mut tx = w.start_transaction(Default::default()).await.unwrap();
            for i in 0..ROWS_PER_TXN {
                tx.exec_drop("INSERT INTO cdc_seq VALUES (?, ?)", (t, i)).await.unwrap();
            }
            tx.commit().await.unwrap();
        }
    });
    let mut killer = mysql_async::Conn::new(opts_for(None)).await.unwrap();
    let mut next_txn = 0;
    let mut kills = 0;
    let mut ids = Vec::new();
    within(90, "all transactions through kills", async {
        while next_txn < TXNS {
            let StreamEvent::Batch(b) = s.next().await.expect("stream recovers by itself") else { continue };
            if b.changes.is_empty() {
                continue;
            }
            assert_eq!(b.changes.len() as i64, ROWS_PER_TXN, "whole transaction in one batch");
            for (i, ch) in b.changes.iter().enumerate() {
                assert_eq!((int(&ch.row[0]), int(&ch.row[1])), (next_txn, i as i64), "next transaction, in order, once");
            }
            next_txn += 1;
            delivered.store(next_txn, std::sync::atomic::Ordering::Relaxed);
            if next_txn % 400 == 0 {
                let id = s.connection_id();
                ids.push(id);
                killer.query_drop(format!("KILL CONNECTION {id}")).await.unwrap();
                kills += 1;
            }
        }
    })
    .await;
    writer.await.unwrap();
    assert!(kills >= 7);
    assert!(s.lag().get().reconnects >= kills, "each kill forced a reconnect");
    ids.dedup();
    assert_eq!(ids.len(), kills as usize, "every kill hit a new binlog connection");
    eprintln!("{TXNS} transactions delivered exactly once across {kills} killed binlog connections");
    drop_db(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_at_a_delivered_position_continues_right_after_it() {
    let (db, mut c) = fresh_db("restart").await;
    c.query_drop("CREATE TABLE cdc_r (id INT PRIMARY KEY)").await.unwrap();
    let mut s = stream(&db).await;
    for i in 0..10 {
        c.exec_drop("INSERT INTO cdc_r VALUES (?)", (i,)).await.unwrap();
    }
    let (first, _) = within(20, "first five", batches(&mut s, 5)).await;
    let resume = s.delivered().clone();
    // The GTID of the last delivered transaction is known and not ahead of the server.
    let g = s.last_gtid().expect("MariaDB GTID of the last delivered transaction");
    let pos: String = c.query_first("SELECT @@gtid_binlog_pos").await.unwrap().unwrap();
    let server = pos.split(',').filter_map(freshet_cdc::MariaGtid::parse).find(|x| x.domain == g.domain).unwrap();
    assert!(g.seq <= server.seq && g.seq > 0);
    assert_eq!(resume.position().unwrap(), first[4].position);
    drop(s);
    let mut s2 = BinlogStream::connect(opts_for(None), StreamConfig::new(&db, server_id()), StartAt::At(resume)).await.unwrap();
    let (rest, _) = within(20, "the other five", batches(&mut s2, 5)).await;
    let ids: Vec<i64> = rest.iter().map(|b| int(&b.changes[0].row[0])).collect();
    assert_eq!(ids, vec![5, 6, 7, 8, 9]);
    assert!(rest[0].position > first[4].position);
    drop_db(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_that_is_gone_is_reported_as_such() {
    let mut c = mysql_async::Conn::new(opts_for(None)).await.unwrap();
    let row: mysql_async::Row = c.query_first("SHOW MASTER STATUS").await.unwrap().expect("binlog on");
    let file: String = row.get(0).unwrap();
    // File number 0 never exists (the server numbers from 1): the same answer as purged logs.
    let gone = BinlogPos::from_position(freshet_dataflow::Position(4), &file).unwrap();
    let mut cfg = StreamConfig::new("freshet_test", server_id());
    cfg.max_retries = 2;
    let r = within(30, "position gone", async {
        match BinlogStream::connect(opts_for(None), cfg, StartAt::At(gone.clone())).await {
            Err(e) => Err(e),
            Ok(mut s) => s.next().await.map(|_| ()),
        }
    })
    .await;
    match r {
        Err(CdcError::PositionGone { position, reason }) => {
            assert_eq!(position, gone);
            assert!(!reason.is_empty());
        }
        other => panic!("expected PositionGone, got {other:?}"),
    }
}
