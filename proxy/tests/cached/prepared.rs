//! Prepared statements and IN lists: executes answered with the server's values and column
//! definitions, their parameters and types as the server reads them, and statements read as the
//! session was when the server prepared them.

use super::*;

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

/// A read executed through the id of the statement prepared last (0xffffffff, as MariaDB
/// Connector/C's direct execute and Connector/J's pipelined prepare send it) and answered from
/// the view is owed to the server. It was sent again through that id, which by then named the
/// statement the client prepared next: an UPDATE it never executed ran with the read's
/// parameters (found by session 54's prepared-statements audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owed_read_through_the_last_statements_id_is_sent_again_as_its_own_statements() {
    let mut admin =
        fresh_table("ct_lastid", "id INT PRIMARY KEY, k BIGINT NOT NULL, title VARCHAR(20)", "(1, 1, 'one'), (2, 2, 'two')").await;
    let reads =
        [("lastid", "SELECT id, title FROM ct_lastid WHERE k = ? ORDER BY id", "SELECT id, title FROM ct_lastid WHERE k = 1 ORDER BY id")];
    let (proxy, mut client, _check) = warmed(&reads).await;
    let (name, cached, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let typed = |k: u64| [&[0u8, 1, 8, 0][..], &k.to_le_bytes()].concat();
    for then in ["SELECT 1", "DO 1", "SHOW WARNINGS", "SET @a = 1"] {
        let (id, _) = prepare(&mut client, cached).await;
        client.send(&execute(id, &typed(1))).await;
        client.read_results().await;
        let served = hits(&proxy, name);
        client.send(&execute(u32::MAX, &typed(1))).await;
        client.read_results().await;
        assert_eq!(hits(&proxy, name), served + 1, "the execute through the last id was answered from the view");
        prepare(&mut client, "UPDATE ct_lastid SET title = CONCAT(title, '!') WHERE id = ?").await;
        client.query(then).await;
        let title: String = admin.query_first("SELECT title FROM ct_lastid WHERE id = 1").await.unwrap().unwrap();
        assert_eq!(title, "one", "after {then}: the UPDATE was prepared, never executed");
    }
}

/// Long data for the statement of a read answered from the view, before anything else reached
/// the server: the owed read was sent again after the long data, and took it, so the client's
/// own execute had none (1210), and `FOUND_ROWS()` counted the read's rows with the long data's
/// key (found by session 54's prepared-statements audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_data_after_a_read_answered_from_the_view_is_the_next_executes() {
    let _admin = fresh_table(
        "ct_owedlong",
        "id INT PRIMARY KEY, k BIGINT NOT NULL, title VARCHAR(20)",
        "(1, 1, 'one'), (2, 1, 'two'), (3, 2, 'three')",
    )
    .await;
    let reads = [(
        "owedlong",
        "SELECT id, title FROM ct_owedlong WHERE k = ? ORDER BY id",
        "SELECT id, title FROM ct_owedlong WHERE k = 1 ORDER BY id",
    )];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, cached, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let text = |s: &[u8]| [&[0u8, 1, 0xfd, 0, s.len() as u8][..], s].concat();
    for between in ["DO 1", "SELECT FOUND_ROWS()", "SHOW WARNINGS"] {
        let mut answers = [Vec::new(), Vec::new()];
        for (through, (c, answers)) in [&mut client, &mut check].into_iter().zip(&mut answers).enumerate() {
            let (id, _) = prepare(c, cached).await;
            c.send(&execute(id, &text(b"1"))).await;
            answers.push(c.read_results().await);
            let served = hits(&proxy, name);
            c.send(&execute(id, &text(b"1"))).await;
            answers.push(c.read_results().await);
            if through == 0 {
                assert_eq!(hits(&proxy, name), served + 1, "the second execute was answered from the view");
            }
            c.send(&[&[0x18][..], &id.to_le_bytes(), &0u16.to_le_bytes(), b"2"].concat()).await;
            answers.push(c.query(between).await);
            // Its value is the long data's.
            c.send(&execute(id, &[0, 1, 0xfd, 0])).await;
            answers.push(c.read_results().await);
            answers.push(c.query("SELECT FOUND_ROWS()").await);
        }
        assert_eq!(answers[0], answers[1], "with {between} between: through freshet, and directly");
    }
}

