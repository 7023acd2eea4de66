//! The configuration file: one TOML file whose every key can be overridden from the
//! environment as `HEARTH_SECTION__KEY`, with secrets given by name (`*_env`) and read from the
//! environment or `$CREDENTIALS_DIRECTORY`.
//!
//! The types here are the user's contract (docs/architecture.md, "Contracts"): keys may be added,
//! never renamed. Unknown keys are rejected so a typo is an error, not a silently ignored setting.

mod host;
mod load;
mod mcp;
mod validate;

pub use hearth_channel::Secret;
pub use load::{
    ConfigError, ConfigErrors, LoadedConfig, Sources, load, load_from_str, process_env,
    search_paths, user_config_path,
};
pub use mcp::{MCP_SEPARATOR, McpRisk, McpServerConfig, check_server_name};
pub use validate::{check_schedule_target, check_unasked_target, parse_identity, warnings};

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The whole configuration file; every section is optional and defaults to working values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub daemon: DaemonConfig,
    #[serde(default)]
    pub providers: Vec<ProviderConfig>,
    #[serde(default)]
    pub router: RouterConfig,
    #[serde(default)]
    pub runtime: RuntimeConfig,
    #[serde(default)]
    pub tools: ToolsConfig,
    /// Long conversations: when older turns are replaced by a stored summary.
    #[serde(default)]
    pub context: ContextConfig,
    /// Spending caps in USD.
    #[serde(default)]
    pub budget: BudgetConfig,
    /// The owner's page on `daemon.http_listen`.
    #[serde(default)]
    pub web: WebConfig,
    /// Speech to text for voice messages; without it voice messages get a short "not set up".
    #[serde(default)]
    pub transcription: Option<TranscriptionConfig>,
    #[serde(default)]
    pub channels: ChannelsConfig,
    #[serde(default)]
    pub schedules: Vec<ScheduleConfig>,
    /// Model Context Protocol servers whose tools hearth offers to agents.
    #[serde(default)]
    pub mcp_servers: Vec<McpServerConfig>,
}

/// `[daemon]`: storage, time, the HTTP endpoint and the owner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// Database and channel state live here. Default: `$XDG_DATA_HOME/hearth`
    /// (`~/.local/share/hearth`), or `./data` when neither variable is set.
    pub data_dir: PathBuf,
    /// `sqlite://…` or `postgres://…`; default `sqlite://<data_dir>/hearth.db`.
    pub database_url: Option<String>,
    /// IANA timezone name for schedules and the time context of prompts. Default: `$TZ`, else
    /// the zone `/etc/localtime` points at, else `/etc/timezone`, else UTC.
    pub timezone: String,
    /// Address of `/healthz` and `/metrics`; empty string disables the HTTP server.
    pub http_listen: String,
    /// Serve the HTTP API (`[channels.http]`) on a `http_listen` other machines can reach; off
    /// by default, so the API is not exposed by a listen address alone.
    pub http_public: bool,
    /// Seconds a client has to send a request's header on `http_listen`, and that a kept-alive
    /// connection may stay idle; then the connection is closed.
    pub http_header_timeout_secs: u64,
    /// Connections `http_listen` keeps open at once. At the limit a new one replaces the oldest
    /// without a request in progress; a few more are always kept for `/healthz`.
    pub http_max_connections: usize,
    /// The owner's identities, `channel:user_id`: one string or a list. They are one user (one
    /// set of tasks, notes, memories …); the owner may decide any confirmation.
    pub owner: Option<Owner>,
    /// One of the owner's identities, `channel:user_id` (e.g. `telegram:42`): a confirmation
    /// prompt raised where no buttons can be shown (email, HTTP, a schedule's unattended run)
    /// is also sent to this chat with that channel's buttons. Deciding in either place decides.
    pub approvals_to: Option<String>,
    /// How many conversations may run turns at the same time.
    pub max_concurrent_conversations: usize,
    /// Seconds SIGTERM waits for running turns before suspending them.
    pub shutdown_grace_secs: u64,
    /// Longest reply, in characters: a model answer beyond it is cut at a natural break with a
    /// short note, so a runaway answer cannot flood (and block) a chat with messages.
    pub max_reply_chars: usize,
    /// The most bytes of attachments hearth downloads for one message (all its files together).
    /// Files are fetched only once the sender proved allowed; one over the rest of the limit is
    /// refused from its declared size before a byte of it is read, and the model is told so.
    pub max_attachment_bytes: u64,
    /// Days a handled inbox entry keeps its content (text, attachment references, threading
    /// headers). After that only what recognises a redelivery is kept: the conversation itself
    /// lives on in the turns' history.
    pub inbox_retention_days: u32,
}

