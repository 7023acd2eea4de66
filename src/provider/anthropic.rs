//! Client for Anthropic's Messages API: `POST {base_url}/v1/messages`, plain JSON or a stream of
//! named events (`message_start`, `content_block_delta`, … `message_stop`).
//!
//! The API is stricter than OpenAI's about the conversation: roles must alternate starting with
//! `user`, and tool results are content blocks of a user message. [`wire_messages`] folds our
//! flat message list into that shape.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{self, Answer, ErrorContext, EventReader};
use super::{
    ChatMessage, ChatRequest, ChatResponse, ContentPart, Provider, ProviderError,
    ProviderErrorKind, StreamEvent, StreamSender, ToolCall, Usage,
};
use crate::config::{ProviderConfig, Secret};

/// The API version this client speaks.
pub(super) const API_VERSION: &str = "2023-06-01";

/// One Anthropic endpoint; makes exactly one HTTP attempt per `complete`.
pub struct AnthropicProvider {
    url: String,
    model: String,
    max_tokens: u32,
    api_key: Option<Secret>,
    client: reqwest::Client,
    errors: ErrorContext,
}

impl AnthropicProvider {
    /// A client for `config`; `api_key` is sent as `x-api-key` when given.
    pub fn new(config: &ProviderConfig, api_key: Option<Secret>) -> Result<Self, ProviderError> {
        let base = config.base_url.trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            http::join_url(base, "messages")
        } else {
            http::join_url(base, "v1/messages")
        };
        Ok(Self {
            url,
            model: config.model.clone(),
            max_tokens: config.max_tokens,
            client: http::build_client(config)?,
            errors: ErrorContext::new(config, api_key.clone()),
            api_key,
        })
    }

    /// The JSON body for `request`.
    fn body(&self, request: &ChatRequest) -> Value {
        let mut body = json!({
            "model": request.model.as_deref().unwrap_or(&self.model),
            "max_tokens": request.max_tokens.unwrap_or(self.max_tokens),
            "messages": wire_messages(&request.messages),
        });
        if !request.system.is_empty() {
            body["system"] = json!(request.system);
        }
        if let Some(temperature) = request.temperature {
            body["temperature"] = json!(temperature);
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.parameters,
                    })
                })
                .collect();
            body["tools"] = json!(tools);
        }
        if let Some(name) = &request.tool_choice {
            body["tool_choice"] = json!({"type": "tool", "name": name});
        }
        if request.stream {
            body["stream"] = json!(true);
        }
        body
    }

    fn parse_complete(&self, body: &str, model: &str) -> Result<ChatResponse, ProviderError> {
        let message: WireResponse = serde_json::from_str(body)
            .map_err(|err| self.errors.protocol(format!("unreadable answer: {err}")))?;
        let mut answer = ChatResponse {
            stop_reason: message.stop_reason,
            usage: message.usage.map(Usage::from).unwrap_or_default(),
            provider: self.errors.provider.clone(),
            model: message.model.unwrap_or_else(|| model.to_string()),
            ..ChatResponse::default()
        };
        for block in message.content {
            match block {
                Block::Text { text } => answer.text.push_str(&text),
                Block::ToolUse { id, name, input } => answer.tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments: input.to_string(),
                }),
                Block::Other => {}
            }
        }
        Ok(answer)
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        model: &str,
        events: Option<&StreamSender>,
    ) -> Result<ChatResponse, ProviderError> {
        let mut reader = EventReader::new(response);
        let mut answer = ChatResponse {
            provider: self.errors.provider.clone(),
            model: model.to_string(),
            ..ChatResponse::default()
        };
        // Tool-use blocks by block index; arguments arrive as pieces of JSON text.
        let mut calls: BTreeMap<usize, ToolCall> = BTreeMap::new();
        let mut stopped = false;
        while let Some(event) = reader.next().await.map_err(|e| self.errors.transport(e))? {
            if event.data.trim().is_empty() {
                continue;
            }
            let parsed: StreamEventWire = serde_json::from_str(&event.data).map_err(|err| {
                self.errors
                    .protocol(format!("unreadable stream event: {err}"))
            })?;
            match parsed {
                StreamEventWire::MessageStart { message } => {
                    if let Some(m) = message.model {
                        answer.model = m;
                    }
                    if let Some(usage) = message.usage {
                        answer.usage = Usage::from(usage);
                    }
                }
                StreamEventWire::ContentBlockStart {
                    index,
                    content_block,
                } => match content_block {
                    Block::Text { text } => self.add_text(&mut answer, text, events),
                    Block::ToolUse { id, name, .. } => {
                        // The start event carries `input: {}`; the real input follows as deltas.
                        calls.insert(
                            index,
                            ToolCall {
                                id,
                                name,
                                arguments: String::new(),
                            },
                        );
                    }
                    Block::Other => {}
                },
                StreamEventWire::ContentBlockDelta { index, delta } => match delta {
                    BlockDelta::TextDelta { text } => self.add_text(&mut answer, text, events),
                    BlockDelta::InputJsonDelta { partial_json } => match calls.get_mut(&index) {
                        Some(call) => call.arguments.push_str(&partial_json),
                        None => {
                            return Err(self.errors.protocol(format!(
                                "input_json_delta for block {index}, which is not a tool_use"
                            )));
                        }
                    },
                    BlockDelta::Other => {}
                },
                StreamEventWire::MessageDelta { delta, usage } => {
                    if let Some(reason) = delta.stop_reason {
                        answer.stop_reason = Some(reason);
                    }
                    if let Some(usage) = usage {
                        if let Some(output) = usage.output_tokens {
                            answer.usage.output_tokens = output;
                        }
                        if let Some(input) = usage.input_tokens.filter(|n| *n > 0) {
                            answer.usage.input_tokens = input;
                        }
                    }
                }
                StreamEventWire::MessageStop => {
                    stopped = true;
                    break;
                }
                StreamEventWire::Error { error } => {
                    return Err(self.errors.error(
                        stream_error_kind(&error.kind),
                        format!("{}: {}", error.kind, error.message),
                    ));
                }
                StreamEventWire::ContentBlockStop
                | StreamEventWire::Ping
                | StreamEventWire::Other => {}
            }
        }
        if !stopped && answer.stop_reason.is_none() {
            return Err(self.errors.error(
                ProviderErrorKind::Network,
                "stream ended before the answer was complete",
            ));
        }
        answer.tool_calls = calls
            .into_values()
            .map(|mut call| {
                // A tool called without arguments streams no deltas at all.
                if call.arguments.trim().is_empty() {
                    call.arguments = "{}".into();
                }
                call
            })
            .collect();
        Ok(answer)
    }

    fn add_text(&self, answer: &mut ChatResponse, text: String, events: Option<&StreamSender>) {
        if text.is_empty() {
            return;
        }
        if let Some(events) = events {
            // The listener may be gone (the user cancelled); the answer is still wanted.
            let _ = events.send(StreamEvent::Text(text.clone()));
        }
        answer.text.push_str(&text);
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.errors.provider
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&StreamSender>,
    ) -> Result<ChatResponse, ProviderError> {
        let model = request.model.as_deref().unwrap_or(&self.model);
        let mut builder = self
            .client
            .post(&self.url)
            .header("anthropic-version", API_VERSION)
            .json(&self.body(request));
        if let Some(key) = &self.api_key {
            builder = builder.header("x-api-key", key.expose());
        }
        match http::send(builder, &self.errors, request.stream).await? {
            Answer::Stream(response) => self.read_stream(response, model, events).await,
            Answer::Body(body) => self.parse_complete(&body, model),
        }
    }
}

