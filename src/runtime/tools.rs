//! How the model reaches tools: which schemas it sees (direct or through the meta-tools), and
//! the checks every call passes before it runs — name, agent scope, JSON, JSON Schema, list
//! limits, permission level and rate limits.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::agent::{AgentDef, ToolMode};
use crate::config::Autonomy;
use crate::provider::ToolSpec;
use crate::tool::{Permission, Risk, Tool, ToolInfo, ToolRegistry};

/// Agents in `auto` mode with more tools than this see the meta-tools instead.
const DIRECT_TOOLS_MAX: usize = 12;

/// The tools an agent can reach and how they are shown to the model.
pub struct Toolbox {
    pub tools: Vec<Arc<dyn Tool>>,
    pub meta: bool,
}

impl Toolbox {
    pub fn for_agent(registry: &ToolRegistry, agent: &AgentDef) -> Self {
        let mut tools = registry.for_agent(agent);
        // Old tool results are shortened in long conversations; whoever has tools can fetch
        // one back in full.
        if !tools.is_empty()
            && !tools
                .iter()
                .any(|t| t.info().name == crate::tool::tool_result::NAME)
            && let Some(tool_result) = registry.get(crate::tool::tool_result::NAME)
        {
            tools.push(tool_result);
        }
        let meta = match agent.tool_mode {
            ToolMode::Direct => false,
            ToolMode::Meta => true,
            ToolMode::Auto => tools.len() > DIRECT_TOOLS_MAX,
        };
        // Every agent can keep a visible plan, whatever its tool groups, and sees its schema
        // directly even behind the meta-tools: a plan is worth keeping only when it costs the
        // model no search (issue 48).
        if !tools
            .iter()
            .any(|t| t.info().name == crate::tool::plan::NAME)
            && let Some(update_plan) = registry.get(crate::tool::plan::NAME)
        {
            tools.push(update_plan);
        }
        Self { tools, meta }
    }

    /// Offers the meta-tools instead of every schema when the schemas would take more than a
    /// quarter of a window of `usable_chars` (local models with 4k–8k contexts): the rest of the
    /// window is the conversation's. True when it switched.
    pub fn fit_window(&mut self, usable_chars: usize) -> bool {
        if self.meta || self.tools.is_empty() {
            return false;
        }
        let chars = serde_json::to_string(&self.specs()).map_or(0, |s| s.len());
        self.meta = chars.saturating_mul(4) > usable_chars;
        self.meta
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.info().name == name)
    }

    /// The schemas sent to the model.
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        if self.tools.is_empty() {
            return Arc::default();
        }
        if !self.meta {
            return self.tools.iter().map(|t| t.info().spec()).collect();
        }
        // Each category once: the tools come sorted by name, not by group, and strict schema
        // validators refuse an enum that repeats a value.
        let categories: Vec<&str> = self
            .tools
            .iter()
            .map(|t| t.info().group.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut specs = crate::tool::meta::specs(&categories).to_vec();
        if let Some(update_plan) = self.get(crate::tool::plan::NAME) {
            specs.push(update_plan.info().spec());
        }
        specs.into()
    }

    /// `search_tools`: word-by-word AND over name, description and hidden tags.
    pub fn search(&self, query: &str, category: Option<&str>, include_params: bool) -> String {
        let words: Vec<String> = query
            .to_lowercase()
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let list_all = words.is_empty() || words == ["all"];
        let found: Vec<Value> = self
            .tools
            .iter()
            .map(|t| t.info())
            .filter(|info| category.is_none_or(|c| info.group.eq_ignore_ascii_case(c)))
            .filter(|info| {
                list_all || {
                    let haystack =
                        format!("{} {} {} {}", info.name, info.name.replace('_', " "), info.description, info.tags.join(" "))
                            .to_lowercase();
                    words.iter().all(|w| haystack.contains(w.as_str()))
                }
            })
            .map(|info| {
                let mut entry = json!({"name": info.name, "category": info.group, "description": info.description});
                if include_params {
                    entry["parameters"] = info.parameters.clone();
                }
                entry
            })
            .collect();
        if found.is_empty() {
            return format!("No tool matches {query:?}. Try fewer words, or \"all\".");
        }
        json!({"tools": found, "next": "get_tool_help for details, then use_tool"}).to_string()
    }
}

