//! hearth as an MCP server, for the owner's other AI tools (a desktop assistant, an editor's
//! agent, a script): over stdio (`hearth mcp serve`) and streamable HTTP at `/mcp` on
//! `daemon.http_listen` ([`http`], with `[mcp_server] enabled`). Docs: README, "hearth as an
//! MCP server"; the map: docs/architecture.md.
//!
//! What it serves, to a [`Caller`] (a user, the agents it may use, whether it may change
//! anything):
//! - **tools**: the built-in tools of those agents, with the registry's names, descriptions and
//!   schemas as the model sees them, annotated read-only or destructive from their risk;
//! - **resources**: `hearth://tasks`, `hearth://notes`, `hearth://memories` and
//!   `hearth://calendar/today`, read through the same list tools as the user;
//! - **prompts**: one per agent, its instructions.
//!
//! A call takes the path a chat turn's call takes ([`crate::runtime::tools::prepare`]: the
//! JSON Schema check, list limits and permission; then the autonomy decision and the rate
//! limits), runs within the tool's timeout, and is audited with the client named. A call whose
//! risk needs the owner's approval at the user's autonomy level asks the owner in the
//! approvals chat and waits for the press ([`approval`]), answering a handle for the
//! `check_approval` tool when the wait is longer than a client waits.

mod approval;
#[cfg(feature = "http")]
pub mod http;
mod resource;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, Prompt, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ResourceContents, Role, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio_util::task::TaskTracker;

use crate::agent::AgentDef;
use crate::runtime::Runtime;
use crate::runtime::tools::{Prepared, Refusal, Toolbox, UserPolicy, admit, prepare};
use crate::store::{AuditEntry, StoreError};
use crate::text::clip;
use crate::tool::{Risk, ToolContext, ToolError};

/// Who is calling: resolved once for stdio, per request over HTTP (from the token).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The user every call acts as: their data, permission and autonomy.
    pub user_id: i64,
    /// The agents whose tools and prompts it sees; empty: every agent.
    pub agents: Vec<String>,
    /// Only tools that change nothing (a `chat` token): it talks, it does not act.
    pub read_only: bool,
    /// How it came in, for the audit log and `hearth usage`: `stdio`, `token phone`.
    pub door: String,
}

impl Caller {
    fn may_use(&self, agent: &str) -> bool {
        self.agents.is_empty() || self.agents.iter().any(|a| a == agent)
    }
}

/// Why a request could not be served at all (not a tool's own failure).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the database failed: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Caller(String),
}

impl From<ServeError> for ErrorData {
    fn from(err: ServeError) -> Self {
        match err {
            ServeError::Store(err) => {
                tracing::error!(error = %err, "an MCP request failed on the database");
                ErrorData::internal_error("hearth's database failed; see its log", None)
            }
            ServeError::Caller(message) => ErrorData::invalid_request(message, None),
        }
    }
}

/// Where the caller of a request comes from.
#[derive(Clone, Debug)]
enum Identity {
    /// Fixed for the whole connection (stdio).
    Fixed(Caller),
    /// Read from each HTTP request's token ([`http`]).
    #[cfg(feature = "http")]
    Token,
}

/// The server: the daemon's runtime and where callers come from. Cheap to clone (one per HTTP
/// request).
#[derive(Clone)]
pub struct McpServer {
    rt: Arc<Runtime>,
    identity: Identity,
    /// The calls in flight, so a stdio server that lost its client finishes withdrawing their
    /// prompts before the process ends.
    calls: TaskTracker,
}

impl McpServer {
    /// A server whose every request acts as `caller` (stdio).
    pub fn for_caller(rt: Arc<Runtime>, caller: Caller) -> Self {
        Self {
            rt,
            identity: Identity::Fixed(caller),
            calls: TaskTracker::new(),
        }
    }

    // Without the HTTP door only stdio's fixed caller exists, and the request is not read.
    #[cfg_attr(not(feature = "http"), allow(unused_variables))]
    async fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, ServeError> {
        match &self.identity {
            Identity::Fixed(caller) => Ok(caller.clone()),
            #[cfg(feature = "http")]
            Identity::Token => http::caller(&self.rt, context).await,
        }
    }

    /// The agents `caller` may use, in the agents file's order.
    fn agents(&self, caller: &Caller) -> Vec<AgentDef> {
        self.rt
            .agents()
            .set
            .iter()
            .filter(|agent| caller.may_use(&agent.id))
            .cloned()
            .collect()
    }

