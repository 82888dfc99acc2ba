//! Binlog rotation (FLUSH BINARY LOGS) mid-stream: positions keep increasing across files,
//! nothing is lost, and a restart from a position in the old file continues in the new one.

mod common;

use common::*;
use freshet_cdc::{BinlogStream, StartAt, StreamConfig};
use freshet_dataflow::Value;
use mysql_async::prelude::Queryable;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_keeps_positions_increasing_and_resumable() {
    let (db, mut c) = fresh_db("rotate").await;
    c.query_drop("CREATE TABLE cdc_r (id INT PRIMARY KEY)").await.unwrap();
    let mut s = stream(&db).await;
    c.query_drop("INSERT INTO cdc_r VALUES (1)").await.unwrap();
    c.query_drop("FLUSH BINARY LOGS").await.unwrap();
    c.query_drop("INSERT INTO cdc_r VALUES (2)").await.unwrap();
    let (got, _) = within(20, "two batches across a rotation", batches(&mut s, 2)).await;
    let file_of = |p: freshet_dataflow::Position| p.0 >> 32;
    assert!(matches!(got[0].changes[0].row[0], Value::Int(1)));
    assert!(matches!(got[1].changes[0].row[0], Value::Int(2)));
    assert!(file_of(got[1].position) > file_of(got[0].position), "the second commit is in the next file");
    assert!(s.delivered().position().unwrap() == got[1].position);

    // Restart from the first commit (old file): the next batch is the second, in the new file.
    let old = freshet_cdc::BinlogPos::from_position(got[0].position, &s.delivered().file).unwrap();
    let mut s2 = BinlogStream::connect(opts_for(None), StreamConfig::new(&db, server_id()), StartAt::At(old)).await.unwrap();
    let (again, _) = within(20, "resume across the rotation", batches(&mut s2, 1)).await;
    assert_eq!(again[0].position, got[1].position);
    assert!(matches!(again[0].changes[0].row[0], Value::Int(2)));
    drop_db(&db).await;
}
