//! The steps of a hit that have no bench elsewhere, for `freshet-load`'s two cached reads (the
//! point read of `load_items` and the news example's story with its vote count):
//! - `bind/text`: a text query's literals bound to the view's lookup parameters
//!   (`Binding::new`, then `values`), once per COM_QUERY hit;
//! - `bind/execute`: a COM_STMT_EXECUTE's parameters decoded (`execute_params`, types sent
//!   with every execute as mysql_async does) and bound (`values`), once per execute hit;
//! - `reply`: the answer's result set queued for the client (rows encoded, every packet
//!   framed) and flushed into a sink that takes everything at once: the write without its
//!   syscall, which only the whole process's figure has;
//! - `bookkeeping`: what a hit records besides its answer (two clock reads, the cache's latency
//!   sketch and Prometheus histogram, the hit counters).
//!
//! The other steps: `matching` (classify, verdict), `encode` (one row), and the view's lookup
//! in `freshet-bench`'s `dataflow` (`hit_lookup`). docs/decisions.md has each step's budget in
//! instructions, measured by `scripts/budgets`.

use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use freshet_dataflow::{Catalog, Collation, SharedRow, TableSchema, Value, compile};
use freshet_proxy::cache::Columns;
use freshet_proxy::cache::latency::LatencySketch;
use freshet_proxy::cache::matcher::{Pattern, verdict};
use freshet_proxy::cache::params::execute_params;
use freshet_proxy::cache::route::{Binding, ParamMap, Verdict};
use freshet_proxy::encode::text::Column;
use freshet_proxy::matching::{CacheId, SqlMode, classify};
use freshet_proxy::metrics::{Counter, Histogram};
use freshet_proxy::protocol::column::{ColumnDef, types};
use freshet_proxy::protocol::{PacketIo, StatusFlags};
use freshet_proxy::session::{Encoded, Reply, queue_answer};
use freshet_testkit::bench::step;
use freshet_testkit::catalog::{int, text_ci};

const POINT: &str = "SELECT id, k, c, pad FROM load_items WHERE id = ?";
const STORY: &str = "SELECT stories.id, stories.title, stories.url, COUNT(votes.user_id) AS votes FROM stories LEFT JOIN votes ON votes.story_id = stories.id WHERE stories.id = ? GROUP BY stories.id, stories.title, stories.url";

/// `freshet-load`'s tables (the point read's, and the news example's two the story reads).
fn catalog() -> Catalog {
    let mut c = Catalog::new();
    let tables = [
        TableSchema::new("load_items", vec![int("id", 8), int("k", 4), text_ci("c"), text_ci("pad")], vec![0]),
        TableSchema::new("stories", vec![int("id", 8), int("author_id", 8), text_ci("title"), text_ci("url")], vec![0]),
        TableSchema::new("votes", vec![int("user_id", 8), int("story_id", 8)], vec![0, 1]),
    ];
    for t in tables {
        c.add(t).unwrap_or_else(|e| panic!("{e}"));
    }
    c
}

/// The parameter map the full parse gives `sql` against the cache of `cached`.
fn param_map(sql: &str, cached: &str, catalog: &Catalog) -> ParamMap {
    let pattern = Pattern::new(&classify(cached.as_bytes(), SqlMode::default()), catalog).unwrap_or_else(|e| panic!("{e}"));
    match verdict(&classify(sql.as_bytes(), SqlMode::default()), &[(CacheId(1), &pattern)], catalog) {
        Verdict::Cache(matches) => matches[0].params.clone(),
        other => panic!("{sql} is not served by its cache: {other:?}"),
    }
}

