//! Fills from the live server race concurrent writers to the same keys, through a real
//! dataflow fed by the real binlog stream; after the writers stop and replication catches up,
//! every view's answer for every key equals the server's own answer to the same query (no
//! stale fill, no write counted twice or lost). Evictions during the run force refills while
//! writes are in flight.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;
use freshet_cdc::result::{convert, result_columns};
use freshet_cdc::stream::current_position;
use freshet_cdc::{FillConfig, MariaDb, StreamEvent, UpstreamFills};
use freshet_dataflow::expr::text_of;
use freshet_dataflow::{
    Batch, ByteSize, Catalog, Dataflow, FillError, FillOutcome, FillRequest, Key, Lookup, LookupError, Position, SharedRow, Value, ViewId,
};
use mysql_async::prelude::Queryable;
use tokio::task::JoinSet;

const KEYS: i64 = 12;
const WRITERS: usize = 3;
const TXNS_PER_WRITER: usize = 1_500;
const QUERIES: &[&str] = &[
    "SELECT id, v, s FROM cdc_items WHERE k = ?",
    "SELECT k, COUNT(*), SUM(v), MAX(v) FROM cdc_items WHERE k = ? GROUP BY k",
    "SELECT s, COUNT(*) FROM cdc_items WHERE k = ? GROUP BY s",
    // Two tables: both state queries of one fill must come from the same snapshot.
    "SELECT i.id, g.t FROM cdc_items i JOIN cdc_tags g ON g.k = i.k WHERE i.k = ?",
    "SELECT g.k, COUNT(*), SUM(i.v) FROM cdc_tags g LEFT JOIN cdc_items i ON i.k = g.k AND i.v > 10 WHERE g.k = ? GROUP BY g.k",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self, m: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % m
    }
}

