//! DDL applied to the stored rows in place (`ReplicaStore::alter` and the rewrite): dropped and
//! added columns, rows the stream wrote meanwhile kept, old secondary indexes not used, the
//! table not answered from until the rewrite is done and caught up (with a copy that read
//! ahead of the stream, until the stream reaches the copy); a changed primary key or a
//! table still being copied is copied again instead.

use std::path::PathBuf;

use freshet_dataflow::*;
use freshet_replica::store::Altered;
use freshet_replica::{CopyState, ReplicaError, ReplicaStore};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("freshet-replica-reshape-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn int(n: &str) -> ColumnSchema {
    ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false })
}

fn ints(v: &[i64]) -> Row {
    v.iter().map(|&i| Value::Int(i)).collect::<Vec<_>>().into()
}

fn with_note(id: i64, note: &str, k: i64) -> Row {
    vec![Value::Int(id), Value::text(note, Collation::Utf8mb4GeneralCi), Value::Int(k)].into()
}

/// The rows with `k = key` through a fill of a view `SELECT * ... WHERE k = ?` on `schema`.
fn rows_with_k(store: &ReplicaStore, schema: &TableSchema, applied: Position, key: i64) -> Result<Vec<Row>, FillError> {
    let mut c = Catalog::new();
    c.add(schema.clone()).unwrap();
    let mut df = Dataflow::new(c, ByteSize(1 << 30));
    df.set_applied(applied);
    let cols: Vec<&str> = schema.columns.iter().map(|c| c.name.as_str()).collect();
    let v = df.install_sql(&format!("SELECT {} FROM t WHERE k = ?", cols.join(", "))).unwrap();
    let r = df.reader(v).unwrap();
    let _ = r.lookup(&[Value::Int(key)]).unwrap();
    let req = df.fill_requests().pop().expect("a miss makes a request");
    let resp = (&*store).fill(&req)?;
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

#[test]
fn drop_column_rewrites_the_stored_rows_and_keeps_the_streams_images() {
    let d = dir("drop");
    let s = ReplicaStore::open(&d).unwrap();
    let old = TableSchema::new("t", vec![int("id"), int("k"), int("z")], vec![0]);
    let new = TableSchema::new("t", vec![int("id"), int("k")], vec![0]);
    s.register(&old).unwrap();
    s.write_copy_batch(
        &old,
        s.copy_progress("t").unwrap().1,
        Position(5),
        &[ints(&[1, 10, 100]), ints(&[2, 10, 200]), ints(&[3, 11, 300])],
        true,
    )
    .unwrap();
    s.apply(&Batch::new(Position(5))).unwrap();
    assert_eq!(rows_with_k(&s, &old, Position(5), 10).unwrap(), vec![ints(&[1, 10, 100]), ints(&[2, 10, 200])]);

    assert_eq!(s.alter(&new, &[Some(0), Some(1)]).unwrap(), Altered::InPlace);
    assert!(!s.is_ready("t").unwrap(), "not answered from while rewriting");
    // After the DDL the stream writes new-shape images; the rewrite must leave them alone.
    let mut b = Batch::new(Position(6));
    b.update("t", ints(&[1, 10]), ints(&[1, 12]));
    b.insert("t", ints(&[4, 10]));
    s.apply(&b).unwrap();
    let mut rewritten = 0;
    loop {
        let (state, n) = s.reshape_local("t", 1).unwrap();
        rewritten += n;
        if let CopyState::Done { .. } = state {
            break;
        }
    }
    assert_eq!(rewritten, 2, "rows 2 and 3; 1 and 4 are the stream's");
    assert!(s.is_ready("t").unwrap());
    assert_eq!(rows_with_k(&s, &new, Position(6), 10).unwrap(), vec![ints(&[2, 10]), ints(&[4, 10])]);
    assert_eq!(rows_with_k(&s, &new, Position(6), 11).unwrap(), vec![ints(&[3, 11])]);
    assert_eq!(rows_with_k(&s, &new, Position(6), 12).unwrap(), vec![ints(&[1, 12])]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn add_column_takes_the_servers_values_and_waits_for_the_stream() {
    let d = dir("add");
    let s = ReplicaStore::open(&d).unwrap();
    let old = TableSchema::new("t", vec![int("id"), int("k")], vec![0]);
    let new = TableSchema::new("t", vec![int("id"), ColumnSchema::new("note", SqlType::Text), int("k")], vec![0]);
    s.register(&old).unwrap();
    s.write_copy_batch(&old, s.copy_progress("t").unwrap().1, Position(5), &[ints(&[1, 10]), ints(&[2, 10]), ints(&[3, 10])], true)
        .unwrap();
    s.apply(&Batch::new(Position(5))).unwrap();
    // Builds the index on k (column 1, which becomes `note`): it must not be read again.
    assert_eq!(rows_with_k(&s, &old, Position(5), 10).unwrap().len(), 3);

    assert_eq!(s.alter(&new, &[Some(0), None, Some(1)]).unwrap(), Altered::InPlace);
    let mut b = Batch::new(Position(6));
    b.insert("t", with_note(2, "stream", 10));
    s.apply(&b).unwrap();
    // Read at 8: row 9 is not stored yet (inserted after 6: the stream will write it).
    let fetched: Vec<Row> = [(1, "a"), (2, "b"), (3, "c"), (9, "z")]
        .iter()
        .map(|(id, n)| vec![Value::Int(*id), Value::text(n, Collation::Utf8mb4GeneralCi)].into())
        .collect();
    let (state, n) = s.reshape_batch(&new, Position(8), &fetched, true).unwrap();
    assert_eq!((state, n), (CopyState::Done { ready_at: Position(8) }, 2));
    assert!(!s.is_ready("t").unwrap(), "the stream has not reached the snapshot the columns were read at");
    let mut b = Batch::new(Position(7));
    b.insert("t", with_note(9, "z", 10));
    s.apply(&b).unwrap();
    s.apply(&Batch::new(Position(8))).unwrap();
    assert!(s.is_ready("t").unwrap());
    let want = vec![with_note(1, "a", 10), with_note(2, "stream", 10), with_note(3, "c", 10), with_note(9, "z", 10)];
    assert_eq!(rows_with_k(&s, &new, Position(8), 10).unwrap(), want);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_new_primary_key_or_a_table_still_copying_is_copied_again() {
    let d = dir("recopy");
    let s = ReplicaStore::open(&d).unwrap();
    let old = TableSchema::new("t", vec![int("id"), int("k")], vec![0]);
    s.register(&old).unwrap();
    s.write_copy_batch(&old, s.copy_progress("t").unwrap().1, Position(5), &[ints(&[1, 10])], true).unwrap();
    let rekeyed = TableSchema::new("t", vec![int("id"), int("k")], vec![1]);
    assert_eq!(s.alter(&rekeyed, &[Some(0), Some(1)]).unwrap(), Altered::Recopy);
    assert_eq!(s.copy_state("t"), Some(CopyState::NotStarted));
    // A batch read with the old schema, written after the DDL registered the new one: refused.
    assert!(matches!(
        s.write_copy_batch(&old, s.copy_progress("t").unwrap().1, Position(6), &[ints(&[1, 10])], false),
        Err(ReplicaError::SchemaChanged(_))
    ));
    // Half copied: its rows are of the old shape and the copy's; copy it again.
    s.write_copy_batch(&rekeyed, s.copy_progress("t").unwrap().1, Position(6), &[ints(&[1, 10])], false).unwrap();
    let wider = TableSchema::new("t", vec![int("id"), int("k"), int("z")], vec![1]);
    assert_eq!(s.alter(&wider, &[Some(0), Some(1), None]).unwrap(), Altered::Recopy);
    assert_eq!(s.alter(&wider, &[Some(0), Some(1), None]).unwrap(), Altered::Unchanged);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn tables_no_longer_registered_are_dropped_at_start() {
    let d = dir("forget");
    {
        let s = ReplicaStore::open(&d).unwrap();
        for t in ["a", "b"] {
            s.register(&TableSchema::new(t, vec![int("id"), int("k")], vec![0])).unwrap();
            s.write_copy_batch(
                &TableSchema::new(t, vec![int("id"), int("k")], vec![0]),
                s.copy_progress(t).unwrap().1,
                Position(5),
                &[ints(&[1, 10])],
                true,
            )
            .unwrap();
        }
    }
    let s = ReplicaStore::open(&d).unwrap();
    assert!(s.register(&TableSchema::new("a", vec![int("id"), int("k")], vec![0])).unwrap());
    assert_eq!(s.forget_unregistered().unwrap(), vec!["b".to_string()]);
    // `b` was not kept current while unregistered: registering it again means copying it.
    assert!(!s.register(&TableSchema::new("b", vec![int("id"), int("k")], vec![0])).unwrap());
    assert_eq!(s.copy_state("b"), Some(CopyState::NotStarted));
    let _ = std::fs::remove_dir_all(&d);
}

/// A restart in the middle of a rewrite goes on with it (its plan and progress are stored with
/// every batch): rows the rewrite or the stream wrote before the restart are left alone, the
/// others are rewritten, and no row of the old shape remains.
#[test]
fn a_restart_during_a_rewrite_goes_on_with_it() {
    let d = dir("restart");
    let old = TableSchema::new("t", vec![int("id"), int("k"), int("z")], vec![0]);
    let new = TableSchema::new("t", vec![int("id"), int("k")], vec![0]);
    {
        let s = ReplicaStore::open(&d).unwrap();
        s.register(&old).unwrap();
        let rows: Vec<Row> = (1..=10).map(|i| ints(&[i, 10, 100 + i])).collect();
        s.write_copy_batch(&old, s.copy_progress("t").unwrap().1, Position(5), &rows, true).unwrap();
        s.apply(&Batch::new(Position(5))).unwrap();
        assert_eq!(s.alter(&new, &[Some(0), Some(1)]).unwrap(), Altered::InPlace);
        let (state, n) = s.reshape_local("t", 3).unwrap();
        assert!(matches!(state, CopyState::Reshaping { .. }) && n == 3);
        let mut b = Batch::new(Position(6));
        b.update("t", ints(&[7, 10]), ints(&[7, 11]));
        s.apply(&b).unwrap();
    }
    let s = ReplicaStore::open(&d).unwrap();
    assert!(s.register(&new).unwrap(), "same schema: the rows are kept");
    assert!(matches!(s.copy_state("t"), Some(CopyState::Reshaping { after: Some(_), .. })), "{:?}", s.copy_state("t"));
    assert!(!s.is_ready("t").unwrap());
    let mut rewritten = 0;
    loop {
        let (state, n) = s.reshape_local("t", 3).unwrap();
        rewritten += n;
        if let CopyState::Done { .. } = state {
            break;
        }
    }
    assert_eq!(rewritten, 6, "rows 4 to 10 but 7 (the stream's); 1 to 3 were rewritten before the restart");
    assert!(s.is_ready("t").unwrap());
    let want: Vec<Row> = (1..=10).filter(|&i| i != 7).map(|i| ints(&[i, 10])).collect();
    assert_eq!(rows_with_k(&s, &new, Position(6), 10).unwrap(), want);
    assert_eq!(rows_with_k(&s, &new, Position(6), 11).unwrap(), vec![ints(&[7, 11])]);
    // Restarted with yet another schema: copied again.
    drop(s);
    let s = ReplicaStore::open(&d).unwrap();
    assert!(!s.register(&old).unwrap());
    let _ = std::fs::remove_dir_all(&d);
}

/// A column reorder on a table whose copy finished ahead of the stream (ready at 20, the stream
/// at 12 when it applies the DDL): the stored rows already hold a write the stream applies only
/// at 15, so the rewrite must not make the table ready before the stream reaches 20 either.
#[test]
fn a_rewrite_keeps_a_copy_read_ahead_of_the_stream_unready_until_the_stream_reaches_it() {
    let d = dir("ahead");
    let s = ReplicaStore::open(&d).unwrap();
    let old = TableSchema::new("t", vec![int("id"), int("k"), int("z")], vec![0]);
    let new = TableSchema::new("t", vec![int("id"), int("z"), int("k")], vec![0]);
    s.register(&old).unwrap();
    s.set_position(Position(10)).unwrap();
    // Read at 20: row 1's z is the 101 written at 15, after the DDL at 12.
    s.write_copy_batch(&old, s.copy_progress("t").unwrap().1, Position(20), &[ints(&[1, 10, 101])], true).unwrap();
    s.apply(&Batch::new(Position(12))).unwrap();
    assert_eq!(s.alter(&new, &[Some(0), Some(2), Some(1)]).unwrap(), Altered::InPlace);
    while matches!(s.reshape_local("t", 10).unwrap().0, CopyState::Reshaping { .. }) {}
    assert!(!s.is_ready("t").unwrap(), "ready at 12 with rows holding the write at 15: {:?}", s.copy_state("t"));
    assert!(matches!(rows_with_k(&s, &new, Position(12), 10), Err(FillError::Unavailable(_))));
    for p in 13..=20 {
        s.apply(&Batch::new(Position(p))).unwrap();
    }
    assert_eq!(rows_with_k(&s, &new, Position(20), 10).unwrap(), vec![ints(&[1, 101, 10])]);
    let _ = std::fs::remove_dir_all(&d);
}
