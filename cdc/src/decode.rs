//! Binlog row values to dataflow [`Value`]s, using the table's schema.
//!
//! Owns: the conversion of one decoded binlog cell (mysql_common's [`BinlogValue`], which knows
//! the wire layout of every column type) into the [`Value`] the dataflow would get from the
//! server's own SELECT. Does not own: the wire layout itself (mysql_common), schemas (`schema`).
//!
//! Invariant: for every column type, `decode(binlog cell)` equals the value the server returns
//! for the same row (the round-trip test checks every type, edge values included). Where the
//! binlog and SELECT differ, this module is where they are reconciled:
//! - signedness: with `binlog_row_metadata` below FULL the table map has no signedness, so
//!   mysql_common decodes unsigned columns as signed; the schema's `unsigned` reinterprets the
//!   bits at the column's width;
//! - TIMESTAMP is seconds since the epoch in the binlog: converted to a UTC calendar value
//!   (fills read with `time_zone = '+00:00'` so both agree);
//! - BINARY(n) loses trailing zero bytes in the binlog: padded back to n;
//! - YEAR 0 arrives as 1900 (mysql_common adds 1900 to the stored byte);
//! - BIT arrives big-endian, SET little-endian bitmask bytes, DECIMAL as text;
//! - latin1 text is Windows-1252.

use freshet_dataflow::{Collation, Date, DateTime, Decimal, SqlType, Value};
use mysql_async::Value as MyValue;
use mysql_async::binlog::value::BinlogValue;

use crate::schema::{Charset, ColumnDecode};

/// Converts one binlog cell of a column of type `ty`. Errors name what was unexpected.
pub fn decode(ty: &SqlType, collation: Option<Collation>, facts: &ColumnDecode, cell: BinlogValue<'_>) -> Result<Value, String> {
    let v = match cell {
        BinlogValue::Value(v) => v,
        BinlogValue::Jsonb(_) => {
            // MySQL's binary JSON: mysql_common renders it as JSON text.
            return match MyValue::try_from(cell) {
                Ok(MyValue::Bytes(b)) => Ok(Value::Json(String::from_utf8_lossy(&b).into())),
                Ok(other) => Err(format!("unexpected JSON rendering {other:?}")),
                Err(e) => Err(e.to_string()),
            };
        }
        BinlogValue::JsonDiff(_) => {
            return Err("partial JSON update (binlog_row_value_options=PARTIAL_JSON) is not supported; set it to ''".into());
        }
    };
    if let MyValue::NULL = v {
        return Ok(Value::Null);
    }
    match ty {
        SqlType::Int { .. } | SqlType::Float | SqlType::Double | SqlType::Decimal { .. } => numeric(ty, v),
        SqlType::Text | SqlType::Bytes | SqlType::Json => textual(ty, collation, facts, v),
        SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. } | SqlType::Time { .. } | SqlType::Year => temporal(ty, v),
        SqlType::Enum(_) | SqlType::Set(_) | SqlType::Bit { .. } => bitwise(ty, v),
    }
}

/// What was unexpected, without `Debug` on the cell: mysql_common's `Debug` for TIME computes
/// `days * 24 + hours` in `u32`, which overflows (a panic in debug builds) on a cell no server
/// writes but a corrupt or hostile event can carry; and a cell's content does not belong in a
/// log line. Names the cell's kind and size only.
fn bad(v: &MyValue, ty: &SqlType) -> String {
    let cell = match v {
        MyValue::NULL => "NULL".to_string(),
        MyValue::Bytes(b) => format!("{} bytes", b.len()),
        MyValue::Int(_) => "a signed integer".to_string(),
        MyValue::UInt(_) => "an unsigned integer".to_string(),
        MyValue::Float(_) => "a FLOAT".to_string(),
        MyValue::Double(_) => "a DOUBLE".to_string(),
        MyValue::Date(..) => "a date/time".to_string(),
        MyValue::Time(..) => "a TIME".to_string(),
    };
    format!("unexpected {cell} for a column of type {}", type_name(ty))
}

