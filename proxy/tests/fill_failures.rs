//! Fills that the server refuses at once (freshet's account lost its right to a cached table,
//! or is at its `MAX_USER_CONNECTIONS`): each failure woke the reads waiting for it, whose next
//! look recorded the miss again, and the writer asked the server again at once, about a
//! thousand times a second for as long as a read waited. The writer now waits before asking
//! again after a failure, and reads that miss meanwhile are relayed at once.

mod common;

use std::time::{Duration, Instant};

use common::*;
use freshet_proxy::cache::RelayReason;
use mysql_async::prelude::*;

const USER_NAME: &str = "freshet_ff";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_the_server_refuses_are_not_asked_again_at_once() {
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS ff_items").await.unwrap();
    admin.query_drop("CREATE TABLE ff_items (id INT PRIMARY KEY, v INT NOT NULL)").await.unwrap();
    admin.query_drop("INSERT INTO ff_items VALUES (1, 10), (2, 20), (3, 30)").await.unwrap();
    let url = own_login(USER_NAME, "ff", &[format!("SELECT ON {DB}.ff_items")]).await;
    let proxy = start_proxy_with_url(
        &url,
        "[fill]\ntimeout = \"2s\"\n[[cache]]\nname = \"ff\"\nquery = \"SELECT id, v FROM ff_items WHERE id = ?\"\n",
    )
    .await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let mut client = through(&proxy).await;
    let read = |id: i32| format!("SELECT id, v FROM ff_items WHERE id = {id}");
    // Served while freshet may read the table.
    let hits = || engine.by_name("ff").expect("cache").stats().hits;
    for _ in 0..100 {
        let _: Vec<(i32, i32)> = client.query(read(1)).await.unwrap();
        if hits() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(hits() > 0, "answered from the cache while fills work");
    // Now every fill is refused (1142), at once.
    admin.query_drop(format!("REVOKE SELECT ON {DB}.ff_items FROM '{USER_NAME}'@'%'")).await.unwrap();
    let failed = || engine.counters.fills_failed.get();
    let (before, start) = (failed(), Instant::now());
    while start.elapsed() < Duration::from_secs(2) {
        let got: Vec<(i32, i32)> = client.query(read(2)).await.unwrap();
        assert_eq!(got, vec![(2, 20)], "the server's answer");
    }
    let failures = failed() - before;
    // Back-off from 10 ms doubling: about ten in two seconds; asked again at once, thousands.
    assert!((1..=30).contains(&failures), "{failures} fills failed in 2 s");
    assert!(engine.counters.relayed[RelayReason::FillFailing.index()].get() > 0, "reads that missed were relayed at once");
    admin.query_drop(format!("DROP USER '{USER_NAME}'@'%'")).await.unwrap();
    admin.query_drop("DROP TABLE ff_items").await.unwrap();
}
