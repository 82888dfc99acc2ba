//! [`SharedRow`]: a row held once, in one block, and shared. A reader's rows in a partition are
//! these, and the entries it publishes (and answers merged from several entries) point at the
//! same blocks instead of copying them.
//!
//! A row is one `Arc<[u8]>`: its number of values, then per value a tag byte and its payload,
//! texts and byte strings inline. A `[Value]` would be 24 bytes a value plus a block of its own
//! per text; the compact form is what the values need (an id below 2^20 is 4 bytes with its
//! tag), in a single block (docs/decisions.md, "memory per cached row", session 52). Reading a
//! value decodes it into a [`ValueRef`], which borrows the block's bytes for texts (a
//! [`TextRef`]); nothing is allocated to read a row. The encoders send a text's bytes as they
//! are; what needs its characters (a collation's order) checks them again, since without
//! `unsafe` bytes cannot be taken for a `str` unchecked (docs/decisions.md, "instructions per
//! hit", session 52).
//!
//! The encoding, per value (integers are LEB128 varints, signed ones zig-zagged first; fixed
//! widths are little-endian):
//! - NULL: the tag alone;
//! - INT (signed), TIME: a zig-zag varint; UNSIGNED, SET, BIT, DATE, YEAR, ENUM: a varint;
//! - FLOAT, DOUBLE: their bits, 4 and 8 bytes; DATETIME, TIMESTAMP: their packed 8 bytes;
//! - DECIMAL: the mantissa's low 8 bytes, high 4 bytes, and the scale (13 bytes);
//! - a text: one tag per collation, then a varint length and the UTF-8 bytes; bytes and JSON:
//!   a varint length and the bytes.
//!
//! Invariant: the block is private and only [`SharedRow`]'s constructors write one, with
//! [`put`], which [`decode`] reads back. So decoding cannot run out of bytes, meet an unknown
//! tag, and a text's bytes are the UTF-8 of the `&str` they were written from (what
//! [`TextRef`] holds them to be): where the code indexes or expects, that is why it cannot
//! panic.
//!
//! Identity: two rows' bytes being equal means their values are the same, but not conversely
//! (`Int(5)` and `UInt(5)` are one row to [`ExactRow`], and are tagged differently), so
//! [`ExactRow`]'s equality compares bytes first and values when those differ, and its hash
//! hashes values, as a row of `Value`s does.

