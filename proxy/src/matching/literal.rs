//! Literal values pulled out of a query, typed as MySQL types them, borrowed from the query.
//!
//! Owns the conversion of one literal token (plus a folded unary sign) into a [`Literal`] and
//! back into SQL text ([`Literal::render`]) that MySQL/MariaDB reads as the same value. It does
//! not know the dataflow's `Value`: routing converts, so this crate module has no dependency on
//! the dataflow crate. Invariants: no panics; allocation only when a string has escapes
//! (unescaping), never per byte of the query otherwise.
//!
//! Typing follows MySQL: an integer literal is BIGINT if it fits i64, BIGINT UNSIGNED if it
//! fits u64, else DECIMAL (kept as text); a literal with `.` is DECIMAL (text, exact); one with
//! an exponent is DOUBLE.

use std::borrow::Cow;

/// One extracted literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal<'q> {
    Null,
    Int(i64),
    /// Above i64::MAX, up to u64::MAX.
    UInt(u64),
    /// Exact decimal text as written, with its sign folded in (`-1.50`, `123456789012345678901`).
    Decimal(Cow<'q, str>),
    Float(f64),
    /// A quoted string, unescaped. `introducer` is the charset of `_utf8mb4'x'` (without the
    /// underscore); `national` marks `N'x'`. Both are also part of the fingerprint.
    String {
        bytes: Cow<'q, [u8]>,
        introducer: Option<&'q str>,
        national: bool,
    },
    /// `0x1F`: the hex digits as written. A number in numeric context (`0x41 + 0` is 65).
    HexNumber(&'q str),
    /// `X'1F'`: the hex digits as written. MariaDB keeps it a string (`X'41' + 0` is 0), so it
    /// is not the same literal as `0x1F`.
    HexString(&'q str),
    /// `0b101`: the binary digits as written.
    BitNumber(&'q str),
    /// `b'101'`: the binary digits as written.
    BitString(&'q str),
    /// A `?` of a prepared statement's text: the n-th parameter (0-based) is bound at execute.
    Placeholder(u32),
}

impl Literal<'_> {
    /// SQL text for this literal, in the position of the `?` it replaced (the introducer or
    /// `N` is in the fingerprint, just before the slot).
    pub fn render(&self, out: &mut Vec<u8>) {
        match self {
            Literal::Null => out.extend_from_slice(b"NULL"),
            Literal::Int(v) => out.extend_from_slice(v.to_string().as_bytes()),
            Literal::UInt(v) => out.extend_from_slice(v.to_string().as_bytes()),
            Literal::Decimal(text) => out.extend_from_slice(text.as_bytes()),
            // `{:?}` keeps a `.0` or an exponent, so the text reads back as a DOUBLE-ish
            // literal; add an exponent so it is never read as DECIMAL.
            Literal::Float(v) => {
                let text = format!("{v:e}");
                out.extend_from_slice(text.as_bytes());
            }
            Literal::String { bytes, .. } => {
                out.push(b'\'');
                for &b in bytes.iter() {
                    match b {
                        b'\'' => out.extend_from_slice(b"\\'"),
                        b'\\' => out.extend_from_slice(b"\\\\"),
                        0 => out.extend_from_slice(b"\\0"),
                        _ => out.push(b),
                    }
                }
                out.push(b'\'');
            }
            Literal::HexNumber(digits) => {
                out.extend_from_slice(b"0x");
                out.extend_from_slice(digits.as_bytes());
            }
            Literal::BitNumber(digits) => {
                out.extend_from_slice(b"0b");
                out.extend_from_slice(digits.as_bytes());
            }
            Literal::HexString(digits) | Literal::BitString(digits) => {
                out.push(if matches!(self, Literal::HexString(_)) { b'X' } else { b'b' });
                out.push(b'\'');
                out.extend_from_slice(digits.as_bytes());
                out.push(b'\'');
            }
            Literal::Placeholder(_) => out.push(b'?'),
        }
    }
}

/// The kinds of a read's literals in order (an integer, a string, NULL, ...; not their values),
/// as one number. The server may plan two reads of one shape apart by them and describe their
/// columns apart (`k = '1'` against an INT column groups through a temporary table, whose
/// columns lose the key flags `k = 1`'s have), so captured column definitions are kept per
/// kinds (`ColumnsKey::literals`). An execute's parameters add their types ([`fold_kind`]).
pub fn kinds(literals: &[Literal<'_>]) -> u64 {
    literals.iter().fold(KINDS_SEED, |h, l| fold_kind(h, l.kind()))
}

/// [`kinds`] with one more kind.
pub fn fold_kind(h: u64, kind: u64) -> u64 {
    (h ^ kind).wrapping_mul(0x0100_0000_01b3)
}

const KINDS_SEED: u64 = 0xcbf2_9ce4_8422_2325;

impl Literal<'_> {
    /// This literal's kind, for [`kinds`]. A string's introducer and `N` are in the
    /// fingerprint already.
    fn kind(&self) -> u64 {
        match self {
            Literal::Null => 1,
            Literal::Int(_) => 2,
            Literal::UInt(_) => 3,
            Literal::Decimal(_) => 4,
            Literal::Float(_) => 5,
            Literal::String { .. } => 6,
            Literal::HexNumber(_) => 7,
            Literal::HexString(_) => 8,
            Literal::BitNumber(_) => 9,
            Literal::BitString(_) => 10,
            Literal::Placeholder(_) => 11,
        }
    }
}

/// An integer literal's digits, with a folded sign.
pub fn integer(digits: &str, negative: bool) -> Literal<'_> {
    match digits.parse::<u64>() {
        Ok(v) if !negative && v <= i64::MAX as u64 => Literal::Int(v as i64),
        Ok(v) if !negative => Literal::UInt(v),
        // -(2^63) is i64::MIN; the cast of 2^63 as i64 wraps to i64::MIN, which is the answer.
        Ok(v) if v <= 1 << 63 => Literal::Int((v as i64).wrapping_neg()),
        _ => decimal(digits, negative),
    }
}

pub fn decimal(text: &str, negative: bool) -> Literal<'_> {
    if negative { Literal::Decimal(Cow::Owned(format!("-{text}"))) } else { Literal::Decimal(Cow::Borrowed(text)) }
}

/// None if the value is out of range (MySQL rejects such a literal; the query is relayed).
pub fn float(text: &str, negative: bool) -> Option<Literal<'static>> {
    let v: f64 = text.parse().ok()?;
    v.is_finite().then_some(Literal::Float(if negative { -v } else { v }))
}

