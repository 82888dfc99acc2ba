//! Connecting to the upstream server: TCP, and TLS when the config and the server agree.
//!
//! The upstream's TLS starts in the middle of the MySQL handshake (after the SSL request), so
//! the session drives the upgrade; this module only knows how to make the streams.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::ClientConfig;

use freshet_config::{TlsMode, Upstream};

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

    /// Whether to upgrade, given whether the server offers TLS.
    pub fn use_tls(&self, server_offers_tls: bool) -> Result<bool, ConnectError> {
        match self.mode {
            TlsMode::Disabled => Ok(false),
            TlsMode::Preferred => Ok(server_offers_tls),
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
