//! What happens in a turn, as a channel that shows progress sees it: the agent chosen, each tool
//! call, a confirmation asked and decided, the reply as it is written, and how the turn ended.
//!
//! The daemon's runtime and pipeline emit these through one port; a channel whose
//! [`crate::Capabilities::progress`] is set receives them in [`crate::Channel::turn_event`], as it
//! receives previews. The kind names (`agent.selected`, `tool.started` …) are a contract with
//! clients (the HTTP channel's Server-Sent Events); they are written here once, on
//! [`TurnEventKind`]. Sans-I/O: nothing here touches a network or a database.

use serde::Serialize;
use serde_json::Value;

/// The kinds of turn events, by their wire names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "&'static str")]
pub enum TurnEventKind {
    /// `agent.selected`: the router picked the agent that answers.
    AgentSelected,
    /// `tool.started`: a tool call began.
    ToolStarted,
    /// `tool.finished`: a tool call ended, with its result.
    ToolFinished,
    /// `confirmation.required`: a tool call waits for a person's decision.
    ConfirmationRequired,
    /// `confirmation.decided`: the decision was made (or the request expired).
    ConfirmationDecided,
    /// `text.delta`: more of the reply, as it is written.
    TextDelta,
    /// `message`: something said while the turn goes on (a budget warning), not its answer.
    Message,
    /// `plan.updated`: the turn's plan (its checklist of steps) changed.
    PlanUpdated,
    /// `turn.cancelling`: a cancel was asked for; `turn.failed` follows.
    TurnCancelling,
    /// `turn.completed`: the answer.
    TurnCompleted,
    /// `turn.failed`: the turn failed or was cancelled.
    TurnFailed,
}

impl TurnEventKind {
    /// Every kind, in the order a turn usually goes through them.
    pub const ALL: [TurnEventKind; 11] = [
        TurnEventKind::AgentSelected,
        TurnEventKind::ToolStarted,
        TurnEventKind::ToolFinished,
        TurnEventKind::ConfirmationRequired,
        TurnEventKind::ConfirmationDecided,
        TurnEventKind::TextDelta,
        TurnEventKind::Message,
        TurnEventKind::PlanUpdated,
        TurnEventKind::TurnCancelling,
        TurnEventKind::TurnCompleted,
        TurnEventKind::TurnFailed,
    ];

    /// The kind's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnEventKind::AgentSelected => "agent.selected",
            TurnEventKind::ToolStarted => "tool.started",
            TurnEventKind::ToolFinished => "tool.finished",
            TurnEventKind::ConfirmationRequired => "confirmation.required",
            TurnEventKind::ConfirmationDecided => "confirmation.decided",
            TurnEventKind::TextDelta => "text.delta",
            TurnEventKind::Message => "message",
            TurnEventKind::PlanUpdated => "plan.updated",
            TurnEventKind::TurnCancelling => "turn.cancelling",
            TurnEventKind::TurnCompleted => "turn.completed",
            TurnEventKind::TurnFailed => "turn.failed",
        }
    }

    /// The kind called `name`; `None` for a name no kind has.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// Whether the event ends its turn's event stream.
    pub fn ends_turn(self) -> bool {
        matches!(
            self,
            TurnEventKind::TurnCompleted | TurnEventKind::TurnFailed
        )
    }
}

impl From<TurnEventKind> for &'static str {
    fn from(kind: TurnEventKind) -> Self {
        kind.as_str()
    }
}

impl std::fmt::Display for TurnEventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tokens of a turn's model calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TurnUsage {
    /// Input (prompt) tokens.
    pub input_tokens: i64,
    /// Output (completion) tokens.
    pub output_tokens: i64,
}

/// A tool call as a client sees it: the tool that runs (for a `use_tool` call the real tool,
/// with `via`) and its arguments as JSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShownCall {
    /// The model's id of the call.
    pub id: String,
    /// The tool that runs.
    pub tool: String,
    /// `use_tool` when the model reached the tool through it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The arguments as JSON; what the model wrote, as a string, when it was not JSON.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub arguments: Value,
}

