//! The Telegram channel's configuration: the `[channels.telegram]` section of hearth's config
//! file ([`TelegramConfig`]), which `hearth check` checks and `hearth run` builds the channel
//! from, and the [`TelegramSettings`] the channel runs on once the secrets are resolved.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hearth_channel::{
    BuildContext, Channel, ChannelConfig, ChannelError, ConfigProblem, Secret, SecretSource,
    check_secret, check_url_at,
};
use serde::{Deserialize, Serialize};

use crate::{CHANNEL_NAME, TelegramChannel};

/// The public Bot API server.
pub const DEFAULT_API_URL: &str = "https://api.telegram.org";

/// `[channels.telegram]`: a Telegram bot. Holds the names of its secrets, never their values,
/// so its derived `Debug` shows nothing secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramConfig {
    /// The variable (or credential) holding the bot token from @BotFather.
    pub token_env: String,
    /// The Bot API server: the public one, a self-hosted one, a local fake in tests.
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Telegram user ids allowed to talk to hearth (more can be paired later): numbers, quoted
    /// or not (`[42, "43"]`), as other channels' ids are written.
    #[serde(default, deserialize_with = "user_ids")]
    pub allowed_users: Vec<i64>,
    /// `polling` (default) or `webhook` (needs a public HTTPS endpoint).
    #[serde(default)]
    pub mode: TelegramMode,
    /// Webhook mode: where hearth listens for Telegram's requests, e.g. `127.0.0.1:8443`.
    #[serde(default)]
    pub webhook_listen: Option<String>,
    /// Webhook mode: the public HTTPS URL Telegram posts to (a reverse proxy forwards it).
    #[serde(default)]
    pub webhook_url: Option<String>,
    /// Webhook mode: the variable (or credential) holding the secret token Telegram sends back.
    #[serde(default)]
    pub webhook_secret_env: Option<String>,
    /// Keep under Telegram's flood limits (about 1 message a second per chat, 30 overall) before
    /// they are hit. Turn off only for a self-hosted Bot API server without those limits.
    #[serde(default = "default_true")]
    pub pacing: bool,
}

/// A list of Telegram user ids, each a number or a string of one. Each element is read on its
/// own, so an error names its place (`allowed_users[1]`).
fn user_ids<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<i64>, D::Error> {
    struct UserId(i64);
    impl<'de> Deserialize<'de> for UserId {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl serde::de::Visitor<'_> for Visitor {
                type Value = UserId;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a telegram user id (a number, quoted or not)")
                }
                fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<UserId, E> {
                    Ok(UserId(n))
                }
                fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<UserId, E> {
                    i64::try_from(n)
                        .map(UserId)
                        .map_err(|_| E::custom(format!("{n} is too large for a telegram user id")))
                }
                fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<UserId, E> {
                    text.trim().parse::<i64>().map(UserId).map_err(|_| {
                        E::custom(format!(
                            "`{text}` is not a telegram user id: expected a number"
                        ))
                    })
                }
            }
            deserializer.deserialize_any(Visitor)
        }
    }
    Ok(Vec::<UserId>::deserialize(deserializer)?
        .into_iter()
        .map(|id| id.0)
        .collect())
}

fn default_api_url() -> String {
    DEFAULT_API_URL.into()
}

fn default_true() -> bool {
    true
}

/// How `[channels.telegram]` receives updates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TelegramMode {
    /// `getUpdates` long polling.
    #[default]
    Polling,
    /// Telegram POSTs to `webhook_url`.
    Webhook,
}

impl TelegramConfig {
    /// A polling bot whose token is in the variable `token_env`, with every other key at its
    /// default.
    pub fn new(token_env: impl Into<String>) -> Self {
        Self {
            token_env: token_env.into(),
            api_url: default_api_url(),
            allowed_users: Vec::new(),
            mode: TelegramMode::Polling,
            webhook_listen: None,
            webhook_url: None,
            webhook_secret_env: None,
            pacing: true,
        }
    }

