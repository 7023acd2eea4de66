//! Tools the model can call: the [`Tool`] trait, the [`ToolRegistry`] that names and groups
//! them, and the context a call runs in.
//!
//! Tools are registered once at start. An agent sees the tools its `tools` list names plus every
//! tool of its `tool_groups`.

mod builtin;

pub use builtin::register_builtin;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::agent::AgentDef;
use crate::clock::SharedClock;
use crate::provider::ToolSpec;
use crate::store::Store;

/// The tool families an agent's `tool_groups` may name.
pub const KNOWN_GROUPS: &[&str] = &[
    "tasks",
    "notes",
    "memory",
    "expenses",
    "goals",
    "calendar",
    "contacts",
    "bookmarks",
    "utilities",
    "web",
    "files",
    "schedules",
];

/// What a tool is, as the registry and the model see it.
#[derive(Clone, Debug)]
pub struct ToolInfo {
    /// `^[a-zA-Z][a-zA-Z0-9_]*$`, at most 64 characters.
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// The family it belongs to (`tasks`, `memory`, `utilities` …): what `tool_groups` names.
    pub group: String,
    /// Runs only after the requester approved it in the chat.
    pub requires_confirmation: bool,
    /// Longest a call may run; `None` uses the runtime's default.
    pub timeout: Option<Duration>,
}

impl ToolInfo {
    pub fn new(name: &str, group: &str, description: &str, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            group: group.into(),
            requires_confirmation: false,
            timeout: None,
        }
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

#[async_trait]
pub trait Tool: Send + Sync {
    fn info(&self) -> &ToolInfo;
    /// Runs the call; the returned text is what the model sees as the result.
    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError>;
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error(
        "invalid tool name {0:?}: use letters, digits and _, starting with a letter, at most 64 characters"
    )]
    InvalidName(String),
    #[error("a tool named {0:?} is already registered")]
    Duplicate(String),
}

/// Every tool hearth has, by name.
#[derive(Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
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

    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.info().name.clone();
        if !valid_tool_name(&name) {
            return Err(RegistryError::InvalidName(name));
        }
        if self.tools.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values()
    }

    /// The tools an agent may use: those it names and those of its groups, sorted by name.
    pub fn for_agent(&self, agent: &AgentDef) -> Vec<Arc<dyn Tool>> {
        self.tools
            .values()
            .filter(|tool| {
                let info = tool.info();
                agent.tools.iter().any(|t| t == &info.name)
                    || agent.tool_groups.iter().any(|g| g == &info.group)
            })
            .cloned()
            .collect()
    }
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
    }
}
