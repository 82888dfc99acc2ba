//! Fills that the server refuses at once (freshet's account lost its right to a cached table,
//! or is at its `MAX_USER_CONNECTIONS`): each failure woke the reads waiting for it, whose next
//! look recorded the miss again, and the writer asked the server again at once, about a
//! thousand times a second for as long as a read waited. The writer now waits before asking
//! again after a failure, and reads that miss meanwhile are relayed at once.

mod common;

use std::time::{Duration, Instant};

use common::*;
use freshet_proxy::cache::{Engine, RelayReason};
use mysql_async::prelude::*;

const USER_NAME: &str = "freshet_ff";

/// Tables `names` made afresh, each `(id, v)` with ids 1 to 100 and `v = id * 10`; the config
/// of a point read cached per table (named as it), with `[fill] timeout = "2s"`.
async fn point_tables(admin: &mut mysql_async::Conn, names: [&str; 2]) -> String {
    let rows: Vec<String> = (1..=100).map(|i| format!("({i}, {})", i * 10)).collect();
    let mut config = String::from("[fill]\ntimeout = \"2s\"\n");
    for t in names {
        admin.query_drop(format!("DROP TABLE IF EXISTS {t}")).await.unwrap();
        admin.query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL)")).await.unwrap();
        admin.query_drop(format!("INSERT INTO {t} VALUES {}", rows.join(", "))).await.unwrap();
        config.push_str(&format!("[[cache]]\nname = \"{t}\"\nquery = \"SELECT id, v FROM {t} WHERE id = ?\"\n"));
    }
    config
}

