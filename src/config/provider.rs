//! `[[providers]]`: the LLM endpoints, each with its model, limits, prices and fallbacks.

use std::collections::HashSet;

use hearth_channel::check_url;
use serde::{Deserialize, Serialize};
use toml::Value;

use super::load::Parse;
use super::{Checks, Section};

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

impl Section for Vec<ProviderConfig> {
    fn parse(value: Value, parse: &mut Parse<'_>) -> Option<Self> {
        parse.array(value)
    }

    fn check(&self, checks: &mut Checks<'_>) {
        let mut seen = HashSet::new();
        for (i, provider) in self.iter().enumerate() {
            let key = |field: &str| format!("[{i}].{field}");
            if provider.name.trim().is_empty() {
                checks.problem(&key("name"), "must not be empty");
            } else if !seen.insert(provider.name.as_str()) {
                checks.problem(
                    &key("name"),
                    format!("duplicate provider name `{}`", provider.name),
                );
            }
            if let Err(message) = check_url(&provider.base_url, &["http", "https"]) {
                checks.problem(&key("base_url"), message);
            }
            if provider.model.trim().is_empty() {
                checks.problem(&key("model"), "must not be empty");
            }
            if provider.timeout_secs == 0 {
                checks.problem(&key("timeout_secs"), "must be greater than 0");
            }
            if provider.max_tokens == 0 {
                checks.problem(&key("max_tokens"), "must be greater than 0");
            }
            for fallback in &provider.fallbacks {
                if *fallback == provider.name {
                    checks.problem(
                        &key("fallbacks"),
                        format!("provider `{fallback}` cannot be its own fallback"),
                    );
                } else if !self.iter().any(|p| p.name == *fallback)
                    && !checks.failed.contains(fallback)
                {
                    checks.problem(
                        &key("fallbacks"),
                        format!("unknown provider `{fallback}`: no [[providers]] has this name"),
                    );
                }
            }
            if let Some(name) = &provider.api_key_env {
                checks.secret(&key("api_key_env"), name);
            }
            if provider.context_window == Some(0) {
                checks.problem(&key("context_window"), "must be greater than 0");
            }
            let prices = [
                ("price_input_per_mtok", Some(provider.price_input_per_mtok)),
                (
                    "price_output_per_mtok",
                    Some(provider.price_output_per_mtok),
                ),
                (
                    "price_cached_input_per_mtok",
                    provider.price_cached_input_per_mtok,
                ),
            ];
            for (field, price) in prices {
                if let Some(price) = price
                    && !(price.is_finite() && price >= 0.0)
                {
                    checks.problem(
                        &key(field),
                        "must be a price in USD per million tokens, 0 or more",
                    );
                }
            }
        }
    }
}
