//! What the channel needs from the daemon, and nothing more: tokens, its own turns and their
//! events, the confirmations a token's user may decide, and the agents. The daemon implements
//! [`Backend`] on its store; the channel never sees the database, the router or the runtime.

use async_trait::async_trait;
use hearth_channel::confirmation::{Action, Decision};
use hearth_channel::{TurnEvent, TurnEventKind};
use serde::Serialize;

pub use hearth_channel::TurnUsage as Usage;

/// Where an HTTP turn stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    /// Stored, not begun.
    Queued,
    /// The daemon works on it.
    Running,
    /// A tool call waits for a decision.
    AwaitingConfirmation,
    /// Answered.
    Completed,
    /// Failed.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl TurnState {
    /// Every state, from first to last.
    pub const ALL: [TurnState; 6] = [
        TurnState::Queued,
        TurnState::Running,
        TurnState::AwaitingConfirmation,
        TurnState::Completed,
        TurnState::Failed,
        TurnState::Cancelled,
    ];

    /// The state's name, as clients read it.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnState::Queued => "queued",
            TurnState::Running => "running",
            TurnState::AwaitingConfirmation => "awaiting_confirmation",
            TurnState::Completed => "completed",
            TurnState::Failed => "failed",
            TurnState::Cancelled => "cancelled",
        }
    }

    /// The state called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == name)
    }

    /// Whether the turn has ended: nothing changes it any more.
    pub fn has_ended(self) -> bool {
        matches!(
            self,
            TurnState::Completed | TurnState::Failed | TurnState::Cancelled
        )
    }
}

impl std::fmt::Display for TurnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a confirmation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfirmationStatus {
    /// Waiting for a decision.
    Pending,
    /// Approved: the tool ran or runs.
    Approved,
    /// Denied (or cancelled with its turn).
    Denied,
    /// Nobody decided in time.
    Expired,
}

impl ConfirmationStatus {
    /// The status's name, as clients read it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmationStatus::Pending => "pending",
            ConfirmationStatus::Approved => "approved",
            ConfirmationStatus::Denied => "denied",
            ConfirmationStatus::Expired => "expired",
        }
    }
}

impl std::fmt::Display for ConfirmationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a token may do. Each scope includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Start turns, read their events, list agents, and list the confirmations its own turns
    /// wait for (without their ids). It decides none: its messages reach the daemon as a
    /// sender of [`hearth_channel::Authority::Chat`].
    Chat,
    /// Also approve or deny confirmations.
    Approve,
    /// Everything, including other tokens' turns.
    Admin,
}

impl Scope {
    /// The scope's name, as `hearth token create --scope` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Chat => "chat",
            Scope::Approve => "approve",
            Scope::Admin => "admin",
        }
    }

    /// What a sender holding a token of this scope may do in the daemon: a `chat` token talks
    /// only; `approve` and `admin` decide confirmations as their user may.
    pub fn authority(self) -> hearth_channel::Authority {
        match self {
            Scope::Chat => hearth_channel::Authority::Chat,
            Scope::Approve | Scope::Admin => hearth_channel::Authority::Full,
        }
    }

    /// Reads a scope name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "chat" => Some(Scope::Chat),
            "approve" => Some(Scope::Approve),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }
}

/// A token that authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// Its name; the identity `http:<name>`.
    pub name: String,
    /// What it may do.
    pub scope: Scope,
    /// The agents it may use; empty means any.
    pub agents: Vec<String>,
}

impl Token {
    /// Whether the token may talk to `agent`.
    pub fn may_use(&self, agent: &str) -> bool {
        self.agents.is_empty() || self.agents.iter().any(|a| a == agent)
    }
}

/// A turn to record for `POST /turns`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTurn {
    /// The turn's id, as clients see it.
    pub id: String,
    /// The token that started it.
    pub token: String,
    /// The client's Idempotency-Key.
    pub idem_key: String,
    /// SHA-256 of the request, to tell a retry from a different request under the same key.
    pub body_sha: String,
    /// The inbox entry's platform id.
    pub platform_id: String,
    /// The conversation it belongs to (the client's name for it).
    pub conversation: String,
    /// `auto` or an agent id, as asked.
    pub agent: String,
}

