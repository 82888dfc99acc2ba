//! The RocksDB store on its own: positions and rows survive a reopen, a changed schema drops
//! only that table, the copy never overwrites a newer image the stream wrote, and a table is
//! not answered from before its copy is complete and caught up, a reset killed at any
//! instant leaves a table that is copied again, and DDL or a reset between two chunks of an
//! index build stops the build; tables whose names differ in case are two where the server says so.

use std::path::PathBuf;

use freshet_dataflow::*;
use freshet_replica::{CopyState, ReplicaError, ReplicaStore};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("freshet-replica-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn schema(name: &str, extra: bool) -> TableSchema {
    let i = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false });
    let mut cols = vec![i("id"), i("k")];
    if extra {
        cols.push(i("z"));
    }
    TableSchema::new(name, cols, vec![0])
}

fn row(id: i64, k: i64) -> Row {
    vec![Value::Int(id), Value::Int(k)].into()
}

/// The rows of `table` with `k = key`, through a fill.
fn rows_with_k(store: &ReplicaStore, df: &mut Dataflow, view: ViewId, key: i64) -> Result<Vec<Row>, FillError> {
    let r = df.reader(view).unwrap();
    let _ = r.lookup(&[Value::Int(key)]).unwrap();
    let req = df.fill_requests().pop().expect("a miss makes a request");
    let resp = (&*store).fill(&req);
    match resp {
        Ok(resp) => {
            df.complete_fill(resp);
            match r.lookup(&[Value::Int(key)]).unwrap() {
                Lookup::Hit(rows) => {
                    let mut v = rows.iter().map(|r| Row::from(r.to_vec())).collect::<Vec<Row>>();
                    v.sort();
                    Ok(v)
                }
                Lookup::Miss(_) => panic!("filled key missed"),
            }
        }
        Err(e) => {
            df.abandon_fill(&req);
            Err(e)
        }
    }
}

fn dataflow() -> (Dataflow, ViewId) {
    let mut c = Catalog::new();
    c.add(schema("t", false)).unwrap();
    let mut df = Dataflow::new(c, ByteSize(1 << 30));
    let v = df.install_sql("SELECT id, k FROM t WHERE k = ?").unwrap();
    (df, v)
}

