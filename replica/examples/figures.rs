//! Measures the replica's figures in one run against the MariaDB of `FRESHET_TEST_MYSQL_URL`:
//! snapshot rate on a 1M-row table (rows/s, MB/s of stored rows), disk bytes per row, the time
//! to build a fill index, and miss latency (p50/p99 of one-key fills) from the replica vs from
//! the upstream fill source, same keys, same process. Prints; asserts nothing.
//!
//! `cargo run --release -p freshet-replica --example figures [rows]` (default 1000000).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use freshet_cdc::schema::load_tables;
use freshet_cdc::{FillConfig, MariaDb, UpstreamFills};
use freshet_dataflow::*;
use freshet_replica::{CopyStats, ReplicaStore, SnapshotConfig, copy_tables};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

const DB: &str = "replica_figures";

fn dir_bytes(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|d| d.filter_map(Result::ok).filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p) as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rows: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let url = std::env::var("FRESHET_TEST_MYSQL_URL").expect("FRESHET_TEST_MYSQL_URL");
    let base = Opts::from_url(&url).unwrap();
    // TCP, as freshet reaches the server, not the socket mysql_async would prefer on 127.0.0.1.
    let base: Opts = OptsBuilder::from_opts(base).prefer_socket(false).into();
    let opts: Opts = OptsBuilder::from_opts(base.clone()).db_name(None::<String>).into();
    let mut c = Conn::new(opts.clone()).await.unwrap();
    c.query_drop(format!("DROP DATABASE IF EXISTS {DB}")).await.unwrap();
    c.query_drop(format!("CREATE DATABASE {DB}")).await.unwrap();
    c.query_drop(format!("USE {DB}")).await.unwrap();
    c.query_drop("CREATE TABLE items (id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(40) NOT NULL, price DECIMAL(10,2), KEY (k)) DEFAULT CHARSET=utf8mb4").await.unwrap();
    let t = Instant::now();
    c.query_drop(format!("INSERT INTO items SELECT seq, seq % 10000, CONCAT('item number ', seq), seq / 100 FROM seq_1_to_{rows}"))
        .await
        .unwrap();
    eprintln!("loaded {rows} rows into MariaDB in {:.1?}", t.elapsed());
    let tables = load_tables(&mut c, &MariaDb, DB, None).await.unwrap();

    let path = std::env::temp_dir().join(format!("freshet-replica-figures-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    let store = ReplicaStore::open(&path).unwrap();
    store.register(&tables["items"].schema).unwrap();
    let stats = CopyStats::default();
    let t = Instant::now();
    copy_tables(opts.clone(), DB, &store, &tables, &SnapshotConfig::default(), &stats).await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    let f = stats.snapshot();
    println!(
        "snapshot: {} rows in {secs:.1} s = {:.0} rows/s, {:.1} MB/s of stored rows ({} bytes)",
        f.rows_copied,
        f.rows_copied as f64 / secs,
        f.bytes_copied as f64 / secs / 1e6,
        f.bytes_copied
    );
    let disk = dir_bytes(&path);
    println!("disk after copy (primary column family, WAL included): {disk} bytes = {:.1} bytes/row", disk as f64 / rows as f64);

    // Misses: one key of `k` (~rows/10000 rows each) per fill, from each source.
    let mut cat = Catalog::new();
    cat.add(tables["items"].schema.clone()).unwrap();
    let mut df = Dataflow::new(cat, ByteSize(1 << 30));
    df.set_max_fill_keys(1);
    df.set_applied(store.position().unwrap());
    let view = df.install_sql("SELECT id, name, price FROM items WHERE k = ?").unwrap();
    let reader = df.reader(view).unwrap();
    let infos: HashMap<_, _> = tables.clone();
    let upstream = UpstreamFills::new(OptsBuilder::from_opts(base).into(), DB, &MariaDb, infos, FillConfig::default());
    let (mut from_replica, mut from_upstream) = (Vec::new(), Vec::new());
    for (i, k) in (0..301).map(|i| (i, (i * 37) % 10_000)).collect::<Vec<_>>() {
        let _ = reader.lookup(&[Value::Int(k)]).unwrap();
        let req = df.fill_requests().pop().unwrap();
        let t = Instant::now();
        let a = store.answer(&req).unwrap();
        let r = t.elapsed();
        let t = Instant::now();
        let b = upstream.fill(&req).await.unwrap();
        let u = t.elapsed();
        if i == 0 {
            println!("first replica fill (builds the index on k over {rows} rows): {r:.1?}");
        } else {
            from_replica.push(r);
            from_upstream.push(u);
        }
        let n = |d: &FillData| match d {
            FillData::BaseRows(v) => v.iter().map(Vec::len).sum::<usize>(),
            FillData::States(v) => v.iter().map(Vec::len).sum::<usize>(),
        };
        assert_eq!(n(&a.data), n(&b.data), "both sources answer the same rows for k = {k}");
        df.abandon_fill(&req);
    }
    let disk = dir_bytes(&path);
    println!("disk with the index on k: {disk} bytes = {:.1} bytes/row", disk as f64 / rows as f64);
    let (rp50, rp99) = (pct(&mut from_replica, 0.5), pct(&mut from_replica, 0.99));
    let (up50, up99) = (pct(&mut from_upstream, 0.5), pct(&mut from_upstream, 0.99));
    println!(
        "miss fill latency, {} one-key fills of ~{} rows: replica p50 {rp50:.2?} p99 {rp99:.2?}; upstream p50 {up50:.2?} p99 {up99:.2?}; replica/upstream p50 {:.2}, p99 {:.2}",
        from_replica.len(),
        rows / 10_000,
        rp50.as_secs_f64() / up50.as_secs_f64(),
        rp99.as_secs_f64() / up99.as_secs_f64()
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&path);
    c.query_drop(format!("DROP DATABASE {DB}")).await.unwrap();
}
