use super::*;

#[test]
fn the_views_a_statement_creates_are_named() {
    let none = |_: &str| false;
    for (sql, want) in [
        ("CREATE VIEW v AS SELECT 1", vec!["v"]),
        ("create or replace algorithm = merge definer = 'a'@'%' sql security invoker view `db`.`My View` as select f()", vec!["My View"]),
        ("ALTER DEFINER = CURRENT_USER() VIEW v2 AS SELECT 2", vec!["v2"]),
        ("CREATE VIEW IF NOT EXISTS db.v3 AS SELECT 3", vec!["v3"]),
        ("/* c */ SET STATEMENT max_statement_time = 5 FOR CREATE VIEW v4 AS SELECT 4", vec!["v4"]),
        ("CREATE TABLE t (view INT)", vec![]),
        ("CREATE TABLE t AS SELECT 1 AS view", vec![]),
        ("ALTER TABLE t ADD COLUMN view INT", vec![]),
        ("INSERT INTO view VALUES (1)", vec![]),
    ] {
        assert_eq!(view_names(sql, none), want, "{sql}");
    }
    let is_view = |n: &str| n == "v" || n == "w";
    assert_eq!(view_names("RENAME TABLE v TO v_old, t TO t2, db.w WAIT 3 TO db.w2", is_view), vec!["v_old", "w2"]);
    assert_eq!(view_names("RENAME TABLE t TO v9", is_view), Vec::<String>::new());
}
use proptest::prelude::*;

#[test]
fn savepoint_statements_name_their_savepoint() {
    assert_eq!(parse_savepoint("SAVEPOINT `a`"), Some(Savepoint::Set("a".into())));
    assert_eq!(parse_savepoint("ROLLBACK TO `a`"), Some(Savepoint::RollbackTo("a".into())));
    assert_eq!(parse_savepoint("rollback work to savepoint B"), Some(Savepoint::RollbackTo("B".into())));
    assert_eq!(parse_savepoint("RELEASE SAVEPOINT a"), Some(Savepoint::Release("a".into())));
    assert_eq!(parse_savepoint("ROLLBACK"), None);
    assert_eq!(parse_savepoint("ROLLBACK WORK"), None);
    assert_eq!(parse_savepoint("COMMIT"), None);
}

fn t(db: Option<&str>, table: &str, kind: DdlKind) -> DdlTarget {
    DdlTarget { database: db.map(str::to_string), table: table.into(), kind }
}

/// A GRANT or REVOKE reaches the caches' database `app` unless it is on another one's
/// objects; database names in grants are patterns.
#[test]
fn grants_reach_the_databases_they_name() {
    let reaches = |sql: &str, default_db: Option<&str>| privileges_may_change(sql, default_db, "app_1");
    for (sql, db) in [
        ("GRANT SELECT ON app_1.* TO u", Some("other")),
        ("GRANT SELECT ON `APP_1`.t TO u", Some("other")),
        ("GRANT SELECT ON t TO u", Some("app_1")),
        ("GRANT SELECT ON * TO u", Some("app_1")),
        ("GRANT SELECT ON t TO u", None),
        ("GRANT SELECT ON *.* TO u", Some("other")),
        ("GRANT SELECT ON `app%`.* TO u", Some("other")),
        ("GRANT SELECT ON `app\\_1`.* TO u", Some("other")),
        ("GRANT SELECT ON `a_p_1`.* TO u", Some("other")),
        ("GRANT SELECT ON `%`.* TO u", Some("other")),
        ("GRANT role_a TO u", Some("other")),
        ("GRANT PROXY ON a TO u", Some("other")),
        ("REVOKE ALL PRIVILEGES, GRANT OPTION FROM u", Some("other")),
        ("REVOKE SELECT ON app_1.t FROM u", Some("other")),
        ("GRANT", Some("other")),
    ] {
        assert!(reaches(sql, db), "{sql} in {db:?}");
    }
    for (sql, db) in [
        ("GRANT SELECT ON other.* TO u", Some("app_1")),
        ("GRANT SELECT, INSERT (a, b) ON `other`.`t` TO u WITH GRANT OPTION", Some("app_1")),
        ("GRANT SELECT ON t TO u", Some("other")),
        ("GRANT DELETE ON * TO u", Some("other")),
        ("GRANT EXECUTE ON PROCEDURE other.p TO u", Some("app_1")),
        ("REVOKE ALL PRIVILEGES ON TABLE other.t FROM u", Some("app_1")),
        ("GRANT SELECT ON `app\\_%x`.* TO u", Some("other")),
        ("GRANT SELECT ON `ap`.* TO u", Some("other")),
    ] {
        assert!(!reaches(sql, db), "{sql} in {db:?}");
    }
}

