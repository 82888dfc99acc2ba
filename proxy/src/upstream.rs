//! Connecting to the upstream server: TCP, and TLS when the config and the server agree.
//!
//! Two kinds of connection start here:
//! - a session's relayed connection ([`UpstreamConnector`]): its TLS starts in the middle of
//!   the MySQL handshake (after the SSL request), so the session drives the upgrade and this
//!   module only makes the streams. Whether that leg is TLS follows the client's own leg
//!   ([`UpstreamConnector::use_tls`]).
//! - freshet's own connections (readiness probe, binlog, fills, the packet limit's reading),
//!   made by mysql_async from [`own_opts`], always through [`connect_own`] so that
//!   `[upstream] tls` means the same for all of them: `preferred` is TLS whenever the server
//!   offers it.
//!
//! It also keeps the client packet limit ([`PacketLimit`]), which by default is the server's
//! `max_allowed_packet`.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, DriverError, Opts, OptsBuilder, SslOpts};

use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::ClientConfig;

use freshet_config::{MaxPacket, TlsMode, Upstream};

use crate::tls::{MaybeTls, TlsSetupError, client_config, server_name};

/// A connection to the upstream, before or after its TLS upgrade.
pub type UpstreamStream = MaybeTls<TlsStream<TcpStream>>;

/// Everything needed to open upstream connections; shared by all sessions.
pub struct UpstreamConnector {
    address: String,
    host: String,
    mode: TlsMode,
    tls: Option<Arc<ClientConfig>>,
    connect_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot connect to the upstream at {address}: {source}")]
    Tcp { address: String, source: io::Error },
    #[error("connecting to the upstream at {address} timed out after {timeout:?}")]
    Timeout { address: String, timeout: Duration },
    #[error("the upstream does not offer TLS, but [upstream] tls = {0:?} requires it")]
    TlsNotOffered(TlsMode),
    #[error("TLS handshake with the upstream failed: {0}")]
    TlsHandshake(io::Error),
}