#[test]
fn rows_and_position_survive_a_reopen() {
    let d = dir("reopen");
    {
        let s = ReplicaStore::open(&d).unwrap();
        assert!(!s.register(&schema("t", false)).unwrap(), "a new table must be copied");
        s.write_copy_batch(&schema("t", false), s.copy_progress("t").unwrap().1, Position(5), &[row(1, 10), row(2, 10)], true).unwrap();
        let mut b = Batch::new(Position(7));
        b.insert("t", row(3, 10));
        b.update("t", row(1, 10), row(1, 11));
        s.apply(&b).unwrap();
    }
    let s = ReplicaStore::open(&d).unwrap();
    assert!(s.register(&schema("t", false)).unwrap(), "same schema: rows are usable");
    assert_eq!(s.position().unwrap(), Position(7));
    assert_eq!(s.copy_state("t"), Some(CopyState::Done { ready_at: Position(5) }));
    let (mut df, v) = dataflow();
    df.set_applied(Position(7));
    assert_eq!(rows_with_k(&s, &mut df, v, 10).unwrap(), vec![row(2, 10), row(3, 10)]);
    assert_eq!(rows_with_k(&s, &mut df, v, 11).unwrap(), vec![row(1, 11)]);
    // A changed schema drops that table's rows and progress: it is copied again.
    assert!(!s.register(&schema("t", true)).unwrap());
    assert_eq!(s.copy_state("t"), Some(CopyState::NotStarted));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_copy_keeps_what_the_stream_wrote_and_fills_wait_for_it() {
    let d = dir("copy");
    let s = ReplicaStore::open(&d).unwrap();
    s.register(&schema("t", false)).unwrap();
    s.set_position(Position(8)).unwrap();
    // The copy's snapshot is at 10; before its first batch lands, the stream applies 11:
    // row 1 moves to k = 20 (its insert image), row 2 is deleted.
    let mut b = Batch::new(Position(11));
    b.insert("t", row(1, 20));
    b.delete("t", row(2, 10));
    s.apply(&b).unwrap();
    let (mut df, v) = dataflow();
    df.set_applied(Position(11));
    assert!(matches!(rows_with_k(&s, &mut df, v, 10), Err(FillError::Unavailable(_))), "not copied yet");
    // The batch read at 10 has the older images of rows 1 and 2: they must not win.
    let st =
        s.write_copy_batch(&schema("t", false), s.copy_progress("t").unwrap().1, Position(10), &[row(1, 10), row(2, 10)], false).unwrap();
    assert!(matches!(st, CopyState::Copying { since: Position(10), .. }));
    // A resumed copy reads the rest at 13, ahead of the stream.
    s.write_copy_batch(&schema("t", false), s.copy_progress("t").unwrap().1, Position(13), &[row(3, 10)], true).unwrap();
    assert_eq!(s.copy_state("t"), Some(CopyState::Done { ready_at: Position(13) }));
    assert!(!s.is_ready("t").unwrap(), "the stream has not reached the copy's newest snapshot");
    assert!(matches!(rows_with_k(&s, &mut df, v, 10), Err(FillError::Unavailable(_))));
    for p in 12..=13 {
        s.apply(&Batch::new(Position(p))).unwrap();
        df.apply(&Batch::new(Position(p))).unwrap();
    }
    assert!(s.is_ready("t").unwrap());
    assert_eq!(rows_with_k(&s, &mut df, v, 10).unwrap(), vec![row(3, 10)]);
    assert_eq!(rows_with_k(&s, &mut df, v, 20).unwrap(), vec![row(1, 20)]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_table_without_primary_key_is_refused() {
    let d = dir("nopk");
    let s = ReplicaStore::open(&d).unwrap();
    let t = TableSchema::new("n", vec![ColumnSchema::new("a", SqlType::Int { bytes: 4, unsigned: false })], vec![]);
    assert!(matches!(s.register(&t), Err(ReplicaError::NoPrimaryKey(_))));
    let _ = std::fs::remove_dir_all(&d);
}

/// An index built over several chunks (more rows than one chunk) answers exactly the rows of
/// its key, including rows written after the build.
#[test]
fn an_index_built_in_chunks_finds_every_row() {
    let d = dir("chunks");
    let s = ReplicaStore::open(&d).unwrap();
    s.register(&schema("t", false)).unwrap();
    let rows: Vec<Row> = (1..=25_000).map(|i| row(i, i % 7)).collect();
    s.write_copy_batch(&schema("t", false), s.copy_progress("t").unwrap().1, Position(1), &rows, true).unwrap();
    s.apply(&Batch::new(Position(1))).unwrap();
    let (mut df, v) = dataflow();
    df.set_applied(Position(1));
    let got = rows_with_k(&s, &mut df, v, 3).unwrap();
    let want: Vec<Row> = (1..=25_000).filter(|i| i % 7 == 3).map(|i| row(i, 3)).collect();
    assert_eq!(got.len(), want.len());
    let mut want = want;
    want.sort();
    assert_eq!(got, want);
    // Maintained after the build: a row moves into key 3.
    let mut b = Batch::new(Position(2));
    b.update("t", row(1, 1), row(1, 3));
    s.apply(&b).unwrap();
    df.apply(&b).unwrap();
    let key: Key = vec![Value::Int(3)].into();
    df.evict(v, &key);
    assert_eq!(rows_with_k(&s, &mut df, v, 3).unwrap().len(), want.len() + 1);
    let _ = std::fs::remove_dir_all(&d);
}

/// A fill of a whole table (a GROUP BY without a key: an "index" of no columns) survives a
/// reopen: the store registers the table again with its rows and copy kept (an audit: every
/// restart after such a fill read the index's empty column list as a corrupt name, dropped the
/// table's rows and copied it again).
#[test]
fn a_whole_table_fill_survives_a_reopen() {
    let d = dir("whole-table");
    {
        let s = ReplicaStore::open(&d).unwrap();
        s.register(&schema("t", false)).unwrap();
        s.write_copy_batch(&schema("t", false), s.copy_progress("t").unwrap().1, Position(1), &[row(1, 10), row(2, 10), row(3, 11)], true)
            .unwrap();
        s.apply(&Batch::new(Position(1))).unwrap();
        let mut c = Catalog::new();
        c.add(schema("t", false)).unwrap();
        let mut df = Dataflow::new(c, ByteSize(1 << 30));
        let v = df.install_sql("SELECT k, COUNT(*) FROM t GROUP BY k").unwrap();
        df.set_applied(Position(1));
        let r = df.reader(v).unwrap();
        let _ = r.lookup(&[]).unwrap();
        let req = df.fill_requests().pop().expect("a miss makes a request");
        df.complete_fill((&s).fill(&req).unwrap());
        assert!(matches!(r.lookup(&[]).unwrap(), Lookup::Hit(rows) if rows.len() == 2));
    }
    let s = ReplicaStore::open(&d).unwrap();
    assert!(s.register(&schema("t", false)).unwrap(), "registered again under the same schema, rows kept");
    assert!(s.is_ready("t").unwrap(), "not copied again");
    let _ = std::fs::remove_dir_all(&d);
}

/// A reset (a stream gap, TRUNCATE) killed at any instant leaves a table that is copied again,
/// never one marked copied whose rows are gone: every crash point of the reset is tried (the
/// store's crash hook refuses every durable step after the first `n`), the store reopened, and
/// the table copied again if it must be, with a row deleted upstream meanwhile; the fill must
/// then return exactly the server's rows.
#[test]
fn a_reset_killed_at_any_instant_leaves_a_table_that_is_copied_again() {
    for n in 0.. {
        let d = dir(&format!("reset-kill-{n}"));
        let s = ReplicaStore::open(&d).unwrap();
        s.register(&schema("t", false)).unwrap();
        s.write_copy_batch(&schema("t", false), s.copy_progress("t").unwrap().1, Position(5), &[row(1, 10), row(2, 10)], true).unwrap();
        s.apply(&Batch::new(Position(5))).unwrap();
        s.crash_after_steps(n);
        let finished = match s.reset(&schema("t", false)) {
            Ok(()) => true,
            Err(ReplicaError::SimulatedCrash) => false,
            Err(e) => panic!("{e}"),
        };
        drop(s);
        let s = ReplicaStore::open(&d).unwrap();
        s.register(&schema("t", false)).unwrap();
        let (mut df, v) = dataflow();
        df.set_applied(Position(5));
        match s.copy_state("t") {
            // Not reset at all: the rows are the ones copied.
            Some(CopyState::Done { .. }) => {
                assert!(!finished, "a finished reset left the table copied");
                assert_eq!(rows_with_k(&s, &mut df, v, 10).unwrap(), vec![row(1, 10), row(2, 10)], "crash after {n} steps");
            }
            // Copied again (row 2 was deleted upstream meanwhile): nothing of the old rows may remain.
            state => {
                assert_eq!(state, Some(CopyState::NotStarted), "crash after {n} steps");
                s.write_copy_batch(&schema("t", false), s.copy_progress("t").unwrap().1, Position(5), &[row(1, 10)], true).unwrap();
                assert_eq!(rows_with_k(&s, &mut df, v, 10).unwrap(), vec![row(1, 10)], "crash after {n} steps");
            }
        }
        drop(s);
        let _ = std::fs::remove_dir_all(&d);
        if finished {
            break;
        }
    }
}

/// A reset (a stream gap) while a table is being copied: the copy's next batch was read in its
/// snapshot from before the reset, so it lacks the changes the gap skipped, and the keys it
/// copied before the reset are gone. It must be refused (the copy starts the table over in a
/// new snapshot), not stored as progress that the copy would go on from.
#[test]
fn a_copy_batch_read_before_a_reset_is_refused() {
    let d = dir("reset-mid-copy");
    let s = ReplicaStore::open(&d).unwrap();
    s.register(&schema("t", false)).unwrap();
    s.set_position(Position(8)).unwrap();
    let (_, generation) = s.copy_progress("t").unwrap();
    s.write_copy_batch(&schema("t", false), generation, Position(10), &[row(1, 10), row(2, 10)], false).unwrap();
    s.reset(&schema("t", false)).unwrap();
    let late = s.write_copy_batch(&schema("t", false), generation, Position(10), &[row(3, 10)], true);
    assert!(matches!(late, Err(ReplicaError::Reset(_))), "a batch read before the reset was written: {late:?}");
    assert_eq!(s.copy_state("t"), Some(CopyState::NotStarted));
    let _ = std::fs::remove_dir_all(&d);
}

/// DDL or a reset that lands between two chunks of an index build: the build stops and never
/// marks the index built (its entries were written for rows the table no longer has), and the
/// next fill after the table is copied again builds it anew and finds exactly the new rows.
/// The store's hook parks the build between its first and second chunk while the test changes
/// the table.
#[test]
fn ddl_or_a_reset_between_two_chunks_of_an_index_build_stops_it() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};

    for ddl in [false, true] {
        let d = dir(&format!("chunk-ddl-{ddl}"));
        let s = Arc::new(ReplicaStore::open(&d).unwrap());
        s.register(&schema("t", false)).unwrap();
        let rows: Vec<Row> = (1..=25_000).map(|i| row(i, i % 7)).collect();
        s.write_copy_batch(&schema("t", false), s.copy_progress("t").unwrap().1, Position(1), &rows, true).unwrap();
        s.apply(&Batch::new(Position(1))).unwrap();

        let (parked, on_park) = mpsc::channel();
        let (go, on_go) = mpsc::channel::<()>();
        let on_go = std::sync::Mutex::new(on_go);
        let once = AtomicBool::new(false);
        s.between_index_chunks(move || {
            if !once.swap(true, Ordering::SeqCst) {
                parked.send(()).unwrap();
                on_go.lock().unwrap().recv().unwrap();
            }
        });
        let (mut df, v) = dataflow();
        df.set_applied(Position(1));
        let builder = {
            let s = s.clone();
            std::thread::spawn(move || rows_with_k(&s, &mut df, v, 3).map_err(|e| e.to_string()).map(|_| df))
        };
        on_park.recv().expect("the build reaches its second chunk");
        if ddl {
            // A column added: the stored rows are dropped, the table must be copied again.
            assert!(!s.register(&schema("t", true)).unwrap());
        } else {
            s.reset(&schema("t", false)).unwrap();
        }
        go.send(()).unwrap();
        let stopped = builder.join().unwrap();
        let why = stopped.err().expect("a build the table changed under is not finished");
        assert!(why.contains("changed while its index was built"), "{why}");

        // Copied again with other rows: the index is built anew from them alone.
        let shape = schema("t", ddl);
        let fresh: Vec<Row> = (1..=30)
            .map(|i| {
                let mut r = vec![Value::Int(100_000 + i), Value::Int(3)];
                if ddl {
                    r.push(Value::Int(0));
                }
                r.into()
            })
            .collect();
        s.write_copy_batch(&shape, s.copy_progress("t").unwrap().1, Position(2), &fresh, true).unwrap();
        s.apply(&Batch::new(Position(2))).unwrap();
        let mut c = Catalog::new();
        c.add(shape).unwrap();
        let mut df = Dataflow::new(c, ByteSize(1 << 30));
        let v = df.install_sql("SELECT id, k FROM t WHERE k = ?").unwrap();
        df.set_applied(Position(2));
        let got = rows_with_k(&s, &mut df, v, 3).unwrap();
        let want: Vec<Row> = (1..=30).map(|i| row(100_000 + i, 3)).collect();
        assert_eq!(got, want, "after {}", if ddl { "DDL" } else { "a reset" });
        drop(s);
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// On a server whose table names are case-sensitive (`lower_case_table_names = 0`), `t` and
/// `T` are two tables: each keeps its own rows, and a row event of one never lands in the
/// other.
#[test]
fn tables_whose_names_differ_in_case_are_two_tables_where_the_server_says_so() {
    let d = dir("case");
    let s = ReplicaStore::open(&d).unwrap().case_sensitive(true);
    for t in ["t", "T"] {
        assert!(!s.register(&schema(t, false)).unwrap());
        s.write_copy_batch(&schema(t, false), s.copy_progress(t).unwrap().1, Position(5), &[row(1, 10)], true).unwrap();
    }
    let mut b = Batch::new(Position(7));
    b.insert("T", row(2, 10));
    b.update("T", row(1, 10), row(1, 11));
    s.apply(&b).unwrap();
    let (mut df, v) = {
        let mut c = Catalog::with_names(Names { case_sensitive: true, database: None });
        c.add(schema("t", false)).unwrap();
        c.add(schema("T", false)).unwrap();
        let mut df = Dataflow::new(c, ByteSize(1 << 30));
        let v = df.install_sql("SELECT id, k FROM t WHERE k = ?").unwrap();
        (df, v)
    };
    df.set_applied(Position(7));
    assert_eq!(rows_with_k(&s, &mut df, v, 10).unwrap(), vec![row(1, 10)], "the rows of `t` alone");
    assert_eq!(rows_with_k(&s, &mut df, v, 11).unwrap(), vec![]);
    let _ = std::fs::remove_dir_all(&d);
}

/// A table whose name holds `/` (`ts/x`) and the table its prefix names (`ts`) are two tables:
/// the store deleted a table's marks, index markers and index column families by the prefix
/// `x/<table>/`, `idx/<table>/` and `i/<table>/`, so resetting `ts` (a TRUNCATE) dropped the
/// marks of `ts/x` (and a copy batch then overwrote the stream's newer image with an older
/// one, for good) and its index (the next write to `ts/x` failed on the missing column family).
#[test]
fn a_table_named_by_anothers_prefix_and_a_slash_is_another_table() {
    let d = dir("slash");
    let s = ReplicaStore::open(&d).unwrap();
    let (ts, tsx) = (schema("ts", false), schema("ts/x", false));
    for t in [&ts, &tsx] {
        assert!(!s.register(t).unwrap());
    }
    s.write_copy_batch(&ts, s.copy_progress("ts").unwrap().1, Position(5), &[row(1, 10)], true).unwrap();
    s.set_position(Position(5)).unwrap();
    // `ts/x` is being copied (snapshot at 6) when the stream moves its row 1 to k = 20 at 7.
    let mut b = Batch::new(Position(7));
    b.insert("ts/x", row(1, 20));
    s.apply(&b).unwrap();
    // TRUNCATE ts.
    s.reset(&ts).unwrap();
    // The batch read at 6 holds the older image of row 1: it must not win.
    s.write_copy_batch(&tsx, s.copy_progress("ts/x").unwrap().1, Position(6), &[row(1, 10), row(2, 10)], true).unwrap();
    let (mut df, v) = {
        let mut c = Catalog::new();
        c.add(tsx.clone()).unwrap();
        let mut df = Dataflow::new(c, ByteSize(1 << 30));
        let v = df.install_sql("SELECT id, k FROM `ts/x` WHERE k = ?").unwrap();
        (df, v)
    };
    df.set_applied(Position(7));
    assert_eq!(rows_with_k(&s, &mut df, v, 20).unwrap(), vec![row(1, 20)], "the stream's image of row 1");
    assert_eq!(rows_with_k(&s, &mut df, v, 10).unwrap(), vec![row(2, 10)]);
    // The index on k of `ts/x` is built; another TRUNCATE ts, then writes to `ts/x`.
    s.reset(&ts).unwrap();
    let mut b = Batch::new(Position(8));
    b.insert("ts/x", row(3, 20));
    s.apply(&b).expect("a write to ts/x after a reset of ts");
    df.apply(&b).unwrap();
    let key: Key = vec![Value::Int(20)].into();
    df.evict(v, &key);
    assert_eq!(rows_with_k(&s, &mut df, v, 20).unwrap(), vec![row(1, 20), row(3, 20)]);
    drop(s);
    // Reopened, both are registered again with their rows and index kept.
    let s = ReplicaStore::open(&d).unwrap();
    assert!(s.register(&ts).unwrap() && s.register(&tsx).unwrap());
    df.evict(v, &key);
    assert_eq!(rows_with_k(&s, &mut df, v, 20).unwrap(), vec![row(1, 20), row(3, 20)]);
    let _ = std::fs::remove_dir_all(&d);
}

/// The newest RocksDB log of `d`, cut to nothing: what a power loss leaves of writes that were
/// never synced (a process kill leaves them to the operating system).
fn lose_unsynced_tail(d: &std::path::Path) {
    let newest = std::fs::read_dir(d)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max()
        .expect("a log");
    std::fs::OpenOptions::new().write(true).open(newest).unwrap().set_len(0).unwrap();
}

/// A table no longer replicated has its rows dropped (`forget_unregistered`): the write that
/// forgets it must be durable before its column family is dropped (durable at once). Lost to
/// a power loss after the drop, it left the table marked copied with an empty column family,
/// answered empty from then on.
#[test]
fn a_table_forgotten_before_a_power_loss_is_copied_again_not_answered_empty() {
    let d = dir("forget-power-loss");
    let (t1, tc) = (schema("t1", false), schema("t", false));
    {
        let s = ReplicaStore::open(&d).unwrap();
        for t in [&t1, &tc] {
            s.register(t).unwrap();
            s.write_copy_batch(t, s.copy_progress(&t.name).unwrap().1, Position(5), &[row(1, 10), row(4, 10)], true).unwrap();
        }
        s.apply(&Batch::new(Position(5))).unwrap();
    }
    {
        // A run without `t`.
        let s = ReplicaStore::open(&d).unwrap();
        assert!(s.register(&t1).unwrap());
        assert_eq!(s.forget_unregistered().unwrap(), vec!["t".to_string()]);
    }
    lose_unsynced_tail(&d);
    let s = ReplicaStore::open(&d).unwrap();
    s.register(&t1).unwrap();
    s.register(&tc).unwrap();
    let (mut df, v) = dataflow();
    df.set_applied(Position(5));
    match rows_with_k(&s, &mut df, v, 10) {
        Ok(rows) => assert_eq!(rows, vec![row(1, 10), row(4, 10)], "answered from a table whose rows were dropped"),
        Err(_) => assert_eq!(s.copy_state("t"), Some(CopyState::NotStarted)),
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// An index build's chunk is bounded by bytes as well as rows: 40 rows of 1 MiB were indexed in
/// one chunk (10,000 rows at most: a 10 GB WriteBatch for rows of 1 MiB); it now writes at most
/// the store's batch bytes (8 MiB by default) per chunk, and finds every row.
#[test]
fn an_index_build_of_wide_rows_is_chunked_by_bytes() {
    let d = dir("wide-index");
    let s = ReplicaStore::open(&d).unwrap();
    let wide = TableSchema::new(
        "t",
        vec![
            ColumnSchema::new("id", SqlType::Int { bytes: 4, unsigned: false }),
            ColumnSchema::new("k", SqlType::Int { bytes: 4, unsigned: false }),
            ColumnSchema::new("b", SqlType::Bytes),
        ],
        vec![0],
    );
    s.register(&wide).unwrap();
    let rows: Vec<Row> = (0..40).map(|i| vec![Value::Int(i), Value::Int(i % 2), Value::Bytes(vec![b'x'; 1 << 20].into())].into()).collect();
    for chunk in rows.chunks(4) {
        s.write_copy_batch(&wide, s.copy_progress("t").unwrap().1, Position(1), chunk, false).unwrap();
    }
    s.write_copy_batch(&wide, s.copy_progress("t").unwrap().1, Position(1), &[], true).unwrap();
    s.apply(&Batch::new(Position(1))).unwrap();
    let chunks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let counted = chunks.clone();
    s.between_index_chunks(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let mut c = Catalog::new();
    c.add(wide.clone()).unwrap();
    let mut df = Dataflow::new(c, ByteSize(1 << 30));
    let v = df.install_sql("SELECT id FROM t WHERE k = ?").unwrap();
    df.set_applied(Position(1));
    let _ = df.reader(v).unwrap().lookup(&[Value::Int(1)]).unwrap();
    let req = df.fill_requests().pop().expect("a miss makes a request");
    df.complete_fill((&s).fill(&req).unwrap());
    let Lookup::Hit(got) = df.reader(v).unwrap().lookup(&[Value::Int(1)]).unwrap() else { panic!("filled key missed") };
    assert_eq!(got.len(), 20);
    let chunks = chunks.load(std::sync::atomic::Ordering::Relaxed);
    assert!(chunks >= 5, "40 MiB of rows indexed in {chunks} chunks");
    let _ = std::fs::remove_dir_all(&d);
}
