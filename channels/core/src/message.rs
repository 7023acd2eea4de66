//! The platform-neutral message types that cross the channel boundary.
//!
//! [`Inbound`] and [`OutboundMessage`] are stored as JSON in the inbox and the outbox, so every
//! change to them is additive: a new field has a serde default that reads an old row as it
//! meant, and is left out when it holds that default, so rows look as they did before.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::split::Measure;

/// A chat on a platform, and the thread or topic within it where the platform has them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatRef {
    /// The platform's chat id (a Telegram chat, a Discord channel, a Matrix room, an email address).
    pub chat_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The thread or topic inside the chat, where the platform has them.
    pub thread_id: Option<String>,
}

impl ChatRef {
    /// The chat `chat_id`, outside any thread.
    pub fn new(chat_id: impl Into<String>) -> Self {
        Self {
            chat_id: chat_id.into(),
            thread_id: None,
        }
    }

    /// The thread `thread_id` of this chat.
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
    /// Whether the platform vouches that `id` really sent this. Chat platforms authenticate
    /// their users, so this is true there; an email whose `From` failed the configured
    /// authentication check (DKIM/SPF/DMARC in `Authentication-Results`) is unverified. The
    /// daemon treats an unverified sender as a stranger, whatever identity it claims. Rows
    /// stored before the field existed load as verified, as they were treated.
    #[serde(default = "verified", skip_serializing_if = "is_verified")]
    pub verified: bool,
    /// What the channel lets this sender do besides talking. Chat platforms leave it
    /// [`Authority::Full`]: their users are people, and what a person may decide is the
    /// identity's business. A channel whose senders hold credentials of a narrower kind (an HTTP
    /// token of scope `chat`) says so here, and the daemon holds every sender to it. Rows stored
    /// before the field existed load as full, as they were treated.
    #[serde(default, skip_serializing_if = "Authority::is_full")]
    pub authority: Authority,
}

/// What a sender may do besides talking, as its channel grants it (see [`Sender::authority`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    /// Whatever the sender's identity may do, deciding confirmations included: a person a chat
    /// platform authenticated, or a client whose credential allows deciding.
    #[default]
    Full,
    /// Talk only: its messages start turns, but it decides no confirmation, by press, typed
    /// code or id. It may cancel its own waiting request, which decides nothing for anyone else.
    /// An HTTP token of scope `chat`: a kiosk or a chat app holds it, not the person who read
    /// the prompt.
    Chat,
}

impl Authority {
    /// Whether this is [`Authority::Full`].
    pub fn is_full(&self) -> bool {
        *self == Authority::Full
    }
}

fn verified() -> bool {
    true
}

fn is_verified(verified: &bool) -> bool {
    *verified
}

impl Sender {
    /// A verified sender with this platform user id and no display name.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: None,
            verified: true,
            authority: Authority::Full,
        }
    }

    /// Sets the display name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Marks the sender as not verified by the platform (see [`Sender::verified`]).
    pub fn unverified(mut self) -> Self {
        self.verified = false;
        self
    }

    /// Sets what the channel lets this sender do (see [`Sender::authority`]).
    pub fn with_authority(mut self, authority: Authority) -> Self {
        self.authority = authority;
        self
    }
}

