//! Cached queries end to end against the real MariaDB: config caches answered from views,
//! byte for byte as the server answers; kept fresh by the binlog; relayed when they must be;
//! admin statements; metrics and readiness.

mod common;

use std::time::Duration;

use common::*;
use freshet_proxy::cache::{Engine, RelayReason};
use freshet_testkit::http;
use mysql_async::prelude::*;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_queries_of_every_spelling_hit_and_match_the_server_byte_for_byte() {
    items_table("ct_items", 60).await;
    let proxy = start_proxy(&cache_config(&[("items", "SELECT id, name, price, created, qty FROM ct_items WHERE id = ?")])).await;
    let mut direct = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    for sql in [
        "SELECT id, name, price, created, qty FROM ct_items WHERE id = 5",
        "select  id,name ,price, created,   qty from ct_items where id=6 -- trailing comment",
        "SELECT /* a comment */ `id`, `name`, price, created, qty FROM `ct_items` WHERE `id` = 7",
        "SELECT ct_items.id, ct_items.name, ct_items.price, ct_items.created, ct_items.qty FROM ct_items WHERE ct_items.id = 14",
        "SELECT id, name, price, created, qty FROM ct_items WHERE id = 100000",
        "SELECT id, name, price, created, qty FROM ct_items WHERE id = '9'",
    ] {
        let cached = hit(&mut through, &proxy, "items", sql).await;
        assert_eq!(cached, direct.query(sql).await, "{sql}");
    }
    // Spellings whose column definitions differ from the ones above (the names as written,
    // aliases, the table's alias in each definition), or that the cache does not answer: each
    // read is the server's answer, whether it is relayed or, once its own definitions are
    // captured, a hit.
    for sql in [
        "SELECT ID, Name, PRICE, created, qty FROM ct_items WHERE id = 10",
        "SELECT id AS a, name AS b, price, created, qty FROM ct_items WHERE id = 11",
        "SELECT x.id, x.name, x.price, x.created, x.qty FROM ct_items x WHERE x.id = 12",
        "SELECT X.id, X.name, X.price, X.created, X.qty FROM ct_items AS X WHERE X.id = 13",
        "SELECT id, name, price, created, qty FROM freshet_test.ct_items WHERE id = 15",
        "SELECT `ID`, name, price, created, qty FROM ct_items WHERE ID = 16",
        "SELECT id, name, price, created, qty FROM ct_items WHERE id = 16",
        "SELECT id, name, price, created, qty FROM ct_items WHERE id = 17 LIMIT 1",
    ] {
        let want = direct.query(sql).await;
        for read in 0..5 {
            assert_eq!(through.query(sql).await, want, "{sql} (read {read})");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Without DEPRECATE_EOF too (classic EOF packets).
    let classic = DEFAULT_CAPS & !freshet_proxy::protocol::Capabilities::DEPRECATE_EOF;
    let mut direct = RawClient::connect(&upstream_addr(), classic).await.unwrap();
    let mut through = RawClient::connect(&proxy.mysql.to_string(), classic).await.unwrap();
    let sql = "SELECT id, name, price, created, qty FROM ct_items WHERE id = 21";
    assert_eq!(hit(&mut through, &proxy, "items", sql).await, direct.query(sql).await);
}

/// A session learns the text of a cached shape it sent (`matching::shape`) and classifies the
/// same text with other values without tokenizing it; here, through a session against the
/// server: those texts are answered as the server answers them, and a text that differs
/// anywhere but in a value goes the whole way (relayed here). That the learnt path is the one
/// taken, and gives what classifying gives, is `matching::shape`'s unit tests' to check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learnt_text_shape_answers_other_values_and_nothing_else() {
    items_table("ls_items", 30).await;
    let proxy = start_proxy(&cache_config(&[("items", "SELECT id, name, price, created, qty FROM ls_items WHERE id = ?")])).await;
    let mut direct = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let read = "SELECT id, name, price, created, qty FROM ls_items WHERE id = ";
    hit(&mut through, &proxy, "items", &format!("{read}5")).await;
    // The executable comment comes last: a session that sent one relays its cached reads from
    // then on (its state may have changed in ways freshet does not follow).
    for (value, answered) in [
        ("6", true),
        ("000012", true),
        ("7 OR id = 8", false),
        ("7 UNION SELECT 1, 2, 3, 4, 5", false),
        ("(SELECT 9)", false),
        // A string literal's first read captures its own column definitions (the server may
        // describe them apart from an integer's), the next is answered.
        ("'12'", false),
        ("'13'", true),
        ("14", true),
        ("7 /*! OR id = 9 */", false),
    ] {
        let sql = format!("{read}{value}");
        let before = hits(&proxy, "items");
        let reply = through.query(&sql).await;
        assert_eq!(hits(&proxy, "items") > before, answered, "{sql}");
        assert_eq!(reply, direct.query(&sql).await, "{sql}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_lists_and_prepared_statements_hit_with_the_servers_values() {
    items_table("ct_prep", 40).await;
    let proxy = start_proxy(&cache_config(&[("prep", "SELECT id, name, price, created, qty FROM ct_prep WHERE id = ?")])).await;
    let mut direct_conn = direct().await;
    let mut conn = through(&proxy).await;
    type Item = (i32, String, Option<String>, Option<mysql_async::Value>, Option<u32>);
    let sql = "SELECT id, name, price, created, qty FROM ct_prep WHERE id IN (3, 1, 2, 3)";
    let want: Vec<Item> = direct_conn.query(sql).await.unwrap();
    let before = hits(&proxy, "prep");
    let mut got: Vec<Item> = Vec::new();
    for _ in 0..50 {
        got = conn.query(sql).await.unwrap();
        if hits(&proxy, "prep") > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(hits(&proxy, "prep") > before, "the IN list was never answered from the cache");
    // Rows in the server's order too: a view without ORDER BY publishes rows sorted by their
    // columns and merges an IN list's partitions in key order, which is the primary key's.
    assert_eq!(got, want);

    // Prepared: the binary protocol, parameters bound at execute.
    let stmt = "SELECT id, name, price, created, qty FROM ct_prep WHERE id = ?";
    for id in [4, 5, 7, 4, 5, 7, 999] {
        let want: Vec<Item> = direct_conn.exec(stmt, (id,)).await.unwrap();
        let mut got: Vec<Item> = Vec::new();
        for _ in 0..50 {
            let before = hits(&proxy, "prep");
            got = conn.exec(stmt, (id,)).await.unwrap();
            if hits(&proxy, "prep") > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(got, want, "id {id}");
    }
    // The column metadata a driver sees is the server's.
    let d = direct_conn
        .exec_iter(stmt, (4,))
        .await
        .unwrap()
        .columns()
        .unwrap()
        .iter()
        .map(|c| (c.name_str().to_string(), c.column_type(), c.flags(), c.character_set(), c.decimals(), c.column_length()))
        .collect::<Vec<_>>();
    let t = conn
        .exec_iter(stmt, (4,))
        .await
        .unwrap()
        .columns()
        .unwrap()
        .iter()
        .map(|c| (c.name_str().to_string(), c.column_type(), c.flags(), c.character_set(), c.decimals(), c.column_length()))
        .collect::<Vec<_>>();
    assert_eq!(d, t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_reach_cached_answers_through_the_binlog() {
    items_table("ct_fresh", 10).await;
    let proxy =
        start_proxy(&cache_config(&[("fresh", "SELECT grp, COUNT(*) AS n, SUM(price) AS total FROM ct_fresh WHERE grp = ? GROUP BY grp")]))
            .await;
    let mut writer = direct().await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT grp, COUNT(*) AS n, SUM(price) AS total FROM ct_fresh WHERE grp = 1 GROUP BY grp";
    hit(&mut client, &proxy, "fresh", sql).await;
    writer.query_drop("INSERT INTO ct_fresh VALUES (100, 'new', 1.50, NULL, NULL, 1)").await.unwrap();
    writer.query_drop("UPDATE ct_fresh SET grp = 1 WHERE id = 2").await.unwrap();
    writer.query_drop("DELETE FROM ct_fresh WHERE id = 6").await.unwrap();
    let want = check.query(sql).await;
    let mut last = Vec::new();
    for _ in 0..250 {
        last = hit(&mut client, &proxy, "fresh", sql).await;
        if last == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(last, want, "the cached answer never caught up with the writes");
}

/// An IN list reads several partitions, and shows one committed state of the server, never
/// part of a transaction. Each transaction here moves quantity between the rows of the groups
/// it touches, so every committed state has the same total in each group; a read that saw
/// some of a group's partitions before a transaction and others after it (the writer
/// republishing them one by one, or a fill answered from a newer state than the stream had
/// applied next to partitions at the applied one) shows another total. Each cold group is
/// read half first, so that its full read mixes partitions filled earlier with a new fill's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_list_shows_one_committed_state_of_its_rows() {
    const GROUPS: u32 = 150;
    const PER: u32 = 8;
    let rows: Vec<String> = (0..GROUPS * PER).map(|i| format!("({}, {}, 1000)", i + 1, i / PER)).collect();
    fresh_table("ct_moves", "id INT PRIMARY KEY, grp INT NOT NULL, qty INT NOT NULL", &rows.join(", ")).await;
    // What is checked is that each answer is one committed state, not how recent it is: a
    // stream that lags on a loaded machine must not have every read relayed (`max_lag`).
    let config = cache_config(&[("moves", "SELECT id, qty FROM ct_moves WHERE id = ?")]).replace("max_lag = \"5s\"", "max_lag = \"10m\"");
    let proxy = start_proxy(&config).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mover = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut conn = direct().await;
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                // Even ids gain what odd ids lose, in a tenth of the groups at a time: one
                // transaction each, which every group's total survives; paced so that a debug
                // build's stream keeps up (a lagging one has every read relayed).
                let d = if n.is_multiple_of(2) { (n % 7 + 1) as i32 } else { -((n % 5 + 1) as i32) };
                conn.query_drop(format!("UPDATE ct_moves SET qty = qty + IF(id % 2 = 0, {d}, -({d})) WHERE grp % 10 = {}", n % 10))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            n
        }
    });
    let mut conn = through(&proxy).await;
    let list = |g: u32, n: u32| (g * PER + 1..=g * PER + n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    let mut torn = Vec::new();
    for round in 0..GROUPS * 4 {
        let g = round % GROUPS;
        if round < GROUPS {
            conn.query_drop(format!("SELECT id, qty FROM ct_moves WHERE id IN ({})", list(g, PER / 2))).await.unwrap();
        }
        let got: Vec<(u32, i64)> = conn.query(format!("SELECT id, qty FROM ct_moves WHERE id IN ({})", list(g, PER))).await.unwrap();
        let total: i64 = got.iter().map(|r| r.1).sum();
        if got.len() != PER as usize || total != 1000 * i64::from(PER) {
            torn.push((g, got));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let moves = mover.await.unwrap();
    assert!(
        torn.is_empty(),
        "{} of {} reads showed part of a transaction ({moves} transactions), e.g. {:?}",
        torn.len(),
        GROUPS * 4,
        torn[0]
    );
    let why: Vec<(RelayReason, u64)> = RelayReason::ALL.iter().map(|r| (*r, relayed(&proxy, *r))).filter(|r| r.1 > 0).collect();
    assert!(
        hits(&proxy, "moves") > u64::from(GROUPS),
        "{} hits, relayed {why:?}: the IN lists were answered by the server, not the cache",
        hits(&proxy, "moves")
    );
    // A read that waited for partitions to settle, and met no hole, is no filled read.
    let cache = engine(&proxy).by_name("moves").expect("cache");
    let (missed, filled) = (cache.reads.missed.get(), cache.reads.filled.get());
    assert!(filled <= missed, "{filled} reads counted as filled, of {missed} that missed");
}

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
async fn transactions_and_session_dependent_reads_are_relayed() {
    items_table("ct_relay", 10).await;
    let proxy = start_proxy(&cache_config(&[("relay", "SELECT id, name FROM ct_relay WHERE id = ?")])).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, name FROM ct_relay WHERE id = 3";
    hit(&mut client, &proxy, "relay", sql).await;

    let before = (hits(&proxy, "relay"), relayed(&proxy, RelayReason::InTransaction));
    client.query("START TRANSACTION").await;
    client.query(sql).await;
    client.query("COMMIT").await;
    client.query("SET autocommit = 0").await;
    client.query(sql).await;
    client.query("SET autocommit = 1").await;
    assert_eq!((hits(&proxy, "relay"), relayed(&proxy, RelayReason::InTransaction)), (before.0, before.1 + 2));

    let not_cacheable = relayed(&proxy, RelayReason::NotCacheable);
    client.query("SELECT id, name FROM ct_relay WHERE id = 3 AND NOW() > '2000-01-01'").await;
    client.query("SELECT id, name FROM ct_relay WHERE id = @x").await;
    assert_eq!(relayed(&proxy, RelayReason::NotCacheable), not_cacheable + 2);

    // A setting that can change results and that the probe does not read (the order of
    // long strings): relayed until the session is reset.
    client.query("SET SESSION max_sort_length = 8").await;
    let state = relayed(&proxy, RelayReason::SessionState);
    client.query(sql).await;
    assert_eq!(relayed(&proxy, RelayReason::SessionState), state + 1);
    client.send(&[0x1f]).await; // COM_RESET_CONNECTION
    client.packet().await;
    hit(&mut client, &proxy, "relay", sql).await;
    assert_eq!(hits(&proxy, "relay"), before.0 + 1);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_keeps_views_true_to_the_schema_and_revives_dropped_tables() {
    items_table("ct_ddl", 6).await;
    let proxy = start_proxy(&cache_config(&[("ddl", "SELECT id, name FROM ct_ddl WHERE id = ?")])).await;
    let e = engine(&proxy);
    let mut admin = direct().await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, name FROM ct_ddl WHERE id = 2";
    hit(&mut client, &proxy, "ddl", sql).await;
    let applied = |e: &Engine| e.gate.applied().0;

    // A statement that changes nothing keeps what is cached.
    let before = applied(&e);
    admin.query_drop("ALTER TABLE ct_ddl ADD INDEX by_grp (grp)").await.unwrap();
    admin.query_drop("UPDATE ct_ddl SET qty = 77 WHERE id = 1").await.unwrap(); // a batch after the DDL
    assert!(eventually(|| applied(&e) > before).await);
    assert_eq!(e.by_name("ddl").unwrap().stats().keys, 1, "no eviction for a DDL that changes nothing");

    // A new column: the view is rebuilt; answers stay the server's.
    admin.query_drop("ALTER TABLE ct_ddl ADD COLUMN extra INT NULL").await.unwrap();
    admin.query_drop("UPDATE ct_ddl SET name = 'renamed' WHERE id = 2").await.unwrap();
    let want = check.query(sql).await;
    assert_eq!(hit_as_server(&mut client, &proxy, "ddl", sql, &want).await, want);

    // A selected column's definition changes (its length): the session that was answered
    // before is answered with the new definitions, not the ones it was answered with last.
    admin.query_drop("ALTER TABLE ct_ddl MODIFY name VARCHAR(80) NOT NULL").await.unwrap();
    let want_wider = check.query(sql).await;
    assert_ne!(want_wider, want, "the server's column definition changed");
    assert_eq!(hit_as_server(&mut client, &proxy, "ddl", sql, &want_wider).await, want_wider);
    // An index on a selected column changes nothing the views hold, but the column's
    // definition gains a key flag.
    admin.query_drop("ALTER TABLE ct_ddl ADD INDEX by_name (name)").await.unwrap();
    let want_indexed = check.query(sql).await;
    assert_ne!(want_indexed, want_wider, "the server's column definition changed");
    assert_eq!(hit_as_server(&mut client, &proxy, "ddl", sql, &want_indexed).await, want_indexed);

    // Dropped: relayed (the server's own error); re-created: served again.
    admin.query_drop("DROP TABLE ct_ddl").await.unwrap();
    assert!(eventually(|| e.by_name("ddl").unwrap().live().is_err()).await, "a dropped table's cache stops serving");
    items_table("ct_ddl", 3).await;
    assert!(eventually(|| e.by_name("ddl").unwrap().live().is_ok()).await, "a re-created table's cache is served again");
    let want = check.query(sql).await;
    assert_eq!(hit(&mut client, &proxy, "ddl", sql).await, want);
}

/// The `mariadb` command-line client (libmariadb) negotiates MariaDB's extended type
/// information, which changes the layout of column definitions.
/// A schema change is applied once its views are rebuilt: a DDL that no write follows (a
/// quiet table, a maintenance window) must leave freshet caught up and serving, its status
/// saying so. It stayed behind the DDL, the lag grew past `max_lag` and every read relayed
/// until some write came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ddl_that_no_write_follows_leaves_freshet_caught_up() {
    let mut admin = fresh_table("ct_quiet", "id INT PRIMARY KEY, s VARCHAR(10)", "(1, 'a'), (2, 'b')").await;
    let config = cache_config(&[("quiet", "SELECT id, s FROM ct_quiet WHERE id = ?")]).replace("max_lag = \"5s\"", "max_lag = \"1s\"");
    let proxy = start_proxy(&config).await;
    let mut raw = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, s FROM ct_quiet WHERE id = 1";
    hit(&mut raw, &proxy, "quiet", sql).await;
    admin.query_drop("ALTER TABLE ct_quiet MODIFY s VARCHAR(20)").await.unwrap();
    let mut client = through(&proxy).await;
    caught_up(&mut client).await;
    // Past max_lag with nothing written: still caught up, and a hit.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status: Vec<(String, String)> = client.query("SHOW FRESHET STATUS").await.unwrap();
    let caught = status.iter().find(|(k, _)| k == "caught_up").map(|(_, v)| v.clone());
    assert_eq!(caught.as_deref(), Some("yes"), "{status:?}");
    hit(&mut raw, &proxy, "quiet", sql).await;
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

/// The stream decodes only the rows of tables caches read. A runtime CREATE CACHE on a table
/// no cache read yet (its rows were being skipped) must still see every write after it,
/// including writes that race with its creation and its first fills (the writer's `follow`
/// module: the cache is installed only once the stream announces the table).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_cache_on_a_table_no_cache_read_sees_every_later_write() {
    items_table("ct_follow_a", 4).await;
    items_table("ct_follow_b", 20).await;
    let proxy = start_proxy(&cache_config(&[("a", "SELECT id, name FROM ct_follow_a WHERE id = ?")])).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writes = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut c = direct().await;
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                c.query_drop(format!("UPDATE ct_follow_b SET name = 'v{i}', grp = {} WHERE id = {}", i % 3, 1 + i % 20)).await.unwrap();
                i += 1;
            }
            i
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut conn = through(&proxy).await;
    conn.query_drop("CREATE CACHE b FROM SELECT id, name FROM ct_follow_b WHERE grp = ?").await.unwrap();
    let mut raw = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    for _ in 0..5 {
        for g in 0..3 {
            raw.query(&format!("SELECT id, name FROM ct_follow_b WHERE grp = {g}")).await;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(writes.await.unwrap() > 0);
    // Caught up: freshet's applied position is at or past the server's end of binlog as read
    // now (other tests of this file write concurrently, so it may move past it).
    caught_up(&mut conn).await;
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    for g in 0..3 {
        let sql = format!("SELECT id, name FROM ct_follow_b WHERE grp = {g}");
        assert_eq!(hit(&mut raw, &proxy, "b", &sql).await, check.query(&sql).await, "{sql}");
    }
}

/// DDL that gives a cached table a schema the dataflow refuses (a DECIMAL wider than its
/// values hold exactly), with the new column before the cached ones: the binlog's rows now have
/// the new shape, so the old view must not serve them; the cache relays and its answers stay
/// the server's. (The old view kept serving: its columns read the row's old positions.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_to_a_refused_schema_relays_with_the_servers_answers() {
    items_table("ct_refused", 6).await;
    let proxy = start_proxy(&cache_config(&[("refused", "SELECT id, name, qty FROM ct_refused WHERE id = ?")])).await;
    let e = engine(&proxy);
    let mut admin = direct().await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, name, qty FROM ct_refused WHERE id = 2";
    hit(&mut client, &proxy, "refused", sql).await;
    admin.query_drop("ALTER TABLE ct_refused ADD COLUMN amount DECIMAL(40,2) NOT NULL DEFAULT 1.5 AFTER id").await.unwrap();
    admin.query_drop("UPDATE ct_refused SET name = 'after the DDL', qty = 99 WHERE id = 2").await.unwrap();
    assert!(eventually(|| e.by_name("refused").unwrap().live().is_err()).await, "the cache stops serving");
    let reason = e.by_name("refused").unwrap().live().err().unwrap();
    assert!(reason.contains("refused") && reason.contains("amount"), "{reason}");
    let mut conn = through(&proxy).await;
    caught_up(&mut conn).await;
    let all_relayed = || RelayReason::ALL.iter().map(|r| relayed(&proxy, *r)).sum::<u64>();
    let before = all_relayed();
    for _ in 0..3 {
        assert_eq!(client.query(sql).await, check.query(sql).await);
    }
    assert_eq!(all_relayed(), before + 3, "relayed, not served");
}

/// Strings compare, hash and sort in the views exactly as the server's collation says, for
/// every character, not only Latin letters: `ß` is `s` under utf8mb4_general_ci and `ss`
/// under utf8mb4_unicode_ci, fullwidth `Ｓ` is `s` under unicode_ci, and unicode_ci sorts
/// punctuation before letters. Rows that arrive through the binlog must reach the partitions
/// the server would put them in, an ordered window must be in the server's order, and rows
/// equal under the collation must stay the distinct rows they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strings_are_equal_and_ordered_as_the_servers_collations_say() {
    let mut admin = fresh_table(
        "ct_coll",
        "id INT PRIMARY KEY, g VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL, u VARCHAR(20) COLLATE utf8mb4_unicode_ci NOT NULL, \
         grp INT NOT NULL, e ENUM('é', 'b') COLLATE utf8mb4_general_ci NOT NULL DEFAULT 'b', j JSON NULL",
        "(1, 's', 'ss', 1, 'b', NULL), (2, 'x', 'oe', 1, 'b', NULL), (3, 'a', '_b', 1, 'b', NULL), (4, 'b', 'a', 1, 'b', NULL), \
         (5, 'c', '-c', 1, 'b', NULL), (10, 'a', 'p', 3, 'é', NULL), (11, 'A', 'q', 3, 'é', NULL), (12, 'a ', 'r', 3, 'b', NULL)",
    )
    .await;
    admin.query_drop("UPDATE ct_coll SET j = JSON_OBJECT('id', id) WHERE grp = 1").await.unwrap();
    let proxy = start_proxy(&cache_config(&[
        ("coll_g", "SELECT COUNT(*) AS n FROM ct_coll WHERE g = ?"),
        ("coll_u", "SELECT COUNT(*) AS n FROM ct_coll WHERE u = ?"),
        ("coll_o", "SELECT u, id FROM ct_coll WHERE grp = ? ORDER BY u, id LIMIT 4"),
        ("coll_c", "SELECT CONCAT(u, '!') AS x, id FROM ct_coll WHERE grp = ? ORDER BY x, id"),
        ("coll_m", "SELECT grp, MIN(g) AS m, COUNT(*) AS n FROM ct_coll WHERE grp = ? GROUP BY grp"),
        // The same for a computed text column: `'a!'`, `'A!'` and `'a !'` are three rows.
        ("coll_x", "SELECT grp, MIN(CONCAT(g, '!')) AS m, COUNT(*) AS n FROM ct_coll WHERE grp = ? GROUP BY grp"),
        // An ENUM's labels compare under its collation too, with a literal or a parameter.
        ("coll_e", "SELECT COUNT(*) AS n FROM ct_coll WHERE grp = ? AND e = 'É'"),
        ("coll_k", "SELECT COUNT(*) AS n FROM ct_coll WHERE e = ?"),
        // MariaDB's JSON is text to the protocol and JSON to the binlog's schema.
        ("coll_j", "SELECT id, j FROM ct_coll WHERE grp = ? ORDER BY id"),
    ]))
    .await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let reads = [
        ("coll_g", "SELECT COUNT(*) AS n FROM ct_coll WHERE g = 's'"),
        ("coll_u", "SELECT COUNT(*) AS n FROM ct_coll WHERE u = 'ss'"),
        ("coll_u", "SELECT COUNT(*) AS n FROM ct_coll WHERE u = 'oe'"),
        ("coll_o", "SELECT u, id FROM ct_coll WHERE grp = 1 ORDER BY u, id LIMIT 4"),
        ("coll_c", "SELECT CONCAT(u, '!') AS x, id FROM ct_coll WHERE grp = 1 ORDER BY x, id"),
        ("coll_m", "SELECT grp, MIN(g) AS m, COUNT(*) AS n FROM ct_coll WHERE grp = 3 GROUP BY grp"),
        ("coll_x", "SELECT grp, MIN(CONCAT(g, '!')) AS m, COUNT(*) AS n FROM ct_coll WHERE grp = 3 GROUP BY grp"),
        ("coll_e", "SELECT COUNT(*) AS n FROM ct_coll WHERE grp = 3 AND e = 'É'"),
        ("coll_k", "SELECT COUNT(*) AS n FROM ct_coll WHERE e = 'b '"),
        ("coll_j", "SELECT id, j FROM ct_coll WHERE grp = 1 ORDER BY id"),
    ];
    for (cache, sql) in reads {
        let want = check.query(sql).await;
        let got = hit(&mut client, &proxy, cache, sql).await;
        // The minimum of three equal strings is any of them: the server names the first row
        // it scanned, which freshet cannot know (docs/decisions.md, "Exact identity").
        if cache != "coll_m" && cache != "coll_x" {
            assert_eq!(got, want, "{sql} before the writes");
        }
    }
    // Each new row equals an existing key under its column's collation, or sorts into the
    // window, only by the server's rules.
    admin
        .query_drop("INSERT INTO ct_coll (id, g, u, grp) VALUES (6, 'ß', 'ß', 2), (7, 'ſ', 'Ｓs', 2), (8, 'y', 'œ', 1), (9, 'z', '=a', 1)")
        .await
        .unwrap();
    // Rows that were filled change and go: the binlog's rows must cancel the filled ones.
    admin.query_drop("UPDATE ct_coll SET u = 'OE', j = JSON_OBJECT('new', 2) WHERE id = 2").await.unwrap();
    admin.query_drop("DELETE FROM ct_coll WHERE id = 5").await.unwrap();
    // Rows equal under the collation, filled as the input of an aggregate: the one left is
    // the minimum, whatever the fill's grouping did with the three.
    admin.query_drop("DELETE FROM ct_coll WHERE id IN (10, 12)").await.unwrap();
    for (cache, sql) in reads {
        let want = check.query(sql).await;
        assert_eq!(hit_as_server(&mut client, &proxy, cache, sql, &want).await, want, "{sql} after the writes");
    }
}

/// MariaDB sorts a GROUP BY's groups by the grouping columns, under their collations, as if
/// ORDER BY named them (MySQL 8 no longer does; `ORDER BY NULL` turns it off): the order of
/// such a read is the server's, not undefined. A view published them sorted by every output
/// column, exactly, so `Banana, Zeta, apple, mango` came back where the server answers
/// `apple, Banana, mango, Zeta`, and a count selected first ordered the groups by the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_rows_come_back_in_the_servers_group_order() {
    let mut admin = fresh_table(
        "ct_group_order",
        "id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL, KEY (k)",
        "(1, 1, 'apple'), (2, 1, 'Zeta'), (3, 1, 'mango'), (4, 1, 'Banana'), (5, 1, 'apple'), (6, 2, 'b'), (7, 2, 'A')",
    )
    .await;
    let reads = [
        (
            "go_names",
            "SELECT name, COUNT(*) AS n FROM ct_group_order WHERE k = ? GROUP BY name",
            "SELECT name, COUNT(*) AS n FROM ct_group_order WHERE k = 1 GROUP BY name",
        ),
        (
            "go_count_first",
            "SELECT COUNT(*) AS n, MAX(id) AS m, name FROM ct_group_order WHERE k = ? GROUP BY name",
            "SELECT COUNT(*) AS n, MAX(id) AS m, name FROM ct_group_order WHERE k = 1 GROUP BY name",
        ),
        (
            "go_hidden",
            "SELECT COUNT(*) AS n, MIN(id) AS m FROM ct_group_order WHERE k = ? GROUP BY name",
            "SELECT COUNT(*) AS n, MIN(id) AS m FROM ct_group_order WHERE k = 1 GROUP BY name",
        ),
        (
            "go_two",
            "SELECT MIN(id) AS m, name, k FROM ct_group_order WHERE k = ? GROUP BY k, name",
            "SELECT MIN(id) AS m, name, k FROM ct_group_order WHERE k = 1 GROUP BY k, name",
        ),
        (
            "go_limit",
            "SELECT MAX(id) AS m, name FROM ct_group_order WHERE k = ? GROUP BY name LIMIT 2",
            "SELECT MAX(id) AS m, name FROM ct_group_order WHERE k = 1 GROUP BY name LIMIT 2",
        ),
        (
            "go_keys",
            "SELECT COUNT(*) AS n, k FROM ct_group_order WHERE k IN (?, ?) GROUP BY k",
            "SELECT COUNT(*) AS n, k FROM ct_group_order WHERE k IN (2, 1) GROUP BY k",
        ),
        // A GROUP BY name is a column of the table before it is an alias of the select list
        // (ORDER BY's is the alias first): grouped by the column `name`, shown as its initial.
        (
            "go_shadowed",
            "SELECT LEFT(name, 1) AS name, COUNT(*) AS n FROM ct_group_order WHERE k = ? GROUP BY name",
            "SELECT LEFT(name, 1) AS name, COUNT(*) AS n FROM ct_group_order WHERE k = 1 GROUP BY name",
        ),
        (
            "go_shadowed_order",
            "SELECT 100 - id AS id, COUNT(*) AS n FROM ct_group_order WHERE k = ? GROUP BY id",
            "SELECT 100 - id AS id, COUNT(*) AS n FROM ct_group_order WHERE k = 1 GROUP BY id",
        ),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, unserved) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered in another order than the server's: {wrong:#?}");
    // A name both a column and an alias: the server answers with a warning (1052, the name is
    // ambiguous), which a view does not keep: relayed.
    assert_eq!(unserved, ["go_shadowed", "go_shadowed_order"], "every other read answered from its view");
    // New groups land where the server sorts them.
    admin.query_drop("INSERT INTO ct_group_order VALUES (8, 1, 'aardvark'), (9, 1, 'Zz'), (10, 1, 'BANANA')").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "after the writes: {wrong:#?}");
}

/// A utf8mb3 column holds only characters of the Basic Multilingual Plane, and the server
/// refuses to compare it with a text that holds others (1267, illegal mix of collations): `name
/// = '😀'` is an error, not a lookup. The views compare utf8mb3 as its utf8mb4 twin, where every
/// supplementary character weighs as U+FFFD under general_ci, so the read was answered with
/// the row holding U+FFFD (or, for an ENUM, with no row). Such a parameter is relayed; one the
/// column can hold is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_character_a_utf8mb3_column_cannot_hold_gets_the_servers_error() {
    let _admin = fresh_table(
        "ct_mb3",
        "id INT PRIMARY KEY, name VARCHAR(20) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci NOT NULL, \
         e ENUM('x', 'y') CHARACTER SET utf8mb3 COLLATE utf8mb3_unicode_ci NOT NULL DEFAULT 'x'",
        "(1, 'x', 'x'), (2, '\u{FFFD}', 'y')",
    )
    .await;
    let proxy = start_proxy(&cache_config(&[
        ("mb3_name", "SELECT id, name FROM ct_mb3 WHERE name = ?"),
        ("mb3_enum", "SELECT id FROM ct_mb3 WHERE e = ?"),
    ]))
    .await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    // Served: characters the column can hold, the partition of U+FFFD filled.
    for (cache, sql) in [
        ("mb3_name", "SELECT id, name FROM ct_mb3 WHERE name = 'x'"),
        ("mb3_name", "SELECT id, name FROM ct_mb3 WHERE name = '\u{FFFD}'"),
        ("mb3_enum", "SELECT id FROM ct_mb3 WHERE e = 'y'"),
    ] {
        let want = check.query(sql).await;
        assert_eq!(hit(&mut client, &proxy, cache, sql).await, want, "{sql}");
    }
    for sql in [
        "SELECT id, name FROM ct_mb3 WHERE name = '😀'",
        "SELECT id, name FROM ct_mb3 WHERE name = '𝄞'",
        "SELECT id FROM ct_mb3 WHERE e = '😀'",
    ] {
        let want = check.query(sql).await;
        assert_eq!(want[0][0], 0xff, "the server refuses {sql}");
        for _ in 0..3 {
            assert_eq!(client.query(sql).await, want, "{sql}");
        }
    }
}

/// MariaDB's `ascii` takes any byte (through `_binary` or hex literals, even in strict mode),
/// sends a byte past 0x7F to a utf8mb4 client as `?`, and compares and sorts raw bytes. The
/// binlog's bytes were decoded as UTF-8 (`é` or U+FFFD) where a fill holds the server's `?`,
/// so an update's before-image did not cancel the filled row (two rows for one id), and
/// ascii_bin sorted the decoded text, not the bytes. Reads of such columns are relayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ascii_column_holding_bytes_past_0x7f_is_answered_as_the_server_answers() {
    let mut admin = fresh_table(
        "ct_ascii",
        "id INT PRIMARY KEY, a VARCHAR(20) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, n INT NOT NULL",
        "(1, CONCAT('z', _binary 0xC3A9), 0), (2, 'b', 0), (3, _binary 0xE9, 0)",
    )
    .await;
    let reads = [
        ("ascii_id", "SELECT id, a, n FROM ct_ascii WHERE id = ?", "SELECT id, a, n FROM ct_ascii WHERE id = 1"),
        ("ascii_order", "SELECT id, a FROM ct_ascii WHERE n = ? ORDER BY a, id", "SELECT id, a FROM ct_ascii WHERE n = 0 ORDER BY a, id"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    admin.query_drop("UPDATE ct_ascii SET n = 1 WHERE id = 1").await.unwrap();
    admin.query_drop("INSERT INTO ct_ascii VALUES (4, _binary 0x80, 0)").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
}

/// A SUM of DOUBLEs depends on the order it adds them in: the server adds in its scan order
/// at every read, a view kept its running total through the binlog's changes. After one row
/// of (1e16, 1, -1e16) goes, the server answers 0 and a running total -1 (1e16 + 1 rounded to
/// 1e16 when the rows were added). The binary protocol sends a DOUBLE's bytes, so the answer
/// must be the server's: such a read is relayed or recomputed, never the running total.
/// A result's text columns carry the collation of the session's result character set,
/// which no variable shows: `SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci` (or a handshake
/// in that collation) makes it 224, `SET collation_connection` alone does not. An audit had
/// the definitions captured in one session served to another whose variables read the same
/// (224 where the server says 45).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_definitions_follow_the_result_collation() {
    fresh_table("ct_rescoll", "id INT PRIMARY KEY, s VARCHAR(10)", "(1, 'b')").await;
    let proxy = start_proxy(&cache_config(&[("rescoll", "SELECT id, s FROM ct_rescoll WHERE id = ?")])).await;
    let sql = "SELECT id, s FROM ct_rescoll WHERE id = 1";
    let mut first = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    first.query("SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci").await;
    hit(&mut first, &proxy, "rescoll", sql).await;
    for setup in [
        &["SET collation_connection = utf8mb4_unicode_ci"][..],
        &["SET NAMES utf8mb4"],
        &["SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci", "SET collation_connection = utf8mb4_general_ci"],
    ] {
        let mut d = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
        let mut t = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
        for statement in setup {
            d.query(statement).await;
            t.query(statement).await;
        }
        let want = d.query(sql).await;
        assert_eq!(hit(&mut t, &proxy, "rescoll", sql).await, want, "after {setup:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sums_of_doubles_are_the_servers() {
    let mut admin =
        fresh_table("ct_dsum", "id INT PRIMARY KEY, k INT NOT NULL, f DOUBLE NOT NULL", "(1, 1, 1e16), (2, 1, 1), (3, 1, -1e16)").await;
    let proxy = start_proxy(&lenient_config(&[("dsum", "SELECT k, SUM(f) AS s FROM ct_dsum WHERE k = ? GROUP BY k")])).await;
    let mut conn = through(&proxy).await;
    let stmt = "SELECT k, SUM(f) AS s FROM ct_dsum WHERE k = ? GROUP BY k";
    for _ in 0..10 {
        let _: Vec<(i32, f64)> = conn.exec(stmt, (1,)).await.unwrap();
    }
    admin.query_drop("DELETE FROM ct_dsum WHERE id = 2").await.unwrap();
    let want: Vec<(i32, f64)> = admin.exec(stmt, (1,)).await.unwrap();
    for _ in 0..50 {
        let got: Vec<(i32, f64)> = conn.exec(stmt, (1,)).await.unwrap();
        assert_eq!(got, want, "the view's running total, not the server's sum");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// DECIMAL arithmetic whose result needs more digits than a view's DECIMAL holds (28): the
/// server answers the exact product, so the view must not answer NULL. A row updated through
/// the binlog is evaluated by the view itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimal_arithmetic_past_28_digits_is_the_servers() {
    let mut admin = fresh_table("ct_wide", "id INT PRIMARY KEY, d DECIMAL(20,6) NOT NULL", "(1, 2.5), (2, 3)").await;
    let proxy = start_proxy(&lenient_config(&[("wide", "SELECT id, d * d AS p FROM ct_wide WHERE id = ?")])).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, d * d AS p FROM ct_wide WHERE id = 1";
    for _ in 0..5 {
        client.query(sql).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    admin.query_drop("UPDATE ct_wide SET d = 12345678901234.5 WHERE id = 1").await.unwrap();
    let want = check.query(sql).await;
    for _ in 0..50 {
        assert_eq!(client.query(sql).await, want, "the product's 39 digits");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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

/// The server types an expression before it reads a row: `COALESCE(d, 0)` on a DECIMAL(10,2)
/// is a DECIMAL(12,2), so a row whose `d` is NULL answers `0.00`, and `IF(c, d, 1)` answers
/// `1.00`. A view evaluates by value, so a row the binlog changed computes the `0` it picked;
/// a filled row (computed by the server) and the same row computed by the view must still be
/// one row, or a deleted row stays in the answer. The same for `u + 1` on an UNSIGNED column,
/// BIGINT UNSIGNED to the server, and for a YEAR or a BIT picked where a DECIMAL may be: the
/// server shows `2024.0`, not the YEAR's `2024`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computed_column_is_the_same_value_filled_or_computed() {
    let mut admin = fresh_table(
        "ct_typed",
        "id INT PRIMARY KEY, k INT NOT NULL, d DECIMAL(10,2) NULL, n INT NULL, u INT UNSIGNED NOT NULL DEFAULT 3, \
         y YEAR NULL, bt BIT(8) NULL",
        "(1, 1, NULL, 1, 3, 2024, 5), (2, 1, 2.5, NULL, 3, NULL, NULL), (3, 1, 1.25, 2, 3, 1901, 255)",
    )
    .await;
    let reads = [
        ("typed_c", "SELECT id, COALESCE(d, 0) AS x FROM ct_typed WHERE k = ?", "SELECT id, COALESCE(d, 0) AS x FROM ct_typed WHERE k = 1"),
        (
            "typed_i",
            "SELECT id, IF(n > 1, d, n) AS x FROM ct_typed WHERE k = ?",
            "SELECT id, IF(n > 1, d, n) AS x FROM ct_typed WHERE k = 1",
        ),
        ("typed_r", "SELECT id, ROUND(d, 3) AS x FROM ct_typed WHERE k = ?", "SELECT id, ROUND(d, 3) AS x FROM ct_typed WHERE k = 1"),
        // BIGINT UNSIGNED to the server, an integer like any other to the view.
        ("typed_u", "SELECT id, u + 1 AS x FROM ct_typed WHERE k = ?", "SELECT id, u + 1 AS x FROM ct_typed WHERE k = 1"),
        // DECIMAL(5,1) to the server, whichever it picks.
        (
            "typed_y",
            "SELECT id, CASE WHEN n > 5 THEN 2.5 ELSE y END AS x FROM ct_typed WHERE k = ?",
            "SELECT id, CASE WHEN n > 5 THEN 2.5 ELSE y END AS x FROM ct_typed WHERE k = 1",
        ),
        // Refused today (a BIT's digits are not known to the compiler); answered as the
        // server does either way.
        (
            "typed_b",
            "SELECT id, IF(n > 5, 0.5, bt) AS x FROM ct_typed WHERE k = ?",
            "SELECT id, IF(n > 5, 0.5, bt) AS x FROM ct_typed WHERE k = 1",
        ),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    // Filled rows go and come back changed: the view computes what it deletes and inserts.
    admin.query_drop("DELETE FROM ct_typed WHERE id IN (1, 2)").await.unwrap();
    admin.query_drop("UPDATE ct_typed SET d = NULL, n = 1 WHERE id = 3").await.unwrap();
    admin.query_drop("INSERT INTO ct_typed VALUES (4, 1, NULL, 7, 3, 2000, 9), (5, 1, NULL, 1, 3, 2155, 7)").await.unwrap();
    admin.query_drop("DELETE FROM ct_typed WHERE id = 3").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, unserved) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server after the writes: {wrong:#?}");
    // Answered by the views, not relayed because their values did not fit the columns.
    assert!(unserved.iter().all(|name| *name == "typed_b"), "not answered from the views: {unserved:#?}");
    assert_eq!(relayed(&proxy, RelayReason::Unencodable), 0, "values the encoders refused");
}

/// MariaDB sends a BIT column as its bytes, and a BIT that a choice picks (`COALESCE(bt)`,
/// `NULLIF(bt, n)`, `IF(c, bt, bt)`, a CASE of BITs) as its decimal digits, under a column
/// definition of type BIT either way, in both protocols (`0xFF` against `255`). MIN and MAX
/// keep the bytes. Found at proxy seed 141, where `NULLIF(bt, ey.k)` was shown as bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bit_that_a_choice_picks_is_shown_as_the_server_shows_it() {
    let mut admin = fresh_table(
        "ct_bitpick",
        "id INT PRIMARY KEY, k INT NOT NULL, n INT NULL, bt BIT(8) NULL",
        "(1, 1, 0, 255), (2, 1, 5, 5), (3, 1, NULL, NULL), (4, 1, 65, 65)",
    )
    .await;
    let reads = [
        (
            "bitpick_c",
            "SELECT id, COALESCE(bt) AS x FROM ct_bitpick WHERE k = ?",
            "SELECT id, COALESCE(bt) AS x FROM ct_bitpick WHERE k = 1",
        ),
        (
            "bitpick_n",
            "SELECT id, NULLIF(bt, n) AS x FROM ct_bitpick WHERE k = ?",
            "SELECT id, NULLIF(bt, n) AS x FROM ct_bitpick WHERE k = 1",
        ),
        (
            "bitpick_i",
            "SELECT id, IF(n > 1, bt, bt) AS x FROM ct_bitpick WHERE k = ?",
            "SELECT id, IF(n > 1, bt, bt) AS x FROM ct_bitpick WHERE k = 1",
        ),
        (
            "bitpick_e",
            "SELECT id, CASE WHEN n > 1 THEN bt END AS x FROM ct_bitpick WHERE k = ?",
            "SELECT id, CASE WHEN n > 1 THEN bt END AS x FROM ct_bitpick WHERE k = 1",
        ),
        ("bitpick_b", "SELECT id, bt AS x FROM ct_bitpick WHERE k = ?", "SELECT id, bt AS x FROM ct_bitpick WHERE k = 1"),
        (
            "bitpick_m",
            "SELECT k, MAX(bt) AS x FROM ct_bitpick WHERE k = ? GROUP BY k",
            "SELECT k, MAX(bt) AS x FROM ct_bitpick WHERE k = 1 GROUP BY k",
        ),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    // Filled rows, then rows the views compute from the binlog's.
    admin.query_drop("UPDATE ct_bitpick SET bt = 66 WHERE id = 2").await.unwrap();
    admin.query_drop("INSERT INTO ct_bitpick VALUES (5, 1, 9, 200), (6, 1, 200, 200)").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, unserved) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "text reads answered otherwise than the server: {wrong:#?}");
    // A BIT's MAX is its bytes or its digits by how the server groups the rows: relayed.
    assert_eq!(unserved, ["bitpick_m"], "not answered from the views");
    let (mut ours, mut theirs) = (through(&proxy).await, direct().await);
    for (name, cached, _) in reads {
        let want: Vec<mysql_async::Row> = theirs.exec(cached, (1,)).await.unwrap();
        let want: Vec<Vec<mysql_async::Value>> = want.into_iter().map(|r| r.unwrap()).collect();
        let before = hits(&proxy, name);
        for _ in 0..5 {
            let got: Vec<mysql_async::Row> = ours.exec(cached, (1,)).await.unwrap();
            let got: Vec<Vec<mysql_async::Value>> = got.into_iter().map(|r| r.unwrap()).collect();
            assert_eq!(got, want, "{cached} executed with 1");
        }
        assert!(name == "bitpick_m" || hits(&proxy, name) > before, "{name}: no execute answered from the view");
    }
}

/// MariaDB reads a number or a date from text after skipping leading ASCII white space only
/// (space, tab, newline, carriage return, vertical tab, form feed): `k = '\u{3000}5'` (an
/// ideographic space) is `k = 0` to it, with a warning, and `d = '\u{3000}2024-01-01'` matches
/// the zero date. Trailing white space is read with a note. Rust's `trim` skips every Unicode
/// white space.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_read_as_a_number_or_a_date_skips_only_the_servers_white_space() {
    let _admin = fresh_table(
        "ct_space",
        "id INT PRIMARY KEY, k INT NOT NULL, d DATE NULL, s VARCHAR(10) NULL",
        "(1, 0, '0000-00-00', '\u{3000}5'), (2, 5, '2024-01-01', '5'), (3, 5, '2024-01-01', '\u{a0}0')",
    )
    .await;
    let reads = [
        ("space_k", "SELECT id FROM ct_space WHERE k = ?", "SELECT id FROM ct_space WHERE k = '\u{3000}5'"),
        ("space_k", "SELECT id FROM ct_space WHERE k = ?", "SELECT id FROM ct_space WHERE k = '\u{a0}5'"),
        ("space_k", "SELECT id FROM ct_space WHERE k = ?", "SELECT id FROM ct_space WHERE k = ' \t5'"),
        ("space_k", "SELECT id FROM ct_space WHERE k = ?", "SELECT id FROM ct_space WHERE k = '5 '"),
        ("space_d", "SELECT id FROM ct_space WHERE d = ?", "SELECT id FROM ct_space WHERE d = '\u{3000}2024-01-01'"),
        ("space_d", "SELECT id FROM ct_space WHERE d = ?", "SELECT id FROM ct_space WHERE d = ' 2024-01-01'"),
        ("space_s", "SELECT id FROM ct_space WHERE k = ? AND s = 0", "SELECT id FROM ct_space WHERE k = 0 AND s = 0"),
        ("space_s", "SELECT id FROM ct_space WHERE k = ? AND s = 0", "SELECT id FROM ct_space WHERE k = 5 AND s = 0"),
        ("space_div", "SELECT id, 10 / k AS q FROM ct_space WHERE id = ?", "SELECT id, 10 / k AS q FROM ct_space WHERE id = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads[..6]).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    // A text column compared with a number, and a division by a column that holds 0: the
    // server counts a warning for each text that is not a number in the rows it reads and for
    // each division by zero, which an answer from a view would not count. Such caches are
    // refused (an audit saw the EOF's count differ), so their answers are the server's,
    // warnings and all.
    let (wrong, unserved) = answered_otherwise(&proxy, &mut client, &mut check, &reads[6..]).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert_eq!(unserved, ["space_s", "space_s", "space_div"], "caches whose reads make the server warn answered from a view");
    assert!(hits(&proxy, "space_k") > 0 && hits(&proxy, "space_d") > 0, "reads answered from the views");
}

/// A date read from text the way the server reads it: a two-digit year is in 1970-2069
/// (`'24-01-01'` is 2024-01-01), and a DATE compared with a date-time text is compared as a
/// DATETIME (`'2024-01-01 00:00:00'` matches, `'2024-01-01 10:00:00'` does not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_date_read_from_text_is_the_servers_date() {
    let _admin = fresh_table(
        "ct_datetext",
        "id INT PRIMARY KEY, d DATE NULL, dt DATETIME NULL",
        "(1, '2024-01-01', '2024-01-01 10:00:00'), (2, '1999-01-01', '2024-01-01 00:00:00'), (3, '0024-01-01', NULL)",
    )
    .await;
    let reads = [
        ("datetext_d", "SELECT id FROM ct_datetext WHERE d = ?", "SELECT id FROM ct_datetext WHERE d = '24-01-01'"),
        ("datetext_d", "SELECT id FROM ct_datetext WHERE d = ?", "SELECT id FROM ct_datetext WHERE d = '99-01-01'"),
        ("datetext_d", "SELECT id FROM ct_datetext WHERE d = ?", "SELECT id FROM ct_datetext WHERE d = '2024-01-01 00:00:00'"),
        ("datetext_d", "SELECT id FROM ct_datetext WHERE d = ?", "SELECT id FROM ct_datetext WHERE d = '2024-01-01 10:00:00'"),
        ("datetext_d", "SELECT id FROM ct_datetext WHERE d = ?", "SELECT id FROM ct_datetext WHERE d = '0024-01-01'"),
        ("datetext_dt", "SELECT id FROM ct_datetext WHERE dt = ?", "SELECT id FROM ct_datetext WHERE dt = '2024-01-01'"),
        ("datetext_dt", "SELECT id FROM ct_datetext WHERE dt = ?", "SELECT id FROM ct_datetext WHERE dt = '24-01-01 10:00:00'"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "datetext_d") > 0 && hits(&proxy, "datetext_dt") > 0, "reads answered from the views");
}

/// Rows without ORDER BY come in the order of the index the server reads, and an index orders
/// text by its collation (then by the primary key), not by its bytes: `A, a1, b, c, Z, _x`
/// where a view sorted `A, Z, _x, a1, b, c`, and case variants of one weight by their ids (an
/// audit of row order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_without_order_by_are_in_the_collations_order() {
    let _admin = fresh_table(
        "ct_rowsort",
        "code VARCHAR(10) PRIMARY KEY, g INT NOT NULL",
        "('b', 1), ('A', 1), ('c', 1), ('_x', 1), ('Z', 1), ('a1', 1)",
    )
    .await;
    let mut admin = fresh_table(
        "ct_rowsort_s",
        "id INT PRIMARY KEY, s VARCHAR(20) NOT NULL, KEY (s)",
        "(1, 'apple'), (2, 'Apple'), (3, 'APPLE '), (4, 'b'), (5, 'B')",
    )
    .await;
    let reads = [
        ("rowsort", "SELECT code, g FROM ct_rowsort WHERE g = ?", "SELECT code, g FROM ct_rowsort WHERE g = 1"),
        ("rowsort_s", "SELECT s, id FROM ct_rowsort_s WHERE s = ?", "SELECT s, id FROM ct_rowsort_s WHERE s = 'apple'"),
        ("rowsort_s", "SELECT s, id FROM ct_rowsort_s WHERE s = ?", "SELECT s, id FROM ct_rowsort_s WHERE s = 'B'"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    // Rows the view computes from the binlog, not filled by the server.
    admin.query_drop("INSERT INTO ct_rowsort_s VALUES (6, 'aPPle'), (0, 'APPLE')").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "rowsort") > 0 && hits(&proxy, "rowsort_s") > 0, "reads answered from the views");
}

/// A comment after the last `;` is a second statement to a client with multi-statements (the
/// server answers the read with SERVER_MORE_RESULTS_EXISTS, then an OK). Such a text is
/// relayed; it shared its fingerprint with the plain read (the comment is no part of the
/// normalized text), so once the plain read's verdict was stored it was answered from the view,
/// one result only (an audit of statement forms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_after_the_last_semicolon_is_relayed_after_the_plain_read() {
    let _admin = fresh_table("ct_tail", "id INT PRIMARY KEY, v VARCHAR(10) NOT NULL", "(1, 'a'), (2, 'b')").await;
    let cache = "SELECT id, v FROM ct_tail WHERE id = ?";
    let reads = [
        ("tail", cache, "SELECT id, v FROM ct_tail WHERE id = 1"),
        ("tail", cache, "SELECT id, v FROM ct_tail WHERE id = 1; -- x"),
        ("tail", cache, "SELECT id, v FROM ct_tail WHERE id = 2;/* */"),
        ("tail", cache, "SELECT id, v FROM ct_tail WHERE id = 2; # x"),
    ];
    // The plain read first: its verdict is the one stored.
    let (proxy, mut client, mut check) = warmed(&reads[..1]).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "tail") > 0, "the plain read answered from the view");
}

/// A date-time text with more fraction digits than its indexed column holds: the server's index
/// lookup stores it in the column's type, dropping them (`dt = '... 10:00:00.4'` finds the row
/// at 10:00:00), where its scan compares every digit and finds nothing. What it answers is its
/// plan's, so such a key is relayed (an audit saw the view answer no rows), as a fraction
/// against an INT is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_date_time_text_finer_than_its_column_is_relayed() {
    let _admin = fresh_table(
        "ct_finer",
        "id INT PRIMARY KEY, d DATE NULL, dt DATETIME NULL, dt3 DATETIME(3) NULL, KEY (d), KEY (dt), KEY (dt3)",
        "(1, '2024-01-01', '2024-01-01 10:00:00', '2024-01-01 10:00:00.123'), (2, '2024-01-02', '2024-01-01 11:00:00', '2023-12-31 23:59:59.999')",
    )
    .await;
    let reads = [
        ("finer_dt", "SELECT id, dt FROM ct_finer WHERE dt = ?", "SELECT id, dt FROM ct_finer WHERE dt = '2024-01-01 10:00:00'"),
        ("finer_dt", "SELECT id, dt FROM ct_finer WHERE dt = ?", "SELECT id, dt FROM ct_finer WHERE dt = '2024-01-01 10:00:00.4'"),
        ("finer_dt", "SELECT id, dt FROM ct_finer WHERE dt = ?", "SELECT id, dt FROM ct_finer WHERE dt IN ('2024-01-01 11:00:00.9')"),
        ("finer_dt3", "SELECT id, dt3 FROM ct_finer WHERE dt3 = ?", "SELECT id, dt3 FROM ct_finer WHERE dt3 = '2024-01-01 10:00:00.123'"),
        ("finer_dt3", "SELECT id, dt3 FROM ct_finer WHERE dt3 = ?", "SELECT id, dt3 FROM ct_finer WHERE dt3 = '2024-01-01 10:00:00.1230'"),
        ("finer_dt3", "SELECT id, dt3 FROM ct_finer WHERE dt3 = ?", "SELECT id, dt3 FROM ct_finer WHERE dt3 = '2024-01-01 10:00:00.1235'"),
        ("finer_dt3", "SELECT id, dt3 FROM ct_finer WHERE dt3 = ?", "SELECT id, dt3 FROM ct_finer WHERE dt3 = '2023-12-31 23:59:59.9999'"),
        ("finer_d", "SELECT id, d FROM ct_finer WHERE d = ?", "SELECT id, d FROM ct_finer WHERE d = '2024-01-01'"),
        ("finer_d", "SELECT id, d FROM ct_finer WHERE d = ?", "SELECT id, d FROM ct_finer WHERE d = '2024-01-01 00:00:00.5'"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "finer_dt") > 0 && hits(&proxy, "finer_dt3") > 0 && hits(&proxy, "finer_d") > 0, "reads answered from the views");
}

/// A YEAR compared with a number or a text takes the other side as a YEAR, as a column of it
/// would store it: `y = 24` and `y = '24'` are 2024, `y = 99` is 1999, `y = 0` is 0000 but
/// `y = '0'` is 2000, and `y > 50` is `y > 2050`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_year_compared_with_a_number_takes_it_as_a_year() {
    let mut admin = fresh_table(
        "ct_year",
        // Indexed, so the server returns an IN list's rows in key order, as a view does.
        "id INT PRIMARY KEY, k INT NOT NULL, y YEAR NULL, KEY (y)",
        "(1, 1, 2024), (2, 1, 1999), (3, 1, 2000), (4, 1, 0), (5, 1, 2060)",
    )
    .await;
    let reads = [
        ("year_y", "SELECT id FROM ct_year WHERE y = ?", "SELECT id FROM ct_year WHERE y = 24"),
        ("year_y", "SELECT id FROM ct_year WHERE y = ?", "SELECT id FROM ct_year WHERE y = '24'"),
        ("year_y", "SELECT id FROM ct_year WHERE y = ?", "SELECT id FROM ct_year WHERE y = 99"),
        ("year_y", "SELECT id FROM ct_year WHERE y = ?", "SELECT id FROM ct_year WHERE y = 0"),
        ("year_y", "SELECT id FROM ct_year WHERE y = ?", "SELECT id FROM ct_year WHERE y = '0'"),
        ("year_y", "SELECT id FROM ct_year WHERE y = ?", "SELECT id FROM ct_year WHERE y = 2024"),
        ("year_y", "SELECT id FROM ct_year WHERE y = ?", "SELECT id FROM ct_year WHERE y IN (24, 99)"),
        (
            "year_k",
            "SELECT id FROM ct_year WHERE k = ? AND y > 50 ORDER BY id",
            "SELECT id FROM ct_year WHERE k = 1 AND y > 50 ORDER BY id",
        ),
        // The year 0 is `0000` in a YEAR column (ZEROFILL in its definition) and `0` where
        // the server's result column is not one (MIN and MAX: an audit).
        ("year_rows", "SELECT id, y FROM ct_year WHERE k = ? ORDER BY id", "SELECT id, y FROM ct_year WHERE k = 1 ORDER BY id"),
        (
            "year_min",
            "SELECT k, MIN(y), MAX(y) FROM ct_year WHERE k = ? GROUP BY k",
            "SELECT k, MIN(y), MAX(y) FROM ct_year WHERE k = 1 GROUP BY k",
        ),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    // Rows the view computes from the binlog, not filled by the server.
    admin.query_drop("INSERT INTO ct_year VALUES (6, 1, 2040), (7, 1, 2055), (8, 1, 2024)").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "year_y") > 0 && hits(&proxy, "year_k") > 0, "reads answered from the views");
    assert!(hits(&proxy, "year_rows") > 0 && hits(&proxy, "year_min") > 0, "reads answered from the views");
}

