//! Every column type round-trips: the value written by SQL, as the server returns it to a
//! SELECT (binary protocol, UTC), equals the value decoded from the binlog, edge values
//! included; and a few edge values are also checked against hand-written expectations.

mod common;

use std::collections::HashMap;

use common::*;
use freshet_cdc::MariaDb;
use freshet_cdc::result::{convert, result_columns};
use freshet_cdc::schema::load_tables;
use freshet_dataflow::{Row, Value};
use mysql_async::prelude::Queryable;

const TABLE: &str = "CREATE TABLE cdc_types (
    id INT PRIMARY KEY,
    ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
    mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
    f FLOAT, d DOUBLE, dec1 DECIMAL(10,2), dec2 DECIMAL(28,10), dec3 DECIMAL(5,0),
    c CHAR(5), vc VARCHAR(300) COLLATE utf8mb4_general_ci, vb VARCHAR(20) COLLATE utf8mb4_bin, tx TEXT,
    l1 VARCHAR(10) CHARACTER SET latin1, vbin VARBINARY(10), bn BINARY(4), bl BLOB,
    dt DATE, tm TIME, tm6 TIME(6), dtm DATETIME, dtm6 DATETIME(6), ts TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL,
    y YEAR, e ENUM('a','b','c'), s SET('x','y','z'), b1 BIT(1), b64 BIT(64), j JSON,
    u16c VARCHAR(10) CHARACTER SET utf16, u16le VARCHAR(10) CHARACTER SET utf16le,
    u32c VARCHAR(10) CHARACTER SET utf32, ucs VARCHAR(10) CHARACTER SET ucs2
)";

const ROWS: &[&str] = &[
    // minimums
    "(1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
      -3.40282e38, -1.7976931348623157e308, -99999999.99, -999999999999999999.9999999999, -99999,
      '', '', '', '', '', '', '', '',
      '1000-01-01', '-838:59:59', '-838:59:59.000000', '1000-01-01 00:00:00', '1000-01-01 00:00:00.000000',
      '1970-01-01 00:00:01', '1970-01-01 00:00:01.000000', 1901, 'a', '', 0, 0, '[]', '', '', '', '')",
    // maximums
    "(2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
      3.40282e38, 1.7976931348623157e308, 99999999.99, 999999999999999999.9999999999, 99999,
      'zzzzz', REPEAT('é', 300), 'Zz', REPEAT('x', 1000), 'ÿ€', 0xFFFFFFFFFFFFFFFFFFFF, 0xFFFFFFFF, REPEAT(0xFF, 65535),
      '9999-12-31', '838:59:59', '838:59:59.000000', '9999-12-31 23:59:59', '9999-12-31 23:59:59.999999',
      '2038-01-19 03:14:07', '2038-01-19 03:14:07.999999', 2155, 'c', 'x,y,z', 1, 18446744073709551615,
      '{\"a\": [1, 2.5, \"x\"], \"b\": null, \"c\": {\"d\": true}}', 'a€😀', 'a€😀', 'a€😀', 'aé€')",
    // all NULL
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    // middling and awkward values
    "(4, -1, 1, -2, 2, -3, 3, -4, 4, -5, 5,
      1.17549e-38, 2.2250738585072014e-308, 0.50, -0.0000000001, 0,
      'ab  ', 'Ünïcødé 😀 mixed', 'a ', 'line\\nbreak\\ttab', 'café', 0x00, 0x6100, 0x00010203,
      '0000-00-00', '00:00:00', '-00:00:00.000001', '2024-02-29 12:34:56', '2024-02-29 12:34:56.000001',
      '2000-02-29 00:00:00', '1999-12-31 23:59:59.5', 0, '', 'y', 0, 1, '\"just a string\"', 'z', 'z', 'z', 'z')",
];

