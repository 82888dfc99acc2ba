//! A measurement, not a benchmark gate: how fast the stream decodes a backlog of row events
//! into batches (100,000 rows of a 6-column table in 10 transactions, read from the position
//! before they were written). Prints rows/s; asserts only completeness.

mod common;

use std::time::Instant;

use common::*;
use freshet_cdc::{BinlogStream, StartAt, StreamConfig, StreamEvent};
use mysql_async::prelude::Queryable;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlog_decode_rate() {
    let (db, mut c) = fresh_db("rate").await;
    c.query_drop(
        "CREATE TABLE cdc_rate (id BIGINT PRIMARY KEY, k INT, v DOUBLE, d DECIMAL(12,2),
                                s VARCHAR(40) CHARACTER SET utf8mb4, t DATETIME(6))",
    )
    .await
    .unwrap();
    let start = {
        let s = stream(&db).await;
        s.delivered().clone()
    };
    for b in 0..10 {
        c.query_drop(format!(
            "INSERT INTO cdc_rate SELECT seq, seq % 97, seq / 7, seq / 3, CONCAT('row-', seq), '2024-01-01 00:00:00.5' + INTERVAL seq SECOND
             FROM seq_{}_to_{}",
            b * 10_000 + 1,
            (b + 1) * 10_000
        ))
        .await
        .unwrap();
    }
    let mut s = BinlogStream::connect(opts_for(None), StreamConfig::new(&db, server_id()), StartAt::At(start)).await.unwrap();
    let t0 = Instant::now();
    let mut rows = 0;
    within(60, "backlog", async {
        while rows < 100_000 {
            if let StreamEvent::Batch(b) = s.next().await.unwrap() {
                rows += b.changes.len();
            }
        }
    })
    .await;
    let secs = t0.elapsed().as_secs_f64();
    eprintln!("decoded {rows} rows (6 columns) in {secs:.2}s: {:.0} rows/s (dev build)", rows as f64 / secs);
    assert_eq!(rows, 100_000);
    drop_db(&db).await;
}