/// Our messages as alternating user/assistant messages with content blocks: tool results
/// become `tool_result` blocks of a user message, and consecutive messages of the same role
/// (several tool results, then the user's next text) are merged into one.
fn wire_messages(messages: &[ChatMessage]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            ChatMessage::User { content } => {
                let blocks = content
                    .iter()
                    .filter_map(|part| match part {
                        // The API rejects empty text blocks.
                        ContentPart::Text { text } if text.is_empty() => None,
                        ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
                        ContentPart::Image { mime, data_base64 } => Some(json!({
                            "type": "image",
                            "source": {"type": "base64", "media_type": mime, "data": data_base64},
                        })),
                    })
                    .collect();
                ("user", blocks)
            }
            ChatMessage::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    // The API wants an object; a model that wrote broken JSON still gets its
                    // call (and our error result) shown back to it.
                    let input = serde_json::from_str::<Value>(&call.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(json!({
                        "type": "tool_use", "id": call.id, "name": call.name, "input": input,
                    }));
                }
                ("assistant", blocks)
            }
            ChatMessage::Tool {
                call_id,
                content,
                is_error,
                ..
            } => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": content,
                    "is_error": is_error,
                })],
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// The kind of an `error` event inside a stream, by Anthropic's error type.
fn stream_error_kind(error_type: &str) -> ProviderErrorKind {
    match error_type {
        "overloaded_error" => ProviderErrorKind::Server { status: 529 },
        "rate_limit_error" => ProviderErrorKind::RateLimited { retry_after: None },
        "invalid_request_error" => ProviderErrorKind::Client { status: 400 },
        "authentication_error" => ProviderErrorKind::Client { status: 401 },
        "permission_error" => ProviderErrorKind::Client { status: 403 },
        "not_found_error" => ProviderErrorKind::Client { status: 404 },
        "request_too_large" => ProviderErrorKind::Client { status: 413 },
        // `api_error` and anything new: trouble on their side.
        _ => ProviderErrorKind::Server { status: 500 },
    }
}