/// A tool's description and parameters in a form a model reads well.
pub fn tool_help(info: &ToolInfo) -> String {
    let mut text = format!("{}: {}\nParameters:", info.name, info.description);
    let required: Vec<&str> = info.parameters["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match info.parameters["properties"].as_object() {
        Some(properties) if !properties.is_empty() => {
            for (name, schema) in properties {
                let kind = schema["type"].as_str().unwrap_or("any");
                let need = if required.contains(&name.as_str()) {
                    "required"
                } else {
                    "optional"
                };
                text.push_str(&format!("\n- {name} ({kind}, {need})"));
                if let Some(description) = schema["description"].as_str() {
                    text.push_str(&format!(": {description}"));
                }
                if let Some(values) = schema["enum"].as_array() {
                    let values: Vec<String> = values.iter().map(Value::to_string).collect();
                    text.push_str(&format!(" — one of {}", values.join(", ")));
                }
            }
        }
        _ => text.push_str(" none"),
    }
    if let Some(limit) = &info.limit {
        text.push_str(&format!(
            "\n({} defaults to {} and is capped at {})",
            limit.param, limit.default, limit.max
        ));
    }
    if info.requires_confirmation() {
        text.push_str("\nThe user is asked to approve each call.");
    }
    text
}

/// Why a call did not run, for the model and the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Audit outcome: `invalid`, `refused`.
    pub outcome: &'static str,
    pub message: String,
}

impl Refusal {
    pub(crate) fn invalid(message: String) -> Self {
        Self {
            outcome: "invalid",
            message,
        }
    }

    pub(crate) fn refused(message: String) -> Self {
        Self {
            outcome: "refused",
            message,
        }
    }
}

/// What a user may do, read once per batch of calls.
#[derive(Debug, Clone, Copy)]
pub struct UserPolicy {
    pub user_id: Option<i64>,
    pub permission: Permission,
    pub autonomy: Autonomy,
}

impl UserPolicy {
    /// The owner is `admin`; everyone else `write` unless their row says otherwise.
    /// Autonomy: the user's own setting or the config's, capped by the agent's.
    pub fn new(
        user_id: Option<i64>,
        is_owner: bool,
        permission: Option<&str>,
        autonomy: Option<&str>,
        config_autonomy: Autonomy,
        agent_autonomy: Option<Autonomy>,
    ) -> Self {
        let permission = match permission {
            Some("none") => Permission::None,
            Some("read") => Permission::Read,
            Some("write") => Permission::Write,
            Some("execute") => Permission::Execute,
            Some("admin") => Permission::Admin,
            _ if is_owner => Permission::Admin,
            _ => Permission::Write,
        };
        let user_autonomy = match autonomy {
            Some("none") => Autonomy::None,
            Some("low") => Autonomy::Low,
            Some("medium") => Autonomy::Medium,
            Some("high") => Autonomy::High,
            Some("full") => Autonomy::Full,
            _ => config_autonomy,
        };
        let autonomy = agent_autonomy.map_or(user_autonomy, |cap| cap.min(user_autonomy));
        Self {
            user_id,
            permission,
            autonomy,
        }
    }
}

/// Sliding one-minute windows: per user and tool, and for everyone together.
#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<(i64, String), VecDeque<i64>>>,
    global: Mutex<VecDeque<i64>>,
}

const WINDOW_MS: i64 = 60_000;

