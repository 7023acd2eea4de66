//! Waiting between attempts: one exponential [`Backoff`] and [`sleep_or_shutdown`], shared by
//! the adapters' receive loops and the daemon's workers so every retry doubles, caps and stops
//! at shutdown the same way.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Exponential backoff between failed attempts: the first wait, then each one twice the last,
/// up to a ceiling. Each retry site keeps its own first wait and ceiling.
#[derive(Clone, Debug)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// A backoff that waits `first`, then doubles up to `max`.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            next: first,
        }
    }

    /// The wait before the next attempt; the one after is twice as long, up to the ceiling.
    #[allow(clippy::should_implement_trait)] // an endless sequence, not an iterator to collect
    pub fn next(&mut self) -> Duration {
        let wait = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        wait
    }

    /// The wait [`Backoff::next`] would return, without moving on.
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// Starts over at the first wait, after an attempt that worked.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

/// Sleeps for `wait`, or returns `true` early when `shutdown` comes first.
pub async fn sleep_or_shutdown(shutdown: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => true,
        () = tokio::time::sleep(wait) => false,
    }
}

/// An error and its causes on one line, joined with `: `, without repeating a cause whose text
/// its parent already quotes (hyper, reqwest and lettre often do). A full stop that closes a
/// message before its cause is dropped (serenity's "Error while sending HTTP request.").
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.truncate(text.trim_end_matches('.').len());
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_ceiling_and_resets() {
        let first = Duration::from_millis(250);
        let max = Duration::from_secs(60);
        let mut backoff = Backoff::new(first, max);
        assert_eq!(backoff.next(), first);
        assert_eq!(backoff.peek(), first * 2);
        assert_eq!(backoff.next(), first * 2);
        for _ in 0..20 {
            backoff.next();
        }
        assert_eq!(backoff.next(), max);
        backoff.reset();
        assert_eq!(backoff.next(), first);
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_or_shutdown_says_which_came_first() {
        let shutdown = CancellationToken::new();
        assert!(!sleep_or_shutdown(&shutdown, Duration::from_secs(5)).await);
        shutdown.cancel();
        assert!(sleep_or_shutdown(&shutdown, Duration::from_secs(3600)).await);
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Quoting(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("sending failed")]
    struct Wrapping(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("Error while sending HTTP request.")]
    struct Sentence(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused")]
    struct Inner;

    #[test]
    fn the_chain_names_each_cause_once() {
        assert_eq!(
            error_chain(&Wrapping(Inner)),
            "sending failed: connection refused"
        );
        assert_eq!(error_chain(&Quoting(Inner)), "outer: connection refused");
        assert_eq!(
            error_chain(&Sentence(Inner)),
            "Error while sending HTTP request: connection refused"
        );
    }
}
