//! A TLS front for the fake servers: it terminates TLS for a real host name (`discord.com`)
//! with a certificate from a test CA and passes the bytes on to a fake listening on plain
//! HTTP. A client that trusts [`TEST_CA_PEM`] and resolves the name to [`TlsFront::addr`]
//! then speaks to the fake exactly as it would to the real service, on the real URL: the way
//! to test code that only runs against the real host (serenity's ratelimiter, which it turns
//! off for any other URL).
//!
//! The CA and the `discord.com` certificate (valid until 2126) are fixtures in `testkit/tls/`,
//! made with openssl; they are good for nothing but these tests.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The test CA, in PEM: what a client under test trusts.
pub const TEST_CA_PEM: &str = include_str!("../tls/ca.pem");
const DISCORD_CERT_PEM: &str = include_str!("../tls/discord.com.pem");
const DISCORD_KEY_PEM: &str = include_str!("../tls/discord.com.key");

/// Terminates TLS on a free port of 127.0.0.1 and forwards each connection to `backend`.
/// Stops when dropped.
pub struct TlsFront {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl TlsFront {
    /// A front for `https://discord.com` in front of a fake at `backend`.
    pub async fn discord(backend: SocketAddr) -> Self {
        let certs = vec![
            CertificateDer::from_pem_slice(DISCORD_CERT_PEM.as_bytes())
                .expect("the fixture certificate is PEM"),
        ];
        let key = PrivateKeyDer::from_pem_slice(DISCORD_KEY_PEM.as_bytes())
            .expect("the fixture key is PEM");
        let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("the fixture key fits its certificate");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (listener, addr) = crate::net::local_listener().await;
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that gives up mid-handshake or mid-request ends only its own
                    // connection.
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let Ok(mut plain) = TcpStream::connect(backend).await else {
                        return;
                    };
                    // Ends when either side closes; how it ended is nothing to the test.
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        Self { addr, task }
    }

    /// Where the front listens: what the client resolves the host name to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}
