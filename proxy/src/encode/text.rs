//! The text protocol: each value as a length-encoded string of the server's rendering, NULL as
//! 0xfb.

use std::fmt::Write;

use freshet_dataflow::{Date, DateTime, Decimal, Value};

use super::{Unencodable, is_utf8};
use crate::protocol::column::{ColumnDef, flags, types};
use crate::protocol::cursor::put_lenenc;

/// How one result column renders: its definition and, for ENUM and SET, its labels in
/// declaration order (the view holds indexes).
#[derive(Debug, Clone)]
pub struct Column {
    pub def: ColumnDef,
    pub labels: Vec<String>,
}

/// Appends one text-protocol row (the packet payload) for `values` under `columns`.
pub fn row(out: &mut Vec<u8>, values: &[Value], columns: &[Column]) -> Result<(), Unencodable> {
    if values.len() != columns.len() {
        return Err(Unencodable::Mismatch);
    }
    let mut scratch = String::new();
    for (value, column) in values.iter().zip(columns) {
        match value {
            Value::Null => out.push(0xfb),
            Value::Bytes(b) => put_string(out, b),
            Value::Text(s, _) => {
                if !is_utf8(column.def.charset) {
                    return Err(Unencodable::Charset(column.def.charset));
                }
                put_string(out, s.as_bytes());
            }
            // The common numbers, without the formatter (a zero-filled column takes it).
            Value::Int(i) if !column.def.has(flags::ZEROFILL) => put_integer(out, i.unsigned_abs(), *i < 0),
            Value::UInt(u) if !column.def.has(flags::ZEROFILL) => put_integer(out, *u, false),
            Value::Bit(v) => {
                let bytes = (column.def.length as usize).div_ceil(8).clamp(1, 8);
                put_string(out, &v.to_be_bytes()[8 - bytes..]);
            }
            other => {
                scratch.clear();
                render(&mut scratch, other, column)?;
                put_string(out, scratch.as_bytes());
            }
        }
    }
    Ok(())
}

/// An integer's decimal digits as a length-encoded string (at most 20 digits and a sign, so the
/// length is one byte).
fn put_integer(out: &mut Vec<u8>, magnitude: u64, negative: bool) {
    let mut digits = [0u8; 21];
    let mut at = digits.len();
    let mut n = magnitude;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if negative {
        at -= 1;
        digits[at] = b'-';
    }
    put_string(out, &digits[at..]);
}

fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    put_lenenc(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The server's rendering of a non-NULL, non-string value.
fn render(out: &mut String, value: &Value, column: &Column) -> Result<(), Unencodable> {
    let def = &column.def;
    // Servers flag YEAR columns ZEROFILL too; a zero-filled DECIMAL is not reproduced.
    let zerofill = def.has(flags::ZEROFILL);
    if zerofill && matches!(value, Value::Decimal(_)) {
        return Err(Unencodable::Zerofill);
    }
    let width = if zerofill && def.type_code != types::YEAR { def.length as usize } else { 0 };
    // Writing to a String cannot fail.
    let _ = match value {
        Value::Int(i) => write!(out, "{i:0width$}"),
        Value::UInt(u) => write!(out, "{u:0width$}"),
        Value::Year(y) => write!(out, "{y:04}"),
        Value::Float(_) | Value::Double(_) => return Err(Unencodable::Float),
        Value::Decimal(d) => return decimal(out, *d, def.decimals),
        Value::Date(d) => date(out, *d),
        Value::DateTime(dt) => datetime(out, *dt, def.decimals),
        Value::Timestamp(_) => return Err(Unencodable::Timestamp),
        Value::Time(micros) => time(out, *micros, def.decimals),
        Value::Enum(i) => {
            let label = match usize::from(*i) {
                0 => "",
                n => column.labels.get(n - 1).ok_or(Unencodable::Mismatch)?,
            };
            write!(out, "{label}")
        }
        Value::Set(mask) => {
            if column.labels.len() < 64 && mask >> column.labels.len() != 0 {
                return Err(Unencodable::Mismatch);
            }
            let chosen = column.labels.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, l)| l.as_str());
            write!(out, "{}", chosen.collect::<Vec<_>>().join(","))
        }
        Value::Json(_) => return Err(Unencodable::Json),
        Value::Null | Value::Text(..) | Value::Bytes(_) | Value::Bit(_) => return Err(Unencodable::Mismatch),
    };
    if def.type_code == types::YEAR && !matches!(value, Value::Year(_)) {
        return Err(Unencodable::Mismatch);
    }
    Ok(())
}