/// 20 MB: a few phone photos, a long voice note.
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 20_000_000;

/// A month of inbound events, for looking into what arrived.
pub const DEFAULT_INBOX_RETENTION_DAYS: u32 = 30;

/// About four Telegram messages: room for any sensible answer.
pub const DEFAULT_MAX_REPLY_CHARS: usize = 16_000;

/// The smallest `max_reply_chars` accepted: a sentence and the note saying it was cut.
pub const MIN_MAX_REPLY_CHARS: usize = 200;

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./data"),
            database_url: None,
            timezone: "UTC".into(),
            http_listen: "127.0.0.1:8787".into(),
            http_public: false,
            http_header_timeout_secs: 10,
            http_max_connections: 512,
            owner: None,
            approvals_to: None,
            max_concurrent_conversations: 16,
            shutdown_grace_secs: 20,
            max_reply_chars: DEFAULT_MAX_REPLY_CHARS,
            max_attachment_bytes: DEFAULT_MAX_ATTACHMENT_BYTES,
            inbox_retention_days: DEFAULT_INBOX_RETENTION_DAYS,
        }
    }
}

impl DaemonConfig {
    /// Every `owner` entry split into channel and platform user id, in the order given; entries
    /// without a `:` are left out (`hearth check` reports them).
    pub fn owner_identities(&self) -> Vec<(&str, &str)> {
        self.owner
            .as_ref()
            .map(|owner| {
                owner
                    .entries()
                    .iter()
                    .filter_map(|entry| entry.split_once(':'))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `approvals_to` split into channel and platform user id (the chat prompts go to); `None`
    /// when unset or without a `:` (`hearth check` reports that).
    pub fn approvals_to(&self) -> Option<(&str, &str)> {
        self.approvals_to.as_deref()?.split_once(':')
    }

    /// The database URL, defaulting to a SQLite file inside `data_dir`.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!("sqlite://{}", self.data_dir.join("hearth.db").display()),
        }
    }
}

/// `daemon.owner`: one identity (`owner = "telegram:1"`, the original form) or a list of them
/// (`owner = ["telegram:1", "email:me@example.org"]`), all belonging to the one owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Owner {
    One(String),
    Many(Vec<String>),
}

impl Owner {
    /// The identities as given, `channel:user_id` each.
    pub fn entries(&self) -> &[String] {
        match self {
            Self::One(entry) => std::slice::from_ref(entry),
            Self::Many(entries) => entries,
        }
    }
}

impl From<&str> for Owner {
    fn from(entry: &str) -> Self {
        Self::One(entry.to_string())
    }
}

impl From<String> for Owner {
    fn from(entry: String) -> Self {
        Self::One(entry)
    }
}

impl From<Vec<String>> for Owner {
    fn from(entries: Vec<String>) -> Self {
        Self::Many(entries)
    }
}

// Hand-written rather than `untagged` so a wrong value is named plainly ("expected an identity
// … or an array of them, found an integer") and a bad list element gets its own index.
impl<'de> Deserialize<'de> for Owner {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Owner;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an identity like \"telegram:123456789\" or an array of them")
            }

            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Owner, E> {
                Ok(Owner::One(value.to_string()))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Owner, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = seq.next_element::<String>()? {
                    entries.push(entry);
                }
                Ok(Owner::Many(entries))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The wire protocol a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Any OpenAI-compatible chat completions API (OpenAI, Ollama, llama.cpp, vLLM, OpenRouter …).
    Openai,
    /// Anthropic's Messages API.
    Anthropic,
}

