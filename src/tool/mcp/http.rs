//! The HTTP side of rmcp's streamable HTTP transport, on hearth's reqwest client. rmcp lets a
//! client plug in its own through [`StreamableHttpClient`], which this is; it is the same reqwest
//! (0.13) as rmcp's own client feature would use, with hearth's connect timeout and error texts,
//! and without that feature's extra dependencies.
//!
//! What it keeps from rmcp's reqwest client: the `Accept` and `Mcp-Session-Id` headers, 202 and
//! 204 as "accepted", a 404 on a session as "session expired" (rmcp then starts a new session),
//! 401/403 challenges as authorization errors, JSON-RPC errors in non-2xx bodies passed on, and
//! the byte limits: a JSON body is read up to `max_json_response_size`, one SSE event up to
//! `max_sse_event_size`, an error body's text up to `max_error_response_size`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, InsufficientScopeError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

/// The largest SSE event taken from a GET stream (rmcp's own default).
const MAX_SSE_EVENT: usize = 16 * 1024 * 1024;

/// A reqwest client speaking MCP's streamable HTTP.
#[derive(Clone, Debug)]
pub struct McpHttpClient(pub reqwest::Client);

type Error = StreamableHttpError<reqwest::Error>;

fn accept() -> String {
    format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}")
}

/// Whether a `Content-Type` value is `expected`, ignoring case and parameters.
fn media_type_is(value: &[u8], expected: &str) -> bool {
    value
        .split(|byte| *byte == b';')
        .next()
        .and_then(|essence| std::str::from_utf8(essence).ok())
        .is_some_and(|essence| {
            essence
                .trim_matches([' ', '\t'])
                .eq_ignore_ascii_case(expected)
        })
}

