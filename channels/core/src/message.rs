//! The platform-neutral message types that cross the channel boundary.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::split::Measure;

/// A chat on a platform, and the thread or topic within it where the platform has them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatRef {
    pub chat_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

impl ChatRef {
    pub fn new(chat_id: impl Into<String>) -> Self {
        Self {
            chat_id: chat_id.into(),
            thread_id: None,
        }
    }

    pub fn with_thread(mut self, thread_id: impl Into<String>) -> Self {
        self.thread_id = Some(thread_id.into());
        self
    }
}

impl std::fmt::Display for ChatRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.thread_id {
            Some(thread) => write!(f, "{}/{}", self.chat_id, thread),
            None => f.write_str(&self.chat_id),
        }
    }
}

/// Who sent an inbound event, as the platform identifies them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// The platform's stable user id (Telegram numeric id, Matrix user id, email address).
    pub id: String,
    /// A display name for replies and logs; never used for authorisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Sender {
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: None,
        }
    }
}

/// One event received from a platform.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inbound {
    /// Unique per channel; redelivery of the same id is dropped by the inbox.
    pub platform_id: String,
    pub chat: ChatRef,
    pub sender: Sender,
    pub kind: InboundKind,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InboundKind {
    /// A new message. `reply_to` is the platform id of the message it answers, if any.
    Message {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Attachment>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<String>,
    },
    /// A button under one of our messages was pressed.
    Press(ButtonPress),
    /// A reaction was added to a message.
    Reaction { message_id: String, emoji: String },
    /// A message was edited by its author.
    Edit { message_id: String, text: String },
}

/// A button press, with what the adapter needs to acknowledge it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ButtonPress {
    /// The platform's handle for answering this press (callback query id, interaction id and
    /// token); opaque to the daemon.
    pub press_id: String,
    /// The `data` of the pressed [`Button`].
    pub data: String,
    /// The message the button was attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<MessageRef>,
}

/// A file that came with a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub kind: AttachmentKind,
    pub mime: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The content, base64 encoded, when the adapter downloaded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_base64: Option<String>,
    /// Text content for text documents, or a transcription for voice notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentKind {
    Image,
    Voice,
    Document,
}

/// A message the daemon wants shown.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutboundMessage {
    pub chat: ChatRef,
    /// Markdown as the LLM writes it; the adapter renders it in the platform's dialect.
    pub text: String,
    /// One row of buttons under the message (Approve / Deny).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buttons: Vec<Button>,
    /// Platform id of the message this one answers, quoted where the platform can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// A streamed preview of this reply, to be replaced by the final text instead of sending a
    /// new message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<MessageRef>,
    /// A stable id of this delivery, the same on every attempt. Adapters whose platform
    /// deduplicates sends (Matrix transaction ids, Discord nonces) pass it on, so a message sent
    /// again after a crash shows once; platforms without that (Telegram) may show it twice.
    /// Each part of a split reply has its own (`<reply id>.<part index>`, see [`crate::plan`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
}

impl Default for ChatRef {
    fn default() -> Self {
        Self::new("")
    }
}

impl OutboundMessage {
    pub fn text(chat: ChatRef, text: impl Into<String>) -> Self {
        Self {
            chat,
            text: text.into(),
            ..Self::default()
        }
    }
}

/// A button: what it says and what a press of it sends back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    pub label: String,
    /// Returned in [`ButtonPress::data`]; at most 64 bytes so it fits Telegram's callback data.
    pub data: String,
}

/// Where a sent message lives, so it can be edited later.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MessageRef {
    pub chat: ChatRef,
    pub message_id: String,
}

/// How an adapter renders the Markdown of [`OutboundMessage::text`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Plain,
    Markdown,
    TelegramHtml,
    Html,
}

/// What a platform can show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    pub buttons: bool,
    pub edits: bool,
    pub reactions: bool,
    pub threads: bool,
    /// Longest message, counted in [`Capabilities::measure`]; longer replies are split into
    /// several messages by the daemon's outbound plan ([`crate::plan`]) before `send`.
    pub max_message_len: Option<usize>,
    /// The unit `max_message_len` is counted in: UTF-16 code units for Telegram, characters for
    /// most others.
    pub measure: Measure,
    pub format: Format,
    /// Minimum time between preview updates of a streamed reply; `None`: no previews.
    pub preview: Option<Duration>,
}

impl Default for Capabilities {
    fn default() -> Self {
        Self {
            buttons: false,
            edits: false,
            reactions: false,
            threads: false,
            max_message_len: None,
            measure: Measure::Chars,
            format: Format::Plain,
            preview: None,
        }
    }
}
