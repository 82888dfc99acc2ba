//! `news workload`: the application's traffic. Each connection loops until the deadline: with
//! probability `writes` percent a write, otherwise one of the cached reads of
//! `news/freshet.toml` (chosen by [`ReadKind::weight`]), with story and user ids drawn with
//! Zipf skew `skew` (id 1 the hottest). Prepared statements throughout.
//!
//! Writes, equally often: a new vote (INSERT IGNORE, a repeat vote is a no-op), a vote
//! retraction (DELETE by primary key; often of a vote that does not exist), a new comment, and
//! a comment edit (new body, same story: it moves no row between cache keys). A deadlock
//! (1213) is retried, as an application would, up to [`DEADLOCK_RETRIES`] times; it is
//! counted in `retries`, not in `errors`.
//!
//! Reported per kind of operation: count, ops/s over the run, p50/p99 latency in µs, errors.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use mysql_async::prelude::*;
use mysql_async::{Conn, Statement};

use crate::app::{self, Param, ReadKind};
use crate::rng::{Rng, Zipf};

/// How often a deadlocked write is retried before it counts as an error.
pub const DEADLOCK_RETRIES: u32 = 3;
const ER_LOCK_DEADLOCK: u16 = 1213;

/// Workload parameters.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long to run.
    pub duration: Duration,
    /// Concurrent connections.
    pub connections: usize,
    /// Percentage of operations that are writes.
    pub writes: u32,
    /// Zipf exponent for story and user ids (0 = uniform).
    pub skew: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options { duration: Duration::from_secs(10), connections: 8, writes: 5, skew: 1.0 }
    }
}

/// The application's writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Write {
    NewVote,
    RetractVote,
    NewComment,
    EditComment,
}

impl Write {
    const ALL: [Write; 4] = [Write::NewVote, Write::RetractVote, Write::NewComment, Write::EditComment];

    fn name(self) -> &'static str {
        match self {
            Write::NewVote => "new_vote",
            Write::RetractVote => "retract_vote",
            Write::NewComment => "new_comment",
            Write::EditComment => "edit_comment",
        }
    }

    fn sql(self) -> &'static str {
        match self {
            Write::NewVote => "INSERT IGNORE INTO votes (user_id, story_id) VALUES (?, ?)",
            Write::RetractVote => "DELETE FROM votes WHERE user_id = ? AND story_id = ?",
            Write::NewComment => "INSERT INTO comments (story_id, author_id, body, created_at) VALUES (?, ?, ?, NOW())",
            Write::EditComment => "UPDATE comments SET body = ? WHERE id = ?",
        }
    }
}

/// What one kind of operation did.
#[derive(Clone, Debug, Default)]
pub struct KindReport {
    /// Cache name for reads, `new_vote` etc. for writes.
    pub name: String,
    /// Completed operations.
    pub ops: u64,
    /// Failed operations.
    pub errors: u64,
    /// Deadlocks retried.
    pub retries: u64,
    /// The first error's message, if any.
    pub first_error: Option<String>,
    latencies_us: Vec<u32>,
}

impl KindReport {
    /// The `p`-quantile latency (0.5, 0.99), µs; 0 without operations.
    pub fn percentile_us(&self, p: f64) -> u32 {
        let l = &self.latencies_us;
        l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1))).copied().unwrap_or(0)
    }

    /// Adds `other`'s counts and latencies (same kind) to these; the latencies stay sorted.
    pub fn absorb(&mut self, other: &KindReport) {
        self.ops += other.ops;
        self.errors += other.errors;
        self.retries += other.retries;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        self.latencies_us.extend_from_slice(&other.latencies_us);
        self.latencies_us.sort_unstable();
    }
}

/// The whole run.
#[derive(Clone, Debug)]
pub struct Report {
    /// Wall time of the slowest connection.
    pub elapsed: Duration,
    /// Reads in [`app::READS`] order, then writes.
    pub kinds: Vec<KindReport>,
}

