//! `/mcp`: the server over streamable HTTP on `daemon.http_listen`, served statelessly (no
//! sessions: every request stands alone, and a client that goes away cancels its call).
//!
//! In front of rmcp stand hearth's own checks, in the order a request meets them:
//! - the listener's `Host` allowlist: a foreign name gets 421 (rmcp's own check, which would
//!   say 403, is off: the listener already made it for every route);
//! - the HTTP channel's token check (`HttpApi::guard`): 401 with `WWW-Authenticate: Bearer`,
//!   no token in the URL, addresses that keep failing slowed down;
//! - the `Origin` check here: a browser page of another origin gets 403, so a page the owner
//!   visits cannot call the owner's tools through their browser.
//!
//! The token decides what the caller sees: its user (the identity `http:<name>`), its
//! `--agents`, and its scope (`chat` sees only tools that change nothing).

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use hearth_http::{CHANNEL_NAME, Scope, Token};
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::{Caller, Identity, McpServer, ServeError};
use crate::runtime::Runtime;
use crate::store::IdentityStatus;

/// The path it is served at.
pub const PATH: &str = "/mcp";

/// The `/mcp` routes, stopping with `shutdown`. Put them behind the HTTP channel's
/// `HttpApi::guard`, which hands each request its [`Token`].
pub fn routes(rt: Arc<Runtime>, shutdown: CancellationToken) -> axum::Router {
    let server = McpServer {
        rt,
        identity: Identity::Token,
        calls: tokio_util::task::TaskTracker::new(),
    };
    let config = StreamableHttpServerConfig::default()
        // Stateless: serves 2025 clients and 2026-07-28 ones alike, and a client that closes
        // its stream cancels its call.
        .with_legacy_session_mode(false)
        // Event streams, not one JSON body: a waiting call can send progress.
        .with_json_response(false)
        // The listener checked the Host already, answering 421 as every route does.
        .disable_allowed_hosts()
        .with_cancellation_token(shutdown.child_token());
    let service: StreamableHttpService<McpServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config);
    axum::Router::new()
        .nest_service(PATH, service)
        .layer(middleware::from_fn(same_origin))
}

/// Refuses a browser request from a page of another origin: its `Origin` must name the host
/// the request was sent to (which the listener allowed). Clients that are not browsers send
/// no `Origin` and pass. The token itself goes no further than the guard: rmcp, its logs and
/// the tools see the [`Token`] it found, never the secret.
async fn same_origin(mut request: Request, next: Next) -> Response {
    request.headers_mut().remove(header::AUTHORIZATION);
    let headers = request.headers();
    let Some(origin) = headers.get(header::ORIGIN) else {
        return next.run(request).await;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let authority = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest.trim_end_matches('/'));
    if authority.is_some() && authority == host {
        return next.run(request).await;
    }
    let mut response = (
        StatusCode::FORBIDDEN,
        "hearth's MCP server answers no web page of another origin\n",
    )
        .into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The caller of an HTTP request: the token the guard found, its user, agents and scope.
pub(super) async fn caller(
    rt: &Runtime,
    context: &RequestContext<RoleServer>,
) -> Result<Caller, ServeError> {
    let token = context
        .extensions
        .get::<::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Token>())
        .ok_or_else(|| ServeError::Caller("the request carries no token".into()))?;
    let identity = rt.store.identity(CHANNEL_NAME, &token.name).await?;
    let Some(identity) = identity.filter(|i| i.status == IdentityStatus::Allowed) else {
        return Err(ServeError::Caller(format!(
            "the token `{}` belongs to no allowed user",
            token.name
        )));
    };
    Ok(Caller {
        user_id: identity.user_id,
        agents: token.agents.clone(),
        read_only: token.scope == Scope::Chat,
        door: format!("token {}", token.name),
    })
}
