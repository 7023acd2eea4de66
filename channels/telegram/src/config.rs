//! The Telegram channel's settings, as the daemon hands them over.

use std::net::SocketAddr;
use std::time::Duration;

/// The public Bot API server.
pub const DEFAULT_API_URL: &str = "https://api.telegram.org";

/// How the channel receives updates and talks to the Bot API.
#[derive(Clone)]
pub struct TelegramSettings {
    /// The bot token from @BotFather. Never logged: `Debug` prints `<redacted>`.
    pub token: String,
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
            token: token.into(),
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

impl std::fmt::Debug for TelegramSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("token", &"<redacted>")
            .field("api_url", &self.api_url)
            .field("mode", &self.mode)
            .field("max_document_bytes", &self.max_document_bytes)
            .field("poll_timeout_secs", &self.poll_timeout_secs)
            .field("pacing", &self.pacing)
            .finish()
    }
}

/// How updates arrive.
#[derive(Clone, Default)]
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
        secret_token: String,
    },
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Polling => f.write_str("Polling"),
            Mode::Webhook { listen, url, .. } => f
                .debug_struct("Webhook")
                .field("listen", listen)
                .field("url", url)
                .field("secret_token", &"<redacted>")
                .finish(),
        }
    }
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
    use super::*;

    #[test]
    fn debug_leaves_secrets_out() {
        let mut settings = TelegramSettings::new("123456:SECRET-token");
        settings.mode = Mode::Webhook {
            listen: "127.0.0.1:8443".parse().expect("a literal address"),
            url: "https://example.org/tg".into(),
            secret_token: "hook-secret".into(),
        };
        let shown = format!("{settings:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(!shown.contains("hook-secret"), "{shown}");
        assert!(shown.contains("example.org"), "{shown}");
    }
}
