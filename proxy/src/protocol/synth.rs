//! Result sets that freshet builds itself (the answers to its admin statements), encoded as
//! text-protocol packets the way MariaDB encodes a result set.
//!
//! Owns the column definitions and the packet sequence of such a reply; does not own what the
//! rows say (the admin statements fill them) nor sequence ids or framing, which
//! [`PacketIo::queue_packet`] adds. Values are already rendered as text: a number column's
//! strings must be the decimal rendering of a number, which is what clients parse.
//!
//! The column definitions copy MariaDB 10.11's for an expression of the same type (captured
//! from a `SELECT 'abc', CAST(1 AS SIGNED), CAST(1 AS UNSIGNED), CAST(1.5 AS DOUBLE)`), except
//! that `org_name` repeats the name, as for a table column, so that clients reading either
//! see it. Like that server, freshet sets no NOT_NULL flag and does not send NUM_FLAG, which
//! client libraries derive from the type themselves.

use super::column::{ColumnDef, flags, types};
use super::consts::StatusFlags;
use super::cursor::put_lenenc;
use super::io::PacketIo;
use super::response::{end_of_rows, eof_packet};

/// Collation utf8mb4_general_ci: text columns.
const UTF8MB4_GENERAL_CI: u16 = 45;
/// Collation `binary`: number columns.
const BINARY_COLLATION: u16 = 63;
/// Bytes per character of utf8mb4, by which the server multiplies a text column's length.
const UTF8MB4_MAX_BYTES: u32 = 4;
/// Decimals of a DOUBLE whose scale is not fixed (NOT_FIXED_DEC as MariaDB sends it for
/// DOUBLE), and of a text expression (MariaDB 10.11 sends 39 there).
const DOUBLE_DECIMALS: u8 = 31;
const TEXT_DECIMALS: u8 = 39;
/// Display widths of BIGINT and DOUBLE columns.
const BIGINT_LENGTH: u32 = 20;
const DOUBLE_LENGTH: u32 = 22;

/// The type of a synthesized column, as clients will see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SynthType {
    /// VAR_STRING in utf8mb4.
    Text,
    /// Signed LONGLONG (BIGINT).
    Int,
    /// LONGLONG UNSIGNED.
    UInt,
    /// DOUBLE.
    Double,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthColumn {
    pub name: String,
    pub ty: SynthType,
}

impl SynthColumn {
    pub fn new(name: impl Into<String>, ty: SynthType) -> Self {
        SynthColumn { name: name.into(), ty }
    }
}

/// A whole result set: columns and text-rendered rows, `None` for NULL. Every row has one
/// value per column.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SynthResult {
    pub columns: Vec<SynthColumn>,
    pub rows: Vec<Vec<Option<String>>>,
}

impl SynthResult {
    /// The payloads of the whole reply to the command, in order: column count, column
    /// definitions, an EOF unless `deprecate_eof`, the rows, and the terminator carrying
    /// `status` (an EOF, or with `deprecate_eof` an OK packet with the 0xfe header).
    pub fn packets(&self, deprecate_eof: bool, status: StatusFlags) -> Vec<Vec<u8>> {
        self.packets_with(deprecate_eof, false, status)
    }

