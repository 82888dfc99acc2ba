//! Read-your-writes against the real MariaDB: one session writes and at once reads back
//! through cached queries while other sessions write to the same table; with
//! `[consistency] read_your_writes` no read misses the session's own write, without it the
//! same run counts misses (so the check can fail).
//!
//! The cycles (`FRESHET_RYW_CYCLES`, default 2,000; the report's figure is 10,000) each do
//! one of: an UPDATE that moves a row to another group and reads the new group's rows; an
//! INSERT into a group and reads its COUNT(*); a DELETE of the group's current MAX(val) and
//! reads the new MAX. Half the cycles use the text protocol, half prepared statements. The
//! session's groups are its own (the other writers use other groups), so the expected answer
//! of every read is known exactly.
//!
//! After writes stop the check compares every cached answer with the server's twice: 500 ms
//! later (`behind_after_500ms`, lag or loss) and once the views have applied the server's whole
//! binlog (`diverged`: a view that lost a delta, not a late one). `diverged` caught the writer
//! dropping one queued transaction per full step (see the writer's header); it showed in 1 or 2
//! of 6 runs of 10,000 cycles before the fix. `FRESHET_RYW_MEMORY` (e.g. `64KiB`) sets
//! `[memory] limit`, so that eviction and refills race with the writes too.

mod common;

use std::collections::BTreeMap;

use common::*;
use freshet_proxy::cache::{Engine, RelayReason};
use mysql_async::prelude::*;

/// Groups the checked session reads and writes; the others write groups from `OTHERS_GRP`.
const GROUPS: i64 = 12;
const ROWS_PER_GROUP: i64 = 6;
const OTHERS_GRP: i64 = 1000;

