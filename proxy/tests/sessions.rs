//! Random sessions: one random sequence of statements runs on a connection to the server and
//! on one through freshet, as the same user, and every answer (column definitions, rows, or
//! the error) must be the same. The statements are what applications and hostile clients do
//! to a session between cached reads: SETs of what the session probe reads and of what it
//! does not, USE of a database with a decoy table of the cached table's name, temporary
//! tables that shadow it, transactions and autocommit, LOCK TABLES, executable comments,
//! SET STATEMENT, stored code that sets session variables, PREPARE of SQL text,
//! COM_RESET_CONNECTION and COM_CHANGE_USER, writes, several statements in one text, and
//! reads of the diagnostics right after a read. The cached reads are text and prepared.
//!
//! A write runs on the server's connection first and then, once freshet has applied it,
//! through freshet, so that freshet's session wrote last and read-your-writes makes its next
//! cached read see both. (Without the wait, a second run that changes nothing, such as a
//! DELETE of a row already gone, logs nothing for read-your-writes to wait for, and a read
//! right after it may rightly not see the other session's write yet.) Statements
//! whose answers may differ for reasons freshet documents are not generated: the warning
//! count of a served answer, and `FOUND_ROWS()` after a write that followed a hit.
//!
//! `FRESHET_SESSION_SEED` picks the sequence and `FRESHET_SESSION_STEPS` its length.

mod common;

use common::answers::*;
use common::*;
use freshet_testkit::rng::Rng;
use mysql_async::prelude::*;
use mysql_async::{Conn, Value};

const TABLE_DDL: &str = "CREATE TABLE rs_items (id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(40) NOT NULL, \
     amount DECIMAL(10,3) NOT NULL, ts TIMESTAMP NULL, KEY (k)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci";

const NAMES: [&str; 10] = ["Ana", "ana", "Ána", "Bob", "bob ", "Zoë", "zoe", "Ærø", "ß", "ss"];

/// (cache name, its query, a text read of it with `{}` for the key, the key's kind).
const CACHES: [(&str, &str, Key); 5] = [
    ("rs_point", "SELECT id, k, name, amount FROM rs_items WHERE id = ?", Key::Id),
    ("rs_ordered", "SELECT id, name FROM rs_items WHERE k = ? ORDER BY name, id", Key::K),
    ("rs_sums", "SELECT k, COUNT(*) AS n, AVG(amount) AS a, SUM(amount) AS s FROM rs_items WHERE k = ? GROUP BY k", Key::K),
    ("rs_times", "SELECT id, ts FROM rs_items WHERE k = ? ORDER BY id", Key::K),
    ("rs_named", "SELECT id, k FROM rs_items WHERE name = ? ORDER BY id", Key::Name),
];

