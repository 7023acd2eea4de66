//! Settling a turn's tool calls: every open call ends as a result the model will see.
//!
//! A call that was running when the daemon died is reported as interrupted (never re-run); calls
//! over the agent's limit are skipped; the rest are checked ([`super::tools::prepare`]), and those
//! whose risk needs the user's approval at their autonomy level get an Approve / Deny prompt and
//! park the turn. Approved calls run when the turn resumes; denied and expired ones are reported
//! as not run. Everything runs in parallel, within the per-tool timeout, and is audited.
//!
//! At most [`MAX_PROMPTS_AT_ONCE`] approval prompts are shown for one model answer: a model that
//! asks for a hundred risky actions at once would otherwise bury the chat in Approve / Deny
//! prompts. The rest are refused back to the model as tool errors, telling it to ask again once
//! these are decided.

use std::time::{Duration, Instant};

use futures::future::join_all;
use hearth_channel::{Button, OutboundMessage, ShownCall, TurnEvent};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Runtime;
use super::tools::{
    Prepared, Refusal, Toolbox, UserPolicy, admit, parse_arguments, prepare, tool_help,
};
use super::turn::{ConfirmationPolicy, TurnJob};
use crate::confirmation::{self, APPROVE_EMOJI, DENY_EMOJI, button_data};
use crate::provider::ChatMessage;
use crate::store::{
    AuditEntry, Confirmation, ConfirmationStatus, NewOutbox, OutboxKind, StoreError,
    ToolCallRecord, ToolCallStatus,
};
use crate::text::clip;
use crate::tool::meta::{self, Operation};
use crate::tool::typed::Each;
use crate::tool::{Risk, ToolContext, ToolError};

/// Approval prompts waiting at the same time in one turn; calls needing approval beyond these
/// are refused to the model until these are decided.
pub const MAX_PROMPTS_AT_ONCE: usize = 3;

/// What the model is told for a call refused because too many prompts wait already.
pub fn too_many_prompts() -> String {
    format!(
        "Not run: too many actions needing confirmation in one turn; ask again after these are decided. \
         (At most {MAX_PROMPTS_AT_ONCE} approval requests are shown at once; this call was not run and the user was not asked.)"
    )
}

/// How settling ended.
pub enum Settled {
    /// Every call has a result; the number of calls used up.
    Done(i64),
    /// At least one call waits for a decision.
    Waiting,
    /// Shutdown came while tools ran.
    Shutdown,
}

/// What one call will do once it passed the checks.
enum Action {
    Run(Prepared),
    Search {
        query: String,
        category: Option<String>,
        include_params: bool,
    },
    Help(String),
    Batch(Vec<Each<Operation>>),
}

/// The outcome of running one call.
struct Ran {
    status: ToolCallStatus,
    text: String,
    outcome: &'static str,
    tool: String,
    arguments: String,
    elapsed: Duration,
}