use super::{Collation, Date, DateTime, Decimal, ExactRow, Row, TextRef, Value, ValueRef, exact_row_hash, exact_values_cmp};
use crate::mem::heap_block;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A row held once and shared (see the module's header for its form).
#[derive(Clone)]
pub struct SharedRow(Arc<[u8]>);

const NULL: u8 = 0;
const INT: u8 = 1;
const UINT: u8 = 2;
const FLOAT: u8 = 3;
const DOUBLE: u8 = 4;
const DECIMAL: u8 = 5;
/// A text: this tag plus its collation's [`collation_index`].
const TEXT: u8 = 6;
const BYTES: u8 = 10;
const DATE: u8 = 11;
const TIME: u8 = 12;
const DATETIME: u8 = 13;
const TIMESTAMP: u8 = 14;
const YEAR: u8 = 15;
const ENUM: u8 = 16;
const SET: u8 = 17;
const BIT: u8 = 18;
const JSON: u8 = 19;

const COLLATIONS: [Collation; 4] = [Collation::Binary, Collation::Utf8mb4Bin, Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi];

fn collation_index(c: Collation) -> u8 {
    match c {
        Collation::Binary => 0,
        Collation::Utf8mb4Bin => 1,
        Collation::Utf8mb4GeneralCi => 2,
        Collation::Utf8mb4UnicodeCi => 3,
    }
}

fn zigzag(i: i64) -> u64 {
    ((i << 1) ^ (i >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

fn varint_len(mut u: u64) -> usize {
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

fn put_varint(out: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        out.push(u as u8 | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

/// Bytes [`put`] writes for `v`, tag included.
fn encoded_len(v: ValueRef<'_>) -> usize {
    1 + match v {
        ValueRef::Null => 0,
        ValueRef::Int(i) | ValueRef::Time(i) => varint_len(zigzag(i)),
        ValueRef::UInt(u) | ValueRef::Set(u) | ValueRef::Bit(u) => varint_len(u),
        ValueRef::Date(d) => varint_len(d.0.into()),
        ValueRef::Year(n) | ValueRef::Enum(n) => varint_len(n.into()),
        ValueRef::Float(_) => 4,
        ValueRef::Double(_) | ValueRef::DateTime(_) | ValueRef::Timestamp(_) => 8,
        ValueRef::Decimal(_) => 13,
        ValueRef::Text(s, _) | ValueRef::Json(s) => varint_len(s.len() as u64) + s.len(),
        ValueRef::Bytes(b) => varint_len(b.len() as u64) + b.len(),
    }
}

/// Appends `v`'s tag and payload.
fn put(out: &mut Vec<u8>, v: ValueRef<'_>) {
    let string = |out: &mut Vec<u8>, tag: u8, b: &[u8]| {
        out.push(tag);
        put_varint(out, b.len() as u64);
        out.extend_from_slice(b);
    };
    let varint = |out: &mut Vec<u8>, tag: u8, u: u64| {
        out.push(tag);
        put_varint(out, u);
    };
    let fixed = |out: &mut Vec<u8>, tag: u8, b: &[u8]| {
        out.push(tag);
        out.extend_from_slice(b);
    };
    match v {
        ValueRef::Null => out.push(NULL),
        ValueRef::Int(i) => varint(out, INT, zigzag(i)),
        ValueRef::UInt(u) => varint(out, UINT, u),
        ValueRef::Float(f) => fixed(out, FLOAT, &f.to_bits().to_le_bytes()),
        ValueRef::Double(f) => fixed(out, DOUBLE, &f.to_bits().to_le_bytes()),
        ValueRef::Decimal(d) => {
            out.push(DECIMAL);
            out.extend_from_slice(&d.lo.to_le_bytes());
            out.extend_from_slice(&d.hi.to_le_bytes());
            out.push(d.scale);
        }
        ValueRef::Text(s, c) => string(out, TEXT + collation_index(c), s.as_bytes()),
        ValueRef::Bytes(b) => string(out, BYTES, b),
        ValueRef::Date(d) => varint(out, DATE, d.0.into()),
        ValueRef::Time(t) => varint(out, TIME, zigzag(t)),
        ValueRef::DateTime(d) => fixed(out, DATETIME, &d.0.to_le_bytes()),
        ValueRef::Timestamp(d) => fixed(out, TIMESTAMP, &d.0.to_le_bytes()),
        ValueRef::Year(y) => varint(out, YEAR, y.into()),
        ValueRef::Enum(e) => varint(out, ENUM, e.into()),
        ValueRef::Set(s) => varint(out, SET, s),
        ValueRef::Bit(b) => varint(out, BIT, b),
        ValueRef::Json(s) => string(out, JSON, s.as_bytes()),
    }
}

/// Reads a block [`put`] wrote, front to back (see the module's invariant: the slicing below
/// stays in bounds).
#[derive(Clone)]
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    #[inline]
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    #[inline]
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().expect("a shared row's block holds what `put` wrote");
        self.0 = rest;
        b
    }
    fn fixed<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N));
        a
    }
    #[inline]
    fn varint(&mut self) -> u64 {
        // Most are one byte: a text's length, a small id's digits.
        if let [b @ 0..0x80, rest @ ..] = self.0 {
            self.0 = rest;
            return u64::from(*b);
        }
        let (mut u, mut shift) = (0u64, 0);
        loop {
            let b = self.byte();
            u |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return u;
            }
            shift += 7;
        }
    }
    #[inline]
    fn string(&mut self) -> &'a [u8] {
        let n = self.varint() as usize;
        self.take(n)
    }
}

