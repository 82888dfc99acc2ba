use super::*;

fn after(statements: &[&str]) -> SessionState {
    let mut s = SessionState::default();
    for sql in statements {
        s.observe(sql.as_bytes());
    }
    s
}

/// What applications send on connect, and no cached read depends on: MediaWiki's
/// `group_concat_max_len` (no view computes GROUP_CONCAT), WordPress's `SQL_BIG_SELECTS = 1`
/// (the server answers more, never otherwise), `sql_safe_updates` (writes only).
#[test]
fn what_applications_set_on_connect_keeps_the_session_cacheable() {
    let s = after(&["SET group_concat_max_len = 262144", "SET SESSION SQL_BIG_SELECTS=1", "SET sql_safe_updates = 1"]);
    assert!(!s.unfollowed && !s.stale, "{s:?}");
    assert!(after(&["SET SQL_BIG_SELECTS = 0"]).unfollowed, "the server may refuse what a view answers");
}

/// `SET NAMES x, <assignments>` and `SET CHARACTER SET x, ...`: the assignments after the
/// character set are read as any others (an audit: `SET NAMES utf8mb4, max_join_size = 1`
/// and `..., sql_mode = 'ANSI_QUOTES'` went unseen, and cached reads answered where the
/// server refused, or read a base table a temporary one shadowed).
#[test]
fn assignments_after_set_names_are_read() {
    for sql in [
        "SET NAMES utf8mb4, max_join_size = 1",
        "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci, sql_mode = 'ANSI_QUOTES'",
        "SET CHARACTER SET utf8mb4, sql_big_selects = 0",
        "set charset utf8mb4, @@session.optimizer_switch = 'index_merge=off'",
    ] {
        assert!(after(&[sql]).unfollowed, "{sql}");
    }
    assert!(after(&["SET NAMES utf8mb4, sql_log_bin = 0"]).unlogged);
    let s = after(&["SET NAMES utf8mb4, @a = 1"]);
    assert!(s.stale && !s.unfollowed, "{s:?}");
}

/// `SET PASSWORD` and `SET DEFAULT ROLE` change no setting of the session (an audit: every
/// cached read after them was relayed for the session's life, and an expired password's
/// session must run SET PASSWORD); what follows them after a comma is read as any
/// assignments are.
#[test]
fn set_password_and_default_role_leave_the_session_followed() {
    for sql in
        ["SET PASSWORD = PASSWORD('x')", "set password for 'u'@'%' = 'hash'", "SET DEFAULT ROLE r", "SET DEFAULT ROLE NONE FOR u@'%'"]
    {
        let s = after(&[sql]);
        assert!(s.stale && !s.unfollowed, "{sql}: {s:?}");
    }
    for sql in ["SET PASSWORD = PASSWORD('x'), sql_mode = 'ANSI'", "SET DEFAULT ROLE NONE, max_join_size = 1"] {
        assert!(after(&[sql]).unfollowed, "{sql}");
    }
    assert!(after(&["SET PASSWORD = PASSWORD('x'), sql_log_bin = 0"]).unlogged);
}

/// A transaction's characteristics set for the next transaction only (`SET TRANSACTION`,
/// `SET @@tx_isolation` without a scope) are used up by its next statement that starts one:
/// a cached read in between is relayed so that the server's SELECT uses them up (an audit:
/// `SET TRANSACTION READ ONLY`, a cached read, then an UPDATE refused with 1792; `SET
/// @@tx_isolation = 'READ-UNCOMMITTED'` unseen by the probe, which reads the session's).
#[test]
fn next_transaction_settings_are_used_up_by_the_server() {
    for sql in [
        "SET TRANSACTION READ ONLY",
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        "SET @@tx_isolation = 'READ-UNCOMMITTED'",
        "SET @@`tx_read_only` = 1",
        "SET @@transaction_isolation = 'READ-COMMITTED'",
    ] {
        assert!(after(&[sql]).next_transaction, "{sql}");
        assert!(after(&[sql, "SHOW WARNINGS"]).next_transaction, "{sql}, then SHOW");
        // A SELECT may touch no transactional table (`SELECT 1`): the server keeps it then
        // (a second audit). A relayed cached read uses it up (the session's to see).
        assert!(after(&[sql, "SELECT 1"]).next_transaction, "{sql}, then SELECT 1");
        for ends in ["START TRANSACTION", "BEGIN", "COMMIT", "ROLLBACK"] {
            assert!(!after(&[sql, ends]).next_transaction, "{sql}, then {ends}");
        }
    }
    for sql in ["SET SESSION TRANSACTION READ ONLY", "SET @@session.tx_isolation = 'READ-COMMITTED'", "SET tx_read_only = 1"] {
        assert!(!after(&[sql]).next_transaction, "{sql}");
    }
}