/// SETs and other statements that change nothing but session state, none of them a write or
/// a transaction's start or end (those are chosen apart, see [`Model`]).
const SETTINGS: &[&str] = &[
    "SET sql_select_limit = 2",
    "SET sql_select_limit = DEFAULT",
    "SET SESSION sql_select_limit = 1",
    "SET time_zone = '+02:00'",
    "SET time_zone = '+00:00'",
    "SET @@session.time_zone = 'SYSTEM'",
    "SET div_precision_increment = 1",
    "SET div_precision_increment = DEFAULT",
    "SET NAMES utf8mb4",
    "SET NAMES latin1",
    "SET NAMES utf8mb3",
    "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci",
    "SET character_set_results = NULL",
    "SET character_set_results = latin1",
    "SET collation_connection = utf8mb4_bin",
    "SET sql_mode = 'STRICT_TRANS_TABLES'",
    "SET sql_mode = DEFAULT",
    "SET sql_mode = 'ANSI_QUOTES'",
    "SET sql_mode = 'NO_BACKSLASH_ESCAPES'",
    "SET sql_mode = 'PAD_CHAR_TO_FULL_LENGTH'",
    "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ONLY_FULL_GROUP_BY')",
    "SET sql_auto_is_null = 1",
    "SET max_sort_length = 8",
    "SET optimizer_switch = 'index_merge=off'",
    "SET group_concat_max_len = 4",
    "SET @x = 5",
    "SET @x := (SELECT COUNT(*) FROM rs_items)",
    "SET innodb_lock_wait_timeout = 2",
    "DO 1",
    "SELECT 1",
    "SELECT @x",
    "USE rs_decoy",
    "USE freshet_test",
    "CREATE TEMPORARY TABLE rs_items (id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(40) NOT NULL, amount DECIMAL(10,3) NOT NULL, \
     ts TIMESTAMP NULL) SELECT 1 AS id, 1 AS k, 'temporary' AS name, 1 AS amount, NULL AS ts",
    "DROP TEMPORARY TABLE IF EXISTS rs_items",
    "SELECT rs_limit(1)",
    "SELECT rs_limit(0) FROM rs_items WHERE id = 1",
    "CALL rs_limit_proc(3)",
    "PREPARE rs_stmt FROM 'SET sql_select_limit = 1'",
    "EXECUTE rs_stmt",
    "/*!40101 SET sql_select_limit = 1 */",
    "SELECT 1 /*! , 2 */",
    "SET STATEMENT sql_select_limit = 1 FOR SELECT id, name FROM rs_items WHERE k = 1 ORDER BY name, id",
    "SET STATEMENT max_sort_length = 4 FOR SELECT id FROM rs_items WHERE k = 2",
    "LOCK TABLES rs_items READ",
    "UNLOCK TABLES",
    "SET NAMES gbk",
    "SET character_set_client = latin1",
    "SET NAMES binary",
    "SET lc_messages = 'de_DE'",
    "SET max_join_size = 1",
    "SET sql_big_selects = 1",
    "SET sql_mode = 'ORACLE'",
    "SET sql_mode = 'MSSQL'",
    "SET @@sql_mode := 'ansi'",
    "SET STATEMENT sql_mode = 'ANSI_QUOTES' FOR SELECT id FROM rs_items WHERE name = \"Bob\"",
    "SET ROLE NONE",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
    "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    "SET sql_select_limit = 0",
    // On the tracker's list of settings that change no cached SELECT.
    "SET sql_safe_updates = 1",
    "SET foreign_key_checks = 0",
    "SET unique_checks = 0",
    "SET sql_notes = 0",
    "SET sql_warnings = 1",
    "SET profiling = 1",
    "SET tx_read_only = 1",
    "SET tx_read_only = 0",
    "SET SESSION TRANSACTION READ ONLY",
    "SET net_write_timeout = 60",
    "SET session_track_schema = OFF",
    "SELECT SQL_CALC_FOUND_ROWS id FROM rs_items WHERE k = 1 LIMIT 1",
    "SELECT id, k, name, amount FROM rs_items WHERE id = 3 LOCK IN SHARE MODE",
    "HANDLER rs_items OPEN",
    "HANDLER rs_items READ FIRST",
    "HANDLER rs_items CLOSE",
    "CREATE OR REPLACE TEMPORARY TABLE rs_items LIKE rs_decoy.rs_items",
    "SELECT '\\'; SET @y = 1 -- '",
    "SELECT 'a\\'; SELECT 2 -- '",
];

/// If the generator's [`Model`] is wrong, one connection waits for the other's row lock:
/// briefly, so that the test fails instead of hanging.
const LOCK_WAIT: &str = "SET innodb_lock_wait_timeout = 2, lock_wait_timeout = 2";

/// Reads of the diagnostics, chosen only right after a read that succeeded.
const DIAGNOSTICS: &[&str] = &["SELECT FOUND_ROWS()", "SELECT ROW_COUNT()", "SHOW WARNINGS", "SHOW COUNT(*) WARNINGS"];

/// What the generator knows of the session, to keep the two connections from waiting on
/// each other's row locks: no write while either may hold some.
#[derive(Default)]
struct Model {
    in_transaction: bool,
    autocommit_off: bool,
}

impl Model {
    fn writes_allowed(&self) -> bool {
        !self.in_transaction && !self.autocommit_off
    }
}

/// A text read of a cached query: its text with the key's literal, sometimes spelled another way.
fn read_text(rng: &mut Rng, query: &str, literal: &str) -> String {
    let sql = query.replace('?', literal);
    if rng.below(6) == 0 && query.contains("= ?") {
        // An IN list, answered by merging partitions where the view allows it.
        let other = if literal.starts_with('\'') { format!("'{}'", pick(rng, &NAMES)) } else { format!("{}", rng.below(6)) };
        return query.replace("= ?", &format!("IN ({literal}, {other})"));
    }
    match rng.below(6) {
        0 => sql.replace("SELECT ", "select /* a comment */ "),
        1 => format!("{sql};"),
        _ => sql,
    }
}

