//! The native API under `/api/v1`: turns, their events as Server-Sent Events, confirmations,
//! cancel and agents. Every route needs a token (`Authorization: Bearer`); errors are JSON
//! `{"error": {"status", "message"}}` saying what to do.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Extension, Json, Router};
use futures::Stream;
use hearth_channel::confirmation::is_decision_text;
use hearth_channel::{ButtonPress, Inbound, InboundKind};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::Shared;
use crate::auth::{client_address, credential_in_query, hash_token, hex};
use crate::backend::{ConfirmationStatus, Scope, Token, TurnRecord};
use crate::common::{
    ApiError, KEEP_ALIVE, POLL, check_name, is_openai_path, json_body, need, random_id,
};
use crate::turns::{
    Opening, chat_of, deliver, deliver_turn, open_turn, request_cancel, resolve_agent, sender_of,
};
use hearth_channel::confirmation::{Action, button_data};

/// How long `POST /confirmations/{id}` waits for the decision to be stored.
const DECISION_WAIT: Duration = Duration::from_secs(10);

/// The native API's routes and `doors` (the OpenAI-compatible ones), behind one token check and
/// one body limit.
pub(crate) fn router(shared: Arc<Shared>, doors: Router<Arc<Shared>>) -> Router {
    let limit = shared.config.max_body_bytes;
    Router::new()
        .route("/api/v1/turns", post(start_turn))
        .route("/api/v1/turns/{id}", get(get_turn))
        .route("/api/v1/turns/{id}/events", get(turn_events))
        .route("/api/v1/turns/{id}/cancel", post(cancel_turn))
        .route("/api/v1/confirmations", get(list_confirmations))
        .route("/api/v1/confirmations/{id}", post(decide_confirmation))
        .route("/api/v1/agents", get(list_agents))
        .merge(doors)
        // Unknown paths under the API's prefixes get its JSON 404 (after the token check, so
        // they say nothing to a client without one); any other path is the daemon's, which
        // answers it as a web server would.
        .route("/api", any(not_found))
        .route("/api/{*rest}", any(not_found))
        .route("/v1", any(not_found))
        .route("/v1/{*rest}", any(not_found))
        .layer(middleware::from_fn_with_state(shared.clone(), authenticate))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(shared)
}

type ApiResult = Result<Response, ApiError>;

async fn not_found(uri: axum::http::Uri) -> ApiError {
    let err = ApiError::new(
        StatusCode::NOT_FOUND,
        "no such endpoint; see docs/http-api.md",
    );
    if is_openai_path(uri.path()) {
        err.for_openai()
    } else {
        err
    }
}

/// Checks the bearer token before any route runs and hands the route the [`Token`].
pub(crate) async fn authenticate(
    State(shared): State<Arc<Shared>>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([127, 0, 0, 1]), |info| info.0.ip());
    let address = client_address(peer, request.headers(), &shared.config.trusted_proxies);
    let query = request.uri().query().map(str::to_owned);
    let authorization = request.headers().get(header::AUTHORIZATION).cloned();
    let openai = is_openai_path(request.uri().path());
    match check_token(&shared, query.as_deref(), authorization, address).await {
        Ok(token) => {
            request.extensions_mut().insert(token);
            next.run(request).await
        }
        Err(err) if openai => err.for_openai().into_response(),
        Err(err) => err.into_response(),
    }
}

