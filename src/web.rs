//! The owner's page: six server-rendered pages on `daemon.http_listen` (Inbox, Status,
//! Conversations, Schedules, Usage, Agents), built into the binary. The templates (`templates/`)
//! are checked at compile time by askama; the one script (htmx 2, vendored) and the style sheet
//! are embedded, so nothing is fetched from another host and there is no build step.
//!
//! Safety (each point answers a failure of a peer's dashboard, see `auth`): a one-time code
//! from `hearth web login` instead of a password or a token in a URL; a `SameSite=Strict`,
//! `HttpOnly` cookie; every change a POST with a CSRF token and a same-origin check; a `Host`
//! allowlist against DNS rebinding (checked by the listener for every route on it); a strict
//! Content-Security-Policy without inline script; no URL parameter decides where the page
//! connects (the live updates always come from `/events`) or what it says (`Flash`).

pub mod auth;
mod inbox;
mod pages;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::health::Health;
use crate::pipeline::Channels;
use crate::pipeline::dispatcher::Dispatcher;
use crate::pipeline::sink::InboxSink;
use crate::runtime::Runtime;
use auth::LoginThrottle;

/// What the pages read and act on; one per daemon, cheap to clone.
#[derive(Clone)]
pub struct WebState {
    pub rt: Arc<Runtime>,
    pub health: Health,
    pub dispatcher: Arc<Dispatcher>,
    pub mcp: crate::tool::mcp::McpManager,
    /// Decisions made on the page enter the inbox here, like a button press.
    pub sink: Arc<InboxSink>,
    pub channels: Channels,
    /// Woken when the page queued a reply (a pairing's welcome).
    pub outbox_wake: Arc<Notify>,
    /// Ends the live-update streams, so a stopping daemon does not wait for open pages.
    pub shutdown: CancellationToken,
    pub throttle: Arc<LoginThrottle>,
    /// The message a change leaves for the page it redirects to, per session.
    pub flash: Arc<Flash>,
    pub started: Instant,
}

/// Messages a change leaves for the next page of the same session (a form POST redirects, and
/// the page after it says what was done). Kept here rather than in the URL, so no link can put
/// words of its own on the owner's page.
#[derive(Debug, Default)]
pub struct Flash {
    messages: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

/// Sessions with a message waiting, at most: a session that never comes back for its message
/// cannot grow the map.
const MAX_FLASHES: usize = 64;

impl Flash {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, String>> {
        // Plain strings: a panic elsewhere cannot leave them half-written.
        self.messages.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Leaves `message` for the next page `session` loads.
    fn leave(&self, session: &Session, message: String) {
        let mut messages = self.lock();
        if messages.len() >= MAX_FLASHES && !messages.contains_key(&session.key) {
            messages.clear();
        }
        messages.insert(session.key.clone(), message);
    }

    /// The message left for `session`, once.
    fn take(&self, session: &Session) -> Option<String> {
        self.lock().remove(&session.key)
    }
}

impl WebState {
    fn now(&self) -> i64 {
        self.rt.clock.now_ms()
    }