/// An ENUM compared with a number compares its index (`en = 1` is `en = 'a'`), and with text
/// its label: a key parameter of an ENUM cache is read by its kind, as the server reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enum_key_compared_with_a_number_is_its_index() {
    let _admin =
        fresh_table("ct_enumkey", "id INT PRIMARY KEY, en ENUM('a', 'b', 'c') NULL, KEY (en)", "(1, 'a'), (2, 'b'), (3, 'a'), (4, NULL)")
            .await;
    let reads = [
        ("enumkey", "SELECT id FROM ct_enumkey WHERE en = ?", "SELECT id FROM ct_enumkey WHERE en = 1"),
        ("enumkey", "SELECT id FROM ct_enumkey WHERE en = ?", "SELECT id FROM ct_enumkey WHERE en = 2"),
        ("enumkey", "SELECT id FROM ct_enumkey WHERE en = ?", "SELECT id FROM ct_enumkey WHERE en = '1'"),
        ("enumkey", "SELECT id FROM ct_enumkey WHERE en = ?", "SELECT id FROM ct_enumkey WHERE en = 'b'"),
        ("enumkey", "SELECT id FROM ct_enumkey WHERE en = ?", "SELECT id FROM ct_enumkey WHERE en = 1.0"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    let (mut ours, mut theirs) = (through(&proxy).await, direct().await);
    for p in [mysql_async::Value::Int(1), mysql_async::Value::Int(2), mysql_async::Value::from("b"), mysql_async::Value::Double(1.0)] {
        let want: Vec<u32> = theirs.exec(reads[0].1, (p.clone(),)).await.unwrap();
        for _ in 0..5 {
            let got: Vec<u32> = ours.exec(reads[0].1, (p.clone(),)).await.unwrap();
            assert_eq!(got, want, "executed with {p:?}");
        }
    }
    assert!(hits(&proxy, "enumkey") > 0, "reads answered from the view");
}

/// A number compared with a DATE is compared as the date's number (`d = 20240101` matches
/// 2024-01-01), and with bytes as the bytes' number (`vb = 5` matches `'5'`): a key parameter
/// of another kind than its column's is read as the server reads it, or relayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_parameter_of_another_kind_is_compared_as_the_server_compares_it() {
    let _admin = fresh_table(
        "ct_kinds",
        "id INT PRIMARY KEY, d DATE NULL, vb VARBINARY(10) NULL",
        "(1, '2024-01-01', '5'), (2, '2024-01-02', 'x'), (3, '2024-01-01', '05')",
    )
    .await;
    let reads = [
        ("kinds_d", "SELECT id FROM ct_kinds WHERE d = ?", "SELECT id FROM ct_kinds WHERE d = 20240101"),
        ("kinds_d", "SELECT id FROM ct_kinds WHERE d = ?", "SELECT id FROM ct_kinds WHERE d = '2024-01-01'"),
        ("kinds_vb", "SELECT id FROM ct_kinds WHERE vb = ?", "SELECT id FROM ct_kinds WHERE vb = 5"),
        ("kinds_vb", "SELECT id FROM ct_kinds WHERE vb = ?", "SELECT id FROM ct_kinds WHERE vb = 'x'"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "kinds_d") > 0 && hits(&proxy, "kinds_vb") > 0, "reads answered from the views");
}