fn bind(c: &mut Criterion) {
    let catalog = catalog();
    let reads = [("point", POINT, POINT.replace('?', "4242")), ("story", STORY, STORY.replace('?', "17"))];
    for (name, cached, sql) in &reads {
        let view = compile(cached, &catalog).unwrap_or_else(|e| panic!("{e:?}"));
        let map = param_map(sql, cached, &catalog);
        let query = classify(sql.as_bytes(), SqlMode::default());
        step(c, &format!("bind/text/{name}"), || Binding::new(black_box(&query), &map, &view).and_then(|b| b.values(&[])));
        if *name == "point" {
            // At prepare: the statement's binding, its one `?` bound at each execute.
            let prepared = Binding::new(&classify(cached.as_bytes(), SqlMode::default()), &map, &view).unwrap_or_else(|e| panic!("{e:?}"));
            // NULL bitmap, new-params-bound, LONGLONG signed, the value 4242.
            let mut body = vec![0x00, 0x01, types::LONGLONG, 0x00];
            body.extend_from_slice(&4242i64.to_le_bytes());
            let mut param_types = Vec::new();
            step(c, &format!("bind/execute/{name}"), || {
                let bound = execute_params(black_box(&body), 1, &mut param_types).unwrap_or_else(|e| panic!("{e:?}"));
                // What the lookup is given (borrowed from `bound` when in order, as here).
                prepared.values(&bound).map(|values| black_box(values.len()))
            });
        }
    }
}

fn column(name: &str, type_code: u8, charset: u16, length: u32) -> Column {
    Column { def: ColumnDef { name: name.into(), charset, length, type_code, flags: 0, decimals: 0 }, labels: vec![] }
}

/// Column definitions as the session keeps them: the captured packets and how each renders.
fn columns(render: Vec<Column>) -> Columns {
    let packets = render.iter().map(|c| Bytes::from(c.def.encode(false))).collect();
    Columns::new(packets, render)
}

fn reply(c: &mut Criterion) {
    let text = |s: &str| Value::text(s, Collation::Utf8mb4GeneralCi);
    let point = (
        columns(vec![
            column("id", types::LONGLONG, 63, 20),
            column("k", types::LONG, 63, 11),
            column("c", types::STRING, 45, 480),
            column("pad", types::STRING, 45, 240),
        ]),
        vec![SharedRow::from(vec![Value::Int(4242), Value::Int(4242 * 7), text(&"c".repeat(119)), text(&"p".repeat(59))])],
    );
    let story = (
        columns(vec![
            column("id", types::LONGLONG, 63, 20),
            column("title", types::VAR_STRING, 45, 1020),
            column("url", types::VAR_STRING, 45, 1020),
            column("votes", types::LONGLONG, 63, 21),
        ]),
        vec![SharedRow::from(vec![
            Value::Int(17),
            text("Show HN: a caching sidecar for MySQL"),
            text("https://example.com/story/17"),
            Value::Int(31),
        ])],
    );
    // Everything a flush writes is taken at once, so one poll finishes it.
    let mut client = PacketIo::new(tokio::io::join(tokio::io::empty(), tokio::io::sink()));
    // Kept between answers, as a session keeps it.
    let mut encoded = Encoded::default();
    let status = StatusFlags(StatusFlags::AUTOCOMMIT);
    for (name, (columns, rows)) in [("point", &point), ("story", &story)] {
        for (protocol, binary) in [("text", false), ("binary", true)] {
            let reply = Reply { binary, status, deprecate_eof: true, last_seq: 0 };
            step(c, &format!("reply/{protocol}/{name}"), || {
                queue_answer(&mut client, &mut encoded, columns, black_box(rows), reply).unwrap_or_else(|e| panic!("{e}"));
                let flushed = pin!(client.flush()).poll(&mut Context::from_waker(Waker::noop()));
                assert!(matches!(flushed, Poll::Ready(Ok(()))), "a flush into a sink finishes at once");
            });
        }
    }
}

/// What `Session::finish_route` and `Engine::lookup` record for a hit (the sampling of hot
/// keys for the warm restart, one hit in many, is left out).
fn bookkeeping(c: &mut Criterion) {
    let (sketch, histogram, hits, cache_hits) = (LatencySketch::default(), Histogram::default(), Counter::default(), Counter::default());
    step(c, "bookkeeping", || {
        let started = Instant::now();
        cache_hits.inc();
        let elapsed = black_box(started).elapsed();
        sketch.record(elapsed);
        histogram.observe(elapsed);
        hits.inc();
    });
}

criterion_group!(benches, bind, reply, bookkeeping);
criterion_main!(benches);