async fn setup() {
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS rs_items").await.unwrap();
    admin.query_drop(TABLE_DDL).await.unwrap();
    let rows: Vec<String> = (0..36)
        .map(|id| {
            let name = NAMES[id % NAMES.len()];
            let ts = if id % 4 == 0 { "NULL".to_string() } else { format!("'2024-01-01 {:02}:30:00'", id % 24) };
            format!("({id}, {}, '{name}', {}.{:03}, {ts})", id % 5, id * 7 % 50, id * 37 % 1000)
        })
        .collect();
    admin.query_drop(format!("INSERT INTO rs_items VALUES {}", rows.join(", "))).await.unwrap();
    admin.query_drop("CREATE DATABASE IF NOT EXISTS rs_decoy").await.unwrap();
    admin.query_drop("DROP TABLE IF EXISTS rs_decoy.rs_items").await.unwrap();
    admin.query_drop(TABLE_DDL.replace("rs_items", "rs_decoy.rs_items")).await.unwrap();
    admin.query_drop("INSERT INTO rs_decoy.rs_items VALUES (1, 1, 'decoy', 2, NULL), (3, 1, 'Ana', 3, NULL)").await.unwrap();
    admin.query_drop("DROP FUNCTION IF EXISTS rs_limit").await.unwrap();
    admin
        .query_drop(
            "CREATE FUNCTION rs_limit(n INT) RETURNS INT \
             DETERMINISTIC BEGIN IF n > 0 THEN SET SESSION sql_select_limit = n; ELSE SET SESSION sql_select_limit = DEFAULT; END IF; RETURN n; END",
        )
        .await
        .unwrap();
    admin.query_drop("DROP PROCEDURE IF EXISTS rs_limit_proc").await.unwrap();
    admin.query_drop("CREATE PROCEDURE rs_limit_proc(n INT) SET SESSION sql_select_limit = n").await.unwrap();
}

/// `[consistency] max_privilege_age` of these tests.
const PRIVILEGE_AGE: std::time::Duration = std::time::Duration::from_secs(1);

fn config() -> String {
    let mut config = String::from(
        "[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\n[consistency]\nmax_lag = \"5s\"\nread_your_writes = true\nryw_timeout = \"3s\"\nmax_privilege_age = \"1s\"\n",
    );
    for (name, query, _) in CACHES {
        config.push_str(&format!("[[cache]]\nname = \"{name}\"\nquery = \"{query}\"\n"));
    }
    config
}

