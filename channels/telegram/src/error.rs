//! Bot API failures and how they map onto [`ChannelError`] kinds.
//!
//! Every text that leaves this module has the bot token scrubbed: reqwest errors embed the
//! request URL, and the URL carries the token (`/bot<token>/sendMessage`).

use std::time::Duration;

use hearth_channel::ChannelError;

/// What a Bot API call can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ApiError {
    /// Telegram answered `{"ok": false, ...}` (or an HTTP error without a JSON body).
    #[error("Telegram refused {method}: {status} {description}")]
    Api {
        method: String,
        status: u16,
        description: String,
        retry_after: Option<u64>,
    },
    /// The request did not get an answer (connection refused, timeout, broken body).
    /// `maybe_delivered` when it failed after the request could have reached Telegram (a
    /// timeout or a reset, not a refused connection): a send may have been shown.
    #[error("could not reach Telegram for {method}: {message}")]
    Network {
        method: String,
        message: String,
        maybe_delivered: bool,
    },
    /// The answer was not the JSON the Bot API documents.
    #[error("unexpected answer from Telegram for {method}: {message}")]
    Decode { method: String, message: String },
}

impl ApiError {
    /// Telegram could not parse the HTML entities of a text.
    pub(crate) fn is_cant_parse_entities(&self) -> bool {
        matches!(self, ApiError::Api { status: 400, description, .. }
            if description.to_ascii_lowercase().contains("can't parse entities"))
    }

    /// An edit that would not change anything; the message already shows what we want.
    pub(crate) fn is_not_modified(&self) -> bool {
        matches!(self, ApiError::Api { status: 400, description, .. }
            if description.contains("message is not modified"))
    }

    /// The kind the daemon acts on: 429 waits, 401 stops the channel, 403 and other 4xx give
    /// up on this request, 5xx and network trouble are retried.
    pub(crate) fn kind_error(&self) -> ChannelError {
        let message = self.to_string();
        match self {
            ApiError::Api {
                status: 429,
                retry_after,
                ..
            } => {
                let wait = Duration::from_secs(retry_after.unwrap_or(1).max(1));
                let mut error = ChannelError::rate_limited(wait);
                error.message = format!("{message} (retry after {}s)", wait.as_secs());
                error
            }
            ApiError::Api { status: 401, .. } => ChannelError::auth(format!(
                "{message}: the bot token was not accepted; check it with @BotFather"
            )),
            ApiError::Api {
                status: 500..=599, ..
            } => ChannelError::transient(message),
            // A second poller or a webhook set elsewhere; goes away once the other side stops.
            ApiError::Api { status: 409, .. } => ChannelError::transient(message),
            ApiError::Api { .. } => ChannelError::rejected(message),
            ApiError::Network {
                maybe_delivered: true,
                ..
            } => ChannelError::outcome_unknown(message),
            ApiError::Network { .. } => ChannelError::transient(message),
            ApiError::Decode { .. } => ChannelError::protocol(message),
        }
    }
}

impl From<ApiError> for ChannelError {
    fn from(error: ApiError) -> Self {
        error.kind_error()
    }
}

/// Removes the token (raw and percent-encoded) from a text.
pub(crate) fn scrub(text: &str, token: &str) -> String {
    if token.is_empty() {
        return text.to_owned();
    }
    let encoded = token.replace(':', "%3A");
    text.replace(token, "<token>").replace(&encoded, "<token>")
}

/// The whole cause chain of an error on one line, token scrubbed.
pub(crate) fn chain(error: &dyn std::error::Error, token: &str) -> String {
    scrub(&hearth_channel::error_chain(error), token)
}

#[cfg(test)]
mod tests {
    use hearth_channel::ErrorKind;

    use super::*;

    fn api(status: u16, description: &str, retry_after: Option<u64>) -> ApiError {
        ApiError::Api {
            method: "sendMessage".into(),
            status,
            description: description.into(),
            retry_after,
        }
    }

    #[test]
    fn statuses_map_to_kinds() {
        let limited = api(429, "Too Many Requests: retry after 7", Some(7)).kind_error();
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(
            api(401, "Unauthorized", None).kind_error().kind,
            ErrorKind::Auth
        );
        let blocked = api(403, "Forbidden: bot was blocked by the user", None).kind_error();
        assert_eq!(blocked.kind, ErrorKind::Rejected);
        assert!(blocked.message.contains("blocked by the user"));
        assert_eq!(
            api(400, "Bad Request: chat not found", None)
                .kind_error()
                .kind,
            ErrorKind::Rejected
        );
        assert_eq!(
            api(502, "Bad Gateway", None).kind_error().kind,
            ErrorKind::Transient
        );
        let network = ApiError::Network {
            method: "getMe".into(),
            message: "connection refused".into(),
            maybe_delivered: false,
        };
        assert_eq!(network.kind_error().kind, ErrorKind::Transient);
        assert!(!network.kind_error().outcome_unknown);
        let reset = ApiError::Network {
            method: "sendMessage".into(),
            message: "connection reset".into(),
            maybe_delivered: true,
        };
        assert_eq!(reset.kind_error().kind, ErrorKind::Transient);
        assert!(
            reset.kind_error().outcome_unknown,
            "a reset after the send may have shown it"
        );
    }

    #[test]
    fn recognises_entity_and_not_modified_errors() {
        assert!(
            api(
                400,
                "Bad Request: can't parse entities: Unsupported start tag \"x\"",
                None
            )
            .is_cant_parse_entities()
        );
        assert!(
            api(
                400,
                "Bad Request: message is not modified: specified new message content",
                None
            )
            .is_not_modified()
        );
        assert!(!api(400, "Bad Request: chat not found", None).is_not_modified());
    }

    #[test]
    fn scrub_removes_raw_and_encoded_tokens() {
        let token = "123:ABC";
        let text = "error sending request for url (http://x/bot123:ABC/getMe) and /bot123%3AABC/";
        let clean = scrub(text, token);
        assert!(!clean.contains("ABC"), "{clean}");
        assert!(clean.contains("/bot<token>/getMe"), "{clean}");
    }
}
