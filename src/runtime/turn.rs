//! One turn: the model and the tools take turns until the model answers in words.
//!
//! Every step is stored as it happens (DESIGN.md §2 rule 3): the model's tool requests before any
//! tool runs, each call marked running before it starts, each result with its message. Running
//! the loop again on the same turn therefore resumes it: calls that never started run now, a call
//! that was running when the daemon died is reported to the model as interrupted and is never run
//! again, and the model is asked again only for what is not stored yet.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::join_all;
use hearth_channel::{Channel, ChatRef, MessageRef, OutboundMessage};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Runtime;
use super::prompt::{Section, compose};
use super::window::window;
use crate::agent::AgentDef;
use crate::provider::{
    ChatMessage, ChatRequest, ProviderError, ProviderErrorKind, StreamEvent, ToolCall,
};
use crate::store::{
    NewOutbox, OutboxKind, StoreError, ToolCallRecord, ToolCallStatus, Turn, TurnEnd, TurnStatus,
};
use crate::tool::{ToolContext, ToolError};

/// At most this many stored messages are read to build the window.
const HISTORY_ROWS: usize = 400;

/// What a turn answers and where the answer goes.
pub struct TurnJob {
    pub turn: Turn,
    pub session: i64,
    pub agent: AgentDef,
    pub channel_name: String,
    pub channel: Arc<dyn Channel>,
    pub chat: ChatRef,
    /// Platform id of the message being answered, quoted by the reply.
    pub reply_to: Option<String>,
    /// Shown before the reply, e.g. "💰 Finance" when the agent changed.
    pub note: Option<String>,
    /// Cancelled by `/cancel` or shutdown.
    pub cancel: CancellationToken,
}

/// How the turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    Answered,
    Failed,
    Cancelled,
    /// Interrupted by shutdown: left running in the database, resumed at the next start.
    Suspended,
}

/// How a turn ends: its status, the reply text, and the message kept in the history.
struct Finish {
    status: TurnStatus,
    text: String,
    keep: Option<ChatMessage>,
    error: Option<String>,
}

pub async fn run_turn(
    rt: &Runtime,
    job: TurnJob,
    shutdown: &CancellationToken,
) -> Result<TurnOutcome, StoreError> {
    let started = Instant::now();
    let preview = Preview::start(rt, &job);
    let result = turn_loop(rt, &job, &preview, shutdown).await;
    let draft = preview.finish().await;
    let outcome = match result? {
        None => TurnOutcome::Suspended,
        Some(Finish {
            status,
            text,
            keep,
            error,
        }) => {
            let text = match &job.note {
                Some(note) => format!("{note}\n\n{text}"),
                None => text,
            };
            let reply = NewOutbox {
                inbox_id: Some(job.turn.inbox_id),
                seq: 0,
                channel: job.channel_name.clone(),
                kind: OutboxKind::Send,
                message: OutboundMessage {
                    chat: job.chat.clone(),
                    text,
                    buttons: Vec::new(),
                    reply_to: job.reply_to.clone(),
                    replaces: draft,
                },
            };
            let end = TurnEnd {
                status,
                message: keep.as_ref(),
                session: job.session,
                replies: vec![reply],
                error: error.as_deref(),
            };
            rt.store
                .finish_turn(&job.turn, end, rt.clock.now_ms())
                .await?;
            match status {
                TurnStatus::Done => TurnOutcome::Answered,
                TurnStatus::Cancelled => TurnOutcome::Cancelled,
                _ => TurnOutcome::Failed,
            }
        }
    };
    rt.metrics.observe_turn(started.elapsed(), outcome);
    Ok(outcome)
}