/// A number of another kind than its key column's is compared as the server compares it: a
/// DOUBLE as a double (`sb = 9.223372036854776e18` matches 2^63 - 1, whose double it is), an
/// integer or a DECIMAL exactly (`sb = 9223372036854775808` matches nothing; `d5 =
/// 9999999.999990000001` matches nothing where `d5 = 9999999.99999e0` matches 9999999.99999).
/// Two such parameters equal as numbers must not share what one of them was answered, in
/// either order, and a row written later must reach the reads it matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_of_another_kind_than_its_key_column_is_compared_as_the_server_compares_it() {
    let mut admin = fresh_table(
        "ct_numkey",
        "id INT PRIMARY KEY, sb BIGINT NOT NULL, d5 DECIMAL(12,5) NOT NULL, d0 DECIMAL(20,0) NOT NULL, k INT NOT NULL, KEY (k)",
        "(1, -9223372036854775808, 1, 12345678901234567890, 1), (2, 9223372036854775807, 9999999.99999, 3, 2)",
    )
    .await;
    let k = "SELECT id, k FROM ct_numkey WHERE k = ?";
    let sb = "SELECT id, sb FROM ct_numkey WHERE sb = ?";
    let d5 = "SELECT id, d5 FROM ct_numkey WHERE d5 = ?";
    let d0 = "SELECT id, d0 FROM ct_numkey WHERE d0 = ?";
    let reads = [
        ("numkey_sb", sb, "SELECT id, sb FROM ct_numkey WHERE sb = 9223372036854775808"),
        ("numkey_sb", sb, "SELECT id, sb FROM ct_numkey WHERE sb = 9.223372036854776e18"),
        ("numkey_sb", sb, "SELECT id, sb FROM ct_numkey WHERE sb = 9223372036854775807.0"),
        ("numkey_sb", sb, "SELECT id, sb FROM ct_numkey WHERE sb = '9223372036854775808'"),
        ("numkey_sb", sb, "SELECT id, sb FROM ct_numkey WHERE sb = -9223372036854775808"),
        ("numkey_d5", d5, "SELECT id, d5 FROM ct_numkey WHERE d5 = 9999999.999990000001"),
        ("numkey_d5", d5, "SELECT id, d5 FROM ct_numkey WHERE d5 = 9999999.99999e0"),
        ("numkey_d5", d5, "SELECT id, d5 FROM ct_numkey WHERE d5 = 1"),
        ("numkey_d0", d0, "SELECT id, d0 FROM ct_numkey WHERE d0 = 1.2345678901234567e19"),
        ("numkey_d0", d0, "SELECT id, d0 FROM ct_numkey WHERE d0 = 12345678901234567890"),
        // A fraction against an indexed INT: the server's index lookup rounds it (`k = 1.5`
        // finds k = 2), its scan does not; which one it runs is its plan's business.
        ("numkey_k", k, "SELECT id, k FROM ct_numkey WHERE k = 1"),
        ("numkey_k", k, "SELECT id, k FROM ct_numkey WHERE k = 1.5"),
        ("numkey_k", k, "SELECT id, k FROM ct_numkey WHERE k = '1.5'"),
        ("numkey_k", k, "SELECT id, k FROM ct_numkey WHERE k IN (1.5)"),
        ("numkey_k", k, "SELECT id, k FROM ct_numkey WHERE k = 1.4"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    admin.query_drop("INSERT INTO ct_numkey VALUES (3, 9223372036854775806, 2, 12345678901234567891, 2)").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server after a write: {wrong:#?}");
    assert!(["numkey_sb", "numkey_d5", "numkey_d0", "numkey_k"].iter().all(|c| hits(&proxy, c) > 0), "reads answered from the views");
}

/// Keys the server compares otherwise than their column's values (an audit of literals):
/// a string against an indexed BIT is stored into the BIT as its bytes by the index lookup
/// (`'1'` is 0x31) and read as a number by a scan, so the answer is the plan's; an IN list
/// that mixes strings and numbers against a DECIMAL is compared as doubles, which tell apart
/// no two numbers of more than 15 digits that round alike; and `''` against an ENUM that
/// declares the label `''` names both it and the error value, whose string is empty (such a
/// column is read by no view now: fills cannot tell the two apart either). Each is relayed;
/// the BIT and DECIMAL columns keep their other reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_the_server_compares_otherwise_than_their_columns_are_relayed() {
    let mut admin = fresh_table(
        "ct_oddkey",
        "id INT PRIMARY KEY, bt BIT(8) NOT NULL, d DECIMAL(20,0) NOT NULL, e ENUM('a', 'B', '') NOT NULL, KEY (bt), KEY (d), KEY (e)",
        "(1, b'00000001', 9007199254740993, 'a'), (3, b'00110001', 9007199254740992, ''), \
         (4, b'00001010', 12345678901234567890, 'B'), (5, b'00000000', 12345678901234567891, 'a')",
    )
    .await;
    let bt = "SELECT id, bt FROM ct_oddkey WHERE bt = ?";
    let d = "SELECT id, d FROM ct_oddkey WHERE d = ?";
    let e = "SELECT id, e FROM ct_oddkey WHERE e = ?";
    let reads = [
        // A whole DECIMAL is the number it is (and left `bt = 1` answered from a partition it
        // had spoilt: a second audit).
        ("oddkey_bt", bt, "SELECT id, bt FROM ct_oddkey WHERE bt = 1.0"),
        ("oddkey_bt", bt, "SELECT id, bt FROM ct_oddkey WHERE bt = 2.0"),
        ("oddkey_bt", bt, "SELECT id, bt FROM ct_oddkey WHERE bt = 1"),
        ("oddkey_bt", bt, "SELECT id, bt FROM ct_oddkey WHERE bt = '1'"),
        ("oddkey_bt", bt, "SELECT id, bt FROM ct_oddkey WHERE bt = '10'"),
        ("oddkey_bt", bt, "SELECT id, bt FROM ct_oddkey WHERE bt = '-0'"),
        ("oddkey_d", d, "SELECT id, d FROM ct_oddkey WHERE d = 9007199254740992"),
        ("oddkey_d", d, "SELECT id, d FROM ct_oddkey WHERE d IN ('9007199254740992', 1)"),
        ("oddkey_d", d, "SELECT id, d FROM ct_oddkey WHERE d IN (1, '12345678901234567890')"),
        ("oddkey_d", d, "SELECT id, d FROM ct_oddkey WHERE d IN ('9007199254740992', '1')"),
        ("oddkey_e", e, "SELECT id, e FROM ct_oddkey WHERE e = 'a'"),
        ("oddkey_e", e, "SELECT id, e FROM ct_oddkey WHERE e = ''"),
        ("oddkey_e", e, "SELECT id, e FROM ct_oddkey WHERE e = ' '"),
        ("oddkey_e", e, "SELECT id, e FROM ct_oddkey WHERE e = 3"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    admin.query_drop("INSERT INTO ct_oddkey VALUES (6, b'00110001', 9007199254740993, '')").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server after a write: {wrong:#?}");
    assert!(["oddkey_bt", "oddkey_d"].iter().all(|c| hits(&proxy, c) > 0), "reads answered from the views");
    // A fill cannot tell the label '' from the error value: the column is read by no view.
    assert_eq!(hits(&proxy, "oddkey_e"), 0, "an ENUM declaring '' is not cached");
}

/// MariaDB's INET4, INET6 and UUID are text to a SELECT and their binary form in the binlog;
/// mysql_common misreads a negative TIME(1) or TIME(2) in the binlog. A view of such a column
/// would hold the fill's form beside the binlog's (a row updated twice, a deleted row kept):
/// a cache that reads one is refused, and one that reads the table's other columns is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_whose_binlog_form_is_not_their_value_are_not_cached() {
    let mut admin = fresh_table(
        "ct_opaque",
        "id INT PRIMARY KEY, name VARCHAR(10) NOT NULL, u UUID, ip INET6, t1 TIME(1)",
        "(1, 'one', '123e4567-e89b-12d3-a456-426655440000', '::1', '01:00:00.5'), (2, 'two', NULL, '::ffff:10.0.0.1', '00:00:00')",
    )
    .await;
    let reads = [
        ("opaque_name", "SELECT id, name FROM ct_opaque WHERE id = ?", "SELECT id, name FROM ct_opaque WHERE id = 1"),
        ("opaque_u", "SELECT id, u, ip FROM ct_opaque WHERE id = ?", "SELECT id, u, ip FROM ct_opaque WHERE id = 1"),
        ("opaque_u", "SELECT id, u, ip FROM ct_opaque WHERE id = ?", "SELECT id, u, ip FROM ct_opaque WHERE id = 2"),
        ("opaque_t", "SELECT id, t1 FROM ct_opaque WHERE id = ?", "SELECT id, t1 FROM ct_opaque WHERE id = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    for writes in [
        &[
            "UPDATE ct_opaque SET name = 'ONE', u = '00000000-0000-0000-0000-0000000000ff', ip = '::2' WHERE id = 1",
            "DELETE FROM ct_opaque WHERE id = 2",
        ][..],
        &["UPDATE ct_opaque SET t1 = '-00:00:00.5' WHERE id = 1"],
    ] {
        for write in writes {
            admin.query_drop(*write).await.unwrap();
        }
        caught_up(&mut through(&proxy).await).await;
        let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
        assert!(wrong.is_empty(), "answered otherwise than the server after {writes:?}: {wrong:#?}");
    }
    assert!(hits(&proxy, "opaque_name") > 0, "the table's other columns are cached");
    for refused in ["opaque_u", "opaque_t"] {
        assert!(engine(&proxy).by_name(refused).expect("listed").live().is_err(), "{refused} is refused");
    }
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

/// After a dot, a reserved word is a name, and names of tables are case-sensitive here
/// (`lower_case_table_names = 0`): `db.ORDER` and `db.Order` are not `db.order`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserved_word_after_a_dot_keeps_its_case() {
    let mut admin = direct().await;
    for t in ["`order`", "`ORDER`"] {
        admin.query_drop(format!("CREATE OR REPLACE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(20))")).await.unwrap();
    }
    admin.query_drop("INSERT INTO `order` VALUES (1, 'lower')").await.unwrap();
    admin.query_drop("INSERT INTO `ORDER` VALUES (1, 'upper')").await.unwrap();
    let cached = "SELECT id, v FROM freshet_test.order WHERE id = ?";
    let reads = [
        ("reserved", cached, "SELECT id, v FROM freshet_test.order WHERE id = 1"),
        ("reserved", cached, "SELECT id, v FROM freshet_test.ORDER WHERE id = 1"),
        ("reserved", cached, "SELECT id, v FROM freshet_test.Order WHERE id = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "reserved") > 0);
    for t in ["`order`", "`ORDER`"] {
        admin.query_drop(format!("DROP TABLE {t}")).await.unwrap();
    }
}

/// A quoted name that the server reads otherwise bare: a charset introducer (`_utf8mb4`,
/// `_binary`: bare, 1064), `current_role` (bare, the session's role: NULL),
/// `master_ssl_verify_server_cert` (reserved: 1064), `sql_cache` first in a select list (an
/// option: 1064). The bare spelling must not be answered from the cache of the quoted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quoted_name_the_server_reads_otherwise_bare_is_not_its_bare_word() {
    let mut admin = fresh_table(
        "ct_kw2",
        "id INT PRIMARY KEY, `_utf8mb4` INT, `_latin1` VARCHAR(5), `_binary` INT, k INT, KEY(k)",
        "(1, 11, 'l1', 111, 5), (2, 22, 'l2', 222, 5)",
    )
    .await;
    admin
        .query_drop(
            "CREATE OR REPLACE TABLE ct_kw3 (id INT PRIMARY KEY, `current_role` VARCHAR(10), \
             `master_ssl_verify_server_cert` INT, `sql_cache` INT)",
        )
        .await
        .unwrap();
    admin.query_drop("INSERT INTO ct_kw3 VALUES (1, 'colval', 7, 8)").await.unwrap();
    let intro = "SELECT `_utf8mb4`, `_latin1`, `_binary` FROM ct_kw2 WHERE id = ?";
    let role = "SELECT id, `current_role`, `master_ssl_verify_server_cert` FROM ct_kw3 WHERE id = ?";
    let option = "SELECT `sql_cache`, id FROM ct_kw3 WHERE id = ?";
    let reads = [
        ("intro", intro, "SELECT `_utf8mb4`, `_latin1`, `_binary` FROM ct_kw2 WHERE id = 2"),
        ("intro", intro, "SELECT _utf8mb4, `_latin1`, `_binary` FROM ct_kw2 WHERE id = 2"),
        ("intro", intro, "SELECT `_utf8mb4`, `_latin1`, _binary FROM ct_kw2 WHERE id = 2"),
        ("intro", intro, "SELECT `_utf8mb4`, _LATIN1, `_binary` FROM ct_kw2 WHERE id = 2"),
        ("role", role, "SELECT id, `current_role`, `master_ssl_verify_server_cert` FROM ct_kw3 WHERE id = 1"),
        ("role", role, "SELECT id, current_role, `master_ssl_verify_server_cert` FROM ct_kw3 WHERE id = 1"),
        ("role", role, "SELECT id, `current_role`, master_ssl_verify_server_cert FROM ct_kw3 WHERE id = 1"),
        ("option", option, "SELECT `sql_cache`, id FROM ct_kw3 WHERE id = 1"),
        ("option", option, "SELECT sql_cache, id FROM ct_kw3 WHERE id = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    for cache in ["intro", "role", "option"] {
        assert!(hits(&proxy, cache) > 0, "{cache}: its quoted read is answered from the cache");
    }
    admin.query_drop("DROP TABLE ct_kw2, ct_kw3").await.unwrap();
}

/// DDL that replaces what the tracked database holds without naming a table: `CREATE OR
/// REPLACE SEQUENCE` of a cached table's name, `CREATE OR REPLACE DATABASE` of the tracked
/// database. And a session whose default database it dropped has none any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_that_replaces_a_table_or_the_database_is_seen() {
    const DB2: &str = "freshet_test_replaced";
    let mut admin = direct().await;
    let setup = async |admin: &mut mysql_async::Conn| {
        admin.query_drop(format!("CREATE OR REPLACE DATABASE {DB2}")).await.unwrap();
        for t in ["t", "s"] {
            admin.query_drop(format!("CREATE TABLE {DB2}.{t} (id INT PRIMARY KEY, v VARCHAR(20))")).await.unwrap();
            admin.query_drop(format!("INSERT INTO {DB2}.{t} VALUES (1, '{t} one')")).await.unwrap();
        }
    };
    setup(&mut admin).await;
    let url = format!("{}/{DB2}", upstream_url().rsplit_once('/').expect("a url with a database").0);
    let caches = [("t", "SELECT id, v FROM t WHERE id = ?"), ("s", "SELECT id, v FROM s WHERE id = ?")];
    let proxy = start_proxy_with_url(&url, &cache_config(&caches)).await;
    let connect = |addr: String| async move { mysql_async::Conn::new(opts(&addr).db_name(Some(DB2))).await.unwrap() };
    let mut direct_conn = connect(upstream_addr()).await;
    let served = async |conn: &mut mysql_async::Conn, direct: &mut mysql_async::Conn, sql: &str, what: &str| {
        let want: Result<Vec<(i32, String)>, String> = direct.query(sql).await.map_err(|e| e.to_string());
        for _ in 0..5 {
            let got: Result<Vec<(i32, String)>, String> = conn.query(sql).await.map_err(|e| e.to_string());
            assert_eq!(got.is_ok(), want.is_ok(), "{sql} after {what}: {got:?} / {want:?}");
            if let (Ok(g), Ok(w)) = (&got, &want) {
                assert_eq!(g, w, "{sql} after {what}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let mut reader = connect(proxy.mysql.to_string()).await;
    let (t, s) = ("SELECT id, v FROM t WHERE id = 1", "SELECT id, v FROM s WHERE id = 1");
    served(&mut reader, &mut direct_conn, t, "the start").await;
    served(&mut reader, &mut direct_conn, s, "the start").await;
    admin.query_drop(format!("CREATE OR REPLACE SEQUENCE {DB2}.s")).await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    served(&mut reader, &mut direct_conn, s, "CREATE OR REPLACE SEQUENCE").await;
    admin.query_drop(format!("CREATE OR REPLACE DATABASE {DB2}")).await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let mut fresh = connect(upstream_addr()).await;
    served(&mut reader, &mut fresh, &t.replace("FROM t", &format!("FROM {DB2}.t")), "CREATE OR REPLACE DATABASE").await;
    // A session that drops its own default database is in none.
    setup(&mut admin).await;
    caught_up(&mut through(&proxy).await).await;
    let mut dropper = connect(proxy.mysql.to_string()).await;
    served(&mut dropper, &mut direct_conn, t, "the database made again").await;
    dropper.query_drop(format!("DROP DATABASE {DB2}")).await.unwrap();
    setup(&mut admin).await;
    caught_up(&mut through(&proxy).await).await;
    let mut other = connect(proxy.mysql.to_string()).await;
    served(&mut other, &mut direct_conn, t, "the database made once more").await;
    for _ in 0..3 {
        let got: Result<Vec<(i32, String)>, _> = dropper.query(t).await;
        assert!(got.as_ref().is_err_and(|e| e.to_string().contains("1046")), "no database selected after its own DROP DATABASE: {got:?}");
    }
    admin.query_drop(format!("DROP DATABASE {DB2}")).await.unwrap();
}

/// Spellings of one read that the server may read alike or not: white space the server's
/// lexer knows (and some it does not), comments, adjacent strings, number and string literal
/// forms, quoted names, a trailing `;`, a NUL. Each is answered as the server answers it:
/// rows, or its error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spellings_of_a_read_are_read_as_the_server_reads_them() {
    let _admin = fresh_table("ct_lex", "id INT PRIMARY KEY, s VARCHAR(8) NULL", "(1, 'a'), (2, 'ab'), (10, 'x'), (16, 'y')").await;
    let point = "SELECT id, s FROM ct_lex WHERE id = ?";
    let texts = [
        "SELECT id, s FROM ct_lex WHERE id = 1",
        "SELECT id, s FROM ct_lex WHERE id=1",
        "SELECT id, s FROM ct_lex WHERE id =\t1",
        "SELECT id, s FROM ct_lex WHERE id =\r\n1",
        "SELECT id, s FROM ct_lex WHERE id =\x0b1",
        "SELECT id, s FROM ct_lex WHERE id =\x0c1",
        "SELECT id, s FROM ct_lex WHERE id =\u{a0}1",
        "SELECT id, s FROM ct_lex WHERE id =\u{3000}1",
        "SELECT id, s FROM ct_lex WHERE id = 1\0",
        "SELECT id, s FROM ct_lex WHERE id = 1\0 AND 0",
        "SELECT id, s FROM ct_lex WHERE id = 1;",
        "SELECT id, s FROM ct_lex WHERE id = 1 ;  ",
        "SELECT id, s FROM ct_lex WHERE id = 1 -- x",
        "SELECT id, s FROM ct_lex WHERE id = 1 --x",
        "SELECT id, s FROM ct_lex WHERE id = 1 # x",
        "SELECT id, s FROM ct_lex WHERE id = 1 /* x */",
        "SELECT id, s FROM ct_lex WHERE id = 1 /* x",
        "SELECT id, s FROM ct_lex WHERE id = 1 /*! AND 0 */",
        "SELECT id, s FROM ct_lex WHERE id = 1 /*M!100000 AND 0 */",
        "SELECT id, s FROM ct_lex WHERE id = '1' '0'",
        "SELECT id, s FROM ct_lex WHERE id = '1' \"0\"",
        "SELECT id, s FROM ct_lex WHERE id = \"1\"",
        "SELECT id, s FROM ct_lex WHERE id = _binary'1'",
        "SELECT id, s FROM ct_lex WHERE id = N'1'",
        "SELECT id, s FROM ct_lex WHERE id = 0x10",
        "SELECT id, s FROM ct_lex WHERE id = X'10'",
        "SELECT id, s FROM ct_lex WHERE id = 0b1010",
        "SELECT id, s FROM ct_lex WHERE id = b'1010'",
        "SELECT id, s FROM ct_lex WHERE id = 1.",
        "SELECT id, s FROM ct_lex WHERE id = .1e1",
        "SELECT id, s FROM ct_lex WHERE id = 1e0",
        "SELECT id, s FROM ct_lex WHERE id = 1e",
        "SELECT id, s FROM ct_lex WHERE id = 1x",
        "SELECT id, s FROM ct_lex WHERE id = 0x",
        "SELECT id, s FROM ct_lex WHERE id = 0x1g",
        "SELECT id, s FROM ct_lex WHERE id = 1.e1",
        "SELECT id, s FROM ct_lex WHERE id = (1)",
        "SELECT id, s FROM ct_lex WHERE (id) = 1",
        "SELECT id, s FROM ct_lex WHERE id = +1",
        "SELECT id, s FROM ct_lex WHERE id = - -1",
        "SELECT id, s FROM ct_lex WHERE id = 01",
        "SELECT id, s FROM ct_lex WHERE id = 1.0",
        "SELECT id, s FROM ct_lex WHERE id = 1.5",
        "SELECT id, s FROM ct_lex WHERE `id` = 1",
        "SELECT id, s FROM `ct_lex` WHERE id = 1",
        "SELECT id, s FROM freshet_test.ct_lex WHERE id = 1",
        "SELECT id, s FROM freshet_test . ct_lex WHERE id = 1",
        "SELECT id, s FROM ct_lex WHERE ct_lex.id = 1",
        "SELECT id, s FROM ct_lex WHERE ct_lex . id = 1",
        "select id, s from ct_lex where id = 1",
        "SELECT id, s FROM ct_lex WHERE id = 1 AND 1",
        "SELECT id, s FROM ct_lex WHERE id = '1abc'",
        "SELECT id, s FROM ct_lex WHERE id = ' 1'",
        "SELECT id, s FROM ct_lex WHERE id = '1 '",
        "SELECT id, s FROM ct_lex WHERE id = '\\x31'",
        "SELECT id, s FROM ct_lex WHERE id = 1 LIMIT 1",
        "SELECT id, s FROM ct_lex WHERE id = 1 LIMIT 0",
        "SELECT id, s FROM ct_lex WHERE id = 1 ORDER BY s",
        "SELECT id, s FROM ct_lex WHERE id IN (1)",
        "SELECT id, s FROM ct_lex WHERE id IN (1, 1, 2)",
        "SELECT id, s FROM ct_lex WHERE id IN ('1', 2.0, 0x10)",
        "SELECT id, s FROM ct_lex WHERE id = \\N",
        "SELECT id, s FROM ct_lex WHERE id <=> \\N",
        "SELECT id, s FROM ct_lex WHERE id = 1e400",
        "SELECT id, s FROM ct_lex WHERE id = 1e-400",
        "SELECT id, s FROM ct_lex WHERE id = -0",
        "SELECT id, s FROM ct_lex WHERE id = 18446744073709551616",
        "SELECT id, s FROM ct_lex WHERE id = 0x1",
        "SELECT id, s FROM ct_lex WHERE id = 1 /* a /* b */ */",
        "SELECT id, s FROM ct_lex WHERE id = @x",
        "SELECT id, s FROM ct_lex WHERE id = @@auto_increment_increment",
        "SELECT id, s FROM ct_lex WHERE id = (SELECT 1)",
        "SELECT id, s FROM ct_lex WHERE id = ?",
        "SELECT id, s FROM ct_lex WHERE id = 1 INTO @y",
        "SELECT id, s FROM ct_lex WHERE id = 1 FOR UPDATE",
        "SELECT id, s FROM ct_lex WHERE id = 1 LOCK IN SHARE MODE",
        "SELECT SQL_NO_CACHE id, s FROM ct_lex WHERE id = 1",
        "SELECT id, s FROM ct_lex WHERE id = 1 PROCEDURE ANALYSE()",
        "SELECT id, s FROM ct_lex USE INDEX (PRIMARY) WHERE id = 1",
        "SELECT id, s FROM ct_lex PARTITION (p0) WHERE id = 1",
        "SELECT id, s FROM ct_lex AS OF TIMESTAMP NOW() WHERE id = 1",
        "SELECT id, s FROM ct_lex FOR SYSTEM_TIME ALL WHERE id = 1",
    ];
    let reads: Vec<(&str, &str, &str)> = texts.iter().map(|t| ("lex", point, *t)).collect();
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "lex") > 0, "reads answered from the view");
}

/// The status flags of an answer's EOF packets say how the server ran that read: whether it
/// used an index (SERVER_QUERY_NO_INDEX_USED, NO_GOOD_INDEX_USED), whether it was slow. A
/// served answer took them from the session's last relayed statement, so a read by primary
/// key after a table scan said "no index used" (PHP's `MYSQLI_REPORT_INDEX` throws on it), and
/// a read the server runs as a scan said it used one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_answers_status_is_the_reads_not_the_statement_befores() {
    let _admin = fresh_table("ct_plan", "id INT PRIMARY KEY, v INT NULL", "(1, 1), (2, 2), (3, 1)").await;
    let reads = [
        ("plan_pk", "SELECT id, v FROM ct_plan WHERE id = ?", "SELECT id, v FROM ct_plan WHERE id = 1"),
        ("plan_scan", "SELECT id FROM ct_plan WHERE v = ?", "SELECT id FROM ct_plan WHERE v = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let before = ["SELECT COUNT(*) FROM ct_plan WHERE v > 0", "SELECT v FROM ct_plan WHERE id = 2"];
    let mut wrong = Vec::new();
    for (_, _, read) in reads {
        for statement in before {
            for _ in 0..5 {
                assert_eq!(client.query(statement).await, check.query(statement).await, "{statement}");
                if client.query(read).await != check.query(read).await {
                    wrong.push((statement, read));
                    break;
                }
            }
        }
    }
    assert!(wrong.is_empty(), "answered otherwise than the server after a statement: {wrong:#?}");
    assert!(hits(&proxy, "plan_pk") > 0 && hits(&proxy, "plan_scan") > 0, "reads answered from the views");
}

/// The server may plan a read apart by the types of its literals, and describe its columns
/// apart: against an INT column, `k = '1'` runs a GROUP BY through a temporary table, whose
/// columns lose the key flags (and COUNT's BINARY flag) that `k = 1`'s have. A served answer
/// took the definitions captured from a read with a literal of another type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_literals_type_gets_the_servers_column_definitions() {
    let _admin = fresh_table(
        "ct_literal_kinds",
        "id INT PRIMARY KEY, k INT NOT NULL, amount DECIMAL(10,3) NOT NULL, KEY (k)",
        "(1, 1, 1.5), (2, 1, 2.5), (3, 2, 3)",
    )
    .await;
    let reads = [
        (
            "kinds_sums",
            "SELECT k, COUNT(*) AS n, SUM(amount) AS s FROM ct_literal_kinds WHERE k = ? GROUP BY k",
            "SELECT k, COUNT(*) AS n, SUM(amount) AS s FROM ct_literal_kinds WHERE k = 1 GROUP BY k",
        ),
        (
            "kinds_point",
            "SELECT id, k, amount FROM ct_literal_kinds WHERE id = ?",
            "SELECT id, k, amount FROM ct_literal_kinds WHERE id = 1",
        ),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let before = hits(&proxy, "kinds_sums") + hits(&proxy, "kinds_point");
    let mut wrong = Vec::new();
    for key in ["1", "'1'", "1.0", "1e0", "'2'", "2", "'9'"] {
        for (_, query, _) in reads {
            let read = query.replace('?', key);
            for _ in 0..5 {
                if client.query(&read).await != check.query(&read).await {
                    wrong.push(read.clone());
                    break;
                }
            }
        }
    }
    // The same for an execute's parameter: an integer, a string, a DECIMAL and a DOUBLE.
    let parameters: [&[u8]; 4] = [
        &[&[0u8, 1, 8, 0][..], &1u64.to_le_bytes()].concat(),
        &[0, 1, 0xfd, 0, 1, b'1'],
        &[0, 1, 0xf6, 0, 3, b'1', b'.', b'0'],
        &[&[0u8, 1, 5, 0][..], &1f64.to_le_bytes()].concat(),
    ];
    for (_, query, _) in reads {
        let (id, _) = prepare(&mut client, query).await;
        let (check_id, _) = prepare(&mut check, query).await;
        for parameter in parameters {
            for _ in 0..5 {
                client.send(&execute(id, parameter)).await;
                check.send(&execute(check_id, parameter)).await;
                if client.read_results().await != check.read_results().await {
                    wrong.push(format!("{query} executed with {parameter:?}"));
                    break;
                }
            }
        }
    }
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "kinds_sums") + hits(&proxy, "kinds_point") > before, "reads answered from the views");
}

/// The same for the flags a statement's own OK sets: SESSION_STATE_CHANGED says that session
/// state information follows in that OK (CLIENT_SESSION_TRACK, as MariaDB Connector/J asks);
/// an answer served after `SET autocommit = 1` (a tracked variable) carried the flag in its
/// closing OK with no such information after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_answer_carries_no_flag_of_the_statement_before() {
    let _admin = fresh_table("ct_track", "id INT PRIMARY KEY, v INT NULL", "(1, 1), (2, 2)").await;
    let read = "SELECT id, v FROM ct_track WHERE id = 1";
    let proxy = start_proxy(&lenient_config(&[("track", "SELECT id, v FROM ct_track WHERE id = ?")])).await;
    use freshet_proxy::protocol::Capabilities;
    let caps = DEFAULT_CAPS | Capabilities::SESSION_TRACK | Capabilities::DEPRECATE_EOF;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), caps).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), caps).await.unwrap();
    for _ in 0..5 {
        client.query(read).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = hits(&proxy, "track");
    let mut wrong = Vec::new();
    for statement in ["SET autocommit = 1", "SET SESSION autocommit = ON", "SELECT 1"] {
        for _ in 0..5 {
            assert_eq!(client.query(statement).await, check.query(statement).await, "{statement}");
            if client.query(read).await != check.query(read).await {
                wrong.push(statement);
                break;
            }
        }
    }
    assert!(wrong.is_empty(), "answered otherwise than the server after: {wrong:?}");
    assert!(hits(&proxy, "track") > before, "reads answered from the view");
}

/// Typed and ODBC literals against a DATE key: `DATE '...'`, `TIMESTAMP '...'`, `{d '...'}`,
/// and strings the server reads as a date, a date-time or neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn date_literals_are_read_as_the_server_reads_them() {
    let _admin =
        fresh_table("ct_dlit", "id INT PRIMARY KEY, d DATE NULL, KEY (d)", "(1, '2024-01-01'), (2, '2024-01-02'), (3, NULL)").await;
    let cached = "SELECT id FROM ct_dlit WHERE d = ?";
    let texts = [
        "SELECT id FROM ct_dlit WHERE d = '2024-01-01'",
        "SELECT id FROM ct_dlit WHERE d = DATE '2024-01-01'",
        "SELECT id FROM ct_dlit WHERE d = DATE'2024-01-02'",
        "SELECT id FROM ct_dlit WHERE d = TIMESTAMP '2024-01-01 00:00:00'",
        "SELECT id FROM ct_dlit WHERE d = TIMESTAMP '2024-01-01 00:00:01'",
        "SELECT id FROM ct_dlit WHERE d = '2024-01-01 00:00:01'",
        "SELECT id FROM ct_dlit WHERE d = '2024-01-01 00:00:00.000000'",
        "SELECT id FROM ct_dlit WHERE d = {d '2024-01-01'}",
        "SELECT id FROM ct_dlit WHERE d = {ts '2024-01-01 00:00:00'}",
        "SELECT id FROM ct_dlit WHERE d = '20240101'",
        "SELECT id FROM ct_dlit WHERE d = 20240101",
        "SELECT id FROM ct_dlit WHERE d = '2024/01/01'",
        "SELECT id FROM ct_dlit WHERE d = '24-1-1'",
        "SELECT id FROM ct_dlit WHERE d = '2024-01-01x'",
        "SELECT id FROM ct_dlit WHERE d = TIME '00:00:00'",
    ];
    let reads: Vec<(&str, &str, &str)> = texts.iter().map(|t| ("dlit", cached, *t)).collect();
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "dlit") > 0, "reads answered from the view");
}