/// The request's body is not `Sync`, so the check gets only the parts it reads.
async fn check_token(
    shared: &Shared,
    query: Option<&str>,
    authorization: Option<header::HeaderValue>,
    address: IpAddr,
) -> Result<Token, ApiError> {
    if query.is_some_and(credential_in_query) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "a token in the URL is refused (URLs end up in logs): send it as `Authorization: Bearer <token>`",
        ));
    }
    let Some(header) = authorization else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing `Authorization: Bearer <token>` (make one with `hearth token create NAME`)",
        ));
    };
    let presented = header
        .to_str()
        .ok()
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|token| !token.is_empty());
    let Some(presented) = presented else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "the Authorization header must be `Bearer <token>`",
        ));
    };
    // The token is looked up before any throttle: a valid one always gets in, whatever others
    // sent from its address (a proxy, a tunnel or a rebinding page share one).
    let backend = shared.backend().map_err(ApiError::unavailable)?;
    match backend.authenticate(&hash_token(presented)).await {
        Ok(Some(token)) => Ok(token),
        Ok(None) => {
            let now = Instant::now();
            // Only failures are slowed: an address that failed too often is told to wait, and
            // its attempts meanwhile are not counted again.
            if let Some(wait) = shared.limiter.wait(address, now) {
                return Err(ApiError::too_many(
                    "too many failed logins from this address; wait and try again",
                    wait,
                ));
            }
            shared.limiter.failed(address, now);
            tracing::info!(%address, "HTTP request with an unknown or revoked token refused");
            Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unknown or revoked token",
            ))
        }
        Err(err) => Err(ApiError::unavailable(err)),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnRequest {
    text: String,
    #[serde(default = "auto")]
    agent: String,
    #[serde(default)]
    conversation: Option<String>,
}

fn auto() -> String {
    "auto".into()
}

async fn start_turn(
    State(shared): State<Arc<Shared>>,
    Extension(token): Extension<Token>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let Some(key) = headers.get("idempotency-key") else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "an Idempotency-Key header is required: a retry with the same key gets the same turn",
        ));
    };
    let key = key.to_str().unwrap_or_default().to_string();
    check_name("the Idempotency-Key", &key)?;
    let body_bytes = match &body {
        Ok(bytes) => bytes.clone(),
        Err(_) => Bytes::new(),
    };
    let request: TurnRequest = json_body(&shared, body)?;
    if request.text.trim().is_empty() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "\"text\" is empty"));
    }
    if let Some(conversation) = &request.conversation {
        check_name("\"conversation\"", conversation)?;
    }
    // A typed decision (`approve K7Q2MX`, `Approve k7q2mx please`, `approve <id>` anywhere)
    // decides a confirmation as a button press does, so it needs what
    // `POST /confirmations/{id}` needs; `/v1/chat/completions` holds it to the same. Read with
    // the daemon's own parser, so no form gets past here that the daemon would take as a
    // decision; the daemon refuses a chat token's decision anyway (its sender's authority).
    if is_decision_text(&request.text) {
        need(&token, Scope::Approve)?;
    }
    let agent = resolve_agent(&shared, &token, &request.agent).await?;
    let record = open_turn(
        &shared,
        &token,
        Opening {
            key,
            body_sha: hex(&Sha256::digest(&body_bytes)),
            conversation: request
                .conversation
                .clone()
                .unwrap_or_else(|| format!("c_{}", random_id())),
            agent,
        },
    )
    .await?;
    deliver_turn(&shared, &token, &record, &request.text).await?;
    Ok((StatusCode::ACCEPTED, Json(turn_created(&record))).into_response())
}

fn turn_created(record: &TurnRecord) -> serde_json::Value {
    json!({
        "turn": record.id,
        "conversation": record.conversation,
        "events": format!("/api/v1/turns/{}/events", record.id),
    })
}

/// The turn `id` if the token may see it (its own, or any with scope admin); 404 otherwise, so
/// a token learns nothing of other tokens' turns.
async fn own_turn(shared: &Shared, token: &Token, id: &str) -> Result<TurnRecord, ApiError> {
    let backend = shared.backend().map_err(ApiError::unavailable)?;
    match backend.turn(id).await.map_err(ApiError::unavailable)? {
        Some(record) if record.token == token.name || token.scope == Scope::Admin => Ok(record),
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no turn {id}"),
        )),
    }
}