/// Runs steps until the turn ends. `None` means shutdown interrupted it.
async fn turn_loop(
    rt: &Runtime,
    job: &TurnJob,
    preview: &Preview,
    shutdown: &CancellationToken,
) -> Result<Option<Finish>, StoreError> {
    let agent = &job.agent;
    let Some(provider) = rt
        .providers
        .chain(&agent.provider, Some(agent.model.as_str()))
    else {
        let text = format!(
            "⚠️ The agent `{}` uses the provider `{}`, which is not configured. Add it to [[providers]] in hearth.toml or change the agent.",
            agent.id, agent.provider
        );
        return Ok(Some(Finish {
            status: TurnStatus::Failed,
            text,
            keep: None,
            error: Some("provider not configured".into()),
        }));
    };
    let tools = rt.tools.for_agent(agent);
    let specs: Vec<_> = tools.iter().map(|t| t.info().spec()).collect();
    let mut llm_calls = job.turn.llm_calls;
    let mut tool_calls_used = job.turn.tool_calls;

    loop {
        if shutdown.is_cancelled() {
            return Ok(None);
        }
        if job.cancel.is_cancelled() {
            cancel_open_calls(rt, job).await?;
            return Ok(Some(cancelled()));
        }

        // Settle tool calls first: after a restart they may be waiting from before.
        let open = rt.store.open_tool_calls(job.turn.id).await?;
        if !open.is_empty() {
            tool_calls_used += run_tool_calls(rt, job, open, tool_calls_used, shutdown).await?;
            continue;
        }

        if llm_calls >= i64::from(agent.max_turns) {
            let text = format!(
                "I stopped after {llm_calls} steps without finishing (this agent's limit is {}). Ask me to continue if you want me to go on.",
                agent.max_turns
            );
            return Ok(Some(Finish {
                status: TurnStatus::Done,
                text,
                keep: None,
                error: Some("max turns reached".into()),
            }));
        }

        let stored = rt
            .store
            .recent_messages(job.turn.conversation_id, job.session, HISTORY_ROWS)
            .await?;
        let request = ChatRequest {
            model: None,
            system: system_prompt(rt, agent, &tools),
            messages: window(&stored, job.turn.id, rt.config.runtime.history_tokens),
            tools: specs.clone(),
            temperature: agent.temperature,
            max_tokens: None,
            stream: preview.enabled(),
        };

        let call_started = Instant::now();
        let response = tokio::select! {
            response = provider.complete(&request, preview.sender()) => response,
            () = job.cancel.cancelled() => return Ok(Some(cancelled())),
            () = shutdown.cancelled() => return Ok(None),
        };
        llm_calls += 1;
        let response = match response {
            Ok(response) => response,
            Err(err) => {
                rt.metrics.provider_error(&err.provider);
                tracing::warn!(turn = job.turn.id, error = %err, "model call failed");
                let text = provider_error_text(rt, &err);
                return Ok(Some(Finish {
                    status: TurnStatus::Failed,
                    text,
                    keep: None,
                    error: Some(err.to_string()),
                }));
            }
        };
        rt.metrics
            .observe_llm(&response.provider, call_started.elapsed());
        rt.store
            .add_turn_usage(
                job.turn.id,
                &response.usage,
                &response.provider,
                &response.model,
            )
            .await?;

        if response.tool_calls.is_empty() {
            let text = if response.text.trim().is_empty() {
                "(The model returned an empty answer.)".to_string()
            } else {
                response.text.clone()
            };
            let keep = ChatMessage::assistant(response.text);
            return Ok(Some(Finish {
                status: TurnStatus::Done,
                text,
                keep: Some(keep),
                error: None,
            }));
        }
        let request_message = ChatMessage::Assistant {
            text: response.text,
            tool_calls: response.tool_calls,
        };
        rt.store
            .record_tool_request(&job.turn, job.session, &request_message, rt.clock.now_ms())
            .await?;
    }
}

fn cancelled() -> Finish {
    Finish {
        status: TurnStatus::Cancelled,
        text: "⏹ Cancelled.".into(),
        keep: None,
        error: Some("cancelled by the user".into()),
    }
}

/// Settles `open` calls: reports interrupted ones, skips those over the limit, runs the rest in
/// parallel. Returns how many calls were used up.
async fn run_tool_calls(
    rt: &Runtime,
    job: &TurnJob,
    open: Vec<ToolCallRecord>,
    used: i64,
    shutdown: &CancellationToken,
) -> Result<i64, StoreError> {
    let limit = i64::from(job.agent.max_tool_calls);
    let mut runnable = Vec::new();
    let mut settled = 0i64;
    for record in open {
        if record.status == ToolCallStatus::Running {
            let text = "This tool call was interrupted: hearth restarted while it was running. It was NOT run again, \
                        so its effect is unknown. Check the current state before trying again.";
            finish_call(
                rt,
                job,
                &record,
                ToolCallStatus::Interrupted,
                text.into(),
                true,
            )
            .await?;
            settled += 1;
        } else if used + settled + i64::try_from(runnable.len()).unwrap_or(i64::MAX) >= limit {
            let text = format!(
                "Not run: this turn reached its limit of {limit} tool calls. Answer with what you have."
            );
            finish_call(rt, job, &record, ToolCallStatus::Skipped, text, true).await?;
            settled += 1;
        } else {
            runnable.push(record);
        }
    }
    let count = i64::try_from(runnable.len()).unwrap_or(i64::MAX);
    let calls = join_all(runnable.iter().map(|record| run_one_call(rt, job, record)));
    tokio::select! {
        results = calls => {
            for result in results {
                result?;
            }
        }
        () = job.cancel.cancelled() => cancel_open_calls(rt, job).await?,
        // Shutdown: whatever was running is reported as interrupted after the restart.
        () = shutdown.cancelled() => {}
    }
    Ok(settled + count)
}

