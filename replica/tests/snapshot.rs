//! The snapshot against the project's MariaDB (`eval "$(scripts/mariadb.sh)"`): a copy stopped
//! after a few batches resumes after its last committed batch under a new snapshot (rows
//! already copied are not copied again), the binlog stream replayed from the store's position
//! brings it level, and every answer a fill gives equals what the server returns.

use std::collections::HashMap;
use std::time::Duration;

use freshet_cdc::schema::{TableInfo, load_tables};
use freshet_cdc::stream::current_position;
use freshet_cdc::{BinlogPos, BinlogStream, MariaDb, StartAt, StreamConfig, StreamEvent};
use freshet_dataflow::*;
use freshet_replica::{CopyState, CopyStats, ReplicaStore, SnapshotConfig, copy_tables};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

fn opts(db: Option<&str>) -> Opts {
    OptsBuilder::from_opts(Opts::from_url(&freshet_testkit::mysql_url()).unwrap()).db_name(db.map(str::to_string)).into()
}

async fn fresh_db(name: &str) -> (String, Conn) {
    let db = format!("replica_{name}_{}", std::process::id());
    let mut c = Conn::new(opts(None)).await.unwrap();
    c.query_drop(format!("DROP DATABASE IF EXISTS `{db}`")).await.unwrap();
    c.query_drop(format!("CREATE DATABASE `{db}`")).await.unwrap();
    c.query_drop(format!("USE `{db}`")).await.unwrap();
    (db, c)
}

/// Applies the stream to `store` from its position until it reaches the server's current end.
async fn catch_up(store: &ReplicaStore, db: &str, conn: &mut Conn) {
    let end = current_position(conn, &MariaDb, Duration::from_secs(5)).await.unwrap();
    let start = BinlogPos::from_position(store.position().unwrap(), &end.file).unwrap();
    let id = 1000 + std::process::id() % 1_000_000;
    let mut s = BinlogStream::connect(opts(None), StreamConfig::new(db, id), StartAt::At(start)).await.unwrap();
    let target = end.position().unwrap();
    while store.position().unwrap() < target {
        match tokio::time::timeout(Duration::from_secs(20), s.next()).await.expect("stream reaches the end").unwrap() {
            StreamEvent::Batch(b) => store.apply(&b).unwrap(),
            StreamEvent::Schema(c) => panic!("unexpected DDL {c:?}"),
            StreamEvent::Following(t) => panic!("no table set was given, yet following {t:?}"),
        }
    }
}