/// Reads key 1 of each table's cache until one is answered from it: the login learns its
/// right to each cache (its first reads are the server's) and the shape's columns are
/// captured.
async fn warm(engine: &Engine, client: &mut mysql_async::Conn, names: [&str; 2]) {
    for t in names {
        let cache = engine.by_name(t).expect("cache");
        for _ in 0..100 {
            let _: Vec<(i32, i32)> = client.query(format!("SELECT id, v FROM {t} WHERE id = 1")).await.unwrap();
            if cache.stats().hits > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(cache.stats().hits > 0, "{t} answered from the cache");
    }
}

/// The relay reasons counted so far, for a failure's message.
fn relay_reasons(engine: &Engine) -> Vec<String> {
    RelayReason::ALL.iter().zip(&engine.counters.relayed).filter(|(_, n)| n.get() > 0).map(|(r, n)| format!("{r:?}: {}", n.get())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_the_server_refuses_are_not_asked_again_at_once() {
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS ff_items").await.unwrap();
    admin.query_drop("CREATE TABLE ff_items (id INT PRIMARY KEY, v INT NOT NULL)").await.unwrap();
    admin.query_drop("INSERT INTO ff_items VALUES (1, 10), (2, 20), (3, 30)").await.unwrap();
    let url = own_login(USER_NAME, "ff", &[format!("SELECT ON {DB}.ff_items")]).await;
    let proxy = start_proxy_with_url(
        &url,
        "[fill]\ntimeout = \"2s\"\n[[cache]]\nname = \"ff\"\nquery = \"SELECT id, v FROM ff_items WHERE id = ?\"\n",
    )
    .await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let mut client = through(&proxy).await;
    let read = |id: i32| format!("SELECT id, v FROM ff_items WHERE id = {id}");
    // Served while freshet may read the table.
    let hits = || engine.by_name("ff").expect("cache").stats().hits;
    for _ in 0..100 {
        let _: Vec<(i32, i32)> = client.query(read(1)).await.unwrap();
        if hits() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(hits() > 0, "answered from the cache while fills work");
    // Now every fill is refused (1142), at once.
    admin.query_drop(format!("REVOKE SELECT ON {DB}.ff_items FROM '{USER_NAME}'@'%'")).await.unwrap();
    let failed = || engine.counters.fills_failed.get();
    let (before, start) = (failed(), Instant::now());
    while start.elapsed() < Duration::from_secs(2) {
        let got: Vec<(i32, i32)> = client.query(read(2)).await.unwrap();
        assert_eq!(got, vec![(2, 20)], "the server's answer");
    }
    let failures = failed() - before;
    // Back-off from 10 ms doubling: about ten in two seconds; asked again at once, thousands.
    assert!((1..=30).contains(&failures), "{failures} fills failed in 2 s");
    assert!(engine.counters.relayed[RelayReason::FillFailing.index()].get() > 0, "reads that missed were relayed at once");
    admin.query_drop(format!("DROP USER '{USER_NAME}'@'%'")).await.unwrap();
    admin.query_drop("DROP TABLE ff_items").await.unwrap();
}

/// Fills of a table whose metadata lock is queued behind a long transaction (an ALTER waits for
/// it, and every later read of the table waits behind the ALTER) wait with it, up to the fill
/// source's own bound. A miss of another table must not queue behind them: it waited for a
/// fill slot that the locked table's fills held, and was relayed after `[fill] timeout`
/// (an audit: 1.0-1.1 s per cold read of an unlocked table, where the server answered in
/// milliseconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_stuck_on_a_locked_table_leave_other_tables_filled() {
    let mut admin = direct().await;
    let config = point_tables(&mut admin, ["ff_locked", "ff_free"]).await;
    let proxy = start_proxy(&config).await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let mut client = through(&proxy).await;
    warm(&engine, &mut client, ["ff_locked", "ff_free"]).await;
    // A transaction holds ff_locked; an ALTER waits for it, and reads of ff_locked behind it.
    let mut holder = direct().await;
    holder.query_drop("BEGIN").await.unwrap();
    let _: Vec<(i32, i32)> = holder.query("SELECT id, v FROM ff_locked WHERE id = 1").await.unwrap();
    let alter = tokio::spawn(async {
        let mut conn = direct().await;
        conn.query_drop("ALTER TABLE ff_locked ADD COLUMN extra INT").await
    });
    let waiting = |what: &'static str| async move {
        let mut conn = direct().await;
        let n: Option<u64> = conn
            .query_first(format!(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'Waiting for table metadata lock' AND INFO LIKE '{what}%'"
            ))
            .await
            .unwrap();
        n.unwrap_or(0)
    };
    for _ in 0..250 {
        if waiting("ALTER").await > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Cold reads of ff_locked, one at a time so that each asks for a fill of its own.
    let mut stuck = Vec::new();
    for id in 2..=13 {
        let addr = proxy.mysql.to_string();
        stuck.push(tokio::spawn(async move {
            let mut conn = mysql_async::Conn::new(opts(&addr)).await.unwrap();
            let _: Vec<(i32, i32)> = conn.query(format!("SELECT id, v FROM ff_locked WHERE id = {id}")).await.unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for _ in 0..100 {
        if waiting("SELECT").await >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(waiting("SELECT").await >= 4, "the fills of ff_locked wait for its lock");
    // A cold read of ff_free: filled, not relayed after waiting for a slot. The other test of
    // this file runs alongside and changes privileges (CREATE USER, GRANT, REVOKE): each such
    // binlog event makes this session learn its right to a cache again, with a relayed read
    // (`RelayReason::Learning`; it failed CI once so). Such a read tells nothing of fill
    // slots: the next cold key is read then.
    let free = engine.by_name("ff_free").expect("cache");
    let learning = || engine.counters.relayed[RelayReason::Learning.index()].get();
    let mut tries = 0;
    let (filled, got) = loop {
        let (filled, learnt) = (free.reads.filled.get(), learning());
        let id = 50 + tries;
        let got: Vec<(i32, i32)> = client.query(format!("SELECT id, v FROM ff_free WHERE id = {id}")).await.unwrap();
        assert_eq!(got, vec![(id, id * 10)]);
        tries += 1;
        if learning() == learnt || tries == 20 {
            break (filled, got);
        }
    };
    // Why it was relayed if it was (a flake seen once under a loaded machine in session 51:
    // the read was not filled; these tell a fill slot's wait from a fill that raced a write or
    // came late).
    let reasons = relay_reasons(&engine);
    assert_eq!(
        free.reads.filled.get(),
        filled + 1,
        "the read of ff_free ({got:?}, try {tries}) waited behind the fills of the locked table and was relayed (relayed so far: {reasons:?})"
    );
    holder.query_drop("ROLLBACK").await.unwrap();
    alter.await.unwrap().unwrap();
    for s in stuck {
        s.await.unwrap();
    }
    for t in ["ff_locked", "ff_free"] {
        admin.query_drop(format!("DROP TABLE {t}")).await.unwrap();
    }
}

/// Fills of one table that the server refuses (freshet's account lost SELECT on it) paused
/// every fill: the writer waited before asking again after any failure, and the misses of
/// every cache were relayed meanwhile (`FillFailing`), so one table's grant left every other
/// cache unable to fill a key for as long as that table's reads kept failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_refused_for_one_table_leave_other_tables_filled() {
    const USER: &str = "freshet_ff_one";
    let mut admin = direct().await;
    let config = point_tables(&mut admin, ["ff_refused", "ff_allowed"]).await;
    let url = own_login(USER, "ff", &[format!("SELECT ON {DB}.ff_refused"), format!("SELECT ON {DB}.ff_allowed")]).await;
    let proxy = start_proxy_with_url(&url, &config).await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let mut client = through(&proxy).await;
    let read = |t: &str, id: i32| format!("SELECT id, v FROM {t} WHERE id = {id}");
    warm(&engine, &mut client, ["ff_refused", "ff_allowed"]).await;
    admin.query_drop(format!("REVOKE SELECT ON {DB}.ff_refused FROM '{USER}'@'%'")).await.unwrap();
    // Cold reads of the refused table: their fills fail, and they are the server's.
    let failed = || engine.counters.fills_failed.get();
    let before = failed();
    for id in 2..=20 {
        let got: Vec<(i32, i32)> = client.query(read("ff_refused", id)).await.unwrap();
        assert_eq!(got, vec![(id, id * 10)], "the server's answer");
        if failed() > before {
            break;
        }
    }
    assert!(failed() > before, "the refused table's fills failed");
    // A cold read of the other table is filled. Privilege changes (this test's REVOKE, the
    // other tests' grants) make the session learn its right again with a relayed read: such a
    // read tells nothing of fills, and the next cold key is read then.
    let allowed = engine.by_name("ff_allowed").expect("cache");
    let learning = || engine.counters.relayed[RelayReason::Learning.index()].get();
    let mut filled_one = false;
    for id in 50..70 {
        let (filled, learnt) = (allowed.reads.filled.get(), learning());
        let got: Vec<(i32, i32)> = client.query(read("ff_allowed", id)).await.unwrap();
        assert_eq!(got, vec![(id, id * 10)]);
        if learning() == learnt {
            filled_one = allowed.reads.filled.get() == filled + 1;
            break;
        }
    }
    let reasons = relay_reasons(&engine);
    assert!(filled_one, "a cold read of the allowed table was filled, not relayed (relayed so far: {reasons:?})");
    admin.query_drop(format!("DROP USER '{USER}'@'%'")).await.unwrap();
    for t in ["ff_refused", "ff_allowed"] {
        admin.query_drop(format!("DROP TABLE {t}")).await.unwrap();
    }
}
