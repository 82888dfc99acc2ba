//! Accounts the server requires TLS of (`REQUIRE SSL`, `X509`, `ISSUER`, `SUBJECT`, `CIPHER`),
//! when a plaintext client's session has a TLS leg to the server, and accounts that require
//! a cipher, when a TLS client's does.
//!
//! The server checks the leg it sees. When freshet encrypts that leg for a plaintext client
//! (`[upstream] tls = required` or a verify mode), the server would let a `REQUIRE SSL`
//! account in although the application sent its password in clear. Unless
//! `[listen] trust_plain_clients` says the plaintext leg is trusted (loopback in a sidecar's
//! pod), freshet holds the server's OK, asks on that same connection for the account's
//! `SHOW CREATE USER CURRENT_USER()` and refuses the login with the server's own error (1045)
//! when it has a REQUIRE clause, as the server refuses it directly. If the server will not
//! say, the login is refused too (the safe side).
//!
//! X509, ISSUER and SUBJECT accounts cannot log in through freshet at all: freshet ends the
//! client's TLS and has no client certificate to show the server, which then refuses them.
//!
//! `REQUIRE CIPHER 'c'` is the server comparing `c` with its own connection's cipher, which is
//! freshet's leg. For a TLS client freshet asks the same way and refuses the login unless the
//! client's own TLS with freshet uses `c` (by OpenSSL's name, as the server names it). An
//! account requiring a cipher that freshet's leg to the server does not use is refused by the
//! server itself.

use tokio::io::{AsyncRead, AsyncWrite};

use crate::metrics::UpstreamFailure;
use crate::protocol::cursor::Cursor;
use crate::protocol::response::{EOF, ERR, ErrPacket};
use crate::protocol::{Capabilities, Command, PacketIo};

use super::SessionError;

/// ER_MUST_CHANGE_PASSWORD: the session is in the expired password's sandbox.
const MUST_CHANGE_PASSWORD: u16 = 1820;

/// What is needed to check an account and refuse it the way the server does.
pub(super) struct RequireTlsCheck {
    /// The capabilities of the session (they shape the result set of the check).
    pub caps: Capabilities,
    pub user: String,
    /// The client's address as the server's message would name it.
    pub host: String,
    /// Whether the client sent a password (the message says "using password: YES").
    pub password: bool,
    /// The cipher of the client's TLS with freshet ([`client_cipher`]); None for a plaintext
    /// client, whom any REQUIRE clause refuses.
    pub client_cipher: Option<&'static str>,
}

impl RequireTlsCheck {
    /// The check for a COM_CHANGE_USER (command byte, user NUL, auth data) from `client`.
    pub fn for_change_user(payload: &[u8], caps: Capabilities, client: &super::ClientStream) -> Self {
        let mut c = Cursor::new(payload.get(1..).unwrap_or_default());
        let user = c.nul_terminated().map(|u| String::from_utf8_lossy(u).into_owned()).unwrap_or_default();
        let password = if caps.has(Capabilities::SECURE_CONNECTION) {
            c.u8().is_ok_and(|n| n > 0)
        } else {
            c.nul_terminated().is_ok_and(|p| !p.is_empty())
        };
        let host = client.tcp().peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
        RequireTlsCheck { caps, user, host, password, client_cipher: client_cipher(client) }
    }