/// DECIMAL with exactly the column's scale, rounded half away from zero if the value has more.
fn decimal(out: &mut String, d: Decimal, scale: u8) -> Result<(), Unencodable> {
    let m = if d.scale() <= scale {
        d.rescaled(scale).ok_or(Unencodable::Mismatch)?
    } else {
        Decimal::round_to(d.mantissa(), d.scale(), scale).ok_or(Unencodable::Mismatch)?.mantissa()
    };
    let digits = m.unsigned_abs().to_string();
    let scale = usize::from(scale);
    let (int, frac) = if digits.len() > scale { digits.split_at(digits.len() - scale) } else { ("", digits.as_str()) };
    let sign = if m < 0 { "-" } else { "" };
    let int = if int.is_empty() { "0" } else { int };
    let _ = if scale == 0 { write!(out, "{sign}{int}") } else { write!(out, "{sign}{int}.{frac:0>scale$}") };
    Ok(())
}

fn date(out: &mut String, d: Date) -> std::fmt::Result {
    let (y, m, day) = d.parts();
    write!(out, "{y:04}-{m:02}-{day:02}")
}

fn datetime(out: &mut String, dt: DateTime, fsp: u8) -> std::fmt::Result {
    date(out, dt.date())?;
    let (h, mi, s, micros) = dt.time();
    write!(out, " {h:02}:{mi:02}:{s:02}")?;
    fraction(out, micros, fsp)
}

