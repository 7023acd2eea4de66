//! The daemon's side of the HTTP channel: [`hearth_http::Backend`] on the store and the
//! runtime's agents, and the events of a turn only the daemon sees (the agent chosen, tool
//! calls) written for HTTP clients to read.

use std::sync::Arc;

use async_trait::async_trait;
use std::time::Duration;

use hearth_channel::TurnEventKind;
use hearth_http::{
    Agent, Backend, BackendError, CHANNEL_NAME, ChatMessage, ChatTurn, Completion, Confirmation,
    ConfirmationStatus, Event, NewEvent, NewTurn, Outcome, Scope, Started, Token, TurnRecord,
    TurnState, Usage,
};
use serde_json::Value;

use crate::provider::ChatRequest;
use crate::runtime::Runtime;
use crate::runtime::budget;
use crate::store::http::{HttpTurnRow, HttpTurnState};
use crate::store::{self, IdentityStatus, Payer, StoreError};

/// The most tokens a background request's answer (a title, tags) may use.
const BACKGROUND_MAX_TOKENS: u32 = 1000;
/// How long a background request's model call may take.
const BACKGROUND_TIMEOUT: Duration = Duration::from_secs(60);

/// The store and agents of a running daemon, as the HTTP channel sees them.
pub struct StoreBackend {
    pub rt: Arc<Runtime>,
}

fn unavailable(err: StoreError) -> BackendError {
    BackendError(err.reason())
}

fn record(row: HttpTurnRow) -> TurnRecord {
    TurnRecord {
        id: row.id,
        token: row.token,
        conversation: row.conversation,
        agent: row.agent,
        platform_id: row.platform_id,
        state: turn_state(row.state),
        final_text: row.final_text,
        created_at: row.created_at,
    }
}

/// The channel's name for a stored state; the two enums are one list, written on each side of
/// the crate boundary (the store's with its text, the channel's with its JSON).
fn turn_state(stored: HttpTurnState) -> TurnState {
    match stored {
        HttpTurnState::Queued => TurnState::Queued,
        HttpTurnState::Running => TurnState::Running,
        HttpTurnState::AwaitingConfirmation => TurnState::AwaitingConfirmation,
        HttpTurnState::Completed => TurnState::Completed,
        HttpTurnState::Failed => TurnState::Failed,
        HttpTurnState::Cancelled => TurnState::Cancelled,
    }
}

fn stored_state(state: TurnState) -> HttpTurnState {
    match state {
        TurnState::Queued => HttpTurnState::Queued,
        TurnState::Running => HttpTurnState::Running,
        TurnState::AwaitingConfirmation => HttpTurnState::AwaitingConfirmation,
        TurnState::Completed => HttpTurnState::Completed,
        TurnState::Failed => HttpTurnState::Failed,
        TurnState::Cancelled => HttpTurnState::Cancelled,
    }
}

fn confirmation_status(stored: store::ConfirmationStatus) -> ConfirmationStatus {
    match stored {
        store::ConfirmationStatus::Pending => ConfirmationStatus::Pending,
        store::ConfirmationStatus::Approved => ConfirmationStatus::Approved,
        store::ConfirmationStatus::Denied => ConfirmationStatus::Denied,
        store::ConfirmationStatus::Expired => ConfirmationStatus::Expired,
    }
}

/// A call's arguments as clients read them: JSON; for a call made through `use_tool`, the
/// arguments of the real tool; text that is not JSON stays the text the model wrote.
fn arguments_json(written: &str) -> Value {
    let arguments =
        serde_json::from_str::<Value>(written).unwrap_or_else(|_| Value::String(written.into()));
    match arguments.get("tool_name").and(arguments.get("arguments")) {
        Some(inner) => inner.clone(),
        None => arguments,
    }
}

impl StoreBackend {
    async fn confirmation_for(
        &self,
        token: &str,
        id: &str,
    ) -> Result<Option<Confirmation>, StoreError> {
        let store = &self.rt.store;
        let Some(found) = store.confirmation(id).await? else {
            return Ok(None);
        };
        let decider = store
            .identity(CHANNEL_NAME, token)
            .await?
            .filter(|i| i.status == IdentityStatus::Allowed);
        // An MCP client's request is decided only in the chat it was asked in (the client may
        // hold this very token).
        let may_decide = found.has_turn()
            && decider.is_some_and(|d| {
                d.is_owner
                    || found.user_id == Some(d.user_id)
                    || (found.channel == CHANNEL_NAME && found.requester == token)
            });
        let own = found.channel == CHANNEL_NAME && found.requester == token;
        // The HTTP turn that waits: the one whose inbox entry the daemon's turn answers.
        let mut turn = None;
        let mut arguments = Value::String(found.summary.clone());
        if let Some(daemon_turn) = store.turn(found.turn_id).await? {
            if let Some(entry) = store.inbox_entry(daemon_turn.inbox_id).await?
                && entry.channel == CHANNEL_NAME
            {
                turn = store
                    .http_turn_by_platform_id(&entry.platform_id)
                    .await?
                    .map(|row| row.id);
            }
            // A waiting call is open; a decided one keeps the summary the prompt showed.
            if let Some(call) = store
                .open_tool_calls(daemon_turn.id)
                .await?
                .into_iter()
                .find(|call| call.id == found.tool_call_id)
            {
                arguments = arguments_json(&call.call.arguments);
            }
        }
        Ok(Some(Confirmation {
            id: found.id,
            code: found.short_code,
            tool: found.tool,
            arguments,
            status: confirmation_status(found.status),
            expires_at: found.expires_at,
            turn,
            may_decide,
            own,
        }))
    }
}

