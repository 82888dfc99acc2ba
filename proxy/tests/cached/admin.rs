//! Admin statements (SHOW CACHES, CREATE, DROP and EXPLAIN CACHE, SHOW FRESHET STATUS), caches
//! in the config and made at runtime, metrics (the stream's lag among them), health and
//! readiness, and the memory limit.

use super::*;

/// `freshet_cdc_lag_bytes` says how far behind the stream is while it works through a large
/// transaction. It was set by heartbeats only, which the server sends when the stream rests
/// at its end, so it read 0 while the stream was megabytes behind (an audit: 0 for 13 s,
/// 5.2 MB behind, while `lag_seconds` rose).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lag_in_bytes_is_known_while_the_stream_works_through_a_large_transaction() {
    let mut admin = fresh_table("ct_big", "id INT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(40) NOT NULL", "(0, 0, '')").await;
    let proxy = start_proxy(&cache_config(&[("big", "SELECT id, v FROM ct_big WHERE id = ?")])).await;
    caught_up(&mut through(&proxy).await).await;
    let lag = engine(&proxy).lag_handle();
    admin.query_drop("INSERT INTO ct_big SELECT seq, seq, REPEAT('x', 40) FROM seq_1_to_300000").await.unwrap();
    let end: mysql_async::Row = admin.query_first("SHOW MASTER STATUS").await.unwrap().unwrap();
    let end = (end.get::<String, _>(0).unwrap(), end.get::<u32, _>(1).unwrap());
    let (mut most, mut samples) = (0, 0);
    let started = std::time::Instant::now();
    loop {
        let now = lag.get();
        let delivered = now.delivered.map(|d| (d.file, d.offset));
        if delivered.as_ref().is_some_and(|d| *d >= end) {
            break;
        }
        most = most.max(now.bytes_behind);
        samples += 1;
        assert!(started.elapsed() < Duration::from_secs(120), "the stream did not reach {end:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Behind for at least a few polls (a debug build decodes 300,000 rows for seconds).
    if started.elapsed() > Duration::from_millis(500) {
        assert!(most > 0, "the lag in bytes read 0 in {samples} samples over {:?} behind", started.elapsed());
    }
    admin.query_drop("DROP TABLE ct_big").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_statements_show_create_explain_and_drop_caches() {
    items_table("ct_admin", 10).await;
    let proxy = start_proxy(&cache_config(&[("by_id", "SELECT id, name FROM ct_admin WHERE id = ?")])).await;
    let mut conn = through(&proxy).await;
    let _: Vec<(i32, String)> = conn.query("SELECT id, name FROM ct_admin WHERE id = 2").await.unwrap();

    let caches: Vec<mysql_async::Row> = conn.query("SHOW CACHES").await.unwrap();
    assert_eq!(caches.len(), 1);
    assert_eq!(caches[0].get::<String, _>("name").unwrap(), "by_id");
    let status: Vec<(String, String)> = conn.query("SHOW FRESHET STATUS").await.unwrap();
    let get = |k: &str| status.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("{k} in SHOW FRESHET STATUS"));
    assert_eq!(get("caches"), "1");
    assert_eq!(get("caught_up"), "yes");
    assert!(get("binlog_position").contains(':'));

    let explain: Vec<(String, String)> = conn.query("EXPLAIN CACHE SELECT id, name FROM ct_admin WHERE id = ?").await.unwrap();
    assert!(explain.iter().any(|(s, d)| s == "fill sql" && d.contains("ct_admin")), "{explain:?}");

    // A session that read it before the cache existed (relayed: the session learnt the text's
    // shape as a relayed read's) is answered by the cache once it exists.
    let mut raw = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let relayed = "SELECT id, name FROM ct_admin WHERE grp = 1";
    assert_eq!(raw.query(relayed).await, check.query(relayed).await);
    conn.query_drop("CREATE CACHE by_grp FROM SELECT id, name FROM ct_admin WHERE grp = ?").await.unwrap();
    let sql = "SELECT id, name FROM ct_admin WHERE grp = 3";
    assert_eq!(hit(&mut raw, &proxy, "by_grp", sql).await, check.query(sql).await);
    let err = conn.query_drop("CREATE CACHE bad FROM SELECT NOW() FROM ct_admin WHERE id = ?").await.unwrap_err();
    assert!(err.to_string().contains("cannot cache"), "{err}");
    conn.query_drop("DROP CACHE by_grp").await.unwrap();
    assert!(engine(&proxy).by_name("by_grp").is_none());
    let proxied: Vec<mysql_async::Row> = conn.query("SHOW PROXIED QUERIES").await.unwrap();
    assert!(!proxied.is_empty());

    // Not for users outside [admin] users.
    let other = start_proxy(&format!(
        "{}\n",
        cache_config(&[("x", "SELECT id, name FROM ct_admin WHERE id = ?")]).replace("[\"freshet\"]", "[\"root\"]")
    ))
    .await;
    let mut conn = through(&other).await;
    let err = conn.query_drop("SHOW CACHES").await.unwrap_err();
    assert!(err.to_string().contains("1227") || err.to_string().contains("Access denied"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncacheable_config_queries_fail_the_start_or_are_relayed() {
    items_table("ct_strict", 3).await;
    let config =
        cache_config(&[("ok", "SELECT id FROM ct_strict WHERE id = ?"), ("clock", "SELECT id, NOW() FROM ct_strict WHERE id = ?")]);
    let toml = format!(
        "[upstream]\nurl = \"{}\"\ntls = \"disabled\"\n[listen]\nmysql = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{config}",
        upstream_url()
    );
    let err = match freshet_proxy::Server::bind(freshet_testkit::freshet::config(&toml)).await {
        Ok(_) => panic!("an uncacheable [[cache]] must fail a strict start"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("clock") && err.contains("session-dependent"), "{err}");

    let proxy = start_proxy_raw(&format!("{toml}[caches]\nstrict = false\n")).await;
    let e = engine(&proxy);
    assert!(e.by_name("ok").unwrap().live().is_ok());
    assert!(e.by_name("clock").unwrap().live().is_err());
    // Listed, with why it is relayed; the other cache serves.
    let mut conn = through(&proxy).await;
    let rows: Vec<mysql_async::Row> = conn.query("SHOW CACHES").await.unwrap();
    let class = |name: &str| {
        rows.iter().find(|r| r.get::<String, _>("name").as_deref() == Some(name)).and_then(|r| r.get::<String, _>("cost_class"))
    };
    assert!(class("clock").is_some_and(|c| c.starts_with("unavailable") && c.contains("session-dependent")), "{:?}", class("clock"));
    assert!(class("ok").is_some_and(|c| !c.starts_with("unavailable")));
    let mut raw = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    hit(&mut raw, &proxy, "ok", "SELECT id FROM ct_strict WHERE id = 2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_readiness_cover_the_caches() {
    items_table("ct_metrics", 5).await;
    let proxy = start_proxy(&cache_config(&[("m", "SELECT id, name FROM ct_metrics WHERE id = ?")])).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    hit(&mut client, &proxy, "m", "SELECT id, name FROM ct_metrics WHERE id = 1").await;
    let (_, body) = http::get(proxy.admin, "/metrics").await;
    for needle in [
        "freshet_proxy_cache_hits_total{cache=\"m\"} ",
        "freshet_proxy_cache_keys{cache=\"m\"} 1",
        "freshet_proxy_relayed_reads_total{reason=\"capture\"} 1",
        "freshet_cdc_lag_seconds ",
        "freshet_dataflow_memory_limit_bytes ",
    ] {
        assert!(body.contains(needle), "{needle} missing from\n{body}");
    }
    assert!(!body.contains("ct_metrics WHERE"), "no query text in labels");
    // Whether the upstream answers now, not at the last probe that asked (none has here).
    assert_eq!(metric(&body, "freshet_upstream_ready"), 1, "{body}");
    assert_eq!(http::get(proxy.admin, "/ready").await.0, 200);
}

/// The value of the sample line `name` (with its labels) in a /metrics body; 0 when absent.
fn metric(body: &str, name: &str) -> u64 {
    body.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0)
}

/// A hit is timed once, in the cache's histogram; the relay histogram times what is not
/// answered from a cache. Both count the command (commands_total counts every one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hit_is_timed_in_one_histogram() {
    items_table("ct_one_hist", 5).await;
    let proxy = start_proxy(&cache_config(&[("h", "SELECT id, name FROM ct_one_hist WHERE id = ?")])).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, name FROM ct_one_hist WHERE id = 1";
    let want = hit(&mut client, &proxy, "h", sql).await;
    let counts = |body: &str| {
        (
            metric(body, "freshet_proxy_commands_total{command=\"query\"}"),
            metric(body, "freshet_proxy_relay_duration_seconds_count{command=\"query\"}"),
            metric(body, "freshet_proxy_cache_hit_duration_seconds_count{cache=\"h\"}"),
        )
    };
    // The session records a command just after writing its reply, so the client can see the
    // reply before the count moves: wait for the count, then until it stays put (the last
    // command `hit` sent may still be on its way into the counts).
    let settled = |commands: u64| {
        let admin = proxy.admin;
        async move {
            let mut last = None;
            for _ in 0..200 {
                let now = counts(&http::get(admin, "/metrics").await.1);
                if now.0 >= commands && last == Some(now) {
                    return now;
                }
                last = Some(now);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("the command count never reached {commands}");
        }
    };
    let before = settled(0).await;
    let hits_before = hits(&proxy, "h");
    assert_eq!(client.query(sql).await, want);
    assert_eq!(hits(&proxy, "h"), hits_before + 1, "the read was a hit");
    let after = settled(before.0 + 1).await;
    assert_eq!(after, (before.0 + 1, before.1, before.2 + 1), "(commands, relay histogram, hit histogram) before: {before:?}");
    client.query("SELECT 1").await;
    let relayed = settled(after.0 + 1).await;
    assert_eq!(relayed, (after.0 + 1, after.1 + 1, after.2), "a relayed query is timed in the relay histogram");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_cache_starts_the_engine_of_a_relay_only_freshet() {
    items_table("ct_lazy", 8).await;
    let proxy = start_proxy("[admin]\nusers = [\"freshet\"]\n").await;
    assert!(proxy.engine.get().is_none(), "no [[cache]]: a pure relay");
    let mut conn = through(&proxy).await;
    let status: Vec<(String, String)> = conn.query("SHOW FRESHET STATUS").await.unwrap();
    assert!(status.iter().any(|(k, v)| k == "cache_engine" && v.starts_with("not started")), "{status:?}");
    conn.query_drop("CREATE CACHE lazy FROM SELECT id, name FROM ct_lazy WHERE id = ?").await.unwrap();
    let mut raw = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, name FROM ct_lazy WHERE id = 4";
    let got = hit(&mut raw, &proxy, "lazy", sql).await;
    assert_eq!(got, RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap().query(sql).await);
    let err = conn.query_drop("CREATE CACHE lazy FROM SELECT id FROM ct_lazy WHERE id = ?").await.unwrap_err();
    assert!(err.to_string().contains("exists already"), "{err}");
}

/// A migration creates a table and then its cache, one statement after the other, through
/// freshet: the cache is compiled against the table as the server has it, not against a
/// catalog that the binlog stream has not brought up to the CREATE TABLE yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_created_right_after_its_table_reads_it() {
    items_table("ct_first", 3).await;
    let proxy = start_proxy(&cache_config(&[("first", "SELECT id, name FROM ct_first WHERE id = ?")])).await;
    let mut conn = through(&proxy).await;
    for i in 0..3 {
        let table = format!("ct_migrated_{i}");
        conn.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.unwrap();
        conn.query_drop(format!("CREATE TABLE {table} (id INT PRIMARY KEY, v INT)")).await.unwrap();
        conn.query_drop(format!("INSERT INTO {table} VALUES (1, {i})")).await.unwrap();
        conn.query_drop(format!("CREATE CACHE migrated_{i} FROM SELECT id, v FROM {table} WHERE id = ?")).await.unwrap();
        let got: Vec<(i32, i32)> = conn.query(format!("SELECT id, v FROM {table} WHERE id = 1")).await.unwrap();
        assert_eq!(got, [(1, i)]);
    }
    for i in 0..3 {
        conn.query_drop(format!("DROP CACHE migrated_{i}")).await.unwrap();
        conn.query_drop(format!("DROP TABLE ct_migrated_{i}")).await.unwrap();
    }
}

async fn mariadb_cli(port: u16, sql: &str) -> String {
    let out = tokio::process::Command::new("mariadb")
        .args([
            "--no-defaults",
            "--protocol=tcp",
            "--skip-ssl",
            "-h127.0.0.1",
            "-P",
            &port.to_string(),
            "-u",
            USER,
            &format!("-p{PASSWORD}"),
            DB,
            "-e",
            sql,
        ])
        .output()
        .await
        .expect("the mariadb client (installed by scripts/mariadb.sh)");
    assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mariadb_client_gets_hits_and_admin_results() {
    items_table("ct_cli", 6).await;
    let proxy = start_proxy(&cache_config(&[("cli", "SELECT id, name, price, created, qty FROM ct_cli WHERE id = ?")])).await;
    let direct_port: u16 = upstream_addr().rsplit_once(':').unwrap().1.parse().unwrap();
    let sql = "SELECT id, name, price, created, qty FROM ct_cli WHERE id = 4";
    let want = mariadb_cli(direct_port, sql).await;
    for _ in 0..3 {
        assert_eq!(mariadb_cli(proxy.mysql.port(), sql).await, want);
    }
    assert!(hits(&proxy, "cli") >= 2, "the client's reads after the first are answered from the cache");
    assert_eq!(relayed(&proxy, RelayReason::Unencodable), 0);
    let caches = mariadb_cli(proxy.mysql.port(), "SHOW CACHES").await;
    assert!(caches.contains("cli\tSELECT id, name"), "{caches}");
    assert!(mariadb_cli(proxy.mysql.port(), "SHOW FRESHET STATUS").await.contains("caught_up\tyes"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_fresh_binlog_cached_reads_are_relayed_and_not_ready() {
    items_table("ct_lag", 4).await;
    let proxy = start_proxy(&cache_config(&[("lag", "SELECT id, name FROM ct_lag WHERE id = ?")])).await;
    let e = engine(&proxy);
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, name FROM ct_lag WHERE id = 1";
    let want = hit(&mut client, &proxy, "lag", sql).await;
    // As when the stream is being re-established (or lags over max_lag): freshet cannot vouch
    // for freshness, so the server answers.
    e.gate.stream_down();
    tokio::time::sleep(freshet_proxy::cache::FRESHNESS_CHECK * 3).await;
    let (hits_before, lag_before) = (hits(&proxy, "lag"), relayed(&proxy, RelayReason::Lag));
    assert_eq!(client.query(sql).await, want);
    assert_eq!((hits(&proxy, "lag"), relayed(&proxy, RelayReason::Lag)), (hits_before, lag_before + 1));
    assert_eq!(http::get(proxy.admin, "/health").await.0, 503, "not healthy while the binlog is not followed");
    assert_eq!(http::get(proxy.admin, "/ready").await.0, 200, "but ready: freshet relays meanwhile");
    assert_eq!(http::get(proxy.admin, "/startup?caches").await.0, 503, "a start waiting for fresh caches waits");
    e.gate.stream_resumed();
    tokio::time::sleep(freshet_proxy::cache::FRESHNESS_CHECK * 3).await;
    assert_eq!(hit(&mut client, &proxy, "lag", sql).await, want);
    assert_eq!(http::get(proxy.admin, "/health").await.0, 200);
    assert_eq!(http::get(proxy.admin, "/startup?caches").await.0, 200);
}

/// A partition heavier than the whole `[memory] limit` is not kept. Its read is relayed; the
/// partition is filled once, not again for each wake-up of the read (each fill completed, the
/// read looked again, missed and asked for another: 81 fills of 210 KB in one read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_larger_than_the_memory_limit_is_filled_once() {
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS ct_heavy").await.unwrap();
    admin.query_drop("CREATE TABLE ct_heavy (id INT PRIMARY KEY, grp INT NOT NULL, pad VARCHAR(200) NOT NULL)").await.unwrap();
    admin.query_drop("INSERT INTO ct_heavy SELECT seq, seq % 3, REPEAT('x', 200) FROM seq_1_to_3000").await.unwrap();
    let proxy = start_proxy(&format!(
        "[memory]\nlimit = \"32KiB\"\n[fill]\ntimeout = \"2s\"\n{}",
        cache_config(&[("heavy", "SELECT id, grp, pad FROM ct_heavy WHERE grp = ?")]).replace("[fill]\ntimeout = \"3s\"\n", "")
    ))
    .await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, grp, pad FROM ct_heavy WHERE grp = 2";
    for _ in 0..4 {
        assert_eq!(client.query(sql).await, check.query(sql).await);
    }
    let fills = engine(&proxy).by_name("heavy").unwrap().stats().fills;
    assert!(fills <= 2, "{fills} fills of one partition that cannot be kept");
    assert!(relayed(&proxy, RelayReason::TooLarge) > 0, "relayed as too large");
    admin.query_drop("DROP TABLE ct_heavy").await.unwrap();
}

/// A read relayed to capture its column definitions (here the binary protocol's, after the
/// text protocol's were captured and the partition filled) is not an answer from the view: the
/// view's hit count (SHOW CACHES, `freshet_cache_hits_total`) counted it, because the relay
/// looked the key up to start its fill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_relayed_to_capture_is_not_counted_as_a_hit() {
    let _admin = fresh_table("ct_counted", "id INT PRIMARY KEY, k INT NOT NULL, n INT", "(1, 1, 10), (2, 1, 20)").await;
    let reads = [("counted", "SELECT id, n FROM ct_counted WHERE k = ?", "SELECT id, n FROM ct_counted WHERE k = 1")];
    let (proxy, mut client, _check) = warmed(&reads).await;
    let (name, cached, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let typed = [&[0u8, 1, 8, 0][..], &1u64.to_le_bytes()].concat();
    let (id, _) = prepare(&mut client, cached).await;
    let before = hits(&proxy, name);
    client.send(&execute(id, &typed)).await;
    client.read_results().await;
    assert_eq!(hits(&proxy, name), before, "the execute that captured the binary definitions was relayed, not a hit");
    client.send(&execute(id, &typed)).await;
    client.read_results().await;
    assert_eq!(hits(&proxy, name), before + 1, "the next execute was answered from the view");
}
