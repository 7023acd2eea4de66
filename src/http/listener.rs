//! The accept loop of `daemon.http_listen`, served by hand rather than with `axum::serve` so
//! that nobody who can reach the port can starve it (the 2026-11-29 review, M1):
//!
//! - a request's header must arrive within `daemon.http_header_timeout_secs`, and a kept-alive
//!   connection that sends nothing for as long is closed (hyper measures both once it has a
//!   timer);
//! - at most `daemon.http_max_connections` connections are open. At the cap, a new connection
//!   takes the place of the oldest one that has no request in progress (a half-sent header, an
//!   idle keep-alive), so a flood of those never keeps a real client out;
//! - when every connection is busy with a request (long event streams), [`HEALTH_RESERVE`]
//!   more connections are kept for `/healthz`, so the service manager still sees the state;
//! - on shutdown, idle connections are closed at once, and those with a request in progress
//!   get the grace period to finish it.
//!
//! Every request on the listener passes the `Host` allowlist here, before any route is chosen
//! (the review's L3: `/healthz` and the API once answered any `Host`): a foreign name gets 421,
//! which is what closes DNS rebinding, and no route mounted later can be left out of it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tracing::Instrument;

use crate::web::auth::HostAllowlist;

/// Connections beyond the cap on which only `/healthz` is answered.
pub const HEALTH_RESERVE: usize = 8;

/// How long the accept loop pauses after a failed accept (out of file descriptors), so it does
/// not spin while the process has none to give.
const ACCEPT_PAUSE: Duration = Duration::from_millis(250);

/// What the listener allows.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// How long a request's header (and the next request on a kept-alive connection) may take.
    pub header_read_timeout: Duration,
    /// Connections open at once, not counting [`HEALTH_RESERVE`].
    pub max_connections: usize,
    /// How long open connections get to finish once shutdown begins.
    pub grace: Duration,
}

/// Serves `app` on `listener` within `limits` until `shutdown`; returns once every connection
/// has ended or was closed at the end of the grace period.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    hosts: Arc<HostAllowlist>,
    shutdown: CancellationToken,
) {
    let tracker = TaskTracker::new();
    // Cancelled when the grace period is over: the connections still open are dropped.
    let force = CancellationToken::new();
    let table = Arc::new(Mutex::new(Table::default()));
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "accepting an HTTP connection failed");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let Some(slot) = Table::admit(&table, limits.max_connections) else {
            tracing::debug!(%peer, "HTTP connection refused: every connection is busy");
            continue;
        };
        let connection = Connection {
            stream,
            peer,
            app: app.clone(),
            hosts: hosts.clone(),
            slot,
            header_read_timeout: limits.header_read_timeout,
        };
        tracker.spawn(
            connection
                .serve(shutdown.clone(), force.clone())
                .instrument(tracing::debug_span!("connection", %peer)),
        );
    }
    // No new connections: the port is free as soon as the loop ends.
    drop(listener);
    tracker.close();
    if tokio::time::timeout(limits.grace, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = tracker.len(),
            "HTTP connections still open after the grace period; closing them"
        );
        force.cancel();
        tracker.wait().await;
    }
}

/// The open connections: the ordinary ones oldest first, and how many use the reserve.
#[derive(Default)]
struct Table {
    open: Vec<Open>,
    reserve: usize,
    next: u64,
}

struct Open {
    id: u64,
    /// Requests in progress on it (0 between requests and while a header is being read).
    busy: Arc<AtomicUsize>,
    close: CancellationToken,
}

/// A connection's place in the [`Table`], given back when the connection ends.
struct Slot {
    table: Arc<Mutex<Table>>,
    /// `None`: one of the [`HEALTH_RESERVE`].
    id: Option<u64>,
    busy: Arc<AtomicUsize>,
    close: CancellationToken,
}

impl Table {
    fn lock(table: &Mutex<Table>) -> std::sync::MutexGuard<'_, Table> {
        // Plain counters and handles: a panic elsewhere cannot leave them half-written.
        table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a new connection: a free one; else that of the oldest connection without a
    /// request in progress, which is closed; else one of the reserve; else none.
    fn admit(table: &Arc<Mutex<Table>>, max: usize) -> Option<Slot> {
        let mut guard = Self::lock(table);
        let this = &mut *guard;
        if this.open.len() >= max {
            match this
                .open
                .iter()
                .position(|c| c.busy.load(Ordering::SeqCst) == 0)
            {
                Some(idle) => {
                    let evicted = this.open.remove(idle);
                    tracing::debug!(
                        "HTTP connection limit reached; closing the oldest idle connection"
                    );
                    evicted.close.cancel();
                }
                None if this.reserve < HEALTH_RESERVE => {
                    this.reserve += 1;
                    return Some(Slot {
                        table: table.clone(),
                        id: None,
                        busy: Arc::default(),
                        close: CancellationToken::new(),
                    });
                }
                None => return None,
            }
        }
        this.next += 1;
        let open = Open {
            id: this.next,
            busy: Arc::default(),
            close: CancellationToken::new(),
        };
        let slot = Slot {
            table: table.clone(),
            id: Some(open.id),
            busy: open.busy.clone(),
            close: open.close.clone(),
        };
        this.open.push(open);
        Some(slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut table = Table::lock(&self.table);
        match self.id {
            // Already gone when it was closed to make room.
            Some(id) => table.open.retain(|c| c.id != id),
            None => table.reserve -= 1,
        }
    }
}

struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    hosts: Arc<HostAllowlist>,
    slot: Slot,
    header_read_timeout: Duration,
}