    /// As [`packets`](Self::packets); with `extended_metadata` (the session negotiated
    /// MariaDB's MARIADB_CLIENT_EXTENDED_METADATA) each column definition carries the
    /// extended type information field after `org_name`, empty here, as the server sends it
    /// for plain types. libmariadb reads a definition without it as malformed.
    pub fn packets_with(&self, deprecate_eof: bool, extended_metadata: bool, status: StatusFlags) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.columns.len() + self.rows.len() + 3);
        let mut count = Vec::with_capacity(9);
        put_lenenc(&mut count, self.columns.len() as u64);
        out.push(count);
        for (i, column) in self.columns.iter().enumerate() {
            out.push(self.column_definition(i, column, extended_metadata));
        }
        if !deprecate_eof {
            out.push(eof_packet(status).to_vec());
        }
        for row in &self.rows {
            debug_assert_eq!(row.len(), self.columns.len(), "a synthesized row has one value per column");
            let mut payload = Vec::with_capacity(row.iter().map(|v| v.as_ref().map_or(1, |s| s.len() + 9)).sum());
            for value in row {
                match value {
                    None => payload.push(0xfb),
                    Some(s) => {
                        put_lenenc(&mut payload, s.len() as u64);
                        payload.extend_from_slice(s.as_bytes());
                    }
                }
            }
            out.push(payload);
        }
        out.push(end_of_rows(status, deprecate_eof).to_vec());
        out
    }

    /// Queues the whole reply on `io`, the first packet with sequence id `first_seq` (one more
    /// than the command's); returns the next sequence id.
    pub fn queue<S>(&self, io: &mut PacketIo<S>, first_seq: u8, deprecate_eof: bool, status: StatusFlags) -> u8
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        self.packets(deprecate_eof, status).iter().fold(first_seq, |seq, payload| io.queue_packet(seq, payload))
    }

    /// Protocol::ColumnDefinition41 for column `i`.
    fn column_definition(&self, i: usize, column: &SynthColumn, extended_metadata: bool) -> Vec<u8> {
        let (charset, length, type_code, flags, decimals) = match column.ty {
            SynthType::Text => (UTF8MB4_GENERAL_CI, self.text_length(i), types::VAR_STRING, 0, TEXT_DECIMALS),
            SynthType::Int => (BINARY_COLLATION, BIGINT_LENGTH, types::LONGLONG, flags::BINARY, 0),
            SynthType::UInt => (BINARY_COLLATION, BIGINT_LENGTH, types::LONGLONG, flags::BINARY | flags::UNSIGNED, 0),
            SynthType::Double => (BINARY_COLLATION, DOUBLE_LENGTH, types::DOUBLE, flags::BINARY, DOUBLE_DECIMALS),
        };
        ColumnDef { name: column.name.clone(), charset, length, type_code, flags, decimals }.encode(extended_metadata)
    }

    /// A text column's length as the server computes it for an expression: its longest value in
    /// characters, times the bytes per character.
    fn text_length(&self, i: usize) -> u32 {
        let chars = self.rows.iter().filter_map(|row| row.get(i)?.as_deref()).map(|s| s.chars().count()).max().unwrap_or(0);
        u32::try_from(chars).unwrap_or(u32::MAX).saturating_mul(UTF8MB4_MAX_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Capabilities;
    use crate::protocol::response::{is_terminator, terminator_status};

    fn sample() -> SynthResult {
        SynthResult {
            columns: vec![
                SynthColumn::new("name", SynthType::Text),
                SynthColumn::new("n", SynthType::Int),
                SynthColumn::new("u", SynthType::UInt),
                SynthColumn::new("r", SynthType::Double),
            ],
            rows: vec![
                vec![Some("abc".into()), Some("-1".into()), None, Some("0.5".into())],
                vec![Some("é".into()), Some("2".into()), Some("18446744073709551615".into()), Some("1e300".into())],
            ],
        }
    }

    /// The column definitions, derived by hand from the layout and MariaDB 10.11's own bytes
    /// for expressions of these types.
    fn expected_columns() -> Vec<Vec<u8>> {
        vec![
            // "def", "", "", "", "name", "name", 0x0c, 45, length 3 chars * 4, VAR_STRING, flags 0, decimals 39
            [&[3, b'd', b'e', b'f', 0, 0, 0, 4][..], b"name", &[4], b"name", &[0x0c, 45, 0, 12, 0, 0, 0, 0xfd, 0, 0, 39, 0, 0]].concat(),
            [&[3, b'd', b'e', b'f', 0, 0, 0, 1, b'n', 1, b'n'][..], &[0x0c, 63, 0, 20, 0, 0, 0, 0x08, 0x80, 0, 0, 0, 0]].concat(),
            [&[3, b'd', b'e', b'f', 0, 0, 0, 1, b'u', 1, b'u'][..], &[0x0c, 63, 0, 20, 0, 0, 0, 0x08, 0xa0, 0, 0, 0, 0]].concat(),
            [&[3, b'd', b'e', b'f', 0, 0, 0, 1, b'r', 1, b'r'][..], &[0x0c, 63, 0, 22, 0, 0, 0, 0x05, 0x80, 0, 31, 0, 0]].concat(),
        ]
    }

    fn expected_rows() -> Vec<Vec<u8>> {
        vec![
            [&[3][..], b"abc", &[2], b"-1", &[0xfb, 3], b"0.5"].concat(),
            [&[2][..], "é".as_bytes(), &[1], b"2", &[20], b"18446744073709551615", &[5], b"1e300"].concat(),
        ]
    }

    #[test]
    fn classic_eof_bytes() {
        let status = StatusFlags(StatusFlags::AUTOCOMMIT);
        let mut expected = vec![vec![4]];
        expected.extend(expected_columns());
        expected.push(vec![0xfe, 0, 0, 2, 0]);
        expected.extend(expected_rows());
        expected.push(vec![0xfe, 0, 0, 2, 0]);
        assert_eq!(sample().packets(false, status), expected);
    }

    #[test]
    fn deprecate_eof_bytes() {
        let status = StatusFlags(StatusFlags::AUTOCOMMIT | StatusFlags::IN_TRANS);
        let mut expected = vec![vec![4]];
        expected.extend(expected_columns());
        expected.extend(expected_rows());
        expected.push(vec![0xfe, 0, 0, 3, 0, 0, 0]);
        let packets = sample().packets(true, status);
        assert_eq!(packets, expected);
        let caps = Capabilities(Capabilities::PROTOCOL_41 | Capabilities::DEPRECATE_EOF);
        let last = packets.last().unwrap();
        assert!(is_terminator(last, caps));
        assert_eq!(terminator_status(last, caps).unwrap(), status);
    }

    #[test]
    fn definitions_parse_back() {
        let packets = sample().packets(true, StatusFlags::default());
        let defs: Vec<ColumnDef> = packets[1..5].iter().map(|p| ColumnDef::parse(p).unwrap()).collect();
        assert_eq!(defs.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["name", "n", "u", "r"]);
        assert!(defs[2].has(flags::UNSIGNED) && !defs[1].has(flags::UNSIGNED));
    }

    #[test]
    fn empty_result_and_long_values() {
        let empty = SynthResult { columns: vec![SynthColumn::new("x", SynthType::Text)], rows: vec![] };
        let packets = empty.packets(false, StatusFlags::default());
        assert_eq!(packets.len(), 4);
        assert_eq!(ColumnDef::parse(&packets[1]).unwrap().length, 0);
        // A value of 300 bytes takes a 3-byte length prefix.
        let long = SynthResult { columns: vec![SynthColumn::new("x", SynthType::Text)], rows: vec![vec![Some("q".repeat(300))]] };
        let packets = long.packets(true, StatusFlags::default());
        assert_eq!(&packets[2][..3], &[0xfc, 0x2c, 0x01]);
        assert_eq!(packets[2].len(), 303);
    }

    #[tokio::test]
    async fn queue_numbers_packets_from_first_seq() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (mut a, mut b) = (PacketIo::new(a), PacketIo::new(b));
        let result = sample();
        assert_eq!(result.queue(&mut a, 1, false, StatusFlags::default()), 10);
        a.flush().await.unwrap();
        let expected = result.packets(false, StatusFlags::default());
        for (i, payload) in expected.iter().enumerate() {
            let frame = b.read_frame().await.unwrap();
            assert_eq!((frame.seq(), frame.payload()), (i as u8 + 1, &payload[..]));
        }
    }

    #[test]
    fn extended_metadata_adds_an_empty_field_after_org_name() {
        let plain = sample().packets_with(true, false, StatusFlags(0));
        let extended = sample().packets_with(true, true, StatusFlags(0));
        for (p, e) in plain[1..5].iter().zip(&extended[1..5]) {
            assert_eq!(e.len(), p.len() + 1);
            assert_eq!(ColumnDef::parse_with(e, true).unwrap(), ColumnDef::parse(p).unwrap());
        }
        assert_eq!(plain[5..], extended[5..], "rows and terminator are the same");
    }
}
