//! Agent definitions: the agents file (docs/agents.md; how it routes: docs/architecture.md,
//! "Routing"), its validation, and the built-in default set.
//!
//! An agents file is a list of `[[agent]]` tables. It is parsed and validated as a whole so
//! `hearth check` can name every problem at once, each with the file, the agent and the field.

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod version;

/// The agents shipped in the binary, used when the configured agents file does not exist.
pub const SHIPPED_AGENTS: &str = include_str!("../data/agents.toml");

/// The name under which the shipped agents appear in messages.
const SHIPPED_ORIGIN: &str = "built-in agents";

/// One agent: a system prompt, the tools it may use, its model settings and its triggers.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentDef {
    /// Stable identifier, `^[a-z][a-z0-9_-]*$`, used by `/agent ID` and `@ID`.
    pub id: String,
    /// Display name, e.g. "Finance".
    pub name: String,
    /// Shown before the name when the agent changes, e.g. "💰".
    #[serde(default)]
    pub emoji: String,
    /// One line for `/agents` and `hearth agents list`.
    #[serde(default)]
    pub description: String,
    /// The base prompt of every turn this agent runs.
    pub system_prompt: String,
    /// Families of the tool catalogue the agent may use ("tasks", "expenses", …).
    #[serde(default)]
    pub tool_groups: Vec<String>,
    /// Individual tools the agent may use, in addition to its groups.
    #[serde(default)]
    pub tools: Vec<String>,
    /// A provider name from the config, or "default".
    #[serde(default = "default_name")]
    pub provider: String,
    /// A model name for that provider, or "default" for the provider's own model.
    #[serde(default = "default_name")]
    pub model: String,
    /// Most LLM round trips in one turn.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// Most tool calls in one turn.
    #[serde(default = "default_max_tool_calls")]
    pub max_tool_calls: u32,
    /// Sampling temperature, 0..=2; the provider's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// How the model sees the agent's tools: `direct` (every schema), `meta` (search_tools,
    /// get_tool_help, use_tool, batch_use_tool) or `auto` (direct up to 12 tools, else meta).
    #[serde(default)]
    pub tool_mode: ToolMode,
    /// How the agent works a request: `react` (the model and the tools take turns until it
    /// answers) or `plan` (a plan of steps first, each step run on its own with only its tools,
    /// then an answer written from the steps' results).
    #[serde(default, skip_serializing_if = "AgentMode::is_react")]
    pub mode: AgentMode,
    /// Caps how much this agent may do without asking (`none` … `full`); the user's or the
    /// config's autonomy applies when it is lower or this is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autonomy: Option<crate::config::Autonomy>,
    /// What routes a message to this agent.
    #[serde(default)]
    pub triggers: Triggers,
}

/// How an agent's tools are offered to the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    #[default]
    Auto,
    Direct,
    Meta,
}

/// How an agent works a request (`mode` in the agents file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentMode {
    /// One loop: the model and the tools take turns until it answers.
    #[default]
    React,
    /// Plan and execute (`runtime::plan_mode`).
    Plan,
}

impl AgentMode {
    /// Whether this is the default, left out of a stored definition so that agents written
    /// before plan mode keep their version.
    pub fn is_react(&self) -> bool {
        *self == AgentMode::React
    }
}

/// The triggers of an agent.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Triggers {
    /// Words or phrases; matched case-insensitively on word boundaries (see `router`).
    #[serde(default)]
    pub keywords: Vec<String>,
}

fn default_name() -> String {
    "default".to_owned()
}
fn default_max_turns() -> u32 {
    25
}
fn default_max_tool_calls() -> u32 {
    200
}

/// The file as written: a list of `[[agent]]` tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentsFile {
    #[serde(default)]
    agent: Vec<AgentDef>,
}

/// Where an [`AgentSet`] came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentSource {
    /// The configured file did not exist; the built-in agents are used.
    Shipped,
    /// Read from this file.
    File(PathBuf),
}

