//! Compaction: older turns of a conversation replaced by a stored summary, so a conversation can
//! last for months within a model's context window.
//!
//! A summary is a **ledger** computed from the database (the tool calls that changed something,
//! with their arguments, outcome and the ids they created; denied calls too) plus a
//! **narrative** the model writes. The narrative is asked for under fixed headings, but whatever
//! layout the model chooses is used as written: small local models often answer in their own
//! words, and the ledger, which hearth injects verbatim beside the narrative, already keeps every
//! id. Only an error, a timeout or an empty answer is a failed summary: the history stays as it
//! is (the request then leaves out the oldest turns that do not fit, see [`super::context::fit`]),
//! and compaction is tried again after a backoff (1, 5, then 15 minutes). The messages
//! themselves stay in the database.
//!
//! A compaction brings the request down to `[context] compact_to` of the usable window, so the
//! next one is several turns away. Only whole, finished turns are summarised; up to
//! `[context] keep_turns` of the latest stay word for word, fewer when they do not fit, never
//! fewer than the latest one, and a turn still waiting for an approval stops the cut. The summary
//! is made after the reply was delivered ([`start_wanted`]), with no tools, under
//! `[context] summary_timeout_secs`, by `[context] summary_provider` or the agent's provider.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::Runtime;
use super::budget;
use super::turn::Limits;
use crate::agent::AgentDef;
use crate::provider::{ChatMessage, ChatRequest, ContentPart};
use crate::store::{CoveredCall, HistoryKey, Payer, StoreError, StoredMessage, ToolCallStatus};
use crate::text::clip;
use crate::tool::Risk;

/// Waits after the first, second and later failed summaries of one history.
const BACKOFF_SECS: [i64; 3] = [60, 300, 900];

/// Messages read at most when looking for turns to summarise.
const READ_LIMIT: usize = 4_000;

/// The longest text of one message shown to the summariser.
const MESSAGE_CHARS: usize = 2_000;

/// The ledger keeps this many of the newest entries.
const LEDGER_ENTRIES: usize = 200;

/// The most tokens a summary may have; less in small windows (an eighth of the usable window).
const SUMMARY_TOKENS: u32 = 1_024;

/// What a summary may cost in a request of a window of `usable` tokens.
fn summary_tokens(usable: u64) -> u32 {
    u32::try_from(usable / 8)
        .unwrap_or(SUMMARY_TOKENS)
        .clamp(64, SUMMARY_TOKENS)
}

/// The narrative's headings, in order.
pub const HEADINGS: [&str; 3] = [
    "## Decisions",
    "## Facts and identifiers",
    "## Earlier requests (already handled)",
];

/// One action of the ledger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    pub tool: String,
    pub arguments: String,
    /// `done`, `error`, `denied`, `interrupted`, `skipped` …
    pub outcome: String,
    /// The id the call created or changed, when its result names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// How a compaction ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compacted {
    /// A summary now covers `turns` more turns; `kept` stay word for word.
    Done { turns: usize, kept: usize },
    /// Nothing old enough to summarise.
    NothingToDo,
    /// A recent failure: not tried again yet.
    BackingOff,
    /// Another compaction of this history is running.
    Busy,
    /// The summary failed its check or could not be made; the history stays.
    Failed(String),
}

#[derive(Clone, Copy, Debug)]
struct Failure {
    count: usize,
    retry_at_ms: i64,
}