async fn writer(db: String, w: usize) {
    let mut c = mysql_async::Conn::new(opts_for(Some(&db))).await.unwrap();
    let mut r = Rng(991 + w as u64);
    let mut done = 0;
    while done < TXNS_PER_WRITER {
        let res: Result<(), mysql_async::Error> = async {
            let mut tx = c.start_transaction(Default::default()).await?;
            for _ in 0..1 + r.next(3) {
                let (id, k, v) = (r.next(300) as i64, r.next(KEYS as u64) as i64, r.next(50) as i64);
                match r.next(6) {
                    4 => tx.exec_drop("INSERT INTO cdc_tags VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE t = t + 1", (id % 40, k, v)).await?,
                    5 => tx.exec_drop("DELETE FROM cdc_tags WHERE id = ?", (id % 40,)).await?,
                    0 => {
                        tx.exec_drop(
                            "INSERT INTO cdc_items VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE v = v + 1",
                            (id, k, v, ["a", "B", "b"][(v % 3) as usize]),
                        )
                        .await?
                    }
                    1 => tx.exec_drop("UPDATE cdc_items SET v = v + ? WHERE id = ?", (v, id)).await?,
                    2 => tx.exec_drop("UPDATE cdc_items SET k = ? WHERE id = ?", (k, id)).await?,
                    3 => tx.exec_drop("DELETE FROM cdc_items WHERE id = ?", (id,)).await?,
                    _ => unreachable!(),
                }
            }
            tx.commit().await
        }
        .await;
        match res {
            Ok(()) => done += 1,
            Err(mysql_async::Error::Server(e)) if e.code == 1213 || e.code == 1205 => {}
            Err(e) => panic!("writer {w}: {e}"),
        }
        if done % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Rows as sorted text. `fold`: compare case-insensitively, for GROUP BY a `_ci` column, whose
/// representative is whichever row the server (or the view) saw first (unspecified in MySQL).
fn rows_text<R: AsRef<[Value]>>(rows: &[R], fold: bool) -> Vec<Vec<String>> {
    let t = |v: &Value| {
        let s = text_of(v).unwrap_or_else(|| "NULL".into());
        if fold { s.to_lowercase() } else { s }
    };
    let mut out: Vec<Vec<String>> = rows.iter().map(|r| r.as_ref().iter().map(t).collect()).collect();
    out.sort();
    out
}

#[derive(Default)]
struct Counts {
    fills: usize,
    filled: usize,
    stale: usize,
    unsure: usize,
    waited: usize,
    behind: usize,
    failed: usize,
    evictions: usize,
    lookups: usize,
}

/// The binlog stream of `db`, a fill source over the server and a dataflow over `db`'s tables
/// at the stream's start.
async fn stream_fills_and_dataflow(db: &str) -> (freshet_cdc::BinlogStream, UpstreamFills, Dataflow) {
    let s = stream(db).await;
    let mut catalog = Catalog::new();
    for t in s.tables() {
        catalog.add(t.clone()).unwrap();
    }
    let fills = UpstreamFills::new(
        opts_for(None),
        db,
        s.flavor(),
        s.table_infos(),
        FillConfig { max_in_flight: 4, timeout: Duration::from_secs(10), bracket_attempts: 3 },
    );
    let mut df = Dataflow::new(catalog, ByteSize(64 << 20));
    df.set_applied(s.delivered().position().unwrap());
    (s, fills, df)
}

fn spawn_fills(
    df: &mut Dataflow,
    fills: &UpstreamFills,
    inflight: &mut JoinSet<(FillRequest, Result<freshet_dataflow::FillResponse, FillError>)>,
) {
    for req in df.fill_requests() {
        let f = fills.clone();
        inflight.spawn(async move {
            let r = f.fill(&req).await;
            (req, r)
        });
    }
}

fn count(c: &mut Counts, o: FillOutcome) {
    c.filled += o.filled;
    c.stale += o.stale;
    c.unsure += o.unsure;
    c.waited += o.waiting;
}

/// A batch in, and the fills that waited for the stream to pass their unsure range.
fn apply(df: &mut Dataflow, c: &mut Counts, b: &Batch) {
    df.apply(b).unwrap();
    count(c, df.settle_fills());
}

type FillDone = (FillRequest, Result<freshet_dataflow::FillResponse, FillError>);

fn finish(df: &mut Dataflow, c: &mut Counts, done: FillDone) {
    let (req, r) = done;
    c.fills += 1;
    match r {
        Ok(resp) => count(c, df.complete_fill(resp)),
        Err(FillError::Behind { .. }) => {
            // The server's snapshot position trails the binlog the stream already sent for a
            // moment (a commit written to the binlog, not yet ordered in InnoDB): the request is
            // asked again, as freshet's writer does.
            c.behind += 1;
            df.abandon_fill(&req);
        }
        Err(e) => {
            eprintln!("fill of {} keys failed: {e}", req.keys.len());
            c.failed += 1;
            df.abandon_fill(&req);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_racing_writers_are_neither_stale_nor_double_counted() {
    let (db, mut c) = fresh_db("fills").await;
    c.query_drop(
        "CREATE TABLE cdc_items (id INT PRIMARY KEY, k INT NOT NULL, v INT NOT NULL,
                                 s VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, KEY (k));
         CREATE TABLE cdc_tags (id INT PRIMARY KEY, k INT NOT NULL, t INT NOT NULL, KEY (k));
         INSERT INTO cdc_tags SELECT seq, seq % 12, seq FROM seq_0_to_29",
    )
    .await
    .unwrap();
    let seed: Vec<String> = (0..150).map(|i| format!("({i}, {}, {}, '{}')", i % KEYS, i % 7, ["a", "B", "b"][i as usize % 3])).collect();
    c.query_drop(format!("INSERT INTO cdc_items VALUES {}", seed.join(","))).await.unwrap();

    let (s, fills, mut df) = stream_fills_and_dataflow(&db).await;
    let views: Vec<ViewId> = QUERIES.iter().map(|q| df.install_sql(q).unwrap()).collect();
    let readers: Vec<_> = views.iter().map(|v| df.reader(*v).unwrap()).collect();
    let (mut rx, _lag) = s.spawn(4096);

    let mut writers = JoinSet::new();
    for w in 0..WRITERS {
        writers.spawn(writer(db.clone(), w));
    }
    let mut inflight = JoinSet::new();
    let mut counts = Counts::default();
    let mut rng = Rng(5);
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(3));
    // Race: reads, evictions and fills while the writers run.
    while !writers.is_empty() {
        assert!(started.elapsed() < Duration::from_secs(60), "writers did not finish in time");
        tokio::select! {
            ev = rx.recv() => match ev.expect("stream task alive").expect("stream event") {
                StreamEvent::Batch(b) => apply(&mut df, &mut counts, &b),
                StreamEvent::Schema(ch) => panic!("unexpected DDL {ch:?}"),
                StreamEvent::Following(t) => panic!("no table set was given, yet following {t:?}"),
            },
            Some(done) = inflight.join_next(), if !inflight.is_empty() => finish(&mut df, &mut counts, done.unwrap()),
            Some(w) = writers.join_next() => w.unwrap(),
            _ = tick.tick() => {
                for _ in 0..4 {
                    let (v, k) = (rng.next(views.len() as u64) as usize, rng.next(KEYS as u64) as i64);
                    // A miss asks for a fill; a key whose fill raced writes is relayed for now.
                    if let Err(e) = readers[v].lookup(&[Value::Int(k)]) {
                        assert_eq!(e, LookupError::Raced);
                    }
                    counts.lookups += 1;
                }
                if rng.next(4) == 0 {
                    let (v, k) = (rng.next(views.len() as u64) as usize, rng.next(KEYS as u64) as i64);
                    let key: Key = vec![Value::Int(k)].into();
                    if df.evict(views[v], &key) {
                        counts.evictions += 1;
                    }
                }
                spawn_fills(&mut df, &fills, &mut inflight);
            }
        }
    }
    let racing_fills = counts.fills;

    // Writers stopped: catch up to the server's end of binlog, finish the fills in flight.
    let end = current_position(&mut c, &MariaDb, Duration::from_secs(5)).await.unwrap().position().unwrap();
    within(30, "replication catches up", async {
        while df.applied() < end || !inflight.is_empty() {
            tokio::select! {
                ev = rx.recv() => if let StreamEvent::Batch(b) = ev.unwrap().unwrap() { apply(&mut df, &mut counts, &b) },
                Some(done) = inflight.join_next(), if !inflight.is_empty() => finish(&mut df, &mut counts, done.unwrap()),
            }
        }
    })
    .await;

    // Every key of every view equals the server's answer.
    let tables = s_tables(&mut c, &db).await;
    let mut compared = 0;
    for (vi, q) in QUERIES.iter().enumerate() {
        for k in 0..KEYS {
            let rows = within(20, "fill after catch-up", async {
                loop {
                    match readers[vi].lookup(&[Value::Int(k)]) {
                        Ok(Lookup::Hit(rows)) => break rows,
                        Err(LookupError::Raced) => tokio::time::sleep(Duration::from_millis(10)).await,
                        Err(e) => panic!("{e}"),
                        Ok(Lookup::Miss(_)) => {
                            spawn_fills(&mut df, &fills, &mut inflight);
                            // The stream goes on: a fill may wait for it to pass its unsure range.
                            tokio::select! {
                                Some(done) = inflight.join_next(), if !inflight.is_empty() => finish(&mut df, &mut counts, done.unwrap()),
                                ev = rx.recv() => if let StreamEvent::Batch(b) = ev.unwrap().unwrap() { apply(&mut df, &mut counts, &b) },
                            }
                        }
                    }
                }
            })
            .await;
            let server: Vec<mysql_async::Row> = c.exec(*q, (k,)).await.unwrap();
            let server: Vec<Box<[Value]>> = server
                .into_iter()
                .map(|row| {
                    let cols = result_columns(row.columns_ref(), &tables);
                    row.unwrap().into_iter().zip(&cols).map(|(v, col)| convert(col, v).unwrap()).collect()
                })
                .collect();
            let fold = q.contains("GROUP BY s");
            let rows: Vec<Vec<Value>> = rows.iter().map(SharedRow::to_vec).collect();
            assert_eq!(rows_text(&rows, fold), rows_text(&server, fold), "{q} with k = {k}");
            compared += 1;
        }
    }
    eprintln!(
        "{} txns by {WRITERS} writers; {racing_fills} fills raced them ({} total: {} partitions filled, {} stale, {} behind and asked again, {} failed), {} evictions, {} lookups; {compared} answers equal the server's, in {:?}",
        WRITERS * TXNS_PER_WRITER,
        counts.fills,
        counts.filled,
        counts.stale,
        counts.behind,
        counts.failed,
        counts.evictions,
        counts.lookups,
        started.elapsed()
    );
    assert!(racing_fills >= 20, "the fills must actually race the writers ({racing_fills})");
    assert_eq!(counts.failed, 0);
    drop_db(&db).await;
}

async fn s_tables(c: &mut mysql_async::Conn, db: &str) -> HashMap<String, freshet_cdc::TableInfo> {
    freshet_cdc::schema::load_tables(c, &MariaDb, db, None).await.unwrap()
}

/// What the fill's fence takes from MariaDB, measured: inside `START TRANSACTION WITH
/// CONSISTENT SNAPSHOT`, `binlog_snapshot_file`/`binlog_snapshot_position` name exactly the
/// commits the snapshot shows. Writers commit one increment of a counter each; snapshots read
/// the counter and their position. Two snapshots at one position must show one count, and a
/// later position never a smaller one (other tests' commits only add positions between).
/// MariaDB 10.11 breaks it under concurrent commits, both ways, by a few commits (docs/
/// decisions.md, cdc, "A snapshot's binlog position is not exactly its content"), so a fill
/// from the live server can miss a commit or count one twice: ignored until fills stop relying
/// on it; `cargo test -p freshet-cdc --test fills -- --ignored` measures the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "MariaDB 10.11 fails it; see docs/decisions.md, cdc"]
async fn a_snapshots_binlog_position_names_exactly_the_commits_it_shows() {
    let (db, mut admin) = fresh_db("fence").await;
    admin.query_drop("CREATE TABLE ctr (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB").await.unwrap();
    admin.query_drop("INSERT INTO ctr VALUES (1, 0)").await.unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    let mut tasks = JoinSet::new();
    for _ in 0..4 {
        let db = db.clone();
        tasks.spawn(async move {
            let mut c = mysql_async::Conn::new(opts_for(Some(&db))).await.unwrap();
            while Instant::now() < until {
                c.query_drop("UPDATE ctr SET v = v + 1 WHERE id = 1").await.unwrap();
            }
            Vec::new()
        });
    }
    for _ in 0..3 {
        let db = db.clone();
        tasks.spawn(async move {
            let mut c = mysql_async::Conn::new(opts_for(Some(&db))).await.unwrap();
            let mut seen = Vec::new();
            while Instant::now() < until {
                c.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY").await.unwrap();
                let status: Vec<(String, String)> = c.query("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'").await.unwrap();
                let v: Option<i64> = c.query_first("SELECT v FROM ctr WHERE id = 1").await.unwrap();
                c.query_drop("COMMIT").await.unwrap();
                let get = |name: &str| status.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone()).unwrap();
                let file = get("binlog_snapshot_file");
                let seq: u64 = file.rsplit('.').next().unwrap().parse().unwrap();
                seen.push(((seq, get("binlog_snapshot_position").parse::<u64>().unwrap()), v.unwrap()));
            }
            seen
        });
    }
    let mut seen = Vec::new();
    while let Some(t) = tasks.join_next().await {
        seen.extend(t.unwrap());
    }
    seen.sort();
    let wrong: Vec<_> =
        seen.windows(2).filter(|w| w[1].1 < w[0].1 || (w[1].0 == w[0].0 && w[1].1 != w[0].1)).map(|w| (w[0], w[1])).collect();
    drop_db(&db).await;
    assert!(
        wrong.is_empty(),
        "{} of {} snapshots disagree with a neighbour's position, e.g. {:?}",
        wrong.len(),
        seen.len(),
        &wrong[..wrong.len().min(3)]
    );
}

/// A fill must show exactly the commits of its keys up to the position it is installed at,
/// even though MariaDB's snapshot position is not exactly its snapshot's content (the test
/// above). Writers insert rows for 16 keys, one commit each, while the test reads a count view
/// between batches and evicts all partitions every few milliseconds, so that they are filled
/// again and again while the writers commit. Each answer must be the key's number of inserts up to the
/// applied position, or up to the fill's position if that is later (a fill ahead of the
/// stream). A fill that missed a commit shows one row fewer until evicted (an insert is
/// never retracted, so nothing else notices); one that counted a commit twice, one more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_racing_commits_to_their_keys_show_exactly_their_commits() {
    const N: usize = 16;
    let (db, mut admin) = fresh_db("exact").await;
    admin.query_drop("CREATE TABLE ev (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, KEY (k)) ENGINE=InnoDB").await.unwrap();
    let (s, fills, mut df) = stream_fills_and_dataflow(&db).await;
    let view = df.install_sql("SELECT k, COUNT(*) FROM ev WHERE k = ? GROUP BY k").unwrap();
    let reader = df.reader(view).unwrap();
    let (mut rx, _lag) = s.spawn(4096);

    let until = Instant::now() + Duration::from_secs(6);
    let mut writers = JoinSet::new();
    for w in 0..4u64 {
        let db = db.clone();
        writers.spawn(async move {
            let mut c = mysql_async::Conn::new(opts_for(Some(&db))).await.unwrap();
            let mut r = Rng(77 + w);
            while Instant::now() < until {
                c.exec_drop("INSERT INTO ev (k) VALUES (?)", (r.next(N as u64) as i64,)).await.unwrap();
            }
        });
    }
    /// Each key's inserts up to each batch.
    struct Counted {
        history: Vec<(Position, [i64; N])>,
        now: [i64; N],
    }
    impl Counted {
        fn apply(&mut self, b: &Batch) {
            for ch in &b.changes {
                assert!(ch.insert, "the writers only insert");
                let Value::Int(k) = ch.row[1] else { panic!("k {:?}", ch.row[1]) };
                self.now[k as usize] += 1;
            }
            if !b.changes.is_empty() {
                self.history.push((b.position, self.now));
            }
        }
        fn at(&self, p: Position) -> [i64; N] {
            let i = self.history.partition_point(|(q, _)| *q <= p);
            if i == 0 { [0; N] } else { self.history[i - 1].1 }
        }
    }
    let mut counted = Counted { history: Vec::new(), now: [0; N] };
    // Per key, the position of the fill its partition was installed by.
    let mut filled_at: [Option<Position>; N] = [None; N];
    // (key, rows shown, the position the answer must reflect), checked once every batch is in.
    let mut shown: Vec<(usize, i64, Position)> = Vec::new();
    let (mut inflight, mut counts) = (JoinSet::new(), Counts::default());
    let mut rng = Rng(3);
    let read_all = |df: &Dataflow, filled_at: &[Option<Position>; N], shown: &mut Vec<(usize, i64, Position)>| {
        for (k, at) in filled_at.iter().enumerate() {
            if let Ok(Lookup::Hit(rows)) = reader.lookup(&[Value::Int(k as i64)]) {
                let n = match rows.first().map(|r| r.to_vec()[1].clone()) {
                    Some(Value::Int(n)) => n,
                    None => 0,
                    Some(other) => panic!("count {other:?}"),
                };
                shown.push((k, n, df.applied().max(at.expect("a hit was filled"))));
            }
        }
    };
    let complete = |df: &mut Dataflow, counts: &mut Counts, filled_at: &mut [Option<Position>; N], done: FillDone| {
        let (keys, at) = match &done.1 {
            Ok(resp) => (resp.keys.clone(), resp.position),
            Err(_) => (Vec::new(), Position(0)),
        };
        finish(df, counts, done);
        // Installed now (else the fill waits): at its position, which may be ahead.
        let filled = df.filled_keys(view);
        for (k, at_k) in filled_at.iter_mut().enumerate() {
            let key: Key = vec![Value::Int(k as i64)].into();
            if at_k.is_none() && keys.contains(&key) && filled.contains(&key) {
                *at_k = Some(at);
            }
        }
    };
    // Partitions a waiting fill installed once the stream passed its unsure range: at the
    // applied position.
    let note_filled = |df: &Dataflow, filled_at: &mut [Option<Position>; N], applied: Position| {
        let filled = df.filled_keys(view);
        for (k, at_k) in filled_at.iter_mut().enumerate() {
            if at_k.is_none() && filled.contains(&vec![Value::Int(k as i64)].into()) {
                *at_k = Some(applied);
            }
        }
    };
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    while !writers.is_empty() {
        tokio::select! {
            ev = rx.recv() => match ev.expect("stream task alive").expect("stream event") {
                StreamEvent::Batch(b) => {
                    counted.apply(&b);
                    apply(&mut df, &mut counts, &b);
                    note_filled(&df, &mut filled_at, df.applied());
                }
                other => panic!("unexpected {other:?}"),
            },
            Some(done) = inflight.join_next(), if !inflight.is_empty() => {
                complete(&mut df, &mut counts, &mut filled_at, done.unwrap());
                read_all(&df, &filled_at, &mut shown);
            }
            Some(w) = writers.join_next() => w.unwrap(),
            _ = tick.tick() => {
                read_all(&df, &filled_at, &mut shown);
                // Every key at once: each fill asks for all of them, and any commit its
                // snapshot disagrees on touches one.
                if rng.next(15) == 0 {
                    for (k, at) in filled_at.iter_mut().enumerate() {
                        df.evict(view, &vec![Value::Int(k as i64)].into());
                        *at = None;
                    }
                }
                spawn_fills(&mut df, &fills, &mut inflight);
            }
        }
    }
    let end = current_position(&mut admin, &MariaDb, Duration::from_secs(5)).await.unwrap().position().unwrap();
    within(30, "replication catches up", async {
        while df.applied() < end || !inflight.is_empty() {
            tokio::select! {
                ev = rx.recv() => if let StreamEvent::Batch(b) = ev.unwrap().unwrap() {
                    counted.apply(&b);
                    apply(&mut df, &mut counts, &b);
                    note_filled(&df, &mut filled_at, df.applied());
                },
                Some(done) = inflight.join_next(), if !inflight.is_empty() => complete(&mut df, &mut counts, &mut filled_at, done.unwrap()),
            }
        }
    })
    .await;
    drop_db(&db).await;
    let wrong: Vec<String> = shown
        .iter()
        .filter(|(k, n, at)| counted.at(*at)[*k] != *n)
        .map(|(k, n, at)| format!("k = {k}: {n} rows shown, {} inserted up to {at:?}", counted.at(*at)[*k]))
        .collect();
    eprintln!(
        "{} fills ({} partitions filled, {} waited for the stream, {} stale, {} unsure, {} behind, {} failed), {} answers read, {} wrong",
        counts.fills,
        counts.filled,
        counts.waited,
        counts.stale,
        counts.unsure,
        counts.behind,
        counts.failed,
        shown.len(),
        wrong.len()
    );
    assert!(wrong.is_empty(), "answers that missed or doubled a commit: {:#?}", &wrong[..wrong.len().min(10)]);
    assert!(counts.filled >= 100, "the fills must actually race the writers ({} filled)", counts.filled);
    assert!(shown.len() >= 1000, "the answers must actually be read ({})", shown.len());
}