/// Exact identity (variant and content), stricter than SQL equality.
fn exact(r: &Row) -> Vec<String> {
    r.iter().map(|v| format!("{v:?}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_column_type_round_trips() {
    let (db, mut c) = fresh_db("types").await;
    c.query_drop(TABLE).await.unwrap();
    let mut s = stream(&db).await;
    // Non-strict, so that the ENUM error value '' (index 0) can be written.
    c.query_drop("SET SESSION sql_mode = ''").await.unwrap();
    for r in ROWS {
        c.query_drop(format!("INSERT INTO cdc_types VALUES {r}")).await.unwrap();
    }
    c.query_drop("UPDATE cdc_types SET ti = ti + 1, vc = 'updated' WHERE id = 4").await.unwrap();
    c.query_drop("DELETE FROM cdc_types WHERE id = 1").await.unwrap();
    let (got, _) = within(30, "binlog batches", batches(&mut s, ROWS.len() + 2)).await;

    // The server's own answer for every row, converted by the fill path.
    let tables = load_tables(&mut c, &MariaDb, &db, None).await.unwrap();
    let rows: Vec<mysql_async::Row> = c.exec("SELECT * FROM cdc_types ORDER BY id", ()).await.unwrap();
    let mut server: HashMap<i64, Row> = HashMap::new();
    for row in rows {
        let cols = result_columns(row.columns_ref(), &tables);
        let vals: Row = row.unwrap().into_iter().zip(&cols).map(|(v, col)| convert(col, v).unwrap()).collect();
        let Value::Int(id) = vals[0] else { panic!("id") };
        server.insert(id, vals);
    }

    // Inserts 1..=4 arrive one per batch, in order, and equal the server's rows (row 1 was
    // deleted afterwards: its delete image is checked below instead).
    for (i, b) in got[..ROWS.len()].iter().enumerate() {
        assert_eq!(b.changes.len(), 1);
        let ch = &b.changes[0];
        assert!(ch.insert && ch.table == "cdc_types");
        let id = i as i64 + 1;
        if id == 1 {
            continue;
        }
        let want = if id == 4 { None } else { server.get(&id) };
        if let Some(want) = want {
            assert_eq!(exact(&ch.row), exact(want), "row {id}: binlog vs SELECT");
        }
    }
    // The update is -old +new; the new image equals the server's row 4.
    let upd = &got[ROWS.len()];
    assert_eq!(upd.changes.len(), 2);
    assert!(!upd.changes[0].insert && upd.changes[1].insert);
    assert_eq!(exact(&upd.changes[0].row), exact(&got[3].changes[0].row), "update's before image = inserted row");
    assert_eq!(exact(&upd.changes[1].row), exact(&server[&4]), "update's after image = SELECT");
    // The delete's image is row 1 as inserted.
    let del = &got[ROWS.len() + 1];
    assert!(!del.changes[0].insert);
    assert_eq!(exact(&del.changes[0].row), exact(&got[0].changes[0].row));

    // Hand-written expectations for edge values (independent of the SELECT path).
    let r1 = &got[0].changes[0].row;
    let r2 = &got[1].changes[0].row;
    let r4 = &got[3].changes[0].row;
    assert!(matches!(r1[1], Value::Int(-128)));
    assert!(matches!(r2[2], Value::UInt(255)));
    assert!(matches!(r2[6], Value::UInt(16_777_215)));
    assert!(matches!(r1[9], Value::Int(i64::MIN)));
    assert!(matches!(r1[5], Value::Int(-8_388_608)));
    assert!(matches!(r4[5], Value::Int(-3)));
    assert!(matches!(r2[10], Value::UInt(u64::MAX)));
    assert_eq!(format!("{:?}", r2[14]), "999999999999999999.9999999999");
    assert_eq!(format!("{:?}", r4[13]), "0.50");
    assert!(matches!(&r4[16], Value::Text(s, _) if &**s == "ab"), "CHAR loses trailing spaces: {:?}", r4[16]);
    assert!(matches!(&r4[17], Value::Text(s, _) if &**s == "Ünïcødé 😀 mixed"));
    assert!(matches!(&r2[20], Value::Text(s, _) if &**s == "ÿ€"), "latin1 decoded: {:?}", r2[20]);
    assert!(matches!(&r4[22], Value::Bytes(b) if **b == [0x61, 0, 0, 0]), "BINARY(4) padded: {:?}", r4[22]);
    assert!(matches!(&r2[23], Value::Bytes(b) if b.len() == 65_535));
    assert!(matches!(r1[25], Value::Time(t) if t == -(838 * 3600 + 59 * 60 + 59) * 1_000_000));
    assert!(matches!(r4[26], Value::Time(-1)));
    assert_eq!(freshet_dataflow::expr::text_of(&r2[28]).unwrap(), "9999-12-31 23:59:59.999999");
    assert_eq!(freshet_dataflow::expr::text_of(&r2[30]).unwrap(), "2038-01-19 03:14:07.999999");
    assert_eq!(freshet_dataflow::expr::text_of(&r4[29]).unwrap(), "2000-02-29 00:00:00");
    assert!(matches!(r4[31], Value::Year(0)));
    assert!(matches!(r2[31], Value::Year(2155)));
    assert!(matches!(r2[32], Value::Enum(3)));
    assert!(matches!(r4[32], Value::Enum(0)));
    assert!(matches!(r2[33], Value::Set(7)));
    assert!(matches!(r2[35], Value::Bit(u64::MAX)));
    assert!(matches!(&r4[36], Value::Json(s) if &**s == "\"just a string\""));
    assert!(got[2].changes[0].row[1..].iter().all(Value::is_null));
    for i in 37..40 {
        assert!(matches!(&r2[i], Value::Text(s, _) if &**s == "a€😀"), "column {i}: {:?}", r2[i]);
    }
    assert!(matches!(&r2[40], Value::Text(s, _) if &**s == "aé€"), "ucs2: {:?}", r2[40]);
    // Every decoded value, sent back as a statement parameter (what a fill keyed by that
    // column does), finds its row on the server.
    let names: Vec<String> = tables["cdc_types"].schema.columns.iter().map(|c| c.name.clone()).collect();
    for (id, row) in [(2, r2), (4, &upd.changes[1].row)] {
        for (i, v) in row.iter().enumerate().skip(1) {
            let sql = format!("SELECT COUNT(*) FROM cdc_types WHERE id = {id} AND `{}` = ?", names[i]);
            let n: Option<i64> = c.exec_first(sql.as_str(), (freshet_cdc::result::param(v),)).await.unwrap();
            assert_eq!(n, Some(1), "row {id} column {} value {v:?} as a parameter", names[i]);
        }
    }
    // Positions strictly increase.
    assert!(got.windows(2).all(|w| w[0].position < w[1].position));
    drop_db(&db).await;
}
