//! Values and rows: one [`Value`] type for everything MySQL/MariaDB store and the binlog carries.
//!
//! Owns: the value representation, its byte size, exact DECIMAL arithmetic, collation-aware
//! comparison and hashing of strings, and the total order used for grouping, joining and sorting
//! (implemented once, on the borrowed [`ValueRef`], in `borrowed`); the compact [`SharedRow`] a
//! reader holds and publishes (`shared`).
//! Does not own: decoding values from the binlog or the wire (cdc, proxy), nor rendering them in
//! the MySQL text protocol (proxy); column metadata lives in [`crate::schema`].
//!
//! Invariants:
//! - `Hash` agrees with `Eq`, and `Eq` is `cmp_total(..) == Equal`. Numbers of different types
//!   that are numerically equal (`Int(5)`, `UInt(5)`, `Decimal 5.00`, `Double 5.0`) are equal and
//!   hash alike, so a BIGINT join key matches a BIGINT UNSIGNED one. Strings compare and hash
//!   under their collation (`'a' = 'A'` in `*_ci`), so a group or join key never splits on case
//!   where the server would not.
//! - `Value` is 24 bytes; [`Row`] is a boxed slice (no spare capacity). `bytes()` is the heap +
//!   inline size, used by memory accounting; it must be cheap and deterministic. A
//!   [`SharedRow`] holds the same values as one block of bytes, and is one row under
//!   [`ExactRow`] exactly when a `Row` of its values is.
//! - Two values of different collations are compared under the left one's collation; the
//!   compiler refuses queries that would need an explicit collation conversion.

mod borrowed;
mod shared;

pub use crate::collation::Collation;
use crate::mem::heap_block;
use borrowed::NumRef;
pub use borrowed::{TextRef, ValueRef, exact_values_cmp};
pub use shared::{SharedRow, SharedValues};
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Exact decimal: a 96-bit two's complement mantissa and a scale (digits after the point).
/// 28 significant digits; DECIMAL(p, s) columns with p > 28 are refused by the schema check.
/// Stored split so that [`Value`] stays 24 bytes.
#[derive(Clone, Copy)]
pub struct Decimal {
    lo: u64,
    hi: i32,
    scale: u8,
}

/// Largest mantissa magnitude a [`Decimal`] can hold (2^95 - 1).
const DEC_MAX: i128 = (1i128 << 95) - 1;

