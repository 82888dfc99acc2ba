//! Hostile input against the real MariaDB: statements built to cost freshet time, memory or
//! stack (deep expressions, huge IN lists, huge statements), malformed commands, and secrets in
//! what freshet shows. Each case compares freshet's answer with the server's own answer to the
//! same bytes, and checks that another session is still served. Memory is measured on a
//! spawned freshet binary (peak RSS from /proc/<pid>/status), as bytes, never as time.

mod common;

use std::time::Duration;

use common::*;
use freshet_proxy::cache::RelayReason;
use freshet_proxy::protocol::response::{ERR, ErrPacket};
use freshet_testkit::process::Freshet;
use mysql_async::prelude::*;

const CACHED: &str = "SELECT id, name FROM hx WHERE id = ?";

/// `hx`: ids 1..=100, created once per run (the tests run at once and only read it).
async fn hx_table() {
    static READY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    READY.get_or_init(create_hx).await;
}

async fn create_hx() {
    let mut conn = direct().await;
    conn.query_drop("DROP TABLE IF EXISTS hx").await.unwrap();
    conn.query_drop("CREATE TABLE hx (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4").await.unwrap();
    let values: Vec<String> = (1..=100).map(|i| format!("({i}, 'n{i}')")).collect();
    conn.query_drop(format!("INSERT INTO hx VALUES {}", values.join(", "))).await.unwrap();
}

fn config(extra: &str) -> String {
    format!("[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\n{extra}\n[[cache]]\nname = \"hx\"\nquery = \"{CACHED}\"\n")
}

async fn raw(addr: &str) -> RawClient {
    RawClient::connect(addr, DEFAULT_CAPS).await.expect("raw session")
}

/// What a reply says, for comparing freshet's with the server's: every packet, except that an
/// error is its code and SQLSTATE (its message may name the connection or a temporary file),
/// and an EOF's status without SERVER_QUERY_WAS_SLOW (the server's clock, not its answer).
fn gist(reply: &[Vec<u8>]) -> Vec<Vec<u8>> {
    reply
        .iter()
        .map(|p| match p.as_slice() {
            [ERR, ..] => {
                let e = ErrPacket::parse(p).expect("an ERR packet");
                format!("ERR {} {}", e.code, String::from_utf8_lossy(&e.sql_state)).into_bytes()
            }
            [0xfe, w0, w1, s0, s1] => vec![0xfe, *w0, *w1, *s0, s1 & !0x08],
            _ => p.clone(),
        })
        .collect()
}

/// The server's and freshet's replies to the same query, each on a new session.
async fn both(proxy: &Proxy, sql: &str) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let server = raw(&upstream_addr()).await.query(sql).await;
    let freshet = raw(&proxy.mysql.to_string()).await.query(sql).await;
    (gist(&server), gist(&freshet))
}

/// Another session is served, from the cache or not: freshet still answers.
async fn still_serving(proxy: &Proxy) {
    let mut conn = through(proxy).await;
    let name: Option<String> = conn.query_first("SELECT name FROM hx WHERE id = 7").await.unwrap();
    assert_eq!(name.as_deref(), Some("n7"));
}