/// LIKE in time the pattern's length times the name's, whatever the pattern.
#[test]
fn like_takes_time_bounded_by_both_lengths() {
    assert!(like(b"a%b%c", b"axxbyyc"));
    assert!(!like(b"a%b%c", b"axxbyy"));
    assert!(like(b"%%%", b""));
    assert!(like(b"\\%", b"%") && !like(b"\\%", b"x"));
    let pattern = format!("{}b", "%a".repeat(5_000));
    let name = "a".repeat(5_000);
    assert!(!like(pattern.as_bytes(), name.as_bytes()));
}

#[test]
fn privilege_statements_are_recognised() {
    for sql in [
        "GRANT SELECT ON app.t TO 'a'@'%'",
        "revoke all on *.* from a",
        "CREATE OR REPLACE ROLE r",
        "CREATE OR REPLACE USER 'x'@'h'",
        "DROP USER x",
        "RENAME USER a TO b",
        "FLUSH PRIVILEGES",
        "/*!40000 GRANT SELECT ON t TO a */",
        "UPDATE mysql.global_priv SET priv = '{}'",
        "INSERT INTO `mysql`.`tables_priv` VALUES ()",
        "DROP TABLE IF EXISTS app.t, mysql.tables_priv",
        "RENAME TABLE mysql.global_priv TO mysql.old, mysql.new TO mysql.global_priv",
        "TRUNCATE TABLE `mysql`.`db`",
        "ALTER TABLE mysql.global_priv ENGINE = Aria",
        "DROP DATABASE mysql",
    ] {
        assert!(privileges_may_change(sql, Some("app"), "app"), "{sql}");
    }
    assert!(privileges_may_change("DELETE FROM tables_priv", Some("mysql"), "app"));
    assert!(privileges_may_change("TRUNCATE tables_priv", Some("mysql"), "app"));
    for sql in [
        "UPDATE t SET a = 1",
        "CREATE TABLE users (id INT)",
        "SELECT * FROM mysql.user",
        "FLUSH TABLES",
        "SET NAMES utf8",
        // Any login may set its own password and default role; ALTER USER changes how an
        // account logs in, not what it may read.
        "SET PASSWORD FOR a = PASSWORD('x')",
        "SET PASSWORD = PASSWORD('x')",
        "SET DEFAULT ROLE r FOR a",
        "ALTER USER a ACCOUNT LOCK",
        "ALTER USER CURRENT_USER() IDENTIFIED BY 'x'",
        // A new account has no rights.
        "CREATE USER 'x'@'h' IDENTIFIED BY 'p'",
        "CREATE USER IF NOT EXISTS a, b",
        "CREATE ROLE r",
        // `mysql` as an alias or in a string, with DDL on the application's own objects.
        "CREATE OR REPLACE VIEW v AS SELECT mysql.note FROM notes AS mysql",
        "CREATE TABLE t (a INT COMMENT 'from mysql.user') SELECT mysql.a FROM s AS mysql",
        "ALTER TABLE t ADD COLUMN mysql INT",
        "DROP VIEW IF EXISTS mysql_users",
    ] {
        assert!(!privileges_may_change(sql, Some("app"), "app"), "{sql}");
    }
}

#[test]
fn a_plain_write_names_its_one_target() {
    let t = |db: Option<&str>, table: &str| Some((db.map(str::to_string), table.to_string()));
    for (sql, want) in [
        ("INSERT INTO t VALUES (1)", t(None, "t")),
        ("/* app */ insert low_priority ignore `p`.`checksums` (a) SELECT a FROM app.x", t(Some("p"), "checksums")),
        ("REPLACE INTO percona.checksums (db) SELECT 'app' FROM app.t /*checksum chunk*/", t(Some("percona"), "checksums")),
        ("SET STATEMENT max_statement_time = 1 FOR INSERT t SET a = 1", t(None, "t")),
        ("/*M!100000 INSERT INTO o.t VALUES (1) */", t(Some("o"), "t")),
        ("UPDATE o.t SET a = 1 WHERE b IN (SELECT b FROM app.u)", t(Some("o"), "t")),
        ("UPDATE IGNORE t AS x SET x.a = 1", t(None, "t")),
        ("UPDATE t x SET a = 1", t(None, "t")),
        ("DELETE FROM o.t", t(Some("o"), "t")),
        ("DELETE QUICK FROM t WHERE a = 1", t(None, "t")),
        ("DELETE FROM t ORDER BY a LIMIT 3", t(None, "t")),
    ] {
        assert_eq!(write_target(sql), want, "{sql}");
    }
    for sql in [
        "UPDATE o.t, app.u SET t.a = 1, u.b = 2",
        "UPDATE o.t JOIN app.u ON t.id = u.id SET u.b = 2",
        "UPDATE o.t AS x, app.u SET u.b = 2",
        "DELETE o.t, app.u FROM o.t JOIN app.u",
        "DELETE FROM o.t USING o.t JOIN app.u",
        "DELETE FROM o.t, app.u USING o.t JOIN app.u",
        "SELECT f()",
        "DO f()",
        "CALL p()",
        "LOAD DATA INFILE 'x' INTO TABLE t",
        "WITH c AS (SELECT 1) SELECT * FROM c",
        "UPDATE t",
    ] {
        assert_eq!(write_target(sql), None, "{sql}");
    }
}