fn cycles() -> usize {
    std::env::var("FRESHET_RYW_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
}

fn config(table: &str, ryw: bool) -> String {
    let memory = std::env::var("FRESHET_RYW_MEMORY").map(|m| format!("[memory]\nlimit = \"{m}\"\n")).unwrap_or_default();
    format!(
        "{memory}[fill]\ntimeout = \"3s\"\n[consistency]\nmax_lag = \"5s\"\nread_your_writes = {ryw}\nryw_timeout = \"2s\"\n\
         [[cache]]\nname = \"rows\"\nquery = \"SELECT id, val FROM {table} WHERE grp = ?\"\n\
         [[cache]]\nname = \"counts\"\nquery = \"SELECT grp, COUNT(*) AS n FROM {table} WHERE grp = ? GROUP BY grp\"\n\
         [[cache]]\nname = \"maxes\"\nquery = \"SELECT grp, MAX(val) AS m FROM {table} WHERE grp = ? GROUP BY grp\"\n"
    )
}

/// The checked session's rows: group -> id -> val.
type Model = BTreeMap<i64, BTreeMap<i64, i64>>;

async fn setup(table: &str) -> Model {
    let mut conn = direct().await;
    conn.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.unwrap();
    conn.query_drop(format!("CREATE TABLE {table} (id BIGINT PRIMARY KEY, grp BIGINT NOT NULL, val BIGINT NOT NULL, KEY (grp))"))
        .await
        .unwrap();
    let mut model = Model::new();
    let mut values = Vec::new();
    for g in 0..GROUPS {
        for r in 0..ROWS_PER_GROUP {
            let id = g * 100 + r;
            let val = id * 7 % 1000;
            model.entry(g).or_default().insert(id, val);
            values.push(format!("({id}, {g}, {val})"));
        }
    }
    for w in 0..4 {
        for r in 0..50 {
            values.push(format!("({}, {}, {r})", 1_000_000 + w * 1000 + r, OTHERS_GRP + w));
        }
    }
    conn.query_drop(format!("INSERT INTO {table} VALUES {}", values.join(","))).await.unwrap();
    model
}

/// Other sessions writing through freshet meanwhile, until `stop`.
fn other_writers(proxy: &Proxy, table: &str, stop: tokio::sync::watch::Receiver<bool>) -> Vec<tokio::task::JoinHandle<u64>> {
    (0..3)
        .map(|w| {
            let (addr, table, stop) = (proxy.mysql.to_string(), table.to_string(), stop.clone());
            tokio::spawn(async move {
                let mut conn = mysql_async::Conn::new(opts(&addr)).await.unwrap();
                let mut n = 0u64;
                while !*stop.borrow() {
                    let id = 1_000_000 + w * 1000 + (n % 50) as i64;
                    conn.query_drop(format!("UPDATE {table} SET val = val + 1 WHERE id = {id}")).await.unwrap();
                    // Not a cached shape: the engine's hits are the checked session's alone.
                    let _: Vec<(i64, i64)> = conn.query(format!("SELECT id, val FROM {table} WHERE id = {id}")).await.unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect()
}

/// What a run saw.
#[derive(Debug, Default)]
struct Run {
    reads: u64,
    misses: u64,
    hits: u64,
    own_write_relays: u64,
    in_transaction_relays: u64,
    /// Cached answers that differ from the server's 500 ms after writes stopped (lag or loss).
    behind_after_500ms: u64,
    /// Cached answers that differ from the server's once the views applied its whole binlog.
    diverged: u64,
}

fn relayed(engine: &Engine, reason: RelayReason) -> u64 {
    engine.counters.relayed[reason.index()].get()
}

/// A small deterministic generator (the run is reproducible from its seed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// One write and the read that must reflect it.
struct Cycle {
    write: String,
    write_params: Vec<i64>,
    read: String,
    read_params: Vec<i64>,
    expected: Vec<(i64, i64)>,
}

/// The next cycle for the model (which it updates): a move, a delete of the MAX or an insert.
fn next_cycle(table: &str, model: &mut Model, rng: &mut Lcg, next_id: &mut i64) -> Cycle {
    let g = rng.next(GROUPS as u64) as i64;
    match rng.next(3) {
        // Move a row of group g into group h, read h's rows.
        0 if model[&g].len() > 2 => {
            let h = (g + 1 + rng.next(GROUPS as u64 - 1) as i64) % GROUPS;
            let (&id, &val) = model[&g].iter().nth(rng.next(model[&g].len() as u64) as usize).unwrap();
            model.get_mut(&g).unwrap().remove(&id);
            model.get_mut(&h).unwrap().insert(id, val);
            Cycle {
                write: format!("UPDATE {table} SET grp = ? WHERE id = ?"),
                write_params: vec![h, id],
                read: format!("SELECT id, val FROM {table} WHERE grp = ?"),
                read_params: vec![h],
                expected: model[&h].iter().map(|(&i, &v)| (i, v)).collect(),
            }
        }
        // Delete group g's current MAX(val), read the new MAX.
        1 if model[&g].len() > 2 => {
            let max = *model[&g].values().max().unwrap();
            model.get_mut(&g).unwrap().retain(|_, v| *v != max);
            Cycle {
                write: format!("DELETE FROM {table} WHERE grp = ? AND val = ?"),
                write_params: vec![g, max],
                read: format!("SELECT grp, MAX(val) AS m FROM {table} WHERE grp = ? GROUP BY grp"),
                read_params: vec![g],
                expected: vec![(g, *model[&g].values().max().unwrap())],
            }
        }
        // Insert into group g, read its COUNT(*).
        _ => {
            *next_id += 1;
            let val = rng.next(1000) as i64;
            model.get_mut(&g).unwrap().insert(*next_id, val);
            Cycle {
                write: format!("INSERT INTO {table} (id, grp, val) VALUES (?, ?, ?)"),
                write_params: vec![*next_id, g, val],
                read: format!("SELECT grp, COUNT(*) AS n FROM {table} WHERE grp = ? GROUP BY grp"),
                read_params: vec![g],
                expected: vec![(g, model[&g].len() as i64)],
            }
        }
    }
}

/// The three cached reads of group `g`.
fn reads_of(table: &str, g: i64) -> [String; 3] {
    [
        format!("SELECT id, val FROM {table} WHERE grp = {g}"),
        format!("SELECT grp, COUNT(*) AS n FROM {table} WHERE grp = {g} GROUP BY grp"),
        format!("SELECT grp, MAX(val) AS m FROM {table} WHERE grp = {g} GROUP BY grp"),
    ]
}

/// Runs one cycle: true if the read reflected the write. A text write is sent under MariaDB's
/// `SET STATEMENT ... FOR` if `set_statement` (a write all the same). The first few misses are
/// shown with the same read a moment later (stale, or a view that diverged?).
async fn one_cycle(conn: &mut mysql_async::Conn, c: &Cycle, prepared: bool, set_statement: bool, show: bool) -> bool {
    let got: Vec<(i64, i64)> = if prepared {
        conn.exec_drop(&c.write, c.write_params.clone()).await.unwrap();
        conn.exec(&c.read, c.read_params.clone()).await.unwrap()
    } else {
        let write = inline(&c.write, &c.write_params);
        let write = if set_statement { format!("SET STATEMENT max_statement_time = 10 FOR {write}") } else { write };
        conn.query_drop(write).await.unwrap();
        conn.query(inline(&c.read, &c.read_params)).await.unwrap()
    };
    if got == c.expected {
        return true;
    }
    if show {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let again: Vec<(i64, i64)> = conn.query(inline(&c.read, &c.read_params)).await.unwrap();
        eprintln!(
            "miss: {} {:?}; read {:?}\n got {got:?}\n expected {:?}\n a moment later {again:?}",
            c.write, c.write_params, c.read_params, c.expected
        );
    }
    false
}

/// Cached answers (through `conn`) that differ from the server's, each shown.
async fn differing(conn: &mut mysql_async::Conn, d: &mut mysql_async::Conn, table: &str, label: &str) -> u64 {
    let mut n = 0;
    for g in 0..GROUPS {
        for sql in reads_of(table, g) {
            let cached: Vec<(i64, i64)> = conn.query(&sql).await.unwrap();
            let server: Vec<(i64, i64)> = d.query(&sql).await.unwrap();
            if cached != server {
                n += 1;
                eprintln!("{label}: {sql}\n cached {cached:?}\n server {server:?}");
            }
        }
    }
    n
}

/// After writes stopped: (answers that differed from the server's 500 ms later, as the first
/// version of this check compared, and answers that differ once the views have applied the
/// server's whole binlog). Only the second is a view that lost a delta; the first may be lag.
async fn diverged(engine: &Engine, conn: &mut mysql_async::Conn, table: &str) -> (u64, u64) {
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let mut d = direct().await;
    let early = differing(conn, &mut d, table, "behind after 500 ms").await;
    let (file, offset): (String, u64) =
        d.query_first("SHOW MASTER STATUS").await.unwrap().map(|r: mysql_async::Row| (r.get(0).unwrap(), r.get(1).unwrap())).unwrap();
    let server = freshet_cdc::BinlogPos::new(file, offset as u32).position().unwrap().0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while engine.gate.applied().0 < server {
        assert!(std::time::Instant::now() < deadline, "the views did not catch up with the server's binlog");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    (early, differing(conn, &mut d, table, "diverged").await)
}

async fn run(table: &str, ryw: bool, cycles: usize) -> Run {
    let mut model = setup(table).await;
    let proxy = start_proxy(&config(table, ryw)).await;
    let mut conn = through(&proxy).await;
    // Every group read once through each cache: filled before the cycles (a hole is filled
    // from the server, which would hide a stale view).
    for g in 0..GROUPS {
        for sql in reads_of(table, g) {
            let _: Vec<(i64, i64)> = conn.query(sql).await.unwrap();
        }
    }
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let others = other_writers(&proxy, table, stop_rx);
    let (hits_before, own_before) = (engine.counters.hits.get(), relayed(&engine, RelayReason::OwnWrite));
    let mut out = Run::default();
    let mut rng = Lcg(0x5eed ^ cycles as u64);
    let mut next_id = 10_000i64;
    for cycle in 0..cycles {
        let c = next_cycle(table, &mut model, &mut rng, &mut next_id);
        out.reads += 1;
        if !one_cycle(&mut conn, &c, cycle % 2 == 1, cycle % 4 == 0, out.misses < 3).await {
            out.misses += 1;
        }
    }
    out.hits = engine.counters.hits.get() - hits_before;
    out.own_write_relays = relayed(&engine, RelayReason::OwnWrite) - own_before;
    stop_tx.send(true).unwrap();
    let mut other_writes = 0;
    for o in others {
        other_writes += o.await.unwrap();
    }
    assert!(other_writes > 0, "the other sessions wrote meanwhile");
    (out.behind_after_500ms, out.diverged) = diverged(&engine, &mut conn, table).await;
    // Inside an explicit transaction reads are relayed, so they see the session's own
    // uncommitted write.
    let before = relayed(&engine, RelayReason::InTransaction);
    conn.query_drop("BEGIN").await.unwrap();
    conn.query_drop(format!("INSERT INTO {table} (id, grp, val) VALUES (99999, 0, 1)")).await.unwrap();
    let n: Vec<(i64, i64)> = conn.query(&reads_of(table, 0)[1]).await.unwrap();
    conn.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(n, vec![(0, model[&0].len() as i64 + 1)]);
    out.in_transaction_relays = relayed(&engine, RelayReason::InTransaction) - before;
    out
}

/// `sql` with each `?` replaced by the next of `params` (integers only).
fn inline(sql: &str, params: &[i64]) -> String {
    let mut params = params.iter();
    sql.chars().map(|c| if c == '?' { params.next().expect("a parameter per ?").to_string() } else { c.to_string() }).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_read_your_writes_no_read_misses_the_sessions_own_write() {
    let cycles = cycles();
    let run = run("ryw_on", true, cycles).await;
    eprintln!("read_your_writes on, {cycles} cycles: {run:?}");
    assert_eq!(run.misses, 0, "{run:?}");
    assert_eq!(run.diverged, 0, "{run:?}");
    assert_eq!(run.reads, cycles as u64);
    // The reads were answered from the views, not relayed (which would pass trivially). Not
    // all of them: on a loaded machine a read may find freshet further behind than max_lag,
    // or its own write not yet applied within the wait, and is relayed (correctly); once, under
    // other builds, 90% was too strict.
    assert!(run.hits >= run.reads / 2, "most reads are hits: {run:?}");
    assert_eq!(run.in_transaction_relays, 1, "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_read_your_writes_the_same_cycles_miss() {
    let cycles = cycles();
    let run = run("ryw_off", false, cycles).await;
    eprintln!("read_your_writes off, {cycles} cycles: {run:?}");
    assert!(run.misses > 0, "the check can fail: {run:?}");
    assert_eq!(run.diverged, 0, "{run:?}");
    assert_eq!(run.own_write_relays, 0);
}

/// A session whose writes put nothing in the binlog (a DELETE that matched no row, an INSERT
/// IGNORE of a duplicate) has nothing to wait for, and MariaDB says so: its `@@last_gtid` is
/// empty while it has logged nothing. Its reads are served at once (they waited for the next
/// poll of the server's position, 50-100 ms each, which made a single such session 25x slower
/// than MariaDB). After COM_RESET_CONNECTION the server's memory of the session's last GTID
/// is gone, so an empty answer proves nothing and the read waits as for an unknown write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_log_nothing_make_no_read_wait() {
    let table = "ryw_noop";
    let (_proxy, engine, mut conn, read) = one_cached_read(table).await;
    let hits = |e: &Engine| e.by_name("rows").expect("cache exists").stats().hits;

    let (waits, asked, hits_before) = (engine.ryw().waits.get(), engine.ryw().asked.get(), hits(&engine));
    for i in 0..20 {
        conn.query_drop(format!("DELETE FROM {table} WHERE id = {}", -1 - i)).await.unwrap();
        let _: Vec<(i64, i64)> = conn.query(&read).await.unwrap();
    }
    assert_eq!(engine.ryw().asked.get(), asked + 20, "each read after a write asks where the write is");
    assert_eq!(engine.ryw().waits.get(), waits, "and none waits: nothing was logged");
    assert_eq!(hits(&engine), hits_before + 20, "every read is a hit");

    // A real write, then a reset: the read waits for the server's position instead.
    conn.query_drop(format!("UPDATE {table} SET val = val + 1 WHERE id = 100")).await.unwrap();
    conn.reset().await.unwrap();
    let waits = engine.ryw().waits.get();
    let rows: Vec<(i64, i64)> = conn.query(&read).await.unwrap();
    assert_eq!(engine.ryw().waits.get(), waits + 1, "after a reset an empty answer is not trusted");
    let direct_rows: Vec<(i64, i64)> = direct().await.query(&read).await.unwrap();
    assert_eq!(rows, direct_rows, "and the read reflects the write");
}

/// After a write the session's next cached read asks the server two things: its settings
/// (stored code the write ran may have changed them, `session::state`) and where its write
/// is. One SELECT asks both: a second round trip before every read after a write cost cached
/// reads 5-15% of their throughput at 5% writes. Counted by the session's own `Com_select`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_after_a_write_asks_the_server_once() {
    let table = "ryw_once";
    let (_proxy, engine, mut conn, read) = one_cached_read(table).await;
    let hits = |e: &Engine| e.by_name("rows").expect("cache exists").stats().hits;
    let _: Vec<(i64, i64)> = conn.query(&read).await.unwrap();
    let (before, hits_before, asked) = (session_selects(&mut conn).await, hits(&engine), engine.ryw().asked.get());
    for i in 0..20 {
        conn.query_drop(format!("UPDATE {table} SET val = val + 1 WHERE id = {}", 100 + i % 6)).await.unwrap();
        let _: Vec<(i64, i64)> = conn.query(&read).await.unwrap();
    }
    let _: Vec<(i64, i64)> = conn.query(&read).await.unwrap();
    let after = session_selects(&mut conn).await;
    assert_eq!(hits(&engine), hits_before + 21, "every read is a hit");
    assert_eq!(engine.ryw().asked.get(), asked + 20, "each read after a write asks where the write is");
    // The SHOW after a hit has the hit's read replayed first (its diagnostics are owed,
    // `session::owed`): one SELECT more, as before `before`.
    assert_eq!(after - before, 20 + 1, "and what the session's settings are, in the same SELECT");
}

/// The session's `Com_select`: the SELECTs its server connection ran.
async fn session_selects(conn: &mut mysql_async::Conn) -> u64 {
    let (_, n): (String, u64) = conn.query_first("SHOW SESSION STATUS LIKE 'Com_select'").await.unwrap().unwrap();
    n
}

/// A proxy with read-your-writes over `table` (set up afresh), a session through it, and a
/// read of the `rows` cache that the session has had answered from the view.
async fn one_cached_read(table: &str) -> (Proxy, std::sync::Arc<Engine>, mysql_async::Conn, String) {
    setup(table).await;
    let proxy = start_proxy(&config(table, true)).await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let mut conn = through(&proxy).await;
    let read = format!("SELECT id, val FROM {table} WHERE grp = 1");
    let hits = |e: &Engine| e.by_name("rows").expect("cache exists").stats().hits;
    for _ in 0..50 {
        let _: Vec<(i64, i64)> = conn.query(&read).await.unwrap();
        if hits(&engine) > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(hits(&engine) > 0, "the read is cached");
    (proxy, engine, conn, read)
}

/// MariaDB lets a session choose its write's GTID sequence number (`SET STATEMENT gtid_seq_no
/// = n FOR ...`, with BINLOG ADMIN), lower than the domain's last: the read after it must
/// not take an earlier group's end for its write's. Each read after the session's write shows
/// it (the test's account has every privilege).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_gtid_the_session_chose_is_read_back() {
    let (_proxy, _engine, mut conn, read) = one_cached_read("ryw_seqno").await;
    let mut direct = direct().await;
    direct.query_drop("CREATE OR REPLACE TABLE ryw_seqno_busy (id INT PRIMARY KEY, pad VARCHAR(100))").await.unwrap();
    for round in 0..3 {
        // A large transaction just before keeps the stream busy: the write is not applied
        // at once.
        direct
            .query_drop(format!("INSERT INTO ryw_seqno_busy SELECT seq + {}, REPEAT('x', 100) FROM seq_1_to_30000", round * 30_000))
            .await
            .unwrap();
        conn.query_drop(format!("SET STATEMENT gtid_seq_no = {} FOR UPDATE ryw_seqno SET val = val + 1 WHERE grp = 1", round + 1))
            .await
            .unwrap();
        let got: Vec<(i64, i64)> = conn.query(&read).await.unwrap();
        let want: Vec<(i64, i64)> = direct.query(&read).await.unwrap();
        assert_eq!(got, want, "the read after write {round}");
    }
}

/// A stored function may write: one a SELECT, a SET or a SHOW calls (`SET @x = f(1)`) is a
/// write of its session, whose next cached read must show it (an audit: SET and SHOW texts
/// counted as reads, and a SELECT's was a documented limit; the read after them was served
/// from the view before the function's write was applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_by_a_function_a_read_calls_is_read_back() {
    let (_proxy, _engine, mut conn, read) = one_cached_read("ryw_func").await;
    let mut direct = direct().await;
    direct.query_drop("CREATE OR REPLACE TABLE ryw_func_busy (id INT PRIMARY KEY, pad VARCHAR(100))").await.unwrap();
    direct
        .query_drop(
            "CREATE OR REPLACE FUNCTION ryw_func_bump(g INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
             BEGIN UPDATE ryw_func SET val = val + 1 WHERE grp = g; RETURN 1; END",
        )
        .await
        .unwrap();
    let calls = ["SET @x = ryw_func_bump(1)", "SELECT ryw_func_bump(1)", "SHOW TABLES WHERE ryw_func_bump(1) = 0", "DO ryw_func_bump(1)"];
    for (round, call) in calls.iter().enumerate() {
        // A large transaction just before keeps the stream busy: the write is not applied
        // at once.
        direct
            .query_drop(format!("INSERT INTO ryw_func_busy SELECT seq + {}, REPEAT('x', 100) FROM seq_1_to_30000", round * 30_000))
            .await
            .unwrap();
        conn.query_drop(*call).await.unwrap();
        let got: Vec<(i64, i64)> = conn.query(&read).await.unwrap();
        let want: Vec<(i64, i64)> = direct.query(&read).await.unwrap();
        assert_eq!(got, want, "the read after {call}");
    }
    direct.query_drop("DROP FUNCTION ryw_func_bump").await.unwrap();
}

/// A privilege change in the binlog makes every session learn its right to each cache again,
/// once. A session that writes before each read asks the server for its settings before each
/// read, and that question forgot what the session had learnt: each of its reads was relayed
/// to learn again, for as long as the session lived (found when DDL began to make freshet
/// learn again: 2,000 reads of this file's busiest test, 20 hits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_writes_before_each_read_learns_its_right_once() {
    let table = "ryw_relearn";
    let (_proxy, engine, mut conn, read) = one_cached_read(table).await;
    let hits = |e: &Engine| e.by_name("rows").expect("cache exists").stats().hits;
    // As a GRANT in the binlog would (one sent to the server would make the other tests of
    // this file, concurrent, learn again too).
    engine.access.forget_all();
    let (learning, hits_before) = (relayed(&engine, RelayReason::Learning), hits(&engine));
    for i in 0..20 {
        conn.query_drop(format!("UPDATE {table} SET val = val + 1 WHERE id = {}", 100 + i % 6)).await.unwrap();
        let _: Vec<(i64, i64)> = conn.query(&read).await.unwrap();
    }
    assert_eq!(relayed(&engine, RelayReason::Learning), learning + 1, "one read relayed to learn");
    assert_eq!(hits(&engine), hits_before + 19, "the others are hits");
}
