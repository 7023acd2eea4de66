//! serenity's errors mapped to [`ChannelError`] kinds, so the supervisor and the outbox retry
//! the right ones. The bot token never appears in a message (serenity's errors do not carry
//! it), and URLs are taken out of the errors kept as causes: a webhook or interaction URL
//! carries a token of its own.

use std::time::Duration;

use hearth_channel::{ChannelError, error_chain};
use serenity::Error as SerenityError;
use serenity::gateway::GatewayError;
use serenity::http::HttpError;

/// How long to wait after a 429 whose `retry_after` serenity dropped (a proxy or the local fake,
/// where serenity's ratelimiter is off and the error keeps only the status).
pub const UNKNOWN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The one line hearth shows when Discord refuses the message-content intent.
pub const INTENT_REFUSED: &str = "discord refused the Message Content intent (close code 4014): switch on \"Message Content Intent\" under Bot > Privileged Gateway Intents in the developer portal (https://discord.com/developers/applications), then restart hearth";

/// The one line hearth shows when Discord refuses the token.
pub const TOKEN_REFUSED: &str = "discord refused the bot token (close code 4004 or HTTP 401): reset the token under Bot > Token in the developer portal (https://discord.com/developers/applications) and put the new one in the variable token_env names";

/// Whether Discord answered that the thing asked about is not there, or not for us (404, 403):
/// asking again will not help.
pub fn is_gone(error: &SerenityError) -> bool {
    matches!(
        error,
        SerenityError::Http(HttpError::UnsuccessfulRequest(response))
            if matches!(response.status_code.as_u16(), 403 | 404)
    )
}

/// `error` without the URLs it carries.
fn without_urls(error: SerenityError) -> SerenityError {
    match error {
        SerenityError::Http(HttpError::Request(e)) => {
            SerenityError::Http(HttpError::Request(e.without_url()))
        }
        SerenityError::Http(HttpError::UnsuccessfulRequest(mut response)) => {
            response.url = String::new();
            SerenityError::Http(HttpError::UnsuccessfulRequest(response))
        }
        other => other,
    }
}

/// Maps a serenity error; `what` says what was being done ("sending a message").
pub fn map(what: &str, error: SerenityError) -> ChannelError {
    let error = without_urls(error);
    // serenity's "Error while sending HTTP request." says nothing by itself; the cause (DNS,
    // connection refused, TLS) is what a person needs.
    let message = format!("discord: {what}: {}", error_chain(&error));
    let channel_error = match &error {
        SerenityError::Http(HttpError::UnsuccessfulRequest(response)) => {
            let status = response.status_code.as_u16();
            let detail = format!(
                "discord: {what}: HTTP {status} (code {}): {}",
                response.error.code, response.error.message
            );
            match status {
                401 => ChannelError::auth(TOKEN_REFUSED),
                429 => {
                    let mut e = ChannelError::rate_limited(UNKNOWN_RETRY_AFTER);
                    e.message = detail;
                    e
                }
                500..=599 => ChannelError::transient(detail),
                408 => ChannelError::transient(detail),
                _ => ChannelError::rejected(detail),
            }
        }
        // No answer: refused before the request went out (nothing sent), or lost after it
        // (Discord may have taken it; a send's retry carries the same nonce).
        SerenityError::Http(HttpError::Request(e)) if e.is_connect() => {
            ChannelError::transient(message)
        }
        SerenityError::Http(HttpError::Request(_)) => ChannelError::outcome_unknown(message),
        SerenityError::Http(_) => ChannelError::protocol(message),
        SerenityError::Model(_) => ChannelError::rejected(message),
        SerenityError::Json(_) | SerenityError::Decode(..) => ChannelError::protocol(message),
        SerenityError::Gateway(GatewayError::InvalidAuthentication) => {
            ChannelError::auth(TOKEN_REFUSED)
        }
        SerenityError::Gateway(GatewayError::DisallowedGatewayIntents) => {
            ChannelError::config(INTENT_REFUSED)
        }
        SerenityError::Gateway(GatewayError::InvalidGatewayIntents) => {
            ChannelError::config(format!("discord: invalid gateway intents: {error}"))
        }
        _ => ChannelError::transient(message),
    };
    channel_error.with_source(error)
}

/// Maps an error of a request hearth made itself (interactions, attachments), without its URL.
pub fn request(what: &str, error: reqwest::Error) -> ChannelError {
    let error = error.without_url();
    let message = format!("discord: {what}: {}", error_chain(&error));
    let mapped = if error.is_builder() {
        ChannelError::rejected(message)
    } else {
        // Timeouts, refused or reset connections, a body cut short: worth another try.
        ChannelError::transient(message)
    };
    mapped.with_source(error)
}

/// An HTTP status Discord answered to a request hearth made itself, with Discord's error code
/// and message when the body has them.
pub fn status(what: &str, status: u16, body: &[u8]) -> ChannelError {
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let detail = match (json["code"].as_i64(), json["message"].as_str()) {
        (Some(code), Some(text)) => format!("discord: {what}: HTTP {status} (code {code}): {text}"),
        _ => format!("discord: {what}: HTTP {status}"),
    };
    // These requests carry no bot token (an interaction token or a signed CDN URL), so a 401
    // or 403 refuses this request, not the bot.
    match status {
        429 => {
            let wait = json["retry_after"]
                .as_f64()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map_or(UNKNOWN_RETRY_AFTER, |s| {
                    Duration::from_secs_f64(s.min(3600.0))
                });
            let mut e = ChannelError::rate_limited(wait);
            e.message = detail;
            e
        }
        408 | 500..=599 => ChannelError::transient(detail),
        _ => ChannelError::rejected(detail),
    }
}

/// A request that did not finish within the timeout: it may have taken effect.
pub fn timed_out(what: &str, after: Duration) -> ChannelError {
    ChannelError::outcome_unknown(format!(
        "discord: {what}: no answer within {}s",
        after.as_secs_f32()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request to a port nothing listens on, as serenity and hearth's own requests see it.
    async fn refused() -> reqwest::Error {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        reqwest::get(format!("http://127.0.0.1:{port}/api/v10/gateway"))
            .await
            .expect_err("nothing listens")
    }

    #[tokio::test]
    async fn a_failed_request_names_its_cause() {
        let error = map(
            "connecting",
            SerenityError::Http(HttpError::Request(refused().await)),
        );
        assert!(
            error.message.contains("Connection refused"),
            "{}",
            error.message
        );
        assert!(!error.message.contains("/api/v10"), "{}", error.message);
        let error = request("fetching an attachment", refused().await);
        assert!(
            error.message.contains("Connection refused"),
            "{}",
            error.message
        );
    }
}
