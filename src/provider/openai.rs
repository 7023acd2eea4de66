//! Client for OpenAI-compatible chat completions APIs (OpenAI, Ollama, llama.cpp server, vLLM,
//! OpenRouter, Groq …): `POST {base_url}/chat/completions`, plain JSON or a server-sent-event
//! stream of `chat.completion.chunk`s ending in `data: [DONE]`.

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

/// One OpenAI-compatible endpoint; makes exactly one HTTP attempt per `complete`.
pub struct OpenAiProvider {
    url: String,
    model: String,
    max_tokens: u32,
    api_key: Option<Secret>,
    client: reqwest::Client,
    errors: ErrorContext,
}

impl OpenAiProvider {
    /// A client for `config`; `api_key` is sent as `Authorization: Bearer` when given.
    pub fn new(config: &ProviderConfig, api_key: Option<Secret>) -> Result<Self, ProviderError> {
        Ok(Self {
            url: http::join_url(&config.base_url, "chat/completions"),
            model: config.model.clone(),
            max_tokens: config.max_tokens,
            client: http::build_client(config)?,
            errors: ErrorContext::new(config, api_key.clone()),
            api_key,
        })
    }

    /// The JSON body for `request`.
    fn body(&self, request: &ChatRequest) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        messages.extend(request.messages.iter().map(wire_message));
        let mut body = json!({
            "model": request.model.as_deref().unwrap_or(&self.model),
            "messages": messages,
            "max_tokens": request.max_tokens.unwrap_or(self.max_tokens),
        });
        if let Some(temperature) = request.temperature {
            body["temperature"] = json!(temperature);
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.parameters,
                        }
                    })
                })
                .collect();
            body["tools"] = json!(tools);
        }
        if let Some(name) = &request.tool_choice {
            body["tool_choice"] = json!({"type": "function", "function": {"name": name}});
        }
        if request.stream {
            body["stream"] = json!(true);
            // Without this, streamed answers carry no token counts.
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    fn parse_complete(&self, body: &str, model: &str) -> Result<ChatResponse, ProviderError> {
        let completion: Completion = serde_json::from_str(body)
            .map_err(|err| self.errors.protocol(format!("unreadable answer: {err}")))?;
        let choice = completion
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| self.errors.protocol("answer has no choices"))?;
        let tool_calls = choice
            .message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: call.id.unwrap_or_else(|| format!("call_{i}")),
                name: call.function.name,
                arguments: arguments_text(call.function.arguments),
            })
            .collect();
        Ok(ChatResponse {
            text: choice.message.content.unwrap_or_default(),
            tool_calls,
            usage: completion.usage.map(Usage::from).unwrap_or_default(),
            stop_reason: choice.finish_reason,
            provider: self.errors.provider.clone(),
            model: completion.model.unwrap_or_else(|| model.to_string()),
        })
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
        let mut calls: BTreeMap<usize, ToolCall> = BTreeMap::new();
        let mut done = false;
        while let Some(event) = reader.next().await.map_err(|e| self.errors.transport(e))? {
            let data = event.data.trim();
            if data == "[DONE]" {
                done = true;
                break;
            }
            if data.is_empty() {
                continue;
            }
            let chunk: Chunk = serde_json::from_str(data).map_err(|err| {
                self.errors
                    .protocol(format!("unreadable stream chunk: {err}"))
            })?;
            if let Some(error) = chunk.error {
                // Errors after the stream started (OpenRouter, vLLM) come from upstream trouble.
                let message = error.message.unwrap_or_else(|| "error in stream".into());
                return Err(self
                    .errors
                    .error(ProviderErrorKind::Server { status: 500 }, message));
            }
            if let Some(m) = chunk.model {
                answer.model = m;
            }
            if let Some(usage) = chunk.usage {
                answer.usage = usage.into();
            }
            for choice in chunk.choices {
                if let Some(reason) = choice.finish_reason {
                    answer.stop_reason = Some(reason);
                }
                let Some(delta) = choice.delta else { continue };
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    if let Some(events) = events {
                        // The listener may be gone (the user cancelled); the answer is still wanted.
                        let _ = events.send(StreamEvent::Text(text.clone()));
                    }
                    answer.text.push_str(&text);
                }
                for (position, part) in delta.tool_calls.unwrap_or_default().into_iter().enumerate()
                {
                    let call = calls
                        .entry(part.index.unwrap_or(position))
                        .or_insert_with(|| ToolCall {
                            id: String::new(),
                            name: String::new(),
                            arguments: String::new(),
                        });
                    if let Some(id) = part.id.filter(|id| !id.is_empty()) {
                        call.id = id;
                    }
                    if let Some(function) = part.function {
                        if let Some(name) = function.name {
                            call.name.push_str(&name);
                        }
                        if let Some(arguments) = function.arguments {
                            call.arguments.push_str(&arguments);
                        }
                    }
                }
            }
        }
        if !done && answer.stop_reason.is_none() {
            return Err(self.errors.error(
                ProviderErrorKind::Network,
                "stream ended before the answer was complete",
            ));
        }
        answer.tool_calls = calls
            .into_iter()
            .map(|(index, mut call)| {
                if call.id.is_empty() {
                    call.id = format!("call_{index}");
                }
                call
            })
            .collect();
        Ok(answer)
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.errors.provider
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&StreamSender>,
    ) -> Result<ChatResponse, ProviderError> {
        let model = request.model.as_deref().unwrap_or(&self.model);
        let mut builder = self.client.post(&self.url).json(&self.body(request));
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key.expose());
        }
        match http::send(builder, &self.errors, request.stream).await? {
            Answer::Stream(response) => self.read_stream(response, model, events).await,
            Answer::Body(body) => self.parse_complete(&body, model),
        }
    }
}