async fn get_turn(
    State(shared): State<Arc<Shared>>,
    Extension(token): Extension<Token>,
    Path(id): Path<String>,
) -> ApiResult {
    let record = own_turn(&shared, &token, &id).await?;
    // `agent` is the agent that answered once one was chosen (keyword routing picks it for
    // `auto`); `requested_agent` is what the client asked for.
    let backend = shared.backend().map_err(ApiError::unavailable)?;
    let answered = backend
        .outcome(&record.platform_id)
        .await
        .map_err(ApiError::unavailable)?
        .and_then(|outcome| outcome.agent);
    Ok(Json(json!({
        "turn": record.id,
        "conversation": record.conversation,
        "agent": answered.as_deref().unwrap_or(&record.agent),
        "requested_agent": record.agent,
        "state": record.state,
        "text": record.final_text,
        "created_at": record.created_at,
        "events": format!("/api/v1/turns/{}/events", record.id),
    }))
    .into_response())
}

/// `GET /turns/{id}/events`: the turn's stored events after `Last-Event-ID`, then the new ones
/// as they are stored, until the turn ends.
async fn turn_events(
    State(shared): State<Arc<Shared>>,
    Extension(token): Extension<Token>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult {
    let record = own_turn(&shared, &token, &id).await?;
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "Last-Event-ID must be the id of an event this stream sent",
                )
            })?,
    };
    let open = shared.open_stream(&token.name)?;
    let stream = event_stream(shared, record.id, after, open);
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response())
}

struct StreamState {
    shared: Arc<Shared>,
    turn: String,
    after: i64,
    queued: VecDeque<crate::Event>,
    ended: bool,
    appended: tokio::sync::watch::Receiver<u64>,
    /// Cancelled when the channel stops: the stream then ends.
    stopping: tokio_util::sync::CancellationToken,
    /// The stream's place among its token's open ones.
    _open: crate::OpenStream,
}

fn event_stream(
    shared: Arc<Shared>,
    turn: String,
    after: i64,
    open: crate::OpenStream,
) -> impl Stream<Item = Result<SseEvent, std::convert::Infallible>> {
    let appended = shared.appended.subscribe();
    let stopping = shared.stopping();
    let state = StreamState {
        stopping,
        shared,
        turn,
        after,
        queued: VecDeque::new(),
        ended: false,
        appended,
        _open: open,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.queued.pop_front() {
                state.after = event.seq;
                if event.kind.ends_turn() {
                    state.ended = true;
                }
                let sse = SseEvent::default()
                    .id(event.seq.to_string())
                    .event(event.kind.as_str())
                    .data(event.data.to_string());
                return Some((Ok(sse), state));
            }
            if state.ended {
                return None;
            }
            if state.stopping.is_cancelled() {
                // The last thing this stream sends; the client resumes after the last id.
                state.ended = true;
                let bye = SseEvent::default().comment(crate::STOPPING_COMMENT);
                return Some((Ok(bye), state));
            }
            // Marked seen before the query, so an event stored meanwhile wakes the wait below.
            state.appended.borrow_and_update();
            let found = match state.shared.backend() {
                Ok(backend) => backend.events_after(&state.turn, state.after).await,
                Err(err) => Err(crate::BackendError(err.to_string())),
            };
            match found {
                Ok(events) if !events.is_empty() => state.queued.extend(events),
                Ok(_) => {
                    tokio::select! {
                        _ = state.appended.changed() => {}
                        () = tokio::time::sleep(POLL) => {}
                        () = state.stopping.cancelled() => {}
                    }
                }
                Err(err) => {
                    // The client reconnects with Last-Event-ID and loses nothing.
                    tracing::warn!(error = %err, turn = %state.turn, "reading a turn's events failed; ending the stream");
                    return None;
                }
            }
        }
    })
}

async fn cancel_turn(
    State(shared): State<Arc<Shared>>,
    Extension(token): Extension<Token>,
    Path(id): Path<String>,
) -> ApiResult {
    let record = own_turn(&shared, &token, &id).await?;
    if record.state.has_ended() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("the turn already ended ({})", record.state),
        ));
    }
    request_cancel(
        &shared,
        &record,
        &format!("cancelled over the API by {}", token.name),
    )
    .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "turn": record.id, "cancelling": true })),
    )
        .into_response())
}