/// What recording a turn found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Started {
    /// A new turn.
    New(TurnRecord),
    /// The same key with the same request: the turn made the first time.
    Existing(TurnRecord),
    /// The same key with another request.
    Conflict,
}

/// A turn started over HTTP, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TurnRecord {
    /// Its id.
    pub id: String,
    /// The token that started it.
    pub token: String,
    /// Its conversation.
    pub conversation: String,
    /// `auto` or the agent asked for.
    pub agent: String,
    /// The inbox entry's platform id.
    pub platform_id: String,
    /// Where it stands.
    pub state: TurnState,
    /// The answer, once there is one.
    pub final_text: Option<String>,
    /// When it was started (Unix ms).
    pub created_at: i64,
}

/// One stored event of a turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The database's sequence number: the SSE `id:`.
    pub seq: i64,
    /// `agent.selected`, `text.delta`, `turn.completed` …
    pub kind: TurnEventKind,
    /// The event's JSON.
    pub data: serde_json::Value,
}

/// An event to store, with what it does to the turn's state.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    /// The event's kind.
    pub kind: TurnEventKind,
    /// Its JSON.
    pub data: serde_json::Value,
    /// A key that makes writing it again (a retried delivery) a no-op.
    pub dedup: Option<String>,
    /// The turn's state from now on, if the event changes it.
    pub state: Option<TurnState>,
    /// The turn's answer, for the event that ends it.
    pub final_text: Option<String>,
}

impl NewEvent {
    /// `event` to store, once per `dedup` key, with what it does to its turn: work on the
    /// turn (an agent chosen, a tool started, a decision) means it runs, a confirmation asked
    /// parks it, and its end sets its state and answer.
    pub fn of(event: &TurnEvent, dedup: Option<String>) -> Self {
        let (state, final_text) = match event {
            TurnEvent::AgentSelected { .. }
            | TurnEvent::ToolStarted(_)
            | TurnEvent::Decided { .. } => (Some(TurnState::Running), None),
            TurnEvent::AwaitingDecision { .. } => (Some(TurnState::AwaitingConfirmation), None),
            TurnEvent::Completed { text, .. } => (Some(TurnState::Completed), Some(text.clone())),
            TurnEvent::Failed { text, state, .. } => (
                Some(TurnState::parse(state).unwrap_or(TurnState::Failed)),
                Some(text.clone()),
            ),
            TurnEvent::ToolFinished { .. }
            | TurnEvent::TextDelta { .. }
            | TurnEvent::Message { .. }
            | TurnEvent::PlanUpdated { .. }
            | TurnEvent::Cancelling { .. } => (None, None),
        };
        Self {
            kind: event.kind(),
            data: event.data(),
            dedup,
            state,
            final_text,
        }
    }
}

/// How the daemon's turn behind an HTTP turn ended, for `turn.completed` / `turn.failed`.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// `completed`, `failed` or `cancelled`; `running` while it goes on.
    pub state: TurnState,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// Tokens used by all the turn's model calls.
    pub usage: Usage,
    /// What they cost, in USD.
    pub cost_usd: f64,
    /// The agent that answered, when a turn ran.
    pub agent: Option<String>,
}

/// A confirmation, as a token's user sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Confirmation {
    /// Its id (`POST /confirmations/{id}`).
    pub id: String,
    /// The short code typed in a chat (`approve K7Q2MX`), when it has one.
    pub code: Option<String>,
    /// The tool that waits.
    pub tool: String,
    /// The call's arguments, as JSON.
    pub arguments: serde_json::Value,
    /// Where it stands.
    pub status: ConfirmationStatus,
    /// When it expires (Unix ms).
    pub expires_at: i64,
    /// The HTTP turn that waits for it, when an HTTP turn asked.
    pub turn: Option<String>,
    /// Whether the token's user may decide it (the requester, any of their identities, or the
    /// owner).
    #[serde(skip)]
    pub may_decide: bool,
    /// Whether a turn of the token itself raised it (the token is its requester). A token that
    /// may only chat sees only these.
    #[serde(skip)]
    pub own: bool,
}

