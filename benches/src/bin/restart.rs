//! freshet-restart: what a restart costs, per fill source, with and without the warm restart
//! (issue 13's figures). Runs the freshet binary it is given against the MariaDB of
//! `FRESHET_TEST_MYSQL_URL`, three lives per source on the same state:
//!
//! 1. a first start (the replica copies the table): time to listen, to `/startup?caches`, to
//!    the end of the copy; miss latency (the first read of never-read keys, one at a time,
//!    through freshet, against the same reads on MariaDB directly, interleaved); then a minute
//!    of Zipf-skewed reads; SIGTERM (the file of hot keys is written);
//! 2. a restart without `[warm]`: time to ready, hit ratio over the first minute;
//! 3. a restart with `[warm]`: the same, plus the warm-up's time.
//!
//! The hit ratio is freshet's own count (`freshet_proxy_cache_hits_total` over hits + misses,
//! read from /metrics every 10 s); "answered" is the share of all reads answered from the
//! cache (hits and reads answered after their fill), the rest relayed (the first read of a
//! shape, lag, late fills). Prints; asserts nothing.
//!
//! ```text
//! freshet-restart --freshet target/release/freshet [--rows 1000000] [--keys 100000]
//!                 [--seconds 60] [--clients 4] [--skew 1.0] [--sources upstream,replica]
//! ```

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use freshet_examples::rng::{Rng, Zipf};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DB: &str = "restart_figures";

struct Args {
    freshet: String,
    rows: u64,
    keys: u64,
    seconds: u64,
    clients: usize,
    skew: f64,
    sources: Vec<String>,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        freshet: String::new(),
        rows: 1_000_000,
        keys: 100_000,
        seconds: 60,
        clients: 4,
        skew: 1.0,
        sources: vec!["upstream".into(), "replica".into()],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--freshet" => a.freshet = v,
            "--rows" => a.rows = v.parse()?,
            "--keys" => a.keys = v.parse()?,
            "--seconds" => a.seconds = v.parse()?,
            "--clients" => a.clients = v.parse()?,
            "--skew" => a.skew = v.parse()?,
            "--sources" => a.sources = v.split(',').map(str::to_string).collect(),
            other => bail!("unknown flag {other}"),
        }
    }
    if a.freshet.is_empty() {
        bail!("--freshet PATH (the freshet binary) is required");
    }
    Ok(a)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v.get(((v.len().max(1) - 1) as f64 * p) as usize).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

struct Life {
    child: std::process::Child,
    mysql: u16,
    admin: u16,
    spawned: Instant,
}