impl RateLimiter {
    /// Counts a call at `now_ms`, or says how long to wait when a limit is reached.
    pub fn check(
        &self,
        user: i64,
        tool: &str,
        now_ms: i64,
        per_user: u32,
        global: u32,
    ) -> Result<(), String> {
        let mut all = self.global.lock().unwrap_or_else(|p| p.into_inner());
        while all.front().is_some_and(|t| now_ms - t >= WINDOW_MS) {
            all.pop_front();
        }
        if all.len() >= global as usize {
            let wait = all.front().map_or(0, |t| WINDOW_MS - (now_ms - t)) / 1000 + 1;
            return Err(format!(
                "Too many tool calls right now (at most {global} a minute for everyone). Try again in {wait} s."
            ));
        }
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let window = windows.entry((user, tool.to_string())).or_default();
        while window.front().is_some_and(|t| now_ms - t >= WINDOW_MS) {
            window.pop_front();
        }
        if window.len() >= per_user as usize {
            let wait = window.front().map_or(0, |t| WINDOW_MS - (now_ms - t)) / 1000 + 1;
            return Err(format!(
                "Rate limit: at most {per_user} calls of `{tool}` a minute. Try again in {wait} s."
            ));
        }
        window.push_back(now_ms);
        all.push_back(now_ms);
        Ok(())
    }
}

/// A call that passed every check, with its arguments completed (list limits filled in).
pub struct Prepared {
    pub tool: Arc<dyn Tool>,
    pub arguments: Value,
    pub risk: Risk,
}

