//! The approval wait: an MCP call whose risk needs the owner's approval asks in the owner's
//! approvals chat (`daemon.approvals_to`), with the prompt and buttons a chat turn's routed
//! prompt has, naming the client and the arguments, and waits for the press.
//!
//! - The decision is a confirmation of no turn (`store::mcp_approval`): the daemon's pipeline
//!   decides it on a press (or a reaction) and its expiry timer expires it, whichever process
//!   asked (stdio runs beside the daemon on the same database, so this side reads the decision
//!   from there rather than waiting on anything in memory).
//! - While it waits the call sends progress every [`PROGRESS_EVERY`] when the client gave a
//!   progress token. After `[mcp_server] inline_wait_secs` it answers "waiting for the owner's
//!   approval" with a handle instead, for [`CHECK`] (many clients give up on a call after a
//!   minute); the handle keeps the request alive until it expires.
//! - A client that goes away before then (its HTTP request dropped, stdio closed, a
//!   cancellation) withdraws the request: the prompt is edited to say so, and a later press
//!   finds it decided.
//! - Approved, the call runs once: whoever claims the run first (the waiting call or a
//!   `check_approval`) runs it and stores its answer, which later asks get again.

use std::time::{Duration, Instant};

use hearth_channel::{ChatRef, OutboundMessage};
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ProgressNotificationParam, Tool};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use super::{Caller, McpServer, ServeError, result};
use crate::agent::AgentDef;
use crate::confirmation::new_id;
use crate::runtime::calls::{approval_buttons, request_text, routed_prompt};
use crate::runtime::tools::{Prepared, Toolbox, prepare};
use crate::store::mcp_approval::{McpApproval, McpRunState, NewMcpApproval};
use crate::store::{Confirmation, ConfirmationStatus, NewOutbox, OutboxKind};
use crate::text::clip;

/// The tool that answers what became of a waiting call, listed to MCP clients only.
pub(super) const CHECK: &str = "check_approval";

/// How often a waiting call tells a client that asked for progress that it still waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// How often a waiting call reads its decision (which another process may write).
const POLL: Duration = Duration::from_millis(500);

/// `decided_by` of a request withdrawn because its client went away.
const WITHDRAWN_BY: &str = "mcp:client went away";

/// [`CHECK`] as MCP clients see it.
pub(super) fn check_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "handle": {
                "type": "string",
                "description": "The handle a call waiting for the owner's approval answered."
            }
        },
        "required": ["handle"],
        "additionalProperties": false
    });
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    Tool::new(
        CHECK,
        "What became of a call that answered \"waiting for the owner's approval\" with a handle: \
         still waiting, the tool's result once approved (the call runs once, however often \
         this is asked), denied by the owner, or expired.",
        std::sync::Arc::new(schema),
    )
    .annotate(rmcp::model::ToolAnnotations::new().read_only(false))
}

