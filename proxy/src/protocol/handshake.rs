//! The connection phase's two fixed-layout packets: the server's initial handshake and the
//! client's handshake response (whose first 32 bytes are also the SSL request).
//!
//! freshet forwards both, changing only capability bits: the server's offer is narrowed to
//! what freshet can relay ([`Capabilities::RELAYABLE`]), the client's answer is narrowed to
//! that offer, and towards a TLS upstream the `SSL` bit is added. Everything else, scramble
//! and plugin names included, passes through untouched, which is what lets the client
//! authenticate against the upstream itself.

use super::consts::Capabilities;
use super::cursor::{Cursor, Truncated};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HandshakeError {
    #[error("truncated handshake packet")]
    Truncated,
    #[error("unsupported protocol version {0} (only 10 is spoken)")]
    ProtocolVersion(u8),
    #[error("client does not speak protocol 4.1")]
    OldClient,
}

impl From<Truncated> for HandshakeError {
    fn from(_: Truncated) -> Self {
        HandshakeError::Truncated
    }
}

/// The server's initial handshake (protocol version 10).
#[derive(Debug, Clone)]
pub struct ServerHandshake {
    payload: Vec<u8>,
    pub capabilities: Capabilities,
    pub server_version: String,
    pub connection_id: u32,
    /// The authentication scramble (20 bytes from a current server) and plugin name.
    pub scramble: Vec<u8>,
    pub auth_plugin: String,
    lower_at: usize,
    upper_at: usize,
    /// Offset of MariaDB's extended capabilities (when the server is MariaDB).
    extended_at: Option<usize>,
}

impl ServerHandshake {
    pub fn parse(payload: &[u8]) -> Result<Self, HandshakeError> {
        let mut c = Cursor::new(payload);
        let version = c.u8()?;
        if version != 10 {
            return Err(HandshakeError::ProtocolVersion(version));
        }
        let server_version = String::from_utf8_lossy(c.nul_terminated()?).into_owned();
        let connection_id = c.u32()?;
        let mut scramble = c.bytes(8)?.to_vec();
        c.skip(1)?; // filler
        let lower_at = c.position();
        let lower = c.u16()?;
        c.skip(1 + 2)?; // character set, status flags
        let upper_at = c.position();
        let upper = c.u16()?;
        let scramble_len = usize::from(c.u8()?);
        let extended_at = c.position() + 6;
        c.skip(10)?;
        let lower32 = u32::from(lower) | u32::from(upper) << 16;
        let (extended, extended_at) = if u64::from(lower32) & Capabilities::MYSQL == 0 {
            let mut e = Cursor::new(&payload[extended_at..]);
            (e.u32()?, Some(extended_at))
        } else {
            (0, None)
        };
        // The scramble's second part and the plugin name; absent on ancient servers, which
        // then simply have no plugin to bridge.
        let part2 = scramble_len.saturating_sub(8).max(13);
        let mut auth_plugin = String::new();
        if let Ok(rest) = c.bytes(part2) {
            scramble.extend_from_slice(rest.strip_suffix(&[0]).unwrap_or(rest));
            if let Ok(name) = c.nul_terminated().or_else(|_| Ok::<_, Truncated>(c.remaining())) {
                auth_plugin = String::from_utf8_lossy(name).into_owned();
            }
        }
        Ok(ServerHandshake {
            payload: payload.to_vec(),
            capabilities: Capabilities::from_parts(lower32, extended),
            server_version,
            connection_id,
            scramble,
            auth_plugin,
            lower_at,
            upper_at,
            extended_at,
        })
    }

    pub fn is_mariadb(&self) -> bool {
        self.extended_at.is_some() || self.server_version.contains("MariaDB")
    }

    /// The packet with its capabilities replaced by `caps`.
    pub fn with_capabilities(&self, caps: Capabilities) -> Vec<u8> {
        let mut out = self.payload.clone();
        let lower = caps.lower();
        out[self.lower_at..self.lower_at + 2].copy_from_slice(&(lower as u16).to_le_bytes());
        out[self.upper_at..self.upper_at + 2].copy_from_slice(&((lower >> 16) as u16).to_le_bytes());
        if let Some(at) = self.extended_at {
            out[at..at + 4].copy_from_slice(&caps.extended().to_le_bytes());
        }
        out
    }
}

/// Offset of MariaDB's extended capabilities in the client's reply (the last 4 filler bytes).
const CLIENT_EXTENDED_AT: usize = 28;
/// Length of the SSL request: capabilities, max packet, character set, filler.
pub const SSL_REQUEST_LEN: usize = 32;

