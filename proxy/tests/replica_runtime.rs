//! `[fill] source = "replica"` while freshet runs, against the real MariaDB: a cache created
//! with `CREATE CACHE` on a table no cache read has that table copied in the background
//! (answered from the upstream meanwhile, then from the replica), and DDL on a replicated
//! table (DROP COLUMN, ADD COLUMN) is applied to the stored rows in place instead of copying
//! the table again. Every answer read through freshet equals the server's, under writes. A
//! table one run left out is copied again by the next run that reads it.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use freshet_proxy::cache::replica::ReplicaFigures;
use mysql_async::prelude::*;

fn config(path: &std::path::Path, caches: &[(&str, &str)]) -> String {
    let mut c = format!(
        "[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\nsource = \"replica\"\n[replica]\npath = \"{}\"\ncopy_batch_rows = 40\n\
         [consistency]\nmax_lag = \"5s\"\n",
        path.display()
    );
    for (name, query) in caches {
        c.push_str(&format!("[[cache]]\nname = \"{name}\"\nquery = \"{query}\"\n"));
    }
    c
}

fn figures(proxy: &Proxy) -> ReplicaFigures {
    proxy.engine.get().expect("engine").replica.get().expect("the replica started").figures()
}

fn hits(proxy: &Proxy, cache: &str) -> u64 {
    proxy.engine.get().expect("engine").by_name(cache).expect("cache").stats().hits
}

fn store_dir(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("freshet-replica-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    path
}

/// `table` (dropped first): id, grp, name, then `extra` columns, with `rows` rows.
async fn table(c: &mut mysql_async::Conn, table: &str, extra: &str, extra_values: &str, rows: u32) {
    c.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.unwrap();
    c.query_drop(format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, grp INT NOT NULL, name VARCHAR(40) NOT NULL{extra}) DEFAULT CHARSET=utf8mb4"
    ))
    .await
    .unwrap();
    let values: Vec<String> = (1..=rows).map(|i| format!("({i}, {}, 'row ä{i}'{extra_values})", i % 10)).collect();
    c.query_drop(format!("INSERT INTO {table} VALUES {}", values.join(", "))).await.unwrap();
}