/// `ty`'s family, for error messages (its `Debug` would print ENUM and SET members).
fn type_name(ty: &SqlType) -> &'static str {
    match ty {
        SqlType::Int { .. } => "INT",
        SqlType::Float => "FLOAT",
        SqlType::Double => "DOUBLE",
        SqlType::Decimal { .. } => "DECIMAL",
        SqlType::Text => "text",
        SqlType::Bytes => "binary",
        SqlType::Json => "JSON",
        SqlType::Date => "DATE",
        SqlType::DateTime { .. } => "DATETIME",
        SqlType::Timestamp { .. } => "TIMESTAMP",
        SqlType::Time { .. } => "TIME",
        SqlType::Year => "YEAR",
        SqlType::Enum(_) => "ENUM",
        SqlType::Set(_) => "SET",
        SqlType::Bit { .. } => "BIT",
    }
}

/// Integers (signedness and width from the schema), floats, DECIMAL (text).
fn numeric(ty: &SqlType, v: MyValue) -> Result<Value, String> {
    Ok(match (ty, v) {
        (SqlType::Int { bytes, unsigned }, v) => {
            let i = match v {
                MyValue::Int(i) => i,
                MyValue::UInt(u) => u as i64,
                ref v => return Err(bad(v, ty)),
            };
            if *unsigned {
                let mask = if *bytes >= 8 { u64::MAX } else { (1u64 << (8 * *bytes as u32)) - 1 };
                Value::UInt(i as u64 & mask)
            } else if *bytes < 8 {
                // Sign-extend from the column's width: mysql_common's 24-bit read does not.
                let shift = 64 - 8 * *bytes as u32;
                Value::Int((i << shift) >> shift)
            } else {
                Value::Int(i)
            }
        }
        (SqlType::Float, MyValue::Float(f)) => Value::Float(f),
        (SqlType::Float, MyValue::Double(d)) => Value::Float(d as f32),
        (SqlType::Double, MyValue::Double(d)) => Value::Double(d),
        (SqlType::Double, MyValue::Float(f)) => Value::Double(f as f64),
        (SqlType::Decimal { .. }, MyValue::Bytes(b)) => {
            let s = std::str::from_utf8(&b).map_err(|e| e.to_string())?;
            Value::Decimal(Decimal::parse(s).ok_or_else(|| format!("bad DECIMAL text {s:?}"))?)
        }
        (_, v) => return Err(bad(&v, ty)),
    })
}

/// Text (character set to UTF-8, collation from the schema), bytes (BINARY padding), JSON text.
fn textual(ty: &SqlType, collation: Option<Collation>, facts: &ColumnDecode, v: MyValue) -> Result<Value, String> {
    let MyValue::Bytes(mut b) = v else { return Err(bad(&v, ty)) };
    Ok(match ty {
        SqlType::Text => Value::Text(text(&b, facts.charset).into(), collation.unwrap_or(Collation::Binary)),
        SqlType::Json => Value::Json(String::from_utf8_lossy(&b).into()),
        _ => {
            if let Some(w) = facts.binary_width
                && b.len() < w
            {
                b.resize(w, 0);
            }
            Value::Bytes(b.into())
        }
    })
}

/// DATE, DATETIME, TIMESTAMP (epoch seconds to UTC), TIME (signed), YEAR.
fn temporal(ty: &SqlType, v: MyValue) -> Result<Value, String> {
    Ok(match (ty, v) {
        (SqlType::Date, MyValue::Date(y, m, d, ..)) => Value::Date(Date::new(y, m, d)),
        (SqlType::DateTime { .. }, MyValue::Date(y, mo, d, h, mi, s, us)) => {
            Value::DateTime(DateTime::new(Date::new(y, mo, d), h, mi, s, us))
        }
        (SqlType::Timestamp { .. }, MyValue::Bytes(b)) => {
            let s = std::str::from_utf8(&b).map_err(|e| e.to_string())?;
            let (secs, micros) = s.split_once('.').unwrap_or((s, "0"));
            let secs: i64 = secs.parse().map_err(|_| format!("bad TIMESTAMP {s:?}"))?;
            let micros: u32 = micros.parse().map_err(|_| format!("bad TIMESTAMP {s:?}"))?;
            Value::Timestamp(timestamp_utc(secs, micros))
        }
        (SqlType::Timestamp { .. }, MyValue::Int(secs)) => Value::Timestamp(timestamp_utc(secs, 0)),
        (SqlType::Time { .. }, MyValue::Time(neg, days, h, m, s, us)) => {
            let secs = ((days as i64 * 24 + h as i64) * 60 + m as i64) * 60 + s as i64;
            let micros = secs * 1_000_000 + us as i64;
            Value::Time(if neg { -micros } else { micros })
        }
        (SqlType::Year, MyValue::Bytes(b)) => {
            let y: u16 = std::str::from_utf8(&b).ok().and_then(|s| s.parse().ok()).ok_or_else(|| format!("bad YEAR {b:?}"))?;
            // The stored byte 0 means YEAR 0000; mysql_common adds 1900 to it. 1900 itself
            // is not a valid YEAR (1901..2155).
            Value::Year(if y == 1900 { 0 } else { y })
        }
        (SqlType::Year, MyValue::Int(y)) => Value::Year(y as u16),
        (_, v) => return Err(bad(&v, ty)),
    })
}