pub async fn settle_tool_calls(
    rt: &Runtime,
    job: &TurnJob,
    toolbox: &Toolbox,
    open: Vec<ToolCallRecord>,
    used: i64,
    shutdown: &CancellationToken,
) -> Result<Settled, StoreError> {
    let policy = user_policy(rt, job).await?;
    let limit = i64::from(job.agent.max_tool_calls);
    let mut settled = 0i64;
    let mut waiting = false;
    // Prompts waiting for a decision in this turn, old and new.
    let mut prompts = 0usize;
    let mut runnable: Vec<(ToolCallRecord, Action)> = Vec::new();

    for record in open {
        let name = &record.call.name;
        let approved = match record.status {
            ToolCallStatus::Running => {
                let text = "This tool call was interrupted: hearth restarted while it was running. It was NOT run again, \
                            so its effect is unknown. Check the current state before trying again.";
                let status = ToolCallStatus::Interrupted;
                finish(rt, job, &record, status, text.into(), name).await?;
                settled += 1;
                continue;
            }
            ToolCallStatus::Waiting => match rt.store.confirmation_for_call(record.id).await? {
                Some(c) if c.status == ConfirmationStatus::Pending => {
                    waiting = true;
                    prompts += 1;
                    continue;
                }
                Some(c) if c.status == ConfirmationStatus::Approved => true,
                Some(c) => {
                    let text = if c.status == ConfirmationStatus::Expired {
                        format!(
                            "Nobody approved this call within {} minutes, so it did not run (treated as denied). Tell the user; retry only if they ask.",
                            rt.config.tools.confirmation_timeout_secs / 60
                        )
                    } else if c.decided_by.as_deref() == Some(crate::store::DENIED_FOR_WRONG_CODES)
                    {
                        "Denied because wrong confirmation codes were typed too often; it did not run. Tell the user; retry only if they ask.".to_string()
                    } else {
                        "The user denied this call; it did not run. Do not try it again unless they ask.".to_string()
                    };
                    finish(rt, job, &record, ToolCallStatus::Denied, text, &c.tool).await?;
                    settled += 1;
                    continue;
                }
                None => {
                    let text = "This call's approval request was lost; it did not run.".to_string();
                    finish(rt, job, &record, ToolCallStatus::Error, text, name).await?;
                    settled += 1;
                    continue;
                }
            },
            ToolCallStatus::Approved => true,
            _ => false,
        };
        if !approved && used + settled + count(&runnable) >= limit {
            let text = format!(
                "Not run: this turn reached its limit of {limit} tool calls. Answer with what you have."
            );
            finish(rt, job, &record, ToolCallStatus::Skipped, text, name).await?;
            settled += 1;
            continue;
        }
        let planned = match plan(toolbox, &rt.tools, &record, &policy) {
            Ok(Action::Run(prepared)) => Ok(Action::Run(in_turn(rt, job, prepared).await)),
            other => other,
        };
        match planned {
            Err(refusal) => {
                refuse(rt, job, &record, name, refusal).await?;
                settled += 1;
            }
            Ok(Action::Run(prepared)) if !approved && asks(&prepared, policy.autonomy) => {
                match unattended_rule(job, &prepared) {
                    Unattended::Ask if prompts >= MAX_PROMPTS_AT_ONCE => {
                        let tool = prepared.tool.info().name.clone();
                        let refusal = Refusal::refused(too_many_prompts());
                        refuse(rt, job, &record, &tool, refusal).await?;
                        settled += 1;
                    }
                    Unattended::Ask => {
                        request_confirmation(rt, job, &record, &prepared).await?;
                        prompts += 1;
                        waiting = true;
                    }
                    Unattended::Allow => match admit_call(rt, &prepared, &policy) {
                        Ok(()) => runnable.push((record, Action::Run(prepared))),
                        Err(refusal) => {
                            refuse(rt, job, &record, name, refusal).await?;
                            settled += 1;
                        }
                    },
                    Unattended::Deny => {
                        let text = format!(
                            "`{}` needs a person's approval, and this scheduled run has nobody to ask, so it did not run. \
                             Mention in your answer that it needs doing by hand or by asking in chat.",
                            prepared.tool.info().name
                        );
                        let tool = prepared.tool.info().name.clone();
                        finish(rt, job, &record, ToolCallStatus::Denied, text, &tool).await?;
                        settled += 1;
                    }
                }
            }
            Ok(Action::Run(prepared)) => match admit_call(rt, &prepared, &policy) {
                Ok(()) => runnable.push((record, Action::Run(prepared))),
                Err(refusal) => {
                    refuse(rt, job, &record, name, refusal).await?;
                    settled += 1;
                }
            },
            Ok(action) => runnable.push((record, action)),
        }
    }

    let count = count(&runnable);
    let calls = join_all(
        runnable
            .iter()
            .map(|(record, action)| run_call(rt, job, toolbox, &policy, record, action)),
    );
    tokio::select! {
        results = calls => {
            for result in results {
                result?;
            }
        }
        () = job.cancel.cancelled() => {
            cancel_open_calls(rt, job).await?;
            return Ok(Settled::Done(settled + count));
        }
        // Whatever was running is reported as interrupted after the restart.
        () = shutdown.cancelled() => return Ok(Settled::Shutdown),
    }
    if waiting {
        Ok(Settled::Waiting)
    } else {
        Ok(Settled::Done(settled + count))
    }
}

