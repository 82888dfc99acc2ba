//! DDL and schema changes: views rebuilt, refused or taken anew as a table is altered, dropped,
//! renamed, replaced, partitioned or made system-versioned, or its database replaced.

use super::*;

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
