//! One error type for every adapter, with a kind that tells the daemon what to do about it.

use std::time::Duration;

/// What went wrong, in the terms the supervisor and the outbox act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The channel's configuration is unusable (missing token, bad URL). Not retried.
    Config,
    /// The platform refused our credentials. Not retried.
    Auth,
    /// The platform asked us to slow down; retry after the given time.
    RateLimited {
        /// How long the platform asked to wait.
        retry_after: Duration,
    },
    /// Network trouble or a platform 5xx; retried with backoff.
    Transient,
    /// The platform refused this one message for good (bot blocked, chat gone, bad request).
    Rejected,
    /// The platform sent something we could not understand.
    Protocol,
}

/// An adapter error: a kind, a message (never containing secrets) and an optional cause.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ChannelError {
    /// What kind of failure, which decides whether and when to retry.
    pub kind: ErrorKind,
    /// What went wrong, for logs and `/healthz`.
    pub message: String,
    #[source]
    /// The underlying error, when there is one.
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
    /// The request may have reached the platform and taken effect before the failure (a
    /// timeout or a reset after it was written): a retried send may show the message twice.
    /// Such an error is temporary (`Transient`); the daemon retries it flagged `in_doubt`.
    pub outcome_unknown: bool,
}

impl ChannelError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
            outcome_unknown: false,
        }
    }

    /// A failure after the request was sent, whose effect nobody knows (see
    /// [`ChannelError::outcome_unknown`]).
    pub fn outcome_unknown(message: impl Into<String>) -> Self {
        Self {
            outcome_unknown: true,
            ..Self::new(ErrorKind::Transient, message)
        }
    }

    /// Keeps `source` as the underlying error.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The channel's configuration is wrong; the channel stays off until the next start.
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Config, message)
    }

    /// The platform refused the credentials; the channel stays off until the next start.
    pub fn auth(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Auth, message)
    }

    /// Network trouble or a platform hiccup; tried again with backoff.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Transient, message)
    }

    /// The platform refused this one request for good; retrying it would fail the same way.
    pub fn rejected(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Rejected, message)
    }

    /// The platform answered something the adapter cannot read.
    pub fn protocol(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Protocol, message)
    }

    /// The platform asked to wait `retry_after` before the next request.
    pub fn rate_limited(retry_after: Duration) -> Self {
        Self::new(
            ErrorKind::RateLimited { retry_after },
            format!("rate limited, retry after {}s", retry_after.as_secs_f32()),
        )
    }

    /// Whether the same request may succeed if tried again later.
    pub fn is_temporary(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::RateLimited { .. } | ErrorKind::Transient
        )
    }

    /// How long the platform asked us to wait, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.kind {
            ErrorKind::RateLimited { retry_after } => Some(retry_after),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_rate_limits_and_transient_errors_are_temporary() {
        assert!(ChannelError::transient("x").is_temporary());
        assert!(ChannelError::outcome_unknown("x").is_temporary());
        assert!(ChannelError::outcome_unknown("x").outcome_unknown);
        assert!(!ChannelError::transient("x").outcome_unknown);
        assert!(ChannelError::rate_limited(Duration::from_secs(3)).is_temporary());
        assert!(!ChannelError::auth("x").is_temporary());
        assert!(!ChannelError::config("x").is_temporary());
        assert!(!ChannelError::rejected("x").is_temporary());
        assert!(!ChannelError::protocol("x").is_temporary());
        assert_eq!(
            ChannelError::rate_limited(Duration::from_secs(3)).retry_after(),
            Some(Duration::from_secs(3))
        );
    }
}
