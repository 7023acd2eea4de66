//! LLM providers: the request and response shapes the runtime speaks, and the clients that
//! translate them to OpenAI-compatible and Anthropic wire formats.
//!
//! Layers, innermost first: a client makes one HTTP attempt ([`openai::OpenAiProvider`],
//! [`anthropic::AnthropicProvider`]); [`retry::Retrying`] repeats temporary failures with
//! backoff, jitter and `Retry-After`; [`fallback::FallbackChain`] moves on to the next provider
//! for timeouts, 429 and 5xx, but not for 400/401/403.

pub mod anthropic;
mod context_window;
mod defaults;
pub mod fallback;
mod http;
pub mod openai;
pub mod probe;
pub mod retry;
mod sse;

pub use context_window::{UNKNOWN_MODEL_WINDOW, context_window, known_window};
pub use defaults::{describe_discovered, effective_providers, effective_providers_with};
pub use probe::{PROBE_TIMEOUT, ProbeFailure, probe_models};

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::clock::SharedClock;
use crate::config::{ProviderConfig, ProviderKind, Secret};

/// One request to a model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model to use; `None` means the provider's configured model.
    pub model: Option<String>,
    pub system: String,
    pub messages: Vec<ChatMessage>,
    /// Shared: a turn sends the same schemas with each of its calls, and every turn of an
    /// agent with many tools the same meta-tools.
    pub tools: std::sync::Arc<[ToolSpec]>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// Ask for a server-sent-event stream; text deltas go to the `events` sender.
    pub stream: bool,
    /// The one tool of `tools` the model must call, when set (plan mode's planner).
    pub tool_choice: Option<String>,
}

/// A message of the conversation as the model sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    User {
        content: Vec<ContentPart>,
    },
    Assistant {
        #[serde(default)]
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answering the assistant's call with the same `call_id`.
    Tool {
        call_id: String,
        name: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
}

impl ChatMessage {
    pub fn user(text: impl Into<String>) -> Self {
        Self::User {
            content: vec![ContentPart::Text { text: text.into() }],
        }
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self::Assistant {
            text: text.into(),
            tool_calls: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text { text: String },
    Image { mime: String, data_base64: String },
}

/// A tool call as the model produced it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id (`call_…`, `toolu_…`), echoed back with the result.
    pub id: String,
    pub name: String,
    /// The arguments exactly as the model wrote them: usually a JSON object, sometimes not.
    pub arguments: String,
}

/// A tool as offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// The model's answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// `stop`, `tool_calls`, `end_turn`, `max_tokens` … as the provider said.
    pub stop_reason: Option<String>,
    /// Which provider and model actually answered (after fallbacks).
    pub provider: String,
    pub model: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Every prompt token, those served from the provider's cache included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of `input_tokens` the provider served from its prompt cache (billed lower).
    #[serde(default)]
    pub cached_input_tokens: u64,
}

/// What a streaming request reports while it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// A new attempt started (after a retry or a fallback): discard text received so far.
    Restart,
    /// More reply text.
    Text(String),
}

pub type StreamSender = mpsc::UnboundedSender<StreamEvent>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderErrorKind {
    /// No complete answer within the provider's timeout.
    Timeout,
    /// Could not connect, or the connection broke.
    Network,
    /// HTTP 429.
    RateLimited { retry_after: Option<Duration> },
    /// HTTP 5xx (and Anthropic's 529 "overloaded").
    Server { status: u16 },
    /// HTTP 4xx other than 429: our request or credentials are wrong; retrying will not help.
    Client { status: u16 },
    /// The answer could not be understood.
    Protocol,
    /// The provider's configuration is unusable (a missing API key, an unknown fallback).
    Config,
}

#[derive(Debug, thiserror::Error)]
#[error("{provider}: {message}")]
pub struct ProviderError {
    pub provider: String,
    pub kind: ProviderErrorKind,
    /// Human-readable, never containing the API key.
    pub message: String,
}

impl ProviderError {
    pub fn new(
        provider: impl Into<String>,
        kind: ProviderErrorKind,
        message: impl Into<String>,
    ) -> Self {
        Self {
            provider: provider.into(),
            kind,
            message: message.into(),
        }
    }

    /// Timeouts, network trouble, 429 and 5xx may succeed when tried again, here or elsewhere;
    /// 4xx and unreadable answers will not.
    pub fn is_temporary(&self) -> bool {
        matches!(
            self.kind,
            ProviderErrorKind::Timeout
                | ProviderErrorKind::Network
                | ProviderErrorKind::RateLimited { .. }
                | ProviderErrorKind::Server { .. }
        )
    }
}

/// Something that answers chat requests: one client, a retrying wrapper, or a fallback chain.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The configured provider name (`local`, `cloud` …), for logs, usage and errors.
    fn name(&self) -> &str;

    /// Answers one request. With `request.stream` set and `events` given, text deltas are sent as
    /// they arrive; the returned response is complete either way.
    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&StreamSender>,
    ) -> Result<ChatResponse, ProviderError>;
}

pub type SharedProvider = Arc<dyn Provider>;

/// The configured providers, from which the runtime asks for a retrying fallback chain by
/// provider name.
pub struct Providers {
    /// In configuration order: the first is `"default"`.
    entries: Vec<(ProviderConfig, SharedProvider)>,
    clock: SharedClock,
}