/// One event received from a platform.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inbound {
    /// Unique per channel; redelivery of the same id is dropped by the inbox.
    pub platform_id: String,
    /// Where it happened.
    pub chat: ChatRef,
    /// Who did it.
    pub sender: Sender,
    /// What happened.
    pub kind: InboundKind,
    /// Opaque to the daemon: what the adapter needs to answer in the same conversation, such as
    /// an email's subject, `Message-ID` and `References`. The daemon copies it unchanged onto
    /// every [`OutboundMessage`] that answers this event (the reply, confirmation prompts and
    /// their outcomes), so the adapter can thread them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_context: Option<serde_json::Value>,
    /// The agent the client asked for, apart from the text (the HTTP API's `agent`, an
    /// OpenAI client's model `hearth/<agent>`); `None`: the router chooses. Kept out of the text
    /// so the daemon reads what the user typed (`approve K7Q2MX`, `/new`) as typed. Rows stored
    /// before this field existed load with `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl Inbound {
    /// A new message of plain text: nothing attached, no platform message id, answering none.
    pub fn message(
        platform_id: impl Into<String>,
        chat: ChatRef,
        sender: Sender,
        text: impl Into<String>,
    ) -> Self {
        Self {
            platform_id: platform_id.into(),
            chat,
            sender,
            kind: InboundKind::Message {
                text: text.into(),
                attachments: Vec::new(),
                message_id: None,
                reply_to: None,
            },
            reply_context: None,
            agent: None,
        }
    }

    /// The same event addressed to `agent` (see [`Inbound::agent`]).
    pub fn for_agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// The text of a new message; `None` for every other kind of event.
    pub fn text(&self) -> Option<&str> {
        match &self.kind {
            InboundKind::Message { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum InboundKind {
    /// A new message. `reply_to` is the platform id of the message it answers, if any.
    Message {
        /// The text, as the user wrote it.
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        /// Files sent with it.
        attachments: Vec<Attachment>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        /// The platform's id of this message, where it has one (to quote or react to it).
        message_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        /// The platform id of the message it answers.
        reply_to: Option<String>,
    },
    /// A button under one of our messages was pressed.
    Press(ButtonPress),
    /// A reaction was added to a message. On a confirmation prompt, a reaction with the emoji of
    /// one of its buttons counts as a press of that button (see [`Button::emoji`]).
    Reaction {
        /// The message reacted to.
        message_id: String,
        /// The reaction, as the platform sends it.
        emoji: String,
    },
    /// A message was edited by its author.
    Edit {
        /// The message edited.
        message_id: String,
        /// Its new text.
        text: String,
    },
    /// A message kept for the record and never answered, because answering it could start a
    /// loop or reach someone who never wrote: an automatic reply, a bounce, a mailing-list
    /// mail (email). `reason` says which rule matched.
    Notice {
        /// What it said.
        text: String,
        /// Why it is kept and not answered.
        reason: String,
    },
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
    /// What the file is, which decides what the daemon does with it.
    pub kind: AttachmentKind,
    /// Its MIME type, as the platform gave it.
    pub mime: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Its file name, where the platform has one.
    pub name: Option<String>,
    /// The content, base64 encoded, once downloaded. Adapters leave it empty and set
    /// [`Attachment::source`] instead: the daemon downloads after it has checked the sender, so
    /// a stranger's files are never fetched nor stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_base64: Option<String>,
    /// Text content for text documents, or a transcription for voice notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Where the adapter can fetch the content later with [`crate::Channel::fetch_attachment`]:
    /// a Telegram file id, a Discord CDN URL, a Matrix `mxc://` URI, an IMAP message part.
    /// Opaque to the daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The size in bytes the platform declared, when it did: the daemon refuses an attachment
    /// over its limit from this number, before reading a byte of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

impl Attachment {
    /// An attachment the adapter has not downloaded: `source` is handed back to
    /// [`crate::Channel::fetch_attachment`] once the sender is known to be allowed.
    pub fn remote(
        kind: AttachmentKind,
        mime: impl Into<String>,
        source: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            mime: mime.into(),
            name: None,
            data_base64: None,
            text: None,
            source: Some(source.into()),
            size: None,
        }
    }

    /// Sets the file name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the size the platform declared.
    pub fn with_size(mut self, size: u64) -> Self {
        self.size = Some(size);
        self
    }

    /// Whether this document is a PDF: by its type, or by its name where the platform says
    /// only `application/octet-stream` (some mail clients and chat apps do).
    pub fn is_pdf(&self) -> bool {
        let mime = self.mime.to_ascii_lowercase();
        mime.contains("/pdf")
            || (mime.is_empty() || mime == "application/octet-stream")
                && self
                    .name
                    .as_deref()
                    .is_some_and(|n| n.to_ascii_lowercase().ends_with(".pdf"))
    }
}

/// Whether a document of this type is read as text for the model: `text/*` (plain, Markdown,
/// CSV, HTML), JSON, XML, YAML, TOML. Other documents are only named, PDFs aside
/// ([`Attachment::is_pdf`]): their bytes would mean nothing to it.
pub fn is_text_mime(mime: &str) -> bool {
    let mime = mime.to_ascii_lowercase();
    mime.starts_with("text/")
        || ["json", "csv", "markdown", "xml", "yaml", "toml"]
            .iter()
            .any(|t| mime.contains(t))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
/// What kind of file an attachment is.
pub enum AttachmentKind {
    /// A picture, handed to a model that can see.
    Image,
    /// A voice message, transcribed where transcription is set up.
    Voice,
    /// Any other file.
    Document,
}

impl AttachmentKind {
    /// The kind of a file of MIME type `mime`, for platforms that only say that: `image/*` an
    /// image, `audio/*` a voice message, anything else a document.
    pub fn of_mime(mime: &str) -> Self {
        if mime.starts_with("image/") {
            Self::Image
        } else if mime.starts_with("audio/") {
            Self::Voice
        } else {
            Self::Document
        }
    }
}

/// A message the daemon wants shown.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutboundMessage {
    /// The chat (and thread) to show it in.
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
    /// The [`Inbound::reply_context`] of the event this message answers, handed back to the
    /// adapter unchanged (email: subject and threading headers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_context: Option<serde_json::Value>,
    /// The [`ButtonPress::press_id`] of the press this message answers ("not yours", "already
    /// decided"), set by the daemon on channels with [`Capabilities::acks_presses_on_receipt`]:
    /// such a platform can show the answer to the presser alone (Discord's ephemeral follow-up)
    /// instead of to the whole chat. Others ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers_press: Option<String>,
}

impl Default for ChatRef {
    fn default() -> Self {
        Self::new("")
    }
}

impl OutboundMessage {
    /// A message with `text` for `chat`, and nothing else set.
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
    /// What the button says.
    pub label: String,
    /// Returned in [`ButtonPress::data`]; at most 64 bytes so it fits Telegram's callback data.
    pub data: String,
    /// The emoji that stands for this button where choices are made by reacting (✅ for
    /// Approve, ❌ for Deny). A channel with [`Capabilities::buttons_as_reactions`] shows the
    /// button as this reaction, and a reaction with it on the message counts as a press.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
}

impl Button {
    /// A button without an emoji.
    pub fn new(label: impl Into<String>, data: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            data: data.into(),
            emoji: None,
        }
    }

    /// Sets the emoji a reaction uses to choose this button.
    pub fn with_emoji(mut self, emoji: impl Into<String>) -> Self {
        self.emoji = Some(emoji.into());
        self
    }

    /// Whether a reaction with `emoji` chooses this button. Emoji are compared without
    /// variation selectors, which platforms add or drop (`❌` and `❌\u{fe0f}` are the same).
    pub fn matches_reaction(&self, emoji: &str) -> bool {
        let bare = |e: &str| e.chars().filter(|c| *c != '\u{fe0f}').collect::<String>();
        self.emoji
            .as_deref()
            .is_some_and(|own| !own.is_empty() && bare(own) == bare(emoji))
    }
}

/// Where a sent message lives, so it can be edited later.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MessageRef {
    /// The chat the message is in.
    pub chat: ChatRef,
    /// The platform's id of the message.
    pub message_id: String,
}

/// One showing of a reply while it is being generated (see [`crate::Channel::preview`]).
#[derive(Clone, Copy, Debug)]
pub struct PreviewUpdate<'a> {
    /// Where the reply goes.
    pub chat: &'a ChatRef,
    /// The preview shown so far: `None` on the first call, then the reference that call
    /// returned.
    pub draft: Option<&'a MessageRef>,
    /// The beginning of what was generated so far, cut to one message.
    pub text: &'a str,
    /// The message the reply answers, which the preview quotes.
    pub reply_to: Option<&'a str>,
}

