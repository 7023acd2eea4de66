//! `/healthz` (JSON: each channel's state, the write paths that cannot store, each MCP server's
//! state and the queue depths; 503 when a channel failed, the database cannot be read, or an
//! event or a turn cannot be stored) and `/metrics` (Prometheus text).
//!
//! A failed MCP server does not make hearth unhealthy: it takes only its own tools away, chats
//! go on, and hearth restarts it by itself; a restart of hearth (what a 503 may trigger) would
//! not fix a server that is down. Its state is in the body for whoever watches it.

#[cfg(feature = "http")]
pub mod backend;
pub mod listener;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::health::{Health, Verdict};
use crate::metrics::Metrics;
use crate::pipeline::dispatcher::Dispatcher;
use crate::store::Store;

#[derive(Clone)]
pub struct HttpState {
    pub store: Store,
    pub metrics: Arc<Metrics>,
    pub health: Health,
    pub dispatcher: Arc<Dispatcher>,
    pub mcp: crate::tool::mcp::McpManager,
    /// The channels this process runs, for the events they count themselves.
    pub channels: crate::pipeline::Channels,
}

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn healthz(State(state): State<HttpState>) -> Response {
    let channels = state.health.channels();
    // Reads can work while writes fail (a full disk): what cannot be stored is reported here.
    let faults = state.health.faults();
    let (inbox, outbox, database) = match (
        state.store.inbox_depth().await,
        state.store.outbox_depth().await,
    ) {
        (Ok(inbox), Ok(outbox)) => (inbox, outbox, "ok"),
        _ => (-1, -1, "unavailable"),
    };
    // A channel that never connected since start: nobody can reach hearth through it. Shown
    // as degraded at once, and unhealthy once it had its time to connect.
    let (never_connected, _) = state.health.never_connected();
    let verdict = state.health.verdict(database == "ok");
    let status = if verdict == Verdict::Unhealthy {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let body = serde_json::json!({
        // Unhealthy reads "degraded" here, as it always has: the 503 says the rest.
        "status": if verdict == Verdict::Ok { "ok" } else { "degraded" },
        "never_connected": never_connected,
        "database": database,
        "channels": channels,
        "faults": faults,
        "mcp_servers": state.mcp.health().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
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
    let mut text = state.metrics.render(&gauges);
    text.push_str(&mcp_gauges(&state.mcp));
    text.push_str(&channel_counters(&state.channels));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The events channels count themselves (Discord's rate limits), one counter family.
fn channel_counters(channels: &crate::pipeline::Channels) -> String {
    use std::fmt::Write;
    let mut names: Vec<&String> = channels.keys().collect();
    names.sort();
    let mut out = String::new();
    for name in names {
        for (event, total) in channels[name].counters() {
            if out.is_empty() {
                out.push_str("# TYPE hearth_channel_events_total counter\n");
            }
            // Writing to a String cannot fail.
            let _ = writeln!(
                out,
                "hearth_channel_events_total{{channel=\"{name}\",event=\"{event}\"}} {total}"
            );
        }
    }
    out
}

/// Per MCP server: whether it is connected, its tools and restarts.
fn mcp_gauges(mcp: &crate::tool::mcp::McpManager) -> String {
    let servers = mcp.health();
    if servers.is_empty() {
        return String::new();
    }
    let mut up = String::from(
        "# HELP hearth_mcp_server_up Whether the MCP server is connected\n# TYPE hearth_mcp_server_up gauge\n",
    );
    let mut tools = String::from(
        "# HELP hearth_mcp_server_tools Tools the MCP server offers\n# TYPE hearth_mcp_server_tools gauge\n",
    );
    let mut restarts = String::from(
        "# HELP hearth_mcp_server_restarts_total Starts of the MCP server after the first\n# TYPE hearth_mcp_server_restarts_total counter\n",
    );
    for (name, health) in servers {
        let label = format!(
            "server=\"{}\"",
            name.replace('\\', "\\\\").replace('"', "\\\"")
        );
        let connected = u8::from(health.state == "connected");
        up.push_str(&format!("hearth_mcp_server_up{{{label}}} {connected}\n"));
        tools.push_str(&format!(
            "hearth_mcp_server_tools{{{label}}} {}\n",
            health.tools
        ));
        restarts.push_str(&format!(
            "hearth_mcp_server_restarts_total{{{label}}} {}\n",
            health.restarts
        ));
    }
    format!("{up}{tools}{restarts}")
}
