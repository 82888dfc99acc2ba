//! Correctness under concurrency, end to end (issue 5, item 8): the news example's four cached
//! queries, served by freshet running in this process in front of the real MariaDB started by
//! `scripts/mariadb.sh`, while writers change the tables directly on MariaDB and a memory
//! budget below the readers' working set keeps evicting and refilling partitions.
//!
//! The property checked is the last invariant of partial state in ARCHITECTURE.md: after the
//! writes stop and the binlog is applied up to the server's position, every filled entry
//! equals what the upstream returns for the same query and parameters. Each cached query is
//! read for a sample of keys (the storm's last reads first, as those partitions are the likeliest
//! to have been maintained incrementally rather than refilled; then stories that were hot, new,
//! deleted or never existed; users likewise; the front page), through freshet until freshet
//! answers from its cache, and compared with MariaDB's own answer to the same SQL: rows as values,
//! in order where the query orders them, as multisets otherwise, for both the text protocol
//! (literals) and the binary one (prepared statements). One mismatch fails the test.
//!
//! The writes cover every way a row can enter, leave or move between cache keys: votes cast,
//! retracted and moved to another story; comments written, deleted, edited and moved; users
//! renamed (a dimension of `story_comments`), including case-only and trailing-space renames
//! that a collation-aware comparison would call equal; stories retitled the same way, moved to
//! another author (karma moves between users), created, and deleted with their votes and
//! comments in one transaction; new users; and transactions mixing several of these.
//!
//! Runs once per fill source: `upstream` (SQL on MariaDB) and `replica` (the local RocksDB copy,
//! waited for before the writes start, so that misses fill from it; its fills are counted).
//! Each run works in its own database (`news_correctness`, `news_correctness_replica`),
//! recreated at the start and left in place afterwards so that a failure can be inspected.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use freshet_examples::app;
use freshet_examples::load;
use mysql_async::prelude::*;

/// Below what the readers touch (3.4 MB of partitions still held at the end of a storm that
/// 4 MiB no longer made evict, as the budget counts them since session 23's smaller
/// partitions), yet above top_stories' single partition (about 0.9 MB; a partition larger than
/// the whole budget is evicted as soon as it is filled and never answers): evictions and
/// refills all along.
const MEMORY: &str = "2MiB";
const WRITERS: usize = 3;
const READERS: usize = 4;
/// The writers stop after this long or this many transactions, whichever comes first (the
/// cap bounds how far the tables, and top_stories' single partition, grow).
const WRITE_FOR: Duration = Duration::from_secs(10);
const MAX_TRANSACTIONS: u64 = 5_000;
/// How long the binlog may take to catch up once the writers stop.
const CATCH_UP: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cached_answers_equal_mariadbs_after_concurrent_writes_evictions_and_refills() {
    storm("news_correctness", None).await;
}