    /// The built-in tools `caller` sees: each once, by name, with the first agent (in file
    /// order) that has it, whose autonomy cap then applies to its calls.
    fn tools(&self, caller: &Caller) -> Vec<(Arc<dyn crate::tool::Tool>, AgentDef)> {
        let mut seen = std::collections::BTreeMap::new();
        for agent in self.agents(caller) {
            for tool in self.rt.tools.for_agent(&agent) {
                let info = tool.info();
                // An earlier result, a turn's plan and a task reporting back into the chat mean
                // nothing outside a conversation.
                let conversational = [
                    crate::tool::tool_result::NAME,
                    crate::tool::plan::NAME,
                    crate::tool::background::NAME,
                ]
                .contains(&info.name.as_str());
                if conversational
                    || self.is_external(&info.group)
                    || (caller.read_only && info.risk != Risk::Safe)
                {
                    continue;
                }
                seen.entry(info.name.clone())
                    .or_insert_with(|| (tool.clone(), agent.clone()));
            }
        }
        seen.into_values().collect()
    }

    /// Tools of hearth's own MCP servers (their group is the server's name) are not hearth's to
    /// serve again.
    fn is_external(&self, group: &str) -> bool {
        self.rt.config.mcp_servers.iter().any(|s| s.name == group)
    }

    async fn policy(&self, caller: &Caller, agent: &AgentDef) -> Result<UserPolicy, StoreError> {
        let (is_owner, permission, autonomy) = self.rt.store.user_settings(caller.user_id).await?;
        Ok(UserPolicy::new(
            Some(caller.user_id),
            is_owner,
            permission.as_deref(),
            autonomy.as_deref(),
            self.rt.config.tools.autonomy,
            agent.autonomy,
        ))
    }

