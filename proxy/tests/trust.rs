//! Adversarial: a cached read reaches a session only if the server would give that session
//! the same answer. Each case runs the same statements as the same MariaDB user directly and
//! through freshet and compares the answers (rows, column definitions, errors): users with
//! table, column, view and no grants; REVOKE while connected; USE of a forbidden database;
//! CHANGE_USER; decoy and temporary tables; session changes the tokenizer cannot follow;
//! writes that bypass the binlog; admin identities.

mod common;

use std::time::Duration;

use common::*;
use freshet_proxy::cache::{ColumnsKey, Engine, RelayReason};
use mysql_async::prelude::*;
use mysql_async::{Conn, Value};

/// A column as a driver sees it: schema, table, org table, name, type, flags, length.
type ColumnView = (String, String, String, String, u8, u16, u32);
/// One test sets the server's global sql_mode for a moment; a session opened meanwhile by
/// another test of this file (they run concurrently) would start in that mode and be relayed
/// for good (`warm` then failed, 1 run in 3 to 12). Every test holds this shared; the one that
/// changes a global holds it alone.
static SERVER_GLOBALS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// What a statement returned: column definitions and rows, or the server's error.
type Answer = Result<(Vec<ColumnView>, Vec<Vec<Value>>), (u16, String)>;

fn columns_of(cols: &[mysql_async::Column]) -> Vec<ColumnView> {
    cols.iter()
        .map(|c| {
            (
                c.schema_str().into_owned(),
                c.table_str().into_owned(),
                c.org_table_str().into_owned(),
                c.name_str().into_owned(),
                c.column_type() as u8,
                c.flags().bits(),
                c.column_length(),
            )
        })
        .collect()
}

fn server_error(e: mysql_async::Error) -> (u16, String) {
    match e {
        mysql_async::Error::Server(s) => (s.code, s.message),
        other => panic!("not a server error: {other}"),
    }
}

/// A text query's answer.
async fn text(conn: &mut Conn, sql: &str) -> Answer {
    let mut result = conn.query_iter(sql).await.map_err(server_error)?;
    let columns = result.columns().map(|c| columns_of(&c)).unwrap_or_default();
    let rows: Vec<mysql_async::Row> = result.collect().await.map_err(server_error)?;
    Ok((columns, rows.into_iter().map(|r| r.unwrap()).collect()))
}

/// A prepared statement's answer (prepared and executed now).
async fn prepared(conn: &mut Conn, sql: &str, id: i32) -> Answer {
    let mut result = conn.exec_iter(sql, (id,)).await.map_err(server_error)?;
    let columns = result.columns().map(|c| columns_of(&c)).unwrap_or_default();
    let rows: Vec<mysql_async::Row> = result.collect().await.map_err(server_error)?;
    Ok((columns, rows.into_iter().map(|r| r.unwrap()).collect()))
}

fn as_user(addr: &str, user: &str, db: Option<&str>) -> mysql_async::OptsBuilder {
    opts(addr).user(Some(user)).pass(Some("pw")).db_name(db)
}

/// The same user, directly and through freshet.
async fn pair(proxy: &Proxy, user: &str, db: Option<&str>) -> (Conn, Conn) {
    let direct = Conn::new(as_user(&upstream_addr(), user, db)).await.unwrap_or_else(|e| panic!("{user} connects directly: {e}"));
    let through =
        Conn::new(as_user(&proxy.mysql.to_string(), user, db)).await.unwrap_or_else(|e| panic!("{user} connects through freshet: {e}"));
    (direct, through)
}

/// (Re)creates `name`@127.0.0.1 with password `pw` and these grants.
async fn user(name: &str, grants: &[&str]) {
    let mut admin = direct().await;
    admin.query_drop(format!("DROP USER IF EXISTS '{name}'@'127.0.0.1'")).await.unwrap();
    admin.query_drop(format!("CREATE USER '{name}'@'127.0.0.1' IDENTIFIED BY 'pw'")).await.unwrap();
    for g in grants {
        admin.query_drop(format!("GRANT {g} TO '{name}'@'127.0.0.1'")).await.unwrap();
    }
}

/// `table`: id, owner, secret; ids 1..=20, `secret` with a non-ASCII letter.
async fn secrets(table: &str) {
    let mut conn = direct().await;
    conn.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.unwrap();
    conn.query_drop(format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, secret VARCHAR(50) NOT NULL) DEFAULT CHARSET=utf8mb4"
    ))
    .await
    .unwrap();
    let values: Vec<String> = (1..=20).map(|i| format!("({i}, 'owner{}', 'sécret {}')", i % 3, i * 300)).collect();
    conn.query_drop(format!("INSERT INTO {table} VALUES {}", values.join(", "))).await.unwrap();
}

fn config(table: &str, admins: &str) -> String {
    format!(
        "[admin]\nusers = [{admins}]\n[fill]\ntimeout = \"3s\"\n[consistency]\nmax_lag = \"5s\"\n[[cache]]\nname = \"secrets\"\nquery = \"SELECT id, owner, secret FROM {table} WHERE id = ?\"\n"
    )
}

fn engine(proxy: &Proxy) -> std::sync::Arc<Engine> {
    proxy.engine.get().expect("the cache engine started").clone()
}

fn relayed(proxy: &Proxy, reason: RelayReason) -> u64 {
    engine(proxy).counters.relayed[reason.index()].get()
}

fn hits(proxy: &Proxy) -> u64 {
    engine(proxy).by_name("secrets").expect("cache exists").stats().hits
}

