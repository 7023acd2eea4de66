//! Telegram updates mapped onto hearth's [`Inbound`] events.
//!
//! Private chats always reach hearth. In groups the bot answers only when addressed: a
//! mention of its username, a reply to one of its messages, or a `/command`; other group
//! chatter is skipped (and its update still confirmed, so it is not fetched again).

use hearth_channel::{
    Attachment, AttachmentKind, ButtonPress, ChannelError, ChatRef, Inbound, InboundKind,
    MessageRef, Sender,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::{debug, warn};

use crate::api::Api;

/// Telegram's own cap on what a bot may download with `getFile`.
const MAX_DOWNLOAD_BYTES: u64 = 20 * 1024 * 1024;

/// One update, decoded on its own (see [`decode_update`]).
#[derive(Debug)]
pub(crate) enum Decoded {
    /// The update; `repaired` when lone UTF-16 surrogates in it were replaced by U+FFFD.
    Update { update: Value, repaired: bool },
    /// An update no decoding recovers: it is skipped, past its `update_id` when that can
    /// still be read.
    Poison {
        update_id: Option<i64>,
        error: String,
    },
}

/// Decodes one update's JSON text: strictly, else with lone surrogates replaced (a client's
/// broken emoji should still reach hearth, marked by U+FFFD), else not at all.
pub(crate) fn decode_update(json: &str) -> Decoded {
    let strict = match serde_json::from_str::<Value>(json) {
        Ok(update) => {
            return Decoded::Update {
                update,
                repaired: false,
            };
        }
        Err(error) => error,
    };
    let repaired = crate::api::repair_lone_surrogates(json);
    if matches!(repaired, std::borrow::Cow::Owned(_))
        && let Ok(update) = serde_json::from_str::<Value>(&repaired)
    {
        return Decoded::Update {
            update,
            repaired: true,
        };
    }
    /// Only the id; serde_json skips the other fields without decoding their strings and
    /// numbers, so this works where the full decode failed.
    #[derive(Deserialize)]
    struct IdOnly {
        update_id: i64,
    }
    Decoded::Poison {
        update_id: serde_json::from_str::<IdOnly>(json)
            .ok()
            .map(|u| u.update_id),
        error: strict.to_string(),
    }
}

/// The bot itself, from `getMe`.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Me {
    pub id: i64,
    #[serde(default)]
    pub username: String,
}

/// What the mapping needs besides the update.
pub(crate) struct Mapper<'a> {
    pub me: &'a Me,
    pub max_document_bytes: u64,
}