/// Checks a call of `name` with `arguments` (already JSON) for the agent's toolbox: the tool,
/// its arguments and the user's permission. Rate limits are counted separately, by [`admit`],
/// for calls about to run: a call that first asks for approval uses none until it runs.
pub fn prepare(
    registry: &ToolRegistry,
    toolbox: &Toolbox,
    name: &str,
    mut arguments: Value,
    policy: &UserPolicy,
) -> Result<Prepared, Refusal> {
    let Some(tool) = toolbox.get(name).cloned() else {
        let hint = if toolbox.meta {
            "Use search_tools to find the right tool.".to_string()
        } else {
            let names: Vec<&str> = toolbox
                .tools
                .iter()
                .map(|t| t.info().name.as_str())
                .collect();
            format!(
                "Available tools: {}.",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        };
        return Err(Refusal::invalid(format!("Unknown tool `{name}`. {hint}")));
    };
    let info = tool.info();
    if let Err(problems) = registry.validate(name, &arguments) {
        return Err(Refusal::invalid(format!(
            "Invalid arguments for `{name}`:\n{problems}\n\n{}",
            tool_help(info)
        )));
    }
    if let Some(limit) = &info.limit {
        let value = crate::tool::list_limit(info, &arguments);
        if let Some(object) = arguments.as_object_mut() {
            object.insert(limit.param.clone(), json!(value));
        }
    }
    // A call less risky than the tool's worst case (http_request with GET) needs only the
    // permission of what it actually does.
    let risk = tool.risk(&arguments);
    let needed = if risk < info.risk {
        risk.permission()
    } else {
        info.permission
    };
    if needed > policy.permission {
        return Err(Refusal::refused(format!(
            "The user may not use `{name}` like this (it needs {needed:?} permission; they have {:?}). Tell them; do not retry.",
            policy.permission
        )));
    }
    Ok(Prepared {
        tool,
        arguments,
        risk,
    })
}

/// Counts a prepared call against the per-user and global rate limits (`limits`: per user and
/// tool, for everyone, a minute), or says why it may not run now.
pub fn admit(
    prepared: &Prepared,
    policy: &UserPolicy,
    limiter: &RateLimiter,
    now_ms: i64,
    limits: (u32, u32),
) -> Result<(), Refusal> {
    match policy.user_id {
        Some(user) => limiter
            .check(user, &prepared.tool.info().name, now_ms, limits.0, limits.1)
            .map_err(Refusal::refused),
        None => Ok(()),
    }
}

/// Parses the model's argument text: an object, or nothing at all.
pub fn parse_arguments(name: &str, raw: &str) -> Result<Value, Refusal> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(Refusal::invalid(format!(
            "The arguments of `{name}` must be a JSON object, got: {other}"
        ))),
        Err(err) => Err(Refusal::invalid(format!(
            "The arguments of `{name}` are not valid JSON ({err}). Send a JSON object."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_count_per_user_and_tool_and_free_up_after_a_minute() {
        let limiter = RateLimiter::default();
        for i in 0..3 {
            assert!(limiter.check(1, "add_task", i, 3, 100).is_ok());
        }
        let err = limiter
            .check(1, "add_task", 10, 3, 100)
            .expect_err("limited");
        assert!(err.contains("at most 3 calls of `add_task`"), "{err}");
        assert!(
            limiter.check(2, "add_task", 10, 3, 100).is_ok(),
            "other users are not affected"
        );
        assert!(
            limiter.check(1, "list_tasks", 10, 3, 100).is_ok(),
            "other tools are not affected"
        );
        assert!(
            limiter.check(1, "add_task", 60_001, 3, 100).is_ok(),
            "the window slides"
        );
        let err = limiter.check(3, "x", 60_002, 100, 3).expect_err("global");
        assert!(err.contains("everyone"), "{err}");
    }

    #[test]
    fn policies_take_the_owner_the_row_and_the_agent_cap_into_account() {
        let owner = UserPolicy::new(Some(1), true, None, None, Autonomy::Medium, None);
        assert_eq!(
            (owner.permission, owner.autonomy),
            (Permission::Admin, Autonomy::Medium)
        );
        let guest = UserPolicy::new(
            Some(2),
            false,
            Some("read"),
            Some("full"),
            Autonomy::Medium,
            Some(Autonomy::Low),
        );
        assert_eq!(
            (guest.permission, guest.autonomy),
            (Permission::Read, Autonomy::Low)
        );
        let plain = UserPolicy::new(Some(3), false, None, None, Autonomy::High, None);
        assert_eq!(
            (plain.permission, plain.autonomy),
            (Permission::Write, Autonomy::High)
        );
    }

    #[test]
    fn autonomy_levels_decide_which_risks_ask() {
        assert!(Risk::Safe.needs_confirmation(Autonomy::None));
        assert!(
            Risk::Write.needs_confirmation(Autonomy::Low)
                && !Risk::Safe.needs_confirmation(Autonomy::Low)
        );
        assert!(
            Risk::Destructive.needs_confirmation(Autonomy::Medium)
                && !Risk::Write.needs_confirmation(Autonomy::Medium)
        );
        assert!(
            Risk::Outward.needs_confirmation(Autonomy::High)
                && !Risk::Destructive.needs_confirmation(Autonomy::High)
        );
        assert!(!Risk::Outward.needs_confirmation(Autonomy::Full));
    }

    /// The built-in tools come sorted by name, so their groups interleave; the `category` enum
    /// still names each group once (strict validators refuse repeated enum values).
    #[test]
    fn search_tools_names_each_category_once() {
        let registry = ToolRegistry::with_builtin();
        let toolbox = Toolbox {
            tools: registry.iter().collect(),
            meta: true,
        };
        let specs = toolbox.specs();
        let search = specs
            .iter()
            .find(|s| s.name == "search_tools")
            .expect("search_tools");
        let categories: Vec<&str> = search.parameters["properties"]["category"]["enum"]
            .as_array()
            .expect("enum")
            .iter()
            .map(|v| v.as_str().expect("text"))
            .collect();
        let mut expected: Vec<&str> = crate::tool::KNOWN_GROUPS.to_vec();
        expected.sort_unstable();
        assert_eq!(categories, expected);
        assert!(jsonschema::meta::is_valid(&search.parameters));
    }
}