/// Reads `sql` through freshet as the test's all-privileges user until freshet answers it
/// from the cache (the key is then warm and the column definitions captured).
async fn warm(proxy: &Proxy, sql: &str) {
    let mut conn = through(proxy).await;
    for _ in 0..100 {
        let before = hits(proxy);
        let _ = text(&mut conn, sql).await.unwrap();
        if hits(proxy) > before {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{sql} was never answered from the cache");
}

/// Reads `sql` through freshet until the cache answers it (true), each answer the server's;
/// false if it never does. Other tests' GRANTs, seen in the same binlog, make freshet learn
/// an account's rights anew now and then, so the first reads may be relayed.
async fn served_from_cache(proxy: &Proxy, direct: &mut Conn, through: &mut Conn, sql: &str) -> bool {
    let want = text(direct, sql).await;
    // Up to 10 s: the other tests of this file GRANT and REVOKE concurrently, and each
    // privilege change in the binlog makes freshet forget what it learned (the next read of
    // each account is relayed to learn again); on a loaded machine that can take a while.
    for _ in 0..500 {
        let before = hits(proxy);
        assert_eq!(text(through, sql).await, want, "{sql}");
        if hits(proxy) > before {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Runs `sql` as text three times on both connections: the answers must be the server's.
async fn same_text(direct: &mut Conn, through: &mut Conn, sql: &str, what: &str) {
    let want = text(direct, sql).await;
    for round in 0..3 {
        assert_eq!(text(through, sql).await, want, "{what}: {sql} (read {round})");
    }
}

async fn same_prepared(direct: &mut Conn, through: &mut Conn, sql: &str, id: i32, what: &str) {
    let want = prepared(direct, sql, id).await;
    for round in 0..3 {
        assert_eq!(prepared(through, sql, id).await, want, "{what}: {sql} with {id} (execute {round})");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_grant_gets_the_servers_answer() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_grants").await;
    let mut admin = direct().await;
    admin.query_drop("CREATE OR REPLACE SQL SECURITY DEFINER VIEW tr_grants_v AS SELECT id, owner, secret FROM tr_grants").await.unwrap();
    admin.query_drop("CREATE TABLE IF NOT EXISTS tr_other (id INT PRIMARY KEY)").await.unwrap();
    user("tr_full", &["SELECT ON freshet_test.tr_grants"]).await;
    user("tr_cols", &["SELECT (id, owner) ON freshet_test.tr_grants"]).await;
    user("tr_view", &["SELECT ON freshet_test.tr_grants_v"]).await;
    user("tr_none", &["SELECT ON freshet_test.tr_other"]).await;
    let proxy = start_proxy(&config("tr_grants", "\"freshet\"")).await;
    // Warm keys 1..=5 with freshet's test user; keys 10.. stay cold.
    for id in 1..=5 {
        warm(&proxy, &format!("SELECT id, owner, secret FROM tr_grants WHERE id = {id}")).await;
    }
    let stmt = "SELECT id, owner, secret FROM tr_grants WHERE id = ?";
    let denied_before = relayed(&proxy, RelayReason::Denied);
    for who in ["tr_none", "tr_cols", "tr_view", "tr_full"] {
        let (mut d, mut t) = pair(&proxy, who, Some(DB)).await;
        for sql in [
            "SELECT id, owner, secret FROM tr_grants WHERE id = 1",
            "SELECT id, owner, secret FROM tr_grants WHERE id = 12",
            "SELECT tr_grants.id, tr_grants.owner, tr_grants.secret FROM tr_grants WHERE tr_grants.id = 2",
            "SELECT id, owner, secret FROM tr_grants WHERE id IN (3, 4, 13)",
            "SELECT id, owner, secret FROM tr_grants_v WHERE id = 1",
        ] {
            same_text(&mut d, &mut t, sql, who).await;
        }
        for id in [1, 2, 15] {
            same_prepared(&mut d, &mut t, stmt, id, who).await;
        }
        if who == "tr_none" {
            // Counted, and SHOW PROXIED QUERIES says why the shape was relayed.
            assert!(relayed(&proxy, RelayReason::Denied) > denied_before);
            let shapes: Vec<(String, u64, String, String, String)> =
                through(&proxy).await.query("SHOW PROXIED QUERIES LIMIT 100").await.unwrap();
            assert!(shapes.iter().any(|s| s.0.contains("tr_grants") && s.4.contains("last relayed for: denied")), "{shapes:?}");
        }
    }
    // The user with the table grant is served from the cache once freshet has learned it may.
    let (mut d, mut t) = pair(&proxy, "tr_full", Some(DB)).await;
    let sql = "SELECT id, owner, secret FROM tr_grants WHERE id = 3";
    assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "a user who may read the table is answered from the cache");
}

/// A REVOKE that fails may take effect in part and leave no trace in the binlog: MariaDB runs
/// `REVOKE SELECT (secret, extra)` for a user granted `secret` but not `extra` by revoking
/// `secret`, answers error 1147, and logs nothing. Sent through freshet (an application that
/// manages its tenants' grants), freshet sees the statement itself, and forgets what it learnt
/// once the server has run it, whatever the server answered. Without that, the account was
/// served for `max_privilege_age` (60 s by default) what the server refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_privilege_statement_sent_through_freshet_is_obeyed_whatever_it_answers() {
    let _globals = SERVER_GLOBALS.read().await;
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS tr_partial").await.unwrap();
    admin
        .query_drop("CREATE TABLE tr_partial (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, secret VARCHAR(50) NOT NULL, extra INT)")
        .await
        .unwrap();
    admin.query_drop("INSERT INTO tr_partial VALUES (1, 'owner1', 'the secret', 7), (2, 'owner2', 'another', 8)").await.unwrap();
    user("tr_part", &["SELECT (id, owner, secret) ON freshet_test.tr_partial"]).await;
    let proxy = start_proxy(&config("tr_partial", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_partial WHERE id = 1";
    warm(&proxy, sql).await;
    let (mut d, mut t) = pair(&proxy, "tr_part", Some(DB)).await;
    assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "served from the cache before the revoke");
    let revoke = "REVOKE SELECT (secret, extra) ON freshet_test.tr_partial FROM 'tr_part'@'127.0.0.1'";
    let answer = through(&proxy).await.query_drop(revoke).await.map_err(server_error);
    assert_eq!(answer.map_err(|(code, _)| code), Err(1147), "the server refuses the REVOKE");
    let want = text(&mut d, sql).await;
    assert!(want.as_ref().is_err_and(|(code, _)| *code == 1143), "yet it took `secret` away: {want:?}");
    same_text(&mut d, &mut t, sql, "after a failed REVOKE sent through freshet").await;
}

/// MariaDB keeps a session's global and database privileges in the session: after `REVOKE
/// SELECT ON db.*`, a session that connected before it still reads, a new one is refused. What
/// the old session's read shows is its own, not the account's: a new session of the account
/// must get the server's refusal, however often the old one reads (each read after freshet
/// forgot, or after `max_privilege_age`, is relayed to learn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_old_session_may_read_is_not_what_its_account_may() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_oldsess").await;
    let proxy = start_proxy(&config("tr_oldsess", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_oldsess WHERE id = 1";
    warm(&proxy, sql).await;
    for (account, grant, revoke) in [
        ("tr_olddb", "SELECT ON freshet_test.*", "REVOKE SELECT ON freshet_test.* FROM 'tr_olddb'@'127.0.0.1'"),
        ("tr_oldall", "SELECT ON *.*", "REVOKE SELECT ON *.* FROM 'tr_oldall'@'127.0.0.1'"),
    ] {
        // A column of its own keeps the database open to new sessions after the revoke.
        user(account, &[grant, "SELECT (id) ON freshet_test.tr_oldsess"]).await;
        let (mut d, mut old) = pair(&proxy, account, Some(DB)).await;
        assert!(served_from_cache(&proxy, &mut d, &mut old, sql).await, "{account} served before the revoke");
        direct().await.query_drop(revoke).await.unwrap();
        caught_up(&mut through(&proxy).await).await;
        // The old sessions still read, directly and through freshet.
        same_text(&mut d, &mut old, sql, "the old session after the revoke").await;
        assert!(text(&mut d, sql).await.is_ok(), "the server still answers the old session");
        // A new session of the account is refused, by the server and by freshet.
        let (mut d2, mut new) = pair(&proxy, account, Some(DB)).await;
        let want = text(&mut d2, sql).await;
        assert!(want.is_err(), "the server refuses a new session: {want:?}");
        for round in 0..3 {
            same_text(&mut d, &mut old, sql, "the old session again").await;
            assert_eq!(text(&mut new, sql).await, want, "{account}: a new session after the revoke (round {round})");
        }
    }
}

/// The other way round: after `GRANT SELECT ON db.*` (or `ON *.*`) a session that logged in
/// before is still refused (its database and global privileges are its login's), and a new one
/// reads. What the new session learns is its account's, not the old session's: the old one
/// must get the server's refusal, before and after COM_RESET_CONNECTION (which does not
/// re-read its privileges). An audit: the old session was served, even one of an account
/// dropped and created again under its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_session_is_not_served_what_a_newer_one_may_read() {
    // Alone: a privilege change of another test between the new session's read and the old
    // one's would make freshet forget, and the old session's read would prove nothing.
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_widen").await;
    let proxy = start_proxy(&config("tr_widen", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_widen WHERE id = 1";
    warm(&proxy, sql).await;
    for (account, grant) in [("tr_widendb", "GRANT SELECT ON freshet_test.*"), ("tr_widenall", "GRANT SELECT ON *.*")] {
        // `id` alone: refused the query (1143) until the grant.
        user(account, &["SELECT (id) ON freshet_test.tr_widen"]).await;
        let (mut d, mut old) = pair(&proxy, account, Some(DB)).await;
        same_text(&mut d, &mut old, sql, "before the grant").await;
        direct().await.query_drop(format!("{grant} TO '{account}'@'127.0.0.1'")).await.unwrap();
        caught_up(&mut through(&proxy).await).await;
        let want = text(&mut d, sql).await;
        assert!(want.as_ref().is_err_and(|(code, _)| *code == 1143), "the server still refuses the old session: {want:?}");
        let (mut d2, mut new) = pair(&proxy, account, Some(DB)).await;
        assert!(served_from_cache(&proxy, &mut d2, &mut new, sql).await, "{account}: a new session is served after the grant");
        same_text(&mut d, &mut old, sql, &format!("{account}: the old session after a new one was served")).await;
        old.reset().await.unwrap();
        d.reset().await.unwrap();
        same_text(&mut d, &mut old, sql, &format!("{account}: the old session after COM_RESET_CONNECTION")).await;
    }
}

/// The same when the GRANT is in no binlog: `GRANT ... TO u, nobody` fails for the account
/// that does not exist (1133), gives `u` the grant, and is not logged, so freshet sees no
/// change at all. A session of `u` that logged in before it is still refused; one that logs in
/// after is not, and what it learns must not reach the older one (an audit: the old session
/// was served for as long as new ones logged in, past any `max_privilege_age`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_session_is_not_served_what_a_newer_one_learnt_after_an_unseen_grant() {
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_widen_unseen").await;
    // What the old session's refusal taught its account ages out within a second, so that new
    // sessions learn and are served.
    let proxy =
        start_proxy(&config("tr_widen_unseen", "\"freshet\"").replace("[consistency]\n", "[consistency]\nmax_privilege_age = \"1s\"\n"))
            .await;
    let sql = "SELECT id, owner, secret FROM tr_widen_unseen WHERE id = 1";
    warm(&proxy, sql).await;
    let account = "tr_widen_u";
    user(account, &["SELECT (id) ON freshet_test.tr_widen_unseen"]).await;
    let (mut d, mut old) = pair(&proxy, account, Some(DB)).await;
    same_text(&mut d, &mut old, sql, "before the grant").await;
    let failed = direct()
        .await
        .query_drop(format!("GRANT SELECT ON freshet_test.* TO '{account}'@'127.0.0.1', 'tr_widen_nobody'@'127.0.0.1'"))
        .await;
    assert!(failed.is_err(), "the GRANT fails for the account that does not exist");
    let want = text(&mut d, sql).await;
    assert!(want.as_ref().is_err_and(|(code, _)| *code == 1143), "the server still refuses the old session: {want:?}");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    for round in 0..3 {
        let (mut d2, mut new) = pair(&proxy, account, Some(DB)).await;
        assert!(served_from_cache(&proxy, &mut d2, &mut new, sql).await, "a new session is served after the grant (round {round})");
        same_text(&mut d, &mut old, sql, &format!("the old session after a new one was served (round {round})")).await;
    }
}

/// A session whose privileges the server read again after its login (USE, COM_INIT_DB, SET
/// ROLE) holds those of that moment: after an unseen GRANT ON db.*, a session that logged in
/// earlier and then ran USE reads, and what it learns is not for a session that logged in
/// after it but before the GRANT, which the server refuses (an audit: it was served).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_read_its_rights_again_teaches_only_itself() {
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_reread").await;
    let proxy = start_proxy(&config("tr_reread", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_reread WHERE id = 1";
    warm(&proxy, sql).await;
    let account = "tr_reread_u";
    user(account, &["SELECT (id) ON freshet_test.tr_reread"]).await;
    let (mut d1, mut s1) = pair(&proxy, account, Some(DB)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (mut d5, mut s5) = pair(&proxy, account, Some(DB)).await;
    let failed = direct()
        .await
        .query_drop(format!("GRANT SELECT ON freshet_test.* TO '{account}'@'127.0.0.1', 'tr_reread_nobody'@'127.0.0.1'"))
        .await;
    assert!(failed.is_err(), "the GRANT fails for the account that does not exist");
    for conn in [&mut d1, &mut s1] {
        conn.query_drop(format!("USE {DB}")).await.unwrap();
    }
    let want = text(&mut d1, sql).await;
    assert!(want.is_ok(), "the session that ran USE reads: {want:?}");
    same_text(&mut d1, &mut s1, sql, "the session that ran USE").await;
    let want = text(&mut d5, sql).await;
    assert!(want.as_ref().is_err_and(|(code, _)| *code == 1143), "the later login is still refused: {want:?}");
    same_text(&mut d5, &mut s5, sql, "a session that logged in after the first and before the grant").await;
}

/// COM_RESET_CONNECTION does not make the server read a session's privileges again (nor
/// change its account), so what a session learnt holds across it. Pools that reset each
/// connection at checkout (MySqlConnector's default) read cached rows after the first read of
/// each cache, also once their connections are older than `max_privilege_age` (an audit: all
/// reads were relayed, as each reset cleared what the session had learnt and an old session
/// teaches only itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reset_at_each_checkout_keeps_what_it_learnt() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_pooled").await;
    let proxy =
        start_proxy(&config("tr_pooled", "\"freshet\"").replace("[consistency]\n", "[consistency]\nmax_privilege_age = \"1s\"\n")).await;
    let sql = "SELECT id, owner, secret FROM tr_pooled WHERE id = 1";
    warm(&proxy, sql).await;
    let account = "tr_pooled_u";
    user(account, &["SELECT ON freshet_test.tr_pooled"]).await;
    let (mut d, mut pooled) = pair(&proxy, account, Some(DB)).await;
    // Older than the age: what it learns is its own.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(served_from_cache(&proxy, &mut d, &mut pooled, sql).await, "served before any reset");
    // Another test's privilege change makes the session learn again, once: a few rounds.
    let (mut served, rounds) = (0, 20);
    for _ in 0..rounds {
        pooled.reset().await.unwrap();
        let before = hits(&proxy);
        assert_eq!(text(&mut pooled, sql).await, text(&mut d, sql).await, "after a reset");
        served += u64::from(hits(&proxy) > before);
    }
    assert!(served >= rounds / 2, "{served} of {rounds} reads after a reset each were served from the cache");
}

/// A login whose password expired is in the server's sandbox: every statement but SET
/// PASSWORD is refused (1820), the probe's too. Once it has set its password it reads as
/// any session does, and is served (an audit: the probe's refusal left the session
/// unfollowed, relayed for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_password_session_is_served_once_it_sets_one() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_expired").await;
    let proxy = start_proxy(&config("tr_expired", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_expired WHERE id = 1";
    warm(&proxy, sql).await;
    let account = "tr_expired_u";
    user(account, &["SELECT ON freshet_test.tr_expired"]).await;
    direct().await.query_drop(format!("ALTER USER '{account}'@'127.0.0.1' PASSWORD EXPIRE")).await.unwrap();
    // Settings the driver would otherwise ask the server for right after the login.
    let sandboxed = |addr: String| as_user(&addr, account, Some(DB)).max_allowed_packet(Some(16 << 20)).wait_timeout(Some(28_800));
    let mut d = Conn::new(sandboxed(upstream_addr())).await.unwrap();
    let mut t = Conn::new(sandboxed(proxy.mysql.to_string())).await.unwrap();
    let want = text(&mut d, sql).await;
    assert!(want.as_ref().is_err_and(|(code, _)| *code == 1820), "the server's sandbox: {want:?}");
    assert_eq!(text(&mut t, sql).await, want, "in the sandbox");
    for conn in [&mut d, &mut t] {
        conn.query_drop("SET PASSWORD = PASSWORD('pw')").await.unwrap();
    }
    assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "served once the password is set");
}

/// A privilege change the binlog does not carry (a REVOKE naming an account that does not
/// exist fails with 1141, yet takes the grant from the accounts that do, and is not logged) is
/// bounded by `max_privilege_age`. An old session keeps its database privileges from its
/// login, so what it re-learns after each expiry is its own: it must not renew its account's
/// right for new sessions, which the server refuses (an audit: a new session was served the
/// revoked table for as long as one old session read now and then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_session_does_not_renew_a_right_its_account_lost_unseen() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_unseen").await;
    let proxy =
        start_proxy(&config("tr_unseen", "\"freshet\"").replace("[consistency]\n", "[consistency]\nmax_privilege_age = \"1s\"\n")).await;
    let sql = "SELECT id, owner, secret FROM tr_unseen WHERE id = 1";
    warm(&proxy, sql).await;
    let account = "tr_unseen_u";
    // A column of its own keeps the database open to new sessions after the revoke.
    user(account, &["SELECT ON freshet_test.*", "SELECT (id) ON freshet_test.tr_unseen"]).await;
    let (mut d, mut old) = pair(&proxy, account, Some(DB)).await;
    assert!(served_from_cache(&proxy, &mut d, &mut old, sql).await, "served before the revoke");
    let failed = direct()
        .await
        .query_drop(format!("REVOKE SELECT ON freshet_test.* FROM '{account}'@'127.0.0.1', 'tr_unseen_nobody'@'127.0.0.1'"))
        .await;
    assert!(failed.is_err(), "the REVOKE fails for the account that does not exist");
    let (mut d2, _) = pair(&proxy, account, Some(DB)).await;
    let want = text(&mut d2, sql).await;
    assert!(want.is_err(), "the server refuses a new session: {want:?}");
    for round in 0..3 {
        // Past the age: the old session's next read is relayed, and learns.
        tokio::time::sleep(Duration::from_millis(1300)).await;
        same_text(&mut d, &mut old, sql, "the old session").await;
        let (_, mut new) = pair(&proxy, account, Some(DB)).await;
        for read in 0..3 {
            assert_eq!(text(&mut new, sql).await, want, "a new session after the unseen revoke (round {round}, read {read})");
        }
    }
}

/// What freshet learns is the server's identity of a session, both of its parts: a user whose
/// name spells another account's name and active role (`'tr_key@127.0.0.1/tr_key_r'@'%'`,
/// whose CURRENT_USER() reads `tr_key@127.0.0.1/tr_key_r@%`) is not that account in that role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_is_not_another_whose_name_spells_its_name_and_role() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_keyed").await;
    let mut admin = direct().await;
    admin.query_drop("CREATE OR REPLACE TABLE tr_keyed_open (id INT PRIMARY KEY)").await.unwrap();
    admin.query_drop("DROP ROLE IF EXISTS 'tr_key_r@%'").await.unwrap();
    admin.query_drop("CREATE ROLE 'tr_key_r@%'").await.unwrap();
    admin.query_drop("GRANT SELECT ON freshet_test.tr_keyed TO 'tr_key_r@%'").await.unwrap();
    user("tr_key", &["SELECT ON freshet_test.tr_keyed_open"]).await;
    admin.query_drop("GRANT 'tr_key_r@%' TO 'tr_key'@'127.0.0.1'").await.unwrap();
    admin.query_drop("SET DEFAULT ROLE 'tr_key_r@%' FOR 'tr_key'@'127.0.0.1'").await.unwrap();
    let spelled = "tr_key@127.0.0.1/tr_key_r";
    admin.query_drop(format!("DROP USER IF EXISTS '{spelled}'@'%'")).await.unwrap();
    admin.query_drop(format!("CREATE USER '{spelled}'@'%' IDENTIFIED BY 'pw'")).await.unwrap();
    admin.query_drop(format!("GRANT SELECT ON freshet_test.tr_keyed_open TO '{spelled}'@'%'")).await.unwrap();
    let proxy = start_proxy(&config("tr_keyed", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_keyed WHERE id = 1";
    warm(&proxy, sql).await;
    let (mut d, mut t) = pair(&proxy, "tr_key", Some(DB)).await;
    assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "the role's account is served");
    let (mut d, mut t) = pair(&proxy, spelled, Some(DB)).await;
    let who: Option<String> = d.query_first("SELECT CURRENT_USER()").await.unwrap();
    assert_eq!(who.as_deref(), Some("tr_key@127.0.0.1/tr_key_r@%"));
    assert!(text(&mut d, sql).await.is_err(), "the server refuses the other account");
    same_text(&mut d, &mut t, sql, "an account whose name spells another's and its role").await;
    admin.query_drop(format!("DROP USER '{spelled}'@'%'")).await.unwrap();
    admin.query_drop("DROP ROLE 'tr_key_r@%'").await.unwrap();
    admin.query_drop("DROP TABLE tr_keyed_open").await.unwrap();
}

/// With binlogging off, a GRANT or REVOKE run by other statements (a block, EXECUTE
/// IMMEDIATE, a prepared statement's EXECUTE, a CALL) is in no binlog; sent through freshet,
/// the text is the only evidence, as for a plain REVOKE, which freshet obeys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_privilege_statement_run_by_others_with_binlogging_off_is_obeyed() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_hidden").await;
    let proxy = start_proxy(&config("tr_hidden", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_hidden WHERE id = 1";
    warm(&proxy, sql).await;
    let revoke = "REVOKE SELECT ON freshet_test.tr_hidden FROM 'tr_hid'@'127.0.0.1'";
    direct().await.query_drop("CREATE OR REPLACE TABLE tr_hidden_open (id INT PRIMARY KEY)").await.unwrap();
    direct().await.query_drop(format!("CREATE OR REPLACE PROCEDURE tr_hidden_revoke() {revoke}")).await.unwrap();
    for runner in [
        vec![format!("EXECUTE IMMEDIATE \"{revoke}\"")],
        vec![format!("BEGIN NOT ATOMIC {revoke}; END")],
        vec![format!("PREPARE tr_hidden_s FROM \"{revoke}\""), "EXECUTE tr_hidden_s".to_string()],
        vec!["CALL tr_hidden_revoke()".to_string()],
    ] {
        // Another table keeps the database open to the account after the revoke.
        user("tr_hid", &["SELECT ON freshet_test.tr_hidden", "SELECT ON freshet_test.tr_hidden_open"]).await;
        let (mut d, mut t) = pair(&proxy, "tr_hid", Some(DB)).await;
        assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "served before the revoke");
        let mut boss = through(&proxy).await;
        boss.query_drop("SET SESSION sql_log_bin = 0").await.unwrap();
        for statement in &runner {
            boss.query_drop(statement).await.unwrap();
        }
        let (mut d, mut t) = pair(&proxy, "tr_hid", Some(DB)).await;
        same_text(&mut d, &mut t, sql, &runner.join("; ")).await;
    }
    direct().await.query_drop("DROP PROCEDURE tr_hidden_revoke").await.unwrap();
    direct().await.query_drop("DROP TABLE tr_hidden_open").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_while_connected_is_obeyed() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_revoke").await;
    user("tr_rev", &["SELECT ON freshet_test.tr_revoke"]).await;
    let proxy = start_proxy(&config("tr_revoke", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_revoke WHERE id = 1";
    let stmt = "SELECT id, owner, secret FROM tr_revoke WHERE id = ?";
    warm(&proxy, sql).await;
    let (mut d, mut t) = pair(&proxy, "tr_rev", Some(DB)).await;
    same_text(&mut d, &mut t, sql, "before the revoke").await;
    // Prepared before the REVOKE: executing it afterwards is refused by the server.
    let prepared_through = t.prep(stmt).await.unwrap();
    let prepared_direct = d.prep(stmt).await.unwrap();
    let _: Vec<mysql_async::Row> = t.exec(&prepared_through, (1,)).await.unwrap();
    assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "served from the cache before the revoke");
    direct().await.query_drop("REVOKE SELECT ON freshet_test.tr_revoke FROM 'tr_rev'@'127.0.0.1'").await.unwrap();
    let want = text(&mut d, sql).await;
    assert!(want.is_err(), "the server refuses after the revoke");
    // freshet learns of the REVOKE from the binlog: within replication lag, and from then on
    // it never answers again.
    let mut denied = false;
    for _ in 0..250 {
        if text(&mut t, sql).await == want {
            denied = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(denied, "freshet still answers after the REVOKE reached it");
    assert!(engine(&proxy).access.resets.get() >= 1, "the REVOKE was seen in the binlog");
    same_text(&mut d, &mut t, sql, "after the revoke").await;
    same_text(&mut d, &mut t, "SELECT id, owner, secret FROM tr_revoke WHERE id IN (1, 2)", "after the revoke").await;
    let want = d.exec::<mysql_async::Row, _, _>(&prepared_direct, (1,)).await.map_err(server_error).map(|_| ());
    let got = t.exec::<mysql_async::Row, _, _>(&prepared_through, (1,)).await.map_err(server_error).map(|_| ());
    assert_eq!(got, want, "a statement prepared before the revoke");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_is_the_servers_and_decoys_poison_nothing() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_decoy").await;
    let mut admin = direct().await;
    admin.query_drop("CREATE DATABASE IF NOT EXISTS tr_decoy_db").await.unwrap();
    admin.query_drop("CREATE DATABASE IF NOT EXISTS TR_DECOY_UPPER").await.unwrap();
    admin.query_drop("DROP TABLE IF EXISTS tr_decoy_db.tr_decoy").await.unwrap();
    admin
        .query_drop(
            "CREATE TABLE tr_decoy_db.tr_decoy (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, secret TINYINT(3) UNSIGNED ZEROFILL)",
        )
        .await
        .unwrap();
    admin.query_drop("INSERT INTO tr_decoy_db.tr_decoy VALUES (1, 'decoy', 7), (2, 'decoy', 8)").await.unwrap();
    user("tr_out", &["ALL ON tr_decoy_db.*"]).await;
    let proxy = start_proxy(&config("tr_decoy", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_decoy WHERE id = 1";
    warm(&proxy, sql).await;
    // A user of another database: USE of the cache's database fails on the server, and a
    // wrong-case USE names another (empty) database; the decoy table answers.
    let (mut d, mut t) = pair(&proxy, "tr_out", Some("tr_decoy_db")).await;
    for use_sql in [&format!("USE {DB}"), "USE FRESHET_TEST"] {
        assert_eq!(d.query_drop(use_sql).await.map_err(server_error), t.query_drop(use_sql).await.map_err(server_error), "{use_sql}");
        same_text(&mut d, &mut t, sql, use_sql).await;
        same_text(&mut d, &mut t, "SELECT id, owner, secret FROM tr_decoy WHERE id = 2", use_sql).await;
        same_prepared(&mut d, &mut t, "SELECT id, owner, secret FROM tr_decoy WHERE id = ?", 1, use_sql).await;
    }
    // COM_INIT_DB that fails, and one that succeeds into the wrong-case database.
    for db in [DB, "TR_DECOY_UPPER", "tr_decoy_db"] {
        let want = d.query_drop(format!("USE `{db}`")).await.map_err(server_error);
        assert_eq!(t.query_drop(format!("USE `{db}`")).await.map_err(server_error), want);
        same_text(&mut d, &mut t, sql, db).await;
    }
    // Captured definitions that are not the cache's own are refused, whoever sends them.
    let e = engine(&proxy);
    let cache = e.by_name("secrets").unwrap().id;
    let key = |fingerprint| ColumnsKey { cache, fingerprint, literals: 0, charset: 1, binary: false, extended: false };
    let defs = |schema: &str, table: &str, secret: &str| -> Vec<bytes::Bytes> {
        ["id", "owner", secret].iter().map(|c| column_def(schema, table, c)).collect()
    };
    let refused = e.counters.captures_refused.get();
    let noted = e.columns_forgotten();
    e.store_columns(key(1), defs("tr_decoy_db", "tr_decoy", "secret"), 0, noted);
    e.store_columns(key(2), defs(DB, "tr_other_table", "secret"), 0, noted);
    e.store_columns(key(3), defs(DB, "tr_decoy", "no_such_column"), 0, noted);
    e.store_columns(key(4), defs(DB, "tr_decoy", "secret")[..2].to_vec(), 0, noted);
    assert!((1..=4).all(|f| e.columns(&key(f)).is_none()), "bad captures are not kept");
    assert_eq!(e.counters.captures_refused.get(), refused + 4);
    e.store_columns(key(5), defs(DB, "tr_decoy", "secret"), 0, noted);
    assert!(e.columns(&key(5)).is_some(), "the cache's own definitions are kept");
    // Everyone else still gets the real table's definitions and rows.
    let mut d = direct().await;
    let mut t = through(&proxy).await;
    same_text(&mut d, &mut t, sql, "after the decoy").await;
    same_text(&mut d, &mut t, "SELECT id, owner, secret FROM tr_decoy WHERE id = 2", "after the decoy").await;
    same_prepared(&mut d, &mut t, "SELECT id, owner, secret FROM tr_decoy WHERE id = ?", 2, "after the decoy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_table_shadows_only_its_own_session() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_tmp").await;
    let proxy = start_proxy(&config("tr_tmp", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_tmp WHERE id = 1";
    let fresh_sql = "SELECT id, owner, secret FROM tr_tmp WHERE id = 6";
    warm(&proxy, sql).await;
    let mut d = direct().await;
    let mut t = through(&proxy).await;
    for c in [&mut d, &mut t] {
        c.query_drop("CREATE TEMPORARY TABLE tr_tmp (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, secret TINYINT ZEROFILL)")
            .await
            .unwrap();
        c.query_drop("INSERT INTO tr_tmp VALUES (1, 'shadow', 44), (6, 'shadow', 45)").await.unwrap();
    }
    same_text(&mut d, &mut t, sql, "shadowed").await;
    same_text(&mut d, &mut t, fresh_sql, "shadowed").await;
    same_prepared(&mut d, &mut t, "SELECT id, owner, secret FROM tr_tmp WHERE id = ?", 6, "shadowed").await;
    // Other sessions: the real table, its definitions.
    let mut d2 = direct().await;
    let mut t2 = through(&proxy).await;
    same_text(&mut d2, &mut t2, fresh_sql, "another session").await;
    same_prepared(&mut d2, &mut t2, "SELECT id, owner, secret FROM tr_tmp WHERE id = ?", 6, "another session").await;
}

/// A temporary table made by stored code (a function the schema's owner wrote, run with its
/// definer's rights) is in no statement freshet sees, and shadows the cached table for that
/// session on the server: a login with no right to the real table reads the temporary one. Its
/// read, relayed to learn the account's right to the cache, succeeded, and freshet taught
/// "allowed": that session, and every new session of the account, were then served the real
/// table's rows, which the server refuses them. Before a read teaches anything, the server is
/// asked whether the session made temporary tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_table_made_by_stored_code_teaches_no_right_to_the_real_table() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_tmp_code").await;
    let mut admin = direct().await;
    admin.query_drop("DROP FUNCTION IF EXISTS tr_tmp_maker").await.unwrap();
    admin
        .query_drop(
            "CREATE FUNCTION tr_tmp_maker() RETURNS INT DETERMINISTIC MODIFIES SQL DATA SQL SECURITY DEFINER BEGIN \
             CREATE TEMPORARY TABLE IF NOT EXISTS tr_tmp_code (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, secret VARCHAR(50) NOT NULL); \
             INSERT IGNORE INTO tr_tmp_code VALUES (1, 'decoy', 'nothing'); RETURN 1; END",
        )
        .await
        .unwrap();
    user("tr_tmp_code_user", &[&format!("EXECUTE ON FUNCTION {DB}.tr_tmp_maker")]).await;
    let proxy = start_proxy(&config("tr_tmp_code", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_tmp_code WHERE id = 1";
    warm(&proxy, sql).await;
    let (mut d, mut t) = pair(&proxy, "tr_tmp_code_user", Some(DB)).await;
    for c in [&mut d, &mut t] {
        c.query_drop("SELECT tr_tmp_maker()").await.unwrap();
    }
    same_text(&mut d, &mut t, sql, "the session's own temporary table").await;
    same_prepared(&mut d, &mut t, "SELECT id, owner, secret FROM tr_tmp_code WHERE id = ?", 1, "the session's own temporary table").await;
    // A new session of the account: no temporary table, no right to the real one.
    let (mut d2, mut t2) = pair(&proxy, "tr_tmp_code_user", Some(DB)).await;
    let refused = text(&mut d2, sql).await;
    assert!(refused.as_ref().is_err_and(|(code, _)| *code == 1142), "the server refuses the real table: {refused:?}");
    same_text(&mut d2, &mut t2, sql, "another session of the account").await;
    same_prepared(&mut d2, &mut t2, "SELECT id, owner, secret FROM tr_tmp_code WHERE id = ?", 1, "another session of the account").await;
    admin.query_drop("DROP FUNCTION tr_tmp_maker").await.unwrap();
}

/// Session state the tracker took for harmless, or took back too early: a READ UNCOMMITTED
/// session reads other sessions' uncommitted rows, which no view holds; `FLUSH TABLES t WITH
/// READ LOCK` (and FOR EXPORT) makes the server refuse reads of other tables (1100) as LOCK
/// TABLES does, until UNLOCK TABLES runs, which a COM_STMT_PREPARE of it does not, nor a text
/// whose statement before it failed; and a sql_mode assembled from pieces (`CONCAT('NO_BACK',
/// 'SLASH_ESCAPES')`) changes how the session's texts read with no name the tracker knows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_state_the_tracker_took_for_harmless_is_followed() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_harmless").await;
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS tr_state_other").await.unwrap();
    admin.query_drop("CREATE TABLE tr_state_other (id INT PRIMARY KEY)").await.unwrap();
    let proxy = start_proxy(&config("tr_harmless", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_harmless WHERE id = 1";
    warm(&proxy, sql).await;
    // READ UNCOMMITTED sees another session's uncommitted write.
    {
        let (mut d, mut t) = (direct().await, through(&proxy).await);
        warm(&proxy, sql).await;
        for c in [&mut d, &mut t] {
            c.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED").await.unwrap();
        }
        let mut writer = direct().await;
        writer.query_drop("BEGIN").await.unwrap();
        writer.query_drop("UPDATE tr_harmless SET secret = 'dirty' WHERE id = 1").await.unwrap();
        same_text(&mut d, &mut t, sql, "READ UNCOMMITTED").await;
        writer.query_drop("ROLLBACK").await.unwrap();
    }
    // Table locks the tracker did not see, or saw lifted when they were not.
    let locks: [&[&str]; 3] = [
        &["FLUSH TABLES tr_state_other WITH READ LOCK"],
        &["FLUSH TABLES tr_state_other FOR EXPORT"],
        &["LOCK TABLES tr_state_other READ", "SELECT nosuchcolumn FROM tr_state_other; UNLOCK TABLES"],
    ];
    for steps in locks {
        // One session at a time: a FLUSH waits for the other's lock.
        let mut d = direct().await;
        for step in steps {
            let _ = d.query_drop(*step).await;
        }
        let want = text(&mut d, sql).await;
        assert!(want.as_ref().is_err_and(|(code, _)| *code == 1100), "the server refuses the read under {steps:?}: {want:?}");
        d.query_drop("UNLOCK TABLES").await.unwrap();
        warm(&proxy, sql).await;
        let mut t = through(&proxy).await;
        for step in steps {
            let _ = t.query_drop(*step).await;
        }
        for round in 0..3 {
            assert_eq!(text(&mut t, sql).await, want, "{steps:?} (read {round})");
        }
        t.query_drop("UNLOCK TABLES").await.unwrap();
    }
    {
        let (mut d, mut t) = (direct().await, through(&proxy).await);
        warm(&proxy, sql).await;
        for c in [&mut d, &mut t] {
            c.query_drop("LOCK TABLES tr_state_other READ").await.unwrap();
            // Prepared, never executed: nothing is unlocked.
            let _ = c.prep("UNLOCK TABLES").await.unwrap();
        }
        same_text(&mut d, &mut t, sql, "UNLOCK TABLES prepared, not executed").await;
        for c in [&mut d, &mut t] {
            c.query_drop("UNLOCK TABLES").await.unwrap();
        }
    }
    // NO_BACKSLASH_ESCAPES from pieces: the next text hides a temporary table in a string.
    {
        let (mut d, mut t) = (direct().await, through(&proxy).await);
        warm(&proxy, sql).await;
        let _ = text(&mut t, sql).await;
        for c in [&mut d, &mut t] {
            c.query_drop("SET sql_mode = CONCAT('NO_BACK', 'SLASH_ESCAPES')").await.unwrap();
            c.query_drop(
                "SELECT 'x\\'; CREATE TEMPORARY TABLE tr_harmless (id INT PRIMARY KEY, owner VARCHAR(20), secret VARCHAR(50)); \
                 INSERT INTO tr_harmless VALUES (1, 'shadow', 'temporary'); SET sql_mode = DEFAULT; SELECT 1 -- '",
            )
            .await
            .unwrap();
        }
        same_text(&mut d, &mut t, sql, "a temporary table hidden in a string under NO_BACKSLASH_ESCAPES").await;
    }
    admin.query_drop("DROP TABLE tr_state_other").await.unwrap();
}

/// A session that reads only cached rows is not idle to the server: with `wait_timeout = 2`
/// its reads over 5 s are all answered, as they are directly, and most from the cache (an
/// audit: the server dropped the untouched upstream connection after 2 s, and the client's
/// next read got 2006 where a direct one is answered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reading_cached_rows_is_not_idle_to_the_server() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_keepalive").await;
    let proxy = start_proxy(&config("tr_keepalive", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_keepalive WHERE id = 1";
    warm(&proxy, sql).await;
    let (mut d, mut t) = (direct().await, through(&proxy).await);
    for c in [&mut d, &mut t] {
        c.query_drop("SET SESSION wait_timeout = 2").await.unwrap();
    }
    let before = hits(&proxy);
    for round in 0..20 {
        let want = text(&mut d, sql).await;
        assert_eq!(text(&mut t, sql).await, want, "read {round}, {} ms after the SET", round * 250);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // A client that thinks 0.9 s, then 1.5 s, between reads is never idle for 2 s (a second
    // audit: a hit checked only when it arrived, 0.9 s after the server last heard of the
    // session, left the server to drop it 1.1 s into the next pause).
    for round in 0..6 {
        let want = text(&mut d, sql).await;
        assert_eq!(text(&mut t, sql).await, want, "read {round} of pauses of 0.9 s and 1.5 s");
        tokio::time::sleep(Duration::from_millis(if round % 2 == 0 { 900 } else { 1500 })).await;
    }
    // Other tests' grants in the same binlog make freshet learn rights again now and then.
    assert!(hits(&proxy) > before, "the reads are still answered from the cache");
}

/// A compressed session's owed read is sent again apart from the statement after it: MariaDB
/// answers only the first command of a compressed frame that holds two, and the session hung
/// (an audit of the keep-alive: a hit, then `SELECT ROW_COUNT()`, never answered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_session_is_answered_after_a_cached_read() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_compressed").await;
    let proxy = start_proxy(&config("tr_compressed", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_compressed WHERE id = 1";
    warm(&proxy, sql).await;
    let compressed = |addr: &str| opts(addr).compression(Some(mysql_async::Compression::default()));
    let mut t = Conn::new(compressed(&proxy.mysql.to_string())).await.unwrap();
    let mut d = Conn::new(compressed(&upstream_addr())).await.unwrap();
    for c in [&mut d, &mut t] {
        c.query_drop("SET @x = 1").await.unwrap();
    }
    let before = hits(&proxy);
    for _ in 0..20 {
        let _ = text(&mut t, sql).await;
        if hits(&proxy) > before {
            break;
        }
    }
    assert!(hits(&proxy) > before, "a hit on the compressed session");
    let _ = text(&mut d, sql).await;
    for (pinged, follow) in [(false, "SELECT ROW_COUNT()"), (true, "SELECT ROW_COUNT()"), (false, "SET @a = 1")] {
        let _ = text(&mut t, sql).await;
        let _ = text(&mut d, sql).await;
        if pinged {
            t.ping().await.unwrap();
            d.ping().await.unwrap();
        }
        let got = tokio::time::timeout(Duration::from_secs(10), text(&mut t, follow)).await;
        let what = format!("{follow} after a hit{}", if pinged { " and a ping" } else { "" });
        assert_eq!(got.unwrap_or_else(|_| panic!("{what} was never answered")), text(&mut d, follow).await, "{what}");
    }
    // Prepare, execute, close per read (PHP's PDO without emulation): the close of the owed
    // execute's statement is held back, and sent after the read it owes. Both once in one
    // compressed frame: the server answered the read and never the statement after (an audit).
    let prepared_sql = "SELECT id, owner, secret FROM tr_compressed WHERE id = ?";
    for follow in ["SET @a = 1", "SELECT ROW_COUNT()", "SELECT FOUND_ROWS()"] {
        let before = hits(&proxy);
        for round in 0..20 {
            let s = t.prep(prepared_sql).await.unwrap();
            let _: Vec<mysql_async::Row> = t.exec(&s, (1,)).await.unwrap();
            t.close(s).await.unwrap();
            if hits(&proxy) > before {
                break;
            }
            assert!(round < 19, "a prepared hit on the compressed session");
        }
        let s = d.prep(prepared_sql).await.unwrap();
        let _: Vec<mysql_async::Row> = d.exec(&s, (1,)).await.unwrap();
        d.close(s).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), text(&mut t, follow)).await;
        let what = format!("{follow} after a prepared hit whose statement was closed");
        assert_eq!(got.unwrap_or_else(|_| panic!("{what} was never answered")), text(&mut d, follow).await, "{what}");
    }
}

/// A session the server KILLs is answered nothing more from the cache, however fast its client
/// sends reads: freshet watches the upstream connection before the client's next command (an
/// audit: a client that kept reads queued got about 20,000 answers after the KILL, where the
/// server answers a killed session's queued commands none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_session_is_answered_nothing_more_however_fast_it_reads() {
    let _globals = SERVER_GLOBALS.read().await;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const READS: usize = 20_000;
    secrets("tr_pipelined").await;
    let proxy = start_proxy(&config("tr_pipelined", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_pipelined WHERE id = 1";
    warm(&proxy, sql).await;
    let mut c = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    // The session's own first reads (the probe, the right to the cache), then one answer's size.
    let mut answer = Vec::new();
    for _ in 0..20 {
        let before = hits(&proxy);
        answer = c.query(sql).await;
        if hits(&proxy) > before {
            break;
        }
    }
    let answer_bytes: usize = answer.iter().map(|p| p.len() + 4).sum();
    let id = c.query("SELECT CONNECTION_ID()").await;
    let id = String::from_utf8_lossy(&id[id.len() - 2][1..]).into_owned();
    let (stream, _) = c.io.into_parts().unwrap();
    let (mut rx, mut tx) = tokio::io::split(stream);
    let mut one = vec![0u8; 4];
    one.push(0x03);
    one.extend_from_slice(sql.as_bytes());
    let len = (one.len() - 4) as u32;
    one[..3].copy_from_slice(&len.to_le_bytes()[..3]);
    let all: Vec<u8> = (0..READS).flat_map(|_| one.iter().copied()).collect();
    let writer = tokio::spawn(async move {
        let _ = tx.write_all(&all).await;
        tx
    });
    // Once a hundred answers came back (freshet is answering the queue), the operator KILLs
    // the session.
    let (mut received, mut at_kill) = (0usize, None);
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(10), rx.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        received += n;
        if at_kill.is_none() && received >= 100 * answer_bytes {
            direct().await.query_drop(format!("KILL CONNECTION {id}")).await.unwrap();
            at_kill = Some(received);
        }
    }
    let _ = writer.await;
    let answered = (received - at_kill.expect("a hundred answers before the KILL")) / answer_bytes;
    eprintln!("{answered} answered after the KILL returned ({received} bytes, {answer_bytes} per answer)");
    // Those in flight at the KILL: until the runtime's reactor has seen the upstream's end
    // (60-500 here), where a client looked at first at every command got all 20,000.
    assert!(answered < READS / 4, "{answered} of {READS} reads were answered after the session was killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_changes_the_tokenizer_cannot_follow_are_relayed() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_state").await;
    let proxy = start_proxy(&config("tr_state", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_state WHERE id = 4";
    warm(&proxy, sql).await;
    for change in [
        "/*!40101 SET NAMES latin1 */",
        "EXECUTE IMMEDIATE 'SET NAMES latin1'",
        "PREPARE s FROM 'SET character_set_results = latin1'; EXECUTE s",
        "SET sql_select_limit = 0",
        "/*!40101 SET sql_select_limit = 0 */",
        "SET sql_mode = 'ANSI_QUOTES'",
    ] {
        let mut d = direct().await;
        let mut t = through(&proxy).await;
        same_text(&mut d, &mut t, sql, "before").await;
        for part in change.split("; ") {
            d.query_drop(part).await.unwrap();
            t.query_drop(part).await.unwrap();
        }
        same_text(&mut d, &mut t, sql, change).await;
        same_text(&mut d, &mut t, "SELECT id, owner, secret FROM tr_state WHERE owner = \"owner1\" AND id = 4", change).await;
        same_prepared(&mut d, &mut t, "SELECT id, owner, secret FROM tr_state WHERE id = ?", 4, change).await;
    }
    // A prepared SET (the binary protocol) of a setting that changes results.
    let mut d = direct().await;
    let mut t = through(&proxy).await;
    for c in [&mut d, &mut t] {
        c.exec_drop("SET character_set_results = ?", ("latin1",)).await.unwrap();
    }
    same_text(&mut d, &mut t, sql, "prepared SET").await;
}

/// A client character set whose two-byte characters may end in 0x5C, a backslash (gbk,
/// big5, sjis, cp932, gb18030): the server reads `'\x95\x5c'` as one character in a closed
/// string, where a byte-wise tokenizer reads an escaped quote and a string that runs on. What
/// follows in the same text is hidden from it: here a temporary table that shadows the cached
/// one, made under gbk before the session went back to utf8mb4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_character_set_the_tokenizer_misreads_is_not_followed() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_gbk").await;
    let proxy = start_proxy(&config("tr_gbk", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_gbk WHERE id = 4";
    warm(&proxy, sql).await;
    let hidden: &[u8] = b"SELECT '\x95\x5c'; CREATE TEMPORARY TABLE tr_gbk (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, \
        secret TINYINT ZEROFILL); INSERT INTO tr_gbk VALUES (4, 0x736861646f77, 44) -- '";
    for set_names in ["SET NAMES gbk", "SET CHARACTER SET big5", "SET character_set_client = sjis"] {
        let mut d = direct().await;
        let mut t = through(&proxy).await;
        same_text(&mut d, &mut t, sql, "before").await;
        for c in [&mut d, &mut t] {
            c.query_drop(set_names).await.unwrap();
            c.query_drop(hidden).await.unwrap();
            c.query_drop("SET NAMES utf8mb4").await.unwrap();
        }
        same_text(&mut d, &mut t, sql, set_names).await;
        same_prepared(&mut d, &mut t, "SELECT id, owner, secret FROM tr_gbk WHERE id = ?", 4, set_names).await;
    }
}

/// A prepared statement's table names are resolved in the database that was the default when
/// it was prepared: after `USE freshet_test`, a statement prepared under `USE tr_prepdb_decoy`
/// still reads the decoy database's table of the cached table's name. Freshet checked the
/// session's default database at the execute, and answered it from the cache. (Found by the
/// random sessions test, `proxy/tests/sessions.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_reads_the_database_it_was_prepared_in() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_prepdb").await;
    let mut admin = direct().await;
    admin.query_drop("CREATE DATABASE IF NOT EXISTS tr_prepdb_decoy").await.unwrap();
    admin.query_drop("DROP TABLE IF EXISTS tr_prepdb_decoy.tr_prepdb").await.unwrap();
    admin.query_drop("CREATE TABLE tr_prepdb_decoy.tr_prepdb LIKE tr_prepdb").await.unwrap();
    admin.query_drop("INSERT INTO tr_prepdb_decoy.tr_prepdb VALUES (4, 'decoy', 'not the cached row')").await.unwrap();
    let proxy = start_proxy(&config("tr_prepdb", "\"freshet\"")).await;
    let read = "SELECT id, owner, secret FROM tr_prepdb WHERE id = 4";
    let sql = "SELECT id, owner, secret FROM tr_prepdb WHERE id = ?";
    warm(&proxy, read).await;
    // The binary protocol's column definitions are captured by an execute in freshet_test.
    let mut other = through(&proxy).await;
    for _ in 0..5 {
        let _ = prepared(&mut other, sql, 4).await;
    }
    // Prepared before the session's first cached read (freshet has not asked the server which
    // database is the default), and after one (it has).
    for asked_first in [false, true] {
        let (mut d, mut t) = (direct().await, through(&proxy).await);
        let mut statements = Vec::new();
        for c in [&mut d, &mut t] {
            if asked_first {
                let _ = text(c, read).await;
            }
            c.query_drop("USE tr_prepdb_decoy").await.unwrap();
            statements.push(c.prep(sql).await.unwrap());
            c.query_drop("USE freshet_test").await.unwrap();
        }
        let what = if asked_first { "prepared after a cached read" } else { "prepared first" };
        assert!(served_from_cache(&proxy, &mut d, &mut t, read).await, "{what}: the session's own reads are served");
        for _ in 0..3 {
            let want = d.exec_iter(statements[0].clone(), (4,)).await.unwrap().collect::<mysql_async::Row>().await.unwrap();
            let got = t.exec_iter(statements[1].clone(), (4,)).await.unwrap().collect::<mysql_async::Row>().await.unwrap();
            let values = |rows: Vec<mysql_async::Row>| rows.into_iter().map(|r| r.unwrap()).collect::<Vec<_>>();
            assert_eq!(values(got), values(want), "{what}: the statement reads the decoy database's table");
        }
    }
}

/// A server whose `init_connect` sets a client character set the tokenizer misreads, or a
/// sql_mode that reads text otherwise: the handshake named neither, so a session's first
/// statements are read here in the default reading while the server reads them in that one.
/// A client that hides a temporary table in its first text and sets the reading back before
/// its first cached read must still get its own table's row. (The server skips
/// `init_connect` for accounts with SUPER: hence a user of its own.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reading_an_init_connect_sets_is_not_taken_for_the_handshakes() {
    let _alone = SERVER_GLOBALS.write().await;
    secrets("tr_initc").await;
    user("tr_initc", &["SELECT ON freshet_test.tr_initc", "CREATE TEMPORARY TABLES ON freshet_test.*"]).await;
    let proxy = std::sync::Arc::new(start_proxy(&config("tr_initc", "\"freshet\"")).await);
    let sql = "SELECT id, owner, secret FROM tr_initc WHERE id = 4";
    warm(&proxy, sql).await;
    let temporary = b"CREATE TEMPORARY TABLE tr_initc (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, secret TINYINT ZEROFILL); \
        INSERT INTO tr_initc VALUES (4, 0x736861646f77, 44) -- ";
    let cases: [(&str, &[u8], &str); 2] = [
        ("'SET NAMES gbk'", b"SELECT '\x95\x5c'; ", "SET NAMES utf8mb4"),
        (
            "\"SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')\"",
            b"SELECT 'a\\'; ",
            "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
        ),
    ];
    let mut admin = direct().await;
    for (init_connect, opening, back) in cases {
        admin.query_drop(format!("SET GLOBAL init_connect = {init_connect}")).await.unwrap();
        let hidden = [opening, &temporary[..], b"'"].concat();
        let proxy = proxy.clone();
        let outcome = tokio::spawn(async move {
            // A session of this user that hides nothing is served, though it sends a text that
            // would read otherwise before its first cached read: the server is asked first.
            let (mut d, mut t) = pair(&proxy, "tr_initc", Some(DB)).await;
            for c in [&mut d, &mut t] {
                c.query_drop(back).await.unwrap();
                c.query_drop("SELECT COUNT(*) FROM tr_initc WHERE owner = 'a\\'b'").await.unwrap();
            }
            assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "{init_connect}: a session that hides nothing is served");
            let (mut d, mut t) = pair(&proxy, "tr_initc", Some(DB)).await;
            for c in [&mut d, &mut t] {
                c.query_drop(&hidden[..]).await.unwrap();
                c.query_drop(back).await.unwrap();
            }
            same_text(&mut d, &mut t, sql, init_connect).await;
            same_prepared(&mut d, &mut t, "SELECT id, owner, secret FROM tr_initc WHERE id = ?", 4, init_connect).await;
        })
        .await;
        admin.query_drop("SET GLOBAL init_connect = ''").await.unwrap();
        if let Err(e) = outcome {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

/// A server whose own default sql_mode has ANSI_QUOTES: a new session starts with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_default_the_tokenizer_cannot_follow_is_relayed() {
    let _alone = SERVER_GLOBALS.write().await;
    secrets("tr_global").await;
    let proxy = start_proxy(&config("tr_global", "\"freshet\"")).await;
    warm(&proxy, "SELECT id, owner, secret FROM tr_global WHERE id = 4").await;
    let mut admin = direct().await;
    let global: String = admin.query_first("SELECT @@GLOBAL.sql_mode").await.unwrap().unwrap();
    admin.query_drop("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',ANSI_QUOTES')").await.unwrap();
    let mut d = direct().await;
    let mut t = through(&proxy).await;
    let quoted = "SELECT id, owner, secret FROM tr_global WHERE owner = \"owner1\" AND id = 4";
    let (want, got) = (text(&mut d, quoted).await, text(&mut t, quoted).await);
    admin.query_drop(format!("SET GLOBAL sql_mode = '{global}'")).await.unwrap();
    assert_eq!(got, want, "global ANSI_QUOTES");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_bypass_the_binlog_evict_what_they_may_change() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_unlogged").await;
    let proxy = start_proxy(&config("tr_unlogged", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_unlogged WHERE id = 5";
    // A setting of the session, or of the one statement (MariaDB's SET STATEMENT ... FOR).
    let settings = [
        ("SET SESSION sql_log_bin = 0", ""),
        ("SET SESSION binlog_format = 'STATEMENT'", ""),
        ("", "SET STATEMENT sql_log_bin = 0 FOR "),
        ("", "SET STATEMENT binlog_format = 'STATEMENT', sql_log_bin = 0 FOR "),
        // Named in backticks: the same variables to the server.
        ("SET `sql_log_bin` = 0", ""),
        ("SET @@session.`binlog_format` = 'STATEMENT'", ""),
        ("", "SET STATEMENT `sql_log_bin` = 0 FOR "),
        // A value the server computes.
        ("SET sql_log_bin = 1 - 1", ""),
    ];
    for (n, (setting, prefix)) in settings.into_iter().enumerate() {
        warm(&proxy, sql).await;
        let mut t = through(&proxy).await;
        if !setting.is_empty() {
            t.query_drop(setting).await.unwrap();
        }
        t.query_drop(format!("{prefix}UPDATE tr_unlogged SET secret = 'changed {n}' WHERE id = 5")).await.unwrap();
        let setting = if setting.is_empty() { prefix } else { setting };
        let mut d = direct().await;
        let want = text(&mut d, sql).await;
        // Read by the writing session and by another one, as text and prepared.
        same_text(&mut d, &mut t, sql, setting).await;
        let mut other = through(&proxy).await;
        same_text(&mut d, &mut other, sql, setting).await;
        same_prepared(&mut d, &mut other, "SELECT id, owner, secret FROM tr_unlogged WHERE id = ?", 5, setting).await;
        let secret: Option<String> = d.query_first("SELECT secret FROM tr_unlogged WHERE id = 5").await.unwrap();
        assert_eq!(secret, Some(format!("changed {n}")));
        assert_eq!(engine(&proxy).counters.unlogged_writes.get(), n as u64 + 1, "one unlogged write counted");
        assert!(want.is_ok());
    }
}

/// An unlogged write in a transaction is evicted when it is made, and other sessions then
/// refill from what is committed; it is committed later, by COMMIT or by a statement that ends
/// the transaction implicitly. An audit: `SET autocommit = 1` committed it and evicted
/// nothing, so every session read the row before the write, for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlogged_write_is_evicted_again_when_its_transaction_ends() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_unlogged_txn").await;
    let proxy = start_proxy(&config("tr_unlogged_txn", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_unlogged_txn WHERE id = 5";
    for (n, ender) in ["COMMIT", "SET autocommit = 1", "BEGIN", "SET @@session.autocommit := ON"].into_iter().enumerate() {
        warm(&proxy, sql).await;
        let mut t = through(&proxy).await;
        for statement in ["SET sql_log_bin = 0", "SET autocommit = 0"] {
            t.query_drop(statement).await.unwrap();
        }
        t.query_drop(format!("UPDATE tr_unlogged_txn SET secret = 'changed {n}' WHERE id = 5")).await.unwrap();
        // Another session reads the committed row meanwhile, from the cache again.
        let mut d = direct().await;
        let mut other = through(&proxy).await;
        assert!(served_from_cache(&proxy, &mut d, &mut other, sql).await, "{ender}: the committed row refilled");
        t.query_drop(ender).await.unwrap();
        let secret: Option<String> = d.query_first("SELECT secret FROM tr_unlogged_txn WHERE id = 5").await.unwrap();
        assert_eq!(secret, Some(format!("changed {n}")), "{ender} committed the write");
        same_text(&mut d, &mut other, sql, ender).await;
        same_text(&mut d, &mut through(&proxy).await, sql, ender).await;
        t.query_drop("ROLLBACK").await.unwrap();
    }
}

/// A text of 16 MiB or more is forwarded frame by frame as it arrives and never read whole
/// (its memory is one frame), so the session never saw the `SET sql_log_bin = 0` at its head:
/// the write after it, which the binlog never carries, stayed out of every other session's
/// cached reads. Such a text is now searched for the variables' names frame by frame (a
/// name split across two frames included), and one that names them counts as a text the
/// session does not follow that may turn binlogging off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_of_16_mib_that_turns_binlogging_off_evicts_what_it_may_change() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_long").await;
    let proxy = start_proxy(&config("tr_long", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_long WHERE id = 5";
    let mut d = direct().await;
    // The name in the first frame, then split by the end of the first frame: its payload is
    // the command byte and 16 MiB less one byte of text, so `sql_l` ends it.
    let texts = [
        format!("SET sql_log_bin = 0; UPDATE tr_long SET secret = 'long 0' WHERE id = 5; DO '{}'", "y".repeat(17 << 20)),
        format!("DO '{}'; SET sql_log_bin = 0; UPDATE tr_long SET secret = 'long 1' WHERE id = 5; DO 1", "x".repeat((1 << 24) - 17)),
    ];
    for text in texts {
        warm(&proxy, sql).await;
        let mut t = through(&proxy).await;
        t.query_drop(text).await.unwrap();
        let mut other = through(&proxy).await;
        same_text(&mut d, &mut other, sql, "after a write in a text of 16 MiB with binlogging off").await;
    }
}

/// A text of 16 MiB or more whose first word changes nothing may hold more statements after
/// it, and a prepared SET executed with 16 MiB of parameters runs the SET all the same: an
/// audit's `SELECT 1 /* 17 MiB */; SET ...` and such an execute changed the session unseen.
/// Now such a text with a `;` anywhere is not followed, and such an execute's statement is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_in_a_text_or_execute_of_16_mib_is_seen() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_long_set").await;
    let proxy = start_proxy(&config("tr_long_set", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_long_set WHERE id = 5";
    warm(&proxy, sql).await;
    let value = vec![b'v'; 17 << 20];
    for how in ["text", "execute"] {
        let mut answers = Vec::new();
        for addr in [upstream_addr(), proxy.mysql.to_string()] {
            let mut c = RawClient::connect(&addr, DEFAULT_CAPS).await.unwrap();
            c.query("USE freshet_test").await;
            let _ = c.query(sql).await;
            let _ = c.query(sql).await;
            if how == "text" {
                let big = format!("SELECT 1 /*{}*/; SET NAMES latin1", "x".repeat(17 << 20));
                let results = c.query(&big).await;
                assert!(results.iter().all(|p| p[0] != 0xff), "the text ran");
            } else {
                // A prepared SET, executed with a parameter of 17 MiB sent inline.
                let (id, _) = prepare(&mut c, "SET character_set_results = latin1, @x = ?").await;
                let mut execute = vec![0x17];
                execute.extend_from_slice(&id.to_le_bytes());
                execute.extend_from_slice(&[0, 1, 0, 0, 0, 0, 1, 0xfe, 0]);
                freshet_proxy::protocol::cursor::put_lenenc(&mut execute, value.len() as u64);
                execute.extend_from_slice(&value);
                c.send(&execute).await;
                assert_eq!(c.packet().await[0], 0, "the execute's OK");
            }
            answers.push(c.query(sql).await);
        }
        assert_eq!(answers[0], answers[1], "after a SET run by a {how} of 16 MiB or more");
    }
}

/// `SET TRANSACTION READ ONLY` holds for the next transaction the server starts: a statement
/// that touches no transactional table (`SELECT 1`, a refused write) does not use it up, a
/// read of the cached (InnoDB) table does. An audit: after `SELECT 1` freshet took it as used
/// up, answered the read from the cache, and the UPDATE after it was refused (1792) where the
/// server runs it; and a session that sent only cached reads relayed them for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_next_transaction_is_used_up_as_the_server_uses_it_up() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_next_tx").await;
    let proxy = start_proxy(&config("tr_next_tx", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_next_tx WHERE id = 1";
    warm(&proxy, sql).await;
    for between in [None, Some("SELECT 1"), Some("SELECT @@tx_read_only")] {
        let (mut d, mut t) = (direct().await, through(&proxy).await);
        let mut outcomes = Vec::new();
        for c in [&mut d, &mut t] {
            c.query_drop("SET TRANSACTION READ ONLY").await.unwrap();
            if let Some(statement) = between {
                c.query_drop(statement).await.unwrap();
            }
            let _ = text(c, sql).await;
            outcomes.push(c.query_drop("UPDATE tr_next_tx SET owner = owner WHERE id = 1").await.is_ok());
        }
        assert_eq!(outcomes[0], outcomes[1], "the UPDATE after {between:?} and a cached read");
    }
    // Used up by a relayed read of the cached table, the session's reads are cached again.
    let mut t = through(&proxy).await;
    t.query_drop("SET TRANSACTION READ ONLY").await.unwrap();
    let _ = text(&mut t, sql).await;
    let before = hits(&proxy);
    for _ in 0..3 {
        let _ = text(&mut t, sql).await;
    }
    assert!(hits(&proxy) > before, "cached again once the server used the setting up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_rights_come_from_the_servers_identity() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_admin").await;
    user("tr_ops", &["SELECT ON freshet_test.tr_admin"]).await;
    user("tr_boss", &["SELECT ON freshet_test.tr_admin"]).await;
    let proxy = start_proxy(&config("tr_admin", "\"tr_ops@10.1.2.3\", \"tr_boss\", \"tr_ghost\"")).await;
    let allowed = |r: &Result<Vec<mysql_async::Row>, mysql_async::Error>| match r {
        Ok(_) => true,
        Err(mysql_async::Error::Server(e)) if e.code == 1227 => false,
        Err(e) => panic!("SHOW CACHES: {e}"),
    };
    // tr_ops@127.0.0.1 is not the admin tr_ops@10.1.2.3.
    let mut ops = Conn::new(as_user(&proxy.mysql.to_string(), "tr_ops", Some(DB))).await.unwrap();
    assert!(!allowed(&ops.query("SHOW CACHES").await), "tr_ops@127.0.0.1 is not the listed account");
    // A bare name: that account, whatever its host.
    let mut boss = Conn::new(as_user(&proxy.mysql.to_string(), "tr_boss", Some(DB))).await.unwrap();
    assert!(allowed(&boss.query("SHOW CACHES").await), "tr_boss is listed");
    // CHANGE_USER to a non-admin drops the rights; back to an admin gets them.
    let to = |u: &str| {
        mysql_async::ChangeUserOpts::default().with_user(Some(u.into())).with_pass(Some("pw".into())).with_db_name(Some(DB.into()))
    };
    boss.change_user(to("tr_ops")).await.unwrap();
    assert!(!allowed(&boss.query("SHOW CACHES").await), "after CHANGE_USER to tr_ops");
    ops.change_user(to("tr_boss")).await.unwrap();
    assert!(allowed(&ops.query("SHOW CACHES").await), "after CHANGE_USER to tr_boss");
    // A login the server maps to the anonymous account is never an admin, whatever name it
    // gave.
    let mut admin = direct().await;
    admin.query_drop("DROP USER IF EXISTS ''@'127.0.0.1'").await.unwrap();
    admin.query_drop("CREATE USER ''@'127.0.0.1' IDENTIFIED BY 'pw'").await.unwrap();
    let anonymous = async {
        let mut ghost = Conn::new(as_user(&proxy.mysql.to_string(), "tr_ghost", None)).await.unwrap();
        let who: Option<String> = ghost.query_first("SELECT CURRENT_USER()").await.unwrap();
        (who, allowed(&ghost.query("SHOW CACHES").await), allowed(&ghost.query_drop("DROP CACHE secrets").await.map(|()| Vec::new())))
    }
    .await;
    admin.query_drop("DROP USER ''@'127.0.0.1'").await.unwrap();
    assert_eq!(anonymous.0.as_deref(), Some("@127.0.0.1"), "the login is the anonymous account");
    assert!(!anonymous.1 && !anonymous.2, "the anonymous account is no admin");
    assert!(engine(&proxy).by_name("secrets").is_some());
}

/// A column definition packet (protocol 4.1) of a VARCHAR column `name` of `schema.table`.
fn column_def(schema: &str, table: &str, name: &str) -> bytes::Bytes {
    let mut p = Vec::new();
    for field in ["def", schema, table, table, name, name] {
        p.push(field.len() as u8);
        p.extend_from_slice(field.as_bytes());
    }
    p.push(0x0c);
    p.extend_from_slice(&45u16.to_le_bytes());
    p.extend_from_slice(&200u32.to_le_bytes());
    p.push(253);
    p.extend_from_slice(&0u16.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&[0, 0]);
    p.into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_user_and_reset_connection_follow_the_server() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_change").await;
    // The table before the grant on it (the grant fails on a missing table when this test
    // runs before the one that also creates it).
    direct().await.query_drop("CREATE TABLE IF NOT EXISTS tr_other (id INT PRIMARY KEY)").await.unwrap();
    user("tr_reader", &["SELECT ON freshet_test.tr_change"]).await;
    user("tr_stranger", &["SELECT ON freshet_test.tr_other"]).await;
    let proxy = start_proxy(&config("tr_change", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_change WHERE id = 7";
    let stmt = "SELECT id, owner, secret FROM tr_change WHERE id = ?";
    warm(&proxy, sql).await;
    let to = |u: &str| {
        mysql_async::ChangeUserOpts::default().with_user(Some(u.into())).with_pass(Some("pw".into())).with_db_name(Some(DB.into()))
    };
    let (mut d, mut t) = pair(&proxy, "tr_reader", Some(DB)).await;
    same_text(&mut d, &mut t, sql, "tr_reader").await;
    // To an account that may not read the table, and back.
    for c in [&mut d, &mut t] {
        c.change_user(to("tr_stranger")).await.unwrap();
    }
    same_text(&mut d, &mut t, sql, "after CHANGE_USER to tr_stranger").await;
    same_prepared(&mut d, &mut t, stmt, 7, "after CHANGE_USER to tr_stranger").await;
    for c in [&mut d, &mut t] {
        c.change_user(to("tr_reader")).await.unwrap();
    }
    same_text(&mut d, &mut t, sql, "after CHANGE_USER back").await;
    // An unfollowable statement relays the session's cached reads; COM_RESET_CONNECTION
    // brings them back (and the server's answer is the same throughout).
    for c in [&mut d, &mut t] {
        c.query_drop("/*!40101 SET sql_select_limit = 0 */").await.unwrap();
    }
    let before = hits(&proxy);
    same_text(&mut d, &mut t, sql, "unfollowed").await;
    assert_eq!(hits(&proxy), before, "an unfollowed session is not answered from the cache");
    for c in [&mut d, &mut t] {
        c.reset().await.unwrap();
    }
    assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "a reset session is answered from the cache again");
}

/// What freshet had learnt of accounts' rights, and its hits, before a statement ran.
struct Learnt {
    resets: u64,
    hits: u64,
}

impl Learnt {
    fn note(proxy: &Proxy) -> Learnt {
        Learnt { resets: engine(proxy).access.resets.get(), hits: hits(proxy) }
    }

    /// Once freshet has applied what `statement` logged (`watcher` is a session through it),
    /// it has forgotten nothing, and the reader (`reader`: direct, through) is answered from
    /// the cache with the server's answer.
    async fn kept(self, proxy: &Proxy, watcher: &mut Conn, reader: (&mut Conn, &mut Conn), sql: &str, statement: &str) {
        caught_up(watcher).await;
        assert_eq!(engine(proxy).access.resets.get(), self.resets, "`{statement}` made freshet forget what accounts may read");
        assert_eq!(text(reader.1, sql).await, text(reader.0, sql).await, "after `{statement}`");
        assert!(hits(proxy) > self.hits, "after `{statement}` the reader's read was relayed");
    }
}

/// What an account may read is learnt once and kept until privileges may have changed; a
/// client must not be able to make freshet forget it for everyone at will. Each of these
/// statements is one that any login (or one with rights on its own tables only) can send in a
/// loop, and none of them changes what any account may read: a privilege statement the server
/// refuses before running it (access denied, a syntax error), a password or default role set
/// for oneself (both binlogged), a write or view whose text says `mysql`, a word a privilege
/// statement needs inside an executable comment. Forgetting after each one turned every
/// other account's next read of each cache into a relayed one, as often as the client liked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_make_freshet_forget_what_accounts_may_read() {
    // Alone: the other tests of this file GRANT and REVOKE, which rightly make freshet forget.
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_forget").await;
    let mut admin = direct().await;
    admin.query_drop("CREATE OR REPLACE TABLE tr_hnotes (id INT PRIMARY KEY, note VARCHAR(100))").await.unwrap();
    admin.query_drop("CREATE OR REPLACE VIEW tr_hview AS SELECT note FROM tr_hnotes").await.unwrap();
    user("tr_reader", &["SELECT ON freshet_test.tr_forget"]).await;
    user("tr_hostile", &["SELECT, INSERT, UPDATE, DELETE ON freshet_test.tr_hnotes", "CREATE VIEW, DROP ON freshet_test.tr_hview"]).await;
    let proxy = start_proxy(&config("tr_forget", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_forget WHERE id = 1";
    warm(&proxy, sql).await;
    let (mut d, mut t) = pair(&proxy, "tr_reader", Some(DB)).await;
    assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "the reader is served from the cache");
    let mut hostile = Conn::new(as_user(&proxy.mysql.to_string(), "tr_hostile", Some(DB))).await.unwrap();
    let mut watcher = through(&proxy).await;
    for statement in [
        "GRANT SELECT ON freshet_test.* TO 'tr_hostile'@'127.0.0.1'",
        "GRANT ALL ON *.* TO 'tr_hostile'@'127.0.0.1'",
        "REVOKE SELECT ON freshet_test.tr_forget FROM 'tr_reader'@'127.0.0.1'",
        "GRANT SELECT ON nosuch.t TO 'tr_hostile'@'127.0.0.1'",
        "CREATE USER tr_nobody",
        "DROP USER 'tr_reader'@'127.0.0.1'",
        "RENAME USER 'tr_reader'@'127.0.0.1' TO tr_gone",
        "FLUSH PRIVILEGES",
        "DELETE FROM mysql.global_priv",
        "UPDATE mysql.global_priv SET Priv = '{}'",
        "GRANT",
        "SET STATEMENT max_statement_time = 5 FOR REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'tr_reader'@'127.0.0.1'",
        "SELECT 1; GRANT SELECT ON freshet_test.* TO 'tr_hostile'@'127.0.0.1'",
        "SET PASSWORD = PASSWORD('pw')",
        "SET DEFAULT ROLE NONE",
        "INSERT INTO tr_hnotes VALUES (1, 'moving off MySQL: revoke the grant, drop the user')",
        "UPDATE tr_hnotes SET note = 'mysql.user' WHERE id = 1",
        "CREATE OR REPLACE VIEW tr_hview AS SELECT mysql.note FROM tr_hnotes AS mysql",
        "SELECT /*!10000 'grant', 'user' */ 1",
        "DELETE FROM tr_hnotes",
    ] {
        let noted = Learnt::note(&proxy);
        let _ = hostile.query_drop(statement).await;
        noted.kept(&proxy, &mut watcher, (&mut d, &mut t), sql, statement).await;
    }
    // What does change privileges still counts, sent through freshet or not.
    let resets = engine(&proxy).access.resets.get();
    watcher.query_drop("GRANT SELECT ON freshet_test.tr_hnotes TO 'tr_reader'@'127.0.0.1'").await.unwrap();
    assert!(engine(&proxy).access.resets.get() > resets, "a GRANT the server ran is obeyed");
    let resets = engine(&proxy).access.resets.get();
    admin.query_drop("REVOKE SELECT ON freshet_test.tr_hnotes FROM 'tr_reader'@'127.0.0.1'").await.unwrap();
    caught_up(&mut watcher).await;
    assert!(engine(&proxy).access.resets.get() > resets, "a REVOKE in the binlog is obeyed");
    admin.query_drop("DROP VIEW IF EXISTS tr_hview").await.unwrap();
}

/// A write of a session whose binlogging is off never reaches the binlog, so freshet evicts
/// every cache after it. Only an account with SUPER or BINLOG ADMIN may turn it off, but the
/// session took the text's word for it: any login could send `SET sql_log_bin = 0`, which
/// the server refuses, and have every later statement of the session (`DO 1`) empty every
/// cache, and a `sql_log_bin` in a string of an executable comment or a PREPARE did the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_may_not_turn_binlogging_off_cannot_evict_the_caches() {
    // Alone: the other tests' GRANTs make freshet learn rights anew, and the reads here must
    // each be a hit.
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_nolog").await;
    let mut admin = direct().await;
    admin.query_drop("CREATE OR REPLACE TABLE tr_nolog_notes (id INT PRIMARY KEY AUTO_INCREMENT, note VARCHAR(100))").await.unwrap();
    user("tr_nolog_user", &["SELECT, INSERT ON freshet_test.tr_nolog_notes"]).await;
    let proxy = start_proxy(&config("tr_nolog", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_nolog WHERE id = 1";
    warm(&proxy, sql).await;
    let mut reader = through(&proxy).await;
    let unlogged = || engine(&proxy).counters.unlogged_writes.get();
    // Each group runs on a session of its own, in order; the last statement of each writes.
    let write = "INSERT INTO tr_nolog_notes (note) VALUES ('a note')";
    let groups: [&[&str]; 13] = [
        &["SET sql_log_bin = 0", "DO 1", write],
        &["SET SESSION binlog_format = 'STATEMENT'", write],
        &["SET @@session.sql_log_bin = OFF, @x = 1", write],
        &["SET STATEMENT sql_log_bin = 0 FOR DO 3", &format!("SET STATEMENT sql_log_bin = 0 FOR {write}")],
        &["DO 4; SET sql_log_bin = 0", "DO 5", write],
        &["DO 6; SET STATEMENT sql_log_bin = 0 FOR DO 7", write],
        &[&format!("{write}; SET sql_log_bin = 0; {write}"), write],
        &["SELECT /*!10000 'sql_log_bin', */ 1", write],
        &["DO /*!10000 'binlog_format', */ 9", write],
        &["PREPARE s FROM 'DO ''sql_log_bin'''", "EXECUTE s", "DEALLOCATE PREPARE s", write],
        &["EXECUTE IMMEDIATE 'SELECT ''binlog_format'''", write],
        // Refused at its PREPARE; then an EXECUTE of a statement the server does not have.
        &["PREPARE s FROM 'SET sql_log_bin = 0'", "EXECUTE s", write],
        // Reads the variable, sets nothing.
        &["PREPARE s FROM 'DO @@sql_log_bin'", "EXECUTE s", write],
    ];
    for group in groups {
        let mut hostile = Conn::new(as_user(&proxy.mysql.to_string(), "tr_nolog_user", Some(DB))).await.unwrap();
        for statement in group {
            let before = (unlogged(), hits(&proxy));
            let _ = hostile.query_drop(*statement).await;
            assert_eq!(unlogged(), before.0, "`{statement}` (after {group:?}) was taken for a write with binlogging off");
            assert!(text(&mut reader, sql).await.is_ok());
            assert!(hits(&proxy) > before.1, "after `{statement}` ({group:?}) the cache was emptied");
        }
    }
    // The same through the binary protocol: a statement prepared, then executed (and refused).
    let mut hostile = Conn::new(as_user(&proxy.mysql.to_string(), "tr_nolog_user", Some(DB))).await.unwrap();
    for statement in ["SET sql_log_bin = 0", "SET STATEMENT sql_log_bin = 0 FOR INSERT INTO tr_nolog_notes (note) VALUES (?)"] {
        let prepared = hostile.prep(statement).await;
        let before = (unlogged(), hits(&proxy));
        if let Ok(prepared) = &prepared {
            let params =
                if prepared.num_params() == 1 { mysql_async::Params::Positional(vec!["x".into()]) } else { mysql_async::Params::Empty };
            let _ = hostile.exec_drop(prepared, params).await;
        }
        hostile.query_drop(write).await.unwrap();
        assert_eq!(unlogged(), before.0, "prepared `{statement}` ({prepared:?}) was taken for a write with binlogging off");
        assert!(text(&mut reader, sql).await.is_ok());
        assert!(hits(&proxy) > before.1, "after prepared `{statement}` the cache was emptied");
    }
}

/// Cached queries read tables of the caches' database only, so a GRANT or REVOKE on objects of
/// another database cannot change what any account may read of them, and neither can a new
/// account (it has no rights, and no open session is it). An application that
/// manages its own database's accounts (a tenant with GRANT OPTION there, granting each new
/// customer's login) made every freshet in front of the server forget what every account may
/// read, whatever database those cache: each GRANT cost every account a relayed read per cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_on_another_database_leave_what_accounts_may_read_here() {
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_scope").await;
    let mut admin = direct().await;
    admin.query_drop("CREATE DATABASE IF NOT EXISTS tr_tenantdb").await.unwrap();
    admin.query_drop("CREATE OR REPLACE TABLE tr_tenantdb.things (id INT PRIMARY KEY, a INT)").await.unwrap();
    user("tr_scope_reader", &["SELECT ON freshet_test.tr_scope"]).await;
    user("tr_customer", &[]).await;
    user("tr_tenant", &[]).await;
    admin.query_drop("GRANT ALL PRIVILEGES ON tr_tenantdb.* TO 'tr_tenant'@'127.0.0.1' WITH GRANT OPTION").await.unwrap();
    admin.query_drop("GRANT CREATE USER ON *.* TO 'tr_tenant'@'127.0.0.1'").await.unwrap();
    admin.query_drop("DROP USER IF EXISTS 'tr_signup'@'127.0.0.1', 'tr_signup2'@'127.0.0.1'").await.unwrap();
    let proxy = start_proxy(&config("tr_scope", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_scope WHERE id = 1";
    warm(&proxy, sql).await;
    let (mut d, mut t) = pair(&proxy, "tr_scope_reader", Some(DB)).await;
    assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "the reader is served from the cache");
    let mut tenant_through = Conn::new(as_user(&proxy.mysql.to_string(), "tr_tenant", Some("tr_tenantdb"))).await.unwrap();
    let mut tenant_direct = Conn::new(as_user(&upstream_addr(), "tr_tenant", Some("tr_tenantdb"))).await.unwrap();
    let mut watcher = through(&proxy).await;
    let customer = "'tr_customer'@'127.0.0.1'";
    for (n, statement) in [
        // A new account: no rights yet, and no open session is one.
        "CREATE USER 'tr_signup'@'127.0.0.1' IDENTIFIED BY 'pw'".to_string(),
        "CREATE USER IF NOT EXISTS 'tr_signup2'@'127.0.0.1'".to_string(),
        format!("GRANT SELECT ON tr_tenantdb.* TO {customer}"),
        format!("GRANT SELECT, INSERT ON `tr_tenantdb`.`things` TO {customer}"),
        format!("GRANT UPDATE (a) ON tr_tenantdb.things TO {customer}"),
        format!("GRANT SELECT ON things TO {customer}"),
        format!("REVOKE UPDATE (a) ON tr_tenantdb.things FROM {customer}"),
        format!("GRANT DELETE ON * TO {customer}"),
        format!("REVOKE SELECT, INSERT ON TABLE tr_tenantdb.things FROM {customer}"),
        format!("REVOKE ALL PRIVILEGES ON tr_tenantdb.* FROM {customer}"),
    ]
    .iter()
    .enumerate()
    {
        let noted = Learnt::note(&proxy);
        // Unqualified ones (odd) directly: through freshet, a session that has not been asked
        // its database yet may be in any, and they count.
        let tenant = if n % 2 == 0 { &mut tenant_through } else { &mut tenant_direct };
        tenant.query_drop(statement).await.unwrap_or_else(|e| panic!("{statement}: {e}"));
        noted.kept(&proxy, &mut watcher, (&mut d, &mut t), sql, statement).await;
    }
    // Grants that may reach the caches' database still count: on it, by a pattern that
    // matches it, on everything, and roles.
    admin.query_drop("CREATE ROLE IF NOT EXISTS tr_scope_role").await.unwrap();
    for statement in [
        format!("GRANT SELECT ON freshet_test.* TO {customer}"),
        format!("GRANT SELECT ON `freshet\\_te%`.* TO {customer}"),
        format!("GRANT SELECT ON `fresh_t_test`.* TO {customer}"),
        format!("GRANT SELECT ON *.* TO {customer}"),
        format!("GRANT tr_scope_role TO {customer}"),
        format!("REVOKE ALL PRIVILEGES, GRANT OPTION FROM {customer}"),
        // An account's name given to another, or its rights gone with it.
        "CREATE OR REPLACE USER 'tr_signup2'@'127.0.0.1'".to_string(),
        "RENAME USER 'tr_signup2'@'127.0.0.1' TO 'tr_signup3'@'127.0.0.1'".to_string(),
        "DROP USER 'tr_signup'@'127.0.0.1', 'tr_signup3'@'127.0.0.1'".to_string(),
    ] {
        let resets = engine(&proxy).access.resets.get();
        admin.query_drop(&statement).await.unwrap_or_else(|e| panic!("{statement}: {e}"));
        caught_up(&mut watcher).await;
        assert!(engine(&proxy).access.resets.get() > resets, "`{statement}` may change what accounts may read here");
    }
    admin.query_drop("DROP ROLE IF EXISTS tr_scope_role").await.unwrap();
    admin.query_drop("DROP DATABASE IF EXISTS tr_tenantdb").await.unwrap();
}

/// A statement the server refused ran nothing, but a block of statements (`BEGIN NOT ATOMIC
/// ... END`, a procedure) answers with the error of its last statement after the others ran:
/// a refusal at its end says nothing of a write with binlogging off, or a REVOKE that failed
/// in part (and so is in no binlog), inside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_at_the_end_of_a_block_does_not_hide_what_ran_in_it() {
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_block").await;
    let mut admin = direct().await;
    admin.query_drop("CREATE OR REPLACE TABLE tr_block_cols (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, secret VARCHAR(50) NOT NULL, extra INT)").await.unwrap();
    admin.query_drop("INSERT INTO tr_block_cols VALUES (1, 'owner1', 'the secret', 7)").await.unwrap();
    user("tr_block_admin", &["BINLOG ADMIN ON *.*", "SELECT, UPDATE ON freshet_test.tr_block", "SELECT ON freshet_test.tr_block_cols"])
        .await;
    admin
        .query_drop("GRANT SELECT (id, owner, secret) ON freshet_test.tr_block_cols TO 'tr_block_admin'@'127.0.0.1' WITH GRANT OPTION")
        .await
        .unwrap();
    user("tr_block_reader", &["SELECT (id, owner, secret) ON freshet_test.tr_block_cols"]).await;
    let proxy = start_proxy(&config("tr_block", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_block WHERE id = 1";
    warm(&proxy, sql).await;
    let mut blocker = Conn::new(as_user(&proxy.mysql.to_string(), "tr_block_admin", Some(DB))).await.unwrap();
    // Binlogging off for a write, back on, then a statement the server refuses (1142).
    let block = "BEGIN NOT ATOMIC SET sql_log_bin = 0; UPDATE tr_block SET secret = 'unlogged' WHERE id = 1; \
                 SET sql_log_bin = 1; SELECT COUNT(*) FROM mysql.global_priv; END";
    let answer = blocker.query_drop(block).await.map_err(server_error);
    assert_eq!(answer.map_err(|(code, _)| code), Err(1142), "the block ends refused");
    let (mut d, mut t) = (direct().await, through(&proxy).await);
    same_text(&mut d, &mut t, sql, "after a write with binlogging off in a refused block").await;
    // A REVOKE that fails in part (1147, handled), then a refusal (1142).
    let proxy = start_proxy(&config("tr_block_cols", "\"freshet\"")).await;
    let cols = "SELECT id, owner, secret FROM tr_block_cols WHERE id = 1";
    warm(&proxy, cols).await;
    let mut blocker = Conn::new(as_user(&proxy.mysql.to_string(), "tr_block_admin", Some(DB))).await.unwrap();
    let (mut d, mut t) = pair(&proxy, "tr_block_reader", Some(DB)).await;
    assert!(served_from_cache(&proxy, &mut d, &mut t, cols).await, "served from the cache before the revoke");
    let block = "BEGIN NOT ATOMIC DECLARE CONTINUE HANDLER FOR 1147 BEGIN END; \
                 REVOKE SELECT (secret, extra) ON freshet_test.tr_block_cols FROM 'tr_block_reader'@'127.0.0.1'; \
                 SELECT COUNT(*) FROM mysql.global_priv; END";
    let answer = blocker.query_drop(block).await.map_err(server_error);
    assert_eq!(answer.map_err(|(code, _)| code), Err(1142), "the block ends refused");
    let want = text(&mut d, cols).await;
    assert!(want.as_ref().is_err_and(|(code, _)| *code == 1143), "the REVOKE took `secret` away: {want:?}");
    same_text(&mut d, &mut t, cols, "after a REVOKE in a refused block").await;
}

/// What an account may read of a cache was learned for the cache's columns of the time: an
/// ALTER that adds a column changes what `SELECT *` reads, and an account granted only the
/// old columns is refused by the server (1142), where freshet served it the new column from
/// the cache until `max_privilege_age` (an audit). A schema change of a table a cache reads
/// makes freshet learn again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_column_is_not_served_to_an_account_granted_the_old_ones() {
    // Alone: the other tests' GRANTs would make freshet learn again and hide the fault.
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_star").await;
    user("tr_star_cols", &["SELECT (id, owner, secret) ON freshet_test.tr_star"]).await;
    let proxy = start_proxy(
        "[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\n[consistency]\nmax_lag = \"5s\"\n[[cache]]\nname = \"secrets\"\nquery = \"SELECT * FROM tr_star WHERE id = ?\"\n",
    )
    .await;
    let sql = "SELECT * FROM tr_star WHERE id = 1";
    warm(&proxy, sql).await;
    let (mut d, mut old) = pair(&proxy, "tr_star_cols", Some(DB)).await;
    assert!(served_from_cache(&proxy, &mut d, &mut old, sql).await, "the account is served its columns from the cache");
    direct().await.query_drop("ALTER TABLE tr_star ADD COLUMN z VARCHAR(20) NOT NULL DEFAULT 'not granted'").await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    // Read by an account that may (the new columns' definitions captured, the view filled).
    warm(&proxy, sql).await;
    let want = text(&mut d, sql).await;
    assert!(matches!(want, Err((1142, _))), "the server refuses the new column: {want:?}");
    let (_, mut new) = pair(&proxy, "tr_star_cols", Some(DB)).await;
    for round in 0..3 {
        assert_eq!(text(&mut old, sql).await, want, "the old session, read {round}");
        assert_eq!(text(&mut new, sql).await, want, "a new session, read {round}");
    }
}

/// MariaDB keeps a session's database privileges from its login, and reads them again at
/// `USE` (or COM_INIT_DB, which takes the same path here): after a database-level REVOKE an old session still reads, until it
/// runs USE, after which the server refuses it (1142). A re-audit found freshet serving it
/// after the USE: the session kept what it had learnt, as a session asked again for its
/// settings now does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn use_makes_a_session_learn_its_database_rights_again() {
    // Alone: another test's GRANT makes freshet learn again and hides the fault.
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_use").await;
    let proxy = start_proxy(&config("tr_use", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_use WHERE id = 1";
    warm(&proxy, sql).await;
    for (n, switch) in ["USE freshet_test", "/* again */ use `freshet_test`"].into_iter().enumerate() {
        let account = format!("tr_use_{n}");
        user(&account, &["SELECT, INSERT ON freshet_test.*"]).await;
        let (mut d, mut old) = pair(&proxy, &account, Some(DB)).await;
        assert!(served_from_cache(&proxy, &mut d, &mut old, sql).await, "{account} served before the revoke");
        direct().await.query_drop(format!("REVOKE SELECT ON freshet_test.* FROM '{account}'@'127.0.0.1'")).await.unwrap();
        caught_up(&mut through(&proxy).await).await;
        // The old session still reads, directly and through freshet (from the cache again).
        assert!(served_from_cache(&proxy, &mut d, &mut old, sql).await, "{account}'s old session served after the revoke");
        for c in [&mut d, &mut old] {
            c.query_drop(switch).await.unwrap();
        }
        let want = text(&mut d, sql).await;
        assert!(matches!(want, Err((1142, _))), "the server refuses the old session after {switch}: {want:?}");
        for round in 0..3 {
            assert_eq!(text(&mut old, sql).await, want, "{switch}, read {round}");
        }
    }
}

/// The server reads a session's database privileges again when it runs (or only loads) a
/// stored routine of another database, as at USE: it switches to the routine's database and
/// back. A REVOKE that the session outlived then takes effect for it (an audit: after a
/// seen REVOKE, `SELECT other.f()`, `SHOW CREATE FUNCTION other.f` or a prepared call of
/// it, the server refused the session, and freshet served it for `max_privilege_age`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_code_makes_a_session_learn_its_database_rights_again() {
    // Alone: another test's GRANT makes freshet learn again and hides the fault.
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_routine").await;
    let mut admin = direct().await;
    admin.query_drop("CREATE OR REPLACE TABLE tr_routine_log (x INT)").await.unwrap();
    admin.query_drop("CREATE DATABASE IF NOT EXISTS tr_routines").await.unwrap();
    admin.query_drop("CREATE OR REPLACE FUNCTION tr_routines.f() RETURNS INT DETERMINISTIC SQL SECURITY INVOKER RETURN 1").await.unwrap();
    // Reading a view's definition opens it, and loads the function it calls.
    admin.query_drop("CREATE OR REPLACE VIEW tr_routines.v AS SELECT tr_routines.f() AS x").await.unwrap();
    let proxy = start_proxy(&config("tr_routine", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_routine WHERE id = 1";
    warm(&proxy, sql).await;
    for (n, switch) in [
        "SELECT tr_routines.f()",
        "SHOW CREATE FUNCTION tr_routines.f",
        "prepared: SELECT tr_routines.f()",
        "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = 'tr_routines'",
        "SHOW TABLE STATUS FROM tr_routines",
        // A statement that may have re-read them (a write: its triggers may call a routine)
        // then one that surely does: the first must not pass for the second.
        "INSERT INTO tr_routine_log VALUES (1); USE freshet_test",
        // A USE the server refuses switches nothing and reads nothing: the call after it does.
        "USE tr_nowhere; SELECT tr_routines.f()",
        "SELECT * FROM tr_no_such_table; USE freshet_test; SELECT tr_routines.f()",
    ]
    .into_iter()
    .enumerate()
    {
        let account = format!("tr_routine_{n}");
        user(&account, &["SELECT, INSERT ON freshet_test.*", "EXECUTE, SELECT, SHOW VIEW ON tr_routines.*", "SELECT ON mysql.proc"]).await;
        let (mut d, mut old) = pair(&proxy, &account, Some(DB)).await;
        assert!(served_from_cache(&proxy, &mut d, &mut old, sql).await, "{account} served before the revoke");
        direct().await.query_drop(format!("REVOKE SELECT ON freshet_test.* FROM '{account}'@'127.0.0.1'")).await.unwrap();
        caught_up(&mut through(&proxy).await).await;
        // The old session still reads, directly and through freshet (from the cache again).
        assert!(served_from_cache(&proxy, &mut d, &mut old, sql).await, "{account}'s old session served after the revoke");
        for c in [&mut d, &mut old] {
            match switch.strip_prefix("prepared: ") {
                Some(call) => c.exec_drop(call, ()).await.unwrap(),
                None => {
                    let multi = switch.starts_with("SELECT * FROM tr_no_such_table");
                    for statement in if multi {
                        vec![switch.rsplit_once("; ").unwrap().0, "SELECT tr_routines.f()"]
                    } else {
                        switch.split("; ").collect()
                    } {
                        let ran = c.query_drop(statement).await;
                        assert!(ran.is_ok() || statement.contains("nowhere") || multi, "{statement}: {ran:?}");
                        // Read after each: the write alone re-reads nothing, and is served.
                        let _ = text(c, sql).await;
                    }
                }
            }
        }
        let want = text(&mut d, sql).await;
        assert!(matches!(want, Err((1142, _))), "the server refuses the old session after {switch}: {want:?}");
        for round in 0..3 {
            assert_eq!(text(&mut old, sql).await, want, "{switch}, read {round}");
        }
    }
    admin.query_drop("DROP DATABASE tr_routines").await.unwrap();
}

/// The temporary-table question before a read teaches the account (the session's count of
/// CREATE TEMPORARY TABLE) is reset to 0 by FLUSH STATUS and by COM_REFRESH's status bit,
/// while the table stays: a temporary table made by stored code, then such a reset, taught the
/// account a right to the real table it shadowed (an audit: every new session of the account
/// was then served rows the server refuses it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_of_the_status_counters_hides_no_temporary_table() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_tmp_flush").await;
    let mut admin = direct().await;
    admin
        .query_drop(
            "CREATE OR REPLACE FUNCTION tr_tmp_flusher() RETURNS INT DETERMINISTIC MODIFIES SQL DATA SQL SECURITY DEFINER BEGIN \
             CREATE TEMPORARY TABLE IF NOT EXISTS tr_tmp_flush (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, secret VARCHAR(50) NOT NULL); \
             RETURN 1; END",
        )
        .await
        .unwrap();
    let proxy = start_proxy(&config("tr_tmp_flush", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_tmp_flush WHERE id = 1";
    warm(&proxy, sql).await;
    for (n, reset) in ["FLUSH STATUS", "FLUSH LOCAL HOSTS, STATUS", "COM_REFRESH"].into_iter().enumerate() {
        let account = format!("tr_tmp_flush_{n}");
        user(&account, &["RELOAD ON *.*", &format!("EXECUTE ON FUNCTION {DB}.tr_tmp_flusher")]).await;
        let (mut d, mut t) = pair(&proxy, &account, Some(DB)).await;
        for c in [&mut d, &mut t] {
            c.query_drop("SELECT tr_tmp_flusher()").await.unwrap();
        }
        if reset == "COM_REFRESH" {
            // mysql_async has no COM_REFRESH: a raw session of the account does it all.
            let mut raw = RawClient::connect_as(&proxy.mysql.to_string(), DEFAULT_CAPS, &account, "pw").await.unwrap();
            assert_eq!(raw.query("SELECT tr_tmp_flusher()").await.last().map(|p| p[0]), Some(0xfe), "the function ran");
            raw.send(&[0x07, 0x10]).await;
            assert_eq!(raw.packet().await[0], 0x00, "COM_REFRESH(STATUS) answered OK");
            for round in 0..3 {
                let answer = raw.query(sql).await;
                // The temporary table's empty result: column count, 3 definitions, EOF, EOF.
                assert_eq!(answer.len(), 6, "read {round} after COM_REFRESH: {answer:?}");
            }
        } else {
            for c in [&mut d, &mut t] {
                c.query_drop(reset).await.unwrap();
            }
            same_text(&mut d, &mut t, sql, reset).await;
        }
        // A new session of the account: no temporary table, no right to the real one.
        let (mut d2, mut t2) = pair(&proxy, &account, Some(DB)).await;
        let refused = text(&mut d2, sql).await;
        assert!(refused.as_ref().is_err_and(|(code, _)| *code == 1142), "the server refuses the real table: {refused:?}");
        same_text(&mut d2, &mut t2, sql, &format!("another session of the account after {reset}")).await;
    }
    admin.query_drop("DROP FUNCTION tr_tmp_flusher").await.unwrap();
}

/// A session that logged in before a seen privilege change and sends USE at each checkout
/// (or writes, which may run stored code) learns its rights again once per seen change, not
/// at each USE: the server's re-read after the first gives what every later one gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_uses_its_database_at_each_checkout_learns_once_per_change() {
    // Alone: another test's GRANT makes freshet learn again.
    let _globals = SERVER_GLOBALS.write().await;
    secrets("tr_use_pool").await;
    let proxy = start_proxy(&config("tr_use_pool", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_use_pool WHERE id = 1";
    warm(&proxy, sql).await;
    user("tr_use_pool_u", &["SELECT, INSERT ON freshet_test.tr_use_pool"]).await;
    let (mut d, mut pooled) = pair(&proxy, "tr_use_pool_u", Some(DB)).await;
    assert!(served_from_cache(&proxy, &mut d, &mut pooled, sql).await, "served before the change");
    user("tr_use_pool_other", &["SELECT ON freshet_test.tr_use_pool"]).await;
    caught_up(&mut through(&proxy).await).await;
    let (mut served, rounds) = (0, 20);
    for round in 0..rounds {
        let checkout = if round % 2 == 0 { format!("USE {DB}") } else { "INSERT IGNORE INTO tr_use_pool VALUES (1, 'x', 'y')".into() };
        pooled.query_drop(&checkout).await.unwrap();
        let before = hits(&proxy);
        assert_eq!(text(&mut pooled, sql).await, text(&mut d, sql).await, "after {checkout}");
        served += u64::from(hits(&proxy) > before);
    }
    assert!(served >= rounds - 3, "{served} of {rounds} reads after a USE or a write each were served from the cache");
}

/// A REVOKE that fails in part (1141: one of its accounts has no such grant) takes effect for
/// the others and leaves no trace in the binlog. Sent as a plain text through freshet it was
/// obeyed (above); run by a text that runs statements (EXECUTE IMMEDIATE, PREPARE and
/// EXECUTE, a block, a CALL), in a text of 16 MiB or more, or made to take effect by
/// COM_REFRESH with its grant bit (`mysql_refresh(REFRESH_GRANT)`, which logs nothing) after a
/// grant table's row went, the account was served for `max_privilege_age` (60 s by default)
/// what the server refuses it (found by session 54's privileges audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_privilege_change_run_out_of_sight_through_freshet_is_obeyed() {
    let _globals = SERVER_GLOBALS.read().await;
    secrets("tr_sight").await;
    let proxy = start_proxy(&config("tr_sight", "\"freshet\"")).await;
    let sql = "SELECT id, owner, secret FROM tr_sight WHERE id = 1";
    warm(&proxy, sql).await;
    let revoke = "REVOKE SELECT ON freshet_test.tr_sight FROM 'tr_sig'@'127.0.0.1', 'tr_nobody'@'127.0.0.1'";
    direct().await.query_drop("CREATE OR REPLACE TABLE tr_sight_open (id INT PRIMARY KEY)").await.unwrap();
    direct().await.query_drop(format!("CREATE OR REPLACE PROCEDURE tr_sight_revoke() {revoke}")).await.unwrap();
    let padding = "x".repeat(17 << 20);
    for runner in [
        vec![format!("EXECUTE IMMEDIATE \"{revoke}\"")],
        vec![format!("BEGIN NOT ATOMIC {revoke}; END")],
        vec![format!("PREPARE tr_sight_s FROM \"{revoke}\""), "EXECUTE tr_sight_s".to_string()],
        vec!["CALL tr_sight_revoke()".to_string()],
        vec![format!("{revoke} /* {padding} */")],
        vec!["refresh".to_string()],
    ] {
        // Another table keeps the database open to the account after the revoke.
        user("tr_sig", &["SELECT ON freshet_test.tr_sight", "SELECT ON freshet_test.tr_sight_open"]).await;
        let (mut d, mut t) = pair(&proxy, "tr_sig", Some(DB)).await;
        assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "served before the revoke");
        let what = if runner[0].len() > 1000 { "a REVOKE of 17 MiB".to_string() } else { runner.join("; ") };
        if runner[0] == "refresh" {
            // The grant table's row goes (binlogged: freshet forgets), the account reads (and
            // is learnt allowed: the server has not read its tables again), then the refresh.
            direct().await.query_drop("DELETE FROM mysql.tables_priv WHERE User = 'tr_sig' AND Table_name = 'tr_sight'").await.unwrap();
            assert!(served_from_cache(&proxy, &mut d, &mut t, sql).await, "served after the grant table's write");
            let mut raw = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
            raw.send(&[0x07, 0x01]).await;
            assert_eq!(raw.packet().await[0], 0x00, "COM_REFRESH(REFRESH_GRANT) answered OK");
        } else {
            let mut boss = through(&proxy).await;
            let mut answer = Ok(());
            for statement in &runner {
                answer = boss.query_drop(statement).await.map_err(server_error);
            }
            assert_eq!(answer.map_err(|(code, _)| code), Err(1141), "{what}: the server refuses the REVOKE in part");
        }
        let (mut d, mut t) = pair(&proxy, "tr_sig", Some(DB)).await;
        let want = text(&mut d, sql).await;
        assert!(want.as_ref().is_err_and(|(code, _)| *code == 1142), "{what}: yet it took the table away: {want:?}");
        same_text(&mut d, &mut t, sql, &what).await;
    }
    direct().await.query_drop("DROP PROCEDURE tr_sight_revoke").await.unwrap();
    direct().await.query_drop("DROP TABLE tr_sight_open").await.unwrap();
}