impl fmt::Display for AgentSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentSource::Shipped => f.write_str(SHIPPED_ORIGIN),
            AgentSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Everything that can go wrong reading, validating or exporting an agents file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentsError {
    /// The file exists but could not be read.
    #[error("cannot read agents file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Not valid TOML, or a key of the wrong type or unknown name.
    #[error("{origin}: {message}")]
    Syntax { origin: String, message: String },
    /// Parsed, but the content breaks the rules; every problem, one per line.
    #[error("{}", problems.join("\n"))]
    Invalid { problems: Vec<String> },
    /// `agents export` without `--force` onto an existing file.
    #[error("{} already exists (use --force to overwrite it)", path.display())]
    Exists { path: PathBuf },
    /// Writing an exported file failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The validated agents, in file order (file order breaks routing ties).
#[derive(Clone, Debug)]
pub struct AgentSet {
    agents: Vec<AgentDef>,
    origin: String,
}

impl AgentSet {
    /// Parses and validates an agents file; `origin` (a path, usually) prefixes every message.
    pub fn parse(text: &str, origin: &str) -> Result<AgentSet, AgentsError> {
        let file: AgentsFile = toml::from_str(text).map_err(|e| AgentsError::Syntax {
            origin: match e.span() {
                Some(span) => {
                    let (line, col) = line_col(text, span.start);
                    format!("{origin}:{line}:{col}")
                }
                None => origin.to_owned(),
            },
            message: e.message().trim().to_owned(),
        })?;
        let set = AgentSet {
            agents: file.agent,
            origin: origin.to_owned(),
        };
        let problems = set.problems();
        if problems.is_empty() {
            Ok(set)
        } else {
            Err(AgentsError::Invalid { problems })
        }
    }

    /// Reads the agents file at `path`, or the built-in agents when it does not exist.
    ///
    /// A file that exists but cannot be read or is invalid is an error, never a silent
    /// fallback: the user wrote it and expects it to be used.
    pub fn load(path: &Path) -> Result<(AgentSet, AgentSource), AgentsError> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let set = AgentSet::parse(&text, &path.display().to_string())?;
                Ok((set, AgentSource::File(path.to_owned())))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Ok((AgentSet::shipped()?, AgentSource::Shipped))
            }
            Err(source) => Err(AgentsError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// The agents shipped in the binary.
    pub fn shipped() -> Result<AgentSet, AgentsError> {
        AgentSet::parse(SHIPPED_AGENTS, SHIPPED_ORIGIN)
    }

    /// Writes the shipped agents file to `path` (see [`export_shipped`]).
    pub fn export_shipped(path: &Path, force: bool) -> Result<(), AgentsError> {
        export_shipped(path, force)
    }

    /// Where the set was read from, as used in messages.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The agent with this id.
    pub fn get(&self, id: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.id == id)
    }

    /// The agent's place in file order.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.agents.iter().position(|a| a.id == id)
    }

    /// All agents in file order.
    pub fn iter(&self) -> std::slice::Iter<'_, AgentDef> {
        self.agents.iter()
    }

    /// All ids in file order.
    pub fn ids(&self) -> Vec<&str> {
        self.agents.iter().map(|a| a.id.as_str()).collect()
    }

    /// Number of agents (at least one once validated).
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// Whether there are no agents; never true for a validated set.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// Checks against the rest of the configuration, for `hearth check`: the default agent
    /// exists and every agent's provider is "default" or one of `provider_names`.
    pub fn validate_against(&self, default_agent: &str, provider_names: &[String]) -> Vec<String> {
        let mut problems = Vec::new();
        if self.get(default_agent).is_none() {
            problems.push(format!(
                "{}: the default agent \"{default_agent}\" is not defined (agents: {})",
                self.origin,
                self.ids().join(", ")
            ));
        }
        for (i, agent) in self.agents.iter().enumerate() {
            if agent.provider != "default" && !provider_names.contains(&agent.provider) {
                let known = if provider_names.is_empty() {
                    "no providers are configured".to_owned()
                } else {
                    format!("configured: {}", provider_names.join(", "))
                };
                problems.push(format!(
                    "{}: provider: unknown provider \"{}\" ({known})",
                    self.at(i),
                    agent.provider
                ));
            }
        }
        problems
    }

    /// Checks tool names against the tool registry, for `hearth check`: every entry of
    /// `tool_groups` must be one of `groups` and every entry of `tools` one of `tools`.
    pub fn validate_tools(&self, groups: &[&str], tools: &[&str]) -> Vec<String> {
        let mut problems = Vec::new();
        for (i, agent) in self.agents.iter().enumerate() {
            for g in agent
                .tool_groups
                .iter()
                .filter(|g| !groups.contains(&g.as_str()))
            {
                problems.push(format!(
                    "{}: tool_groups: unknown group \"{g}\" (known: {})",
                    self.at(i),
                    groups.join(", ")
                ));
            }
            for t in agent.tools.iter().filter(|t| !tools.contains(&t.as_str())) {
                problems.push(format!("{}: tools: unknown tool \"{t}\"", self.at(i)));
            }
        }
        problems
    }

    /// "<origin>: agent #2 (finance)": where a problem is, for messages.
    fn at(&self, index: usize) -> String {
        let id = &self.agents[index].id;
        if id.is_empty() {
            format!("{}: agent #{}", self.origin, index + 1)
        } else {
            format!("{}: agent #{} ({id})", self.origin, index + 1)
        }
    }

    /// Every rule the file breaks, each naming origin, agent and field.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.agents.is_empty() {
            problems.push(format!(
                "{}: no agents defined (add at least one [[agent]] table)",
                self.origin
            ));
        }
        for (i, agent) in self.agents.iter().enumerate() {
            let at = self.at(i);
            let mut bad = |field: &str, problem: String| {
                problems.push(format!("{at}: {field}: {problem}"));
            };
            if agent.id.is_empty() {
                bad("id", "is empty".into());
            } else if !is_valid_id(&agent.id) {
                bad(
                    "id",
                    format!(
                        "\"{}\" must start with a-z and contain only a-z, 0-9, '_' and '-'",
                        agent.id
                    ),
                );
            } else if let Some(first) = self.agents[..i].iter().position(|a| a.id == agent.id) {
                bad("id", format!("duplicate of agent #{}", first + 1));
            }
            if agent.name.trim().is_empty() {
                bad("name", "is empty".into());
            }
            if agent.system_prompt.trim().is_empty() {
                bad("system_prompt", "is empty".into());
            }
            if agent.provider.trim().is_empty() {
                bad("provider", "is empty (use \"default\")".into());
            }
            if agent.model.trim().is_empty() {
                bad("model", "is empty (use \"default\")".into());
            }
            if agent.max_turns == 0 {
                bad("max_turns", "must be at least 1".into());
            }
            if agent.max_tool_calls == 0 {
                bad("max_tool_calls", "must be at least 1".into());
            }
            if let Some(t) = agent.temperature
                && !(0.0..=2.0).contains(&t)
            {
                bad("temperature", format!("{t} is outside 0..=2"));
            }
            for (k, keyword) in agent.triggers.keywords.iter().enumerate() {
                let norm = normalize_keyword(keyword);
                if norm.is_empty() {
                    bad("triggers.keywords", format!("keyword #{} is empty", k + 1));
                } else if agent.triggers.keywords[..k]
                    .iter()
                    .any(|earlier| normalize_keyword(earlier) == norm)
                {
                    bad(
                        "triggers.keywords",
                        format!("\"{}\" appears more than once", keyword.trim()),
                    );
                }
            }
        }
        problems
    }
}

