//! Does freshet keep up with MariaDB's writes, and how soon is a write visible through it?
//! (issue 11, item 4; a measurement for `news keepup`, never a test assertion.)
//!
//! - [`warm`] first: every key of every news cache is read through freshet (twice: the first
//!   read of a key starts its fill), so that writes reach filled state and cost what they cost
//!   in production; on cold caches every change stops at a hole and applying is nearly free.
//! - [`burst`]: writers on MariaDB as fast as it commits (vote added, vote removed: one row per
//!   transaction) for a while; freshet's `SHOW FRESHET STATUS` is read every 100 ms. Reports
//!   MariaDB's commit rate, freshet's apply rate over the same run (transactions committed,
//!   over the time from the first commit until freshet's applied position reached the server's
//!   end of binlog after the last one), the largest lag freshet
//!   reported, and how long after the last commit freshet had applied everything.
//! - [`backlog`]: freshet's apply capacity. freshet is stopped (SIGSTOP; its binlog
//!   connection stays open, the server's dump thread waits on it), writers commit at MariaDB's
//!   full speed for a while (MariaDB's commit rate, with nothing else competing), freshet is
//!   continued (SIGCONT) and timed until it has applied every one of those transactions (its
//!   apply rate, with nothing else competing). The ratio of the two is how much faster freshet
//!   applies than MariaDB commits on this machine; keep the burst well under the server's
//!   `net_write_timeout` (60 s), after which it drops the stalled dump connection. Also the
//!   CPU time freshet's process used while catching up (Linux: `/proc/PID/stat`), per
//!   transaction: on a machine shared with other work the wall-clock rate swings with what
//!   else runs, the CPU per transaction much less.
//! - [`visibility`]: writers paced to a total rate, and a probe that adds a vote directly and
//!   reads the story's count through freshet until it changes, many times: the
//!   commit-to-visible latency's p50 and p99.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use mysql_async::Row;
use mysql_async::prelude::*;

use crate::{app, probe};

/// See the module header: reads every story, user and the top list through `via`.
pub async fn warm(via: &str) -> anyhow::Result<()> {
    let mut conn = app::connect(via).await?;
    let users: u64 = conn.query_first("SELECT MAX(id) FROM users").await?.unwrap_or(1);
    let stories: u64 = conn.query_first("SELECT MAX(id) FROM stories").await?.unwrap_or(1);
    for _ in 0..2 {
        for (kind, sql) in app::read_queries()? {
            let stmt = conn.prep(&sql).await?;
            match kind.param {
                app::Param::Story => {
                    for id in 1..=stories {
                        conn.exec_drop(&stmt, (id,)).await?;
                    }
                }
                app::Param::User => {
                    for id in 1..=users {
                        conn.exec_drop(&stmt, (id,)).await?;
                    }
                }
                app::Param::None => conn.exec_drop(&stmt, ()).await?,
            }
        }
    }
    conn.disconnect().await?;
    Ok(())
}

/// What [`burst`] measured.
#[derive(Debug)]
pub struct Burst {
    pub transactions: u64,
    pub commit_seconds: f64,
    /// Transactions freshet applied between the first commit and its catching up.
    pub applied: u64,
    pub apply_seconds: f64,
    pub max_lag_seconds: f64,
    pub catch_up_after_last_commit: Duration,
}

/// `name`'s value in freshet's `SHOW FRESHET STATUS`.
async fn status(admin: &mut mysql_async::Conn, name: &str) -> anyhow::Result<String> {
    let rows: Vec<Row> = admin.query("SHOW FRESHET STATUS").await?;
    rows.into_iter()
        .find_map(|r| {
            let (k, v): (String, String) = mysql_async::from_row(r);
            (k == name).then_some(v)
        })
        .with_context(|| format!("SHOW FRESHET STATUS has no {name}"))
}

