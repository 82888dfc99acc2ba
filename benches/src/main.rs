//! freshet-load: the load harness. Runs workloads against several MySQL endpoints in the same
//! process, interleaved (round by round; within a round, workload by workload and target by
//! target, the targets' order rotating each round), and reports each endpoint's throughput and
//! read and write latency percentiles plus its ratios to the first endpoint (direct MariaDB),
//! so that figures from this shared, noisy machine are compared under the same conditions.
//!
//! ```text
//! freshet-load --target direct=mysql://u:p@127.0.0.1:33306/db --target freshet=mysql://u:p@127.0.0.1:3307/db \
//!              [--workload point|story-point|story|point,story] [--seconds 10] [--warmup 1] [--connections 8] [--rounds 2]
//!              [--rows 10000] [--writes 5] [--skew 1.0] [--text] [--prefill] [--ceiling NAME [--ceiling-writes NAME]]
//!              [--write-then-read]
//!              [--cpu NAME=PID[,PID...]]
//! freshet-load --target direct=URL --setup-only [--workload ...] [--rows N]   create and fill the tables, then exit
//! freshet-load --print-cache-config [--workload ...]                          the [[cache]] entries for freshet's config
//! ```
//!
//! The workloads are described in `workload.rs`: `point` (default) selects `load_items` rows by
//! primary key, `story-point` a story by primary key, `story` reads the news example's
//! `story_with_votes`. `--writes` percent of operations are writes to the rows being read; keys
//! are drawn from a Zipf distribution over `1..=rows` with exponent `--skew` (0 = uniform, key 1
//! the hottest). Tables are created and filled through the first target when missing. Prepared statements by default, text protocol
//! with `--text`. Before its first measured run, each (workload, target) pair runs `--warmup`
//! seconds unmeasured (connections, buffer pool, and a cache's first fills). With `--prefill`,
//! each target first reads every key once (all connections, keys dealt round-robin): a cache
//! then starts full and the rounds measure hits and maintenance, not cold misses (with Zipf
//! keys, the rarely read tail keeps missing for minutes otherwise); MariaDB's buffer pool is
//! warmed the same way.
//!
//! With `--write-then-read`, each write is followed at once, on the same connection, by a read
//! of the key it wrote (what read-your-writes is for), and the write columns time the whole
//! cycle (write + read).
//!
//! Per target the report takes the median round by throughput (with two rounds, the better
//! one); ratios are that target's throughput and read latencies over the first target's, and
//! with `--ceiling NAME` also its throughput over that target's (`freshet-null`, the server that
//! does no work: the most any MySQL-protocol cache can reach here). With `--ceiling-writes W`
//! the ceiling's writes go to target W (direct MariaDB) over a second connection per worker, its
//! reads still to the null server: a write costs a cache at least what it costs the server, so
//! a ceiling that acknowledged writes for free would charge every cached target for writes it
//! cannot avoid (at 5% writes, MariaDB's write costs more than the reads it serves). Without
//! writes the two ceilings are the same.
//!
//! With `--cpu NAME=PID[,PID...]`, each measured run of target NAME also reads the CPU time
//! (user + system, all threads, from /proc) that those processes spent during it, and the report
//! adds their CPU microseconds per operation (`cpu us/op`): e.g. `--cpu direct=<mariadbd>
//! --cpu relay=<freshet>` gives what a relayed query costs freshet next to what it costs MariaDB.
//! Noise on a shared machine moves this far less than throughput.

mod workload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use freshet_examples::rng::{Rng, Zipf};
use workload::{Session, Workload};

