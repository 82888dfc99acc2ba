//! Input depth never overflows the stack: `compile` refuses a query whose expressions nest
//! deeper than it can lower, before building any tree, and `lookup_in` is linear in its keys.
//! Run on threads with tokio's default worker stack (2 MiB), where the proxy calls them.

use freshet_dataflow::*;

fn catalog() -> Catalog {
    let i = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false });
    let mut c = Catalog::new();
    c.add(TableSchema::new("a", vec![i("id").not_null(), i("k"), ColumnSchema::new("s", SqlType::Text)], vec![0])).unwrap();
    c
}

/// Runs `f` on a thread with a tokio worker's stack.
fn on_worker_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(2 << 20).spawn(f).unwrap().join().expect("no stack overflow")
}

#[test]
fn long_operator_chains_are_refused_not_overflowed() {
    for (head, term, n) in [
        ("SELECT id FROM a WHERE id = ?", " AND id = 1", 10_000),
        ("SELECT id FROM a WHERE id = ? AND k = 1", " + 1", 10_000),
        ("SELECT id FROM a WHERE id = ? AND k = 1", " OR k = 1", 100_000),
        ("SELECT id FROM a WHERE id = ? AND s = 'x'", " || 'y'", 10_000),
        ("SELECT id FROM a WHERE id = ? AND k = ", "- ", 10_000),
        ("SELECT id FROM a WHERE id = ? AND ", "NOT ", 10_000),
    ] {
        let sql = format!("{head}{}{}", term.repeat(n), if term.ends_with(' ') { "1" } else { "" });
        let refused = on_worker_stack(move || compile(&sql, &catalog()).map(|_| ()));
        let reason = refused.expect_err("refused").reason;
        assert!(reason.contains("nest"), "{head}{term}...: {reason}");
    }
}

#[test]
fn deep_parentheses_are_refused() {
    for depth in [250, 100_000] {
        let sql = format!("SELECT id FROM a WHERE id = ? AND k = {}1{}", "(".repeat(depth), ")".repeat(depth));
        assert!(on_worker_stack(move || compile(&sql, &catalog()).is_err()));
    }
}

#[test]
fn ordinary_queries_stay_well_under_the_bound() {
    let sql = format!("SELECT id FROM a WHERE id = ? AND k = 1{}", " AND k = 1".repeat(50));
    on_worker_stack(move || compile(&sql, &catalog()).map(|_| ())).expect("fifty terms compile");
    let list = vec!["?"; 5_000].join(", ");
    let sql = format!("SELECT id, k FROM a WHERE id IN ({list})");
    on_worker_stack(move || compile(&sql, &catalog()).map(|_| ())).expect("a long IN list compiles");
}

#[test]
fn a_chain_just_under_the_bound_compiles_fills_and_reads_on_a_worker_stack() {
    on_worker_stack(|| {
        // 199 operators: `=`, AND, `=` and 196 `+`.
        let sql = format!("SELECT id, k FROM a WHERE id = ? AND k = 0{}", " + 0".repeat(196));
        let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
        let v = df.install_sql(&sql).expect("under the bound");
        let mut store = MemStore::new();
        let mut b = Batch::new(Position(1));
        b.insert("a", vec![Value::Int(1), Value::Int(0), Value::text("x", Collation::Utf8mb4Bin)].into_boxed_slice());
        store.apply(&b);
        df.apply(&b).unwrap();
        let r = df.reader(v).unwrap();
        let _ = r.lookup(&[Value::Int(1)]).unwrap();
        df.run_fills(&mut MemUpstream { store: &store }).unwrap();
        match r.lookup(&[Value::Int(1)]).unwrap() {
            Lookup::Hit(rows) => assert_eq!(rows.len(), 1),
            Lookup::Miss(_) => panic!("filled"),
        }
    });
}

#[test]
fn lookup_in_is_linear_in_its_keys() {
    on_worker_stack(|| {
        let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
        let v = df.install_sql("SELECT id, k FROM a WHERE id = ?").unwrap();
        let r = df.reader(v).unwrap();
        // 300,000 distinct keys (the quadratic duplicate check took minutes here), and as many
        // duplicates: more than may wait for fills, so refused, once the keys are known.
        let n = 300_000;
        let params: Vec<Value> = (0..n).chain(0..n).map(Value::Int).collect();
        let slots = vec![(0..params.len()).collect::<Vec<_>>()];
        assert_eq!(r.lookup_in(&slots, &params).err(), Some(LookupError::Backlog));
        // Fewer than may wait: a miss of each distinct key once.
        let n = 2_000;
        let params: Vec<Value> = (0..n).chain(0..n).map(Value::Int).collect();
        let slots = vec![(0..params.len()).collect::<Vec<_>>()];
        match r.lookup_in(&slots, &params) {
            Ok(Lookup::Miss(keys)) => assert_eq!(keys.len(), n as usize),
            other => panic!("expected a miss of every key, got {:?}", other.map(|_| ())),
        }
    });
}

#[test]
fn lookup_in_refuses_a_cartesian_product_past_the_bound() {
    let mut c = Catalog::new();
    let i = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false });
    c.add(TableSchema::new("p", vec![i("x").not_null(), i("y").not_null(), i("z")], vec![0, 1])).unwrap();
    let mut df = Dataflow::new(c, ByteSize(1 << 30));
    let v = df.install_sql("SELECT z FROM p WHERE x = ? AND y = ?").unwrap();
    let r = df.reader(v).unwrap();
    let n = 2_000i64;
    let params: Vec<Value> = (0..2 * n).map(Value::Int).collect();
    let slots = vec![(0..n as usize).collect::<Vec<_>>(), (n as usize..2 * n as usize).collect::<Vec<_>>()];
    // Four million keys: refused before they are built.
    assert!(matches!(r.lookup_in(&slots, &params), Err(LookupError::TooManyKeys { .. })));
}