/// The same with `[fill] source = "replica"`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replica_filled_answers_equal_mariadbs_after_concurrent_writes_evictions_and_refills() {
    let dir = std::env::temp_dir().join(format!("freshet-correctness-replica-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    storm("news_correctness_replica", Some(&dir)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// One storm at a time: the two sources' runs would otherwise split two cores between them.
static ONE_STORM: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn storm(db: &str, replica: Option<&std::path::Path>) {
    let _alone = ONE_STORM.lock().await;
    let started = Instant::now();
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).with_test_writer().try_init();
    let server = server_url();
    let url = url_for(&server, db);
    let mut admin = app::connect(&server).await.expect("connect to the test MariaDB");
    admin.query_drop(format!("DROP DATABASE IF EXISTS {db}")).await.unwrap();
    admin.query_drop(format!("CREATE DATABASE {db} DEFAULT CHARSET utf8mb4")).await.unwrap();
    load::load(&url, SIZES).await.expect("news load");
    let freshet = start_freshet(&url, db, MEMORY, "30s", replica).await;
    let engine = freshet.engine.clone();
    if replica.is_some() {
        // Misses should fill from the replica during the storm: wait for the copy.
        let deadline = Instant::now() + CATCH_UP;
        loop {
            let f = engine.replica.get().expect("the replica started").figures().copy;
            if f.tables_total > 0 && f.tables_done == f.tables_total {
                eprintln!("replica: {} rows copied in {:.1?}", f.rows_copied, started.elapsed());
                break;
            }
            assert!(Instant::now() < deadline, "the replica's copy did not finish: {f:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let queries = Arc::new(app::read_queries().unwrap());
    eprintln!("loaded and started in {:.1?}", started.elapsed());

    // The storm: writers on MariaDB, readers through freshet.
    let world = Arc::new(World::new(MAX_TRANSACTIONS, false));
    let until = Instant::now() + WRITE_FOR;
    let writers: Vec<_> = (0..WRITERS).map(|i| tokio::spawn(writer(url.clone(), world.clone(), 0xC0FFEE + i as u64, until))).collect();
    let readers: Vec<_> =
        (0..READERS).map(|i| tokio::spawn(reader(freshet.url.clone(), world.clone(), queries.clone(), 0xBEEF + i as u64))).collect();
    for w in writers {
        w.await.expect("writer task");
    }
    world.writing.store(false, Ordering::Relaxed);
    for r in readers {
        r.await.expect("reader task");
    }
    let storm: Vec<(&str, freshet_dataflow::ViewStats)> = app::READS.iter().map(|r| (r.cache, stats(&engine, r.cache))).collect();
    eprintln!(
        "storm: {} transactions ({} statements, {} deadlock retries), {} reads through freshet",
        world.transactions.load(Ordering::Relaxed),
        world.statements.load(Ordering::Relaxed),
        world.retries.load(Ordering::Relaxed),
        world.reads.load(Ordering::Relaxed),
    );
    for (cache, s) in &storm {
        eprintln!(
            "  {cache:<17} hits {:>6} misses {:>5} fills {:>5} evictions {:>5} keys {:>4} bytes {:>7}",
            s.hits, s.misses, s.fills, s.evictions, s.keys, s.bytes
        );
    }
    eprintln!(
        "  relayed: {}; fills started {}, failed {}; stream restarts {}",
        relayed(&engine),
        engine.counters.fills_started.get(),
        engine.counters.fills_failed.get(),
        engine.counters.restarts.get()
    );

    catch_up(&engine, &mut admin, CATCH_UP).await;
    eprintln!("caught up {:.1?} after the writers stopped", until.elapsed());

    let sample = sample(&world, &queries);
    let verdicts = compare_sample(&freshet, &url, &sample).await;

    let end: Vec<(&str, freshet_dataflow::ViewStats)> = app::READS.iter().map(|r| (r.cache, stats(&engine, r.cache))).collect();
    let (fills, evictions): (u64, u64) = end.iter().fold((0, 0), |(f, e), (_, s)| (f + s.fills, e + s.evictions));
    eprintln!(
        "compared {} answers ({} distinct reads x 2 protocols + 2), {} mismatches, {} never answered from the cache; total fills {fills}, evictions {evictions}; {:.1?} in all",
        verdicts.compared,
        sample.len(),
        verdicts.mismatches.len(),
        verdicts.never_cached.len(),
        started.elapsed(),
    );

    // Not vacuous: the storm really wrote, read from the caches, filled and evicted.
    let errors = world.read_errors.lock().unwrap().clone();
    assert!(errors.is_empty(), "reads through freshet failed during the storm:\n{}", errors.join("\n"));
    assert!(world.transactions.load(Ordering::Relaxed) >= 300, "the writers did too little");
    assert!(world.reads.load(Ordering::Relaxed) >= 500, "the readers did too little");
    for (cache, s) in &storm {
        assert!(s.hits > 0, "{cache}: no read was answered from the cache during the writes");
        assert!(s.fills > 0, "{cache}: never filled during the writes");
    }
    // story_with_votes has no dimension table (stories and votes are both keyed by the story):
    // only the budget evicts its partitions.
    let budget_evictions = end.iter().find(|(c, _)| *c == "story_with_votes").map_or(0, |(_, s)| s.evictions);
    assert!(budget_evictions > 0 && evictions > 0, "{MEMORY} forced no eviction");
    assert!(fills > 0);
    assert!(
        verdicts.never_cached.is_empty(),
        "never answered from the cache after {ATTEMPTS} attempts:\n{}",
        verdicts.never_cached.join("\n")
    );
    assert!(verdicts.compared >= 2 * sample.len() as u64, "compared only {}", verdicts.compared);
    assert!(
        verdicts.mismatches.is_empty(),
        "{} cached answers differ from MariaDB's:\n{}",
        verdicts.mismatches.len(),
        verdicts.mismatches.join("\n")
    );
    if replica.is_some() {
        let f = engine.replica.get().expect("the replica started").figures();
        eprintln!("replica: {} fills answered from RocksDB, following {}", f.fills, f.following);
        assert!(f.following, "the replica stopped following the stream");
        assert!(f.fills > 0, "no fill was answered from the replica");
    }
}
