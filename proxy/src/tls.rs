//! TLS on both legs: from freshet to the upstream, in the modes of MySQL's `--ssl-mode`, and
//! from applications to freshet with the certificate in `[listen] tls_cert`/`tls_key`, or
//! without one a self-signed certificate generated at start ([`generated_server_config`]), as
//! MariaDB does when it has no ssl_cert: TLS is offered to applications by default, so that a
//! driver that asks for it gets it as directly. Which upstream leg a client's leg gets is
//! decided in [`crate::upstream::UpstreamConnector::use_tls`].
//!
//! Upstream modes:
//! `preferred` and `required` encrypt without checking who is on the other end (the
//! certificate is not verified, but the handshake signatures are, so the session keys are the
//! peer's); `verify_ca` checks the chain against `tls_ca` but not the name, as MySQL's
//! VERIFY_CA does; `verify_identity` checks both.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::PrivateKeyDer;

use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::crypto::{WebPkiSupportedAlgorithms, ring, verify_tls12_signature, verify_tls13_signature};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{CertificateError, ClientConfig, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};

use freshet_config::TlsMode;

#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("cannot read tls_ca {path}: {reason}")]
    Ca { path: String, reason: String },
    #[error("cannot read [listen] TLS {what} {path}: {reason}")]
    Listen { what: &'static str, path: String, reason: String },
    #[error("TLS setup failed: {0}")]
    Rustls(#[from] Error),
    #[error("cannot generate a TLS certificate for applications: {0}")]
    Generate(String),
}

/// The client config for `mode`, or None when TLS is disabled.
pub fn client_config(mode: TlsMode, ca: Option<&Path>) -> Result<Option<Arc<ClientConfig>>, TlsSetupError> {
    let provider = Arc::new(ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        TlsMode::Disabled => return Ok(None),
        TlsMode::Preferred | TlsMode::Required => Arc::new(Unverified { algorithms: provider.signature_verification_algorithms }),
        TlsMode::VerifyCa | TlsMode::VerifyIdentity => {
            let roots = load_roots(ca)?;
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| TlsSetupError::Rustls(Error::General(e.to_string())))?;
            if mode == TlsMode::VerifyCa { Arc::new(IgnoreName(webpki)) } else { webpki }
        }
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Some(Arc::new(config)))
}

/// The server config for TLS towards applications.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsSetupError> {
    let err = |what, path: &Path, reason: String| TlsSetupError::Listen { what, path: path.display().to_string(), reason };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| err("tls_cert", cert, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err("tls_cert", cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(err("tls_cert", cert, "no certificates in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| err("tls_key", key, e.to_string()))?;
    let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    Ok(Arc::new(config))
}

/// The server config for TLS towards applications with a self-signed certificate made now
/// (an ECDSA P-256 key; names localhost and 127.0.0.1). It proves no identity, as the server's
/// own auto-generated certificate does not; clients that verify need `[listen] tls_cert`.
pub fn generated_server_config() -> Result<Arc<ServerConfig>, TlsSetupError> {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .map_err(|e| TlsSetupError::Generate(e.to_string()))?;
    let key = PrivateKeyDer::try_from(generated.key_pair.serialize_der()).map_err(|e| TlsSetupError::Generate(e.to_string()))?;
    let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![generated.cert.der().clone()], key)?;
    Ok(Arc::new(config))
}

/// A TCP connection before or after its TLS upgrade; `T` is the client or the server side
/// of a rustls stream.
pub enum MaybeTls<T> {
    Plain(TcpStream),
    Tls(Box<T>),
}

/// The TCP connection under a stream, for socket options.
pub trait Tcp {
    fn tcp(&self) -> &TcpStream;
}

impl Tcp for tokio_rustls::server::TlsStream<Rewind<TcpStream>> {
    fn tcp(&self) -> &TcpStream {
        &self.get_ref().0.inner
    }
}

impl Tcp for tokio_rustls::client::TlsStream<TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref().0
    }
}

impl<T: Tcp> MaybeTls<T> {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            MaybeTls::Plain(s) => s,
            MaybeTls::Tls(s) => s.tcp(),
        }
    }

    /// Makes the connection end with a reset (RST) instead of an orderly close when it is
    /// dropped, as a server's connection ends when it is killed or times out: drivers tell
    /// the two apart ("connection reset" vs "server closed the connection"). SO_LINGER 0,
    /// which never blocks on close (unlike other linger times, hence tokio's deprecation).
    pub fn reset_on_drop(&self) {
        #[allow(deprecated)]
        let _ = self.tcp().set_linger(Some(std::time::Duration::ZERO));
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for MaybeTls<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for MaybeTls<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A stream whose first bytes were already read into a buffer: reads return those first.
pub struct Rewind<S> {
    pre: bytes::BytesMut,
    inner: S,
}

impl<S> Rewind<S> {
    pub fn new(pre: bytes::BytesMut, inner: S) -> Self {
        Rewind { pre, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.pre.is_empty() {
            let n = this.pre.len().min(buf.remaining());
            buf.put_slice(&this.pre.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The name to check the certificate against (and to send as SNI).
pub fn server_name(host: &str) -> ServerName<'static> {
    ServerName::try_from(host.to_string()).unwrap_or_else(|_| ServerName::try_from("localhost").expect("a valid DNS name"))
}

fn load_roots(ca: Option<&Path>) -> Result<RootCertStore, TlsSetupError> {
    let path = ca.ok_or_else(|| TlsSetupError::Ca { path: "(none)".into(), reason: "verify modes need tls_ca".into() })?;
    let err = |reason: String| TlsSetupError::Ca { path: path.display().to_string(), reason };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| err(e.to_string()))? {
        roots.add(cert.map_err(|e| err(e.to_string()))?).map_err(|e| err(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(err("no certificates in the file".into()));
    }
    Ok(roots)
}

/// Accepts any certificate but still checks that the handshake was signed by its key.
#[derive(Debug)]
struct Unverified {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(m, c, d, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(m, c, d, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Full chain verification, except that the certificate need not name the host.
#[derive(Debug)]
struct IgnoreName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for IgnoreName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.0.verify_server_cert(end_entity, intermediates, name, ocsp, now) {
            Err(Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(m, c, d)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
