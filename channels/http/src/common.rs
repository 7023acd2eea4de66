//! What the native API (`api.rs`) and the OpenAI-compatible endpoint (`openai.rs`) both use:
//! the error answer in either shape, the streams' timing, and the checks of a request's token
//! scope, body and names. Kept apart so neither door imports the other.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::Shared;
use crate::backend::{Scope, Token};

/// How often a stream sends a keep-alive comment.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How often a stream looks for events when nothing woke it. Every event this process stores
/// goes through `Shared::append`, which wakes the streams at once; the poll is the slow
/// fallback for events stored by another process on the same database.
pub(crate) const POLL: Duration = Duration::from_secs(2);

/// The longest Idempotency-Key and conversation name accepted.
pub(crate) const MAX_KEY_LEN: usize = 200;

/// An error answer: its status and a sentence for the person reading it.
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    retry_after: Option<Duration>,
    /// Answered in the shape OpenAI clients read (`{"error": {"message", "type", "code"}}`):
    /// for the `/v1` routes.
    openai: bool,
    /// The OpenAI `code` when it is more precise than the status's.
    code: Option<&'static str>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
            openai: false,
            code: None,
        }
    }

    /// An error of the `/v1` routes with its OpenAI `code`.
    pub(crate) fn openai(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        let mut err = Self::new(status, message).for_openai();
        err.code = Some(code);
        err
    }

    /// The same error, in the shape OpenAI clients read.
    pub(crate) fn for_openai(mut self) -> Self {
        self.openai = true;
        self
    }

    /// 429 with `Retry-After`.
    pub(crate) fn too_many(message: impl Into<String>, wait: Duration) -> Self {
        let mut err = Self::new(StatusCode::TOO_MANY_REQUESTS, message);
        err.retry_after = Some(wait);
        err
    }

    pub(crate) fn unavailable(err: impl std::fmt::Display) -> Self {
        tracing::warn!(error = %err, "HTTP API request failed");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("hearth cannot answer right now ({err}); try again"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = if self.openai {
            error_body(self.status, self.code, &self.message)
        } else {
            json!({ "error": { "status": self.status.as_u16(), "message": self.message } })
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        if let Some(wait) = self.retry_after
            && let Ok(value) = header::HeaderValue::from_str(&wait.as_secs().max(1).to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

pub(crate) fn need(token: &Token, scope: Scope) -> Result<(), ApiError> {
    if token.scope >= scope {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "the token `{}` has scope {}; this needs {} (hearth token create NAME --scope {})",
                token.name,
                token.scope.as_str(),
                scope.as_str(),
                scope.as_str()
            ),
        ))
    }
}

/// A JSON body, read within the size limit, with errors that say what is wrong.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(
    shared: &Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let bytes = body_bytes(shared, body)?;
    serde_json::from_slice(&bytes).map_err(|err| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the body is not the JSON expected: {err}"),
        )
    })
}

/// The body's bytes, or why there are none (larger than the limit: 413).
pub(crate) fn body_bytes(
    shared: &Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body is larger than {} bytes ([channels.http] max_body_bytes)",
                    shared.config.max_body_bytes
                ),
            )
        } else {
            ApiError::new(rejection.status(), rejection.body_text())
        }
    })
}

/// A name a client gives (an Idempotency-Key, a conversation): 1–200 visible ASCII characters.
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), ApiError> {
    if name.is_empty() || name.len() > MAX_KEY_LEN || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("{what} must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
        ));
    }
    Ok(())
}

pub(crate) fn random_id() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..20)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// Whether `path` is one of the OpenAI-compatible routes (whose errors have OpenAI's shape).
pub(crate) fn is_openai_path(path: &str) -> bool {
    path == "/v1" || path.starts_with("/v1/")
}

/// An error as OpenAI clients read it: `{"error": {"message", "type", "param", "code"}}`.
pub(crate) fn error_body(status: StatusCode, code: Option<&str>, message: &str) -> Value {
    let (kind, default_code) = match status.as_u16() {
        401 => ("invalid_request_error", "invalid_api_key"),
        403 => ("permission_error", "insufficient_permissions"),
        404 => ("invalid_request_error", "not_found"),
        409 => ("invalid_request_error", "conflict"),
        413 => ("invalid_request_error", "request_too_large"),
        429 => ("rate_limit_error", "rate_limit_exceeded"),
        400..=499 => ("invalid_request_error", "invalid_request"),
        _ => ("server_error", "unavailable"),
    };
    json!({
        "error": {
            "message": message,
            "type": kind,
            "param": null,
            "code": code.unwrap_or(default_code),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_have_openai_s_shape() {
        let body = error_body(StatusCode::BAD_REQUEST, Some("tools_not_supported"), "no");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["code"], "tools_not_supported");
        assert_eq!(body["error"]["message"], "no");
        let body = error_body(StatusCode::UNAUTHORIZED, None, "who");
        assert_eq!(body["error"]["code"], "invalid_api_key");
    }
}