impl Decimal {
    /// Builds a decimal `mantissa * 10^-scale`; `None` if the mantissa needs more than 96 bits
    /// or the scale exceeds 30 (MySQL's maximum).
    pub fn new(mantissa: i128, scale: u8) -> Option<Decimal> {
        if !(-DEC_MAX..=DEC_MAX).contains(&mantissa) || scale > 30 {
            return None;
        }
        Some(Decimal { lo: mantissa as u64, hi: (mantissa >> 64) as i32, scale })
    }
    /// The mantissa.
    pub fn mantissa(self) -> i128 {
        ((self.hi as i128) << 64) | self.lo as i128
    }
    /// The number of digits after the decimal point.
    pub fn scale(self) -> u8 {
        self.scale
    }
    /// Parses `-12.340`; keeps the written scale. `None` on anything else.
    pub fn parse(s: &str) -> Option<Decimal> {
        let s = s.trim_matches(SQL_SPACE);
        let (neg, digits) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let mut m: i128 = 0;
        for c in int.chars().chain(frac.chars()) {
            let d = c.to_digit(10)? as i128;
            m = m.checked_mul(10)?.checked_add(d)?;
        }
        Decimal::new(if neg { -m } else { m }, u8::try_from(frac.len()).ok()?)
    }
    /// Mantissa rescaled to `scale` (which must be >= self.scale), `None` on overflow.
    pub fn rescaled(self, scale: u8) -> Option<i128> {
        let up = scale.checked_sub(self.scale)?;
        self.mantissa().checked_mul(10i128.checked_pow(up as u32)?)
    }
    /// Rounds half away from zero to `scale` digits (MySQL's rule for DECIMAL).
    pub fn round_to(mantissa: i128, from_scale: u8, to_scale: u8) -> Option<Decimal> {
        if to_scale >= from_scale {
            return Decimal::new(mantissa.checked_mul(10i128.checked_pow((to_scale - from_scale) as u32)?)?, to_scale);
        }
        let div = 10i128.checked_pow((from_scale - to_scale) as u32)?;
        let q = mantissa / div;
        let r = mantissa % div;
        let q = if r.abs() * 2 >= div { q + mantissa.signum() } else { q };
        Decimal::new(q, to_scale)
    }
    /// The double the decimal's text reads as, correctly rounded (as the server's `strtod`):
    /// a mantissa and a power of ten that doubles hold exactly divide with one rounding; any
    /// other is read from its text (the division would round twice).
    fn to_f64(self) -> f64 {
        let (m, scale) = (self.mantissa(), self.scale);
        if m.unsigned_abs() <= 1 << 53 && scale <= 22 {
            return m as f64 / 10f64.powi(scale as i32);
        }
        format!("{m}e-{scale}").parse().unwrap_or(f64::NAN)
    }
    /// Mantissa with trailing zeros stripped, for hashing.
    /// The same value with no trailing fraction zeros: (mantissa, scale), `1.50` as (15, 1).
    pub fn normalized(self) -> (i128, u8) {
        let (mut m, mut s) = (self.mantissa(), self.scale);
        while s > 0 && m % 10 == 0 {
            m /= 10;
            s -= 1;
        }
        (m, s)
    }
    fn cmp_exact(self, other: Decimal) -> Ordering {
        let s = self.scale.max(other.scale);
        match (self.rescaled(s), other.rescaled(s)) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => self.to_f64().total_cmp(&other.to_f64()),
        }
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.mantissa();
        let digits = m.unsigned_abs().to_string();
        let scale = self.scale as usize;
        let sign = if m < 0 { "-" } else { "" };
        if scale == 0 {
            return write!(f, "{sign}{digits}");
        }
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (i, fr) = padded.split_at(padded.len() - scale);
        write!(f, "{sign}{i}.{fr}")
    }
}

impl fmt::Debug for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// A date as MySQL packs it: `year * 13 * 32 + month * 32 + day` keeps calendar order and
/// admits the zero date `0000-00-00` and zero parts, which MySQL allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Date(pub u32);

impl Date {
    /// Packs year, month, day without validating the calendar (the server already did).
    pub fn new(year: u16, month: u8, day: u8) -> Date {
        Date((year as u32 * 13 + month as u32) * 32 + day as u32)
    }
    /// (year, month, day).
    pub fn parts(self) -> (u16, u8, u8) {
        let ym = self.0 / 32;
        ((ym / 13) as u16, (ym % 13) as u8, (self.0 % 32) as u8)
    }
}

/// A DATETIME or TIMESTAMP: packed date, seconds of the day and microseconds, ordered.
/// TIMESTAMP values are carried in UTC, as the binlog carries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DateTime(pub u64);

impl DateTime {
    /// Packs a date, a time of day and microseconds.
    pub fn new(date: Date, hour: u8, minute: u8, second: u8, micros: u32) -> DateTime {
        let secs = hour as u64 * 3600 + minute as u64 * 60 + second as u64;
        DateTime(((date.0 as u64 * 86_400 + secs) << 20) | (micros as u64 & 0xF_FFFF))
    }
    /// The date part.
    pub fn date(self) -> Date {
        Date(((self.0 >> 20) / 86_400) as u32)
    }
    /// (hour, minute, second, microsecond).
    pub fn time(self) -> (u8, u8, u8, u32) {
        let s = (self.0 >> 20) % 86_400;
        ((s / 3600) as u8, (s / 60 % 60) as u8, (s % 60) as u8, (self.0 & 0xF_FFFF) as u32)
    }
}

