//! The configuration file: one TOML file whose every key can be overridden from the
//! environment as `HEARTH_SECTION__KEY`, with secrets given by name (`*_env`) and read from the
//! environment or `$CREDENTIALS_DIRECTORY`.
//!
//! The types here are the user's contract (docs/architecture.md, "Contracts"): keys may be added,
//! never renamed. Unknown keys are rejected so a typo is an error, not a silently ignored setting.
//!
//! Each top-level section is a type in its own file, with its check beside it ([`Section`]); the
//! `sections!` list below is the one place that names them, and generates [`Config`], the
//! top-level keys the loader knows, and the loader's parse and check of each section. Values
//! with a type of their own are parsed once, at load: `daemon.timezone` is a [`chrono_tz::Tz`],
//! `daemon.http_listen` a [`std::net::SocketAddr`]. What spans sections (an owner on a
//! configured channel, a schedule's target, a summary provider that exists) is checked in
//! `validate.rs`.

mod budget;
mod calendars;
mod channels;
mod context;
mod daemon;
mod feeds;
mod host;
mod load;
mod mailboxes;
mod mcp;
mod mcp_server;
mod plans;
mod provider;
mod router;
mod runtime;
mod schedule;
mod tools;
mod transcription;
mod validate;
mod value;
mod weather;
mod web;

pub use budget::BudgetConfig;
pub use calendars::{CalendarConfig, CalendarKind, OWN_CALENDAR};
pub use context::ContextConfig;
pub use daemon::{
    DEFAULT_INBOX_RETENTION_DAYS, DEFAULT_MAX_ATTACHMENT_BYTES, DEFAULT_MAX_REPLY_CHARS,
    DaemonConfig, MIN_MAX_REPLY_CHARS, Owner,
};
pub use feeds::FeedConfig;
pub use hearth_channel::Secret;
pub use load::{
    ConfigError, ConfigErrors, LoadedConfig, Sources, load, load_from_str, process_env,
    search_paths, user_config_path,
};
pub use mailboxes::MailboxConfig;
pub use mcp::{MCP_SEPARATOR, McpRisk, McpServerConfig, check_server_name};
pub use mcp_server::McpServeConfig;
pub use plans::PlansConfig;
pub use provider::{ProviderConfig, ProviderKind};
pub use router::{AGENTS_FILE_NAME, RouterConfig};
pub use runtime::RuntimeConfig;
pub use schedule::{OnConfirmation, ScheduleConfig};
pub use tools::{
    Autonomy, KNOWN_GROUPS, MAX_SEARCH_RESULTS, SearchBackend, ToolsConfig, WORKSPACE_DIR_NAME,
    WebSearchConfig,
};
pub use transcription::TranscriptionConfig;
pub use validate::{check_schedule_target, check_unasked_target, parse_identity, warnings};
pub use weather::{
    OPEN_METEO_GEOCODING_URL, OPEN_METEO_URL, Units, WeatherConfig, WeatherLocation,
};
pub use web::WebConfig;

/// `[channels.*]`: one optional section per channel crate, generated with the wiring by
/// [`crate::channels`]'s `channels!` list.
pub use crate::channels::ChannelsConfig;

use std::collections::HashMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use toml::Value;

use load::{Parse, Parsed, Problem};