impl Confirmation {
    /// The decision `action` makes on it, as a press of its button would carry it.
    pub fn decision(&self, action: Action) -> Decision {
        Decision {
            id: self.id.clone(),
            action,
        }
    }
}

/// An agent, for `GET /agents`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Agent {
    /// Its id (`"agent"` in a turn).
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The keywords that route a message to it.
    pub keywords: Vec<String>,
    /// Its definition's version, where the daemon keeps versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
}

/// One turn of a client's chat on the OpenAI-compatible endpoint, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatTurn {
    /// The HTTP turn.
    pub turn: String,
    /// Its state (as [`TurnRecord::state`]).
    pub state: TurnState,
    /// What it covers of the client's transcript: the new user message, or for the first turn
    /// of a branch the client's earlier messages and the new one.
    pub messages: Vec<ChatMessage>,
    /// The assistant text the client was sent, once the answer ended.
    pub shown: Option<String>,
}

/// A message of a client's chat: `user` or `assistant`, and its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// Its text.
    pub content: String,
}

/// The answer of a plain model call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The model's text.
    pub text: String,
    /// Its tokens.
    pub usage: Usage,
}

/// The daemon could not answer (its database is unavailable).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);

/// The daemon side of the HTTP channel.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The live (not revoked) token whose SHA-256 is `hash`, noting that it was used.
    async fn authenticate(&self, hash: &str) -> Result<Option<Token>, BackendError>;
    /// Records a turn, or finds the one made earlier under the same token and key.
    async fn start_turn(&self, turn: &NewTurn) -> Result<Started, BackendError>;
    /// A turn by id.
    async fn turn(&self, id: &str) -> Result<Option<TurnRecord>, BackendError>;
    /// Stores an event of `turn` (once per `dedup` key) and its change of state.
    async fn append(&self, turn: &str, event: &NewEvent) -> Result<(), BackendError>;
    /// The newest turn of the chat `chat_id` (`<token>/<conversation>`) that is running.
    async fn running_turn(&self, chat_id: &str) -> Result<Option<String>, BackendError>;
    /// The events of `turn` after sequence number `after`, oldest first.
    async fn events_after(&self, turn: &str, after: i64) -> Result<Vec<Event>, BackendError>;
    /// How the daemon's turn answering the inbox entry `platform_id` went; `None` when no turn
    /// ran for it (a chat command answered it).
    async fn outcome(&self, platform_id: &str) -> Result<Option<Outcome>, BackendError>;
    /// A confirmation by id, as the token `token` sees it.
    async fn confirmation(
        &self,
        token: &str,
        id: &str,
    ) -> Result<Option<Confirmation>, BackendError>;
    /// The pending confirmations the token's user may decide.
    async fn pending_confirmations(&self, token: &str) -> Result<Vec<Confirmation>, BackendError>;
    /// The agents, in file order.
    async fn agents(&self) -> Result<Vec<Agent>, BackendError>;
    /// Records what the chat turn `turn` covers of its client's transcript.
    async fn record_chat_turn(
        &self,
        turn: &TurnRecord,
        messages: &[ChatMessage],
    ) -> Result<(), BackendError>;
    /// Notes the assistant text the client of the chat turn `turn` was sent.
    async fn chat_shown(&self, turn: &str, shown: &str) -> Result<(), BackendError>;
    /// The chat turns of `token`'s conversation, oldest first.
    async fn chat_turns(
        &self,
        token: &str,
        conversation: &str,
    ) -> Result<Vec<ChatTurn>, BackendError>;
    /// One plain call of the model `agent` uses (the default agent's for `None`), for a chat
    /// UI's background request (a title, tags): no tools, no history, nothing stored but its
    /// cost. An error says why the call was not made or failed.
    async fn plain_completion(
        &self,
        token: &Token,
        agent: Option<&str>,
        messages: &[ChatMessage],
    ) -> Result<Completion, BackendError>;
}