fn time(out: &mut String, micros: i64, fsp: u8) -> std::fmt::Result {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    let (secs, frac) = (abs / 1_000_000, (abs % 1_000_000) as u32);
    write!(out, "{sign}{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)?;
    fraction(out, frac, fsp)
}

/// `.` and the first `fsp` digits of the microseconds (the stored value has no more).
fn fraction(out: &mut String, micros: u32, fsp: u8) -> std::fmt::Result {
    if fsp == 0 || fsp > 6 {
        return Ok(());
    }
    let digits = format!("{micros:06}");
    write!(out, ".{}", &digits[..usize::from(fsp)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(type_code: u8, decimals: u8, length: u32, flags: u16) -> Column {
        Column { def: ColumnDef { name: "c".into(), charset: 45, length, type_code, flags, decimals }, labels: vec![] }
    }

    fn text(value: Value, column: &Column) -> Result<String, Unencodable> {
        let mut s = String::new();
        render(&mut s, &value, column).map(|()| s)
    }

    #[test]
    fn decimals_take_the_column_scale() {
        let c = col(types::NEWDECIMAL, 4, 12, 0);
        assert_eq!(text(Value::Decimal(Decimal::parse("-1.5").unwrap()), &c).unwrap(), "-1.5000");
        assert_eq!(text(Value::Decimal(Decimal::parse("0.00005").unwrap()), &c).unwrap(), "0.0001");
        assert_eq!(text(Value::Decimal(Decimal::parse("12").unwrap()), &col(types::NEWDECIMAL, 0, 3, 0)).unwrap(), "12");
        assert_eq!(text(Value::Decimal(Decimal::parse("-0.0123").unwrap()), &c).unwrap(), "-0.0123");
    }

    #[test]
    fn temporal_values() {
        let dt = DateTime::new(Date::new(2024, 2, 29), 23, 59, 58, 123_456);
        assert_eq!(text(Value::DateTime(dt), &col(types::DATETIME, 3, 23, 0)).unwrap(), "2024-02-29 23:59:58.123");
        assert_eq!(text(Value::DateTime(dt), &col(types::DATETIME, 0, 19, 0)).unwrap(), "2024-02-29 23:59:58");
        assert_eq!(
            text(Value::Time(-(838 * 3600 + 59 * 60 + 59) * 1_000_000 - 990_000), &col(types::TIME, 2, 13, 0)).unwrap(),
            "-838:59:59.99"
        );
        assert_eq!(text(Value::Time(5_000_000), &col(types::TIME, 0, 10, 0)).unwrap(), "00:00:05");
        assert_eq!(text(Value::Date(Date::new(0, 0, 0)), &col(types::DATE, 0, 10, 0)).unwrap(), "0000-00-00");
        assert_eq!(text(Value::Year(0), &col(types::YEAR, 0, 4, flags::ZEROFILL | flags::UNSIGNED)).unwrap(), "0000");
        let d = Value::Decimal(Decimal::parse("1.5").unwrap());
        assert_eq!(text(d, &col(types::NEWDECIMAL, 1, 6, flags::ZEROFILL)).unwrap_err(), Unencodable::Zerofill);
    }

    #[test]
    fn zerofill_enum_set_and_refusals() {
        assert_eq!(text(Value::UInt(42), &col(types::LONG, 0, 10, flags::ZEROFILL)).unwrap(), "0000000042");
        let mut e = col(types::STRING, 0, 4, flags::ENUM);
        e.labels = vec!["a".into(), "bb".into()];
        assert_eq!(text(Value::Enum(2), &e).unwrap(), "bb");
        assert_eq!(text(Value::Enum(0), &e).unwrap(), "");
        assert_eq!(text(Value::Enum(3), &e).unwrap_err(), Unencodable::Mismatch);
        let mut s = col(types::STRING, 0, 4, flags::SET);
        s.labels = vec!["x".into(), "y".into(), "z".into()];
        assert_eq!(text(Value::Set(0b101), &s).unwrap(), "x,z");
        assert_eq!(text(Value::Double(1.5), &col(types::DOUBLE, 31, 22, 0)).unwrap_err(), Unencodable::Float);
        let ts = DateTime::new(Date::new(2024, 1, 1), 0, 0, 0, 0);
        assert_eq!(text(Value::Timestamp(ts), &col(types::TIMESTAMP, 0, 19, 0)).unwrap_err(), Unencodable::Timestamp);
    }

    #[test]
    fn rows_are_length_encoded_with_null_marker() {
        let cols = [col(types::LONGLONG, 0, 20, 0), col(types::VAR_STRING, 0, 200, 0), col(types::BIT, 0, 10, flags::UNSIGNED)];
        let mut out = Vec::new();
        row(&mut out, &[Value::Int(-7), Value::Null, Value::Bit(0x2aa)], &cols).unwrap();
        assert_eq!(out, [2, b'-', b'7', 0xfb, 2, 0x02, 0xaa]);
        assert_eq!(row(&mut Vec::new(), &[Value::Int(1)], &cols), Err(Unencodable::Mismatch));
    }

    #[test]
    fn integers_are_written_as_the_formatter_writes_them() {
        let c = [col(types::LONGLONG, 0, 20, 0)];
        let expect = |digits: String| [vec![digits.len() as u8], digits.into_bytes()].concat();
        for i in [0, 7, -7, 10, -10, 99, 1_000_000, i64::MAX, i64::MIN, i64::MIN + 1] {
            let mut out = Vec::new();
            row(&mut out, &[Value::Int(i)], &c).unwrap();
            assert_eq!(out, expect(i.to_string()), "{i}");
        }
        for u in [0, 9, 10, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            row(&mut out, &[Value::UInt(u)], &c).unwrap();
            assert_eq!(out, expect(u.to_string()), "{u}");
        }
        let mut out = Vec::new();
        row(&mut out, &[Value::UInt(42)], &[col(types::LONG, 0, 10, flags::ZEROFILL)]).unwrap();
        assert_eq!(out, expect("0000000042".into()));
    }
}
