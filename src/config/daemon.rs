//! `[daemon]`: storage, time, the HTTP endpoint and the owner.

use std::net::SocketAddr;
use std::path::PathBuf;

use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use super::value::{listen, zone};
use super::{Checks, Section};

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
    #[serde(with = "zone")]
    pub timezone: Tz,
    /// Address of `/healthz` and `/metrics`; empty string (`None`) disables the HTTP server.
    #[serde(with = "listen")]
    pub http_listen: Option<SocketAddr>,
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
            timezone: chrono_tz::UTC,
            http_listen: Some(SocketAddr::from(([127, 0, 0, 1], 8787))),
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

impl Section for DaemonConfig {
    // `owner` and `approvals_to` name channels: validate.rs checks them against the channel
    // sections.
    fn check(&self, checks: &mut Checks<'_>) {
        if let Some(url) = &self.database_url {
            // `sqlite:` also admits sqlx's `sqlite::memory:` and `sqlite:relative.db` forms.
            let known = ["sqlite:", "postgres://", "postgresql://"];
            if !known.iter().any(|scheme| url.starts_with(scheme)) {
                checks.problem(
                    "database_url",
                    format!(
                        "`{url}` is not a database URL: expected `sqlite://…` or `postgres://…`"
                    ),
                );
            }
        }
        if !(1..=300).contains(&self.http_header_timeout_secs) {
            checks.problem(
                "http_header_timeout_secs",
                format!(
                    "{} seconds: expected 1 to 300 (a client sends its header in well under a second)",
                    self.http_header_timeout_secs
                ),
            );
        }
        if !(16..=65_536).contains(&self.http_max_connections) {
            checks.problem(
                "http_max_connections",
                format!(
                    "{}: expected 16 to 65536 open connections",
                    self.http_max_connections
                ),
            );
        }
        if self.max_concurrent_conversations == 0 {
            checks.problem(
                "max_concurrent_conversations",
                "must be greater than 0, or no conversation could ever run",
            );
        }
        if self.inbox_retention_days == 0 {
            checks.problem(
                "inbox_retention_days",
                "must be at least 1: a message must keep its content until it has been answered and a little after",
            );
        }
        if self.max_reply_chars < MIN_MAX_REPLY_CHARS {
            checks.problem(
                "max_reply_chars",
                format!(
                    "must be at least {MIN_MAX_REPLY_CHARS}: a reply needs room for a sentence and the note saying it was cut"
                ),
            );
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::config::load_from_str;

    #[test]
    fn timezone_and_listen_address_are_parsed_once_at_load() {
        let text = "[daemon]\ntimezone = \"Asia/Tokyo\"\nhttp_listen = \"[::1]:9000\"\n";
        let config = load_from_str(text, "hearth.toml", &HashMap::new()).expect("valid");
        assert_eq!(config.daemon.timezone, chrono_tz::Asia::Tokyo);
        assert_eq!(
            config.daemon.http_listen,
            Some("[::1]:9000".parse().expect("address"))
        );

        let off = load_from_str(
            "[daemon]\nhttp_listen = \"\"\n",
            "hearth.toml",
            &HashMap::new(),
        );
        assert_eq!(off.expect("valid").daemon.http_listen, None);

        let bad = "[daemon]\ntimezone = 3\nhttp_listen = \"127.0.0.1\"\n";
        let errors = load_from_str(bad, "hearth.toml", &HashMap::new()).expect_err("refused");
        let shown = errors.to_string();
        assert!(
            shown.contains("hearth.toml: daemon.timezone: expected a string, found an integer 3"),
            "{shown}"
        );
        assert!(
            shown.contains("hearth.toml: daemon.http_listen: `127.0.0.1` is not a socket address"),
            "{shown}"
        );
    }
}