#[derive(Deserialize)]
struct WireResponse {
    model: Option<String>,
    #[serde(default)]
    content: Vec<Block>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Thinking blocks and whatever comes next.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    /// Prompt tokens read from the cache, counted apart from `input_tokens` by Anthropic.
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Self {
        let cached = usage.cache_read_input_tokens.unwrap_or(0);
        Usage {
            input_tokens: usage.input_tokens.unwrap_or(0) + cached,
            output_tokens: usage.output_tokens.unwrap_or(0),
            cached_input_tokens: cached,
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEventWire {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Block,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop,
    MessageDelta {
        delta: MessageDeltaBody,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    model: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    /// `thinking_delta`, `signature_delta`, …
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "not json".into(),
        }
    }

    fn tool(id: &str) -> ChatMessage {
        ChatMessage::Tool {
            call_id: id.into(),
            name: "t".into(),
            content: "r".into(),
            is_error: false,
        }
    }

    #[test]
    fn tool_results_and_next_user_text_merge_into_one_user_message() {
        let messages = vec![
            ChatMessage::user("hi"),
            ChatMessage::Assistant {
                text: "checking".into(),
                tool_calls: vec![call("a"), call("b")],
            },
            tool("a"),
            tool("b"),
            ChatMessage::user("and now?"),
        ];
        let wire = wire_messages(&messages);
        assert_eq!(wire.len(), 3);
        assert_eq!(wire[1]["content"][1]["input"], json!({}));
        let roles: Vec<&str> = wire.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        let blocks = wire[2]["content"].as_array().expect("array");
        assert_eq!(blocks.len(), 3);
        assert_eq!(blocks[0]["tool_use_id"], "a");
        assert_eq!(blocks[1]["tool_use_id"], "b");
        assert_eq!(blocks[2], json!({"type": "text", "text": "and now?"}));
    }

    #[test]
    fn a_forced_tool_is_named_in_tool_choice() {
        let config = crate::config::ProviderConfig::new(
            "claude",
            crate::config::ProviderKind::Anthropic,
            "http://127.0.0.1:9",
            "m",
        );
        let provider = AnthropicProvider::new(&config, None).expect("client builds");
        let mut request = ChatRequest {
            messages: vec![ChatMessage::user("plan it")],
            tools: vec![crate::provider::ToolSpec {
                name: "write_plan".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }]
            .into(),
            ..ChatRequest::default()
        };
        assert!(provider.body(&request).get("tool_choice").is_none());
        request.tool_choice = Some("write_plan".into());
        assert_eq!(
            provider.body(&request)["tool_choice"],
            json!({"type": "tool", "name": "write_plan"})
        );
    }

    #[test]
    fn stream_error_types() {
        assert_eq!(
            stream_error_kind("overloaded_error"),
            ProviderErrorKind::Server { status: 529 }
        );
        assert!(
            !ProviderError::new("p", stream_error_kind("invalid_request_error"), "x")
                .is_temporary()
        );
    }
}
