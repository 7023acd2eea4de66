//! Channel supervision: temporary failures restart a channel with backoff, authentication
//! failures mark it failed without a hot loop, and one channel's trouble never stops another.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use hearth::daemon::DaemonBuilder;
use hearth_channel::{
    Capabilities, Channel, ChannelContext, ChannelError, ChatRef, MemoryChannel, MessageRef,
    OutboundMessage,
};
use serde_json::Value;

use crate::support::{CHAT, Hearth, USER, WAIT};

/// A channel whose receive loop fails a set number of times (with a given error) before it
/// behaves like the memory channel it wraps.
struct Troubled {
    name: String,
    inner: Arc<MemoryChannel>,
    failures_left: AtomicUsize,
    error: fn() -> ChannelError,
    runs: AtomicUsize,
}

#[async_trait]
impl Channel for Troubled {
    fn name(&self) -> &str {
        &self.name
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        if self.failures_left.load(Ordering::SeqCst) > 0 {
            self.failures_left.fetch_sub(1, Ordering::SeqCst);
            return Err((self.error)());
        }
        self.inner.run(ctx).await
    }
    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        self.inner.send(message).await
    }
    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        self.inner.edit(target, message).await
    }
    async fn typing(&self, chat: &ChatRef) -> Result<(), ChannelError> {
        self.inner.typing(chat).await
    }
}

fn troubled(name: &str, failures: usize, error: fn() -> ChannelError) -> Arc<Troubled> {
    Arc::new(Troubled {
        name: name.into(),
        inner: Arc::new(MemoryChannel::new(name)),
        failures_left: AtomicUsize::new(failures),
        error,
        runs: AtomicUsize::new(0),
    })
}

#[tokio::test]
async fn temporary_failures_restart_a_channel_and_auth_failures_mark_it_failed() {
    let h = Hearth::new().await;
    let flaky = troubled("flaky", 1, || ChannelError::transient("connection reset"));
    let locked_out = troubled("locked", usize::MAX, || {
        ChannelError::auth("401 Unauthorized")
    });
    let daemon = DaemonBuilder::new(h.config.clone())
        .agents(
            hearth::agent::AgentSet::parse(crate::support::TEST_AGENTS, "test").expect("agents"),
        )
        .channel(h.channel.clone(), &[USER.to_string()])
        .channel(flaky.clone(), &[USER.to_string()])
        .channel(locked_out.clone(), &[USER.to_string()])
        .start()
        .await
        .expect("starts");

    // The healthy channel answers while the others have trouble.
    h.channel.push_text(CHAT, USER, "hello");
    assert_eq!(h.channel.wait_for_sent(1, WAIT).await.len(), 1);

    // The flaky channel comes back after its backoff and answers too.
    flaky.inner.push_text(CHAT, USER, "are you there?");
    assert_eq!(flaky.inner.wait_for_sent(1, WAIT).await.len(), 1);
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 2, "restarted once");

    // Authentication failures are not retried in a loop.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(locked_out.runs.load(Ordering::SeqCst), 1);
    let addr = daemon.http_addr().expect("http");
    let response = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .expect("get");
    assert_eq!(response.status(), 503);
    let health: Value = response.json().await.expect("json");
    assert_eq!(health["channels"]["locked"]["state"], "failed");
    assert!(
        health["channels"]["locked"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("401")
    );
    assert_eq!(health["channels"]["flaky"]["state"], "connected");
    assert_eq!(health["channels"]["memory"]["state"], "connected");
    daemon.stop().await;
}
