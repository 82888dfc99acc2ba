//! `news`: the example application's command line. See examples/README.md.
//!
//! ```text
//! news load --url URL [--users N] [--stories N] [--votes N] [--comments N]
//! news workload --url URL [--seconds S] [--connections C] [--writes PCT] [--skew Z]
//! news compare --target NAME=URL --target NAME=URL [--rounds R] [--seconds S] [--connections C] [--writes PCT] [--skew Z]
//! news sql --url URL -e STATEMENT [--hide COLUMN]...   a statement's result as a table (freshet's SHOW CACHES, ...)
//! news freshness --url FRESHET --direct MARIADB [--story N]   a vote written on MariaDB, timed until freshet shows it
//! news keepup --url FRESHET_ADMIN --direct MARIADB [--connections C] [--seconds S] [--rate R] [--samples N] [--pid FRESHET_PID]
//!      MariaDB's commit rate at full speed vs freshet's apply rate; commit-to-visible p50/p99 at R writes/s;
//!      with --pid, also freshet's apply capacity: a backlog written while freshet is stopped, timed as it is applied
//! ```

use std::time::Duration;

use anyhow::{Context, bail};
use freshet_examples::{compare, keepup, load, probe, workload};

const USAGE: &str = "usage: news load --url URL [--users N --stories N --votes N --comments N]\n       news workload --url URL [--seconds S --connections C --writes PCT --skew Z]\n       news compare --target NAME=URL --target NAME=URL [--rounds R --seconds S --connections C --writes PCT --skew Z]\n       news sql --url URL -e STATEMENT [--hide COLUMN]...\n       news freshness --url FRESHET_URL --direct MARIADB_URL [--story N]\n       news keepup --url FRESHET_ADMIN_URL --direct MARIADB_URL [--connections C --seconds S --rate R --samples N --pid FRESHET_PID]";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let command = args.next().context(USAGE)?;
    let (mut url, mut sizes, mut opts) = (None, load::Sizes::default(), workload::Options::default());
    let (mut targets, mut rounds) = (Vec::new(), 2);
    let (mut statement, mut direct, mut story, mut hide) = (None, None, 1u64, Vec::new());
    let (mut rate, mut samples, mut pid) = (1000f64, 200usize, None);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        match (command.as_str(), flag.as_str()) {
            (_, "--url") => url = Some(value()?),
            ("load", "--users") => sizes.users = value()?.parse()?,
            ("load", "--stories") => sizes.stories = value()?.parse()?,
            ("load", "--votes") => sizes.votes = value()?.parse()?,
            ("load", "--comments") => sizes.comments = value()?.parse()?,
            ("workload" | "compare", "--seconds") => opts.duration = Duration::from_secs_f64(value()?.parse()?),
            ("workload" | "compare", "--connections") => opts.connections = value()?.parse()?,
            ("workload" | "compare", "--writes") => opts.writes = value()?.parse()?,
            ("workload" | "compare", "--skew") => opts.skew = value()?.parse()?,
            ("compare", "--rounds") => rounds = value()?.parse()?,
            ("sql", "-e" | "--execute") => statement = Some(value()?),
            ("sql", "--hide") => hide.push(value()?),
            ("freshness" | "keepup", "--direct") => direct = Some(value()?),
            ("keepup", "--connections") => opts.connections = value()?.parse()?,
            ("keepup", "--seconds") => opts.duration = Duration::from_secs_f64(value()?.parse()?),
            ("keepup", "--rate") => rate = value()?.parse()?,
            ("keepup", "--samples") => samples = value()?.parse()?,
            ("keepup", "--pid") => pid = Some(value()?.parse::<u32>()?),
            ("freshness", "--story") => story = value()?.parse()?,
            ("compare", "--target") => {
                let v = value()?;
                let (name, url) = v.split_once('=').with_context(|| format!("--target NAME=URL\n{USAGE}"))?;
                targets.push((name.to_string(), url.to_string()));
            }
            _ => bail!("unknown argument {flag} for {command}\n{USAGE}"),
        }
    }
    if command == "compare" {
        if targets.len() < 2 {
            bail!("compare needs two or more --target NAME=URL\n{USAGE}");
        }
        let comparison = compare::run(&targets, &opts, rounds).await?;
        println!(
            "{} connections, {}% writes, zipf skew {}, {} rounds of {:.1} s per target, interleaved",
            opts.connections,
            opts.writes,
            opts.skew,
            rounds,
            opts.duration.as_secs_f64()
        );
        println!("{comparison}");
        return Ok(());
    }
    let url = url.with_context(|| format!("--url is required\n{USAGE}"))?;
    match command.as_str() {
        "load" => {
            load::load(&url, sizes).await?;
            println!("loaded {sizes:?} into {}", freshet_examples::app::redact(&url));
        }
        "sql" => println!("{}", probe::table(&url, &statement.with_context(|| format!("sql needs -e STATEMENT\n{USAGE}"))?, &hide).await?),
        "freshness" => {
            let direct = direct.with_context(|| format!("freshness needs --direct URL\n{USAGE}"))?;
            let f = probe::freshness(&direct, &url, story, Duration::from_secs(5)).await?;
            match f.seen {
                Some((now, after)) => println!(
                    "story {} had {} votes through freshet; user {} voted directly on MariaDB; freshet answered {now} {:.1} ms later",
                    f.story,
                    f.before,
                    f.voter,
                    after.as_secs_f64() * 1e3
                ),
                None => println!(
                    "story {} had {} votes through freshet; user {} voted directly on MariaDB; freshet still answered {} after 5 s",
                    f.story, f.before, f.voter, f.before
                ),
            }
        }
        "keepup" => {
            let direct = direct.with_context(|| format!("keepup needs --direct URL\n{USAGE}"))?;
            let warming = std::time::Instant::now();
            keepup::warm(&url).await?;
            println!("every key of every cache read twice through freshet in {:.1} s", warming.elapsed().as_secs_f64());
            let b = keepup::burst(&direct, &url, opts.connections, opts.duration.as_secs_f64()).await?;
            println!(
                "full speed, {} connections: MariaDB committed {} transactions in {:.2} s ({:.0}/s); freshet applied {} in {:.2} s ({:.0}/s), \
                 all applied {:.0} ms after the last commit; largest reported lag {:.3} s",
                opts.connections,
                b.transactions,
                b.commit_seconds,
                b.transactions as f64 / b.commit_seconds,
                b.applied,
                b.apply_seconds,
                b.applied as f64 / b.apply_seconds,
                b.catch_up_after_last_commit.as_secs_f64() * 1e3,
                b.max_lag_seconds
            );
            if let Some(pid) = pid {
                let b = keepup::backlog(&direct, &url, pid, opts.connections, opts.duration.as_secs_f64()).await?;
                let (commit, apply) = (b.transactions as f64 / b.commit_seconds, b.transactions as f64 / b.apply_seconds);
                println!(
                    "backlog, {} connections: MariaDB committed {} transactions in {:.2} s ({commit:.0}/s) while freshet was stopped; \
                     freshet applied them in {:.2} s ({apply:.0}/s): apply rate {:.2} x MariaDB's commit rate",
                    opts.connections,
                    b.transactions,
                    b.commit_seconds,
                    b.apply_seconds,
                    apply / commit
                );
                if let Some(cpu) = b.apply_cpu_seconds {
                    println!(
                        "backlog: freshet used {cpu:.2} s of CPU catching up ({:.0} us per transaction, {:.2} cores)",
                        cpu * 1e6 / b.transactions as f64,
                        cpu / b.apply_seconds
                    );
                }
            }
            let (p50, p99, n) = keepup::visibility(&direct, &url, opts.connections, rate, samples).await?;
            println!(
                "{rate:.0} writes/s: a vote committed on MariaDB is visible through freshet after p50 {:.1} ms, p99 {:.1} ms ({n} samples)",
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3
            );
        }
        "workload" => {
            let report = workload::run(&url, opts.clone()).await?;
            println!(
                "{} connections, {}% writes, zipf skew {}, {:.1} s",
                opts.connections,
                opts.writes,
                opts.skew,
                report.elapsed.as_secs_f64()
            );
            println!("{report}");
        }
        _ => bail!("unknown command {command}\n{USAGE}"),
    }
    Ok(())
}