fn with_headers(
    mut request: reqwest::RequestBuilder,
    auth: Option<String>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> reqwest::RequestBuilder {
    if let Some(token) = auth {
        request = request.bearer_auth(token);
    }
    for (name, value) in custom {
        request = request.header(name, value);
    }
    request
}

/// 401 and 403 with a `WWW-Authenticate` challenge, as rmcp's authorization errors.
fn auth_error(response: &reqwest::Response) -> Option<Error> {
    let header = response.headers().get(WWW_AUTHENTICATE)?;
    let Ok(text) = header.to_str() else {
        return Some(StreamableHttpError::UnexpectedServerResponse(Cow::from(
            "invalid www-authenticate header value",
        )));
    };
    match response.status() {
        StatusCode::UNAUTHORIZED => Some(StreamableHttpError::AuthRequired(
            AuthRequiredError::new(text.to_string()),
        )),
        StatusCode::FORBIDDEN => Some(StreamableHttpError::InsufficientScope(
            InsufficientScopeError::new(text.to_string(), scope(text)),
        )),
        _ => None,
    }
}

/// The `scope="…"` parameter of a challenge.
fn scope(challenge: &str) -> Option<String> {
    let start = challenge.find("scope=")? + "scope=".len();
    let rest = &challenge[start..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    Some(value.to_string())
}

/// Reads a whole body, failing once it passes `max` bytes.
async fn read_body(response: reqwest::Response, max: usize) -> Result<Vec<u8>, Error> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
    }
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(StreamableHttpError::Client)?;
        if chunk.len() > max.saturating_sub(body.len()) {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Reads at most `max` bytes of a body for an error message.
async fn read_prefix(response: reqwest::Response, max: usize) -> String {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while body.len() < max {
        match stream.next().await {
            Some(Ok(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(max - body.len())]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// Counts the bytes of the SSE event being received; fails when one passes the limit, so a
/// server cannot make hearth buffer without end.
#[derive(Debug)]
struct EventLimiter {
    max: usize,
    event: usize,
    line: usize,
    after_cr: bool,
}

impl EventLimiter {
    fn new(max: usize) -> Self {
        Self {
            max,
            event: 0,
            line: 0,
            after_cr: false,
        }
    }

    fn observe(&mut self, chunk: &[u8]) -> Result<(), std::io::Error> {
        for &byte in chunk {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\r' | b'\n' => {
                    // An empty line ends the event.
                    if self.line == 0 {
                        self.event = 0;
                    }
                    self.line = 0;
                    self.after_cr = byte == b'\r';
                }
                _ => {
                    self.line += 1;
                    self.event += 1;
                    if self.event > self.max {
                        return Err(std::io::Error::other(format!(
                            "an SSE event passed the limit of {} bytes",
                            self.max
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

fn sse_stream(
    response: reqwest::Response,
    max_event: usize,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let mut limiter = EventLimiter::new(max_event);
    let bytes = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        limiter.observe(&chunk)?;
        Ok::<_, std::io::Error>(chunk)
    });
    SseStream::from_bytes_stream(bytes).boxed()
}

fn awaits_no_response(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        JsonRpcMessage::Notification(_) | JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)
    )
}

impl StreamableHttpClient for McpHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut request = with_headers(
            self.0.post(uri.as_ref()).header(ACCEPT, accept()),
            auth_header,
            custom_headers,
        );
        let had_session = session_id.is_some();
        if let Some(session) = session_id {
            request = request.header(HEADER_SESSION_ID, session.as_ref());
        }
        let response = request
            .json(&message)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        if let Some(error) = auth_error(&response) {
            return Err(error);
        }
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let is_json = content_type
            .as_deref()
            .is_some_and(|ct| media_type_is(ct.as_bytes(), JSON_MIME_TYPE));
        let session = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let no_reply_expected = awaits_no_response(&message);
        if status.is_success() && response.content_length() == Some(0) && no_reply_expected {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if !status.is_success() {
            // A JSON-RPC error in the body says more than the status; pass it on as the answer.
            if is_json && !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                let body = read_body(response, limits.max_json_response_size).await?;
                if let Ok(error @ JsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&body)
                {
                    return Ok(StreamableHttpPostResponse::Json(error, session));
                }
                let text = String::from_utf8_lossy(&body);
                let text: String = text.chars().take(limits.max_error_response_size).collect();
                return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!("HTTP {status}: {text}"),
                )));
            }
            let text = read_prefix(response, limits.max_error_response_size).await;
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {}", text.trim()),
            )));
        }
        match content_type.as_deref() {
            Some(ct) if media_type_is(ct.as_bytes(), EVENT_STREAM_MIME_TYPE) => {
                Ok(StreamableHttpPostResponse::Sse(
                    sse_stream(response, limits.max_sse_event_size),
                    session,
                ))
            }
            Some(ct) if media_type_is(ct.as_bytes(), JSON_MIME_TYPE) => {
                let body = read_body(response, limits.max_json_response_size).await?;
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, session)),
                    Err(_) if no_reply_expected => Ok(StreamableHttpPostResponse::Accepted),
                    Err(err) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                        format!("the server's JSON is not a JSON-RPC message: {err}"),
                    ))),
                }
            }
            // Servers answer notifications with an empty 200 as often as with a 202.
            _ if no_reply_expected => Ok(StreamableHttpPostResponse::Accepted),
            _ => Err(StreamableHttpError::UnexpectedContentType(content_type)),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let request = with_headers(self.0.delete(uri.as_ref()), auth_header, custom_headers)
            .header(HEADER_SESSION_ID, session_id.as_ref());
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            // The server keeps sessions until they expire; nothing to do.
            return Ok(());
        }
        response
            .error_for_status()
            .map(|_| ())
            .map_err(StreamableHttpError::Client)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            MAX_SSE_EVENT,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let mut request = with_headers(
            self.0.get(uri.as_ref()).header(ACCEPT, accept()),
            auth_header,
            custom_headers,
        );
        if let Some(session) = session_id {
            request = request.header(HEADER_SESSION_ID, session.as_ref());
        }
        if let Some(id) = last_event_id {
            request = request.header(HEADER_LAST_EVENT_ID, id);
        }
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if let Some(error) = auth_error(&response) {
            return Err(error);
        }
        let response = response
            .error_for_status()
            .map_err(StreamableHttpError::Client)?;
        let content_type = response.headers().get(CONTENT_TYPE).map(|v| v.as_bytes());
        match content_type {
            Some(ct)
                if media_type_is(ct, EVENT_STREAM_MIME_TYPE)
                    || media_type_is(ct, JSON_MIME_TYPE) => {}
            other => {
                return Err(StreamableHttpError::UnexpectedContentType(
                    other.map(|v| String::from_utf8_lossy(v).into_owned()),
                ));
            }
        }
        Ok(sse_stream(response, max_sse_event_size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_compare_the_essence_only() {
        assert!(media_type_is(
            b"Application/JSON; charset=utf-8",
            JSON_MIME_TYPE
        ));
        assert!(media_type_is(b"text/event-stream", EVENT_STREAM_MIME_TYPE));
        assert!(!media_type_is(b"application/jsonx", JSON_MIME_TYPE));
        assert!(!media_type_is(b"", JSON_MIME_TYPE));
    }

    #[test]
    fn an_sse_event_over_the_limit_fails_and_blank_lines_reset_the_count() {
        let mut limiter = EventLimiter::new(10);
        assert!(limiter.observe(b"data: 1234\n\n").is_ok(), "10 bytes fit");
        assert!(limiter.observe(b"data: 1234\r\n\r\ndata: 12").is_ok());
        assert!(limiter.observe(b"34\n\n").is_ok(), "split across chunks");
        assert!(limiter.observe(b"data: 12345").is_err(), "11 bytes do not");
        let mut lines = EventLimiter::new(10);
        assert!(
            lines.observe(b"data: 12\ndata: 34\n").is_err(),
            "the lines of one event add up"
        );
    }

    #[test]
    fn the_scope_of_a_challenge_is_read() {
        assert_eq!(
            scope(r#"Bearer error="insufficient_scope", scope="read write""#).as_deref(),
            Some("read write")
        );
        assert_eq!(scope("Bearer scope=read").as_deref(), Some("read"));
        assert_eq!(scope("Bearer"), None);
    }
}
