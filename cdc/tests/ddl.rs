//! DDL arrives as schema-change events in order with the row events, and rows after an ALTER
//! are decoded with the new shape; a stream that lags behind two schema versions of a table
//! reports a mismatch instead of decoding rows with the wrong shape.

mod common;

use common::*;
use freshet_cdc::{BinlogStream, CdcError, DdlKind, SchemaChange, StreamEvent};
use freshet_dataflow::{Batch, Value};
use mysql_async::prelude::Queryable;

enum Ev {
    B(Batch),
    S(Box<SchemaChange>),
}

/// Runs `sql`, then reads until a non-empty batch or a schema change arrives.
async fn step(c: &mut mysql_async::Conn, s: &mut BinlogStream, sql: &str) -> Vec<Ev> {
    c.query_drop(sql).await.unwrap();
    within(20, sql, async {
        let mut out = Vec::new();
        loop {
            match s.next().await.unwrap() {
                StreamEvent::Batch(b) if b.changes.is_empty() => continue,
                StreamEvent::Batch(b) => {
                    out.push(Ev::B(b));
                    return out;
                }
                StreamEvent::Following(t) => panic!("no table set was given, yet following {t:?}"),
                StreamEvent::Schema(ch) => {
                    let last = ch.kind != DdlKind::RenamedFrom;
                    out.push(Ev::S(ch));
                    if last {
                        return out;
                    }
                }
            }
        }
    })
    .await
}

fn schema(ev: &[Ev], i: usize) -> &SchemaChange {
    match &ev[i] {
        Ev::S(ch) => ch,
        Ev::B(b) => panic!("expected a schema change, got {b:?}"),
    }
}