/// One event of a turn, for the chat the turn answers (see [`crate::Channel::turn_event`]).
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// The chat the turn answers.
    pub chat: &'a ChatRef,
    /// The answered message's [`Inbound::reply_context`], as on every message of the turn: how
    /// the channel finds its own turn.
    pub reply_context: Option<&'a serde_json::Value>,
    /// What happened.
    pub event: &'a crate::TurnEvent,
}

impl<'a> PreviewUpdate<'a> {
    /// The first showing of `text` in `chat`, quoting nothing.
    pub fn first(chat: &'a ChatRef, text: &'a str) -> Self {
        Self {
            chat,
            draft: None,
            text,
            reply_to: None,
        }
    }
}

/// The markup a platform shows, which the adapter renders the Markdown of
/// [`OutboundMessage::text`] into. Named by what it is, not by who uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// No markup: the text as it is.
    Plain,
    /// Markdown, shown by the platform (Discord, the terminal).
    Markdown,
    /// HTML with inline tags only (`b i u s code pre a blockquote`): headings become bold lines
    /// and lists stay text (Telegram).
    InlineHtml,
    /// HTML with block elements too: lists, headings, tables (Matrix `formatted_body`, email).
    Html,
}

/// What a platform can show.
///
/// Where a platform lacks something, the daemon falls back: no `buttons` (and no
/// `buttons_as_reactions`) means confirmations carry a short code to type; no `edits` means the
/// outcome of a decision is a short follow-up message instead of an edit of the prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Buttons under a message can be pressed (and arrive as [`InboundKind::Press`]).
    pub buttons: bool,
    /// Messages can be edited (and `edit` works); otherwise `edit` fails with `Rejected`.
    pub edits: bool,
    /// Users' reactions to messages arrive as [`InboundKind::Reaction`].
    pub reactions: bool,
    /// Messages can be sent into threads or topics ([`ChatRef::thread_id`]).
    pub threads: bool,
    /// Longest message, counted in [`Capabilities::measure`]; longer replies are split into
    /// several messages by the daemon's outbound plan ([`crate::plan`]) before `send`.
    pub max_message_len: Option<usize>,
    /// The unit `max_message_len` is counted in: UTF-16 code units for Telegram, characters for
    /// most others.
    pub measure: Measure,
    /// The markup the platform shows.
    pub format: Format,
    /// Minimum time between preview updates of a streamed reply; `None`: no previews.
    pub preview: Option<Duration>,
    /// How often the daemon repeats [`crate::Channel::typing`] while a reply is being made: a
    /// little less than the platform shows the indicator for (Telegram about 5 s, Discord 10 s).
    /// `None`: the platform has no typing indicator, and the daemon never calls it.
    pub typing_interval: Option<Duration>,
    /// Buttons are shown as reactions the bot seeds on the message, one per button with its
    /// [`Button::emoji`] (Matrix); a user's reaction with one of them arrives as a reaction and
    /// counts as a press. Such a channel accepts buttons even without `buttons`.
    pub buttons_as_reactions: bool,
    /// The adapter acknowledges each button press itself as it arrives, because the platform
    /// wants an answer sooner than a stored event can give one (Discord: within 3 s). The daemon
    /// then never calls [`crate::Channel::answer_press`]; it shows the outcome as an edit or a
    /// follow-up message.
    pub acks_presses_on_receipt: bool,
    /// The platform drops a send whose [`OutboundMessage::delivery_id`] it has seen recently
    /// and returns the message sent then (Matrix transaction ids, Discord nonces), so a reply
    /// sent again after a crash shows once. Without it a resend may show twice.
    pub deduplicates_sends: bool,
    /// The channel never answers strangers: an unknown sender's message only records a pairing
    /// request for the owner (`hearth pair list`) instead of a reply with the pairing code.
    /// Email sets it, because a reply to an unknown (or forged) address is backscatter.
    pub silent_with_strangers: bool,
    /// The channel shows each turn's progress as events of its own ([`crate::TurnEvent`], in
    /// [`crate::Channel::turn_event`]): the HTTP API's `agent.selected`, `tool.started` … Its
    /// replies then go without the line naming a newly chosen agent, and a decision typed as a
    /// message of its own is answered with its outcome.
    pub progress: bool,
}

