//! Criterion benchmarks of the dataflow crate: hit lookup latency, delta throughput for a
//! join + COUNT view, fill cost from both in-memory sources, and bytes per cached row.
//!
//! Run: `cargo bench -p freshet-bench --bench dataflow`. The in-memory sources scan their
//! tables linearly, so the fill benchmarks time only `complete_fill` (installing a response),
//! not producing it. `hit_lookup` is a step of the hit path: `scripts/budgets` counts its
//! instructions (in that iteration mode the other benchmarks return at once).

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use freshet_dataflow::*;
use freshet_testkit::bench::{iterations, step};

const STORIES: i64 = 10_000;
const VOTES_PER_STORY: i64 = 20;

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn catalog() -> Catalog {
    let i = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 8, unsigned: false }).not_null();
    let mut c = Catalog::new();
    c.add(TableSchema::new(
        "stories",
        vec![i("id"), i("author"), ColumnSchema::new("title", SqlType::Text).with_collation(Some(Collation::Utf8mb4GeneralCi))],
        vec![0],
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    c.add(TableSchema::new("votes", vec![i("user_id"), i("story_id")], vec![0, 1])).unwrap_or_else(|e| panic!("{e}"));
    c
}

fn story(id: i64) -> Row {
    vec![int(id), int(id % 97), Value::text(&format!("story number {id}"), Collation::Utf8mb4GeneralCi)].into()
}

/// A store with STORIES stories and VOTES_PER_STORY votes each, as one batch.
fn data() -> (Batch, MemStore) {
    let mut b = Batch::new(Position(1));
    for s in 0..STORIES {
        b.insert("stories", story(s));
        for u in 0..VOTES_PER_STORY {
            b.insert("votes", vec![int(u), int(s)].into());
        }
    }
    let mut store = MemStore::new();
    store.apply(&b);
    (b, store)
}

/// Installs `sql` and fills the given keys through `source`.
fn filled(sql: &str, keys: impl Iterator<Item = i64>, store: &MemStore, replica: bool) -> (Dataflow, ViewId) {
    let mut df = Dataflow::new(catalog(), ByteSize(4 << 30));
    df.set_applied(store.position());
    df.set_max_fill_keys(1024);
    let v = df.install_sql(sql).unwrap_or_else(|e| panic!("{e}"));
    let keys: Vec<Key> = keys.map(|k| vec![int(k)].into()).collect();
    for req in df.request_fill(v, keys) {
        let resp = if replica { MemReplica { store }.fill(&req) } else { MemUpstream { store }.fill(&req) };
        df.complete_fill(resp.unwrap_or_else(|e| panic!("{e}")));
    }
    (df, v)
}

const JOIN_COUNT: &str = "SELECT s.id, s.title, COUNT(v.user_id) AS votes FROM stories s LEFT JOIN votes v ON v.story_id = s.id WHERE s.id = ? GROUP BY s.id, s.title";
const BY_ID: &str = "SELECT id, author, title FROM stories WHERE id = ?";
const COUNT: &str = "SELECT story_id, COUNT(*) FROM votes WHERE story_id = ? GROUP BY story_id";

fn hit_lookup(c: &mut Criterion) {
    let (_, store) = data();
    for (name, sql) in [("by_primary_key", BY_ID), ("join_count", JOIN_COUNT)] {
        let (df, v) = filled(sql, 0..1000, &store, false);
        let r = df.reader(v).unwrap_or_else(|| unreachable!());
        let mut k = 0i64;
        step(c, &format!("hit_lookup/{name}"), || {
            k = (k + 7) % 1000;
            match r.lookup(&[int(k)]) {
                Ok(Lookup::Hit(rows)) => rows,
                other => panic!("{other:?}"),
            }
        });
    }
}

fn delta_throughput(c: &mut Criterion) {
    if iterations().is_some() {
        return; // not a step of a hit (iteration mode: testkit's bench module)
    }
    let (_, store) = data();
    let mut g = c.benchmark_group("delta_throughput");
    const PER_BATCH: i64 = 100;
    g.throughput(Throughput::Elements(PER_BATCH as u64));
    let (mut df, _) = filled(JOIN_COUNT, 0..1000, &store, false);
    let mut pos = store.position().0;
    let mut user = 1_000_000i64;
    g.bench_function("join_count_votes_into_filled", |b| {
        b.iter(|| {
            pos += 1;
            let mut batch = Batch::new(Position(pos));
            for i in 0..PER_BATCH {
                user += 1;
                batch.insert("votes", vec![int(user), int((user * 31 + i) % 1000)].into());
            }
            df.apply(&batch).unwrap_or_else(|e| panic!("{e}"));
        })
    });
    g.bench_function("join_count_votes_into_holes", |b| {
        b.iter(|| {
            pos += 1;
            let mut batch = Batch::new(Position(pos));
            for i in 0..PER_BATCH {
                user += 1;
                batch.insert("votes", vec![int(user), int(1000 + (user * 31 + i) % 9000)].into());
            }
            df.apply(&batch).unwrap_or_else(|e| panic!("{e}"));
        })
    });
    g.finish();
}

fn fill_cost(c: &mut Criterion) {
    if iterations().is_some() {
        return; // not a step of a hit (iteration mode: testkit's bench module)
    }
    let (_, store) = data();
    let mut g = c.benchmark_group("fill_one_partition");
    for (name, sql, replica) in [
        ("count_upstream_sql", COUNT, false),
        ("count_replica_replay", COUNT, true),
        ("join_count_upstream_sql", JOIN_COUNT, false),
        ("join_count_replica_replay", JOIN_COUNT, true),
    ] {
        let (df, v) = filled(sql, std::iter::empty(), &store, replica);
        // Setup and routine run one after the other, never together.
        let df = std::cell::RefCell::new(df);
        let key: Key = vec![int(42)].into();
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let mut df = df.borrow_mut();
                    df.evict(v, &key);
                    let req = df.request_fill(v, vec![key.clone()]).pop().unwrap_or_else(|| unreachable!());
                    if replica { MemReplica { store: &store }.fill(&req) } else { MemUpstream { store: &store }.fill(&req) }
                        .unwrap_or_else(|e| panic!("{e}"))
                },
                |resp| black_box(df.borrow_mut().complete_fill(resp)),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// Not a timing: reports bytes per cached row as the budget accounts them.
fn bytes_per_row(_c: &mut Criterion) {
    if iterations().is_some() {
        return; // not a step of a hit (iteration mode: testkit's bench module)
    }
    let (_, store) = data();
    for (name, sql, rows_per_key) in [("by_primary_key", BY_ID, 1), ("join_count", JOIN_COUNT, 1)] {
        let (df, v) = filled(sql, 0..1000, &store, false);
        let s = df.stats(v).unwrap_or_else(|| unreachable!());
        eprintln!(
            "bytes_per_cached_row/{name}: {} bytes per partition of {rows_per_key} result row(s) ({} partitions, {} bytes; Value = {} bytes)",
            s.bytes / s.keys.max(1),
            s.keys,
            s.bytes,
            std::mem::size_of::<Value>()
        );
    }
    let raw = story(1);
    eprintln!("bytes_per_cached_row/raw_story_row: {} bytes (3 values + boxed slice header)", freshet_dataflow::value::row_bytes(&raw));
}

criterion_group!(benches, bytes_per_row, hit_lookup, delta_throughput, fill_cost);
criterion_main!(benches);