struct Args {
    targets: Vec<(String, String)>,
    workloads: Vec<Workload>,
    seconds: f64,
    warmup: f64,
    connections: usize,
    rounds: usize,
    rows: u64,
    writes: u32,
    skew: f64,
    text: bool,
    setup_only: bool,
    print_cache_config: bool,
    prefill: bool,
    /// The target whose throughput is the ceiling (`freshet-null`), if any.
    ceiling: Option<String>,
    /// The target the ceiling's writes go to (`--ceiling-writes`), if any.
    ceiling_writes: Option<String>,
    /// Each write is followed by a read of its key; the write latency is the cycle's.
    write_then_read: bool,
    /// Per target name, the processes whose CPU time is read around each of its runs.
    cpu: Vec<(String, Vec<u32>)>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        targets: vec![],
        workloads: vec![],
        seconds: 10.0,
        warmup: 1.0,
        connections: 8,
        rounds: 2,
        rows: 10_000,
        writes: 0,
        skew: 0.0,
        text: false,
        setup_only: false,
        print_cache_config: false,
        prefill: false,
        ceiling: None,
        ceiling_writes: None,
        write_then_read: false,
        cpu: vec![],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--target" => {
                let v = value()?;
                let (name, url) = v.split_once('=').context("--target NAME=URL")?;
                a.targets.push((name.to_string(), url.to_string()));
            }
            "--workload" => {
                for w in value()?.split(',') {
                    a.workloads.push(Workload::parse(w)?);
                }
            }
            "--seconds" => a.seconds = value()?.parse()?,
            "--warmup" => a.warmup = value()?.parse()?,
            "--connections" => a.connections = value()?.parse()?,
            "--rounds" => a.rounds = value()?.parse()?,
            "--rows" => a.rows = value()?.parse()?,
            "--writes" => a.writes = value()?.parse()?,
            "--skew" => a.skew = value()?.parse()?,
            "--text" => a.text = true,
            "--setup-only" => a.setup_only = true,
            "--prefill" => a.prefill = true,
            "--ceiling" => a.ceiling = Some(value()?),
            "--ceiling-writes" => a.ceiling_writes = Some(value()?),
            "--print-cache-config" => a.print_cache_config = true,
            "--write-then-read" => a.write_then_read = true,
            "--cpu" => {
                let v = value()?;
                let (name, pids) = v.split_once('=').context("--cpu NAME=PID[,PID...]")?;
                let pids = pids.split(',').map(str::parse).collect::<Result<Vec<u32>, _>>().context("--cpu NAME=PID[,PID...]")?;
                a.cpu.push((name.to_string(), pids));
            }
            other => bail!("unknown argument {other}; see the header of benches/src/main.rs"),
        }
    }
    if a.workloads.is_empty() {
        a.workloads.push(Workload::Point);
    }
    if a.targets.is_empty() && !a.print_cache_config {
        bail!("give at least one --target NAME=URL");
    }
    if let Some(c) = &a.ceiling
        && !a.targets.iter().any(|(name, _)| name == c)
    {
        bail!("--ceiling {c} names no --target");
    }
    if let Some(w) = &a.ceiling_writes {
        if a.ceiling.is_none() {
            bail!("--ceiling-writes needs --ceiling");
        }
        if !a.targets.iter().any(|(name, _)| name == w) {
            bail!("--ceiling-writes {w} names no --target");
        }
    }
    if let Some((c, _)) = a.cpu.iter().find(|(c, _)| !a.targets.iter().any(|(name, _)| name == c)) {
        bail!("--cpu {c} names no --target");
    }
    if a.rounds == 0 || a.connections == 0 || a.rows == 0 || a.writes > 100 {
        bail!("--rounds, --connections and --rows must be positive, --writes at most 100");
    }
    Ok(a)
}

impl Args {
    /// Where target `name`'s writes go when not to itself: the ceiling's, to `--ceiling-writes`.
    fn write_url(&self, name: &str) -> Option<&str> {
        let to = self.ceiling_writes.as_ref().filter(|_| self.ceiling.as_deref() == Some(name))?;
        self.targets.iter().find(|(n, _)| n == to).map(|(_, url)| url.as_str())
    }
}