/// ENUM index, SET bitmask (little-endian bytes), BIT (big-endian bytes).
fn bitwise(ty: &SqlType, v: MyValue) -> Result<Value, String> {
    Ok(match (ty, &v) {
        (SqlType::Enum(_), MyValue::Int(i)) => Value::Enum(*i as u16),
        (SqlType::Set(_), MyValue::Bytes(b)) => Value::Set(le_u64(b).ok_or_else(|| bad(&v, ty))?),
        (SqlType::Bit { .. }, MyValue::Bytes(b)) => Value::Bit(be_u64(b).ok_or_else(|| bad(&v, ty))?),
        _ => return Err(bad(&v, ty)),
    })
}

fn le_u64(b: &[u8]) -> Option<u64> {
    (b.len() <= 8).then(|| b.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64))
}

fn be_u64(b: &[u8]) -> Option<u64> {
    (b.len() <= 8).then(|| b.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64))
}

/// Text bytes in `charset` as a Rust string.
pub fn text(b: &[u8], charset: Charset) -> String {
    match charset {
        Charset::Latin1 => b.iter().map(|&x| cp1252(x)).collect(),
        Charset::Utf16Be | Charset::Utf16Le => {
            let units = b.chunks(2).map(|c| match (charset, c) {
                (Charset::Utf16Be, [hi, lo]) => u16::from_be_bytes([*hi, *lo]),
                (_, [lo, hi]) => u16::from_le_bytes([*lo, *hi]),
                _ => 0xFFFD,
            });
            char::decode_utf16(units).map(|c| c.unwrap_or('\u{FFFD}')).collect()
        }
        Charset::Utf32Be => b
            .chunks(4)
            .map(|c| {
                let n = c.try_into().map(u32::from_be_bytes).unwrap_or(0xFFFD);
                char::from_u32(n).unwrap_or('\u{FFFD}')
            })
            .collect(),
        Charset::Utf8 | Charset::Ascii | Charset::Other => String::from_utf8_lossy(b).into_owned(),
    }
}

/// Windows-1252, which MySQL calls latin1. The five bytes 1252 leaves undefined map to the C1
/// control characters, as MySQL's own conversion does.
fn cp1252(b: u8) -> char {
    const HIGH: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž', '\u{8f}', '\u{90}', '‘', '’', '“', '”', '•',
        '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}', 'ž', 'Ÿ',
    ];
    match b {
        0x80..=0x9f => HIGH[(b - 0x80) as usize],
        _ => b as char,
    }
}