/// The same reads through sessions of each shape a driver negotiates: with and without
/// DEPRECATE_EOF (an OK closes the rows), CLIENT_SESSION_TRACK, MariaDB's extended type
/// information (other column definitions), FOUND_ROWS: a served answer is the server's, byte
/// for byte, under each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_the_servers_under_every_negotiated_shape() {
    use freshet_proxy::protocol::Capabilities;
    let _admin = fresh_table(
        "ct_shapes",
        "id INT PRIMARY KEY, k INT NOT NULL, s VARCHAR(8) NULL, d DECIMAL(6,2) NULL, t DATETIME(3) NULL, j JSON NULL, KEY (k)",
        r#"(1, 1, 'a', 1.50, '2024-01-01 10:00:00.125', '{"a": 1}'), (2, 1, NULL, NULL, NULL, NULL), (3, 2, 'b', -2.00, '2024-02-29 00:00:00', '[]')"#,
    )
    .await;
    let caches = [
        ("shapes", "SELECT id, s, d, t, j FROM ct_shapes WHERE k = ?"),
        ("shapes_n", "SELECT k, COUNT(*) AS n FROM ct_shapes WHERE k = ? GROUP BY k"),
    ];
    let proxy = start_proxy(&lenient_config(&caches)).await;
    let reads = [
        "SELECT id, s, d, t, j FROM ct_shapes WHERE k = 1",
        "SELECT id, s, d, t, j FROM ct_shapes WHERE k IN (1, 2)",
        "SELECT k, COUNT(*) AS n FROM ct_shapes WHERE k = 1 GROUP BY k",
        "SELECT id, s, d, t, j FROM ct_shapes WHERE k = 3",
    ];
    let shapes = [
        ("plain", DEFAULT_CAPS),
        ("deprecate_eof", DEFAULT_CAPS | Capabilities::DEPRECATE_EOF),
        ("session_track", DEFAULT_CAPS | Capabilities::DEPRECATE_EOF | Capabilities::SESSION_TRACK),
        ("extended_types", DEFAULT_CAPS | Capabilities::MARIADB_EXTENDED_TYPE_INFO),
        ("found_rows", DEFAULT_CAPS | Capabilities::FOUND_ROWS | Capabilities::DEPRECATE_EOF),
    ];
    let mut wrong = Vec::new();
    for (shape, caps) in shapes {
        let before = hits(&proxy, "shapes") + hits(&proxy, "shapes_n");
        let mut client = RawClient::connect(&proxy.mysql.to_string(), caps).await.unwrap();
        let mut check = RawClient::connect(&upstream_addr(), caps).await.unwrap();
        for read in reads {
            for _ in 0..10 {
                if client.query(read).await != check.query(read).await {
                    wrong.push((shape, read));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        assert!(hits(&proxy, "shapes") + hits(&proxy, "shapes_n") > before, "{shape}: reads answered from the views");
    }
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
}

/// A filesort compares strings by their first `max_sort_length` bytes (1,024): two values
/// equal there are equal to it, and ordered by the next ORDER BY key. Ordered by their whole
/// text in a view, `ORDER BY s, id` over two 1,100-character values that differ only at the
/// end answered 2, 1 where the server answers 1, 2; a top-k picked another row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_strings_are_ordered_as_the_server_orders_them() {
    let rows = "(1, 1, CONCAT(REPEAT('x', 1100), 'b')), (2, 1, CONCAT(REPEAT('x', 1100), 'a')), (3, 1, 'a'), (4, 2, 'q')";
    let _admin =
        fresh_table("ct_sortlen", "id INT PRIMARY KEY, k INT NOT NULL, s VARCHAR(2000) COLLATE utf8mb4_bin NULL, KEY (k)", rows).await;
    let reads = [
        ("sortlen", "SELECT id FROM ct_sortlen WHERE k = ? ORDER BY s, id", "SELECT id FROM ct_sortlen WHERE k = 1 ORDER BY s, id"),
        (
            "sortlen_top",
            "SELECT id FROM ct_sortlen WHERE k = ? ORDER BY s DESC, id LIMIT 1",
            "SELECT id FROM ct_sortlen WHERE k = 1 ORDER BY s DESC, id LIMIT 1",
        ),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
}

/// String literals with every escape the server knows, and some it does not: `\%` and `\_`
/// keep their backslash, `\a` is `a`, `\Z` is byte 26, `\0` a NUL, a doubled quote one
/// quote. Each read is answered as the server answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_literals_are_read_as_the_server_reads_them() {
    let _admin = fresh_table(
        "ct_esc",
        "id INT PRIMARY KEY, s VARBINARY(16) NULL, KEY (s)",
        r#"(1, 'a%'), (2, 'a\\%'), (3, 'a_'), (4, 'a\\_'), (5, 'a''b'), (6, 'a\"b'), (7, 'a\\b'), (8, 'x\ty'), (9, 'n\0x'), (10, 'z\Zx'), (11, 'a'), (12, 'q\bq'), (13, 'r\rr')"#,
    )
    .await;
    let cached = "SELECT id FROM ct_esc WHERE s = ?";
    let texts = [
        r"SELECT id FROM ct_esc WHERE s = 'a%'",
        r"SELECT id FROM ct_esc WHERE s = 'a\%'",
        r"SELECT id FROM ct_esc WHERE s = 'a\\%'",
        r"SELECT id FROM ct_esc WHERE s = 'a\_'",
        r"SELECT id FROM ct_esc WHERE s = 'a''b'",
        r"SELECT id FROM ct_esc WHERE s = 'a\'b'",
        r#"SELECT id FROM ct_esc WHERE s = "a""b""#,
        r#"SELECT id FROM ct_esc WHERE s = 'a\"b'"#,
        r#"SELECT id FROM ct_esc WHERE s = "a'b""#,
        r"SELECT id FROM ct_esc WHERE s = 'a\\b'",
        r"SELECT id FROM ct_esc WHERE s = 'x\ty'",
        r"SELECT id FROM ct_esc WHERE s = 'n\0x'",
        r"SELECT id FROM ct_esc WHERE s = 'z\Zx'",
        r"SELECT id FROM ct_esc WHERE s = '\a'",
        r"SELECT id FROM ct_esc WHERE s = 'q\bq'",
        r"SELECT id FROM ct_esc WHERE s = 'r\rr'",
        r"SELECT id FROM ct_esc WHERE s = X'612562'",
        r"SELECT id FROM ct_esc WHERE s = 0x61",
        r"SELECT id FROM ct_esc WHERE s = _binary'a'",
        r"SELECT id FROM ct_esc WHERE s = _latin1'a'",
        r"SELECT id FROM ct_esc WHERE s = 'a' COLLATE utf8mb4_bin",
    ];
    let reads: Vec<(&str, &str, &str)> = texts.iter().map(|t| ("esc", cached, *t)).collect();
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "esc") > 0, "reads answered from the view");
}

/// A name the server parses as a built-in function only when `(` follows it at once (COUNT,
/// MAX, SUM, SUBSTRING, NOW, ...: MariaDB's `sql_functions`): with a space or a comment
/// before the `(`, the server reads a stored function of that name (ER_SP_DOES_NOT_EXIST,
/// 1630) or a syntax error (`COUNT (*)`). Such a read is the server's to answer. A name the
/// server looks up by name (CONCAT) takes the space.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_before_a_functions_parenthesis_is_read_as_the_server_reads_it() {
    let _admin = fresh_table(
        "ct_space",
        "id INT PRIMARY KEY, k INT NOT NULL, v INT NULL, s VARCHAR(8) NULL, KEY (k)",
        "(1, 1, 5, 'abc'), (2, 1, 7, 'xyz'), (3, 2, 1, 'q')",
    )
    .await;
    let grouped = "SELECT k, COUNT(*), MAX(v), SUM(v) FROM ct_space WHERE k = ? GROUP BY k";
    let point = "SELECT id, SUBSTRING(s, 2), CONCAT(s, 'x') FROM ct_space WHERE id = ?";
    let filtered = "SELECT id FROM ct_space WHERE k = ? AND SUBSTRING(s, 1, 1) <> 'x'";
    let having = "SELECT k FROM ct_space WHERE k = ? GROUP BY k HAVING MAX(v) > 0";
    let reads = [
        ("space_g", grouped, "SELECT k, COUNT(*), MAX(v), SUM(v) FROM ct_space WHERE k = 1 GROUP BY k"),
        ("space_g", grouped, "SELECT k, COUNT (*), MAX(v), SUM(v) FROM ct_space WHERE k = 1 GROUP BY k"),
        ("space_g", grouped, "SELECT k, COUNT(*), MAX (v), SUM(v) FROM ct_space WHERE k = 1 GROUP BY k"),
        ("space_g", grouped, "SELECT k, COUNT(*), MAX/**/(v), SUM(v) FROM ct_space WHERE k = 1 GROUP BY k"),
        ("space_g", grouped, "SELECT k, COUNT(*), MAX(v), SUM\n(v) FROM ct_space WHERE k = 1 GROUP BY k"),
        ("space_p", point, "SELECT id, SUBSTRING(s, 2), CONCAT (s, 'x') FROM ct_space WHERE id = 1"),
        ("space_p", point, "SELECT id, SUBSTRING (s, 2), CONCAT(s, 'x') FROM ct_space WHERE id = 1"),
        ("space_p", point, "SELECT id, SUBSTRING(s, 2), `CONCAT`(s, 'x') FROM ct_space WHERE id = 1"),
        ("space_w", filtered, "SELECT id FROM ct_space WHERE k = 1 AND SUBSTRING(s, 1, 1) <> 'x'"),
        ("space_w", filtered, "SELECT id FROM ct_space WHERE k = 1 AND SUBSTRING (s, 1, 1) <> 'x'"),
        ("space_w", filtered, "SELECT id FROM ct_space WHERE k = 1 AND SUBSTRING/* a comment */(s, 1, 1) <> 'x'"),
        ("space_w", filtered, "SELECT id FROM ct_space WHERE k = 1 AND `SUBSTRING`(s, 1, 1) <> 'x'"),
        ("space_w", filtered, "SELECT id FROM ct_space WHERE k = 1 AND `substr`(s, 1, 1) <> 'x'"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING MAX(v) > 0"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING MAX (v) > 0"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING COUNT (*) > 0"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING `MAX`(v) > 0"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING freshet_test.MAX(v) > 0"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING freshet_test.`MAX`(v) > 0"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    for cache in ["space_g", "space_p", "space_w", "space_h"] {
        assert!(hits(&proxy, cache) > 0, "{cache}: reads answered from the view");
    }
}

/// A result's column names are the query's spelling (`SELECT ID` names its column `ID`, an
/// alias as written): reads of one cache spelled in other cases each get their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_names_are_spelled_as_the_read_spells_them() {
    let _admin = fresh_table("ct_names", "id INT PRIMARY KEY, k INT NOT NULL, n INT", "(1, 1, 10), (2, 1, 20)").await;
    let reads = [
        ("names", "SELECT id, n AS total FROM ct_names WHERE k = ?", "SELECT id, n AS total FROM ct_names WHERE k = 1"),
        ("names", "SELECT id, n AS total FROM ct_names WHERE k = ?", "SELECT ID, n AS Total FROM ct_names WHERE k = 1"),
        ("names", "SELECT id, n AS total FROM ct_names WHERE k = ?", "select Id, N as TOTAL from ct_names where K = 1"),
        ("names", "SELECT id, n AS total FROM ct_names WHERE k = ?", "SELECT `iD`, n AS `toTal` FROM ct_names WHERE k = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "names") > 0, "reads answered from the view");
}

/// Signs around a literal are the server's arithmetic: `k = --1` is `k = 1` (`--` followed by
/// a digit is no comment), `k = - 1` is -1, `k = -+1` -1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signs_before_a_literal_are_read_as_the_server_reads_them() {
    let _admin = fresh_table("ct_signs", "id INT PRIMARY KEY, k INT NOT NULL", "(1, 1), (2, -1), (3, 0)").await;
    let reads = [
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = 1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = --1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = - 1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = -+1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = +-1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = - -1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = -'1'"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = -0"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k IN (-1, --1)"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE -1 = k"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "signs") > 0, "reads answered from the view");
}