/// What a run (or one connection of it) did.
#[derive(Default)]
struct Outcome {
    ops: u64,
    errors: u64,
    first_error: Option<String>,
    reads_us: Vec<u32>,
    writes_us: Vec<u32>,
    elapsed: Duration,
}

impl Outcome {
    fn absorb(&mut self, o: Outcome) {
        self.ops += o.ops;
        self.errors += o.errors;
        self.first_error = self.first_error.take().or(o.first_error);
        self.reads_us.extend(o.reads_us);
        self.writes_us.extend(o.writes_us);
        self.elapsed = self.elapsed.max(o.elapsed);
    }
}

/// What every connection of a run shares.
struct Plan {
    workload: Workload,
    keys: Zipf,
    writes: u32,
    text: bool,
    rows: u64,
    write_then_read: bool,
}

/// CPU time (user + system, all threads) of the processes `pids`, in seconds; None if one of
/// them cannot be read.
fn cpu_seconds(pids: &[u32]) -> Option<f64> {
    pids.iter().map(|&pid| freshet_examples::keepup::cpu_seconds(pid)).sum()
}

/// One connection's loop. With `write_url`, writes go over a second connection to that target
/// (the ceiling's: it answers reads for free, but no cache makes a write cheaper than the server).
async fn worker(url: String, write_url: Option<String>, plan: Arc<Plan>, seed: u64, until: Instant) -> anyhow::Result<Outcome> {
    let mut session = Session::open(&url, plan.workload, plan.text, plan.rows).await?;
    let mut writer = match &write_url {
        Some(w) if plan.writes > 0 => Some(Session::open(w, plan.workload, plan.text, plan.rows).await?),
        _ => None,
    };
    let mut rng = Rng::new(seed);
    let mut out = Outcome { reads_us: Vec::with_capacity(1 << 16), ..Outcome::default() };
    let started = Instant::now();
    while Instant::now() < until {
        let key = plan.keys.sample(&mut rng);
        let pick = rng.next_u64();
        let is_write = pick % 100 < u64::from(plan.writes);
        let t = Instant::now();
        let result = match (is_write, plan.write_then_read) {
            (true, true) => match writer.as_mut().unwrap_or(&mut session).write(key, pick / 100).await {
                Ok(()) => session.read(key).await,
                Err(e) => Err(e),
            },
            (true, false) => writer.as_mut().unwrap_or(&mut session).write(key, pick / 100).await,
            (false, _) => session.read(key).await,
        };
        let us = u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX);
        if is_write {
            out.writes_us.push(us)
        } else {
            out.reads_us.push(us)
        }
        match result {
            Ok(()) => out.ops += 1,
            Err(e) => {
                out.errors += 1;
                out.first_error.get_or_insert(e);
            }
        }
    }
    out.elapsed = started.elapsed();
    session.close().await?;
    if let Some(w) = writer {
        w.close().await?;
    }
    Ok(out)
}

/// Reads every key once over `connections` connections; returns how many reads failed.
async fn prefill(url: &str, connections: usize, plan: &Arc<Plan>) -> anyhow::Result<u64> {
    let tasks: Vec<_> = (0..connections as u64)
        .map(|i| {
            let (url, plan, step) = (url.to_string(), plan.clone(), connections as u64);
            tokio::spawn(async move {
                let mut session = Session::open(&url, plan.workload, plan.text, plan.rows).await?;
                let mut errors = 0;
                for key in (i + 1..=plan.rows).step_by(step as usize) {
                    errors += u64::from(session.read(key).await.is_err());
                }
                session.close().await?;
                anyhow::Ok(errors)
            })
        })
        .collect();
    let mut errors = 0;
    for t in tasks {
        errors += t.await??;
    }
    Ok(errors)
}