#[test]
fn harmless_settings_keep_the_session_cacheable() {
    let s = after(&[
        "SET autocommit = 1",
        "SET SESSION interactive_timeout = 100, @@session.net_read_timeout = 30",
        "SET @x = NOW()",
        "SELECT 1 /*+ hint */",
        "INSERT INTO t VALUES (1)",
    ]);
    assert!(!s.unfollowed && !s.stale && !s.unlogged, "{s:?}");
    // Cacheable, and read again by the probe (a cached read keeps the session alive
    // within half of it).
    let s = after(&["SET SESSION wait_timeout = 100"]);
    assert!(!s.unfollowed && s.stale, "{s:?}");
}

/// MariaDB's `SET STATEMENT ... FOR` sets its variables for the one statement after FOR
/// (MediaWiki sends `SET STATEMENT max_statement_time = N FOR SELECT ...`); the session's
/// own settings stay as they were. What follows FOR is read as its own statement.
#[test]
fn a_setting_for_one_statement_leaves_the_session_alone() {
    let s = after(&[
        "SET STATEMENT max_statement_time = 30 FOR SELECT id FROM t WHERE k = 1",
        "set statement sql_select_limit = 1, optimizer_switch = 'index_merge=off' for select 1",
        "SET STATEMENT max_statement_time = (SELECT 5) FOR UPDATE t SET a = 1",
    ]);
    assert!(!s.unfollowed && !s.stale, "{s:?}");
    assert!(after(&["SET STATEMENT max_statement_time = 1 FOR SET sql_mode = 'ANSI'"]).unfollowed, "what follows FOR is read");
    assert!(after(&["SET STATEMENT max_statement_time = 1 FOR CALL p()"]).unfollowed);
    assert!(after(&["SET STATEMENT max_statement_time = 1"]).unfollowed, "no FOR: not read");
}

#[test]
fn settings_that_change_results_are_unfollowed_until_reset() {
    for sql in [
        "SET a = 1, sql_select_limit = 5",
        "SET GLOBAL sql_mode = ''",
        "SET optimizer_switch = 'index_merge=off'",
        // A mode that changes how text is read: what follows may be misread.
        "SET sql_mode = 'ANSI'",
        "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_BACKSLASH_ESCAPES', time_zone = '+00:00'",
        "SET sql_mode = ansi_quotes",
        "SET sql_mode = @saved",
        "SET sql_mode = (SELECT m FROM modes)",
        // Named in backticks: the same variables to the server.
        "SET `sql_mode` = 'ANSI_QUOTES'",
        "SET @@session.`sql_mode` = 'NO_BACKSLASH_ESCAPES'",
        "SET `optimizer_switch` = 'index_merge=off'",
        "SET ROLE r",
        "/*!40101 SET NAMES latin1 */",
        "SELECT /*M!100000 1, */ 2",
        "EXECUTE IMMEDIATE 'SET NAMES latin1'",
        "PREPARE s FROM 'SET character_set_results = latin1'",
        "EXECUTE s",
        "CALL p()",
        "CREATE TEMPORARY TABLE t (id INT)",
        "create or replace temporary table t (id int)",
    ] {
        let mut s = after(&[sql]);
        assert!(s.unfollowed, "{sql}");
        s.reset();
        assert!(!s.unfollowed && s.stale);
    }
}

