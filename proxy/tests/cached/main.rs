//! Cached queries end to end against the real MariaDB: config caches answered from views,
//! byte for byte as the server answers; kept fresh by the binlog; relayed when they must be;
//! admin statements; metrics and readiness.
//!
//! One test binary, its tests in modules by theme (each file's `//!` header says which); the
//! helpers they share are here.

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use common::*;
use freshet_proxy::cache::{Engine, RelayReason};
use freshet_testkit::http;
use mysql_async::prelude::*;

mod admin;
mod ddl;
mod freshness;
mod matching;
mod prepared;
mod random;
mod sessions;
mod strings;
mod types;

/// Creates `table` (dropped first) with `rows` rows: id, name, price, created, qty.
async fn items_table(table: &str, rows: u32) {
    let mut conn = direct().await;
    conn.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.unwrap();
    conn.query_drop(format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(50) NOT NULL, price DECIMAL(10,2), created DATETIME(3), qty INT UNSIGNED NULL, grp INT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    ))
    .await
    .unwrap();
    let values: Vec<String> = (1..=rows)
        .map(|i| {
            format!(
                "({i}, 'item ä{i}', {}.{:02}, '2024-01-{:02} 10:00:0{}.123', {}, {})",
                i * 3,
                i % 100,
                i % 28 + 1,
                i % 10,
                if i % 7 == 0 { "NULL".to_string() } else { i.to_string() },
                i % 5
            )
        })
        .collect();
    conn.query_drop(format!("INSERT INTO {table} VALUES {}", values.join(", "))).await.unwrap();
}

fn cache_config(caches: &[(&str, &str)]) -> String {
    let mut extra = String::from("[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\n[consistency]\nmax_lag = \"5s\"\n");
    for (name, query) in caches {
        extra.push_str(&format!("[[cache]]\nname = \"{name}\"\nquery = \"{query}\"\n"));
    }
    extra
}

/// `cache_config` where a cache freshet refuses is listed and relayed rather than failing the
/// start.
fn lenient_config(caches: &[(&str, &str)]) -> String {
    cache_config(caches) + "[caches]\nstrict = false\n"
}

/// A connection to the server, with `table` created afresh (`columns`) and filled (`rows`, a
/// VALUES list).
async fn fresh_table(table: &str, columns: &str, rows: &str) -> mysql_async::Conn {
    let mut admin = direct().await;
    admin.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.unwrap();
    admin.query_drop(format!("CREATE TABLE {table} ({columns}) DEFAULT CHARSET=utf8mb4")).await.unwrap();
    admin.query_drop(format!("INSERT INTO {table} VALUES {rows}")).await.unwrap();
    admin
}

fn engine(proxy: &Proxy) -> std::sync::Arc<Engine> {
    proxy.engine.get().expect("the cache engine started").clone()
}

fn hits(proxy: &Proxy, cache: &str) -> u64 {
    engine(proxy).by_name(cache).expect("cache exists").stats().hits
}

fn relayed(proxy: &Proxy, reason: RelayReason) -> u64 {
    let i = RelayReason::ALL.iter().position(|r| *r == reason).unwrap();
    engine(proxy).counters.relayed[i].get()
}

/// Runs `sql` through freshet until it is answered from `cache` (the first read of a shape
/// is relayed to capture its column definitions, and waits for its fill), then returns that
/// answer.
async fn hit(client: &mut RawClient, proxy: &Proxy, cache: &str, sql: &str) -> Vec<Vec<u8>> {
    for _ in 0..50 {
        let before = hits(proxy, cache);
        let reply = client.query(sql).await;
        if hits(proxy, cache) > before {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{sql} was never answered from {cache}");
}

/// A freshet with `caches` (name, query with one `?`), each read with every one of `keys` for
/// its `?` until answered from the cache, and that answer the server's byte for byte; the
/// freshet, a session through it and one to the server.
async fn keys_hit_as_the_server(caches: &[(&str, &str)], keys: &[i32]) -> (Proxy, RawClient, RawClient) {
    let proxy = start_proxy(&cache_config(caches)).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    for (name, query) in caches {
        for key in keys {
            let sql = query.replace('?', &key.to_string());
            let want = check.query(&sql).await;
            assert_eq!(hit(&mut client, &proxy, name, &sql).await, want, "{sql}");
        }
    }
    (proxy, client, check)
}

/// Hits `sql` until its answer is `want` (a view rebuilt after DDL catches up meanwhile),
/// at most 250 times (5 s and more); the last hit's answer.
async fn hit_as_server(client: &mut RawClient, proxy: &Proxy, cache: &str, sql: &str, want: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for _ in 0..250 {
        got = hit(client, proxy, cache, sql).await;
        if got == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    got
}

/// A proxy caching `reads` (name, the cached SQL, a read of it), relaying what it refuses; a
/// client of it and one of the server. Each read was sent five times: filled, then hit.
async fn warmed(reads: &[(&str, &str, &str)]) -> (Proxy, RawClient, RawClient) {
    // A cache read several ways is named once.
    let mut caches: Vec<(&str, &str)> = reads.iter().map(|(name, cache, _)| (*name, *cache)).collect();
    caches.dedup_by_key(|(name, _)| *name);
    let proxy = start_proxy(&lenient_config(&caches)).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    for (_, _, sql) in reads {
        for _ in 0..5 {
            client.query(sql).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    (proxy, client, check)
}

/// Reads each of `reads` (cache name, cached query, read) through freshet 50 times, since
/// within `[consistency] max_lag` a read may show the views' previous step, and returns the
/// reads answered otherwise than `check` answers them, and the caches that answered none of
/// their reads from the view.
async fn answered_otherwise<'a>(
    proxy: &Proxy,
    client: &mut RawClient,
    check: &mut RawClient,
    reads: &[(&'a str, &str, &'a str)],
) -> (Vec<&'a str>, Vec<&'a str>) {
    let (mut wrong, mut unserved) = (Vec::new(), Vec::new());
    for &(name, _, sql) in reads {
        let want = check.query(sql).await;
        let before = hits(proxy, name);
        for _ in 0..50 {
            if client.query(sql).await != want {
                wrong.push(sql);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if hits(proxy, name) == before {
            unserved.push(name);
        }
    }
    (wrong, unserved)
}

/// Once freshet has caught up with `what` (statements already run), each of `reads` is read
/// 20 times and answered as `check` answers it (both through `same`, which may blank what the
/// server's plan decides), and from the view again at least once.
async fn answered_as_the_server_after(
    proxy: &Proxy,
    client: &mut RawClient,
    check: &mut RawClient,
    reads: &[(&str, &str, &str)],
    what: &str,
    same: fn(Vec<Vec<u8>>) -> Vec<Vec<u8>>,
) {
    caught_up(&mut through(proxy).await).await;
    for (name, _, sql) in reads {
        let want = same(check.query(sql).await);
        let before = hits(proxy, name);
        for _ in 0..20 {
            assert_eq!(same(client.query(sql).await), want, "{sql} after {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(hits(proxy, name) > before, "{name} answered from the view after {what}");
    }
}
