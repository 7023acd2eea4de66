//! `[channels.http]`: present means enabled. The API is served on `daemon.http_listen`, beside
//! `/healthz`; the section holds only what the channel itself decides.

use std::sync::Arc;

use hearth_channel::net::Cidr;
use hearth_channel::{
    BuildContext, Channel, ChannelConfig, ChannelError, ConfigProblem, SecretSource,
};
use serde::{Deserialize, Serialize};

use crate::HttpChannel;

/// The channel's name: `[channels.http]`, identities `http:<token name>`.
pub const CHANNEL_NAME: &str = "http";

/// The `[channels.http]` section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// The largest request body accepted, in bytes; a larger one gets 413.
    pub max_body_bytes: usize,
    /// How long a `/v1/chat/completions` answer waits, with keep-alives, for a confirmation
    /// its turn asked for before it ends saying the turn waits (the turn itself goes on
    /// waiting until the confirmation expires). 0: end at once.
    pub confirm_wait_secs: u64,
    /// Event streams (`/turns/{id}/events`, streamed completions) one token may have open at
    /// once; one more gets 429.
    pub max_streams_per_token: usize,
    /// Reverse proxies (address ranges) whose `X-Forwarded-For` names the client: for requests
    /// from them, the API throttles and logs the address the proxies name. Empty (the
    /// default): the header is ignored, as anyone could write it.
    pub trusted_proxies: Vec<Cidr>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            confirm_wait_secs: 120,
            max_streams_per_token: 16,
            trusted_proxies: Vec::new(),
        }
    }
}

impl ChannelConfig for HttpConfig {
    const NAME: &'static str = CHANNEL_NAME;
    // Everything it sends belongs to a client's turn or completion: there is no inbox to put a
    // schedule's answer or an owner notice in.
    const SENDS_UNASKED: bool = false;

    fn check(&self, _secrets: &dyn SecretSource) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        if !(1024..=64 * 1024 * 1024).contains(&self.max_body_bytes) {
            problems.push(ConfigProblem::new(
                "max_body_bytes",
                format!(
                    "{} bytes: expected between 1024 and 67108864",
                    self.max_body_bytes
                ),
            ));
        }
        if self.confirm_wait_secs > 3600 {
            problems.push(ConfigProblem::new(
                "confirm_wait_secs",
                format!(
                    "{} seconds: expected at most 3600 (an hour); a client stops listening long before",
                    self.confirm_wait_secs
                ),
            ));
        }
        if !(1..=1000).contains(&self.max_streams_per_token) {
            problems.push(ConfigProblem::new(
                "max_streams_per_token",
                format!(
                    "{}: expected 1 to 1000 open event streams per token",
                    self.max_streams_per_token
                ),
            ));
        }
        problems
    }

    /// Tokens are the allowlist (`hearth token create`); the section lists no one.
    fn allowed_users(&self) -> Vec<String> {
        Vec::new()
    }

    fn check_user_id(id: &str) -> Result<(), String> {
        check_token_name(id)
    }

    fn build(&self, _ctx: BuildContext<'_>) -> Result<Arc<dyn Channel>, ChannelError> {
        Ok(Arc::new(HttpChannel::new(self.clone())))
    }
}

/// Whether `name` can name a token (and so the identity `http:<name>`): 1–32 of `a-z 0-9 _ -`.
pub fn check_token_name(name: &str) -> Result<(), String> {
    let fits = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if fits {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a token name: expected 1 to 32 of a-z, 0-9, _ and -"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_section_is_enabled_with_defaults() {
        let config: HttpConfig = toml::from_str("").expect("parses");
        assert_eq!(config, HttpConfig::default());
        assert_eq!(config.max_body_bytes, 1024 * 1024);
        assert_eq!(config.confirm_wait_secs, 120);
        assert!(
            config
                .check(&std::collections::HashMap::<String, String>::new())
                .is_empty()
        );
    }

    #[test]
    fn unknown_keys_and_odd_values_are_errors() {
        assert!(toml::from_str::<HttpConfig>("max_body = 3").is_err());
        let config: HttpConfig = toml::from_str(
            "max_body_bytes = 10\nconfirm_wait_secs = 7200\nmax_streams_per_token = 0",
        )
        .expect("parses");
        let keys: Vec<String> = config
            .check(&std::collections::HashMap::<String, String>::new())
            .into_iter()
            .map(|p| p.key)
            .collect();
        assert_eq!(
            keys,
            [
                "max_body_bytes",
                "confirm_wait_secs",
                "max_streams_per_token"
            ]
        );
    }

    #[test]
    fn trusted_proxies_are_address_ranges() {
        let config: HttpConfig =
            toml::from_str("trusted_proxies = [\"172.16.0.0/12\", \"::1/128\"]").expect("parses");
        assert_eq!(config.trusted_proxies.len(), 2);
        let err = toml::from_str::<HttpConfig>("trusted_proxies = [\"10.0.0.1\"]")
            .expect_err("no prefix");
        assert!(
            err.to_string()
                .contains("`10.0.0.1` is not an address range"),
            "{err}"
        );
    }

    #[test]
    fn token_names_are_short_lowercase_words() {
        assert!(check_token_name("open-webui_2").is_ok());
        for bad in ["", "Open", "a b", "x".repeat(33).as_str(), "é"] {
            assert!(check_token_name(bad).is_err(), "{bad}");
        }
    }
}
