//! Tools the model can call: the [`Tool`] trait, the [`ToolRegistry`] that names and groups
//! them, and the context a call runs in.
//!
//! Built-in tools are registered once at start; MCP servers ([`mcp`]) add theirs as they connect
//! and replace them when they reconnect. An agent sees the tools its `tools` list names plus
//! every tool of its `tool_groups`.
//!
//! Every built-in tool is a [`TypedTool`] ([`typed`]), or a [`StatefulTool`] ([`with_state`])
//! when it keeps state (the web tools' request limits): its argument type is the schema, the
//! parser and the descriptions at once, and no built-in tool writes a schema or reads its
//! arguments by hand. The schema snapshot test (`tool/snapshot.rs`) compares every tool with
//! the hand-written schemas they replaced and lists each intended difference. MCP tools
//! implement [`Tool`] directly: their schemas come from the server.

pub mod background;
pub mod bookmark;
mod builtin;
pub mod calendar;
pub mod common;
pub mod contact;
pub mod expense;
pub mod feeds;
pub mod file;
pub mod goal;
pub mod json_schema;
#[cfg(feature = "email")]
pub mod mail;
pub mod mcp;
pub mod memory;
pub mod meta;
pub mod net;
pub mod note;
pub mod plan;
#[cfg(test)]
mod postgres_tests;
pub mod schedule;
#[cfg(test)]
mod snapshot;
pub mod task;
pub mod time;
pub mod tool_result;
pub mod typed;
pub mod untrusted;
pub mod utility;
pub mod weather;
pub mod web;
pub mod web_search;

pub use builtin::register_builtin;
pub use typed::{StatefulTool, TypedTool, typed, with_state};

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::agent::AgentDef;
use crate::clock::SharedClock;
use crate::config::{Autonomy, Config};
use crate::provider::ToolSpec;
use crate::store::Store;

/// The tool families an agent's `tool_groups` may name.
pub use crate::config::KNOWN_GROUPS;

/// The meta-tools (see `runtime::tools::Toolbox`): a few schemas instead of a hundred. Their
/// names are reserved; no tool may take one.
pub const META_TOOLS: &[&str] = &[
    "search_tools",
    "get_tool_help",
    "use_tool",
    "batch_use_tool",
];

/// What a call can do to the world; with the autonomy setting it decides whether the user is
/// asked first (see [`Risk::needs_confirmation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Risk {
    /// Reads or computes; changes nothing.
    Safe,
    /// Creates or changes the user's own data.
    Write,
    /// Deletes data.
    Destructive,
    /// Acts outside hearth: sends email, writes to a web service, acts unattended later.
    Outward,
}

impl Risk {
    /// Whether a call of this risk waits for Approve at `autonomy`: `none` asks for everything,
    /// `low` for any change, `medium` (the default) for deletions and outward actions, `high` for
    /// outward actions only, `full` never.
    pub fn needs_confirmation(self, autonomy: Autonomy) -> bool {
        match autonomy {
            Autonomy::None => true,
            Autonomy::Low => self >= Risk::Write,
            Autonomy::Medium => self >= Risk::Destructive,
            Autonomy::High => self >= Risk::Outward,
            Autonomy::Full => false,
        }
    }
}

impl Risk {
    /// The permission a call of this risk needs: reads `read`, changes `write`, outward `execute`.
    pub fn permission(self) -> Permission {
        match self {
            Risk::Safe => Permission::Read,
            Risk::Write | Risk::Destructive => Permission::Write,
            Risk::Outward => Permission::Execute,
        }
    }
}

/// Permission levels, lowest first: a user may call tools up to their own level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    None,
    Read,
    Write,
    Execute,
    Admin,
}

/// The size parameter of a list tool: filled in when missing, capped when too high.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListLimit {
    pub param: String,
    pub default: u64,
    pub max: u64,
}

/// What a tool is, as the registry and the model see it.
#[derive(Clone, Debug)]
pub struct ToolInfo {
    /// `^[a-zA-Z][a-zA-Z0-9_]*$`, at most 64 characters.
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object; calls are validated against it before they run.
    pub parameters: Value,
    /// The family it belongs to (`tasks`, `memory`, `utilities` …): its category, and what an
    /// agent's `tool_groups` names.
    pub group: String,
    /// Extra words `search_tools` matches, never shown to the model.
    pub tags: Vec<String>,
    /// The level a user needs to call it.
    pub permission: Permission,
    /// What a call can do; decides confirmations together with the autonomy setting.
    pub risk: Risk,
    /// For list tools: the limit parameter, its default and its cap.
    pub limit: Option<ListLimit>,
    /// Longest a call may run; `None` uses the runtime's default.
    pub timeout: Option<Duration>,
    /// Every call that acts outside hearth ([`Risk::Outward`]) asks the owner first, whatever the
    /// autonomy (also `full`), and no schedule's `on_confirmation = "allow"` lets it run
    /// unattended: sending mail in the owner's name, writing to the owner's outside calendar.
    /// The tool's calls that stay inside hearth (an event in hearth's own calendar) follow the
    /// autonomy as any other.
    pub always_confirm: bool,
}

