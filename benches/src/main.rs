//! freshet-load: the load harness. Runs one workload against several MySQL endpoints in the
//! same process, interleaved round by round, and reports each endpoint's throughput and
//! latency percentiles plus its ratio to the first endpoint (direct MariaDB), so that figures
//! from this shared, noisy machine are compared under the same conditions.
//!
//! ```text
//! freshet-load --target direct=mysql://u:p@127.0.0.1:33306/db --target freshet=mysql://u:p@127.0.0.1:3307/db \
//!              [--seconds 10] [--connections 8] [--rounds 2] [--rows 10000] [--writes 5] [--skew 1.0] [--text]
//! ```
//!
//! The workload: point selects by primary key on `load_items` (created and filled when
//! missing), with `--writes` percent of operations being updates of the same rows; keys are
//! drawn from a Zipf distribution with exponent `--skew` (0 = uniform). Prepared statements by
//! default, text protocol with `--text`.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};

struct Args {
    targets: Vec<(String, String)>,
    seconds: u64,
    connections: usize,
    rounds: usize,
    rows: u64,
    writes: u32,
    skew: f64,
    text: bool,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args { targets: vec![], seconds: 10, connections: 8, rounds: 2, rows: 10_000, writes: 0, skew: 0.0, text: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--target" => {
                let v = value()?;
                let (name, url) = v.split_once('=').context("--target NAME=URL")?;
                a.targets.push((name.to_string(), url.to_string()));
            }
            "--seconds" => a.seconds = value()?.parse()?,
            "--connections" => a.connections = value()?.parse()?,
            "--rounds" => a.rounds = value()?.parse()?,
            "--rows" => a.rows = value()?.parse()?,
            "--writes" => a.writes = value()?.parse()?,
            "--skew" => a.skew = value()?.parse()?,
            "--text" => a.text = true,
            other => bail!("unknown argument {other}; see the header of benches/src/main.rs"),
        }
    }
    if a.targets.is_empty() {
        bail!("give at least one --target NAME=URL");
    }
    Ok(a)
}

/// Zipf-distributed keys in 1..=n by inverse transform over the precomputed CDF.
struct Keys {
    cdf: Vec<f64>,
}

impl Keys {
    fn new(n: u64, skew: f64) -> Self {
        let weights: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(skew)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        Keys { cdf: weights.iter().map(|w| { acc += w / total; acc }).collect() }
    }

    fn sample(&self, u: f64) -> u64 {
        self.cdf.partition_point(|&c| c < u) as u64 + 1
    }
}

/// xorshift64*: cheap, per task, good enough for picking keys.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Outcome {
    ops: u64,
    errors: u64,
    latencies_us: Vec<u32>,
    elapsed: Duration,
}

/// Connection options for `url`, always over TCP. mysql_async otherwise asks the server for
/// its unix socket and, when that path exists on this host, reconnects through it: a target
/// behind freshet would silently be measured as direct MariaDB.
fn tcp_opts(url: &str) -> anyhow::Result<Opts> {
    Ok(OptsBuilder::from_opts(Opts::from_url(url)?).prefer_socket(false).into())
}

async fn prepare(url: &str, rows: u64) -> anyhow::Result<()> {
    let mut conn = Conn::new(tcp_opts(url)?).await?;
    conn.query_drop("CREATE TABLE IF NOT EXISTS load_items (id BIGINT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL)").await?;
    let have: Option<u64> = conn.query_first("SELECT COUNT(*) FROM load_items").await?;
    if have != Some(rows) {
        conn.query_drop("TRUNCATE load_items").await?;
        for start in (1..=rows).step_by(1000) {
            let values: Vec<String> = (start..(start + 1000).min(rows + 1))
                .map(|i| format!("({i}, {}, '{:0>120}', '{:0>60}')", i % 1000, i, i * 7))
                .collect();
            conn.query_drop(format!("INSERT INTO load_items VALUES {}", values.join(","))).await?;
        }
    }
    conn.disconnect().await?;
    Ok(())
}

