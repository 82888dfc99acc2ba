//! Freshness through the binlog: writes reach the cached answers, one committed state at a time,
//! and a cache made at runtime sees every write after it; rows changed with no row event of their
//! own (foreign key actions, a rollback to a savepoint), partial row images, generated columns,
//! and columns whose binlog form is not their value.

use super::*;

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

/// A transaction whose rows take more than its bound in memory (a quarter of `[memory]
/// limit`, at least 16 MiB) is not held until its commit: it empties every cache instead, and
/// they fill again. One that wrote 20 MB texts of a cached table, in a column no cache reads,
/// was held whole: 542 MB resident for a 32 MiB limit (found by session 54's operator-events
/// audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_larger_than_its_bound_empties_the_caches_instead_of_being_held() {
    let mut admin =
        fresh_table("ct_backfill", "id INT PRIMARY KEY, title VARCHAR(20), body LONGTEXT", "(1, 'one', ''), (2, 'two', '')").await;
    let reads = [("backfill", "SELECT id, title FROM ct_backfill WHERE id = ?", "SELECT id, title FROM ct_backfill WHERE id = 1")];
    let proxy = start_proxy(&(lenient_config(&[(reads[0].0, reads[0].1)]) + "[memory]\nlimit = \"16MiB\"\n")).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let untrusted = engine(&proxy).counters.untrusted.get();
    admin.query_drop("BEGIN").await.unwrap();
    admin.query_drop("UPDATE ct_backfill SET body = REPEAT('x', 12 << 20), title = 'uno' WHERE id = 1").await.unwrap();
    admin.query_drop("UPDATE ct_backfill SET body = REPEAT('y', 12 << 20) WHERE id = 2").await.unwrap();
    admin.query_drop("COMMIT").await.unwrap();
    assert!(eventually(|| engine(&proxy).counters.untrusted.get() > untrusted).await, "24 MB of rows in one transaction, over 16 MiB");
    let want = check.query(sql).await;
    assert_eq!(hit(&mut client, &proxy, name, sql).await, want, "filled again, with the transaction's rows");
}