async fn run_once(
    url: &str,
    write_url: Option<&str>,
    connections: usize,
    seconds: f64,
    plan: &Arc<Plan>,
    seed: u64,
) -> anyhow::Result<Outcome> {
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..connections)
        .map(|i| {
            let seed = seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            tokio::spawn(worker(url.to_string(), write_url.map(str::to_string), plan.clone(), seed, until))
        })
        .collect();
    let mut all = Outcome::default();
    for t in tasks {
        all.absorb(t.await??);
    }
    all.reads_us.sort_unstable();
    all.writes_us.sort_unstable();
    Ok(all)
}

/// One run's figures.
struct Summary {
    qps: f64,
    read: [u32; 2],
    write: [u32; 2],
    errors: u64,
    first_error: Option<String>,
    /// CPU microseconds per operation of the `--cpu` processes, if any.
    cpu_us: Option<f64>,
}

fn pct(lat: &[u32], p: f64) -> u32 {
    lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0)
}

impl From<Outcome> for Summary {
    fn from(o: Outcome) -> Summary {
        Summary {
            qps: o.ops as f64 / o.elapsed.as_secs_f64().max(1e-9),
            read: [pct(&o.reads_us, 0.5), pct(&o.reads_us, 0.99)],
            write: [pct(&o.writes_us, 0.5), pct(&o.writes_us, 0.99)],
            errors: o.errors,
            first_error: o.first_error,
            cpu_us: None,
        }
    }
}