async fn run_one_call(
    rt: &Runtime,
    job: &TurnJob,
    record: &ToolCallRecord,
) -> Result<(), StoreError> {
    let call = &record.call;
    let Some(tool) = rt
        .tools
        .for_agent(&job.agent)
        .into_iter()
        .find(|t| t.info().name == call.name)
    else {
        let available: Vec<_> = rt
            .tools
            .for_agent(&job.agent)
            .iter()
            .map(|t| t.info().name.clone())
            .collect();
        let text = format!(
            "Unknown tool `{}`. Available tools: {}.",
            call.name,
            if available.is_empty() {
                "none".to_string()
            } else {
                available.join(", ")
            }
        );
        rt.metrics.tool_call(&call.name, "unknown");
        return finish_call(rt, job, record, ToolCallStatus::Error, text, true).await;
    };
    let arguments = match parse_arguments(call) {
        Ok(arguments) => arguments,
        Err(text) => {
            rt.metrics.tool_call(&call.name, "invalid");
            return finish_call(rt, job, record, ToolCallStatus::Error, text, true).await;
        }
    };
    rt.store
        .mark_tool_running(record.id, rt.clock.now_ms())
        .await?;
    let ctx = ToolContext {
        store: rt.store.clone(),
        config: rt.config.clone(),
        clock: rt.clock.clone(),
        timezone: rt.timezone,
        user_id: job.turn.user_id,
        conversation_id: job.turn.conversation_id,
        turn_id: job.turn.id,
        agent_id: job.agent.id.clone(),
    };
    let timeout = tool
        .info()
        .timeout
        .unwrap_or(Duration::from_secs(rt.config.runtime.tool_timeout_secs));
    let (status, text, outcome) =
        match tokio::time::timeout(timeout, tool.call(&ctx, arguments)).await {
            Ok(Ok(text)) => (ToolCallStatus::Done, text, "ok"),
            Ok(Err(ToolError::InvalidArguments(msg))) => (
                ToolCallStatus::Error,
                format!(
                    "Invalid arguments for `{}`: {msg}\nParameters: {}",
                    call.name,
                    tool.info().parameters
                ),
                "invalid",
            ),
            Ok(Err(ToolError::Failed(msg))) => {
                (ToolCallStatus::Error, format!("Error: {msg}"), "error")
            }
            Err(_) => (
                ToolCallStatus::Error,
                format!(
                    "The tool did not finish within {} s and was stopped.",
                    timeout.as_secs()
                ),
                "timeout",
            ),
        };
    rt.metrics.tool_call(&call.name, outcome);
    finish_call(
        rt,
        job,
        record,
        status,
        text,
        status != ToolCallStatus::Done,
    )
    .await
}

fn parse_arguments(call: &ToolCall) -> Result<Value, String> {
    let raw = call.arguments.trim();
    if raw.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(format!(
            "The arguments of `{}` must be a JSON object, got: {other}",
            call.name
        )),
        Err(err) => Err(format!(
            "The arguments of `{}` are not valid JSON ({err}). Send a JSON object.",
            call.name
        )),
    }
}

async fn finish_call(
    rt: &Runtime,
    job: &TurnJob,
    record: &ToolCallRecord,
    status: ToolCallStatus,
    content: String,
    is_error: bool,
) -> Result<(), StoreError> {
    let message = ChatMessage::Tool {
        call_id: record.call.id.clone(),
        name: record.call.name.clone(),
        content,
        is_error,
    };
    rt.store
        .finish_tool_call(
            &job.turn,
            job.session,
            record.id,
            status,
            &message,
            rt.clock.now_ms(),
        )
        .await
}

/// After `/cancel`: every call without a result is closed as cancelled, so the history stays
/// well-formed for the next turn.
async fn cancel_open_calls(rt: &Runtime, job: &TurnJob) -> Result<(), StoreError> {
    for record in rt.store.open_tool_calls(job.turn.id).await? {
        let text = "Cancelled by the user before it finished.".to_string();
        finish_call(rt, job, &record, ToolCallStatus::Cancelled, text, true).await?;
    }
    Ok(())
}