impl Capabilities {
    /// Whether a person can decide a confirmation prompt here with a press: real buttons, or
    /// buttons shown as reactions. Where not, the daemon also sends the prompt to the owner's
    /// chat (`daemon.approvals_to`), and the prompt itself asks for a typed code.
    pub fn shows_buttons(&self) -> bool {
        self.buttons || self.buttons_as_reactions
    }
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
            typing_interval: None,
            buttons_as_reactions: false,
            acks_presses_on_receipt: false,
            deduplicates_sends: false,
            silent_with_strangers: false,
            progress: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_documents_and_pdfs_are_told_apart() {
        for m in [
            "text/plain",
            "application/json",
            "text/csv",
            "text/markdown",
            "text/html",
        ] {
            assert!(is_text_mime(m), "{m}");
        }
        assert!(!is_text_mime("application/pdf"));
        let file = |mime: &str, name: &str| {
            Attachment::remote(AttachmentKind::Document, mime, "x").with_name(name)
        };
        assert!(file("application/pdf", "bill").is_pdf());
        assert!(file("Application/PDF", "bill").is_pdf());
        assert!(file("application/octet-stream", "Bill.PDF").is_pdf());
        assert!(!file("application/octet-stream", "bill.zip").is_pdf());
        assert!(!file("text/plain", "notes.pdf").is_pdf());
    }

    #[test]
    fn a_reaction_matches_its_button_with_or_without_a_variation_selector() {
        let approve = Button::new("✅ Approve", "c:x:a").with_emoji("✅");
        let deny = Button::new("❌ Deny", "c:x:d").with_emoji("❌\u{fe0f}");
        assert!(approve.matches_reaction("✅"));
        assert!(approve.matches_reaction("✅\u{fe0f}"));
        assert!(deny.matches_reaction("❌"));
        assert!(!approve.matches_reaction("❌"));
        assert!(!approve.matches_reaction("👍"));
        assert!(
            !Button::new("Ok", "ok").matches_reaction("✅"),
            "no emoji, no match"
        );
    }

    #[test]
    fn a_sender_stored_before_authority_existed_reads_as_full_and_a_full_one_stores_as_before() {
        let old: Sender = serde_json::from_str(r#"{"id":"u","name":"U"}"#).expect("old row");
        assert_eq!(old.authority, Authority::Full);
        assert_eq!(
            serde_json::to_string(&Sender::new("u")).expect("json"),
            r#"{"id":"u"}"#
        );
        let chat = Sender::new("kiosk").with_authority(Authority::Chat);
        let stored = serde_json::to_string(&chat).expect("json");
        assert_eq!(stored, r#"{"id":"kiosk","authority":"chat"}"#);
        assert_eq!(serde_json::from_str::<Sender>(&stored).expect("back"), chat);
    }

    #[test]
    fn senders_are_verified_unless_marked() {
        let sender = Sender::new("me@example.org").with_name("Me");
        assert!(sender.verified);
        assert!(!sender.unverified().verified);
    }
}