/// The value at the cursor.
#[inline(always)]
fn decode<'a>(c: &mut Cursor<'a>) -> ValueRef<'a> {
    // Narrowing casts below undo `put`'s widening of the same value (the module's invariant).
    match c.byte() {
        NULL => ValueRef::Null,
        INT => ValueRef::Int(unzigzag(c.varint())),
        UINT => ValueRef::UInt(c.varint()),
        FLOAT => ValueRef::Float(f32::from_bits(u32::from_le_bytes(c.fixed()))),
        DOUBLE => ValueRef::Double(f64::from_bits(u64::from_le_bytes(c.fixed()))),
        DECIMAL => {
            let lo = u64::from_le_bytes(c.fixed());
            let hi = i32::from_le_bytes(c.fixed());
            ValueRef::Decimal(Decimal { lo, hi, scale: c.byte() })
        }
        tag @ TEXT..BYTES => ValueRef::Text(TextRef::of_block(c.string()), COLLATIONS[usize::from(tag - TEXT)]),
        BYTES => ValueRef::Bytes(c.string()),
        DATE => ValueRef::Date(Date(c.varint() as u32)),
        TIME => ValueRef::Time(unzigzag(c.varint())),
        DATETIME => ValueRef::DateTime(DateTime(u64::from_le_bytes(c.fixed()))),
        TIMESTAMP => ValueRef::Timestamp(DateTime(u64::from_le_bytes(c.fixed()))),
        YEAR => ValueRef::Year(c.varint() as u16),
        ENUM => ValueRef::Enum(c.varint() as u16),
        SET => ValueRef::Set(c.varint()),
        BIT => ValueRef::Bit(c.varint()),
        JSON => ValueRef::Json(TextRef::of_block(c.string())),
        tag => unreachable!("tag {tag} is not one `put` writes"),
    }
}

/// A [`SharedRow`]'s values in order, borrowed from its block.
#[derive(Clone)]
pub struct SharedValues<'a> {
    at: Cursor<'a>,
    left: usize,
}

impl<'a> Iterator for SharedValues<'a> {
    type Item = ValueRef<'a>;
    #[inline(always)]
    fn next(&mut self) -> Option<ValueRef<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(decode(&mut self.at))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for SharedValues<'_> {}

impl SharedRow {
    /// A row of `values` (walked twice: once to size the block).
    pub fn from_values<'a>(values: impl Iterator<Item = ValueRef<'a>> + Clone) -> SharedRow {
        let (mut n, mut len) = (0u64, 0);
        for v in values.clone() {
            n += 1;
            len += encoded_len(v);
        }
        let mut out = Vec::with_capacity(varint_len(n) + len);
        put_varint(&mut out, n);
        for v in values {
            put(&mut out, v);
        }
        SharedRow(out.into())
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        Cursor(&self.0).varint() as usize
    }

    /// True for a row of no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values, borrowed, in order.
    #[inline]
    pub fn iter(&self) -> SharedValues<'_> {
        let mut at = Cursor(&self.0);
        let left = at.varint() as usize;
        SharedValues { at, left }
    }

    /// Value `i`, if the row has one (reads the values before it).
    pub fn get(&self, i: usize) -> Option<ValueRef<'_>> {
        self.iter().nth(i)
    }

    /// The row's first `width` values: the row itself (shared) if it is no wider, else a copy
    /// of them in a block of its own.
    pub fn cut(&self, width: usize) -> SharedRow {
        let mut values = self.iter();
        if values.len() <= width {
            return self.clone();
        }
        let start = self.0.len() - values.at.0.len();
        for _ in 0..width {
            values.next();
        }
        let end = self.0.len() - values.at.0.len();
        let mut out = Vec::with_capacity(varint_len(width as u64) + end - start);
        put_varint(&mut out, width as u64);
        out.extend_from_slice(&self.0[start..end]);
        SharedRow(out.into())
    }

    /// The values owned: one allocation for the vector and one per text or byte string (for
    /// tests and cold paths).
    pub fn to_vec(&self) -> Vec<Value> {
        self.iter().map(ValueRef::to_owned).collect()
    }

    /// The heap block the row takes ([`heap_block`]): the `Arc`'s two counts and the bytes.
    pub fn heap_bytes(&self) -> usize {
        heap_block(2 * size_of::<usize>() + self.0.len())
    }
}