/// A setting the probe reads (sql_mode, sql_select_limit, time_zone,
/// div_precision_increment, sql_auto_is_null) is asked of the server again, whatever its
/// value: the server's answer decides which reads are served. Rails, for one, sets
/// sql_mode and sql_auto_is_null on every connection.
#[test]
fn settings_the_probe_reads_are_asked_again() {
    for sql in [
        "SET @@SESSION.sql_mode = CONCAT(CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'), ',NO_AUTO_VALUE_ON_ZERO'), \
         @@SESSION.sql_auto_is_null = 0, @@SESSION.wait_timeout = 2147483",
        "SET sql_mode = 'STRICT_ALL_TABLES'",
        "SET sql_mode = TRADITIONAL",
        "SET sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_ZERO_DATE')",
        "SET @@time_zone = '+02:00'",
        "SET time_zone = @tz",
        "SET SESSION div_precision_increment = 2",
        "SET sql_select_limit = 5",
        "SET SQL_AUTO_IS_NULL = 1",
        "SELECT 1; SET time_zone = '+00:00'",
        "SET `sql_select_limit` = 1",
        "SET SESSION `sql_mode` = 'EMPTY_STRING_IS_NULL'",
        "SET @@session.`sql_mode` = 'PAD_CHAR_TO_FULL_LENGTH'",
        "SET SESSION `time_zone` = '+02:00'",
        "SET @@session.`sql_select_limit` = 1, @@`time_zone` = '+02:00'",
        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
        "SET tx_isolation = 'READ-UNCOMMITTED'",
    ] {
        let s = after(&[sql]);
        assert!(s.stale && !s.unfollowed, "{sql}: {s:?}");
    }
    // A mode the tracker cannot read from the text, or READ UNCOMMITTED for the next
    // transaction alone (which the probe would not see), is not followed.
    for sql in [
        "SET sql_mode = CONCAT('NO_BACK', 'SLASH_ESCAPES')",
        "SET sql_mode = 4",
        "SET sql_mode = 0x414E53495F51554F544553",
        "SET sql_mode = 'ORACLE'",
        "SET sql_mode = @@GLOBAL.sql_mode",
        "SET sql_mode = ANSI_QUOTES",
        "SET sql_mode = @m",
        "SET sql_mode = (SELECT 'ANSI')",
        "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
    ] {
        assert!(after(&[sql]).unfollowed, "{sql}");
    }
}

/// Several statements in one text are read one by one: writes with SET in them keep the
/// session followed; a setting, a compound statement (whose body may set anything) or a
/// statement freshet does not know among them does not.
#[test]
fn several_statements_are_read_one_by_one() {
    for sql in [
        "UPDATE t SET a = 1; UPDATE t SET b = 2 WHERE id = 3",
        "INSERT INTO t VALUES (1); SELECT 1",
        "INSERT INTO t SELECT 1; SET @x = 1; DELETE FROM t",
        "BEGIN; UPDATE t SET a = 1; COMMIT",
        "UPDATE t SET s = 'a;b'; SET autocommit = 1;",
    ] {
        let s = after(&[sql]);
        assert!(!s.unfollowed && !s.stale, "{sql}: {s:?}");
    }
    for sql in [
        "UPDATE t SET a = 1; SET optimizer_switch = 'index_merge=off'",
        "BEGIN NOT ATOMIC SET @@time_zone = '+02:00'; END",
        "lbl: BEGIN NOT ATOMIC SELECT 1; END",
        "IF 1 THEN SET @@sql_select_limit = 1; END IF",
        "SELECT 1; CALL p()",
        "DELETE FROM t; CREATE TEMPORARY TABLE x (i INT)",
        "SELECT 1; EXECUTE s",
        "CREATE PROCEDURE p() BEGIN SET time_zone = '+02:00'; END",
    ] {
        assert!(after(&[sql]).unfollowed, "{sql}");
    }
    for sql in ["SELECT 1; USE other", "UPDATE t SET a = 1; SET time_zone = '+02:00'"] {
        let s = after(&[sql]);
        assert!(s.stale && !s.unfollowed, "{sql}: {s:?}");
    }
    assert!(after(&["UPDATE t SET a = 1; SET sql_log_bin = 0"]).unlogged);
}