    fn timezone(&self) -> chrono_tz::Tz {
        self.rt.config.daemon.timezone
    }
}

/// The pages and their actions, behind the Host check and with the security headers.
pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/", get(inbox::page))
        .route("/inbox/list", get(inbox::list))
        .route("/events", get(inbox::events))
        .route(
            "/inbox/confirmations/{id}/{action}",
            post(inbox::decide_confirmation),
        )
        .route(
            "/inbox/pairings/{code}/{action}",
            post(inbox::decide_pairing),
        )
        .route("/status", get(pages::status))
        .route("/conversations", get(pages::conversations))
        .route("/conversations/{id}", get(pages::conversation))
        .route("/schedules", get(pages::schedules))
        .route("/schedules/{id}/{action}", post(pages::schedule_action))
        .route("/usage", get(pages::usage))
        .route("/agents", get(pages::agents))
        .route("/agents/route", get(pages::route))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/assets/htmx.min.js", get(htmx_js))
        .route("/assets/app.js", get(app_js))
        .route("/assets/style.css", get(style_css))
        .route("/favicon.ico", get(favicon))
        .route("/favicon.svg", get(favicon))
        // Whatever no route takes (the API keeps its own prefixes): a page, as a browser
        // expects, not the API's JSON.
        .fallback(not_found)
        .layer(axum::middleware::from_fn(guard))
        .with_state(state)
}

/// Every page answer carries the security headers. (The `Host` allowlist is checked for every
/// request on the listener, before any route: `crate::http::listener`.)
async fn guard(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    auth::security_headers(response.headers_mut());
    response
}

/// A logged-in session: the request's cookie names a live one.
pub struct Session {
    key: String,
    csrf: String,
}

impl FromRequestParts<WebState> for Session {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &WebState) -> Result<Self, Response> {
        let not_logged_in = || {
            if parts.method == Method::GET && !parts.headers.contains_key("hx-request") {
                Redirect::to("/login").into_response()
            } else {
                (StatusCode::UNAUTHORIZED, "log in again: hearth web login").into_response()
            }
        };
        let Some(value) = auth::cookie_value(&parts.headers) else {
            return Err(not_logged_in());
        };
        let key = auth::session_key(&value);
        match state.rt.store.web_session(&key, state.now()).await {
            Ok(Some(csrf)) => Ok(Session { key, csrf }),
            Ok(None) => Err(not_logged_in()),
            Err(err) => Err(server_error(&err)),
        }
    }
}

impl Session {
    /// The checks of a change: the same origin, then the session's CSRF token (from the form
    /// or the `X-CSRF-Token` header htmx sends).
    fn check_post(
        &self,
        headers: &HeaderMap,
        form_token: Option<&str>,
    ) -> Result<(), auth::Refusal> {
        auth::same_origin(headers)?;
        let token =
            form_token.or_else(|| headers.get("x-csrf-token").and_then(|v| v.to_str().ok()));
        if auth::csrf_matches(&self.csrf, token) {
            Ok(())
        } else {
            Err(auth::Refusal::BadCsrf)
        }
    }
}

/// A change the owner asked for on the page: a logged-in session's POST from this page's
/// origin carrying the session's CSRF token (see [`Session::check_post`]).
pub struct Change {
    session: Session,
    /// Whether htmx sent it (see [`from_htmx`]).
    htmx: bool,
}

impl FromRequest<WebState> for Change {
    type Rejection = Response;

    async fn from_request(request: Request, state: &WebState) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let session = Session::from_request_parts(&mut parts, state).await?;
        let headers = parts.headers.clone();
        let request = Request::from_parts(parts, body);
        let axum::Form(form) = axum::Form::<CsrfForm>::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        session
            .check_post(&headers, form.csrf.as_deref())
            .map_err(IntoResponse::into_response)?;
        let htmx = from_htmx(&headers);
        Ok(Change { session, htmx })
    }
}

/// A store failure as the page shows it (the cause goes to the log).
fn server_error(err: &dyn std::fmt::Display) -> Response {
    tracing::warn!(error = %err, "the owner's page could not read the database");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        "hearth could not read its database; see the log",
    )
        .into_response()
}

/// A rendered template, or a 500 that says why in the log.
fn render(template: &impl askama::Template) -> Response {
    match template.render() {
        Ok(html) => Html(html).into_response(),
        Err(err) => server_error(&err),
    }
}

/// Whether htmx sent the request (it swaps the answer into the page) rather than a plain form.
fn from_htmx(headers: &HeaderMap) -> bool {
    headers.contains_key("hx-request")
}

#[derive(askama::Template)]
#[template(path = "login.html")]
struct LoginPage {
    error: Option<&'static str>,
}

async fn login_page() -> Response {
    render(&LoginPage { error: None })
}