    /// The settings the channel runs on, with the token (and webhook secret) resolved.
    pub fn settings(&self, ctx: BuildContext<'_>) -> Result<TelegramSettings, ChannelError> {
        let token = ctx.secret("token_env", &self.token_env)?;
        let mut settings = TelegramSettings::new(token.expose()).with_api_url(&self.api_url);
        if !self.pacing {
            settings.pacing = Pacing::unlimited();
        }
        if self.mode == TelegramMode::Webhook {
            let listen = self
                .webhook_listen
                .as_deref()
                .ok_or_else(|| ChannelError::config("webhook mode needs webhook_listen"))?
                .parse()
                .map_err(|_| {
                    ChannelError::config("webhook_listen is not an address like 127.0.0.1:8443")
                })?;
            let url = self
                .webhook_url
                .clone()
                .ok_or_else(|| ChannelError::config("webhook mode needs webhook_url"))?;
            let secret_name = self
                .webhook_secret_env
                .as_deref()
                .ok_or_else(|| ChannelError::config("webhook mode needs webhook_secret_env"))?;
            let secret_token = ctx.secret("webhook_secret_env", secret_name)?;
            settings.mode = Mode::Webhook {
                listen,
                url,
                secret_token,
            };
        }
        Ok(settings)
    }
}

impl ChannelConfig for TelegramConfig {
    const NAME: &'static str = CHANNEL_NAME;

    fn check(&self, secrets: &dyn SecretSource) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        problems.extend(check_secret("token_env", &self.token_env, secrets));
        problems.extend(check_url_at("api_url", &self.api_url, &["http", "https"]));
        if self.mode == TelegramMode::Webhook {
            match self.webhook_listen.as_deref() {
                Some(listen) if listen.parse::<SocketAddr>().is_ok() => {}
                Some(listen) => problems.push(ConfigProblem::new(
                    "webhook_listen",
                    format!("{listen:?} is not an address like 127.0.0.1:8443"),
                )),
                None => problems.push(ConfigProblem::new(
                    "webhook_listen",
                    "webhook mode needs a listen address",
                )),
            }
            match self.webhook_url.as_deref() {
                Some(public) => {
                    problems.extend(check_url_at("webhook_url", public, &["https"]));
                }
                None => problems.push(ConfigProblem::new(
                    "webhook_url",
                    "webhook mode needs the public https URL",
                )),
            }
            match &self.webhook_secret_env {
                Some(name) => problems.extend(check_secret("webhook_secret_env", name, secrets)),
                None => problems.push(ConfigProblem::new(
                    "webhook_secret_env",
                    "webhook mode needs a secret token (name its environment variable)",
                )),
            }
        }
        problems
    }

    fn allowed_users(&self) -> Vec<String> {
        self.allowed_users.iter().map(i64::to_string).collect()
    }

    fn check_user_id(id: &str) -> Result<(), String> {
        number(id, "user")
    }

    fn check_chat_id(id: &str) -> Result<(), String> {
        number(id, "chat")
    }

    fn build(&self, ctx: BuildContext<'_>) -> Result<Arc<dyn Channel>, ChannelError> {
        Ok(Arc::new(TelegramChannel::new(self.settings(ctx)?)?))
    }
}

/// Telegram user and chat ids are integers (groups' are negative).
fn number(id: &str, what: &str) -> Result<(), String> {
    match id.parse::<i64>() {
        Ok(_) => Ok(()),
        Err(_) => Err(format!(
            "`{id}` is not a {CHANNEL_NAME} {what} id: expected a number"
        )),
    }
}

/// How the channel receives updates and talks to the Bot API.
#[derive(Clone, Debug)]
pub struct TelegramSettings {
    /// The bot token from @BotFather.
    pub token: Secret,
    /// The Bot API base URL without the `/bot<token>` part: the public server, a self-hosted
    /// Bot API server, or a local fake in tests.
    pub api_url: String,
    /// Long polling (the default) or a webhook.
    pub mode: Mode,
    /// Text documents up to this size are downloaded and passed on inline.
    pub max_document_bytes: u64,
    /// How long one `getUpdates` long poll is held open by the server.
    pub poll_timeout_secs: u64,
    /// Outgoing pacing, so Telegram's flood limits are not hit in the first place.
    pub pacing: Pacing,
}

