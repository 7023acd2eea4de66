//! `start_background_task`: work that runs after the answer, unattended, and reports back as a
//! reply to the message that started it (README, "Background tasks").
//!
//! The admission rule (docs/architecture.md, "Background tasks"): the tool reads the message its
//! turn answers from the inbox, never from its arguments, so the model cannot claim what the
//! person asked. A task starts without asking only when that message was written by a person
//! (not a schedule's fire or another task's run) and its words ask for later or background work
//! ([`asks_for_later`]); otherwise the call is an outward action, which asks first at every
//! autonomy but `full`. Schedules and tasks cannot start tasks at all: a run nobody watches
//! must not multiply itself. The per-user cap (`[plans] max_background_tasks`) is checked in the
//! same transaction that stores the task.

use std::sync::Arc;

use hearth_channel::{Inbound, InboundKind};
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::user_id;
use super::time::{format_local, parse_datetime};
use super::typed::NonEmpty;
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::store::background::{Admitted, NewBackgroundTask};
use crate::store::{InboxEntry, StoreError};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![typed::<StartBackgroundTask>()]
}

/// Longest title kept; a title is a label, not the task.
const MAX_TITLE_CHARS: usize = 120;
/// Longest instructions kept: they become the task's own message to its agent.
const MAX_INSTRUCTIONS_CHARS: usize = 8_000;

/// Words that ask for work later or in the background, matched as whole words or phrases,
/// case-insensitive, in English and German. Broad on purpose where the cost of a miss is only a
/// confirmation; never a word as common as "know" or "when" alone.
const LATER_PHRASES: &[&str] = &[
    "later",
    "tonight",
    "this evening",
    "tomorrow",
    "overnight",
    "in the background",
    "background",
    "report back",
    "get back to me",
    "come back to me",
    "when you're done",
    "when you are done",
    "when you're finished",
    "once you're done",
    "once you are done",
    "take your time",
    "no rush",
    "no hurry",
    "by the end of the day",
    "by end of day",
    "später",
    "heute abend",
    "heute nacht",
    "morgen",
    "im hintergrund",
    "melde dich",
    "gib mir bescheid",
    "sag mir bescheid",
    "lass dir zeit",
    "keine eile",
];

/// Whether `text` asks for work later or in the background: one of [`LATER_PHRASES`] as whole
/// words (typographic apostrophes count as `'`, runs of whitespace as one space).
pub fn asks_for_later(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    let text = words.join(" ").replace('’', "'").to_lowercase();
    LATER_PHRASES
        .iter()
        .any(|phrase| contains_words(&text, phrase))
}

/// `phrase` in `text` with no letter or digit right before or after it.
fn contains_words(text: &str, phrase: &str) -> bool {
    text.match_indices(phrase).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + phrase.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// Start a background task: work that runs after your answer, with nobody watching, and
/// reports back in this chat as a reply to the user's message. Use it when the user asks for
/// something to be done later or in the background ("look into it and tell me tonight",
/// "report back when you're done", "no rush"). Then answer at once, briefly, that you will look
/// into it and report back here; do not do the work in this turn. The task runs with the tools
/// of this agent; anything it would change or send waits for the user's approval.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StartBackgroundTask {
    /// A short title the user will recognise in /tasks, e.g. 'Flats near the station'
    title: NonEmpty,
    /// What to do, complete and self-contained (the task sees this conversation, but state
    /// every criterion): e.g. 'Find three flats under 900 EUR near the main station, compare
    /// rent, size and distance, and recommend one'
    instructions: NonEmpty,
    /// When the user wants the report, in their local time: 'YYYY-MM-DD HH:MM', RFC 3339 or
    /// 'in 3 hours'. The task reports as soon as it is done and stops if not done by then.
    report_by: Option<String>,
}

/// The tool's name, for the places that must leave it out (the MCP server: it means nothing
/// outside a conversation).
pub const NAME: &str = <StartBackgroundTask as TypedTool>::NAME;

impl TypedTool for StartBackgroundTask {
    const NAME: &'static str = "start_background_task";
    const GROUP: &'static str = "background";
    /// Stores a task; raised to an outward action (asks first) when the person did not ask for
    /// background work ([`StartBackgroundTask::risk_in_turn`]).
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str =
        "later, tonight, report back, look into, research, async, delegate, background";
    type Output = String;