/// Compaction state shared by all conversations: failures with their backoff, histories being
/// compacted, and those a finished turn found over the threshold.
#[derive(Debug, Default)]
pub struct Compactor {
    failures: Mutex<HashMap<HistoryKey, Failure>>,
    running: Mutex<HashSet<HistoryKey>>,
    wanted: Mutex<Vec<(HistoryKey, AgentDef)>>,
    /// Characters of each history's latest request that are not its turns (the system prompt
    /// without the summary, the tools' schemas): what a compaction must leave room for.
    overhead: Mutex<HashMap<HistoryKey, usize>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Compactor {
    /// Asks for a compaction of `key` once the turn's reply is on its way.
    pub fn want(&self, key: HistoryKey, agent: &AgentDef) {
        let mut wanted = lock(&self.wanted);
        if !wanted.iter().any(|(k, _)| *k == key) {
            wanted.push((key, agent.clone()));
        }
    }

    /// The latest request of `key` had `chars` characters besides its turns and summary.
    pub fn note_overhead(&self, key: HistoryKey, chars: usize) {
        lock(&self.overhead).insert(key, chars);
    }

    fn overhead(&self, key: HistoryKey) -> Option<usize> {
        lock(&self.overhead).get(&key).copied()
    }

    fn take_wanted(&self) -> Vec<(HistoryKey, AgentDef)> {
        std::mem::take(&mut *lock(&self.wanted))
    }
}

/// Starts the compactions finished turns asked for, in the background on `tasks`: called once
/// the turn's reply is in the outbox, so a summary never delays an answer. Shutdown waits for
/// them, but does not wait for a model's answer: a compaction still running is dropped then,
/// which loses nothing, as a crash would not (the summary is stored in one insert at its end).
pub fn start_wanted(rt: &Arc<Runtime>, tasks: &TaskTracker, shutdown: &CancellationToken) {
    for (key, agent) in rt.compactor.take_wanted() {
        let rt = rt.clone();
        let shutdown = shutdown.clone();
        let span = tracing::info_span!("compaction", conversation = key.conversation_id);
        tasks.spawn(
            async move {
                tokio::select! {
                    compacted = compact(&rt, key, &agent, None) => {
                        if let Err(err) = compacted {
                            tracing::warn!(error = %err, "compaction failed");
                        }
                    }
                    () = shutdown.cancelled() => {}
                }
            }
            .instrument(span),
        );
    }
}

/// `/compact [focus]`: summarises older turns now and says what happened, in one line.
pub async fn compact_command(
    rt: &Runtime,
    key: HistoryKey,
    agent_id: &str,
    focus: Option<&str>,
) -> Result<String, StoreError> {
    let agents = rt.agents();
    let Some(agent) = agents
        .get(agent_id)
        .or_else(|| agents.get(&rt.config.router.default_agent))
        .cloned()
    else {
        return Ok("⚠️ No agent to write the summary.".into());
    };
    // Asked for by hand: a focus or not, the backoff of an earlier failure does not apply.
    let focus = focus.or(Some(""));
    Ok(match compact(rt, key, &agent, focus).await? {
        Compacted::Done { turns, kept } => format!(
            "🗜 Summarised {turns} older turns; the last {kept} stay word for word. The full history stays stored."
        ),
        Compacted::NothingToDo => format!(
            "Nothing to summarise yet: the conversation has at most {} turns since the last summary.",
            rt.config.context.keep_turns
        ),
        Compacted::BackingOff | Compacted::Busy => {
            "A summary of this conversation is being made right now.".into()
        }
        Compacted::Failed(reason) => {
            format!("⚠️ No summary made ({reason}); the conversation stays as it was.")
        }
    })
}

/// A turn and its messages, in the order the turns began.
struct TurnMessages<'a> {
    turn_id: i64,
    messages: Vec<&'a StoredMessage>,
}

fn group_turns(messages: &[StoredMessage]) -> Vec<TurnMessages<'_>> {
    let mut turns: Vec<TurnMessages<'_>> = Vec::new();
    for message in messages {
        let Some(turn_id) = message.turn_id else {
            continue;
        };
        match turns.iter_mut().find(|t| t.turn_id == turn_id) {
            Some(turn) => turn.messages.push(message),
            None => turns.push(TurnMessages {
                turn_id,
                messages: vec![message],
            }),
        }
    }
    turns
}