fn relayed(proxy: &Proxy, reason: RelayReason) -> u64 {
    let i = RelayReason::ALL.iter().position(|r| *r == reason).unwrap();
    proxy.engine.get().expect("the engine started").counters.relayed[i].get()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_ten_thousand_terms_is_answered_as_the_server_answers() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    let sql = format!("SELECT id, name FROM hx WHERE id = 1{}", " AND id = 1".repeat(10_000));
    let (server, freshet) = both(&proxy, &sql).await;
    assert_eq!(freshet, server);
    let sum = format!("SELECT id, name FROM hx WHERE id = 1{}", " + 0".repeat(10_000));
    let (server, freshet) = both(&proxy, &sum).await;
    assert_eq!(freshet, server);
    still_serving(&proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_nested_parentheses_are_answered_as_the_server_answers() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    let depth = 100_000;
    let sql = format!("SELECT id, name FROM hx WHERE id = {}1{}", "(".repeat(depth), ")".repeat(depth));
    let (server, freshet) = both(&proxy, &sql).await;
    assert_eq!(freshet, server);
    // Shallow enough for the server to accept.
    let sql = format!("SELECT id, name FROM hx WHERE id = {}1{}", "(".repeat(200), ")".repeat(200));
    let (server, freshet) = both(&proxy, &sql).await;
    assert_eq!(freshet, server);
    still_serving(&proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_value_in_list_is_answered_while_other_sessions_are_served() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    let list: Vec<String> = (1..=1_000_000).map(|i: u32| i.to_string()).collect();
    let sql = format!("SELECT id, name FROM hx WHERE id IN ({})", list.join(","));
    let server = gist(&raw(&upstream_addr()).await.query(&sql).await);
    let addr = proxy.mysql.to_string();
    let big = tokio::spawn(async move { gist(&raw(&addr).await.query(&sql).await) });
    still_serving(&proxy).await;
    assert_eq!(big.await.unwrap(), server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_lists_longer_than_the_configured_bound_are_relayed() {
    hx_table().await;
    let proxy = start_proxy(&config("[limits]\nmax_in_list = 10")).await;
    let mut client = raw(&proxy.mysql.to_string()).await;
    let short = "SELECT id, name FROM hx WHERE id IN (1, 2, 3)";
    let long = format!("SELECT id, name FROM hx WHERE id IN ({})", (1..=11).map(|i| i.to_string()).collect::<Vec<_>>().join(", "));
    let mut direct = raw(&upstream_addr()).await;
    // Warm the short list's shape until it is answered from the cache.
    for _ in 0..50 {
        let before = proxy.engine.get().unwrap().counters.hits.get();
        assert_eq!(client.query(short).await, direct.query(short).await);
        if proxy.engine.get().unwrap().counters.hits.get() > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let hits = proxy.engine.get().unwrap().counters.hits.get();
    let not_cacheable = relayed(&proxy, RelayReason::NotCacheable);
    assert_eq!(client.query(&long).await, direct.query(&long).await);
    assert_eq!(proxy.engine.get().unwrap().counters.hits.get(), hits, "the long list was not answered from the cache");
    assert_eq!(relayed(&proxy, RelayReason::NotCacheable), not_cacheable + 1);
}

/// Runs `bodies` as executes of the cached statement on one session of `addr`: a well-formed
/// execute first (so that parameter types are known), then each body.
async fn executes(addr: &str, bodies: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
    let mut client = raw(addr).await;
    let (id, params) = prepare(&mut client, CACHED).await;
    assert_eq!(params, 1);
    // id = 5 as a LONGLONG, types sent.
    let good = [&[0u8, 1, 8, 0][..], &5u64.to_le_bytes()].concat();
    let mut out = Vec::new();
    // Until freshet answers it from the cache: the first reads are relayed (columns are
    // captured, the key is filled).
    for _ in 0..10 {
        client.send(&execute(id, &good)).await;
        out.push(gist(&client.read_results().await));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    for body in bodies {
        client.send(&execute(id, body)).await;
        out.push(gist(&client.read_results().await));
    }
    out
}

/// A client may send its first command right behind its handshake response, before the
/// server's OK. It is the session's first command, read by freshet as any other (what it
/// does to the session is followed), and its answer follows the OK; it must not reach the
/// server unseen while the login is relayed, its answer left for the next command to take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_pipelined_behind_the_login_is_the_sessions_first() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    let mut replies = Vec::new();
    for addr in [proxy.mysql.to_string(), upstream_addr()] {
        let mut client = RawClient::connect_pipelined(&addr, DEFAULT_CAPS, b"\x03SELECT 11").await.unwrap();
        let first = tokio::time::timeout(Duration::from_secs(5), client.read_results()).await.expect("the pipelined command's answer");
        let second = client.query("SELECT 22").await;
        // Also behind an auth switch's answer sent before the server asked.
        let mut client = RawClient::connect_switch_pipelined(&addr, DEFAULT_CAPS, b"\x03SELECT 33").await.unwrap();
        let third = tokio::time::timeout(Duration::from_secs(5), client.read_results()).await.expect("the pipelined command's answer");
        let fourth = client.query("SELECT 44").await;
        replies.push((gist(&first), gist(&second), gist(&third), gist(&fourth)));
    }
    assert_eq!(replies[0], replies[1], "through freshet, then directly");
}

/// Executes `body` on statement `id` `times` times, a moment apart (the first executes of a
/// shape are relayed, to capture its columns and fill its key): the last reply.
async fn execute_times(client: &mut RawClient, id: u32, body: &[u8], times: usize) -> Vec<Vec<u8>> {
    let mut last = Vec::new();
    for _ in 0..times {
        client.send(&execute(id, body)).await;
        last = client.read_results().await;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    last
}

/// A session at `addr` that executed the cached point read 10 times answered from the cache,
/// then once with a read-only cursor (flags 1), read up to the EOF saying the cursor exists;
/// and the statement's id.
async fn with_a_cursor(addr: &str) -> (RawClient, u32) {
    let mut client = raw(addr).await;
    let (id, _) = prepare(&mut client, CACHED).await;
    execute_times(&mut client, id, &key(2), 10).await;
    let mut with_cursor = execute(id, &key(1));
    with_cursor[5] = 1;
    client.send(&with_cursor).await;
    let columns = client.packet().await;
    for _ in 0..columns[0] + 1 {
        client.packet().await;
    }
    (client, id)
}

/// An execute's parameter block for the point read: a LONGLONG `v`.
fn key(v: u64) -> Vec<u8> {
    [&[0u8, 1, 8, 0][..], &v.to_le_bytes()].concat()
}

/// A cursor the server opened for a statement stays open until the statement's next execute
/// reaches the server: an execute answered from the cache in between must not leave a
/// COM_STMT_FETCH the old cursor's rows, where the server answers that no cursor is open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execute_answered_here_leaves_no_cursor_of_an_earlier_one() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    let mut replies = Vec::new();
    for addr in [proxy.mysql.to_string(), upstream_addr()] {
        let (mut client, id) = with_a_cursor(&addr).await;
        let fetch = [&[0x1cu8][..], &id.to_le_bytes(), &1u32.to_le_bytes()].concat();
        client.send(&fetch).await;
        let mut fetched = Vec::new();
        client.rows(&mut fetched).await;
        // An execute without a cursor, then a fetch.
        client.send(&execute(id, &key(2))).await;
        let plain = gist(&client.read_results().await);
        client.send(&fetch).await;
        let mut after = Vec::new();
        client.rows(&mut after).await;
        replies.push((gist(&fetched), plain, gist(&after)));
    }
    assert_eq!(replies[0], replies[1], "through freshet, then directly");
}

/// The same with an execute the server refuses between (1210: no parameters): a refused
/// execute leaves the cursor open, and the execute after it, answered from the cache, left a
/// COM_STMT_FETCH the old cursor's rows (a fuzzer), where the server answers 1421.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_execute_leaves_the_cursor_open_and_the_next_one_relayed() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    let mut replies = Vec::new();
    for addr in [proxy.mysql.to_string(), upstream_addr()] {
        let (mut client, id) = with_a_cursor(&addr).await;
        // No parameter block: refused before it runs.
        client.send(&[&[0x17u8][..], &id.to_le_bytes(), &[0], &1u32.to_le_bytes()].concat()).await;
        let refused = gist(&client.read_results().await);
        client.send(&execute(id, &key(2))).await;
        let plain = gist(&client.read_results().await);
        let fetch = [&[0x1cu8][..], &id.to_le_bytes(), &1u32.to_le_bytes()].concat();
        client.send(&fetch).await;
        let mut after = Vec::new();
        client.rows(&mut after).await;
        replies.push((refused, plain, gist(&after)));
    }
    assert_eq!(replies[0], replies[1], "through freshet, then directly");
}

/// Parameter types the server reads otherwise than their bytes say: a YEAR (MariaDB binds it
/// as NULL), a DATE with a time (the server keeps the date), an invalid date or time (a zero
/// date, with a warning). Each execute is answered as the server answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_parameters_are_read_as_the_server_reads_them() {
    let mut conn = direct().await;
    conn.query_drop("CREATE OR REPLACE TABLE hx_params (id INT PRIMARY KEY, u BIGINT UNSIGNED, dt DATE, ts DATETIME)").await.unwrap();
    conn.query_drop(
        "INSERT INTO hx_params VALUES (1, 5, '2024-01-01', '2024-01-01 00:00:00'), (2, 2020, '0000-00-00', '2024-01-01 10:00:00'), \
         (3, 7, '2024-01-02', '2024-01-01 10:00:00')",
    )
    .await
    .unwrap();
    let caches = [("p_u", "u"), ("p_dt", "dt"), ("p_ts", "ts")];
    let config: String = caches
        .iter()
        .map(|(name, col)| format!("[[cache]]\nname = \"{name}\"\nquery = \"SELECT id FROM hx_params WHERE {col} = ?\"\n"))
        .collect();
    let proxy = start_proxy(&format!("[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\n{config}")).await;
    let date = |y: u16, m: u8, d: u8, time: &[u8]| [&[4 + time.len() as u8][..], &y.to_le_bytes(), &[m, d], time].concat();
    // (column, a well-formed parameter to warm with, the parameter under test): type, flags, value.
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("u", [&[8u8, 0x80][..], &5u64.to_le_bytes()].concat(), [&[0x0du8, 0][..], &2020u16.to_le_bytes()].concat()),
        ("ts", [&[0x0cu8, 0][..], &date(2024, 1, 1, &[])].concat(), [&[0x0au8, 0][..], &date(2024, 1, 1, &[10, 0, 0])].concat()),
        ("dt", [&[0x0au8, 0][..], &date(2024, 1, 2, &[])].concat(), [&[0x0au8, 0][..], &date(2024, 13, 1, &[])].concat()),
        ("ts", [&[0x0cu8, 0][..], &date(2024, 1, 1, &[])].concat(), [&[0x0cu8, 0][..], &date(2024, 1, 1, &[25, 0, 0])].concat()),
    ];
    let mut replies = Vec::new();
    for addr in [proxy.mysql.to_string(), upstream_addr()] {
        let mut client = raw(&addr).await;
        let mut got = Vec::new();
        for (col, warm, tested) in &cases {
            let (id, _) = prepare(&mut client, &format!("SELECT id FROM hx_params WHERE {col} = ?")).await;
            execute_times(&mut client, id, &[&[0u8, 1][..], warm].concat(), 8).await;
            // Several times: the first of a new parameter type is relayed to capture.
            got.push(gist(&execute_times(&mut client, id, &[&[0u8, 1][..], tested].concat(), 4).await));
        }
        replies.push(got);
    }
    let wrong: Vec<usize> = (0..cases.len()).filter(|&i| replies[0][i] != replies[1][i]).collect();
    assert!(wrong.is_empty(), "cases answered otherwise than the server: {wrong:?}");
}

/// MariaDB takes statement id 0xffffffff as the statement prepared last (for a PREPARE and
/// EXECUTE sent together): the types an execute sends through it are the statement's from
/// then on, and a later execute without types is read with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_sent_through_the_last_statements_id_are_the_statements() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    let mut replies = Vec::new();
    for addr in [proxy.mysql.to_string(), upstream_addr()] {
        let mut client = raw(&addr).await;
        let (id, _) = prepare(&mut client, CACHED).await;
        let longlong = [&[0u8, 1, 8, 0][..], &1u64.to_le_bytes()].concat();
        execute_times(&mut client, id, &longlong, 8).await;
        // Types VAR_STRING, through the last statement's id.
        client.send(&execute(u32::MAX, &[&[0u8, 1, 0xfd, 0, 7][..], b"0000003"].concat())).await;
        let through_last = gist(&client.read_results().await);
        // The statement's own id, no types: a VAR_STRING to the server.
        client.send(&execute(id, &[&[0u8, 0, 7][..], b"0000002"].concat())).await;
        let untyped = gist(&client.read_results().await);
        replies.push((through_last, untyped));
    }
    assert_eq!(replies[0], replies[1], "through freshet, then directly");
}

/// The id 0xffffffff names the statement prepared last as long as it is open: after the client
/// closed it (a close freshet holds back while the read it answered is owed to the server),
/// the server answers 1243; and an execute through that id must send its types, or the server
/// answers 1156. freshet answered both from the view (an audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_statements_id_is_read_as_the_server_reads_it() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    let mut replies = Vec::new();
    for addr in [proxy.mysql.to_string(), upstream_addr()] {
        let mut client = raw(&addr).await;
        let key = |v: u64| [&[0u8, 1, 8, 0][..], &v.to_le_bytes()].concat();
        let (a, _) = prepare(&mut client, CACHED).await;
        let (b, _) = prepare(&mut client, CACHED).await;
        execute_times(&mut client, a, &key(1), 8).await;
        execute_times(&mut client, b, &key(2), 8).await;
        client.send(&[&[0x19u8][..], &b.to_le_bytes()].concat()).await;
        client.send(&execute(u32::MAX, &key(1))).await;
        let after_close = gist(&client.read_results().await);
        let (c, _) = prepare(&mut client, CACHED).await;
        execute_times(&mut client, c, &key(3), 8).await;
        // No types (new-params-bound 0), through the last statement's id.
        client.send(&execute(u32::MAX, &[&[0u8, 0][..], &2u64.to_le_bytes()].concat())).await;
        let untyped = gist(&client.read_results().await);
        replies.push((after_close, untyped));
    }
    assert_eq!(replies[0], replies[1], "through freshet, then directly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_executes_get_the_servers_error() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    let bodies = vec![
        // A 10 KB NULL bitmap for one parameter.
        vec![0xff; 10 * 1024],
        [&[0u8; 10 * 1024][..], &[1, 8, 0], &5u64.to_le_bytes()].concat(),
        // Types announced, value missing or cut short.
        vec![0, 1, 8, 0],
        vec![0, 1, 8, 0, 5, 0, 0],
        // No types ever bound on this execute, nothing after the bitmap.
        vec![0],
        // A string whose length runs past the end.
        vec![0, 1, 0xfd, 0, 0xfc, 0xff, 0xff, b'a'],
        // Trailing bytes after a well-formed value.
        [&[0u8, 1, 8, 0][..], &5u64.to_le_bytes(), &[1, 2, 3]].concat(),
        // An unknown type code, with a value and as NULL.
        vec![0, 1, 0x99, 0, 1, 2, 3, 4],
        vec![1, 1, 0x99, 0],
        // A new-params-bound flag other than 1: types follow all the same.
        [&[0u8, 2, 8, 0][..], &6u64.to_le_bytes()].concat(),
        vec![1, 0xff, 0xff, 0xff],
    ];
    // A fresh session per direction: the server forgets nothing between executes either.
    let freshet = executes(&proxy.mysql.to_string(), &bodies).await;
    let server = executes(&upstream_addr(), &bodies).await;
    for (i, (f, s)) in freshet.iter().zip(&server).enumerate() {
        assert_eq!(f, s, "execute {i}: freshet {:?}, server {:?}", String::from_utf8_lossy(&f[0]), String::from_utf8_lossy(&s[0]));
    }
    still_serving(&proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_proxied_queries_shows_no_literal_of_any_statement() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    // A cache built forgets the shapes relayed for want of one: listed after it is.
    assert!(eventually(|| proxy.engine.get().is_some_and(|e| e.by_name("hx").is_some())).await, "the cache is built");
    let mut conn = through(&proxy).await;
    let statements = [
        "GRANT SELECT ON freshet_test.hx TO 'nobody_hx'@'%' IDENTIFIED BY 'sekrit_one'",
        "/*!40101 SET PASSWORD FOR 'nobody_hx'@'%' = PASSWORD('sekrit_two') */",
        "SELECT 'sekrit_three' AS x, 42424242 FROM hx WHERE id = 1",
        "CREATE USER IF NOT EXISTS 'nobody_hx'@'%' IDENTIFIED BY 'sekrit_four'",
        "SELECT id FROM hx WHERE name = 'sekrit_five' /*!99999 AND name = 'sekrit_six' */",
        "SET @x = 'sekrit_seven'",
        "SELECT (SELECT 'sekrit_eight') FROM hx WHERE id = 2",
        "SELECT id FROM hx WHERE id = 0x5345 OR name = X'736b' OR name = _utf8mb4'sekrit_nine' OR name = N'sekrit_ten'",
        // Refused by the compiler, whose reason quotes what it refused (an audit: the reason
        // column showed `CAST('...' AS CHAR)` whole).
        "SELECT id, CAST('sekrit_eleven' AS CHAR) AS t FROM hx WHERE id = 1",
        "SELECT id FROM hx WHERE name = ANY(SELECT 'sekrit_twelve')",
        "SELECT id, DATE '2031-07-19', b'0110110' FROM hx WHERE id = 1",
        // Literals the compiler writes otherwise than the client did (a second audit).
        "SELECT id, CAST(0x736B686578 AS CHAR) FROM hx WHERE id = 1",
        "SELECT id, CAST(_utf8mb4 0x736B6A AS CHAR) FROM hx WHERE id = 1",
        "SELECT id, CAST('sekA\\tsekB' AS CHAR) FROM hx WHERE id = 1",
        "SELECT id, CAST('sekC\\'sekD' AS CHAR) FROM hx WHERE id = 1",
        "SELECT id, CAST('sekK\\ZsekL' AS CHAR) FROM hx WHERE id = 1",
        "SELECT id, CAST(N'sekM\\nsekN' AS CHAR) FROM hx WHERE id = 1",
    ];
    for sql in statements {
        // Most of them fail on the server (no such privilege, no such user): relayed anyway.
        let _ = conn.query_drop(sql).await;
    }
    let rows: Vec<mysql_async::Row> = conn.query("SHOW PROXIED QUERIES LIMIT 100").await.unwrap();
    let shown: Vec<String> = rows
        .iter()
        .map(|r| (0..r.len()).map(|i| r.get::<Option<String>, _>(i).flatten().unwrap_or_default()).collect::<Vec<_>>().join(" | "))
        .collect();
    let all = shown.join("\n");
    for secret in ["sekrit", "42424242", "5345", "736b", "736B", "2031-07-19", "0110110", "sek"] {
        assert!(!all.contains(secret), "{secret} shown:\n{all}");
    }
    assert!(all.contains("GRANT"), "statements are listed, without their literals:\n{all}");
}

/// A session whose text the tokenizer misreads (NO_BACKSLASH_ESCAPES, where `'C:\'` is a
/// whole string) had its texts' shapes recorded as the default reading saw them: a literal
/// after a string ending in a backslash was read as a word, and SHOW PROXIED QUERIES showed it
/// to the admin (session 53's admin audit: `VALUES(?, ? sk_live_... <unterminated>`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_proxied_queries_shows_no_literal_of_a_text_read_otherwise() {
    hx_table().await;
    let proxy = start_proxy(&config("")).await;
    assert!(eventually(|| proxy.engine.get().is_some_and(|e| e.by_name("hx").is_some())).await, "the cache is built");
    let mut conn = through(&proxy).await;
    conn.query_drop("SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'").await.unwrap();
    for sql in [
        "SELECT id FROM hx WHERE name = 'C:\\temp\\' OR name = 'sekNBE_one' OR id = 2",
        "SELECT id FROM hx WHERE id = 1 AND name = 'D:\\' AND name <> 'sekNBE_two'",
    ] {
        let _: Vec<i32> = conn.query(sql).await.unwrap();
    }
    let mut admin = through(&proxy).await;
    let rows: Vec<mysql_async::Row> = admin.query("SHOW PROXIED QUERIES LIMIT 1000").await.unwrap();
    let all: Vec<String> = rows
        .iter()
        .map(|r| (0..r.len()).map(|i| r.get::<Option<String>, _>(i).flatten().unwrap_or_default()).collect::<Vec<_>>().join(" | "))
        .collect();
    let all = all.join("\n");
    assert!(!all.contains("sekNBE"), "a literal shown:\n{all}");
}