fn report(args: &Args, workload: Workload, mut results: Vec<Vec<Summary>>) {
    println!();
    println!(
        "workload {}: {}; {} statements, {}% writes{}, zipf skew {}, {} connections, {} s x {} rounds{}",
        workload.name(),
        workload.describe(args.rows),
        if args.text { "text-protocol" } else { "prepared" },
        args.writes,
        if args.write_then_read { " (each followed by a read of its key; write = the cycle)" } else { "" },
        args.skew,
        args.connections,
        args.seconds,
        args.rounds,
        if args.prefill { ", every key read once before" } else { "" }
    );
    // Per target, the median round by throughput (with two rounds, the better one).
    let chosen: Vec<Summary> = results
        .iter_mut()
        .map(|rs| {
            rs.sort_by(|a, b| b.qps.total_cmp(&a.qps));
            rs.swap_remove((rs.len() - 1) / 2)
        })
        .collect();
    let base = &chosen[0];
    let ceiling = args.ceiling.as_ref().and_then(|c| args.targets.iter().position(|(name, _)| name == c)).map(|i| chosen[i].qps);
    let ratio = |a: f64, b: u32| if b == 0 { 0.0 } else { a / f64::from(b) };
    println!(
        "{:<10} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7}{}{}",
        "target",
        "ops/s",
        "x ops/s",
        "read p50",
        "read p99",
        "write p50",
        "write p99",
        "x r.p50",
        "x r.p99",
        "x w.p50",
        "x w.p99",
        "errors",
        if ceiling.is_some() { "   x ceil" } else { "" },
        if args.cpu.is_empty() { "" } else { "  cpu us/op" }
    );
    for ((name, _), s) in args.targets.iter().zip(&chosen) {
        println!(
            "{:<10} {:>9.0} {:>7.2}x {:>9} {:>9} {:>9} {:>9} {:>7.2}x {:>7.2}x {:>7.2}x {:>7.2}x {:>7}{}{}",
            name,
            s.qps,
            s.qps / base.qps.max(1e-9),
            s.read[0],
            s.read[1],
            s.write[0],
            s.write[1],
            ratio(f64::from(s.read[0]), base.read[0]),
            ratio(f64::from(s.read[1]), base.read[1]),
            ratio(f64::from(s.write[0]), base.write[0]),
            ratio(f64::from(s.write[1]), base.write[1]),
            s.errors,
            ceiling.map(|c| format!(" {:>7.2}x", s.qps / c.max(1e-9))).unwrap_or_default(),
            s.cpu_us.map(|us| format!(" {us:>10.1}")).unwrap_or_default()
        );
    }
    println!(
        "(latencies in us; x = this target over the first{})",
        match (ceiling.is_some(), &args.ceiling_writes) {
            (true, Some(w)) if args.writes > 0 =>
                format!("; x ceil = this target's throughput over the ceiling's, whose writes went to {w}"),
            (true, _) => "; x ceil = this target's throughput over the ceiling's".to_string(),
            _ => String::new(),
        }
    );
    if !args.cpu.is_empty() {
        let names: Vec<String> = args.cpu.iter().map(|(n, pids)| format!("{n}: pid {pids:?}")).collect();
        println!("(cpu us/op = CPU time of the processes given with --cpu over the run's operations; {})", names.join(", "));
    }
    for ((name, _), s) in args.targets.iter().zip(&chosen) {
        if let Some(e) = &s.first_error {
            println!("{name}: first error: {e}");
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    if args.print_cache_config {
        for w in &args.workloads {
            println!("{}", w.cache_config()?);
        }
        return Ok(());
    }
    for w in &args.workloads {
        w.setup(&args.targets[0].1, args.rows)
            .await
            .with_context(|| format!("preparing the {} tables through the first target", w.name()))?;
    }
    if args.setup_only {
        return Ok(());
    }
    let plans: Vec<Arc<Plan>> = args
        .workloads
        .iter()
        .map(|&workload| {
            Arc::new(Plan {
                workload,
                keys: Zipf::new(args.rows, args.skew),
                writes: args.writes,
                text: args.text,
                rows: args.rows,
                write_then_read: args.write_then_read,
            })
        })
        .collect();
    let n = args.targets.len();
    // results[workload][target][round]
    let mut results: Vec<Vec<Vec<Summary>>> = plans.iter().map(|_| args.targets.iter().map(|_| Vec::new()).collect()).collect();
    for round in 0..args.rounds {
        for (w, plan) in plans.iter().enumerate() {
            for t in (0..n).map(|i| (i + round) % n) {
                let (name, url) = &args.targets[t];
                let write_url = args.write_url(name);
                if round == 0 && args.prefill {
                    let started = Instant::now();
                    let errors = prefill(url, args.connections, plan).await.with_context(|| format!("prefilling {name}"))?;
                    eprintln!(
                        "prefill {} {name}: {} keys in {:.1} s, {errors} errors",
                        plan.workload.name(),
                        args.rows,
                        started.elapsed().as_secs_f64()
                    );
                }
                if round == 0 && args.warmup > 0.0 {
                    run_once(url, write_url, args.connections, args.warmup, plan, 0x5eed)
                        .await
                        .with_context(|| format!("warming up {name}"))?;
                }
                let seed = 0x9e37_79b9_7f4a_7c15 ^ round as u64;
                let pids = args.cpu.iter().find(|(n, _)| n == name).map(|(_, pids)| pids.as_slice());
                let cpu_before = pids.and_then(cpu_seconds);
                let o = run_once(url, write_url, args.connections, args.seconds, plan, seed)
                    .await
                    .with_context(|| format!("{} on {name}", plan.workload.name()))?;
                let cpu_us = match (pids.and_then(cpu_seconds), cpu_before) {
                    (Some(after), Some(before)) if o.ops > 0 => Some((after - before) * 1e6 / o.ops as f64),
                    _ => None,
                };
                eprintln!(
                    "round {} {} {name}: {:.0} ops/s, {} errors{}",
                    round + 1,
                    plan.workload.name(),
                    o.ops as f64 / o.elapsed.as_secs_f64().max(1e-9),
                    o.errors,
                    cpu_us.map(|us| format!(", {us:.1} cpu us/op")).unwrap_or_default()
                );
                let mut summary = Summary::from(o);
                summary.cpu_us = cpu_us;
                results[w][t].push(summary);
            }
        }
    }
    for (plan, per_target) in plans.iter().zip(results) {
        report(&args, plan.workload, per_target);
    }
    Ok(())
}