/// Summarises the older turns of `key`'s history now (`/compact`, an overflow, or after a turn
/// that passed the threshold). `focus` asks the summary to keep something in particular.
pub async fn compact(
    rt: &Runtime,
    key: HistoryKey,
    agent: &AgentDef,
    focus: Option<&str>,
) -> Result<Compacted, StoreError> {
    let now = rt.clock.now_ms();
    if let Some(failure) = lock(&rt.compactor.failures).get(&key)
        && failure.retry_at_ms > now
        && focus.is_none()
    {
        return Ok(Compacted::BackingOff);
    }
    // One compaction per history at a time; a second caller (a turn that would not fit while the
    // background summary runs) waits for the first and then sees its result.
    let give_up = tokio::time::Instant::now()
        + Duration::from_secs(rt.config.context.summary_timeout_secs + 5);
    while !lock(&rt.compactor.running).insert(key) {
        if tokio::time::Instant::now() > give_up {
            return Ok(Compacted::Busy);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let result = compact_now(rt, key, agent, focus).await;
    lock(&rt.compactor.running).remove(&key);
    let outcome = result?;
    match &outcome {
        Compacted::Done { .. } => {
            lock(&rt.compactor.failures).remove(&key);
            rt.estimator.reset(key.conversation_id);
            rt.metrics.compaction("done");
        }
        Compacted::Failed(reason) => {
            let mut failures = lock(&rt.compactor.failures);
            let count = failures.get(&key).map_or(0, |f| f.count) + 1;
            let wait = BACKOFF_SECS[(count - 1).min(BACKOFF_SECS.len() - 1)];
            failures.insert(
                key,
                Failure {
                    count,
                    retry_at_ms: now + wait * 1_000,
                },
            );
            tracing::warn!(conversation = key.conversation_id, %reason, retry_in_secs = wait, "summary not used; the history stays");
            rt.metrics.compaction("failed");
        }
        _ => rt.metrics.compaction("skipped"),
    }
    Ok(outcome)
}

async fn compact_now(
    rt: &Runtime,
    key: HistoryKey,
    agent: &AgentDef,
    focus: Option<&str>,
) -> Result<Compacted, StoreError> {
    let previous = rt.store.latest_summary(key).await?;
    let after = previous.as_ref().map_or(0, |s| s.covers_until);
    let messages = rt.store.messages_after(key, after, READ_LIMIT).await?;
    let unfinished = crate::store::unfinished_turns(&messages);
    let turns = group_turns(&messages);
    let limits = Limits::of(rt, agent);
    let summary_allowance = summary_tokens(limits.usable);
    let ledger_tokens = limits.usable / 10;
    // What stays besides the kept turns: the system prompt and the tools (as the latest request
    // had them, else the agent's prompt and tools), the summary and the ledger.
    let overhead_chars = rt.compactor.overhead(key).unwrap_or_else(|| {
        let specs = super::tools::Toolbox::for_agent(&rt.tools, agent).specs();
        agent.system_prompt.len() + serde_json::to_string(&specs).map_or(0, |s| s.len())
    });
    let overhead = rt.estimator.tokens_of(&limits.model, overhead_chars)
        + u64::from(summary_allowance)
        + ledger_tokens;
    let keep = kept_turns(
        &turns,
        rt.config.context.keep_turns.max(1),
        rt.estimator
            .chars_of(&limits.model, limits.compact_to.saturating_sub(overhead)),
    );
    if turns.len() <= keep {
        return Ok(Compacted::NothingToDo);
    }

    let Some((provider_name, model, window)) = summary_provider(rt, agent) else {
        return Ok(Compacted::Failed("no provider for summaries".into()));
    };
    let summary_model = super::context::model_key(
        &provider_name,
        model.as_deref().unwrap_or_else(|| {
            rt.providers
                .config(&provider_name)
                .map_or("", |c| c.model.as_str())
        }),
    );
    // What the summariser may read: its window less the answer, the instructions and slack.
    let room = rt.estimator.chars_of(
        &summary_model,
        u64::from(window)
            .saturating_sub(u64::from(SUMMARY_TOKENS) + 1_500)
            .max(1_000),
    );

    // The oldest finished turns, up to the first unfinished one, as many as the summariser
    // can read in one go (the rest wait for the next compaction).
    let candidates = &turns[..turns.len() - keep];
    let mut covered: Vec<&TurnMessages<'_>> = Vec::new();
    let mut rendered = String::new();
    for turn in candidates {
        if unfinished.contains(&turn.turn_id) {
            break;
        }
        let text = render_turn(turn);
        if !covered.is_empty() && rendered.len() + text.len() > room {
            break;
        }
        rendered.push_str(&text);
        covered.push(turn);
    }
    // The cut is a message id: no kept turn may have a message at or before it (turns interleave
    // only around approvals, which stop the cut above, but check).
    let kept_ids: Vec<i64> = turns
        .iter()
        .filter(|t| !covered.iter().any(|c| c.turn_id == t.turn_id))
        .flat_map(|t| t.messages.iter().map(|m| m.id))
        .collect();
    while let Some(last) = covered.last() {
        let until = last.messages.iter().map(|m| m.id).max().unwrap_or(0);
        if kept_ids.iter().all(|id| *id > until) {
            break;
        }
        covered.pop();
    }
    let Some(covers_until) = covered
        .iter()
        .flat_map(|t| t.messages.iter().map(|m| m.id))
        .max()
    else {
        return Ok(Compacted::NothingToDo);
    };
    if budget::cap_reached(rt, None).await?.is_some() {
        return Ok(Compacted::Failed("the budget is reached".into()));
    }

    let turn_ids: Vec<i64> = covered.iter().map(|t| t.turn_id).collect();
    let calls = rt.store.calls_of_turns(&turn_ids).await?;
    let mut ledger: Vec<LedgerEntry> = previous
        .as_ref()
        .and_then(|s| serde_json::from_str(&s.ledger).ok())
        .unwrap_or_default();
    ledger.extend(calls.iter().filter_map(|c| ledger_entry(rt, c)));
    // The ledger rides along on every request: the newest entries, within a tenth of the
    // usable window (and a quarter of what the summariser reads), at most LEDGER_ENTRIES.
    let ledger_budget = (room / 4).min(rt.estimator.chars_of(&limits.model, ledger_tokens));
    trim_ledger(&mut ledger, ledger_budget);
    let ledger_json = serde_json::to_string(&ledger)?;

    let mut request = summary_request(
        previous.as_ref().map(|s| s.narrative.as_str()),
        &render_ledger(&ledger_json),
        &rendered,
        focus,
    );
    request.max_tokens = Some(summary_allowance);
    let Some(provider) = rt.providers.chain(&provider_name, model.as_deref()) else {
        return Ok(Compacted::Failed(format!(
            "the provider `{provider_name}` is not configured"
        )));
    };
    let payer = Payer {
        purpose: "summary",
        user_id: key.user_id,
        agent_id: Some(agent.id.clone()),
        conversation_id: Some(key.conversation_id),
        ..Payer::default()
    };
    let timeout = Duration::from_secs(rt.config.context.summary_timeout_secs);
    let response = match tokio::time::timeout(timeout, provider.complete(&request, None)).await {
        Err(_) => {
            // Given up, but the provider was asked and may bill it: counted as cut short.
            let sent = request.system.len()
                + request
                    .messages
                    .iter()
                    .map(super::context::message_chars)
                    .sum::<usize>();
            let model_name = summary_model
                .strip_prefix(&format!("{provider_name}/"))
                .unwrap_or(&summary_model);
            let call = budget::cut_short_call(
                rt,
                &payer,
                &provider_name,
                model_name,
                rt.estimator.tokens_of(&summary_model, sent),
                0,
            );
            budget::store_call(rt, &call).await?;
            return Ok(Compacted::Failed(format!(
                "the summary took longer than {}s",
                timeout.as_secs()
            )));
        }
        Ok(Err(err)) => return Ok(Compacted::Failed(format!("the summary failed: {err}"))),
        Ok(Ok(response)) => response,
    };
    budget::record(rt, &payer, &response).await?;
    let narrative = response.text.trim().to_string();
    if let Err(problem) = check_narrative(&narrative) {
        return Ok(Compacted::Failed(problem));
    }
    // A model that ignores the answer's limit must not fill the window with its summary.
    let narrative = clip(
        &narrative,
        rt.estimator
            .chars_of(&limits.model, u64::from(summary_allowance)),
    );
    let total = previous.as_ref().map_or(0, |s| s.turns) + covered.len() as i64;
    rt.store
        .save_summary(
            key,
            covers_until,
            total,
            &narrative,
            &ledger_json,
            rt.clock.now_ms(),
        )
        .await?;
    tracing::info!(
        conversation = key.conversation_id,
        turns = covered.len(),
        kept = turns.len() - covered.len(),
        "older turns summarised"
    );
    Ok(Compacted::Done {
        turns: covered.len(),
        kept: turns.len() - covered.len(),
    })
}

/// How many of the latest turns stay word for word: up to `keep_turns`, fewer when they pass
/// `room` characters, never fewer than the latest one.
fn kept_turns(turns: &[TurnMessages<'_>], keep_turns: usize, room: usize) -> usize {
    let mut kept = 0;
    let mut chars = 0usize;
    for turn in turns.iter().rev().take(keep_turns) {
        let size: usize = turn.messages.iter().map(|m| m.chars.max(0) as usize).sum();
        if kept > 0 && chars + size > room {
            break;
        }
        chars += size;
        kept += 1;
    }
    kept.max(1)
}

/// Keeps the newest entries within `budget` characters and [`LEDGER_ENTRIES`].
fn trim_ledger(ledger: &mut Vec<LedgerEntry>, budget: usize) {
    let mut chars: usize = ledger.iter().map(entry_chars).sum();
    let mut drop = 0;
    while ledger.len() - drop > LEDGER_ENTRIES || (ledger.len() - drop > 1 && chars > budget) {
        chars -= entry_chars(&ledger[drop]);
        drop += 1;
    }
    ledger.drain(..drop);
}

/// The ledger of the tool calls in `messages` (the turns a request leaves out), rendered as in a
/// summary and within `budget` characters: read from the stored calls and results, so what was
/// done stays in view even when no summary could be made.
pub fn ledger_of_messages(rt: &Runtime, messages: &[&StoredMessage], budget: usize) -> String {
    let mut calls: Vec<CoveredCall> = Vec::new();
    for stored in messages {
        if let ChatMessage::Assistant { tool_calls, .. } = &stored.message {
            for call in tool_calls {
                let result = messages.iter().find_map(|m| match &m.message {
                    ChatMessage::Tool {
                        call_id,
                        content,
                        is_error,
                        ..
                    } if *call_id == call.id && m.turn_id == stored.turn_id => {
                        Some((content.clone(), *is_error))
                    }
                    _ => None,
                });
                let status = match &result {
                    Some((_, false)) => ToolCallStatus::Done,
                    Some((_, true)) => ToolCallStatus::Error,
                    None => ToolCallStatus::Interrupted,
                };
                calls.push(CoveredCall {
                    turn_id: stored.turn_id.unwrap_or_default(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    status,
                    result: result.map(|(content, _)| content),
                });
            }
        }
    }
    let mut ledger: Vec<LedgerEntry> = calls.iter().filter_map(|c| ledger_entry(rt, c)).collect();
    trim_ledger(&mut ledger, budget);
    serde_json::to_string(&ledger)
        .map(|json| render_ledger(&json))
        .unwrap_or_default()
}

/// The provider (name, model, window) that writes summaries: `[context] summary_provider`, else
/// the agent's.
fn summary_provider(rt: &Runtime, agent: &AgentDef) -> Option<(String, Option<String>, u32)> {
    let (name, model) = match &rt.config.context.summary_provider {
        Some(name) => (name.clone(), None),
        None => (agent.provider.clone(), Some(agent.model.clone())),
    };
    let config = rt.providers.config(&name)?;
    let window = crate::provider::context_window(config, model.as_deref());
    Some((name, model, window))
}

/// A call of the covered turns that changed something (or was refused), for the ledger; reads
/// are left out.
fn ledger_entry(rt: &Runtime, call: &CoveredCall) -> Option<LedgerEntry> {
    let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
    // A meta-tool call names the real tool inside.
    let (tool, inner) = match call.name.as_str() {
        "search_tools" | "get_tool_help" | "tool_result" => return None,
        "use_tool" => (
            arguments["tool_name"]
                .as_str()
                .unwrap_or("use_tool")
                .to_string(),
            arguments["arguments"].to_string(),
        ),
        _ => (call.name.clone(), call.arguments.clone()),
    };
    let risk = rt.tools.get(&tool).map(|t| t.info().risk);
    let refused = matches!(
        call.status,
        ToolCallStatus::Denied | ToolCallStatus::Interrupted
    );
    if risk == Some(Risk::Safe) && !refused {
        return None;
    }
    let id = (call.status == ToolCallStatus::Done)
        .then(|| created_id(call.result.as_deref().unwrap_or_default()))
        .flatten();
    Some(LedgerEntry {
        tool,
        arguments: clip(&inner, 200),
        outcome: call.status.to_string(),
        id,
    })
}

fn entry_chars(entry: &LedgerEntry) -> usize {
    entry.tool.len() + entry.arguments.len() + entry.outcome.len() + 16
}

/// The `id` a tool's JSON result names at its top level.
fn created_id(result: &str) -> Option<String> {
    let value: Value = serde_json::from_str(result).ok()?;
    match &value["id"] {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// The ledger as lines for the model.
pub fn render_ledger(ledger_json: &str) -> String {
    let entries: Vec<LedgerEntry> = serde_json::from_str(ledger_json).unwrap_or_default();
    entries
        .iter()
        .map(|e| {
            let id =
                e.id.as_ref()
                    .map(|id| format!(" (id {id})"))
                    .unwrap_or_default();
            format!("- {} {} → {}{id}", e.tool, e.arguments, e.outcome)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One turn as plain text for the summariser: tool calls become lines, so the summary request
/// itself has no tool pairs to break.
fn render_turn(turn: &TurnMessages<'_>) -> String {
    let mut out = String::new();
    for stored in &turn.messages {
        let line = match &stored.message {
            ChatMessage::User { content } => {
                let text: Vec<&str> = content
                    .iter()
                    .map(|p| match p {
                        ContentPart::Text { text } => text.as_str(),
                        ContentPart::Image { .. } => "[image]",
                    })
                    .collect();
                format!("User: {}", clip(&text.join(" "), MESSAGE_CHARS))
            }
            ChatMessage::Assistant { text, tool_calls } => {
                let mut line = String::new();
                if !text.trim().is_empty() {
                    line.push_str(&format!("Assistant: {}", clip(text, MESSAGE_CHARS)));
                }
                for call in tool_calls {
                    if !line.is_empty() {
                        line.push('\n');
                    }
                    line.push_str(&format!(
                        "Assistant called {}({})",
                        call.name,
                        clip(&call.arguments, 300)
                    ));
                }
                line
            }
            ChatMessage::Tool {
                name,
                content,
                is_error,
                ..
            } => {
                let status = if *is_error { "error" } else { "result" };
                format!("{name} {status}: {}", clip(content, 500))
            }
        };
        if !line.is_empty() {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out.push('\n');
    out
}

/// The summary request: no tools, one user message holding everything, a bounded answer.
pub fn summary_request(
    previous: Option<&str>,
    ledger: &str,
    turns: &str,
    focus: Option<&str>,
) -> ChatRequest {
    let focus = focus
        .filter(|f| !f.trim().is_empty())
        .map(|f| format!(" Pay particular attention to: {}.", f.trim()))
        .unwrap_or_default();
    let system = format!(
        "You keep the record of a long conversation between a user and their assistant. Older turns are leaving the \
         assistant's view and your summary replaces them. Write plain text under exactly these headings, in this order:\n\
         {}\n{}\n{}\n\
         Keep names, numbers, dates, amounts, preferences and identifiers exactly as written. Every id listed in the \
         ledger must appear under \"Facts and identifiers\", written as #<id>. Describe earlier requests as done and \
         handled, never as things still to do. Fold the previous summary in; drop small talk. Do not call tools.{focus}",
        HEADINGS[0], HEADINGS[1], HEADINGS[2]
    );
    let mut user = String::new();
    user.push_str("Previous summary:\n");
    user.push_str(previous.unwrap_or("(none)"));
    user.push_str("\n\nLedger of actions taken (from the database; complete):\n");
    user.push_str(if ledger.is_empty() { "(none)" } else { ledger });
    user.push_str("\n\nTurns to fold in:\n");
    user.push_str(turns);
    ChatRequest {
        model: None,
        system,
        messages: vec![ChatMessage::user(user)],
        tools: Default::default(),
        temperature: Some(0.2),
        max_tokens: Some(SUMMARY_TOKENS),
        stream: false,
        tool_choice: None,
    }
}

/// Whether the model's summary can replace the turns: anything but an empty answer can. The
/// headings are asked for, not required, and an id the narrative leaves out is still in the
/// ledger that rides beside it.
pub fn check_narrative(narrative: &str) -> Result<(), String> {
    if narrative.trim().is_empty() {
        return Err("the summary came back empty".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tool: &str, id: Option<&str>) -> LedgerEntry {
        LedgerEntry {
            tool: tool.into(),
            arguments: "{}".into(),
            outcome: "done".into(),
            id: id.map(str::to_string),
        }
    }

    #[test]
    fn a_summary_is_used_whatever_its_layout_unless_empty() {
        let headed = "## Decisions\nNone.\n## Facts and identifiers\nTask #12 (passport).\n## Earlier requests (already handled)\nAdded a task.";
        assert_eq!(check_narrative(headed), Ok(()));
        assert_eq!(check_narrative("The user added a task."), Ok(()));
        assert!(check_narrative("").is_err_and(|e| e.contains("empty")));
        assert!(check_narrative("   \n").is_err());
    }

    #[test]
    fn up_to_keep_turns_stay_fewer_when_they_do_not_fit_never_none() {
        use crate::runtime::context::bench::stored;
        let messages: Vec<StoredMessage> = (1..=8)
            .flat_map(|turn| {
                [
                    stored(turn * 2, turn, ChatMessage::user("x".repeat(100))),
                    stored(turn * 2 + 1, turn, ChatMessage::assistant("y".repeat(100))),
                ]
            })
            .collect();
        let turns = group_turns(&messages);
        assert_eq!(turns.len(), 8);
        // Each turn is 200 characters: all six fit in 2,000, three in 600, none in 10.
        assert_eq!(kept_turns(&turns, 6, 2_000), 6);
        assert_eq!(kept_turns(&turns, 6, 600), 3);
        assert_eq!(kept_turns(&turns, 6, 10), 1);
        assert_eq!(kept_turns(&turns, 2, 2_000), 2);
    }

    #[test]
    fn ids_come_from_json_results() {
        assert_eq!(created_id(r#"{"id": 7, "title": "x"}"#), Some("7".into()));
        assert_eq!(created_id(r#"{"id": "ab-1"}"#), Some("ab-1".into()));
        assert_eq!(created_id("Task added"), None);
    }

    #[test]
    fn the_ledger_renders_one_line_per_action() {
        let json = serde_json::to_string(&vec![entry("add_task", Some("3"))]).expect("json");
        assert_eq!(render_ledger(&json), "- add_task {} → done (id 3)");
        assert_eq!(render_ledger("not json"), "");
    }

    #[test]
    fn the_summary_request_has_no_tools_and_a_bounded_answer() {
        let request = summary_request(Some("before"), "- x", "User: hi\n", Some("the trip"));
        assert!(request.tools.is_empty());
        assert_eq!(request.max_tokens, Some(SUMMARY_TOKENS));
        assert!(request.system.contains("the trip"));
        assert!(!request.stream);
        let ChatMessage::User { content } = &request.messages[0] else {
            panic!("a user message");
        };
        assert!(
            matches!(&content[0], ContentPart::Text { text } if text.contains("before") && text.contains("User: hi"))
        );
    }
}
