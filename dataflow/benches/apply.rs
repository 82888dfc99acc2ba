//! Criterion benchmarks of applying binlog transactions on the news example's shapes (issue
//! 11, item 4: keep up at full write speed), without MariaDB.
//!
//! The four caches of `examples/news/freshet.toml` are installed over generated news data
//! (1,000 users, 5,000 stories, 50,000 votes with Zipf-skewed story popularity, 20,000
//! comments) and every partition is filled, as `scripts/keepup` warms them. The writes are
//! those of `news keepup`: one-row transactions that add a vote for a uniform (user, story)
//! and then remove it. A writer step takes up to 64 transactions
//! (`proxy/src/cache/writer.rs`); the benchmarks time one step of 64 transactions, with
//! reader entries republished after every transaction (`Dataflow::apply`) and once per step
//! (`apply_held` then `publish_held`, what the writer does).
//!
//! Run: `cargo bench -p freshet-dataflow --bench apply`. The queries are read from
//! `examples/news/freshet.toml` and the generator is the example's own (`examples/src/rng.rs`),
//! so the shapes follow the example without the crate depending on it.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use freshet_dataflow::*;

#[path = "../../examples/src/rng.rs"]
#[allow(dead_code, unused_imports)]
mod rng;
use rng::{Rng, Zipf};

const FRESHET_TOML: &str = include_str!("../../examples/news/freshet.toml");
/// `news load`'s Zipf exponent of story popularity (`examples/src/load.rs`).
const POPULARITY_SKEW: f64 = 0.8;

const USERS: u64 = 1_000;
const STORIES: u64 = 5_000;
const VOTES: usize = 50_000;
const COMMENTS: u64 = 20_000;
/// Transactions per writer step (the writer's `STEP_EVENTS`).
const STEP: usize = 64;

fn int(i: u64) -> Value {
    Value::Int(i as i64)
}
fn text(s: String) -> Value {
    Value::text(&s, Collation::Utf8mb4GeneralCi)
}

/// The news schema (`examples/news/schema.sql`) as cdc reports it.
fn catalog() -> Catalog {
    let id = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 8, unsigned: false }).not_null();
    let txt = |n: &str| ColumnSchema::new(n, SqlType::Text).with_collation(Some(Collation::Utf8mb4GeneralCi)).not_null();
    let at = |n: &str| ColumnSchema::new(n, SqlType::DateTime { fsp: 0 }).not_null();
    let mut c = Catalog::new();
    let tables = [
        TableSchema::new("users", vec![id("id"), txt("name")], vec![0]),
        TableSchema::new("stories", vec![id("id"), id("author_id"), txt("title"), txt("url"), at("created_at")], vec![0]),
        TableSchema::new("votes", vec![id("user_id"), id("story_id")], vec![0, 1]),
        TableSchema::new("comments", vec![id("id"), id("story_id"), id("author_id"), txt("body"), at("created_at")], vec![0]),
    ];
    for t in tables {
        c.add(t).unwrap_or_else(|e| panic!("{e}"));
    }
    c
}

/// The news data, generated like `news load` (same sizes and skew, not the same rows).
fn store() -> MemStore {
    let mut rng = Rng::new(7);
    let popular = Zipf::new(STORIES, POPULARITY_SKEW);
    let when = Value::DateTime(DateTime::new(Date::new(2026, 1, 1), 0, 0, 0, 0));
    let mut b = Batch::new(Position(1));
    for u in 1..=USERS {
        b.insert("users", vec![int(u), text(format!("user{u}"))].into());
    }
    for s in 1..=STORIES {
        let author = rng.uniform(USERS);
        let row = vec![int(s), int(author), text(format!("Story {s}")), text(format!("https://example.com/{s}")), when.clone()];
        b.insert("stories", row.into());
    }
    let mut pairs = std::collections::BTreeSet::new();
    while pairs.len() < VOTES {
        pairs.insert((rng.uniform(USERS), popular.sample(&mut rng)));
    }
    for (u, s) in pairs {
        b.insert("votes", vec![int(u), int(s)].into());
    }
    for c in 1..=COMMENTS {
        let (story, author) = (popular.sample(&mut rng), rng.uniform(USERS));
        b.insert("comments", vec![int(c), int(story), int(author), text(format!("Comment {c} on story {story}")), when.clone()].into());
    }
    let mut store = MemStore::new();
    store.apply(&b);
    store
}

/// The `query` of every `[[cache]]` in the example's config, in order.
fn queries() -> Vec<String> {
    let qs: Vec<String> = FRESHET_TOML
        .lines()
        .filter_map(|l| l.trim().strip_prefix("query = \""))
        .map(|q| q.trim_end_matches('"').replace("\\\"", "\""))
        .collect();
    assert!(qs.len() >= 4, "examples/news/freshet.toml: expected the news caches, found {qs:?}");
    qs
}

/// The dataflow with the news caches installed and every partition filled.
fn warmed(store: &MemStore) -> Dataflow {
    let mut df = Dataflow::new(catalog(), ByteSize(4 << 30));
    df.set_applied(store.position());
    df.set_max_fill_keys(1024);
    df.set_max_pending(1 << 20);
    for sql in queries() {
        let v = df.install_sql(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let param = df.query(v).and_then(|q| q.key_columns.first()).map(|k| k.name.clone());
        let keys: Vec<Key> = match param.as_deref() {
            Some("users.id") => (1..=USERS).map(|u| vec![int(u)].into()).collect(),
            Some(_) => (1..=STORIES).map(|s| vec![int(s)].into()).collect(),
            None => vec![Vec::new().into()],
        };
        for req in df.request_fill(v, keys) {
            let resp = MemReplica { store }.fill(&req).unwrap_or_else(|e| panic!("{e}"));
            df.complete_fill(resp);
        }
    }
    df
}

/// The next step's transactions: a vote added, then removed, for uniform (user, story) pairs
/// not already voted (as `news keepup`'s INSERT IGNORE / DELETE pairs that write).
fn step(rng: &mut Rng, pos: &mut u64) -> Vec<Batch> {
    let mut out = Vec::with_capacity(STEP);
    while out.len() < STEP {
        // Users beyond the loaded ones never collide with a stored vote.
        let row: Row = vec![int(USERS + rng.uniform(USERS)), int(rng.uniform(STORIES))].into();
        *pos += 1;
        let mut add = Batch::new(Position(*pos));
        add.insert("votes", row.clone());
        *pos += 1;
        let mut remove = Batch::new(Position(*pos));
        remove.delete("votes", row);
        out.push(add);
        out.push(remove);
    }
    out.truncate(STEP);
    out
}

fn news_votes(c: &mut Criterion) {
    let store = store();
    let mut g = c.benchmark_group("news_apply");
    g.throughput(Throughput::Elements(STEP as u64));
    let mut df = warmed(&store);
    let mut pos = store.position().0;
    let mut rng = Rng::new(11);
    g.bench_function("step_of_64_votes_publish_per_transaction", |b| {
        b.iter(|| {
            for batch in step(&mut rng, &mut pos) {
                df.apply(&batch).unwrap_or_else(|e| panic!("{e}"));
            }
        })
    });
    g.bench_function("step_of_64_votes_publish_per_step", |b| {
        b.iter(|| {
            for batch in step(&mut rng, &mut pos) {
                df.apply_held(&batch).unwrap_or_else(|e| panic!("{e}"));
            }
            df.publish_held();
        })
    });
    g.finish();
    let s: u64 = (0..4).filter_map(|v| df.stats(ViewId(v))).map(|s| s.keys).sum();
    black_box(s);
}

criterion_group!(benches, news_votes);
criterion_main!(benches);
