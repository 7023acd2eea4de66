//! Discord messages, edits and button presses as hearth [`Inbound`] events, and the per-channel
//! cursors the backfill after each READY starts from.
//!
//! DMs always reach hearth. In server channels a message counts only when its author is allowed
//! (a user in `allowed_users` or a member of one of `allowed_roles`) and it addresses the bot: a
//! mention, a reply to one of the bot's messages, or any message in a channel listed in
//! `channels`. Strangers in server channels are ignored here, so they are neither stored nor
//! offered a pairing code in public; strangers in DMs are passed on and the daemon offers them
//! a pairing code. A Discord thread has its own channel id, so a thread is a chat of its own and
//! replies land in it.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use base64::Engine;
use hearth_channel::{
    Attachment, AttachmentKind, ButtonPress, ChatRef, Inbound, InboundKind, MessageRef, Sender,
};
use serenity::model::application::ComponentInteraction;
use serenity::model::channel::{Message, MessageType};
use serenity::model::event::MessageUpdateEvent;
use serenity::model::id::UserId;
use tracing::warn;

/// The state key the cursors are kept under: a JSON object, channel id → the id of the last
/// message handled there.
pub const CURSORS_KEY: &str = "cursors";

/// Largest image passed to vision models, and largest text document passed inline.
const MAX_IMAGE_BYTES: u64 = 8 * 1024 * 1024;
const MAX_DOCUMENT_BYTES: u64 = 200 * 1024;

/// Who may talk to hearth where, and who hearth is.
#[derive(Clone, Debug)]
pub struct Rules {
    pub me: UserId,
    pub allowed_users: HashSet<u64>,
    pub allowed_roles: HashSet<u64>,
    pub channels: HashSet<u64>,
}

impl Rules {
    /// Whether `message` is for hearth, by the rules in the module docs.
    pub fn accepts(&self, message: &Message) -> bool {
        if message.author.bot || message.author.id == self.me || message.webhook_id.is_some() {
            return false;
        }
        if !matches!(
            message.kind,
            MessageType::Regular | MessageType::InlineReply
        ) {
            return false;
        }
        if message.guild_id.is_none() {
            return true;
        }
        self.allowed_in_server(message) && self.addressed(message)
    }

    fn allowed_in_server(&self, message: &Message) -> bool {
        self.allowed_users.contains(&message.author.id.get())
            || message.member.as_ref().is_some_and(|member| {
                member
                    .roles
                    .iter()
                    .any(|role| self.allowed_roles.contains(&role.get()))
            })
    }

    fn addressed(&self, message: &Message) -> bool {
        self.channels.contains(&message.channel_id.get())
            || message.mentions.iter().any(|user| user.id == self.me)
            || message
                .referenced_message
                .as_ref()
                .is_some_and(|quoted| quoted.author.id == self.me)
    }

    /// The text without the bot's own mention (`<@id>`, `<@!id>`).
    pub fn clean_text(&self, content: &str) -> String {
        let me = self.me.get();
        content
            .replace(&format!("<@{me}>"), "")
            .replace(&format!("<@!{me}>"), "")
            .trim()
            .to_owned()
    }

    /// An edit of a message hearth would have taken, as an edit event.
    pub fn edit(&self, update: &MessageUpdateEvent) -> Option<Inbound> {
        let author = update.author.as_ref()?;
        let content = update.content.as_ref()?;
        if author.bot || author.id == self.me {
            return None;
        }
        if update.guild_id.is_some() {
            let addressed = self.channels.contains(&update.channel_id.get())
                || content.contains(&format!("<@{}>", self.me.get()));
            if !(self.allowed_users.contains(&author.id.get()) && addressed) {
                return None;
            }
        }
        let edited = update
            .edited_timestamp
            .map_or_else(|| "0".to_owned(), |t| t.unix_timestamp().to_string());
        Some(Inbound {
            platform_id: format!("edit:{}:{edited}", update.id),
            chat: ChatRef::new(update.channel_id.to_string()),
            sender: sender(author),
            kind: InboundKind::Edit {
                message_id: update.id.to_string(),
                text: self.clean_text(content),
            },
            reply_context: None,
        })
    }
}

fn sender(user: &serenity::model::user::User) -> Sender {
    let name = user
        .global_name
        .clone()
        .unwrap_or_else(|| user.name.clone());
    Sender::new(user.id.to_string()).with_name(name)
}