/// A freshet binary with `config`, and the directory of its config and log.
struct Spawned {
    process: Freshet,
    mysql: String,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn spawn_freshet(extra: &str) -> Spawned {
    spawn_freshet_with_env(extra, &[]).await
}

async fn spawn_freshet_with_env(extra: &str, env: &[(&str, &str)]) -> Spawned {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("freshet-hostile-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let toml = format!("[upstream]\nurl = \"{}\"\ntls = \"disabled\"\n{}", upstream_url(), config(extra));
    let path = dir.join("freshet.toml");
    std::fs::write(&path, toml).unwrap();
    let process = Freshet::start_with_env(std::path::Path::new(env!("CARGO_BIN_EXE_freshet")), &path, &dir.join("freshet.log"), env).await;
    let mysql = process.mysql.to_string();
    Spawned { process, mysql, _dir: TempDir(dir) }
}

/// Peak resident memory of a process, in bytes (VmHWM).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/<pid>/status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

const BUDGET: u64 = 64 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_statements_cost_bounded_memory_and_get_the_servers_answer() {
    hx_table().await;
    let freshet = spawn_freshet("").await;
    let pid = freshet.process.pid();
    let addr = freshet.mysql.clone();
    // Warm up: a cached read, so the engine's steady state is in the baseline.
    let mut warm = raw(&addr).await;
    for _ in 0..5 {
        warm.query("SELECT id, name FROM hx WHERE id = 3").await;
    }
    let baseline = peak_rss(pid);
    // 1 MiB of `1,` in a select list, from a table that does not exist.
    let ones = format!("SELECT {}1 FROM nosuchtable", "1,".repeat(512 * 1024));
    let server = gist(&raw(&upstream_addr()).await.query(&ones).await);
    assert_eq!(gist(&raw(&addr).await.query(&ones).await), server);
    // Forty distinct long shapes: the verdicts must not keep them all.
    for i in 0..40 {
        let sql = format!("SELECT {}{i} FROM hx WHERE id = 1", "id + ".repeat(100_000));
        let mut c = raw(&addr).await;
        c.query(&sql).await;
    }
    // A million-value IN list (about 7 MB) and 100,000 nested parentheses.
    let list: Vec<String> = (1..=1_000_000).map(|i: u32| i.to_string()).collect();
    let in_list = format!("SELECT id, name FROM hx WHERE id IN ({})", list.join(","));
    drop(list);
    let server = gist(&raw(&upstream_addr()).await.query(&in_list).await);
    assert_eq!(gist(&raw(&addr).await.query(&in_list).await), server);
    drop(in_list);
    let parens = format!("SELECT id FROM hx WHERE id = {}1{}", "(".repeat(100_000), ")".repeat(100_000));
    let server = gist(&raw(&upstream_addr()).await.query(&parens).await);
    assert_eq!(gist(&raw(&addr).await.query(&parens).await), server);
    let grown = peak_rss(pid).saturating_sub(baseline);
    eprintln!("peak RSS of freshet grew by {} KiB", grown >> 10);
    assert!(grown < BUDGET, "peak RSS grew by {} MiB", grown >> 20);
    let mut other = raw(&addr).await;
    let direct_answer = raw(&upstream_addr()).await.query("SELECT id, name FROM hx WHERE id = 3").await;
    assert_eq!(other.query("SELECT id, name FROM hx WHERE id = 3").await, direct_answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_statement_costs_bounded_memory_and_gets_the_servers_answer() {
    hx_table().await;
    let freshet = spawn_freshet("").await;
    let pid = freshet.process.pid();
    let addr = freshet.mysql.clone();
    raw(&addr).await.query("SELECT 1").await;
    let baseline = peak_rss(pid);
    // Exactly `[limits] max_packet` (64 MiB) with the command byte; the server allows more.
    // Its answer is small: what is measured is the statement's cost, not a 64 MiB row's.
    let sql = format!("SELECT LENGTH('{}')", "x".repeat((64 << 20) - 1 - "SELECT LENGTH('')".len()));
    let mut cmd = vec![0x03];
    cmd.extend_from_slice(sql.as_bytes());
    drop(sql);
    let reply = |mut c: RawClient, cmd: Vec<u8>| async move {
        c.send(&cmd).await;
        gist(&c.read_results().await)
    };
    let server = reply(raw(&upstream_addr()).await, cmd.clone()).await;
    let through = reply(raw(&addr).await, cmd).await;
    assert_eq!(through, server);
    let grown = peak_rss(pid).saturating_sub(baseline);
    eprintln!("peak RSS of freshet grew by {} KiB", grown >> 10);
    assert!(grown < BUDGET, "peak RSS grew by {} MiB", grown >> 20);
    let mut other = raw(&addr).await;
    assert_eq!(
        other.query("SELECT id, name FROM hx WHERE id = 3").await,
        raw(&upstream_addr()).await.query("SELECT id, name FROM hx WHERE id = 3").await
    );
}

/// Resident memory of a process now, in bytes (VmRSS).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/<pid>/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// A prepared statement keeps its text, not the read buffer its prepare arrived in: an audit
/// prepared a 50-byte statement after each of 60 texts of 15 MB, never closing them, and
/// freshet held 873 MB until the session ended (each statement's text was a slice of a
/// buffer grown for the text before it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_left_open_hold_their_text_not_the_buffers_they_arrived_in() {
    hx_table().await;
    let freshet = spawn_freshet("").await;
    let pid = freshet.process.pid();
    let mut client = raw(&freshet.mysql).await;
    client.query("SELECT id, name FROM hx WHERE id = 3").await;
    let baseline = rss(pid);
    let long = format!("DO 1 /*{}*/", "x".repeat(2 << 20));
    for i in 0..40 {
        client.query(&long).await;
        prepare(&mut client, &format!("SELECT id, name FROM hx WHERE id = ? /*{i}*/")).await;
    }
    let grown = rss(pid).saturating_sub(baseline);
    eprintln!("RSS of freshet grew by {} KiB", grown >> 10);
    assert!(grown < 24 << 20, "RSS grew by {} MiB for 40 statements left open", grown >> 20);
}

/// A session idle after a long text holds buffers of a few KiB, not the text's: an audit left
/// 10 sessions idle after one 16 MB text each and freshet held 214 MB more until they closed
/// (the read buffer the text arrived in, and the upstream's write buffer it left through).
/// glibc serves such sizes from its heap once a few were freed, and keeps freed memory
/// resident below a live allocation (~half the text per session here, returned when the
/// sessions close): the process maps every allocation of 128 KiB or more, so that RSS shows
/// what freshet holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_give_back_what_a_long_text_took() {
    hx_table().await;
    let freshet = spawn_freshet_with_env("", &[("MALLOC_MMAP_THRESHOLD_", "131072")]).await;
    let pid = freshet.process.pid();
    let mut first = raw(&freshet.mysql).await;
    first.query("SELECT id, name FROM hx WHERE id = 3").await;
    let baseline = rss(pid);
    let long = format!("SELECT id, name FROM hx WHERE id = 1 AND name <> '{}'", "x".repeat(8 << 20));
    let mut idle = Vec::new();
    for _ in 0..10 {
        let mut client = raw(&freshet.mysql).await;
        client.query(&long).await;
        // A small command after it: the session is back at its wait.
        client.query("SELECT 1").await;
        idle.push(client);
    }
    let grown = rss(pid).saturating_sub(baseline);
    eprintln!("RSS of freshet grew by {} KiB with 10 sessions idle after an 8 MiB text each", grown >> 10);
    assert!(grown < 16 << 20, "RSS grew by {} MiB with 10 idle sessions", grown >> 20);
    drop(idle);
}