impl From<&[Value]> for SharedRow {
    fn from(values: &[Value]) -> SharedRow {
        SharedRow::from_values(values.iter().map(Value::as_ref))
    }
}

impl From<Vec<Value>> for SharedRow {
    fn from(values: Vec<Value>) -> SharedRow {
        SharedRow::from(values.as_slice())
    }
}

impl From<Row> for SharedRow {
    fn from(values: Row) -> SharedRow {
        SharedRow::from(&*values)
    }
}

impl<'a> IntoIterator for &'a SharedRow {
    type Item = ValueRef<'a>;
    type IntoIter = SharedValues<'a>;
    fn into_iter(self) -> SharedValues<'a> {
        self.iter()
    }
}

/// SQL's equality value by value, as `[Value]`'s (not exact identity: that is [`ExactRow`]'s).
impl PartialEq for SharedRow {
    fn eq(&self, o: &SharedRow) -> bool {
        self.0 == o.0 || (self.len() == o.len() && self.iter().zip(o.iter()).all(|(a, b)| a == b))
    }
}

/// SQL's equality value by value, as `[Value]`'s: what tests compare answers with.
impl PartialEq<[Value]> for SharedRow {
    fn eq(&self, o: &[Value]) -> bool {
        self.len() == o.len() && self.iter().zip(o).all(|(a, b)| a == *b)
    }
}

impl PartialEq<Vec<Value>> for SharedRow {
    fn eq(&self, o: &Vec<Value>) -> bool {
        *self == **o
    }
}

impl<const N: usize> PartialEq<[Value; N]> for SharedRow {
    fn eq(&self, o: &[Value; N]) -> bool {
        *self == o[..]
    }
}

