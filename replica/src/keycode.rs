//! Index keys: an encoding of [`Value`]s as bytes such that equal values (SQL equality, the
//! dataflow's `Value: Eq`) encode to equal bytes and every encoding is self-delimiting, so a
//! key made of several columns is the concatenation of their encodings and one RocksDB prefix
//! scan over the encoding of an index value returns exactly the entries for that value.
//!
//! Order: within one kind the byte order is the value order (integers numerically, strings by
//! their collation's weights, dates and times chronologically), so a primary-key column family
//! iterates in primary-key order (the snapshot copies and resumes by it). Integral numbers,
//! non-integral DECIMALs (exactly) and non-integral doubles (by their bits) form three runs;
//! fills only look up equalities, never ranges, and a view joins a DECIMAL with exact numbers
//! only, never with a double (`compile::types::joinable`).
//!
//! Why readers still compare: strings that collate alike encode alike. The store filters every
//! scanned row by SQL equality with the key it asked for; the encoding only has to never split
//! equal values, and never join two values that may both be one table's primary keys.

use freshet_dataflow::Value;

/// Appends the index encoding of `v`.
pub fn encode_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(0x00),
        Value::Int(i) => int(*i as i128, out),
        Value::UInt(u) | Value::Bit(u) => int(*u as i128, out),
        Value::Year(y) => int(*y as i128, out),
        Value::Float(f) => float(*f as f64, out),
        Value::Double(f) => float(*f, out),
        Value::Decimal(d) => {
            let p = 10i128.pow(d.scale() as u32);
            if d.mantissa() % p == 0 { int(d.mantissa() / p, out) } else { fraction(d.mantissa(), d.scale(), out) }
        }
        Value::Text(s, c) => {
            out.push(0x20);
            // Weights are code points or a collation table's 16-bit weights (< 0x110000): 3
            // bytes each, shifted by one so that the terminator (three zero bytes) sorts before
            // every weight. Changing them changes every stored key: `store::KEY_ENCODING`.
            for w in c.weights(s) {
                let w = w + 1;
                out.extend_from_slice(&[(w >> 16) as u8, (w >> 8) as u8, w as u8]);
            }
            out.extend_from_slice(&[0, 0, 0]);
        }
        Value::Bytes(b) => escaped(0x30, b, out),
        Value::Date(d) => datetime(freshet_dataflow::DateTime::new(*d, 0, 0, 0, 0).0, out),
        Value::DateTime(d) | Value::Timestamp(d) => datetime(d.0, out),
        Value::Time(t) => {
            out.push(0x50);
            out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::Enum(e) => {
            out.push(0x60);
            out.extend_from_slice(&e.to_be_bytes());
        }
        Value::Set(s) => {
            out.push(0x70);
            out.extend_from_slice(&s.to_be_bytes());
        }
        Value::Json(s) => escaped(0x80, s.as_bytes(), out),
    }
}

/// The encoding of a key (several column values), concatenated.
pub fn encode_key<'a>(values: impl IntoIterator<Item = &'a Value>) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        encode_value(v, &mut out);
    }
    out
}

/// An integral number: sign-flipped big-endian i128, so byte order is numeric order.
fn int(i: i128, out: &mut Vec<u8>) {
    out.push(0x10);
    out.extend_from_slice(&((i as u128) ^ (1 << 127)).to_be_bytes());
}

/// A float: integral ones (as the dataflow hashes them) join the integers, others keep their
/// order among themselves by the usual sign-magnitude flip.
fn float(f: f64, out: &mut Vec<u8>) {
    if f.fract() == 0.0 && f.abs() < 1e30 {
        return int(f as i128, out);
    }
    let bits = f.to_bits();
    let key = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
    out.push(0x11);
    out.extend_from_slice(&key.to_be_bytes());
}

/// A non-integral DECIMAL, exactly: its floor as an integer is, then its fraction in units of
/// 10^-30 (a DECIMAL's scale is at most 30). Two decimals one `f64` holds are distinct keys
/// (a primary key is a row's identity in the store: they must not be one row), equal ones
/// (`0.10`, `0.1`) one, and the order is the numeric order among them.
fn fraction(mantissa: i128, scale: u8, out: &mut Vec<u8>) {
    let p = 10i128.pow(u32::from(scale));
    let (floor, rest) = (mantissa.div_euclid(p), mantissa.rem_euclid(p));
    out.push(0x12);
    out.extend_from_slice(&((floor as u128) ^ (1 << 127)).to_be_bytes());
    out.extend_from_slice(&((rest as u128) * 10u128.pow(30 - u32::from(scale).min(30))).to_be_bytes());
}

