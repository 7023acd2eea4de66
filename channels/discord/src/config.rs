//! The Discord channel's configuration: the `[channels.discord]` section of hearth's config file
//! ([`DiscordConfig`]), which `hearth check` checks and `hearth run` builds the channel from,
//! and the [`DiscordSettings`] the channel runs on once the token is resolved.

use std::sync::Arc;
use std::time::Duration;

use hearth_channel::{
    BuildContext, Channel, ChannelConfig, ChannelError, ConfigProblem, Secret, SecretSource,
    check_secret, check_url_at,
};
use serde::{Deserialize, Serialize};

use crate::{CHANNEL_NAME, DiscordChannel};

/// Discord's own API (and the gateway URL it hands out).
pub const DEFAULT_API_URL: &str = "https://discord.com";

/// How long one HTTP request to Discord may take before it fails as a temporary error
/// (serenity's own client has no timeout at all).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the gateway may take to say READY before the channel reports it is still trying.
pub const DEFAULT_READY_PATIENCE: Duration = Duration::from_secs(30);

/// How many gateway events wait for the receive loop at most. Beyond that a message is dropped
/// and read again from the channel's history, so a flood from busy servers costs bounded memory.
pub const DEFAULT_QUEUE_CAPACITY: usize = 512;

/// A Discord id (a "snowflake") as written in the config: a number, or a string of digits
/// (what Discord's "Copy ID" gives and what keeps ids above 2^53 exact in other tools).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DiscordId {
    Number(i64),
    Text(String),
}

impl DiscordId {
    /// The id, or why it is not one.
    pub fn parse(&self) -> Result<u64, String> {
        match self {
            Self::Number(n) if *n > 0 => Ok(n.unsigned_abs()),
            Self::Number(n) => Err(format!(
                "`{n}` is not a Discord id: expected a positive number"
            )),
            Self::Text(text) => snowflake(text).ok_or_else(|| {
                format!("`{text}` is not a Discord id: expected a number like 123456789012345678")
            }),
        }
    }
}

impl From<u64> for DiscordId {
    fn from(id: u64) -> Self {
        Self::Text(id.to_string())
    }
}

/// A snowflake written as digits.
pub(crate) fn snowflake(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u64>().ok().filter(|id| *id > 0)
}

/// `[channels.discord]`: a Discord bot. Holds the name of its token, never the token, so its
/// derived `Debug` shows nothing secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordConfig {
    /// The variable (or credential) holding the bot token from the developer portal.
    pub token_env: String,
    /// Discord's API; another URL is treated as an API proxy (or a local fake in tests): REST
    /// calls go there and the gateway URL is asked from it.
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Discord user ids allowed to talk to hearth (more can be paired later in DMs).
    #[serde(default)]
    pub allowed_users: Vec<DiscordId>,
    /// Server roles whose members may talk to hearth in server channels.
    #[serde(default)]
    pub allowed_roles: Vec<DiscordId>,
    /// Server channels where hearth answers every message from an allowed user, without being
    /// mentioned.
    #[serde(default)]
    pub channels: Vec<DiscordId>,
}

fn default_api_url() -> String {
    DEFAULT_API_URL.into()
}

impl DiscordConfig {
    /// A bot whose token is in the variable `token_env`, with every other key at its default.
    pub fn new(token_env: impl Into<String>) -> Self {
        Self {
            token_env: token_env.into(),
            api_url: default_api_url(),
            allowed_users: Vec::new(),
            allowed_roles: Vec::new(),
            channels: Vec::new(),
        }
    }

    /// The settings the channel runs on, with the token resolved.
    pub fn settings(&self, ctx: BuildContext<'_>) -> Result<DiscordSettings, ChannelError> {
        let token = ctx.secret("token_env", &self.token_env)?;
        let ids = |key: &str, list: &[DiscordId]| {
            list.iter()
                .enumerate()
                .map(|(i, id)| {
                    id.parse()
                        .map_err(|e| ChannelError::config(format!("{key}[{i}]: {e}")))
                })
                .collect::<Result<Vec<u64>, _>>()
        };
        Ok(DiscordSettings {
            token,
            api_url: self.api_url.trim_end_matches('/').to_owned(),
            allowed_users: ids("allowed_users", &self.allowed_users)?,
            allowed_roles: ids("allowed_roles", &self.allowed_roles)?,
            channels: ids("channels", &self.channels)?,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            ready_patience: DEFAULT_READY_PATIENCE,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
        })
    }
}

impl ChannelConfig for DiscordConfig {
    const NAME: &'static str = CHANNEL_NAME;

