//! A small Bot API client: JSON in, `result` out, failures as [`ApiError`] with the token
//! scrubbed.
//!
//! Plain reqwest rather than teloxide: hearth needs the HTTP status and `parameters` of every
//! failure (teloxide folds them into description-based variants) and runs its own update loop,
//! so the framework would add a large dependency for a handful of JSON calls.

use std::borrow::Cow;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::{ApiError, chain, scrub};

/// Time allowed for ordinary calls; long polls get their poll timeout on top.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A Bot API endpoint with its token.
#[derive(Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    pub(crate) fn new(api_url: &str, token: &str) -> Result<Self, ApiError> {
        let http = hearth_channel::http_client::builder()
            .pool_max_idle_per_host(8)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ApiError::Network {
                method: "client".into(),
                message: chain(&e, token),
                maybe_delivered: false,
            })?;
        Ok(Self {
            http,
            base: api_url.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
        })
    }

    /// Scrubs this bot's token from a text.
    pub(crate) fn scrub(&self, text: &str) -> String {
        scrub(text, &self.token)
    }

    /// Calls `method` with a JSON body and decodes its `result`.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &Value,
    ) -> Result<T, ApiError> {
        self.call_with_timeout(method, body, CALL_TIMEOUT).await
    }

    /// Like [`Api::call`], with a longer timeout for long polls.
    pub(crate) async fn call_with_timeout<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        self.call_raw(method, body, timeout, |result| {
            serde_json::from_str(result.get()).map_err(|e| e.to_string())
        })
        .await
    }

    /// `getUpdates`: each update as its own JSON text, not yet decoded. The batch is split
    /// first and every update decoded alone (see [`crate::inbound::decode_update`]), because
    /// one update a strict decoder refuses would otherwise fail the whole batch, every time
    /// it is fetched again.
    pub(crate) async fn get_updates(
        &self,
        body: &Value,
        timeout: Duration,
    ) -> Result<Vec<String>, ApiError> {
        self.call_raw("getUpdates", body, timeout, split_updates)
            .await
    }

    /// Posts `body` to `method` and hands the envelope's `result`, still raw, to `decode`.
    async fn call_raw<T>(
        &self,
        method: &str,
        body: &Value,
        timeout: Duration,
        decode: impl FnOnce(&RawValue) -> Result<T, String>,
    ) -> Result<T, ApiError> {
        let url = format!("{}/bot{}/{method}", self.base, self.token);
        let network = |e| self.network_error(method, e);
        let response = self
            .http
            .post(url)
            .json(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(network)?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(network)?;
        decode_answer(method, status, &bytes, decode).map_err(|error| self.scrubbed(error))
    }

    /// A request to `method` that failed on the way, with this bot's token kept out of the text.
    fn network_error(&self, method: &str, error: reqwest::Error) -> ApiError {
        ApiError::Network {
            method: method.to_owned(),
            // Only a connection that was never made proves the request did not reach Telegram.
            maybe_delivered: !error.is_connect(),
            message: chain(&error.without_url(), &self.token),
        }
    }

    /// `error` with this bot's token scrubbed from its texts.
    fn scrubbed(&self, error: ApiError) -> ApiError {
        match error {
            ApiError::Decode { method, message } => ApiError::Decode {
                method,
                message: self.scrub(&message),
            },
            ApiError::Api {
                method,
                status,
                description,
                retry_after,
            } => ApiError::Api {
                method,
                status,
                description: self.scrub(&description),
                retry_after,
            },
            other => other,
        }
    }

    /// Downloads a file by the `file_path` `getFile` returned, refusing more than `limit` bytes.
    pub(crate) async fn download(&self, file_path: &str, limit: u64) -> Result<Vec<u8>, ApiError> {
        let url = format!("{}/file/bot{}/{file_path}", self.base, self.token);
        let method = "file download";
        let network = |e| self.network_error(method, e);
        let response = self
            .http
            .get(url)
            .timeout(CALL_TIMEOUT * 2)
            .send()
            .await
            .map_err(network)?;
        let status = response.status().as_u16();
        if status >= 400 {
            return Err(ApiError::Api {
                method: method.to_owned(),
                status,
                description: format!("HTTP {status}"),
                retry_after: None,
            });
        }
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(too_big(limit));
        }
        // Read chunk by chunk and stop at the limit: a server that says nothing of the length
        // (or lies about it) cannot make hearth hold more than `limit` bytes.
        let mut response = response;
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(network)? {
            if (bytes.len() + chunk.len()) as u64 > limit {
                return Err(too_big(limit));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}

/// Decodes the Bot API's answer to `method` (HTTP `status`, body `bytes`) and hands the
/// envelope's `result`, still raw, to `decode`. The texts of the errors are not yet scrubbed of
/// the token ([`Api::scrubbed`]).
pub(crate) fn decode_answer<T>(
    method: &str,
    status: u16,
    bytes: &[u8],
    decode: impl FnOnce(&RawValue) -> Result<T, String>,
) -> Result<T, ApiError> {
    let decode_error = |message: String| ApiError::Decode {
        method: method.to_owned(),
        message,
    };
    // Bytes that are not UTF-8 become U+FFFD rather than failing every update around them.
    let text = String::from_utf8_lossy(bytes);
    let envelope: Envelope<'_> = match serde_json::from_str(&text) {
        Ok(envelope) => envelope,
        // A proxy in front of Telegram answers errors with HTML; keep the status.
        Err(_) if status >= 400 => {
            return Err(ApiError::Api {
                method: method.to_owned(),
                status,
                description: format!("HTTP {status} without a JSON body"),
                retry_after: None,
            });
        }
        Err(e) => return Err(decode_error(format!("not JSON: {e}"))),
    };
    if envelope.ok {
        return decode(envelope.result.unwrap_or(RawValue::NULL)).map_err(decode_error);
    }
    let code = envelope
        .error_code
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(status);
    let description = envelope
        .description
        .and_then(|d| lenient::<String>(d.get()))
        .unwrap_or_else(|| "no description".to_owned());
    Err(ApiError::Api {
        method: method.to_owned(),
        status: code,
        description,
        retry_after: envelope
            .parameters
            .and_then(|p| lenient::<Value>(p.get()))
            .and_then(|p| p.get("retry_after").and_then(Value::as_u64)),
    })
}

/// `getUpdates`' `result`: each update's JSON text, split but not decoded.
pub(crate) fn split_updates(result: &RawValue) -> Result<Vec<String>, String> {
    let updates: Vec<&RawValue> = serde_json::from_str(result.get()).map_err(|e| e.to_string())?;
    Ok(updates.into_iter().map(|u| u.get().to_owned()).collect())
}

/// The Bot API's answer, with its values left raw so that one a strict decoder refuses only
/// fails what needs it.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    ok: bool,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    error_code: Option<u64>,
    #[serde(borrow)]
    description: Option<&'a RawValue>,
    #[serde(borrow)]
    parameters: Option<&'a RawValue>,
}

