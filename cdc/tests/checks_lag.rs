//! Start-up checks pass against the project's MariaDB (ROW, FULL, all privileges) and lag
//! settles near zero once the applier has caught up.

mod common;

use std::time::{Duration, Instant};

use common::*;
use freshet_cdc::{StreamEvent, check_upstream};
use mysql_async::prelude::Queryable;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_checks_pass_on_a_well_configured_server() {
    let (db, mut c) = fresh_db("checks").await;
    c.query_drop("CREATE TABLE cdc_t (id INT PRIMARY KEY)").await.unwrap();
    check_upstream(&mut c, &db, &["cdc_t"]).await.expect("checks pass");
    c.query_drop("CREATE TABLE cdc_m (id INT PRIMARY KEY) ENGINE = Aria").await.unwrap();
    match check_upstream(&mut c, &db, &["cdc_t", "cdc_m", "cdc_missing"]).await {
        Err(freshet_cdc::CdcError::Checks(p)) => {
            assert_eq!(p.len(), 2, "{p:?}");
            assert!(p[0].contains("Aria") && p[1].contains("does not exist"));
        }
        other => panic!("expected check failures, got {other:?}"),
    }
    drop_db(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_settles_once_caught_up() {
    let (db, mut c) = fresh_db("lag").await;
    c.query_drop("CREATE TABLE cdc_t (id INT PRIMARY KEY)").await.unwrap();
    let s = stream(&db).await;
    let (mut rx, lag) = s.spawn(1024);
    for i in 0..50 {
        c.exec_drop("INSERT INTO cdc_t VALUES (?)", (i,)).await.unwrap();
    }
    let mut got = 0;
    within(20, "50 batches", async {
        while got < 50 {
            if let StreamEvent::Batch(b) = rx.recv().await.unwrap().unwrap() {
                got += !b.changes.is_empty() as usize;
            }
        }
    })
    .await;
    let start = Instant::now();
    loop {
        let l = lag.get();
        if l.behind <= Duration::from_secs(2) && l.transactions >= 50 && l.server.is_some() && l.delivered.is_some() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "lag did not settle: {l:?}");
        // Keep draining (other tests' transactions arrive as empty batches).
        while let Ok(ev) = rx.try_recv() {
            ev.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop_db(&db).await;
}

/// Heartbeats arrive when the server has nothing else to send; once one says the stream is at
/// the server's end, the lag is zero (seconds and bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_arrive_and_zero_the_lag() {
    use freshet_cdc::{BinlogStream, StartAt, StreamConfig};
    let (db, _c) = fresh_db("heartbeat").await;
    let mut cfg = StreamConfig::new(&db, server_id());
    cfg.heartbeat = Duration::from_millis(200);
    let s = BinlogStream::connect(opts_for(None), cfg, StartAt::Current).await.unwrap();
    let (mut rx, lag) = s.spawn(1024);
    at_the_end(&mut rx, &lag, "after connecting").await;
    drop_db(&db).await;
}
