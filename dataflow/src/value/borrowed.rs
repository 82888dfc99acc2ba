//! [`ValueRef`]: a [`Value`] borrowed from wherever it is held, a `Value` or a [`SharedRow`]'s
//! block (which holds no `Value`s to lend), and the orders every value has: SQL's total order
//! for grouping, joining and sorting, and exact identity. They are implemented here once, on
//! the borrowed form; `Value`'s own methods call them through [`Value::as_ref`], which costs a
//! copy of at most 24 bytes and no allocation.
//!
//! [`SharedRow`]: super::SharedRow

use super::{Collation, Date, DateTime, Decimal, Value, parse_leading_f64};
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A value borrowed: texts and byte strings by reference, everything else by value. Mirrors
/// [`Value`] variant for variant.
#[derive(Clone, Copy)]
pub enum ValueRef<'a> {
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
    /// CHAR, VARCHAR, TEXT with the column's collation.
    Text(TextRef<'a>, Collation),
    /// BINARY, VARBINARY, BLOB.
    Bytes(&'a [u8]),
    /// DATE.
    Date(Date),
    /// TIME as signed microseconds.
    Time(i64),
    /// DATETIME.
    DateTime(DateTime),
    /// TIMESTAMP in UTC.
    Timestamp(DateTime),
    /// YEAR.
    Year(u16),
    /// ENUM: 1-based index into the column's labels.
    Enum(u16),
    /// SET: bitmask over the column's labels.
    Set(u64),
    /// BIT(n).
    Bit(u64),
    /// JSON, as its canonical text.
    Json(TextRef<'a>),
}

/// A text borrowed as its UTF-8 bytes: made from a `&str`, or in this crate from a shared
/// row's block, which holds the bytes of a `&str` (`shared::put`), so they are always UTF-8.
/// The hit path's encoders send the bytes as they are ([`TextRef::as_bytes`]); what needs the
/// characters (the collations' orders, conversions) asks [`TextRef::as_str`], which checks
/// them again, since safe Rust cannot take bytes for a `str` unchecked (`unsafe_code` is
/// forbidden in the workspace): ~1.4 instructions a byte, paid off the hit path.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TextRef<'a>(&'a [u8]);

impl<'a> TextRef<'a> {
    /// `s`'s text.
    pub fn new(s: &'a str) -> TextRef<'a> {
        TextRef(s.as_bytes())
    }

    /// Bytes a shared row's block holds for a text (the module's invariant: UTF-8).
    pub(super) fn of_block(bytes: &'a [u8]) -> TextRef<'a> {
        TextRef(bytes)
    }

    /// The UTF-8 bytes, unchecked (they are UTF-8 by construction).
    pub fn as_bytes(self) -> &'a [u8] {
        self.0
    }

    /// The text as a `str` (its bytes checked again).
    pub fn as_str(self) -> &'a str {
        // UTF-8 by construction (the type's invariant): the check cannot fail.
        std::str::from_utf8(self.0).expect("a text's bytes are the UTF-8 of a str")
    }

    /// Its length in bytes.
    pub fn len(self) -> usize {
        self.0.len()
    }

    /// True for the empty text.
    pub fn is_empty(self) -> bool {
        self.0.is_empty()
    }
}

/// Hashed as its `str` would be (its bytes, then 0xff), without checking them again.
impl Hash for TextRef<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write(self.0);
        h.write_u8(0xff);
    }
}

impl fmt::Debug for TextRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

pub(super) enum NumRef {
    I(i128),
    D(Decimal),
    F(f64),
}

impl Value {
    /// This value borrowed (no allocation).
    #[inline]
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Int(*i),
            Value::UInt(u) => ValueRef::UInt(*u),
            Value::Float(f) => ValueRef::Float(*f),
            Value::Double(f) => ValueRef::Double(*f),
            Value::Decimal(d) => ValueRef::Decimal(*d),
            Value::Text(s, c) => ValueRef::Text(TextRef::new(s), *c),
            Value::Bytes(b) => ValueRef::Bytes(b),
            Value::Date(d) => ValueRef::Date(*d),
            Value::Time(t) => ValueRef::Time(*t),
            Value::DateTime(d) => ValueRef::DateTime(*d),
            Value::Timestamp(d) => ValueRef::Timestamp(*d),
            Value::Year(y) => ValueRef::Year(*y),
            Value::Enum(e) => ValueRef::Enum(*e),
            Value::Set(s) => ValueRef::Set(*s),
            Value::Bit(b) => ValueRef::Bit(*b),
            Value::Json(s) => ValueRef::Json(TextRef::new(s)),
        }
    }
}