impl Connection {
    async fn serve(self, shutdown: CancellationToken, force: CancellationToken) {
        let Connection {
            stream,
            peer,
            app,
            hosts,
            slot,
            header_read_timeout,
        } = self;
        let reserve = slot.id.is_none();
        let busy = slot.busy.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let app = app.clone();
            let busy = busy.clone();
            let hosts = hosts.clone();
            async move {
                if !hosts.allows(host_of(&request)) {
                    return Ok::<_, Infallible>(foreign_host());
                }
                if reserve && request.uri().path() != "/healthz" {
                    return Ok(at_capacity());
                }
                let guard = Busy::start(busy);
                let mut request = request.map(Body::new);
                // What `into_make_service_with_connect_info` would add: the API slows down the
                // addresses that fail to log in.
                request.extensions_mut().insert(ConnectInfo(peer));
                let response = match app.oneshot(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                Ok(response.map(|body| Body::new(Counted { body, _busy: guard })))
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout)
            .keep_alive(true);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tokio::pin!(connection);
        let ended = tokio::select! {
            ended = connection.as_mut() => Some(ended),
            () = slot.close.cancelled() => None,
            () = shutdown.cancelled() => None,
        };
        let ended = match ended {
            Some(ended) => ended,
            // No request in progress (idle, or a header still arriving, which hyper's graceful
            // shutdown would wait for): closed at once.
            None if slot.busy.load(Ordering::SeqCst) == 0 => Ok(()),
            None => {
                // In a request: closed after its answer, or when the grace period is over.
                connection.as_mut().graceful_shutdown();
                tokio::select! {
                    ended = connection.as_mut() => ended,
                    () = force.cancelled() => Ok(()),
                }
            }
        };
        if let Err(err) = ended {
            // A client that went away or never finished its header: nothing for the owner.
            tracing::debug!(%peer, error = %err, "HTTP connection ended");
        }
        drop(slot);
    }
}

/// The host a request names: the authority of an absolute URI, else its `Host` header.
fn host_of<B>(request: &Request<B>) -> &str {
    match request.uri().authority() {
        Some(authority) => authority.as_str(),
        None => request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default(),
    }
}

/// The answer to a request for a host name that is not hearth's.
fn foreign_host() -> Response<Body> {
    let mut response = Response::new(Body::from(
        "hearth does not answer to this host name; add it to [web] hosts if it is yours\n",
    ));
    *response.status_mut() = StatusCode::MISDIRECTED_REQUEST;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The answer on a reserve connection to anything but `/healthz`.
fn at_capacity() -> Response<Body> {
    let mut response = Response::new(Body::from(
        "hearth is serving as many connections as it allows; try again shortly\n",
    ));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A request in progress on a connection, from its header until its answer's body is dropped
/// (sent, or the client left).
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn start(count: Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An answer's body that keeps its request counted as in progress while it is sent.
struct Counted {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The status line of `GET path` with `Host: host` on a fresh connection to `address`.
    async fn status_of(address: SocketAddr, path: &str, host: &str) -> String {
        let mut socket = TcpStream::connect(address).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        socket.write_all(request.as_bytes()).await.expect("send");
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.expect("read");
        answer.lines().next().unwrap_or_default().to_string()
    }

    /// Whatever a router mounts, the listener checks the `Host` before it: a route added
    /// anywhere cannot be left outside the allowlist.
    #[tokio::test]
    async fn every_route_and_the_fallback_are_behind_the_host_allowlist() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let app = Router::new()
            .route("/any-route", axum::routing::get(|| async { "served" }))
            .fallback(|| async { (StatusCode::NOT_FOUND, "fallback") });
        let hosts = Arc::new(HostAllowlist::new(
            &address.to_string(),
            address.port(),
            &[],
        ));
        let limits = Limits {
            header_read_timeout: Duration::from_secs(5),
            max_connections: 16,
            grace: Duration::from_secs(1),
        };
        let stop = CancellationToken::new();
        let served = tokio::spawn(serve(listener, app, limits, hosts, stop.clone()));
        let own = format!("localhost:{}", address.port());
        for path in ["/any-route", "/not-mounted"] {
            let refused = status_of(address, path, "rebind.attacker.example").await;
            assert_eq!(refused, "HTTP/1.1 421 Misdirected Request", "{path}");
            assert_ne!(status_of(address, path, &own).await, refused, "{path}");
        }
        assert_eq!(
            status_of(address, "/any-route", &own).await,
            "HTTP/1.1 200 OK"
        );
        stop.cancel();
        served.await.expect("the listener stops");
    }

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room_then_the_reserve_is_used() {
        let table = Arc::new(Mutex::new(Table::default()));
        let first = Table::admit(&table, 2).expect("room");
        let second = Table::admit(&table, 2).expect("room");
        second.busy.store(1, Ordering::SeqCst);
        // Full: the first (idle) makes room.
        let third = Table::admit(&table, 2).expect("the idle one makes room");
        assert!(first.close.is_cancelled());
        assert!(!second.close.is_cancelled());
        third.busy.store(1, Ordering::SeqCst);
        // Both busy: only the reserve is left, and then nothing.
        let reserved: Vec<Slot> = (0..HEALTH_RESERVE)
            .map(|_| Table::admit(&table, 2).expect("reserve"))
            .collect();
        assert!(reserved.iter().all(|s| s.id.is_none()));
        assert!(Table::admit(&table, 2).is_none());
        // A connection that ends gives its place back.
        drop(first);
        drop(reserved);
        assert_eq!(Table::lock(&table).reserve, 0);
        drop(second);
        assert_eq!(Table::lock(&table).open.len(), 1);
        assert!(Table::admit(&table, 2).is_some_and(|s| s.id.is_some()));
    }
}