/// LOCK TABLES limits the session's reads to the tables it locked until UNLOCK TABLES
/// (or a reset).
#[test]
fn lock_tables_is_followed_until_unlock() {
    for sql in ["LOCK TABLES t READ", "lock table t write, u read", "UPDATE t SET a = 1; LOCK TABLES t WRITE"] {
        let mut s = after(&[sql]);
        assert!(s.locked && !s.unfollowed, "{sql}");
        s.observe(b"UNLOCK TABLES");
        assert!(!s.locked, "{sql}");
    }
    let mut s = after(&["LOCK TABLES t READ"]);
    s.reset();
    assert!(!s.locked);
    assert!(!after(&["LOCK INSTANCE FOR BACKUP"]).locked);
}

#[test]
fn character_sets_and_databases_make_the_servers_view_stale() {
    for sql in ["SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci", "SET character_set_results = 'binary'", "USE `other`", "use x"] {
        let s = after(&[sql]);
        assert!(s.stale && !s.unfollowed, "{sql}");
    }
}

#[test]
fn a_client_character_set_the_tokenizer_misreads_is_not_followed() {
    for sql in [
        "SET NAMES gbk",
        "SET NAMES 'big5' COLLATE big5_bin",
        "SET CHARACTER SET sjis",
        "SET CHARSET cp932",
        "SET character_set_client = gbk",
        "SET @@session.character_set_client = 'GB18030'",
        "SET NAMES DEFAULT",
        "SET character_set_client = @cs",
        "SET character_set_client = CONCAT('g', 'bk')",
        "SET NAMES 'g\\bk'",
        "SET NAMES",
    ] {
        let s = after(&[sql]);
        assert!(s.stale && s.unfollowed, "{sql}");
    }
    for sql in [
        "SET NAMES utf8mb4",
        "SET NAMES 'utf8' COLLATE 'utf8_general_ci'",
        "SET CHARACTER SET latin1",
        "SET character_set_client = utf8mb4, character_set_results = gbk",
        "SET NAMES ujis",
    ] {
        let s = after(&[sql]);
        assert!(s.stale && !s.unfollowed, "{sql}");
    }
    let mut s = SessionState::new(String::new());
    s.client_collation(45);
    s.reset();
    assert!(!s.unfollowed, "utf8mb4_general_ci");
    for id in [28, 1, 13, 95, 248, 1052] {
        let mut s = SessionState::new(String::new());
        s.client_collation(id);
        assert!(s.unfollowed, "collation {id}");
        // COM_RESET_CONNECTION goes back to the connection's character set.
        s.reset();
        assert!(s.unfollowed, "collation {id} after a reset");
    }
}

#[test]
fn binlogging_turned_off_is_remembered() {
    for sql in [
        "SET sql_log_bin = 0",
        "SET SESSION sql_log_bin = OFF",
        "SET @@session.binlog_format = 'STATEMENT'",
        "/*!50000 SET sql_log_bin = 0 */",
        "SET binlog_format = @f",
    ] {
        assert!(after(&[sql]).unlogged, "{sql}");
    }
    assert!(after(&["SET STATEMENT sql_log_bin = 0 FOR UPDATE t SET a = 1"]).unlogged);
    assert!(after(&["SET STATEMENT max_statement_time = 5, binlog_format = 'MIXED' FOR DELETE FROM t"]).unlogged);
    assert!(!after(&["SET STATEMENT max_statement_time = 5, sql_log_bin = 1 FOR DELETE FROM t"]).unlogged);
    for sql in ["SET sql_log_bin = 1", "SET binlog_format = 'ROW'", "SET sql_mode = ''"] {
        assert!(!after(&[sql]).unlogged, "{sql}");
    }
    let mut s = after(&["SET sql_log_bin = 0"]);
    s.reset();
    assert!(!s.unlogged);
}