/// Seconds since the epoch (UTC) as a calendar value; 0 is MySQL's zero TIMESTAMP.
pub fn timestamp_utc(secs: i64, micros: u32) -> DateTime {
    if secs == 0 && micros == 0 {
        return DateTime::new(Date::new(0, 0, 0), 0, 0, 0, 0);
    }
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    DateTime::new(Date::new(y as u16, m, d), (rem / 3600) as u8, (rem / 60 % 60) as u8, (rem % 60) as u8, micros)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u8, u8) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> ColumnDecode {
        ColumnDecode { charset: Charset::Utf8, binary_width: None }
    }

    fn dec(ty: SqlType, v: MyValue) -> Value {
        decode(&ty, Some(Collation::Utf8mb4Bin), &facts(), BinlogValue::Value(v)).unwrap()
    }

    #[test]
    fn unsigned_reinterpreted_at_width() {
        assert!(matches!(dec(SqlType::Int { bytes: 1, unsigned: true }, MyValue::Int(-1)), Value::UInt(255)));
        assert!(matches!(dec(SqlType::Int { bytes: 3, unsigned: true }, MyValue::Int(-1)), Value::UInt(0xFF_FFFF)));
        assert!(matches!(dec(SqlType::Int { bytes: 8, unsigned: true }, MyValue::Int(-1)), Value::UInt(u64::MAX)));
        assert!(matches!(dec(SqlType::Int { bytes: 4, unsigned: false }, MyValue::Int(-5)), Value::Int(-5)));
        assert!(matches!(dec(SqlType::Int { bytes: 3, unsigned: false }, MyValue::Int(0xFF_FFFD)), Value::Int(-3)));
        assert!(matches!(dec(SqlType::Int { bytes: 3, unsigned: false }, MyValue::Int(8_388_607)), Value::Int(8_388_607)));
    }

    #[test]
    fn epoch_to_calendar() {
        let t = timestamp_utc(0, 1);
        assert_eq!((t.date().parts(), t.time()), ((1970, 1, 1), (0, 0, 0, 1)));
        let t = timestamp_utc(2_147_483_647, 999_999);
        assert_eq!((t.date().parts(), t.time()), ((2038, 1, 19), (3, 14, 7, 999_999)));
        let t = timestamp_utc(951_782_400, 0); // 2000-02-29
        assert_eq!(t.date().parts(), (2000, 2, 29));
        assert_eq!(timestamp_utc(0, 0), DateTime(0));
    }

    #[test]
    fn bits_sets_years_binary() {
        assert!(matches!(dec(SqlType::Bit { bits: 12 }, MyValue::Bytes(vec![0x0a, 0xbc])), Value::Bit(0xabc)));
        assert!(matches!(dec(SqlType::Set(vec![]), MyValue::Bytes(vec![0x05, 0x01])), Value::Set(0x105)));
        assert!(matches!(dec(SqlType::Year, MyValue::Bytes(b"1900".to_vec())), Value::Year(0)));
        assert!(matches!(dec(SqlType::Year, MyValue::Bytes(b"2155".to_vec())), Value::Year(2155)));
        let padded = decode(
            &SqlType::Bytes,
            None,
            &ColumnDecode { charset: Charset::Other, binary_width: Some(4) },
            BinlogValue::Value(MyValue::Bytes(vec![1])),
        )
        .unwrap();
        assert!(matches!(padded, Value::Bytes(ref b) if **b == [1, 0, 0, 0]));
    }

    #[test]
    fn latin1_is_cp1252() {
        assert_eq!(text(&[0x80, b'a', 0xe9], Charset::Latin1), "€aé");
    }

    #[test]
    fn utf16_and_utf32() {
        let s = "a€😀";
        let be: Vec<u8> = s.encode_utf16().flat_map(u16::to_be_bytes).collect();
        let le: Vec<u8> = s.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let u32be: Vec<u8> = s.chars().flat_map(|c| (c as u32).to_be_bytes()).collect();
        assert_eq!(text(&be, Charset::Utf16Be), s);
        assert_eq!(text(&le, Charset::Utf16Le), s);
        assert_eq!(text(&u32be, Charset::Utf32Be), s);
        assert_eq!(text(&[0xD8], Charset::Utf16Be), "\u{FFFD}");
    }

    /// A cell that does not fit its column is an error naming both, never a panic: a TIME of
    /// more than u32::MAX hours (no server writes one; a corrupt event can carry it) used to
    /// overflow in the error message itself.
    #[test]
    fn mismatched_cells_are_errors_not_panics() {
        let huge_time = MyValue::Time(false, u32::MAX, 23, 59, 59, 999_999);
        for ty in [SqlType::Int { bytes: 4, unsigned: false }, SqlType::Date, SqlType::Enum(vec![]), SqlType::Text] {
            let e = decode(&ty, None, &facts(), BinlogValue::Value(huge_time.clone())).unwrap_err();
            assert!(e.contains("TIME"), "{e}");
        }
        let e = decode(&SqlType::Double, None, &facts(), BinlogValue::Value(MyValue::Bytes(vec![1; 40]))).unwrap_err();
        assert_eq!(e, "unexpected 40 bytes for a column of type DOUBLE");
    }

    #[test]
    fn negative_time() {
        let v = dec(SqlType::Time { fsp: 6 }, MyValue::Time(true, 34, 22, 59, 59, 500_000));
        assert!(matches!(v, Value::Time(t) if t == -((838 * 3600 + 59 * 60 + 59) * 1_000_000 + 500_000)));
    }
}