/// One MySQL value. 24 bytes; strings and blobs are single heap allocations.
#[derive(Clone)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// TINYINT..BIGINT signed, and BOOLEAN.
    Int(i64),
    /// TINYINT..BIGINT UNSIGNED.
    UInt(u64),
    /// FLOAT.
    Float(f32),
    /// DOUBLE.
    Double(f64),
    /// DECIMAL / NUMERIC, exact.
    Decimal(Decimal),
    /// CHAR, VARCHAR, TEXT (after charset conversion to UTF-8) with the column's collation.
    Text(Box<str>, Collation),
    /// BINARY, VARBINARY, BLOB.
    Bytes(Box<[u8]>),
    /// DATE.
    Date(Date),
    /// TIME as signed microseconds (MySQL TIME spans -838:59:59 to 838:59:59).
    Time(i64),
    /// DATETIME.
    DateTime(DateTime),
    /// TIMESTAMP in UTC.
    Timestamp(DateTime),
    /// YEAR.
    Year(u16),
    /// ENUM: 1-based index into the column's labels (0 = the empty error value).
    Enum(u16),
    /// SET: bitmask over the column's labels.
    Set(u64),
    /// BIT(n).
    Bit(u64),
    /// JSON, as its canonical text.
    Json(Box<str>),
}

/// A compact row: a boxed slice, no spare capacity.
pub type Row = Box<[Value]>;

/// The rows of a published answer, as a slice (`Deref`). Most partitions answer with no row or
/// one, and those need no block of their own: only two rows or more are a shared slice.
#[derive(Clone, Debug, Default)]
pub enum Rows {
    /// No row.
    #[default]
    Empty,
    /// One row.
    One(SharedRow),
    /// Two rows or more.
    Many(std::sync::Arc<[SharedRow]>),
}

impl Rows {
    /// The heap the answer holds besides its rows: the slice's block, if it has one.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Rows::Many(rows) => heap_block(16 + std::mem::size_of_val::<[SharedRow]>(rows)),
            Rows::Empty | Rows::One(_) => 0,
        }
    }
}

impl std::ops::Deref for Rows {
    type Target = [SharedRow];
    fn deref(&self) -> &[SharedRow] {
        match self {
            Rows::Empty => &[],
            Rows::One(row) => std::slice::from_ref(row),
            Rows::Many(rows) => rows,
        }
    }
}

impl From<Vec<SharedRow>> for Rows {
    fn from(mut rows: Vec<SharedRow>) -> Rows {
        match rows.len() {
            0 => Rows::Empty,
            1 => rows.pop().map_or(Rows::Empty, Rows::One),
            _ => Rows::Many(rows.into()),
        }
    }
}

/// Heap + inline bytes of a row, as memory accounting counts it: the box's pointer and length
/// where the row is held, and [`row_heap`].
pub fn row_bytes(row: &[Value]) -> usize {
    std::mem::size_of::<Row>() + row_heap(row)
}

/// A row's heap blocks: the block holding its values and each value's own block (see
/// [`heap_block`]). What a row costs where its box is inline in a table counted by capacity.
pub fn row_heap(row: &[Value]) -> usize {
    heap_block(std::mem::size_of_val(row)) + row.iter().map(Value::heap_bytes).sum::<usize>()
}

impl Value {
    /// Builds a text value.
    pub fn text(s: &str, collation: Collation) -> Value {
        Value::Text(s.into(), collation)
    }
    /// True for SQL NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    /// Bytes this value occupies: inline size plus its heap block, if any.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Value>() + self.heap_bytes()
    }

    /// The block a text or byte string's payload takes ([`heap_block`]); 0 for other values.
    pub fn heap_bytes(&self) -> usize {
        heap_block(match self {
            Value::Text(s, _) | Value::Json(s) => s.len(),
            Value::Bytes(b) => b.len(),
            _ => 0,
        })
    }

    fn num(&self) -> Option<NumRef> {
        self.as_ref().num()
    }

    /// Numeric view used by arithmetic: strings are parsed the way MySQL casts them (leading
    /// number, else 0), temporal values become their packed numeric form.
    pub fn to_f64(&self) -> Option<f64> {
        match self.num() {
            Some(NumRef::I(i)) => Some(i as f64),
            Some(NumRef::D(d)) => Some(d.to_f64()),
            Some(NumRef::F(f)) => Some(f),
            None => match self {
                Value::Text(s, _) => Some(parse_leading_f64(s)),
                Value::Null => None,
                _ => None,
            },
        }
    }

    /// Total order used for grouping, joining, DISTINCT and ORDER BY. NULL sorts first (as
    /// in MySQL ascending order); numbers compare numerically across types; strings by
    /// collation; otherwise values of different kinds order by kind.
    #[inline]
    pub fn cmp_total(&self, other: &Value) -> Ordering {
        self.as_ref().cmp_total(other.as_ref())
    }

    fn kind_rank(&self) -> u8 {
        self.as_ref().kind_rank()
    }

    /// SQL comparison: `None` if either side is NULL (unknown), else the ordering. A string or
    /// bytes compared with a number is converted to a number, and text compared with bytes is
    /// compared as bytes (binary: no case folding, no padding), as MySQL does.
    pub fn sql_cmp(&self, other: &Value) -> Option<Ordering> {
        self.as_ref().sql_cmp(other.as_ref())
    }
}

