//! Cost of encoding one cached row for the client, on the hit path: a story-with-votes shaped
//! row (BIGINT, VARCHAR, BIGINT count) and a wider point-select row, in both protocols.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use freshet_dataflow::{Collation, Date, DateTime, Value};
use freshet_proxy::encode::text::Column;
use freshet_proxy::encode::{binary, text};
use freshet_proxy::protocol::column::{ColumnDef, types};
use freshet_testkit::bench::step;

fn col(type_code: u8, charset: u16) -> Column {
    Column { def: ColumnDef { name: "c".into(), charset, length: 20, type_code, flags: 0, decimals: 0 }, labels: vec![] }
}

fn bench(c: &mut Criterion) {
    let story = (
        vec![Value::Int(4242), Value::Text("Show HN: a caching sidecar for MySQL".into(), Collation::Utf8mb4GeneralCi), Value::Int(137)],
        vec![col(types::LONGLONG, 63), col(types::VAR_STRING, 45), col(types::LONGLONG, 63)],
    );
    let wide = (
        vec![
            Value::Int(1),
            Value::Int(512),
            Value::Text("x".repeat(120).into(), Collation::Utf8mb4GeneralCi),
            Value::Text("y".repeat(60).into(), Collation::Utf8mb4GeneralCi),
            Value::DateTime(DateTime::new(Date::new(2026, 11, 22), 10, 0, 0, 0)),
        ],
        vec![col(types::LONGLONG, 63), col(types::LONG, 63), col(types::STRING, 45), col(types::STRING, 45), col(types::DATETIME, 63)],
    );
    let mut out = Vec::with_capacity(512);
    for (name, (values, columns)) in [("story_votes", &story), ("point_select", &wide)] {
        step(c, &format!("encode/text/{name}"), || {
            out.clear();
            text::row(&mut out, black_box(values), columns).unwrap();
        });
        step(c, &format!("encode/binary/{name}"), || {
            out.clear();
            binary::row(&mut out, black_box(values), columns).unwrap();
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
