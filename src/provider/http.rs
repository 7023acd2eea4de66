//! The HTTP plumbing both clients share: building the reqwest client, turning transport errors
//! and error statuses into [`ProviderError`]s, and reading an event stream.
//!
//! Error texts are built here from parts we control: reqwest errors are stripped of their URL
//! (a base URL may carry a key as a query parameter) and the key itself is scrubbed from
//! anything a server sends back.

use std::collections::VecDeque;
use std::time::Duration;

use hearth_channel::error_chain;
use reqwest::header::{HeaderMap, RETRY_AFTER};

use super::sse::{SseEvent, SseParser};
use super::{ProviderError, ProviderErrorKind};
use crate::config::{ProviderConfig, Secret};

/// How long connecting may take, at most; the whole request has `timeout_secs`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How much of an unexpected error body goes into an error message.
const MAX_BODY_IN_MESSAGE: usize = 300;

/// What a client needs to describe its failures: its name, its timeout and the key to scrub.
#[derive(Clone, Debug)]
pub(crate) struct ErrorContext {
    pub provider: String,
    pub timeout: Duration,
    pub api_key: Option<Secret>,
}

impl ErrorContext {
    pub(crate) fn new(config: &ProviderConfig, api_key: Option<Secret>) -> Self {
        Self {
            provider: config.name.clone(),
            timeout: Duration::from_secs(config.timeout_secs),
            api_key,
        }
    }

    /// An error of this provider, with the API key removed from the message should a server
    /// have echoed it.
    pub(crate) fn error(
        &self,
        kind: ProviderErrorKind,
        message: impl Into<String>,
    ) -> ProviderError {
        let mut message = message.into();
        if let Some(key) = &self.api_key
            && !key.expose().is_empty()
        {
            message = message.replace(key.expose(), "<redacted>");
        }
        ProviderError::new(self.provider.clone(), kind, message)
    }

    /// Maps a reqwest error from sending the request or reading the body.
    pub(crate) fn transport(&self, err: reqwest::Error) -> ProviderError {
        if err.is_timeout() {
            return self.error(
                ProviderErrorKind::Timeout,
                format!("no complete answer within {} s", self.timeout.as_secs()),
            );
        }
        let message = if err.is_connect() {
            connect_failure(&err)
        } else if err.is_body() || err.is_decode() {
            format!(
                "connection broke while reading the answer: {}",
                error_chain(&err.without_url())
            )
        } else {
            format!("request failed: {}", error_chain(&err.without_url()))
        };
        self.error(ProviderErrorKind::Network, message)
    }

    /// Maps a response with a non-success status, reading its body for the server's message.
    pub(crate) async fn status_error(&self, response: reqwest::Response) -> ProviderError {
        let status = response.status().as_u16();
        let reason = response.status().canonical_reason().unwrap_or("");
        let retry_after = retry_after(response.headers());
        let body = response.text().await.unwrap_or_default();
        let detail = error_message(&body);
        let kind = match status {
            429 => ProviderErrorKind::RateLimited { retry_after },
            500..=599 => ProviderErrorKind::Server { status },
            400..=499 => ProviderErrorKind::Client { status },
            _ => ProviderErrorKind::Protocol,
        };
        let message = if detail.is_empty() {
            format!("HTTP {status} {reason}").trim_end().to_string()
        } else {
            format!("HTTP {status}: {detail}")
        };
        self.error(kind, message)
    }

    /// An answer we could not understand.
    pub(crate) fn protocol(&self, message: impl Into<String>) -> ProviderError {
        self.error(ProviderErrorKind::Protocol, message)
    }
}

/// Builds the HTTP client: connect timeout, and the config's timeout for the whole request
/// (streamed body included).
pub(crate) fn build_client(config: &ProviderConfig) -> Result<reqwest::Client, ProviderError> {
    let timeout = Duration::from_secs(config.timeout_secs.max(1));
    hearth_channel::http_client::builder()
        // After a burst, keep a few idle connections, not one per conversation that ran.
        .pool_max_idle_per_host(16)
        .connect_timeout(CONNECT_TIMEOUT.min(timeout))
        .timeout(timeout)
        .build()
        .map_err(|err| {
            ProviderError::new(
                config.name.clone(),
                ProviderErrorKind::Config,
                format!(
                    "cannot build HTTP client: {}",
                    error_chain(&err.without_url())
                ),
            )
        })
}

/// Why a connection could not be made, in the words a person looks for: the host, then
/// "connection refused", a failed DNS lookup or a TLS failure, then the underlying error.
/// The host is safe to show; the rest of the URL (which may carry a key) is not.
pub(crate) fn connect_failure(err: &reqwest::Error) -> String {
    let host = err
        .url()
        .and_then(|url| {
            let host = url.host_str()?;
            Some(match url.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_string(),
            })
        })
        .unwrap_or_else(|| "the server".into());
    // The causes only: reqwest's own line names the whole URL.
    let mut chain = String::new();
    for cause in sources(err) {
        let text = cause.to_string();
        if !chain.contains(&text) {
            if !chain.is_empty() {
                chain.push_str(": ");
            }
            chain.push_str(&text);
        }
    }
    let lower = chain.to_ascii_lowercase();
    let refused = sources(err).any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    }) || lower.contains("connection refused");
    let why = if refused {
        "connection refused (nothing listens there)"
    } else if lower.contains("dns error") || lower.contains("failed to lookup address") {
        "the host name does not resolve (DNS)"
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake")
    {
        "TLS failed"
    } else {
        "connection failed"
    };
    format!("cannot connect to {host}: {why}: {chain}")
}

