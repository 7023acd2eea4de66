//! The steps of a turn that the native API and the OpenAI-compatible endpoint share: choosing
//! its agent, recording it, handing its message to the inbox, and cancelling it.

use axum::http::StatusCode;
use hearth_channel::confirmation::{Action, button_data};
use hearth_channel::{Authority, ButtonPress, ChatRef, Inbound, InboundKind, Sender, TurnEvent};
use serde_json::json;

use crate::Shared;
use crate::backend::{NewEvent, NewTurn, Started, Token, TurnRecord};
use crate::common::{ApiError, random_id};

/// The chat a conversation of a token is: `<token>/<conversation>`, so no token writes into
/// another's conversation.
pub(crate) fn chat_of(token: &str, conversation: &str) -> ChatRef {
    ChatRef::new(format!("{token}/{conversation}"))
}

/// The agent a token's request for `requested` (`auto` or an id) gets: `auto` for keyword
/// routing, the token's only agent when it is limited to one, or the agent named once it
/// exists and the token may use it.
pub(crate) async fn resolve_agent(
    shared: &Shared,
    token: &Token,
    requested: &str,
) -> Result<String, ApiError> {
    let backend = shared.backend().map_err(ApiError::unavailable)?;
    let agent = if requested == "auto" {
        match token.agents.as_slice() {
            [] => "auto".to_string(),
            [only] => only.clone(),
            several => {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "the token `{}` may use only the agents {}: name one in \"agent\"",
                        token.name,
                        several.join(", ")
                    ),
                ));
            }
        }
    } else {
        requested.to_string()
    };
    if agent != "auto" {
        let agents = backend.agents().await.map_err(ApiError::unavailable)?;
        if !agents.iter().any(|a| a.id == agent) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("there is no agent `{agent}` (GET /api/v1/agents lists them)"),
            ));
        }
        if !token.may_use(&agent) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!("the token `{}` may not use the agent `{agent}`", token.name),
            ));
        }
    }
    Ok(agent)
}

/// A turn to open: what [`open_turn`] needs besides the token.
pub(crate) struct Opening {
    /// The Idempotency-Key (checked with [`check_name`]).
    pub(crate) key: String,
    /// SHA-256 of the request, to tell a retry from another request under the same key.
    pub(crate) body_sha: String,
    /// The conversation's name.
    pub(crate) conversation: String,
    /// `auto` or the agent (from [`resolve_agent`]).
    pub(crate) agent: String,
}

/// Records a turn, or finds the one the same key made; a key reused for another request is a
/// 409.
pub(crate) async fn open_turn(
    shared: &Shared,
    token: &Token,
    opening: Opening,
) -> Result<TurnRecord, ApiError> {
    let backend = shared.backend().map_err(ApiError::unavailable)?;
    let turn = NewTurn {
        id: format!("t_{}", random_id()),
        token: token.name.clone(),
        idem_key: opening.key.clone(),
        body_sha: opening.body_sha,
        platform_id: format!("{}/{}", token.name, opening.key),
        conversation: opening.conversation,
        agent: opening.agent,
    };
    match backend.start_turn(&turn).await {
        Ok(Started::New(record) | Started::Existing(record)) => Ok(record),
        Ok(Started::Conflict) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "this Idempotency-Key was used for a different request; use a new key for a new turn",
        )),
        Err(err) => Err(ApiError::unavailable(err)),
    }
}

/// Hands the turn's message to the inbox; only once it is stored may the client hear that it
/// was accepted. Done also for a retry: the first attempt may have stopped before the inbox
/// stored it, and the inbox drops a duplicate.
pub(crate) async fn deliver_turn(
    shared: &Shared,
    token: &Token,
    record: &TurnRecord,
    text: &str,
) -> Result<(), ApiError> {
    let event = Inbound {
        platform_id: record.platform_id.clone(),
        chat: chat_of(&token.name, &record.conversation),
        sender: sender_of(token),
        kind: InboundKind::Message {
            text: text.to_string(),
            attachments: Vec::new(),
            message_id: Some(record.id.clone()),
            reply_to: None,
        },
        reply_context: Some(json!({ "turn": record.id })),
        // The agent travels beside the text, so the daemon reads what the user typed as
        // typed: `approve K7Q2MX` with model `hearth/tasks` is a decision, not a message to
        // the agent.
        agent: (record.agent != "auto").then(|| record.agent.clone()),
    };
    deliver(shared, event).await
}

