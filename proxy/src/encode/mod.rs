//! Rows from views, encoded as the upstream server itself would have sent them.
//!
//! A cached answer must be indistinguishable from the server's: the column definitions are the
//! ones the server returned for the query (captured once, [`ColumnDef`]), and every value is
//! rendered the way the server renders it for that column. Where that rendering cannot be
//! reproduced exactly from the value and the column definition, encoding fails with an
//! [`Unencodable`] reason and the read must be relayed instead: a wrong byte is worse than a
//! miss. Not reproduced (yet): FLOAT/DOUBLE in the text protocol (the server's digit
//! formatting; the binary protocol sends their IEEE bytes and is exact), TIMESTAMP (rendered in
//! the session's time zone), JSON (views hold a canonical text, the server returns the stored
//! text), and result character sets other than UTF-8 and binary.
//!
//! [`text`] and [`binary`] are tested byte for byte against MariaDB's own rows for every other
//! type (tests/encode.rs), with and without DEPRECATE_EOF.

pub mod binary;
pub mod text;

use crate::protocol::cursor::{Cursor, Truncated};

/// Column types as they appear in column definitions (`enum_field_types`).
pub mod types {
    pub const DECIMAL: u8 = 0x00;
    pub const TINY: u8 = 0x01;
    pub const SHORT: u8 = 0x02;
    pub const LONG: u8 = 0x03;
    pub const FLOAT: u8 = 0x04;
    pub const DOUBLE: u8 = 0x05;
    pub const NULL: u8 = 0x06;
    pub const TIMESTAMP: u8 = 0x07;
    pub const LONGLONG: u8 = 0x08;
    pub const INT24: u8 = 0x09;
    pub const DATE: u8 = 0x0a;
    pub const TIME: u8 = 0x0b;
    pub const DATETIME: u8 = 0x0c;
    pub const YEAR: u8 = 0x0d;
    pub const VARCHAR: u8 = 0x0f;
    pub const BIT: u8 = 0x10;
    pub const JSON: u8 = 0xf5;
    pub const NEWDECIMAL: u8 = 0xf6;
    pub const ENUM: u8 = 0xf7;
    pub const SET: u8 = 0xf8;
    pub const TINY_BLOB: u8 = 0xf9;
    pub const MEDIUM_BLOB: u8 = 0xfa;
    pub const LONG_BLOB: u8 = 0xfb;
    pub const BLOB: u8 = 0xfc;
    pub const VAR_STRING: u8 = 0xfd;
    pub const STRING: u8 = 0xfe;
}

/// Column definition flags freshet reads.
pub mod flags {
    pub const UNSIGNED: u16 = 0x20;
    pub const ZEROFILL: u16 = 0x40;
    pub const BINARY: u16 = 0x80;
    pub const ENUM: u16 = 0x100;
    pub const SET: u16 = 0x800;
}

/// The fields of a column definition (Protocol::ColumnDefinition41) that decide how values
/// are rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    pub name: String,
    /// Collation id of the result (character_set_results), 63 = binary.
    pub charset: u16,
    /// Display width in bytes (BIT: bits; ZEROFILL: digits).
    pub length: u32,
    pub type_code: u8,
    pub flags: u16,
    pub decimals: u8,
}

impl ColumnDef {
    pub fn parse(payload: &[u8]) -> Result<ColumnDef, Truncated> {
        Self::parse_with(payload, false)
    }

    /// `extended_metadata`: the connection negotiated MariaDB's extended type information,
    /// which adds a length-encoded field after `org_name`.
    pub fn parse_with(payload: &[u8], extended_metadata: bool) -> Result<ColumnDef, Truncated> {
        let mut c = Cursor::new(payload);
        for _ in 0..4 {
            c.lenenc_bytes()?; // catalog, schema, table, org_table
        }
        let name = String::from_utf8_lossy(c.lenenc_bytes()?).into_owned();
        c.lenenc_bytes()?; // org_name
        if extended_metadata {
            c.lenenc_bytes()?; // extended type information (e.g. a JSON or GEOMETRY subtype)
        }
        c.lenenc()?; // length of the fixed fields (0x0c)
        let charset = c.u16()?;
        let length = c.u32()?;
        let type_code = c.u8()?;
        let flags = c.u16()?;
        let decimals = c.u8()?;
        Ok(ColumnDef { name, charset, length, type_code, flags, decimals })
    }

    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// Why a value cannot be rendered exactly as the server would; the read is relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unencodable {
    #[error("FLOAT/DOUBLE text rendering is not reproduced")]
    Float,
    #[error("TIMESTAMP depends on the session's time zone")]
    Timestamp,
    #[error("JSON text is not kept verbatim")]
    Json,
    #[error("result character set {0} is not UTF-8 or binary")]
    Charset(u16),
    #[error("ZEROFILL on a non-integer column")]
    Zerofill,
    #[error("the value does not fit the column definition")]
    Mismatch,
}

/// Whether a collation id belongs to utf8mb3 or utf8mb4 (MySQL 8 and MariaDB 10.x ids), whose
/// bytes are the UTF-8 a view's text holds.
pub fn is_utf8(collation: u16) -> bool {
    matches!(collation, 33 | 45 | 46 | 76 | 83 | 192..=215 | 223..=247 | 255..=323 | 576..=578 | 608..=610)
}
