//! Where a copy's snapshot is placed in the binlog, against the project's MariaDB
//! (`eval "$(scripts/mariadb.sh)"`).

use std::time::{Duration, Instant};

use freshet_cdc::stream::current_position;
use freshet_cdc::{BinlogStream, MariaDb, StartAt, StreamConfig, StreamEvent};
use freshet_dataflow::{Position, Value};
use freshet_replica::fence::{Placed, open_snapshot};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use tokio::task::JoinSet;

fn opts(db: Option<&str>) -> Opts {
    OptsBuilder::from_opts(Opts::from_url(&freshet_testkit::mysql_url()).unwrap()).db_name(db.map(str::to_string)).into()
}

/// A new store's stream starts where its first snapshot is placed, so the snapshot must hold
/// every commit up to there: one it lacks is never replayed, and the row stays as it was until
/// written again. MariaDB's snapshot position is not exactly its snapshot's content
/// (docs/decisions.md, cdc): writers increment one row while snapshots are opened and read it;
/// afterwards the binlog gives the row's value at each start, which the snapshot's must not
/// be below (above is fine: the stream's row images are applied again, idempotently).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_starts_its_stream_where_its_snapshot_lacks_no_commit() {
    let db = format!("replica_fence_{}", std::process::id());
    let mut c = Conn::new(opts(None)).await.unwrap();
    c.query_drop(format!("DROP DATABASE IF EXISTS `{db}`")).await.unwrap();
    c.query_drop(format!("CREATE DATABASE `{db}`")).await.unwrap();
    c.query_drop(format!("CREATE TABLE `{db}`.ctr (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB")).await.unwrap();
    c.query_drop(format!("INSERT INTO `{db}`.ctr VALUES (1, 0)")).await.unwrap();
    let from = current_position(&mut c, &MariaDb, Duration::from_secs(5)).await.unwrap();

    let until = Instant::now() + Duration::from_secs(5);
    let mut writers = JoinSet::new();
    for _ in 0..4 {
        let db = db.clone();
        writers.spawn(async move {
            let mut c = Conn::new(opts(Some(&db))).await.unwrap();
            while Instant::now() < until {
                c.query_drop("UPDATE ctr SET v = v + 1 WHERE id = 1").await.unwrap();
            }
        });
    }
    let mut snapshots = JoinSet::new();
    // Each waits `fence::SETTLE` before it starts: more of them race the writers.
    for _ in 0..6 {
        let db = db.clone();
        snapshots.spawn(async move {
            let mut c = Conn::new(opts(Some(&db))).await.unwrap();
            let mut seen = Vec::new();
            while Instant::now() < until {
                let placed = open_snapshot(&mut c, &MariaDb).await.unwrap();
                let v: i64 = c.query_first("SELECT v FROM ctr WHERE id = 1").await.unwrap().unwrap();
                c.query_drop("COMMIT").await.unwrap();
                seen.push((placed, v));
            }
            seen
        });
    }
    while let Some(w) = writers.join_next().await {
        w.unwrap();
    }
    let mut seen: Vec<(Placed, i64)> = Vec::new();
    while let Some(s) = snapshots.join_next().await {
        seen.extend(s.unwrap());
    }

    // The row's value after each commit, from the binlog.
    let end = current_position(&mut c, &MariaDb, Duration::from_secs(5)).await.unwrap().position().unwrap();
    let id = 1000 + std::process::id() % 1_000_000;
    let mut s = BinlogStream::connect(opts(None), StreamConfig::new(&db, id), StartAt::At(from.clone())).await.unwrap();
    let mut values: Vec<(Position, i64)> = Vec::new();
    let mut at = from.position().unwrap();
    while at < end {
        match tokio::time::timeout(Duration::from_secs(20), s.next()).await.expect("the stream reaches the end").unwrap() {
            StreamEvent::Batch(b) => {
                at = b.position;
                for ch in b.changes.iter().filter(|ch| ch.insert && ch.table.eq_ignore_ascii_case("ctr")) {
                    let Value::Int(v) = ch.row[1] else { panic!("v {:?}", ch.row[1]) };
                    values.push((b.position, v));
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    c.query_drop(format!("DROP DATABASE IF EXISTS `{db}`")).await.unwrap();
    let value_at = |p: Position| values.iter().take_while(|(q, _)| *q <= p).last().map_or(0, |(_, v)| *v);
    let behind: Vec<String> = seen
        .iter()
        .filter(|(at, v)| *v < value_at(at.from))
        .map(|(at, v)| format!("started at {:?}, where v = {}; the snapshot read {v}", at.from, value_at(at.from)))
        .collect();
    // And a table is answered from once the stream has passed `to`: the snapshot holds no
    // commit after it.
    let ahead: Vec<String> = seen
        .iter()
        .filter(|(at, v)| *v > value_at(at.to))
        .map(|(at, v)| format!("placed up to {:?}, where v = {}; the snapshot read {v}", at.to, value_at(at.to)))
        .collect();
    eprintln!(
        "{} snapshots, {} commits, {} lacking a commit before their start, {} holding one after their end",
        seen.len(),
        values.len(),
        behind.len(),
        ahead.len()
    );
    assert!(
        ahead.is_empty(),
        "{} of {} snapshots hold commits after their end: {:?}",
        ahead.len(),
        seen.len(),
        &ahead[..ahead.len().min(5)]
    );
    assert!(seen.len() >= 300 && values.len() >= 1000, "snapshots must race commits ({} snapshots, {} commits)", seen.len(), values.len());
    assert!(
        behind.is_empty(),
        "{} of {} snapshots lack commits before the stream's start: {:?}",
        behind.len(),
        seen.len(),
        &behind[..behind.len().min(5)]
    );
}