#[async_trait]
impl Backend for StoreBackend {
    async fn authenticate(&self, hash: &str) -> Result<Option<Token>, BackendError> {
        let now = self.rt.clock.now_ms();
        let Some(row) = self
            .rt
            .store
            .token_by_hash(hash, now)
            .await
            .map_err(unavailable)?
        else {
            return Ok(None);
        };
        // A token whose identity was revoked (`hearth pair revoke http:NAME`) is revoked too.
        let identity = self
            .rt
            .store
            .identity(CHANNEL_NAME, &row.name)
            .await
            .map_err(unavailable)?;
        if !identity.is_some_and(|i| i.status == IdentityStatus::Allowed) {
            return Ok(None);
        }
        let Some(scope) = Scope::parse(&row.scope) else {
            tracing::warn!(token = %row.name, scope = %row.scope, "a token with an unknown scope refused");
            return Ok(None);
        };
        Ok(Some(Token {
            name: row.name,
            scope,
            agents: row.agents.0,
        }))
    }

    async fn start_turn(&self, turn: &NewTurn) -> Result<Started, BackendError> {
        let row = HttpTurnRow {
            id: turn.id.clone(),
            token: turn.token.clone(),
            idem_key: turn.idem_key.clone(),
            body_sha: turn.body_sha.clone(),
            platform_id: turn.platform_id.clone(),
            conversation: turn.conversation.clone(),
            agent: turn.agent.clone(),
            state: HttpTurnState::Queued,
            final_text: None,
            created_at: 0,
        };
        let (stored, new) = self
            .rt
            .store
            .start_http_turn(&row, self.rt.clock.now_ms())
            .await
            .map_err(unavailable)?;
        Ok(if new {
            Started::New(record(stored))
        } else if stored.body_sha == turn.body_sha {
            Started::Existing(record(stored))
        } else {
            Started::Conflict
        })
    }

    async fn turn(&self, id: &str) -> Result<Option<TurnRecord>, BackendError> {
        Ok(self
            .rt
            .store
            .http_turn(id)
            .await
            .map_err(unavailable)?
            .map(record))
    }

    async fn append(&self, turn: &str, event: &NewEvent) -> Result<(), BackendError> {
        self.rt
            .store
            .append_http_event(
                turn,
                event.kind.as_str(),
                &event.data,
                event.dedup.as_deref(),
                event.state.map(stored_state),
                event.final_text.as_deref(),
                self.rt.clock.now_ms(),
            )
            .await
            .map_err(unavailable)
    }

    async fn running_turn(&self, chat_id: &str) -> Result<Option<String>, BackendError> {
        self.rt
            .store
            .running_http_turn(chat_id)
            .await
            .map_err(unavailable)
    }

    async fn events_after(&self, turn: &str, after: i64) -> Result<Vec<Event>, BackendError> {
        let rows = self
            .rt
            .store
            .http_events_after(turn, after)
            .await
            .map_err(unavailable)?;
        rows.into_iter()
            .map(|row| {
                let kind = TurnEventKind::parse(&row.kind).ok_or_else(|| {
                    BackendError(format!(
                        "unknown HTTP event kind {:?} in the database",
                        row.kind
                    ))
                })?;
                Ok(Event {
                    seq: row.seq,
                    kind,
                    // Written by `append` as JSON; anything else is shown as a string.
                    data: serde_json::from_str(&row.data).unwrap_or(Value::String(row.data)),
                })
            })
            .collect()
    }

    async fn outcome(&self, platform_id: &str) -> Result<Option<Outcome>, BackendError> {
        let Some(summary) = self
            .rt
            .store
            .turn_summary_for(CHANNEL_NAME, platform_id)
            .await
            .map_err(unavailable)?
        else {
            return Ok(None);
        };
        let state = match summary.status.as_str() {
            "done" => TurnState::Completed,
            "failed" => TurnState::Failed,
            "cancelled" => TurnState::Cancelled,
            // running or suspended: the turn goes on.
            _ => TurnState::Running,
        };
        Ok(Some(Outcome {
            state,
            error: summary.error,
            usage: Usage {
                input_tokens: summary.input_tokens,
                output_tokens: summary.output_tokens,
            },
            cost_usd: summary.cost_nusd as f64 / 1e9,
            agent: Some(summary.agent_id),
        }))
    }

