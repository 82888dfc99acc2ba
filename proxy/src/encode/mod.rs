//! Rows from views, encoded as the upstream server itself would have sent them.
//!
//! A cached answer must be indistinguishable from the server's: the column definitions are the
//! ones the server returned for the query (captured once as
//! [`ColumnDef`]; definitions, type codes and flags are
//! the protocol's, which this module reads and which never reads this one), and every value
//! is rendered the way the server renders it for that column. Where that rendering cannot be
//! reproduced exactly from the value and the column definition, encoding fails with an
//! [`Unencodable`] reason and the read must be relayed instead: a wrong byte is worse than a
//! miss. A TIMESTAMP is sent as the view holds it, UTC's wall-clock time: only sessions whose
//! time zone is UTC are answered from a view that reads one (`cache::route::Reading`). Not
//! reproduced (yet): FLOAT/DOUBLE in the text protocol (the server's digit
//! formatting; the binary protocol sends their IEEE bytes and is exact), MySQL 8's JSON (views hold a canonical text, the server returns
//! its own rendering; MariaDB's JSON is a text column whose stored text the binlog carries, and
//! is encoded), and result character sets other than UTF-8 and binary.
//!
//! [`text`] and [`binary`] are tested byte for byte against MariaDB's own rows for every other
//! type (tests/encode.rs), with and without DEPRECATE_EOF.

pub mod binary;
pub mod text;

use std::borrow::Cow;

use crate::protocol::column::{ColumnDef, types};

/// Why a value cannot be rendered exactly as the server would; the read is relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unencodable {
    #[error("FLOAT/DOUBLE text rendering is not reproduced")]
    Float,
    #[error("JSON text is not kept verbatim")]
    Json,
    #[error("result character set {0} is not UTF-8 or binary")]
    Charset(u16),
    #[error("ZEROFILL on a non-integer column")]
    Zerofill,
    #[error("the value does not fit the column definition")]
    Mismatch,
}

/// A text value's bytes as the server sends them in the column's character set: utf8mb4's are
/// the view's own; utf8mb3 (`SET NAMES utf8`) holds no character past U+FFFF, which the server
/// sends as `?`, so a text with one is copied with each replaced (only for such sessions, and
/// only texts with a four-byte sequence). Any other character set is refused.
fn utf8_text<'a>(s: &'a str, def: &ColumnDef) -> Result<Cow<'a, [u8]>, Unencodable> {
    if !is_utf8(def.charset) {
        return Err(Unencodable::Charset(def.charset));
    }
    if !is_utf8mb3(def.charset) || !beyond_mb3(s) {
        return Ok(Cow::Borrowed(s.as_bytes()));
    }
    Ok(Cow::Owned(s.chars().map(|c| if u32::from(c) > 0xFFFF { '?' } else { c }).collect::<String>().into_bytes()))
}

/// Whether `s` has a character utf8mb3 cannot hold (its UTF-8 is four bytes long).
fn beyond_mb3(s: &str) -> bool {
    s.bytes().any(|b| b >= 0xF0)
}

/// An ENUM or SET label as the server sends it: refused where a utf8mb3 column cannot hold it
/// (a label with an emoji; rare enough that the read is relayed rather than rewritten).
fn label_fits<'a>(label: &'a str, def: &ColumnDef) -> Result<&'a str, Unencodable> {
    if is_utf8mb3(def.charset) && beyond_mb3(label) { Err(Unencodable::Charset(def.charset)) } else { Ok(label) }
}

/// A JSON value's bytes: MariaDB's JSON is LONGTEXT, so the server declares a text column and
/// returns the stored text, which is what the binlog carried. MySQL 8 declares JSON and
/// returns its own rendering, which is not reproduced.
fn json_text<'a>(s: &'a str, def: &ColumnDef) -> Result<Cow<'a, [u8]>, Unencodable> {
    if def.type_code == types::JSON {
        return Err(Unencodable::Json);
    }
    utf8_text(s, def)
}

/// Whether a collation id belongs to utf8mb3 or utf8mb4 (MySQL 8 and MariaDB 10.x ids), whose
/// bytes are the UTF-8 a view's text holds (utf8mb3's up to U+FFFF, see [`is_utf8mb3`]).
pub fn is_utf8(collation: u16) -> bool {
    matches!(collation, 33 | 45 | 46 | 76 | 83 | 192..=215 | 223..=247 | 255..=323 | 576..=578 | 608..=610)
}

/// Whether a collation id belongs to utf8mb3 (MariaDB's `utf8` before 11.x, MySQL's `utf8`
/// alias): 33 general_ci, 76 tolower_ci, 83 bin, 192-215 the unicode and language collations,
/// 223 general_mysql500_ci, 576-578 MariaDB's mysql561 ones.
pub fn is_utf8mb3(collation: u16) -> bool {
    matches!(collation, 33 | 76 | 83 | 192..=215 | 223 | 576..=578)
}