/// Texts freshet does not follow count if they name the variables as the server reads
/// them; a string, a comment or a string in an executable comment does not.
#[test]
fn binlogging_is_read_from_words_not_strings() {
    for sql in [
        "/*!50000 SET sql_log_bin = 0 */",
        "SELECT 1; /*M!100100 SET `sql_log_bin` = 0 */",
        "BEGIN NOT ATOMIC SET @@session.binlog_format = 'STATEMENT'; UPDATE t SET a = 1; END",
        "EXECUTE IMMEDIATE 'SET sql_log_bin = 0'",
        "EXECUTE IMMEDIATE 'EXECUTE IMMEDIATE ''SET sql_log_bin = 0'''",
        "SELECT 1 /*!50000 , 1 /* nested */ */, 'sql_log_bin'",
    ] {
        assert!(after(&[sql]).unlogged, "{sql}");
    }
    for sql in [
        "SELECT /*!10000 'sql_log_bin', */ 1",
        "DO /*!10000 \"binlog_format\", */ 9",
        "EXECUTE IMMEDIATE 'SELECT ''sql_log_bin'''",
        "CALL p('sql_log_bin')",
        "BEGIN NOT ATOMIC SELECT 'sql_log_bin'; END",
        "PREPARE s FROM 'DO ''sql_log_bin'''",
    ] {
        assert!(!after(&[sql]).unlogged, "{sql}");
    }
}

/// A PREPAREd text turns binlogging off when it is EXECUTEd, until it is deallocated.
#[test]
fn a_prepared_text_turns_binlogging_off_when_executed() {
    assert!(!after(&["PREPARE s FROM 'SET sql_log_bin = 0'"]).unlogged);
    assert!(after(&["PREPARE s FROM 'SET sql_log_bin = 0'", "EXECUTE s"]).unlogged);
    assert!(after(&["PREPARE `S` FROM \"SET STATEMENT sql_log_bin = 0 FOR DELETE FROM t\"", "EXECUTE s USING @a"]).unlogged);
    assert!(!after(&["PREPARE s FROM 'SET sql_log_bin = 0'", "EXECUTE t"]).unlogged);
    assert!(!after(&["PREPARE s FROM 'SET sql_log_bin = 0'", "DEALLOCATE PREPARE s", "EXECUTE s"]).unlogged);
    assert!(!after(&["PREPARE s FROM 'SET sql_log_bin = 0'", "PREPARE s FROM 'DO 1'", "EXECUTE s"]).unlogged);
    assert!(!after(&["PREPARE s FROM 'SET sql_log_bin = 0'", "DROP PREPARE s", "EXECUTE s"]).unlogged);
    // Past the bound, preparing one more counts at once.
    let names: Vec<String> = (0..=PREPARED_UNLOGGING).map(|i| format!("PREPARE s{i} FROM 'SET sql_log_bin = 0'")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert!(after(&names).unlogged);
}

/// Which statement of a text set `unlogged`: a reply that refused it means it did not run.
#[test]
fn the_statement_that_turned_binlogging_off_is_known() {
    let at = |sql: &str| after(&[sql]).unlogged_at;
    assert_eq!(at("SET sql_log_bin = 0"), Some(0));
    assert_eq!(at("DO 1; SET sql_log_bin = 0; DO 2"), Some(1));
    assert_eq!(at("DO 1;; DO 2; SET STATEMENT sql_log_bin = 0 FOR DO 3"), Some(2));
    assert_eq!(at("DO 1; /*!1 SET sql_log_bin = 0 */"), Some(0), "an executable comment: the whole text's");
    assert_eq!(at("DO 1"), None);
}