fn batch(ev: &[Ev]) -> &Batch {
    match &ev[0] {
        Ev::B(b) => b,
        Ev::S(ch) => panic!("expected a batch, got {ch:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_is_reported_in_order_and_refreshes_the_column_map() {
    let (db, mut c) = fresh_db("ddl").await;
    let mut s = stream(&db).await;

    let ev = step(&mut c, &mut s, "CREATE TABLE cdc_d (id INT PRIMARY KEY, a VARCHAR(5))").await;
    let ch = schema(&ev, 0);
    assert_eq!((ch.table.as_str(), ch.kind), ("cdc_d", DdlKind::Create));
    assert_eq!(ch.schema.as_ref().unwrap().columns.len(), 2);
    let created_at = ch.position;

    let ev = step(&mut c, &mut s, "INSERT INTO cdc_d VALUES (1, 'x')").await;
    assert_eq!(batch(&ev).changes[0].row.len(), 2);
    assert!(batch(&ev).position > created_at);

    let ev = step(&mut c, &mut s, "ALTER TABLE cdc_d ADD COLUMN b BIGINT UNSIGNED NOT NULL DEFAULT 7").await;
    let ch = schema(&ev, 0);
    assert_eq!(ch.kind, DdlKind::Alter);
    assert_eq!(ch.schema.as_ref().unwrap().columns[2].name, "b");

    let ev = step(&mut c, &mut s, "INSERT INTO cdc_d (id, a) VALUES (2, 'y')").await;
    let row = &batch(&ev).changes[0].row;
    assert_eq!(row.len(), 3, "decoded with the new shape");
    assert!(matches!(row[2], Value::UInt(7)));

    let ev = step(&mut c, &mut s, "RENAME TABLE cdc_d TO cdc_e").await;
    assert_eq!((schema(&ev, 0).table.as_str(), schema(&ev, 0).kind), ("cdc_d", DdlKind::RenamedFrom));
    assert!(schema(&ev, 0).schema.is_none());
    assert_eq!((schema(&ev, 1).table.as_str(), schema(&ev, 1).kind), ("cdc_e", DdlKind::RenamedTo));
    assert!(schema(&ev, 1).schema.is_some());

    let ev = step(&mut c, &mut s, "UPDATE cdc_e SET b = 8 WHERE id = 2").await;
    assert_eq!(batch(&ev).changes[0].table, "cdc_e");

    let ev = step(&mut c, &mut s, "TRUNCATE TABLE cdc_e").await;
    assert_eq!(schema(&ev, 0).kind, DdlKind::Truncate);
    assert!(schema(&ev, 0).schema.is_some());

    // DDL in another database is not reported; the next event is our DROP.
    c.query_drop(format!("CREATE TABLE IF NOT EXISTS freshet_test.cdc_other_{} (id INT)", std::process::id())).await.unwrap();
    c.query_drop(format!("DROP TABLE freshet_test.cdc_other_{}", std::process::id())).await.unwrap();
    let ev = step(&mut c, &mut s, "DROP TABLE cdc_e").await;
    assert_eq!((schema(&ev, 0).table.as_str(), schema(&ev, 0).kind), ("cdc_e", DdlKind::Drop));
    assert!(schema(&ev, 0).schema.is_none());

    // CREATE TABLE ... SELECT: the schema change first, then the rows it created.
    let ev = step(&mut c, &mut s, "CREATE TABLE cdc_g (id INT PRIMARY KEY) SELECT 5 AS id UNION SELECT 6").await;
    assert_eq!((schema(&ev, 0).table.as_str(), schema(&ev, 0).kind), ("cdc_g", DdlKind::Create));
    let ev = if ev.len() > 1 { ev } else { step(&mut c, &mut s, "DO 0").await };
    let b = ev.iter().find_map(|e| if let Ev::B(b) = e { Some(b) } else { None }).expect("rows of CREATE ... SELECT");
    assert_eq!(b.changes.len(), 2);
    assert!(b.changes.iter().all(|ch| ch.table == "cdc_g" && ch.insert));
    c.query_drop("DROP TABLE cdc_g").await.unwrap();
    let ev = step(&mut c, &mut s, "DO 0").await;
    assert_eq!(schema(&ev, 0).kind, DdlKind::Drop);

    // Dropping the whole database drops every table freshet knew in it.
    let ev = step(&mut c, &mut s, "CREATE TABLE cdc_f (id INT PRIMARY KEY)").await;
    assert_eq!(schema(&ev, 0).kind, DdlKind::Create);
    let ev = step(&mut c, &mut s, &format!("DROP DATABASE `{db}`")).await;
    assert_eq!((schema(&ev, 0).table.as_str(), schema(&ev, 0).kind), ("cdc_f", DdlKind::DatabaseDropped));
    assert!(schema(&ev, 0).schema.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_behind_two_schema_versions_is_a_mismatch_not_a_wrong_row() {
    let (db, mut c) = fresh_db("ddllag").await;
    let mut s = stream(&db).await;
    // All of this is written before the stream reads any of it: when the stream sees the
    // CREATE and decodes the first insert, information_schema already describes the table
    // after the ALTER.
    c.query_drop("CREATE TABLE cdc_l (id INT PRIMARY KEY, a INT)").await.unwrap();
    c.query_drop("INSERT INTO cdc_l VALUES (1, 1)").await.unwrap();
    c.query_drop("ALTER TABLE cdc_l ADD COLUMN b INT").await.unwrap();
    c.query_drop("INSERT INTO cdc_l VALUES (2, 2, 2)").await.unwrap();
    let r = within(20, "mismatch", async {
        loop {
            match s.next().await {
                Ok(StreamEvent::Batch(b)) if !b.changes.is_empty() => break Ok(b),
                Ok(_) => continue,
                Err(e) => break Err(e),
            }
        }
    })
    .await;
    match r {
        Err(CdcError::SchemaMismatch { table, .. }) => assert_eq!(table, "cdc_l"),
        other => panic!("expected a schema mismatch, got {other:?}"),
    }
    drop_db(&db).await;
}