/// One step: a text for both connections (a cached read's, or any other), or a prepared read.
enum Step {
    Read(String),
    Text(String),
    /// A prepared read: the query, its key, and whether the statement is prepared afresh
    /// (else the driver's cached statement, prepared at an earlier step).
    Prepared(&'static str, Value, bool),
    Reset,
    ChangeUser,
}

fn step(rng: &mut Rng, model: &mut Model, after_read: bool) -> Step {
    let read = |rng: &mut Rng| {
        let (_, query, kind) = *pick(rng, &CACHES);
        let (value, literal) = key(rng, kind, &NAMES);
        (query, value, read_text(rng, query, &literal))
    };
    match rng.below(100) {
        0..=29 => Step::Read(read(rng).2),
        30..=44 => {
            let (query, value, _) = read(rng);
            Step::Prepared(query, value, rng.below(2) == 0)
        }
        45..=49 if after_read => Step::Text(pick(rng, DIAGNOSTICS).to_string()),
        45..=64 => Step::Text(pick(rng, SETTINGS).to_string()),
        65..=72 if model.writes_allowed() => {
            let id = rng.below(40) * 3 / 2;
            let write = match rng.below(4) {
                0 => format!("UPDATE rs_items SET amount = amount + 1.5, name = '{}' WHERE id = {id}", pick(rng, &NAMES)),
                1 => {
                    format!("INSERT INTO rs_items VALUES ({id}, {}, 'new', 1, NOW()) ON DUPLICATE KEY UPDATE k = {}", id % 5, rng.below(5))
                }
                2 => format!("DELETE FROM rs_items WHERE id = {id}"),
                _ => format!("UPDATE rs_items SET ts = '2024-06-01 12:00:00' WHERE k = {}", rng.below(5)),
            };
            // A write under MariaDB's SET STATEMENT is a write all the same.
            Step::Text(if rng.below(5) == 0 { format!("SET STATEMENT max_statement_time = 10 FOR {write}") } else { write })
        }
        73..=79 => {
            let sql = *pick(
                rng,
                &[
                    "BEGIN",
                    "START TRANSACTION READ ONLY",
                    "START TRANSACTION WITH CONSISTENT SNAPSHOT",
                    "COMMIT",
                    "ROLLBACK",
                    "SET autocommit = 0",
                    "SET autocommit = 1",
                ],
            );
            match sql {
                "BEGIN" | "START TRANSACTION READ ONLY" | "START TRANSACTION WITH CONSISTENT SNAPSHOT" => model.in_transaction = true,
                "COMMIT" | "ROLLBACK" => model.in_transaction = false,
                "SET autocommit = 0" => model.autocommit_off = true,
                // It commits only if autocommit was off; a BEGIN's transaction stays open.
                _ => {
                    model.in_transaction &= !model.autocommit_off;
                    model.autocommit_off = false;
                }
            }
            Step::Text(sql.to_string())
        }
        80..=89 => {
            // Several statements in one text: settings, then a read.
            let mut parts: Vec<String> = (0..1 + rng.below(2)).map(|_| pick(rng, SETTINGS).to_string()).collect();
            parts.push(read(rng).2.trim_end_matches(';').to_string());
            Step::Text(parts.join("; "))
        }
        90..=94 => {
            *model = Model::default();
            Step::Reset
        }
        95..=96 => {
            *model = Model::default();
            Step::ChangeUser
        }
        _ => Step::Read(read(rng).2),
    }
}

async fn run(conn: &mut Conn, step: &Step, user: Option<&str>) -> Answer {
    match step {
        Step::Read(sql) | Step::Text(sql) => text(conn, sql).await,
        Step::Prepared(sql, key, true) => {
            let statement = conn.prep(*sql).await.map_err(server_error)?;
            let answer = prepared(conn, statement.clone(), key.clone()).await;
            conn.close(statement).await.map_err(server_error)?;
            answer
        }
        Step::Prepared(sql, key, false) => prepared(conn, *sql, key.clone()).await,
        Step::Reset => {
            conn.reset().await.map_err(server_error)?;
            conn.query_drop(LOCK_WAIT).await.map_err(server_error)?;
            Ok(Vec::new())
        }
        Step::ChangeUser => {
            let to = mysql_async::ChangeUserOpts::default()
                .with_user(Some(user.unwrap_or(USER).into()))
                .with_pass(Some(if user.is_some() { "pw" } else { PASSWORD }.into()))
                .with_db_name(Some(DB.into()));
            conn.change_user(to).await.map_err(server_error)?;
            conn.query_drop(LOCK_WAIT).await.map_err(server_error)?;
            Ok(Vec::new())
        }
    }
}

/// Whether a step's text is one of the generator's writes (maybe under SET STATEMENT).
fn is_write(sql: &str) -> bool {
    let statement = sql.split_once(" FOR ").filter(|_| sql.starts_with("SET STATEMENT ")).map_or(sql, |(_, s)| s);
    ["UPDATE rs_items", "INSERT INTO rs_items", "DELETE FROM rs_items"].iter().any(|w| statement.starts_with(w))
}

fn describe(step: &Step) -> String {
    match step {
        Step::Read(sql) | Step::Text(sql) => sql.clone(),
        Step::Prepared(sql, key, fresh) => format!("{sql} {}executed with {key:?}", if *fresh { "prepared and " } else { "" }),
        Step::Reset => "COM_RESET_CONNECTION".into(),
        Step::ChangeUser => "COM_CHANGE_USER".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sessions_answer_as_the_server_answers() {
    random_sessions(None).await;
}

/// The same as a user of few rights, which change between the steps: its table-wide and
/// column rights on the cached table, its right to the decoy database. Freshet is waited for
/// after each change (it learns of one from the binlog, within `max_lag`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sessions_of_a_user_whose_rights_change_answer_as_the_server_answers() {
    random_sessions(Some("rs_user")).await;
}

/// The account's rights, each a GRANT or REVOKE of the admin's (errors ignored: a REVOKE of
/// what is not granted).
const RIGHTS: &[&str] = &[
    "GRANT SELECT ON freshet_test.rs_items TO 'rs_user'@'127.0.0.1'",
    "REVOKE SELECT ON freshet_test.rs_items FROM 'rs_user'@'127.0.0.1'",
    "GRANT SELECT (id, k, name) ON freshet_test.rs_items TO 'rs_user'@'127.0.0.1'",
    "REVOKE SELECT (id, k, name) ON freshet_test.rs_items FROM 'rs_user'@'127.0.0.1'",
    "GRANT SELECT (id, ts) ON freshet_test.rs_items TO 'rs_user'@'127.0.0.1'",
    "REVOKE SELECT (id, ts) ON freshet_test.rs_items FROM 'rs_user'@'127.0.0.1'",
    "GRANT SELECT ON rs_decoy.* TO 'rs_user'@'127.0.0.1'",
    "REVOKE SELECT ON rs_decoy.* FROM 'rs_user'@'127.0.0.1'",
];

/// Connection options for `user` (the test's all-privileges user when None).
fn account(addr: &str, user: Option<&str>) -> mysql_async::OptsBuilder {
    match user {
        None => opts(addr),
        Some(user) => opts(addr).user(Some(user)).pass(Some("pw")),
    }
}

/// The tests of this file share their tables: one at a time.
static TABLES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn random_sessions(user: Option<&str>) {
    let _tables = TABLES.lock().await;
    let seed: u64 = std::env::var("FRESHET_SESSION_SEED").map_or(20261129, |s| s.parse().unwrap());
    let steps: usize = std::env::var("FRESHET_SESSION_STEPS").map_or(400, |s| s.parse().unwrap());
    setup().await;
    let mut admin = direct().await;
    if let Some(user) = user {
        admin.query_drop(format!("DROP USER IF EXISTS '{user}'@'127.0.0.1'")).await.unwrap();
        admin.query_drop(format!("CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw'")).await.unwrap();
        admin
            .query_drop(format!(
                "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE ON freshet_test.* TO '{user}'@'127.0.0.1'"
            ))
            .await
            .unwrap();
        admin.query_drop(format!("REVOKE SELECT ON freshet_test.* FROM '{user}'@'127.0.0.1'")).await.unwrap();
        admin.query_drop(format!("GRANT SELECT ON freshet_test.rs_items TO '{user}'@'127.0.0.1'")).await.unwrap();
    }
    let proxy = start_proxy(&config()).await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let hits = || CACHES.iter().map(|(name, ..)| engine.by_name(name).expect("cache exists").stats().hits).sum::<u64>();
    let mut rng = Rng::new(seed);
    let mut model = Model::default();
    let mut d = Conn::new(account(&upstream_addr(), user)).await.expect("direct connection");
    let mut t = Conn::new(account(&proxy.mysql.to_string(), user)).await.expect("connection through freshet");
    let mut watcher = through(&proxy).await;
    for c in [&mut d, &mut t] {
        c.query_drop(LOCK_WAIT).await.unwrap();
    }
    let mut history: Vec<String> = Vec::new();
    let mut after_read = false;
    for _ in 0..steps {
        if user.is_some() && rng.below(12) == 0 {
            let change = *pick(&mut rng, RIGHTS);
            // A GRANT or REVOKE that fails may still take effect in part (REVOKE SELECT (id, ts)
            // when only `id` was granted revokes `id`, answers error 1147, and is not written
            // to the binlog): freshet then forgets what it learnt only after
            // `max_privilege_age`, which is short here.
            if admin.query_drop(change).await.is_err() {
                tokio::time::sleep(PRIVILEGE_AGE + std::time::Duration::from_millis(100)).await;
            }
            caught_up(&mut watcher).await;
            history.push(format!("(the admin) {change}"));
            after_read = false;
            continue;
        }
        let step = step(&mut rng, &mut model, after_read);
        history.push(describe(&step));
        let want = run(&mut d, &step, user).await;
        if let Step::Text(sql) = &step
            && is_write(sql)
        {
            caught_up(&mut watcher).await;
        }
        let before = hits();
        let got = run(&mut t, &step, user).await;
        assert!(
            got == want,
            "seed {seed}, step {} ({}): {}\nthrough freshet: {got:?}\nthe server:      {want:?}\nthe steps before:\n{}",
            history.len(),
            if hits() > before { "answered from a view" } else { "relayed" },
            history.last().unwrap(),
            history[history.len().saturating_sub(60)..history.len() - 1].join("\n")
        );
        if hits() > before {
            history.last_mut().unwrap().push_str("  [answered from a view]");
        }
        after_read = want.is_ok() && matches!(step, Step::Read(_) | Step::Prepared(..));
    }
    // The test means something only if the cache answered some of it (a user whose rights
    // were taken early may rightly be answered by the server only).
    assert!(hits() > 0 || user.is_some(), "seed {seed}: no read was answered from the cache");
}
