//! Streamed previews: shows a reply while it is generated, at most once per the channel's
//! preview interval, and remembers the preview message so the final reply replaces it.
//!
//! The preview keeps at most `daemon.max_reply_chars` of the answer (the final reply is cut to
//! that length too) and shows only its beginning up to the channel's message limit: a runaway
//! answer of megabytes costs neither memory here nor a megabyte-sized request per update.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use hearth_channel::{ChannelError, MessageRef, PreviewUpdate, Progress, preview_text};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::Runtime;
use super::turn::TurnJob;
use crate::provider::StreamEvent;

/// Where a turn shows its reply while it is generated; the pipeline implements it for a
/// channel. The runtime sees this and the channel's capabilities, never the channel.
#[async_trait]
pub trait PreviewSink: Send + Sync {
    /// Shows the update's text (everything generated so far) in its chat: creates the preview
    /// when its `draft` is `None`, otherwise updates the message it returned. The final reply
    /// replaces it.
    async fn show(&self, update: PreviewUpdate<'_>) -> Result<Option<MessageRef>, ChannelError>;
}

/// Where a turn's events go (the agent chosen, tool calls, decisions): the port beside
/// [`PreviewSink`], implemented by the pipeline for a channel. Only a channel whose
/// capabilities ask for progress receives them; a failure is the sink's to log, since a client
/// that misses a progress event still gets the answer.
#[async_trait]
pub trait TurnEventSink: Send + Sync {
    /// Hands the event to the channel.
    async fn emit(&self, progress: Progress<'_>);
}

pub struct Preview {
    sender: Option<mpsc::UnboundedSender<StreamEvent>>,
    task: Option<tokio::task::JoinHandle<()>>,
    draft: Arc<Mutex<Option<MessageRef>>>,
    /// Bytes of answer text streamed in so far, every attempt counted: what a call that is cut
    /// short was billed for.
    received: Arc<AtomicUsize>,
}

impl Preview {
    pub fn start(rt: &Runtime, job: &TurnJob) -> Self {
        let draft = Arc::new(Mutex::new(None));
        let received = Arc::new(AtomicUsize::new(0));
        let interval = match job.capabilities.preview {
            Some(interval) if rt.config.runtime.stream => interval,
            _ => {
                return Self {
                    sender: None,
                    task: None,
                    draft,
                    received,
                };
            }
        };
        let (sender, mut events) = mpsc::unbounded_channel::<StreamEvent>();
        let sink = job.preview.clone();
        let capabilities = job.capabilities.clone();
        let max_chars = rt.config.daemon.max_reply_chars;
        let chat = job.chat.clone();
        let reply_to = job.reply_to.clone();
        let prefix = job
            .note
            .as_ref()
            .map(|n| format!("{n}\n\n"))
            .unwrap_or_default();
        let shared = draft.clone();
        let counted = received.clone();
        let task = tokio::spawn(
            async move {
                let mut text = String::new();
                // Characters in `text`; deltas past the reply limit are dropped.
                let mut chars = 0usize;
                let mut shown = String::new();
                let mut last: Option<Instant> = None;
                let mut current: Option<MessageRef> = None;
                loop {
                    let event = match last {
                        Some(at) if text != shown => {
                            let wait = interval.saturating_sub(at.elapsed());
                            match tokio::time::timeout(wait, events.recv()).await {
                                Ok(event) => event,
                                Err(_) => Some(StreamEvent::Text(String::new())),
                            }
                        }
                        _ => events.recv().await,
                    };
                    let closed = event.is_none();
                    if let Some(StreamEvent::Text(delta)) = &event {
                        counted.fetch_add(delta.len(), Ordering::Relaxed);
                    }
                    match event {
                        Some(StreamEvent::Restart) => {
                            text.clear();
                            chars = 0;
                        }
                        Some(StreamEvent::Text(delta)) if chars < max_chars => {
                            let room = max_chars - chars;
                            let taken = match delta.char_indices().nth(room) {
                                Some((cut, _)) => &delta[..cut],
                                None => delta.as_str(),
                            };
                            chars += taken.chars().count();
                            text.push_str(taken);
                        }
                        Some(StreamEvent::Text(_)) | None => {}
                    }
                    let due = last.is_none_or(|at| at.elapsed() >= interval);
                    if !text.trim().is_empty() && text != shown && (due || closed) {
                        let full = preview_text(&format!("{prefix}{text}"), &capabilities);
                        let update = PreviewUpdate {
                            chat: &chat,
                            draft: current.as_ref(),
                            text: &full,
                            reply_to: reply_to.as_deref(),
                        };
                        match sink.show(update).await {
                            Ok(Some(reference)) => current = Some(reference),
                            Ok(None) => {}
                            Err(err) => tracing::debug!(error = %err, "preview update failed"),
                        }
                        shown = text.clone();
                        last = Some(Instant::now());
                    }
                    if closed {
                        break;
                    }
                }
                *shared.lock().unwrap_or_else(|p| p.into_inner()) = current;
            }
            .instrument(tracing::info_span!("preview")),
        );
        Self {
            sender: Some(sender),
            task: Some(task),
            draft,
            received,
        }
    }

    /// Bytes of answer text streamed in so far, over every call and attempt of the turn.
    pub fn received(&self) -> usize {
        self.received.load(Ordering::Relaxed)
    }

    pub fn enabled(&self) -> bool {
        self.sender.is_some()
    }

    pub fn sender(&self) -> Option<&mpsc::UnboundedSender<StreamEvent>> {
        self.sender.as_ref()
    }

    /// Stops previewing and returns the preview message, once its last update is done.
    pub async fn finish(mut self) -> Option<MessageRef> {
        self.sender = None;
        if let Some(task) = self.task.take() {
            // A panicking preview task only loses the preview; the reply is still sent whole.
            let _ = task.await;
        }
        self.draft.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