/// Generated columns: a VIRTUAL one is computed on read and a STORED (PERSISTENT) one on
/// write, and MariaDB's row events may carry either or not (`binlog_row_image`), so a view
/// must hold each row's columns where the table has them, and the values the server shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_columns_are_answered_as_the_server_answers() {
    let mut admin = fresh_table(
        "ct_generated",
        "id INT PRIMARY KEY, k INT NOT NULL, a INT NULL, v INT AS (a * 2) VIRTUAL, name VARCHAR(10) NULL, \
         p VARCHAR(12) AS (CONCAT(name, '!')) PERSISTENT, tail INT NULL",
        "(1, 1, 5, DEFAULT, 'x', DEFAULT, 10), (2, 1, NULL, DEFAULT, 'y', DEFAULT, 20)",
    )
    .await;
    let reads = [
        ("gen_v", "SELECT id, v, name, tail FROM ct_generated WHERE k = ?", "SELECT id, v, name, tail FROM ct_generated WHERE k = 1"),
        ("gen_p", "SELECT id, p, tail FROM ct_generated WHERE k = ?", "SELECT id, p, tail FROM ct_generated WHERE k = 1"),
        ("gen_all", "SELECT * FROM ct_generated WHERE k = ?", "SELECT * FROM ct_generated WHERE k = 1"),
        (
            "gen_sum",
            "SELECT k, SUM(v), COUNT(p) FROM ct_generated WHERE k = ? GROUP BY k",
            "SELECT k, SUM(v), COUNT(p) FROM ct_generated WHERE k = 1 GROUP BY k",
        ),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    admin.query_drop("INSERT INTO ct_generated (id, k, a, name, tail) VALUES (3, 1, 7, 'z', 30)").await.unwrap();
    admin.query_drop("UPDATE ct_generated SET a = 8, name = 'w', tail = 11 WHERE id = 1").await.unwrap();
    admin.query_drop("DELETE FROM ct_generated WHERE id = 2").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, unserved) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server after the writes: {wrong:#?}");
    assert!(unserved.is_empty(), "not answered from the views: {unserved:#?}");
}

