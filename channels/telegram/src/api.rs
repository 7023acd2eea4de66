//! A small Bot API client: JSON in, `result` out, failures as [`ApiError`] with the token
//! scrubbed.
//!
//! Plain reqwest rather than teloxide: hearth needs the HTTP status and `parameters` of every
//! failure (teloxide folds them into description-based variants) and runs its own update loop,
//! so the framework would add a large dependency for a handful of JSON calls.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

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
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(8)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ApiError::Network {
                method: "client".into(),
                message: chain(&e, token),
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
        let url = format!("{}/bot{}/{method}", self.base, self.token);
        let network = |e: reqwest::Error| ApiError::Network {
            method: method.to_owned(),
            message: chain(&e.without_url(), &self.token),
        };
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
        let decode = |message: String| ApiError::Decode {
            method: method.to_owned(),
            message: self.scrub(&message),
        };
        let envelope: Value = match serde_json::from_slice(&bytes) {
            Ok(value) => value,
            // A proxy in front of Telegram answers errors with HTML; keep the status.
            Err(_) if status >= 400 => {
                return Err(ApiError::Api {
                    method: method.to_owned(),
                    status,
                    description: format!("HTTP {status} without a JSON body"),
                    retry_after: None,
                });
            }
            Err(e) => return Err(decode(format!("not JSON: {e}"))),
        };
        if envelope.get("ok") == Some(&Value::Bool(true)) {
            let result = envelope.get("result").cloned().unwrap_or(Value::Null);
            return serde_json::from_value(result).map_err(|e| decode(e.to_string()));
        }
        let code = envelope
            .get("error_code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(status);
        Err(ApiError::Api {
            method: method.to_owned(),
            status: code,
            description: self.scrub(
                envelope
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("no description"),
            ),
            retry_after: envelope
                .pointer("/parameters/retry_after")
                .and_then(Value::as_u64),
        })
    }

    /// Downloads a file by the `file_path` `getFile` returned, refusing more than `limit` bytes.
    pub(crate) async fn download(&self, file_path: &str, limit: u64) -> Result<Vec<u8>, ApiError> {
        let url = format!("{}/file/bot{}/{file_path}", self.base, self.token);
        let method = "file download";
        let network = |e: reqwest::Error| ApiError::Network {
            method: method.to_owned(),
            message: chain(&e.without_url(), &self.token),
        };
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
        let bytes = response.bytes().await.map_err(network)?;
        if bytes.len() as u64 > limit {
            return Err(too_big(limit));
        }
        Ok(bytes.to_vec())
    }
}

fn too_big(limit: u64) -> ApiError {
    ApiError::Api {
        method: "file download".into(),
        status: 400,
        description: format!("file larger than {limit} bytes"),
        retry_after: None,
    }
}
