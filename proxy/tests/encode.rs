//! View rows encoded by freshet are byte-for-byte the rows MariaDB sends for the same values.
//! (New columns take a new table name: `CREATE TABLE IF NOT EXISTS` keeps an older table.)

mod common;

use common::*;
use freshet_dataflow::{Collation, Date, DateTime, Decimal, Value};
use freshet_proxy::encode::Unencodable;
use freshet_proxy::encode::text::{self, Column};
use freshet_proxy::protocol::Capabilities;
use freshet_proxy::protocol::column::ColumnDef;
use mysql_async::prelude::*;

const TABLE: &str = "CREATE TABLE IF NOT EXISTS encode_values (
    id INT PRIMARY KEY, i8 TINYINT, u64 BIGINT UNSIGNED, z INT(6) ZEROFILL, d DECIMAL(20,6), d0 DECIMAL(5,0),
    s VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, b VARBINARY(10), da DATE, dt DATETIME, dt3 DATETIME(3),
    t TIME, t2 TIME(2), y YEAR, e ENUM('small','large'), st SET('x','y','z'), bi BIT(10), n INT, j JSON)";

fn expected_rows() -> Vec<Vec<Value>> {
    let text = |s: &str| Value::Text(s.into(), Collation::Utf8mb4GeneralCi);
    let dec = |s: &str| Value::Decimal(Decimal::parse(s).unwrap());
    vec![
        vec![
            Value::Int(1),
            Value::Int(-128),
            Value::UInt(u64::MAX),
            Value::UInt(42),
            dec("-12345678901234.123456"),
            dec("-99999"),
            text("héllo 😀"),
            Value::Bytes(vec![0, 0xff, b'\''].into()),
            Value::Date(Date::new(2024, 2, 29)),
            Value::DateTime(DateTime::new(Date::new(9999, 12, 31), 23, 59, 59, 0)),
            Value::DateTime(DateTime::new(Date::new(1000, 1, 1), 0, 0, 0, 7_000)),
            Value::Time(-(838 * 3600 + 59 * 60 + 59) * 1_000_000),
            Value::Time(12 * 3600 * 1_000_000 + 340_000),
            Value::Year(2155),
            Value::Enum(2),
            Value::Set(0b101),
            Value::Bit(0x2aa),
            Value::Int(0),
            // MariaDB's JSON is LONGTEXT: the stored text, as the binlog carries it.
            Value::Json("{\"a\":  [1, \"é\"]}".into()),
        ],
        vec![
            Value::Int(2),
            Value::Null,
            Value::UInt(0),
            Value::UInt(0),
            dec("0.5"),
            dec("0"),
            text(""),
            Value::Bytes(Box::new([])),
            Value::Date(Date::new(0, 0, 0)),
            Value::Null,
            Value::Null,
            Value::Time(0),
            Value::Null,
            Value::Year(0),
            Value::Enum(1),
            Value::Set(0),
            Value::Bit(0),
            Value::Null,
            Value::Null,
        ],
    ]
}

/// Creates and fills `encode_values` with the rows of [`expected_rows`] (idempotent).
async fn setup() {
    let mut conn = direct().await;
    conn.query_drop(TABLE).await.unwrap();
    conn.query_drop(
        "REPLACE INTO encode_values VALUES
         (1, -128, 18446744073709551615, 42, -12345678901234.123456, -99999, 'héllo 😀', x'00ff27', '2024-02-29',
          '9999-12-31 23:59:59', '1000-01-01 00:00:00.007', '-838:59:59', '12:00:00.34', 2155, 'large', 'x,z', b'1010101010', 0, '{\"a\":  [1, \"é\"]}'),
         (2, NULL, 0, 0, 0.5, 0, '', '', '0000-00-00', NULL, NULL, '00:00:00', NULL, 0, 'small', '', b'0', NULL, NULL)",
    )
    .await
    .unwrap();
}

/// The columns (with their labels) and the row packets of a result set of `n` columns.
fn result_set(packets: &[Vec<u8>], n: usize, caps: u64) -> (Vec<Column>, &[Vec<u8>]) {
    let columns = packets[1..=n]
        .iter()
        .map(|p| {
            let def = ColumnDef::parse(p).unwrap();
            Column { labels: labels(&def.name), def }
        })
        .collect();
    let first_row = if caps & Capabilities::DEPRECATE_EOF != 0 { n + 1 } else { n + 2 };
    (columns, &packets[first_row..])
}

