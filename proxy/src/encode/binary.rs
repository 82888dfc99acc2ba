//! The binary protocol (COM_STMT_EXECUTE results): a 0x00 header, a NULL bitmap with a 2-bit
//! offset, then each non-NULL value in the wire form its column type dictates.

use freshet_dataflow::{Date, ValueRef};

use super::text::{Column, put_string, put_text};
use super::{Unencodable, json_text, utf8_text};
use crate::protocol::column::types;

/// Appends one binary-protocol row (the packet payload) for `values` under `columns`.
pub fn row<'a, V: Into<ValueRef<'a>>>(
    out: &mut Vec<u8>,
    values: impl IntoIterator<Item = V, IntoIter: ExactSizeIterator>,
    columns: &[Column],
) -> Result<(), Unencodable> {
    let mut values = values.into_iter();
    if values.len() != columns.len() {
        return Err(Unencodable::Mismatch);
    }
    out.push(0x00);
    let bitmap_at = out.len();
    out.resize(bitmap_at + (values.len() + 7 + 2) / 8, 0);
    let mut scratch = Vec::new();
    // By column, as `text::row` reads them.
    for (i, column) in columns.iter().enumerate() {
        let Some(value) = values.next() else { break };
        let value = value.into();
        if let ValueRef::Null = value {
            let bit = i + 2;
            out[bitmap_at + bit / 8] |= 1 << (bit % 8);
            continue;
        }
        value_bytes(out, &mut scratch, value, column)?;
    }
    Ok(())
}

#[inline]
fn value_bytes(out: &mut Vec<u8>, scratch: &mut Vec<u8>, value: ValueRef<'_>, column: &Column) -> Result<(), Unencodable> {
    let ty = column.def.type_code;
    match (&value, ty) {
        // A BIT that a choice picked (`COALESCE(bt)`): the server sends its digits as a string.
        (ValueRef::UInt(_), types::BIT) => as_text(out, scratch, value, column)?,
        (ValueRef::Int(i), _) => int(out, *i as u64, ty)?,
        (ValueRef::UInt(u), _) => int(out, *u, ty)?,
        // A BIT the server typed as a number (`IFNULL(b, 0)`).
        (ValueRef::Bit(v), _) if super::text::is_integer(ty) => int(out, *v, ty)?,
        (ValueRef::Year(y), types::YEAR) => out.extend_from_slice(&y.to_le_bytes()),
        // `+ 0.0` makes -0 0: the server sends no negative zero.
        (ValueRef::Float(f), types::FLOAT) => out.extend_from_slice(&(f + 0.0).to_le_bytes()),
        (ValueRef::Double(d), types::DOUBLE) => out.extend_from_slice(&(d + 0.0).to_le_bytes()),
        // A FLOAT column read through an expression that widened it: the server sends the
        // double it computed, which freshet does not know exactly.
        (ValueRef::Float(_) | ValueRef::Double(_), _) => return Err(Unencodable::Float),
        (ValueRef::Date(d), _) => date(out, *d, None),
        (ValueRef::DateTime(dt) | ValueRef::Timestamp(dt), _) => {
            let (h, mi, s, micros) = dt.time();
            date(out, dt.date(), Some((h, mi, s, micros)));
        }
        (ValueRef::Time(micros), _) => time(out, *micros),
        (ValueRef::Text(s, _), _) => put_text(out, utf8_text(*s, &column.def), *s)?,
        (ValueRef::Json(s), _) => put_text(out, json_text(*s, &column.def), *s)?,
        (ValueRef::Bytes(b), _) => put_string(out, b),
        // Everything else is sent as its text rendering, length-encoded.
        (ValueRef::Decimal(_) | ValueRef::Enum(_) | ValueRef::Set(_) | ValueRef::Bit(_), _) => as_text(out, scratch, value, column)?,
        (ValueRef::Year(_) | ValueRef::Null, _) => return Err(Unencodable::Mismatch),
    }
    Ok(())
}

/// An integer in the width of its column type (sign is irrelevant to the bytes).
/// `value` as the text protocol writes it (a length-encoded string), which is how the binary
/// protocol sends a DECIMAL, an ENUM, a SET and a BIT's bytes or digits.
fn as_text(out: &mut Vec<u8>, scratch: &mut Vec<u8>, value: ValueRef<'_>, column: &Column) -> Result<(), Unencodable> {
    scratch.clear();
    super::text::row(scratch, [value], std::slice::from_ref(column))?;
    out.extend_from_slice(scratch);
    Ok(())
}