async fn worker(url: String, args: std::sync::Arc<(Keys, u32, bool)>, seed: u64, until: Instant) -> anyhow::Result<Outcome> {
    let (keys, writes, text) = &*args;
    let mut conn = Conn::new(tcp_opts(&url)?).await?;
    let mut rng = Rng(seed | 1);
    let mut out = Outcome { ops: 0, errors: 0, latencies_us: Vec::with_capacity(1 << 16), elapsed: Duration::ZERO };
    let read = conn.prep("SELECT id, k, c, pad FROM load_items WHERE id = ?").await?;
    let write = conn.prep("UPDATE load_items SET k = k + 1 WHERE id = ?").await?;
    let started = Instant::now();
    while Instant::now() < until {
        let key = keys.sample(rng.unit());
        let is_write = (rng.next() % 100) < u64::from(*writes);
        let t = Instant::now();
        let result = match (is_write, text) {
            (true, _) => conn.exec_drop(&write, (key,)).await,
            (false, false) => conn.exec_first::<(u64, i32, String, String), _, _>(&read, (key,)).await.map(drop),
            (false, true) => conn
                .query_first::<(u64, i32, String, String), _>(format!("SELECT id, k, c, pad FROM load_items WHERE id = {key}"))
                .await
                .map(drop),
        };
        out.latencies_us.push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
        match result {
            Ok(()) => out.ops += 1,
            Err(_) => out.errors += 1,
        }
    }
    out.elapsed = started.elapsed();
    conn.disconnect().await?;
    Ok(out)
}

struct Summary {
    qps: f64,
    p50: u32,
    p99: u32,
    p999: u32,
    errors: u64,
}

async fn run_once(url: &str, args: &Args, keys: std::sync::Arc<(Keys, u32, bool)>) -> anyhow::Result<Summary> {
    let until = Instant::now() + Duration::from_secs(args.seconds);
    let tasks: Vec<_> = (0..args.connections)
        .map(|i| tokio::spawn(worker(url.to_string(), keys.clone(), 0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1), until)))
        .collect();
    let (mut ops, mut errors, mut lat, mut secs) = (0u64, 0u64, Vec::new(), 0f64);
    for t in tasks {
        let o = t.await??;
        ops += o.ops;
        errors += o.errors;
        lat.extend(o.latencies_us);
        secs = f64::max(secs, o.elapsed.as_secs_f64());
    }
    lat.sort_unstable();
    let pct = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0);
    Ok(Summary { qps: ops as f64 / secs.max(1e-9), p50: pct(0.50), p99: pct(0.99), p999: pct(0.999), errors })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    prepare(&args.targets[0].1, args.rows).await.context("preparing load_items through the first target")?;
    let keys = std::sync::Arc::new((Keys::new(args.rows, args.skew), args.writes, args.text));
    println!(
        "workload: {} point selects by primary key{}, {} connections, {} rows, zipf skew {}, {} s x {} rounds per target",
        if args.text { "text-protocol" } else { "prepared" },
        if args.writes > 0 { format!(" with {}% updates", args.writes) } else { String::new() },
        args.connections, args.rows, args.skew, args.seconds, args.rounds
    );
    let mut results: Vec<Vec<Summary>> = args.targets.iter().map(|_| Vec::new()).collect();
    for _ in 0..args.rounds {
        for (i, (_, url)) in args.targets.iter().enumerate() {
            results[i].push(run_once(url, &args, keys.clone()).await?);
        }
    }
    // Per target, the median round by throughput (with two rounds, the better one).
    let pick = |rs: &mut Vec<Summary>| {
        rs.sort_by(|a, b| b.qps.total_cmp(&a.qps));
        rs.swap_remove(rs.len() / 2 - (rs.len() + 1) % 2)
    };
    let chosen: Vec<Summary> = results.iter_mut().map(pick).collect();
    let base = chosen[0].qps;
    println!("{:<10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7}", "target", "ops/s", "p50 us", "p99 us", "p99.9 us", "vs first", "errors");
    for ((name, _), s) in args.targets.iter().zip(&chosen) {
        println!("{:<10} {:>10.0} {:>8} {:>8} {:>8} {:>7.2}x {:>7}", name, s.qps, s.p50, s.p99, s.p999, s.qps / base, s.errors);
    }
    Ok(())
}