/// Decodes a JSON text strictly, else with its lone UTF-16 surrogates replaced by U+FFFD.
fn lenient<T: DeserializeOwned>(json: &str) -> Option<T> {
    serde_json::from_str(json)
        .or_else(|_| serde_json::from_str(&repair_lone_surrogates(json)))
        .ok()
}

/// Replaces each `\uXXXX` escape of a lone UTF-16 surrogate (a high one not followed by a low
/// one, or a low one alone) with `\ufffd`, the replacement character. Telegram relays text as
/// clients send it, and JSON can carry such halves of a character while a Rust string cannot:
/// serde_json refuses the whole text. Everything else, paired surrogates included, is left
/// as it was; the text is returned borrowed when nothing needed replacing.
pub(crate) fn repair_lone_surrogates(json: &str) -> Cow<'_, str> {
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    // Bytes before `copied` are already in `out` (when it exists).
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        // Every backslash in JSON text starts an escape (outside strings it is invalid
        // anyway), so stepping over escapes whole keeps `\\ud800` (an escaped backslash
        // and the letters "ud800") intact.
        let Some(unit) = escape_unit(bytes, i) else {
            i += 2;
            continue;
        };
        let paired = (0xD800..0xDC00).contains(&unit)
            && escape_unit(bytes, i + 6).is_some_and(|low| (0xDC00..0xE000).contains(&low));
        if paired {
            i += 12;
        } else if (0xD800..0xE000).contains(&unit) {
            let out = out.get_or_insert_with(|| String::with_capacity(json.len()));
            out.push_str(&json[copied..i]);
            out.push_str("\\ufffd");
            i += 6;
            copied = i;
        } else {
            i += 6;
        }
    }
    match out {
        Some(mut out) => {
            out.push_str(&json[copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(json),
    }
}

/// The code unit of a `\uXXXX` escape starting at `at`, if there is one.
fn escape_unit(bytes: &[u8], at: usize) -> Option<u32> {
    let escape = bytes.get(at..at + 6)?;
    if escape[0] != b'\\' || escape[1] != b'u' {
        return None;
    }
    if !escape[2..].iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    u32::from_str_radix(hex, 16).ok()
}

fn too_big(limit: u64) -> ApiError {
    ApiError::Api {
        method: "file download".into(),
        status: 400,
        description: format!("file larger than {limit} bytes"),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::repair_lone_surrogates;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        assert_eq!(repair_lone_surrogates(r#""a\ud800b""#), r#""a\ufffdb""#);
        assert_eq!(repair_lone_surrogates(r#""\udc00""#), r#""\ufffd""#);
        assert_eq!(
            repair_lone_surrogates(r#""\ud800\ud800\udc00""#),
            r#""\ufffd\ud800\udc00""#
        );
        assert_eq!(repair_lone_surrogates(r#""end \uD83D""#), r#""end \ufffd""#);
        let repaired = repair_lone_surrogates(r#"{"text":"x\ud800","n":1}"#);
        let value: serde_json::Value = serde_json::from_str(&repaired).expect("valid now");
        assert_eq!(value["text"], "x\u{fffd}");
    }

    #[test]
    fn everything_else_is_left_alone() {
        for json in [
            r#""a pair \ud83d\ude00 is a character""#,
            r#""an escaped backslash \\ud800 is text""#,
            r#""\n\t\"\u00e9\uZZZZ""#,
            "\"plain ü and 😀\"",
            r#""cut short \ud80"#,
        ] {
            assert!(
                matches!(repair_lone_surrogates(json), std::borrow::Cow::Borrowed(_)),
                "{json}"
            );
        }
    }
}
