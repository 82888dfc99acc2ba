//! Fuzzing the binlog side of freshet with proptest at scale (why proptest and not cargo-fuzz:
//! docs/decisions.md): arbitrary event bytes through mysql_common's event reader and
//! `events::classify`, and arbitrary cells of every wire shape through `decode` for every
//! column type. Properties: nothing panics; a decoded value is always the column type's own
//! kind or an error naming what was unexpected.
//!
//! Cases per property: `FRESHET_FUZZ_CASES` (default 20,000, which keeps this under a minute
//! in CI; set it higher for a longer run).

use freshet_cdc::decode::decode;
use freshet_cdc::events::classify;
use freshet_cdc::schema::{Charset, ColumnDecode};
use freshet_dataflow::{Collation, SqlType, Value};
use mysql_async::Value as MyValue;
use mysql_async::binlog::BinlogVersion;
use mysql_async::binlog::events::{Event, FormatDescriptionEvent};
use mysql_async::binlog::value::BinlogValue;
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("FRESHET_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000)
}

fn sql_types() -> Vec<SqlType> {
    vec![
        SqlType::Int { bytes: 1, unsigned: false },
        SqlType::Int { bytes: 2, unsigned: true },
        SqlType::Int { bytes: 3, unsigned: false },
        SqlType::Int { bytes: 4, unsigned: true },
        SqlType::Int { bytes: 8, unsigned: false },
        SqlType::Int { bytes: 8, unsigned: true },
        SqlType::Float,
        SqlType::Double,
        SqlType::Decimal { precision: 10, scale: 2 },
        SqlType::Decimal { precision: 28, scale: 0 },
        SqlType::Text,
        SqlType::Bytes,
        SqlType::Date,
        SqlType::Time { fsp: 0 },
        SqlType::Time { fsp: 6 },
        SqlType::DateTime { fsp: 3 },
        SqlType::Timestamp { fsp: 0 },
        SqlType::Year,
        SqlType::Enum(vec!["a".into(), "b".into()]),
        SqlType::Set(vec!["x".into(), "y".into(), "z".into()]),
        SqlType::Bit { bits: 1 },
        SqlType::Bit { bits: 64 },
        SqlType::Json,
    ]
}

/// Every shape mysql_common may hand over for a cell.
fn cell() -> impl Strategy<Value = MyValue> {
    prop_oneof![
        Just(MyValue::NULL),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(MyValue::Bytes),
        any::<i64>().prop_map(MyValue::Int),
        any::<u64>().prop_map(MyValue::UInt),
        any::<f32>().prop_map(MyValue::Float),
        any::<f64>().prop_map(MyValue::Double),
        (any::<u16>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u32>())
            .prop_map(|(y, mo, d, h, mi, s, us)| MyValue::Date(y, mo, d, h, mi, s, us)),
        // TIME as the binlog yields it (at most 838:59:59): mysql_common's own Debug, which
        // decode's errors use, overflows past u32 hours in debug builds.
        (any::<bool>(), 0u32..40, any::<u8>(), any::<u8>(), any::<u8>(), any::<u32>())
            .prop_map(|(neg, d, h, mi, s, us)| MyValue::Time(neg, d, h, mi, s, us)),
    ]
}

/// Whether `v` is a value a column of type `ty` may hold.
fn fits(ty: &SqlType, v: &Value) -> bool {
    matches!(
        (ty, v),
        (_, Value::Null)
            | (SqlType::Int { unsigned: false, .. }, Value::Int(_))
            | (SqlType::Year, Value::Year(_))
            | (SqlType::Int { unsigned: true, .. }, Value::UInt(_))
            | (SqlType::Text, Value::Text(..))
            | (SqlType::Bytes, Value::Bytes(_))
            | (SqlType::Json, Value::Json(_))
            | (SqlType::Float | SqlType::Double, Value::Double(_) | Value::Float(_))
            | (SqlType::Decimal { .. }, Value::Decimal(_))
            | (SqlType::Date, Value::Date(_))
            | (SqlType::DateTime { .. }, Value::DateTime(_))
            | (SqlType::Timestamp { .. }, Value::Timestamp(_))
            | (SqlType::Time { .. }, Value::Time(_))
            | (SqlType::Enum(_), Value::Enum(_))
            | (SqlType::Set(_), Value::Set(_))
            | (SqlType::Bit { .. }, Value::Bit(_))
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_cell_of_any_type_decodes_or_says_why(ty in proptest::sample::select(sql_types()), cell in cell(), charset in 0..4u8, width in proptest::option::of(0usize..300)) {
        let charset = [Charset::Utf8, Charset::Latin1, Charset::Utf16Be, Charset::Utf16Le][usize::from(charset)];
        let facts = ColumnDecode { charset, binary_width: width };
        let collation = matches!(ty, SqlType::Text).then_some(Collation::Utf8mb4GeneralCi);
        if let Ok(v) = decode(&ty, collation, &facts, BinlogValue::Value(cell)) {
            prop_assert!(fits(&ty, &v), "{ty:?} decoded as {v:?}");
        }
    }

    #[test]
    fn any_event_bytes_are_read_and_classified_without_panicking(ty in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut raw = Vec::with_capacity(19 + body.len());
        raw.extend(0u32.to_le_bytes());
        raw.push(ty);
        raw.extend(1u32.to_le_bytes());
        raw.extend((19 + body.len() as u32).to_le_bytes());
        raw.extend(1000u32.to_le_bytes());
        raw.extend(0u16.to_le_bytes());
        raw.extend(&body);
        let fde = FormatDescriptionEvent::new(BinlogVersion::Version4);
        // Not `ev.read_data()`: mysql_common 0.37 itself overflows (debug builds) on some
        // malformed events there; freshet reads rows events only from its own upstream.
        if let Ok(ev) = Event::read(&fde, &raw[..]) {
            let _ = classify(&ev);
        }
    }
}