/// The collation id a COM_CHANGE_USER packet (command byte included) asks for, if it carries
/// one: after the user, the auth response and the database, as the server reads them.
pub fn change_user_collation(payload: &[u8], caps: Capabilities) -> Option<u16> {
    let mut c = Cursor::new(payload.get(1..)?);
    c.nul_terminated().ok()?;
    if caps.has(Capabilities::SECURE_CONNECTION) {
        let n = c.u8().ok()?;
        c.skip(usize::from(n)).ok()?;
    } else {
        c.nul_terminated().ok()?;
    }
    c.nul_terminated().ok()?;
    c.u16().ok()
}

/// The client's handshake response (HandshakeResponse41).
#[derive(Debug, Clone)]
pub struct ClientHandshake {
    payload: Vec<u8>,
    pub capabilities: Capabilities,
    pub user: String,
    pub database: Option<String>,
    pub auth_plugin: Option<String>,
    /// Whether the auth response is not empty (the server's "using password: YES").
    pub has_password: bool,
    /// The collation id the client asked for (the low byte; it sets the session's character
    /// set and collation).
    pub collation: u8,
}

impl ClientHandshake {
    /// True for a 32-byte packet asking to switch to TLS.
    pub fn is_ssl_request(payload: &[u8]) -> bool {
        payload.len() == SSL_REQUEST_LEN && Cursor::new(payload).u32().is_ok_and(|c| u64::from(c) & Capabilities::SSL != 0)
    }

    pub fn parse(payload: &[u8]) -> Result<Self, HandshakeError> {
        let mut c = Cursor::new(payload);
        let lower = c.u32()?;
        if u64::from(lower) & Capabilities::PROTOCOL_41 == 0 {
            return Err(HandshakeError::OldClient);
        }
        c.skip(4)?; // max packet
        let collation = c.u8()?;
        c.skip(19)?; // filler
        let extended = c.u32()?;
        let caps = if u64::from(lower) & Capabilities::MYSQL == 0 {
            Capabilities::from_parts(lower, extended)
        } else {
            Capabilities::from_parts(lower, 0)
        };
        let user = String::from_utf8_lossy(c.nul_terminated()?).into_owned();
        let has_password = if caps.has(Capabilities::PLUGIN_AUTH_LENENC_DATA) {
            !c.lenenc_bytes()?.is_empty()
        } else if caps.has(Capabilities::SECURE_CONNECTION) {
            let n = c.u8()?;
            c.skip(usize::from(n))?;
            n > 0
        } else {
            !c.nul_terminated()?.is_empty()
        };
        // The optional trailing fields may be absent even when their flag is set (older
        // clients); a missing NUL there is tolerated, as servers do.
        let database = if caps.has(Capabilities::CONNECT_WITH_DB) && !c.is_empty() {
            Some(String::from_utf8_lossy(c.nul_terminated()?).into_owned()).filter(|d| !d.is_empty())
        } else {
            None
        };
        let auth_plugin = if caps.has(Capabilities::PLUGIN_AUTH) && !c.is_empty() {
            Some(String::from_utf8_lossy(c.nul_terminated()?).into_owned())
        } else {
            None
        };
        Ok(ClientHandshake { payload: payload.to_vec(), capabilities: caps, user, database, auth_plugin, has_password, collation })
    }

    /// The packet with its capabilities replaced by `caps`.
    pub fn with_capabilities(&self, caps: Capabilities) -> Vec<u8> {
        let mut out = self.payload.clone();
        out[..4].copy_from_slice(&caps.lower().to_le_bytes());
        if caps.0 & Capabilities::MYSQL == 0 {
            out[CLIENT_EXTENDED_AT..CLIENT_EXTENDED_AT + 4].copy_from_slice(&caps.extended().to_le_bytes());
        }
        out
    }