/// What happens to a call that needs approval: asked in the chat (interactive turns, and
/// schedules with `on_confirmation = "ask"`), run anyway (schedules allowing this tool), or
/// reported as not run (everything else that runs unattended).
enum Unattended {
    Ask,
    Allow,
    Deny,
}

/// An outward call of a tool that always asks ([`crate::tool::ToolInfo::always_asks`]) is never
/// allowed to run unattended: a schedule's allow list cannot send mail in the owner's name or
/// write to their outside calendar.
fn unattended_rule(job: &TurnJob, prepared: &Prepared) -> Unattended {
    let info = prepared.tool.info();
    match &job.confirmation {
        ConfirmationPolicy::Ask => Unattended::Ask,
        ConfirmationPolicy::Allow(tools)
            if !info.always_asks(prepared.risk) && tools.contains(&info.name) =>
        {
            Unattended::Allow
        }
        ConfirmationPolicy::Allow(_) | ConfirmationPolicy::Deny => Unattended::Deny,
    }
}

/// Whether `prepared` waits for Approve at `autonomy` (its risk, or a tool that always asks).
fn asks(prepared: &Prepared, autonomy: crate::config::Autonomy) -> bool {
    prepared.tool.info().asks(prepared.risk, autonomy)
}

fn count<T>(items: &[T]) -> i64 {
    i64::try_from(items.len()).unwrap_or(i64::MAX)
}

async fn user_policy(rt: &Runtime, job: &TurnJob) -> Result<UserPolicy, StoreError> {
    let (is_owner, permission, autonomy) = match job.turn.user_id {
        Some(user) => rt.store.user_settings(user).await?,
        None => (false, None, None),
    };
    Ok(UserPolicy::new(
        job.turn.user_id,
        is_owner,
        permission.as_deref(),
        autonomy.as_deref(),
        rt.config.tools.autonomy,
        job.agent.autonomy,
    ))
}

/// Checks a call and decides what it will do. Meta-tools are unwrapped here so the real tool
/// passes the same checks (and asks for the same approval) as a direct call. Rate limits are
/// counted later, for calls about to run ([`admit_call`]).
fn plan(
    toolbox: &Toolbox,
    registry: &crate::tool::ToolRegistry,
    record: &ToolCallRecord,
    policy: &UserPolicy,
) -> Result<Action, Refusal> {
    let name = record.call.name.as_str();
    let arguments = parse_arguments(name, &record.call.arguments)?;
    let prepare_call = |tool: &str, args: Value| prepare(registry, toolbox, tool, args, policy);
    // The meta-tools' arguments are read by their types (`tool::meta`), as a tool's are.
    fn read<T: serde::de::DeserializeOwned>(name: &str, arguments: Value) -> Result<T, Refusal> {
        crate::tool::typed::parse(arguments)
            .map_err(|err| Refusal::invalid(format!("`{name}`: {err}")))
    }
    if toolbox.meta {
        match name {
            "search_tools" => {
                let search: meta::SearchTools = read(name, arguments)?;
                return Ok(Action::Search {
                    query: search.query,
                    category: search.category,
                    include_params: search.include_params,
                });
            }
            "get_tool_help" => {
                let help: meta::GetToolHelp = read(name, arguments)?;
                return Ok(Action::Help(help.tool_name));
            }
            "use_tool" => {
                let call: meta::UseTool = read(name, arguments)?;
                let inner = Value::Object(call.arguments.0);
                return prepare_call(&call.tool_name.0, inner).map(Action::Run);
            }
            "batch_use_tool" => {
                let batch: meta::BatchUseTool = read(name, arguments)?;
                return Ok(Action::Batch(batch.operations.0));
            }
            _ => {}
        }
    }
    prepare_call(name, arguments).map(Action::Run)
}