impl UpstreamConnector {
    pub fn new(config: &Upstream) -> Result<Self, TlsSetupError> {
        Ok(UpstreamConnector {
            address: config.url.address(),
            host: config.url.host.clone(),
            mode: config.tls,
            tls: client_config(config.tls, config.tls_ca.as_deref())?,
            connect_timeout: config.connect_timeout,
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    pub async fn connect(&self) -> Result<TcpStream, ConnectError> {
        let connect = TcpStream::connect(&self.address);
        let stream = tokio::time::timeout(self.connect_timeout, connect)
            .await
            .map_err(|_| ConnectError::Timeout { address: self.address.clone(), timeout: self.connect_timeout })?
            .map_err(|source| ConnectError::Tcp { address: self.address.clone(), source })?;
        // Request/response traffic of small packets: Nagle would add a delay to every reply.
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// Whether a session's upstream leg is TLS, given whether its client leg is and whether
    /// the server offers TLS. The leg follows the client (a TLS client's session is TLS end to
    /// end, a plaintext client's is plaintext, so that `Ssl_cipher`, `REQUIRE SSL` and the
    /// like look as they would directly), except that `required` and the verify modes always
    /// encrypt, and `disabled` never does.
    pub fn use_tls(&self, client_tls: bool, server_offers_tls: bool) -> Result<bool, ConnectError> {
        match self.mode {
            TlsMode::Disabled => Ok(false),
            TlsMode::Preferred => Ok(client_tls && server_offers_tls),
            mode if !server_offers_tls => Err(ConnectError::TlsNotOffered(mode)),
            _ => Ok(true),
        }
    }

    pub async fn upgrade(&self, stream: TcpStream) -> Result<UpstreamStream, ConnectError> {
        let Some(config) = &self.tls else { return Ok(MaybeTls::Plain(stream)) };
        let connector = TlsConnector::from(config.clone());
        let handshake = connector.connect(server_name(&self.host), stream);
        let tls = tokio::time::timeout(self.connect_timeout, handshake)
            .await
            .map_err(|_| ConnectError::TlsHandshake(io::ErrorKind::TimedOut.into()))?
            .map_err(ConnectError::TlsHandshake)?;
        Ok(MaybeTls::Tls(Box::new(tls)))
    }
}

/// Connection options for freshet's own connections to the upstream: the url's credentials
/// and database, TCP even to localhost, TLS when `tls` (see [`connect_own`], which decides
/// it for `preferred`), and [`freshet_cdc::OWN_SESSION`] first on each (the server's globals
/// may limit or change what a SELECT answers). `preferred` and `required` do not verify the certificate, as MySQL's
/// modes of those names do not.
pub fn own_opts(config: &Upstream, tls: bool) -> OptsBuilder {
    let url = &config.url;
    let ssl = match config.tls {
        _ if !tls => None,
        TlsMode::Disabled => None,
        TlsMode::Preferred | TlsMode::Required => Some(SslOpts::default().with_danger_accept_invalid_certs(true)),
        TlsMode::VerifyCa => Some(ca_opts(config).with_danger_skip_domain_validation(true)),
        TlsMode::VerifyIdentity => Some(ca_opts(config)),
    };
    OptsBuilder::default()
        .ip_or_hostname(url.host.clone())
        .tcp_port(url.port)
        .user(Some(url.user.clone()))
        .pass(url.password.clone())
        .db_name(url.database.clone())
        .prefer_socket(false)
        .ssl_opts(ssl)
        .init(vec![freshet_cdc::OWN_SESSION])
}

fn ca_opts(config: &Upstream) -> SslOpts {
    let roots = config.tls_ca.iter().map(|p| p.clone().into()).collect::<Vec<_>>();
    SslOpts::default().with_root_certs(roots)
}

/// Opens one of freshet's own connections, with TLS as `[upstream] tls` says, and returns it
/// with the options that made it (for the pools and the binlog stream that follow). With
/// `preferred` TLS is tried first and left out only when the server does not offer it.
pub async fn connect_own(config: &Upstream) -> Result<(Conn, Opts), mysql_async::Error> {
    let tls = config.tls != TlsMode::Disabled;
    let opts: Opts = own_opts(config, tls).into();
    match Conn::new(opts.clone()).await {
        Err(mysql_async::Error::Driver(DriverError::NoClientSslFlagFromServer)) if config.tls == TlsMode::Preferred => {
            let plain: Opts = own_opts(config, false).into();
            Ok((Conn::new(plain.clone()).await?, plain))
        }
        other => Ok((other?, opts)),
    }
}

/// The largest packet a client may send: `[limits] max_packet`, or the server's
/// `max_allowed_packet`, which the server enforces as "smaller than": a packet of exactly that
/// size is refused.
pub struct PacketLimit {
    fixed: Option<usize>,
    /// The server's max_allowed_packet; 0 until read.
    server: AtomicUsize,
    /// When it was last read (or a reading started), to re-read it now and then.
    read_at: Mutex<Option<Instant>>,
}

impl PacketLimit {
    /// The limit while the server's is unknown (the upstream was down when freshet started):
    /// MySQL 8's default max_allowed_packet.
    pub const UNKNOWN: usize = 64 << 20;
    /// How often sessions that connect may cause a re-read (a SET GLOBAL max_allowed_packet on
    /// the server applies to connections made after it).
    const REREAD: Duration = Duration::from_secs(60);

    pub fn new(max: MaxPacket) -> Self {
        let fixed = match max {
            MaxPacket::Server => None,
            MaxPacket::Fixed(size) => Some(usize::try_from(size.bytes()).unwrap_or(usize::MAX)),
        };
        PacketLimit { fixed, server: AtomicUsize::new(0), read_at: Mutex::new(None) }
    }

    /// The largest payload a client's command may have.
    pub fn largest(&self) -> usize {
        match (self.fixed, self.server.load(Ordering::Relaxed)) {
            (Some(fixed), _) => fixed,
            (None, 0) => Self::UNKNOWN,
            (None, server) => server - 1,
        }
    }

    /// True when the server's value should be read again (never read, or a while ago); the
    /// caller that gets true does the reading.
    pub fn due(&self) -> bool {
        if self.fixed.is_some() {
            return false;
        }
        let mut read_at = self.read_at.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let due = read_at.is_none_or(|at| at.elapsed() >= Self::REREAD);
        if due {
            *read_at = Some(Instant::now());
        }
        due
    }

    /// Reads the server's max_allowed_packet over one of freshet's own connections.
    pub async fn read_from_server(&self, config: &Upstream) -> Result<usize, mysql_async::Error> {
        let (mut conn, _) = connect_own(config).await?;
        let value: Option<u64> = conn.query_first("SELECT @@global.max_allowed_packet").await?;
        let _ = conn.disconnect().await;
        let value = value.and_then(|v| usize::try_from(v).ok()).filter(|v| *v > 0).unwrap_or(Self::UNKNOWN + 1);
        self.server.store(value, Ordering::Relaxed);
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use freshet_config::ByteSize;

    #[test]
    fn the_packet_limit_is_below_the_servers_or_the_explicit_one() {
        let limit = PacketLimit::new(MaxPacket::Server);
        assert_eq!(limit.largest(), PacketLimit::UNKNOWN);
        limit.server.store(1 << 20, Ordering::Relaxed);
        assert_eq!(limit.largest(), (1 << 20) - 1);
        assert!(limit.due());
        assert!(!limit.due(), "a reading was just claimed");
        let fixed = PacketLimit::new(MaxPacket::Fixed(ByteSize::mib(2)));
        fixed.server.store(1 << 20, Ordering::Relaxed);
        assert_eq!(fixed.largest(), 2 << 20);
        assert!(!fixed.due());
    }
}
