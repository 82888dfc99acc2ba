//! The server's defaults for its sessions. A session that never says SET still reads under
//! the server's global settings, and some change what a SELECT answers:
//! - the time zone: a TIMESTAMP is stored in UTC and read in the session's zone (compared
//!   with a literal, given to `DATE()`, grouped). A view holds UTC (the binlog's and the fill
//!   connections' zone), so its answer is the server's only for a session in UTC. A server
//!   whose default zone is another (`SYSTEM` on a host in local time, `default_time_zone`) is
//!   common;
//! - `div_precision_increment`: the decimals a quotient (`a / b`, AVG) has beyond its
//!   dividend's, 4 unless set.
//!
//! This binary changes the server's globals (`SET GLOBAL`), which new sessions of any test
//! would see, so it holds its tests alone: cargo runs test binaries one at a time, each test
//! changes a variable no other test here reads, and gives it back even when it fails. The
//! one that changes `binlog_format`, which every test's writes would be logged under, runs
//! alone (`GLOBALS`).

mod common;

use std::time::Duration;

use common::*;
use freshet_proxy::cache::RelayReason;
use mysql_async::prelude::*;

/// Taken for reading by every test, for writing by one that changes a global the others'
/// writes depend on.
static GLOBALS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Runs `test` with the server's global `variable` first set to `value` (a SQL literal), and
/// gives the variable its value back whatever happens, then passes a failure on.
async fn with_global<F: std::future::Future<Output = ()> + Send + 'static>(variable: &str, value: &str, test: F) {
    let mut admin = direct().await;
    let before: String = admin.query_first(format!("SELECT @@GLOBAL.{variable}")).await.unwrap().expect("a row");
    admin.query_drop(format!("SET GLOBAL {variable} = {value}")).await.unwrap();
    let outcome = tokio::spawn(test).await;
    let literal = if before.parse::<f64>().is_ok() { before } else { format!("'{before}'") };
    admin.query_drop(format!("SET GLOBAL {variable} = {literal}")).await.unwrap();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