/// The white space the server skips before a number or a date read from text (its `isspace`:
/// space, tab, newline, vertical tab, form feed, carriage return). Not Unicode's: to MariaDB
/// `'\u{3000}5'` is not a number (0, with a warning), where `str::trim` would make it 5.
pub const SQL_SPACE: [char; 6] = [' ', '\t', '\n', '\x0b', '\x0c', '\r'];

/// `v` as the server takes it when it is compared with a YEAR column: as the YEAR a column of
/// that type would store from it. An integer 1-69 is 2001-2069, 70-99 is 1970-1999, 0 is
/// 0000; a text of one to three digits is read the same way except that zero is 2000
/// (`'0'`), and of four digits as written (`'0000'` is 0000); an integer outside 0-99 is
/// compared as the integer it is (`y > 150` is true of 2024). `None` for what the server reads
/// otherwise or not exactly here (a fraction, a DOUBLE, text that is not digits): relayed.
pub fn year_operand(v: &Value) -> Option<Value> {
    let window = |n: u64| match n {
        1..=69 => Value::Year(2000 + n as u16),
        70..=99 => Value::Year(1900 + n as u16),
        0 => Value::Year(0),
        n => Value::UInt(n),
    };
    Some(match v {
        Value::Null | Value::Year(_) => v.clone(),
        Value::Int(i) if *i < 0 => v.clone(),
        Value::Int(i) => window(*i as u64),
        Value::UInt(u) => window(*u),
        Value::Decimal(d) => {
            // A DECIMAL's scale is at most 30: 10^30 fits an i128.
            let scale = 10i128.checked_pow(u32::from(d.scale()))?;
            let m = d.mantissa();
            if m % scale != 0 || m < 0 {
                return None;
            }
            window(u64::try_from(m / scale).ok()?)
        }
        Value::Text(s, _) => {
            let t = s.trim_start_matches(SQL_SPACE);
            if t.is_empty() || t.len() > 4 || !t.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n: u64 = t.parse().ok()?;
            match (t.len(), n) {
                (4, n) => Value::Year(u16::try_from(n).ok().filter(|y| *y == 0 || (1901..=2155).contains(y))?),
                (_, 0) => Value::Year(2000),
                (_, 1..=99) => window(n),
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// MySQL string-to-number conversion: the longest numeric prefix, else 0.
pub fn parse_leading_f64(s: &str) -> f64 {
    let t = s.trim_start_matches(SQL_SPACE);
    let mut end = 0;
    let b = t.as_bytes();
    let mut seen_dot = false;
    let mut seen_digit = false;
    while end < b.len() {
        let c = b[end];
        if c.is_ascii_digit() {
            seen_digit = true;
        } else if c == b'.' && !seen_dot {
            seen_dot = true;
        } else if (c == b'-' || c == b'+') && end == 0 {
        } else if (c == b'e' || c == b'E') && seen_digit {
            let rest = &t[end + 1..];
            let exp_len = rest.char_indices().take_while(|(i, c)| c.is_ascii_digit() || (*i == 0 && (*c == '-' || *c == '+'))).count();
            if exp_len > 0 && rest[..exp_len].chars().any(|c| c.is_ascii_digit()) {
                end += 1 + exp_len;
            }
            break;
        } else {
            break;
        }
        end += 1;
    }
    t[..end].parse::<f64>().unwrap_or(0.0)
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.cmp_total(other) == Ordering::Equal
    }
}
impl Eq for Value {}
impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Value {
    fn cmp(&self, other: &Value) -> Ordering {
        self.cmp_total(other)
    }
}

impl Hash for Value {
    fn hash<H: Hasher>(&self, h: &mut H) {
        // Consistent with cmp_total: numerically equal numbers hash alike; a non-integral
        // number hashes by its f64 image (equal decimals map to equal f64s).
        if let Some(n) = self.num() {
            1u8.hash(h);
            match n {
                NumRef::I(i) => i.hash(h),
                NumRef::D(d) => match d.normalized() {
                    (m, 0) => m.hash(h),
                    _ => d.to_f64().to_bits().hash(h),
                },
                NumRef::F(f) => {
                    if f.fract() == 0.0 && f.abs() < 1e30 {
                        (f as i128).hash(h)
                    } else {
                        f.to_bits().hash(h)
                    }
                }
            }
            return;
        }
        match self {
            Value::Text(s, c) => {
                2u8.hash(h);
                for w in c.weights(s) {
                    w.hash(h);
                }
            }
            Value::Date(d) => {
                4u8.hash(h);
                DateTime::new(*d, 0, 0, 0, 0).hash(h)
            }
            Value::DateTime(d) | Value::Timestamp(d) => {
                4u8.hash(h);
                d.hash(h)
            }
            other => {
                other.kind_rank().hash(h);
                match other {
                    Value::Bytes(b) => b.hash(h),
                    Value::Json(s) => s.hash(h),
                    Value::Time(t) => t.hash(h),
                    Value::Enum(e) => e.hash(h),
                    Value::Set(s) => s.hash(h),
                    _ => {}
                }
            }
        }
    }
}

/// A row under exact identity: values equal only if they are the same bytes of the same type
/// (`'a'` and `'A'` differ even under a case-insensitive collation, `1.0` and `1.00` differ).
/// Multisets of rows that are returned to clients use this, so that a cached result carries
/// the upstream's exact values; grouping and joining use `Value`'s SQL equality instead.
/// A text's collation is not part of its identity: what a client receives is the bytes, and
/// a row must cancel its own deletion whichever path tagged it.
#[derive(Clone, Debug)]
pub struct ExactRow<R = Row>(pub R);

impl Value {
    /// Total order on exact identity: type first, then raw payload ([`ValueRef::exact_cmp`]).
    pub fn exact_cmp(&self, o: &Value) -> Ordering {
        self.as_ref().exact_cmp(o.as_ref())
    }
}

impl<R: AsRef<[Value]>> PartialEq for ExactRow<R> {
    fn eq(&self, o: &ExactRow<R>) -> bool {
        let (a, b) = (self.0.as_ref(), o.0.as_ref());
        a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.exact_cmp(b) == Ordering::Equal)
    }
}
impl<R: AsRef<[Value]>> Eq for ExactRow<R> {}
impl<R: AsRef<[Value]>> Hash for ExactRow<R> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        exact_row_hash(self.0.as_ref().iter().map(Value::as_ref), h);
    }
}

/// [`ExactRow`]'s hash of a row's values, however they are held (a row of `Value`s and a
/// [`SharedRow`] of the same values hash alike): their number, then each value's.
pub(crate) fn exact_row_hash<'a, H: Hasher>(row: impl ExactSizeIterator<Item = ValueRef<'a>>, h: &mut H) {
    row.len().hash(h);
    for v in row {
        v.exact_hash(h);
    }
}