fn int(out: &mut Vec<u8>, v: u64, ty: u8) -> Result<(), Unencodable> {
    let width = match ty {
        types::TINY => 1,
        types::SHORT | types::YEAR => 2,
        types::LONG | types::INT24 => 4,
        types::LONGLONG => 8,
        _ => return Err(Unencodable::Mismatch),
    };
    out.extend_from_slice(&v.to_le_bytes()[..width]);
    Ok(())
}

/// DATE and DATETIME: a length (0, 4, 7 or 11) and only the parts up to the last non-zero one.
fn date(out: &mut Vec<u8>, d: Date, time: Option<(u8, u8, u8, u32)>) {
    let (y, m, day) = d.parts();
    let (h, mi, s, micros) = time.unwrap_or((0, 0, 0, 0));
    let len: u8 = if micros != 0 {
        11
    } else if (h, mi, s) != (0, 0, 0) {
        7
    } else if (y, m, day) != (0, 0, 0) {
        4
    } else {
        0
    };
    out.push(len);
    if len >= 4 {
        out.extend_from_slice(&y.to_le_bytes());
        out.extend_from_slice(&[m, day]);
    }
    if len >= 7 {
        out.extend_from_slice(&[h, mi, s]);
    }
    if len == 11 {
        out.extend_from_slice(&micros.to_le_bytes());
    }
}

/// TIME: a length (0, 8 or 12), sign, days, hours, minutes, seconds, microseconds.
fn time(out: &mut Vec<u8>, micros: i64) {
    let abs = micros.unsigned_abs();
    let (secs, frac) = (abs / 1_000_000, (abs % 1_000_000) as u32);
    let len: u8 = if frac != 0 {
        12
    } else if secs != 0 {
        8
    } else {
        0
    };
    out.push(len);
    if len >= 8 {
        out.push(u8::from(micros < 0));
        out.extend_from_slice(&((secs / 86_400) as u32).to_le_bytes());
        out.extend_from_slice(&[(secs / 3600 % 24) as u8, (secs / 60 % 60) as u8, (secs % 60) as u8]);
    }
    if len == 12 {
        out.extend_from_slice(&frac.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::column::ColumnDef;
    use freshet_dataflow::Value;

    fn col(type_code: u8) -> Column {
        Column { def: ColumnDef { name: "c".into(), charset: 63, length: 20, type_code, flags: 0, decimals: 0 }, labels: vec![] }
    }

    #[test]
    fn null_bitmap_starts_at_bit_two() {
        let cols: Vec<Column> = (0..7).map(|_| col(types::LONGLONG)).collect();
        let mut vals = vec![Value::Null; 7];
        vals[3] = Value::Int(-1);
        let mut out = Vec::new();
        row(&mut out, &vals, &cols).unwrap();
        // Columns 0,1,2,4,5,6 are NULL: bits 2,3,4,6,7 of byte 0 and bit 0 of byte 1.
        assert_eq!(&out[..3], &[0x00, 0b1101_1100, 0b0000_0001]);
        assert_eq!(&out[3..], &[0xff; 8]);
    }

    /// MariaDB sends no negative zero: `-0e0`, `0e0 * -1`, `'a' * -1` and `-f` at 0 are all
    /// +0.0 on the wire (checked on 10.11), and a view's arithmetic gives -0.0 for them.
    #[test]
    fn a_negative_zero_is_sent_as_zero() {
        for (value, ty) in [(Value::Double(-0.0), types::DOUBLE), (Value::Float(-0.0), types::FLOAT)] {
            let mut out = Vec::new();
            row(&mut out, &[value], &[col(ty)]).unwrap();
            assert!(out[1..].iter().all(|b| *b == 0), "{ty}: {out:?}");
        }
    }

    #[test]
    fn temporal_lengths() {
        let mut out = Vec::new();
        date(&mut out, Date::new(2024, 2, 29), Some((0, 0, 0, 0)));
        assert_eq!(out, [4, 0xe8, 0x07, 2, 29]);
        out.clear();
        time(&mut out, -(25 * 3600 + 1) * 1_000_000 - 5);
        assert_eq!(out, [12, 1, 1, 0, 0, 0, 1, 0, 1, 5, 0, 0, 0]);
        out.clear();
        time(&mut out, 0);
        assert_eq!(out, [0]);
    }
}