#[test]
fn a_routine_writes_if_it_has_a_write_statement() {
    for body in [
        "BEGIN INSERT INTO app.t VALUES (x); RETURN x; END",
        "BEGIN UPDATE t SET a = 1; RETURN 1; END",
        "BEGIN DELETE FROM t; RETURN 1; END",
        "BEGIN REPLACE t VALUES (1); RETURN 1; END",
        "BEGIN CALL p(); RETURN 1; END",
        "RETURN NEXTVAL(s)",
        "BEGIN UPDATE performance_schema.threads, app.t SET instrumented = 'NO'; RETURN 1; END",
        // A comment's opening inside a string hides nothing (an audit of the lexer).
        "BEGIN DECLARE c CHAR(2) DEFAULT '/*'; UPDATE t SET a = 1; RETURN 1; END",
        "BEGIN DECLARE c CHAR(2) DEFAULT '#'; UPDATE t SET a = 1; RETURN 1; END",
        "BEGIN DECLARE c CHAR(2) DEFAULT 'it''s -- '; UPDATE t SET a = 1; RETURN 1; END",
        "BEGIN DECLARE c CHAR(2) DEFAULT 'a\\' -- '; UPDATE t SET a = 1; RETURN 1; END",
        // `--` opens a comment only before white space: `1--1` is one minus minus one.
        "BEGIN DECLARE c INT DEFAULT 1--1; UPDATE t SET a = 1; RETURN 1; END",
        // A double-quoted string escapes with a backslash too (a third audit: `"\""` hid
        // the UPDATE after it).
        "BEGIN DECLARE x VARCHAR(10) DEFAULT \"\\\"\"; UPDATE d1.t SET v = v + 1 WHERE id = 2; RETURN LENGTH(\"a\"); END",
        // Under NO_BACKSLASH_ESCAPES `'\'` ends at its second quote: `'/*'` after it is a
        // string, not a comment hiding the UPDATE.
        "BEGIN DECLARE c VARCHAR(9) DEFAULT '\\'; SET @x = '/*'; UPDATE t SET a = 1; SET @y = 'x'; RETURN 1; END",
    ] {
        assert!(routine_writes(body), "{body}");
    }
    for body in [
        "RETURN REPLACE(INSERT(x, 1, 2, 'ab'), 'a', 'b')",
        "BEGIN DECLARE v INT; SELECT a INTO v FROM t WHERE id = x FOR UPDATE; RETURN v; END",
        "BEGIN UPDATE performance_schema.threads SET instrumented = 'NO' WHERE thread_id = x; RETURN 1; END",
        "BEGIN SET SESSION sql_select_limit = 1; RETURN x; END",
    ] {
        assert!(!routine_writes(body), "{body}");
    }
}

#[test]
fn a_temporary_merge_table_is_noticed() {
    for sql in [
        "CREATE TEMPORARY TABLE t (id INT) ENGINE=MERGE UNION=(app.m1)",
        "CREATE OR REPLACE TEMPORARY TABLE t (id INT) ENGINE = MRG_MyISAM",
        "CREATE TEMPORARY TABLE t LIKE o.m",
        "ALTER TABLE t ENGINE=MERGE UNION=(app.m1)",
    ] {
        assert!(may_make_temporary_merge(sql), "{sql}");
    }
    for sql in ["CREATE TEMPORARY TABLE t (id INT)", "CREATE TABLE t (id INT) ENGINE=MERGE", "ALTER TABLE t ADD COLUMN b INT"] {
        assert!(!may_make_temporary_merge(sql), "{sql}");
    }
}