/// Counts a call about to run against the rate limits.
fn admit_call(rt: &Runtime, prepared: &Prepared, policy: &UserPolicy) -> Result<(), Refusal> {
    let limits = (
        rt.config.tools.per_user_tool_calls_per_minute,
        rt.config.tools.global_calls_per_minute,
    );
    admit(prepared, policy, &rt.limiter, rt.clock.now_ms(), limits)
}

/// Counts and audits a refused call of `tool` and stores the reason as its result, for the
/// model.
async fn refuse(
    rt: &Runtime,
    job: &TurnJob,
    record: &ToolCallRecord,
    tool: &str,
    refusal: Refusal,
) -> Result<(), StoreError> {
    rt.metrics.tool_call(tool, refusal.outcome);
    let arguments = &record.call.arguments;
    let (outcome, message) = (refusal.outcome, &refusal.message);
    audit(rt, job, tool, arguments, outcome, message, Duration::ZERO).await;
    close_unrun(rt, job, record, ToolCallStatus::Error, refusal.message).await
}

/// Counts a call that ran in `/metrics` and writes it to the audit log.
async fn count_and_audit(rt: &Runtime, job: &TurnJob, ran: &Ran) {
    rt.metrics.tool_call(&ran.tool, ran.outcome);
    let (tool, arguments, text) = (&ran.tool, &ran.arguments, &ran.text);
    audit(rt, job, tool, arguments, ran.outcome, text, ran.elapsed).await;
}

async fn run_call(
    rt: &Runtime,
    job: &TurnJob,
    toolbox: &Toolbox,
    policy: &UserPolicy,
    record: &ToolCallRecord,
    action: &Action,
) -> Result<(), StoreError> {
    rt.store
        .mark_tool_running(record.id, rt.clock.now_ms())
        .await?;
    job.emit(TurnEvent::ToolStarted(shown_call(&record.call)))
        .await;
    let ran = match action {
        Action::Run(prepared) => execute(rt, job, prepared).await,
        Action::Search {
            query,
            category,
            include_params,
        } => quick(
            &record.call.name,
            toolbox.search(query, category.as_deref(), *include_params),
        ),
        Action::Help(tool) => match toolbox.get(tool) {
            Some(found) => quick(&record.call.name, tool_help(found.info())),
            None => Ran {
                status: ToolCallStatus::Error,
                text: format!("Unknown tool `{tool}`. Use search_tools to find tools."),
                outcome: "invalid",
                tool: record.call.name.clone(),
                arguments: String::new(),
                elapsed: Duration::ZERO,
            },
        },
        Action::Batch(operations) => batch(rt, job, toolbox, policy, operations).await,
    };
    if matches!(action, Action::Batch(_)) {
        // Each operation was counted and audited as it ran.
        rt.metrics.tool_call(&ran.tool, ran.outcome);
    } else {
        count_and_audit(rt, job, &ran).await;
    }
    let finished = TurnEvent::ToolFinished {
        call: ShownCall {
            arguments: Value::Null,
            ..shown_call(&record.call)
        },
        status: ran.status.as_str().to_string(),
        result: clip(&ran.text, 2_000),
    };
    let message = ChatMessage::Tool {
        call_id: record.call.id.clone(),
        name: record.call.name.clone(),
        content: ran.text,
        is_error: ran.status != ToolCallStatus::Done,
    };
    rt.store
        .finish_tool_call(
            &job.turn,
            job.session,
            record.id,
            ran.status,
            &message,
            rt.clock.now_ms(),
        )
        .await?;
    job.emit(finished).await;
    Ok(())
}