impl<'a> From<&'a Value> for ValueRef<'a> {
    fn from(v: &'a Value) -> ValueRef<'a> {
        v.as_ref()
    }
}

impl ValueRef<'_> {
    /// The value owned: a text, byte string or JSON is copied into a block of its own; any
    /// other value allocates nothing.
    pub fn to_owned(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Int(i) => Value::Int(i),
            ValueRef::UInt(u) => Value::UInt(u),
            ValueRef::Float(f) => Value::Float(f),
            ValueRef::Double(f) => Value::Double(f),
            ValueRef::Decimal(d) => Value::Decimal(d),
            ValueRef::Text(s, c) => Value::Text(s.as_str().into(), c),
            ValueRef::Bytes(b) => Value::Bytes(b.into()),
            ValueRef::Date(d) => Value::Date(d),
            ValueRef::Time(t) => Value::Time(t),
            ValueRef::DateTime(d) => Value::DateTime(d),
            ValueRef::Timestamp(d) => Value::Timestamp(d),
            ValueRef::Year(y) => Value::Year(y),
            ValueRef::Enum(e) => Value::Enum(e),
            ValueRef::Set(s) => Value::Set(s),
            ValueRef::Bit(b) => Value::Bit(b),
            ValueRef::Json(s) => Value::Json(s.as_str().into()),
        }
    }

    /// True for SQL NULL.
    pub fn is_null(self) -> bool {
        matches!(self, ValueRef::Null)
    }

    pub(super) fn num(self) -> Option<NumRef> {
        Some(match self {
            ValueRef::Int(i) => NumRef::I(i as i128),
            ValueRef::UInt(u) => NumRef::I(u as i128),
            ValueRef::Year(y) => NumRef::I(y as i128),
            ValueRef::Bit(b) => NumRef::I(b as i128),
            ValueRef::Decimal(d) => NumRef::D(d),
            ValueRef::Float(f) => NumRef::F(f as f64),
            ValueRef::Double(f) => NumRef::F(f),
            _ => return None,
        })
    }

    /// Total order used for grouping, joining, DISTINCT and ORDER BY ([`Value::cmp_total`]).
    pub fn cmp_total(self, other: ValueRef<'_>) -> Ordering {
        use ValueRef::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Less,
            (_, Null) => Ordering::Greater,
            // The commonest keys (ids), without the i128 detour of mixed numeric comparison.
            (Int(a), Int(b)) => a.cmp(&b),
            (UInt(a), UInt(b)) => a.cmp(&b),
            // Identical text has identical weights under every collation: skip the folding
            // (group and join keys compare equal far more often than not).
            (Text(a, _), Text(b, _)) if a == b => Ordering::Equal,
            (Text(a, ca), Text(b, _)) => ca.compare(a.as_str(), b.as_str()),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            (Json(a), Json(b)) => a.cmp(&b),
            (Date(a), Date(b)) => a.cmp(&b),
            (DateTime(a), DateTime(b)) | (Timestamp(a), Timestamp(b)) => a.cmp(&b),
            (DateTime(a), Timestamp(b)) | (Timestamp(a), DateTime(b)) => a.cmp(&b),
            (Date(a), DateTime(b)) => super::DateTime::new(a, 0, 0, 0, 0).cmp(&b),
            (DateTime(a), Date(b)) => a.cmp(&super::DateTime::new(b, 0, 0, 0, 0)),
            (Time(a), Time(b)) => a.cmp(&b),
            (Enum(a), Enum(b)) => a.cmp(&b),
            (Set(a), Set(b)) => a.cmp(&b),
            _ => match (self.num(), other.num()) {
                (Some(a), Some(b)) => cmp_num(a, b),
                _ => self.kind_rank().cmp(&other.kind_rank()),
            },
        }
    }

    pub(super) fn kind_rank(self) -> u8 {
        match self {
            ValueRef::Null => 0,
            ValueRef::Int(_) | ValueRef::UInt(_) | ValueRef::Float(_) | ValueRef::Double(_) => 1,
            ValueRef::Decimal(_) | ValueRef::Year(_) | ValueRef::Bit(_) => 1,
            ValueRef::Text(..) => 2,
            ValueRef::Bytes(_) => 3,
            ValueRef::Date(_) | ValueRef::DateTime(_) | ValueRef::Timestamp(_) => 4,
            ValueRef::Time(_) => 5,
            ValueRef::Enum(_) => 6,
            ValueRef::Set(_) => 7,
            ValueRef::Json(_) => 8,
        }
    }

    /// SQL comparison ([`Value::sql_cmp`]).
    pub fn sql_cmp(self, other: ValueRef<'_>) -> Option<Ordering> {
        use ValueRef::*;
        if self.is_null() || other.is_null() {
            return None;
        }
        let number = |s: &str| Double(parse_leading_f64(s));
        Some(match (self, other) {
            (Text(..), Text(..)) => self.cmp_total(other),
            (Text(s, _), o) if o.num().is_some() => number(s.as_str()).cmp_total(o),
            (o, Text(s, _)) if o.num().is_some() => o.cmp_total(number(s.as_str())),
            (Bytes(b), o) if o.num().is_some() => number(&String::from_utf8_lossy(b)).cmp_total(o),
            (o, Bytes(b)) if o.num().is_some() => o.cmp_total(number(&String::from_utf8_lossy(b))),
            (Bytes(b), Text(s, _)) => b.cmp(s.as_bytes()),
            (Text(s, _), Bytes(b)) => s.as_bytes().cmp(b),
            _ => self.cmp_total(other),
        })
    }

    /// An integer's value for exact identity: an integer is the same row whichever variant
    /// holds it. The server's BIGINT UNSIGNED `u + 1` is filled as `UInt` where the view
    /// computes `Int`, and `FLOOR(d)` of a DECIMAL is a DECIMAL of no decimals to the server.
    fn exact_int(self) -> Option<i64> {
        match self {
            ValueRef::Int(i) => Some(i),
            ValueRef::UInt(u) => i64::try_from(u).ok(),
            ValueRef::Decimal(d) if d.scale() == 0 => i64::try_from(d.mantissa()).ok(),
            _ => None,
        }
    }

    fn exact_tag(self) -> u8 {
        if self.exact_int().is_some() {
            return 1;
        }
        match self {
            ValueRef::Null => 0,
            ValueRef::Int(_) => 1,
            ValueRef::UInt(_) => 2,
            ValueRef::Float(_) => 3,
            ValueRef::Double(_) => 4,
            ValueRef::Decimal(_) => 5,
            ValueRef::Text(..) => 6,
            ValueRef::Bytes(_) => 7,
            ValueRef::Date(_) => 8,
            ValueRef::Time(_) => 9,
            ValueRef::DateTime(_) => 10,
            ValueRef::Timestamp(_) => 11,
            ValueRef::Year(_) => 12,
            ValueRef::Enum(_) => 13,
            ValueRef::Set(_) => 14,
            ValueRef::Bit(_) => 15,
            ValueRef::Json(_) => 16,
        }
    }

    /// Total order on exact identity: type first, then raw payload ([`super::ExactRow`]).
    pub fn exact_cmp(self, o: ValueRef<'_>) -> Ordering {
        use ValueRef::*;
        let t = self.exact_tag().cmp(&o.exact_tag());
        if t != Ordering::Equal {
            return t;
        }
        if let (Some(a), Some(b)) = (self.exact_int(), o.exact_int()) {
            return a.cmp(&b);
        }
        match (self, o) {
            (UInt(a), UInt(b)) | (Set(a), Set(b)) | (Bit(a), Bit(b)) => a.cmp(&b),
            // `+ 0.0` makes -0 0: the server groups them as one value.
            (Float(a), Float(b)) => (a + 0.0).total_cmp(&(b + 0.0)),
            (Double(a), Double(b)) => (a + 0.0).total_cmp(&(b + 0.0)),
            (Decimal(a), Decimal(b)) => (a.mantissa(), a.scale()).cmp(&(b.mantissa(), b.scale())),
            (Text(a, _), Text(b, _)) => a.cmp(&b),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            (Json(a), Json(b)) => a.cmp(&b),
            (Date(a), Date(b)) => a.cmp(&b),
            (Time(a), Time(b)) => a.cmp(&b),
            (DateTime(a), DateTime(b)) | (Timestamp(a), Timestamp(b)) => a.cmp(&b),
            (Year(a), Year(b)) => a.cmp(&b),
            (Enum(a), Enum(b)) => a.cmp(&b),
            _ => Ordering::Equal,
        }
    }

    /// Hashes the value under exact identity (consistent with [`ValueRef::exact_cmp`]).
    pub fn exact_hash<H: Hasher>(self, h: &mut H) {
        self.exact_tag().hash(h);
        if let Some(i) = self.exact_int() {
            return i.hash(h);
        }
        match self {
            ValueRef::Null => {}
            ValueRef::Int(i) => i.hash(h),
            ValueRef::UInt(u) | ValueRef::Set(u) | ValueRef::Bit(u) => u.hash(h),
            ValueRef::Float(f) => (f + 0.0).to_bits().hash(h),
            ValueRef::Double(f) => (f + 0.0).to_bits().hash(h),
            ValueRef::Decimal(d) => (d.mantissa(), d.scale()).hash(h),
            ValueRef::Text(s, _) => s.hash(h),
            ValueRef::Bytes(b) => b.hash(h),
            ValueRef::Json(s) => s.hash(h),
            ValueRef::Date(d) => d.hash(h),
            ValueRef::Time(t) => t.hash(h),
            ValueRef::DateTime(d) | ValueRef::Timestamp(d) => d.hash(h),
            ValueRef::Year(y) => y.hash(h),
            ValueRef::Enum(e) => e.hash(h),
        }
    }
}

