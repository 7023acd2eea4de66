//! Retrying one provider: temporary failures (timeouts, network trouble, 429, 5xx) are tried
//! again with exponential backoff and jitter, and a server's `Retry-After` is honoured exactly.
//!
//! A `Retry-After` longer than `max_delay` ends the retries at once: waiting a minute on one
//! provider is worse than moving on to the next one in the fallback chain.

use std::time::Duration;

use async_trait::async_trait;
use rand::Rng;

use super::{
    ChatRequest, ChatResponse, Provider, ProviderError, ProviderErrorKind, SharedProvider,
    StreamEvent, StreamSender,
};
use crate::clock::SharedClock;

/// A provider that retries its inner provider's temporary failures.
pub struct Retrying {
    inner: SharedProvider,
    max_retries: u32,
    clock: SharedClock,
    base_delay: Duration,
    max_delay: Duration,
}

impl Retrying {
    /// Retries `inner` up to `max_retries` times (so at most `max_retries + 1` attempts), waiting
    /// on `clock`, with a 500 ms base delay and a 30 s cap.
    pub fn new(inner: SharedProvider, max_retries: u32, clock: SharedClock) -> Self {
        Self {
            inner,
            max_retries,
            clock,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }

    /// Changes the first backoff delay and the longest wait (backoff or `Retry-After`).
    pub fn with_delays(mut self, base_delay: Duration, max_delay: Duration) -> Self {
        self.base_delay = base_delay;
        self.max_delay = max_delay;
        self
    }

    /// How long to wait before retry number `retry` (0-based) after `error`; `None` to give up.
    fn delay(&self, retry: u32, error: &ProviderError) -> Option<Duration> {
        if let ProviderErrorKind::RateLimited {
            retry_after: Some(wait),
        } = error.kind
        {
            // The server said when; jitter would only make us early or late.
            return (wait <= self.max_delay).then_some(wait);
        }
        let exponential = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry))
            .min(self.max_delay);
        // "Equal jitter": half fixed, half random, so clients that failed together spread out
        // but none retries immediately.
        let half = exponential / 2;
        let jitter = rand::rng().random_range(Duration::ZERO..=half);
        Some(half + jitter)
    }
}

#[async_trait]
impl Provider for Retrying {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&StreamSender>,
    ) -> Result<ChatResponse, ProviderError> {
        let mut retry = 0;
        loop {
            let error = match self.inner.complete(request, events).await {
                Ok(response) => return Ok(response),
                Err(error) => error,
            };
            if !error.is_temporary() || retry >= self.max_retries {
                return Err(error);
            }
            let Some(delay) = self.delay(retry, &error) else {
                tracing::warn!(
                    provider = %self.name(),
                    error = %error,
                    "Retry-After longer than {} s, not retrying", self.max_delay.as_secs()
                );
                return Err(error);
            };
            retry += 1;
            tracing::warn!(
                provider = %self.name(),
                attempt = retry + 1,
                delay_ms = delay.as_millis() as u64,
                error = %error,
                "provider failed, retrying"
            );
            self.clock.sleep(delay).await;
            if let Some(events) = events {
                // The listener may be gone; the retry is still worth making.
                let _ = events.send(StreamEvent::Restart);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::Arc;
    use std::sync::Mutex;

    /// Fails with the scripted errors, then answers.
    struct Flaky {
        errors: Mutex<Vec<ProviderErrorKind>>,
        calls: Mutex<u32>,
    }

    #[async_trait]
    impl Provider for Flaky {
        fn name(&self) -> &str {
            "flaky"
        }
        async fn complete(
            &self,
            _: &ChatRequest,
            _: Option<&StreamSender>,
        ) -> Result<ChatResponse, ProviderError> {
            *self.calls.lock().expect("lock") += 1;
            let mut errors = self.errors.lock().expect("lock");
            if errors.is_empty() {
                Ok(ChatResponse::default())
            } else {
                Err(ProviderError::new("flaky", errors.remove(0), "scripted"))
            }
        }
    }

    fn setup(
        errors: Vec<ProviderErrorKind>,
        max_retries: u32,
    ) -> (Arc<Flaky>, Arc<ManualClock>, Retrying) {
        let flaky = Arc::new(Flaky {
            errors: Mutex::new(errors),
            calls: Mutex::new(0),
        });
        let clock = ManualClock::new(chrono::Utc::now());
        let retrying = Retrying::new(flaky.clone(), max_retries, clock.clone());
        (flaky, clock, retrying)
    }

    #[tokio::test]
    async fn backoff_grows_with_jitter_and_restarts_the_stream() {
        let server = ProviderErrorKind::Server { status: 503 };
        let (flaky, clock, retrying) = setup(vec![server, server, server], 3);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        retrying
            .complete(&ChatRequest::default(), Some(&tx))
            .await
            .expect("fourth attempt answers");
        assert_eq!(*flaky.calls.lock().expect("lock"), 4);
        let sleeps = clock.sleeps();
        assert_eq!(sleeps.len(), 3);
        for (i, sleep) in sleeps.iter().enumerate() {
            let full = Duration::from_millis(500) * 2u32.pow(i as u32);
            assert!(*sleep >= full / 2 && *sleep <= full, "retry {i}: {sleep:?}");
        }
        for _ in 0..3 {
            assert_eq!(rx.try_recv(), Ok(StreamEvent::Restart));
        }
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn gives_up_after_max_retries_and_on_client_errors() {
        let server = ProviderErrorKind::Server { status: 500 };
        let (flaky, _, retrying) = setup(vec![server, server, server], 2);
        let err = retrying
            .complete(&ChatRequest::default(), None)
            .await
            .expect_err("exhausted");
        assert_eq!(err.kind, server);
        assert_eq!(*flaky.calls.lock().expect("lock"), 3);

        let (flaky, clock, retrying) = setup(vec![ProviderErrorKind::Client { status: 401 }], 5);
        retrying
            .complete(&ChatRequest::default(), None)
            .await
            .expect_err("not retried");
        assert_eq!(*flaky.calls.lock().expect("lock"), 1);
        assert!(clock.sleeps().is_empty());
    }

    #[tokio::test]
    async fn retry_after_is_exact_or_gives_up_when_too_long() {
        let limited = |secs| ProviderErrorKind::RateLimited {
            retry_after: Some(Duration::from_secs(secs)),
        };
        let (_, clock, retrying) = setup(vec![limited(7)], 2);
        retrying
            .complete(&ChatRequest::default(), None)
            .await
            .expect("answers after waiting");
        assert_eq!(clock.sleeps(), vec![Duration::from_secs(7)]);

        let (flaky, clock, retrying) = setup(vec![limited(60)], 2);
        retrying
            .complete(&ChatRequest::default(), None)
            .await
            .expect_err("gives up");
        assert_eq!(*flaky.calls.lock().expect("lock"), 1);
        assert!(clock.sleeps().is_empty());
    }
}