    /// Whether the server would refuse the account just authenticated on `upstream` if it
    /// saw the client's own leg: for a plaintext client, any REQUIRE clause; for a TLS client,
    /// a CIPHER other than the client's. An account the server will not describe is refused.
    pub async fn refuses<U: AsyncRead + AsyncWrite + Unpin>(&self, upstream: &mut PacketIo<U>) -> Result<bool, SessionError> {
        let mut query = vec![Command::Query as u8];
        query.extend_from_slice(b"SHOW CREATE USER CURRENT_USER()");
        upstream.queue_packet(0, &query);
        upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
        let first = read(upstream).await?;
        if first.first() == Some(&ERR) {
            // An expired password's session may only change it (1820 to all else, this too):
            // a TLS client is let in to do that, whatever cipher its account requires.
            let sandbox = first.get(1..3) == Some(&MUST_CHANGE_PASSWORD.to_le_bytes()[..]);
            return Ok(!(sandbox && self.client_cipher.is_some()));
        }
        let columns = Cursor::new(&first).lenenc().map_err(|_| bad_reply())?;
        for _ in 0..columns {
            read(upstream).await?;
        }
        if !self.caps.has(Capabilities::DEPRECATE_EOF) {
            read(upstream).await?;
        }
        let mut requires = false;
        loop {
            let row = read(upstream).await?;
            match row.first() {
                Some(&EOF) => return Ok(requires),
                Some(&ERR) => return Ok(true),
                _ => {
                    let statement = Cursor::new(&row).lenenc_bytes().map_err(|_| bad_reply())?;
                    requires |= match self.client_cipher {
                        None => has_require_clause(statement),
                        Some(ours) => required_cipher(statement).is_some_and(|c| c != ours),
                    };
                }
            }
        }
    }

    /// The server's refusal of such an account, word for word.
    pub fn refusal(&self) -> ErrPacket {
        let password = if self.password { "YES" } else { "NO" };
        ErrPacket::new(1045, "28000", format!("Access denied for user '{}'@'{}' (using password: {password})", self.user, self.host))
    }
}

async fn read<U: AsyncRead + AsyncWrite + Unpin>(upstream: &mut PacketIo<U>) -> Result<bytes::Bytes, SessionError> {
    upstream.read_packet(1 << 20).await.map(|p| p.payload).map_err(SessionError::from_upstream)
}

fn bad_reply() -> SessionError {
    SessionError::Upstream("upstream sent a malformed SHOW CREATE USER reply".into(), UpstreamFailure::Protocol)
}

/// A `SHOW CREATE USER` statement after the quoted account name, upper-cased, with the inside
/// of each string literal blanked (same length, so positions match the statement's): the
/// clauses found in it are the statement's own, not what an account name or a free-text
/// authentication string (`IDENTIFIED VIA pam USING '...'`) spells.
fn clauses(statement: &[u8]) -> (Vec<u8>, &[u8]) {
    let after_name = statement.iter().rposition(|&b| b == b'`').map_or(statement, |at| &statement[at + 1..]);
    let mut masked = after_name.to_ascii_uppercase();
    let (mut i, mut quoted) = (0, false);
    while i < after_name.len() {
        match after_name[i] {
            // An escaped character, or a doubled quote, inside a string: part of it.
            b'\\' | b'\'' if quoted && (after_name[i] == b'\\' || after_name.get(i + 1) == Some(&b'\'')) => {
                masked[i] = b'_';
                if let Some(next) = masked.get_mut(i + 1) {
                    *next = b'_';
                }
                i += 2;
                continue;
            }
            b'\'' => quoted = !quoted,
            _ if quoted => masked[i] = b'_',
            _ => {}
        }
        i += 1;
    }
    (masked, after_name)
}

/// True when a `CREATE USER` statement has a REQUIRE clause (other than `REQUIRE NONE`).
fn has_require_clause(statement: &[u8]) -> bool {
    let (masked, _) = clauses(statement);
    let text = String::from_utf8_lossy(&masked);
    text.contains(" REQUIRE ") && !text.contains(" REQUIRE NONE")
}

/// The cipher a `CREATE USER` statement requires (`REQUIRE CIPHER 'c'`, alone or with other
/// clauses joined by AND).
fn required_cipher(statement: &[u8]) -> Option<String> {
    let (masked, original) = clauses(statement);
    let text = String::from_utf8_lossy(&masked);
    let at = text.find(" REQUIRE ")?;
    let value = at + text[at..].find(" CIPHER '")? + " CIPHER '".len();
    let len = original.get(value..)?.iter().position(|&b| b == b'\'')?;
    Some(String::from_utf8_lossy(&original[value..value + len]).into_owned())
}