/// One `[[providers]]` entry: an LLM endpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Unique; fallbacks and agents refer to the provider by it.
    pub name: String,
    pub kind: ProviderKind,
    /// e.g. `http://127.0.0.1:11434/v1`, `https://api.openai.com/v1`, `https://api.anthropic.com`.
    pub base_url: String,
    /// Name of the environment variable (or credential file) holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    pub model: String,
    /// Seconds for one whole request, streaming included.
    #[serde(default = "default_provider_timeout")]
    pub timeout_secs: u64,
    /// Retries of temporary failures before giving up on this provider.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Providers (by name) to try, in order, when this one fails with a timeout, 429 or 5xx.
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// Upper bound on reply tokens (Anthropic requires one).
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Whether the model accepts images in user messages.
    #[serde(default)]
    pub vision: bool,
    /// The model's context window in tokens; unset: from the table of known model families
    /// ([`crate::provider::context_window`]), else 8,192.
    #[serde(default)]
    pub context_window: Option<u32>,
    /// USD per million input (prompt) tokens; 0 for a local model.
    #[serde(default)]
    pub price_input_per_mtok: f64,
    /// USD per million output (completion) tokens.
    #[serde(default)]
    pub price_output_per_mtok: f64,
    /// USD per million input tokens served from the provider's prompt cache; unset: the
    /// input price.
    #[serde(default)]
    pub price_cached_input_per_mtok: Option<f64>,
}

impl ProviderConfig {
    /// A provider as a `[[providers]]` table naming only these four keys reads: every other key
    /// at its default.
    pub fn new(name: &str, kind: ProviderKind, base_url: &str, model: &str) -> Self {
        ProviderConfig {
            name: name.into(),
            kind,
            base_url: base_url.into(),
            api_key_env: None,
            model: model.into(),
            timeout_secs: default_provider_timeout(),
            max_retries: default_max_retries(),
            fallbacks: Vec::new(),
            max_tokens: default_max_tokens(),
            vision: false,
            context_window: None,
            price_input_per_mtok: 0.0,
            price_output_per_mtok: 0.0,
            price_cached_input_per_mtok: None,
        }
    }
}

fn default_provider_timeout() -> u64 {
    120
}
fn default_max_retries() -> u32 {
    2
}
fn default_max_tokens() -> u32 {
    4096
}

/// The agents file inside `daemon.data_dir` when `router.agents_file` is not set.
pub const AGENTS_FILE_NAME: &str = "agents.toml";

/// The file tools' directory inside `daemon.data_dir` when `tools.workspace_dir` is not set.
pub const WORKSPACE_DIR_NAME: &str = "workspace";

/// `[router]`: which agent answers a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterConfig {
    /// The agent for messages no trigger matches.
    pub default_agent: String,
    /// The agents file; when it does not exist the agents shipped in the binary are used.
    /// Default: `agents.toml` in `daemon.data_dir`.
    pub agents_file: PathBuf,
    /// Minutes a conversation keeps its agent without a new keyword match.
    pub sticky_minutes: u64,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            default_agent: "general".into(),
            agents_file: PathBuf::from("./data/agents.toml"),
            sticky_minutes: 30,
        }
    }
}

/// Limits of the agent runtime shared by all agents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
    /// The composed system prompt is cut to this many characters (never the base prompt).
    pub max_prompt_chars: usize,
    /// Token budget of the conversation history sent to the model (estimated at 4 chars/token).
    pub history_tokens: usize,
    /// Seconds one tool call may run.
    pub tool_timeout_secs: u64,
    /// Stream replies and show them while they are generated, where the channel can.
    pub stream: bool,
    /// A turn whose model calls the same tool with the same arguments more often than this is
    /// stopped, with a message to the model and the user.
    pub max_repeated_calls: u32,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_prompt_chars: 24_000,
            history_tokens: 8_000,
            tool_timeout_secs: 30,
            stream: true,
            max_repeated_calls: 3,
        }
    }
}

