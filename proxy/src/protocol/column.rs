//! Column definitions (Protocol::ColumnDefinition41): the type codes and flags they carry,
//! parsed from the server's replies (a cached answer is sent under the definitions the server
//! sent for its shape) and encoded for the result sets freshet builds itself
//! ([`super::synth`]). How values are rendered for a definition is `crate::encode`'s, which
//! reads this module; this module reads nothing of `encode`.

use super::cursor::{Cursor, Truncated, put_lenenc};

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

    /// Protocol::ColumnDefinition41 for a column of no table: catalog `def`, `name` as both
    /// name and `org_name` (clients read either). With `extended_metadata` (MariaDB's
    /// MARIADB_CLIENT_EXTENDED_METADATA) the extended type information field follows
    /// `org_name`, empty, as the server sends it for plain types.
    pub fn encode(&self, extended_metadata: bool) -> Vec<u8> {
        let name = self.name.as_bytes();
        let mut out = Vec::with_capacity(4 + 4 + 2 * (name.len() + 9) + 13);
        for part in [&b"def"[..], b"", b"", b"", name, name] {
            put_lenenc(&mut out, part.len() as u64);
            out.extend_from_slice(part);
        }
        if extended_metadata {
            out.push(0); // no extended type information
        }
        out.push(0x0c); // length of the fixed-length fields
        out.extend_from_slice(&self.charset.to_le_bytes());
        out.extend_from_slice(&self.length.to_le_bytes());
        out.push(self.type_code);
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.push(self.decimals);
        out.extend_from_slice(&[0, 0]); // filler
        out
    }
}