fn datetime(d: u64, out: &mut Vec<u8>) {
    out.push(0x40);
    out.extend_from_slice(&d.to_be_bytes());
}

/// Bytes with 0x00 escaped as 0x00 0xFF and the end as 0x00 0x01: self-delimiting and
/// order-preserving (a proper prefix sorts first).
fn escaped(tag: u8, b: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    for &x in b {
        out.push(x);
        if x == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use freshet_dataflow::{Collation, Decimal};
    use proptest::prelude::*;

    fn enc(v: &Value) -> Vec<u8> {
        encode_key([v])
    }

    #[test]
    fn equal_values_encode_alike() {
        let ci = Collation::Utf8mb4GeneralCi;
        assert_eq!(enc(&Value::text("Story ", ci)), enc(&Value::text("STORY", ci)));
        assert_eq!(enc(&Value::text("á", ci)), enc(&Value::text("A", ci)));
        assert_ne!(enc(&Value::text("a", Collation::Utf8mb4Bin)), enc(&Value::text("A", Collation::Utf8mb4Bin)));
        assert_eq!(enc(&Value::Int(3)), enc(&Value::UInt(3)));
        assert_eq!(enc(&Value::Int(3)), enc(&Value::Decimal(Decimal::new(300, 2).unwrap())));
        assert_eq!(enc(&Value::Double(3.0)), enc(&Value::Int(3)));
        let dec = |m: i128, s: u8| enc(&Value::Decimal(Decimal::new(m, s).unwrap()));
        assert_eq!(dec(250, 2), dec(25, 1));
        // Distinct decimals that one double holds are distinct keys (a primary key is a row).
        assert_ne!(dec(1, 1), dec(10_000_000_000_000_000_001, 20));
        assert_ne!(dec(-5, 1), dec(5, 1));
    }

    #[test]
    fn a_key_is_not_a_prefix_of_another_keys_entries() {
        // "ab" must not be found by a prefix scan for "a".
        let ci = Collation::Utf8mb4GeneralCi;
        let a = enc(&Value::text("a", ci));
        let ab = enc(&Value::text("ab", ci));
        assert!(!ab.starts_with(&a));
        let b1 = enc(&Value::Bytes(vec![1, 0].into()));
        let b2 = enc(&Value::Bytes(vec![1].into()));
        assert!(!b1.starts_with(&b2) && !b2.starts_with(&b1));
    }

    proptest! {
        #[test]
        fn integers_sort_as_numbers(a in any::<i64>(), b in any::<i64>()) {
            prop_assert_eq!(a.cmp(&b), enc(&Value::Int(a)).cmp(&enc(&Value::Int(b))));
        }
        #[test]
        fn strings_sort_by_collation(a in "[a-cA-C ]{0,4}", b in "[a-cA-C ]{0,4}") {
            let (x, y) = (Value::text(&a, Collation::Utf8mb4GeneralCi), Value::text(&b, Collation::Utf8mb4GeneralCi));
            prop_assert_eq!(x.cmp(&y), enc(&x).cmp(&enc(&y)));
        }
        #[test]
        fn decimals_sort_as_numbers(a in -10i128.pow(27)..10i128.pow(27), b in -10i128.pow(27)..10i128.pow(27), sa in 0u8..=28, sb in 0u8..=28) {
            let (x, y) = (Value::Decimal(Decimal::new(a, sa).unwrap()), Value::Decimal(Decimal::new(b, sb).unwrap()));
            // Integral values and fractions are two runs; within each, the numeric order.
            let integral = |v: &Value| matches!(v, Value::Decimal(d) if d.mantissa() % 10i128.pow(u32::from(d.scale())) == 0);
            prop_assume!(integral(&x) == integral(&y));
            prop_assert_eq!(x.cmp(&y), enc(&x).cmp(&enc(&y)));
        }
        #[test]
        fn non_integral_doubles_sort(a in -1e6f64..1e6, b in -1e6f64..1e6) {
            prop_assume!(a.fract() != 0.0 && b.fract() != 0.0);
            prop_assert_eq!(a.total_cmp(&b), enc(&Value::Double(a)).cmp(&enc(&Value::Double(b))));
        }
    }
}
