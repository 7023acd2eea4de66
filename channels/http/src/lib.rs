//! hearth's HTTP channel: a durable turns API (`/api/v1`) with Server-Sent Events and
//! per-client tokens, served on the daemon's `http_listen` beside `/healthz`.
//!
//! A turn started over HTTP is an inbound message like any other: it is stored in the inbox
//! (its Idempotency-Key is the platform id, so a retry is deduplicated) before the client gets
//! its `202`, and it is answered through the outbox. What the daemon delivers to this channel
//! (the reply, confirmation prompts and their outcomes, previews of the reply) becomes events
//! of the turn, stored in the database through the [`Backend`], so a client reading
//! `GET /api/v1/turns/{id}/events` can resume with `Last-Event-ID` after any disconnect or a
//! restart of hearth.

#![warn(missing_docs)]

mod api;
mod auth;
mod backend;
mod common;
mod config;
mod openai;
mod turns;

pub use auth::{hash_token, new_token};
pub use backend::{
    Agent, Backend, BackendError, ChatMessage, ChatTurn, Completion, Confirmation,
    ConfirmationStatus, Event, NewEvent, NewTurn, Outcome, Scope, Started, Token, TurnRecord,
    TurnState, Usage,
};
pub use config::{CHANNEL_NAME, HttpConfig, check_token_name};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::{
    Capabilities, Channel, ChannelContext, ChannelError, Format, MessageRef, OutboundMessage,
    PreviewUpdate, Progress, TurnEvent, TurnEventKind,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The HTTP channel. The daemon serves its [`HttpChannel::api`] on its listener and runs the
/// channel like any other; the API hands requests to the inbox the running channel holds.
pub struct HttpChannel {
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) config: HttpConfig,
    /// The context of the running channel: where turns are delivered. `None` before `run`
    /// and after shutdown; requests then get 503.
    pub(crate) ctx: Mutex<Option<ChannelContext>>,
    pub(crate) backend: OnceLock<Arc<dyn Backend>>,
    /// Bumped whenever this process stores an event, so streams look at once.
    pub(crate) appended: watch::Sender<u64>,
    /// The reply text each turn's preview showed so far, to send only what is new.
    previews: Mutex<HashMap<String, String>>,
    pub(crate) limiter: auth::Limiter,
    /// The event streams (turn events, streamed completions) each token has open.
    streams: Mutex<HashMap<String, usize>>,
}

impl Shared {
    /// Cancelled when the channel's current run stops (hearth stops): an open stream then ends
    /// with a comment saying so instead of holding the stop up (clients resume with
    /// `Last-Event-ID`). Never cancelled while no run is active.
    pub(crate) fn stopping(&self) -> CancellationToken {
        self.ctx().map(|ctx| ctx.shutdown).unwrap_or_default()
    }

    pub(crate) fn ctx(&self) -> Option<ChannelContext> {
        lock(&self.ctx).clone()
    }

    pub(crate) fn backend(&self) -> Result<&Arc<dyn Backend>, ChannelError> {
        self.backend
            .get()
            .ok_or_else(|| ChannelError::transient("the HTTP API is not mounted yet"))
    }

    /// Stores an event of `turn` and wakes the streams.
    pub(crate) async fn append(&self, turn: &str, event: NewEvent) -> Result<(), ChannelError> {
        self.backend()?
            .append(turn, &event)
            .await
            .map_err(|err| ChannelError::transient(err.0))?;
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
        Ok(())
    }

    /// A place for one more event stream of `token`, held as long as the stream is open; 429
    /// when the token has `max_streams_per_token` open already.
    pub(crate) fn open_stream(
        self: &Arc<Self>,
        token: &str,
    ) -> Result<OpenStream, common::ApiError> {
        let mut streams = lock(&self.streams);
        let open = streams.entry(token.to_string()).or_default();
        if *open >= self.config.max_streams_per_token {
            tracing::info!(
                token,
                open = *open,
                "an HTTP event stream was refused: the token has its most open"
            );
            return Err(common::ApiError::too_many(
                format!(
                    "the token `{token}` has {open} event streams open, the most it may ([channels.http] max_streams_per_token); close one and try again"
                ),
                Duration::from_secs(1),
            ));
        }
        *open += 1;
        Ok(OpenStream {
            shared: self.clone(),
            token: token.to_string(),
        })
    }
}

