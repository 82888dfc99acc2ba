//! TLS from freshet to the upstream, in the modes of MySQL's `--ssl-mode`.
//!
//! `preferred` and `required` encrypt without checking who is on the other end (the
//! certificate is not verified, but the handshake signatures are, so the session keys are the
//! peer's); `verify_ca` checks the chain against `tls_ca` but not the name, as MySQL's
//! VERIFY_CA does; `verify_identity` checks both.

use std::path::Path;
use std::sync::Arc;

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
    #[error("TLS setup failed: {0}")]
    Rustls(#[from] Error),
}

/// The client config for `mode`, or None when TLS is disabled.
pub fn client_config(mode: TlsMode, ca: Option<&Path>) -> Result<Option<Arc<ClientConfig>>, TlsSetupError> {
    let provider = Arc::new(ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        TlsMode::Disabled => return Ok(None),
        TlsMode::Preferred | TlsMode::Required => {
            Arc::new(Unverified { algorithms: provider.signature_verification_algorithms })
        }
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

    fn verify_tls12_signature(&self, m: &[u8], c: &CertificateDer<'_>, d: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(m, c, d, &self.algorithms)
    }

    fn verify_tls13_signature(&self, m: &[u8], c: &CertificateDer<'_>, d: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
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

    fn verify_tls12_signature(&self, m: &[u8], c: &CertificateDer<'_>, d: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(m, c, d)
    }

    fn verify_tls13_signature(&self, m: &[u8], c: &CertificateDer<'_>, d: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

