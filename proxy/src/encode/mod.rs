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

use freshet_dataflow::TextRef;

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
    /// A text with a character past U+FFFF in a utf8mb3 column: not a reason to relay, the
    /// encoders send it [`narrowed`], as the server does.
    #[error("a character past U+FFFF in a utf8mb3 column")]
    Narrow,
}

/// A text value's bytes, if the column's character set is the UTF-8 a view's text holds:
/// utf8mb4's always, utf8mb3's (`SET NAMES utf8`) when the text has no character past U+FFFF,
/// which utf8mb3 cannot hold and the server sends as `?`: such a text is [`Unencodable::Narrow`],
/// which the encoders write as [`narrowed`] (only for such a column and such a text; a utf8mb4
/// column pays one lookup of its charset id, as before utf8mb3 was told apart).
#[inline]
fn utf8_text<'a>(s: TextRef<'a>, def: &ColumnDef) -> Result<&'a [u8], Unencodable> {
    match utf8(def.charset) {
        Some(Utf8::Mb4) => Ok(s.as_bytes()),
        Some(Utf8::Mb3) if !beyond_mb3(s.as_bytes()) => Ok(s.as_bytes()),
        Some(Utf8::Mb3) => Err(Unencodable::Narrow),
        None => Err(Unencodable::Charset(def.charset)),
    }
}

/// `s` as the server sends it to a utf8mb3 column: each character past U+FFFF as `?`.
fn narrowed(s: &str) -> String {
    s.chars().map(|c| if u32::from(c) > 0xFFFF { '?' } else { c }).collect()
}

/// Whether `s` has a character utf8mb3 cannot hold (its UTF-8 is four bytes long).
fn beyond_mb3(utf8: &[u8]) -> bool {
    utf8.iter().any(|&b| b >= 0xF0)
}

/// An ENUM or SET label as the server sends it: refused where a utf8mb3 column cannot hold it
/// (a label with an emoji; rare enough that the read is relayed rather than rewritten).
fn label_fits<'a>(label: &'a str, def: &ColumnDef) -> Result<&'a str, Unencodable> {
    if is_utf8mb3(def.charset) && beyond_mb3(label.as_bytes()) { Err(Unencodable::Charset(def.charset)) } else { Ok(label) }
}

/// A JSON value's bytes: MariaDB's JSON is LONGTEXT, so the server declares a text column and
/// returns the stored text, which is what the binlog carried. MySQL 8 declares JSON and
/// returns its own rendering, which is not reproduced.
fn json_text<'a>(s: TextRef<'a>, def: &ColumnDef) -> Result<&'a [u8], Unencodable> {
    if def.type_code == types::JSON {
        return Err(Unencodable::Json);
    }
    utf8_text(s, def)
}

/// The UTF-8 a collation id's character set is: utf8mb4 or utf8mb3 (MySQL 8 and MariaDB
/// 10.x ids), whose bytes are the UTF-8 a view's text holds (utf8mb3's up to U+FFFF). One
/// lookup, which the encoders make per text value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Utf8 {
    Mb4,
    /// MariaDB's `utf8` before 11.x, MySQL's `utf8` alias: 33 general_ci, 76 tolower_ci, 83
    /// bin, 192-215 the unicode and language collations, 223 general_mysql500_ci, 576-578
    /// MariaDB's mysql561 ones.
    Mb3,
}

#[inline]
fn utf8(collation: u16) -> Option<Utf8> {
    match collation {
        45 | 46 | 224..=247 | 255..=323 | 608..=610 => Some(Utf8::Mb4),
        33 | 76 | 83 | 192..=215 | 223 | 576..=578 => Some(Utf8::Mb3),
        _ => None,
    }
}

/// Whether a collation id belongs to utf8mb3 or utf8mb4, whose bytes are the UTF-8 a view's
/// text holds (utf8mb3's up to U+FFFF, see [`is_utf8mb3`]).
pub fn is_utf8(collation: u16) -> bool {
    utf8(collation).is_some()
}

/// Whether a collation id belongs to utf8mb3.
pub fn is_utf8mb3(collation: u16) -> bool {
    utf8(collation) == Some(Utf8::Mb3)
}