impl ToolInfo {
    /// A safe, read-level tool; adjust with the builder methods.
    pub fn new(name: &str, group: &str, description: &str, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            group: group.into(),
            tags: Vec::new(),
            permission: Permission::Read,
            risk: Risk::Safe,
            limit: None,
            timeout: None,
            always_confirm: false,
        }
    }

    pub fn tags(mut self, tags: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        self.tags = tags
            .into_iter()
            .map(|tag| tag.as_ref().to_string())
            .collect();
        self
    }

    pub fn permission(mut self, permission: Permission) -> Self {
        self.permission = permission;
        self
    }

    /// Sets the risk, and raises the permission to match (writes need `write`, and so on).
    pub fn risk(mut self, risk: Risk) -> Self {
        self.risk = risk;
        self.permission = self.permission.max(risk.permission());
        self
    }

    pub fn limit(mut self, param: &str, default: u64, max: u64) -> Self {
        self.limit = Some(ListLimit {
            param: param.into(),
            default,
            max,
        });
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Every outward call asks first, whatever the autonomy (see [`ToolInfo::always_confirm`]).
    pub fn always_confirm(mut self) -> Self {
        self.always_confirm = true;
        self
    }

    /// Whether a call of `risk` asks whatever the autonomy and whatever a schedule allows.
    pub fn always_asks(&self, risk: Risk) -> bool {
        self.always_confirm && risk == Risk::Outward
    }

    /// Whether calls ask first at the default autonomy (`medium`).
    pub fn requires_confirmation(&self) -> bool {
        self.asks(self.risk, Autonomy::Medium)
    }

    /// Whether a call of `risk` waits for Approve at `autonomy`: what the risk says, and always
    /// for an outward call of a tool that always asks ([`ToolInfo::always_asks`]).
    pub fn asks(&self, risk: Risk, autonomy: Autonomy) -> bool {
        self.always_asks(risk) || risk.needs_confirmation(autonomy)
    }

    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }
}

/// Where a call happens: who asked, in which conversation, and the daemon's services.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub store: Store,
    pub config: Arc<Config>,
    pub clock: SharedClock,
    pub timezone: chrono_tz::Tz,
    pub user_id: Option<i64>,
    pub conversation_id: i64,
    pub turn_id: i64,
    pub agent_id: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The model passed arguments the tool cannot use; the message tells it what to fix.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool ran and failed; the message is shown to the model.
    #[error("{0}")]
    Failed(String),
}

/// A database failure is shown to the model as it is ("database error: …").
impl From<crate::store::StoreError> for ToolError {
    fn from(err: crate::store::StoreError) -> Self {
        ToolError::Failed(err.to_string())
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn info(&self) -> &ToolInfo;

    /// The risk of this particular call: `http_request` with GET is safe, with POST outward.
    fn risk(&self, _arguments: &Value) -> Risk {
        self.info().risk
    }

    /// The risk of this call in the turn it is made in (see
    /// [`typed::TypedTool::risk_in_turn`]); by default [`Tool::risk`].
    async fn risk_in_turn(&self, _ctx: &ToolContext, arguments: &Value) -> Risk {
        self.risk(arguments)
    }

    /// Runs the call; the returned text is what the model sees as the result.
    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError>;

    /// What a confirmation prompt shows of this call: by default its arguments as JSON
    /// ([`shown_arguments`]). A tool that can say more overrides it: a mail's rendered draft
    /// instead of the arguments, an outside calendar's name and the event a uid stands for after
    /// them. It must show everything the call would act with, since the stored arguments are what
    /// runs once approved. Every asker (the turn's prompt, the MCP server's approval wait, a
    /// background task's) shows this text.
    async fn prompt(&self, _ctx: &ToolContext, arguments: &Value) -> String {
        shown_arguments(arguments)
    }
}

/// A call's arguments as a confirmation prompt shows them by default: pretty JSON in a code
/// block, cut at 1,500 characters.
pub fn shown_arguments(arguments: &Value) -> String {
    let json = serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string());
    format!("```\n{}\n```", crate::text::clip(&json, 1_500))
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error(
        "invalid tool name {0:?}: use letters, digits and _, starting with a letter, at most 64 characters"
    )]
    InvalidName(String),
    #[error("a tool named {0:?} is already registered")]
    Duplicate(String),
    #[error("the parameters of {name:?} are not a valid JSON Schema: {reason}")]
    InvalidSchema { name: String, reason: String },
}

