//! Binlog rotation (FLUSH BINARY LOGS) mid-stream: positions keep increasing across files,
//! nothing is lost, and a restart from a position in the old file continues in the new one.

mod common;

use common::*;
use freshet_cdc::{BinlogStream, StartAt, StreamConfig};
use freshet_dataflow::Value;
use mysql_async::prelude::Queryable;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_keeps_positions_increasing_and_resumable() {
    let (db, mut c) = fresh_db("rotate").await;
    c.query_drop("CREATE TABLE cdc_r (id INT PRIMARY KEY)").await.unwrap();
    let mut s = stream(&db).await;
    c.query_drop("INSERT INTO cdc_r VALUES (1)").await.unwrap();
    c.query_drop("FLUSH BINARY LOGS").await.unwrap();
    c.query_drop("INSERT INTO cdc_r VALUES (2)").await.unwrap();
    let (got, _) = within(20, "two batches across a rotation", batches(&mut s, 2)).await;
    let file_of = |p: freshet_dataflow::Position| p.0 >> 32;
    assert!(matches!(got[0].changes[0].row[0], Value::Int(1)));
    assert!(matches!(got[1].changes[0].row[0], Value::Int(2)));
    assert!(file_of(got[1].position) > file_of(got[0].position), "the second commit is in the next file");
    assert!(s.delivered().position().unwrap() == got[1].position);

    // Restart from the first commit (old file): the next batch is the second, in the new file.
    let old = freshet_cdc::BinlogPos::from_position(got[0].position, &s.delivered().file).unwrap();
    let mut s2 = BinlogStream::connect(opts_for(None), StreamConfig::new(&db, server_id()), StartAt::At(old)).await.unwrap();
    let (again, _) = within(20, "resume across the rotation", batches(&mut s2, 1)).await;
    assert_eq!(again[0].position, got[1].position);
    assert!(matches!(again[0].changes[0].row[0], Value::Int(2)));
    drop_db(&db).await;
}

/// A ROTATE event's position is where it ends in the file being left. Taken as a position in
/// the file it names, it put the server's end far ahead of the stream after every rotation
/// (FLUSH BINARY LOGS, `max_binlog_size`): the lag grew until the new file passed the old
/// offset, and the caches relayed every read meanwhile. After a rotation with nothing written,
/// the stream is at the server's end again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_leaves_no_lag_behind() {
    use std::time::{Duration, Instant};
    let (db, mut c) = fresh_db("rotate_lag").await;
    let mut cfg = StreamConfig::new(&db, server_id());
    cfg.heartbeat = Duration::from_millis(200);
    let s = BinlogStream::connect(opts_for(None), cfg, StartAt::Current).await.unwrap();
    let (mut rx, lag) = s.spawn(1024);
    let before = at_the_end(&mut rx, &lag, "before the rotation").await;
    c.query_drop("FLUSH BINARY LOGS").await.unwrap();
    let start = Instant::now();
    loop {
        let l = at_the_end(&mut rx, &lag, "after the rotation").await;
        if l.server.as_ref().is_some_and(|s| Some(&s.file) != before.server.as_ref().map(|b| &b.file)) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the stream did not reach the new file: {l:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // What the gate reads: the age of the oldest server position not applied yet.
    let wait = Duration::from_millis(2500);
    tokio::time::sleep(wait).await;
    at_the_end(&mut rx, &lag, "a while after the rotation").await;
    let applied = lag.get().delivered.expect("delivered").position().unwrap();
    let behind = lag.behind(applied);
    let (file, offset): (String, u64) =
        c.query_first("SHOW MASTER STATUS").await.unwrap().map(|r: mysql_async::Row| (r.get(0).unwrap(), r.get(1).unwrap())).unwrap();
    let server = freshet_cdc::BinlogPos::new(file, offset as u32).position().unwrap();
    assert!(behind.server.is_some_and(|s| s <= server), "the server's end as seen ({:?}) is past the server's ({server:?})", behind.server);
    assert!(behind.lag < wait, "behind by {:?} with nothing written since the rotation", behind.lag);
    drop_db(&db).await;
}

/// Rotations with nothing written between them (FLUSH BINARY LOGS in a loop, a tiny
/// `max_binlog_size`): a new file's first events (its format description, GTID list,
/// checkpoint) are no transaction, and the stream delivers an empty batch at them, not only at
/// a heartbeat, which the server does not send while events come more often than its period
/// (an audit: 12 s of flushes every 0.25 s with no writes showed a lag of 12.5 s, and every
/// cached read was relayed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotations_without_writes_reach_the_servers_end_without_a_heartbeat() {
    use std::time::{Duration, Instant};
    let (db, mut c) = fresh_db("rotate_quiet").await;
    let mut cfg = StreamConfig::new(&db, server_id());
    cfg.heartbeat = Duration::from_secs(60);
    cfg.read_timeout = Duration::from_secs(120);
    let s = BinlogStream::connect(opts_for(None), cfg, StartAt::Current).await.unwrap();
    let (mut rx, _lag) = s.spawn(1024);
    for _ in 0..5 {
        c.query_drop("FLUSH BINARY LOGS").await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (file, offset): (String, u64) =
        c.query_first("SHOW MASTER STATUS").await.unwrap().map(|r: mysql_async::Row| (r.get(0).unwrap(), r.get(1).unwrap())).unwrap();
    let server = freshet_cdc::BinlogPos::new(file, offset as u32).position().unwrap();
    // Well within the heartbeat's period.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(Ok(freshet_cdc::StreamEvent::Batch(b)))) if b.position >= server => break,
            Ok(Some(Ok(_))) => {}
            Ok(Some(Err(e))) => panic!("the stream failed: {e}"),
            Ok(None) => panic!("the stream ended"),
            Err(_) => panic!("no batch reached the server's end {server:?} without a heartbeat"),
        }
    }
    drop_db(&db).await;
}