pub(super) fn cmp_num(a: NumRef, b: NumRef) -> Ordering {
    match (a, b) {
        (NumRef::I(a), NumRef::I(b)) => a.cmp(&b),
        (NumRef::D(a), NumRef::D(b)) => a.cmp_exact(b),
        (NumRef::I(a), NumRef::D(b)) => match Decimal::new(a, 0) {
            Some(a) => a.cmp_exact(b),
            None => (a as f64).total_cmp(&b.to_f64()),
        },
        (NumRef::D(a), NumRef::I(b)) => cmp_num(NumRef::I(b), NumRef::D(a)).reverse(),
        // `+ 0.0` makes -0 the 0 it equals (total_cmp orders -0 before 0); a float is never NaN.
        (a, b) => (num_f64(&a) + 0.0).total_cmp(&(num_f64(&b) + 0.0)),
    }
}

pub(super) fn num_f64(n: &NumRef) -> f64 {
    match n {
        NumRef::I(i) => *i as f64,
        NumRef::D(d) => d.to_f64(),
        NumRef::F(f) => *f,
    }
}

/// [`super::ExactRow`]'s order on rows of borrowed values: column by column,
/// [`ValueRef::exact_cmp`], then the shorter first.
pub fn exact_values_cmp<'a, 'b>(a: impl IntoIterator<Item = ValueRef<'a>>, b: impl IntoIterator<Item = ValueRef<'b>>) -> Ordering {
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) => match x.exact_cmp(y) {
                Ordering::Equal => {}
                c => return c,
            },
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
        }
    }
}