/// One open event stream of a token (see [`Shared::open_stream`]); its place is given back
/// when the stream is dropped.
pub(crate) struct OpenStream {
    shared: Arc<Shared>,
    token: String,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        let mut streams = lock(&self.shared.streams);
        if let Some(open) = streams.get_mut(&self.token) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                streams.remove(&self.token);
            }
        }
    }
}

/// The comment that ends an event stream when hearth stops.
pub(crate) const STOPPING_COMMENT: &str =
    "hearth is stopping; reconnect (with Last-Event-ID) to resume";

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these maps leaves them usable.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl HttpChannel {
    /// The channel for `config`; it serves nothing until the daemon mounts its [`Self::api`].
    pub fn new(config: HttpConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                config,
                ctx: Mutex::new(None),
                backend: OnceLock::new(),
                appended: watch::Sender::new(0),
                previews: Mutex::new(HashMap::new()),
                limiter: auth::Limiter::default(),
                streams: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The API of this channel, for the daemon to serve on its listener (see [`HttpApi`]).
    pub fn api(&self) -> HttpApi {
        HttpApi {
            shared: self.shared.clone(),
        }
    }
}

/// The API of an [`HttpChannel`] (`/api/v1/…` and `/v1/…`): the daemon mounts it on its
/// listener with its side of the channel, the [`Backend`]. Requests reach the inbox the running
/// channel holds.
#[derive(Clone)]
pub struct HttpApi {
    shared: Arc<Shared>,
}

impl HttpApi {
    /// The routes, answering with `backend`. Mounted once; a second call keeps the first
    /// backend.
    pub fn router(&self, backend: Arc<dyn Backend>) -> axum::Router {
        // Only the first backend counts: the daemon mounts the API once.
        let _ = self.shared.backend.set(backend);
        api::router(self.shared.clone(), openai::routes())
    }

    /// `routes` (another door on the listener: the daemon's MCP server at `/mcp`) behind the
    /// API's own token check: the same tokens in `Authorization: Bearer`, none in the URL, 401
    /// with `WWW-Authenticate: Bearer` when wrong, and the same slowing of addresses that keep
    /// failing. A route finds the [`Token`] in its request's extensions. Needs [`Self::router`]
    /// called first (it sets the backend that looks tokens up); until then requests get 503.
    pub fn guard(&self, routes: axum::Router) -> axum::Router {
        routes.layer(axum::middleware::from_fn_with_state(
            self.shared.clone(),
            api::authenticate,
        ))
    }
}

/// What the daemon puts on each message it sends for an HTTP turn: the turn it belongs to, or
/// `control` for answers to the API's own requests (a decision, a cancel), which are not part
/// of any turn's answer.
fn turn_of(message: &OutboundMessage) -> Option<(String, bool)> {
    turn_of_context(message.reply_context.as_ref())
}

/// The turn (or `control`) a reply context names; see [`turn_of`].
fn turn_of_context(context: Option<&serde_json::Value>) -> Option<(String, bool)> {
    let context = context?;
    let turn = context.get("turn").and_then(|t| t.as_str());
    let control = context
        .get("control")
        .and_then(|c| c.as_bool())
        .unwrap_or(false);
    match (turn, control) {
        (_, true) => Some((String::new(), true)),
        (Some(turn), false) => Some((turn.to_string(), false)),
        (None, false) => None,
    }
}

/// The prefix of the message id of a turn's answer, `reply:<turn>`: its preview (the
/// `text.delta` events) and its final text are one message, the final one replacing the preview.
const REPLY_PREFIX: &str = "reply:";

/// The prefix of the message ids of confirmation prompts: `confirm:<turn>:<confirmation id>`.
const PROMPT_PREFIX: &str = "confirm:";

#[async_trait]
impl Channel for HttpChannel {
    fn name(&self) -> &str {
        CHANNEL_NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // No buttons to press in place: prompts carry a short code a person can type
            // (`approve K7Q2MX`, in any client), and become `confirmation.required` events;
            // `POST /api/v1/confirmations/{id}` decides like a press.
            buttons: false,
            // The outcome of a decision "edits" the prompt: a `confirmation.decided` event.
            edits: true,
            format: Format::Markdown,
            preview: Some(Duration::from_millis(250)),
            // A reply sent again with its delivery id is stored once (the event's dedup key).
            deduplicates_sends: true,
            // Clients follow a turn through its events: the agent chosen, each tool call.
            progress: true,
            ..Capabilities::default()
        }
    }

    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        let shutdown = ctx.shutdown.clone();
        let status = ctx.status.clone();
        *lock(&self.shared.ctx) = Some(ctx);
        status.connected();
        shutdown.cancelled().await;
        *lock(&self.shared.ctx) = None;
        Ok(())
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        let Some((turn, control)) = turn_of(message) else {
            return Err(ChannelError::rejected(
                "an HTTP message belongs to no turn: nobody would read it",
            ));
        };
        let reference = |id: String| MessageRef {
            chat: message.chat.clone(),
            message_id: id,
        };
        if control {
            return Ok(reference("control".into()));
        }
        if !message.buttons.is_empty() {
            return Err(ChannelError::rejected(
                "the HTTP API shows no buttons: a confirmation prompt carries a short code to type",
            ));
        }
        let backend = self.shared.backend()?.clone();
        let dedup = message.delivery_id.as_ref().map(|id| format!("out:{id}"));
        lock(&self.shared.previews).remove(&turn);

        let record = self.shared.turn_record(&turn).await?;
        // A confirmation prompt: it names the short code of one of the turn's pending
        // confirmations.
        let prompt = backend
            .pending_confirmations(&record.token)
            .await
            .map_err(|err| ChannelError::transient(err.0))?
            .into_iter()
            .find(|c| {
                c.turn.as_deref() == Some(turn.as_str())
                    && c.code
                        .as_deref()
                        .is_some_and(|code| message.text.contains(&format!("APPROVE {code}")))
            });
        if let Some(c) = prompt {
            let id = c.id.clone();
            let event = TurnEvent::AwaitingDecision {
                id: c.id,
                code: c.code,
                tool: c.tool,
                arguments: c.arguments,
                expires_at: c.expires_at,
                text: message.text.clone(),
            };
            self.shared
                .append(&turn, NewEvent::of(&event, dedup))
                .await?;
            return Ok(reference(format!("{PROMPT_PREFIX}{turn}:{id}")));
        }

        let outcome = backend
            .outcome(&record.platform_id)
            .await
            .map_err(|err| ChannelError::transient(err.0))?;
        let text = message.text.clone();
        let event = match outcome {
            // A chat command (`/help`, `/reset`) answered it: no turn ran.
            None => TurnEvent::Completed {
                text,
                agent: None,
                usage: Usage::default(),
                cost_usd: 0.0,
            },
            Some(outcome) => match outcome.state {
                TurnState::Completed => TurnEvent::Completed {
                    text,
                    agent: outcome.agent,
                    usage: outcome.usage,
                    cost_usd: outcome.cost_usd,
                },
                TurnState::Failed | TurnState::Cancelled => TurnEvent::Failed {
                    text,
                    state: outcome.state.to_string(),
                    error: outcome.error.unwrap_or_else(|| outcome.state.to_string()),
                    usage: outcome.usage,
                    cost_usd: outcome.cost_usd,
                },
                // Said while the turn goes on (a budget warning, a note): not its answer.
                _ => TurnEvent::Message { text },
            },
        };
        let event = NewEvent::of(&event, dedup);
        self.shared.append(&turn, event).await?;
        Ok(reference(format!("{REPLY_PREFIX}{turn}")))
    }

    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        let Some((turn, id)) = target
            .message_id
            .strip_prefix(PROMPT_PREFIX)
            .and_then(|rest| rest.split_once(':'))
        else {
            // The daemon edits only prompts here (with their outcome); an answer already
            // given stays as the client read it.
            return Err(ChannelError::rejected(
                "only confirmation prompts of an HTTP turn can be edited",
            ));
        };
        let record = self.shared.turn_record(turn).await?;
        let found = self
            .shared
            .backend()?
            .confirmation(&record.token, id)
            .await
            .map_err(|err| ChannelError::transient(err.0))?;
        let decision = found.map_or_else(|| "decided".to_string(), |c| c.status.to_string());
        let event = TurnEvent::Decided {
            id: id.to_string(),
            decision,
            by: None,
            text: message.text.clone(),
            cancelled: None,
        };
        self.shared
            .append(turn, NewEvent::of(&event, Some(format!("decided:{id}"))))
            .await
    }

    async fn preview(&self, update: PreviewUpdate<'_>) -> Result<Option<MessageRef>, ChannelError> {
        let PreviewUpdate { chat, text, .. } = update;
        let backend = self.shared.backend()?.clone();
        // Turns of one conversation run one at a time: the one generating is its newest
        // running turn.
        let Some(turn) = backend
            .running_turn(&chat.chat_id)
            .await
            .map_err(|err| ChannelError::transient(err.0))?
        else {
            return Ok(None);
        };
        // The first preview of a turn this process has shown nothing of: if the turn's stored
        // events end in text, an earlier process was writing it when it stopped (a crash), and
        // the resumed model call starts its reply over, so clients must drop what they have.
        let resumed = !lock(&self.shared.previews).contains_key(&turn)
            && self.shared.ends_in_text(&turn).await?;
        let delta = {
            let mut previews = lock(&self.shared.previews);
            let shown = previews.entry(turn.clone()).or_default();
            let delta = match text.strip_prefix(shown.as_str()) {
                Some(rest) if !resumed => TurnEvent::TextDelta {
                    text: rest.to_string(),
                    reset: false,
                },
                // Resumed, or the preview was rewritten (a new model call): start over.
                _ => TurnEvent::TextDelta {
                    text: text.to_string(),
                    reset: true,
                },
            };
            if shown.as_str() == text {
                return Ok(Some(MessageRef {
                    chat: chat.clone(),
                    message_id: format!("{REPLY_PREFIX}{turn}"),
                }));
            }
            *shown = text.to_string();
            delta
        };
        self.shared
            .append(&turn, NewEvent::of(&delta, None))
            .await?;
        Ok(Some(MessageRef {
            chat: chat.clone(),
            message_id: format!("{REPLY_PREFIX}{turn}"),
        }))
    }

    async fn turn_event(&self, progress: Progress<'_>) -> Result<(), ChannelError> {
        let Some((turn, false)) = turn_of_context(progress.reply_context) else {
            // Events of a turn no HTTP client started (none should come here): nobody reads them.
            return Ok(());
        };
        // A decision is written once, whether it comes here first or with the edited prompt.
        let dedup = match progress.event {
            TurnEvent::Decided { id, .. } => Some(format!("decided:{id}")),
            _ => None,
        };
        self.shared
            .append(&turn, NewEvent::of(progress.event, dedup))
            .await
    }
}

impl Shared {
    /// Whether the last event stored for `turn` is a `text.delta`.
    async fn ends_in_text(&self, turn: &str) -> Result<bool, ChannelError> {
        let backend = self.backend()?;
        let (mut after, mut last_kind) = (0, None);
        loop {
            let events = backend
                .events_after(turn, after)
                .await
                .map_err(|err| ChannelError::transient(err.0))?;
            let Some(last) = events.last() else {
                return Ok(last_kind == Some(TurnEventKind::TextDelta));
            };
            after = last.seq;
            last_kind = Some(last.kind);
        }
    }

    async fn turn_record(&self, turn: &str) -> Result<TurnRecord, ChannelError> {
        self.backend()?
            .turn(turn)
            .await
            .map_err(|err| ChannelError::transient(err.0))?
            .ok_or_else(|| ChannelError::rejected(format!("no HTTP turn {turn}")))
    }
}
