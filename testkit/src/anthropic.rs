//! The Anthropic Messages wire format for [`crate::FakeAnthropic`].

use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::reply::{Reply, ReplyBody, pieces};
use crate::server::{Api, Rejection};

/// Marker type for Anthropic's Messages API (`POST /v1/messages`).
#[derive(Debug)]
pub struct AnthropicApi;

impl Api for AnthropicApi {
    const PATH: &'static str = "/v1/messages";
    const BASE_SUFFIX: &'static str = "";

    fn check(headers: &HeaderMap, body: &Value, api_key: Option<&str>) -> Result<(), Rejection> {
        Self::check_headers(headers, api_key)?;
        check_body(body).map_err(Rejection::bad_request)
    }

    fn models(models: &[String]) -> Value {
        let data: Vec<Value> = models
            .iter()
            .map(|id| json!({"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z"}))
            .collect();
        json!({
            "data": data,
            "has_more": false,
            "first_id": models.first(),
            "last_id": models.last(),
        })
    }

    fn check_headers(headers: &HeaderMap, api_key: Option<&str>) -> Result<(), Rejection> {
        if let Some(key) = api_key {
            let sent = headers.get("x-api-key").and_then(|v| v.to_str().ok());
            if sent != Some(key) {
                return Err(Rejection {
                    status: 401,
                    message: "invalid x-api-key".into(),
                });
            }
        }
        if headers.get("anthropic-version").is_none() {
            return Err(Rejection::bad_request(
                "anthropic-version: header is required",
            ));
        }
        Ok(())
    }

    fn error_body(status: u16, message: &str) -> Value {
        let kind = match status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        json!({"type": "error", "error": {"type": kind, "message": message}})
    }

    fn answer(reply: &Reply, request: &Value, id: u64) -> Value {
        let (text, calls) = parts(reply);
        let mut content = Vec::new();
        if !text.is_empty() || calls.is_empty() {
            content.push(json!({"type": "text", "text": text}));
        }
        for call in calls {
            content.push(json!({
                "type": "tool_use", "id": call.id, "name": call.name, "input": input(&call.arguments),
            }));
        }
        let (input_tokens, output_tokens) = reply.usage;
        json!({
            "id": format!("msg_{id:04}"),
            "type": "message",
            "role": "assistant",
            "model": request["model"],
            "content": content,
            "stop_reason": stop_reason(reply),
            "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        })
    }

    fn events(reply: &Reply, request: &Value, id: u64) -> Vec<String> {
        let (text, calls) = parts(reply);
        let (input_tokens, output_tokens) = reply.usage;
        let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
        let mut events = vec![event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": format!("msg_{id:04}"), "type": "message", "role": "assistant",
                "content": [], "model": request["model"], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            }}),
        )];
        let mut index = 0;
        if !text.is_empty() {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
            ));
            events.push(event("ping", json!({"type": "ping"})));
            for piece in pieces(text, reply.delta_chars) {
                events.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
                ));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        for call in calls {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": call.id, "name": call.name, "input": {},
                }}),
            ));
            for piece in pieces(&call.arguments, 4) {
                events.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
                ));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        events.push(event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
                   "usage": {"output_tokens": output_tokens}}),
        ));
        events.push(event("message_stop", json!({"type": "message_stop"})));
        events
    }

    fn stream_error(error_type: &str, message: &str) -> String {
        let data = json!({"type": "error", "error": {"type": error_type, "message": message}});
        format!("event: error\ndata: {data}\n\n")
    }
}

fn parts(reply: &Reply) -> (&str, &[crate::ToolCallSpec]) {
    match &reply.body {
        ReplyBody::Answer { text, tool_calls } => (text, tool_calls),
        _ => ("", &[]),
    }
}

/// Scripted arguments as the `input` object (`{}` when they are not a JSON object).
fn input(arguments: &str) -> Value {
    serde_json::from_str::<Value>(arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}))
}

fn stop_reason(reply: &Reply) -> String {
    if let Some(reason) = &reply.stop_reason {
        return reason.clone();
    }
    let (_, calls) = parts(reply);
    if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
    .to_string()
}