    async fn confirmation(
        &self,
        token: &str,
        id: &str,
    ) -> Result<Option<Confirmation>, BackendError> {
        self.confirmation_for(token, id).await.map_err(unavailable)
    }

    async fn pending_confirmations(&self, token: &str) -> Result<Vec<Confirmation>, BackendError> {
        let ids = self
            .rt
            .store
            .pending_confirmation_ids()
            .await
            .map_err(unavailable)?;
        let mut pending = Vec::new();
        for id in ids {
            if let Some(found) = self
                .confirmation_for(token, &id)
                .await
                .map_err(unavailable)?
                && found.may_decide
                && found.status == ConfirmationStatus::Pending
            {
                pending.push(found);
            }
        }
        Ok(pending)
    }

    async fn agents(&self) -> Result<Vec<Agent>, BackendError> {
        Ok(self
            .rt
            .agents()
            .set
            .iter()
            .map(|agent| Agent {
                id: agent.id.clone(),
                name: agent.name.clone(),
                description: agent.description.clone(),
                keywords: agent.triggers.keywords.clone(),
                version: None,
            })
            .collect())
    }

    async fn record_chat_turn(
        &self,
        turn: &TurnRecord,
        messages: &[ChatMessage],
    ) -> Result<(), BackendError> {
        let messages = serde_json::to_string(messages)
            .map_err(|err| BackendError(format!("cannot write the chat messages: {err}")))?;
        self.rt
            .store
            .record_http_chat_turn(
                &turn.id,
                &turn.token,
                &turn.conversation,
                &messages,
                self.rt.clock.now_ms(),
            )
            .await
            .map_err(unavailable)
    }

    async fn chat_shown(&self, turn: &str, shown: &str) -> Result<(), BackendError> {
        self.rt
            .store
            .set_http_chat_shown(turn, shown)
            .await
            .map_err(unavailable)
    }

    async fn chat_turns(
        &self,
        token: &str,
        conversation: &str,
    ) -> Result<Vec<ChatTurn>, BackendError> {
        let rows = self
            .rt
            .store
            .http_chat_turns(token, conversation)
            .await
            .map_err(unavailable)?;
        Ok(rows
            .into_iter()
            .map(|row| ChatTurn {
                turn: row.turn,
                state: turn_state(row.state),
                // Written by `record_chat_turn`; anything unreadable covers nothing.
                messages: serde_json::from_str(&row.messages).unwrap_or_default(),
                shown: row.shown,
            })
            .collect())
    }

    async fn plain_completion(
        &self,
        token: &Token,
        agent: Option<&str>,
        messages: &[ChatMessage],
    ) -> Result<Completion, BackendError> {
        let rt = &self.rt;
        let agents = rt.agents();
        let wanted = agent.unwrap_or(&rt.config.router.default_agent);
        let Some(agent) = agents.set.get(wanted).or_else(|| agents.set.iter().next()) else {
            return Err(BackendError("no agent is configured".into()));
        };
        if let Some(reason) = budget::cap_reached(rt, None).await.map_err(unavailable)? {
            return Err(BackendError(reason));
        }
        let Some(provider) = rt.providers.chain(&agent.provider, Some(&agent.model)) else {
            return Err(BackendError(format!(
                "the provider `{}` is not configured",
                agent.provider
            )));
        };
        let system = messages
            .iter()
            .filter(|m| m.role == "system")
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        let request = ChatRequest {
            model: None,
            system,
            messages: messages
                .iter()
                .filter_map(|m| match m.role.as_str() {
                    "user" => Some(crate::provider::ChatMessage::user(m.content.clone())),
                    "assistant" => Some(crate::provider::ChatMessage::assistant(m.content.clone())),
                    _ => None,
                })
                .collect(),
            tools: Default::default(),
            temperature: None,
            max_tokens: Some(BACKGROUND_MAX_TOKENS),
            stream: false,
            tool_choice: None,
        };
        let response = tokio::time::timeout(BACKGROUND_TIMEOUT, provider.complete(&request, None))
            .await
            .map_err(|_| {
                BackendError(format!(
                    "no answer within {}s",
                    BACKGROUND_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|err| BackendError(err.to_string()))?;
        let user_id = rt
            .store
            .identity(CHANNEL_NAME, &token.name)
            .await
            .map_err(unavailable)?
            .map(|identity| identity.user_id);
        let payer = Payer {
            purpose: "background",
            user_id,
            agent_id: Some(agent.id.clone()),
            channel: Some(CHANNEL_NAME.to_string()),
            ..Payer::default()
        };
        budget::record(rt, &payer, &response)
            .await
            .map_err(unavailable)?;
        Ok(Completion {
            text: response.text,
            usage: Usage {
                input_tokens: response.usage.input_tokens as i64,
                output_tokens: response.usage.output_tokens as i64,
            },
        })
    }
}