impl fmt::Debug for SharedRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for ExactRow<SharedRow> {
    fn eq(&self, o: &ExactRow<SharedRow>) -> bool {
        // The same bytes are the same values; different bytes may still be one row (module
        // header: an integer under two tags).
        self.0.0 == o.0.0 || exact_values_cmp(self.0.iter(), o.0.iter()) == Ordering::Equal
    }
}
impl Eq for ExactRow<SharedRow> {}
impl Hash for ExactRow<SharedRow> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        exact_row_hash(self.0.iter(), h);
    }
}
impl PartialOrd for ExactRow<SharedRow> {
    fn partial_cmp(&self, o: &ExactRow<SharedRow>) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for ExactRow<SharedRow> {
    fn cmp(&self, o: &ExactRow<SharedRow>) -> Ordering {
        exact_values_cmp(self.0.iter(), o.0.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn every_kind() -> Vec<Value> {
        let dec = |s: &str| Value::Decimal(Decimal::parse(s).unwrap());
        let mut values = vec![
            Value::Null,
            Value::Int(0),
            Value::Int(-1),
            Value::Int(i64::MIN),
            Value::Int(i64::MAX),
            Value::UInt(u64::MAX),
            Value::UInt(127),
            Value::UInt(128),
            Value::Float(-1.5),
            Value::Double(f64::MIN_POSITIVE),
            Value::Double(-0.0),
            dec("-12.340"),
            Value::Decimal(Decimal::new(-super::super::DEC_MAX, 30).unwrap()),
            Value::Decimal(Decimal::new(super::super::DEC_MAX, 0).unwrap()),
            Value::Bytes(vec![0xff, 0, 0xc3].into()),
            Value::Bytes(Box::default()),
            Value::Date(Date::new(2024, 2, 29)),
            Value::Date(Date(u32::MAX)),
            Value::Time(-(838 * 3600 + 59 * 60 + 59) * 1_000_000),
            Value::DateTime(DateTime(u64::MAX)),
            Value::Timestamp(DateTime::new(Date::new(1970, 1, 1), 0, 0, 1, 5)),
            Value::Year(2155),
            Value::Enum(u16::MAX),
            Value::Set(u64::MAX),
            Value::Bit(1),
            Value::Json("{\"a\": [1, \"é\"]}".into()),
            Value::text("", Collation::Binary),
            Value::text(&"x".repeat(300), Collation::Utf8mb4Bin),
        ];
        for c in COLLATIONS {
            values.push(Value::text("Straße 🦀", c));
        }
        values
    }

    /// What identifies a value exactly, and its collation, which exact identity leaves out.
    fn same(a: &Value, b: &Value) -> bool {
        let collation = |v: &Value| match v {
            Value::Text(_, c) => Some(*c),
            _ => None,
        };
        std::mem::discriminant(a) == std::mem::discriminant(b)
            && a.exact_cmp(b).is_eq()
            && collation(a) == collation(b)
            && format!("{a:?}") == format!("{b:?}")
    }

    #[test]
    fn every_value_reads_back_as_written() {
        let values = every_kind();
        let row = SharedRow::from(values.as_slice());
        assert_eq!(row.len(), values.len());
        assert_eq!(row.iter().len(), values.len());
        for (got, want) in row.to_vec().iter().zip(&values) {
            assert!(same(got, want), "{got:?} for {want:?}");
        }
        assert_eq!(row.to_vec().len(), values.len());
        for (i, want) in values.iter().enumerate() {
            assert!(same(&row.get(i).unwrap().to_owned(), want));
        }
        assert!(row.get(values.len()).is_none());
        assert!(SharedRow::from(Vec::new()).is_empty());
        assert_eq!(row, values);
    }

    #[test]
    fn a_cut_is_the_first_columns() {
        let values = every_kind();
        let row = SharedRow::from(values.as_slice());
        for width in 0..=values.len() + 1 {
            let cut = row.cut(width);
            let want = &values[..width.min(values.len())];
            assert_eq!(cut.len(), want.len());
            assert!(cut.to_vec().iter().zip(want).all(|(a, b)| same(a, b)));
            assert_eq!(cut.0, SharedRow::from(want).0, "the block a row of those values would have");
        }
        assert!(Arc::ptr_eq(&row.cut(values.len()).0, &row.0), "no copy when nothing is cut");
    }

    /// A shared row is one row to exact identity exactly when a row of the same values is, and
    /// hashes as it does: an integer under any of its variants is one row.
    #[test]
    fn exact_identity_is_the_values() {
        let hasher = std::hash::RandomState::new();
        let dec = |s: &str| Value::Decimal(Decimal::parse(s).unwrap());
        let ci = Collation::Utf8mb4GeneralCi;
        let rows: Vec<Vec<Value>> = vec![
            vec![Value::Int(5)],
            vec![Value::UInt(5)],
            vec![dec("5")],
            vec![dec("5.0")],
            vec![Value::Int(-1)],
            vec![Value::UInt(u64::MAX)],
            vec![Value::Double(0.0)],
            vec![Value::Double(-0.0)],
            vec![Value::text("a", ci)],
            vec![Value::text("a", Collation::Utf8mb4Bin)],
            vec![Value::text("A", ci)],
            vec![Value::text("a ", ci)],
            vec![Value::Int(5), Value::Null],
            vec![],
        ];
        for a in &rows {
            for b in &rows {
                let (x, y) = (ExactRow(a.clone()), ExactRow(b.clone()));
                let (sx, sy) = (ExactRow(SharedRow::from(a.as_slice())), ExactRow(SharedRow::from(b.as_slice())));
                assert_eq!(sx == sy, x == y, "{a:?} {b:?}");
                assert_eq!(sx.cmp(&sy), x.cmp(&y), "{a:?} {b:?}");
                assert_eq!(hasher.hash_one(&sx), hasher.hash_one(&x), "{a:?}");
            }
        }
    }

    #[test]
    fn heap_bytes_are_the_arc_block() {
        let row = SharedRow::from(vec![Value::Int(1), Value::text(&"t".repeat(40), Collation::Utf8mb4GeneralCi), Value::Int(7)]);
        // Count, two ids of one byte each with their tags, a text's tag, length and 40 bytes.
        assert_eq!(row.0.len(), 1 + 2 + 2 + 42);
        assert_eq!(row.heap_bytes(), heap_block(16 + 47));
    }
}
