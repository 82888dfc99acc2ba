//! Faults of the server under a running freshet (issue 11): the news example's cached queries
//! served by freshet in this process, writers straight to MariaDB, readers through freshet, and
//! the server stopped mid-load — by SIGTERM (a clean shutdown) and by SIGKILL (a crash) — for a
//! few seconds, then started again. After the writers stop and freshet has applied the binlog up
//! to the server's position, every sampled cached answer must equal MariaDB's: zero mismatches.
//! While the server is away, freshet must say so: not caught up, no lag it could vouch for, the
//! hit path's gate closed (no read answered from the cache), `/health` not 200 (`/ready` stays
//! 200 by design: freshet relays, so the application's pod stays in service; ARCHITECTURE.md).
//!
//! A restart disturbs every client of the server, so this test runs its own MariaDB (the
//! project's `scripts/mariadb.sh` with a datadir under the target directory and a free port),
//! never the shared test server other tests use at the same time. It needs `mariadbd`
//! installed, as every test here needs a MariaDB; `FRESHET_TEST_MYSQL_URL` is not read.
//!
//! A third round applies the other faults one after another under the same load (see
//! [`chaos`]: binlog connection killed, idle and fill connections killed, binary logs flushed and
//! the resume position purged, RESET MASTER, DDL, a big, a long-open and an XA transaction), with the same
//! comparison after catch-up. Their finer points (exactly-once delivery through kills, purge
//! reported as position-gone, XA commits delivered and oversized transactions reported untrusted) are tested on
//! the stream alone in `cdc/tests` (resume, rotation, outage, ddl, limits, xa).
//!
//! A second test runs the three rounds with fills from the local replica (`[fill] source =
//! "replica"`), which must answer fills in each round and come through them as the views do.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use freshet_examples::app;
use freshet_examples::load;
use freshet_testkit::mariadb::PrivateServer;
use mysql_async::prelude::*;

const DB: &str = "news_faults";
/// Large enough that most partitions stay in memory across the restart: a partition that
/// survives is exactly what a wrong position would leave stale.
const MEMORY: &str = "64MiB";
const MAX_LAG: &str = "5s";
const WRITERS: usize = 2;
const READERS: usize = 3;
/// Load before the server is stopped, how long it stays down, load after it is back.
const BEFORE: Duration = Duration::from_secs(4);
const DOWN: Duration = Duration::from_secs(4);
const AFTER: Duration = Duration::from_secs(5);
/// How long the binlog may take to catch up once the writers stop.
const CATCH_UP: Duration = Duration::from_secs(30);
/// How long freshet may take to notice that the server went away (its connections are closed
/// by the kernel at once, so this is generous).
const NOTICE: Duration = Duration::from_millis(1500);

/// The status code of `GET path` on freshet's admin listener (0 when none arrives in 5 s).
async fn http_status(addr: std::net::SocketAddr, path: &str) -> u16 {
    freshet_testkit::http::status_within(addr, path, Duration::from_secs(5)).await
}

