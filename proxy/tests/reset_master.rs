//! RESET MASTER while freshet follows the server's first binlog file: the server starts that
//! file again, under the same name, and its dump thread goes on reading the old one (unlinked),
//! with no error and no ROTATE. Positions of the new file are below those already applied, so
//! the server's end as polled goes back: a new history, which the stream must start again in.
//!
//! A file of its own: it resets the server's binary logs, which would make the concurrent
//! tests of another file lose their streams (the second test has a private server).

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use freshet_testkit::mariadb::PrivateServer;
use mysql_async::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_master_in_the_first_file_starts_a_new_history() {
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS rm_items").await.unwrap();
    admin.query_drop("CREATE TABLE rm_items (id INT PRIMARY KEY, v INT NOT NULL)").await.unwrap();
    admin.query_drop("INSERT INTO rm_items VALUES (1, 10), (2, 0)").await.unwrap();
    // The stream reads the first file, as after any RESET MASTER.
    admin.query_drop("RESET MASTER").await.unwrap();
    let proxy =
        start_proxy("[admin]\nusers = [\"freshet\"]\n[[cache]]\nname = \"rm\"\nquery = \"SELECT id, v FROM rm_items WHERE id = ?\"\n")
            .await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let hits = || engine.by_name("rm").expect("cache exists").stats().hits;
    let mut client = through(&proxy).await;
    let read = "SELECT id, v FROM rm_items WHERE id = 1";
    let before = hits();
    for _ in 0..250 {
        let got: Vec<(i32, i32)> = client.query(read).await.unwrap();
        assert_eq!(got, vec![(1, 10)]);
        if hits() > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(hits() > before, "answered from the cache before the reset");
    // The first file grows well past where the new one will be after one write.
    for _ in 0..100 {
        admin.query_drop("UPDATE rm_items SET v = v + 1 WHERE id = 2").await.unwrap();
    }
    caught_up(&mut through(&proxy).await).await;
    // The dump thread waits at the end of the file, sending heartbeats.
    tokio::time::sleep(Duration::from_secs(2)).await;

    admin.query_drop("RESET MASTER").await.unwrap();
    admin.query_drop("UPDATE rm_items SET v = 11 WHERE id = 1").await.unwrap();
    // Answered as the server answers once freshet says it has caught up.
    let mut status = through(&proxy).await;
    let start = Instant::now();
    loop {
        let rows: Vec<(String, String)> = status.query("SHOW FRESHET STATUS").await.unwrap();
        let caught_up = rows.iter().any(|(k, v)| k == "caught_up" && v == "yes");
        let got: Vec<(i32, i32)> = client.query(read).await.unwrap();
        if caught_up && got == vec![(1, 11)] {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "15 s after RESET MASTER and a write, freshet answers {got:?} (caught up: {caught_up}) where the server answers [(1, 11)]"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    admin.query_drop("DROP TABLE rm_items").await.unwrap();
}

/// The same, where the new file ends where the old one did: RESET MASTER, then the same write
/// as after the previous RESET MASTER, makes a file of the same name and length, its GTIDs the
/// same too. Only when the file was begun tells them apart. An audit saw freshet answer the
/// row before the second write and say it was caught up, until the next write (on a quiet
/// server, for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_master_to_the_same_length_starts_a_new_history() {
    let server = PrivateServer::start(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("reset-same-length-mariadb"), "");
    let mut admin = mysql_async::Conn::from_url(&server.url).await.unwrap();
    admin.query_drop("DROP TABLE IF EXISTS rm_same").await.unwrap();
    admin.query_drop("CREATE TABLE rm_same (id INT PRIMARY KEY, v INT NOT NULL)").await.unwrap();
    admin.query_drop("INSERT INTO rm_same VALUES (1, 10)").await.unwrap();
    admin.query_drop("RESET MASTER").await.unwrap();
    admin.query_drop("UPDATE rm_same SET v = 20 WHERE id = 1").await.unwrap();
    let proxy = start_proxy_with_url(
        &server.url,
        "[admin]\nusers = [\"freshet\"]\n[[cache]]\nname = \"rm\"\nquery = \"SELECT id, v FROM rm_same WHERE id = ?\"\n",
    )
    .await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let hits = || engine.by_name("rm").expect("cache exists").stats().hits;
    let through_opts = mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&server.url).unwrap())
        .ip_or_hostname("127.0.0.1")
        .tcp_port(proxy.mysql.port())
        .prefer_socket(false);
    let mut client = mysql_async::Conn::new(through_opts.clone()).await.unwrap();
    let read = "SELECT id, v FROM rm_same WHERE id = 1";
    let before = hits();
    for _ in 0..250 {
        let got: Vec<(i32, i32)> = client.query(read).await.unwrap();
        assert_eq!(got, vec![(1, 20)]);
        if hits() > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(hits() > before, "answered from the cache before the reset");
    let end: mysql_async::Row = admin.query_first("SHOW MASTER STATUS").await.unwrap().unwrap();
    // A file begun in another second, of the same length.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    admin.query_drop("RESET MASTER").await.unwrap();
    admin.query_drop("UPDATE rm_same SET v = 30 WHERE id = 1").await.unwrap();
    let again: mysql_async::Row = admin.query_first("SHOW MASTER STATUS").await.unwrap().unwrap();
    assert_eq!((end.get::<String, _>(0), end.get::<u64, _>(1)), (again.get::<String, _>(0), again.get::<u64, _>(1)), "the same end");
    let mut status = mysql_async::Conn::new(through_opts).await.unwrap();
    let start = Instant::now();
    loop {
        let rows: Vec<(String, String)> = status.query("SHOW FRESHET STATUS").await.unwrap();
        let caught_up = rows.iter().any(|(k, v)| k == "caught_up" && v == "yes");
        let got: Vec<(i32, i32)> = client.query(read).await.unwrap();
        if caught_up && got == vec![(1, 30)] {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "20 s after RESET MASTER and a write, freshet answers {got:?} (caught up: {caught_up}) where the server answers [(1, 30)]"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A session's write after its GTID domain was numbered again: RESET MASTER starts every
/// domain at 1 again, `FLUSH BINARY LOGS DELETE_DOMAIN_ID` one. The write's sequence number is
/// then at or below what the stream delivered of the old numbering, which read-your-writes
/// took for applied: an audit saw the session's next read answered from the cache without
/// its write (19 of 20 after RESET MASTER; 3-15 of 100 after DELETE_DOMAIN_ID under a
/// background load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_after_its_domains_numbering_went_back_is_read_back() {
    let server = PrivateServer::start(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ryw-numbering-mariadb"), "");
    let mut admin = mysql_async::Conn::from_url(&server.url).await.unwrap();
    admin.query_drop("CREATE OR REPLACE TABLE rw_items (id INT PRIMARY KEY, v INT NOT NULL)").await.unwrap();
    let values: Vec<String> = (1..=400).map(|i| format!("({i}, 0)")).collect();
    admin.query_drop(format!("INSERT INTO rw_items VALUES {}", values.join(", "))).await.unwrap();
    let proxy = start_proxy_with_url(
        &server.url,
        "[admin]\nusers = [\"freshet\"]\n[[cache]]\nname = \"rw\"\nquery = \"SELECT id, v FROM rw_items WHERE id = ?\"\n",
    )
    .await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let hits = || engine.by_name("rw").expect("cache exists").stats().hits;
    let through_opts = mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&server.url).unwrap())
        .ip_or_hostname("127.0.0.1")
        .tcp_port(proxy.mysql.port())
        .prefer_socket(false);
    let mut session = mysql_async::Conn::new(through_opts.clone()).await.unwrap();
    let mut status = mysql_async::Conn::new(through_opts).await.unwrap();
    let read = |id: i32| format!("SELECT id, v FROM rw_items WHERE id = {id}");
    let mut wrong = Vec::new();

    // RESET MASTER, then the session's write and read, three times.
    for round in 0..3 {
        for _ in 0..50 {
            session.query_drop("UPDATE rw_items SET v = v + 1 WHERE id = 2").await.unwrap();
        }
        caught_up_with(&mut status, &mut admin).await;
        let before = hits();
        for _ in 0..250 {
            let _: Vec<(i32, i32)> = session.query(read(1)).await.unwrap();
            if hits() > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let relayed: Vec<String> =
            freshet_proxy::cache::RelayReason::ALL.iter().map(|r| format!("{r:?}={}", engine.counters.relayed[r.index()].get())).collect();
        if hits() == before {
            // A session whose writes came before the stream's new start waited for them for good.
            wrong.push(format!("round {round}: never answered from the cache before the reset; relayed {relayed:?}"));
        }
        session.query_drop("RESET MASTER").await.unwrap();
        session.query_drop("UPDATE rw_items SET v = v + 1 WHERE id = 1").await.unwrap();
        let got: Vec<(i32, i32)> = session.query(read(1)).await.unwrap();
        let want: Vec<(i32, i32)> = admin.query(read(1)).await.unwrap();
        if got != want {
            wrong.push(format!("after RESET MASTER (round {round}): {got:?} where the server has {want:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Domain 77 numbered again, while others write.
    for _ in 0..300 {
        session.query_drop("SET STATEMENT gtid_domain_id = 77 FOR UPDATE rw_items SET v = v + 1 WHERE id = 3").await.unwrap();
    }
    caught_up_with(&mut status, &mut admin).await;
    admin.query_drop("FLUSH BINARY LOGS").await.unwrap();
    let end: mysql_async::Row = admin.query_first("SHOW MASTER STATUS").await.unwrap().unwrap();
    // The files that hold the domain's groups, once freshet's dump thread has left them.
    let mut deleted = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        admin.query_drop(format!("PURGE BINARY LOGS TO '{}'", end.get::<String, _>(0).unwrap())).await.unwrap();
        if admin.query_drop("FLUSH BINARY LOGS DELETE_DOMAIN_ID = (77)").await.is_ok() {
            deleted = true;
            break;
        }
    }
    assert!(deleted, "the domain was deleted");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (stop, url) = (stop.clone(), server.url.clone());
        tokio::spawn(async move {
            let mut writer = mysql_async::Conn::from_url(&url).await.unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                writer.query_drop("UPDATE rw_items SET v = v + 1 WHERE id BETWEEN 100 AND 400").await.unwrap();
            }
        })
    };
    for n in 0..100 {
        let _: Vec<(i32, i32)> = session.query(read(3)).await.unwrap();
        session.query_drop("SET STATEMENT gtid_domain_id = 77 FOR UPDATE rw_items SET v = v + 1 WHERE id = 3").await.unwrap();
        let got: Vec<(i32, i32)> = session.query(read(3)).await.unwrap();
        let want: Vec<(i32, i32)> = admin.query(read(3)).await.unwrap();
        if got != want {
            wrong.push(format!("after DELETE_DOMAIN_ID (write {n}): {got:?} where the server has {want:?}"));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    load.await.unwrap();
    assert!(wrong.is_empty(), "{} reads missed the session's own write or were never served:\n{}", wrong.len(), wrong.join("\n"));
}
