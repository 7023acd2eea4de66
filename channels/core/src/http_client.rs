//! One TLS configuration for every HTTP client in the process.
//!
//! reqwest gives each client it builds a certificate verifier of its own, and on Linux that
//! verifier reads and parses the system's whole certificate store (`/etc/ssl/certs`, about 150
//! roots) the moment it is made. hearth builds a client per provider, per channel, per MCP
//! server and per web fetch, so that was a few milliseconds of CPU and a copy of the store each
//! time, most of them during the start before the first message is answered. Every client
//! built from [`builder`] shares one verifier instead, which reads the store on the first TLS
//! handshake of the process (never, when every endpoint is plain HTTP on loopback), and keeps it.
//!
//! What is checked does not change: the same system roots, the same WebPKI verification
//! (rustls-platform-verifier, as reqwest uses), TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1 offered.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// A `reqwest::ClientBuilder` on the process's shared TLS configuration: the one way hearth
/// makes an HTTP client. Add timeouts, pools and the rest as usual.
pub fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().tls_backend_preconfigured(tls_config().clone())
}

/// The shared configuration, made on first use; clones share its verifier.
fn tls_config() -> &'static rustls::ClientConfig {
    static CONFIG: OnceLock<rustls::ClientConfig> = OnceLock::new();
    CONFIG.get_or_init(|| {
        // The daemon installs aws-lc-rs as the process default at start; a test or tool that
        // did not gets the same provider.
        let provider = CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("the default provider supports TLS 1.2 and 1.3")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SystemRoots::new(provider)))
            .with_no_client_auth();
        // What reqwest offers by default with the `http2` feature.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        config
    })
}

/// rustls-platform-verifier's verifier, made on the first certificate it has to check.
#[derive(Debug)]
struct SystemRoots {
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<rustls_platform_verifier::Verifier>,
}

impl SystemRoots {
    fn new(provider: Arc<CryptoProvider>) -> Self {
        Self {
            provider,
            verifier: OnceLock::new(),
        }
    }

    /// The verifier, reading the system store if this is the first handshake. A store that
    /// cannot be read ("No CA certificates were loaded from the system") fails this handshake
    /// with that reason and is tried again on the next, so a fixed store needs no restart.
    fn verifier(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        if let Some(verifier) = self.verifier.get() {
            return Ok(verifier);
        }
        let made = rustls_platform_verifier::Verifier::new(self.provider.clone())?;
        Ok(self.verifier.get_or_init(|| made))
    }
}

impl ServerCertVerifier for SystemRoots {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    // The handshake signatures need no roots: checked with the provider's algorithms, as the
    // platform verifier does.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