    async fn risk_in_turn(&self, ctx: &ToolContext) -> Risk {
        match origin(ctx).await {
            // Refused when it runs; nothing to ask about.
            Ok(Some((_, event))) if unattended(&event) => Risk::Write,
            Ok(Some((_, event))) if asks_for_later(&message_text(&event)) => Risk::Write,
            // Not asked for in words (or the message cannot be read): the person decides.
            _ => Risk::Outward,
        }
    }

    async fn run(self, ctx: &ToolContext) -> Result<String, ToolError> {
        let user = user_id(ctx)?;
        let Some((entry, event)) = origin(ctx).await? else {
            return Err(ToolError::Failed(
                "the message this turn answers cannot be read, so there is nothing to report back to".into(),
            ));
        };
        if unattended(&event) {
            return Err(ToolError::Failed(
                "background tasks start only from a person's message, not from a scheduled run or another background task; do the work in this run instead".into(),
            ));
        }
        if !crate::channels::sends_unasked(&entry.channel) {
            return Err(ToolError::Failed(format!(
                "this chat ({}) shows only answers to its own messages, so a report could not reach the user later; do the work now instead",
                entry.channel
            )));
        }
        let now = ctx.clock.now_ms();
        let report_by = match self.report_by.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => {
                let at = parse_datetime(text, ctx.timezone, ctx.clock.now())
                    .map_err(ToolError::InvalidArguments)?
                    .timestamp_millis();
                if at <= now {
                    return Err(ToolError::InvalidArguments(format!(
                        "report_by `{text}` is not in the future (it is now {})",
                        format_local(now, ctx.timezone)
                    )));
                }
                Some(at)
            }
        };
        let title: String = self.title.0.chars().take(MAX_TITLE_CHARS).collect();
        let instructions: String = self
            .instructions
            .0
            .chars()
            .take(MAX_INSTRUCTIONS_CHARS)
            .collect();
        let origin_message_id = match &event.kind {
            InboundKind::Message { message_id, .. } => message_id.clone(),
            _ => None,
        };
        let task = NewBackgroundTask {
            user_id: user,
            conversation_id: ctx.conversation_id,
            origin_inbox_id: entry.id,
            channel: entry.channel.clone(),
            chat: event.chat.clone(),
            origin_message_id,
            requester: event.sender.id.clone(),
            reply_context: event.reply_context.clone(),
            agent_id: ctx.agent_id.clone(),
            title: title.clone(),
            instructions,
            report_by,
        };
        let max = usize::try_from(ctx.config.plans.max_background_tasks).unwrap_or(usize::MAX);
        match ctx.store.start_background_task(&task, max, now).await? {
            Admitted::Stored(id) => {
                let by = report_by
                    .map(|at| format!(" by {}", format_local(at, ctx.timezone)))
                    .unwrap_or_default();
                Ok(format!(
                    "Background task #{id} “{title}” is stored; it starts after your answer and its report will come{by} as a reply to the user's message. \
                     Now tell the user in one or two sentences that you will look into it and report back here; do not do the work in this turn."
                ))
            }
            Admitted::Full(running) => {
                let names: Vec<String> = running
                    .iter()
                    .map(|t| format!("#{} “{}”", t.id, t.title))
                    .collect();
                Err(ToolError::Failed(format!(
                    "not started: the user has {} background tasks going already ({}), and at most {max} run at once. \
                     Tell them; they can stop one with /cancel N (N is its number) and ask again.",
                    running.len(),
                    names.join(", ")
                )))
            }
        }
    }
}

/// The inbox entry and event of the message the call's turn answers; `None` when either is
/// gone or unreadable.
async fn origin(ctx: &ToolContext) -> Result<Option<(InboxEntry, Inbound)>, StoreError> {
    let Some(turn) = ctx.store.turn(ctx.turn_id).await? else {
        return Ok(None);
    };
    let Some(entry) = ctx.store.inbox_entry(turn.inbox_id).await? else {
        return Ok(None);
    };
    let Ok(event) = entry.event.clone() else {
        return Ok(None);
    };
    Ok(Some((entry, event)))
}

/// A schedule's fire or a background task's run: nobody wrote it.
fn unattended(event: &Inbound) -> bool {
    event.sender.id == crate::scheduler::SENDER_ID || crate::store::background::is_run_event(event)
}

fn message_text(event: &Inbound) -> String {
    match &event.kind {
        InboundKind::Message { text, .. } => text.clone(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