impl PartialEq for ValueRef<'_> {
    /// SQL's equality, as [`Value`]'s: `cmp_total(..) == Equal`.
    fn eq(&self, other: &ValueRef<'_>) -> bool {
        self.cmp_total(*other) == Ordering::Equal
    }
}

impl PartialEq<Value> for ValueRef<'_> {
    fn eq(&self, other: &Value) -> bool {
        self.cmp_total(other.as_ref()) == Ordering::Equal
    }
}

impl fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ValueRef::Null => write!(f, "NULL"),
            ValueRef::Int(i) => write!(f, "{i}"),
            ValueRef::UInt(u) => write!(f, "{u}u"),
            ValueRef::Float(x) => write!(f, "{x}f"),
            ValueRef::Double(x) => write!(f, "{x}d"),
            ValueRef::Decimal(d) => write!(f, "{d}"),
            ValueRef::Text(s, _) => write!(f, "{s:?}"),
            ValueRef::Bytes(b) => write!(f, "x{b:02x?}"),
            ValueRef::Date(d) => write!(f, "{:?}", d.parts()),
            ValueRef::Time(t) => write!(f, "time({t})"),
            ValueRef::DateTime(d) => write!(f, "dt({:?} {:?})", d.date().parts(), d.time()),
            ValueRef::Timestamp(d) => write!(f, "ts({:?} {:?})", d.date().parts(), d.time()),
            ValueRef::Year(y) => write!(f, "year({y})"),
            ValueRef::Enum(e) => write!(f, "enum({e})"),
            ValueRef::Set(s) => write!(f, "set({s:#x})"),
            ValueRef::Bit(b) => write!(f, "b'{b:b}'"),
            ValueRef::Json(j) => write!(f, "json({})", j.as_str()),
        }
    }
}