/// Waits until the copy of every replicated table is complete (as counted by this process).
async fn copied(proxy: &Proxy, through: &mut RawClient, tables: u64) {
    for _ in 0..400 {
        if let Some(f) = proxy.engine.get().and_then(|e| e.replica.get().map(|r| r.figures()))
            && f.copy.tables_total == tables
            && f.copy.tables_done == tables
        {
            return;
        }
        let _ = through.query("SELECT 1").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the copy did not finish: {:?}", proxy.engine.get().and_then(|e| e.replica.get().map(|r| r.figures())));
}

/// Reads `sql` with `grp` values no row has (each one a new miss) until a fill is answered
/// from the replica: the table is copied and caught up.
async fn replica_serves(proxy: &Proxy, through: &mut RawClient, sql: &str, from: i64) {
    for g in from..from + 400 {
        let before = figures(proxy).fills;
        let _ = through.query(&format!("{sql} WHERE grp = {g}")).await;
        if figures(proxy).fills > before {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{sql}: no fill was answered from the replica: {:?}", figures(proxy));
}

/// Reads `sql` through freshet until `cache` answers it, and compares it with the server's.
async fn same(proxy: &Proxy, through: &mut RawClient, direct: &mut RawClient, cache: &str, sql: &str) {
    for _ in 0..200 {
        let before = hits(proxy, cache);
        let got = through.query(sql).await;
        if hits(proxy, cache) > before {
            assert_eq!(got, direct.query(sql).await, "{sql}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    panic!("{sql} was never answered from {cache}");
}

/// Writes to `table` until `stop`: rows change name and group, some are deleted and inserted.
fn writer(table: &'static str, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u32> {
    tokio::spawn(async move {
        let mut c = direct().await;
        let mut i = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let id = 1 + (i * 37) % 300;
            let sql = match i % 4 {
                0 => format!("UPDATE {table} SET name = 'w{i}', grp = {} WHERE id = {id}", i % 10),
                1 => format!("DELETE FROM {table} WHERE id = {id}"),
                2 => format!("INSERT IGNORE INTO {table} (id, grp, name) VALUES ({id}, {}, 'back {i}')", i % 10),
                _ => format!("UPDATE {table} SET grp = (grp + 1) % 10 WHERE id BETWEEN {id} AND {}", id + 5),
            };
            c.query_drop(sql).await.unwrap();
            i += 1;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        i
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_created_at_runtime_has_its_table_copied_then_filled_from_the_replica() {
    let mut c = direct().await;
    table(&mut c, "rr_first", "", "", 50).await;
    table(&mut c, "rr_later", "", "", 300).await;
    let path = store_dir("runtime");
    let proxy = start_proxy(&config(&path, &[("first", "SELECT id, name FROM rr_first WHERE grp = ?")])).await;
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut direct_raw = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    copied(&proxy, &mut through, 1).await;

    // Writes go on while the cache is created, copied and read.
    let stop = Arc::new(AtomicBool::new(false));
    let writes = writer("rr_later", stop.clone());
    let mut admin = through_conn(&proxy).await;
    admin.query_drop("CREATE CACHE later FROM SELECT id, name FROM rr_later WHERE grp = ?").await.unwrap();
    // Read while the copy runs: these fills go to the upstream.
    for g in 0..5 {
        let _ = through.query(&format!("SELECT id, name FROM rr_later WHERE grp = {g}")).await;
    }
    replica_serves(&proxy, &mut through, "SELECT id, name FROM rr_later", 1000).await;
    let f = figures(&proxy);
    assert_eq!((f.copy.tables_done, f.copy.tables_total), (2, 2), "{f:?}");
    assert!(f.copy.rows_copied >= 50 + 250, "the new table was copied: {f:?}");
    stop.store(true, Ordering::Relaxed);
    assert!(writes.await.unwrap() > 0);
    caught_up(&mut admin).await;
    // Groups filled from the upstream during the copy, and from the replica after it.
    for g in 0..10 {
        same(&proxy, &mut through, &mut direct_raw, "later", &format!("SELECT id, name FROM rr_later WHERE grp = {g}")).await;
    }
    assert!(figures(&proxy).following);
    drop(proxy);
    let _ = std::fs::remove_dir_all(&path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_and_add_column_rewrite_the_replicas_rows_in_place() {
    let mut c = direct().await;
    table(&mut c, "rr_ddl", ", junk VARCHAR(20), price DECIMAL(8,2)", ", 'junk', 1.25", 300).await;
    let path = store_dir("ddl");
    let proxy = start_proxy(&config(&path, &[("names", "SELECT id, name FROM rr_ddl WHERE grp = ?")])).await;
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut direct_raw = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let mut admin = through_conn(&proxy).await;
    copied(&proxy, &mut through, 1).await;
    same(&proxy, &mut through, &mut direct_raw, "names", "SELECT id, name FROM rr_ddl WHERE grp = 1").await;
    let copied_before = figures(&proxy).copy.rows_copied;
    assert_eq!(copied_before, 300);

    // DROP COLUMN, with writes before and after it.
    let stop = Arc::new(AtomicBool::new(false));
    let writes = writer("rr_ddl", stop.clone());
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.query_drop("ALTER TABLE rr_ddl DROP COLUMN junk").await.unwrap();
    // The writer has handled the DDL before the replica is asked again.
    caught_up(&mut admin).await;
    replica_serves(&proxy, &mut through, "SELECT id, name FROM rr_ddl", 1000).await;
    assert_eq!(figures(&proxy).copy.rows_copied, copied_before, "DROP COLUMN copied the table again: {:?}", figures(&proxy));
    let rewritten = figures(&proxy).copy.rows_rewritten;
    assert!(rewritten > 0, "{:?}", figures(&proxy));

    // ADD COLUMN (before existing ones, so every position moves), then a cache that reads it.
    c.query_drop("ALTER TABLE rr_ddl ADD COLUMN note VARCHAR(20) NOT NULL DEFAULT 'fresh' AFTER id").await.unwrap();
    c.query_drop("UPDATE rr_ddl SET note = CONCAT('n', id) WHERE id % 3 = 0").await.unwrap();
    caught_up(&mut admin).await;
    admin.query_drop("CREATE CACHE notes FROM SELECT id, note, name, price FROM rr_ddl WHERE grp = ?").await.unwrap();
    replica_serves(&proxy, &mut through, "SELECT id, note, name, price FROM rr_ddl", 2000).await;
    assert_eq!(figures(&proxy).copy.rows_copied, copied_before, "ADD COLUMN copied the table again: {:?}", figures(&proxy));
    assert!(figures(&proxy).copy.rows_rewritten > rewritten, "{:?}", figures(&proxy));
    stop.store(true, Ordering::Relaxed);
    assert!(writes.await.unwrap() > 0);
    caught_up(&mut admin).await;
    for g in 0..10 {
        same(&proxy, &mut through, &mut direct_raw, "names", &format!("SELECT id, name FROM rr_ddl WHERE grp = {g}")).await;
        same(&proxy, &mut through, &mut direct_raw, "notes", &format!("SELECT id, note, name, price FROM rr_ddl WHERE grp = {g}")).await;
    }
    let f = figures(&proxy);
    eprintln!("after DDL: {f:?}");
    assert!(f.following);
    drop(proxy);
    let _ = std::fs::remove_dir_all(&path);
}

/// A write with binlogging off sent through freshet (a session with the privilege to turn it
/// off) is in no binlog, so the replica of the base tables never sees it: the views were
/// evicted and refilled from the replica's old rows, and answered them for good. The replica
/// is copied anew now, as after a gap in the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_with_binlogging_off_through_freshet_is_not_refilled_from_the_replica() {
    let mut c = direct().await;
    table(&mut c, "rr_unlogged", "", "", 60).await;
    let path = store_dir("unlogged");
    let proxy = start_proxy(&config(&path, &[("names", "SELECT id, name FROM rr_unlogged WHERE grp = ?")])).await;
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut direct_raw = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let mut admin = through_conn(&proxy).await;
    copied(&proxy, &mut through, 1).await;
    replica_serves(&proxy, &mut through, "SELECT id, name FROM rr_unlogged", 1000).await;
    same(&proxy, &mut through, &mut direct_raw, "names", "SELECT id, name FROM rr_unlogged WHERE grp = 3").await;
    admin.query_drop("SET SESSION sql_log_bin = 0").await.unwrap();
    admin.query_drop("UPDATE rr_unlogged SET name = 'unlogged' WHERE grp = 3").await.unwrap();
    admin.query_drop("SET SESSION sql_log_bin = 1").await.unwrap();
    same(&proxy, &mut through, &mut direct_raw, "names", "SELECT id, name FROM rr_unlogged WHERE grp = 3").await;
    // An ALTER with binlogging off by another client, then a logged write: the stream finds
    // the schema changed and starts again, and the replica copies the table under the new one.
    c.query_drop("SET SESSION sql_log_bin = 0").await.unwrap();
    c.query_drop("ALTER TABLE rr_unlogged ADD COLUMN z INT NOT NULL DEFAULT 5 FIRST").await.unwrap();
    c.query_drop("SET SESSION sql_log_bin = 1").await.unwrap();
    c.query_drop("UPDATE rr_unlogged SET name = 'after' WHERE grp = 4").await.unwrap();
    caught_up(&mut admin).await;
    replica_serves(&proxy, &mut through, "SELECT id, name FROM rr_unlogged", 2000).await;
    for g in [3, 4, 5] {
        same(&proxy, &mut through, &mut direct_raw, "names", &format!("SELECT id, name FROM rr_unlogged WHERE grp = {g}")).await;
    }
    drop(proxy);
    let _ = std::fs::remove_dir_all(&path);
}

/// A table whose primary key is dropped cannot be replicated (the store keys rows by it): its
/// fills go to the server. The replica kept the table registered under its old key, applied
/// its row events keyed by it (two rows of one old key merged into one) and answered fills
/// from it (an audit: a row lost for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_whose_primary_key_is_dropped_is_filled_from_the_server() {
    let mut c = direct().await;
    table(&mut c, "rr_nopk", "", "", 40).await;
    let path = store_dir("nopk");
    let proxy = start_proxy(&config(
        &path,
        &[
            ("names", "SELECT id, name FROM rr_nopk WHERE grp = ?"),
            ("ordered", "SELECT id, name FROM rr_nopk WHERE grp = ? ORDER BY id, name"),
        ],
    ))
    .await;
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut direct_raw = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let mut admin = through_conn(&proxy).await;
    copied(&proxy, &mut through, 1).await;
    replica_serves(&proxy, &mut through, "SELECT id, name FROM rr_nopk", 1000).await;
    c.query_drop("ALTER TABLE rr_nopk DROP PRIMARY KEY").await.unwrap();
    c.query_drop("INSERT INTO rr_nopk VALUES (4, 4, 'again')").await.unwrap();
    caught_up(&mut admin).await;
    for g in [4, 4, 5] {
        let sql = format!("SELECT id, name FROM rr_nopk WHERE grp = {g} ORDER BY id, name");
        same(&proxy, &mut through, &mut direct_raw, "ordered", &sql).await;
    }
    drop(proxy);
    let _ = std::fs::remove_dir_all(&path);
}

/// RENAME COLUMN keeps each value in its place under a new name: `a` and `b` swapped hold the
/// other's values by name. The replica's rows must not be matched to the new columns by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_that_swaps_two_columns_swaps_their_values() {
    let mut c = direct().await;
    table(&mut c, "rr_swap", ", a INT NOT NULL, b INT NOT NULL", ", 7, 700", 60).await;
    let path = store_dir("swap");
    let proxy = start_proxy(&config(&path, &[("swap", "SELECT id, a, b FROM rr_swap WHERE grp = ?")])).await;
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut direct_raw = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    copied(&proxy, &mut through, 1).await;
    same(&proxy, &mut through, &mut direct_raw, "swap", "SELECT id, a, b FROM rr_swap WHERE grp = 1").await;
    c.query_drop("ALTER TABLE rr_swap RENAME COLUMN a TO b, RENAME COLUMN b TO a").await.unwrap();
    caught_up(&mut through_conn(&proxy).await).await;
    replica_serves(&proxy, &mut through, "SELECT id, a, b FROM rr_swap", 1000).await;
    for g in 0..10 {
        same(&proxy, &mut through, &mut direct_raw, "swap", &format!("SELECT id, a, b FROM rr_swap WHERE grp = {g}")).await;
    }
    drop(proxy);
    let _ = std::fs::remove_dir_all(&path);
}

/// A DECIMAL key is its exact value: keys that differ past a double's precision are distinct
/// rows, copied, written and deleted one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimal_keys_that_one_double_holds_are_distinct_rows() {
    let mut c = direct().await;
    c.query_drop("DROP TABLE IF EXISTS rr_dec").await.unwrap();
    c.query_drop("CREATE TABLE rr_dec (id DECIMAL(28,20) PRIMARY KEY, grp INT NOT NULL, name VARCHAR(10) NOT NULL)").await.unwrap();
    c.query_drop(
        "INSERT INTO rr_dec VALUES (0.1, 1, 'a'), (0.10000000000000000001, 1, 'b'), (0.10000000000000000002, 1, 'c'), (-0.5, 1, 'd'), (2.5, 2, 'e')",
    )
    .await
    .unwrap();
    let path = store_dir("dec");
    let proxy = start_proxy(&config(&path, &[("dec", "SELECT id, name FROM rr_dec WHERE grp = ?")])).await;
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut direct_raw = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    copied(&proxy, &mut through, 1).await;
    replica_serves(&proxy, &mut through, "SELECT id, name FROM rr_dec", 1000).await;
    same(&proxy, &mut through, &mut direct_raw, "dec", "SELECT id, name FROM rr_dec WHERE grp = 1").await;
    // Through the binlog: two keys one double holds, one of them deleted.
    c.query_drop("INSERT INTO rr_dec VALUES (0.3, 3, 'f'), (0.30000000000000000001, 3, 'g')").await.unwrap();
    c.query_drop("DELETE FROM rr_dec WHERE id = 0.30000000000000000001").await.unwrap();
    caught_up(&mut through_conn(&proxy).await).await;
    for g in 1..=3 {
        same(&proxy, &mut through, &mut direct_raw, "dec", &format!("SELECT id, name FROM rr_dec WHERE grp = {g}")).await;
    }
    drop(proxy);
    let _ = std::fs::remove_dir_all(&path);
}

async fn through_conn(proxy: &Proxy) -> mysql_async::Conn {
    through(proxy).await
}

/// One run of freshet in its own runtime (dropped at the end, which closes the RocksDB
/// directory as a process exit would): waits for the copy of `tables` tables, runs `then`.
fn life<F: std::future::Future<Output = ()>>(path: &std::path::Path, caches: &[(&str, &str)], tables: u64, then: impl FnOnce(Proxy) -> F) {
    life_at(&upstream_url(), path, caches, tables, then)
}

/// [`life`] with the upstream at `url`.
fn life_at<F: std::future::Future<Output = ()>>(
    url: &str,
    path: &std::path::Path,
    caches: &[(&str, &str)],
    tables: u64,
    then: impl FnOnce(Proxy) -> F,
) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let proxy = start_proxy_with_url(url, &config(path, caches)).await;
        let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
        copied(&proxy, &mut through, tables).await;
        then(proxy).await;
    });
    rt.shutdown_timeout(Duration::from_secs(5));
}

/// A table replicated by one run, left out of the next (whose stream moves the replica's
/// position past writes to it without applying them), and read again by a third: the third
/// must copy it again, not answer from the rows the first run left.
#[test]
fn a_table_left_out_of_a_run_is_copied_again_when_read_again() {
    let setup = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    setup.block_on(async {
        let mut c = direct().await;
        table(&mut c, "rr_kept", "", "", 50).await;
        table(&mut c, "rr_left", "", "", 100).await;
    });
    let path = store_dir("left");
    let both = [("kept", "SELECT id, name FROM rr_kept WHERE grp = ?"), ("left", "SELECT id, name FROM rr_left WHERE grp = ?")];
    life(&path, &both, 2, |_| async {});
    life(&path, &both[..1], 1, |proxy| async move {
        let mut c = direct().await;
        c.query_drop("UPDATE rr_left SET name = 'changed while not replicated', grp = 1").await.unwrap();
        c.query_drop("UPDATE rr_kept SET name = 'moves the position'").await.unwrap();
        let mut admin = through(&proxy).await;
        caught_up(&mut admin).await;
    });
    life(&path, &both, 2, |proxy| async move {
        let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
        let mut direct_raw = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
        replica_serves(&proxy, &mut through, "SELECT id, name FROM rr_left", 1000).await;
        for g in 0..3 {
            same(&proxy, &mut through, &mut direct_raw, "left", &format!("SELECT id, name FROM rr_left WHERE grp = {g}")).await;
        }
    });
    let _ = std::fs::remove_dir_all(&path);
}

/// A store holds the tables of one database: started over another database whose table has
/// the same name and columns, freshet copies that table, rather than answer from the rows the
/// first database's run left under the name.
#[test]
fn a_store_left_by_a_run_over_another_database_is_copied_again() {
    const OTHER: &str = "freshet_test_other";
    let setup = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    setup.block_on(async {
        let mut c = direct().await;
        table(&mut c, "rr_db", "", "", 30).await;
        c.query_drop(format!("CREATE DATABASE IF NOT EXISTS {OTHER}")).await.unwrap();
        c.query_drop(format!("DROP TABLE IF EXISTS {OTHER}.rr_db")).await.unwrap();
        c.query_drop(format!("CREATE TABLE {OTHER}.rr_db LIKE rr_db")).await.unwrap();
        c.query_drop(format!("INSERT INTO {OTHER}.rr_db SELECT id, grp, CONCAT('other ', id) FROM rr_db WHERE id % 2 = 0")).await.unwrap();
    });
    let path = store_dir("otherdb");
    let caches = [("db", "SELECT id, name FROM rr_db WHERE grp = ?")];
    life(&path, &caches, 1, |_| async {});
    let other_url = format!("{}/{OTHER}", upstream_url().rsplit_once('/').expect("a url with a database").0);
    life_at(&other_url, &path, &caches, 1, |proxy| async move {
        let connect = |addr: String| async move { mysql_async::Conn::new(opts(&addr).db_name(Some(OTHER))).await.unwrap() };
        let mut through = connect(proxy.mysql.to_string()).await;
        let mut direct = connect(upstream_addr()).await;
        for g in 0..5 {
            let sql = format!("SELECT id, name FROM rr_db WHERE grp = {g}");
            let want: Vec<(i32, String)> = direct.query(&sql).await.unwrap();
            for _ in 0..5 {
                let got: Vec<(i32, String)> = through.query(&sql).await.unwrap();
                assert_eq!(got, want, "{sql}");
            }
        }
        assert!(hits(&proxy, "db") > 0, "answered from the cache");
    });
    setup.block_on(async { direct().await.query_drop(format!("DROP DATABASE {OTHER}")).await.unwrap() });
    let _ = std::fs::remove_dir_all(&path);
}