/// The checks the real API makes that a client is likely to get wrong.
fn check_body(body: &Value) -> Result<(), String> {
    if !body["model"].is_string() {
        return Err("model: Field required".into());
    }
    if !body["max_tokens"].is_u64() {
        return Err("max_tokens: Field required".into());
    }
    if body
        .get("system")
        .is_some_and(|s| !s.is_string() && !s.is_array())
    {
        return Err("system: Input should be a valid string or list".into());
    }
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        return Err("messages: at least one message is required".into());
    };
    // tool_use ids of the previous (assistant) message, which the next message must answer.
    let mut open_calls: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or("");
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != "user" && role != "assistant" {
            return Err(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant' (got {role:?}; the system prompt goes in the top-level `system` field)"
            ));
        }
        if i == 0 && role != "user" {
            return Err("messages: first message must use the \"user\" role".into());
        }
        if role != expected {
            return Err(format!(
                "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"{role}\" roles in a row"
            ));
        }
        let blocks: Vec<Value> = match &message["content"] {
            Value::String(text) if !text.is_empty() => vec![json!({"type": "text", "text": text})],
            Value::Array(blocks) if !blocks.is_empty() => blocks.clone(),
            _ => {
                return Err(format!(
                    "messages.{i}.content: must be a non-empty string or list"
                ));
            }
        };
        let mut answered = Vec::new();
        let mut new_calls = Vec::new();
        for (j, block) in blocks.iter().enumerate() {
            match (role, block["type"].as_str().unwrap_or("")) {
                (_, "text") => {
                    if block["text"].as_str().is_none_or(str::is_empty) {
                        return Err(format!(
                            "messages.{i}.content.{j}.text: text content blocks must be non-empty"
                        ));
                    }
                }
                ("user", "image") => {
                    let ok = block.pointer("/source/type") == Some(&json!("base64"))
                        && block
                            .pointer("/source/media_type")
                            .is_some_and(Value::is_string)
                        && block.pointer("/source/data").is_some_and(Value::is_string);
                    if !ok {
                        return Err(format!(
                            "messages.{i}.content.{j}.source: malformed image source"
                        ));
                    }
                }
                ("user", "tool_result") => {
                    if j > answered.len() {
                        return Err(format!(
                            "messages.{i}.content.{j}: tool_result blocks must come first in the user message content, before any text"
                        ));
                    }
                    let id = block["tool_use_id"].as_str().unwrap_or("").to_string();
                    if !open_calls.contains(&id) {
                        return Err(format!(
                            "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                    answered.push(id);
                }
                ("assistant", "tool_use") => {
                    let ok = block["id"].is_string()
                        && block["name"].is_string()
                        && block["input"].is_object();
                    if !ok {
                        return Err(format!(
                            "messages.{i}.content.{j}: malformed tool_use block"
                        ));
                    }
                    new_calls.push(block["id"].as_str().unwrap_or("").to_string());
                }
                (_, other) => {
                    return Err(format!(
                        "messages.{i}.content.{j}.type: unexpected block type {other:?} in a {role} message"
                    ));
                }
            }
        }
        let unanswered: Vec<&String> = open_calls
            .iter()
            .filter(|id| !answered.contains(id))
            .collect();
        if !unanswered.is_empty() {
            let ids: Vec<&str> = unanswered.iter().map(|s| s.as_str()).collect();
            return Err(format!(
                "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                ids.join(", ")
            ));
        }
        open_calls = new_calls;
    }
    if !open_calls.is_empty() {
        // A conversation may not end in unanswered tool calls either.
        return Err(format!(
            "messages: `tool_use` ids were found without `tool_result` blocks immediately after: {}",
            open_calls.join(", ")
        ));
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        if !tool["name"].is_string() || !tool["input_schema"].is_object() {
            return Err(format!("tools: malformed tool {tool}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_rules() {
        let body = |messages: Value| json!({"model": "m", "max_tokens": 10, "messages": messages});
        let tool_use = json!({"type": "tool_use", "id": "t1", "name": "f", "input": {}});
        let result = json!({"type": "tool_result", "tool_use_id": "t1", "content": "r"});
        let ok = body(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [tool_use]},
            {"role": "user", "content": [result, {"type": "text", "text": "and?"}]},
        ]));
        assert_eq!(check_body(&ok), Ok(()));
        let two_users =
            body(json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]));
        assert!(check_body(&two_users).is_err());
        let unanswered = body(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [tool_use]},
            {"role": "user", "content": "next"},
        ]));
        assert!(check_body(&unanswered).is_err_and(|e| e.contains("t1")));
        let no_max = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        assert!(check_body(&no_max).is_err_and(|e| e.contains("max_tokens")));
    }
}