/// What the server and a fill from the store say `SELECT id, k, s FROM t WHERE k = ?` is.
async fn compare(store: &ReplicaStore, tables: &HashMap<String, TableInfo>, conn: &mut Conn, keys: std::ops::Range<i64>) {
    let mut cat = Catalog::new();
    cat.add(tables["t"].schema.clone()).unwrap();
    let mut df = Dataflow::new(cat, ByteSize(1 << 30));
    df.set_applied(store.position().unwrap());
    let view = df.install_sql("SELECT id, k, s FROM t WHERE k = ?").unwrap();
    let reader = df.reader(view).unwrap();
    let mut nonempty = 0;
    for k in keys {
        let _ = reader.lookup(&[Value::Int(k)]).unwrap();
        for req in df.fill_requests() {
            let resp = (&*store).fill(&req).expect("the store answers");
            df.complete_fill(resp);
        }
        let Lookup::Hit(rows) = reader.lookup(&[Value::Int(k)]).unwrap() else { panic!("filled key missed") };
        let mut got: Vec<(i64, i64, String)> = rows
            .iter()
            .map(|r| match &r.to_vec()[..] {
                [Value::Int(a), Value::Int(b), Value::Text(s, _)] => (*a, *b, s.to_string()),
                other => panic!("unexpected row {other:?}"),
            })
            .collect();
        got.sort();
        let want: Vec<(i64, i64, String)> = conn.exec("SELECT id, k, s FROM t WHERE k = ? ORDER BY id", (k,)).await.unwrap();
        assert_eq!(got, want, "k = {k}");
        nonempty += usize::from(!want.is_empty());
    }
    assert!(nonempty >= 5, "the comparison must see rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_copy_resumes_where_it_stopped_and_ends_equal_to_the_server() {
    let (db, mut c) = fresh_db("resume").await;
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, s VARCHAR(20) COLLATE utf8mb4_general_ci)").await.unwrap();
    let values: Vec<String> = (1..=1000).map(|i| format!("({i}, {}, 'r{i}')", i % 20)).collect();
    c.query_drop(format!("INSERT INTO t VALUES {}", values.join(","))).await.unwrap();
    let tables = load_tables(&mut c, &MariaDb, &db, None).await.unwrap();
    let dir = std::env::temp_dir().join(format!("freshet-replica-snapshot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    // First run: three batches of 100, then "killed".
    {
        let store = ReplicaStore::open(&dir).unwrap();
        assert!(!store.register(&tables["t"].schema).unwrap());
        let cfg = SnapshotConfig { batch_rows: 100, max_batches: Some(3), ..SnapshotConfig::default() };
        let stats = CopyStats::default();
        assert!(!copy_tables(opts(None), &db, &store, &tables, &cfg, &stats).await.unwrap());
        let f = stats.snapshot();
        assert_eq!(f.rows_copied, 300);
        assert!(f.rows_estimated > 0 && f.bytes_copied > 0);
        assert!(matches!(store.copy_state("t"), Some(CopyState::Copying { after: Some(_), .. })));
    }
    // Writes land before and after the copy's resume point, while freshet is down.
    c.query_drop("UPDATE t SET k = 7, s = 'moved' WHERE id IN (5, 800)").await.unwrap();
    c.query_drop("DELETE FROM t WHERE id IN (6, 900)").await.unwrap();
    c.query_drop("INSERT INTO t VALUES (2000, 7, 'NEW'), (2001, 3, 'new')").await.unwrap();

    // Restart: the copy continues after id 300 under a new snapshot.
    let store = ReplicaStore::open(&dir).unwrap();
    assert!(store.register(&tables["t"].schema).unwrap(), "same schema: the copied rows are kept");
    let stats = CopyStats::default();
    let cfg = SnapshotConfig { batch_rows: 100, ..SnapshotConfig::default() };
    assert!(copy_tables(opts(None), &db, &store, &tables, &cfg, &stats).await.unwrap());
    let above: u64 = c.query_first("SELECT COUNT(*) FROM t WHERE id > 300").await.unwrap().unwrap();
    assert_eq!(stats.snapshot().rows_copied, above, "only the rows after the last committed batch are copied");
    assert!(matches!(store.copy_state("t"), Some(CopyState::Done { .. })));
    assert!(!store.is_ready("t").unwrap(), "the stream has not passed the second snapshot yet");

    catch_up(&store, &db, &mut c).await;
    assert!(store.is_ready("t").unwrap());
    compare(&store, &tables, &mut c, 0..20).await;

    // Kept current: more writes through the stream, the same answers.
    c.query_drop("UPDATE t SET k = 11 WHERE id BETWEEN 100 AND 140").await.unwrap();
    c.query_drop("DELETE FROM t WHERE k = 3").await.unwrap();
    catch_up(&store, &db, &mut c).await;
    compare(&store, &tables, &mut c, 0..20).await;

    // A third start finds everything copied: nothing is read again.
    drop(store);
    let store = ReplicaStore::open(&dir).unwrap();
    assert!(store.register(&tables["t"].schema).unwrap());
    let stats = CopyStats::default();
    assert!(copy_tables(opts(None), &db, &store, &tables, &cfg, &stats).await.unwrap());
    assert_eq!(stats.snapshot().rows_copied, 0);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    c.query_drop(format!("DROP DATABASE `{db}`")).await.unwrap();
}

/// DDL on a table being copied does not wait for the whole copy: the copy holds a snapshot
/// (and with it the table's metadata lock, which an ALTER needs, and behind which every later
/// statement on the table would queue) for at most `max_snapshot_age` at a time. The copy
/// still ends with every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_during_a_long_copy_does_not_wait_for_the_copy() {
    let (db, mut c) = fresh_db("mdl").await;
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, s VARCHAR(20) NOT NULL)").await.unwrap();
    c.query_drop("INSERT INTO t SELECT seq, seq % 7, CONCAT('r', seq) FROM seq_1_to_20000").await.unwrap();
    let tables = load_tables(&mut c, &MariaDb, &db, None).await.unwrap();
    let path = std::env::temp_dir().join(format!("freshet-replica-mdl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    let store = std::sync::Arc::new(ReplicaStore::open(&path).unwrap());
    store.register(&tables["t"].schema).unwrap();
    let stats = std::sync::Arc::new(CopyStats::default());
    let copy = {
        let (store, stats, tables, db) = (store.clone(), stats.clone(), tables.clone(), db.clone());
        tokio::spawn(async move {
            // A short age, so that the copy (4,000 batches) outlasts many snapshots.
            let cfg = SnapshotConfig { batch_rows: 5, max_snapshot_age: Duration::from_millis(100), ..SnapshotConfig::default() };
            copy_tables(opts(None), &db, &store, &tables, &cfg, &stats).await.unwrap()
        })
    };
    while stats.snapshot().rows_copied == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.query_drop("ALTER TABLE t COMMENT = 'changed while copying'").await.unwrap();
    let copied = stats.snapshot().rows_copied;
    assert!(copied < 20_000, "the ALTER waited for the whole copy ({copied} rows copied when it returned)");
    assert!(copy.await.unwrap());
    assert_eq!(stats.snapshot().rows_copied, 20_000);
    assert!(matches!(store.copy_state("t"), Some(CopyState::Done { .. })));
    drop(store);
    let _ = std::fs::remove_dir_all(&path);
    c.query_drop(format!("DROP DATABASE `{db}`")).await.unwrap();
}

/// A batch after a key of several columns is read by the server as a range of the primary
/// key, not a scan of it from its start: MariaDB does not make a range of a row comparison
/// (`(a, b) > (?, ?)`), so each batch of a composite key's copy read every row before it (an
/// audit: 995,000 rows read for a batch of 5,000 near the end of a million, a copy quadratic
/// in the table).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_after_a_composite_key_reads_a_range_of_the_key() {
    let (db, mut c) = fresh_db("composite").await;
    c.query_drop("CREATE TABLE cpk (a INT NOT NULL, b VARCHAR(10) NOT NULL, n INT NOT NULL, v INT, PRIMARY KEY (a, b, n))").await.unwrap();
    c.query_drop("INSERT INTO cpk SELECT seq DIV 100, seq MOD 100, seq MOD 7, seq FROM seq_0_to_19999").await.unwrap();
    c.query_drop("ANALYZE TABLE cpk").await.unwrap();
    let tables = load_tables(&mut c, &MariaDb, &db, None).await.unwrap();
    let schema = &tables["cpk"].schema;
    let all: Vec<usize> = (0..schema.columns.len()).collect();
    let sql = freshet_replica::batch_sql(schema, &all, true, 100);
    let after = freshet_replica::batch_params(&[mysql_async::Value::from(150), "5".into(), 3.into()]);
    let plan: String = c.exec_first(format!("EXPLAIN FORMAT=JSON {sql}"), after.clone()).await.unwrap().unwrap();
    assert!(plan.contains(r#""access_type": "range""#), "{sql}:\n{plan}");
    // And it reads what a row comparison means: the rows after the key, in key order.
    let got: Vec<(i32, String, i32, Option<i32>)> = c.exec(&sql, after).await.unwrap();
    let want: Vec<(i32, String, i32, Option<i32>)> =
        c.query("SELECT a, b, n, v FROM cpk WHERE (a, b, n) > (150, '5', 3) ORDER BY a, b, n LIMIT 100").await.unwrap();
    assert_eq!(got, want);
    c.query_drop(format!("DROP DATABASE `{db}`")).await.unwrap();
}

/// A copy batch is bounded by bytes as well as rows: 30 rows of 4 MiB asked for in one batch of
/// `batch_rows` 30 were held whole (120 MiB, several times over while written); the batch now
/// stops at the default byte budget (8 MiB: the row that reaches it is the last), later
/// batches ask for as many rows as fit, and the copy ends equal to the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_batch_of_wide_rows_is_bounded_by_bytes() {
    let (db, mut c) = fresh_db("rpf_wide").await;
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, s VARCHAR(20) NOT NULL, b LONGBLOB NOT NULL)").await.unwrap();
    for i in 0..30 {
        c.query_drop(format!("INSERT INTO t VALUES ({i}, {}, 's{i}', REPEAT('x', 4 << 20))", i % 6)).await.unwrap();
    }
    let tables = load_tables(&mut c, &MariaDb, &db, None).await.unwrap();
    let dir = std::env::temp_dir().join(format!("freshet-replica-snapshot-wide-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = ReplicaStore::open(&dir).unwrap();
    store.register(&tables["t"].schema).unwrap();
    let stats = CopyStats::default();
    let one = SnapshotConfig { batch_rows: 30, max_batches: Some(1), ..SnapshotConfig::default() };
    assert!(!copy_tables(opts(None), &db, &store, &tables, &one, &stats).await.unwrap(), "one batch does not copy the table");
    let first = stats.snapshot();
    assert!(first.rows_copied <= 2, "the first batch held {} rows of 4 MiB ({} bytes)", first.rows_copied, first.bytes_copied);
    let two = SnapshotConfig { batch_rows: 30, max_batches: Some(1), ..SnapshotConfig::default() };
    assert!(!copy_tables(opts(None), &db, &store, &tables, &two, &stats).await.unwrap());
    assert!(stats.snapshot().rows_copied - first.rows_copied <= 2, "{:?}", stats.snapshot());
    let all = SnapshotConfig { batch_rows: 30, ..SnapshotConfig::default() };
    assert!(copy_tables(opts(None), &db, &store, &tables, &all, &stats).await.unwrap());
    assert_eq!(stats.snapshot().rows_copied, 30);
    catch_up(&store, &db, &mut c).await;
    compare(&store, &tables, &mut c, 0..6).await;
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    c.query_drop(format!("DROP DATABASE `{db}`")).await.unwrap();
}
