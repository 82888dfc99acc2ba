//! Many random transactions from several concurrent writer connections arrive completely, in
//! commit order, and correctly grouped; replaying them gives the server's final table.
//!
//! Commit order ground truth: every transaction ends by incrementing one counter row, whose
//! row lock is held until commit, so the counter value of a transaction is its commit rank.
//! The delivered batches must carry counter values 1, 2, ..., N in that order (complete and
//! ordered), each batch exactly one counter update and one log row of one writer's
//! transaction (grouped), and replaying all changes onto an empty model (deletes must find an
//! identical row, inserts must not collide) must equal `SELECT *` afterwards (no loss, no
//! duplicates, order of conflicting writes right).

mod common;

use std::collections::HashMap;
use std::time::Instant;

use common::*;
use freshet_cdc::MariaDb;
use freshet_cdc::result::{convert, result_columns};
use freshet_cdc::schema::load_tables;
use freshet_dataflow::{Batch, Row, Value};
use mysql_async::prelude::Queryable;

const WRITERS: usize = 4;
const TXNS_PER_WRITER: usize = 2_500;
const KEYS: u64 = 200;

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::UInt(u) => *u as i64,
        other => panic!("not an integer: {other:?}"),
    }
}

async fn writer(db: String, w: usize, seed: u64) -> usize {
    let mut c = mysql_async::Conn::new(opts_for(Some(&db))).await.unwrap();
    let mut rng = seed;
    let mut next = move |m: u64| {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (rng >> 33) % m
    };
    let mut retries = 0;
    let mut seq = 0;
    while seq < TXNS_PER_WRITER {
        let ops: Vec<(u64, u64, u64)> = (0..1 + next(4)).map(|_| (next(3), 1 + next(KEYS), next(1000))).collect();
        let r: Result<(), mysql_async::Error> = async {
            let mut tx = c.start_transaction(Default::default()).await?;
            for &(op, k, v) in &ops {
                match op {
                    0 => tx.exec_drop("INSERT INTO cdc_kv (id, v, s) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE v = v + VALUES(v), s = CONCAT(LEFT(s, 20), 'u')", (k, v, format!("w{w}"))).await?,
                    1 => tx.exec_drop("UPDATE cdc_kv SET v = v * 2 + ?, s = ? WHERE id = ?", (v, format!("x{v}"), k)).await?,
                    _ => tx.exec_drop("DELETE FROM cdc_kv WHERE id = ?", (k,)).await?,
                }
            }
            tx.exec_drop("INSERT INTO cdc_log (writer, seq, ops) VALUES (?, ?, ?)", (w, seq, ops.len())).await?;
            tx.query_drop("UPDATE cdc_counter SET n = n + 1 WHERE id = 1").await?;
            tx.commit().await
        }
        .await;
        match r {
            Ok(()) => seq += 1,
            // Deadlocks between writers touching the same keys: rolled back, not in the binlog.
            Err(mysql_async::Error::Server(e)) if e.code == 1213 || e.code == 1205 => retries += 1,
            Err(e) => panic!("writer {w}: {e}"),
        }
    }
    retries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_transactions_arrive_complete_ordered_grouped() {
    let (db, mut c) = fresh_db("order").await;
    c.query_drop(
        "CREATE TABLE cdc_kv (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, s VARCHAR(40) NOT NULL);
         CREATE TABLE cdc_log (id INT AUTO_INCREMENT PRIMARY KEY, writer INT, seq INT, ops INT);
         CREATE TABLE cdc_counter (id INT PRIMARY KEY, n BIGINT NOT NULL);
         INSERT INTO cdc_counter VALUES (1, 0);",
    )
    .await
    .unwrap();
    let mut s = stream(&db).await;
    let started = Instant::now();
    let total = WRITERS * TXNS_PER_WRITER;
    let reader = tokio::spawn(async move {
        let mut got: Vec<Batch> = Vec::new();
        let mut seen = 0;
        while seen < total {
            if let freshet_cdc::StreamEvent::Batch(b) = s.next().await.expect("stream event")
                && !b.changes.is_empty()
            {
                seen += 1;
                got.push(b);
            }
        }
        got
    });
    let writers: Vec<_> = (0..WRITERS).map(|w| tokio::spawn(writer(db.clone(), w, 77 + w as u64))).collect();
    let mut deadlocks = 0;
    for w in writers {
        deadlocks += within(120, "writers", w).await.unwrap();
    }
    let wrote = started.elapsed();
    let got = within(60, "binlog catches up", reader).await.unwrap();
    eprintln!(
        "{total} transactions from {WRITERS} writers ({deadlocks} deadlock retries) written in {wrote:?}, all received after {:?}",
        started.elapsed()
    );

    // Complete, ordered, grouped.
    let mut model: HashMap<(String, i64), Row> = HashMap::new();
    let mut last_seq = [-1i64; WRITERS];
    for (rank, b) in got.iter().enumerate() {
        let counters: Vec<_> = b.changes.iter().filter(|c| c.table == "cdc_counter").collect();
        assert_eq!(counters.len(), 2, "batch {rank}: one counter update (-old +new)");
        assert_eq!(int(&counters[1].row[1]), rank as i64 + 1, "batch {rank}: commit rank");
        let logs: Vec<_> = b.changes.iter().filter(|c| c.table == "cdc_log").collect();
        assert_eq!(logs.len(), 1, "batch {rank}: one log row");
        let (w, seq) = (int(&logs[0].row[1]) as usize, int(&logs[0].row[2]));
        assert_eq!(seq, last_seq[w] + 1, "writer {w}'s transactions in order, none missing");
        last_seq[w] = seq;
        for ch in &b.changes {
            let key = (ch.table.clone(), int(&ch.row[0]));
            if ch.insert {
                assert!(model.insert(key.clone(), ch.row.clone()).is_none(), "insert over an existing row {key:?}");
            } else {
                let old = model.remove(&key);
                if ch.table != "cdc_counter" {
                    let old = old.unwrap_or_else(|| panic!("delete of a missing row {key:?}"));
                    assert_eq!(format!("{old:?}"), format!("{:?}", ch.row), "delete image = last image");
                }
            }
        }
    }
    assert!(got.windows(2).all(|w| w[0].position < w[1].position));
    assert!(last_seq.iter().all(|&s| s == TXNS_PER_WRITER as i64 - 1));

    // Replay equals the server.
    let tables = load_tables(&mut c, &MariaDb, &db, None).await.unwrap();
    let rows: Vec<mysql_async::Row> = c.exec("SELECT * FROM cdc_kv", ()).await.unwrap();
    let mut server: HashMap<i64, String> = HashMap::new();
    for row in rows {
        let cols = result_columns(row.columns_ref(), &tables);
        let vals: Row = row.unwrap().into_iter().zip(&cols).map(|(v, col)| convert(col, v).unwrap()).collect();
        server.insert(int(&vals[0]), format!("{vals:?}"));
    }
    let ours: HashMap<i64, String> = model.iter().filter(|((t, _), _)| t == "cdc_kv").map(|((_, k), r)| (*k, format!("{r:?}"))).collect();
    assert_eq!(ours, server);
    drop_db(&db).await;
}
