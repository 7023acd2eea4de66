//! The Inbox: pending confirmations and pairing requests, decided from the page, with live
//! updates.
//!
//! A decision takes the chat buttons' path: the page records it (`web_decisions`, keyed by a
//! random platform id), then puts a press event into the confirmation's conversation queue;
//! the resolver (`pipeline::confirm`) decides it as the owner's, edits the chat's prompt and
//! resumes the turn. Pairing codes are approved as `hearth pair approve` does.
//!
//! Live updates: `/events` (server-sent events) says `inbox` whenever the set of pending items
//! changes, from whatever decided them (a Telegram button, the CLI, expiry); the page's script
//! then fetches `/inbox/list` again.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use hearth_channel::{ButtonPress, ChatRef, Inbound, InboundKind, Sender};

use super::{Change, Session, WebState, local_time, render, server_error, span};
use crate::confirmation::{Action, PAGE_SENDER, button_data};
use crate::store::ConfirmationStatus;
use crate::text::clip;

/// What a pending confirmation looks like on the page.
pub struct ConfirmationView {
    pub id: String,
    pub who: String,
    pub where_: String,
    pub agent: String,
    pub tool: String,
    pub summary: String,
    pub arguments: String,
    pub asked: String,
    pub expires_in: String,
}

/// What a pending pairing request looks like on the page.
pub struct PairingView {
    pub code: String,
    pub who: String,
    pub channel: String,
    pub expires_in: String,
}

#[derive(askama::Template)]
#[template(path = "inbox_list.html")]
pub struct InboxList {
    pub csrf: String,
    pub notice: Option<String>,
    pub confirmations: Vec<ConfirmationView>,
    pub pairings: Vec<PairingView>,
}

#[derive(askama::Template)]
#[template(path = "inbox.html")]
struct InboxPage {
    csrf: String,
    active: &'static str,
    /// What the last change of this session did (see `Flash`), above the list.
    notice: Option<String>,
    list: String,
}

/// Pretty JSON where the arguments are JSON, else the text; cut for the page.
fn shown_arguments(arguments: &str) -> String {
    let pretty = serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| arguments.to_string());
    clip(&pretty, 2000)
}

async fn inbox_list(
    state: &WebState,
    session: &Session,
    notice: Option<String>,
) -> Result<InboxList, Response> {
    let store = &state.rt.store;
    let now = state.now();
    let tz = state.timezone();
    let confirmations = store
        .pending_confirmation_list(now)
        .await
        .map_err(|err| server_error(&err))?
        .into_iter()
        .map(|c| ConfirmationView {
            who: match &c.requester_name {
                Some(name) => format!("{name} ({}:{})", c.channel, c.requester),
                None => format!("{}:{}", c.channel, c.requester),
            },
            where_: format!("{}:{}", c.channel, c.chat_id),
            agent: c.agent_id,
            tool: c.tool,
            summary: clip(&c.summary, 500),
            arguments: shown_arguments(&c.arguments),
            asked: local_time(c.created_at, tz),
            expires_in: span(c.expires_at - now),
            id: c.id,
        })
        .collect();
    let pairings = store
        .open_pairings(now)
        .await
        .map_err(|err| server_error(&err))?
        .into_iter()
        .map(|p| PairingView {
            who: match &p.display_name {
                Some(name) => format!("{name} ({})", p.platform_user_id),
                None => p.platform_user_id.clone(),
            },
            channel: p.channel,
            expires_in: span(p.expires_at - now),
            code: p.code,
        })
        .collect();
    Ok(InboxList {
        csrf: session.csrf.clone(),
        notice,
        confirmations,
        pairings,
    })
}

pub(super) async fn page(State(state): State<WebState>, session: Session) -> Response {
    let notice = state.flash.take(&session);
    let list = match inbox_list(&state, &session, None).await {
        Ok(list) => list,
        Err(response) => return response,
    };
    let list = match askama::Template::render(&list) {
        Ok(html) => html,
        Err(err) => return server_error(&err),
    };
    render(&InboxPage {
        csrf: session.csrf,
        active: "inbox",
        notice,
        list,
    })
}