/// `[context]`: how long conversations are kept within the model's window
/// (docs/long-conversations.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    /// Older turns are summarised once a request would pass this share of the context window
    /// minus the answer's `max_tokens`.
    pub compact_at: f64,
    /// A compaction brings the request down to this share of the same, so the next one is
    /// several turns away.
    pub compact_to: f64,
    /// Turns kept word for word at most; fewer when they do not fit under `compact_to`, never
    /// fewer than the latest one.
    pub keep_turns: usize,
    /// The provider (by name) that writes summaries, e.g. a cheaper model; unset: the agent's.
    pub summary_provider: Option<String>,
    /// Seconds a summary may take before it is given up (and tried again later).
    pub summary_timeout_secs: u64,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            compact_at: 0.6,
            compact_to: 0.35,
            keep_turns: 6,
            summary_provider: None,
            summary_timeout_secs: 60,
        }
    }
}

/// `[budget]`: spending caps in USD, days and months counted in `daemon.timezone`. Unset caps
/// do not limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// Everything together, per day (the owner's `/budget` changes it for today).
    pub daily_usd: Option<f64>,
    /// Everything together, per calendar month.
    pub monthly_usd: Option<f64>,
    /// Each schedule on its own, per day.
    pub schedule_daily_usd: Option<f64>,
    /// The share of a daily or monthly cap at which the owner is told, once.
    pub warn_at: f64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            daily_usd: None,
            monthly_usd: None,
            schedule_daily_usd: None,
            warn_at: 0.8,
        }
    }
}

/// `[web]`: the owner's page (src/web) on `daemon.http_listen`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    /// More names the page may be reached by, besides the listen address and `localhost`: a
    /// reverse proxy's or Tailscale's host name (`hearth.example.org`, `box.tailnet.ts.net`),
    /// with or without a port. Requests for any other `Host` get 421, so a DNS name that an
    /// attacker points at 127.0.0.1 (DNS rebinding) reaches nothing.
    pub hosts: Vec<String>,
    /// How long a login lasts, in hours (`hearth web logout --all` ends every session sooner).
    pub session_hours: u64,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            hosts: Vec::new(),
            session_hours: 24 * 7,
        }
    }
}

/// An OpenAI-compatible `/audio/transcriptions` endpoint (OpenAI, Groq, a local whisper server).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptionConfig {
    /// e.g. `https://api.openai.com/v1`; `/audio/transcriptions` is appended.
    pub base_url: String,
    /// Name of the environment variable (or credential file) holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default = "default_transcription_model")]
    pub model: String,
    #[serde(default = "default_transcription_timeout")]
    pub timeout_secs: u64,
    /// USD per minute of audio, for services that bill by duration (`whisper-1`: 0.006).
    #[serde(default)]
    pub price_per_minute: f64,
    /// USD per million tokens, for services that bill by tokens (`gpt-4o-transcribe`).
    #[serde(default)]
    pub price_input_per_mtok: f64,
    #[serde(default)]
    pub price_output_per_mtok: f64,
}

fn default_transcription_model() -> String {
    "whisper-1".into()
}
fn default_transcription_timeout() -> u64 {
    60
}

/// How much hearth may do without asking (docs/architecture.md, "Autonomy: what asks first"): which
/// tools need an Approve first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Autonomy {
    /// Every tool that changes anything asks first.
    None,
    /// Writes ask too, not only deletions and outward actions.
    Low,
    /// Deletions, outward actions (email, HTTP writes) and unattended schedules ask. The default.
    #[default]
    Medium,
    /// Only outward actions ask.
    High,
    /// Nothing asks. For people who read the audit log.
    Full,
}

/// The tool families an agent's `tool_groups` may name; an MCP server may not take one of these
/// names for its own group.
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