fn cache_config(caches: &[(&str, &str)]) -> String {
    let mut extra = String::from("[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\n[consistency]\nmax_lag = \"5s\"\n");
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
const READS: [(&str, &str, &str); 4] = [
    // A TIMESTAMP shown: UTC's wall-clock time to a session in UTC.
    ("tz_shown", "SELECT id, ts FROM tz_events WHERE k = ? ORDER BY id", "SELECT id, ts FROM tz_events WHERE k = 1 ORDER BY id"),
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

/// Reads each of `reads` through freshet until its answer stops changing (the first reads are
/// relayed while the view fills), as text and as its cached query prepared with the key 1, and
/// returns the reads whose answer is not the server's for a session opened the same way.
async fn answers_unlike_the_servers(proxy: &Proxy, reads: &[(&str, &str, &str)]) -> Vec<String> {
    let mut ours = through(proxy).await;
    let mut theirs = direct().await;
    let mut wrong = Vec::new();
    let values = |rows: Vec<mysql_async::Row>| -> Vec<Vec<mysql_async::Value>> { rows.into_iter().map(|r| r.unwrap()).collect() };
    let text = |rows: &[Vec<mysql_async::Value>]| -> Vec<Vec<String>> {
        rows.iter().map(|r| r.iter().map(|v| v.as_sql(true)).collect()).collect()
    };
    for (_, cached, sql) in reads {
        let want = values(theirs.query(*sql).await.unwrap());
        let want_prepared = values(theirs.exec(*cached, (1,)).await.unwrap());
        for _ in 0..10 {
            let got = values(ours.query(*sql).await.unwrap());
            let got_prepared = values(ours.exec(*cached, (1,)).await.unwrap());
            if got != want {
                wrong.push(format!("{sql}\n  freshet: {:?}\n  server:  {:?}", text(&got), text(&want)));
                break;
            }
            if got_prepared != want_prepared {
                wrong.push(format!("{cached} (1)\n  freshet: {:?}\n  server:  {:?}", text(&got_prepared), text(&want_prepared)));
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
    let _globals = GLOBALS.read().await;
    events_table().await;
    let caches: Vec<(&'static str, &'static str)> = READS.iter().map(|(name, cache, _)| (*name, *cache)).collect();
    let config = cache_config(&caches);
    let outside = config.clone();
    with_global("time_zone", "'+02:00'", async move {
        let proxy = start_proxy(&outside).await;
        let wrong = answers_unlike_the_servers(&proxy, &READS).await;
        assert!(wrong.is_empty(), "answered otherwise than the server at +02:00:\n{}", wrong.join("\n"));
        assert!(hits(&proxy, "tz_ids") > 0, "a read of no TIMESTAMP is served in any zone");
        let timestamps = ["tz_after", "tz_days", "tz_shown"];
        assert_eq!(timestamps.iter().map(|c| hits(&proxy, c)).sum::<u64>(), 0, "a TIMESTAMP read outside UTC is relayed");
        assert!(relayed(&proxy, RelayReason::SessionState) > 0, "relayed for the session's time zone");
    })
    .await;
    let system: String = direct().await.query_first("SELECT @@system_time_zone").await.unwrap().expect("a row");
    for zone in ["+00:00", "SYSTEM"] {
        let config = config.clone();
        // The project's server runs in UTC; on a host in local time, `SYSTEM` is relayed.
        let served = zone != "SYSTEM" || system == "UTC";
        with_global("time_zone", &format!("'{zone}'"), async move {
            let proxy = start_proxy(&config).await;
            let wrong = answers_unlike_the_servers(&proxy, &READS).await;
            assert!(wrong.is_empty(), "answered otherwise than the server at {zone}:\n{}", wrong.join("\n"));
            if served {
                for cache in ["tz_after", "tz_days", "tz_shown"] {
                    assert!(hits(&proxy, cache) > 0, "{cache} served at {zone}");
                }
                assert_eq!(relayed(&proxy, RelayReason::Unencodable), 0, "answers the encoders refused at {zone}");
            }
        })
        .await;
    }
}

/// (cache name, cached query, a read of it) for `div_precision_increment`.
const QUOTIENTS: [(&str, &str, &str); 3] = [
    (
        "dp_third",
        "SELECT id, price / 3 AS third FROM dp_items WHERE k = ? ORDER BY id",
        "SELECT id, price / 3 AS third FROM dp_items WHERE k = 1 ORDER BY id",
    ),
    (
        "dp_mean",
        "SELECT k, AVG(price) AS mean FROM dp_items WHERE k = ? GROUP BY k",
        "SELECT k, AVG(price) AS mean FROM dp_items WHERE k = 1 GROUP BY k",
    ),
    // No quotient: served whatever the setting.
    ("dp_plain", "SELECT id, price FROM dp_items WHERE k = ? ORDER BY id", "SELECT id, price FROM dp_items WHERE k = 1 ORDER BY id"),
];

/// With the server's `div_precision_increment` at 6, `price / 3` has 8 decimals and AVG of a
/// DECIMAL(10,2) 8 as well: a view's quotients (4 more than the dividend) are not the server's,
/// so they are relayed for sessions with another setting than 4, and a read without a quotient
/// is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quotient_has_the_servers_div_precision_increment() {
    let _globals = GLOBALS.read().await;
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS dp_items").await.unwrap();
    admin.query_drop("CREATE TABLE dp_items (id INT PRIMARY KEY, k INT NOT NULL, price DECIMAL(10,2) NOT NULL)").await.unwrap();
    admin.query_drop("INSERT INTO dp_items VALUES (1, 1, 10.00), (2, 1, 2.50), (3, 2, 7.25)").await.unwrap();
    let caches: Vec<(&'static str, &'static str)> = QUOTIENTS.iter().map(|(name, cache, _)| (*name, *cache)).collect();
    let config = cache_config(&caches);
    with_global("div_precision_increment", "6", async move {
        let proxy = start_proxy(&config).await;
        let wrong = answers_unlike_the_servers(&proxy, &QUOTIENTS).await;
        assert!(wrong.is_empty(), "answered otherwise than the server:\n{}", wrong.join("\n"));
        // Rows the views compute from the binlog, not filled by the server.
        let mut admin = direct().await;
        admin.query_drop("UPDATE dp_items SET price = 20.00 WHERE id = 1").await.unwrap();
        admin.query_drop("INSERT INTO dp_items VALUES (4, 1, 1.00)").await.unwrap();
        caught_up(&mut through(&proxy).await).await;
        let wrong = answers_unlike_the_servers(&proxy, &QUOTIENTS).await;
        assert!(wrong.is_empty(), "answered otherwise than the server:\n{}", wrong.join("\n"));
        assert!(hits(&proxy, "dp_plain") > 0, "a read without a quotient is served");
        assert_eq!(hits(&proxy, "dp_third") + hits(&proxy, "dp_mean"), 0, "a quotient is relayed");
        // The setting goes back to the default while freshet runs: new sessions are served
        // from the views, which must hold what the binlog's changes computed, the same
        // values as their fills (the fill connections run at 4 whatever the server's is).
        direct().await.query_drop("SET GLOBAL div_precision_increment = 4").await.unwrap();
        let mut admin = direct().await;
        admin.query_drop("UPDATE dp_items SET price = 30.00 WHERE id = 1").await.unwrap();
        caught_up(&mut through(&proxy).await).await;
        let before = hits(&proxy, "dp_third");
        let wrong = answers_unlike_the_servers(&proxy, &QUOTIENTS).await;
        assert!(wrong.is_empty(), "answered otherwise than the server at 4:\n{}", wrong.join("\n"));
        assert!(hits(&proxy, "dp_third") > before, "served at the default");
    })
    .await;
}

/// The fill connections read under settings of their own, on every fill: a pooled connection
/// is reset when it goes back to the pool, which gives it the server's globals again. Some
/// change what a SELECT answers: a time zone other than UTC reads TIMESTAMPs in it (the
/// binlog's are UTC), PAD_CHAR_TO_FULL_LENGTH pads CHAR values (a filled row and its later
/// delete would not even cancel), EMPTY_STRING_IS_NULL reads a cached query's `''` as NULL, a
/// `sql_select_limit` cuts a fill short. A session that sets UTC, a harmless mode and no limit
/// of its own is answered from the views, which must hold what that session reads, for the
/// first key filled and the ones after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_read_under_settings_of_their_own() {
    let _globals = GLOBALS.read().await;
    let mut admin = direct().await;
    admin.query_drop("SET time_zone = '+00:00'").await.unwrap();
    admin.query_drop("DROP TABLE IF EXISTS sm_items").await.unwrap();
    admin
        .query_drop(
            "CREATE TABLE sm_items (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(5) NOT NULL, note VARCHAR(10) NOT NULL, ts TIMESTAMP NULL)",
        )
        .await
        .unwrap();
    admin
        .query_drop(
            "INSERT INTO sm_items VALUES (1, 1, 'ab', 'x', '2024-01-01 00:30:00'), (2, 1, 'cd', '', NULL), \
             (3, 2, 'ef', 'y', '2024-01-01 05:00:00'), (4, 3, 'gh', 'z', '2023-12-31 22:30:00')",
        )
        .await
        .unwrap();
    let reads: [(&str, &str, &str); 3] = [
        ("sm_chars", "SELECT id, c FROM sm_items WHERE k = ? ORDER BY id", "SELECT id, c FROM sm_items WHERE k = {} ORDER BY id"),
        (
            "sm_notes",
            "SELECT id FROM sm_items WHERE k = ? AND note <> '' ORDER BY id",
            "SELECT id FROM sm_items WHERE k = {} AND note <> '' ORDER BY id",
        ),
        ("sm_times", "SELECT id, ts FROM sm_items WHERE k = ? ORDER BY id", "SELECT id, ts FROM sm_items WHERE k = {} ORDER BY id"),
    ];
    let config = cache_config(&reads.iter().map(|(n, c, _)| (*n, *c)).collect::<Vec<_>>());
    for (variable, value) in [
        ("time_zone", "'+02:00'"),
        ("sql_mode", "'PAD_CHAR_TO_FULL_LENGTH'"),
        ("sql_mode", "'EMPTY_STRING_IS_NULL'"),
        ("sql_select_limit", "1"),
    ] {
        let config = config.clone();
        with_global(variable, value, async move {
            let proxy = start_proxy(&config).await;
            let mut ours = through(&proxy).await;
            let mut theirs = direct().await;
            for c in [&mut ours, &mut theirs] {
                c.query_drop("SET SESSION sql_mode = 'STRICT_TRANS_TABLES', time_zone = '+00:00', sql_select_limit = 18446744073709551615")
                    .await
                    .unwrap();
            }
            // Several keys of each read: fills after a pooled connection's first.
            for k in 1..=3 {
                for (name, _, read) in reads {
                    let sql = read.replace("{}", &k.to_string());
                    let want: Vec<mysql_async::Row> = theirs.query(&sql).await.unwrap();
                    let want: Vec<Vec<mysql_async::Value>> = want.into_iter().map(|r| r.unwrap()).collect();
                    let before = hits(&proxy, name);
                    for _ in 0..10 {
                        let got: Vec<mysql_async::Row> = ours.query(&sql).await.unwrap();
                        let got: Vec<Vec<mysql_async::Value>> = got.into_iter().map(|r| r.unwrap()).collect();
                        assert_eq!(got, want, "{sql} with the server's global {variable} = {value}");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    assert!(hits(&proxy, name) > before, "{sql} served with the server's global {variable} = {value}");
                }
            }
        })
        .await;
    }
}

/// A write logged as a statement (a session whose binlog_format is STATEMENT or MIXED, which
/// any client with the right may set, or a global changed while freshet runs) changes rows no
/// row event carries: freshet evicts its caches at the group's end, and the reads after it are
/// the server's. Here and not with the other cached reads: every freshet following the server
/// evicts everything at such a write, so it would disturb the tests running alongside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_logged_as_a_statement_is_not_missed() {
    let _globals = GLOBALS.read().await;
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS ct_stmt").await.unwrap();
    admin.query_drop("CREATE TABLE ct_stmt (id INT PRIMARY KEY, k INT NOT NULL, n INT NULL)").await.unwrap();
    admin.query_drop("INSERT INTO ct_stmt VALUES (1, 1, 10), (2, 1, 20)").await.unwrap();
    let reads = [("stmt", "SELECT id, n FROM ct_stmt WHERE k = ?", "SELECT id, n FROM ct_stmt WHERE k = 1")];
    let proxy = start_proxy(&cache_config(&reads.iter().map(|(n, c, _)| (*n, *c)).collect::<Vec<_>>())).await;
    assert!(answers_unlike_the_servers(&proxy, &reads).await.is_empty());
    for format in ["STATEMENT", "MIXED"] {
        admin.query_drop(format!("SET SESSION binlog_format = '{format}'")).await.unwrap();
        admin.query_drop("UPDATE ct_stmt SET n = n + 1 WHERE id = 1").await.unwrap();
        admin.query_drop("BEGIN").await.unwrap();
        admin.query_drop("INSERT INTO ct_stmt VALUES (3, 1, 30)").await.unwrap();
        admin.query_drop("DELETE FROM ct_stmt WHERE id = 2").await.unwrap();
        admin.query_drop("COMMIT").await.unwrap();
        admin.query_drop("DELETE FROM ct_stmt WHERE id = 3").await.unwrap();
        admin.query_drop("INSERT INTO ct_stmt VALUES (2, 1, 20)").await.unwrap();
    }
    caught_up(&mut through(&proxy).await).await;
    let before = hits(&proxy, "stmt");
    let wrong = answers_unlike_the_servers(&proxy, &reads).await;
    assert!(wrong.is_empty(), "after writes logged as statements:\n{}", wrong.join("\n"));
    assert!(hits(&proxy, "stmt") > before, "answered from the view again");
    let status: Vec<(String, String)> = through(&proxy).await.query("SHOW FRESHET STATUS").await.unwrap();
    let untrusted = status.iter().find(|(k, _)| k == "untrusted_transactions").map(|(_, v)| v.parse::<u64>().unwrap());
    assert!(untrusted.is_some_and(|n| n >= 6), "the status counts the groups it could not follow: {status:?}");
}

/// A two-phase XA transaction's rows are logged at XA PREPARE and take effect at XA COMMIT:
/// the views apply them at the commit, with nothing evicted. Rows changed while another is
/// prepared, and one rolled back after its prepare, are the server's too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xa_transaction_is_applied_at_its_commit() {
    let _globals = GLOBALS.read().await;
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS ct_xa").await.unwrap();
    admin.query_drop("CREATE TABLE ct_xa (id INT PRIMARY KEY, k INT NOT NULL, n INT NULL)").await.unwrap();
    admin.query_drop("INSERT INTO ct_xa VALUES (1, 1, 10), (2, 1, 20), (3, 2, 30)").await.unwrap();
    let reads = [
        ("xa_k", "SELECT id, n FROM ct_xa WHERE k = ?", "SELECT id, n FROM ct_xa WHERE k = 1"),
        (
            "xa_sum",
            "SELECT k, SUM(n) AS total, COUNT(*) AS c FROM ct_xa WHERE k = ? GROUP BY k",
            "SELECT k, SUM(n) AS total, COUNT(*) AS c FROM ct_xa WHERE k = 1 GROUP BY k",
        ),
    ];
    let proxy = start_proxy(&cache_config(&reads.iter().map(|(n, c, _)| (*n, *c)).collect::<Vec<_>>())).await;
    assert!(answers_unlike_the_servers(&proxy, &reads).await.is_empty());
    let mut other = direct().await;
    for sql in [
        "XA START 'ct1'",
        "UPDATE ct_xa SET n = n + 1 WHERE id = 1",
        "INSERT INTO ct_xa VALUES (4, 1, 40)",
        "DELETE FROM ct_xa WHERE id = 2",
        "XA END 'ct1'",
        "XA PREPARE 'ct1'",
    ] {
        admin.query_drop(sql).await.unwrap();
    }
    // Another row of the same group, committed while ct1 is prepared.
    other.query_drop("INSERT INTO ct_xa VALUES (5, 1, 50)").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    assert!(answers_unlike_the_servers(&proxy, &reads).await.is_empty(), "while prepared");
    admin.query_drop("XA COMMIT 'ct1'").await.unwrap();
    for sql in ["XA START 'ct2'", "UPDATE ct_xa SET n = 0 WHERE k = 1", "XA END 'ct2'", "XA PREPARE 'ct2'", "XA ROLLBACK 'ct2'"] {
        admin.query_drop(sql).await.unwrap();
    }
    caught_up(&mut through(&proxy).await).await;
    let before = hits(&proxy, "xa_k");
    let wrong = answers_unlike_the_servers(&proxy, &reads).await;
    assert!(wrong.is_empty(), "after the XA commit and rollback:\n{}", wrong.join("\n"));
    assert!(hits(&proxy, "xa_k") > before, "answered from the view");
}

/// `SET GLOBAL binlog_checksum` rotates the binlog, and the new file's events carry a checksum
/// of the new kind (or none), which its format description announces: the stream must read
/// both files, and the views stay the server's across the change and back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binlog_checksum_changed_while_running_is_read() {
    let _globals = GLOBALS.read().await;
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS ct_checksum").await.unwrap();
    admin.query_drop("CREATE TABLE ct_checksum (id INT PRIMARY KEY, k INT NOT NULL, n INT NULL)").await.unwrap();
    admin.query_drop("INSERT INTO ct_checksum VALUES (1, 1, 10), (2, 1, 20)").await.unwrap();
    let reads = [("checksum", "SELECT id, n FROM ct_checksum WHERE k = ?", "SELECT id, n FROM ct_checksum WHERE k = 1")];
    let proxy = start_proxy(&cache_config(&reads.iter().map(|(n, c, _)| (*n, *c)).collect::<Vec<_>>())).await;
    assert!(answers_unlike_the_servers(&proxy, &reads).await.is_empty());
    let writes = async move {
        let mut admin = direct().await;
        admin.query_drop("UPDATE ct_checksum SET n = n + 1 WHERE id = 1").await.unwrap();
        admin.query_drop("INSERT INTO ct_checksum VALUES (3, 1, 30)").await.unwrap();
        admin.query_drop("DELETE FROM ct_checksum WHERE id = 2").await.unwrap();
    };
    with_global("binlog_checksum", "'NONE'", writes).await;
    // And back: another rotation, to a file with checksums again.
    admin.query_drop("UPDATE ct_checksum SET n = n + 1 WHERE id = 3").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    let before = hits(&proxy, "checksum");
    let wrong = answers_unlike_the_servers(&proxy, &reads).await;
    assert!(wrong.is_empty(), "after the binlog's checksum changed:\n{}", wrong.join("\n"));
    assert!(hits(&proxy, "checksum") > before, "answered from the view again");
}

/// A binlog setting the start-up check requires, changed while freshet runs: `SET GLOBAL
/// binlog_format = 'MIXED'` makes every write of a later session a statement in the binlog,
/// each of which empties every cache (correct, but no longer a cache), and the start-up
/// check that would have named it ran long before. /health fails with the fix and SHOW
/// FRESHET STATUS says it, until the setting is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binlog_setting_changed_while_running_is_reported() {
    let _alone = GLOBALS.write().await;
    let reads = [("settings", "SELECT id, n FROM ct_settings WHERE k = ?")];
    let mut admin = direct().await;
    admin.query_drop("CREATE TABLE IF NOT EXISTS ct_settings (id INT PRIMARY KEY, k INT NOT NULL, n INT NULL)").await.unwrap();
    let proxy = start_proxy(&cache_config(&reads)).await;
    let (admin_http, mysql) = (proxy.admin, proxy.mysql);
    let settings = async move |want: &str| {
        let wait = async {
            loop {
                let mut conn = mysql_async::Conn::new(opts(&mysql.to_string())).await.unwrap();
                let status: Vec<(String, String)> = conn.query("SHOW FRESHET STATUS").await.unwrap();
                let said = status.into_iter().find(|(k, _)| k == "upstream_settings").map(|(_, v)| v);
                if said.as_deref().is_some_and(|v| v.contains(want)) {
                    return freshet_testkit::http::get(admin_http, "/health").await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), wait).await.unwrap_or_else(|_| panic!("the status never said {want}"))
    };
    assert_eq!(settings("ok").await.0, 200);
    let mixed = async move {
        let (code, body) = settings("binlog_format is MIXED").await;
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("SET GLOBAL binlog_format = 'ROW'"), "the fix is named: {body}");
    };
    with_global("binlog_format", "'MIXED'", mixed).await;
    assert_eq!(settings("ok").await.0, 200, "healthy again once the setting is back");
}