impl<'a> IntoIterator for &'a AgentSet {
    type Item = &'a AgentDef;
    type IntoIter = std::slice::Iter<'a, AgentDef>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Writes [`SHIPPED_AGENTS`] to `path` as a starting point for the user's own file
/// (`hearth agents export [PATH] [--force]`). Refuses to overwrite an existing file unless
/// `force`; creates missing parent directories.
pub fn export_shipped(path: &Path, force: bool) -> Result<(), AgentsError> {
    let write_err = |source| AgentsError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(write_err)?;
    }
    let mut options = OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        // create_new checks and creates in one step, so a file appearing meanwhile is not lost.
        options.create_new(true);
    }
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == io::ErrorKind::AlreadyExists {
            AgentsError::Exists {
                path: path.to_owned(),
            }
        } else {
            write_err(e)
        }
    })?;
    file.write_all(SHIPPED_AGENTS.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(write_err)
}

/// `^[a-z][a-z0-9_-]*$`: safe after `@` and `/agent`, in logs and in the database.
fn is_valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// A keyword as the router compares it, so duplicates are found the way matching sees them.
fn normalize_keyword(keyword: &str) -> String {
    keyword
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// 1-based line and column of a byte offset, for TOML error messages.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[[agent]]
id = "general"
name = "General"
system_prompt = "You help."
"#;

    fn err_text(text: &str) -> String {
        match AgentSet::parse(text, "agents.toml") {
            Ok(_) => panic!("expected an error for:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn shipped_agents_parse_in_file_order() {
        let set = AgentSet::shipped().expect("shipped agents are valid");
        assert_eq!(
            set.ids(),
            [
                "general", "tasks", "notes", "finance", "research", "briefing"
            ]
        );
        assert!(set.validate_against("general", &[]).is_empty());
        let finance = set.get("finance").expect("finance is shipped");
        assert_eq!(finance.emoji, "💰");
        assert!(finance.triggers.keywords.iter().any(|k| k == "paid"));
        assert_eq!(set.position("finance"), Some(3));
        for agent in &set {
            assert!(
                agent.system_prompt.len() > 200,
                "{} prompt too thin",
                agent.id
            );
            assert!(
                !agent.system_prompt.contains('\n'),
                "{} prompt wraps",
                agent.id
            );
        }
    }

    #[test]
    fn shipped_tool_groups_come_from_the_catalogue() {
        let groups = crate::tool::KNOWN_GROUPS;
        let set = AgentSet::shipped().expect("shipped agents are valid");
        assert_eq!(set.validate_tools(groups, &[]), Vec::<String>::new());
        let fewer = set.validate_tools(&groups[..3], &[]);
        assert!(
            fewer
                .iter()
                .any(|p| p.contains("agent #4 (finance): tool_groups"))
        );
    }

    #[test]
    fn the_mode_is_react_unless_set_and_an_unknown_mode_is_refused_with_the_choices() {
        let set = AgentSet::parse(MINIMAL, "t").expect("minimal file is valid");
        assert_eq!(set.get("general").expect("defined").mode, AgentMode::React);
        let planned = format!("{MINIMAL}mode = \"plan\"\n");
        let set = AgentSet::parse(&planned, "t").expect("plan mode is valid");
        assert_eq!(set.get("general").expect("defined").mode, AgentMode::Plan);
        // A react agent's stored definition is what it was before modes existed.
        let json = version::definition_json(set.get("general").expect("defined")).expect("json");
        assert!(json.contains(r#""mode":"plan""#), "{json}");
        let react = AgentSet::parse(MINIMAL, "t").expect("valid");
        let json = version::definition_json(react.get("general").expect("defined")).expect("json");
        assert!(!json.contains(r#""mode""#), "{json}");

        let err = err_text(&format!("{MINIMAL}mode = \"plan-and-execute\"\n"));
        assert!(err.starts_with("agents.toml:6:"), "{err}");
        assert!(err.contains("plan-and-execute"), "{err}");
        assert!(err.contains("`react`") && err.contains("`plan`"), "{err}");
    }

    #[test]
    fn defaults_apply() {
        let set = AgentSet::parse(MINIMAL, "t").expect("minimal file is valid");
        let a = set.get("general").expect("defined");
        assert_eq!(
            (a.provider.as_str(), a.model.as_str()),
            ("default", "default")
        );
        assert_eq!((a.max_turns, a.max_tool_calls), (25, 200));
        assert_eq!(a.temperature, None);
        assert!(a.tools.is_empty() && a.tool_groups.is_empty() && a.triggers.keywords.is_empty());
    }

    #[test]
    fn unknown_fields_are_errors_with_position() {
        let text = format!("{MINIMAL}colour = \"red\"\n");
        let e = err_text(&text);
        assert!(e.starts_with("agents.toml:6:1: "), "{e}");
        assert!(e.contains("colour"), "{e}");
        let e = err_text(
            "[[agent]]\nid = \"a\"\nname = \"A\"\nsystem_prompt = \"x\"\n[agent.triggers]\nwords = [\"x\"]\n",
        );
        assert!(e.contains("words"), "{e}");
    }

    #[test]
    fn every_problem_is_listed_one_per_line() {
        let text = r#"
[[agent]]
id = "Finance"
name = " "
system_prompt = ""
max_turns = 0
max_tool_calls = 0
temperature = 2.5
[agent.triggers]
keywords = ["paid", " ", "PAID", "write  down", "write down"]

[[agent]]
id = "ok"
name = "Ok"
system_prompt = "fine"

[[agent]]
id = "ok"
name = "Ok again"
system_prompt = "fine"

[[agent]]
id = ""
name = "No id"
system_prompt = "fine"
provider = ""
"#;
        let e = err_text(text);
        let lines: Vec<&str> = e.lines().collect();
        let expected = [
            "agents.toml: agent #1 (Finance): id: \"Finance\" must start with a-z",
            "agents.toml: agent #1 (Finance): name: is empty",
            "agents.toml: agent #1 (Finance): system_prompt: is empty",
            "agents.toml: agent #1 (Finance): max_turns: must be at least 1",
            "agents.toml: agent #1 (Finance): max_tool_calls: must be at least 1",
            "agents.toml: agent #1 (Finance): temperature: 2.5 is outside 0..=2",
            "agents.toml: agent #1 (Finance): triggers.keywords: keyword #2 is empty",
            "agents.toml: agent #1 (Finance): triggers.keywords: \"PAID\" appears more than once",
            "agents.toml: agent #1 (Finance): triggers.keywords: \"write down\" appears more than once",
            "agents.toml: agent #3 (ok): id: duplicate of agent #2",
            "agents.toml: agent #4: id: is empty",
            "agents.toml: agent #4: provider: is empty",
        ];
        assert_eq!(lines.len(), expected.len(), "{e}");
        for (line, want) in lines.iter().zip(expected) {
            assert!(
                line.starts_with(want),
                "{line:?} should start with {want:?}"
            );
        }
    }

    #[test]
    fn ids_follow_the_pattern() {
        for good in ["a", "finance", "my-agent_2"] {
            assert!(is_valid_id(good), "{good}");
        }
        for bad in [
            "", "2fast", "-x", "_x", "Finance", "fin ance", "fi@n", "ärger",
        ] {
            assert!(!is_valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn temperature_bounds_are_inclusive() {
        for t in ["0.0", "2.0"] {
            let text = format!("{MINIMAL}temperature = {t}\n");
            assert!(AgentSet::parse(&text, "t").is_ok(), "{t}");
        }
        let e = err_text(&format!("{MINIMAL}temperature = -0.1\n"));
        assert!(e.contains("temperature"), "{e}");
        let e = err_text(&format!("{MINIMAL}temperature = nan\n"));
        assert!(e.contains("temperature"), "{e}");
    }

    #[test]
    fn empty_file_is_an_error() {
        assert!(err_text("").contains("no agents defined"));
    }

    #[test]
    fn validate_against_checks_default_agent_and_providers() {
        let text = format!("{MINIMAL}provider = \"local\"\n");
        let set = AgentSet::parse(&text, "agents.toml").expect("valid");
        let problems = set.validate_against("helper", &[]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("default agent \"helper\" is not defined (agents: general)"));
        assert!(problems[1].starts_with("agents.toml: agent #1 (general): provider: unknown"));
        assert!(
            set.validate_against("general", &["local".into()])
                .is_empty()
        );
    }

    #[test]
    fn load_falls_back_only_when_the_file_is_missing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("agents.toml");

        let (set, source) = AgentSet::load(&path).expect("missing file falls back");
        assert_eq!(source, AgentSource::Shipped);
        assert!(set.get("finance").is_some());

        std::fs::write(&path, MINIMAL).expect("write");
        let (set, source) = AgentSet::load(&path).expect("valid file");
        assert_eq!(source, AgentSource::File(path.clone()));
        assert_eq!(set.ids(), ["general"]);

        std::fs::write(&path, "[[agent]]\nid = \"x\"\n").expect("write");
        let e = AgentSet::load(&path).expect_err("invalid file is an error");
        assert!(
            e.to_string().starts_with(&path.display().to_string()),
            "{e}"
        );

        // A directory exists but cannot be read as a file: an error, not the fallback.
        assert!(matches!(
            AgentSet::load(dir.path()),
            Err(AgentsError::Read { .. })
        ));
    }

    #[test]
    fn export_refuses_to_overwrite_unless_forced() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("sub").join("agents.toml");
        export_shipped(&path, false).expect("fresh export");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            SHIPPED_AGENTS
        );

        std::fs::write(&path, "mine").expect("write");
        let e = AgentSet::export_shipped(&path, false).expect_err("exists");
        assert!(matches!(e, AgentsError::Exists { .. }));
        assert!(e.to_string().contains("--force"));
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "mine");

        export_shipped(&path, true).expect("forced export");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            SHIPPED_AGENTS
        );
    }
}
