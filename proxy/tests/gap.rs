//! A gap in the binlog (the position freshet stopped at was purged while it could not
//! connect) during which a cached table's schema changed: the new run of the stream starts with
//! the table as it is now, and its caches must be served again from views of the new shape.
//!
//! A file of its own: it purges the server's binary logs, which would make the concurrent
//! tests of another file lose their streams.

mod common;

use std::time::Duration;

use common::*;
use mysql_async::prelude::*;

const USER_NAME: &str = "freshet_gap";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_changed_during_a_gap_is_cached_again_with_its_new_shape() {
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS gap_items").await.unwrap();
    admin.query_drop("CREATE TABLE gap_items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL)").await.unwrap();
    admin.query_drop("INSERT INTO gap_items VALUES (1, 'one'), (2, 'two')").await.unwrap();
    admin.query_drop("DROP TABLE IF EXISTS gap_gone").await.unwrap();
    admin.query_drop("CREATE TABLE gap_gone (id INT PRIMARY KEY)").await.unwrap();
    // freshet's own login, so that it alone can be locked out while the gap is made.
    let url = own_login(USER_NAME, "gap", &[format!("ALL ON {DB}.*")]).await;
    let proxy = start_proxy_with_url(
        &url,
        "[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\n[[cache]]\nname = \"gap\"\nquery = \"SELECT id, name FROM gap_items WHERE id = ?\"\n\
         [[cache]]\nname = \"gone\"\nquery = \"SELECT id FROM gap_gone WHERE id = ?\"\n",
    )
    .await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let hits = || engine.by_name("gap").expect("cache exists").stats().hits;
    let mut client = through(&proxy).await;
    let sql = "SELECT * FROM gap_items WHERE id = 2";
    let read = "SELECT id, name FROM gap_items WHERE id = 2";
    let _: Vec<(i32, String)> = client.query(read).await.unwrap();
    assert!(served(&proxy, &hits, read).await, "answered from the cache before the gap");

    // Locked out, its binlog connection killed: the stream cannot resume. Meanwhile the table
    // changes and the position it would resume from is purged.
    admin.query_drop(format!("ALTER USER '{USER_NAME}'@'%' ACCOUNT LOCK")).await.unwrap();
    let dumps: Vec<u64> = admin
        .exec("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? AND COMMAND LIKE 'Binlog Dump%'", (USER_NAME,))
        .await
        .unwrap();
    assert!(!dumps.is_empty(), "freshet follows the binlog as {USER_NAME}");
    for id in dumps {
        admin.query_drop(format!("KILL {id}")).await.unwrap();
        // A dump thread still reading a file keeps it from being purged.
        assert!(connection_gone(id as u32).await, "the binlog connection ends");
    }
    admin.query_drop("ALTER TABLE gap_items ADD COLUMN extra INT NOT NULL DEFAULT 7").await.unwrap();
    admin.query_drop("UPDATE gap_items SET name = 'changed' WHERE id = 2").await.unwrap();
    admin.query_drop("DROP TABLE gap_gone").await.unwrap();
    admin.query_drop("FLUSH BINARY LOGS").await.unwrap();
    let (current, _): (String, u64) = {
        let row: mysql_async::Row = admin.query_first("SHOW MASTER STATUS").await.unwrap().unwrap();
        (row.get(0).unwrap(), row.get(1).unwrap())
    };
    // MariaDB keeps a file until its binlog checkpoint has moved on, which it does shortly
    // after the flush.
    let mut first = String::new();
    for _ in 0..250 {
        admin.query_drop(format!("PURGE BINARY LOGS TO '{current}'")).await.unwrap();
        let row: mysql_async::Row = admin.query_first("SHOW BINARY LOGS").await.unwrap().unwrap();
        first = row.get(0).unwrap();
        if first == current {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(first, current, "the resume position is purged");
    admin.query_drop(format!("ALTER USER '{USER_NAME}'@'%' ACCOUNT UNLOCK")).await.unwrap();

    // The stream comes back at the server's position, after a gap: the cache is served again,
    // with the rows as they are now.
    let mut status = through(&proxy).await;
    caught_up(&mut status).await;
    assert!(served(&proxy, &hits, read).await, "the cache is answered from a view of the new schema after the gap");
    let got: Vec<(i32, String)> = client.query(read).await.unwrap();
    assert_eq!(got, vec![(2, "changed".to_string())]);
    let all: Vec<(i32, String, i32)> = client.query(sql).await.unwrap();
    assert_eq!(all, vec![(2, "changed".to_string(), 7)]);
    // A table dropped during the gap: its cache says so (and relays) instead of keeping a view
    // of a table that is gone.
    let gone = engine.by_name("gone").expect("cache exists").live();
    assert!(gone.as_ref().is_err_and(|e| e.contains("gap_gone")), "{:?}", gone.map(|l| l.view));
}

/// Reads `read` through freshet until a read is answered from the cache (`hits` grows); false
/// after 5 seconds.
async fn served(proxy: &Proxy, hits: &impl Fn() -> u64, read: &str) -> bool {
    let mut client = through(proxy).await;
    let before = hits();
    for _ in 0..250 {
        let _: Vec<(i32, String)> = client.query(read).await.unwrap();
        if hits() > before {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
