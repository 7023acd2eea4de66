//! matrix-sdk failures and how they map onto [`ChannelError`] kinds, so the supervisor and the
//! outbox retry the right ones.

use std::time::Duration;

use hearth_channel::ChannelError;
use matrix_sdk::ruma::api::error::ErrorKind as ApiKind;

/// What a step of the adapter can fail with, before it becomes a [`ChannelError`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum MatrixError {
    /// The SDK (the homeserver, the network or the local store) failed `what`. The SDK's
    /// error is the source, not part of this text: [`MatrixError::kind_error`] adds the whole
    /// chain of causes once.
    #[error("{what}")]
    Sdk {
        what: String,
        #[source]
        source: matrix_sdk::Error,
    },
    /// The homeserver refused the credentials.
    #[error("{0}")]
    Auth(String),
    /// The local session or store could not be read or written.
    #[error("{0}")]
    Store(String),
    /// The homeserver answered something the adapter cannot use.
    #[error("{0}")]
    Protocol(String),
}

impl MatrixError {
    /// Wraps an SDK error with what was being done.
    pub(crate) fn sdk(what: impl Into<String>, source: impl Into<matrix_sdk::Error>) -> Self {
        Self::Sdk {
            what: what.into(),
            source: source.into(),
        }
    }

    /// The homeserver's HTTP status for this failure, if it answered with one.
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            Self::Sdk { source, .. } => {
                source.as_client_api_error().map(|e| e.status_code.as_u16())
            }
            _ => None,
        }
    }

    /// Whether the homeserver no longer knows the access token (the device was deleted or
    /// logged out elsewhere): only a new login helps.
    pub(crate) fn is_unknown_token(&self) -> bool {
        match self {
            Self::Sdk { source, .. } => matches!(
                source.client_api_error_kind(),
                Some(ApiKind::UnknownToken(_))
            ),
            _ => false,
        }
    }

    /// The kind the daemon acts on: 429 waits, 401/403 on login stop the channel, other 4xx
    /// give up on this request, 5xx and network trouble are retried.
    pub(crate) fn kind_error(&self) -> ChannelError {
        let message = hearth_channel::error_chain(self);
        match self {
            Self::Sdk { source, .. } => {
                if let Some(ApiKind::LimitExceeded(data)) = source.client_api_error_kind() {
                    let wait = match data.retry_after {
                        Some(matrix_sdk::ruma::api::error::RetryAfter::Delay(d)) => d,
                        _ => Duration::from_secs(1),
                    };
                    let mut error =
                        ChannelError::rate_limited(wait.max(Duration::from_millis(100)));
                    error.message = message;
                    return error;
                }
                match self.status() {
                    Some(401) => ChannelError::auth(message),
                    Some(500..=599) | Some(408) => ChannelError::transient(message),
                    Some(_) => ChannelError::rejected(message),
                    // No answer from the server: the network, a timeout. The request may
                    // have landed; the retry reuses its transaction id, which the homeserver
                    // shows once, and the daemon flags it in doubt.
                    None if matches!(source, matrix_sdk::Error::Http(_)) => {
                        ChannelError::outcome_unknown(message)
                    }
                    None => ChannelError::protocol(message),
                }
            }
            Self::Auth(_) => ChannelError::auth(message),
            Self::Store(_) => ChannelError::config(message),
            Self::Protocol(_) => ChannelError::protocol(message),
        }
    }
}

impl From<MatrixError> for ChannelError {
    fn from(error: MatrixError) -> Self {
        error.kind_error()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the socket closed")]
    struct Closed;

    #[derive(Debug, thiserror::Error)]
    #[error("connection reset by peer")]
    struct Reset(#[source] Closed);

    /// What failed, then every cause once: the SDK's error is the source, not repeated text.
    #[test]
    fn a_failure_reads_as_what_failed_and_each_cause_once() {
        let io = std::io::Error::other(Reset(Closed));
        let error = MatrixError::sdk("syncing", io);
        assert_eq!(error.to_string(), "syncing");
        assert_eq!(
            error.kind_error().message,
            "syncing: connection reset by peer: the socket closed"
        );
    }
}