/// The cipher of a client's TLS with freshet as OpenSSL (and so the server) names it; ""
/// for one without a name here, which no `REQUIRE CIPHER` matches. None for plaintext.
pub(super) fn client_cipher(client: &super::ClientStream) -> Option<&'static str> {
    use tokio_rustls::rustls::CipherSuite as S;
    let crate::tls::MaybeTls::Tls(tls) = client else { return None };
    let suite = tls.get_ref().1.negotiated_cipher_suite().map(|s| s.suite());
    Some(match suite {
        Some(S::TLS13_AES_256_GCM_SHA384) => "TLS_AES_256_GCM_SHA384",
        Some(S::TLS13_AES_128_GCM_SHA256) => "TLS_AES_128_GCM_SHA256",
        Some(S::TLS13_CHACHA20_POLY1305_SHA256) => "TLS_CHACHA20_POLY1305_SHA256",
        Some(S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384) => "ECDHE-ECDSA-AES256-GCM-SHA384",
        Some(S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) => "ECDHE-ECDSA-AES128-GCM-SHA256",
        Some(S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256) => "ECDHE-ECDSA-CHACHA20-POLY1305",
        Some(S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384) => "ECDHE-RSA-AES256-GCM-SHA384",
        Some(S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) => "ECDHE-RSA-AES128-GCM-SHA256",
        Some(S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256) => "ECDHE-RSA-CHACHA20-POLY1305",
        _ => "",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_clauses_are_found_after_the_account_name() {
        assert!(has_require_clause(b"CREATE USER `a`@`%` IDENTIFIED BY PASSWORD '*D8' REQUIRE SSL"));
        assert!(has_require_clause(b"CREATE USER `a`@`%` REQUIRE X509 PASSWORD EXPIRE NEVER"));
        assert!(!has_require_clause(b"CREATE USER `a`@`%` IDENTIFIED BY PASSWORD '*D8'"));
        assert!(!has_require_clause(b"CREATE USER `a REQUIRE SSL`@`%` IDENTIFIED BY PASSWORD '*D8'"));
        assert!(!has_require_clause(b"CREATE USER 'a'@'%' REQUIRE NONE"));
    }

    #[test]
    fn a_required_cipher_is_read_after_the_account_name() {
        let cipher = |s: &[u8]| required_cipher(s);
        assert_eq!(cipher(b"CREATE USER `a`@`%` REQUIRE CIPHER 'TLS_AES_256_GCM_SHA384'").as_deref(), Some("TLS_AES_256_GCM_SHA384"));
        assert_eq!(
            cipher(b"CREATE USER `a`@`%` REQUIRE SUBJECT 's' AND CIPHER 'ECDHE-RSA-AES256-GCM-SHA384' PASSWORD EXPIRE NEVER").as_deref(),
            Some("ECDHE-RSA-AES256-GCM-SHA384")
        );
        assert_eq!(cipher(b"CREATE USER `a CIPHER 'x'`@`%` REQUIRE SSL"), None);
        assert_eq!(cipher(b"CREATE USER `a`@`%` REQUIRE SSL"), None);
    }

    /// An authentication string is free text for some plugins and comes before the REQUIRE
    /// clause: what it spells is not the account's clause.
    #[test]
    fn an_authentication_string_spells_no_clause() {
        let via = |auth: &str, require: &str| format!("CREATE USER `a`@`%` IDENTIFIED VIA pam USING '{auth}' {require}").into_bytes();
        assert!(has_require_clause(&via("x REQUIRE NONE", "REQUIRE SSL")));
        assert!(!has_require_clause(&via("x REQUIRE SSL", "")));
        assert_eq!(required_cipher(&via("x REQUIRE CIPHER ''B''", "REQUIRE CIPHER 'A'")).as_deref(), Some("A"));
        assert_eq!(required_cipher(&via("x REQUIRE CIPHER ''B''", "REQUIRE SSL")), None);
    }
}