#[test]
fn statements_that_may_change_rows_unseen_are_recognised() {
    for sql in [
        "INSERT INTO t VALUES (1)",
        "update t set a = 1",
        "/* app */ DELETE FROM t",
        "/*!50000 REPLACE INTO t VALUES (1) */",
        "/*M!100000 INSERT INTO t VALUES (1) */",
        "/*M! DELETE FROM t */",
        "LOAD DATA INFILE 'x' INTO TABLE t",
        "SELECT f()",
        "CALL p()",
        "DO g()",
        "SET STATEMENT max_statement_time = 1 FOR UPDATE t SET a = 1",
        "(SELECT 1)",
        "WITH c AS (SELECT 1) SELECT * FROM c",
        // Statement-logged, a CREATE ... SELECT runs the functions its SELECT calls, and
        // MariaDB's ANALYZE runs the statement it analyzes (an audit of binlog settings).
        "create table c2 select bump() as a",
        "CREATE TEMPORARY TABLE c3 SELECT bump() AS a",
        "CREATE OR REPLACE TABLE IF NOT EXISTS c AS SELECT f()",
        "CREATE TABLE c (a INT) IGNORE SELECT f()",
        "CREATE TABLE c (SELECT f())",
        "SET STATEMENT sql_mode = '' FOR CREATE TABLE c SELECT f()",
        "analyze update t set v = v + 10 where id = 2",
        "ANALYZE DELETE FROM t WHERE id = 99",
        "ANALYZE SELECT f()",
        // A second audit: a table value constructor runs its functions too, and quoting
        // the lexer misread hid the SELECT.
        "CREATE TABLE c3 AS VALUES (bump())",
        "CREATE TABLE c1 (x VARCHAR(5) DEFAULT '/*') SELECT bump() AS y",
        "CREATE TABLE c4 (x INT DEFAULT (1--1)) SELECT bump() AS y",
        "CREATE TABLE c5 (x VARCHAR(5) DEFAULT \"\\\"\") SELECT bump() AS y",
    ] {
        assert!(may_change_rows(sql), "{sql}");
    }
    for sql in [
        "CREATE TABLE t (id INT)",
        "ALTER TABLE t ADD COLUMN b INT",
        "DROP TABLE IF EXISTS `t` /* generated by server */",
        "TRUNCATE TABLE t",
        "RENAME TABLE a TO b",
        "GRANT SELECT ON t TO a",
        "SET PASSWORD FOR a = PASSWORD('x')",
        "SET DEFAULT ROLE r FOR a",
        "ANALYZE TABLE t",
        "ANALYZE NO_WRITE_TO_BINLOG TABLE t PERSISTENT FOR ALL",
        "analyze local tables a, b",
        "OPTIMIZE TABLE t",
        "REPAIR TABLE t QUICK",
        "CREATE TABLE c LIKE t",
        "CREATE TABLE `c` (\n  `a` int(11) DEFAULT NULL\n)",
        "CREATE VIEW v AS SELECT f()",
        // A partitioned table's VALUES LESS THAN and VALUES IN run nothing (the byte reading
        // of VALUES took them for a table value constructor: every cache was evicted at
        // each CREATE of a partitioned table).
        "CREATE TABLE ct_part (id INT PRIMARY KEY, k INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
        "CREATE TABLE l (id INT) PARTITION BY LIST (id) (PARTITION p0 values  in (1, 2))",
        "FLUSH TABLES",
        "BEGIN",
        "COMMIT",
        "XA START 'x'",
        "",
        "/* only a comment */",
        "SET STATEMENT foreign_key_checks = 0, sql_mode = 'a,b' FOR ALTER TABLE t ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES p (id)",
    ] {
        assert!(!may_change_rows(sql), "{sql}");
    }
}

#[test]
fn a_statement_under_set_statement_is_read_as_itself() {
    let t = |table: &str, kind| DdlTarget { database: None, table: table.into(), kind };
    assert_eq!(
        parse_ddl("SET STATEMENT foreign_key_checks = 0 FOR ALTER TABLE c ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES p (id)"),
        vec![t("c", DdlKind::Alter)]
    );
    assert_eq!(
        parse_ddl("set statement lock_wait_timeout=5 for rename table a to b"),
        vec![t("a", DdlKind::RenamedFrom), t("b", DdlKind::RenamedTo)]
    );
    assert_eq!(parse_drop_database("SET STATEMENT max_statement_time = 1 FOR DROP DATABASE d"), Some("d".into()));
    assert!(privileges_may_change("SET STATEMENT max_statement_time = 1 FOR GRANT SELECT ON t TO a", Some("db"), "db"));
    assert!(may_change_rows("SET STATEMENT max_statement_time = 1 FOR DELETE FROM t"));
    // The FOR is the first outside a string (a third audit: a value `'x FOR DROP'` made the
    // UPDATE after it a DROP, and `'x FOR SELECT'` a REVOKE a SELECT).
    assert!(may_change_rows("SET STATEMENT default_master_connection='x FOR DROP' FOR UPDATE d1.t SET v=v+1000 WHERE id=1"));
    assert!(privileges_may_change(
        "SET STATEMENT default_master_connection='x FOR SELECT' FOR REVOKE SELECT ON d1.t FROM app@'%'",
        Some("d1"),
        "d1"
    ));
    // Under NO_BACKSLASH_ESCAPES `'\'` is a whole string (a fourth audit: read with escapes,
    // the FOR after it was inside a string, and the REVOKE went unseen).
    assert!(privileges_may_change(
        "SET STATEMENT default_master_connection='\\' FOR REVOKE SELECT ON aud_bp.t FROM 'u'@'%'",
        Some("aud_bp"),
        "aud_bp"
    ));
    assert!(may_change_rows("SET STATEMENT default_master_connection='\\' FOR UPDATE t SET v = 1"));
    // Not a statement: read as the SET it is.
    assert!(parse_ddl("SET STATEMENT x = 1").is_empty());
}

