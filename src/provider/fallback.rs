//! A chain of providers tried in order: the next one is asked only when the previous failed
//! with a temporary error (timeout, network, 429, 5xx). A request or credential problem (4xx) or
//! an unreadable answer is returned at once: another provider would not fix our request, and
//! silently switching providers would hide a broken configuration.

use std::borrow::Cow;

use async_trait::async_trait;

use super::{
    ChatRequest, ChatResponse, Provider, ProviderError, ProviderErrorKind, SharedProvider,
    StreamEvent, StreamSender,
};

/// Providers tried in order, each with an optional model override.
pub struct FallbackChain {
    links: Vec<(SharedProvider, Option<String>)>,
}

impl FallbackChain {
    /// A chain of `(provider, model)` links; a `Some` model replaces the request's model for
    /// that link (each provider has its own model names).
    pub fn new(links: Vec<(SharedProvider, Option<String>)>) -> Self {
        Self { links }
    }
}

#[async_trait]
impl Provider for FallbackChain {
    /// The first link's name: the provider the chain was asked for.
    fn name(&self) -> &str {
        self.links.first().map_or("none", |(p, _)| p.name())
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&StreamSender>,
    ) -> Result<ChatResponse, ProviderError> {
        let mut last_error = None;
        for (i, (provider, model)) in self.links.iter().enumerate() {
            if i > 0
                && let Some(events) = events
            {
                // The listener may be gone; the next provider is still worth asking.
                let _ = events.send(StreamEvent::Restart);
            }
            let request = match model {
                Some(model) => Cow::Owned(ChatRequest {
                    model: Some(model.clone()),
                    ..request.clone()
                }),
                None => Cow::Borrowed(request),
            };
            match provider.complete(&request, events).await {
                Ok(mut response) => {
                    response.provider = provider.name().to_string();
                    return Ok(response);
                }
                Err(error) if error.is_temporary() => {
                    if let Some((next, _)) = self.links.get(i + 1) {
                        tracing::warn!(
                            provider = %provider.name(),
                            next = %next.name(),
                            error = %error,
                            "provider failed, falling back"
                        );
                    }
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            ProviderError::new("none", ProviderErrorKind::Config, "no provider configured")
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::Mutex;

    /// Answers with its name and the model it was asked for, or fails with `error`.
    struct Stub {
        name: &'static str,
        error: Option<ProviderErrorKind>,
        seen_models: Mutex<Vec<Option<String>>>,
    }

    fn stub(name: &'static str, error: Option<ProviderErrorKind>) -> Arc<Stub> {
        Arc::new(Stub {
            name,
            error,
            seen_models: Mutex::new(Vec::new()),
        })
    }

    #[async_trait]
    impl Provider for Stub {
        fn name(&self) -> &str {
            self.name
        }
        async fn complete(
            &self,
            request: &ChatRequest,
            _: Option<&StreamSender>,
        ) -> Result<ChatResponse, ProviderError> {
            self.seen_models
                .lock()
                .expect("lock")
                .push(request.model.clone());
            match self.error {
                Some(kind) => Err(ProviderError::new(self.name, kind, "scripted")),
                None => Ok(ChatResponse {
                    text: self.name.into(),
                    ..ChatResponse::default()
                }),
            }
        }
    }

    #[tokio::test]
    async fn moves_on_for_temporary_errors_only() {
        let a = stub("a", Some(ProviderErrorKind::Timeout));
        let b = stub("b", None);
        let chain = FallbackChain::new(vec![(a.clone(), None), (b.clone(), Some("mb".into()))]);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let answer = chain
            .complete(&ChatRequest::default(), Some(&tx))
            .await
            .expect("b answers");
        assert_eq!(answer.provider, "b");
        assert_eq!(
            *b.seen_models.lock().expect("lock"),
            vec![Some("mb".to_string())]
        );
        assert_eq!(rx.try_recv(), Ok(StreamEvent::Restart));

        let a = stub("a", Some(ProviderErrorKind::Client { status: 403 }));
        let b = stub("b", None);
        let chain = FallbackChain::new(vec![(a, None), (b.clone(), None)]);
        let err = chain
            .complete(&ChatRequest::default(), None)
            .await
            .expect_err("403 stops");
        assert_eq!(err.provider, "a");
        assert!(b.seen_models.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn returns_the_last_error_when_all_fail() {
        let a = stub("a", Some(ProviderErrorKind::Timeout));
        let b = stub("b", Some(ProviderErrorKind::Server { status: 502 }));
        let chain = FallbackChain::new(vec![(a, None), (b, None)]);
        let err = chain
            .complete(&ChatRequest::default(), None)
            .await
            .expect_err("all fail");
        assert_eq!(
            (err.provider.as_str(), err.kind),
            ("b", ProviderErrorKind::Server { status: 502 })
        );
        let empty = FallbackChain::new(vec![]);
        assert!(empty.complete(&ChatRequest::default(), None).await.is_err());
    }
}
