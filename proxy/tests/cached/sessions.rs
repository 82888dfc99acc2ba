//! Session state and relays: transactions, settings the probe reads or stored code changes,
//! LOCK TABLES, and what a served answer carries and leaves the session (status flags, column
//! definitions, negotiated capabilities, diagnostics).

use super::*;

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