impl TelegramSettings {
    /// Settings for long polling against the public Bot API with the defaults.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: Secret::new(token),
            api_url: DEFAULT_API_URL.to_owned(),
            mode: Mode::Polling,
            max_document_bytes: 200 * 1024,
            poll_timeout_secs: 30,
            pacing: Pacing::default(),
        }
    }

    /// The same settings against another Bot API server (a self-hosted one, a test fake).
    pub fn with_api_url(mut self, api_url: impl Into<String>) -> Self {
        self.api_url = api_url.into();
        self
    }
}

/// How updates arrive.
#[derive(Clone, Debug, Default)]
pub enum Mode {
    /// `getUpdates` long polling; works behind NAT, the usual choice at home.
    #[default]
    Polling,
    /// Telegram POSTs updates to `url`, which must reach the server listening on `listen`.
    Webhook {
        /// Where hearth's webhook server listens.
        listen: SocketAddr,
        /// The public HTTPS URL registered with `setWebhook`.
        url: String,
        /// Sent back by Telegram in `X-Telegram-Bot-Api-Secret-Token`; requests without it are
        /// refused. 1–256 characters of `A-Z a-z 0-9 _ -`.
        secret_token: Secret,
    },
}

/// Limits on outgoing messages and edits. Telegram allows about one message a second per chat
/// (short bursts are fine) and thirty a second overall.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pacing {
    /// Sustained time between two messages to one chat.
    pub per_chat_interval: Duration,
    /// How many messages to one chat may go out back to back before the interval applies.
    pub per_chat_burst: u32,
    /// Messages per second over all chats.
    pub global_per_second: u32,
}

impl Default for Pacing {
    fn default() -> Self {
        Self {
            per_chat_interval: Duration::from_secs(1),
            per_chat_burst: 3,
            global_per_second: 30,
        }
    }
}

