//! The warm restart, with the freshet binary and each fill source: a first life reads some
//! keys and is stopped (SIGTERM: the file of hot keys is written at shutdown); the second
//! life fills those keys in the background before any read, so reading them again counts no
//! miss. A third life finds garbage in the file: it warns, starts cold (its reads miss again)
//! and serves, and writes a good file at its own shutdown. Observed through SHOW FRESHET
//! STATUS and /metrics.

mod common;

use std::time::Duration;

use common::*;
use freshet_testkit::process::Freshet;
use mysql_async::prelude::*;

const GROUPS: i64 = 40;

/// One life of the freshet binary.
struct Life {
    freshet: Freshet,
}

impl Life {
    async fn start(config: &std::path::Path, log: &std::path::Path) -> Life {
        Life { freshet: Freshet::start(std::path::Path::new(env!("CARGO_BIN_EXE_freshet")), config, log).await }
    }

    async fn conn(&self) -> mysql_async::Conn {
        mysql_async::Conn::new(opts(&self.freshet.mysql.to_string())).await.unwrap()
    }

    /// SHOW FRESHET STATUS as (name, value) pairs.
    async fn status(&self) -> Vec<(String, String)> {
        self.conn().await.query("SHOW FRESHET STATUS").await.unwrap()
    }

    async fn status_of(&self, name: &str) -> String {
        self.status().await.into_iter().find(|(k, _)| k == name).map(|(_, v)| v).unwrap_or_else(|| panic!("no {name} in status"))
    }

    /// Waits until the status line `name` satisfies `ok`; returns it.
    async fn wait_status(&self, name: &str, ok: impl Fn(&str) -> bool) -> String {
        for _ in 0..600 {
            let v = self.status_of(name).await;
            if ok(&v) {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{name} stayed {:?}; the log ends with:\n{}", self.status_of(name).await, self.freshet.log());
    }

    /// One sample of /metrics.
    async fn metric(&self, line_start: &str) -> u64 {
        let (_, body) = freshet_testkit::http::get(self.freshet.admin, "/metrics").await;
        let line = body.lines().find(|l| l.starts_with(line_start)).unwrap_or_else(|| panic!("no {line_start} in /metrics"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }

    /// SIGTERM, and a successful exit.
    async fn stop(self) {
        self.freshet.stop().await;
    }
}

const MISSES: &str = "freshet_proxy_cache_misses_total{cache=\"by_grp\"}";
const HITS: &str = "freshet_proxy_cache_hits_total{cache=\"by_grp\"}";

/// Reads every group twice through freshet, checking each answer against the server's.
async fn read_groups(life: &Life, direct: &mut mysql_async::Conn, table: &str) {
    let mut c = life.conn().await;
    for grp in 0..GROUPS {
        let sql = format!("SELECT id, name FROM {table} WHERE grp = {grp}");
        let mut want: Vec<(i64, String)> = direct.query(&sql).await.unwrap();
        want.sort();
        for _ in 0..2 {
            let mut got: Vec<(i64, String)> = c.query(&sql).await.unwrap();
            got.sort();
            assert_eq!(got, want, "{sql}");
        }
    }
}

async fn restart_warm(source: &str) {
    let mut direct = direct().await;
    let table = &format!("wr_{source}");
    direct.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.unwrap();
    direct.query_drop(format!("CREATE TABLE {table} (id INT PRIMARY KEY, grp INT NOT NULL, name VARCHAR(30) NOT NULL)")).await.unwrap();
    direct.query_drop(format!("INSERT INTO {table} SELECT seq, seq % 200, CONCAT('row ', seq) FROM seq_1_to_4000")).await.unwrap();
    let dir = std::env::temp_dir().join(format!("freshet-warm-{source}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state");
    let config = dir.join("freshet.toml");
    std::fs::write(
        &config,
        format!(
            "[upstream]\nurl = \"{}\"\ntls = \"disabled\"\n[admin]\nusers = [\"{USER}\"]\n[fill]\nsource = \"{source}\"\n\
             [replica]\npath = \"{}\"\n[warm]\ndir = \"{}\"\nconcurrency = 4\nsave_interval = \"1s\"\n\
             [[cache]]\nname = \"by_grp\"\nquery = \"SELECT id, name FROM {table} WHERE grp = ?\"\n",
            upstream_url(),
            dir.join("rocks").display(),
            state.display()
        ),
    )
    .unwrap();

    // First life: a cold start reads every group (each misses once), then stops.
    let first = Life::start(&config, &dir.join("first.log")).await;
    let cold = first.wait_status("warm_restart", |v| v.starts_with("cold start")).await;
    assert!(cold.contains("no file"), "a first start has no file: {cold}");
    first.wait_status("caught_up", |v| v == "yes").await;
    read_groups(&first, &mut direct, table).await;
    assert!(first.metric(MISSES).await >= GROUPS as u64 - 1, "a cold life misses each group once");
    first.stop().await;
    assert!(state.join("warm-keys").exists(), "the file is written at shutdown");

    // Second life: the remembered groups are filled before anyone reads them.
    let second = Life::start(&config, &dir.join("second.log")).await;
    let done = second.wait_status("warm_restart", |v| v.starts_with("done")).await;
    assert!(done.starts_with(&format!("done: {GROUPS} of {GROUPS} keys filled")), "{done}");
    assert_eq!(second.metric("freshet_proxy_warm_keys_filled").await, GROUPS as u64);
    second.wait_status("caught_up", |v| v == "yes").await;
    read_groups(&second, &mut direct, table).await;
    assert_eq!(second.metric(MISSES).await, 0, "every remembered group was filled before its first read");
    assert!(second.metric(HITS).await >= GROUPS as u64, "and answered from the cache");
    // Saved every save_interval too, so a killed freshet still starts warm.
    for _ in 0..50 {
        if second.metric("freshet_proxy_warm_saves_total").await > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(second.metric("freshet_proxy_warm_saves_total").await > 0, "no periodic save within 5 s");
    second.stop().await;

    // Third life: a damaged file is a warning and a cold start, not a crash.
    std::fs::write(state.join("warm-keys"), b"FRESHET-WARM\x01\0\0\0 this is not what was written").unwrap();
    let third = Life::start(&config, &dir.join("third.log")).await;
    let cold = third.wait_status("warm_restart", |v| v.starts_with("cold start")).await;
    assert!(cold.contains("checksum") || cold.contains("truncated"), "{cold}");
    third.wait_status("caught_up", |v| v == "yes").await;
    read_groups(&third, &mut direct, table).await;
    assert!(third.metric(MISSES).await >= GROUPS as u64 - 1, "without the file the reads miss again");
    third.stop().await;
    let rewritten = std::fs::read(state.join("warm-keys")).unwrap();
    assert!(rewritten.starts_with(b"FRESHET-WARM") && rewritten.len() > 100, "a good file replaces the damaged one");

    let _ = std::fs::remove_dir_all(&dir);
    direct.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_fills_the_remembered_keys_from_the_upstream() {
    restart_warm("upstream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_fills_the_remembered_keys_from_the_replica() {
    restart_warm("replica").await;
}