/// A call as a turn's client sees it in `tool.started`/`tool.finished`: the tool that runs and
/// its arguments as JSON. A `use_tool` call names the real tool (with `"via": "use_tool"`), so a
/// client sees `delete_task` as the confirmation and `/metrics` do; arguments the model wrote
/// as something other than JSON stay the string it wrote.
fn shown_call(call: &crate::provider::ToolCall) -> ShownCall {
    let arguments = serde_json::from_str::<Value>(&call.arguments)
        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
    if call.name == "use_tool"
        && let Some(inner) = arguments.get("tool_name").and_then(Value::as_str)
    {
        return ShownCall {
            id: call.id.clone(),
            tool: inner.to_string(),
            via: Some("use_tool".into()),
            arguments: arguments
                .get("arguments")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({})),
        };
    }
    ShownCall {
        id: call.id.clone(),
        tool: call.name.clone(),
        via: None,
        arguments,
    }
}

fn quick(tool: &str, text: String) -> Ran {
    Ran {
        status: ToolCallStatus::Done,
        text,
        outcome: "ok",
        tool: tool.to_string(),
        arguments: String::new(),
        elapsed: Duration::ZERO,
    }
}

/// Where the turn's tool calls happen, as the tools see it.
fn tool_context(rt: &Runtime, job: &TurnJob) -> ToolContext {
    ToolContext {
        store: rt.store.clone(),
        config: rt.config.clone(),
        clock: rt.clock.clone(),
        timezone: rt.timezone,
        user_id: job.turn.user_id,
        conversation_id: job.turn.conversation_id,
        turn_id: job.turn.id,
        agent_id: job.agent.id.clone(),
    }
}

/// The call's risk raised to what the tool says of it in this turn
/// ([`crate::tool::Tool::risk_in_turn`]): `start_background_task` asks first unless the
/// person's message asked for background work.
async fn in_turn(rt: &Runtime, job: &TurnJob, mut prepared: Prepared) -> Prepared {
    let ctx = tool_context(rt, job);
    let risk = prepared.tool.risk_in_turn(&ctx, &prepared.arguments).await;
    prepared.risk = prepared.risk.max(risk);
    prepared
}

