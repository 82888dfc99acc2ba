//! What copying every column costs against copying only the columns cached queries read, in
//! one run against the MariaDB of `FRESHET_TEST_MYSQL_URL` (docs/decisions.md, "Whole rows, all
//! columns"). The same table is copied twice into two fresh stores: once whole, once with its
//! schema projected to the columns a typical cache reads (what a column-pruned copy would
//! SELECT and store). Prints time, rows/s, stored bytes and disk per row of each, and the ratios.
//! Asserts nothing.
//!
//! `cargo run -p freshet-replica --example columns [rows]` (default 200000).

use std::collections::HashMap;
use std::time::Instant;

use freshet_cdc::MariaDb;
use freshet_cdc::schema::{TableInfo, load_tables};
use freshet_replica::{CopyStats, ReplicaStore, SnapshotConfig, copy_tables};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

const DB: &str = "replica_columns";

fn dir_bytes(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|d| d.filter_map(Result::ok).filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

/// Copies `tables` into a new store; returns (seconds, stored row bytes, disk bytes).
async fn copy(opts: &Opts, tables: &HashMap<String, TableInfo>, label: &str) -> (f64, u64, u64) {
    let path = std::env::temp_dir().join(format!("freshet-replica-columns-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    let store = ReplicaStore::open(&path).unwrap();
    store.register(&tables["items"].schema).unwrap();
    let stats = CopyStats::default();
    let t = Instant::now();
    copy_tables(opts.clone(), DB, &store, tables, &SnapshotConfig::default(), &stats).await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    drop(store);
    let disk = dir_bytes(&path);
    let _ = std::fs::remove_dir_all(&path);
    (secs, stats.snapshot().bytes_copied, disk)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rows: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let url = std::env::var("FRESHET_TEST_MYSQL_URL").expect("FRESHET_TEST_MYSQL_URL");
    let opts: Opts = OptsBuilder::from_opts(Opts::from_url(&url).unwrap()).prefer_socket(false).db_name(None::<String>).into();
    let mut c = Conn::new(opts.clone()).await.unwrap();
    c.query_drop(format!("DROP DATABASE IF EXISTS {DB}")).await.unwrap();
    c.query_drop(format!("CREATE DATABASE {DB}")).await.unwrap();
    c.query_drop(format!("USE {DB}")).await.unwrap();
    // Read by the cache: id, k, name, price. Not read: a description and two timestamps, the
    // kind of columns an application's table carries beside the ones it lists by.
    c.query_drop(
        "CREATE TABLE items (id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(40) NOT NULL, price DECIMAL(10,2), \
         description VARCHAR(400) NOT NULL, created DATETIME NOT NULL, updated DATETIME NOT NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await
    .unwrap();
    c.query_drop(format!(
        "INSERT INTO items SELECT seq, seq % 10000, CONCAT('item number ', seq), seq / 100, \
         REPEAT(CONCAT('words of item ', seq, ' '), 8), '2026-01-01' + INTERVAL seq SECOND, '2026-06-01' + INTERVAL seq SECOND \
         FROM seq_1_to_{rows}"
    ))
    .await
    .unwrap();
    let all = load_tables(&mut c, &MariaDb, DB, None).await.unwrap();
    let mut read = all.clone();
    let items = read.get_mut("items").unwrap();
    let keep: Vec<usize> = ["id", "k", "name", "price"].iter().map(|n| items.schema.column_index(n).unwrap()).collect();
    items.schema.columns = keep.iter().map(|&i| items.schema.columns[i].clone()).collect();
    items.decode = keep.iter().map(|&i| items.decode[i].clone()).collect();
    items.schema.primary_key = vec![0];

    let (secs_all, bytes_all, disk_all) = copy(&opts, &all, "all").await;
    let (secs_read, bytes_read, disk_read) = copy(&opts, &read, "read").await;
    let n = rows as f64;
    println!(
        "all 7 columns:  {rows} rows in {secs_all:.1} s = {:.0} rows/s; {:.1} stored bytes/row; {:.1} disk bytes/row",
        n / secs_all,
        bytes_all as f64 / n,
        disk_all as f64 / n
    );
    println!(
        "4 read columns: {rows} rows in {secs_read:.1} s = {:.0} rows/s; {:.1} stored bytes/row; {:.1} disk bytes/row",
        n / secs_read,
        bytes_read as f64 / n,
        disk_read as f64 / n
    );
    println!(
        "all / read: time {:.2}, stored bytes {:.2}, disk {:.2}",
        secs_all / secs_read,
        bytes_all as f64 / bytes_read as f64,
        disk_all as f64 / disk_read as f64
    );
    c.query_drop(format!("DROP DATABASE {DB}")).await.unwrap();
}