/// What a fifth audit of the binlog's texts found read as harmless: each changes rows or
/// rights. `d` is the tracked database, `t` its cached table.
#[test]
fn texts_read_otherwise_or_too_long_to_read_are_taken_at_their_worst() {
    let revoke = "REVOKE SELECT ON d.t FROM u2";
    let reaches = |sql: &str| privileges_may_change(sql, Some("d"), "d");
    let truncates = |sql: &str| parse_ddl(sql).iter().any(|t| t.table == "t" && t.kind == DdlKind::Truncate);
    // Past the first 64 KiB nothing was read: such a text is taken to do anything.
    let long = format!("/* {} */ ", "x".repeat(70_000));
    assert!(may_change_rows(&format!("{long}TRUNCATE TABLE t")), "a TRUNCATE past the head");
    assert!(may_change_rows(&format!("{long}UPDATE t SET v = 42 WHERE id = 1")));
    assert!(reaches(&format!("{long}{revoke}")));
    assert_eq!(write_target(&format!("{long}UPDATE t SET v = 42")), None);
    // Past the 256th token: every token of the head is read.
    let words = vec!["w"; 300].join(" ");
    assert_eq!(alter_dropped_columns(&format!("ALTER TABLE t COMMENT '{words}', DROP COLUMN v, ADD COLUMN v INT DEFAULT 7")), vec!["v"]);
    let pairs: Vec<String> = (0..40).map(|i| format!("o.x{i} TO o.y{i}")).collect();
    let renamed = parse_ddl(&format!("RENAME TABLE {}, d.t TO d.t_old, d.t2 TO d.t", pairs.join(", ")));
    assert!(renamed.iter().any(|t| t.table == "t" && t.kind == DdlKind::RenamedTo), "{renamed:?}");
    let drops: Vec<String> = (0..70).map(|i| format!("o.z{i}")).collect();
    assert!(parse_ddl(&format!("DROP TABLE {}, d.t", drops.join(", "))).iter().any(|t| t.table == "t"));
    let terms = vec!["1"; 200].join("+");
    assert!(reaches(&format!("SET STATEMENT max_statement_time = {terms} FOR {revoke}")));
    // A value of SET STATEMENT has a FOR of its own; a number glued to the FOR after it.
    let inner = "SET STATEMENT default_master_connection = SUBSTRING('abc' FROM 1 FOR 'COMMIT') FOR";
    assert!(truncates(&format!("{inner} TRUNCATE TABLE t")));
    assert!(may_change_rows(&format!("{inner} UPDATE t SET v = 31 WHERE id = 1")));
    assert!(reaches("SET STATEMENT default_master_connection = SUBSTRING('abc' FROM 1 FOR 2) FOR REVOKE SELECT ON d.t FROM u2"));
    assert!(reaches(&format!("SET STATEMENT max_statement_time=1.5FOR {revoke}")));
    // A `*/` outside a comment is a `*` and a `/`: it does not open a string's reading.
    let star = "SET STATEMENT max_statement_time = 2*/*' */3 FOR";
    assert!(reaches(&format!("{star} {revoke} /* ' FOR COMMIT */")));
    assert!(truncates(&format!("{star} TRUNCATE TABLE t /* ' FOR COMMIT */")));
    assert!(may_change_rows(&format!("{star} UPDATE t SET v = 99 WHERE id = 1 /* ' FOR COMMIT */")));
    assert!(routine_writes(
        "BEGIN DECLARE x INT DEFAULT 2*/*' */3; DECLARE s VARCHAR(20) DEFAULT '/*'; UPDATE d.t SET v = v + 1000 WHERE id = 1; RETURN x; /* */ END"
    ));
    // Under ANSI_QUOTES a backslash escapes in '...' and not in "..." (a name).
    assert!(reaches(&format!(
        r#"SET STATEMENT default_master_connection='\' FOR COMMIT ', default_master_connection="\"" FOR COMMIT" FOR {revoke}"#
    )));
    // A multibyte character set (GBK, Big5, SJIS) takes a backslash after a lead byte as
    // the character's second byte; decoded as UTF-8 the lead byte is U+FFFD.
    assert!(reaches(&format!(
        "SET STATEMENT default_master_connection='\u{FFFD}\\'' FOR COMMIT', default_master_connection='\\' FOR COMMIT ', max_statement_time=1 FOR {revoke}"
    )));
    // Read without escapes (NO_BACKSLASH_ESCAPES), DDL too.
    assert!(truncates(r"SET STATEMENT default_master_connection='\' FOR TRUNCATE TABLE t /* ' FOR COMMIT */"));
    assert_eq!(alter_dropped_columns(r"ALTER TABLE t COMMENT 'c:\', DROP COLUMN v, ADD COLUMN v INT DEFAULT 7 -- '"), vec!["v"]);
    // An account named `on-call`: its `on` is no ON clause.
    assert!(privileges_may_change("REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'on-call'@'%'", Some("o"), "d"));
}