/// What freshet said about itself while the server was down, sampled until `until`; each
/// entry is a claim that was false.
async fn untruthful_during_outage(freshet: &Freshet, until: Instant) -> Vec<String> {
    let engine = &freshet.engine;
    let mut lies = Vec::new();
    let mut samples = 0;
    let hits = engine.counters.hits.get();
    while Instant::now() < until {
        samples += 1;
        if engine.caught_up() {
            lies.push(format!("caught_up = yes with the server down (lag {:?})", engine.lag()));
        }
        if engine.fresh() {
            lies.push("the hit path's gate was open with the server down".to_string());
        }
        if let Some(lag) = engine.lag() {
            lies.push(format!("a lag of {lag:?} reported with the server down"));
        }
        let health = http_status(freshet.admin, "/health").await;
        if health == 200 {
            lies.push("/health answered 200 with the server down".to_string());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(samples > 3, "too few samples of the outage");
    let served = engine.counters.hits.get() - hits;
    if served > 0 {
        lies.push(format!("{served} reads answered from the cache with the server down"));
    }
    lies.dedup();
    lies
}

/// What a round does to the server mid-load.
#[derive(Clone, Copy)]
enum Fault {
    /// Stop it with this signal for [`DOWN`], then start it again.
    Stop(&'static str),
    /// The other faults of the issue, one after another while it runs: see [`chaos`].
    Chaos,
}

/// One round: load, the fault, load again, catch-up, the comparison. Returns what went wrong.
async fn round(server: &Arc<PrivateServer>, freshet: &Freshet, url: &str, fault: Fault, seed: u64) -> Vec<String> {
    let signal = match fault {
        Fault::Stop(signal) => signal,
        Fault::Chaos => "chaos",
    };
    let engine = freshet.engine.clone();
    let replica_fills = || engine.replica.get().map(|r| r.figures().fills);
    let fills_before = replica_fills();
    let queries = Arc::new(app::read_queries().unwrap());
    let mut direct = reconnect(url, Instant::now(), None).await;
    let world = Arc::new(World::continuing(&mut direct, u64::MAX, true).await);
    drop(direct);
    let started = Instant::now();
    let until = started + BEFORE + DOWN + AFTER;
    let writers: Vec<_> = (0..WRITERS).map(|i| tokio::spawn(writer(url.to_string(), world.clone(), seed + i as u64, until))).collect();
    let readers: Vec<_> =
        (0..READERS).map(|i| tokio::spawn(reader(freshet.url.clone(), world.clone(), queries.clone(), seed + 100 + i as u64))).collect();

    tokio::time::sleep(BEFORE).await;
    let before = world.transactions.load(Ordering::Relaxed);
    let mut problems = Vec::new();
    match fault {
        Fault::Stop(signal) => {
            let s = server.clone();
            tokio::task::spawn_blocking(move || s.stop_by(signal)).await.unwrap();
            let down_at = Instant::now();
            tokio::time::sleep(NOTICE).await;
            problems = untruthful_during_outage(freshet, down_at + DOWN).await;
            let s = server.clone();
            tokio::task::spawn_blocking(move || s.start_again()).await.unwrap();
            eprintln!("{signal}: server down for {:.1?} after {before} transactions", down_at.elapsed());
        }
        Fault::Chaos => chaos(&server.url, url, DOWN).await,
    }

    for w in writers {
        w.await.expect("writer task");
    }
    world.writing.store(false, Ordering::Relaxed);
    for r in readers {
        r.await.expect("reader task");
    }
    eprintln!(
        "{signal}: {} transactions, {} reads, {} statements failed while the server was away; relayed: {}; stream restarts {}",
        world.transactions.load(Ordering::Relaxed),
        world.reads.load(Ordering::Relaxed),
        world.fault_errors.load(Ordering::Relaxed),
        relayed(&engine),
        engine.counters.restarts.get(),
    );
    let mut direct = reconnect(url, Instant::now(), None).await;
    catch_up(&engine, &mut direct, CATCH_UP).await;
    let deadline = Instant::now() + CATCH_UP;
    while !engine.caught_up() {
        if Instant::now() > deadline {
            problems.push(format!("{signal}: not caught up {CATCH_UP:?} after applying the server's position (lag {:?})", engine.lag()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sample = sample(&world, &queries);
    let verdicts = compare_sample(freshet, url, &sample).await;
    if let Some(r) = engine.replica.get() {
        eprintln!("{signal}: the replica: {:?}", r.figures());
    }
    let replica_answered = replica_fills() > fills_before;
    eprintln!(
        "{signal}: compared {} answers, {} mismatches, {} never answered from the cache, {:.1?} for the round",
        verdicts.compared,
        verdicts.mismatches.len(),
        verdicts.never_cached.len(),
        started.elapsed()
    );
    assert!(world.transactions.load(Ordering::Relaxed) > before && before >= 100, "{signal}: the writers did too little");
    problems.extend(problems_of(signal, &verdicts, sample.len()));
    if fills_before.is_some() && !replica_answered {
        problems.push(format!("{signal}: the replica answered no fill in the round"));
    }
    problems
}

/// The other faults, while the writers and readers go on, spread over about `span`:
/// the binlog connection killed repeatedly; every idle connection to the database killed (fill
/// connections among them; writers and readers reconnect); binary logs flushed and purged up
/// to the current file just after the binlog connection was killed (its resume position is
/// likely gone); DDL on a table cached queries read (a column added and dropped again); a
/// transaction of ~20,000 rows; a transaction held open for two seconds; an XA transaction
/// committed in two phases.
async fn chaos(server_url: &str, url: &str, span: Duration) {
    let step = span / 8;
    let mut admin = reconnect(server_url, Instant::now(), None).await;
    let kill_where = async |admin: &mut mysql_async::Conn, condition: &str| {
        let ids: Vec<u64> = admin
            .query(format!("SELECT ID FROM information_schema.PROCESSLIST WHERE {condition} AND ID <> CONNECTION_ID()"))
            .await
            .unwrap();
        for id in &ids {
            let _ = admin.query_drop(format!("KILL {id}")).await;
        }
        ids.len()
    };
    let mut killed_dumps = 0;
    for _ in 0..3 {
        killed_dumps += kill_where(&mut admin, "COMMAND LIKE 'Binlog Dump%'").await;
        tokio::time::sleep(step / 3).await;
    }
    let killed_idle = kill_where(&mut admin, &format!("DB = '{DB}' AND COMMAND = 'Sleep'")).await;
    tokio::time::sleep(step).await;
    // Purge while the stream is away: it resumes where it stopped, if that still exists.
    killed_dumps += kill_where(&mut admin, "COMMAND LIKE 'Binlog Dump%'").await;
    for _ in 0..3 {
        admin.query_drop("FLUSH BINARY LOGS").await.unwrap();
    }
    let status: mysql_async::Row = admin.query_first("SHOW MASTER STATUS").await.unwrap().unwrap();
    let current: String = status.get(0).unwrap();
    admin.query_drop(format!("PURGE BINARY LOGS TO '{current}'")).await.unwrap();
    tokio::time::sleep(step).await;
    // Every binary log deleted and numbering started again: positions go back.
    admin.query_drop("RESET MASTER").await.unwrap();
    tokio::time::sleep(step).await;
    let mut app = reconnect(url, Instant::now(), None).await;
    app.query_drop("ALTER TABLE users ADD COLUMN chaos INT NOT NULL DEFAULT 7").await.unwrap();
    tokio::time::sleep(step).await;
    app.query_drop("ALTER TABLE users DROP COLUMN chaos").await.unwrap();
    // One big transaction: votes of the first 40 users on every story they have not voted on.
    app.query_drop("INSERT IGNORE INTO votes (user_id, story_id) SELECT u.id, s.id FROM users u JOIN stories s WHERE u.id <= 40")
        .await
        .unwrap();
    tokio::time::sleep(step).await;
    let held = async {
        let mut c = reconnect(url, Instant::now(), None).await;
        c.query_drop("BEGIN").await.unwrap();
        c.query_drop("UPDATE stories SET title = CONCAT(title, '!') WHERE id = 3").await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        c.query_drop("COMMIT").await.unwrap();
    };
    let xa = async {
        let mut c = reconnect(url, Instant::now(), None).await;
        for sql in [
            "XA START 'chaos'",
            "DELETE FROM votes WHERE story_id = 2 LIMIT 5",
            "XA END 'chaos'",
            "XA PREPARE 'chaos'",
            "XA COMMIT 'chaos'",
        ] {
            c.query_drop(sql).await.unwrap();
        }
    };
    tokio::join!(held, xa);
    eprintln!(
        "chaos: {killed_dumps} binlog connections and {killed_idle} idle connections killed, binlogs flushed and purged to {current}, RESET MASTER, DDL, a big, a long and an XA transaction"
    );
}

fn problems_of(signal: &str, verdicts: &Verdicts, sample: usize) -> Vec<String> {
    let mut problems = Vec::new();
    if !verdicts.never_cached.is_empty() {
        problems.push(format!("{signal}: never answered from the cache:\n{}", verdicts.never_cached.join("\n")));
    }
    if verdicts.compared < 2 * sample as u64 {
        problems.push(format!("{signal}: compared only {} of {}", verdicts.compared, 2 * sample));
    }
    if !verdicts.mismatches.is_empty() {
        let shown: Vec<&String> = verdicts.mismatches.iter().take(10).collect();
        problems.push(format!(
            "{signal}: {} cached answers differ from MariaDB's after catch-up; the first:\n{}",
            verdicts.mismatches.len(),
            shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
        ));
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cached_answers_equal_mariadbs_after_the_server_restarts_mid_load() {
    faults(None).await;
}

/// The same with fills from the local replica: its position, copies and rewrites must come
/// through the restarts, the purge, RESET MASTER and the DDL as the views do.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cached_answers_filled_from_the_replica_equal_mariadbs_after_the_server_restarts_mid_load() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("faults-replica-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    faults(Some(&path)).await;
    let _ = std::fs::remove_dir_all(&path);
}

/// The tests of this file restart a server of their own: one at a time, each on its own.
static SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn faults(replica: Option<&std::path::Path>) {
    let _one = SERVER.lock().await;
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).with_test_writer().try_init();
    let started = Instant::now();
    let server = Arc::new(PrivateServer::start(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("faults-mariadb"), ""));
    let url = url_for(&server.url, DB);
    let mut admin = app::connect(&server.url).await.expect("connect to the private MariaDB");
    admin.query_drop(format!("DROP DATABASE IF EXISTS {DB}")).await.unwrap();
    admin.query_drop(format!("CREATE DATABASE {DB} DEFAULT CHARSET utf8mb4")).await.unwrap();
    drop(admin);
    load::load(&url, SIZES).await.expect("news load");
    let freshet = start_freshet(&url, DB, MEMORY, MAX_LAG, replica).await;
    eprintln!("private server, load and freshet in {:.1?}", started.elapsed());

    let mut problems = round(&server, &freshet, &url, Fault::Stop("TERM"), 0xFA17).await;
    problems.extend(round(&server, &freshet, &url, Fault::Stop("KILL"), 0xDEAD).await);
    problems.extend(round(&server, &freshet, &url, Fault::Chaos, 0xC4A05).await);
    eprintln!("{:.1?} in all", started.elapsed());
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}