impl Providers {
    /// Builds a client for every configured provider, reading each `api_key_env` with
    /// [`Secret::resolve`]. A key that is configured but missing is an error naming the variable.
    pub fn from_config(
        configs: &[ProviderConfig],
        clock: SharedClock,
    ) -> Result<Providers, ProviderError> {
        let mut parts = Vec::with_capacity(configs.len());
        for config in configs {
            let key = match &config.api_key_env {
                Some(env) => Some(Secret::resolve(env).map_err(|problem| {
                    ProviderError::new(
                        config.name.clone(),
                        ProviderErrorKind::Config,
                        format!("API key {env}: {problem}"),
                    )
                })?),
                None => None,
            };
            parts.push((config.clone(), key));
        }
        Self::from_parts(parts, clock)
    }

    /// Builds clients from configs and already resolved keys (tests, or keys from elsewhere).
    /// Checks that names are unique and that every fallback names a configured provider.
    pub fn from_parts(
        parts: Vec<(ProviderConfig, Option<Secret>)>,
        clock: SharedClock,
    ) -> Result<Providers, ProviderError> {
        let config_error = |name: &str, message: String| {
            ProviderError::new(name, ProviderErrorKind::Config, message)
        };
        let mut entries: Vec<(ProviderConfig, SharedProvider)> = Vec::with_capacity(parts.len());
        for (config, key) in parts {
            if entries.iter().any(|(c, _)| c.name == config.name) {
                return Err(config_error(
                    &config.name,
                    "provider name used twice".into(),
                ));
            }
            let client: SharedProvider = match config.kind {
                ProviderKind::Openai => Arc::new(openai::OpenAiProvider::new(&config, key)?),
                ProviderKind::Anthropic => {
                    Arc::new(anthropic::AnthropicProvider::new(&config, key)?)
                }
            };
            entries.push((config, client));
        }
        for (config, _) in &entries {
            for fallback in &config.fallbacks {
                if !entries.iter().any(|(c, _)| &c.name == fallback) {
                    return Err(config_error(
                        &config.name,
                        format!("fallback {fallback:?} is not a configured provider"),
                    ));
                }
            }
        }
        Ok(Providers { entries, clock })
    }

    /// The configuration of provider `name` (`"default"`: the first configured one).
    pub fn config(&self, name: &str) -> Option<&ProviderConfig> {
        if name == "default" {
            return self.entries.first().map(|(c, _)| c);
        }
        self.entries
            .iter()
            .find(|(c, _)| c.name == name)
            .map(|(c, _)| c)
    }

    /// The configured provider names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(c, _)| c.name.as_str()).collect()
    }

    /// The chain for provider `name` (`"default"`: the first configured one): that provider,
    /// then its `fallbacks` in order (not theirs in turn), each retrying its temporary failures.
    ///
    /// `model` (`None` or `"default"`: the provider's own) applies to the first link only;
    /// every fallback uses its own configured model, since model names differ between
    /// providers. `None` when no such provider is configured.
    pub fn chain(&self, name: &str, model: Option<&str>) -> Option<SharedProvider> {
        let first = if name == "default" {
            self.entries.first()?
        } else {
            self.entries.iter().find(|(c, _)| c.name == name)?
        };
        let model = model.filter(|m| *m != "default").map(str::to_string);
        let mut links = vec![(self.retrying(first), model)];
        let mut seen = vec![first.0.name.as_str()];
        for fallback in &first.0.fallbacks {
            if seen.contains(&fallback.as_str()) {
                continue;
            }
            if let Some(entry) = self.entries.iter().find(|(c, _)| &c.name == fallback) {
                seen.push(&entry.0.name);
                links.push((self.retrying(entry), Some(entry.0.model.clone())));
            }
        }
        Some(Arc::new(fallback::FallbackChain::new(links)))
    }

    fn retrying(&self, (config, client): &(ProviderConfig, SharedProvider)) -> SharedProvider {
        Arc::new(retry::Retrying::new(
            client.clone(),
            config.max_retries,
            self.clock.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;

    fn config(name: &str, fallbacks: &[&str]) -> ProviderConfig {
        let model = format!("{name}-model");
        ProviderConfig {
            timeout_secs: 5,
            max_retries: 0,
            fallbacks: fallbacks.iter().map(|s| s.to_string()).collect(),
            ..ProviderConfig::new(name, ProviderKind::Openai, "http://127.0.0.1:9/v1", &model)
        }
    }

    #[test]
    fn chains_by_name_and_default() {
        let providers = Providers::from_parts(
            vec![
                (config("a", &["b", "a", "b"]), None),
                (config("b", &[]), None),
            ],
            Arc::new(SystemClock),
        )
        .expect("valid");
        assert_eq!(providers.names(), ["a", "b"]);
        assert_eq!(
            providers
                .chain("default", None)
                .map(|c| c.name().to_string()),
            Some("a".into())
        );
        assert_eq!(
            providers
                .chain("b", Some("x"))
                .map(|c| c.name().to_string()),
            Some("b".into())
        );
        assert!(providers.chain("nope", None).is_none());
    }

    #[test]
    fn bad_configs_are_rejected() {
        let clock: SharedClock = Arc::new(SystemClock);
        let unknown = Providers::from_parts(vec![(config("a", &["zz"]), None)], clock.clone());
        assert!(unknown.err().is_some_and(|e| e.message.contains("zz")));
        let twice = Providers::from_parts(
            vec![(config("a", &[]), None), (config("a", &[]), None)],
            clock.clone(),
        );
        assert!(twice.is_err());
        let mut keyed = config("a", &[]);
        keyed.api_key_env = Some("HEARTH_TEST_SURELY_UNSET_KEY".into());
        let missing = Providers::from_config(&[keyed], clock)
            .err()
            .expect("missing key");
        assert_eq!(missing.kind, ProviderErrorKind::Config);
        assert!(missing.message.contains("HEARTH_TEST_SURELY_UNSET_KEY"));
    }
}