fn system_prompt(rt: &Runtime, agent: &AgentDef, tools: &[Arc<dyn crate::tool::Tool>]) -> String {
    let now = rt.clock.now().with_timezone(&rt.timezone);
    let time = format!(
        "It is {} ({}), timezone {}.",
        now.format("%A, %Y-%m-%d %H:%M"),
        now.format("%:z"),
        rt.timezone.name()
    );
    let tools_section = if tools.is_empty() {
        String::new()
    } else {
        let names: Vec<_> = tools.iter().map(|t| t.info().name.as_str()).collect();
        format!(
            "You can call these tools: {}. Call a tool when it gives a better answer than guessing; \
             after a tool fails, read its message and fix the call or explain the problem.",
            names.join(", ")
        )
    };
    let sections = [
        Section::new("Tools", tools_section),
        Section::new("Time", time),
    ];
    compose(
        &agent.system_prompt,
        &sections,
        rt.config.runtime.max_prompt_chars,
    )
}

/// The short explanation a user gets when the model cannot be reached.
fn provider_error_text(rt: &Runtime, err: &ProviderError) -> String {
    match err.kind {
        ProviderErrorKind::Client { status: 401 | 403 } => format!(
            "⚠️ The model provider `{}` refused the credentials (HTTP {}). Check its API key.",
            err.provider,
            match err.kind {
                ProviderErrorKind::Client { status } => status,
                _ => 0,
            }
        ),
        ProviderErrorKind::Client { status } => {
            format!(
                "⚠️ The model provider `{}` rejected the request (HTTP {status}): {}",
                err.provider, err.message
            )
        }
        ProviderErrorKind::Network if rt.provider_hint.is_some() => {
            rt.provider_hint.clone().unwrap_or_default()
        }
        _ => format!(
            "⚠️ The model provider is not answering right now ({}). Your message is saved; please try again in a moment.",
            err
        ),
    }
}

/// Shows a streamed reply while it is generated, at most once per the channel's preview
/// interval, and remembers the preview message so the final reply replaces it.
struct Preview {
    sender: Option<mpsc::UnboundedSender<StreamEvent>>,
    task: Option<tokio::task::JoinHandle<()>>,
    draft: Arc<Mutex<Option<MessageRef>>>,
}

impl Preview {
    fn start(rt: &Runtime, job: &TurnJob) -> Self {
        let draft = Arc::new(Mutex::new(None));
        let interval = match job.channel.capabilities().preview {
            Some(interval) if rt.config.runtime.stream => interval,
            _ => {
                return Self {
                    sender: None,
                    task: None,
                    draft,
                };
            }
        };
        let (sender, mut events) = mpsc::unbounded_channel::<StreamEvent>();
        let channel = job.channel.clone();
        let chat = job.chat.clone();
        let prefix = job
            .note
            .as_ref()
            .map(|n| format!("{n}\n\n"))
            .unwrap_or_default();
        let shared = draft.clone();
        let task = tokio::spawn(async move {
            let mut text = String::new();
            let mut shown = String::new();
            let mut last: Option<Instant> = None;
            let mut current: Option<MessageRef> = None;
            loop {
                let event = match last {
                    Some(at) if text != shown => {
                        let wait = interval.saturating_sub(at.elapsed());
                        match tokio::time::timeout(wait, events.recv()).await {
                            Ok(event) => event,
                            Err(_) => Some(StreamEvent::Text(String::new())),
                        }
                    }
                    _ => events.recv().await,
                };
                let closed = event.is_none();
                match event {
                    Some(StreamEvent::Restart) => text.clear(),
                    Some(StreamEvent::Text(delta)) => text.push_str(&delta),
                    None => {}
                }
                let due = last.is_none_or(|at| at.elapsed() >= interval);
                if !text.trim().is_empty() && text != shown && (due || closed) {
                    let full = format!("{prefix}{text}");
                    match channel.preview(&chat, current.as_ref(), &full).await {
                        Ok(Some(reference)) => current = Some(reference),
                        Ok(None) => {}
                        Err(err) => tracing::debug!(error = %err, "preview update failed"),
                    }
                    shown = text.clone();
                    last = Some(Instant::now());
                }
                if closed {
                    break;
                }
            }
            *shared.lock().unwrap_or_else(|p| p.into_inner()) = current;
        });
        Self {
            sender: Some(sender),
            task: Some(task),
            draft,
        }
    }

    fn enabled(&self) -> bool {
        self.sender.is_some()
    }

    fn sender(&self) -> Option<&mpsc::UnboundedSender<StreamEvent>> {
        self.sender.as_ref()
    }

    /// Stops previewing and returns the preview message, once its last update is done.
    async fn finish(mut self) -> Option<MessageRef> {
        self.sender = None;
        if let Some(task) = self.task.take() {
            // A panicking preview task only loses the preview; the reply is still sent whole.
            let _ = task.await;
        }
        self.draft.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
