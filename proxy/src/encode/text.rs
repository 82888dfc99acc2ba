//! The text protocol: each value as a length-encoded string of the server's rendering, NULL as
//! 0xfb.

use std::fmt::Write;

use freshet_dataflow::{Date, DateTime, Decimal, TextRef, ValueRef};

use super::{Unencodable, json_text, label_fits, narrowed, utf8_text};
use crate::protocol::column::{ColumnDef, flags, types};
use crate::protocol::cursor::put_lenenc;

/// How one result column renders: its definition and, for ENUM and SET, its labels in
/// declaration order (the view holds indexes).
#[derive(Debug, Clone)]
pub struct Column {
    pub def: ColumnDef,
    pub labels: Vec<String>,
}

/// Appends one text-protocol row (the packet payload) for `values` under `columns`: a shared
/// row's values as it reads them (nothing is allocated for them), or `Value`s by reference.
pub fn row<'a, V: Into<ValueRef<'a>>>(
    out: &mut Vec<u8>,
    values: impl IntoIterator<Item = V, IntoIter: ExactSizeIterator>,
    columns: &[Column],
) -> Result<(), Unencodable> {
    let mut values = values.into_iter();
    if values.len() != columns.len() {
        return Err(Unencodable::Mismatch);
    }
    let mut scratch = String::new();
    // By column, each value taken as it is reached (a zip of the two kept a shared row's
    // decoding out of line: ~60 instructions a value more).
    for column in columns {
        let Some(value) = values.next() else { break };
        match &value.into() {
            ValueRef::Null => out.push(0xfb),
            ValueRef::Bytes(b) => put_string(out, b),
            ValueRef::Text(s, _) => put_text(out, utf8_text(*s, &column.def), *s)?,
            ValueRef::Json(s) => put_text(out, json_text(*s, &column.def), *s)?,
            // The common numbers, without the formatter (a zero-filled column or one with
            // decimals takes it).
            ValueRef::Int(i) if plain_integer(&column.def) => put_integer(out, i.unsigned_abs(), *i < 0),
            ValueRef::UInt(u) if plain_integer(&column.def) => put_integer(out, *u, false),
            // Dates and times likewise (a YEAR column refuses them, in `render`).
            ValueRef::Date(d) if column.def.type_code != types::YEAR => put_string(out, Temporal::date(*d).as_bytes()),
            ValueRef::DateTime(dt) | ValueRef::Timestamp(dt) if column.def.type_code != types::YEAR => {
                put_string(out, Temporal::datetime(*dt, column.def.decimals).as_bytes())
            }
            ValueRef::Time(micros) if column.def.type_code != types::YEAR => {
                put_string(out, Temporal::time(*micros, column.def.decimals).as_bytes())
            }
            ValueRef::Bit(v) if column.def.type_code == types::BIT => {
                let bytes = (column.def.length as usize).div_ceil(8).clamp(1, 8);
                put_string(out, &v.to_be_bytes()[8 - bytes..]);
            }
            // A BIT the server typed as a number (`IFNULL(b, 0)`): its integer. Of any other
            // type, `render` refuses it.
            ValueRef::Bit(v) if is_integer(column.def.type_code) => put_integer(out, *v, false),
            other => {
                scratch.clear();
                render(&mut scratch, *other, column)?;
                put_string(out, scratch.as_bytes());
            }
        }
    }
    Ok(())
}

/// Whether an integer is sent in column `def` as its digits alone: not zero-filled, and
/// without decimals (which a DECIMAL column's values show).
fn plain_integer(def: &ColumnDef) -> bool {
    !def.has(flags::ZEROFILL) && def.decimals == 0
}

/// Whether a column of type `ty` holds integers on the wire.
pub(super) fn is_integer(ty: u8) -> bool {
    matches!(ty, types::TINY | types::SHORT | types::INT24 | types::LONG | types::LONGLONG)
}

/// An integer's decimal digits as a length-encoded string (at most 20 digits and a sign, so the
/// length is one byte).
fn put_integer(out: &mut Vec<u8>, magnitude: u64, negative: bool) {
    let mut digits = [0u8; 21];
    let mut at = digits_at_end(&mut digits, magnitude);
    if negative {
        at -= 1;
        digits[at] = b'-';
    }
    put_string(out, &digits[at..]);
}

/// Writes `n`'s decimal digits at the end of `buf` (at least 20 bytes: a `u64` has at most 20
/// digits) and returns where they start.
fn digits_at_end(buf: &mut [u8], mut n: u64) -> usize {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return at;
        }
    }
}