/// One step of a turn's plan as a client sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanStepView {
    /// What the step does.
    pub step: String,
    /// `pending`, `in_progress`, `done`, `skipped` or `failed`.
    pub status: String,
    /// A short note: what came out, or why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One event of a turn. Its JSON ([`TurnEvent::data`]) is each variant's fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TurnEvent {
    /// The router picked the agent that answers.
    AgentSelected {
        /// The agent's id.
        agent: String,
        /// Its name.
        name: String,
        /// Why: `keywords`, `mention`, `pinned`, `sticky` or `default`.
        reason: String,
        /// The keywords that matched, for `keywords`.
        keywords: Vec<String>,
    },
    /// A tool call began.
    ToolStarted(ShownCall),
    /// A tool call ended.
    ToolFinished {
        /// The call (its arguments left out: `tool.started` had them).
        #[serde(flatten)]
        call: ShownCall,
        /// `done`, `error`, `denied` …
        status: String,
        /// The result, shortened.
        result: String,
    },
    /// A tool call waits for a person's decision.
    AwaitingDecision {
        /// The confirmation's id (`POST /confirmations/{id}`).
        id: String,
        /// The code a person types to decide, when it has one.
        code: Option<String>,
        /// The tool that waits.
        tool: String,
        /// The call's arguments, as JSON.
        arguments: Value,
        /// When it expires (Unix ms).
        expires_at: i64,
        /// The prompt as the chat shows it.
        text: String,
    },
    /// A confirmation was decided.
    Decided {
        /// The confirmation's id.
        id: String,
        /// `approved`, `denied` or `expired`.
        decision: String,
        /// Who decided (`channel:user`), when the daemon knows.
        #[serde(skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        /// The outcome as the chat shows it.
        text: String,
        /// Whether the decision also cancelled the turn, when the daemon knows.
        #[serde(skip_serializing_if = "Option::is_none")]
        cancelled: Option<bool>,
    },
    /// More of the reply.
    TextDelta {
        /// The new text; with `reset`, the whole reply so far.
        text: String,
        /// The reply started over: drop what was shown.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        reset: bool,
    },
    /// Something said while the turn goes on, not its answer.
    Message {
        /// What was said.
        text: String,
    },
    /// The turn's plan changed.
    PlanUpdated {
        /// The plan's revision: 1 for the first, one more for each change.
        revision: i64,
        /// What the model said of the plan, when it said something.
        #[serde(skip_serializing_if = "Option::is_none")]
        explanation: Option<String>,
        /// The steps, in order.
        steps: Vec<PlanStepView>,
        /// Steps done.
        done: usize,
        /// Steps in all.
        total: usize,
        /// A tool call of the turn waits for a decision.
        waiting: bool,
        /// The plan as a chat shows it.
        text: String,
    },
    /// A cancel was asked for.
    Cancelling {
        /// Why, as the client said.
        reason: String,
    },
    /// The answer.
    Completed {
        /// Its text.
        text: String,
        /// The agent that answered; none when a chat command answered.
        #[serde(skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// Tokens of the turn's model calls.
        usage: TurnUsage,
        /// What they cost, in USD.
        cost_usd: f64,
    },
    /// The turn failed or was cancelled.
    Failed {
        /// What the chat was told.
        text: String,
        /// `failed` or `cancelled`.
        state: String,
        /// Why.
        error: String,
        /// Tokens of the turn's model calls.
        usage: TurnUsage,
        /// What they cost, in USD.
        cost_usd: f64,
    },
}

impl TurnEvent {
    /// The event's kind.
    pub fn kind(&self) -> TurnEventKind {
        match self {
            TurnEvent::AgentSelected { .. } => TurnEventKind::AgentSelected,
            TurnEvent::ToolStarted(_) => TurnEventKind::ToolStarted,
            TurnEvent::ToolFinished { .. } => TurnEventKind::ToolFinished,
            TurnEvent::AwaitingDecision { .. } => TurnEventKind::ConfirmationRequired,
            TurnEvent::Decided { .. } => TurnEventKind::ConfirmationDecided,
            TurnEvent::TextDelta { .. } => TurnEventKind::TextDelta,
            TurnEvent::Message { .. } => TurnEventKind::Message,
            TurnEvent::PlanUpdated { .. } => TurnEventKind::PlanUpdated,
            TurnEvent::Cancelling { .. } => TurnEventKind::TurnCancelling,
            TurnEvent::Completed { .. } => TurnEventKind::TurnCompleted,
            TurnEvent::Failed { .. } => TurnEventKind::TurnFailed,
        }
    }

    /// The event's JSON, as clients read it.
    pub fn data(&self) -> Value {
        // Plain structs of strings and numbers: serialising cannot fail (a non-finite cost
        // becomes null).
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_read_back_by_their_names() {
        for kind in TurnEventKind::ALL {
            assert_eq!(TurnEventKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(TurnEventKind::parse("turn.done"), None);
        assert!(TurnEventKind::TurnFailed.ends_turn());
        assert!(!TurnEventKind::TextDelta.ends_turn());
    }

    #[test]
    fn each_event_carries_the_fields_clients_read() {
        let call = ShownCall {
            id: "c1".into(),
            tool: "delete_task".into(),
            via: Some("use_tool".into()),
            arguments: json!({ "id": 4 }),
        };
        assert_eq!(
            TurnEvent::ToolStarted(call.clone()).data(),
            json!({ "id": "c1", "tool": "delete_task", "via": "use_tool", "arguments": { "id": 4 } })
        );
        let finished = TurnEvent::ToolFinished {
            call: ShownCall {
                arguments: Value::Null,
                ..call
            },
            status: "done".into(),
            result: "deleted".into(),
        };
        assert_eq!(
            finished.data(),
            json!({ "id": "c1", "tool": "delete_task", "via": "use_tool", "status": "done", "result": "deleted" })
        );
        assert_eq!(finished.kind().as_str(), "tool.finished");
        let delta = TurnEvent::TextDelta {
            text: "Hel".into(),
            reset: false,
        };
        assert_eq!(delta.data(), json!({ "text": "Hel" }));
        let completed = TurnEvent::Completed {
            text: "Hi".into(),
            agent: None,
            usage: TurnUsage::default(),
            cost_usd: 0.0,
        };
        assert_eq!(
            completed.data(),
            json!({ "text": "Hi", "usage": { "input_tokens": 0, "output_tokens": 0 }, "cost_usd": 0.0 })
        );
    }
}