/// The sender a token's events come from: its identity `http:<name>`, holding what its scope
/// allows (a `chat` token decides nothing, whatever its text says).
pub(crate) fn sender_of(token: &Token) -> Sender {
    Sender::new(token.name.clone())
        .with_name(token.name.clone())
        .with_authority(token.scope.authority())
}

/// Stores an event in the inbox; only then may the client hear that it was accepted.
pub(crate) async fn deliver(shared: &Shared, event: Inbound) -> Result<(), ApiError> {
    let Some(ctx) = shared.ctx() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the HTTP channel is not running (starting or stopping); try again",
        ));
    };
    ctx.sink.deliver(event).await.map_err(ApiError::unavailable)
}

/// Asks the daemon to stop the turn `record`, which has not ended, and records `reason` as the
/// turn's `turn.cancelling` event. The turn then ends with `turn.failed` (state `cancelled`).
pub(crate) async fn request_cancel(
    shared: &Shared,
    record: &TurnRecord,
    reason: &str,
) -> Result<(), ApiError> {
    // Recorded first, so the reason comes before the end of the turn in its events.
    tracing::info!(turn = %record.id, reason, "cancelling an HTTP turn");
    shared
        .append(
            &record.id,
            NewEvent::of(
                &TurnEvent::Cancelling {
                    reason: reason.to_string(),
                },
                Some(format!("cancelling:{}", record.id)),
            ),
        )
        .await
        .map_err(ApiError::unavailable)?;
    let backend = shared.backend().map_err(ApiError::unavailable)?.clone();
    // A turn waiting for approval runs nothing a `/cancel` could stop. Its confirmations are
    // decided instead, by the press a cancel makes, through the resolver chat buttons go
    // through (so a copy of the prompt in the owner's chat shows the outcome too); the last one
    // ends the turn as cancelled.
    let waiting: Vec<_> = backend
        .pending_confirmations(&record.token)
        .await
        .map_err(ApiError::unavailable)?
        .into_iter()
        .filter(|c| c.turn.as_deref() == Some(record.id.as_str()))
        .collect();
    // The cancel presses decide nothing but the turn's own requests, which its token may do
    // whatever its scope: they come from a sender that may only chat.
    let sender = Sender::new(record.token.clone())
        .with_name(record.token.clone())
        .with_authority(Authority::Chat);
    if waiting.is_empty() {
        // The chat's own `/cancel`, from the turn's token, in the turn's conversation: it stops
        // the running turn at once, as in any chat.
        let chat = chat_of(&record.token, &record.conversation);
        let event = Inbound {
            reply_context: Some(json!({ "turn": record.id, "control": true })),
            ..Inbound::message(
                format!("{}/cancel", record.platform_id),
                chat,
                sender,
                "/cancel",
            )
        };
        deliver(shared, event).await?;
    } else {
        for confirmation in waiting {
            let event = Inbound {
                platform_id: format!("{}/cancel/{}", record.platform_id, confirmation.id),
                chat: chat_of(&record.token, "_decisions"),
                sender: sender.clone(),
                kind: InboundKind::Press(ButtonPress {
                    press_id: format!("api-{}", random_id()),
                    data: {
                        let decision = confirmation.decision(Action::Cancel);
                        button_data(&decision.id, decision.action)
                    },
                    message: None,
                }),
                reply_context: Some(json!({ "control": true })),
                agent: None,
            };
            deliver(shared, event).await?;
        }
    }
    Ok(())
}