/// The body of a quoted string (between the quotes), unescaped: backslash escapes as MySQL
/// reads them, and a doubled quote as one quote. Borrowed when there is nothing to unescape.
pub fn unescape(body: &[u8], quote: u8) -> Cow<'_, [u8]> {
    if !body.iter().any(|&b| b == b'\\' || b == quote) {
        return Cow::Borrowed(body);
    }
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while let Some(&b) = body.get(i) {
        if b == b'\\' {
            match body.get(i + 1) {
                Some(&c) => {
                    match c {
                        b'0' => out.push(0),
                        b'b' => out.push(8),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'Z' => out.push(0x1a),
                        // `\%` and `\_` keep their backslash (for LIKE patterns).
                        b'%' | b'_' => out.extend_from_slice(&[b'\\', c]),
                        _ => out.push(c),
                    }
                    i += 2;
                }
                None => {
                    out.push(b);
                    i += 1;
                }
            }
        } else if b == quote && body.get(i + 1) == Some(&quote) {
            out.push(quote);
            i += 2;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_typed_by_range() {
        assert_eq!(integer("5", false), Literal::Int(5));
        assert_eq!(integer("5", true), Literal::Int(-5));
        assert_eq!(integer("9223372036854775807", false), Literal::Int(i64::MAX));
        assert_eq!(integer("9223372036854775808", false), Literal::UInt(1 << 63));
        assert_eq!(integer("9223372036854775808", true), Literal::Int(i64::MIN));
        assert_eq!(integer("9223372036854775809", true), Literal::Decimal("-9223372036854775809".into()));
        assert_eq!(integer("18446744073709551615", false), Literal::UInt(u64::MAX));
        assert_eq!(integer("18446744073709551616", false), Literal::Decimal("18446744073709551616".into()));
    }

    #[test]
    fn floats_out_of_range_are_refused() {
        assert_eq!(float("1.5e3", true), Some(Literal::Float(-1500.0)));
        assert_eq!(float("1e999", false), None);
    }

    #[test]
    fn unescape_follows_mysql() {
        assert_eq!(&*unescape(br"it\'s", b'\''), b"it's");
        assert_eq!(&*unescape(b"it''s", b'\''), b"it's");
        assert_eq!(&*unescape(br#"a""b"#, b'"'), b"a\"b");
        assert_eq!(&*unescape(br"\n\t\0\Z\\\x", b'\''), b"\n\t\0\x1a\\x");
        assert_eq!(&*unescape(br"50\%", b'\''), br"50\%");
        assert!(matches!(unescape(b"plain", b'\''), Cow::Borrowed(_)));
    }

    #[test]
    fn render_reads_back() {
        let mut out = Vec::new();
        Literal::String { bytes: Cow::Borrowed(b"it's \\ \0"), introducer: None, national: false }.render(&mut out);
        assert_eq!(out, br"'it\'s \\ \0'");
        assert_eq!(&*unescape(&out[1..out.len() - 1], b'\''), b"it's \\ \0");
        let mut out = Vec::new();
        Literal::Float(-1500.0).render(&mut out);
        assert_eq!(out, b"-1.5e3");
    }
}