    /// Runs one call as a chat turn would, audits it and answers its result; a call that needs
    /// the owner's approval asks and waits for it first.
    async fn call(
        &self,
        caller: &Caller,
        client: &str,
        name: &str,
        arguments: Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ServeError> {
        let tools = self.tools(caller);
        let Some((_, agent)) = tools.iter().find(|(t, _)| t.info().name == name) else {
            let text = format!(
                "Unknown tool `{name}` (or not one this client may use); tools/list names them."
            );
            self.audit(
                caller,
                client,
                None,
                name,
                &arguments,
                "invalid",
                &text,
                Duration::ZERO,
            )
            .await;
            return Ok(CallToolResult::error(vec![ContentBlock::text(text)]));
        };
        let toolbox = Toolbox {
            tools: tools.iter().map(|(t, _)| t.clone()).collect(),
            meta: false,
        };
        let policy = self.policy(caller, agent).await?;
        let written = arguments.clone();
        let prepared = match prepare(&self.rt.tools, &toolbox, name, arguments, &policy) {
            Ok(prepared) if prepared.tool.info().asks(prepared.risk, policy.autonomy) => {
                return approval::ask(self, caller, client, agent, prepared, context).await;
            }
            other => other.and_then(|prepared| self.admit(&prepared, &policy).map(|()| prepared)),
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(refusal) => {
                self.rt.metrics.tool_call(name, refusal.outcome);
                let (outcome, text) = (refusal.outcome, refusal.message);
                let agent = Some(agent.id.as_str());
                self.audit(
                    caller,
                    client,
                    agent,
                    name,
                    &written,
                    outcome,
                    &text,
                    Duration::ZERO,
                )
                .await;
                return Ok(CallToolResult::error(vec![ContentBlock::text(text)]));
            }
        };
        let (ok, text) = self.run(caller, client, agent, &prepared).await;
        Ok(result(ok, text))
    }

    /// Runs a call that passed its checks, counts and audits it: (succeeded, text).
    async fn run(
        &self,
        caller: &Caller,
        client: &str,
        agent: &AgentDef,
        prepared: &Prepared,
    ) -> (bool, String) {
        let started = Instant::now();
        let (ok, text, outcome) = self.execute(caller, agent, prepared).await;
        let name = &prepared.tool.info().name;
        self.rt.metrics.tool_call(name, outcome);
        let elapsed = started.elapsed();
        let agent = Some(agent.id.as_str());
        let arguments = &prepared.arguments;
        self.audit(
            caller, client, agent, name, arguments, outcome, &text, elapsed,
        )
        .await;
        (ok, text)
    }

    /// The rate limits, for a call about to run.
    fn admit(&self, prepared: &Prepared, policy: &UserPolicy) -> Result<(), Refusal> {
        let limits = (
            self.rt.config.tools.per_user_tool_calls_per_minute,
            self.rt.config.tools.global_calls_per_minute,
        );
        admit(
            prepared,
            policy,
            &self.rt.limiter,
            self.rt.clock.now_ms(),
            limits,
        )
    }

    /// Runs a prepared call within its timeout: (succeeded, text, audit outcome).
    async fn execute(
        &self,
        caller: &Caller,
        agent: &AgentDef,
        prepared: &Prepared,
    ) -> (bool, String, &'static str) {
        let info = prepared.tool.info();
        let ctx = self.context(caller, agent);
        let timeout = info.timeout.unwrap_or(Duration::from_secs(
            self.rt.config.runtime.tool_timeout_secs,
        ));
        let called = prepared.tool.call(&ctx, prepared.arguments.clone());
        match tokio::time::timeout(timeout, called).await {
            Ok(Ok(text)) => (true, text, "ok"),
            Ok(Err(ToolError::InvalidArguments(msg))) => (
                false,
                format!("Invalid arguments for `{}`: {msg}", info.name),
                "invalid",
            ),
            Ok(Err(ToolError::Failed(msg))) => (false, format!("Error: {msg}"), "error"),
            Err(_) => (
                false,
                format!(
                    "The tool did not finish within {} s and was stopped.",
                    timeout.as_secs()
                ),
                "timeout",
            ),
        }
    }

    /// A tool's context outside any conversation: tools that need one (a schedule's "this
    /// chat", an earlier result) say so and ask for what they lack.
    fn context(&self, caller: &Caller, agent: &AgentDef) -> ToolContext {
        ToolContext {
            store: self.rt.store.clone(),
            config: self.rt.config.clone(),
            clock: self.rt.clock.clone(),
            timezone: self.rt.timezone,
            user_id: Some(caller.user_id),
            conversation_id: 0,
            turn_id: 0,
            agent_id: agent.id.clone(),
        }
    }

    /// Appends to the audit log as a chat turn's call is, with the client named; a failure to
    /// audit is logged, never fatal to the call.
    #[allow(clippy::too_many_arguments)]
    async fn audit(
        &self,
        caller: &Caller,
        client: &str,
        agent: Option<&str>,
        tool: &str,
        arguments: &Value,
        outcome: &str,
        result: &str,
        elapsed: Duration,
    ) {
        let entry = AuditEntry {
            user_id: Some(caller.user_id),
            turn_id: None,
            agent_id: agent.unwrap_or(""),
            tool,
            arguments: &clip(&arguments.to_string(), 2_000),
            outcome,
            summary: &clip(result, 200),
            duration_ms: i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
            client: Some(client),
        };
        if let Err(err) = self.rt.store.audit(&entry, self.rt.clock.now_ms()).await {
            tracing::error!(error = %err, tool, "writing the tool audit log failed");
        }
    }
}

/// The client as the audit log and `hearth usage` name it: its own name (clientInfo; over
/// stateless HTTP only clients of the 2026-07-28 protocol send it with every request, so
/// older ones are named by their `User-Agent`) and the door it came in by.
fn client_name(context: &RequestContext<RoleServer>, caller: &Caller) -> String {
    let own = Implementation::from_build_env().name;
    let name = context
        .client_info()
        .map(|info| info.name)
        .filter(|name| *name != own && !name.trim().is_empty())
        .or_else(|| {
            context
                .extensions
                .get::<::http::request::Parts>()
                .and_then(|parts| parts.headers.get(::http::header::USER_AGENT))
                .and_then(|agent| agent.to_str().ok())
                .and_then(|agent| agent.split('/').next())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown client".into());
    let name: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    format!("{name} ({})", caller.door)
}

/// A tool's answer as an MCP result.
fn result(ok: bool, text: String) -> CallToolResult {
    let content = vec![ContentBlock::text(text)];
    if ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    }
}

/// A tool as MCP clients see it: the model's name, description and schema, and hints from its
/// risk (clients may warn with them; hearth never relies on them).
fn listed(tool: &dyn crate::tool::Tool) -> Tool {
    let info = tool.info();
    let schema = match &info.parameters {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    Tool::new(
        info.name.clone(),
        info.description.clone(),
        Arc::new(schema),
    )
    .annotate(
        ToolAnnotations::new()
            .read_only(info.risk == Risk::Safe)
            .destructive(info.risk == Risk::Destructive)
            .open_world(info.risk == Risk::Outward),
    )
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new("hearth", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "hearth, a personal assistant: the user's tasks, notes, memories and calendar. \
             Calls act as the user; a risky one waits for the owner's approval on their phone, \
             and one that waits long answers a handle: pass it to check_approval for the outcome.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller(&context).await?;
        let tools = self.tools(&caller);
        let mut listed: Vec<Tool> = tools
            .iter()
            .map(|(tool, _)| listed(tool.as_ref()))
            .collect();
        // Only a client with a tool that may have to wait for the owner has use for it.
        if tools.iter().any(|(tool, _)| tool.info().risk != Risk::Safe) {
            listed.push(approval::check_tool());
        }
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&context).await?;
        let client = client_name(&context, &caller);
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let name = request.name.as_ref();
        // Tracked, so a stdio server whose client left finishes its withdrawals (see
        // `serve_stdio`).
        let result = self
            .calls
            .track_future(async {
                if name == approval::CHECK {
                    approval::check(self, &caller, &arguments).await
                } else {
                    self.call(&caller, &client, name, arguments.clone(), &context)
                        .await
                }
            })
            .await?;
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        // Whoever may call may list them; reading checks the user's permission.
        self.caller(&context).await?;
        Ok(ListResourcesResult::with_all_items(resource::listed()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&context).await?;
        let Some(resource) = resource::find(&request.uri) else {
            return Err(ErrorData::resource_not_found(
                format!(
                    "no resource {}; hearth has {}",
                    clip(&request.uri, 200),
                    resource::uris().join(", ")
                ),
                None,
            ));
        };
        let text = resource::read(self, &caller, resource).await?;
        Ok(
            ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
                uri: resource.uri.to_string(),
                mime_type: Some("text/plain".into()),
                text,
                meta: None,
            }])
            .into(),
        )
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let caller = self.caller(&context).await?;
        let prompts = self
            .agents(&caller)
            .into_iter()
            .map(|agent| {
                let description = format!("{} {}: {}", agent.emoji, agent.name, agent.description);
                Prompt::new(agent.id, Some(description), None)
            })
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let caller = self.caller(&context).await?;
        let Some(agent) = self
            .agents(&caller)
            .into_iter()
            .find(|agent| agent.id == request.name)
        else {
            return Err(ErrorData::invalid_params(
                format!(
                    "no prompt `{}`: there is one per agent this client may use (prompts/list)",
                    clip(&request.name, 100)
                ),
                None,
            ));
        };
        let message = PromptMessage::new_text(Role::User, agent.system_prompt.clone());
        let description = format!("{} {}: {}", agent.emoji, agent.name, agent.description);
        Ok(GetPromptResult::new(vec![message])
            .with_description(description)
            .into())
    }
}

