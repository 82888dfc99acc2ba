//! Memory per cached row (issue 15, item 4): for each cached read of the news example and the
//! point read, the bytes the process really grew by (VmRSS) for a fully filled view, the bytes
//! `[memory] limit` counts for it (the view's accounted bytes), and the payload of the rows it
//! answers with (what a client receives: 8 bytes per integer or date-time, a text's length).
//!
//! The news example's parameterless `top_stories` is one partition, so it is measured whole,
//! per vote it holds, on the last line.
//!
//! Run: `cargo bench -p freshet-bench --bench memory` (release). Not a timing and not a test:
//! it prints one line per read. Each read is measured in a child process of its own, after the
//! base tables are loaded, so that memory freed by one measurement (kept by the allocator)
//! does not hide the next one's growth.

use std::time::Instant;

use freshet_dataflow::*;

const STORIES: i64 = 50_000;
const USERS: i64 = 5_000;
const VOTES_PER_STORY: i64 = 10;
const COMMENTS_PER_STORY: i64 = 3;
/// Keys per fill request, as the engine batches them.
const FILL_KEYS: usize = 1024;

/// (name, query, key range): the keys filled are every key of the range.
const READS: [(&str, &str, i64); 4] = [
    ("point_story", "SELECT id, title, author_id FROM stories WHERE id = ?", STORIES),
    (
        "story_with_votes",
        "SELECT stories.id, stories.title, stories.url, COUNT(votes.user_id) AS votes FROM stories LEFT JOIN votes \
         ON votes.story_id = stories.id WHERE stories.id = ? GROUP BY stories.id, stories.title, stories.url",
        STORIES,
    ),
    (
        "story_comments",
        "SELECT comments.id, comments.body, comments.created_at, users.name FROM comments JOIN users \
         ON users.id = comments.author_id WHERE comments.story_id = ? ORDER BY comments.id",
        STORIES,
    ),
    (
        "user_karma",
        "SELECT users.id, COUNT(votes.user_id) AS karma FROM users LEFT JOIN stories ON stories.author_id = users.id \
         LEFT JOIN votes ON votes.story_id = stories.id WHERE users.id = ? GROUP BY users.id",
        USERS,
    ),
];

/// The news example's one parameterless read: a single partition that joins every story with
/// every vote. Measured whole (one partition has no second half), per vote it holds.
const TOP_STORIES: &str = "SELECT stories.id, stories.title, COUNT(votes.user_id) AS votes FROM stories JOIN votes \
     ON votes.story_id = stories.id GROUP BY stories.id, stories.title ORDER BY votes DESC, stories.id LIMIT 10";

fn main() {
    // `cargo bench` passes `--bench`; a child gets the read's name.
    match std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        Some(name) if name == "top_stories" => measure_whole(),
        Some(name) => measure(&name),
        None => {
            println!("read                   rows   rss bytes/row  accounted bytes/row  payload bytes/row  rss/payload  accounted/rss");
            let me = std::env::current_exe().expect("the bench's own path");
            for name in READS.iter().map(|(name, _, _)| *name).chain(["top_stories"]) {
                let status = std::process::Command::new(&me).arg(name).status().expect("run the measurement");
                assert!(status.success(), "{name}: {status}");
            }
        }
    }
}

/// `top_stories`: the bytes of its one partition (RSS growth over the fill, and what the
/// budget counts), per vote of the base tables. There is no second half of keys to leave the
/// fill's transient buffers out of the growth, so the partition is filled twice, in two
/// dataflows: the first fill's buffers, freed, are reused by the second, whose growth is
/// measured (the first partition stays alive, as the first half of the keys does above).
fn measure_whole() {
    let (_batch, store) = news_store();
    let started = Instant::now();
    let filled = || {
        let mut df = Dataflow::new(news(), ByteSize(16 << 30));
        df.set_applied(store.position());
        let v = df.install_sql(TOP_STORIES).unwrap_or_else(|e| panic!("top_stories: {e}"));
        fill(&mut df, v, &[Vec::new().into()], &store, "top_stories");
        (df, v)
    };
    let _first = filled();
    let before = rss();
    let (df, v) = filled();
    let grown = rss().saturating_sub(before);
    let accounted = df.stats(v).map_or(0, |s| s.bytes);
    let votes = (STORIES * VOTES_PER_STORY) as f64;
    println!(
        "top_stories: one partition over {} votes: rss grew {:.1} MB ({:.0} B per vote), accounted {:.1} MB ({:.0} B per vote)   ({:.1} s)",
        STORIES * VOTES_PER_STORY,
        grown as f64 / 1e6,
        grown as f64 / votes,
        accounted as f64 / 1e6,
        accounted as f64 / votes,
        started.elapsed().as_secs_f64()
    );
}