/// One message in the wire format.
fn wire_message(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::User { content } => {
            let text_only = content
                .iter()
                .all(|p| matches!(p, ContentPart::Text { .. }));
            if text_only {
                let text: Vec<&str> = content
                    .iter()
                    .filter_map(|p| match p {
                        ContentPart::Text { text } => Some(text.as_str()),
                        ContentPart::Image { .. } => None,
                    })
                    .collect();
                json!({"role": "user", "content": text.join("\n")})
            } else {
                let parts: Vec<Value> = content
                    .iter()
                    .map(|part| match part {
                        ContentPart::Text { text } => json!({"type": "text", "text": text}),
                        ContentPart::Image { mime, data_base64 } => json!({
                            "type": "image_url",
                            "image_url": {"url": format!("data:{mime};base64,{data_base64}")},
                        }),
                    })
                    .collect();
                json!({"role": "user", "content": parts})
            }
        }
        ChatMessage::Assistant { text, tool_calls } => {
            let mut message = json!({
                "role": "assistant",
                "content": if text.is_empty() { Value::Null } else { json!(text) },
            });
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })
                    })
                    .collect();
                message["tool_calls"] = json!(calls);
            }
            message
        }
        ChatMessage::Tool {
            call_id, content, ..
        } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
    }
}

/// Arguments are a JSON string in OpenAI's format; some compatible servers send an object.
fn arguments_text(arguments: Option<Value>) -> String {
    match arguments {
        Some(Value::String(text)) => text,
        Some(Value::Null) | None => "{}".to_string(),
        Some(other) => other.to_string(),
    }
}

#[derive(Deserialize)]
struct Completion {
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: WireMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    content: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Self {
        Usage {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
            cached_input_tokens: usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
        }
    }
}

#[derive(Deserialize)]
struct Chunk {
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<WireUsage>,
    error: Option<StreamError>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct StreamError {
    message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProviderKind;
    use crate::provider::ToolSpec;

    fn provider() -> OpenAiProvider {
        let config = ProviderConfig {
            max_tokens: 100,
            vision: true,
            ..ProviderConfig::new("local", ProviderKind::Openai, "http://127.0.0.1:9/v1/", "m")
        };
        OpenAiProvider::new(&config, None).expect("client builds")
    }

    #[test]
    fn url_and_body_shape() {
        let p = provider();
        assert_eq!(p.url, "http://127.0.0.1:9/v1/chat/completions");
        let request = ChatRequest {
            system: "be brief".into(),
            messages: vec![
                ChatMessage::User {
                    content: vec![
                        ContentPart::Text {
                            text: "what is this".into(),
                        },
                        ContentPart::Image {
                            mime: "image/png".into(),
                            data_base64: "AAAA".into(),
                        },
                    ],
                },
                ChatMessage::Assistant {
                    text: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "look".into(),
                        arguments: "{}".into(),
                    }],
                },
                ChatMessage::Tool {
                    call_id: "c1".into(),
                    name: "look".into(),
                    content: "a cat".into(),
                    is_error: false,
                },
            ],
            tools: vec![ToolSpec {
                name: "look".into(),
                description: "d".into(),
                parameters: json!({"type":"object"}),
            }]
            .into(),
            temperature: Some(0.5),
            ..ChatRequest::default()
        };
        let body = p.body(&request);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(
            body["messages"][1]["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAAA"
        );
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["name"],
            "look"
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "a cat"})
        );
        assert_eq!(
            body["tools"][0]["function"]["parameters"],
            json!({"type":"object"})
        );
        assert_eq!(body["max_tokens"], 100);
        assert!(body.get("stream").is_none());
        assert!(body.get("tool_choice").is_none());
        // Plan mode's planner forces its one tool.
        let forced = ChatRequest {
            tool_choice: Some("look".into()),
            ..request
        };
        assert_eq!(
            p.body(&forced)["tool_choice"],
            json!({"type": "function", "function": {"name": "look"}})
        );
    }

    #[test]
    fn malformed_answers_are_protocol_errors() {
        let p = provider();
        for body in [
            "not json",
            r#"{"choices":[]}"#,
            r#"{"choices":[{"message":{"content":5}}]}"#,
        ] {
            let err = p.parse_complete(body, "m").expect_err(body);
            assert_eq!(err.kind, ProviderErrorKind::Protocol, "{body}");
        }
    }
}
