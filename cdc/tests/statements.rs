//! Rows changed by a statement the binlog logged as a statement, not as row events: a session
//! whose `binlog_format` is STATEMENT or MIXED (a client with the right to set it, or a global
//! changed while freshet runs; the start-up check reads only the global of the time). The
//! stream cannot know which rows such a statement changed, so its group is reported
//! `Untrusted` (the consumer evicts every cache), at the group's end and not before: a cache
//! filled between an early report and the commit would read the rows before the statement and
//! keep them. DDL logged the same way is DDL as before, and the stream goes on.

mod common;

use common::*;
use freshet_cdc::{CdcError, StreamEvent};
use freshet_dataflow::Value;
use mysql_async::prelude::Queryable;

/// One test at a time: each stream reads the whole binlog, and one test's statements and DDL
/// are another database's to the others' streams.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_changed_by_a_logged_statement_are_untrusted_at_their_commit() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (db, mut c) = fresh_db("stmt").await;
    c.query_drop("CREATE TABLE cdc_s (id INT PRIMARY KEY, v INT) ENGINE=InnoDB").await.unwrap();
    c.query_drop("CREATE TABLE cdc_m (id INT PRIMARY KEY, v INT) ENGINE=MyISAM").await.unwrap();
    let mut s = stream(&db).await;
    let writes = [
        ("STATEMENT", "INSERT INTO cdc_s VALUES (1, 1)"),
        ("STATEMENT", "BEGIN; UPDATE cdc_s SET v = 2 WHERE id = 1; INSERT INTO cdc_s VALUES (2, 2); COMMIT"),
        ("STATEMENT", "/* an application's comment */ INSERT INTO cdc_m VALUES (1, 1)"),
        ("STATEMENT", "/*!50000 DELETE FROM cdc_m */"),
        ("STATEMENT", "/*M!100000 INSERT INTO cdc_m VALUES (2, 2) */"),
        ("MIXED", "UPDATE cdc_s SET v = v + 1"),
    ];
    for (format, sql) in writes {
        c.query_drop(format!("SET SESSION binlog_format = '{format}'")).await.unwrap();
        c.query_drop(sql).await.unwrap();
        let gtid: String = c.query_first("SELECT @@last_gtid").await.unwrap().unwrap();
        within(20, sql, async {
            loop {
                match s.next().await {
                    Ok(StreamEvent::Batch(b)) => {
                        assert!(b.changes.is_empty(), "{format} `{sql}`: delivered as rows {:?}", b.changes)
                    }
                    Ok(other) => panic!("{format} `{sql}`: {other:?}"),
                    Err(CdcError::Untrusted(why)) => {
                        let at = s.last_gtid().map(|g| g.to_string());
                        assert_eq!(at.as_deref(), Some(gtid.as_str()), "{format} `{sql}`: reported before its group ended ({why})");
                        break;
                    }
                    Err(e) => panic!("{format} `{sql}`: {e}"),
                }
            }
        })
        .await;
    }
    // DDL logged as a statement is DDL, as ever; rows logged as rows are delivered.
    c.query_drop("CREATE TABLE cdc_t (id INT PRIMARY KEY)").await.unwrap();
    c.query_drop("SET SESSION binlog_format = 'ROW'").await.unwrap();
    c.query_drop("INSERT INTO cdc_s VALUES (9, 9)").await.unwrap();
    let (batches, ddl) = within(20, "ddl and a row", batches(&mut s, 1)).await;
    assert_eq!(ddl.iter().map(|d| d.table.as_str()).collect::<Vec<_>>(), ["cdc_t"]);
    assert_eq!(batches[0].changes.len(), 1);
    assert_eq!(batches[0].changes[0].row[0], Value::Int(9));
    drop_db(&db).await;
}

/// The stream's events, described (`batch of <table>` of a batch's first change, `<kind>
/// <table>` of a schema change), until `done` holds of them; empty batches and other tests'
/// untrusted groups (logged before this test took its turn) are skipped.
async fn described(s: &mut freshet_cdc::BinlogStream, what: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    within(20, what, async {
        while !done(&seen) {
            match s.next().await {
                Ok(StreamEvent::Batch(b)) if b.changes.is_empty() => {}
                Ok(StreamEvent::Batch(b)) => seen.push(format!("batch of {}", b.changes[0].table)),
                Ok(StreamEvent::Schema(ch)) => seen.push(format!("{:?} {}", ch.kind, ch.table)),
                Err(CdcError::Untrusted(_)) => {}
                other => panic!("{other:?}"),
            }
        }
    })
    .await;
    seen
}

