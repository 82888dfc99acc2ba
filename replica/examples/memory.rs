//! The replica's memory on two shapes an audit found unbounded (docs/decisions.md, "The
//! replica's memory"), in one run against the MariaDB of `FRESHET_TEST_MYSQL_URL`: prints the
//! process's resident set (VmRSS) and its peak during the step (VmHWM, reset before each) after
//! each step. Asserts nothing.
//!
//! - `blobs`: 50 rows of an 8 MiB BLOB copied with `copy_batch_rows` 50, then the index a
//!   fill by `k` needs built from them.
//! - `tables`: 10 tables of 40,000 rows of about 1 KB, copied with the default batch.
//!
//! `cargo run --release -p freshet-replica --example memory -- blobs|tables`

use std::collections::HashMap;

use freshet_cdc::MariaDb;
use freshet_cdc::schema::load_tables;
use freshet_dataflow::{ByteSize, Catalog, Dataflow, Value};
use freshet_replica::{CopyState, CopyStats, ReplicaStore, SnapshotConfig, copy_tables};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

const DB: &str = "rpf_memory";

/// Starts a new peak: VmHWM is the resident set's peak since this call.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// VmRSS and VmHWM of this process, in MiB.
fn rss() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<u64>().ok())
    };
    format!("VmRSS {} MiB, VmHWM {} MiB", field("VmRSS:").unwrap_or(0) / 1024, field("VmHWM:").unwrap_or(0) / 1024)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let shape = std::env::args().nth(1).unwrap_or_else(|| "blobs".into());
    let url = std::env::var("FRESHET_TEST_MYSQL_URL").expect("FRESHET_TEST_MYSQL_URL");
    let opts: Opts = OptsBuilder::from_opts(Opts::from_url(&url).unwrap()).prefer_socket(false).db_name(None::<String>).into();
    let mut c = Conn::new(opts.clone()).await.unwrap();
    c.query_drop(format!("DROP DATABASE IF EXISTS {DB}")).await.unwrap();
    c.query_drop(format!("CREATE DATABASE {DB}")).await.unwrap();
    c.query_drop(format!("USE {DB}")).await.unwrap();
    let (tables, batch_rows): (Vec<String>, usize) = match shape.as_str() {
        "blobs" => {
            c.query_drop("CREATE TABLE rpf_blobs (id INT PRIMARY KEY, k INT NOT NULL, b LONGBLOB NOT NULL, KEY (k))").await.unwrap();
            for i in 0..50 {
                c.query_drop(format!("INSERT INTO rpf_blobs VALUES ({i}, {}, REPEAT(CHAR(65 + {i} % 26), 8 << 20))", i % 5)).await.unwrap();
            }
            (vec!["rpf_blobs".into()], 50)
        }
        _ => {
            let mut names = Vec::new();
            for t in 0..10 {
                let name = format!("rpf_wide{t}");
                c.query_drop(format!(
                    "CREATE TABLE {name} (id INT PRIMARY KEY, k INT NOT NULL, body VARCHAR(1000) NOT NULL) DEFAULT CHARSET=utf8mb4"
                ))
                .await
                .unwrap();
                c.query_drop(format!(
                    "INSERT INTO {name} SELECT seq, seq % 1000, REPEAT(CONCAT('row ', seq, ' '), 100) FROM seq_1_to_40000"
                ))
                .await
                .unwrap();
                names.push(name);
            }
            (names, SnapshotConfig::default().batch_rows)
        }
    };
    let infos = load_tables(&mut c, &MariaDb, DB, None).await.unwrap();
    let path = std::env::temp_dir().join(format!("freshet-replica-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    println!("{shape}: before the store: {}", rss());
    let store = ReplicaStore::open(&path).unwrap().of_database(DB);
    let wanted: HashMap<_, _> = infos.into_iter().filter(|(n, _)| tables.contains(n)).collect();
    for info in wanted.values() {
        store.register(&info.schema).unwrap();
    }
    let cfg = SnapshotConfig { batch_rows, ..SnapshotConfig::default() };
    reset_peak();
    let started = std::time::Instant::now();
    copy_tables(opts.clone(), DB, &store, &wanted, &cfg, &CopyStats::default()).await.unwrap();
    println!("{shape}: copied in {:.1} s: {}", started.elapsed().as_secs_f64(), rss());
    if shape == "blobs" {
        let info = &wanted["rpf_blobs"];
        // Nothing was written meanwhile: the store may be dated at the copy's newest snapshot.
        if let Some(CopyState::Done { ready_at }) = store.copy_state("rpf_blobs") {
            store.advance_position(ready_at).unwrap();
        }
        let mut catalog = Catalog::new();
        catalog.add(info.schema.clone()).unwrap();
        let mut df = Dataflow::new(catalog, ByteSize(1 << 30));
        let v = df.install_sql("SELECT id FROM rpf_blobs WHERE k = ?").unwrap();
        df.set_applied(store.position().unwrap());
        let _ = df.reader(v).unwrap().lookup(&[Value::Int(1)]).unwrap();
        let req = df.fill_requests().pop().expect("a miss makes a request");
        reset_peak();
        let started = std::time::Instant::now();
        // The answer (10 rows of 8 MiB) is dropped before the figures are read.
        drop(store.fill_request(&req).unwrap());
        println!("{shape}: index on k built and read in {:.1} s: {}", started.elapsed().as_secs_f64(), rss());
    }
    drop(store);
    println!("{shape}: store closed: {}", rss());
    let _ = std::fs::remove_dir_all(&path);
    c.query_drop(format!("DROP DATABASE {DB}")).await.unwrap();
}
