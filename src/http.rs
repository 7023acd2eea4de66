//! `/healthz` (JSON: each channel's state, the write paths that cannot store and the queue
//! depths; 503 when a channel failed, the database cannot be read, or an event or a turn cannot
//! be stored) and `/metrics` (Prometheus text).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::daemon::Health;
use crate::metrics::Metrics;
use crate::pipeline::dispatcher::Dispatcher;
use crate::store::Store;

#[derive(Clone)]
pub struct HttpState {
    pub store: Store,
    pub metrics: Arc<Metrics>,
    pub health: Health,
    pub dispatcher: Arc<Dispatcher>,
}

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn healthz(State(state): State<HttpState>) -> Response {
    let channels = state.health.channels();
    let failed = channels.values().any(|c| c.state == "failed");
    // Reads can work while writes fail (a full disk): what cannot be stored is reported here.
    let faults = state.health.faults();
    let (inbox, outbox, database) = match (
        state.store.inbox_depth().await,
        state.store.outbox_depth().await,
    ) {
        (Ok(inbox), Ok(outbox)) => (inbox, outbox, "ok"),
        _ => (-1, -1, "unavailable"),
    };
    let status = if failed || database != "ok" || !faults.is_empty() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let body = serde_json::json!({
        "status": if status == StatusCode::OK { "ok" } else { "degraded" },
        "database": database,
        "channels": channels,
        "faults": faults,
        "inbox_pending": inbox,
        "outbox_pending": outbox,
        "in_progress": state.dispatcher.queued(),
    });
    (status, axum::Json(body)).into_response()
}

async fn metrics(State(state): State<HttpState>) -> Response {
    let inbox = state.store.inbox_depth().await.unwrap_or(-1) as f64;
    let outbox = state.store.outbox_depth().await.unwrap_or(-1) as f64;
    let confirmations = state.store.pending_confirmations().await.unwrap_or(-1) as f64;
    let gauges = [
        (
            "hearth_inbox_depth",
            "Inbox entries waiting to be handled",
            inbox,
        ),
        (
            "hearth_outbox_depth",
            "Replies waiting to be delivered",
            outbox,
        ),
        (
            "hearth_pending_confirmations",
            "Approve/Deny prompts waiting for an answer",
            confirmations,
        ),
        (
            "hearth_conversations_in_progress",
            "Inbox entries queued or running",
            state.dispatcher.queued() as f64,
        ),
    ];
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(&gauges),
    )
        .into_response()
}