/// A sixth audit: a text's non-ASCII characters as the server reads them. In a UTF-8
/// session every one is part of a name (never a space, nor what ends a `--`); a text in
/// another character set reaches here with its non-ASCII bytes as U+FFFD
/// (`events::query_text`), which no reading can place: it is taken at its worst.
#[test]
fn non_ascii_characters_are_read_as_the_server_reads_them() {
    assert!(may_change_rows("TRUNCATE\u{FFFD}t"), "a latin1 no-break space");
    assert!(privileges_may_change("REVOKE SELECT ON\u{FFFD}d.t FROM r", Some("other"), "d"));
    assert!(privileges_may_change("DROP\u{FFFD}USER r", Some("d"), "d"));
    assert_eq!(
        alter_dropped_columns(
            "ALTER TABLE t ADD CONSTRAINT c1 CHECK (1 --\u{85}), DROP COLUMN v, ADD COLUMN v VARCHAR(20) DEFAULT 'x' AFTER id"
        ),
        vec!["v"]
    );
    assert_eq!(parse_ddl("TRUNCATE TABLE n€"), vec![t(None, "n€", DdlKind::Truncate)]);
    assert_eq!(parse_ddl("TRUNCATE TABLE a\u{A0}b"), vec![t(None, "a\u{A0}b", DdlKind::Truncate)]);
    // Column names are compared without case, Unicode's too (`É` is `é`, not `e`).
    assert!(same_column_name("É", "é"));
    assert!(!same_column_name("é", "e"));
}

/// A tenth audit of the binlog. `.name` (ODBC's spelling of a table of the default
/// database), and `[name]` under sql_mode MSSQL, name tables the server acts on; a
/// function body that is not UTF-8 (a latin1 session's, where 0xA0 is a space) may hide
/// its write.
#[test]
fn a_tenth_audit_of_the_binlog() {
    assert_eq!(parse_ddl("TRUNCATE TABLE .s"), vec![t(None, "s", DdlKind::Truncate)]);
    assert!(parse_ddl("RENAME TABLE .t TO .tt, .s TO .t").iter().any(|x| x.table == "s"));
    assert_eq!(parse_ddl("TRUNCATE TABLE [s]"), vec![t(None, "s", DdlKind::Truncate)]);
    assert_eq!(parse_ddl("TRUNCATE TABLE [app].[s]"), vec![t(Some("app"), "s", DdlKind::Truncate)]);
    assert_eq!(parse_drop_database("DROP DATABASE [app]"), Some("app".into()));
    assert!(privileges_may_change("REVOKE SELECT ON [app].[t] FROM u", Some("other"), "app"));
    assert!(privileges_may_change("REVOKE SELECT ON .t FROM u", Some("app"), "app"));
    assert!(function_writes("BEGIN\u{FFFD}UPDATE app.t SET v = 'evil' WHERE id = 1;\u{FFFD}RETURN 1; END", ""));
    // Read by the session's character set: a latin1 body's 0xA0 is not UTF-8's.
    assert!(function_writes(&routine_body(b"BEGIN\xa0UPDATE t SET v = 1;\xa0RETURN 1; END", "latin1"), ""));
    assert!(function_writes(&routine_body(b"BEGIN\xc3\xa0UPDATE t SET v = 1; RETURN 1; END", "latin1"), ""));
    assert!(!function_writes(&routine_body("BEGIN RETURN 'é'; END".as_bytes(), "utf8mb4"), ""));
}