struct Entry {
    tool: Arc<dyn Tool>,
    schema: json_schema::ArgumentSchema,
}

/// Every tool hearth has, by name, with its compiled argument schema.
///
/// Cloning gives another handle to the same registry: tool sources that come and go while hearth
/// runs (MCP servers, [`mcp`]) replace their group's tools in it, and turns see the change at
/// their next step.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Arc<RwLock<BTreeMap<String, Arc<Entry>>>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.read().keys()).finish()
    }
}

pub fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The registry with hearth's built-in tools.
    pub fn with_builtin() -> Self {
        let mut registry = Self::new();
        register_builtin(&mut registry);
        registry
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Entry>>> {
        self.tools.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Entry>>> {
        self.tools.write().unwrap_or_else(|p| p.into_inner())
    }

    /// A name checked and a schema compiled, ready to insert.
    fn entry(tool: Arc<dyn Tool>) -> Result<(String, Entry), RegistryError> {
        let name = tool.info().name.clone();
        if !valid_tool_name(&name) || META_TOOLS.contains(&name.as_str()) {
            return Err(RegistryError::InvalidName(name));
        }
        let schema =
            json_schema::ArgumentSchema::new(&tool.info().parameters).map_err(|reason| {
                RegistryError::InvalidSchema {
                    name: name.clone(),
                    reason,
                }
            })?;
        Ok((name, Entry { tool, schema }))
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let (name, entry) = Self::entry(tool)?;
        let mut tools = self.write();
        if tools.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        tools.insert(name, Arc::new(entry));
        Ok(())
    }

    /// Replaces every tool of `group` with `tools` at once (a tool source reconnected with its
    /// current list). Tools that cannot be registered (bad name or schema, a name another group
    /// has) are left out and returned as errors; the rest are registered.
    pub fn replace_group(&self, group: &str, tools: Vec<Arc<dyn Tool>>) -> Vec<RegistryError> {
        let mut errors = Vec::new();
        let mut entries = Vec::new();
        for tool in tools {
            match Self::entry(tool) {
                Ok(entry) => entries.push(entry),
                Err(err) => errors.push(err),
            }
        }
        let mut registered = self.write();
        registered.retain(|_, e| e.tool.info().group != group);
        for (name, entry) in entries {
            match registered.entry(name) {
                std::collections::btree_map::Entry::Occupied(taken) => {
                    errors.push(RegistryError::Duplicate(taken.key().clone()));
                }
                std::collections::btree_map::Entry::Vacant(free) => {
                    free.insert(Arc::new(entry));
                }
            }
        }
        errors
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.read().get(name).map(|e| e.tool.clone())
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Every tool, sorted by name; a snapshot.
    pub fn iter(&self) -> std::vec::IntoIter<Arc<dyn Tool>> {
        let tools: Vec<Arc<dyn Tool>> = self.read().values().map(|e| e.tool.clone()).collect();
        tools.into_iter()
    }

    /// Checks `arguments` against the tool's JSON Schema; every violation, one per line, with
    /// where it is (`/priority: "huge" is not one of …`).
    pub fn validate(&self, name: &str, arguments: &Value) -> Result<(), String> {
        let Some(entry) = self.read().get(name).cloned() else {
            return Err(format!("unknown tool `{name}`"));
        };
        let problems = entry
            .schema
            .errors(&entry.tool.info().parameters, arguments);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }

    /// The tools an agent may use: those it names and those of its groups, sorted by name.
    pub fn for_agent(&self, agent: &AgentDef) -> Vec<Arc<dyn Tool>> {
        self.read()
            .values()
            .map(|e| &e.tool)
            .filter(|tool| {
                let info = tool.info();
                agent.tools.iter().any(|t| t == &info.name)
                    || agent.tool_groups.iter().any(|g| g == &info.group)
            })
            .cloned()
            .collect()
    }
}

/// The value of a list tool's limit parameter: its default when missing or not a number, its
/// cap when too high, at least 1.
pub fn list_limit(info: &ToolInfo, arguments: &Value) -> i64 {
    let Some(limit) = &info.limit else {
        return i64::MAX;
    };
    let asked = arguments
        .get(&limit.param)
        .and_then(|n| typed::whole_number(n).ok())
        .and_then(|n| u64::try_from(n).ok());
    let value = asked.unwrap_or(limit.default).clamp(1, limit.max.max(1));
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Calling a family's tools by name in unit tests; tools answer JSON.
#[cfg(test)]
pub(crate) mod test_calls {
    use super::{Tool, ToolContext, ToolError};
    use serde_json::Value;
    use std::sync::Arc;

    pub async fn call(
        family: Vec<Arc<dyn Tool>>,
        ctx: &ToolContext,
        name: &str,
        args: Value,
    ) -> Result<Value, ToolError> {
        let tool = family
            .into_iter()
            .find(|t| t.info().name == name)
            .expect("tool exists");
        let text = tool.call(ctx, args).await?;
        Ok(serde_json::from_str(&text).expect("tools answer JSON"))
    }

    /// How many rows `table` holds.
    pub async fn rows(ctx: &ToolContext, table: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
            .fetch_one(ctx.store.pool())
            .await
            .expect("count")
    }

    pub async fn ok(
        family: Vec<Arc<dyn Tool>>,
        ctx: &ToolContext,
        name: &str,
        args: Value,
    ) -> Value {
        call(family, ctx, name, args).await.expect("call succeeds")
    }

    pub async fn err(
        family: Vec<Arc<dyn Tool>>,
        ctx: &ToolContext,
        name: &str,
        args: Value,
    ) -> String {
        call(family, ctx, name, args)
            .await
            .expect_err("call fails")
            .to_string()
    }

    /// `ok`, `err` and `count` for a family's test module: the tools of `$tools()` called by
    /// name, and how many rows `$table` holds.
    macro_rules! family_calls {
        ($tools:path, $table:literal) => {
            async fn ok(
                ctx: &$crate::tool::ToolContext,
                name: &str,
                args: serde_json::Value,
            ) -> serde_json::Value {
                $crate::tool::test_calls::ok($tools(), ctx, name, args).await
            }

            async fn err(
                ctx: &$crate::tool::ToolContext,
                name: &str,
                args: serde_json::Value,
            ) -> String {
                $crate::tool::test_calls::err($tools(), ctx, name, args).await
            }

            async fn count(ctx: &$crate::tool::ToolContext) -> i64 {
                $crate::tool::test_calls::rows(ctx, $table).await
            }
        };
    }
    pub(crate) use family_calls;
}

/// A context for calling tools directly in unit tests: a fresh SQLite database, one user, UTC.
#[cfg(test)]
pub(crate) async fn test_context() -> (ToolContext, tempfile::TempDir) {
    let (store, dir) = crate::store::test_support::temp_store().await;
    (test_context_on(store, dir.path()).await, dir)
}

/// A context like [`test_context`]'s over `store`, with its workspace under `dir`.
#[cfg(test)]
pub(crate) async fn test_context_on(
    store: crate::store::Store,
    dir: &std::path::Path,
) -> ToolContext {
    standalone_context(store, dir, "test")
        .await
        .expect("a user for the tests")
}

/// `ctx` as another known user (`u2`) sees it: for tests that one user's rows stay theirs.
#[cfg(test)]
pub(crate) async fn other_user(ctx: &ToolContext) -> ToolContext {
    let user = ctx
        .store
        .allow_identity("test", "u2", None, "config", false, 0)
        .await
        .expect("a second user");
    let mut other = ctx.clone();
    other.user_id = Some(user.user_id);
    other
}

/// [`test_context`] with its clock stopped at `now`.
#[cfg(test)]
pub(crate) async fn test_context_at(
    now: chrono::DateTime<chrono::Utc>,
) -> (ToolContext, tempfile::TempDir) {
    let (mut ctx, dir) = test_context().await;
    ctx.clock = crate::clock::ManualClock::new(now);
    (ctx, dir)
}

/// A context for calling tools outside any conversation (unit tests, the fuzzer): the owner
/// `u1` of channel `channel` on `store`, a workspace under `dir`, UTC and the system clock.
pub async fn standalone_context(
    store: crate::store::Store,
    dir: &std::path::Path,
    channel: &str,
) -> crate::store::StoreResult<ToolContext> {
    let user = store
        .allow_identity(channel, "u1", None, "config", true, 0)
        .await?;
    let mut config = Config::default();
    config.tools.workspace_dir = dir.join("workspace");
    let clock: SharedClock = Arc::new(crate::clock::SystemClock);
    Ok(ToolContext {
        store,
        config: Arc::new(config),
        clock,
        timezone: chrono_tz::UTC,
        user_id: Some(user.user_id),
        conversation_id: 0,
        turn_id: 0,
        agent_id: channel.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(ToolInfo);

    #[async_trait]
    impl Tool for Named {
        fn info(&self) -> &ToolInfo {
            &self.0
        }
        async fn call(&self, _ctx: &ToolContext, _arguments: Value) -> Result<String, ToolError> {
            Ok(String::new())
        }
    }

    fn named(name: &str) -> Arc<dyn Tool> {
        Arc::new(Named(ToolInfo::new(
            name,
            "test",
            "a test tool",
            serde_json::json!({"type": "object"}),
        )))
    }

    #[test]
    fn list_limits_default_and_cap() {
        let info =
            ToolInfo::new("list_x", "test", "", serde_json::json!({})).limit("limit", 20, 50);
        assert_eq!(list_limit(&info, &serde_json::json!({})), 20);
        assert_eq!(list_limit(&info, &serde_json::json!({"limit": 500})), 50);
        assert_eq!(list_limit(&info, &serde_json::json!({"limit": 0})), 1);
        assert_eq!(list_limit(&info, &serde_json::json!({"limit": "7"})), 7);
    }

    #[test]
    fn names_are_validated_and_duplicates_refused() {
        let mut registry = ToolRegistry::new();
        assert!(registry.register(named("add_task")).is_ok());
        assert_eq!(
            registry.register(named("add_task")),
            Err(RegistryError::Duplicate("add_task".into()))
        );
        for bad in ["", "1abc", "has-dash", "space name", "ü", &"a".repeat(65)] {
            assert!(
                matches!(
                    registry.register(named(bad)),
                    Err(RegistryError::InvalidName(_))
                ),
                "{bad}"
            );
        }
        assert!(registry.register(named(&"a".repeat(64))).is_ok());
        assert!(
            matches!(
                registry.register(named("use_tool")),
                Err(RegistryError::InvalidName(_))
            ),
            "meta-tool names are reserved"
        );
    }

    #[test]
    fn a_group_is_replaced_whole_and_cannot_take_another_groups_names() {
        let mut registry = ToolRegistry::new();
        registry.register(named("add_task")).expect("built-in");
        let in_group = |name: &str| -> Arc<dyn Tool> {
            Arc::new(Named(ToolInfo::new(
                name,
                "home",
                "",
                serde_json::json!({"type": "object"}),
            )))
        };
        let shared = registry.clone();
        assert!(
            shared
                .replace_group("home", vec![in_group("home__on"), in_group("home__off")])
                .is_empty()
        );
        assert!(
            registry.get("home__on").is_some(),
            "clones share the registry"
        );
        let errors =
            shared.replace_group("home", vec![in_group("home__dim"), in_group("add_task")]);
        assert_eq!(errors, vec![RegistryError::Duplicate("add_task".into())]);
        let names: Vec<String> = registry.iter().map(|t| t.info().name.clone()).collect();
        assert_eq!(names, ["add_task", "home__dim"], "the old list is gone");
        assert!(
            registry
                .validate("home__dim", &serde_json::json!({}))
                .is_ok()
        );
        assert!(
            registry
                .validate("home__on", &serde_json::json!({}))
                .is_err()
        );
    }

    #[test]
    fn schemas_are_compiled_and_arguments_checked_against_them() {
        let mut registry = ToolRegistry::new();
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"priority": {"type": "string", "enum": ["low", "high"]}, "n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": false
        });
        let tool = Arc::new(Named(ToolInfo::new("t", "test", "", schema)));
        registry.register(tool).expect("valid schema");
        assert!(
            registry
                .validate("t", &serde_json::json!({"n": 1, "priority": "low"}))
                .is_ok()
        );
        let err = registry
            .validate("t", &serde_json::json!({"priority": "huge", "x": 1}))
            .expect_err("invalid");
        assert!(err.contains("/priority"), "{err}");
        assert!(err.contains("\"n\" is a required property"), "{err}");
        assert_eq!(err.lines().count(), 3, "{err}");

        let bad = Arc::new(Named(ToolInfo::new(
            "bad",
            "test",
            "",
            serde_json::json!({"type": "nonsense"}),
        )));
        assert!(matches!(
            registry.register(bad),
            Err(RegistryError::InvalidSchema { .. })
        ));
    }
}
