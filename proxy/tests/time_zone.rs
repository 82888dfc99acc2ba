//! The server's time zone. A TIMESTAMP is stored in UTC and read in the session's time zone:
//! compared with a literal, given to `DATE()`, grouped. A view holds UTC (the binlog's and
//! the fill connections' zone), so its answer is the server's only for a session whose zone
//! is UTC. A server whose default zone is another (`SYSTEM` on a host in local time, or
//! `default_time_zone`) is common, and its sessions never say SET time_zone.
//!
//! This binary changes the server's default zone (`SET GLOBAL time_zone`), which new sessions
//! of any test would see, so it holds its tests alone: cargo runs test binaries one at a time,
//! and the zone is given back even when a test fails.

mod common;

use std::time::Duration;

use common::*;
use freshet_proxy::cache::RelayReason;
use mysql_async::prelude::*;

async fn set_default_zone(zone: &str) {
    direct().await.query_drop(format!("SET GLOBAL time_zone = '{zone}'")).await.unwrap();
}

/// Runs `test` with the server's default time zone first set to `zone`, and gives the zone
/// back (`SYSTEM`) whatever happens, then passes a failure on.
async fn with_default_zone<F: std::future::Future<Output = ()> + Send + 'static>(zone: &str, test: F) {
    set_default_zone(zone).await;
    let outcome = tokio::spawn(test).await;
    set_default_zone("SYSTEM").await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

fn cache_config(caches: &[(&str, &str)]) -> String {
    let mut extra = String::from("[fill]\ntimeout = \"3s\"\n[consistency]\nmax_lag = \"5s\"\n");
    for (name, query) in caches {
        extra.push_str(&format!("[[cache]]\nname = \"{name}\"\nquery = \"{query}\"\n"));
    }
    extra
}

fn hits(proxy: &Proxy, cache: &str) -> u64 {
    proxy.engine.get().expect("the cache engine started").by_name(cache).expect("cache exists").stats().hits
}

fn relayed(proxy: &Proxy, reason: RelayReason) -> u64 {
    let i = RelayReason::ALL.iter().position(|r| *r == reason).unwrap();
    proxy.engine.get().expect("the cache engine started").counters.relayed[i].get()
}

/// (cache name, cached query, a read of it).
const READS: [(&str, &str, &str); 3] = [
    (
        "tz_after",
        "SELECT id FROM tz_events WHERE k = ? AND ts >= '2024-01-01 01:00:00' ORDER BY id",
        "SELECT id FROM tz_events WHERE k = 1 AND ts >= '2024-01-01 01:00:00' ORDER BY id",
    ),
    (
        "tz_days",
        "SELECT DATE(ts) AS day, COUNT(*) AS n FROM tz_events WHERE k = ? GROUP BY DATE(ts) ORDER BY day",
        "SELECT DATE(ts) AS day, COUNT(*) AS n FROM tz_events WHERE k = 1 GROUP BY DATE(ts) ORDER BY day",
    ),
    // Reads no TIMESTAMP: served in any zone.
    ("tz_ids", "SELECT id, k FROM tz_events WHERE k = ? ORDER BY id", "SELECT id, k FROM tz_events WHERE k = 1 ORDER BY id"),
];

/// The table, its rows written in UTC: 00:30 and 05:00 on 2024-01-01, 22:30 on 2023-12-31.
/// At +02:00 they are 02:30, 07:00 and 00:30 on 2024-01-01.
async fn events_table() {
    let mut admin = direct().await;
    admin.query_drop("SET time_zone = '+00:00'").await.unwrap();
    admin.query_drop("DROP TABLE IF EXISTS tz_events").await.unwrap();
    admin.query_drop("CREATE TABLE tz_events (id INT PRIMARY KEY, k INT NOT NULL, ts TIMESTAMP NULL)").await.unwrap();
    admin
        .query_drop(
            "INSERT INTO tz_events VALUES (1, 1, '2024-01-01 00:30:00'), (2, 1, '2023-12-31 22:30:00'), (3, 1, '2024-01-01 05:00:00')",
        )
        .await
        .unwrap();
}

/// Reads each of `READS` through freshet until its answer stops changing (the first reads are
/// relayed while the view fills), and returns the reads whose answer is not the server's
/// for a session opened the same way.
async fn answers_unlike_the_servers(proxy: &Proxy) -> Vec<String> {
    let mut ours = through(proxy).await;
    let mut theirs = direct().await;
    let mut wrong = Vec::new();
    for (_, _, sql) in READS {
        let want: Vec<mysql_async::Row> = theirs.query(sql).await.unwrap();
        let want: Vec<Vec<mysql_async::Value>> = want.into_iter().map(|r| r.unwrap()).collect();
        for _ in 0..10 {
            let got: Vec<mysql_async::Row> = ours.query(sql).await.unwrap();
            let got: Vec<Vec<mysql_async::Value>> = got.into_iter().map(|r| r.unwrap()).collect();
            if got != want {
                wrong.push(format!("{sql}\n  freshet: {got:?}\n  server:  {want:?}"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    wrong
}

/// Under a default zone of +02:00, a cached read of a TIMESTAMP answers as the server does
/// (row 1 is after 01:00 there, and all three rows are on 2024-01-01): such reads are relayed
/// for sessions in a zone other than UTC, and a read of no TIMESTAMP is still served. Where
/// the sessions' zone is UTC (by offset, or the system's zone when the host runs in UTC), the
/// same reads are answered from the views. One test, so that the zones do not overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timestamp_is_read_in_the_sessions_time_zone() {
    events_table().await;
    let caches: Vec<(&'static str, &'static str)> = READS.iter().map(|(name, cache, _)| (*name, *cache)).collect();
    let config = cache_config(&caches);
    let outside = config.clone();
    with_default_zone("+02:00", async move {
        let proxy = start_proxy(&outside).await;
        let wrong = answers_unlike_the_servers(&proxy).await;
        assert!(wrong.is_empty(), "answered otherwise than the server at +02:00:\n{}", wrong.join("\n"));
        assert!(hits(&proxy, "tz_ids") > 0, "a read of no TIMESTAMP is served in any zone");
        assert_eq!(hits(&proxy, "tz_after") + hits(&proxy, "tz_days"), 0, "a TIMESTAMP read outside UTC is relayed");
        assert!(relayed(&proxy, RelayReason::SessionState) > 0, "relayed for the session's time zone");
    })
    .await;
    let system: String = direct().await.query_first("SELECT @@system_time_zone").await.unwrap().expect("a row");
    for zone in ["+00:00", "SYSTEM"] {
        let config = config.clone();
        // The project's server runs in UTC; on a host in local time, `SYSTEM` is relayed.
        let served = zone != "SYSTEM" || system == "UTC";
        with_default_zone(zone, async move {
            let proxy = start_proxy(&config).await;
            let wrong = answers_unlike_the_servers(&proxy).await;
            assert!(wrong.is_empty(), "answered otherwise than the server at {zone}:\n{}", wrong.join("\n"));
            if served {
                assert!(hits(&proxy, "tz_after") > 0 && hits(&proxy, "tz_days") > 0, "served at {zone}");
            }
        })
        .await;
    }
}
