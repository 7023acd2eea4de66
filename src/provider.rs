//! LLM providers: the request and response shapes the runtime speaks, and the clients that
//! translate them to OpenAI-compatible and Anthropic wire formats.
//!
//! Layers, innermost first: a client makes one HTTP attempt ([`openai::OpenAiProvider`],
//! [`anthropic::AnthropicProvider`]); [`retry::Retrying`] repeats temporary failures with
//! backoff, jitter and `Retry-After`; [`fallback::FallbackChain`] moves on to the next provider
//! for timeouts, 429 and 5xx, but not for 400/401/403.

pub mod anthropic;
pub mod fallback;
pub mod openai;
pub mod retry;
mod sse;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// One request to a model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model to use; `None` means the provider's configured model.
    pub model: Option<String>,
    pub system: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// Ask for a server-sent-event stream; text deltas go to the `events` sender.
    pub stream: bool,
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
    pub input_tokens: u64,
    pub output_tokens: u64,
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