/// A message hearth takes, as an inbound event, with its attachments downloaded through
/// `client` (a download that fails leaves the attachment named but empty).
pub async fn message(rules: &Rules, message: &Message, client: &reqwest::Client) -> Inbound {
    let mut attachments = Vec::new();
    for attachment in &message.attachments {
        let mime = attachment
            .content_type
            .clone()
            .unwrap_or_else(|| "application/octet-stream".to_owned());
        let kind = if mime.starts_with("image/") {
            AttachmentKind::Image
        } else if mime.starts_with("audio/") {
            AttachmentKind::Voice
        } else {
            AttachmentKind::Document
        };
        let limit = match kind {
            AttachmentKind::Image | AttachmentKind::Voice => MAX_IMAGE_BYTES,
            AttachmentKind::Document if is_text(&mime) => MAX_DOCUMENT_BYTES,
            AttachmentKind::Document => 0,
        };
        let mut entry = Attachment {
            kind,
            mime: mime.clone(),
            name: Some(attachment.filename.clone()),
            data_base64: None,
            text: None,
            source: None,
            size: None,
        };
        if u64::from(attachment.size) <= limit {
            match download(client, &attachment.url).await {
                Ok(bytes) if kind == AttachmentKind::Document => {
                    entry.text = Some(String::from_utf8_lossy(&bytes).into_owned());
                }
                Ok(bytes) => {
                    entry.data_base64 =
                        Some(base64::engine::general_purpose::STANDARD.encode(bytes));
                }
                Err(error) => {
                    warn!(attachment = %attachment.filename, %error, "discord attachment could not be downloaded; passed on without its content");
                }
            }
        }
        attachments.push(entry);
    }
    Inbound {
        platform_id: message.id.to_string(),
        chat: ChatRef::new(message.channel_id.to_string()),
        sender: sender(&message.author),
        kind: InboundKind::Message {
            text: rules.clean_text(&message.content),
            attachments,
            message_id: Some(message.id.to_string()),
            reply_to: message
                .message_reference
                .as_ref()
                .and_then(|r| r.message_id)
                .map(|id| id.to_string()),
        },
        reply_context: None,
    }
}

fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || mime.starts_with("application/json")
        || mime.starts_with("application/xml")
}

async fn download(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, reqwest::Error> {
    let response = client
        .get(url)
        .timeout(Duration::from_secs(30))
        .send()
        .await?
        .error_for_status()?;
    Ok(response.bytes().await?.to_vec())
}

/// A button press, as a press event. The press id carries what answering it later needs:
/// `<interaction id>:<application id>:<token>`.
pub fn press(interaction: &ComponentInteraction) -> Inbound {
    let chat = ChatRef::new(interaction.channel_id.to_string());
    Inbound {
        platform_id: format!("press:{}", interaction.id),
        chat: chat.clone(),
        sender: sender(&interaction.user),
        kind: InboundKind::Press(ButtonPress {
            press_id: format!(
                "{}:{}:{}",
                interaction.id, interaction.application_id, interaction.token
            ),
            data: interaction.data.custom_id.clone(),
            message: Some(MessageRef {
                chat,
                message_id: interaction.message.id.to_string(),
            }),
        }),
        reply_context: None,
    }
}

/// Where hearth got to in each channel it serves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cursors(pub BTreeMap<u64, u64>);

impl Cursors {
    /// Reads the stored JSON; something unreadable starts over (with a warning), because the
    /// inbox drops whatever a too-early cursor fetches again.
    pub fn parse(stored: Option<&str>) -> Self {
        let Some(text) = stored else {
            return Self::default();
        };
        match serde_json::from_str::<BTreeMap<String, String>>(text) {
            Ok(map) => Self(
                map.into_iter()
                    .filter_map(|(k, v)| Some((k.parse().ok()?, v.parse().ok()?)))
                    .collect(),
            ),
            Err(error) => {
                warn!(%error, "stored discord cursors are unreadable; starting over");
                Self::default()
            }
        }
    }

    /// The JSON stored (ids as strings, as Discord writes them).
    pub fn to_json(&self) -> String {
        let map: BTreeMap<String, String> = self
            .0
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        serde_json::to_string(&map).unwrap_or_else(|_| "{}".to_owned())
    }

    /// Moves the channel's cursor forward to `id` (never back). Returns whether it moved.
    pub fn advance(&mut self, channel: u64, id: u64) -> bool {
        let cursor = self.0.entry(channel).or_insert(0);
        if id > *cursor {
            *cursor = id;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_only_move_forward() {
        let mut cursors = Cursors::default();
        assert!(cursors.advance(7, 100));
        assert!(!cursors.advance(7, 99));
        assert!(cursors.advance(8, 5));
        let json = cursors.to_json();
        assert_eq!(json, r#"{"7":"100","8":"5"}"#);
        assert_eq!(Cursors::parse(Some(&json)), cursors);
        assert_eq!(Cursors::parse(Some("not json")), Cursors::default());
    }
}