impl Life {
    async fn start(freshet: &str, config: &std::path::Path) -> anyhow::Result<Life> {
        let (mysql, admin) = (free_port(), free_port());
        let child = std::process::Command::new(freshet)
            .env_remove("FRESHET_CONFIG")
            .env("FRESHET_LISTEN_MYSQL", format!("127.0.0.1:{mysql}"))
            .env("FRESHET_LISTEN_ADMIN", format!("127.0.0.1:{admin}"))
            .arg("--config")
            .arg(config)
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Life { child, mysql, admin, spawned: Instant::now() })
    }

    fn url(&self, base: &Opts) -> Opts {
        // Not the server's socket, which mysql_async would prefer on 127.0.0.1 when it asks @@socket.
        OptsBuilder::from_opts(base.clone()).ip_or_hostname("127.0.0.1").tcp_port(self.mysql).db_name(Some(DB)).prefer_socket(false).into()
    }

    async fn http(&self, path: &str) -> Option<(u16, String)> {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", self.admin)).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes()).await.ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).await.ok()?;
        let code = body.split(' ').nth(1)?.parse().ok()?;
        Some((code, body))
    }

    /// Seconds from the spawn until `/startup?caches` answers 200.
    async fn ready(&self) -> f64 {
        loop {
            if let Some((200, _)) = self.http("/startup?caches").await {
                return self.spawned.elapsed().as_secs_f64();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The sum of the /metrics samples whose line starts with `prefix`.
    async fn metric(&self, prefix: &str) -> u64 {
        let Some((_, body)) = self.http("/metrics").await else { return 0 };
        body.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).map(|v| v as u64).sum()
    }

    /// Seconds from the spawn until the gauge `name` is `value` (polled every 50 ms).
    async fn until(&self, name: &str, value: u64) -> f64 {
        while self.metric(name).await != value {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.spawned.elapsed().as_secs_f64()
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        std::process::Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status()?;
        for _ in 0..600 {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("freshet did not exit within 60 s of SIGTERM")
    }
}

impl Drop for Life {
    fn drop(&mut self) {
        // Stopped already, or the run failed: never leave a freshet behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn query(k: u64) -> String {
    format!("SELECT id, name, price FROM items WHERE k = {k}")
}

/// The first read of each of `keys`, one at a time, through freshet and directly, interleaved.
async fn miss_latency(through: &Opts, direct: &Opts, keys: std::ops::Range<u64>) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let (mut f, mut d) = (Conn::new(through.clone()).await?, Conn::new(direct.clone()).await?);
    // The first read of the shape is relayed (column definitions); not a miss.
    f.query_drop(query(keys.end + 1)).await?;
    let (mut via, mut direct_t) = (Vec::new(), Vec::new());
    for k in keys {
        let t = Instant::now();
        f.query_drop(query(k)).await?;
        via.push(t.elapsed());
        let t = Instant::now();
        d.query_drop(query(k)).await?;
        direct_t.push(t.elapsed());
    }
    Ok((via, direct_t))
}

/// `seconds` of Zipf reads by `clients` connections; the hit ratio (freshet's counters) per
/// 10 s and overall, and the share of reads answered from the cache.
async fn workload(life: &Life, base: &Opts, a: &Args, seed: u64) -> anyhow::Result<String> {
    let zipf = Arc::new(Zipf::new(a.keys, a.skew));
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..a.clients {
        let (zipf, stop, reads, url) = (zipf.clone(), stop.clone(), reads.clone(), life.url(base));
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::new(url).await?;
            let mut rng = Rng::new(seed + i as u64);
            while !stop.load(Ordering::Relaxed) {
                c.query_drop(query(zipf.sample(&mut rng) - 1)).await?;
                reads.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    let counts = async || {
        let hits = life.metric("freshet_proxy_cache_hits_total{").await;
        let misses = life.metric("freshet_proxy_cache_misses_total{").await;
        let filled = life.metric("freshet_proxy_cache_filled_reads_total{").await;
        (hits, misses, filled)
    };
    let (h0, m0, f0) = counts().await;
    let mut windows = Vec::new();
    let (mut ph, mut pm) = (h0, m0);
    for _ in 0..a.seconds.div_ceil(10) {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let (h, m, _) = counts().await;
        let (dh, dm) = (h - ph, m - pm);
        windows.push(format!("{:.3}", dh as f64 / (dh + dm).max(1) as f64));
        (ph, pm) = (h, m);
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await??;
    }
    let (h, m, f) = counts().await;
    let n = reads.load(Ordering::Relaxed);
    let (dh, dm, df) = (h - h0, m - m0, f - f0);
    Ok(format!(
        "{n} reads ({:.0}/s): hit ratio {:.4} (hits {dh}, misses {dm}); answered from the cache {:.4}; per 10 s: {}",
        n as f64 / a.seconds as f64,
        dh as f64 / (dh + dm).max(1) as f64,
        (dh + df) as f64 / n.max(1) as f64,
        windows.join(" ")
    ))
}

fn config(url: &str, source: &str, dir: &std::path::Path, warm: bool) -> String {
    let warm = if warm { format!("[warm]\ndir = \"{}\"\n", dir.join("state").display()) } else { String::new() };
    format!(
        "[upstream]\nurl = \"{url}\"\ntls = \"disabled\"\n[fill]\nsource = \"{source}\"\n[replica]\npath = \"{}\"\n{warm}\
         [[cache]]\nname = \"by_k\"\nquery = \"SELECT id, name, price FROM items WHERE k = ?\"\n",
        dir.join("rocks").display()
    )
}

async fn source(a: &Args, base: &Opts, url: &str, source: &str) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("freshet-restart-{source}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let (warm_cfg, cold_cfg) = (dir.join("warm.toml"), dir.join("cold.toml"));
    std::fs::write(&warm_cfg, config(url, source, &dir, true))?;
    std::fs::write(&cold_cfg, config(url, source, &dir, false))?;
    let direct: Opts = OptsBuilder::from_opts(base.clone()).db_name(Some(DB)).into();

    println!("== fill source {source}");
    let first = Life::start(&a.freshet, &warm_cfg).await?;
    let ready = first.ready().await;
    print!("first start: ready (/startup?caches) after {ready:.2} s");
    if source == "replica" {
        let copied = first.until("freshet_replica_tables_copied", 1).await;
        let (rows, bytes) = (first.metric("freshet_replica_copy_rows_total").await, first.metric("freshet_replica_copy_bytes_total").await);
        let disk = dir_bytes(&dir.join("rocks"));
        print!(
            "; table copied after {copied:.2} s: {rows} rows = {:.0} rows/s, {:.1} MB/s of stored rows; on disk {disk} bytes = {:.1} bytes/row",
            rows as f64 / copied,
            bytes as f64 / copied / 1e6,
            disk as f64 / a.rows as f64
        );
        // The index on k is built by the first fill that needs it (fills go upstream until
        // then): read fresh keys until one is answered from the replica.
        let t = Instant::now();
        let mut c = Conn::new(first.url(base)).await?;
        let mut k = a.keys - 1000;
        while first.metric("freshet_replica_fills_total").await == 0 && k < a.keys - 500 {
            c.query_drop(query(k)).await?;
            k += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let disk = dir_bytes(&dir.join("rocks"));
        print!("; index on k ready {:.1} s later, on disk then {:.1} bytes/row", t.elapsed().as_secs_f64(), disk as f64 / a.rows as f64);
    }
    println!();
    let (mut via, mut dir_t) = miss_latency(&first.url(base), &direct, a.keys - 500..a.keys).await?;
    let (v50, v99, d50, d99) = (pct(&mut via, 0.5), pct(&mut via, 0.99), pct(&mut dir_t, 0.5), pct(&mut dir_t, 0.99));
    println!(
        "miss latency through freshet, {} first reads of ~{} rows: p50 {} p99 {}; the same reads on MariaDB directly p50 {} p99 {}; ratio p50 {:.2} p99 {:.2}",
        via.len(),
        a.rows / a.keys,
        ms(v50),
        ms(v99),
        ms(d50),
        ms(d99),
        v50.as_secs_f64() / d50.as_secs_f64(),
        v99.as_secs_f64() / d99.as_secs_f64()
    );
    println!("first minute of a first start: {}", workload(&first, base, a, 1).await?);
    first.stop().await?;

    for (name, cfg) in [("restart without [warm]", &cold_cfg), ("restart with [warm]", &warm_cfg)] {
        let life = Life::start(&a.freshet, cfg).await?;
        let ready = life.ready().await;
        let mut line = format!("{name}: ready after {ready:.2} s");
        let run = if cfg == &warm_cfg {
            let load = workload(&life, base, a, 2);
            let warmed = async {
                let t = life.until("freshet_proxy_warm_done", 1).await;
                let filled = life.metric("freshet_proxy_warm_keys_filled").await;
                (t, filled)
            };
            let (run, (t, filled)) = tokio::join!(load, warmed);
            line += &format!("; warm-up of {filled} keys done after {t:.2} s");
            run?
        } else {
            workload(&life, base, a, 2).await?
        };
        println!("{line}\n  first minute: {run}");
        life.stop().await?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|d| d.filter_map(Result::ok).filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let url = std::env::var("FRESHET_TEST_MYSQL_URL").context("FRESHET_TEST_MYSQL_URL (eval \"$(scripts/mariadb.sh)\")")?;
    let base: Opts = OptsBuilder::from_opts(Opts::from_url(&url)?).db_name(None::<String>).prefer_socket(false).into();
    let mut c = Conn::new(base.clone()).await?;
    c.query_drop(format!("DROP DATABASE IF EXISTS {DB}")).await?;
    c.query_drop(format!("CREATE DATABASE {DB}")).await?;
    c.query_drop(format!("USE {DB}")).await?;
    c.query_drop(
        "CREATE TABLE items (id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(40) NOT NULL, price DECIMAL(10,2), KEY (k)) DEFAULT CHARSET=utf8mb4",
    )
    .await?;
    let t = Instant::now();
    c.query_drop(format!(
        "INSERT INTO items SELECT seq, seq % {}, CONCAT('item number ', seq), seq / 100 FROM seq_1_to_{}",
        a.keys, a.rows
    ))
    .await?;
    println!(
        "table items: {} rows, {} keys of ~{} rows (loaded in {:.1?}); {} clients, Zipf {} over the keys, {} s per run",
        a.rows,
        a.keys,
        a.rows / a.keys,
        t.elapsed(),
        a.clients,
        a.skew,
        a.seconds
    );
    let (user, pass, host, port) = (base.user().unwrap_or(""), base.pass().unwrap_or(""), base.ip_or_hostname(), base.tcp_port());
    let url = format!("mysql://{user}:{pass}@{host}:{port}/{DB}");
    for s in &a.sources {
        source(&a, &base, &url, s).await?;
    }
    c.query_drop(format!("DROP DATABASE {DB}")).await?;
    Ok(())
}
