//! Shared helpers for the integration tests against the project's MariaDB
//! (`eval "$(scripts/mariadb.sh)"` sets FRESHET_TEST_MYSQL_URL). Each test works in its own
//! database (`cdc_<name>_<pid>_<n>`) and registers its own replica server id.
#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use freshet_cdc::{BinlogStream, StartAt, StreamConfig, StreamEvent};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

/// The server's URL; fails the test (never skips) when it is not set.
pub use freshet_testkit::mysql_url as url;

pub fn opts_for(db: Option<&str>) -> Opts {
    let base = Opts::from_url(&url()).expect("FRESHET_TEST_MYSQL_URL is not a valid mysql:// URL");
    OptsBuilder::from_opts(base).db_name(db.map(str::to_string)).into()
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A replica server id unlikely to collide with any other test's.
pub fn server_id() -> u32 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let mix = nanos ^ std::process::id().wrapping_mul(2_654_435_761) ^ SEQ.fetch_add(1, Ordering::Relaxed).wrapping_mul(40_503);
    1000 + mix % 1_000_000_000
}

/// A fresh, empty database for one test; returns its name and a connection using it.
pub async fn fresh_db(name: &str) -> (String, Conn) {
    let db = format!("cdc_{name}_{}_{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
    let mut c = Conn::new(opts_for(None)).await.expect("connect to FRESHET_TEST_MYSQL_URL");
    c.query_drop(format!("DROP DATABASE IF EXISTS `{db}`")).await.unwrap();
    c.query_drop(format!("CREATE DATABASE `{db}`")).await.unwrap();
    c.query_drop(format!("USE `{db}`")).await.unwrap();
    c.query_drop("SET time_zone = '+00:00'").await.unwrap();
    (db, c)
}

pub async fn drop_db(db: &str) {
    if let Ok(mut c) = Conn::new(opts_for(None)).await {
        let _ = c.query_drop(format!("DROP DATABASE IF EXISTS `{db}`")).await;
    }
}

pub async fn stream(db: &str) -> BinlogStream {
    let mut cfg = StreamConfig::new(db, server_id());
    cfg.read_timeout = Duration::from_secs(5);
    BinlogStream::connect(opts_for(None), cfg, StartAt::Current).await.expect("binlog stream connects")
}

/// Bounds a test step.
pub async fn within<T>(secs: u64, what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f).await.unwrap_or_else(|_| panic!("timed out after {secs}s: {what}"))
}

/// Reads events until `n` non-empty batches have arrived; returns them and any schema changes.
pub async fn batches(s: &mut BinlogStream, n: usize) -> (Vec<freshet_dataflow::Batch>, Vec<freshet_cdc::SchemaChange>) {
    let mut out = Vec::new();
    let mut ddl = Vec::new();
    while out.len() < n {
        match s.next().await.expect("stream event") {
            StreamEvent::Batch(b) if !b.changes.is_empty() => out.push(b),
            StreamEvent::Batch(_) => {}
            StreamEvent::Schema(c) => ddl.push(*c),
            StreamEvent::Following(t) => panic!("no table set was given, yet following {t:?}"),
        }
    }
    (out, ddl)
}

/// Drains `rx` until a heartbeat has said the stream is at the server's end (two heartbeats
/// seen, no lag in seconds or bytes), and returns the lag then; panics after 10 s.
#[allow(dead_code)]
pub async fn at_the_end(
    rx: &mut tokio::sync::mpsc::Receiver<Result<freshet_cdc::StreamEvent, freshet_cdc::CdcError>>,
    lag: &freshet_cdc::LagHandle,
    what: &str,
) -> freshet_cdc::Lag {
    let start = std::time::Instant::now();
    loop {
        while let Ok(ev) = rx.try_recv() {
            ev.unwrap();
        }
        let l = lag.get();
        if l.heartbeats >= 2 && l.behind == std::time::Duration::ZERO && l.bytes_behind == 0 {
            return l;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "no heartbeat with a zero lag in 10 s {what}: {l:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