impl Report {
    /// Completed operations of all kinds.
    pub fn ops(&self) -> u64 {
        self.kinds.iter().map(|k| k.ops).sum()
    }
    /// Failed operations of all kinds.
    pub fn errors(&self) -> u64 {
        self.kinds.iter().map(|k| k.errors).sum()
    }
    /// Adds another run's report (same workload, same target): times and counts add up,
    /// latencies pool.
    pub fn merge(&mut self, other: &Report) {
        self.elapsed += other.elapsed;
        for (into, from) in self.kinds.iter_mut().zip(&other.kinds) {
            into.absorb(from);
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        writeln!(f, "{:<18} {:>9} {:>9} {:>8} {:>8} {:>7} {:>7}", "kind", "ops", "ops/s", "p50 us", "p99 us", "errors", "retries")?;
        for k in &self.kinds {
            let (p50, p99) = (k.percentile_us(0.5), k.percentile_us(0.99));
            let qps = k.ops as f64 / secs;
            writeln!(f, "{:<18} {:>9} {:>9.0} {:>8} {:>8} {:>7} {:>7}", k.name, k.ops, qps, p50, p99, k.errors, k.retries)?;
        }
        write!(f, "{:<18} {:>9} {:>9.0} {:>8} {:>8} {:>7}", "total", self.ops(), self.ops() as f64 / secs, "", "", self.errors())
    }
}

/// Id ranges the workload draws from, read once at start.
struct Shared {
    reads: Vec<(ReadKind, String)>,
    read_weight_total: u32,
    stories: Zipf,
    users: Zipf,
    user_count: u64,
    comment_max: u64,
    opts: Options,
}

/// Runs the workload against `url` (MariaDB directly, or freshet in front of it).
pub async fn run(url: &str, opts: Options) -> anyhow::Result<Report> {
    let mut conn = app::connect(url).await?;
    let max = |t: &str| format!("SELECT COALESCE(MAX(id), 0) FROM {t}");
    let story_count: u64 = conn.query_first(max("stories")).await?.unwrap_or(0);
    let user_count: u64 = conn.query_first(max("users")).await?.unwrap_or(0);
    let comment_max: u64 = conn.query_first(max("comments")).await?.unwrap_or(0);
    conn.disconnect().await?;
    anyhow::ensure!(story_count > 0 && user_count > 0, "no stories or users: run `news load` first");
    let reads = app::read_queries()?;
    let shared = Arc::new(Shared {
        read_weight_total: reads.iter().map(|(k, _)| k.weight).sum(),
        reads,
        stories: Zipf::new(story_count, opts.skew),
        users: Zipf::new(user_count, opts.skew),
        user_count,
        comment_max,
        opts: opts.clone(),
    });
    let until = Instant::now() + opts.duration;
    let tasks: Vec<_> = (0..opts.connections)
        .map(|i| tokio::spawn(worker(url.to_string(), shared.clone(), 0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1), until)))
        .collect();
    let mut kinds: Vec<KindReport> = shared
        .reads
        .iter()
        .map(|(k, _)| k.cache)
        .chain(Write::ALL.map(Write::name))
        .map(|n| KindReport { name: n.into(), ..Default::default() })
        .collect();
    let mut elapsed = Duration::ZERO;
    for t in tasks {
        let (worker_kinds, took) = t.await.context("workload task panicked")??;
        elapsed = elapsed.max(took);
        for (into, from) in kinds.iter_mut().zip(worker_kinds) {
            into.absorb(&from);
        }
    }
    Ok(Report { elapsed, kinds })
}

async fn worker(url: String, shared: Arc<Shared>, seed: u64, until: Instant) -> anyhow::Result<(Vec<KindReport>, Duration)> {
    let mut conn = app::connect(&url).await?;
    let mut reads = Vec::new();
    for (kind, sql) in &shared.reads {
        reads.push(conn.prep(sql).await.with_context(|| format!("preparing {}", kind.cache))?);
    }
    let mut writes = Vec::new();
    for w in Write::ALL {
        writes.push(conn.prep(w.sql()).await?);
    }
    let mut kinds: Vec<KindReport> = (0..reads.len() + writes.len()).map(|_| KindReport::default()).collect();
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    while Instant::now() < until {
        let t = Instant::now();
        let (index, result) = if rng.percent(shared.opts.writes) {
            let w = (rng.next_u64() % Write::ALL.len() as u64) as usize;
            let mut tries = 0;
            loop {
                let r = write(&mut conn, &writes[w], Write::ALL[w], &shared, &mut rng).await;
                match r {
                    Err(mysql_async::Error::Server(ref e)) if e.code == ER_LOCK_DEADLOCK && tries < DEADLOCK_RETRIES => {
                        tries += 1;
                        kinds[reads.len() + w].retries += 1;
                    }
                    r => break (reads.len() + w, r),
                }
            }
        } else {
            let r = pick_read(&shared, &mut rng);
            (r, read(&mut conn, &reads[r], shared.reads[r].0.param, &shared, &mut rng).await)
        };
        let k = &mut kinds[index];
        k.latencies_us.push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
        match result {
            Ok(()) => k.ops += 1,
            Err(e) => {
                k.errors += 1;
                k.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    let took = started.elapsed();
    conn.disconnect().await?;
    Ok((kinds, took))
}

fn pick_read(shared: &Shared, rng: &mut Rng) -> usize {
    let mut x = (rng.next_u64() % u64::from(shared.read_weight_total.max(1))) as u32;
    for (i, (kind, _)) in shared.reads.iter().enumerate() {
        if x < kind.weight {
            return i;
        }
        x -= kind.weight;
    }
    0
}

async fn read(conn: &mut Conn, stmt: &Statement, param: Param, shared: &Shared, rng: &mut Rng) -> Result<(), mysql_async::Error> {
    // Rows are read in full (as an application rendering a page would) and then dropped.
    let rows: Vec<mysql_async::Row> = match param {
        Param::Story => conn.exec(stmt, (shared.stories.sample(rng),)).await?,
        Param::User => conn.exec(stmt, (shared.users.sample(rng),)).await?,
        Param::None => conn.exec(stmt, ()).await?,
    };
    drop(rows);
    Ok(())
}

async fn write(conn: &mut Conn, stmt: &Statement, which: Write, shared: &Shared, rng: &mut Rng) -> Result<(), mysql_async::Error> {
    let (user, story) = (rng.uniform(shared.user_count), shared.stories.sample(rng));
    match which {
        Write::NewVote | Write::RetractVote => conn.exec_drop(stmt, (user, story)).await,
        Write::NewComment => conn.exec_drop(stmt, (story, user, format!("A new comment by user{user}"))).await,
        Write::EditComment => {
            let id = rng.uniform(shared.comment_max);
            conn.exec_drop(stmt, (format!("Comment {id}, edited by its author"), id)).await
        }
    }
}