    /// The SSL request that precedes this response on a TLS connection.
    pub fn ssl_request(&self, caps: Capabilities) -> Vec<u8> {
        let mut out = self.with_capabilities(caps);
        out.truncate(SSL_REQUEST_LEN);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MariaDB 10.11 initial handshake as captured on the wire (payload only).
    fn mariadb_handshake() -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(b"5.5.5-10.11.19-MariaDB-0+deb12u1-log\0");
        p.extend_from_slice(&42u32.to_le_bytes());
        p.extend_from_slice(b"abcdefgh\0");
        p.extend_from_slice(&0xf7feu16.to_le_bytes()); // lower caps: MYSQL bit clear
        p.push(45);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&0x81bfu16.to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 6]);
        p.extend_from_slice(&0x1du32.to_le_bytes()); // PROGRESS | STMT_BULK | EXTENDED_TYPE_INFO | CACHE_METADATA
        p.extend_from_slice(b"ijklmnopqrst\0");
        p.extend_from_slice(b"mysql_native_password\0");
        p
    }

    #[test]
    fn server_capabilities_are_rewritten_in_place() {
        let raw = mariadb_handshake();
        let hs = ServerHandshake::parse(&raw).unwrap();
        assert!(hs.is_mariadb());
        assert_eq!(hs.connection_id, 42);
        assert_eq!(hs.scramble, b"abcdefghijklmnopqrst");
        assert_eq!(hs.auth_plugin, "mysql_native_password");
        assert!(hs.capabilities.has(Capabilities::MARIADB_CACHE_METADATA));
        let narrowed = Capabilities(hs.capabilities.0 & Capabilities::RELAYABLE);
        let out = hs.with_capabilities(narrowed);
        assert_eq!(out.len(), raw.len());
        let again = ServerHandshake::parse(&out).unwrap();
        assert_eq!(again.capabilities, narrowed);
        assert!(!again.capabilities.has(Capabilities::SSL));
        assert!(again.capabilities.has(Capabilities::COMPRESS), "zlib compression is relayed");
        assert!(!again.capabilities.has(Capabilities::MARIADB_PROGRESS));
        assert!(again.capabilities.has(Capabilities::MARIADB_STMT_BULK_OPERATIONS));
        assert!(out.ends_with(b"mysql_native_password\0"));
    }

    #[test]
    fn truncated_handshakes_are_errors_at_every_length() {
        let raw = mariadb_handshake();
        for n in 0..60 {
            assert!(ServerHandshake::parse(&raw[..n]).is_err(), "length {n}");
        }
    }

    fn client_response(caps: u32, extended: u32) -> Vec<u8> {
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&[0; 19]);
        p.extend_from_slice(&extended.to_le_bytes());
        p.extend_from_slice(b"app\0");
        p.push(20);
        p.extend_from_slice(&[7; 20]);
        p.extend_from_slice(b"shop\0mysql_native_password\0");
        p
    }

    #[test]
    fn client_response_parses_and_rewrites() {
        let caps = (Capabilities::PROTOCOL_41
            | Capabilities::SECURE_CONNECTION
            | Capabilities::CONNECT_WITH_DB
            | Capabilities::PLUGIN_AUTH
            | Capabilities::COMPRESS) as u32;
        let raw = client_response(caps, 0x1f);
        let hs = ClientHandshake::parse(&raw).unwrap();
        assert_eq!(hs.user, "app");
        assert!(hs.has_password);
        assert_eq!(hs.database.as_deref(), Some("shop"));
        assert_eq!(hs.auth_plugin.as_deref(), Some("mysql_native_password"));
        assert!(hs.capabilities.has(Capabilities::MARIADB_COM_MULTI));
        let narrowed = Capabilities((hs.capabilities.0 & Capabilities::RELAYABLE) | Capabilities::SSL);
        let again = ClientHandshake::parse(&hs.with_capabilities(narrowed)).unwrap();
        assert_eq!(again.capabilities, narrowed);
        let ssl = hs.ssl_request(narrowed);
        assert!(ClientHandshake::is_ssl_request(&ssl));
        assert!(!ClientHandshake::is_ssl_request(&raw));
    }

    #[test]
    fn old_or_truncated_clients_are_refused() {
        assert_eq!(ClientHandshake::parse(&client_response(0, 0)).unwrap_err(), HandshakeError::OldClient);
        let raw = client_response((Capabilities::PROTOCOL_41 | Capabilities::SECURE_CONNECTION) as u32, 0);
        for n in 0..37 {
            assert!(ClientHandshake::parse(&raw[..n]).is_err(), "length {n}");
        }
    }
}

#[cfg(test)]
mod change_user_tests {
    use super::*;

    #[test]
    fn a_change_users_collation_is_read_after_its_database() {
        let caps = Capabilities::from_parts((Capabilities::PROTOCOL_41 | Capabilities::SECURE_CONNECTION) as u32, 0);
        let mut p = vec![0x11];
        p.extend_from_slice(b"alice\0");
        p.extend_from_slice(&[3, 1, 2, 3]);
        p.extend_from_slice(b"db\0");
        p.extend_from_slice(&28u16.to_le_bytes());
        p.extend_from_slice(b"mysql_native_password\0");
        assert_eq!(change_user_collation(&p, caps), Some(28));
        assert_eq!(change_user_collation(&p[..p.len() - 23], caps), None, "no collation sent");
        assert_eq!(change_user_collation(&[0x11], caps), None);
    }
}