/// A foreign key's action changes the child's rows with no row event: the stream reports each
/// child (and the children's children) after the parent's batch, as `Cascaded`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_a_foreign_key_action_changed_follow_the_parents_batch() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (db, mut c) = fresh_db("fk").await;
    c.query_drop("CREATE TABLE p (id INT PRIMARY KEY) ENGINE=InnoDB").await.unwrap();
    c.query_drop("CREATE TABLE ch (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES p (id) ON DELETE CASCADE) ENGINE=InnoDB")
        .await
        .unwrap();
    c.query_drop("CREATE TABLE g (id INT PRIMARY KEY, c INT, FOREIGN KEY (c) REFERENCES ch (id) ON DELETE SET NULL) ENGINE=InnoDB")
        .await
        .unwrap();
    c.query_drop("INSERT INTO p VALUES (1), (2)").await.unwrap();
    c.query_drop("INSERT INTO ch VALUES (10, 1)").await.unwrap();
    c.query_drop("INSERT INTO g VALUES (100, 10)").await.unwrap();
    let mut s = stream(&db).await;
    c.query_drop("INSERT INTO p VALUES (3)").await.unwrap();
    c.query_drop("DELETE FROM p WHERE id = 1").await.unwrap();
    let seen = described(&mut s, "the delete and its cascade", |seen| seen.len() >= 4).await;
    assert_eq!(seen, ["batch of p", "batch of p", "Cascaded ch", "Cascaded g"], "the insert cascades nothing");
    drop_db(&db).await;
}

/// The foreign keys are read again after DDL that may change one reaching the tracked
/// database: on its tables, or on a table of another database that is a parent of a known
/// foreign key (whose rename the key follows). DDL elsewhere on the server read them all
/// again too, from information_schema (~0.3 s with 3,500 tables on this machine), so another
/// application's migrations made the stream fall behind. A cascade from a parent in another
/// database, renamed, still reaches the child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_keys_are_read_again_only_after_ddl_that_may_reach_the_database() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (db, mut c) = fresh_db("fk_scope").await;
    let (other, mut o) = fresh_db("fk_other").await;
    let (elsewhere, mut e) = fresh_db("fk_elsewhere").await;
    o.query_drop("CREATE TABLE op (id INT PRIMARY KEY) ENGINE=InnoDB").await.unwrap();
    o.query_drop("INSERT INTO op VALUES (1), (2)").await.unwrap();
    c.query_drop(format!("CREATE TABLE ch (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES `{other}`.op (id) ON DELETE CASCADE)"))
        .await
        .unwrap();
    c.query_drop("INSERT INTO ch VALUES (10, 1), (20, 2)").await.unwrap();
    let mut s = stream(&db).await;
    let reads = s.foreign_key_reads();
    for i in 0..10 {
        e.query_drop(format!("CREATE TABLE t{i} (id INT PRIMARY KEY)")).await.unwrap();
        e.query_drop(format!("ALTER TABLE t{i} ADD COLUMN v INT")).await.unwrap();
    }
    e.query_drop("DROP TABLE t0").await.unwrap();
    o.query_drop("CREATE TABLE unrelated (id INT PRIMARY KEY)").await.unwrap();
    c.query_drop("INSERT INTO ch VALUES (30, NULL)").await.unwrap();
    within(20, "ddl elsewhere, then a row", async {
        loop {
            match s.next().await {
                Ok(StreamEvent::Batch(b)) if !b.changes.is_empty() => break,
                Ok(_) | Err(CdcError::Untrusted(_)) => {}
                other => panic!("{other:?}"),
            }
        }
    })
    .await;
    assert_eq!(s.foreign_key_reads(), reads, "DDL of tables no foreign key of this database reaches");
    o.query_drop("RENAME TABLE op TO op2").await.unwrap();
    c.query_drop("CREATE TABLE mine (id INT PRIMARY KEY)").await.unwrap();
    o.query_drop("DELETE FROM op2 WHERE id = 1").await.unwrap();
    let mut cascaded = Vec::new();
    within(20, "the renamed parent's delete", async {
        while cascaded.is_empty() {
            match s.next().await {
                Ok(StreamEvent::Schema(ch)) if ch.kind == freshet_cdc::DdlKind::Cascaded => cascaded.push(ch.table.clone()),
                Ok(_) => {}
                Err(CdcError::Untrusted(_)) => {}
                other => panic!("{other:?}"),
            }
        }
    })
    .await;
    assert_eq!(cascaded, ["ch"], "a delete of the renamed parent cascades into the child");
    assert_eq!(s.foreign_key_reads(), reads + 2, "read again after the parent's rename and this database's DDL");
    drop_db(&db).await;
    drop_db(&other).await;
    drop_db(&elsewhere).await;
}

