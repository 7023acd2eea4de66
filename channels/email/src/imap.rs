//! One IMAP connection: TCP with keepalive, TLS or STARTTLS, the login, and every command under
//! a time limit, because a connection can die without a word (a NAT box forgets it, a laptop
//! sleeps) and a command on it would wait forever.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_imap::{Client, Session};
use hearth_channel::ChannelError;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::config::{Endpoint, Security};
use crate::error;

/// A plain or TLS connection, one type for the session.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

pub(crate) type ImapSession = Session<Stream>;

/// Runs `future` under the command time limit.
pub(crate) async fn timed<T>(
    limit: Duration,
    what: &str,
    future: impl Future<Output = Result<T, async_imap::error::Error>>,
) -> Result<T, ChannelError> {
    match tokio::time::timeout(limit, future).await {
        Ok(result) => result.map_err(|e| error::imap(what, e)),
        Err(_) => Err(error::timeout(what)),
    }
}

/// TCP to `endpoint` with keepalive probes, so a dead peer is noticed within minutes.
async fn tcp(endpoint: &Endpoint, limit: Duration) -> Result<TcpStream, ChannelError> {
    let address = (endpoint.host.as_str(), endpoint.port);
    // The error a person reads names the server and the cause (DNS, refused, unreachable).
    let stream = tokio::time::timeout(limit, TcpStream::connect(address))
        .await
        .map_err(|_| {
            cannot_connect(
                endpoint,
                format!("no answer within {} s", limit.as_secs_f32()),
            )
        })?
        .map_err(|e| cannot_connect(endpoint, e.to_string()))?;
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(60))
        .with_interval(Duration::from_secs(15))
        .with_retries(4);
    if let Err(e) = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive) {
        // Without keepalive the IDLE refresh still notices a dead connection, only later.
        tracing::debug!(error = %e, "could not enable TCP keepalive");
    }
    // Ignored: Nagle only delays small commands a little.
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

fn tls_connector() -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map(|b| b.with_root_certificates(roots).with_no_client_auth());
    match config {
        Ok(config) => TlsConnector::from(Arc::new(config)),
        // The provider supports the default versions; this cannot fail in practice.
        Err(_) => TlsConnector::from(Arc::new(
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        )),
    }
}

/// "cannot connect to imap.example.org:993: <why>", a failure before any session existed.
fn cannot_connect(endpoint: &Endpoint, why: String) -> ChannelError {
    ChannelError::transient(format!(
        "cannot connect to {}:{}: {why}",
        endpoint.host, endpoint.port
    ))
}

async fn tls(endpoint: &Endpoint, tcp: TcpStream, limit: Duration) -> Result<Stream, ChannelError> {
    let name = rustls::pki_types::ServerName::try_from(endpoint.host.clone()).map_err(|e| {
        ChannelError::config(format!("`{}` is no TLS server name: {e}", endpoint.host))
    })?;
    let stream = tokio::time::timeout(limit, tls_connector().connect(name, tcp))
        .await
        .map_err(|_| cannot_connect(endpoint, "no TLS handshake in time".into()))?
        .map_err(|e| cannot_connect(endpoint, format!("TLS handshake failed: {e}")))?;
    Ok(Stream::Tls(Box::new(stream)))
}

/// Connects, upgrades to TLS as the endpoint says, and logs in.
pub(crate) async fn connect(
    endpoint: &Endpoint,
    username: &str,
    password: &str,
    limit: Duration,
) -> Result<ImapSession, ChannelError> {
    let tcp = tcp(endpoint, limit).await?;
    let client = match endpoint.security {
        Security::Plain => {
            let mut client = Client::new(Stream::Plain(tcp));
            read_greeting(&mut client, limit).await?;
            client
        }
        Security::Tls => {
            let mut client = Client::new(tls(endpoint, tcp, limit).await?);
            read_greeting(&mut client, limit).await?;
            client
        }
        Security::StartTls => {
            let mut client = Client::new(Stream::Plain(tcp));
            read_greeting(&mut client, limit).await?;
            timed(
                limit,
                "starttls",
                client.run_command_and_check_ok("STARTTLS", None),
            )
            .await?;
            let Stream::Plain(tcp) = client.into_inner() else {
                return Err(ChannelError::protocol("imap starttls: unexpected stream"));
            };
            Client::new(tls(endpoint, tcp, limit).await?)
        }
    };
    match tokio::time::timeout(limit, client.login(username, password)).await {
        Err(_) => Err(error::timeout("login")),
        Ok(Err((e, _))) => Err(error::imap("login", e)),
        Ok(Ok(session)) => Ok(session),
    }
}

async fn read_greeting(client: &mut Client<Stream>, limit: Duration) -> Result<(), ChannelError> {
    match tokio::time::timeout(limit, client.read_response()).await {
        Err(_) => Err(error::timeout("greeting")),
        Ok(Err(e)) => Err(ChannelError::transient(format!("imap greeting: {e}"))),
        Ok(Ok(None)) => Err(ChannelError::transient(
            "imap greeting: the server closed the connection",
        )),
        Ok(Ok(Some(_))) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::IMAP_SCHEMES;

    #[tokio::test]
    async fn a_server_that_cannot_be_reached_is_named_with_the_cause() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        for scheme in ["imap", "imaps"] {
            let endpoint = Endpoint::parse(&format!("{scheme}://127.0.0.1:{port}"), IMAP_SCHEMES)
                .expect("url");
            let Err(error) = connect(&endpoint, "me", "pw", Duration::from_secs(5)).await else {
                panic!("nothing listens on {port}");
            };
            assert!(
                error.message.starts_with(&format!(
                    "cannot connect to 127.0.0.1:{port}: Connection refused"
                )),
                "{}",
                error.message
            );
        }
    }
}