/// A seventh audit: under ANSI_QUOTES `"t x"` is a name (TRUNCATE of the table `t x` was
/// read as of `t`), and a GRANT's ON is not a word in a string or in a column list
/// (`REVOKE 'on-call' FROM r`, `REVOKE SELECT ("ON", v) ON d.t`).
#[test]
fn double_quoted_names_and_on_in_names_are_read_as_the_server_reads_them() {
    assert!(parse_ddl(r#"TRUNCATE TABLE "t x""#).contains(&t(None, "t x", DdlKind::Truncate)));
    assert!(parse_ddl(r#"TRUNCATE TABLE "t.y""#).contains(&t(None, "t.y", DdlKind::Truncate)));
    assert_eq!(write_target(r#"UPDATE "x y" SET a = a WHERE a = 1"#), None);
    assert!(privileges_may_change(r#"REVOKE SELECT ("ON", v) ON d.t FROM w@'%'"#, Some("o"), "d"));
    assert!(privileges_may_change("REVOKE SELECT (`on`, v) ON d.t FROM w", Some("o"), "d"));
    assert!(privileges_may_change("REVOKE 'on-call' FROM r2", Some("o"), "d"));
    assert!(!privileges_may_change("REVOKE SELECT (a, b) ON o.t FROM w", Some("o"), "d"));
}

/// An eighth audit: `\NFOR` is NULL then FOR to the server; a name of another case beyond
/// ASCII is the same database under lower_case_table_names; a function created under
/// sql_mode ORACLE calls a procedure by its name alone; and a text that may be DDL (not a
/// plain write of one table) makes the stream forget what it knew of other databases.
#[test]
fn an_eighth_audit_of_the_binlogs_texts() {
    assert!(privileges_may_change(r"SET STATEMENT character_set_results=\NFOR REVOKE SELECT ON d.t FROM u@'%'", None, "d"));
    assert!(privileges_may_change("REVOKE SELECT ON AUD_É.t FROM u", None, "aud_é"));
    assert!(function_writes("AS BEGIN aud_o.p; RETURN 7; END", "PIPES_AS_CONCAT,ANSI_QUOTES,ORACLE"));
    assert!(!function_writes("RETURN x + 1", "STRICT_TRANS_TABLES"));
    // No plain write of one table: the stream forgets what it knew of other databases.
    assert_eq!(write_target("SET STATEMENT max_statement_time=0 FOR RENAME TABLE o.x TO o.for, o.v TO o.x"), None);
    assert_eq!(write_target("CALL p()"), None);
    assert_eq!(write_target("INSERT INTO o.x VALUES (1)"), Some((Some("o".into()), "x".into())));
}

#[test]
fn recognises_table_ddl() {
    assert_eq!(parse_ddl("ALTER TABLE `a` ADD COLUMN x INT"), vec![t(None, "a", DdlKind::Alter)]);
    assert_eq!(
        parse_ddl("/* c */ alter online table db.`we``ird` rename to b2"),
        vec![t(Some("db"), "we`ird", DdlKind::RenamedFrom), t(None, "b2", DdlKind::RenamedTo)]
    );
    assert_eq!(
        parse_ddl("DROP TABLE IF EXISTS `a`,`d`.`b` /* generated by server */"),
        vec![t(None, "a", DdlKind::Drop), t(Some("d"), "b", DdlKind::Drop)]
    );
    assert_eq!(
        parse_ddl("RENAME TABLE a TO b, c TO d.e"),
        vec![
            t(None, "a", DdlKind::RenamedFrom),
            t(None, "b", DdlKind::RenamedTo),
            t(None, "c", DdlKind::RenamedFrom),
            t(Some("d"), "e", DdlKind::RenamedTo)
        ]
    );
    // An ALTER whose clauses all keep the rows' values, and one with a clause that may not.
    for (sql, kind) in [
        ("ALTER TABLE t ADD INDEX i (a), COMMENT 'x', ALGORITHM = INPLACE", DdlKind::Alter),
        ("ALTER TABLE t DROP INDEX i, DROP FOREIGN KEY f, DROP CONSTRAINT c, ADD CONSTRAINT d CHECK (a > 0)", DdlKind::Alter),
        ("ALTER TABLE t WAIT 5 ADD COLUMN b INT AS (a + 1) VIRTUAL AFTER a", DdlKind::Alter),
        ("ALTER TABLE t ALTER COLUMN a SET DEFAULT 5, DEFAULT CHARSET = utf8mb4, ENGINE = InnoDB", DdlKind::Alter),
        ("ALTER TABLE t MODIFY a INT", DdlKind::Truncate),
        ("ALTER TABLE t CHANGE a a INT", DdlKind::Truncate),
        ("ALTER TABLE t DROP a, DROP COLUMN IF EXISTS `b c`", DdlKind::Alter),
        ("ALTER TABLE t DROP PERIOD FOR p", DdlKind::Alter),
        ("ALTER TABLE t ADD INDEX (a), MODIFY b DECIMAL(10,0)", DdlKind::Truncate),
        ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", DdlKind::Truncate),
    ] {
        assert_eq!(parse_ddl(sql), vec![t(None, "t", kind)], "{sql}");
    }
    assert_eq!(alter_dropped_columns("ALTER TABLE t DROP a, DROP COLUMN IF EXISTS `b c`, DROP INDEX i, ADD d INT"), ["a", "b c"]);
    assert_eq!(alter_dropped_columns("alter online table db.t wait 3 drop column a, add column a int"), ["a"]);
    assert!(alter_dropped_columns("ALTER TABLE t DROP PRIMARY KEY, DROP FOREIGN KEY f").is_empty());
    // MariaDB's other spellings: TABLES, IF EXISTS, a lock wait after each name.
    for sql in [
        "RENAME TABLES a TO b, c TO d.e",
        "RENAME TABLE IF EXISTS a TO b, c TO d.e",
        "RENAME TABLE a WAIT 5 TO b, c NOWAIT TO d.e",
        "rename tables if exists a nowait to b, c wait 1 to d.e",
    ] {
        assert_eq!(
            parse_ddl(sql),
            vec![
                t(None, "a", DdlKind::RenamedFrom),
                t(None, "b", DdlKind::RenamedTo),
                t(None, "c", DdlKind::RenamedFrom),
                t(Some("d"), "e", DdlKind::RenamedTo)
            ],
            "{sql}"
        );
    }
    assert_eq!(parse_ddl("truncate t"), vec![t(None, "t", DdlKind::Truncate)]);
    assert_eq!(parse_ddl("CREATE OR REPLACE SEQUENCE d.s"), vec![t(Some("d"), "s", DdlKind::Drop)]);
    assert_eq!(parse_drop_database("create or replace schema app"), Some("app".into()));
    assert_eq!(parse_drop_database("CREATE DATABASE app"), None);
    assert_eq!(parse_ddl("CREATE TABLE IF NOT EXISTS x (id int)"), vec![t(None, "x", DdlKind::Create)]);
    assert_eq!(parse_ddl("CREATE OR REPLACE TABLE x (id int)"), vec![t(None, "x", DdlKind::Truncate)]);
    assert_eq!(parse_ddl("CREATE UNIQUE INDEX i ON t (a)"), vec![t(None, "t", DdlKind::Alter)]);
    assert_eq!(parse_ddl("ALTER TABLE a RENAME COLUMN x TO y"), vec![t(None, "a", DdlKind::Truncate)]);
    assert_eq!(parse_ddl("ALTER TABLE a RENAME INDEX x TO y"), vec![t(None, "a", DdlKind::Alter)]);
    assert_eq!(
        parse_ddl("ALTER TABLE p EXCHANGE PARTITION p0 WITH TABLE d.x"),
        vec![t(None, "p", DdlKind::Truncate), t(Some("d"), "x", DdlKind::Truncate)]
    );
    assert_eq!(
        parse_ddl("ALTER TABLE p CONVERT PARTITION p3 TO TABLE o"),
        vec![t(None, "p", DdlKind::Truncate), t(None, "o", DdlKind::Create)]
    );
    assert_eq!(
        parse_ddl("ALTER TABLE p CONVERT TABLE o TO PARTITION p3 VALUES LESS THAN (40)"),
        vec![t(None, "p", DdlKind::Truncate), t(None, "o", DdlKind::Drop)]
    );
    for sql in [
        "ALTER TABLE p TRUNCATE PARTITION p1",
        "alter table p drop partition p2",
        "ALTER TABLE p IMPORT TABLESPACE",
        "ALTER IGNORE TABLE p ADD UNIQUE (k)",
        "ALTER TABLE p ENGINE = BLACKHOLE",
    ] {
        assert_eq!(parse_ddl(sql), vec![t(None, "p", DdlKind::Truncate)], "{sql}");
    }
    assert!(parse_ddl("BEGIN").is_empty());
    assert!(parse_ddl("INSERT INTO t VALUES (1)").is_empty());
    assert!(parse_ddl("CREATE DATABASE x").is_empty());
    assert!(parse_ddl("DROP TEMPORARY TABLE IF EXISTS `t` /* generated by server */").is_empty());
    assert!(parse_ddl("CREATE TEMPORARY TABLE t (id int)").is_empty());
    assert_eq!(parse_drop_database("DROP SCHEMA IF EXISTS `app`"), Some("app".into()));
    assert_eq!(parse_drop_database("DROP TABLE app"), None);
}

proptest! {
    #[test]
    fn never_panics(s in "\\PC{0,80}") {
        let _ = parse_ddl(&s);
    }
}