/// `err`'s causes, outermost first.
fn sources<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(err.source(), |cause| cause.source())
}

/// The human part of an error body: `error.message` in both APIs' formats, else the start of
/// the body as text.
fn error_message(body: &str) -> String {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
        let message = value
            .pointer("/error/message")
            .or_else(|| value.get("message"))
            .or_else(|| value.get("error"))
            .and_then(|m| m.as_str());
        if let Some(message) = message {
            return message.to_string();
        }
    }
    let body = body.trim();
    // An HTML error page (a web server or proxy that is not the model API) says nothing a
    // person needs in a chat: the status line says it all.
    let head: String = body
        .chars()
        .take(64)
        .collect::<String>()
        .to_ascii_lowercase();
    if head.starts_with("<!doctype html") || head.starts_with("<html") || head.starts_with("<head")
    {
        return String::new();
    }
    match body.char_indices().nth(MAX_BODY_IN_MESSAGE) {
        Some((cut, _)) => format!("{}…", &body[..cut]),
        None => body.to_string(),
    }
}

/// `Retry-After` as integer seconds or an HTTP date; a date in the past means "now".
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    // Fractional seconds are not in the RFC but some APIs send them.
    if let Ok(secs) = value.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Some(Duration::from_secs_f64(secs));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// What an endpoint answered a chat request with.
pub(crate) enum Answer {
    /// An event stream, to read as it comes.
    Stream(reqwest::Response),
    /// A whole body.
    Body(String),
}

/// Sends a chat request, one attempt: an HTTP error status becomes its [`ProviderError`]; an
/// event stream is returned as it is when `stream` was asked for, anything else read whole.
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    errors: &ErrorContext,
    stream: bool,
) -> Result<Answer, ProviderError> {
    let response = request.send().await.map_err(|e| errors.transport(e))?;
    if !response.status().is_success() {
        return Err(errors.status_error(response).await);
    }
    if stream && is_event_stream(&response) {
        return Ok(Answer::Stream(response));
    }
    let body = response.text().await.map_err(|e| errors.transport(e))?;
    Ok(Answer::Body(body))
}

/// Whether a response is an event stream (a server may ignore `stream: true` and answer JSON).
fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// Reads the events of a streamed response one by one.
pub(crate) struct EventReader {
    response: reqwest::Response,
    parser: SseParser,
    pending: VecDeque<SseEvent>,
}

impl EventReader {
    pub(crate) fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            parser: SseParser::new(),
            pending: VecDeque::new(),
        }
    }

    /// The next event; `Ok(None)` when the body ended cleanly.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, reqwest::Error> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            match self.response.chunk().await? {
                Some(bytes) => self.pending.extend(self.parser.push(&bytes)),
                None => return Ok(None),
            }
        }
    }
}

/// Joins a base URL and a path without doubling the slash.
pub(crate) fn join_url(base_url: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base_url.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_after_seconds_and_dates() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), Some(Duration::ZERO));
        let later = (chrono::Utc::now() + chrono::Duration::seconds(120))
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_str(&later).expect("ascii date"),
        );
        let wait = retry_after(&headers).expect("date parses");
        assert!(wait > Duration::from_secs(100) && wait <= Duration::from_secs(120));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn error_messages_from_both_formats() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"invalid_request_error"}}"#),
            "bad key"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "Overloaded"
        );
        // A web server's error page (Python's http.server answering a POST it cannot serve).
        let page = "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head>\n<title>Error response</title>\n</head>\n<body>\n<h1>Error response</h1>\n<p>Error code: 501</p>\n</body>\n</html>\n";
        assert_eq!(error_message(page), "", "the status line says it");
        assert_eq!(error_message("<html>502</html>"), "");
        assert_eq!(error_message("upstream timed out"), "upstream timed out");
        assert!(error_message(&"x".repeat(1000)).chars().count() <= MAX_BODY_IN_MESSAGE + 1);
    }

    #[test]
    fn key_is_scrubbed_from_messages() {
        let ctx = ErrorContext {
            provider: "p".into(),
            timeout: Duration::from_secs(1),
            api_key: Some(Secret::new("sk-secret")),
        };
        let err = ctx.error(
            ProviderErrorKind::Client { status: 401 },
            "bad key sk-secret",
        );
        assert!(!err.to_string().contains("sk-secret"));
    }

    #[test]
    fn urls_join() {
        assert_eq!(
            join_url("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(join_url("http://h", "v1/messages"), "http://h/v1/messages");
    }
}