/// The tool catalogue: its limits, the file workspace, web access and confirmations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// The only directory the file tools can read and write. Default: `workspace` in
    /// `daemon.data_dir`.
    pub workspace_dir: PathBuf,
    /// Hosts or addresses (`nas.local`, `192.168.1.10`, `10.0.0.0/8`) the web tools may reach
    /// although they are private or loopback; everything else private is refused (SSRF).
    pub allowed_private_hosts: Vec<String>,
    /// Default autonomy for every user and agent.
    pub autonomy: Autonomy,
    /// Seconds an Approve / Deny prompt stays open.
    pub confirmation_timeout_secs: u64,
    /// Calls one user may make of one tool per minute.
    pub per_user_tool_calls_per_minute: u32,
    /// Tool calls per minute across everyone.
    pub global_calls_per_minute: u32,
    /// `[tools.web_search]`: where the `web_search` tool searches. Without it the tool tells
    /// the model that search is not set up.
    pub web_search: Option<WebSearchConfig>,
}

/// The search service behind the `web_search` tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchBackend {
    /// A SearXNG instance with its JSON API on (`search.formats` includes `json`).
    Searxng,
    /// Brave's Web Search API, with a subscription token.
    Brave,
}

/// `[tools.web_search]`. The owner writes the endpoint, so it is reached even when it is on
/// loopback or the LAN; the model only supplies the words to search for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchConfig {
    pub backend: SearchBackend,
    /// SearXNG: the instance, e.g. `http://127.0.0.1:8888` (required). Brave: defaults to
    /// `https://api.search.brave.com`.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Brave: the variable (or credential) holding the subscription token (required).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Results returned when the model does not ask for a number; at most 20.
    #[serde(default = "default_search_results")]
    pub max_results: u32,
}

/// The most results one search returns (Brave's own limit per request).
pub const MAX_SEARCH_RESULTS: u32 = 20;

fn default_search_results() -> u32 {
    8
}

impl WebSearchConfig {
    /// The endpoint's base URL, the backend's default filled in.
    pub fn base_url(&self) -> Option<&str> {
        match (&self.base_url, self.backend) {
            (Some(url), _) => Some(url.as_str()),
            (None, SearchBackend::Brave) => Some("https://api.search.brave.com"),
            (None, SearchBackend::Searxng) => None,
        }
    }
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            workspace_dir: PathBuf::from("./data/workspace"),
            allowed_private_hosts: Vec::new(),
            autonomy: Autonomy::Medium,
            confirmation_timeout_secs: 600,
            per_user_tool_calls_per_minute: 30,
            global_calls_per_minute: 300,
            web_search: None,
        }
    }
}

/// `[channels.*]`: one optional section per channel crate, generated with the wiring by
/// [`crate::channels`]'s `channels!` list.
pub use crate::channels::ChannelsConfig;

/// What an unattended schedule does when a tool asks for confirmation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnConfirmation {
    #[default]
    Deny,
    Ask,
    Allow,
}

/// One `[[schedules]]` entry: a prompt run by an agent at cron times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleConfig {
    pub name: String,
    /// Cron with a seconds field first: `0 30 7 * * Mon-Fri`.
    pub cron: String,
    /// Defaults to `daemon.timezone`.
    #[serde(default)]
    pub timezone: Option<String>,
    pub agent: String,
    pub prompt: String,
    /// `channel:chat_id`, e.g. `telegram:123456789`.
    pub target: String,
    #[serde(default)]
    pub on_confirmation: OnConfirmation,
    /// With `on_confirmation = "allow"`: the tools that may run unattended without asking;
    /// any other tool that would ask is denied.
    #[serde(default)]
    pub allow_tools: Vec<String>,
    /// A fire missed while hearth was down runs once at start if it is at most this many
    /// minutes old; older ones are recorded as missed.
    #[serde(default = "default_catch_up_minutes")]
    pub catch_up_minutes: u64,
}

fn default_catch_up_minutes() -> u64 {
    60
}
