//! Stored rows: an exact, self-describing encoding of a [`Row`] (every value keeps its type,
//! spelling and collation, so a row read back is `ExactRow`-equal to the one written: fills
//! from the replica must hand the dataflow the upstream's exact values).
//!
//! Layout: a version byte, the column count (u16), then per value a tag byte and its payload
//! (fixed-width little-endian numbers; text and bytes length-prefixed with u32).

use freshet_dataflow::{Collation, Date, DateTime, Decimal, Row, Value};

const VERSION: u8 = 1;

/// Why stored bytes could not be read back as a row.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("stored row is malformed: {0}")]
pub struct RowCodeError(&'static str);

/// Encodes `row`.
pub fn encode_row(row: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + row.len() * 9);
    out.push(VERSION);
    out.extend_from_slice(&(row.len() as u16).to_le_bytes());
    for v in row {
        value(v, &mut out);
    }
    out
}

fn value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(0),
        Value::Int(i) => tagged(1, &i.to_le_bytes(), out),
        Value::UInt(u) => tagged(2, &u.to_le_bytes(), out),
        Value::Float(f) => tagged(3, &f.to_bits().to_le_bytes(), out),
        Value::Double(f) => tagged(4, &f.to_bits().to_le_bytes(), out),
        Value::Decimal(d) => {
            out.push(5);
            out.extend_from_slice(&d.mantissa().to_le_bytes());
            out.push(d.scale());
        }
        Value::Text(s, c) => {
            out.push(6);
            out.push(collation_code(*c));
            bytes(s.as_bytes(), out);
        }
        Value::Bytes(b) => {
            out.push(7);
            bytes(b, out);
        }
        Value::Date(d) => tagged(8, &d.0.to_le_bytes(), out),
        Value::Time(t) => tagged(9, &t.to_le_bytes(), out),
        Value::DateTime(d) => tagged(10, &d.0.to_le_bytes(), out),
        Value::Timestamp(d) => tagged(11, &d.0.to_le_bytes(), out),
        Value::Year(y) => tagged(12, &y.to_le_bytes(), out),
        Value::Enum(e) => tagged(13, &e.to_le_bytes(), out),
        Value::Set(s) => tagged(14, &s.to_le_bytes(), out),
        Value::Bit(b) => tagged(15, &b.to_le_bytes(), out),
        Value::Json(s) => {
            out.push(16);
            bytes(s.as_bytes(), out);
        }
    }
}

fn tagged(tag: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    out.extend_from_slice(payload);
}

fn bytes(b: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn collation_code(c: Collation) -> u8 {
    match c {
        Collation::Binary => 0,
        Collation::Utf8mb4Bin => 1,
        Collation::Utf8mb4GeneralCi => 2,
        Collation::Utf8mb4UnicodeCi => 3,
    }
}

fn collation_of(code: u8) -> Option<Collation> {
    Some(match code {
        0 => Collation::Binary,
        1 => Collation::Utf8mb4Bin,
        2 => Collation::Utf8mb4GeneralCi,
        3 => Collation::Utf8mb4UnicodeCi,
        _ => return None,
    })
}

/// A cursor over stored bytes.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RowCodeError> {
        if self.0.len() < n {
            return Err(RowCodeError("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], RowCodeError> {
        let b = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, RowCodeError> {
        Ok(self.take(1)?[0])
    }
    fn sized(&mut self) -> Result<&'a [u8], RowCodeError> {
        let n = u32::from_le_bytes(self.array()?) as usize;
        self.take(n)
    }
    fn text(&mut self) -> Result<Box<str>, RowCodeError> {
        std::str::from_utf8(self.sized()?).map(Into::into).map_err(|_| RowCodeError("text is not UTF-8"))
    }
}

/// Decodes a row written by [`encode_row`].
pub fn decode_row(b: &[u8]) -> Result<Row, RowCodeError> {
    let mut c = Cursor(b);
    if c.u8()? != VERSION {
        return Err(RowCodeError("unknown version"));
    }
    let n = u16::from_le_bytes(c.array()?) as usize;
    let mut row = Vec::with_capacity(n);
    for _ in 0..n {
        row.push(decode_value(&mut c)?);
    }
    if !c.0.is_empty() {
        return Err(RowCodeError("trailing bytes"));
    }
    Ok(row.into())
}

fn decode_value(c: &mut Cursor<'_>) -> Result<Value, RowCodeError> {
    Ok(match c.u8()? {
        0 => Value::Null,
        1 => Value::Int(i64::from_le_bytes(c.array()?)),
        2 => Value::UInt(u64::from_le_bytes(c.array()?)),
        3 => Value::Float(f32::from_bits(u32::from_le_bytes(c.array()?))),
        4 => Value::Double(f64::from_bits(u64::from_le_bytes(c.array()?))),
        5 => {
            let m = i128::from_le_bytes(c.array()?);
            Value::Decimal(Decimal::new(m, c.u8()?).ok_or(RowCodeError("decimal out of range"))?)
        }
        6 => {
            let coll = collation_of(c.u8()?).ok_or(RowCodeError("unknown collation"))?;
            Value::Text(c.text()?, coll)
        }
        7 => Value::Bytes(c.sized()?.into()),
        8 => Value::Date(Date(u32::from_le_bytes(c.array()?))),
        9 => Value::Time(i64::from_le_bytes(c.array()?)),
        10 => Value::DateTime(DateTime(u64::from_le_bytes(c.array()?))),
        11 => Value::Timestamp(DateTime(u64::from_le_bytes(c.array()?))),
        12 => Value::Year(u16::from_le_bytes(c.array()?)),
        13 => Value::Enum(u16::from_le_bytes(c.array()?)),
        14 => Value::Set(u64::from_le_bytes(c.array()?)),
        15 => Value::Bit(u64::from_le_bytes(c.array()?)),
        16 => Value::Json(c.text()?),
        _ => return Err(RowCodeError("unknown value tag")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use freshet_dataflow::value::ExactRow;

    #[test]
    fn every_kind_round_trips_exactly() {
        let row: Row = vec![
            Value::Null,
            Value::Int(-7),
            Value::UInt(u64::MAX),
            Value::Float(1.5),
            Value::Double(-0.25),
            Value::Decimal(Decimal::new(-12340, 3).unwrap()),
            Value::text("Ünïcode ", Collation::Utf8mb4UnicodeCi),
            Value::Bytes(vec![0, 1, 255].into()),
            Value::Date(Date::new(2024, 2, 29)),
            Value::Time(-3_000_001),
            Value::DateTime(DateTime::new(Date::new(1999, 12, 31), 23, 59, 59, 999_999)),
            Value::Timestamp(DateTime::new(Date::new(2038, 1, 19), 3, 14, 7, 0)),
            Value::Year(2155),
            Value::Enum(3),
            Value::Set(0b101),
            Value::Bit(1),
            Value::Json("{\"a\": 1}".into()),
        ]
        .into();
        let back = decode_row(&encode_row(&row)).unwrap();
        assert_eq!(ExactRow(back), ExactRow(row));
    }

    #[test]
    fn malformed_bytes_are_an_error() {
        let b = encode_row(&[Value::text("abc", Collation::Binary)]);
        for cut in 0..b.len() {
            assert!(decode_row(&b[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode_row(&[VERSION, 1, 0, 99]).is_err());
    }
}
