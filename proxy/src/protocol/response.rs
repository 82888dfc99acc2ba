//! Server responses: classifying the packets of a reply and reading the status flags that
//! tell whether more results follow; building the ERR packets freshet sends itself.

use super::consts::{Capabilities, StatusFlags};
use super::cursor::{Cursor, Truncated};
use super::io::MAX_FRAME;

pub const OK: u8 = 0x00;
pub const LOCAL_INFILE: u8 = 0xfb;
pub const EOF: u8 = 0xfe;
pub const ERR: u8 = 0xff;

/// True if `payload` (the first frame of a packet; `total_len` is that frame's length) ends a
/// run of rows or column definitions: an EOF packet, or with DEPRECATE_EOF an OK packet with
/// the 0xfe header. A row may also start with 0xfe (a string of 2^24 bytes or more), but such
/// a packet is at least 2^24 bytes long, so the length tells them apart.
pub fn is_terminator(payload: &[u8], caps: Capabilities) -> bool {
    let limit = if caps.has(Capabilities::DEPRECATE_EOF) { MAX_FRAME } else { 9 };
    payload.first() == Some(&EOF) && payload.len() < limit
}

/// The status flags of an OK packet (header 0x00 or 0xfe).
pub fn ok_status(payload: &[u8], caps: Capabilities) -> Result<StatusFlags, Truncated> {
    let mut c = Cursor::new(payload);
    c.u8()?;
    c.lenenc()?; // affected rows
    c.lenenc()?; // last insert id
    if caps.has(Capabilities::PROTOCOL_41) || caps.has(Capabilities::TRANSACTIONS) {
        Ok(StatusFlags(c.u16()?))
    } else {
        Ok(StatusFlags::default())
    }
}

/// The status flags of a terminator: a classic EOF packet, or an OK packet with 0xfe header.
/// Servers still send a classic EOF in some places under DEPRECATE_EOF (MariaDB ends
/// COM_FIELD_LIST with one), so the length decides: an EOF packet is exactly 5 bytes, an OK
/// packet at least 7.
pub fn terminator_status(payload: &[u8], caps: Capabilities) -> Result<StatusFlags, Truncated> {
    if caps.has(Capabilities::DEPRECATE_EOF) && payload.len() != 5 {
        return ok_status(payload, caps);
    }
    let mut c = Cursor::new(payload);
    c.u8()?;
    c.u16()?; // warnings
    Ok(StatusFlags(c.u16()?))
}

/// An error as carried by an ERR packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrPacket {
    pub code: u16,
    pub sql_state: [u8; 5],
    pub message: String,
}

impl ErrPacket {
    pub fn new(code: u16, sql_state: &str, message: impl Into<String>) -> Self {
        let mut state = [b'H', b'Y', b'0', b'0', b'0'];
        if sql_state.len() == 5 {
            state.copy_from_slice(sql_state.as_bytes());
        }
        ErrPacket { code, sql_state: state, message: message.into() }
    }

    pub fn parse(payload: &[u8]) -> Result<Self, Truncated> {
        let mut c = Cursor::new(payload);
        if c.u8()? != ERR {
            return Err(Truncated);
        }
        let code = c.u16()?;
        let mut sql_state = *b"HY000";
        if c.remaining().first() == Some(&b'#') {
            c.skip(1)?;
            sql_state.copy_from_slice(c.bytes(5)?);
        }
        Ok(ErrPacket { code, sql_state, message: String::from_utf8_lossy(c.remaining()).into_owned() })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9 + self.message.len());
        out.push(ERR);
        out.extend_from_slice(&self.code.to_le_bytes());
        out.push(b'#');
        out.extend_from_slice(&self.sql_state);
        out.extend_from_slice(self.message.as_bytes());
        out
    }
}

/// MySQL error codes freshet uses in its own ERR packets.
pub mod codes {
    /// ER_CON_COUNT_ERROR: too many connections.
    pub const TOO_MANY_CONNECTIONS: u16 = 1040;
    /// ER_HANDSHAKE_ERROR: bad handshake.
    pub const HANDSHAKE: u16 = 1043;
    /// ER_UNKNOWN_COM_ERROR: unknown command.
    pub const UNKNOWN_COMMAND: u16 = 1047;
    /// ER_NET_PACKET_TOO_LARGE.
    pub const PACKET_TOO_LARGE: u16 = 1153;
    /// ER_NET_PACKETS_OUT_OF_ORDER.
    pub const OUT_OF_ORDER: u16 = 1156;
    /// ER_NOT_SUPPORTED_YET.
    pub const NOT_SUPPORTED: u16 = 1235;
    /// ER_UNKNOWN_ERROR, sent with SQLSTATE 08S01 (a communication link failure) where freshet
    /// cannot reach the server: a client-side code in a server's ERR packet (2003,
    /// CR_CONN_HOST_ERROR) is "Received malformed packet" to the mariadb client.
    pub const CANNOT_CONNECT: u16 = 1105;
    /// CR_SERVER_LOST: the server went away mid-command.
    pub const SERVER_LOST: u16 = 2013;
    /// CR_SSL_CONNECTION_ERROR.
    pub const SSL_CONNECTION: u16 = 2026;
}