impl Mapper<'_> {
    /// The event for one update, or `None` for updates hearth does not act on. An error means
    /// the update could not be processed now (a download failed transiently) and should be
    /// tried again.
    pub(crate) async fn map(&self, update: &Value) -> Result<Option<Inbound>, ChannelError> {
        let Some(update_id) = update.get("update_id").and_then(Value::as_i64) else {
            warn!("update without update_id skipped");
            return Ok(None);
        };
        let platform_id = update_id.to_string();
        if let Some(query) = update.get("callback_query") {
            return Ok(press(platform_id, query));
        }
        if let Some(message) = update.get("message") {
            return self.message(platform_id, message).await;
        }
        if let Some(message) = update.get("edited_message") {
            let Some((chat, sender, text)) = self.addressed(message) else {
                return Ok(None);
            };
            let Some(message_id) = message.get("message_id").and_then(Value::as_i64) else {
                return Ok(None);
            };
            return Ok(Some(Inbound {
                platform_id,
                chat,
                sender,
                kind: InboundKind::Edit {
                    message_id: message_id.to_string(),
                    text,
                },
                reply_context: None,
                agent: None,
            }));
        }
        debug!(update_id, "update of a kind hearth does not handle skipped");
        Ok(None)
    }

    async fn message(
        &self,
        platform_id: String,
        message: &Value,
    ) -> Result<Option<Inbound>, ChannelError> {
        let Some((chat, sender, text)) = self.addressed(message) else {
            return Ok(None);
        };
        let attachments = self.attachments(message);
        if text.is_empty() && attachments.is_empty() {
            // Stickers, service messages (joins, pins) and the like.
            return Ok(None);
        }
        Ok(Some(Inbound {
            platform_id,
            chat,
            sender,
            kind: InboundKind::Message {
                text,
                attachments,
                message_id: message
                    .get("message_id")
                    .and_then(Value::as_i64)
                    .map(|id| id.to_string()),
                reply_to: message
                    .pointer("/reply_to_message/message_id")
                    .and_then(Value::as_i64)
                    .map(|id| id.to_string()),
            },
            reply_context: None,
            agent: None,
        }))
    }

    /// The chat, sender and cleaned text of a message meant for hearth, or `None` for group
    /// chatter, messages from other bots' channels and messages without a sender.
    fn addressed(&self, message: &Value) -> Option<(ChatRef, Sender, String)> {
        let chat = chat_of(message)?;
        let sender = sender_of(message.get("from")?)?;
        let raw = message
            .get("text")
            .or_else(|| message.get("caption"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let entities = message
            .get("entities")
            .or_else(|| message.get("caption_entities"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let kind = message.pointer("/chat/type").and_then(Value::as_str);
        let group = matches!(kind, Some("group" | "supergroup"));
        let username = self.me.username.as_str();

        // A command meant for another bot (`/help@OtherBot`) is not ours, even in private.
        let command_target = raw
            .strip_prefix('/')
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|word| word.split_once('@'))
            .map(|(_, target)| target);
        if let Some(target) = command_target
            && !target.eq_ignore_ascii_case(username)
        {
            return None;
        }
        let text = clean(raw, username);
        if !group {
            return Some((chat, sender, text));
        }
        let command = raw.starts_with('/');
        let replied = message
            .pointer("/reply_to_message/from/id")
            .and_then(Value::as_i64)
            == Some(self.me.id);
        let text_mention = entities.iter().any(|e| {
            e.get("type").and_then(Value::as_str) == Some("text_mention")
                && e.pointer("/user/id").and_then(Value::as_i64) == Some(self.me.id)
        });
        let mentioned = !username.is_empty() && find_mention(raw, username).is_some();
        (command || replied || text_mention || mentioned).then_some((chat, sender, text))
    }

    /// The message's files as references: nothing is downloaded here, before the daemon knows
    /// whether the sender is someone it serves. The source is the Bot API `file_id`, fetched
    /// later with [`crate::TelegramChannel`]'s `fetch_attachment`.
    fn attachments(&self, message: &Value) -> Vec<Attachment> {
        let mut found = Vec::new();
        let declared = |v: &Value| v.get("file_size").and_then(Value::as_u64);
        if let Some(sizes) = message.get("photo").and_then(Value::as_array) {
            // Sizes come smallest first, but pick by area to be sure.
            let largest = sizes.iter().max_by_key(|s| {
                let w = s.get("width").and_then(Value::as_u64).unwrap_or(0);
                let h = s.get("height").and_then(Value::as_u64).unwrap_or(0);
                // The sizes come from the network: a forged huge one must not overflow.
                w.saturating_mul(h)
            });
            if let Some(photo) = largest
                && let Some(file_id) = photo.get("file_id").and_then(Value::as_str)
            {
                found.push(remote(
                    AttachmentKind::Image,
                    "image/jpeg",
                    file_id,
                    declared(photo),
                ));
            }
        }
        if let Some(document) = message.get("document") {
            let mime = document
                .get("mime_type")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream");
            let name = document.get("file_name").and_then(Value::as_str);
            let size = declared(document);
            let file_id = document.get("file_id").and_then(Value::as_str);
            let mut attachment = match file_id {
                Some(file_id) => remote(AttachmentKind::Document, mime, file_id, size),
                None => attachment(AttachmentKind::Document, mime, None),
            };
            attachment.name = name.map(str::to_owned);
            if hearth_channel::is_text_mime(mime)
                && size.is_some_and(|s| s > self.max_document_bytes)
            {
                // Read as text only up to the section's own limit: said, not fetched.
                attachment.source = None;
                attachment.text = Some(format!(
                    "[document not read: larger than {} bytes]",
                    self.max_document_bytes
                ));
            }
            found.push(attachment);
        }
        if let Some(voice) = message.get("voice") {
            let mime = voice
                .get("mime_type")
                .and_then(Value::as_str)
                .unwrap_or("audio/ogg");
            if let Some(file_id) = voice.get("file_id").and_then(Value::as_str) {
                found.push(remote(
                    AttachmentKind::Voice,
                    mime,
                    file_id,
                    declared(voice),
                ));
            }
        }
        found
    }
}

/// Downloads the file behind a Bot API `file_id`, at most `limit` bytes: refused from the size
/// `getFile` declares, and the download stops as soon as more than `limit` arrived.
pub(crate) async fn fetch(api: &Api, file_id: &str, limit: u64) -> Result<Vec<u8>, ChannelError> {
    if file_id.is_empty() {
        return Err(ChannelError::rejected(
            "the attachment names no Telegram file",
        ));
    }
    let file: Value = api
        .call("getFile", &json!({ "file_id": file_id }))
        .await
        .map_err(ChannelError::from)?;
    let limit = limit.min(MAX_DOWNLOAD_BYTES);
    if file
        .get("file_size")
        .and_then(Value::as_u64)
        .is_some_and(|size| size > limit)
    {
        return Err(ChannelError::rejected(format!(
            "the file is larger than the {limit} bytes allowed"
        )));
    }
    let Some(path) = file.get("file_path").and_then(Value::as_str) else {
        // Telegram leaves the path out for files over its own 20 MB download limit.
        return Err(ChannelError::rejected(
            "Telegram offers no download of this file (bots may fetch 20 MB at most)",
        ));
    };
    api.download(path, limit).await.map_err(ChannelError::from)
}

/// A callback query (a button press) as an event.
fn press(platform_id: String, query: &Value) -> Option<Inbound> {
    let sender = sender_of(query.get("from")?)?;
    let press_id = query.get("id").and_then(Value::as_str)?.to_owned();
    let message = query.get("message");
    let chat = message
        .and_then(chat_of)
        .unwrap_or_else(|| ChatRef::new(sender.id.clone()));
    let message_ref = message
        .and_then(|m| m.get("message_id"))
        .and_then(Value::as_i64)
        .map(|id| MessageRef {
            chat: chat.clone(),
            message_id: id.to_string(),
        });
    Some(Inbound {
        platform_id,
        chat,
        sender,
        kind: InboundKind::Press(ButtonPress {
            press_id,
            data: query
                .get("data")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            message: message_ref,
        }),
        reply_context: None,
        agent: None,
    })
}

/// The chat of a message, with its forum topic as the thread.
fn chat_of(message: &Value) -> Option<ChatRef> {
    let id = message.pointer("/chat/id").and_then(Value::as_i64)?;
    let mut chat = ChatRef::new(id.to_string());
    // Replies in ordinary supergroups carry a thread id too; only forum topics are threads
    // a reply can be posted into.
    if message.get("is_topic_message").and_then(Value::as_bool) == Some(true)
        && let Some(thread) = message.get("message_thread_id").and_then(Value::as_i64)
    {
        chat.thread_id = Some(thread.to_string());
    }
    Some(chat)
}

fn sender_of(user: &Value) -> Option<Sender> {
    let id = user.get("id").and_then(Value::as_i64)?;
    let field = |k: &str| {
        user.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let name = match (field("first_name"), field("last_name")) {
        (Some(first), Some(last)) => Some(format!("{first} {last}")),
        (Some(first), None) => Some(first.to_owned()),
        (None, Some(last)) => Some(last.to_owned()),
        (None, None) => field("username").map(str::to_owned),
    };
    Some(Sender {
        id: id.to_string(),
        name,
        // Telegram authenticates its users, who are people: full authority.
        verified: true,
        authority: hearth_channel::Authority::Full,
    })
}

/// The text without `@BotName` after a command and without mentions of the bot.
fn clean(raw: &str, username: &str) -> String {
    let mut text = raw.to_owned();
    if username.is_empty() {
        return text.trim().to_owned();
    }
    while let Some(at) = find_mention(&text, username) {
        let end = at + 1 + username.len();
        let command_suffix = at > 0 && !text[..at].ends_with(char::is_whitespace);
        text.replace_range(at..end, "");
        if !command_suffix {
            // A mention as a word: drop one neighbouring space so no double space is left.
            if text[at..].starts_with(' ') {
                text.remove(at);
            } else if text[..at].ends_with(' ') {
                text.remove(at - 1);
            }
        }
    }
    text.trim().to_owned()
}

/// The byte offset of `@username` in `text` as a whole word, case-insensitively.
pub(crate) fn find_mention(text: &str, username: &str) -> Option<usize> {
    let needle = format!("@{}", username.to_ascii_lowercase());
    // ASCII lowercasing keeps byte offsets, so positions carry over to `text`.
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(&needle) {
        let at = from + pos;
        let end = at + needle.len();
        let next = lower[end..].chars().next();
        if !next.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return Some(at);
        }
        from = end;
    }
    None
}

fn attachment(kind: AttachmentKind, mime: &str, name: Option<&str>) -> Attachment {
    Attachment {
        kind,
        mime: mime.to_owned(),
        name: name.map(str::to_owned),
        data_base64: None,
        text: None,
        source: None,
        size: None,
    }
}

/// A file left on Telegram's servers, fetched once the sender proved allowed.
fn remote(kind: AttachmentKind, mime: &str, file_id: &str, size: Option<u64>) -> Attachment {
    let attachment = Attachment::remote(kind, mime, file_id);
    match size {
        Some(size) => attachment.with_size(size),
        None => attachment,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleans_commands_and_mentions() {
        assert_eq!(clean("/help@Hearth_Bot", "hearth_bot"), "/help");
        assert_eq!(
            clean("/agent@hearth_bot finance", "hearth_bot"),
            "/agent finance"
        );
        assert_eq!(
            clean("@hearth_bot what time is it", "hearth_bot"),
            "what time is it"
        );
        assert_eq!(clean("hey @hearth_bot, hi", "hearth_bot"), "hey, hi");
        assert_eq!(
            clean("ask @hearth_botanist", "hearth_bot"),
            "ask @hearth_botanist"
        );
    }

    #[test]
    fn senders_are_named_from_first_last_or_username() {
        let s = sender_of(&json!({"id": 5, "first_name": "Ada", "last_name": "L"}));
        assert_eq!(s.and_then(|s| s.name).as_deref(), Some("Ada L"));
        let s = sender_of(&json!({"id": 5, "username": "ada"}));
        assert_eq!(s.and_then(|s| s.name).as_deref(), Some("ada"));
    }

    #[test]
    fn updates_decode_alone_repaired_or_as_poison() {
        let good = r#"{"update_id":1,"message":{"text":"hi"}}"#;
        assert!(matches!(
            decode_update(good),
            Decoded::Update {
                repaired: false,
                ..
            }
        ));
        match decode_update(r#"{"update_id":2,"message":{"text":"bad \ud800"}}"#) {
            Decoded::Update { update, repaired } => {
                assert!(repaired);
                assert_eq!(update["message"]["text"], "bad \u{fffd}");
            }
            other => panic!("not repaired: {other:?}"),
        }
        match decode_update(r#"{"update_id":3,"message":{"date":1e400,"text":"\ud800"}}"#) {
            Decoded::Poison { update_id, error } => {
                assert_eq!(update_id, Some(3));
                assert!(error.contains("out of range"), "{error}");
            }
            other => panic!("decoded: {other:?}"),
        }
        assert!(matches!(
            decode_update(r#"{"message":{"date":1e400}}"#),
            Decoded::Poison {
                update_id: None,
                ..
            }
        ));
    }
}
