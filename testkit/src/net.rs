//! Ports on 127.0.0.1: serving a fake written with axum, and reserving a port for a server that
//! must be told its port before it starts.

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A listener on a free port of 127.0.0.1. The port stays bound from here on, so no other test
/// can take it between choosing and serving.
pub async fn local_listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a free port on 127.0.0.1");
    let addr = listener
        .local_addr()
        .expect("bound listener has an address");
    (listener, addr)
}

/// An axum app being served; serving stops when this is dropped.
#[derive(Debug)]
pub struct Served {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Served {
    /// Serves `app` on `listener` (from [`local_listener`]) until dropped.
    pub fn on(listener: TcpListener, app: axum::Router) -> Self {
        let addr = listener
            .local_addr()
            .expect("bound listener has an address");
        let task = tokio::spawn(async move {
            // Serving only ends when the task is aborted; an accept error ends the fake early
            // and the test then fails on connection errors, which is visible enough.
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, task }
    }

    /// Serves `app` on a free port of 127.0.0.1 until dropped.
    pub async fn start(app: axum::Router) -> Self {
        let (listener, _) = local_listener().await;
        Self::on(listener, app)
    }

    /// Where the app is served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A port nobody listens on right now, for a server started as another process (Synapse,
/// PostgreSQL, Dovecot, hearth itself) that must be given its port in its configuration. The port
/// is bound and released here, so another process may take it before the server binds it: a
/// race, which that server's start then reports. A server of our own binds port 0 instead
/// ([`local_listener`]) and keeps its listener.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .unwrap_or_else(|e| panic!("no free port on 127.0.0.1: {e}"))
        .port()
}