    fn check(&self, secrets: &dyn SecretSource) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        problems.extend(check_secret("token_env", &self.token_env, secrets));
        problems.extend(check_url_at("api_url", &self.api_url, &["http", "https"]));
        for (key, list) in [
            ("allowed_users", &self.allowed_users),
            ("allowed_roles", &self.allowed_roles),
            ("channels", &self.channels),
        ] {
            for (i, id) in list.iter().enumerate() {
                if let Err(message) = id.parse() {
                    problems.push(ConfigProblem::new(format!("{key}[{i}]"), message));
                }
            }
        }
        problems
    }

    fn allowed_users(&self) -> Vec<String> {
        self.allowed_users
            .iter()
            .filter_map(|id| id.parse().ok())
            .map(|id| id.to_string())
            .collect()
    }

    fn check_user_id(id: &str) -> Result<(), String> {
        snowflake(id)
            .map(|_| ())
            .ok_or_else(|| format!("`{id}` is not a {CHANNEL_NAME} user id: expected a number"))
    }

    /// A channel id, or a user id: a message to a user id goes to the DM with that user
    /// (the two look alike; the adapter tells them apart when Discord knows no such channel).
    fn check_chat_id(id: &str) -> Result<(), String> {
        snowflake(id).map(|_| ()).ok_or_else(|| {
            format!("`{id}` is not a {CHANNEL_NAME} channel or user id: expected a number")
        })
    }

    fn build(&self, ctx: BuildContext<'_>) -> Result<Arc<dyn Channel>, ChannelError> {
        Ok(Arc::new(DiscordChannel::new(self.settings(ctx)?)?))
    }
}

/// What the channel runs on.
#[derive(Clone, Debug)]
pub struct DiscordSettings {
    /// The bot token.
    pub token: Secret,
    /// Discord's API, or a proxy / local fake speaking it (without a trailing slash).
    pub api_url: String,
    /// Users allowed everywhere (DMs and server channels).
    pub allowed_users: Vec<u64>,
    /// Roles whose members are allowed in server channels.
    pub allowed_roles: Vec<u64>,
    /// Server channels answered without a mention.
    pub channels: Vec<u64>,
    /// The timeout of every HTTP request.
    pub request_timeout: Duration,
    /// How long after the start a missing READY is reported as reconnecting.
    pub ready_patience: Duration,
    /// How many gateway events may wait for the receive loop; messages beyond it are read
    /// again from history.
    pub queue_capacity: usize,
}

impl DiscordSettings {
    /// Settings against Discord itself with the defaults.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: Secret::new(token),
            api_url: DEFAULT_API_URL.into(),
            allowed_users: Vec::new(),
            allowed_roles: Vec::new(),
            channels: Vec::new(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            ready_patience: DEFAULT_READY_PATIENCE,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
        }
    }

    /// The same settings against another API URL (a proxy, a local fake).
    pub fn with_api_url(mut self, api_url: impl Into<String>) -> Self {
        self.api_url = api_url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Whether REST goes to Discord itself (serenity's ratelimiter on) rather than to a proxy.
    pub fn is_discord(&self) -> bool {
        self.api_url == DEFAULT_API_URL
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn section(text: &str) -> DiscordConfig {
        toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn defaults_and_ids_as_numbers_or_strings() {
        let config = section(
            "token_env = \"DC\"\nallowed_users = [111111111111111111, \"222222222222222222\"]\nchannels = [\"333\"]\n",
        );
        assert_eq!(config.api_url, DEFAULT_API_URL);
        assert_eq!(
            config.allowed_users(),
            ["111111111111111111", "222222222222222222"]
        );
        let env: HashMap<String, String> = [("DC".to_string(), "t".to_string())].into();
        assert_eq!(config.check(&env), []);
        let settings = config
            .settings(BuildContext::new(
                &env,
                std::path::Path::new("/nonexistent"),
            ))
            .expect("settings");
        assert_eq!(settings.channels, [333]);
        assert!(settings.is_discord());
        assert!(!format!("{settings:?}").contains("\"t\""));
    }

    #[test]
    fn check_names_bad_ids_and_missing_secrets() {
        let config = section(
            "token_env = \"NOPE\"\napi_url = \"ws://x\"\nallowed_users = [\"me\"]\nallowed_roles = [-4]\nchannels = [\"12a\"]\n",
        );
        let env: HashMap<String, String> = HashMap::new();
        let problems = config.check(&env);
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "token_env",
                "api_url",
                "allowed_users[0]",
                "allowed_roles[0]",
                "channels[0]"
            ],
            "{problems:#?}"
        );
        assert!(
            problems[0].message.contains("NOPE is not set"),
            "{problems:?}"
        );
        assert!(problems[2].message.contains("`me` is not a Discord id"));
        assert!(toml::from_str::<DiscordConfig>("token_env = \"x\"\nguild = 1\n").is_err());
    }

    #[test]
    fn owner_and_target_ids_are_snowflakes() {
        assert_eq!(DiscordConfig::check_user_id("111111111111111111"), Ok(()));
        let err = DiscordConfig::check_user_id("bob").expect_err("not a number");
        assert!(err.contains("not a discord user id"), "{err}");
        assert!(DiscordConfig::check_chat_id("0").is_err());
        assert_eq!(DiscordConfig::check_chat_id("42"), Ok(()));
    }
}