/// One writer: vote on a story, retract it, as fast as the server allows or at `per_second`.
async fn vote_writer(url: String, seed: u64, until: Instant, per_second: Option<f64>, count: Arc<AtomicU64>) -> anyhow::Result<()> {
    let mut conn = app::connect(&url).await?;
    let users: u64 = conn.query_first("SELECT MAX(id) FROM users").await?.unwrap_or(1);
    let stories: u64 = conn.query_first("SELECT MAX(id) FROM stories").await?.unwrap_or(1);
    let mut rng = crate::rng::Rng::new(seed);
    let started = Instant::now();
    let mut done = 0u64;
    while Instant::now() < until {
        let (user, story) = (1 + rng.uniform(users), 1 + rng.uniform(stories));
        // A statement that changes no row writes nothing to the binlog: count only the others.
        conn.exec_drop("INSERT IGNORE INTO votes (user_id, story_id) VALUES (?, ?)", (user, story)).await?;
        let mut written = u64::from(conn.affected_rows() > 0);
        conn.exec_drop("DELETE FROM votes WHERE user_id = ? AND story_id = ?", (user, story)).await?;
        written += u64::from(conn.affected_rows() > 0);
        done += 2;
        count.fetch_add(written, Ordering::Relaxed);
        if let Some(rate) = per_second {
            let due = started + Duration::from_secs_f64(done as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
    }
    Ok(())
}

/// See the module header. `freshet_admin`: a freshet URL whose user may run admin SQL.
pub async fn burst(direct: &str, freshet_admin: &str, connections: usize, seconds: f64) -> anyhow::Result<Burst> {
    let mut admin = app::connect(freshet_admin).await?;
    let applied_at_start: u64 = status(&mut admin, "transactions_applied").await?.parse()?;
    let count = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(seconds);
    let writers: Vec<_> =
        (0..connections).map(|i| tokio::spawn(vote_writer(direct.to_string(), 77 + i as u64, until, None, count.clone()))).collect();
    let mut max_lag = 0f64;
    while Instant::now() < until {
        if let Ok(l) = status(&mut admin, "lag_seconds").await?.parse::<f64>() {
            max_lag = max_lag.max(l);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for w in writers {
        w.await??;
    }
    let committed = started.elapsed();
    let transactions = count.load(Ordering::Relaxed);
    let end = server_end(direct).await?;
    // Caught up: freshet's applied position has reached the server's end after the last commit.
    loop {
        let at = freshet_at(&mut admin).await?;
        if let Ok(l) = status(&mut admin, "lag_seconds").await?.parse::<f64>() {
            max_lag = max_lag.max(l);
        }
        if at >= end {
            let all = started.elapsed();
            let applied: u64 = status(&mut admin, "transactions_applied").await?.parse()?;
            return Ok(Burst {
                transactions,
                commit_seconds: committed.as_secs_f64(),
                applied: applied - applied_at_start,
                apply_seconds: all.as_secs_f64(),
                max_lag_seconds: max_lag,
                catch_up_after_last_commit: all - committed,
            });
        }
        anyhow::ensure!(
            started.elapsed() < committed * 20 + Duration::from_secs(60),
            "freshet did not catch up: at {at:?}, the server's end is {end:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The server's end of binlog (`SHOW MASTER STATUS`) as (file, offset).
async fn server_end(direct: &str) -> anyhow::Result<(String, u64)> {
    let mut conn = app::connect(direct).await?;
    let row: Row = conn.query_first("SHOW MASTER STATUS").await?.context("binary logging is off")?;
    let (file, offset): (String, u64) = (row.get(0).context("no file")?, row.get(1).context("no position")?);
    conn.disconnect().await?;
    Ok((file, offset))
}

/// freshet's applied position (`binlog_position` of SHOW FRESHET STATUS) as (file, offset):
/// file names of one server compare in order (zero-padded sequence numbers).
async fn freshet_at(admin: &mut mysql_async::Conn) -> anyhow::Result<(String, u64)> {
    let at = status(admin, "binlog_position").await?;
    let (file, offset) = at.rsplit_once(':').with_context(|| format!("binlog_position {at:?}"))?;
    Ok((file.to_string(), offset.parse()?))
}

/// What [`backlog`] measured.
#[derive(Debug)]
pub struct Backlog {
    pub transactions: u64,
    pub commit_seconds: f64,
    /// From SIGCONT until freshet's applied position reached the server's end.
    pub apply_seconds: f64,
    /// CPU time (user + system) freshet's process used meanwhile, if it could be read.
    pub apply_cpu_seconds: Option<f64>,
}

/// CPU time (user + system, all threads) process `pid` has used so far, in seconds, from
/// `/proc/PID/stat` (Linux, where it is counted in USER_HZ ticks: 100 per second). Also what
/// freshet-load's `--cpu` reads.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3, `state`;
    // utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Sends `signal` (`STOP` or `CONT`) to process `pid`.
fn signal(pid: u32, signal: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status()?;
    anyhow::ensure!(status.success(), "kill -{signal} {pid} failed");
    Ok(())
}

/// See the module header. `pid`: freshet's process; `freshet_admin` as for [`burst`].
pub async fn backlog(direct: &str, freshet_admin: &str, pid: u32, connections: usize, seconds: f64) -> anyhow::Result<Backlog> {
    let mut admin = app::connect(freshet_admin).await?;
    signal(pid, "STOP")?;
    let count = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(seconds);
    let writers: Vec<_> =
        (0..connections).map(|i| tokio::spawn(vote_writer(direct.to_string(), 177 + i as u64, until, None, count.clone()))).collect();
    let mut failed = None;
    for w in writers {
        if let Err(e) = w.await.map_err(anyhow::Error::from).and_then(|r| r) {
            failed = Some(e);
        }
    }
    let commit_seconds = started.elapsed().as_secs_f64();
    let transactions = count.load(Ordering::Relaxed);
    // Continued whatever happened: a stopped freshet left behind would look like a hang.
    let cpu_before = cpu_seconds(pid);
    signal(pid, "CONT")?;
    if let Some(e) = failed {
        return Err(e);
    }
    let end = server_end(direct).await?;
    let resumed = Instant::now();
    loop {
        let at = freshet_at(&mut admin).await?;
        if at >= end {
            let apply_seconds = resumed.elapsed().as_secs_f64();
            let apply_cpu_seconds = cpu_before.zip(cpu_seconds(pid)).map(|(a, b)| b - a);
            return Ok(Backlog { transactions, commit_seconds, apply_seconds, apply_cpu_seconds });
        }
        anyhow::ensure!(
            resumed.elapsed() < Duration::from_secs(600),
            "freshet did not catch up within 10 minutes: at {at:?}, the server's end is {end:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// See the module header: (p50, p99, samples) of commit-to-visible latency while writers add
/// `rate` writes per second.
pub async fn visibility(
    direct: &str,
    via: &str,
    connections: usize,
    rate: f64,
    samples: usize,
) -> anyhow::Result<(Duration, Duration, usize)> {
    let count = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(3600);
    let per = rate / connections as f64;
    let writers: Vec<_> =
        (0..connections).map(|i| tokio::spawn(vote_writer(direct.to_string(), 991 + i as u64, until, Some(per), count.clone()))).collect();
    let mut seen = Vec::with_capacity(samples);
    for i in 0..samples {
        let f = probe::freshness(direct, via, 1 + (i as u64 % 50), Duration::from_secs(10)).await?;
        if let Some((_, after)) = f.seen {
            seen.push(after);
        }
    }
    for w in writers {
        w.abort();
    }
    anyhow::ensure!(!seen.is_empty(), "no write became visible");
    seen.sort();
    let at = |q: f64| seen[((seen.len() - 1) as f64 * q).round() as usize];
    Ok((at(0.5), at(0.99), seen.len()))
}