pub(super) async fn list(State(state): State<WebState>, session: Session) -> Response {
    match inbox_list(&state, &session, None).await {
        Ok(list) => render(&list),
        Err(response) => response,
    }
}

/// What the set of pending items is now, to tell when it changed.
async fn fingerprint(state: &WebState) -> String {
    let store = &state.rt.store;
    let now = state.now();
    let mut print = String::new();
    match store.pending_confirmation_list(now).await {
        Ok(list) => list.iter().for_each(|c| {
            print.push_str(&c.id);
            print.push(' ');
        }),
        Err(_) => print.push_str("confirmations unavailable "),
    }
    match store.open_pairings(now).await {
        Ok(list) => list.iter().for_each(|p| {
            print.push_str(&p.code);
            print.push(' ');
        }),
        Err(_) => print.push_str("pairings unavailable"),
    }
    print
}

/// How often the live stream looks for changes when nothing woke it: changes made by another
/// process (`hearth pair approve`) and pairing codes running out, which nothing writes. This
/// process's own changes wake it at once (`Store::waiting_changes`).
const EVENTS_FALLBACK_POLL: Duration = Duration::from_secs(10);

/// `/events`: `inbox` whenever the pending items change; ends with the session or the daemon.
pub(super) async fn events(State(state): State<WebState>, session: Session) -> Response {
    // Listening starts, and the items are read, before the page hears the stream is open: a
    // change made once the page has the stream is then always told.
    let wake = state.rt.store.waiting_changes();
    let first = fingerprint(&state).await;
    let stream = futures::stream::unfold(
        (state, session, wake, first),
        |(state, session, mut wake, mut last)| async move {
            loop {
                tokio::select! {
                    // The store's sender lives as long as `state`, so this never ends early.
                    _ = wake.changed() => {}
                    () = tokio::time::sleep(EVENTS_FALLBACK_POLL) => {}
                    () = state.shutdown.cancelled() => return None,
                }
                // A logged-out session's page stops hearing.
                if !matches!(
                    state.rt.store.web_session(&session.key, state.now()).await,
                    Ok(Some(_))
                ) {
                    return None;
                }
                let current = fingerprint(&state).await;
                if current != last {
                    let event = Event::default().event("inbox").data("changed");
                    let next = (state, session, wake, current);
                    return Some((Ok::<_, Infallible>(event), next));
                }
                last = current;
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The answer to an Inbox action: for htmx the refreshed list with the notice of what was done
/// beside it (out of band, so the live refresh of the list does not wipe it); for a plain form a
/// redirect to the Inbox, which shows the notice once (kept server-side, see `Flash`).
async fn answer(state: &WebState, change: &Change, notice: String) -> Response {
    if !change.htmx {
        state.flash.leave(&change.session, notice);
        return Redirect::to("/").into_response();
    }
    match inbox_list(state, &change.session, Some(notice)).await {
        Ok(list) => render(&list),
        Err(response) => response,
    }
}

fn random_nonce() -> String {
    crate::confirmation::new_id()
}

/// Approve or Deny from the page: through the resolver, as the owner.
pub(super) async fn decide_confirmation(
    State(state): State<WebState>,
    Path((id, action)): Path<(String, String)>,
    change: Change,
) -> Response {
    let action = match action.as_str() {
        "approve" => Action::Approve,
        "deny" => Action::Deny,
        _ => return (StatusCode::NOT_FOUND, "no such action").into_response(),
    };
    let store = &state.rt.store;
    let confirmation = match store.confirmation(&id).await {
        Ok(Some(c)) => c,
        Ok(None) => {
            return answer(&state, &change, "That request is no longer known.".into()).await;
        }
        Err(err) => return server_error(&err),
    };
    if confirmation.status != ConfirmationStatus::Pending || confirmation.expires_at <= state.now()
    {
        let status = match confirmation.status {
            // Pending but past its time: the expiry sweep has not marked it yet.
            ConfirmationStatus::Pending => ConfirmationStatus::Expired,
            status => status,
        };
        let notice = format!(
            "{} was already {}; nothing was changed.",
            confirmation.tool,
            status.as_str()
        );
        return answer(&state, &change, notice).await;
    }
    let platform_id = format!("web:{}", random_nonce());
    let action_name = crate::confirmation::action_name(action);
    if let Err(err) = store
        .add_web_decision(&platform_id, &confirmation.id, action_name, state.now())
        .await
    {
        return server_error(&err);
    }
    let event = Inbound {
        platform_id,
        chat: ChatRef {
            chat_id: confirmation.chat_id.clone(),
            thread_id: confirmation.thread_id.clone(),
        },
        sender: Sender::new(PAGE_SENDER).with_name("the owner on the web page"),
        kind: InboundKind::Press(ButtonPress {
            press_id: String::new(),
            data: button_data(&confirmation.id, action),
            message: None,
        }),
        reply_context: None,
        agent: None,
    };
    if let Err(err) = state.sink.store_event(&confirmation.channel, event).await {
        return server_error(&err);
    }
    tracing::info!(confirmation = %confirmation.id, decision = action_name, "decided on the owner's page");
    // The decision runs in the conversation's queue; wait a little so the answer shows it.
    let mut decided = None;
    for _ in 0..50 {
        match store.confirmation(&confirmation.id).await {
            Ok(Some(c)) if c.status != ConfirmationStatus::Pending => {
                decided = Some(c.status);
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let notice = match decided {
        Some(ConfirmationStatus::Approved) => format!(
            "Approved {} ({}); the turn goes on in {}:{}.",
            confirmation.tool,
            clip(&confirmation.summary, 120),
            confirmation.channel,
            confirmation.chat_id
        ),
        Some(ConfirmationStatus::Denied) => format!(
            "Denied {} ({}); the turn goes on without it in {}:{}.",
            confirmation.tool,
            clip(&confirmation.summary, 120),
            confirmation.channel,
            confirmation.chat_id
        ),
        Some(status) => format!(
            "{} was {} before your decision arrived; nothing was changed.",
            confirmation.tool,
            status.as_str()
        ),
        None => format!(
            "Sent: {} will be {} when the conversation's queue reaches it.",
            confirmation.tool,
            if matches!(action, Action::Approve) {
                "approved"
            } else {
                "denied"
            }
        ),
    };
    answer(&state, &change, notice).await
}

/// Approve or Reject a pairing code, as `hearth pair approve` does.
pub(super) async fn decide_pairing(
    State(state): State<WebState>,
    Path((code, action)): Path<(String, String)>,
    change: Change,
) -> Response {
    let store = &state.rt.store;
    let code = code.to_uppercase();
    let notice = match action.as_str() {
        "approve" => match store.approve_pairing(&code, state.now()).await {
            Ok(Ok(request)) => {
                state.outbox_wake.notify_one();
                tracing::info!(channel = %request.channel, user = %request.platform_user_id, "pairing approved on the owner's page");
                format!(
                    "Approved {}:{}; they can talk to hearth now.",
                    request.channel, request.platform_user_id
                )
            }
            Ok(Err(refusal)) => refusal,
            Err(err) => return server_error(&err),
        },
        "reject" => match store.reject_pairing(&code).await {
            Ok(true) => format!("Rejected the code {code}."),
            Ok(false) => format!("The code {code} is no longer pending."),
            Err(err) => return server_error(&err),
        },
        _ => return (StatusCode::NOT_FOUND, "no such action").into_response(),
    };
    answer(&state, &change, notice).await
}