/// An OK packet, for tests and for commands freshet will answer itself.
pub fn ok_packet(status: StatusFlags) -> [u8; 7] {
    let [lo, hi] = status.0.to_le_bytes();
    // Header, affected rows 0 and last insert id 0 (one-byte length-encoded integers),
    // status, warnings 0.
    [OK, 0, 0, lo, hi, 0, 0]
}

/// An EOF packet: header, warnings (none), status. Ends the column definitions of a result
/// set without DEPRECATE_EOF, and its rows.
pub fn eof_packet(status: StatusFlags) -> [u8; 5] {
    let [lo, hi] = status.0.to_le_bytes();
    [EOF, 0, 0, lo, hi]
}

/// The packet that ends a result set's rows, carrying `status`: with DEPRECATE_EOF an OK
/// packet with the 0xfe header, else an EOF packet. Every result set freshet writes itself
/// (cached answers, admin replies) ends with this. Built on the stack: a hit allocates
/// nothing for it.
pub fn end_of_rows(status: StatusFlags, deprecate_eof: bool) -> EndOfRows {
    if deprecate_eof {
        let mut bytes = ok_packet(status);
        bytes[0] = EOF;
        EndOfRows { bytes, len: 7 }
    } else {
        let mut bytes = [0; 7];
        bytes[..5].copy_from_slice(&eof_packet(status));
        EndOfRows { bytes, len: 5 }
    }
}

/// [`end_of_rows`]'s packet: its payload as a slice (`Deref`).
pub struct EndOfRows {
    bytes: [u8; 7],
    len: usize,
}

impl std::ops::Deref for EndOfRows {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEP: Capabilities = Capabilities(Capabilities::PROTOCOL_41 | Capabilities::DEPRECATE_EOF);
    const CLASSIC: Capabilities = Capabilities(Capabilities::PROTOCOL_41);

    #[test]
    fn terminators() {
        let eof = [EOF, 0, 0, 0x0a, 0];
        assert!(is_terminator(&eof, CLASSIC));
        assert_eq!(terminator_status(&eof, CLASSIC).unwrap(), StatusFlags(0x0a));
        let ok_fe = [EOF, 0, 0, 0x08, 0, 0, 0];
        assert!(is_terminator(&ok_fe, DEP));
        assert!(terminator_status(&ok_fe, DEP).unwrap().has(StatusFlags::MORE_RESULTS_EXISTS));
        // A classic EOF under DEPRECATE_EOF (MariaDB's COM_FIELD_LIST) keeps its layout.
        assert_eq!(terminator_status(&eof, DEP).unwrap(), StatusFlags(0x0a));
        // A text row whose first value is NULL, and one starting with a short string.
        assert!(!is_terminator(&[0xfb, 1, b'x'], DEP));
        assert!(!is_terminator(&[3, b'a', b'b', b'c'], CLASSIC));
        // With classic EOF, an 0xfe packet of 9 bytes or more is a row.
        assert!(!is_terminator(&[EOF, 0, 0, 0, 0, 0, 0, 0, 0], CLASSIC));
    }

    #[test]
    fn err_round_trip() {
        let e = ErrPacket::new(1146, "42S02", "Table 'x.y' doesn't exist");
        assert_eq!(ErrPacket::parse(&e.encode()).unwrap(), e);
        assert!(ErrPacket::parse(&[ERR, 1]).is_err());
    }

    #[test]
    fn end_of_rows_per_capabilities() {
        let status = StatusFlags(StatusFlags::AUTOCOMMIT);
        let classic = end_of_rows(status, false);
        assert_eq!(*classic, [EOF, 0, 0, 2, 0]);
        assert!(is_terminator(&classic, CLASSIC) && terminator_status(&classic, CLASSIC).unwrap() == status);
        let ok = end_of_rows(status, true);
        assert_eq!(*ok, [EOF, 0, 0, 2, 0, 0, 0]);
        assert!(is_terminator(&ok, DEP) && terminator_status(&ok, DEP).unwrap() == status);
    }

    #[test]
    fn ok_status_reads_flags() {
        let ok = ok_packet(StatusFlags(StatusFlags::AUTOCOMMIT | StatusFlags::IN_TRANS));
        let s = ok_status(&ok, CLASSIC).unwrap();
        assert!(s.has(StatusFlags::IN_TRANS) && s.has(StatusFlags::AUTOCOMMIT));
        assert!(ok_status(&ok[..3], CLASSIC).is_err());
    }
}