/// Serves `caller` over this process's stdin and stdout until the client closes them (stdout
/// carries only MCP; logs go to stderr).
pub async fn serve_stdio(rt: Arc<Runtime>, caller: Caller) -> Result<(), ServeStdioError> {
    use rmcp::ServiceExt;
    let server = McpServer::for_caller(rt, caller);
    let calls = server.calls.clone();
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|err| ServeStdioError(err.to_string()))?;
    // A client that leaves closes stdin and, a few seconds later, sends SIGTERM; rmcp cancels
    // the calls in flight only after waiting for their answers, so SIGTERM cancels them at
    // once (dropping the running service cancels it).
    let ended = tokio::select! {
        ended = running.waiting() => ended.map(drop),
        () = terminated() => Ok(()),
    };
    // The calls are cancelled: one that waited for the owner withdraws its prompt now, which
    // must reach the database before the process ends.
    calls.close();
    if tokio::time::timeout(Duration::from_secs(10), calls.wait())
        .await
        .is_err()
    {
        tracing::warn!("calls still running when the MCP client left were abandoned");
    }
    ended.map_err(|err| ServeStdioError(err.to_string()))?;
    Ok(())
}

/// Returns on SIGTERM (never, where signals cannot be used).
async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            term.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

/// The stdio server could not start or ended abnormally.
#[derive(Debug, thiserror::Error)]
#[error("the MCP session over stdio failed: {0}")]
pub struct ServeStdioError(String);