fn labels(column: &str) -> Vec<String> {
    match column {
        "e" => vec!["small".to_string(), "large".into()],
        "st" => vec!["x".into(), "y".into(), "z".into()],
        _ => vec![],
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn text_rows_match_the_servers_bytes() {
    setup().await;
    for caps in [DEFAULT_CAPS, DEFAULT_CAPS | Capabilities::DEPRECATE_EOF] {
        let mut raw = RawClient::connect(&upstream_addr(), caps).await.unwrap();
        let packets = raw.query("SELECT * FROM encode_values ORDER BY id").await;
        let (columns, rows) = result_set(&packets, packets[0][0] as usize, caps);
        let server_rows = &rows[..2];
        for (values, server) in expected_rows().iter().zip(server_rows) {
            let mut ours = Vec::new();
            text::row(&mut ours, values, &columns).unwrap();
            assert_eq!(
                &ours,
                server,
                "caps {caps:#x}: ours {:?} vs server {:?}",
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(server)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn what_is_not_reproduced_says_so() {
    let mut raw = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let packets = raw.query("SELECT CAST(1.5 AS DOUBLE) AS f, NOW() AS ts, _latin1'x' AS l").await;
    let defs: Vec<ColumnDef> = packets[1..=3].iter().map(|p| ColumnDef::parse(p).unwrap()).collect();
    let col = |i: usize| Column { def: defs[i].clone(), labels: vec![] };
    let ts = DateTime::new(Date::new(2024, 1, 1), 0, 0, 0, 0);
    assert_eq!(text::row(&mut Vec::new(), &[Value::Double(1.5)], &[col(0)]), Err(Unencodable::Float));
    // NOW() is DATETIME.
    assert!(text::row(&mut Vec::new(), &[Value::DateTime(ts)], &[col(1)]).is_ok());
    // The result charset follows character_set_results (utf8mb4 here), not the literal's.
    assert!(text::row(&mut Vec::new(), &[Value::Text("x".into(), freshet_dataflow::Collation::Binary)], &[col(2)]).is_ok());
}

#[tokio::test(flavor = "multi_thread")]
async fn binary_rows_match_the_servers_bytes() {
    let mut conn = direct().await;
    conn.query_drop("CREATE TABLE IF NOT EXISTS encode_floats (id INT PRIMARY KEY, f FLOAT, g DOUBLE)").await.unwrap();
    conn.query_drop("REPLACE INTO encode_floats VALUES (1, 1.5, -2.25e-300), (2, -0.1, 1e308)").await.unwrap();
    setup().await;
    let float_rows = vec![
        vec![Value::Int(1), Value::Float(1.5), Value::Double(-2.25e-300)],
        vec![Value::Int(2), Value::Float(-0.1), Value::Double(1e308)],
    ];
    for (sql, expected) in
        [("SELECT * FROM encode_values ORDER BY id", expected_rows()), ("SELECT * FROM encode_floats ORDER BY id", float_rows)]
    {
        for caps in [DEFAULT_CAPS, DEFAULT_CAPS | Capabilities::DEPRECATE_EOF] {
            let mut raw = RawClient::connect(&upstream_addr(), caps).await.unwrap();
            raw.send(&[&[0x16u8][..], sql.as_bytes()].concat()).await;
            let ok = raw.packet().await;
            assert_eq!(ok[0], 0, "prepare failed: {}", String::from_utf8_lossy(&ok));
            let id = [ok[1], ok[2], ok[3], ok[4]];
            let n = u16::from_le_bytes([ok[5], ok[6]]) as usize;
            for _ in 0..n + usize::from(caps & Capabilities::DEPRECATE_EOF == 0) {
                raw.packet().await;
            }
            raw.send(&[&[0x17u8][..], &id, &[0, 1, 0, 0, 0]].concat()).await;
            let packets = raw.read_results().await;
            let (columns, rows) = result_set(&packets, n, caps);
            for (values, server) in expected.iter().zip(rows) {
                let mut ours = Vec::new();
                freshet_proxy::encode::binary::row(&mut ours, values, &columns).unwrap();
                assert_eq!(&ours, server, "{sql} caps {caps:#x}");
            }
        }
    }
}

/// A TIMESTAMP is sent as a session in UTC receives it (only such sessions are answered from a
/// view that reads one): UTC's wall-clock time with the column's fractional digits, and the
/// zero TIMESTAMP as zeros.
#[tokio::test(flavor = "multi_thread")]
async fn a_timestamp_is_utcs_wall_clock_time() {
    let mut conn = direct().await;
    conn.query_drop("SET time_zone = '+00:00', sql_mode = ''").await.unwrap();
    conn.query_drop("CREATE TABLE IF NOT EXISTS encode_timestamps (id INT PRIMARY KEY, ts3 TIMESTAMP(3) NULL, ts0 TIMESTAMP NULL)")
        .await
        .unwrap();
    conn.query_drop(
        "REPLACE INTO encode_timestamps VALUES (1, '2038-01-19 03:14:07.999', '1970-01-01 00:00:01'), (2, '2024-02-29 23:59:59.5', '0000-00-00 00:00:00'), (3, NULL, NULL)",
    )
    .await
    .unwrap();
    let ts = |y, mo, d, h, mi, s, us| Value::Timestamp(DateTime::new(Date::new(y, mo, d), h, mi, s, us));
    let expected = [
        vec![Value::Int(1), ts(2038, 1, 19, 3, 14, 7, 999_000), ts(1970, 1, 1, 0, 0, 1, 0)],
        vec![Value::Int(2), ts(2024, 2, 29, 23, 59, 59, 500_000), ts(0, 0, 0, 0, 0, 0, 0)],
        vec![Value::Int(3), Value::Null, Value::Null],
    ];
    let mut raw = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    raw.query("SET time_zone = '+00:00'").await;
    let packets = raw.query("SELECT id, ts3, ts0 FROM encode_timestamps ORDER BY id").await;
    let (columns, rows) = result_set(&packets, 3, DEFAULT_CAPS);
    for (values, server) in expected.iter().zip(rows) {
        let mut ours = Vec::new();
        text::row(&mut ours, values, &columns).unwrap();
        assert_eq!(&ours, server, "ours {:?} vs server {:?}", String::from_utf8_lossy(&ours), String::from_utf8_lossy(server));
    }
}