/// Asks the owner to approve `prepared` and waits for the answer (see the module docs).
pub(super) async fn ask(
    server: &McpServer,
    caller: &Caller,
    client: &str,
    agent: &AgentDef,
    prepared: Prepared,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ServeError> {
    let rt = &server.rt;
    let name = prepared.tool.info().name.clone();
    let Some((channel, chat)) = rt.config.daemon.approvals_to() else {
        let text = format!(
            "`{name}` needs the owner's approval at this user's autonomy level, and hearth has \
             no approvals chat to ask in (`daemon.approvals_to`), so it did not run."
        );
        let agent = Some(agent.id.as_str());
        let (arguments, zero) = (&prepared.arguments, Duration::ZERO);
        server
            .audit(
                caller, client, agent, &name, arguments, "refused", &text, zero,
            )
            .await;
        return Ok(result(false, text));
    };
    let now = rt.clock.now_ms();
    let timeout = rt.config.tools.confirmation_timeout_secs;
    let minutes = timeout.div_ceil(60);
    let id = new_id();
    let handle = new_id();
    let request = request_text(&server.context(caller, agent), agent, &prepared).await;
    // The client names itself: quoted, its own quotes made plain, so it cannot pass for
    // something else.
    let shown: String = client
        .chars()
        .map(|c| {
            if matches!(c, '“' | '”' | '"') {
                '\''
            } else {
                c
            }
        })
        .collect();
    let text = routed_prompt(&format!("the MCP client “{shown}”"), &request, minutes);
    let prompt = NewOutbox {
        inbox_id: None,
        seq: 0,
        channel: channel.to_string(),
        kind: OutboxKind::Send,
        message: OutboundMessage {
            buttons: approval_buttons(&id),
            ..OutboundMessage::text(ChatRef::new(chat), text)
        },
    };
    let arguments = prepared.arguments.to_string();
    let confirmation = Confirmation {
        id: id.clone(),
        turn_id: 0,
        tool_call_id: 0,
        conversation_id: 0,
        channel: channel.to_string(),
        chat_id: chat.to_string(),
        thread_id: None,
        // Nobody's message asked: the owner (or the caller's own linked identities) decides.
        requester: String::new(),
        user_id: Some(caller.user_id),
        tool: name.clone(),
        summary: format!("{name}({})", clip(&arguments, 300)),
        prompt_outbox_id: None,
        status: ConfirmationStatus::Pending,
        decided_by: None,
        created_at: now,
        expires_at: now + i64::try_from(timeout.saturating_mul(1000)).unwrap_or(i64::MAX),
        short_code: None,
        wrong_codes: 0,
        routed_channel: None,
        routed_chat_id: None,
        routed_outbox_id: None,
    };
    let approval = NewMcpApproval {
        handle: &handle,
        caller_door: &caller.door,
        client,
        agent_id: &agent.id,
        arguments: &arguments,
    };
    let prompt_id = rt
        .store
        .create_mcp_approval(&confirmation, &approval, &prompt, now)
        .await?;
    tracing::info!(confirmation = %id, tool = %name, %client, "an MCP call waits for the owner's approval");
    let agent_id = Some(agent.id.as_str());
    let asked = "waiting for the owner's approval";
    let (arguments, zero) = (&prepared.arguments, Duration::ZERO);
    server
        .audit(
            caller, client, agent_id, &name, arguments, "asked", asked, zero,
        )
        .await;

    let inline = Duration::from_secs(rt.config.mcp_server.inline_wait_secs);
    match wait(server, &id, channel, inline, context).await? {
        Some(approval) => settle(server, caller, approval).await,
        None if context.ct.is_cancelled() => {
            let message = OutboundMessage {
                chat: ChatRef::new(chat),
                text: "⏹ Withdrawn: the MCP client went away before you answered, so it did \
                       not run."
                    .into(),
                ..OutboundMessage::default()
            };
            let edit = NewOutbox {
                kind: OutboxKind::Outcome { prompt: prompt_id },
                ..NewOutbox { message, ..prompt }
            };
            let now = rt.clock.now_ms();
            if rt
                .store
                .withdraw_mcp_approval(&id, WITHDRAWN_BY, &edit, now)
                .await?
            {
                tracing::info!(confirmation = %id, "the MCP client went away: its approval request withdrawn");
            }
            Ok(result(false, "cancelled: the request was withdrawn".into()))
        }
        None => Ok(result(
            true,
            format!(
                "waiting for the owner's approval (asked in {channel}; the request expires in \
                 {minutes} minutes). Handle: {handle}\nCall `{CHECK}` with this handle for the \
                 outcome: the call runs once, when approved."
            ),
        )),
    }
}

/// Waits for the decision of request `id` (asked in `place`): the request once decided or
/// expired; `None` when the inline wait is over, or the client went away
/// (`context.ct`).
async fn wait(
    server: &McpServer,
    id: &str,
    place: &str,
    inline: Duration,
    context: &RequestContext<RoleServer>,
) -> Result<Option<McpApproval>, ServeError> {
    let started = Instant::now();
    let progress = context.meta.get_progress_token();
    let mut next_progress = started;
    loop {
        let approval = server
            .rt
            .store
            .mcp_approval(id)
            .await?
            .ok_or_else(|| ServeError::Caller("the approval request vanished".into()))?;
        let confirmation = &approval.confirmation;
        if confirmation.status != ConfirmationStatus::Pending
            || server.rt.clock.now_ms() >= confirmation.expires_at
        {
            return Ok(Some(approval));
        }
        let now = Instant::now();
        if now >= started + inline {
            return Ok(None);
        }
        if let Some(token) = &progress
            && now >= next_progress
        {
            let waited = now.duration_since(started).as_secs();
            let note = ProgressNotificationParam::new(token.clone(), waited as f64)
                .with_message(format!("waiting for the owner's approval in {place}"));
            // A client that cannot take the note still gets its answer.
            if let Err(err) = context.peer.notify_progress(note).await {
                tracing::debug!(error = %err, "sending MCP progress failed");
            }
            next_progress = now + PROGRESS_EVERY;
        }
        tokio::select! {
            () = context.ct.cancelled() => return Ok(None),
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

/// `check_approval`: what became of the caller's waiting call with the handle in `arguments`.
pub(super) async fn check(
    server: &McpServer,
    caller: &Caller,
    arguments: &Value,
) -> Result<CallToolResult, ServeError> {
    let Some(handle) = arguments.get("handle").and_then(Value::as_str) else {
        return Ok(result(
            false,
            format!(
                "`{CHECK}` needs {{\"handle\": \"…\"}}: the handle a call waiting for the \
                 owner's approval answered."
            ),
        ));
    };
    let approval = server
        .rt
        .store
        .mcp_approval_by_handle(handle, caller.user_id, &caller.door)
        .await?;
    let Some(approval) = approval else {
        return Ok(result(
            false,
            format!(
                "no such approval: `{}` is not the handle of a call this client made",
                clip(handle, 64)
            ),
        ));
    };
    settle(server, caller, approval).await
}

/// What a request's decision means for its call: its result once approved (run now if
/// nobody ran it yet), or why it did not run, or that it still waits.
async fn settle(
    server: &McpServer,
    caller: &Caller,
    approval: McpApproval,
) -> Result<CallToolResult, ServeError> {
    let confirmation = &approval.confirmation;
    let tool = &confirmation.tool;
    let now = server.rt.clock.now_ms();
    let expired = || {
        result(
            false,
            format!(
                "expired: the owner did not answer within {} minutes, so `{tool}` did not run.",
                server
                    .rt
                    .config
                    .tools
                    .confirmation_timeout_secs
                    .div_ceil(60)
            ),
        )
    };
    Ok(match confirmation.status {
        ConfirmationStatus::Approved => run_once(server, caller, &approval).await?,
        ConfirmationStatus::Denied if confirmation.decided_by.as_deref() == Some(WITHDRAWN_BY) => {
            result(
                false,
                format!(
                    "withdrawn: the client went away while it waited, so `{tool}` did not run."
                ),
            )
        }
        ConfirmationStatus::Denied => {
            result(false, format!("denied by the owner: `{tool}` did not run."))
        }
        ConfirmationStatus::Expired => expired(),
        ConfirmationStatus::Pending if now >= confirmation.expires_at => expired(),
        ConfirmationStatus::Pending => {
            let left = (confirmation.expires_at - now).max(0) / 60_000 + 1;
            result(
                true,
                format!(
                    "still waiting for the owner's approval (asked in {}; the request expires \
                     within {left} minutes). Ask again later.",
                    confirmation.channel
                ),
            )
        }
    })
}

/// Runs an approved call if nobody has yet, and answers its result (stored, so every later
/// ask gets the same answer).
async fn run_once(
    server: &McpServer,
    caller: &Caller,
    approval: &McpApproval,
) -> Result<CallToolResult, ServeError> {
    let store = &server.rt.store;
    let id = &approval.confirmation.id;
    let tool = &approval.confirmation.tool;
    if !store.start_mcp_run(id, server.rt.clock.now_ms()).await? {
        let current = store.mcp_approval(id).await?;
        return Ok(match current.map(|a| (a.run_state, a.result)) {
            Some((McpRunState::Succeeded, Some(text))) => result(true, text),
            Some((McpRunState::Failed, Some(text))) => result(false, text),
            _ => result(
                true,
                format!(
                    "approved: `{tool}` started and has no result yet. It runs once and is never \
                     started again; ask again for its result."
                ),
            ),
        });
    }
    let (ok, text) = match prepared(server, caller, approval).await? {
        Ok((agent, prepared)) => {
            let client = &approval.client;
            server.run(caller, client, &agent, &prepared).await
        }
        Err(text) => (false, text),
    };
    store.finish_mcp_run(id, ok, &text).await?;
    Ok(result(ok, text))
}

/// The approved call, checked again as it is about to run (the user's permission, the rate
/// limits, the tool still being this client's), or why it cannot run.
async fn prepared(
    server: &McpServer,
    caller: &Caller,
    approval: &McpApproval,
) -> Result<Result<(AgentDef, Prepared), String>, ServeError> {
    let name = &approval.confirmation.tool;
    let tools = server.tools(caller);
    let Some((_, agent)) = tools
        .iter()
        .find(|(t, a)| t.info().name == *name && a.id == approval.agent_id)
        .or_else(|| tools.iter().find(|(t, _)| t.info().name == *name))
    else {
        return Ok(Err(format!(
            "`{name}` is no longer a tool this client may use, so the approved call did not run."
        )));
    };
    let Ok(arguments) = serde_json::from_str::<Value>(&approval.arguments) else {
        return Ok(Err(format!(
            "the stored arguments of `{name}` could not be read, so the approved call did not run."
        )));
    };
    let toolbox = Toolbox {
        tools: tools.iter().map(|(t, _)| t.clone()).collect(),
        meta: false,
    };
    let policy = server.policy(caller, agent).await?;
    Ok(
        prepare(&server.rt.tools, &toolbox, name, arguments, &policy)
            .and_then(|prepared| server.admit(&prepared, &policy).map(|()| prepared))
            .map(|prepared| (agent.clone(), prepared))
            .map_err(|refusal| refusal.message),
    )
}