/// A session may log its writes with a partial row image (`SET SESSION binlog_row_image =
/// MINIMAL`, or NOBLOB) although the server's is FULL: its row events hold the key and the
/// changed columns only. The views must not take the missing columns for NULLs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_partial_row_image_does_not_corrupt_the_views() {
    let mut admin = fresh_table(
        "ct_image",
        "id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(10) NULL, body TEXT NULL, n INT NULL",
        "(1, 1, 'x', 'long', 10), (2, 1, 'y', 'text', 20)",
    )
    .await;
    let reads = [("image", "SELECT id, name, body, n FROM ct_image WHERE k = ?", "SELECT id, name, body, n FROM ct_image WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    for image in ["MINIMAL", "NOBLOB"] {
        admin.query_drop(format!("SET SESSION binlog_row_image = '{image}'")).await.unwrap();
        admin.query_drop("UPDATE ct_image SET n = n + 1 WHERE id = 1").await.unwrap();
        admin.query_drop("INSERT INTO ct_image (id, k, name) VALUES (3, 1, 'z') ON DUPLICATE KEY UPDATE name = 'zz'").await.unwrap();
        admin.query_drop("DELETE FROM ct_image WHERE id = 2").await.unwrap();
        admin.query_drop("INSERT INTO ct_image VALUES (2, 1, 'y', 'text', 20)").await.unwrap();
    }
    caught_up(&mut through(&proxy).await).await;
    let (name, _, sql) = reads[0];
    let want = check.query(sql).await;
    let before = hits(&proxy, name);
    for _ in 0..50 {
        assert_eq!(client.query(sql).await, want, "{sql}: the server's rows after partial row images");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(hits(&proxy, name) > before, "answered from the view again");
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

/// InnoDB's foreign key actions change the child rows with no row event: the binlog holds the
/// parent's delete or update only (a replica's InnoDB cascades it again). ON DELETE CASCADE
/// deletes a story's comments, ON UPDATE CASCADE moves them, SET NULL clears a reference, and
/// a cascade goes on to the children's children. Every cache reading a child must show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_changed_by_foreign_key_actions_are_not_missed() {
    let mut admin = direct().await;
    for t in ["ct_fk_g", "ct_fk_c", "ct_fk_p"] {
        admin.query_drop(format!("DROP TABLE IF EXISTS {t}")).await.unwrap();
    }
    admin.query_drop("CREATE TABLE ct_fk_p (id INT PRIMARY KEY) ENGINE=InnoDB").await.unwrap();
    admin
        .query_drop(
            "CREATE TABLE ct_fk_c (id INT PRIMARY KEY, p INT, k INT NOT NULL, \
             FOREIGN KEY (p) REFERENCES ct_fk_p (id) ON DELETE CASCADE ON UPDATE CASCADE) ENGINE=InnoDB",
        )
        .await
        .unwrap();
    admin
        .query_drop(
            "CREATE TABLE ct_fk_g (id INT PRIMARY KEY, c INT NULL, k INT NOT NULL, \
             FOREIGN KEY (c) REFERENCES ct_fk_c (id) ON DELETE SET NULL) ENGINE=InnoDB",
        )
        .await
        .unwrap();
    admin.query_drop("INSERT INTO ct_fk_p VALUES (1), (2), (5)").await.unwrap();
    admin.query_drop("INSERT INTO ct_fk_c VALUES (10, 1, 1), (11, 1, 1), (20, 2, 1), (50, 5, 1)").await.unwrap();
    admin.query_drop("INSERT INTO ct_fk_g VALUES (100, 10, 1), (200, 20, 1)").await.unwrap();
    let reads = [
        ("fk_by_parent", "SELECT id, k FROM ct_fk_c WHERE p = ?", "SELECT id, k FROM ct_fk_c WHERE p = 1"),
        ("fk_by_k", "SELECT id, p FROM ct_fk_c WHERE k = ?", "SELECT id, p FROM ct_fk_c WHERE k = 1"),
        ("fk_grand", "SELECT id, c FROM ct_fk_g WHERE k = ?", "SELECT id, c FROM ct_fk_g WHERE k = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    for (name, _, sql) in &reads {
        hit(&mut client, &proxy, name, sql).await;
    }
    // The server's SERVER_QUERY_NO_INDEX_USED flag follows its plan, which the index on `p`
    // makes depend on the table's statistics: the EOF packets' status is not compared.
    let unflagged = |mut packets: Vec<Vec<u8>>| {
        for p in packets.iter_mut().filter(|p| p.len() == 5 && p[0] == 0xfe) {
            p[3] &= !0x20;
        }
        packets
    };
    for write in ["DELETE FROM ct_fk_p WHERE id = 1", "UPDATE ct_fk_p SET id = 3 WHERE id = 2"] {
        admin.query_drop(write).await.unwrap();
        answered_as_the_server_after(&proxy, &mut client, &mut check, &reads, write, unflagged).await;
    }
    assert_eq!(engine(&proxy).counters.cascades.get(), 4, "each write reached the child and the grandchild");
    for t in ["ct_fk_g", "ct_fk_c", "ct_fk_p"] {
        admin.query_drop(format!("DROP TABLE {t}")).await.unwrap();
    }
}

/// Online schema change tools (pt-online-schema-change, gh-ost) and migrations swap tables by
/// renaming: the name a cache reads then holds another table's rows, with the same schema. A
/// table renamed to the name is a new table, whatever its schema: its rows were never in the
/// views. Atomic (RENAME TABLE a TO b, c TO a) and in two steps (ALTER TABLE ... RENAME TO),
/// which the stream reads after both ran (the schema it reads for the first is the second's).
/// CREATE OR REPLACE TABLE of the same schema empties the table with no row event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_swapped_in_by_rename_is_not_taken_for_the_old_one() {
    let mut admin = direct().await;
    for t in ["ct_live", "ct_next", "ct_old", "ct_older"] {
        admin.query_drop(format!("DROP TABLE IF EXISTS {t}")).await.unwrap();
    }
    admin.query_drop("CREATE TABLE ct_live (id INT PRIMARY KEY, k INT NOT NULL, n INT)").await.unwrap();
    admin.query_drop("INSERT INTO ct_live VALUES (1, 1, 10), (2, 1, 20)").await.unwrap();
    let reads = [("live", "SELECT id, n FROM ct_live WHERE k = ?", "SELECT id, n FROM ct_live WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let swaps: [&[&str]; 7] = [
        &["RENAME TABLE ct_live TO ct_old, ct_next TO ct_live"],
        &["ALTER TABLE ct_live RENAME TO ct_older", "ALTER TABLE ct_next RENAME TO ct_live"],
        // Replaced by an empty table of the same schema.
        &["CREATE OR REPLACE TABLE ct_live (id INT PRIMARY KEY, k INT NOT NULL, n INT)"],
        // MariaDB's other spellings of a rename.
        &["RENAME TABLE IF EXISTS ct_live TO ct_old, ct_next TO ct_live"],
        &["RENAME TABLES ct_live TO ct_old, ct_next TO ct_live"],
        // (NOWAIT, whose refusal a fill's metadata lock may cause, is in cdc's unit tests.)
        &["RENAME TABLE ct_live WAIT 5 TO ct_old, ct_next WAIT 10 TO ct_live"],
        &["rename tables if exists ct_live wait 10 to ct_old, ct_next wait 10 to ct_live"],
    ];
    for (i, swap) in swaps.iter().enumerate() {
        admin.query_drop("DROP TABLE IF EXISTS ct_next, ct_old, ct_older").await.unwrap();
        admin.query_drop("CREATE TABLE ct_next (id INT PRIMARY KEY, k INT NOT NULL, n INT)").await.unwrap();
        admin.query_drop(format!("INSERT INTO ct_next VALUES (3, 1, {}), (4, 1, 40)", 30 + i)).await.unwrap();
        for statement in swap.iter() {
            admin.query_drop(*statement).await.unwrap();
        }
        answered_as_the_server_after(&proxy, &mut client, &mut check, &reads, &swap.join("; "), |p| p).await;
    }
    for t in ["ct_live", "ct_next", "ct_old", "ct_older"] {
        admin.query_drop(format!("DROP TABLE IF EXISTS {t}")).await.unwrap();
    }
}

/// An ALTER may rewrite the values of the rows it keeps and still leave the schema as it was:
/// a generated column's expression changed (the schema read has no expression), a column
/// dropped and added again under its name and type, or two MODIFYs that round the values and
/// widen the type back, read by the stream after both ran (the schema it reads for the first
/// is the second's). Each must reach the views, and a write after it must not find the rows
/// they held before (a view holding `g = 2` never matches the before image `g = 3`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alter_that_rewrites_values_is_not_taken_for_a_no_op() {
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS ct_rewrite").await.unwrap();
    admin
        .query_drop(
            "CREATE TABLE ct_rewrite (id INT PRIMARY KEY, k INT NOT NULL, n INT NOT NULL, m INT NOT NULL DEFAULT 0, \
             p DECIMAL(10,2) NOT NULL, g INT AS (n * 2) VIRTUAL, s DECIMAL(12,2) AS (p * 2) PERSISTENT)",
        )
        .await
        .unwrap();
    admin.query_drop("INSERT INTO ct_rewrite (id, k, n, m, p) VALUES (1, 1, 10, 7, 12.34), (2, 1, 20, 8, 56.78)").await.unwrap();
    let reads =
        [("rewrite", "SELECT id, n, m, p, g, s FROM ct_rewrite WHERE k = ?", "SELECT id, n, m, p, g, s FROM ct_rewrite WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let alters: [&[&str]; 5] = [
        &["ALTER TABLE ct_rewrite MODIFY g INT AS (n * 3) VIRTUAL"],
        &["ALTER TABLE ct_rewrite MODIFY s DECIMAL(12,2) AS (p * 3) PERSISTENT"],
        &["ALTER TABLE ct_rewrite DROP COLUMN m, ADD COLUMN m INT NOT NULL DEFAULT 0 AFTER n"],
        &["ALTER TABLE ct_rewrite MODIFY p DECIMAL(10,0) NOT NULL", "ALTER TABLE ct_rewrite MODIFY p DECIMAL(10,2) NOT NULL"],
        &["ALTER TABLE ct_rewrite DROP COLUMN m", "ALTER TABLE ct_rewrite ADD COLUMN m INT NOT NULL DEFAULT 5 AFTER n"],
    ];
    for (i, alter) in alters.iter().enumerate() {
        for statement in alter.iter() {
            admin.query_drop(*statement).await.unwrap();
        }
        answered_as_the_server_after(&proxy, &mut client, &mut check, &reads, &alter.join("; "), |p| p).await;
        admin.query_drop(format!("UPDATE ct_rewrite SET n = n + 1, p = p + {i} WHERE id = 1")).await.unwrap();
        answered_as_the_server_after(&proxy, &mut client, &mut check, &reads, &format!("{} and a write", alter.join("; ")), |p| p).await;
    }
    admin.query_drop("DROP TABLE ct_rewrite").await.unwrap();
}

/// With `lower_case_table_names = 0`, Linux's default, a table's name is case-sensitive:
/// `ct_case` and `CT_CASE` are two tables, and `Ct_Case` names none. A read of another table
/// must not be answered from a view of `ct_case`, nor may writes to it reach that view (a
/// session that may write a table of its own would otherwise write into others' answers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_whose_names_differ_in_case_are_different_tables() {
    let mut admin = direct().await;
    for t in ["ct_case", "CT_CASE"] {
        admin.query_drop(format!("DROP TABLE IF EXISTS {t}")).await.unwrap();
        admin.query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY, k INT NOT NULL, n INT)")).await.unwrap();
    }
    admin.query_drop("INSERT INTO ct_case VALUES (1, 1, 10), (2, 1, 20)").await.unwrap();
    admin.query_drop("INSERT INTO CT_CASE VALUES (1, 1, 666)").await.unwrap();
    admin.query_drop("CREATE DATABASE IF NOT EXISTS ct_other").await.unwrap();
    admin.query_drop("CREATE OR REPLACE TABLE ct_other.ct_case (id INT PRIMARY KEY, k INT NOT NULL, n INT)").await.unwrap();
    admin.query_drop("INSERT INTO ct_other.ct_case VALUES (1, 1, 555)").await.unwrap();
    let reads = [("case_lower", "SELECT id, n FROM ct_case WHERE k = ?", "SELECT id, n FROM ct_case WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let others = [
        "SELECT id, n FROM CT_CASE WHERE k = 1",
        "SELECT id, n FROM Ct_Case WHERE k = 1",
        // A table alias is case-sensitive too: the server knows no `CT_CASE.id` here.
        "SELECT CT_CASE.id, n FROM ct_case WHERE k = 1",
        // And so is a database's name, and a table of another database is another table.
        "SELECT id, n FROM FRESHET_TEST.ct_case WHERE k = 1",
        "SELECT id, n FROM ct_other.ct_case WHERE k = 1",
    ];
    let before = hits(&proxy, name);
    for other in others {
        let want = check.query(other).await;
        for _ in 0..20 {
            assert_eq!(client.query(other).await, want, "{other}: another table, or none");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(hits(&proxy, name), before, "reads of other tables answered from {name}");
    admin.query_drop("INSERT INTO CT_CASE VALUES (3, 1, 777)").await.unwrap();
    admin.query_drop("UPDATE CT_CASE SET n = 888 WHERE id = 1").await.unwrap();
    admin.query_drop("DELETE FROM CT_CASE WHERE id = 3").await.unwrap();
    admin.query_drop("INSERT INTO CT_CASE VALUES (2, 1, 999)").await.unwrap();
    admin.query_drop("UPDATE ct_other.ct_case SET n = 444 WHERE id = 1").await.unwrap();
    answered_as_the_server_after(&proxy, &mut client, &mut check, &reads, "writes to CT_CASE", |p| p).await;
    for t in ["ct_case", "CT_CASE"] {
        admin.query_drop(format!("DROP TABLE {t}")).await.unwrap();
    }
    admin.query_drop("DROP DATABASE ct_other").await.unwrap();
}

/// MariaDB's system-versioned tables keep every old version of a row in the table itself,
/// hidden from a plain SELECT: an UPDATE ends the current row (its `row_end` set to now) and
/// inserts the new one, a DELETE ends it, and the binlog logs those row changes. Only rows
/// whose `row_end` is the end of time are the table's rows. Such a table is not cached
/// (information_schema's TABLE_TYPE is `SYSTEM VERSIONED`), including one a cache was reading
/// when versioning was added to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_versioned_tables_history_is_not_its_rows() {
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS ct_versioned").await.unwrap();
    admin.query_drop("CREATE TABLE ct_versioned (id INT PRIMARY KEY, k INT NOT NULL, n INT)").await.unwrap();
    admin.query_drop("INSERT INTO ct_versioned VALUES (1, 1, 10), (2, 1, 20)").await.unwrap();
    let reads = [
        ("versioned", "SELECT id, n FROM ct_versioned WHERE k = ?", "SELECT id, n FROM ct_versioned WHERE k = 1"),
        ("versioned_all", "SELECT * FROM ct_versioned WHERE k = ?", "SELECT * FROM ct_versioned WHERE k = 1"),
        (
            "versioned_count",
            "SELECT k, COUNT(*) FROM ct_versioned WHERE k = ? GROUP BY k",
            "SELECT k, COUNT(*) FROM ct_versioned WHERE k = 1 GROUP BY k",
        ),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    for (name, _, sql) in &reads {
        hit(&mut client, &proxy, name, sql).await;
    }
    admin.query_drop("ALTER TABLE ct_versioned ADD SYSTEM VERSIONING").await.unwrap();
    for write in [
        "UPDATE ct_versioned SET n = 11 WHERE id = 1",
        "DELETE FROM ct_versioned WHERE id = 2",
        "INSERT INTO ct_versioned VALUES (3, 1, 30)",
        "UPDATE ct_versioned SET k = 2 WHERE id = 3",
    ] {
        admin.query_drop(write).await.unwrap();
    }
    caught_up(&mut through(&proxy).await).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server after the writes: {wrong:#?}");
    admin.query_drop("DROP TABLE ct_versioned").await.unwrap();
}

/// An INVISIBLE column is left out of `SELECT *` by the server, and read when named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invisible_column_is_left_out_of_a_wildcard() {
    let mut admin = fresh_table("ct_invisible", "id INT PRIMARY KEY, k INT NOT NULL, secret INT INVISIBLE, n INT", "(1, 1, 10)").await;
    admin.query_drop("UPDATE ct_invisible SET secret = 7").await.unwrap();
    let reads = [
        ("invisible_all", "SELECT * FROM ct_invisible WHERE k = ?", "SELECT * FROM ct_invisible WHERE k = 1"),
        ("invisible_named", "SELECT id, secret FROM ct_invisible WHERE k = ?", "SELECT id, secret FROM ct_invisible WHERE k = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    admin.query_drop("INSERT INTO ct_invisible (id, k, secret, n) VALUES (2, 1, 8, 20)").await.unwrap();
    admin.query_drop("UPDATE ct_invisible SET secret = 9 WHERE id = 1").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, unserved) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server after the writes: {wrong:#?}");
    assert!(unserved.is_empty(), "not answered from the views: {unserved:#?}");
}

/// A SELECT sets the session's diagnostics on the server: `FOUND_ROWS()` is then its row count,
/// `ROW_COUNT()` is -1 and `SHOW WARNINGS` lists its warnings (none) instead of the statement
/// before. A read answered from a view must leave the session's next statement the same
/// answers, though the server never ran it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_read_is_the_last_statement_to_what_reads_diagnostics() {
    let _admin = fresh_table("ct_diag", "id INT PRIMARY KEY, k INT NOT NULL, n INT", "(1, 1, 10), (2, 1, 20), (3, 2, 30)").await;
    let reads = [("diag", "SELECT id, n FROM ct_diag WHERE k = ?", "SELECT id, n FROM ct_diag WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let sequences: [[&str; 2]; 5] = [
        ["SELECT 1 UNION SELECT 2 UNION SELECT 3", "SELECT FOUND_ROWS()"],
        ["UPDATE ct_diag SET n = 30 WHERE id = 3", "SELECT ROW_COUNT()"],
        ["SELECT CAST('x' AS SIGNED)", "SHOW WARNINGS"],
        ["SELECT CAST('y' AS SIGNED)", "SHOW COUNT(*) WARNINGS"],
        ["SELECT CAST('z' AS SIGNED)", "SELECT @@warning_count"],
    ];
    for [before, after] in sequences {
        let served = hits(&proxy, name);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for (c, out) in [(&mut client, &mut ours), (&mut check, &mut theirs)] {
            c.query(before).await;
            c.query(sql).await;
            out.push(c.query(after).await);
        }
        assert!(hits(&proxy, name) > served, "{sql} was answered from the view");
        assert_eq!(ours, theirs, "{after} after {before} and a cached read");
    }
    // Prepared: a statement whose every execute is answered here, the last one leaving the
    // parameters' types to the server's memory of an execute the server never saw.
    let cached = reads[0].1;
    let (warm, _) = prepare(&mut client, cached).await;
    let typed = [&[0u8, 1, 8, 0][..], &1u64.to_le_bytes()].concat();
    for _ in 0..10 {
        client.send(&execute(warm, &typed)).await;
        client.read_results().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let untyped = [&[0u8, 0][..], &1u64.to_le_bytes()].concat();
    let mut answers = Vec::new();
    let served = hits(&proxy, name);
    for c in [&mut client, &mut check] {
        let (id, _) = prepare(c, cached).await;
        c.query("SELECT 1 UNION SELECT 2 UNION SELECT 3").await;
        c.send(&execute(id, &typed)).await;
        c.read_results().await;
        c.send(&execute(id, &untyped)).await;
        c.read_results().await;
        answers.push(c.query("SELECT FOUND_ROWS()").await);
    }
    assert_eq!(hits(&proxy, name), served + 2, "both executes were answered from the view");
    assert_eq!(answers[0], answers[1], "FOUND_ROWS() after a prepared read answered from the view");
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

/// A COM_PING (a pool's check of a connection before lending it) sets the session's
/// `ROW_COUNT()` to 0 on MariaDB and keeps `FOUND_ROWS()` and the warnings. After a read
/// answered from a view and a ping, the read was sent again before `SELECT ROW_COUNT()`, which
/// then said -1 where the server says 0. (Found by the random sessions test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_after_a_cached_read_leaves_the_diagnostics_the_server_leaves() {
    let _admin = fresh_table("ct_pinged", "id INT PRIMARY KEY, k INT NOT NULL, n INT", "(1, 1, 10), (2, 1, 20), (3, 2, 30)").await;
    let reads = [("pinged", "SELECT id, n FROM ct_pinged WHERE k = ?", "SELECT id, n FROM ct_pinged WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let served = hits(&proxy, name);
    for after in ["SELECT ROW_COUNT()", "SELECT FOUND_ROWS()", "SHOW COUNT(*) WARNINGS"] {
        let mut answers = Vec::new();
        for c in [&mut client, &mut check] {
            c.query("SELECT CAST('x' AS SIGNED) UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4").await;
            c.query(sql).await;
            c.send(&[0x0e]).await;
            answers.push(c.read_results().await);
            answers.push(c.query(after).await);
        }
        assert_eq!(answers[..2], answers[2..], "{after} after a cached read and a ping");
    }
    assert_eq!(hits(&proxy, name), served + 3, "the reads were answered from the view");
}

/// MariaDB's COM_STMT_RESET sets `ROW_COUNT()` to 0, as a ping does: after a cached read it is
/// followed by a ping when the read is sent again (an audit of the keep-alive: -1 where the
/// server says 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_reset_after_a_cached_read_leaves_the_row_count_the_server_leaves() {
    let _admin = fresh_table("ct_reset", "id INT PRIMARY KEY, k INT NOT NULL, n INT", "(1, 1, 10), (2, 1, 20), (3, 2, 30)").await;
    let reads = [("reset", "SELECT id, n FROM ct_reset WHERE k = ?", "SELECT id, n FROM ct_reset WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let served = hits(&proxy, name);
    let mut answers = Vec::new();
    for c in [&mut client, &mut check] {
        let (id, _) = prepare(c, "SELECT 1").await;
        c.query("UPDATE ct_reset SET n = n WHERE id = 3").await;
        c.query(sql).await;
        c.send(&[&[0x1a][..], &id.to_le_bytes()].concat()).await;
        answers.push(c.read_results().await);
        answers.push(c.query("SELECT ROW_COUNT()").await);
    }
    assert_eq!(answers[..2], answers[2..], "ROW_COUNT() after a cached read and a statement reset");
    assert_eq!(hits(&proxy, name), served + 1, "the read was answered from the view");
}

/// A driver that prepares, executes and closes a statement per read (PHP's PDO without
/// emulation, mysql_async's `exec` with its statement cache off) closes the statement of an
/// answered execute before its next statement: the server must still see that read before a
/// statement that reads what it left. The close was relayed at once, so the read could not be
/// sent again, and `FOUND_ROWS()` and `ROW_COUNT()` were the statement's before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_statements_answered_execute_is_still_the_last_statement() {
    let _admin = fresh_table("ct_closed", "id INT PRIMARY KEY, k INT NOT NULL, n INT", "(1, 1, 10), (2, 1, 20), (3, 2, 30)").await;
    let reads = [("closed", "SELECT id, n FROM ct_closed WHERE k = ?", "SELECT id, n FROM ct_closed WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, cached, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let typed = [&[0u8, 1, 8, 0][..], &1u64.to_le_bytes()].concat();
    // The execute's column definitions are captured once.
    let (id, _) = prepare(&mut client, cached).await;
    for _ in 0..3 {
        client.send(&execute(id, &typed)).await;
        client.read_results().await;
    }
    let served = hits(&proxy, name);
    // Between the prepare and the execute: what leaves the session other diagnostics than
    // the read would.
    let cases: [(&[u8], &str); 3] = [
        (b"\x03SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4", "SELECT FOUND_ROWS()"),
        (b"\x03SET @a = 1", "SELECT ROW_COUNT()"),
        (b"\x03SELECT CAST('x' AS SIGNED)", "SHOW COUNT(*) WARNINGS"),
    ];
    for (before, after) in cases {
        let mut answers = Vec::new();
        for c in [&mut client, &mut check] {
            let (id, _) = prepare(c, cached).await;
            c.send(before).await;
            c.read_results().await;
            c.send(&execute(id, &typed)).await;
            c.read_results().await;
            c.send(&[&[0x19u8][..], &id.to_le_bytes()].concat()).await;
            answers.push(c.query(after).await);
            // The statement is closed: executing it is the server's error (whose message
            // names the statement's id, which the two sessions number apart).
            c.send(&execute(id, &typed)).await;
            answers.push(c.read_results().await.into_iter().map(|p| p[..3].to_vec()).collect());
        }
        assert_eq!(answers[..2], answers[2..], "{after} after an answered execute whose statement was closed");
    }
    assert_eq!(hits(&proxy, name), served + 3, "the executes were answered from the view");
    // Closed, then executed at once (nothing in between settles the read): the server's
    // error, not rows, though freshet still holds the close back.
    let mut answers = Vec::new();
    for c in [&mut client, &mut check] {
        let (id, _) = prepare(c, cached).await;
        c.send(&execute(id, &typed)).await;
        c.read_results().await;
        c.send(&[&[0x19u8][..], &id.to_le_bytes()].concat()).await;
        c.send(&execute(id, &typed)).await;
        answers.push(c.read_results().await.into_iter().map(|p| p[..p.len().min(3)].to_vec()).collect::<Vec<_>>());
    }
    assert_eq!(answers[0], answers[1], "an execute of a statement just closed");
    assert_eq!(answers[1][0][0], 0xff, "the server answers an error");
}

/// Not every statement replaces what a SELECT leaves the session: SET, DO, BEGIN and a SELECT
/// of no table keep its warnings, and every statement but a SELECT keeps its `FOUND_ROWS()`
/// (after a write, not followed: `session/owed.rs`).
/// A read answered from a view, then such a statement, then one that reads them: the session
/// sees the read's (or the statement's own), as it would on the server, and the statement
/// between reports the warnings the server's would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_statement_keeps_of_a_cached_reads_diagnostics_is_the_reads() {
    let _admin = fresh_table("ct_diag_kept", "id INT PRIMARY KEY, k INT NOT NULL, n INT", "(1, 1, 10), (2, 1, 20), (3, 2, 30)").await;
    let reads = [("diag_kept", "SELECT id, n FROM ct_diag_kept WHERE k = ?", "SELECT id, n FROM ct_diag_kept WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let sequences: [[&str; 3]; 8] = [
        ["SELECT 1 UNION SELECT 2 UNION SELECT 3", "SET @a = 1", "SELECT FOUND_ROWS()"],
        ["SELECT 1 UNION SELECT 2 UNION SELECT 3", "BEGIN", "SELECT FOUND_ROWS()"],
        ["SELECT CAST('x' AS SIGNED)", "SET @a = 1", "SHOW WARNINGS"],
        ["SELECT CAST('x' AS SIGNED)", "DO 1", "SHOW WARNINGS"],
        ["SELECT CAST('x' AS SIGNED)", "SELECT 1", "SHOW WARNINGS"],
        ["SELECT CAST('x' AS SIGNED)", "BEGIN", "SHOW WARNINGS"],
        // A SELECT of a table replaces them all, a write all but FOUND_ROWS() (not followed).
        ["SELECT CAST('x' AS SIGNED)", "SELECT n FROM ct_diag_kept WHERE id = 3", "SHOW WARNINGS"],
        ["SELECT CAST('x' AS SIGNED)", "UPDATE ct_diag_kept SET n = n WHERE id = 3", "SHOW WARNINGS"],
    ];
    for [before, between, after] in sequences {
        let served = hits(&proxy, name);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for (c, out) in [(&mut client, &mut ours), (&mut check, &mut theirs)] {
            c.query(before).await;
            c.query(sql).await;
            out.push(c.query(between).await);
            out.push(c.query(after).await);
            c.query("COMMIT").await;
        }
        assert!(hits(&proxy, name) > served, "{sql} was answered from the view");
        assert_eq!(ours, theirs, "{between}, then {after}, after {before} and a cached read");
    }
}

/// A session whose results are utf8mb3 (`SET NAMES utf8`, common in older PHP applications)
/// gets a character utf8mb3 cannot hold (an emoji, any character past the Basic Multilingual
/// Plane) as the server converts it: `?`. A view holds utf8mb4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_utf8mb3_session_gets_characters_it_cannot_hold_as_the_server_sends_them() {
    let _admin = fresh_table(
        "ct_mb3",
        "id INT PRIMARY KEY, k INT NOT NULL, s VARCHAR(20) CHARACTER SET utf8mb4",
        "(1, 1, 'a\u{1F600}b'), (2, 1, 'plain'), (3, 1, '\u{10348}')",
    )
    .await;
    let reads = [
        ("mb3", "SELECT id, s FROM ct_mb3 WHERE k = ?", "SELECT id, s FROM ct_mb3 WHERE k = 1"),
        ("mb3_by_s", "SELECT id FROM ct_mb3 WHERE s = ?", "SELECT id FROM ct_mb3 WHERE s = 'plain'"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    for c in [&mut client, &mut check] {
        c.query("SET NAMES utf8").await;
    }
    let (wrong, unserved) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server under SET NAMES utf8: {wrong:#?}");
    assert!(unserved.is_empty(), "not answered from the view: {unserved:#?}");
    // A literal utf8mb3 cannot hold: the server refuses to compare it with a utf8mb4 column
    // (error 1267, an illegal mix of collations).
    let emoji = [("mb3_by_s", "SELECT id FROM ct_mb3 WHERE s = ?", "SELECT id FROM ct_mb3 WHERE s = 'a\u{1F600}b'")];
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &emoji).await;
    assert!(wrong.is_empty(), "answered otherwise than the server under SET NAMES utf8: {wrong:#?}");
    // The same as a prepared statement's parameter.
    let mut answers = Vec::new();
    for mut c in [through(&proxy).await, direct().await] {
        c.query_drop("SET NAMES utf8").await.unwrap();
        let mut got = Vec::new();
        for key in ["plain", "a\u{1F600}b", "\u{10348}"] {
            for _ in 0..5 {
                got.push(c.exec::<i64, _, _>(emoji[0].1, (key,)).await.map_err(|e| e.to_string()));
            }
        }
        answers.push(got);
    }
    assert_eq!(answers[0], answers[1], "prepared reads under SET NAMES utf8");
}

/// A read spelled otherwise than its cache's query (qualified by the database, here) is
/// matched by comparing plans, the cache's compiled once. After a column is added, `SELECT *`
/// has one more column: the cache's plan must be of the new schema too, or the read is
/// relayed for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_spelled_otherwise_is_served_again_after_its_table_gains_a_column() {
    let mut admin = fresh_table("ct_spelled", "id INT PRIMARY KEY, k INT NOT NULL, n INT", "(1, 1, 10), (2, 1, 20)").await;
    let reads = [("spelled", "SELECT * FROM ct_spelled WHERE k = ?", "SELECT * FROM freshet_test.ct_spelled WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    admin.query_drop("ALTER TABLE ct_spelled ADD COLUMN z INT NOT NULL DEFAULT 5").await.unwrap();
    answered_as_the_server_after(&proxy, &mut client, &mut check, &reads, "ADD COLUMN", |p| p).await;
}

/// A prepared statement's execute may leave its parameters' types out when an earlier execute
/// of it sent them (the server remembers). If every earlier execute was answered from a view,
/// the server never saw them: an execute relayed after them (here, in a transaction) must
/// reach the server with its types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_execute_after_answered_ones_brings_its_types() {
    let _admin = fresh_table("ct_untyped", "id INT PRIMARY KEY, k BIGINT NOT NULL, n INT", "(1, 1, 10), (2, 1, 20), (3, 2, 30)").await;
    let reads = [("untyped", "SELECT id, n FROM ct_untyped WHERE k = ?", "SELECT id, n FROM ct_untyped WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, cached, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    // The shape's binary column definitions are captured by a first execute on another statement.
    let typed = [&[0u8, 1, 8, 0][..], &1u64.to_le_bytes()].concat();
    // Then the types change in an execute answered from the view (a string '2'), and an
    // execute without types is relayed again: the server must not read it under the types
    // it saw last (a LONGLONG). Both types' definitions are captured first (the server may
    // describe the columns apart by a parameter's type).
    let as_text = [&[0u8, 1, 0xfd, 0, 1][..], b"2"].concat();
    let (warm, _) = prepare(&mut client, cached).await;
    for parameter in [&typed, &as_text] {
        for _ in 0..10 {
            client.send(&execute(warm, parameter)).await;
            client.read_results().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let untyped = [&[0u8, 0][..], &2u64.to_le_bytes()].concat();
    let mut answers = Vec::new();
    let served = hits(&proxy, name);
    let untyped_text = [&[0u8, 0, 1][..], b"1"].concat();
    for c in [&mut client, &mut check] {
        let (id, _) = prepare(c, cached).await;
        c.send(&execute(id, &typed)).await;
        c.read_results().await;
        c.query("BEGIN").await;
        c.send(&execute(id, &untyped)).await;
        answers.push(c.read_results().await);
        c.query("COMMIT").await;
        c.send(&execute(id, &as_text)).await;
        c.read_results().await;
        c.query("BEGIN").await;
        c.send(&execute(id, &untyped_text)).await;
        answers.push(c.read_results().await);
        c.query("COMMIT").await;
    }
    assert_eq!(hits(&proxy, name), served + 2, "the executes outside transactions were answered from the view");
    assert_eq!(answers[0], answers[2], "the execute relayed in a transaction");
    assert_eq!(answers[1], answers[3], "the execute relayed after the types changed");
}

/// A COM_STMT_SEND_LONG_DATA for a parameter the statement does not have leaves the statement
/// refused on the server (1210) until COM_STMT_RESET, execute after execute; an audit saw the
/// second and later executes answered from the view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_refused_for_bad_long_data_is_refused_until_reset() {
    let _admin = fresh_table("ct_badlong", "id INT PRIMARY KEY, k BIGINT NOT NULL, n INT", "(1, 1, 10), (2, 2, 20)").await;
    let reads = [("badlong", "SELECT id, n FROM ct_badlong WHERE k = ?", "SELECT id, n FROM ct_badlong WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, cached, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let typed = |k: u64| [&[0u8, 1, 8, 0][..], &k.to_le_bytes()].concat();
    let mut answers = [Vec::new(), Vec::new()];
    for (c, answers) in [&mut client, &mut check].into_iter().zip(&mut answers) {
        let (id, _) = prepare(c, cached).await;
        c.send(&execute(id, &typed(1))).await;
        answers.push(c.read_results().await);
        // Parameter 1 of a statement of one (no reply comes).
        c.send(&[&[0x18][..], &id.to_le_bytes(), &1u16.to_le_bytes(), b"x"].concat()).await;
        for k in [2, 1, 2] {
            c.send(&execute(id, &typed(k))).await;
            answers.push(c.read_results().await);
        }
        c.send(&[&[0x1a][..], &id.to_le_bytes()].concat()).await;
        answers.push(c.read_results().await);
        c.send(&execute(id, &typed(2))).await;
        answers.push(c.read_results().await);
    }
    assert_eq!(answers[0], answers[1], "through freshet, and directly");
}

/// `ROLLBACK TO SAVEPOINT` in a transaction that also wrote a non-transactional table (MyISAM,
/// Aria) cannot be cut out of the binlog: the server logs the rows written since the
/// savepoint, then the `ROLLBACK TO` statement, which a replica runs to undo them. Those rows
/// are not the table's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_rolled_back_to_a_savepoint_are_not_applied() {
    let mut admin = fresh_table("ct_savepoint", "id INT PRIMARY KEY, k INT NOT NULL, n INT", "(1, 1, 10)").await;
    admin.query_drop("CREATE OR REPLACE TABLE ct_savepoint_log (id INT PRIMARY KEY) ENGINE=MyISAM").await.unwrap();
    let reads = [("savepoint", "SELECT id, n FROM ct_savepoint WHERE k = ?", "SELECT id, n FROM ct_savepoint WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    for statement in [
        "BEGIN",
        "INSERT INTO ct_savepoint VALUES (2, 1, 20)",
        "SAVEPOINT a",
        "INSERT INTO ct_savepoint VALUES (3, 1, 30)",
        "UPDATE ct_savepoint SET n = 11 WHERE id = 1",
        "SAVEPOINT `B`",
        "DELETE FROM ct_savepoint WHERE id = 2",
        "INSERT INTO ct_savepoint_log VALUES (1)",
        "ROLLBACK TO SAVEPOINT b",
        "INSERT INTO ct_savepoint VALUES (4, 1, 40)",
        "ROLLBACK WORK TO a",
        "INSERT INTO ct_savepoint VALUES (5, 1, 50)",
        "COMMIT",
    ] {
        admin.query_drop(statement).await.unwrap();
    }
    answered_as_the_server_after(&proxy, &mut client, &mut check, &reads, "ROLLBACK TO SAVEPOINT", |p| p).await;
    // Savepoint names compare as the server's names do: `é` is `e`, so the second SAVEPOINT
    // moves the first, and the rollback keeps the update between them.
    for statement in [
        "BEGIN",
        "UPDATE ct_savepoint SET n = 12 WHERE id = 1",
        "SAVEPOINT `e`",
        "UPDATE ct_savepoint SET n = 13 WHERE id = 1",
        "SAVEPOINT `é`",
        "INSERT INTO ct_savepoint_log VALUES (2)",
        "ROLLBACK TO `e`",
        "COMMIT",
    ] {
        admin.query_drop(statement).await.unwrap();
    }
    answered_as_the_server_after(&proxy, &mut client, &mut check, &reads, "ROLLBACK TO an accented name", |p| p).await;
    admin.query_drop("DROP TABLE ct_savepoint_log").await.unwrap();
}

/// Partition maintenance moves or removes rows with no row event: EXCHANGE PARTITION swaps a
/// partition's rows with another table's, TRUNCATE and DROP PARTITION remove them, CONVERT
/// moves a partition out to a table of its own; ALTER IGNORE ... ADD UNIQUE deletes duplicates.
/// The views of every table named must be taken anew; an ALTER that changes nothing else kept
/// them (as it rightly does for ADD INDEX).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_maintenance_is_not_missed() {
    let mut admin = direct().await;
    for t in ["ct_part", "ct_swap", "ct_out"] {
        admin.query_drop(format!("DROP TABLE IF EXISTS {t}")).await.unwrap();
    }
    admin
        .query_drop(
            "CREATE TABLE ct_part (id INT PRIMARY KEY, k INT NOT NULL, n INT) PARTITION BY RANGE (id) \
             (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN (30), \
             PARTITION p3 VALUES LESS THAN MAXVALUE)",
        )
        .await
        .unwrap();
    admin.query_drop("CREATE TABLE ct_swap (id INT PRIMARY KEY, k INT NOT NULL, n INT)").await.unwrap();
    admin.query_drop("INSERT INTO ct_part VALUES (1, 1, 1), (11, 1, 11), (21, 1, 21), (31, 1, 31)").await.unwrap();
    admin.query_drop("INSERT INTO ct_swap VALUES (2, 1, 2)").await.unwrap();
    let reads = [
        ("part", "SELECT id, n FROM ct_part WHERE k = ?", "SELECT id, n FROM ct_part WHERE k = 1"),
        ("swap", "SELECT id, n FROM ct_swap WHERE k = ?", "SELECT id, n FROM ct_swap WHERE k = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    for (name, _, sql) in &reads {
        hit(&mut client, &proxy, name, sql).await;
    }
    for ddl in [
        "ALTER TABLE ct_part EXCHANGE PARTITION p0 WITH TABLE ct_swap",
        "ALTER TABLE ct_part TRUNCATE PARTITION p1",
        "ALTER TABLE ct_part DROP PARTITION p2",
        "ALTER TABLE ct_part CONVERT PARTITION p3 TO TABLE ct_out",
        "INSERT INTO ct_swap VALUES (3, 1, 3)",
        // The duplicate of k is deleted with no row event.
        "ALTER IGNORE TABLE ct_swap ADD UNIQUE (k)",
    ] {
        admin.query_drop(ddl).await.unwrap();
        answered_as_the_server_after(&proxy, &mut client, &mut check, &reads, ddl, |p| p).await;
    }
    admin.query_drop("DROP TABLE ct_out").await.unwrap();
}

/// A session that sets what the probe reads (Rails sets sql_mode and sql_auto_is_null on
/// every connection; others set time_zone) is asked again, and served by what the server
/// answers: all its reads under Rails' settings, no TIMESTAMP read at +02:00, nothing under a
/// sql_select_limit, and all again once it sets the defaults back. A sql_mode that changes
/// how text is read (ANSI_QUOTES, NO_BACKSLASH_ESCAPES) is another matter: freshet reads the
/// session's statements in the default mode, so what the session ran under it may have been
/// misread (a SET hidden in what looked like a string), and it is relayed until it is reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_sets_what_the_probe_reads_is_served_as_the_server_says() {
    let _admin = fresh_table(
        "ct_settings",
        "id INT PRIMARY KEY, k INT NOT NULL, ts TIMESTAMP NULL, n INT NULL",
        "(1, 1, '2024-01-01 00:30:00', 10), (2, 1, NULL, 20)",
    )
    .await;
    let caches = [("set_plain", "SELECT id, n FROM ct_settings WHERE k = ?"), ("set_ts", "SELECT id, ts FROM ct_settings WHERE k = ?")];
    let proxy = start_proxy(&cache_config(&caches)).await;
    let mut ours = through(&proxy).await;
    let mut theirs = direct().await;
    // Reads each cache's query five times through freshet and directly under `settings`, and
    // returns the cache names whose reads were answered from their views.
    let mut served_under = async |settings: &str| -> Vec<&str> {
        ours.query_drop(settings).await.unwrap();
        theirs.query_drop(settings).await.unwrap();
        let mut served = Vec::new();
        for (name, query) in caches {
            let sql = query.replace('?', "1");
            let before = hits(&proxy, name);
            for _ in 0..5 {
                let got: Vec<mysql_async::Row> = ours.query(&sql).await.unwrap();
                let want: Vec<mysql_async::Row> = theirs.query(&sql).await.unwrap();
                let values = |rows: Vec<mysql_async::Row>| rows.into_iter().map(|r| r.unwrap()).collect::<Vec<_>>();
                assert_eq!(values(got), values(want), "{sql} under {settings}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if hits(&proxy, name) > before {
                served.push(name);
            }
        }
        served
    };
    let rails = "SET @@SESSION.sql_mode = CONCAT(CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'), ',NO_AUTO_VALUE_ON_ZERO'), \
                 @@SESSION.sql_auto_is_null = 0, @@SESSION.wait_timeout = 2147483, time_zone = '+00:00'";
    assert_eq!(served_under(rails).await, ["set_plain", "set_ts"]);
    assert_eq!(served_under("SET time_zone = '+02:00'").await, ["set_plain"]);
    assert!(served_under("SET sql_select_limit = 1").await.is_empty());
    assert_eq!(served_under("SET sql_select_limit = DEFAULT, time_zone = '+00:00'").await, ["set_plain", "set_ts"]);
    // The variable named in backticks is the same variable to the server.
    for backticked in ["SET `sql_select_limit` = 1", "SET SESSION `sql_select_limit` = 1", "SET @@session.`sql_select_limit` = 1"] {
        assert!(served_under(backticked).await.is_empty(), "{backticked}");
        assert_eq!(served_under("SET sql_select_limit = DEFAULT").await, ["set_plain", "set_ts"]);
    }
    assert!(served_under("SET sql_mode = 'NO_BACKSLASH_ESCAPES'").await.is_empty());
    assert!(served_under("SET sql_mode = DEFAULT").await.is_empty(), "a session whose texts may have been misread");
}

/// A stored function or a trigger may set the session's variables (`SET SESSION
/// sql_select_limit = 1` inside one is allowed), with no SET in the statement that runs it:
/// a SELECT calling the function, a write firing the trigger. The server is asked again
/// before the session's next cached read, and its answer decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_settings_changed_by_stored_code_are_asked_of_the_server() {
    let mut admin =
        fresh_table("ct_routine", "id INT PRIMARY KEY, k INT NOT NULL, n INT NULL", "(1, 1, 10), (2, 1, 20), (3, 1, 30), (4, 1, 40)").await;
    admin.query_drop("DROP TABLE IF EXISTS ct_routine_log").await.unwrap();
    admin.query_drop("CREATE TABLE ct_routine_log (i INT)").await.unwrap();
    admin.query_drop("DROP FUNCTION IF EXISTS ct_limit_one").await.unwrap();
    admin
        .query_drop("CREATE FUNCTION ct_limit_one() RETURNS INT DETERMINISTIC NO SQL BEGIN SET SESSION sql_select_limit = 1; RETURN 1; END")
        .await
        .unwrap();
    admin
        .query_drop("CREATE TRIGGER ct_routine_limit BEFORE INSERT ON ct_routine_log FOR EACH ROW SET SESSION sql_select_limit = 2")
        .await
        .unwrap();
    // A stored function with a built-in's name: `std (5)`, with a space, calls it (see
    // `a_space_before_a_functions_parenthesis_is_read_as_the_server_reads_it`).
    admin.query_drop("DROP FUNCTION IF EXISTS `std`").await.unwrap();
    admin
        .query_drop("CREATE FUNCTION `std` (x INT) RETURNS INT DETERMINISTIC NO SQL BEGIN SET SESSION sql_select_limit = 3; RETURN x; END")
        .await
        .unwrap();
    // A view that calls the function: reading it names no function. One made before freshet
    // starts, one after (seen in the binlog).
    admin.query_drop("CREATE OR REPLACE VIEW ct_routine_view AS SELECT ct_limit_one() AS x").await.unwrap();
    admin.query_drop("DROP VIEW IF EXISTS `ct routine later`").await.unwrap();
    // Stored functions named like words the tracker took for keywords or built-ins.
    for name in ["escape", "against", "of", "json_table"] {
        admin.query_drop(format!("DROP FUNCTION IF EXISTS `{name}`")).await.unwrap();
        admin
            .query_drop(format!(
                "CREATE FUNCTION `{name}` (x INT) RETURNS INT DETERMINISTIC NO SQL BEGIN SET SESSION sql_select_limit = 1; RETURN x; END"
            ))
            .await
            .unwrap();
    }
    let caches = [("routine", "SELECT id, n FROM ct_routine WHERE k = ?")];
    let proxy = start_proxy(&cache_config(&caches)).await;
    admin.query_drop("CREATE VIEW `ct routine later` AS SELECT x FROM ct_routine_view").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let read = "SELECT id, n FROM ct_routine WHERE k = 1";
    let values = |rows: Vec<mysql_async::Row>| rows.into_iter().map(|r| r.unwrap()).collect::<Vec<_>>();
    for (stored, rows) in [
        ("SELECT ct_limit_one()", 1),
        ("INSERT INTO ct_routine_log VALUES (1)", 2),
        ("SELECT std (5)", 3),
        ("SELECT x FROM ct_routine_view", 1),
        ("SELECT * FROM `ct routine later`", 1),
        ("SELECT escape(5)", 1),
        ("SELECT against(5)", 1),
        ("SELECT of(5)", 1),
        ("SELECT json_table(5)", 1),
    ] {
        let (mut ours, mut theirs) = (through(&proxy).await, direct().await);
        for c in [&mut ours, &mut theirs] {
            c.query_drop("SET sql_select_limit = DEFAULT").await.unwrap();
        }
        // Served first (this session's read answered from the view), then the stored code runs
        // on each session.
        let before = hits(&proxy, "routine");
        for _ in 0..250 {
            let _: Vec<mysql_async::Row> = ours.query(read).await.unwrap();
            if hits(&proxy, "routine") > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(hits(&proxy, "routine") > before, "reads answered from the view before `{stored}`");
        ours.query_drop(stored).await.unwrap();
        theirs.query_drop(stored).await.unwrap();
        let want = values(theirs.query(read).await.unwrap());
        assert_eq!(want.len(), rows, "the server's limit after `{stored}`");
        for _ in 0..5 {
            assert_eq!(values(ours.query(read).await.unwrap()), want, "{read} after {stored}");
        }
    }
    admin.query_drop("DROP VIEW `ct routine later`, ct_routine_view").await.unwrap();
    for name in ["escape", "against", "of", "json_table"] {
        admin.query_drop(format!("DROP FUNCTION `{name}`")).await.unwrap();
    }
    admin.query_drop("DROP FUNCTION ct_limit_one").await.unwrap();
    admin.query_drop("DROP FUNCTION `std`").await.unwrap();
    admin.query_drop("DROP TABLE ct_routine_log").await.unwrap();
}

/// A SET prepared with COM_STMT_PREPARE changes the session when it is executed, each time it
/// is executed, not when it is prepared: a driver that prepares `SET sql_select_limit = ?` (or
/// a time zone) once executes it again with another value after the session's settings were
/// asked of the server. Its next cached read is answered under the value the server holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_set_changes_the_session_each_time_it_is_executed() {
    let _admin =
        fresh_table("ct_prepared_set", "id INT PRIMARY KEY, k INT NOT NULL, n INT NULL", "(1, 1, 10), (2, 1, 20), (3, 1, 30)").await;
    let caches = [("prepared_set", "SELECT id, n FROM ct_prepared_set WHERE k = ?")];
    let proxy = start_proxy(&cache_config(&caches)).await;
    let read = "SELECT id, n FROM ct_prepared_set WHERE k = 1";
    let values = |rows: Vec<mysql_async::Row>| rows.into_iter().map(|r| r.unwrap()).collect::<Vec<_>>();
    let (mut ours, mut theirs) = (through(&proxy).await, direct().await);
    // The driver prepares the SET once and keeps it; every later exec is a COM_STMT_EXECUTE.
    for limit in [u64::MAX, 1, u64::MAX, 2] {
        for c in [&mut ours, &mut theirs] {
            c.exec_drop("SET sql_select_limit = ?", (limit,)).await.unwrap();
        }
        let want = values(theirs.query(read).await.unwrap());
        assert_eq!(want.len(), 3.min(limit as usize), "the server's limit {limit}");
        for _ in 0..5 {
            assert_eq!(values(ours.query(read).await.unwrap()), want, "{read} under sql_select_limit = {limit}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(hits(&proxy, "prepared_set") > 0, "reads answered from the view");
}

/// MariaDB's JSON is a LONGTEXT under utf8mb4_bin: compared, searched and measured as text
/// (`j = '[2]'` is a text comparison), where MySQL 8 compares JSON values. A view held JSON
/// as a kind of its own, unequal to any text. Such uses are refused; a JSON column selected,
/// or tested for NULL, is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_column_compared_or_searched_answers_as_the_server_does() {
    let mut admin = fresh_table("ct_json", "id INT PRIMARY KEY, k INT NOT NULL, j JSON NULL", "(1, 1, '[1]'), (2, 1, '[2]')").await;
    let reads = [
        ("json_eq", "SELECT id FROM ct_json WHERE k = ? AND j = '[2]'", "SELECT id FROM ct_json WHERE k = 1 AND j = '[2]'"),
        ("json_like", "SELECT id, j LIKE '%2%' AS m FROM ct_json WHERE k = ?", "SELECT id, j LIKE '%2%' AS m FROM ct_json WHERE k = 1"),
        ("json_len", "SELECT id, LENGTH(j) AS n FROM ct_json WHERE k = ?", "SELECT id, LENGTH(j) AS n FROM ct_json WHERE k = 1"),
        (
            "json_shown",
            "SELECT id, j FROM ct_json WHERE k = ? AND j IS NOT NULL",
            "SELECT id, j FROM ct_json WHERE k = 1 AND j IS NOT NULL",
        ),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    admin.query_drop("INSERT INTO ct_json VALUES (3, 1, '[2]'), (4, 1, '[3, 2]')").await.unwrap();
    admin.query_drop("DELETE FROM ct_json WHERE id = 1").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let (wrong, unserved) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server after the writes: {wrong:#?}");
    assert!(!unserved.contains(&"json_shown"), "a JSON column selected is answered from its view");
}

/// Text made of literals alone takes the session's `collation_connection` on the server:
/// under `SET NAMES utf8mb4 COLLATE utf8mb4_bin`, `CASE ... THEN 'Yes' ELSE 'yes' END` has two
/// distinct values, under the default general_ci one. A view groups it under general_ci, so such a
/// read is relayed for a session on another collation, and served on general_ci; a read whose
/// text meets a column is served on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_made_of_literals_alone_takes_the_connections_collation() {
    let _admin = fresh_table(
        "ct_literals",
        "id INT PRIMARY KEY, k INT NOT NULL, n INT NOT NULL, s VARCHAR(10) NOT NULL",
        "(1, 1, 5, 'a'), (2, 1, 50, 'A')",
    )
    .await;
    let caches = [
        ("lit_groups", "SELECT k, COUNT(DISTINCT CASE WHEN n > 10 THEN 'Yes' ELSE 'yes' END) AS m FROM ct_literals WHERE k = ? GROUP BY k"),
        ("lit_column", "SELECT id, COUNT(DISTINCT s) AS m FROM ct_literals WHERE k = ? AND s = 'A' GROUP BY id"),
    ];
    let proxy = start_proxy(&cache_config(&caches)).await;
    let mut ours = through(&proxy).await;
    let mut theirs = direct().await;
    for (names, served) in
        [("SET NAMES utf8mb4 COLLATE utf8mb4_bin", vec!["lit_column"]), ("SET NAMES utf8mb4", vec!["lit_groups", "lit_column"])]
    {
        ours.query_drop(names).await.unwrap();
        theirs.query_drop(names).await.unwrap();
        let mut hit = Vec::new();
        for (name, query) in caches {
            let sql = query.replace('?', "1");
            let before = hits(&proxy, name);
            for _ in 0..5 {
                let got: Vec<(i64, i64)> = ours.query(&sql).await.unwrap();
                let mut want: Vec<(i64, i64)> = theirs.query(&sql).await.unwrap();
                let mut got = got;
                got.sort();
                want.sort();
                assert_eq!(got, want, "{sql} after {names}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if hits(&proxy, name) > before {
                hit.push(name);
            }
        }
        assert_eq!(hit, served, "served after {names}");
    }
}

/// Under LOCK TABLES a session may read only the tables it locked: the server answers a read
/// of another with error 1100. Its cached reads are relayed until UNLOCK TABLES, and served
/// again after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_under_lock_tables_gets_the_servers_answers() {
    let _read = fresh_table("ct_locked_read", "id INT PRIMARY KEY, k INT NOT NULL", "(1, 1)").await;
    let _other = fresh_table("ct_locked_other", "id INT PRIMARY KEY", "(1)").await;
    let caches = [("locked", "SELECT id FROM ct_locked_read WHERE k = ?")];
    let proxy = start_proxy(&cache_config(&caches)).await;
    let sql = "SELECT id FROM ct_locked_read WHERE k = 1";
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    hit(&mut client, &proxy, "locked", sql).await;
    for c in [&mut client, &mut check] {
        c.query("LOCK TABLES ct_locked_other READ").await;
    }
    let (want, got) = (check.query(sql).await, client.query(sql).await);
    assert_eq!(got, want, "under LOCK TABLES: the server's error 1100");
    for c in [&mut client, &mut check] {
        c.query("UNLOCK TABLES").await;
    }
    let before = hits(&proxy, "locked");
    hit(&mut client, &proxy, "locked", sql).await;
    assert!(hits(&proxy, "locked") > before, "served again after UNLOCK TABLES");
}

/// Integer arithmetic out of its result type's range is an error on the server (1690, "BIGINT
/// UNSIGNED value is out of range"): a difference with an UNSIGNED operand is UNSIGNED, so
/// `stock - 1` at stock 0 fails, as does a signed BIGINT sum past 2^63 - 1. A view evaluating
/// the rows the binlog changed must not answer -1 or 2^63 where the server answers the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integer_arithmetic_out_of_range_is_the_servers_error() {
    let mut admin =
        fresh_table("ct_range", "id INT PRIMARY KEY, stock INT UNSIGNED NOT NULL, big BIGINT NOT NULL", "(1, 1, 9223372036854775806)")
            .await;
    let reads = [
        (
            "left",
            "SELECT id, stock - 1 AS remaining FROM ct_range WHERE id = ?",
            "SELECT id, stock - 1 AS remaining FROM ct_range WHERE id = 1",
        ),
        (
            "next",
            "SELECT id, big + 1 AS following FROM ct_range WHERE id = ?",
            "SELECT id, big + 1 AS following FROM ct_range WHERE id = 1",
        ),
    ];
    let (_proxy, mut client, mut check) = warmed(&reads).await;
    admin.query_drop("UPDATE ct_range SET stock = 0, big = 9223372036854775807 WHERE id = 1").await.unwrap();
    for (_, _, sql) in reads {
        let want = check.query(sql).await;
        for _ in 0..50 {
            assert_eq!(client.query(sql).await, want, "{sql}: the server's out-of-range error");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Random queries of every shape a cache compiles (`freshet_testkit::sqlgen`: joins of columns of
/// any kinds, groupings, top-k, DISTINCT, UNION ALL) over two tables holding each type's ends,
/// NULLs and strings equal under the collation but spelled otherwise, cached together, read
/// through freshet and directly (as text and as prepared statements) after the fill and after
/// each of three rounds of random inserts, updates and deletes (of one row or of many, every
/// other round in one transaction): end to end (fills by the server's SQL, the binlog's rows
/// decoded, values encoded on the wire), every answer must be the server's. The dataflow's
/// `random_queries_answer_as_the_server_answers` checks the views alone, with many more queries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cached_queries_answer_as_the_server_answers() {
    random_cached_queries(Variant { db: "freshet_test", ..Variant::default() }).await;
}

/// The same with a schema change between two rounds: a text column's collation and a
/// DECIMAL's scale change, so views are rebuilt with the new types or relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cached_queries_after_a_schema_change_answer_as_the_server_answers() {
    let ddl = "ALTER TABLE ex MODIFY s VARCHAR(12) COLLATE utf8mb4_bin NULL, MODIFY d DECIMAL(12,3) NULL";
    random_cached_queries(Variant { db: "freshet_test_ddl", ddl: Some(ddl), ..Variant::default() }).await;
}

/// The same with the writes sent through freshet by the session that reads, each read right
/// after them: read-your-writes (`[consistency] read_your_writes`) waits for the session's
/// writes to be applied, or relays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cached_queries_read_after_their_sessions_writes_answer_as_the_server_answers() {
    random_cached_queries(Variant { db: "freshet_test_ryw", writes_through_freshet: true, ..Variant::default() }).await;
}

/// The same with a memory limit the views do not fit in: partitions are evicted and filled
/// again between the reads, in a database of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cached_queries_evicted_and_filled_again_answer_as_the_server_answers() {
    random_cached_queries(Variant { db: "freshet_test_evicted", memory: Some("64KiB"), ..Variant::default() }).await;
}

/// The same with `[fill] source = "replica"`: misses are filled from the local RocksDB copy
/// of the tables (their rows encoded and decoded by the replica), in a database of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cached_queries_filled_from_the_replica_answer_as_the_server_answers() {
    let path = std::env::temp_dir().join(format!("freshet-random-replica-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    random_cached_queries(Variant { db: "freshet_test_replica", replica: Some(&path), ..Variant::default() }).await;
    let _ = std::fs::remove_dir_all(&path);
}

/// How a run of [`random_cached_queries_answer_as_the_server_answers`] differs.
#[derive(Default)]
struct Variant<'a> {
    /// Its database (each run its own: they run at once).
    db: &'a str,
    /// Misses filled from a replica at this path, not from the server.
    replica: Option<&'a std::path::Path>,
    /// The views' memory limit.
    memory: Option<&'a str>,
    /// The writes sent through freshet by the reading session, read without waiting.
    writes_through_freshet: bool,
    /// A schema change made before the third round of reads.
    ddl: Option<&'a str>,
}

/// [`random_cached_queries_answer_as_the_server_answers`] as `variant` says.
async fn random_cached_queries(variant: Variant<'_>) {
    let Variant { db, replica, memory, writes_through_freshet, ddl } = variant;
    use freshet_testkit::sqlgen;
    let mut admin = direct().await;
    admin.query_drop(format!("CREATE DATABASE IF NOT EXISTS {db}")).await.unwrap();
    let mut admin = mysql_async::Conn::new(opts(&upstream_addr()).db_name(Some(db))).await.unwrap();
    let mut rng = freshet_testkit::rng::Rng::new(std::env::var("FRESHET_QUERY_SEED").map_or(20261128, |s| s.parse().unwrap()));
    // Rows of both tables, as literals: (table, pools, rows).
    let mut tables: [SqlTable; 2] = [("ex", &sqlgen::EX_POOLS, Vec::new()), ("ey", &sqlgen::EY_POOLS, Vec::new())];
    admin.query_drop(format!("DROP TABLE IF EXISTS ex, ey; {}; {}", sqlgen::EX_DDL, sqlgen::EY_DDL)).await.unwrap();
    for (t, (name, pools, rows)) in tables.iter_mut().enumerate() {
        for id in 0..[8, 6][t] {
            rows.push(sqlgen::random_row(&mut rng, id, pools));
        }
        let values: Vec<String> = rows.iter().map(|r| format!("({})", r.join(", "))).collect();
        admin.query_drop(format!("INSERT INTO {name} VALUES {}", values.join(", "))).await.unwrap();
    }
    let count = std::env::var("FRESHET_QUERY_COUNT").map_or(30, |s| s.parse().unwrap());
    // Each query with the literals of its reads, one per `?`: partition 0 and 1 for the
    // queries partitioned by `k`, and a third of as many keyed by another column.
    let mut queries: Vec<(String, Vec<Vec<String>>)> = (0..count)
        .map(|_| {
            let q = sqlgen::random_query(&mut rng);
            let n = q.matches('?').count();
            (q, ["0", "1"].iter().map(|k| vec![k.to_string(); n]).collect())
        })
        .collect();
    queries.extend((0..count / 3).map(|_| {
        let (q, keys) = sqlgen::random_keyed_query(&mut rng);
        (q, keys.iter().map(|k| vec![k.to_string()]).collect())
    }));
    let caches: Vec<(String, &str)> = queries.iter().enumerate().map(|(n, (q, _))| (format!("rq{n}"), q.as_str())).collect();
    let names: Vec<(&str, &str)> = caches.iter().map(|(n, q)| (n.as_str(), *q)).collect();
    let mut config = lenient_config(&names);
    if let Some(limit) = memory {
        config += &format!("[memory]\nlimit = \"{limit}\"\n");
    }
    if let Some(path) = replica {
        config += &format!("[replica]\npath = \"{}\"\n", path.display());
        config = config.replace("[fill]\n", "[fill]\nsource = \"replica\"\n");
    }
    let proxy = start_proxy_with_url(&freshet_testkit::url_with_db(&upstream_url(), db), &config).await;
    let e = engine(&proxy);
    let mut client = mysql_async::Conn::new(opts(&proxy.mysql.to_string()).db_name(Some(db))).await.unwrap();
    if replica.is_some() {
        // Reads are answered once the copy is done: until then misses go upstream.
        let copied = |e: &Engine| {
            e.replica.get().map(|r| r.figures()).is_some_and(|f| f.copy.tables_total > 0 && f.copy.tables_done == f.copy.tables_total)
        };
        for _ in 0..300 {
            if copied(&e) {
                break;
            }
            let _: Vec<mysql_async::Row> = client.query("SELECT 1").await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(copied(&e), "the replica's copy did not finish");
    }
    let live: Vec<(&str, &str, &[Vec<String>])> = caches
        .iter()
        .zip(&queries)
        .filter(|((name, _), _)| e.by_name(name).is_some_and(|c| c.live().is_ok()))
        .map(|((name, q), (_, bindings))| (name.as_str(), *q, bindings.as_slice()))
        .collect();
    // Each cache's text reads: its text with each binding's literals, then (partitioned by `k`)
    // both partitions in one read, answered by merging the partitions' answers where that is
    // the query's answer, relayed where it is not (a LIMIT over both).
    let reads: Vec<(&str, Vec<String>)> = live
        .iter()
        .map(|(name, q, bindings)| {
            let mut texts: Vec<String> = bindings.iter().map(|b| bind(q, b)).collect();
            if q.matches('?').count() == 1 && q.contains("k = ?") {
                texts.push(q.replace("k = ?", "k IN (1, 0)"));
            }
            (*name, texts)
        })
        .collect();
    assert!(reads.len() >= 10, "only {} of {} random queries compiled", reads.len(), caches.len());
    for ((name, texts), (_, _, bindings)) in reads.iter().zip(&live) {
        // Each binding's partition is filled (a read of both may be relayed, and never hits).
        for sql in &texts[..bindings.len()] {
            for _ in 0..10 {
                let before = hits(&proxy, name);
                let _: Vec<mysql_async::Row> = client.query(sql).await.unwrap();
                if hits(&proxy, name) > before {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    // A row as text: every value as the text protocol sends it.
    // A row as text: every value as the text protocol sends it, or as the binary one decodes.
    // An answer as rows of text, or the server's error as its one row (freshet must relay it).
    let text_rows = |rows: Result<Vec<mysql_async::Row>, mysql_async::Error>| -> Vec<Vec<String>> {
        let rows = match rows {
            Ok(rows) => rows,
            Err(mysql_async::Error::Server(e)) => return vec![vec![format!("error {}: {}", e.code, e.message)]],
            Err(e) => panic!("{e}"),
        };
        rows.into_iter()
            .map(|r| {
                r.unwrap()
                    .into_iter()
                    .map(|v| match v {
                        mysql_async::Value::NULL => "NULL".to_string(),
                        mysql_async::Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                        other => format!("{other:?}"),
                    })
                    .collect()
            })
            .collect()
    };
    let (mut served, mut served_prepared, mut wrong) = (0u64, 0u64, Vec::new());
    for round in 0..4 {
        if let Some(ddl) = ddl.filter(|_| round == 2) {
            admin.query_drop(ddl).await.unwrap();
            caught_up(&mut client).await;
        }
        if round > 0 {
            let mut writes = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let (name, pools, rows) = &mut tables[rng.below(2) as usize];
                let next_id = rows.iter().map(|r| r[0].parse::<i64>().unwrap()).max().unwrap_or(0) + 1;
                match rng.below(5) {
                    0 if !rows.is_empty() => {
                        let gone = rows.remove(rng.below(rows.len() as u64) as usize);
                        writes.push(format!("DELETE FROM {name} WHERE id = {}", gone[0]));
                    }
                    // Statements of many rows: a partition's rows all set, or half of them gone.
                    3 => {
                        let (k, fresh) = (rng.below(2).to_string(), sqlgen::random_row(&mut rng, next_id, pools));
                        let c = 2 + rng.below(fresh.len() as u64 - 2) as usize;
                        for row in rows.iter_mut().filter(|r| r[1] == k) {
                            row[c] = fresh[c].clone();
                        }
                        writes.push(format!("UPDATE {name} SET {} = {} WHERE k = {k}", column(name, c), fresh[c]));
                    }
                    4 => {
                        let k = rng.below(2).to_string();
                        rows.retain(|r| r[1] != k || r[0].parse::<i64>().unwrap() % 2 == 1);
                        writes.push(format!("DELETE FROM {name} WHERE k = {k} AND id % 2 = 0"));
                    }
                    1 if !rows.is_empty() => {
                        let at = rng.below(rows.len() as u64) as usize;
                        let fresh = sqlgen::random_row(&mut rng, next_id, pools);
                        let c = 1 + rng.below(fresh.len() as u64 - 1) as usize;
                        rows[at][c] = fresh[c].clone();
                        writes.push(format!("UPDATE {name} SET {} = {} WHERE id = {}", column(name, c), fresh[c], rows[at][0]));
                    }
                    _ => {
                        let row = sqlgen::random_row(&mut rng, next_id, pools);
                        writes.push(format!("INSERT INTO {name} VALUES ({})", row.join(", ")));
                        rows.push(row);
                    }
                }
            }
            // Every other round is one transaction: one batch of the binlog's.
            if round % 2 == 0 {
                writes.insert(0, "BEGIN".to_string());
                writes.push("COMMIT".to_string());
            }
            if writes_through_freshet {
                // The transactions as one text of several statements (UPDATE ... SET among
                // them: read one by one, they leave the session followed), the others one
                // statement at a time.
                if round % 2 == 0 {
                    client.query_drop(writes.join("; ")).await.unwrap();
                } else {
                    for w in writes {
                        client.query_drop(w).await.unwrap();
                    }
                }
            } else {
                admin.query_drop(writes.join("; ")).await.unwrap();
                caught_up(&mut client).await;
            }
        }
        let spellings: Vec<String> = tables
            .iter()
            .flat_map(|(_, _, rows)| rows.iter().flatten())
            .filter_map(|l| Some(l.strip_prefix('\'')?.strip_suffix('\'')?.to_string()))
            .collect();
        for (name, texts) in &reads {
            for sql in texts {
                let before = hits(&proxy, name);
                let ours = text_rows(client.query(sql).await);
                served += hits(&proxy, name) - before;
                let theirs = text_rows(admin.query(sql).await);
                if !same_rows(&ours, &theirs, sql.contains("ORDER BY"), &spellings) {
                    wrong.push(format!(
                        "{sql} (round {round})\n  freshet: {ours:?}\n  server:  {theirs:?}\n  rows: {:?}",
                        tables.iter().map(|t| &t.2).collect::<Vec<_>>()
                    ));
                }
            }
        }
        // And each binding executed as a prepared statement.
        for (name, sql, bindings) in &live {
            for binding in bindings.iter() {
                let params: Vec<mysql_async::Value> = binding.iter().map(|l| param(l)).collect();
                let before = hits(&proxy, name);
                let ours = text_rows(client.exec(*sql, params.clone()).await);
                served_prepared += hits(&proxy, name) - before;
                let theirs = text_rows(admin.exec(*sql, params).await);
                if !same_rows(&ours, &theirs, sql.contains("ORDER BY"), &spellings) {
                    wrong.push(format!(
                        "{sql} executed with {binding:?} (round {round})\n  freshet: {ours:?}\n  server:  {theirs:?}\n  rows: {:?}",
                        tables.iter().map(|t| &t.2).collect::<Vec<_>>()
                    ));
                }
            }
        }
    }
    let from_replica = e.replica.get().map_or(0, |r| r.figures().fills);
    let evictions: u64 = live.iter().filter_map(|(name, _, _)| e.by_name(name)).map(|c| c.stats().evictions).sum();
    eprintln!(
        "{} of {} random queries cached; {served} text reads and {served_prepared} prepared reads answered from views; {from_replica} fills from the replica; {evictions} evictions",
        reads.len(),
        caches.len()
    );
    assert!(replica.is_none() || from_replica > 0, "no miss was filled from the replica");
    assert!(wrong.is_empty(), "{} answers differ from the server's:\n{}", wrong.len(), wrong.join("\n"));
    let relays: Vec<String> = RelayReason::ALL
        .iter()
        .map(|r| (r.label(), relayed(&proxy, *r)))
        .filter(|(_, n)| *n > 0)
        .map(|(l, n)| format!("{l} {n}"))
        .collect();
    eprintln!("relayed: {}", relays.join(", "));
    // The session's own writes, several to a text, did not stop it being followed.
    assert_eq!(relayed(&proxy, RelayReason::SessionState), 0, "reads relayed for the session's state");
    assert!(memory.is_none() || evictions > 0, "nothing was evicted under {memory:?}");
    // Under a memory limit, a read of an evicted partition is relayed while it is filled again.
    let answered = if memory.is_some() { reads.len() } else { reads.len() * 4 };
    assert!(
        served.min(served_prepared) as usize >= answered,
        "only {served} text and {served_prepared} prepared reads were answered from views: the test compared relayed answers"
    );
}

/// `sql` with its `?`s replaced, in order, by `literals`.
fn bind(sql: &str, literals: &[String]) -> String {
    let mut parts = sql.split('?');
    let mut out = parts.next().unwrap_or_default().to_string();
    for (part, literal) in parts.zip(literals) {
        out.push_str(literal);
        out.push_str(part);
    }
    out
}

/// A literal as a client binds it to a prepared statement: a string as bytes, an integer as
/// one, a decimal as its text.
fn param(literal: &str) -> mysql_async::Value {
    if let Some(s) = literal.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        return mysql_async::Value::Bytes(s.as_bytes().to_vec());
    }
    match literal.parse::<i64>() {
        Ok(i) => mysql_async::Value::Int(i),
        Err(_) => literal.parse::<u64>().map_or_else(|_| mysql_async::Value::Bytes(literal.as_bytes().to_vec()), mysql_async::Value::UInt),
    }
}

/// One of `sqlgen`'s tables: its name, the literals its columns after `id` and `k` take, and
/// its rows, as literals.
type SqlTable = (&'static str, &'static [&'static [&'static str]], Vec<Vec<String>>);

/// The name of column `c` of `ex` or `ey` (`sqlgen`'s tables).
fn column(table: &str, c: usize) -> &'static str {
    let ex = ["id", "k", "i", "u", "b", "d", "s", "t", "dt"];
    let ey = ["id", "k", "j", "e", "w", "f", "ts", "bs", "uc", "tm", "yr", "en", "bt", "st", "vb", "tz", "fl", "bn"];
    if table == "ex" { ex[c] } else { ey[c] }
}

/// Whether freshet's rows are the server's: in order for an ordered query, as multisets
/// otherwise. Where strings the collation finds equal are spelled otherwise ('a', 'A', 'a '),
/// the spelling a group, DISTINCT, MIN or MAX shows is the first the server's plan reads; a
/// view shows one its rows have, which must be one of `spellings` (the tables' strings now) where the server's is.
fn same_rows(ours: &[Vec<String>], theirs: &[Vec<String>], ordered: bool, spellings: &[String]) -> bool {
    use freshet_dataflow::{Collation, Value};
    // Equal under one of the tables' case-insensitive collations.
    let ci = |x: &str, t: &str| {
        [Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi].iter().any(|c| Value::text(x, *c) == Value::text(t, *c))
    };
    // A spelling the tables hold must be answered with one they hold; a computed one
    // (`CONCAT(d, uc)`) with any the collation finds equal.
    let spelled = |x: &String, t: &String| spellings.contains(x) || !spellings.contains(t);
    let same = |o: &Vec<String>, t: &Vec<String>| {
        o.len() == t.len() && o.iter().zip(t).all(|(x, t)| x == t || (x != "NULL" && t != "NULL" && ci(x, t) && spelled(x, t)))
    };
    freshet_testkit::sqlgen::same_rows(ours, theirs, ordered, same)
}

/// The server reads a prepared statement's text once, at its prepare, under the session's
/// sql_mode and character sets of that moment, and keeps that reading for every execute. A
/// statement prepared under settings no view answers, and executed after the session went
/// back to settings one does, is the prepare's reading (an audit: the view's answer was
/// served, `(1, 1)` where the server gives `(1, 0)`, and `'Hello'` where it gives NULL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_statement_is_read_as_the_session_was_at_its_prepare() {
    fresh_table("c_prep_reading", "id INT PRIMARY KEY, vc VARCHAR(20)", "(1, 'Hello'), (2, '')").await;
    let reads = [
        ("prep_eq", "SELECT id, 'a' = 'A' AS same FROM c_prep_reading WHERE id = ?", "SET NAMES utf8mb4 COLLATE utf8mb4_bin"),
        ("prep_concat", "SELECT id, CONCAT(vc, '') AS c FROM c_prep_reading WHERE id = ?", "SET sql_mode = 'EMPTY_STRING_IS_NULL'"),
    ];
    let proxy = start_proxy(&cache_config(&reads.map(|(name, query, _)| (name, query)))).await;
    // No statement cache: each `prep` prepares on the server, under the session's settings then.
    let uncached = |addr: String| opts(&addr).stmt_cache_size(0);
    let mut direct_conn = mysql_async::Conn::new(uncached(upstream_addr())).await.unwrap();
    let mut through_conn = mysql_async::Conn::new(uncached(proxy.mysql.to_string())).await.unwrap();
    for (name, query, before) in reads {
        // Every key read once, so that the view holds it.
        for conn in [&mut direct_conn, &mut through_conn] {
            for id in [1, 2] {
                let _: Vec<mysql_async::Row> = conn.exec(query, (id,)).await.unwrap();
            }
        }
        let mut answers = Vec::new();
        for conn in [&mut direct_conn, &mut through_conn] {
            conn.query_drop(before).await.unwrap();
            let statement = conn.prep(query).await.unwrap();
            conn.query_drop("SET NAMES utf8mb4").await.unwrap();
            conn.query_drop("SET sql_mode = DEFAULT").await.unwrap();
            let mut rows = Vec::new();
            for id in [1, 2, 1] {
                let got: Vec<mysql_async::Row> = conn.exec(&statement, (id,)).await.unwrap();
                rows.push(got.into_iter().map(|r| r.unwrap()).collect::<Vec<_>>());
            }
            answers.push(rows);
        }
        assert_eq!(answers[1], answers[0], "{name}: prepared after `{before}`, executed after the defaults came back");
        // Prepared under the defaults, the same statement is answered from the view.
        // (Its first reads may be relayed while the partition fills: served within seconds.)
        let before_hits = hits(&proxy, name);
        let statement = through_conn.prep(query).await.unwrap();
        for _ in 0..150 {
            let _: Vec<mysql_async::Row> = through_conn.exec(&statement, (1,)).await.unwrap();
            if hits(&proxy, name) > before_hits {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(hits(&proxy, name) > before_hits, "{name}: prepared under the defaults, it is served");
    }
}

/// After a DDL of its tables the server prepares a statement again at its next execute, under
/// the session's sql_mode and character sets then, and keeps that reading. A statement
/// executed once under a binary collation after such a DDL reads `'a' = 'A'` as 0 from then
/// on, also after the session's collation came back (an audit: the view's 1 was served).
/// Writes and other settings that change no reading leave a statement prepared before them
/// served (a first version of the prepare's reading relayed it for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_statement_prepared_again_by_the_server_is_read_as_then() {
    let mut admin = fresh_table("c_reprep", "id INT PRIMARY KEY, vc VARCHAR(20)", "(1, 'Hello'), (2, 'x')").await;
    admin.query_drop("CREATE TABLE IF NOT EXISTS c_reprep_log (id INT AUTO_INCREMENT PRIMARY KEY, v INT)").await.unwrap();
    let query = "SELECT id, 'a' = 'A' AS same FROM c_reprep WHERE id = ?";
    let proxy = start_proxy(&cache_config(&[("reprep", query)])).await;
    let uncached = |addr: String| opts(&addr).stmt_cache_size(0);
    let mut direct_conn = mysql_async::Conn::new(uncached(upstream_addr())).await.unwrap();
    let mut through_conn = mysql_async::Conn::new(uncached(proxy.mysql.to_string())).await.unwrap();
    // Prepared first thing, then a write and a time zone: the statement is served.
    let statement = through_conn.prep(query).await.unwrap();
    through_conn.query_drop("INSERT INTO c_reprep_log (v) VALUES (1)").await.unwrap();
    through_conn.query_drop("SET time_zone = '+00:00'").await.unwrap();
    // Its first reads may be relayed while the partition fills (a fill waits for the stream,
    // and one that raced a write is relayed for a moment): served within a few seconds.
    let before = hits(&proxy, "reprep");
    for _ in 0..150 {
        let _: Vec<mysql_async::Row> = through_conn.exec(&statement, (1,)).await.unwrap();
        if hits(&proxy, "reprep") > before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(hits(&proxy, "reprep") > before, "a statement prepared before a write is served");
    // Prepared again by the server under a binary collation.
    let mut answers = Vec::new();
    for conn in [&mut direct_conn, &mut through_conn] {
        let statement = conn.prep(query).await.unwrap();
        let _: Vec<mysql_async::Row> = conn.exec(&statement, (1,)).await.unwrap();
        conn.query_drop("SET NAMES utf8mb4 COLLATE utf8mb4_bin").await.unwrap();
        answers.push(statement);
    }
    admin.query_drop("ALTER TABLE c_reprep COMMENT 'prepared again'").await.unwrap();
    let mut got = Vec::new();
    for (conn, statement) in [&mut direct_conn, &mut through_conn].into_iter().zip(&answers) {
        let mut rows = Vec::new();
        let once: Vec<mysql_async::Row> = conn.exec(statement, (1,)).await.unwrap();
        rows.push(once.into_iter().map(|r| r.unwrap()).collect::<Vec<_>>());
        conn.query_drop("SET NAMES utf8mb4").await.unwrap();
        for id in [1, 2, 1] {
            let again: Vec<mysql_async::Row> = conn.exec(statement, (id,)).await.unwrap();
            rows.push(again.into_iter().map(|r| r.unwrap()).collect());
        }
        got.push(rows);
    }
    assert_eq!(got[1], got[0], "prepared again under utf8mb4_bin after a DDL, executed after the collation came back");
}

/// Executes whose parameters the server reads otherwise than their value (an audit of the
/// binary protocol's parameters): each is answered as the server answers it, through a
/// session whose statement was answered from the view before.
/// - a DATETIME key looked up with a parameter typed TIMESTAMP: the server's index lookup
///   makes it a TIMESTAMP in the session's zone, and finds nothing for `9999-12-31` (out of
///   TIMESTAMP's range), where the view had the row;
/// - a NULL whose type's flag byte has bits other than unsigned's: the server reads the
///   type as 15 bits and refuses it (1210), where the view answered no rows;
/// - an execute with types the server refused (1210 for an unknown type): the server keeps
///   the types it last took, so an execute without types after it is read with those, where
///   freshet took the refused ones as the server's and relayed an execute the server refused;
/// - an execute whose value is shorter than its type (a 3-byte DOUBLE), also refused with
///   1210: the server keeps the refused execute's types this time, so an execute without
///   types after it is read as a DOUBLE, where freshet read the types before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_the_server_reads_otherwise_get_its_answers() {
    fresh_table(
        "c_bparams",
        "id INT PRIMARY KEY, d DATETIME, i INT, KEY(d), KEY(i)",
        "(1, '9999-12-31 00:00:00', 1), (2, '2024-01-01 10:00:00', 2)",
    )
    .await;
    let (by_d, by_i) = ("SELECT id, d FROM c_bparams WHERE d = ?", "SELECT id, i FROM c_bparams WHERE i = ?");
    let proxy = start_proxy(&cache_config(&[("bp_d", by_d), ("bp_i", by_i)])).await;
    // Every key once through freshet, so that the views hold them.
    let mut warm = through(&proxy).await;
    for _ in 0..3 {
        let _: Vec<mysql_async::Row> = warm.exec(by_d, ("9999-12-31 00:00:00",)).await.unwrap();
        let _: Vec<mysql_async::Row> = warm.exec(by_i, (1,)).await.unwrap();
        let _: Vec<mysql_async::Row> = warm.exec(by_i, (2,)).await.unwrap();
    }
    let mut direct = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let mut ours = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let longlong = |v: i64| [&[0x08, 0x00][..], &v.to_le_bytes()].concat();
    let typed = |ty: &[u8], value: &[u8]| [&[0x00, 0x01][..], ty, value].concat();
    let mut ids = Vec::new();
    for client in [&mut direct, &mut ours] {
        ids.push((prepare(client, by_d).await.0, prepare(client, by_i).await.0));
    }
    let cases: Vec<(&str, bool, Vec<u8>)> = vec![
        ("an i answered from the view", false, typed(&[0x08, 0x00], &1i64.to_le_bytes())),
        ("a TIMESTAMP-typed 9999-12-31", true, typed(&[0x07, 0x00], &[7, 0x0f, 0x27, 12, 31, 0, 0, 0])),
        ("a TIMESTAMP-typed 9999-12-31 again", true, typed(&[0x07, 0x00], &[7, 0x0f, 0x27, 12, 31, 0, 0, 0])),
        ("a NULL whose flags are not unsigned's", false, vec![0x01, 0x01, 0x08, 0x01]),
        ("a NULL whose flags are not unsigned's again", false, vec![0x01, 0x01, 0x08, 0x01]),
        ("an i typed LONGLONG", false, [&[0x00, 0x01][..], &longlong(1)].concat()),
        ("an unknown type, refused", false, typed(&[0x64, 0x00], &1i64.to_le_bytes())),
        ("no types after a refused execute", false, [&[0x00, 0x00][..], &2i64.to_le_bytes()].concat()),
        ("no types again", false, [&[0x00, 0x00][..], &1i64.to_le_bytes()].concat()),
        ("an i typed LONGLONG once more", false, [&[0x00, 0x01][..], &longlong(1)].concat()),
        // A type the server knows and freshet does not decode, its value cut short.
        ("a YEAR cut short, refused", false, typed(&[0x0d, 0x00], &[1])),
        ("no types after the cut YEAR", false, [&[0x00, 0x00][..], &2i64.to_le_bytes()].concat()),
        ("no types after the cut YEAR again", false, [&[0x00, 0x00][..], &1i64.to_le_bytes()].concat()),
    ];
    for (what, on_d, body) in cases {
        let mut answers = Vec::new();
        for (client, (d, i)) in [&mut direct, &mut ours].into_iter().zip(&ids) {
            client.send(&execute(if on_d { *d } else { *i }, &body)).await;
            answers.push(client.read_results().await);
        }
        assert_eq!(answers[1], answers[0], "{what}");
    }
    // The same refusal of an execute that asked for a cursor (which freshet leaves to the
    // server without reading its parameters), then executes without types after it.
    let mut answers = Vec::new();
    for (client, (_, i)) in [&mut direct, &mut ours].into_iter().zip(&ids) {
        let mut cursor = execute(*i, &typed(&[0x05, 0x00], &[1, 2, 3]));
        cursor[5] = 1;
        client.send(&cursor).await;
        let refused = client.read_results().await;
        let mut after = Vec::new();
        for v in [2i64, 1, 2, 1] {
            client.send(&execute(*i, &[&[0x00, 0x00][..], &v.to_le_bytes()].concat())).await;
            after.push(client.read_results().await);
        }
        answers.push((refused, after));
    }
    assert_eq!(answers[1], answers[0], "no types after a DOUBLE cut short with a cursor");
}

/// A fill that reads through a derived table (a top-k's `ROW_NUMBER()`, a grouped fill's
/// `GROUP BY` over the state query) names its columns `c0`, `c1`, ..., and MariaDB 10.11
/// describes such a column by the base table and that alias (`org_table` the table,
/// `org_name` `c1`). freshet took the pair for a base column, so a table with columns of
/// those names lent their types: a signed `-2` filled as a BIGINT UNSIGNED showed
/// 18446744073709551614, and a top-k ordered by a general_ci column under another column's
/// collation answered no rows at all (an audit of session 53).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_named_like_a_fills_aliases_keep_their_own_types() {
    fresh_table(
        "ct_alias_int",
        "id INT PRIMARY KEY, grp INT, c0 INT, c1 INT, c2 BIGINT UNSIGNED, c3 INT, KEY(grp)",
        "(1, 1, -5, 100, 7, 3), (2, 1, -6, 200, 8, 2), (3, 1, 30, 300, 9, 1), (4, 2, -1, -2, 10, 0)",
    )
    .await;
    fresh_table(
        "ct_alias_text",
        "id INT PRIMARY KEY, grp INT, c0 VARCHAR(10) COLLATE utf8mb4_bin, c1 VARCHAR(10) COLLATE utf8mb4_general_ci, \
         c2 VARCHAR(10) COLLATE utf8mb4_bin, c3 VARCHAR(10) COLLATE utf8mb4_bin, c4 VARCHAR(10) COLLATE utf8mb4_bin, KEY(grp)",
        "(1, 1, 'x', 'a', 'q', 'q', 'q'), (2, 1, 'x', 'B', 'q', 'q', 'q'), (3, 1, 'x', 'c', 'q', 'q', 'q'), (4, 1, 'x', 'D', 'q', 'q', 'q')",
    )
    .await;
    let caches = [
        ("alias_topk", "SELECT id, c0, c1 FROM ct_alias_int WHERE grp = ? ORDER BY c3 DESC, id LIMIT 2"),
        ("alias_text", "SELECT c0, c1 FROM ct_alias_text WHERE grp = ? ORDER BY c1, id LIMIT 3"),
        ("alias_group", "SELECT grp, MIN(c1), MAX(c1), COUNT(*) FROM ct_alias_int WHERE grp = ? GROUP BY grp"),
    ];
    keys_hit_as_the_server(&caches, &[1, 2]).await;
}

/// The fills' own knowledge of a table's columns (an ENUM is read as its members, not as text)
/// was dropped for every table whose name matched the DDL's without case: `CREATE TABLE
/// ct_case_ev` on a server with `lower_case_table_names = 0` dropped `Ct_Case_Ev`'s, whose
/// fills then read its ENUM key as text, matched no row of the view, and answered empty from
/// the cache for every key filled after the DDL (an audit of session 53).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_of_a_table_named_in_another_case_leaves_a_cached_tables_types_alone() {
    let mut admin = fresh_table("Ct_Case_Ev", "id INT PRIMARY KEY, e ENUM('x', 'y', 'z'), KEY(e)", "(1, 'x'), (2, 'y'), (3, 'z')").await;
    admin.query_drop("DROP TABLE IF EXISTS ct_case_ev").await.unwrap();
    let reads = [("case_enum", "SELECT id, e FROM Ct_Case_Ev WHERE e = ?", "SELECT id, e FROM Ct_Case_Ev WHERE e = 'x'")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    assert_eq!(hit(&mut client, &proxy, name, sql).await, check.query(sql).await);
    admin.query_drop("CREATE TABLE ct_case_ev (id INT PRIMARY KEY)").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    for key in ["y", "z"] {
        let sql = format!("SELECT id, e FROM Ct_Case_Ev WHERE e = '{key}'");
        assert_eq!(hit(&mut client, &proxy, name, &sql).await, check.query(&sql).await, "{sql}");
    }
    for t in ["Ct_Case_Ev", "ct_case_ev"] {
        admin.query_drop(format!("DROP TABLE {t}")).await.unwrap();
    }
}

/// Two caches of one shape but for a constant (`a > 100`, `a > 2`) are two caches: a read is
/// answered by the one whose constants it has. Only the first cache of a shape was ever asked,
/// so every read of the second was relayed (`constant`) and it never served (an audit of
/// session 53).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_of_one_shape_with_other_constants_each_answer_their_reads() {
    fresh_table(
        "ct_consts",
        "id INT PRIMARY KEY, k INT NOT NULL, a INT NOT NULL, b VARCHAR(10), KEY(k)",
        "(1, 1, 1, 'one'), (2, 1, 5, 'five'), (3, 1, 150, 'big'), (4, 2, 3, 'three')",
    )
    .await;
    let caches = [
        ("consts_big", "SELECT id, b FROM ct_consts WHERE k = ? AND a > 100"),
        ("consts_small", "SELECT id, b FROM ct_consts WHERE k = ? AND a > 2"),
    ];
    let (proxy, mut client, mut check) = keys_hit_as_the_server(&caches, &[1, 2]).await;
    // A constant neither cache has is the server's.
    let before = relayed(&proxy, RelayReason::Constant);
    let sql = "SELECT id, b FROM ct_consts WHERE k = 1 AND a > 50";
    assert_eq!(client.query(sql).await, check.query(sql).await);
    assert_eq!(relayed(&proxy, RelayReason::Constant), before + 1);
}

/// A cache created with CREATE CACHE for a shape that has a verdict already answers its reads.
/// Creating a cache forgot only the shapes relayed for want of one: a shape whose verdict
/// listed the cache of another constant (`id > 100`) kept it, so the new cache (`id > 200`)
/// was never asked and its reads were relayed (`constant`) for good (an audit of session 53).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_created_for_a_shape_with_a_verdict_answers_its_reads() {
    fresh_table("ct_late_const", "id INT PRIMARY KEY, k INT NOT NULL, v INT, KEY(k)", "(50, 3, 1), (150, 3, 2), (250, 3, 3), (260, 4, 4)")
        .await;
    let proxy = start_proxy(&cache_config(&[("late_first", "SELECT id, v FROM ct_late_const WHERE k = ? AND id > 100")])).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let first = "SELECT id, v FROM ct_late_const WHERE k = 3 AND id > 100";
    assert_eq!(hit(&mut client, &proxy, "late_first", first).await, check.query(first).await);
    // The shape's verdict is the first cache's: another constant is the server's.
    let second = "SELECT id, v FROM ct_late_const WHERE k = 3 AND id > 200";
    let before = relayed(&proxy, RelayReason::Constant);
    assert_eq!(client.query(second).await, check.query(second).await);
    assert_eq!(relayed(&proxy, RelayReason::Constant), before + 1);

    let mut conn = through(&proxy).await;
    conn.query_drop("CREATE CACHE late_second FROM SELECT id, v FROM ct_late_const WHERE k = ? AND id > 200").await.unwrap();
    assert_eq!(hit(&mut client, &proxy, "late_second", second).await, check.query(second).await);
    assert_eq!(hit(&mut client, &proxy, "late_first", first).await, check.query(first).await);
    let shapes: Vec<(String, u64, String, String, String)> = conn.query("SHOW PROXIED QUERIES LIMIT 100").await.unwrap();
    assert!(shapes.iter().any(|s| s.0.contains("ct_late_const") && s.4.contains("matches cache late_first, late_second")), "{shapes:?}");
}

/// A cache whose query has an IN list of constants answers the reads that repeat that list,
/// value for value; another list is the server's. A list of constants was taken for one of
/// placeholders gone wrong: such a cache was built and said available, and never served, not
/// even its own text (relayed, `no_cache`; an audit of session 53). A list that mixes constants
/// and placeholders, which no read could match, is refused where the cache is defined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_in_list_of_constants_answers_its_own_list_and_a_mixed_list_is_refused() {
    fresh_table(
        "ct_const_list",
        "id INT PRIMARY KEY, k INT NOT NULL, v INT, KEY(k)",
        "(3, 1, 30), (53, 1, 530), (103, 2, 1030), (104, 1, 1040)",
    )
    .await;
    let cached = "SELECT id, v FROM ct_const_list WHERE k = ? AND id IN (3, 53, 103)";
    let proxy = start_proxy(&cache_config(&[("const_list", cached)])).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    for sql in [
        "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (3, 53, 103)",
        "select id, v from ct_const_list where k = 2 and id in (3,53,103)",
        "SELECT ct_const_list.id, ct_const_list.v FROM ct_const_list WHERE ct_const_list.k = 1 AND ct_const_list.id IN (3, 53, 103)",
    ] {
        assert_eq!(hit(&mut client, &proxy, "const_list", sql).await, check.query(sql).await, "{sql}");
    }
    // Another value, another order or another length is another list: the server's.
    for sql in [
        "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (3, 53, 104)",
        "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (53, 3, 103)",
        "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (3, 53)",
        "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (3, 53, 103, 104)",
    ] {
        let before = relayed(&proxy, RelayReason::Constant);
        assert_eq!(client.query(sql).await, check.query(sql).await, "{sql}");
        assert_eq!(relayed(&proxy, RelayReason::Constant), before + 1, "{sql}");
    }

    // A list of constants and placeholders: refused by CREATE CACHE, saying why.
    let mixed = "SELECT id, v FROM ct_const_list WHERE k = ? AND id IN (?, 3)";
    let err = through(&proxy).await.query_drop(format!("CREATE CACHE mixed FROM {mixed}")).await.unwrap_err().to_string();
    assert!(err.contains("cannot cache") && err.contains("IN list") && err.contains("constants and placeholders"), "{err}");
    assert!(engine(&proxy).by_name("mixed").is_none());
    // In the config: a strict start fails naming the cache and the problem; a lenient one
    // keeps the cache unavailable, with why, and serves the others.
    let toml = format!(
        "[upstream]\nurl = \"{}\"\ntls = \"disabled\"\n[listen]\nmysql = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{}",
        upstream_url(),
        cache_config(&[("const_list", cached), ("mixed", mixed)])
    );
    let err = match freshet_proxy::Server::bind(freshet_testkit::freshet::config(&toml)).await {
        Ok(_) => panic!("a cached IN list of constants and placeholders must fail a strict start"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("mixed") && err.contains("constants and placeholders"), "{err}");
    let lenient = start_proxy_raw(&format!("{toml}[caches]\nstrict = false\n")).await;
    let why = engine(&lenient).by_name("mixed").unwrap().live().err().unwrap_or_default();
    assert!(why.contains("constants and placeholders"), "{why}");
    let (_, body) = http::get(lenient.admin, "/metrics").await;
    assert!(body.contains("freshet_proxy_cache_available{cache=\"mixed\"} 0"), "{body}");
    assert!(body.contains("freshet_proxy_cache_available{cache=\"const_list\"} 1"), "{body}");
    let mut client = RawClient::connect(&lenient.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (3, 53, 103)";
    assert_eq!(hit(&mut client, &lenient, "const_list", sql).await, check.query(sql).await);
}

/// EXPLAIN CACHE shows the plan of the cache that answers the read, or says that none does.
/// It showed the first cache of the read's shape even when the read's constants were none of
/// its caches' (the read itself relayed, `constant`; an audit of session 53).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_cache_shows_the_cache_that_answers_the_read_or_none() {
    fresh_table("ct_explain_const", "id INT PRIMARY KEY, k INT NOT NULL, v INT, KEY(k)", "(50, 3, 1), (150, 3, 2), (250, 3, 30)").await;
    let caches = [
        ("explain_big", "SELECT id, v FROM ct_explain_const WHERE k = ? AND id > 100"),
        ("explain_small", "SELECT id, v FROM ct_explain_const WHERE k = ? AND id > 2"),
        ("explain_one", "SELECT id, v FROM ct_explain_const WHERE k = ? AND v < 10"),
    ];
    let proxy = start_proxy(&cache_config(&caches)).await;
    let mut conn = through(&proxy).await;
    let mut explained = Vec::new();
    for (sql, answering) in [
        ("SELECT id, v FROM ct_explain_const WHERE k = 3 AND id > 100", Some(0)),
        ("SELECT id, v FROM ct_explain_const WHERE k = ? AND id > 2", Some(1)),
        (
            "SELECT ct_explain_const.id, ct_explain_const.v FROM ct_explain_const WHERE ct_explain_const.k = 3 AND ct_explain_const.id > 2",
            Some(1),
        ),
        ("SELECT id, v FROM ct_explain_const WHERE k = 3 AND v < 10", Some(2)),
        // Of a shape of two caches, and of one: neither's constant.
        ("SELECT id, v FROM ct_explain_const WHERE k = 3 AND id > 50", None),
        ("SELECT id, v FROM ct_explain_const WHERE k = 3 AND v < 20", None),
    ] {
        let lines: Vec<(String, String)> = conn.query(format!("EXPLAIN CACHE {sql}")).await.unwrap();
        explained.push((sql, answering, lines));
    }
    let section =
        |lines: &[(String, String)], name: &str| lines.iter().find(|(s, _)| s == name).map(|(_, d)| d.clone()).unwrap_or_default();
    // The plan shown is the answering cache's, or the read's own.
    for (sql, answering, lines) in &explained {
        assert_eq!(section(lines, "query"), answering.map_or(*sql, |i| caches[i].1), "{sql}: {lines:?}");
    }
    // And a line says which.
    for (sql, answering, lines) in &explained {
        let said = answering.map_or("no cache answers", |i| caches[i].0);
        assert!(section(lines, "cache").contains(said), "{sql}: {lines:?}");
    }
}