/// [`ExactRow`]'s order on borrowed rows: column by column, [`Value::exact_cmp`].
pub fn exact_row_cmp(a: &[Value], b: &[Value]) -> Ordering {
    exact_values_cmp(a.iter().map(Value::as_ref), b.iter().map(Value::as_ref))
}

impl<R: AsRef<[Value]>> PartialOrd for ExactRow<R> {
    fn partial_cmp(&self, o: &ExactRow<R>) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<R: AsRef<[Value]>> Ord for ExactRow<R> {
    fn cmp(&self, o: &ExactRow<R>) -> Ordering {
        exact_row_cmp(self.0.as_ref(), o.0.as_ref())
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.as_ref(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decimal compared with a DOUBLE, FLOAT or ENUM is the double its text reads as, as the
    /// server's `strtod` reads it: correctly rounded, not the mantissa divided by a power of
    /// ten, which rounds twice (an audit: `dbl = 6.515929727227629087` found the next double's
    /// row, and `0.9999999999999999` the rows of 1.0).
    #[test]
    fn a_decimal_is_the_double_its_text_reads_as() {
        for (mantissa, scale, text) in [
            (6_515_929_727_227_629_087i128, 18u8, "6.515929727227629087"),
            (9_999_999_999_999_999, 16, "0.9999999999999999"),
            (25_935_401_916_503_906_250, 21, "0.025935401916503906250"),
            (15, 1, "1.5"),
            (-12_345_678_901_234_567_890_123_456_789, 30, "-0.012345678901234567890123456789"),
            (1, 30, "0.000000000000000000000000000001"),
        ] {
            let d = Decimal::new(mantissa, scale).unwrap();
            assert_eq!(d.to_f64(), text.parse::<f64>().unwrap(), "{text}");
        }
    }
    use std::collections::hash_map::DefaultHasher;

    fn h(v: &Value) -> u64 {
        let mut s = DefaultHasher::new();
        v.hash(&mut s);
        s.finish()
    }

    #[test]
    fn value_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Value>(), 24);
    }

    #[test]
    fn rows_keep_order_and_only_several_rows_have_a_block() {
        let row = |i: i64| -> SharedRow { vec![Value::Int(i)].into() };
        let empty = Rows::from(Vec::new());
        assert!(matches!(empty, Rows::Empty) && empty.is_empty() && empty.heap_bytes() == 0);
        let one = Rows::from(vec![row(7)]);
        assert!(matches!(one, Rows::One(_)) && one.heap_bytes() == 0);
        assert_eq!(one[0], [Value::Int(7)]);
        let many = Rows::from(vec![row(3), row(1), row(2)]);
        assert_eq!(many.iter().map(|r| r.to_vec()[0].clone()).collect::<Vec<_>>(), [Value::Int(3), Value::Int(1), Value::Int(2)]);
        // Two counts and three fat pointers, plus malloc's header, rounded to 16.
        assert_eq!(many.heap_bytes(), 80);
    }

    #[test]
    fn numbers_equal_across_types_and_hash_alike() {
        let five = [Value::Int(5), Value::UInt(5), Value::Decimal(Decimal::parse("5.00").unwrap()), Value::Double(5.0)];
        for a in &five {
            for b in &five {
                assert_eq!(a, b);
                assert_eq!(h(a), h(b));
            }
        }
        assert!(Value::UInt(u64::MAX) > Value::Int(-1));
        let a = Value::Decimal(Decimal::parse("0.10").unwrap());
        let b = Value::Decimal(Decimal::parse("0.1").unwrap());
        assert_eq!(a, b);
        assert_eq!(h(&a), h(&b));
        // -0 (FLOOR('-0') is a DOUBLE -0) is the 0 it equals, in every numeric type.
        for zero in [Value::Int(0), Value::Decimal(Decimal::parse("0.00").unwrap()), Value::Double(0.0)] {
            assert_eq!(Value::Double(-0.0).sql_cmp(&zero), Some(std::cmp::Ordering::Equal), "{zero:?}");
            assert_eq!(h(&Value::Double(-0.0)), h(&zero));
        }
    }

    #[test]
    fn decimal_round_trip_and_rounding() {
        let d = Decimal::parse("-12.340").unwrap();
        assert_eq!(d.to_string(), "-12.340");
        assert_eq!(Decimal::parse("0.05").unwrap().to_string(), "0.05");
        assert_eq!(Decimal::round_to(35, 1, 0).unwrap().to_string(), "4");
        assert_eq!(Decimal::round_to(-35, 1, 0).unwrap().to_string(), "-4");
        assert!(Decimal::new(DEC_MAX + 1, 0).is_none());
        assert_eq!(Decimal::new(-DEC_MAX, 0).unwrap().mantissa(), -DEC_MAX);
    }

    #[test]
    fn collations() {
        let ci = Collation::Utf8mb4GeneralCi;
        assert_eq!(Value::text("café", ci), Value::text("CAFE", ci));
        assert_eq!(h(&Value::text("café", ci)), h(&Value::text("CAFE", ci)));
        assert_eq!(Value::text("a ", ci), Value::text("a", ci));
        assert_eq!(h(&Value::text("a ", ci)), h(&Value::text("a", ci)));
        let u = Collation::Utf8mb4UnicodeCi;
        assert_eq!(Value::text("Straße", u), Value::text("STRASSE", u));
        assert_eq!(h(&Value::text("Straße", u)), h(&Value::text("STRASSE", u)));
        assert!(Value::text("_", u) < Value::text("a", u), "the UCA puts punctuation first");
        let bin = Collation::Utf8mb4Bin;
        assert_ne!(Value::text("a", bin), Value::text("A", bin));
        assert_eq!(Value::text("a ", bin), Value::text("a", bin));
        // Exact identity is the bytes: the collation is not part of it, case and padding are.
        let (x, y) = (ExactRow(vec![Value::text("a", ci)]), ExactRow(vec![Value::text("a", bin)]));
        assert_eq!(x, y);
        let hasher = std::hash::RandomState::new();
        assert_eq!(std::hash::BuildHasher::hash_one(&hasher, &x), std::hash::BuildHasher::hash_one(&hasher, &y));
        assert_ne!(ExactRow(vec![Value::text("a", ci)]), ExactRow(vec![Value::text("A", ci)]));
        assert_ne!(ExactRow(vec![Value::text("a", ci)]), ExactRow(vec![Value::text("a ", ci)]));
    }

    /// An integer is one row whichever variant holds it (a fill gives the server's BIGINT
    /// UNSIGNED `u + 1` as `UInt`, the view computes `Int`; a DECIMAL of no decimals is an
    /// integer); a DECIMAL's scale is its own.
    #[test]
    fn exact_identity_of_integers_is_their_value() {
        let hasher = std::hash::RandomState::new();
        let hash = |r: &ExactRow<Vec<Value>>| std::hash::BuildHasher::hash_one(&hasher, r);
        for (a, b) in [(Value::Int(5), Value::UInt(5)), (Value::Int(i64::MAX), Value::UInt(i64::MAX as u64))] {
            let (x, y) = (ExactRow(vec![a]), ExactRow(vec![b]));
            assert_eq!(x, y);
            assert_eq!(hash(&x), hash(&y));
        }
        assert_ne!(ExactRow(vec![Value::Int(-1)]), ExactRow(vec![Value::UInt(u64::MAX)]));
        let dec = |s: &str| Value::Decimal(Decimal::parse(s).unwrap());
        let (x, y) = (ExactRow(vec![Value::Int(-7)]), ExactRow(vec![dec("-7")]));
        assert_eq!(x, y);
        assert_eq!(hash(&x), hash(&y));
        assert!(Value::UInt(u64::MAX).exact_cmp(&Value::Int(i64::MAX)).is_gt());
        assert!(Value::UInt(3).exact_cmp(&Value::Int(4)).is_lt());
        assert_ne!(ExactRow(vec![dec("1.0")]), ExactRow(vec![dec("1.00")]));
    }

    /// A DOUBLE's -0 and 0 are one row: the server groups them together (a grouped fill
    /// counts `'' / -1` and `'' / 1` as one value), and a view's delta of either must cancel it.
    #[test]
    fn exact_identity_of_a_negative_zero_is_zero() {
        let hasher = std::hash::RandomState::new();
        let hash = |r: &ExactRow<Vec<Value>>| std::hash::BuildHasher::hash_one(&hasher, r);
        for (a, b) in [(Value::Double(-0.0), Value::Double(0.0)), (Value::Float(-0.0), Value::Float(0.0))] {
            let (x, y) = (ExactRow(vec![a]), ExactRow(vec![b]));
            assert_eq!(x, y);
            assert_eq!(hash(&x), hash(&y));
        }
        assert_ne!(ExactRow(vec![Value::Double(-1.0)]), ExactRow(vec![Value::Double(1.0)]));
    }

    #[test]
    fn temporal_order() {
        let d1 = Date::new(2024, 2, 29);
        assert_eq!(d1.parts(), (2024, 2, 29));
        let t = DateTime::new(d1, 23, 59, 58, 999_999);
        assert_eq!(t.date(), d1);
        assert_eq!(t.time(), (23, 59, 58, 999_999));
        assert!(Value::DateTime(t) > Value::Date(d1));
        assert!(Value::Date(Date::new(0, 0, 0)) < Value::Date(d1));
    }

    #[test]
    fn a_year_operand_is_what_a_year_column_would_store() {
        // The kind and the value: `Value`'s equality is SQL's, under which 2024 = YEAR 2024.
        let year = |v: Value| year_operand(&v).map(|v| (std::mem::discriminant(&v), v));
        let is = |got: Option<(std::mem::Discriminant<Value>, Value)>, want: Value| {
            got.is_some_and(|(kind, v)| kind == std::mem::discriminant(&want) && v == want)
        };
        let text = |s: &str| Value::text(s, Collation::Utf8mb4GeneralCi);
        assert!(is(year(Value::Int(24)), Value::Year(2024)));
        assert!(is(year(Value::Int(99)), Value::Year(1999)));
        assert!(is(year(Value::Int(0)), Value::Year(0)));
        assert!(is(year(Value::Int(150)), Value::UInt(150)));
        assert!(is(year(text("0")), Value::Year(2000)));
        assert!(is(year(text("024")), Value::Year(2024)));
        assert!(is(year(text("0000")), Value::Year(0)));
        assert!(is(year(Value::Decimal(Decimal::parse("24.0").unwrap())), Value::Year(2024)));
        assert!(year(Value::Decimal(Decimal::parse("24.5").unwrap())).is_none());
        assert!(year(text("24a")).is_none());
        // A key parameter with every decimal a DECIMAL holds: no overflow, no panic.
        assert!(is(year(Value::Decimal(Decimal::parse("24.0000000000000000000000000").unwrap())), Value::Year(2024)));
    }

    #[test]
    fn string_number_comparison() {
        let s = Value::text("12abc", Collation::Utf8mb4GeneralCi);
        assert_eq!(s.sql_cmp(&Value::Int(12)), Some(Ordering::Equal));
        assert_eq!(Value::Null.sql_cmp(&Value::Int(1)), None);
        assert_eq!(parse_leading_f64("1e3x"), 1000.0);
        assert_eq!(parse_leading_f64("abc"), 0.0);
        // The server's white space only: an ideographic or no-break space is not skipped.
        assert_eq!(parse_leading_f64(" \t\n\r\x0b\x0c5"), 5.0);
        assert_eq!(parse_leading_f64("\u{3000}5"), 0.0);
        assert_eq!(parse_leading_f64("\u{a0}5"), 0.0);
        assert!(Decimal::parse("\u{3000}5").is_none() && Decimal::parse(" 5").is_some());
    }

    /// Bytes are a string to the server's comparisons: with a number, both are converted to
    /// DOUBLE (`0 = x'61'` is true, `12 = '12a'` too); with text, the text is compared as
    /// bytes (binary: no case folding, no trailing-space padding).
    #[test]
    fn bytes_compare_as_strings() {
        let b = |s: &str| Value::Bytes(s.as_bytes().into());
        let ci = |s: &str| Value::text(s, Collation::Utf8mb4GeneralCi);
        assert_eq!(Value::Int(0).sql_cmp(&b("a")), Some(Ordering::Equal));
        assert_eq!(b("12a").sql_cmp(&Value::Int(12)), Some(Ordering::Equal));
        assert_eq!(b("1.5").sql_cmp(&Value::Decimal(Decimal::parse("1.50").unwrap())), Some(Ordering::Equal));
        assert_eq!(b("2").sql_cmp(&Value::Double(10.0)), Some(Ordering::Less));
        assert_eq!(b("a").sql_cmp(&ci("a")), Some(Ordering::Equal));
        assert_eq!(ci("a").sql_cmp(&b("A")), Some(Ordering::Greater));
        assert_eq!(b("a ").sql_cmp(&ci("a")), Some(Ordering::Greater));
        assert_eq!(b("a").sql_cmp(&Value::Null), None);
    }
}