async fn list_confirmations(
    State(shared): State<Arc<Shared>>,
    Extension(token): Extension<Token>,
) -> ApiResult {
    let backend = shared.backend().map_err(ApiError::unavailable)?;
    let pending = backend
        .pending_confirmations(&token.name)
        .await
        .map_err(ApiError::unavailable)?;
    Ok(Json(json!({ "confirmations": listed(&token, pending) })).into_response())
}

/// What `GET /confirmations` shows a token: all it may decide, with scope approve; with scope
/// chat only those its own turns wait for, and without the id and code, which it cannot use
/// (so a client that may only chat is handed nothing that decides).
fn listed(token: &Token, pending: Vec<crate::Confirmation>) -> Vec<serde_json::Value> {
    let decides = token.scope >= Scope::Approve;
    pending
        .into_iter()
        .filter(|c| decides || c.own)
        .map(|c| {
            let mut shown = json!(c);
            if !decides && let Some(fields) = shown.as_object_mut() {
                fields.remove("id");
                fields.remove("code");
            }
            shown
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionRequest {
    decision: String,
}

/// `POST /confirmations/{id}`: decided as a press of the prompt's button would be, through
/// the inbox and the same resolver, with the same rule (the requester or the owner).
async fn decide_confirmation(
    State(shared): State<Arc<Shared>>,
    Extension(token): Extension<Token>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    need(&token, Scope::Approve)?;
    let request: DecisionRequest = json_body(&shared, body)?;
    let approve = match request.decision.as_str() {
        "approve" => true,
        "deny" => false,
        other => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("\"decision\" is \"approve\" or \"deny\", not {other:?}"),
            ));
        }
    };
    let backend = shared.backend().map_err(ApiError::unavailable)?.clone();
    let Some(confirmation) = backend
        .confirmation(&token.name, &id)
        .await
        .map_err(ApiError::unavailable)?
    else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no confirmation {id}"),
        ));
    };
    if !confirmation.may_decide {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "this confirmation is not yours to decide (only its requester or the owner)",
        ));
    }
    if confirmation.status != ConfirmationStatus::Pending {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "this confirmation was already decided: {}",
                confirmation.status
            ),
        ));
    }
    let decision = confirmation.decision(if approve {
        Action::Approve
    } else {
        Action::Deny
    });
    let data = button_data(&decision.id, decision.action);
    let event = Inbound {
        platform_id: format!("{}/decide/{id}/{}", token.name, request.decision),
        chat: chat_of(&token.name, "_decisions"),
        sender: sender_of(&token),
        kind: InboundKind::Press(ButtonPress {
            press_id: format!("api-{}", random_id()),
            data,
            message: None,
        }),
        reply_context: Some(json!({ "control": true })),
        agent: None,
    };
    deliver(&shared, event).await?;
    // The decision is stored by the daemon's resolver; answer with it once it is.
    let deadline = Instant::now() + DECISION_WAIT;
    loop {
        let status = backend
            .confirmation(&token.name, &id)
            .await
            .map_err(ApiError::unavailable)?
            .map_or(ConfirmationStatus::Pending, |c| c.status);
        if status != ConfirmationStatus::Pending {
            return Ok(Json(json!({ "id": id, "status": status })).into_response());
        }
        if Instant::now() >= deadline {
            return Ok((
                StatusCode::ACCEPTED,
                Json(json!({ "id": id, "status": "pending" })),
            )
                .into_response());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn list_agents(
    State(shared): State<Arc<Shared>>,
    Extension(token): Extension<Token>,
) -> ApiResult {
    let backend = shared.backend().map_err(ApiError::unavailable)?;
    let agents: Vec<_> = backend
        .agents()
        .await
        .map_err(ApiError::unavailable)?
        .into_iter()
        .filter(|agent| token.may_use(&agent.id))
        .collect();
    Ok(Json(json!({ "agents": agents })).into_response())
}