/// One top-level section of the file: how it is read, and what it checks of its own values.
trait Section: Sized {
    /// Reads the section from its value in the file; `None` when it did not parse (the problems
    /// say why) and its default stays. A table section is read by serde, every problem inside
    /// it reported; arrays of tables and `[channels]` read their parts one by one.
    fn parse(value: Value, parse: &mut Parse<'_>) -> Option<Self>
    where
        Self: DeserializeOwned,
    {
        parse.table(value)
    }

    /// Reports what is wrong with the section's values, with keys relative to the section.
    fn check(&self, checks: &mut Checks<'_>);
}

/// Where a section's check reports its problems. Keys are relative to the section: `timezone`
/// becomes `daemon.timezone`, `[1].base_url` becomes `providers[1].base_url` (the index as the
/// file counts its entries, also when an earlier one failed to parse), `""` is the section
/// itself.
struct Checks<'a> {
    section: &'static str,
    /// Where the secrets that `*_env` keys name are looked up.
    env: &'a HashMap<String, String>,
    /// For an array of tables: the file's index of each entry that parsed.
    indexes: &'a [usize],
    /// For an array of tables: the names of entries that failed to parse, which references may
    /// still name without a second, misleading error.
    failed: &'a [String],
    problems: &'a mut Vec<Problem>,
}

impl Checks<'_> {
    /// A problem at `key`, relative to the section.
    fn problem(&mut self, key: &str, message: impl Into<String>) {
        let section = self.section;
        let full = match key.strip_prefix('[').and_then(|rest| rest.split_once(']')) {
            Some((index, rest)) => {
                let index = index.parse::<usize>().map_or_else(
                    |_| index.to_string(),
                    |n| self.indexes.get(n).copied().unwrap_or(n).to_string(),
                );
                format!("{section}[{index}]{rest}")
            }
            None if key.is_empty() => section.to_string(),
            None => format!("{section}.{key}"),
        };
        self.problems.push(Problem::new(full, message));
    }

    /// A problem when the secret a `*_env` key at `key` names cannot be found.
    fn secret(&mut self, key: &str, name: &str) {
        if let Some(problem) = hearth_channel::check_secret(key, name, self.env) {
            self.problem(&problem.key, problem.message);
        }
    }
}

/// `sections! { <key>: <type>, … }` generates [`Config`] (one field per top-level key, each
/// defaulting when absent), `Config::KEYS`, and the loader's parse and check of every section
/// through [`Section`]. The key, the field and the name in errors are the same word.
macro_rules! sections {
    ($($(#[$doc:meta])* $key:ident: $section:ty,)*) => {
        /// The whole configuration file; every section is optional and defaults to working
        /// values.
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Config {
            $(
                $(#[$doc])*
                #[serde(default)]
                pub $key: $section,
            )*
        }

        impl Config {
            /// The top-level keys, in the order of the list.
            const KEYS: &[&str] = &[$(stringify!($key)),*];

            /// Reads the section called `key` into its field; `false` when there is no such
            /// section.
            fn parse_section(&mut self, key: &str, value: Value, parse: &mut Parse<'_>) -> bool {
                match key {
                    $(
                        stringify!($key) => {
                            parse.key = stringify!($key);
                            if let Some(section) = <$section as Section>::parse(value, parse) {
                                self.$key = section;
                            }
                        }
                    )*
                    _ => return false,
                }
                true
            }

            /// Every section's check of its own values, in the order of the list.
            fn check_sections(
                &self,
                env: &HashMap<String, String>,
                parsed: &Parsed,
                problems: &mut Vec<Problem>,
            ) {
                $(
                    self.$key.check(&mut Checks {
                        section: stringify!($key),
                        env,
                        indexes: parsed.indexes(stringify!($key)),
                        failed: parsed.failed(stringify!($key)),
                        problems,
                    });
                )*
            }
        }
    };
}

sections! {
    daemon: DaemonConfig,
    providers: Vec<ProviderConfig>,
    router: RouterConfig,
    runtime: RuntimeConfig,
    tools: ToolsConfig,
    /// Long conversations: when older turns are replaced by a stored summary.
    context: ContextConfig,
    /// Spending caps in USD.
    budget: BudgetConfig,
    /// The owner's page on `daemon.http_listen`.
    web: WebConfig,
    /// Speech to text for voice messages; without it voice messages get a short "not set up".
    transcription: Option<TranscriptionConfig>,
    channels: ChannelsConfig,
    schedules: Vec<ScheduleConfig>,
    /// Model Context Protocol servers whose tools hearth offers to agents.
    mcp_servers: Vec<McpServerConfig>,
    /// Limits of background tasks.
    plans: PlansConfig,
    /// The weather tools' place, units and Open-Meteo servers.
    weather: WeatherConfig,
    /// The feeds `read_feeds` reads.
    feeds: Vec<FeedConfig>,
    /// hearth as an MCP server at `/mcp` on `daemon.http_listen`.
    mcp_server: McpServeConfig,
    /// The owner's IMAP mailboxes, for the mail tools.
    mailboxes: Vec<MailboxConfig>,
    /// The owner's outside calendars (CalDAV collections and ICS feeds).
    calendars: Vec<CalendarConfig>,
}
