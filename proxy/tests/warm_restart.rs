//! The warm restart, with the freshet binary and each fill source: a first life reads some
//! keys and is stopped (SIGTERM: the file of hot keys is written at shutdown); the second
//! life fills those keys in the background before any read, so reading them again counts no
//! miss. A third life finds garbage in the file: it warns, starts cold (its reads miss again)
//! and serves, and writes a good file at its own shutdown. Observed through SHOW FRESHET
//! STATUS and /metrics.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use mysql_async::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const GROUPS: i64 = 40;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Life {
    child: tokio::process::Child,
    mysql: u16,
    admin: u16,
}

impl Life {
    async fn start(config: &std::path::Path) -> Life {
        let (mysql, admin) = (free_port(), free_port());
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_freshet"))
            .env_remove("FRESHET_CONFIG")
            .env("FRESHET_LISTEN_MYSQL", format!("127.0.0.1:{mysql}"))
            .env("FRESHET_LISTEN_ADMIN", format!("127.0.0.1:{admin}"))
            .arg("--config")
            .arg(config)
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let life = Life { child, mysql, admin };
        for _ in 0..600 {
            if let Ok(c) = mysql_async::Conn::new(opts(&format!("127.0.0.1:{mysql}"))).await {
                drop(c.disconnect().await);
                return life;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("freshet did not listen within 60 s");
    }

    async fn conn(&self) -> mysql_async::Conn {
        mysql_async::Conn::new(opts(&format!("127.0.0.1:{}", self.mysql))).await.unwrap()
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
        panic!("{name} stayed {:?}", self.status_of(name).await);
    }

    /// One sample of /metrics.
    async fn metric(&self, line_start: &str) -> u64 {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", self.admin)).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").await.unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).await.unwrap();
        let line = body.lines().find(|l| l.starts_with(line_start)).unwrap_or_else(|| panic!("no {line_start} in /metrics"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }

    /// SIGTERM, and the exit.
    async fn stop(mut self) {
        let pid = self.child.id().unwrap();
        let status = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status().unwrap();
        assert!(status.success());
        let exit = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await.expect("freshet exits after SIGTERM").unwrap();
        assert!(exit.success(), "{exit:?}");
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
    let first = Life::start(&config).await;
    let cold = first.wait_status("warm_restart", |v| v.starts_with("cold start")).await;
    assert!(cold.contains("no file"), "a first start has no file: {cold}");
    first.wait_status("caught_up", |v| v == "yes").await;
    read_groups(&first, &mut direct, table).await;
    assert!(first.metric(MISSES).await >= GROUPS as u64 - 1, "a cold life misses each group once");
    first.stop().await;
    assert!(state.join("warm-keys").exists(), "the file is written at shutdown");

    // Second life: the remembered groups are filled before anyone reads them.
    let second = Life::start(&config).await;
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
    let third = Life::start(&config).await;
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