/// Writes logged as statements in another database (pt-table-checksum's `REPLACE INTO
/// percona.checksums ... SELECT ... FROM` the tracked database, chunk after chunk; another
/// application whose sessions log statements) change no row of the tracked database, unless
/// something of the server's carries them there: a trigger, a view, a stored function, a
/// foreign key's action, a MERGE table, or a statement that names the database's
/// tables as its targets. Each such write used to be untrusted (every cache evicted, every
/// table of a replica copied again). The stream reads what it needs of the other database
/// once, and trusts it for statements logged after that read, so the first write after it
/// (and after DDL) may still count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_logged_writes_of_another_database_are_untrusted_only_if_they_may_reach_it() {
    let _alone = ONE_AT_A_TIME.lock().await;
    // A writing function left by an earlier run that failed would spare nothing.
    let mut admin = mysql_async::Conn::new(opts_for(None)).await.unwrap();
    admin.query_drop("SET foreign_key_checks = 0").await.unwrap();
    let left: Vec<String> =
        admin.query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'cdc\\_stmt\\_theirs\\_%'").await.unwrap();
    for db in left {
        admin.query_drop(format!("DROP DATABASE `{db}`")).await.unwrap();
    }
    let (db, mut c) = fresh_db("stmt_ours").await;
    let (other, mut o) = fresh_db("stmt_theirs").await;
    c.query_drop("CREATE TABLE cdc_s (id INT PRIMARY KEY, v INT)").await.unwrap();
    c.query_drop("CREATE TABLE m1 (id INT PRIMARY KEY) ENGINE=MyISAM").await.unwrap();
    for ddl in [
        "CREATE TABLE checksums (id INT PRIMARY KEY AUTO_INCREMENT, n BIGINT)".to_string(),
        "CREATE TABLE parent (id INT PRIMARY KEY) ENGINE=InnoDB".into(),
        "INSERT INTO parent VALUES (1), (2)".into(),
        "CREATE TABLE trig (id INT PRIMARY KEY)".into(),
        format!("CREATE TRIGGER trig_ai AFTER INSERT ON trig FOR EACH ROW INSERT INTO `{db}`.cdc_s VALUES (NEW.id + 1000, 0)"),
        format!("CREATE VIEW v AS SELECT id, v FROM `{db}`.cdc_s"),
        format!("CREATE TABLE merged (id INT PRIMARY KEY) ENGINE=MERGE UNION=(`{db}`.m1) INSERT_METHOD=LAST"),
        // A function that writes nothing spares as before.
        "CREATE FUNCTION g(x INT) RETURNS INT DETERMINISTIC NO SQL RETURN REPLACE(x + 1, '2', '3')".into(),
    ] {
        o.query_drop(ddl).await.unwrap();
    }
    c.query_drop(format!(
        "CREATE TABLE cdc_ch (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES `{other}`.parent (id) ON DELETE CASCADE)"
    ))
    .await
    .unwrap();
    c.query_drop("INSERT INTO cdc_ch VALUES (10, 1)").await.unwrap();
    let mut s = stream(&db).await;
    let lag = s.lag();
    for conn in [&mut c, &mut o] {
        conn.query_drop("SET SESSION binlog_format = 'STATEMENT'").await.unwrap();
    }
    let mut marker = 100;
    // Each write, then a row of the tracked database logged as a row: the groups the stream
    // reported untrusted up to that row, of this test's statements (other tests' streams
    // read the same binlog).
    let mut untrusted = async |conn: &mut mysql_async::Conn, sql: &str| -> (usize, String) {
        conn.query_drop(format!("/* scope-test */ {sql}")).await.unwrap_or_else(|e| panic!("`{sql}`: {e}"));
        marker += 1;
        let mut row = mysql_async::Conn::new(opts_for(Some(&db))).await.unwrap();
        row.query_drop("SET SESSION binlog_format = 'ROW'").await.unwrap();
        row.query_drop(format!("INSERT INTO cdc_s VALUES ({marker}, 0)")).await.unwrap();
        let mut n = 0;
        within(20, sql, async {
            loop {
                match s.next().await {
                    Ok(StreamEvent::Batch(b)) if b.changes.iter().any(|ch| ch.row[0] == Value::Int(marker)) => break,
                    Ok(_) => {}
                    Err(CdcError::Untrusted(why)) if why.contains("scope-test") => n += 1,
                    Err(CdcError::Untrusted(_)) => {}
                    Err(e) => panic!("`{sql}`: {e}"),
                }
            }
        })
        .await;
        (n, sql.chars().take(90).collect())
    };
    // The first write of the other database may count: what the stream knows of it is read then.
    assert!(untrusted(&mut o, "INSERT INTO checksums (n) VALUES (0)").await.0 <= 1);
    let long = format!("INSERT INTO checksums (n) VALUES ({})", vec!["1"; 400].join(" + "));
    let chunk =
        format!("REPLACE INTO `{other}`.checksums (id, n) SELECT 100, COUNT(*) FROM cdc_s WHERE id BETWEEN 1 AND 1000 /*checksum chunk*/");
    let mut spared = Vec::new();
    for sql in [
        "INSERT INTO checksums (n) VALUES (1)",
        "UPDATE checksums SET n = n + 1 WHERE id = 1",
        "DELETE FROM checksums WHERE id = 2",
        &long,
        "INSERT INTO checksums (n) VALUES (g(3))",
    ] {
        spared.push(untrusted(&mut o, sql).await);
    }
    // pt-table-checksum's chunk, from the tracked database as default.
    spared.push(untrusted(&mut c, &chunk).await);
    assert!(spared.iter().all(|(n, _)| *n == 0), "writes that cannot reach the tracked database: {spared:?}");
    assert!(lag.get().statement_writes_spared >= spared.len() as u64, "the stream counts what it spared");
    let mut reaching = Vec::new();
    for (ours, sql) in [
        (false, "INSERT INTO trig VALUES (1)".to_string()),
        (false, "INSERT INTO v VALUES (7, 7)".into()),
        (false, "DELETE FROM parent WHERE id = 1".into()),
        (false, format!("UPDATE checksums, `{db}`.cdc_s SET checksums.n = 1, cdc_s.v = 1")),
        (false, "INSERT INTO merged VALUES (5)".into()),
        // The server's own tables hold its routines: a function written there is no DDL.
        // (Twice: the first write of a database the stream has not read counts anyway.)
        (false, "UPDATE mysql.proc SET comment = comment WHERE db = 'no such database'".into()),
        (false, "UPDATE mysql.proc SET comment = comment WHERE db = 'no such database either'".into()),
        (false, format!("INSERT INTO `{db}`.cdc_s VALUES (50, 0)")),
        (true, "INSERT INTO cdc_s VALUES (51, 0)".into()),
        (true, "UPDATE cdc_s SET v = 2 WHERE id = 51".into()),
    ] {
        reaching.push(untrusted(if ours { &mut c } else { &mut o }, &sql).await);
    }
    assert!(reaching.iter().all(|(n, _)| *n == 1), "writes that may reach the tracked database: {reaching:?}");
    // A stored function that writes may be called by the statement, or by a view it reads:
    // while there is one, nothing is spared.
    let f = format!(
        "CREATE FUNCTION f(x INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO `{db}`.cdc_s VALUES (x + 2000, 0); RETURN x; END"
    );
    o.query_drop(f).await.unwrap();
    assert!(untrusted(&mut o, "INSERT INTO checksums (n) VALUES (0)").await.0 <= 1);
    let with_f = [
        untrusted(&mut o, "INSERT INTO checksums (n) VALUES (f(3))").await,
        untrusted(&mut o, "INSERT INTO checksums (n) VALUES (9)").await,
    ];
    assert!(with_f.iter().all(|(n, _)| *n == 1), "with a writing function: {with_f:?}");
    o.query_drop("DROP FUNCTION f").await.unwrap();
    assert!(untrusted(&mut o, "INSERT INTO checksums (n) VALUES (0)").await.0 <= 1);
    assert_eq!(untrusted(&mut o, "INSERT INTO checksums (n) VALUES (10)").await.0, 0, "the function dropped");
    // A function of a package (MariaDB's sql_mode ORACLE) is kept in mysql.proc in its
    // package body's row, not as a FUNCTION (an audit: one that wrote was not seen).
    o.query_drop("SET SESSION sql_mode = 'ORACLE'").await.unwrap();
    o.query_drop("CREATE PACKAGE pk AS FUNCTION f(x INT) RETURN INT; END").await.unwrap();
    o.query_drop(format!(
        "CREATE PACKAGE BODY pk AS FUNCTION f(x INT) RETURN INT DETERMINISTIC AS BEGIN INSERT INTO `{db}`.cdc_s VALUES (x + 3000, 0); RETURN x; END; END"
    ))
    .await
    .unwrap();
    o.query_drop("SET SESSION sql_mode = DEFAULT").await.unwrap();
    assert!(untrusted(&mut o, "INSERT INTO checksums (n) VALUES (0)").await.0 <= 1);
    let with_package = untrusted(&mut o, "INSERT INTO checksums (n) VALUES (11)").await;
    assert_eq!(with_package.0, 1, "with a package function that writes: {with_package:?}");
    o.query_drop("SET SESSION sql_mode = 'ORACLE'").await.unwrap();
    o.query_drop("DROP PACKAGE pk").await.unwrap();
    o.query_drop("SET SESSION sql_mode = DEFAULT").await.unwrap();
    assert!(untrusted(&mut o, "INSERT INTO checksums (n) VALUES (0)").await.0 <= 1);
    assert_eq!(untrusted(&mut o, "INSERT INTO checksums (n) VALUES (12)").await.0, 0, "the package dropped");
    // What is read of a database is read now, ahead of the stream: a trigger dropped after a
    // write that fired it is gone from it. The write is judged by what was read only if it was
    // logged after the read, which it was not.
    let raced =
        untrusted(&mut o, "CREATE TABLE late (id INT PRIMARY KEY); /* scope-test */ INSERT INTO trig VALUES (2); DROP TRIGGER trig_ai")
            .await;
    assert_eq!(raced.0, 1, "a write that fired a trigger dropped before the stream read it");
    // A temporary MERGE table shadows `checksums` for its session and writes the tracked
    // database's `m1`: nothing is spared from then on.
    o.query_drop(format!("CREATE TEMPORARY TABLE checksums (id INT PRIMARY KEY) ENGINE=MERGE UNION=(`{db}`.m1) INSERT_METHOD=LAST"))
        .await
        .unwrap();
    let shadowed = [
        untrusted(&mut o, "INSERT INTO checksums (id) VALUES (8)").await,
        untrusted(&mut o, "INSERT INTO checksums (id) VALUES (9)").await,
    ];
    assert!(shadowed.iter().all(|(n, _)| *n == 1), "through a temporary MERGE table: {shadowed:?}");
    drop(o);
    drop_db(&db).await;
    drop_db(&other).await;
}