/// A text's bytes as [`super::utf8_text`] gave them, or it narrowed for a utf8mb3 column.
#[inline]
pub(super) fn put_text(out: &mut Vec<u8>, bytes: Result<&[u8], Unencodable>, s: TextRef<'_>) -> Result<(), Unencodable> {
    match bytes {
        Ok(bytes) => put_string(out, bytes),
        Err(Unencodable::Narrow) => put_string(out, narrowed(s.as_str()).as_bytes()),
        Err(e) => return Err(e),
    }
    Ok(())
}

pub(super) fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    put_lenenc(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The server's rendering of a non-NULL, non-string value.
fn render(out: &mut String, value: ValueRef<'_>, column: &Column) -> Result<(), Unencodable> {
    let def = &column.def;
    // Servers flag YEAR columns ZEROFILL too; a zero-filled DECIMAL is not reproduced.
    let zerofill = def.has(flags::ZEROFILL);
    if zerofill && matches!(value, ValueRef::Decimal(_)) {
        return Err(Unencodable::Zerofill);
    }
    let width = if zerofill && def.type_code != types::YEAR { def.length as usize } else { 0 };
    // An integer where the server's type is a DECIMAL with decimals: it shows `2024.0`, and a
    // view that holds the integer did not type the value as the server did.
    let decimal_column = matches!(def.type_code, types::DECIMAL | types::NEWDECIMAL) && def.decimals != 0;
    if decimal_column && matches!(value, ValueRef::Int(_) | ValueRef::UInt(_) | ValueRef::Year(_)) {
        return Err(Unencodable::Mismatch);
    }
    // Writing to a String cannot fail.
    let _ = match &value {
        ValueRef::Int(i) => write!(out, "{i:0width$}"),
        ValueRef::UInt(u) => write!(out, "{u:0width$}"),
        // Four digits in a YEAR column (ZEROFILL); the year 0 is `0` where the server's
        // result column is not one (MIN and MAX of it).
        ValueRef::Year(y) if zerofill => write!(out, "{y:04}"),
        ValueRef::Year(y) => write!(out, "{y}"),
        ValueRef::Float(_) | ValueRef::Double(_) => return Err(Unencodable::Float),
        ValueRef::Decimal(d) => return decimal(out, *d, def.decimals),
        ValueRef::Date(d) => {
            out.push_str(Temporal::date(*d).as_str());
            Ok(())
        }
        ValueRef::DateTime(dt) | ValueRef::Timestamp(dt) => {
            out.push_str(Temporal::datetime(*dt, def.decimals).as_str());
            Ok(())
        }
        ValueRef::Time(micros) => {
            out.push_str(Temporal::time(*micros, def.decimals).as_str());
            Ok(())
        }
        ValueRef::Enum(i) => {
            let label = match usize::from(*i) {
                0 => "",
                n => label_fits(column.labels.get(n - 1).ok_or(Unencodable::Mismatch)?, def)?,
            };
            write!(out, "{label}")
        }
        ValueRef::Set(mask) => {
            if column.labels.len() < 64 && mask >> column.labels.len() != 0 {
                return Err(Unencodable::Mismatch);
            }
            let chosen = column.labels.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, l)| label_fits(l, def));
            write!(out, "{}", chosen.collect::<Result<Vec<_>, _>>()?.join(","))
        }
        ValueRef::Null | ValueRef::Text(..) | ValueRef::Json(_) | ValueRef::Bytes(_) | ValueRef::Bit(_) => {
            return Err(Unencodable::Mismatch);
        }
    };
    if def.type_code == types::YEAR && !matches!(value, ValueRef::Year(_)) {
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

/// The text of a DATE, DATETIME or TIME value (`fsp` digits of fraction, none if 0 or over
/// 6), written digit by digit into a stack buffer: what `write!` with `{:04}`/`{:02}` writes
/// (a unit test compares them at the edges), without the formatter's ~2.7k instructions a
/// DATETIME.
struct Temporal {
    buf: [u8; 32],
    len: usize,
}

impl Temporal {
    /// The longest text is 27 bytes: a DATETIME's year is a u16 (5 digits), `-MM-DD hh:mm:ss`
    /// 15, the fraction 7; a TIME's hours are under 2^64 / 3.6e9 (10 digits), with a sign,
    /// `:mm:ss` and the fraction 24.
    fn new() -> Temporal {
        Temporal { buf: [0; 32], len: 0 }
    }

    fn date(d: Date) -> Temporal {
        let mut t = Temporal::new();
        t.put_date(d);
        t
    }

    fn datetime(dt: DateTime, fsp: u8) -> Temporal {
        let mut t = Temporal::new();
        t.put_date(dt.date());
        let (h, mi, s, micros) = dt.time();
        t.push(b' ');
        t.clock(u64::from(h), mi, s);
        t.fraction(micros, fsp);
        t
    }

    fn time(micros: i64, fsp: u8) -> Temporal {
        let mut t = Temporal::new();
        if micros < 0 {
            t.push(b'-');
        }
        let abs = micros.unsigned_abs();
        let secs = abs / 1_000_000;
        t.clock(secs / 3600, (secs / 60 % 60) as u8, (secs % 60) as u8);
        t.fraction((abs % 1_000_000) as u32, fsp);
        t
    }

    fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }

    fn as_str(&self) -> &str {
        // Only ASCII digits and punctuation are pushed.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    /// Within the buffer, by the bound in [`Temporal::new`]; a byte past it would be dropped.
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    fn put_date(&mut self, d: Date) {
        let (y, m, day) = d.parts();
        if y < 10_000 {
            self.two(y / 100);
            self.two(y % 100);
        } else {
            self.padded(u64::from(y), 4, usize::MAX);
        }
        self.push(b'-');
        self.two(u16::from(m));
        self.push(b'-');
        self.two(u16::from(day));
    }

    fn clock(&mut self, h: u64, mi: u8, s: u8) {
        match u16::try_from(h) {
            Ok(h) if h < 100 => self.two(h),
            _ => self.padded(h, 2, usize::MAX),
        }
        self.push(b':');
        self.two(u16::from(mi));
        self.push(b':');
        self.two(u16::from(s));
    }

    /// `.` and the first `fsp` digits of the microseconds written as `{:06}` (the stored value
    /// has no more).
    fn fraction(&mut self, micros: u32, fsp: u8) {
        if fsp == 0 || fsp > 6 {
            return;
        }
        self.push(b'.');
        if micros < 1_000_000 {
            let fsp = usize::from(fsp);
            // Six digits from the left; a pair at a time while both are wanted.
            let mut divisor = 10_000;
            let mut written = 0;
            while written < fsp {
                let pair = (micros / divisor % 100) as u16;
                if written + 1 < fsp {
                    self.two(pair);
                } else {
                    self.push(b'0' + (pair / 10) as u8);
                }
                written += 2;
                divisor /= 100;
            }
        } else {
            self.padded(u64::from(micros), 6, usize::from(fsp));
        }
    }

    /// Two digits of `n`, which is under 100 (a larger `n` writes all its digits).
    fn two(&mut self, n: u16) {
        if n < 100 {
            self.push(b'0' + (n / 10) as u8);
            self.push(b'0' + (n % 10) as u8);
        } else {
            self.padded(u64::from(n), 2, usize::MAX);
        }
    }

    /// The first `take` of `n`'s digits zero-padded to at least `width`, as `{n:0width$}`
    /// writes them (`width` at most 20).
    fn padded(&mut self, n: u64, width: usize, take: usize) {
        let mut digits = [b'0'; 20];
        let at = digits_at_end(&mut digits, n);
        let from = at.min(digits.len().saturating_sub(width));
        for &d in digits.iter().skip(from).take(take) {
            self.push(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use freshet_dataflow::Value;

    fn col(type_code: u8, decimals: u8, length: u32, flags: u16) -> Column {
        Column { def: ColumnDef { name: "c".into(), charset: 45, length, type_code, flags, decimals }, labels: vec![] }
    }

    fn text(value: Value, column: &Column) -> Result<String, Unencodable> {
        let mut s = String::new();
        render(&mut s, value.as_ref(), column).map(|()| s)
    }

    /// MariaDB declares a JSON column as text and sends the stored text; MySQL 8 declares
    /// JSON and sends its own rendering, which is refused.
    #[test]
    fn json_is_sent_as_text_only_where_the_server_declares_text() {
        let json = Value::Json("{\"a\":  1}".into());
        let mut out = Vec::new();
        row(&mut out, std::slice::from_ref(&json), &[col(types::BLOB, 0, u32::MAX, 0)]).unwrap();
        assert_eq!(&out[1..], b"{\"a\":  1}");
        assert_eq!(row(&mut Vec::new(), &[json], &[col(types::JSON, 0, u32::MAX, 0)]), Err(Unencodable::Json));
    }

    #[test]
    fn decimals_take_the_column_scale() {
        let c = col(types::NEWDECIMAL, 4, 12, 0);
        assert_eq!(text(Value::Decimal(Decimal::parse("-1.5").unwrap()), &c).unwrap(), "-1.5000");
        assert_eq!(text(Value::Decimal(Decimal::parse("0.00005").unwrap()), &c).unwrap(), "0.0001");
        assert_eq!(text(Value::Decimal(Decimal::parse("12").unwrap()), &col(types::NEWDECIMAL, 0, 3, 0)).unwrap(), "12");
        assert_eq!(text(Value::Decimal(Decimal::parse("-0.0123").unwrap()), &c).unwrap(), "-0.0123");
    }

    // The formatter's rendering, as the text protocol wrote temporal values before
    // `Temporal`: the reference it is compared against.
    fn formatted(value: &Value, fsp: u8) -> String {
        let fraction = |out: &mut String, micros: u32| {
            if fsp != 0 && fsp <= 6 {
                let digits = format!("{micros:06}");
                let _ = write!(out, ".{}", &digits[..usize::from(fsp)]);
            }
        };
        let date = |out: &mut String, d: Date| {
            let (y, m, day) = d.parts();
            let _ = write!(out, "{y:04}-{m:02}-{day:02}");
        };
        let mut out = String::new();
        match value {
            Value::Date(d) => date(&mut out, *d),
            Value::DateTime(dt) => {
                date(&mut out, dt.date());
                let (h, mi, s, micros) = dt.time();
                let _ = write!(out, " {h:02}:{mi:02}:{s:02}");
                fraction(&mut out, micros);
            }
            Value::Time(micros) => {
                let sign = if *micros < 0 { "-" } else { "" };
                let abs = micros.unsigned_abs();
                let (secs, frac) = (abs / 1_000_000, (abs % 1_000_000) as u32);
                let _ = write!(out, "{sign}{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
                fraction(&mut out, frac);
            }
            _ => unreachable!(),
        }
        out
    }

    #[test]
    fn temporal_values_are_written_as_the_formatter_writes_them() {
        let mut values = Vec::new();
        for (y, m, d) in
            [(0, 0, 0), (0, 1, 1), (1, 2, 3), (999, 12, 31), (2026, 11, 22), (9999, 12, 31), (10_000, 1, 1), (u16::MAX, 12, 31)]
        {
            values.push(Value::Date(Date::new(y, m, d)));
            for (h, mi, s) in [(0, 0, 0), (9, 5, 7), (10, 0, 0), (23, 59, 59)] {
                for micros in [0, 1, 9, 10, 99_999, 100_000, 123_456, 999_999, 0xF_FFFF] {
                    values.push(Value::DateTime(DateTime::new(Date::new(y, m, d), h, mi, s, micros)));
                }
            }
        }
        values.push(Value::Date(Date(u32::MAX)));
        values.push(Value::DateTime(DateTime(u64::MAX)));
        let hms = |h: i64, m: i64, s: i64| (h * 3600 + m * 60 + s) * 1_000_000;
        for micros in [
            0,
            1,
            -1,
            999_999,
            -999_999,
            1_000_000,
            5_000_000,
            hms(1, 2, 3) + 40_000,
            hms(99, 59, 59),
            hms(100, 0, 0),
            hms(838, 59, 59) + 990_000,
            -hms(838, 59, 59) - 990_000,
            -hms(0, 0, 1),
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ] {
            values.push(Value::Time(micros));
        }
        for value in &values {
            for fsp in 0..=7 {
                let expect = formatted(value, fsp);
                let column = col(if matches!(value, Value::Time(_)) { types::TIME } else { types::DATETIME }, fsp, 26, 0);
                let mut out = Vec::new();
                row(&mut out, std::slice::from_ref(value), std::slice::from_ref(&column)).unwrap();
                assert_eq!(out, [vec![expect.len() as u8], expect.clone().into_bytes()].concat(), "{expect} fsp {fsp}");
                assert_eq!(text(value.clone(), &column).unwrap(), expect, "fsp {fsp}");
            }
        }
        // A YEAR column refuses them, as before.
        let year = col(types::YEAR, 0, 4, flags::ZEROFILL | flags::UNSIGNED);
        assert_eq!(row(&mut Vec::new(), &[Value::Date(Date::new(2024, 1, 1))], &[year]), Err(Unencodable::Mismatch));
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
        // UTC's wall-clock time (only sessions in UTC are answered with one).
        assert_eq!(text(Value::Timestamp(ts), &col(types::TIMESTAMP, 0, 19, 0)).unwrap(), "2024-01-01 00:00:00");
    }

    /// utf8mb3 (charset 33 here) holds no character past U+FFFF: the server sends `?` for one.
    #[test]
    fn a_utf8mb3_column_gets_a_question_mark_for_what_it_cannot_hold() {
        let mut mb3 = col(types::VAR_STRING, 0, 60, 0);
        mb3.def.charset = 33;
        let value = Value::text("a\u{1F600}b\u{E9}", freshet_dataflow::Collation::Utf8mb4GeneralCi);
        let mut out = Vec::new();
        row(&mut out, std::slice::from_ref(&value), std::slice::from_ref(&mb3)).unwrap();
        assert_eq!(out, [&[5u8][..], "a?b\u{E9}".as_bytes()].concat());
        out.clear();
        row(&mut out, std::slice::from_ref(&value), &[col(types::VAR_STRING, 0, 80, 0)]).unwrap();
        assert_eq!(out, [&[8u8][..], "a\u{1F600}b\u{E9}".as_bytes()].concat(), "utf8mb4 holds it");
        let mut e = col(types::STRING, 0, 4, flags::ENUM);
        e.def.charset = 33;
        e.labels = vec!["\u{1F600}".into()];
        assert_eq!(text(Value::Enum(1), &e).unwrap_err(), Unencodable::Charset(33));
    }

    #[test]
    fn rows_are_length_encoded_with_null_marker() {
        let cols = [col(types::LONGLONG, 0, 20, 0), col(types::VAR_STRING, 0, 200, 0), col(types::BIT, 0, 10, flags::UNSIGNED)];
        let mut out = Vec::new();
        row(&mut out, &[Value::Int(-7), Value::Null, Value::Bit(0x2aa)], &cols).unwrap();
        assert_eq!(out, [2, b'-', b'7', 0xfb, 2, 0x02, 0xaa]);
        assert_eq!(row(&mut Vec::new(), &[Value::Int(1)], &cols), Err(Unencodable::Mismatch));
    }

    /// An integer where the server's type is a DECIMAL with decimals (a YEAR picked by
    /// `CASE ... THEN 2.5 ELSE yr END`) is refused: the server shows `2024.0`.
    #[test]
    fn an_integer_in_a_decimal_column_with_decimals_is_refused() {
        let dec = col(types::NEWDECIMAL, 1, 6, 0);
        for v in [Value::Int(2024), Value::UInt(2024), Value::Year(2024)] {
            assert_eq!(row(&mut Vec::new(), std::slice::from_ref(&v), std::slice::from_ref(&dec)), Err(Unencodable::Mismatch), "{v:?}");
        }
        assert_eq!(text(Value::Int(2024), &col(types::NEWDECIMAL, 0, 5, 0)).unwrap(), "2024");
        assert_eq!(text(Value::Decimal(Decimal::parse("2024.0").unwrap()), &dec).unwrap(), "2024.0");
    }

    /// A BIT the server typed as a number (`IFNULL(b, 0)` is an integer column) is sent as
    /// that number, in both protocols; of a column of another type it is refused (relayed).
    #[test]
    fn a_bit_in_a_number_column_is_its_integer() {
        let mut out = Vec::new();
        row(&mut out, &[Value::Bit(5)], &[col(types::LONGLONG, 0, 3, 0)]).unwrap();
        assert_eq!(out, [1, b'5']);
        let mut out = Vec::new();
        super::super::binary::row(&mut out, &[Value::Bit(5)], &[col(types::LONGLONG, 0, 3, 0)]).unwrap();
        assert_eq!(out, [0, 0, 5, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(row(&mut Vec::new(), &[Value::Bit(5)], &[col(types::VAR_STRING, 0, 8, 0)]), Err(Unencodable::Mismatch));
    }

    /// A BIT column is its bytes; a BIT a choice picked, which the view holds as the number
    /// (`Repr::Number`), is its digits under the same BIT definition, in both protocols.
    #[test]
    fn a_number_under_a_bit_definition_is_its_digits() {
        let bit = [col(types::BIT, 0, 8, 0)];
        let mut out = Vec::new();
        row(&mut out, &[Value::Bit(255)], &bit).unwrap();
        assert_eq!(out, [1, 0xff]);
        for encode in [row, super::super::binary::row] {
            let mut out = Vec::new();
            encode(&mut out, &[Value::UInt(255)], &bit).unwrap();
            assert!(out.ends_with(&[3, b'2', b'5', b'5']), "{out:?}");
        }
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