impl Pacing {
    /// No pacing at all (tests that are not about pacing).
    pub fn unlimited() -> Self {
        Self {
            per_chat_interval: Duration::ZERO,
            per_chat_burst: u32::MAX,
            global_per_second: u32::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use hearth_channel::testkit::env;

    use super::*;

    /// The section parsed from TOML text, as `hearth` parses it.
    fn section(text: &str) -> TelegramConfig {
        toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// Asserts that checking `text` gives exactly one problem, at `key`, mentioning `message`.
    fn one(text: &str, vars: &[(&str, &str)], key: &str, message: &str) {
        let problems = section(text).check(&env(vars));
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert_eq!(problems[0].key, key, "{problems:#?}");
        assert!(problems[0].message.contains(message), "{problems:#?}");
    }

    // Moved from the daemon's config checks with the type; keys are now relative to the section.
    #[test]
    fn telegram_webhook_needs_its_settings() {
        let env = [("T", "123:abc")];
        one(
            "token_env = \"T\"\nmode = \"webhook\"\nwebhook_url = \"https://bot.example.org/hook\"\nwebhook_secret_env = \"T\"\n",
            &env,
            "webhook_listen",
            "listen address",
        );
        one(
            "token_env = \"T\"\nmode = \"webhook\"\nwebhook_listen = \"127.0.0.1:8443\"\nwebhook_url = \"http://bot.example.org/hook\"\nwebhook_secret_env = \"T\"\n",
            &env,
            "webhook_url",
            "https",
        );
    }

    #[test]
    fn token_and_api_url() {
        one("token_env = \"TG\"\n", &[], "token_env", "TG is not set");
        one(
            "token_env = \"TG\"\napi_url = \"api.telegram.org\"\n",
            &[("TG", "t")],
            "api_url",
            "is not a valid URL",
        );
        one(
            "token_env = \"\"\n",
            &[],
            "token_env",
            "must name an environment variable",
        );
    }

    #[test]
    fn unknown_keys_are_rejected_naming_the_expected_ones() {
        let err = toml::from_str::<TelegramConfig>("tokn_env = \"T\"\n").expect_err("typo");
        assert!(
            err.message().contains(
                "unknown field `tokn_env`, expected one of `token_env`, `api_url`, `allowed_users`"
            ),
            "{err}"
        );
    }

    #[test]
    fn defaults_and_allowlist() {
        let quoted = section("token_env = \"TG\"\nallowed_users = [\"42\", -7]\n");
        assert_eq!(
            quoted.allowed_users(),
            ["42", "-7"],
            "quoted ids, as Discord's"
        );
        let config = section("token_env = \"TG\"\nallowed_users = [42, -7]\n");
        assert_eq!(config.api_url, DEFAULT_API_URL);
        assert_eq!(config.mode, TelegramMode::Polling);
        assert!(config.pacing);
        assert_eq!(config.allowed_users(), ["42", "-7"]);
        assert_eq!(
            TelegramConfig::new("TG"),
            TelegramConfig {
                allowed_users: Vec::new(),
                ..config
            }
        );
    }

    #[test]
    fn user_and_chat_ids_are_numbers() {
        assert_eq!(TelegramConfig::check_user_id("123456789"), Ok(()));
        assert_eq!(TelegramConfig::check_chat_id("-100123"), Ok(()));
        let user = TelegramConfig::check_user_id("me").expect_err("not a number");
        assert_eq!(user, "`me` is not a telegram user id: expected a number");
        let chat = TelegramConfig::check_chat_id("me").expect_err("not a number");
        assert_eq!(chat, "`me` is not a telegram chat id: expected a number");
    }

    #[test]
    fn build_resolves_the_secrets_and_names_a_missing_one() {
        let dir = std::path::Path::new("/nonexistent");
        let webhook = section(
            "token_env = \"TG\"\nmode = \"webhook\"\nwebhook_listen = \"127.0.0.1:8443\"\nwebhook_url = \"https://bot.example.org/hook\"\nwebhook_secret_env = \"HOOK\"\npacing = false\n",
        );
        let vars = env(&[("TG", "123:abc"), ("HOOK", "hook-secret")]);
        let settings = webhook
            .settings(BuildContext::new(&vars, dir))
            .expect("settings");
        assert_eq!(settings.token.expose(), "123:abc");
        assert_eq!(settings.pacing, Pacing::unlimited());
        match &settings.mode {
            Mode::Webhook { secret_token, .. } => assert_eq!(secret_token.expose(), "hook-secret"),
            Mode::Polling => panic!("webhook mode expected"),
        }
        let channel = webhook
            .build(BuildContext::new(&vars, dir))
            .expect("channel");
        assert_eq!(channel.name(), "telegram");

        let only_token = env(&[("TG", "123:abc")]);
        let err = webhook
            .build(BuildContext::new(&only_token, dir))
            .err()
            .expect("the webhook secret is missing");
        assert_eq!(err.kind, hearth_channel::ErrorKind::Config);
        assert!(err.message.starts_with("webhook_secret_env: "), "{err}");
        assert!(err.message.contains("HOOK is not set"), "{err}");
        assert!(!err.message.contains("123:abc"), "{err}");
    }

    #[test]
    fn debug_leaves_secrets_out() {
        let mut settings = TelegramSettings::new("123456:SECRET-token");
        settings.mode = Mode::Webhook {
            listen: "127.0.0.1:8443".parse().expect("a literal address"),
            url: "https://example.org/tg".into(),
            secret_token: Secret::new("hook-secret"),
        };
        let shown = format!("{settings:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(!shown.contains("hook-secret"), "{shown}");
        assert!(shown.contains("example.org"), "{shown}");
    }
}