/// A server restarted without binary logging (`--skip-log-bin`): its position comes back
/// empty, which the poll took for a broken connection and dropped, so the settings read that
/// names the fix never ran. SHOW FRESHET STATUS said `ok` for a while, then `unknown: not
/// read lately` for as long as it lasted (an audit). It names the problem now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_without_binary_logging_is_named() {
    let mut server = freshet_testkit::mariadb::PrivateServer::start(
        &std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-binlog-mariadb"),
        "",
    );
    let mut admin = mysql_async::Conn::from_url(&server.url).await.unwrap();
    admin.query_drop("CREATE TABLE IF NOT EXISTS nb_rows (id INT PRIMARY KEY, v INT NOT NULL)").await.unwrap();
    drop(admin);
    let proxy = start_proxy_with_url(&server.url, &cache_config(&[("nb", "SELECT id, v FROM nb_rows WHERE id = ?")])).await;
    let mysql = proxy.mysql;
    let said = async move |want: &'static str| {
        let wait = async {
            loop {
                if let Ok(mut conn) = mysql_async::Conn::new(opts(&mysql.to_string())).await
                    && let Ok(status) = conn.query::<(String, String), _>("SHOW FRESHET STATUS").await
                {
                    let said = status.into_iter().find(|(k, _)| k == "upstream_settings").map(|(_, v)| v);
                    if said.as_deref().is_some_and(|v| v.contains(want)) {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), wait).await.unwrap_or_else(|_| panic!("the status never said {want}"))
    };
    said("ok").await;
    server.stop_by("TERM");
    server.start_again_with("--skip-log-bin");
    said("binary logging is off").await;
}