/// MariaDB shows information_schema.REFERENTIAL_CONSTRAINTS (a key's rules) only to an account
/// with a privilege on the table besides SELECT; KEY_COLUMN_USAGE (the key itself) to one with
/// SELECT. The account README asks for has SELECT: it saw no foreign key, so a cascaded delete
/// was never reported and the child's views kept the deleted rows (an audit). A key whose
/// rules the account cannot read is taken for one with an action.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_key_is_followed_when_the_account_may_only_select() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (db, mut c) = fresh_db("fk_select").await;
    c.query_drop("CREATE TABLE p (id INT PRIMARY KEY) ENGINE=InnoDB").await.unwrap();
    c.query_drop("CREATE TABLE ch (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES p (id) ON DELETE CASCADE) ENGINE=InnoDB")
        .await
        .unwrap();
    c.query_drop("INSERT INTO p VALUES (1), (2)").await.unwrap();
    c.query_drop("INSERT INTO ch VALUES (10, 1)").await.unwrap();
    let user = "cdc_fk_select";
    c.query_drop(format!("DROP USER IF EXISTS '{user}'@'%'")).await.unwrap();
    c.query_drop(format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")).await.unwrap();
    c.query_drop(format!("GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'%'")).await.unwrap();
    c.query_drop(format!("GRANT SELECT ON `{db}`.* TO '{user}'@'%'")).await.unwrap();
    let opts: mysql_async::Opts = mysql_async::OptsBuilder::from_opts(opts_for(None)).user(Some(user)).pass(Some("pw")).into();
    let mut cfg = freshet_cdc::StreamConfig::new(&db, server_id());
    cfg.read_timeout = std::time::Duration::from_secs(5);
    let mut s = freshet_cdc::BinlogStream::connect(opts, cfg, freshet_cdc::StartAt::Current).await.expect("binlog stream connects");
    c.query_drop("DELETE FROM p WHERE id = 1").await.unwrap();
    c.query_drop("INSERT INTO p VALUES (3)").await.unwrap();
    let seen =
        described(&mut s, "the delete, its cascade and the insert", |seen| seen.iter().filter(|e| *e == "batch of p").count() >= 2).await;
    assert_eq!(seen, ["batch of p", "Cascaded ch", "batch of p"], "the delete cascades to ch");
    c.query_drop(format!("DROP USER '{user}'@'%'")).await.unwrap();
    drop_db(&db).await;
}
