//! The terminal as a channel: `hearth chat` talks to the same pipeline as every platform.
//!
//! Each input line is one message; the next line is read only after its reply was printed, so a
//! script can pipe lines in and get exactly one reply per line, in order. Replies stream as they
//! are generated. End of input stops the chat once the last reply is out.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::{
    Button, ButtonPress, Capabilities, Channel, ChannelContext, ChannelError, ChatRef, Format,
    Inbound, InboundKind, MessageRef, OutboundMessage, Sender,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The terminal's only chat and only user.
pub const LOCAL: &str = "local";

pub struct TerminalChannel {
    /// What the current streamed reply has printed so far.
    printed: Mutex<String>,
    /// Signalled when a reply (not a preview) was printed.
    replied: Notify,
    /// The buttons of the last prompt, until the user answered it.
    question: Mutex<Option<Vec<Button>>>,
    /// Sent texts by message id, so an edit prints only what changed.
    texts: Mutex<HashMap<String, String>>,
    sent: AtomicU64,
    /// Cancelled after end of input, once the last reply was printed.
    finished: CancellationToken,
    interactive: bool,
}

impl Default for TerminalChannel {
    fn default() -> Self {
        Self::new()
    }
}

impl TerminalChannel {
    pub fn new() -> Self {
        Self {
            printed: Mutex::new(String::new()),
            replied: Notify::new(),
            question: Mutex::new(None),
            texts: Mutex::new(HashMap::new()),
            sent: AtomicU64::new(0),
            finished: CancellationToken::new(),
            interactive: std::io::stdin().is_terminal() && std::io::stdout().is_terminal(),
        }
    }

    /// Cancelled when input ended and everything was answered.
    pub fn finished(&self) -> CancellationToken {
        self.finished.clone()
    }

    fn print(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        // A closed stdout (the reading end of a pipe went away) leaves nobody to tell.
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    fn printed(&self) -> std::sync::MutexGuard<'_, String> {
        self.printed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands an event to the inbox, retrying while the database is busy; false on shutdown.
    async fn deliver(&self, ctx: &ChannelContext, event: &Inbound) -> bool {
        loop {
            match ctx.sink.deliver(event.clone()).await {
                Ok(()) => return true,
                Err(err) => {
                    tracing::warn!(error = %err, "storing the message failed; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(500)) => {}
                        () = ctx.shutdown.cancelled() => return false,
                    }
                }
            }
        }
    }

    fn prompt(&self) {
        if self.interactive {
            self.print("› ");
        }
    }
}

#[async_trait]
impl Channel for TerminalChannel {
    fn name(&self) -> &str {
        "terminal"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            buttons: true,
            edits: true,
            format: Format::Markdown,
            preview: Some(Duration::ZERO),
            ..Capabilities::default()
        }
    }

    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        // The terminal is there as soon as it reads.
        ctx.status.connected();
        let session = chrono::Utc::now().timestamp_millis();
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        let mut count = 0u64;
        if self.interactive {
            self.print("hearth chat: type a message, /help for commands, Ctrl-D to leave.\n");
        }
        loop {
            self.prompt();
            let line = tokio::select! {
                line = lines.next_line() => line.map_err(|err| ChannelError::transient(format!("reading stdin failed: {err}")))?,
                () = ctx.shutdown.cancelled() => return Ok(()),
            };
            let Some(line) = line else {
                self.finished.cancel();
                return Ok(());
            };
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            count += 1;
            let mut event = Inbound {
                platform_id: format!("{session}-{count}"),
                chat: ChatRef::new(LOCAL),
                sender: Sender::new(LOCAL),
                kind: InboundKind::Message {
                    text: text.to_string(),
                    attachments: Vec::new(),
                    message_id: None,
                    reply_to: None,
                },
                reply_context: None,
            };
            // Deliver, wait for the reply; a reply with buttons asks y/N and waits again.
            loop {
                let replied = self.replied.notified();
                tokio::pin!(replied);
                replied.as_mut().enable();
                if !self.deliver(&ctx, &event).await {
                    return Ok(());
                }
                tokio::select! {
                    () = replied => {}
                    () = ctx.shutdown.cancelled() => return Ok(()),
                }
                let Some(buttons) = self
                    .question
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                else {
                    break;
                };
                self.print("Approve? [y/N] ");
                let answer = tokio::select! {
                    line = lines.next_line() => line.map_err(|err| ChannelError::transient(format!("reading stdin failed: {err}")))?,
                    () = ctx.shutdown.cancelled() => return Ok(()),
                };
                let yes = answer
                    .as_deref()
                    .map(str::trim)
                    .is_some_and(|a| a.eq_ignore_ascii_case("y") || a.eq_ignore_ascii_case("yes"));
                if !self.interactive {
                    // Piped input: echo the answer so the transcript reads like the screen.
                    self.print(if yes { "y\n" } else { "n\n" });
                }
                // The first button approves, the second denies (the daemon's prompt order).
                let Some(button) = buttons.get(if yes { 0 } else { 1 }).or(buttons.first()) else {
                    break;
                };
                count += 1;
                event = Inbound {
                    platform_id: format!("{session}-{count}"),
                    chat: ChatRef::new(LOCAL),
                    sender: Sender::new(LOCAL),
                    kind: InboundKind::Press(ButtonPress {
                        press_id: String::new(),
                        data: button.data.clone(),
                        message: None,
                    }),
                    reply_context: None,
                };
            }
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        if !message.buttons.is_empty() {
            *self.question.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(message.buttons.clone());
        }
        let mut printed = self.printed();
        let text = message.text.trim_end();
        let rest = match message.replaces {
            Some(_) if !printed.is_empty() && text.starts_with(printed.as_str()) => {
                &text[printed.len()..]
            }
            Some(_) if !printed.is_empty() => {
                self.print("\n");
                text
            }
            _ => text,
        };
        self.print(rest);
        self.print("\n");
        printed.clear();
        drop(printed);
        let id = (self.sent.fetch_add(1, Ordering::Relaxed) + 1).to_string();
        self.texts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), text.to_string());
        self.replied.notify_one();
        Ok(MessageRef {
            chat: message.chat.clone(),
            message_id: id,
        })
    }

    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        let text = message.text.trim_end();
        let before = self
            .texts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(target.message_id.clone(), text.to_string());
        // A prompt edited to show its outcome: print just the outcome.
        match before.as_deref().and_then(|b| text.strip_prefix(b)) {
            Some(added) => self.print(&format!("{}\n", added.trim())),
            None => self.print(&format!("{text}\n")),
        }
        Ok(())
    }

    async fn preview(
        &self,
        chat: &ChatRef,
        _draft: Option<&MessageRef>,
        text: &str,
    ) -> Result<Option<MessageRef>, ChannelError> {
        let mut printed = self.printed();
        if text.starts_with(printed.as_str()) {
            self.print(&text[printed.len()..]);
        } else {
            // The model started over (a retry): begin a fresh line.
            self.print("\n");
            self.print(text);
        }
        printed.clear();
        printed.push_str(text);
        Ok(Some(MessageRef {
            chat: chat.clone(),
            message_id: "draft".into(),
        }))
    }
}
