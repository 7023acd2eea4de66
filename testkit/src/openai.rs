//! The OpenAI chat completions wire format for [`crate::FakeOpenAi`].

use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::reply::{Reply, ReplyBody, pieces};
use crate::server::{Api, Rejection};

/// Marker type for the OpenAI-compatible API (`POST /v1/chat/completions`).
#[derive(Debug)]
pub struct OpenAiApi;

impl Api for OpenAiApi {
    const PATH: &'static str = "/v1/chat/completions";
    const BASE_SUFFIX: &'static str = "/v1";

    fn check(headers: &HeaderMap, body: &Value, api_key: Option<&str>) -> Result<(), Rejection> {
        Self::check_headers(headers, api_key)?;
        check_body(body).map_err(Rejection::bad_request)
    }

    fn models(models: &[String]) -> Value {
        json!({
            "object": "list",
            "data": models
                .iter()
                .map(|id| json!({"id": id, "object": "model", "created": 1_700_000_000, "owned_by": "hearth-testkit"}))
                .collect::<Vec<_>>(),
        })
    }

    fn check_headers(headers: &HeaderMap, api_key: Option<&str>) -> Result<(), Rejection> {
        if let Some(key) = api_key {
            let sent = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or("");
            if sent != key {
                // Deliberately echoes what was sent (the real API masks part of it) so tests
                // can check that hearth scrubs keys from error messages.
                return Err(Rejection {
                    status: 401,
                    message: format!("Incorrect API key provided: {sent}."),
                });
            }
        }
        Ok(())
    }

    fn error_body(status: u16, message: &str) -> Value {
        let kind = match status {
            401 => "invalid_api_key",
            429 => "rate_limit_exceeded",
            400..=499 => "invalid_request_error",
            _ => "server_error",
        };
        json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
    }

    fn answer(reply: &Reply, request: &Value, id: u64) -> Value {
        let (text, calls) = parts(reply);
        let mut message = json!({
            "role": "assistant",
            "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
        });
        if !calls.is_empty() {
            message["tool_calls"] = json!(
                calls
                    .iter()
                    .map(|c| json!({
                        "id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }))
                    .collect::<Vec<_>>()
            );
        }
        json!({
            "id": format!("chatcmpl-{id}"),
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": request["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply)}],
            "usage": usage(reply),
        })
    }

    fn events(reply: &Reply, request: &Value, id: u64) -> Vec<String> {
        let (text, calls) = parts(reply);
        let chunk = |choices: Value| {
            let value = json!({
                "id": format!("chatcmpl-{id}"),
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": request["model"],
                "choices": choices,
            });
            format!("data: {value}\n\n")
        };
        let delta =
            |delta: Value| chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]));
        let mut events = vec![delta(json!({"role": "assistant", "content": ""}))];
        for piece in pieces(text, reply.delta_chars) {
            events.push(delta(json!({"content": piece})));
        }
        for (index, call) in calls.iter().enumerate() {
            events.push(delta(json!({"tool_calls": [{
                "index": index, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]})));
            for piece in pieces(&call.arguments, 4) {
                events.push(delta(json!({"tool_calls": [{
                    "index": index, "function": {"arguments": piece},
                }]})));
            }
        }
        events.push(chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": finish_reason(reply)}]),
        ));
        if request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true)) {
            let value = json!({
                "id": format!("chatcmpl-{id}"),
                "object": "chat.completion.chunk",
                "model": request["model"],
                "choices": [],
                "usage": usage(reply),
            });
            events.push(format!("data: {value}\n\n"));
        }
        events.push("data: [DONE]\n\n".to_string());
        events
    }

    fn stream_error(error_type: &str, message: &str) -> String {
        let value = json!({"error": {"message": message, "type": error_type}});
        format!("data: {value}\n\n")
    }
}

fn parts(reply: &Reply) -> (&str, &[crate::ToolCallSpec]) {
    match &reply.body {
        ReplyBody::Answer { text, tool_calls } => (text, tool_calls),
        _ => ("", &[]),
    }
}

fn finish_reason(reply: &Reply) -> String {
    if let Some(reason) = &reply.stop_reason {
        return reason.clone();
    }
    let (_, calls) = parts(reply);
    if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
    .to_string()
}

fn usage(reply: &Reply) -> Value {
    let (input, output) = reply.usage;
    json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output})
}

/// The checks the real API makes that a client is likely to get wrong.
fn check_body(body: &Value) -> Result<(), String> {
    if !body["model"].is_string() {
        return Err("you must provide a model parameter".into());
    }
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        return Err("'messages' must be a non-empty array".into());
    };
    if body.get("max_tokens").is_some_and(|v| !v.is_u64()) {
        return Err("Invalid type for 'max_tokens': expected an integer".into());
    }
    // Tool calls of the last assistant message still waiting for their tool message.
    let mut pending: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or("");
        if role == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or("");
            let Some(at) = pending.iter().position(|p| p == id) else {
                return Err(format!(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (messages[{i}], tool_call_id {id:?})."
                ));
            };
            pending.remove(at);
            if !message["content"].is_string() && !message["content"].is_array() {
                return Err(format!("messages[{i}].content: expected a string"));
            }
            continue;
        }
        if !pending.is_empty() {
            return Err(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                pending.join(", ")
            ));
        }
        match role {
            "system" | "developer" | "user" => {
                if !message["content"].is_string() && !message["content"].is_array() {
                    return Err(format!(
                        "messages[{i}].content: expected a string or an array"
                    ));
                }
            }
            "assistant" => {
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let ok = call["id"].is_string()
                        && call["type"] == "function"
                        && call.pointer("/function/name").is_some_and(Value::is_string)
                        && call
                            .pointer("/function/arguments")
                            .is_some_and(Value::is_string);
                    if !ok {
                        return Err(format!(
                            "messages[{i}].tool_calls: malformed tool call {call}"
                        ));
                    }
                    pending.push(call["id"].as_str().unwrap_or("").to_string());
                }
            }
            other => {
                return Err(format!(
                    "Invalid value: '{other}'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'."
                ));
            }
        }
    }
    if !pending.is_empty() {
        return Err(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            pending.join(", ")
        ));
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        if tool["type"] != "function"
            || !tool.pointer("/function/name").is_some_and(Value::is_string)
        {
            return Err(format!("tools: malformed tool {tool}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unanswered_tool_calls_are_refused() {
        let call =
            json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}});
        let body = |messages: Value| json!({"model": "m", "messages": messages});
        let ok = body(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            {"role": "user", "content": "more"},
        ]));
        assert_eq!(check_body(&ok), Ok(()));
        let missing = body(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "user", "content": "more"},
        ]));
        assert!(check_body(&missing).is_err_and(|e| e.contains("c1")));
        let orphan = body(
            json!([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "r"}]),
        );
        assert!(check_body(&orphan).is_err());
    }
}