/// Runs a prepared tool within its timeout.
async fn execute(rt: &Runtime, job: &TurnJob, prepared: &Prepared) -> Ran {
    let info = prepared.tool.info();
    let ctx = tool_context(rt, job);
    let timeout = info
        .timeout
        .unwrap_or(Duration::from_secs(rt.config.runtime.tool_timeout_secs));
    let started = Instant::now();
    let result = tokio::time::timeout(
        timeout,
        prepared.tool.call(&ctx, prepared.arguments.clone()),
    )
    .await;
    let (status, text, outcome) = match result {
        Ok(Ok(text)) => (ToolCallStatus::Done, text, "ok"),
        Ok(Err(ToolError::InvalidArguments(msg))) => (
            ToolCallStatus::Error,
            format!(
                "Invalid arguments for `{}`: {msg}\n\n{}",
                info.name,
                tool_help(info)
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
    Ran {
        status,
        text,
        outcome,
        tool: info.name.clone(),
        arguments: prepared.arguments.to_string(),
        elapsed: started.elapsed(),
    }
}

/// `batch_use_tool`: each operation checked and run on its own, concurrently. Operations that
/// need approval are not run here: the model is told to call them alone.
async fn batch(
    rt: &Runtime,
    job: &TurnJob,
    toolbox: &Toolbox,
    policy: &UserPolicy,
    operations: &[Each<Operation>],
) -> Ran {
    let limits = (
        rt.config.tools.per_user_tool_calls_per_minute,
        rt.config.tools.global_calls_per_minute,
    );
    let started = Instant::now();
    let results = join_all(operations.iter().map(|operation| async move {
        let (name, arguments) = match &operation.0 {
            Ok(call) => (
                call.tool_name.0.clone(),
                Value::Object(call.arguments.0.clone()),
            ),
            Err(err) => return json!({"ok": false, "error": err.to_string()}),
        };
        // As the model wrote them, for the audit of a refused operation.
        let written = arguments.to_string();
        let prepared = match prepare(&rt.tools, toolbox, &name, arguments, policy) {
            Ok(prepared) => Ok(in_turn(rt, job, prepared).await),
            Err(refusal) => Err(refusal),
        };
        let admitted = match prepared {
            Ok(prepared) if asks(&prepared, policy.autonomy) => {
                let message = format!(
                    "`{name}` needs the user's approval: call it on its own with use_tool."
                );
                return json!({"tool_name": name, "ok": false, "error": message});
            }
            Ok(prepared) => {
                admit(&prepared, policy, &rt.limiter, rt.clock.now_ms(), limits).map(|()| prepared)
            }
            Err(refusal) => Err(refusal),
        };
        let prepared = match admitted {
            Ok(prepared) => prepared,
            Err(refusal) => {
                let (outcome, message) = (refusal.outcome, &refusal.message);
                audit(rt, job, &name, &written, outcome, message, Duration::ZERO).await;
                return json!({"tool_name": name, "ok": false, "error": refusal.message});
            }
        };
        let ran = execute(rt, job, &prepared).await;
        count_and_audit(rt, job, &ran).await;
        let ok = ran.status == ToolCallStatus::Done;
        json!({"tool_name": name, "ok": ok, if ok { "result" } else { "error" }: ran.text})
    }))
    .await;
    let all_ok = results.iter().all(|r| r["ok"] == true);
    Ran {
        status: ToolCallStatus::Done,
        text: json!({ "results": results }).to_string(),
        outcome: if all_ok { "ok" } else { "partial" },
        tool: "batch_use_tool".into(),
        arguments: String::new(),
        elapsed: started.elapsed(),
    }
}

/// Audits a call that never ran, its status as the outcome, and stores `content` as its error
/// result.
async fn finish(
    rt: &Runtime,
    job: &TurnJob,
    record: &ToolCallRecord,
    status: ToolCallStatus,
    content: String,
    tool: &str,
) -> Result<(), StoreError> {
    let (arguments, outcome) = (&record.call.arguments, status.as_str());
    audit(rt, job, tool, arguments, outcome, &content, Duration::ZERO).await;
    close_unrun(rt, job, record, status, content).await
}

/// Stores `content` as the error result of a call that did not run, closing it with `status`.
pub(super) async fn close_unrun(
    rt: &Runtime,
    job: &TurnJob,
    record: &ToolCallRecord,
    status: ToolCallStatus,
    content: String,
) -> Result<(), StoreError> {
    let message = ChatMessage::Tool {
        call_id: record.call.id.clone(),
        name: record.call.name.clone(),
        content,
        is_error: true,
    };
    let now = rt.clock.now_ms();
    rt.store
        .finish_tool_call(&job.turn, job.session, record.id, status, &message, now)
        .await
}

/// After `/cancel`: every call without a result is closed as cancelled, so the history stays
/// well-formed for the next turn.
pub async fn cancel_open_calls(rt: &Runtime, job: &TurnJob) -> Result<(), StoreError> {
    for record in rt.store.open_tool_calls(job.turn.id).await? {
        let text = "Cancelled by the user before it finished.".to_string();
        finish(
            rt,
            job,
            &record,
            ToolCallStatus::Cancelled,
            text,
            &record.call.name,
        )
        .await?;
    }
    Ok(())
}

/// Appends to the audit log; a failure to audit is logged, never fatal to the call.
async fn audit(
    rt: &Runtime,
    job: &TurnJob,
    tool: &str,
    arguments: &str,
    outcome: &str,
    result: &str,
    elapsed: Duration,
) {
    let entry = AuditEntry {
        user_id: job.turn.user_id,
        turn_id: Some(job.turn.id),
        agent_id: &job.agent.id,
        tool,
        arguments: &clip(arguments, 2_000),
        outcome,
        summary: &clip(result, 200),
        duration_ms: i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
        client: None,
    };
    if let Err(err) = rt.store.audit(&entry, rt.clock.now_ms()).await {
        tracing::error!(error = %err, tool, "writing the tool audit log failed");
    }
}

/// A short code no pending confirmation of the chat uses, so a typed code names one request.
async fn unused_short_code(rt: &Runtime, job: &TurnJob) -> Result<String, StoreError> {
    let mut code = confirmation::short_code();
    // A chat has a handful of pending requests at most, so a clash is a one-in-a-hundred-million
    // event; the bound only keeps a broken store from spinning here.
    for _ in 0..16 {
        if !rt
            .store
            .short_code_taken(&job.channel_name, &job.chat.chat_id, &code)
            .await?
        {
            break;
        }
        code = confirmation::short_code();
    }
    Ok(code)
}

/// Stores an Approve / Deny request for `record` and queues its prompt.
async fn request_confirmation(
    rt: &Runtime,
    job: &TurnJob,
    record: &ToolCallRecord,
    prepared: &Prepared,
) -> Result<(), StoreError> {
    let now = rt.clock.now_ms();
    let id = confirmation::new_id();
    let info = prepared.tool.info();
    let timeout = rt.config.tools.confirmation_timeout_secs;
    let caps = &job.capabilities;
    let minutes = timeout.div_ceil(60);
    // Without real buttons a person types a short code (reactions, where the channel shows the
    // buttons as reactions, work besides).
    let short_code = if caps.buttons {
        None
    } else {
        Some(unused_short_code(rt, job).await?)
    };
    let how = match &short_code {
        None => format!("Approve within {minutes} minutes?"),
        Some(code) if caps.buttons_as_reactions => format!(
            "React ✅ to approve or ❌ to deny, or reply APPROVE {code} or DENY {code}, within {minutes} minutes."
        ),
        Some(code) => format!("Reply APPROVE {code} or DENY {code} within {minutes} minutes."),
    };
    let buttons_shown = caps.shows_buttons();
    let ctx = tool_context(rt, job);
    let request = request_text(&ctx, &job.agent, prepared).await;
    let text = format!("🔐 {request}\n{how}");
    let buttons = || approval_buttons(&id);
    let prompt = NewOutbox {
        inbox_id: Some(job.turn.inbox_id),
        seq: record.id,
        channel: job.channel_name.clone(),
        kind: OutboxKind::Send,
        message: OutboundMessage {
            chat: job.chat.clone(),
            text,
            buttons: if buttons_shown { buttons() } else { Vec::new() },
            reply_to: job.reply_to.clone(),
            replaces: None,
            delivery_id: None,
            reply_context: job.reply_context.clone(),
            answers_press: None,
        },
    };
    // The copy in the owner's chat, with buttons; the same confirmation, so a press there
    // decides it. Its seq is the prompt's negated: unique among the entry's replies, whose
    // seqs are never negative.
    let routed = job.approvals_route.as_ref().map(|route| NewOutbox {
        inbox_id: Some(job.turn.inbox_id),
        seq: -record.id,
        channel: route.channel.clone(),
        kind: OutboxKind::Send,
        message: OutboundMessage {
            text: routed_prompt(&route.origin, &request, minutes),
            buttons: buttons(),
            ..OutboundMessage::text(route.chat.clone(), "")
        },
    });
    let confirmation = Confirmation {
        id,
        turn_id: job.turn.id,
        tool_call_id: record.id,
        conversation_id: job.turn.conversation_id,
        channel: job.channel_name.clone(),
        chat_id: job.chat.chat_id.clone(),
        thread_id: job.chat.thread_id.clone(),
        requester: job.requester.clone(),
        user_id: job.turn.user_id,
        tool: info.name.clone(),
        summary: format!(
            "{}({})",
            info.name,
            clip(&prepared.arguments.to_string(), 300)
        ),
        prompt_outbox_id: None,
        status: ConfirmationStatus::Pending,
        decided_by: None,
        created_at: now,
        expires_at: now + i64::try_from(timeout.saturating_mul(1000)).unwrap_or(i64::MAX),
        short_code,
        wrong_codes: 0,
        routed_channel: job.approvals_route.as_ref().map(|r| r.channel.clone()),
        routed_chat_id: job.approvals_route.as_ref().map(|r| r.chat.chat_id.clone()),
        routed_outbox_id: None,
    };
    rt.store
        .create_confirmation(&confirmation, &prompt, routed.as_ref(), now)
        .await?;
    audit(
        rt,
        job,
        &info.name,
        &prepared.arguments.to_string(),
        "asked",
        "waiting for approval",
        Duration::ZERO,
    )
    .await;
    Ok(())
}

/// What an approval prompt says `prepared` will do, after its 🔐: the agent, the tool, what kind
/// of change it makes, the call, and what an id in it names. A chat turn's prompt and an MCP
/// client's ([`crate::mcp_server`]) say the same.
pub(crate) async fn request_text(
    ctx: &ToolContext,
    agent: &crate::agent::AgentDef,
    prepared: &Prepared,
) -> String {
    let info = prepared.tool.info();
    let what = match prepared.risk {
        Risk::Destructive => "This deletes data.",
        Risk::Outward => "This acts outside hearth.",
        Risk::Write => "This changes your data.",
        Risk::Safe => "This only reads.",
    };
    // The call as its tool renders it: a mail's whole draft, the arguments and the outside
    // calendar's event they name, or the arguments as JSON.
    let shown = prepared.tool.prompt(ctx, &prepared.arguments).await;
    format!(
        "{} {} wants to run `{}`. {what}\n{shown}",
        agent.emoji, agent.name, info.name,
    )
}

/// The prompt in the owner's approvals chat (`daemon.approvals_to`) for a request made
/// elsewhere (`origin`: a requester, a scheduled run, an MCP client).
pub(crate) fn routed_prompt(origin: &str, request: &str, minutes: u64) -> String {
    format!("🔐 Approval needed for {origin}: {request}\nApprove within {minutes} minutes?")
}

/// The Approve and Deny buttons of confirmation `id`.
pub(crate) fn approval_buttons(id: &str) -> Vec<Button> {
    vec![
        Button::new(
            format!("{APPROVE_EMOJI} Approve"),
            button_data(id, confirmation::Action::Approve),
        )
        .with_emoji(APPROVE_EMOJI),
        Button::new(
            format!("{DENY_EMOJI} Deny"),
            button_data(id, confirmation::Action::Deny),
        )
        .with_emoji(DENY_EMOJI),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolCall;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn a_client_sees_the_real_tool_behind_use_tool_and_arguments_as_json() {
        let shown = shown_call(&call(
            "use_tool",
            r#"{"tool_name":"delete_task","arguments":{"task_id":1}}"#,
        ));
        assert_eq!(
            TurnEvent::ToolStarted(shown).data(),
            json!({"id": "c1", "tool": "delete_task", "via": "use_tool", "arguments": {"task_id": 1}})
        );
        let direct = shown_call(&call("delete_task", r#"{"task_id":2}"#));
        assert_eq!(
            TurnEvent::ToolStarted(direct).data(),
            json!({"id": "c1", "tool": "delete_task", "arguments": {"task_id": 2}})
        );
    }

    #[test]
    fn arguments_that_are_not_json_stay_the_text_the_model_wrote() {
        let shown = shown_call(&call("delete_task", "task_id=1"));
        assert_eq!(shown.arguments, "task_id=1");
        // A use_tool call that names no tool is shown as the call it is.
        let shown = shown_call(&call("use_tool", r#"{"arguments":{}}"#));
        assert_eq!((shown.tool.as_str(), shown.via), ("use_tool", None));
    }
}