#[derive(serde::Deserialize)]
struct LoginForm {
    code: String,
}

/// Exchanges a one-time code for a session cookie; same-origin only. The code is looked up
/// first: a right one always works, and only wrong ones are throttled, per client address.
async fn login(
    State(state): State<WebState>,
    connected: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<LoginForm>,
) -> Response {
    if let Err(refusal) = auth::same_origin(&headers) {
        return refusal.into_response();
    }
    let address = connected.map_or(IpAddr::from([127, 0, 0, 1]), |c| c.0.0.ip());
    let hours = state.rt.config.web.session_hours;
    match auth::exchange_code(&state.rt.store, &form.code, state.now(), hours).await {
        Ok(Some(session)) => {
            tracing::info!(%address, "the owner logged in to the page");
            let cookie =
                auth::session_cookie(&session.cookie_value, auth::over_tls(&headers), hours);
            let mut response = Redirect::to("/").into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Ok(None) if !state.throttle.open(address) => {
            let page = LoginPage {
                error: Some("Too many wrong codes; wait a few minutes."),
            };
            (StatusCode::TOO_MANY_REQUESTS, render(&page)).into_response()
        }
        Ok(None) => {
            if state.throttle.failed(address) {
                tracing::warn!(
                    %address,
                    "too many wrong codes for the page's login from this address; its wrong codes get 429 for a few minutes (a right code still works)"
                );
            } else {
                tracing::info!(
                    %address,
                    "a login to the page with a wrong, used or expired code was refused"
                );
            }
            let page = LoginPage {
                error: Some(
                    "That code is wrong, used or expired. Run `hearth web login` for a new one.",
                ),
            };
            (StatusCode::UNAUTHORIZED, render(&page)).into_response()
        }
        Err(err) => server_error(&err),
    }
}

#[derive(serde::Deserialize)]
struct CsrfForm {
    csrf: Option<String>,
}

/// Ends this session.
async fn logout(State(state): State<WebState>, change: Change) -> Response {
    if let Err(err) = state.rt.store.end_web_session(&change.session.key).await {
        return server_error(&err);
    }
    let mut response = Redirect::to("/login").into_response();
    for cookie in auth::clear_cookies() {
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// An embedded file with its type; cached for an hour (they change only with the binary).
fn asset(content_type: &'static str, body: &'static [u8]) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "private, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

async fn htmx_js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_bytes!("web/assets/htmx.min.js"),
    )
}

async fn app_js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_bytes!("web/assets/app.js"),
    )
}

/// The icon browsers ask for: an SVG, which they all take under either name.
async fn favicon() -> Response {
    asset("image/svg+xml", include_bytes!("web/assets/favicon.svg"))
}

#[derive(askama::Template)]
#[template(path = "not_found.html")]
struct NotFoundPage;

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, render(&NotFoundPage)).into_response()
}

async fn style_css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_bytes!("web/assets/style.css"),
    )
}

/// A time as the page shows it: local in `daemon.timezone`.
fn local_time(ms: i64, tz: chrono_tz::Tz) -> String {
    use chrono::TimeZone;
    match chrono::Utc.timestamp_millis_opt(ms).single() {
        Some(at) => at.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string(),
        None => "?".into(),
    }
}

/// A duration in words: "4 min", "2 h 5 min", "3 d".
fn span(ms: i64) -> String {
    let minutes = ms.max(0) / 60_000;
    match minutes {
        0 => format!("{} s", ms.max(0) / 1000),
        1..=59 => format!("{minutes} min"),
        60..=1439 => format!("{} h {} min", minutes / 60, minutes % 60),
        _ => format!("{} d", minutes / 1440),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_plainly() {
        assert_eq!(span(30_000), "30 s");
        assert_eq!(span(4 * 60_000), "4 min");
        assert_eq!(span(125 * 60_000), "2 h 5 min");
        assert_eq!(span(3 * 86_400_000), "3 d");
    }
}