fn measure(name: &str) {
    let (_, sql, keys) = READS.iter().find(|(n, _, _)| *n == name).unwrap_or_else(|| panic!("no read {name}"));
    // The batch the store was loaded from stays alive: had it been freed, the allocator would
    // hand its memory to the views without the process growing, and the views would look free.
    let (_batch, store) = news_store();
    let started = Instant::now();
    let mut df = Dataflow::new(news(), ByteSize(16 << 30));
    df.set_applied(store.position());
    df.set_max_fill_keys(FILL_KEYS);
    let v = df.install_sql(sql).unwrap_or_else(|e| panic!("{name}: {e}"));
    let all: Vec<Key> = (0..*keys).map(|k| vec![Value::Int(k)].into()).collect();
    // The first half pays for what does not grow with the rows (the reader's map, buffers
    // of the fill path at their peak); the second half's growth is the cost per cached row.
    let (first, second) = all.split_at(all.len() / 2);
    fill(&mut df, v, first, &store, name);
    let (rss_half, accounted_half) = (rss(), df.stats(v).map_or(0, |s| s.bytes));
    fill(&mut df, v, second, &store, name);
    let grown = rss().saturating_sub(rss_half);
    let accounted = df.stats(v).map_or(0, |s| s.bytes) - accounted_half;
    let reader = df.reader(v).unwrap_or_else(|| panic!("{name}: no reader"));
    let (mut rows, mut payload) = (0u64, 0u64);
    for k in *keys / 2..*keys {
        match reader.lookup(&[Value::Int(k)]) {
            Ok(Lookup::Hit(answer)) => {
                rows += answer.len() as u64;
                payload += answer.iter().map(|r| r.iter().map(wire_bytes).sum::<u64>()).sum::<u64>();
            }
            other => panic!("{name}: key {k} not filled: {other:?}"),
        }
    }
    let per = |b: u64| b as f64 / rows.max(1) as f64;
    println!(
        "{name:<20} {rows:>7} {:>17.0} {:>20.0} {:>18.1} {:>12.2} {:>14.2}   ({:.1} s)",
        per(grown),
        per(accounted),
        per(payload),
        grown as f64 / payload.max(1) as f64,
        accounted as f64 / grown.max(1) as f64,
        started.elapsed().as_secs_f64()
    );
}

fn fill(df: &mut Dataflow, v: ViewId, keys: &[Key], store: &MemStore, name: &str) {
    for chunk in keys.chunks(FILL_KEYS) {
        for req in df.request_fill(v, chunk.to_vec()) {
            df.complete_fill(MemUpstream { store }.fill(&req).unwrap_or_else(|e| panic!("{name}: {e}")));
        }
    }
}

/// A value's size in a result row as the client receives it (without length prefixes).
fn wire_bytes(v: ValueRef<'_>) -> u64 {
    match v {
        ValueRef::Null => 0,
        ValueRef::Text(s, _) | ValueRef::Json(s) => s.len() as u64,
        ValueRef::Bytes(b) => b.len() as u64,
        ValueRef::Float(_) | ValueRef::Date(_) => 4,
        ValueRef::Decimal(_) => 16,
        _ => 8,
    }
}

/// The news schema as examples/news/schema.sql declares it.
fn news() -> Catalog {
    let int = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 8, unsigned: false }).not_null();
    let text = |n: &str| ColumnSchema::new(n, SqlType::Text).with_collation(Some(Collation::Utf8mb4GeneralCi)).not_null();
    let at = |n: &str| ColumnSchema::new(n, SqlType::DateTime { fsp: 0 }).not_null();
    let mut c = Catalog::new();
    let mut add = |t: TableSchema| c.add(t).unwrap_or_else(|e| panic!("{e}"));
    add(TableSchema::new("users", vec![int("id"), text("name")], vec![0]));
    add(TableSchema::new("stories", vec![int("id"), int("author_id"), text("title"), text("url"), at("created_at")], vec![0]));
    add(TableSchema::new("votes", vec![int("user_id"), int("story_id")], vec![0, 1]));
    add(TableSchema::new("comments", vec![int("id"), int("story_id"), int("author_id"), text("body"), at("created_at")], vec![0]));
    c
}

/// Base rows shaped like the news generator's: titles of ~40 characters, comment bodies of ~80.
fn news_store() -> (Batch, MemStore) {
    let int = Value::Int;
    let text = |s: String| Value::text(&s, Collation::Utf8mb4GeneralCi);
    let at = |i: i64| {
        Value::DateTime(DateTime::new(Date::new(2026, 1 + (i % 12) as u8, 1 + (i % 28) as u8), (i % 24) as u8, (i % 60) as u8, 0, 0))
    };
    let mut b = Batch::new(Position(1));
    for u in 0..USERS {
        b.insert("users", vec![int(u), text(format!("user{u:06}"))].into());
    }
    for s in 0..STORIES {
        let title = format!("Story {s}: a headline of about forty chars");
        b.insert("stories", vec![int(s), int(s % USERS), text(title), text(format!("https://example.com/{s}")), at(s)].into());
        for v in 0..VOTES_PER_STORY {
            b.insert("votes", vec![int((s * 7 + v * 131) % USERS), int(s)].into());
        }
        for c in 0..COMMENTS_PER_STORY {
            let id = s * COMMENTS_PER_STORY + c;
            let body = format!("Comment {id}, a reply of roughly eighty characters of text, as people write them.");
            b.insert("comments", vec![int(id), int(s), int((id * 13) % USERS), text(body), at(id)].into());
        }
    }
    let mut store = MemStore::new();
    store.apply(&b);
    (b, store)
}

/// The process's resident set, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok());
    kb.expect("VmRSS") * 1024
}