/// The server reads long data by the type of the last execute that gave its parameter a
/// value (as text after a NULL). An execute answered from the view with another type than
/// the server last saw left the server reading the long data otherwise than a direct session
/// would: a row where the server answers none (found by session 54's prepared-statements audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_data_is_read_by_the_type_of_the_clients_last_execute() {
    let _admin = fresh_table("ct_longtype", "id INT PRIMARY KEY, title VARCHAR(20)", "(0, 'zero'), (1, 'one'), (2, 'two')").await;
    let reads = [("longtype", "SELECT id, title FROM ct_longtype WHERE id = ?", "SELECT id, title FROM ct_longtype WHERE id = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, cached, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let text = |s: &[u8]| [&[0u8, 1, 0xfd, 0, s.len() as u8][..], s].concat();
    let int = |k: u64| [&[0u8, 1, 8, 0][..], &k.to_le_bytes()].concat();
    let double = |v: f64| [&[0u8, 1, 5, 0][..], &v.to_le_bytes()].concat();
    let null_int = [1u8, 1, 8, 0];
    // Each: the executes before the long data, as (payload, whether freshet answers it).
    let cases: [(&str, Vec<Vec<u8>>); 4] = [
        ("text, then a number", vec![text(b"1"), int(1)]),
        ("a number, then a double", vec![int(1), int(2), double(1.0)]),
        ("a number, then NULL", vec![int(1), int(2), null_int.to_vec()]),
        ("a number, then text", vec![int(1), int(2), text(b"2")]),
    ];
    // Every kind of parameter read once through freshet first, so that each case's executes
    // can be answered from the view (a kind's first read is relayed to learn its columns).
    let (primer, _) = prepare(&mut client, cached).await;
    for payload in [text(b"1"), int(1), double(1.0), null_int.to_vec()] {
        for _ in 0..2 {
            client.send(&execute(primer, &payload)).await;
            client.read_results().await;
        }
    }
    for (case, executes) in cases {
        let mut answers = [Vec::new(), Vec::new()];
        for (through, (c, answers)) in [&mut client, &mut check].into_iter().zip(&mut answers).enumerate() {
            let (id, _) = prepare(c, cached).await;
            let served = hits(&proxy, name);
            for payload in &executes {
                c.send(&execute(id, payload)).await;
                answers.push(c.read_results().await);
            }
            if through == 0 {
                assert!(hits(&proxy, name) > served, "{case}: an execute was answered from the view");
            }
            c.send(&[&[0x18][..], &id.to_le_bytes(), &0u16.to_le_bytes(), b"1"].concat()).await;
            c.send(&execute(id, &[0, 1, 0xfd, 0])).await;
            answers.push(c.read_results().await);
        }
        assert_eq!(answers[0], answers[1], "{case}: through freshet, and directly");
    }
}

/// A statement prepared while a cache answered it, after DROP CACHE and CREATE CACHE of the
/// same query: its executes were relayed for good, and counted as `unavailable` while the new
/// cache served every other read (found by session 54's prepared-statements audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_routed_to_a_dropped_cache_takes_its_new_cache() {
    let _admin =
        fresh_table("ct_recreated", "id INT PRIMARY KEY, k BIGINT NOT NULL, title VARCHAR(20)", "(1, 1, 'one'), (2, 2, 'two')").await;
    let reads = [("recreated", "SELECT id, title FROM ct_recreated WHERE k = ?", "SELECT id, title FROM ct_recreated WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, cached, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let typed = |k: u64| [&[0u8, 1, 8, 0][..], &k.to_le_bytes()].concat();
    let (id, _) = prepare(&mut client, cached).await;
    let (direct_id, _) = prepare(&mut check, cached).await;
    for _ in 0..3 {
        client.send(&execute(id, &typed(1))).await;
        client.read_results().await;
    }
    client.query(&format!("DROP CACHE {name}")).await;
    client.query(&format!("CREATE CACHE {name} FROM {cached}")).await;
    hit(&mut client, &proxy, name, sql).await;
    let unavailable = relayed(&proxy, RelayReason::Unavailable);
    let served = hits(&proxy, name);
    check.send(&execute(direct_id, &typed(1))).await;
    let want = check.read_results().await;
    for _ in 0..5 {
        client.send(&execute(id, &typed(1))).await;
        assert_eq!(client.read_results().await, want, "the server's answer");
    }
    assert_eq!(relayed(&proxy, RelayReason::Unavailable), unavailable, "no execute relayed as unavailable");
    assert!(hits(&proxy, name) > served, "the new cache answers the statement");
}
