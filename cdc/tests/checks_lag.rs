//! Start-up checks pass against the project's MariaDB (ROW, FULL, all privileges) and lag
//! settles near zero once the applier has caught up.

mod common;

use std::time::{Duration, Instant};

use common::*;
use freshet_cdc::{check_upstream, StreamEvent};
use mysql_async::prelude::Queryable;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_checks_pass_on_a_well_configured_server() {
    let (db, mut c) = fresh_db("checks").await;
    c.query_drop("CREATE TABLE cdc_t (id INT PRIMARY KEY)").await.unwrap();
    check_upstream(&mut c, &db, &["cdc_t"]).await.expect("checks pass");
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
