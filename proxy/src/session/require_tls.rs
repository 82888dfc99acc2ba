//! Accounts the server requires TLS of (`REQUIRE SSL`, `X509`, `ISSUER`, `SUBJECT`, `CIPHER`),
//! when a plaintext client's session has a TLS leg to the server.
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

use tokio::io::{AsyncRead, AsyncWrite};

use crate::metrics::UpstreamFailure;
use crate::protocol::cursor::Cursor;
use crate::protocol::response::{EOF, ERR, ErrPacket};
use crate::protocol::{Capabilities, Command, PacketIo};

use super::SessionError;

/// What is needed to check an account and refuse it the way the server does.
pub(super) struct RequireTlsCheck {
    /// The capabilities of the session (they shape the result set of the check).
    pub caps: Capabilities,
    pub user: String,
    /// The client's address as the server's message would name it.
    pub host: String,
    /// Whether the client sent a password (the message says "using password: YES").
    pub password: bool,
}

impl RequireTlsCheck {
    /// The check for a COM_CHANGE_USER (command byte, user NUL, auth data) from `client`.
    pub fn for_change_user(payload: &[u8], caps: Capabilities, client: &tokio::net::TcpStream) -> Self {
        let mut c = Cursor::new(payload.get(1..).unwrap_or_default());
        let user = c.nul_terminated().map(|u| String::from_utf8_lossy(u).into_owned()).unwrap_or_default();
        let password = if caps.has(Capabilities::SECURE_CONNECTION) {
            c.u8().is_ok_and(|n| n > 0)
        } else {
            c.nul_terminated().is_ok_and(|p| !p.is_empty())
        };
        let host = client.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
        RequireTlsCheck { caps, user, host, password }
    }

    /// Whether the account just authenticated on `upstream` has a REQUIRE clause; an account
    /// the server will not describe counts as one that has.
    pub async fn account_requires_tls<U: AsyncRead + AsyncWrite + Unpin>(&self, upstream: &mut PacketIo<U>) -> Result<bool, SessionError> {
        let mut query = vec![Command::Query as u8];
        query.extend_from_slice(b"SHOW CREATE USER CURRENT_USER()");
        upstream.queue_packet(0, &query);
        upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
        let first = read(upstream).await?;
        if first.first() == Some(&ERR) {
            return Ok(true);
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
                    requires |= has_require_clause(statement);
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

/// True when a `CREATE USER` statement has a REQUIRE clause (other than `REQUIRE NONE`). Only
/// the text after the quoted account name is looked at, so a user or host named "REQUIRE"
/// cannot confuse it.
fn has_require_clause(statement: &[u8]) -> bool {
    let after_name = statement.iter().rposition(|&b| b == b'`').map_or(statement, |at| &statement[at + 1..]);
    let text = String::from_utf8_lossy(after_name).to_ascii_uppercase();
    text.contains(" REQUIRE ") && !text.contains(" REQUIRE NONE")
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
}