async fn rows(conn: &mut mysql_async::Conn, sql: &str) -> Vec<Vec<mysql_async::Value>> {
    let rows: Vec<mysql_async::Row> = conn.query(sql).await.unwrap();
    rows.into_iter().map(|r| r.unwrap()).collect()
}

/// A server whose defaults are not what freshet's own connections assume: a character set
/// forced on every connection (`--skip-character-set-client-handshake` with a utf8mb3 server
/// default: the handshake's utf8mb4 is ignored), and a host time zone that calls itself `UTC`
/// and is not (the POSIX zone `UTC+5`, five hours behind). Through freshet, a session gets
/// what the server gives it directly (an audit: emoji read back as `?` and served, and every
/// TIMESTAMP five hours off). A MariaDB of the test's own, started with those settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_character_set_and_a_zone_named_utc_are_the_servers() {
    let server = freshet_testkit::mariadb::PrivateServer::start_with_env(
        &std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("server-defaults-mariadb"),
        "--skip-character-set-client-handshake --character-set-server=utf8mb3 --collation-server=utf8mb3_general_ci",
        &[("TZ", "UTC+5")],
    );
    let base = server.url.rsplit_once('/').expect("a URL with a database").0.to_string();
    let mut admin = mysql_async::Conn::from_url(format!("{base}/freshet_test")).await.unwrap();
    let zone: (String, String, i64) =
        admin.query_first("SELECT @@time_zone, @@system_time_zone, TIMESTAMPDIFF(HOUR, UTC_TIMESTAMP(), NOW())").await.unwrap().unwrap();
    assert_eq!(zone, ("SYSTEM".to_string(), "UTC".to_string(), -5), "the server's zone calls itself UTC and is five hours behind");
    admin.query_drop("SET NAMES utf8mb4").await.unwrap();
    admin.query_drop("DROP TABLE IF EXISTS sd_rows").await.unwrap();
    admin
        .query_drop("CREATE TABLE sd_rows (id INT PRIMARY KEY, note VARCHAR(40), ts TIMESTAMP NULL) DEFAULT CHARSET=utf8mb4")
        .await
        .unwrap();
    admin.query_drop("INSERT INTO sd_rows VALUES (1, 'Ωmega 😀 中文', '2026-06-01 12:00:00')").await.unwrap();
    let config = "[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\n\
        [[cache]]\nname = \"notes\"\nquery = \"SELECT id, note FROM sd_rows WHERE id = ?\"\n\
        [[cache]]\nname = \"stamps\"\nquery = \"SELECT id, ts FROM sd_rows WHERE id = ?\"\n";
    let proxy = start_proxy_with_url(&format!("{base}/freshet_test"), config).await;
    let through_opts = mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&format!("{base}/freshet_test")).unwrap())
        .ip_or_hostname(proxy.mysql.ip().to_string())
        .tcp_port(proxy.mysql.port())
        .prefer_socket(false);
    let mut ours = mysql_async::Conn::new(through_opts).await.unwrap();
    let mut theirs = mysql_async::Conn::from_url(format!("{base}/freshet_test")).await.unwrap();
    for conn in [&mut ours, &mut theirs] {
        conn.query_drop("SET NAMES utf8mb4").await.unwrap();
    }
    let served = |name: &str| proxy.engine.get().unwrap().by_name(name).unwrap().stats().hits;
    // The text, as the server gives it, from the view.
    let sql = "SELECT id, note FROM sd_rows WHERE id = 1";
    let want = rows(&mut theirs, sql).await;
    for _ in 0..100 {
        assert_eq!(rows(&mut ours, sql).await, want, "{sql}");
        if served("notes") > 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served("notes") > 1, "{sql} is answered from its view");
    // A row written after the fill comes through the binlog.
    admin.query_drop("INSERT INTO sd_rows VALUES (2, 'ТЕКСТ 😀', '2026-01-01 00:00:00')").await.unwrap();
    caught_up_with(&mut ours, &mut theirs).await;
    let sql = "SELECT id, note FROM sd_rows WHERE id = 2";
    let want = rows(&mut theirs, sql).await;
    for read in 0..3 {
        assert_eq!(rows(&mut ours, sql).await, want, "{sql} (read {read})");
    }
    // TIMESTAMPs in the session's zone, which is the host's: whatever freshet decides, the
    // answer is the server's.
    for id in [1, 2] {
        let sql = format!("SELECT id, ts FROM sd_rows WHERE id = {id}");
        let want = rows(&mut theirs, &sql).await;
        for read in 0..3 {
            assert_eq!(rows(&mut ours, &sql).await, want, "{sql} in the host's zone (read {read})");
        }
    }
    // In UTC, said by offset, the view answers them.
    for conn in [&mut ours, &mut theirs] {
        conn.query_drop("SET time_zone = '+00:00'").await.unwrap();
    }
    let sql = "SELECT id, ts FROM sd_rows WHERE id = 1";
    let want = rows(&mut theirs, sql).await;
    let before = served("stamps");
    for _ in 0..3 {
        assert_eq!(rows(&mut ours, sql).await, want, "{sql} in UTC");
    }
    assert!(served("stamps") > before, "{sql} in UTC is answered from its view");
}
