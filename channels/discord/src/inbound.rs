//! Discord messages, edits and button presses as hearth [`Inbound`] events, and the per-channel
//! cursors the backfill after each READY starts from.
//!
//! DMs always reach hearth. In server channels a message counts only when it addresses the bot
//! (a mention, a reply to one of the bot's messages, or any message in a channel listed in
//! `channels`) and its author is allowed: a user in `allowed_users`, a member of one of
//! `allowed_roles`, or anyone the daemon serves ([`hearth_channel::ChannelContext::allowlist`]:
//! the owner's identities, paired users). Strangers in server channels are ignored here, so they
//! are neither stored nor offered a pairing code in public; strangers in DMs are passed on and the
//! daemon offers them a pairing code. A Discord thread has its own channel id, so a thread is a
//! chat of its own and replies land in it.
//!
//! The same rules hold for messages read back from history after a READY, although Discord's
//! REST messages carry neither `guild_id` nor `member`: each cursor remembers whether its channel
//! is a server channel ([`Place`]), and the roles of a backfilled author are asked for.
//!
//! Attachments are passed on by reference (their CDN URL and declared size), never downloaded
//! here: the daemon fetches them with `fetch_attachment` once it knows the sender is allowed.

use std::collections::{BTreeMap, HashSet};

use std::time::Duration;

use hearth_channel::{
    Attachment, AttachmentKind, ButtonPress, ChannelError, ChatRef, Inbound, InboundKind,
    MessageRef, Sender,
};
use serenity::model::application::ComponentInteraction;
use serenity::model::channel::{Message, MessageType};
use serenity::model::event::MessageUpdateEvent;
use serenity::model::id::{GuildId, UserId};
use tracing::{debug, warn};

use crate::config::DiscordSettings;

/// The state key the cursors are kept under: a JSON object, channel id → where hearth got to
/// there and what kind of channel it is ([`Cursors::to_json`]).
pub const CURSORS_KEY: &str = "cursors";

/// Who may talk to hearth where, and who hearth is.
#[derive(Clone, Debug)]
pub struct Rules {
    pub me: UserId,
    pub allowed_users: HashSet<u64>,
    pub allowed_roles: HashSet<u64>,
    pub channels: HashSet<u64>,
}

/// What the rules say about a message before anything is asked of the daemon or Discord.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not for hearth (a bot, a system message, unaddressed in a server channel).
    Ignore,
    /// For hearth: a DM, or an allowed user addressing the bot in a server channel.
    Take,
    /// Addresses the bot in a server channel, from someone the section does not list: taken if
    /// the daemon serves them, or (with `allowed_roles`) if they hold an allowed role.
    AskAbout { guild: GuildId, author: UserId },
}

impl Rules {
    /// The verdict on `message` by the rules in the module docs. A message without `guild_id` is
    /// a DM: the backfill sets the id of a server channel's messages from its cursor first.
    pub fn screen(&self, message: &Message) -> Verdict {
        if message.author.bot || message.author.id == self.me || message.webhook_id.is_some() {
            return Verdict::Ignore;
        }
        if !matches!(
            message.kind,
            MessageType::Regular | MessageType::InlineReply
        ) {
            return Verdict::Ignore;
        }
        let Some(guild) = message.guild_id else {
            return Verdict::Take;
        };
        if !self.addressed(message) {
            return Verdict::Ignore;
        }
        if self.allowed_users.contains(&message.author.id.get()) || self.has_role(message) {
            return Verdict::Take;
        }
        Verdict::AskAbout {
            guild,
            author: message.author.id,
        }
    }

    /// Whether the message's `member` (gateway events only) holds an allowed role.
    fn has_role(&self, message: &Message) -> bool {
        message
            .member
            .as_ref()
            .is_some_and(|member| self.any_allowed_role(member.roles.iter().map(|r| r.get())))
    }

    /// Whether any of `roles` is allowed.
    pub fn any_allowed_role(&self, mut roles: impl Iterator<Item = u64>) -> bool {
        roles.any(|role| self.allowed_roles.contains(&role))
    }

    fn addressed(&self, message: &Message) -> bool {
        self.channels.contains(&message.channel_id.get())
            || message.mentions.iter().any(|user| user.id == self.me)
            || message
                .referenced_message
                .as_ref()
                .is_some_and(|quoted| quoted.author.id == self.me)
    }

    /// The text without the bot's own mention (`<@id>`, `<@!id>`). Repeated until none is
    /// left: removing one can join its neighbours into another (`<@<@!id>!id>`, found by the
    /// fuzzer).
    pub fn clean_text(&self, content: &str) -> String {
        let me = self.me.get();
        let (plain, nick) = (format!("<@{me}>"), format!("<@!{me}>"));
        let mut text = content.to_owned();
        while text.contains(&plain) || text.contains(&nick) {
            text = text.replace(&plain, "").replace(&nick, "");
        }
        text.trim().to_owned()
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
            agent: None,
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

/// A message hearth takes, as an inbound event. Its attachments name their CDN URL and the size
/// Discord declared; nothing is downloaded here.
pub fn message(rules: &Rules, message: &Message) -> Inbound {
    let attachments = message
        .attachments
        .iter()
        .map(|attachment| {
            let mime = attachment
                .content_type
                .clone()
                .unwrap_or_else(|| "application/octet-stream".to_owned());
            let kind = AttachmentKind::of_mime(&mime);
            Attachment::remote(kind, mime, attachment.url.clone())
                .with_name(attachment.filename.clone())
                .with_size(u64::from(attachment.size))
        })
        .collect();
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
        agent: None,
    }
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
        agent: None,
    }
}

/// What kind of channel a cursor belongs to: the backfill applies the server rules to a server
/// channel's history, whose messages do not say so themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Not known yet (a cursor stored before hearth remembered it): asked with
    /// `GET /channels/{id}` before its history is read.
    Unknown,
    /// A DM (or group DM).
    Direct,
    /// A channel (or thread) of this server.
    Server(u64),
}

impl Place {
    /// The place of a message that came over the gateway, which names its server.
    pub fn of(message: &Message) -> Self {
        message
            .guild_id
            .map_or(Self::Direct, |guild| Self::Server(guild.get()))
    }
}

/// Where hearth got to in one channel it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// The id of the last message handled there.
    pub after: u64,
    pub place: Place,
}

/// Where hearth got to in each channel it serves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cursors(pub BTreeMap<u64, Cursor>);

/// A cursor as stored: `{"after": "<id>", "guild": "<id>" | null}`; a bare `"<id>"` is a cursor
/// stored by an older hearth, whose place is [`Place::Unknown`].
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum StoredCursor {
    Bare(String),
    Full {
        after: String,
        #[serde(default)]
        guild: Option<String>,
        #[serde(default)]
        direct: bool,
    },
}

impl Cursors {
    /// Reads the stored JSON; something unreadable starts over (with a warning), because the
    /// inbox drops whatever a too-early cursor fetches again.
    pub fn parse(stored: Option<&str>) -> Self {
        let Some(text) = stored else {
            return Self::default();
        };
        match serde_json::from_str::<BTreeMap<String, StoredCursor>>(text) {
            Ok(map) => Self(
                map.into_iter()
                    .filter_map(|(channel, stored)| {
                        let cursor = match stored {
                            StoredCursor::Bare(after) => Cursor {
                                after: after.parse().ok()?,
                                place: Place::Unknown,
                            },
                            StoredCursor::Full {
                                after,
                                guild,
                                direct,
                            } => Cursor {
                                after: after.parse().ok()?,
                                place: match guild.and_then(|g| g.parse().ok()) {
                                    Some(guild) => Place::Server(guild),
                                    None if direct => Place::Direct,
                                    None => Place::Unknown,
                                },
                            },
                        };
                        Some((channel.parse().ok()?, cursor))
                    })
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
        let map: serde_json::Map<String, serde_json::Value> = self
            .0
            .iter()
            .map(|(channel, cursor)| {
                let mut entry = serde_json::json!({ "after": cursor.after.to_string() });
                match cursor.place {
                    Place::Server(guild) => entry["guild"] = guild.to_string().into(),
                    Place::Direct => entry["direct"] = true.into(),
                    Place::Unknown => {}
                }
                (channel.to_string(), entry)
            })
            .collect();
        serde_json::Value::Object(map).to_string()
    }

    /// The cursor of `channel`.
    pub fn get(&self, channel: u64) -> Option<Cursor> {
        self.0.get(&channel).copied()
    }

    /// Starts following `channel` from just after `after`.
    pub fn insert(&mut self, channel: u64, after: u64, place: Place) {
        self.0.insert(channel, Cursor { after, place });
    }

    /// Records what kind of channel `channel` is.
    pub fn set_place(&mut self, channel: u64, place: Place) {
        if let Some(cursor) = self.0.get_mut(&channel) {
            cursor.place = place;
        }
    }

    /// Moves the channel's cursor forward to `id` (never back, never creating one). Returns
    /// whether it moved.
    pub fn advance(&mut self, channel: u64, id: u64) -> bool {
        match self.0.get_mut(&channel) {
            Some(cursor) if id > cursor.after => {
                cursor.after = id;
                true
            }
            _ => false,
        }
    }
}

/// A page of channel history as `GET /channels/{id}/messages` answers it: (id, message) pairs,
/// oldest first, with `None` for a message serenity cannot read (it is passed over, not lost
/// track of). An answer that is not a list is a protocol error.
pub fn history_page(
    channel: u64,
    page: &serde_json::Value,
) -> Result<Vec<(u64, Option<Message>)>, ChannelError> {
    let Some(page) = page.as_array() else {
        return Err(ChannelError::protocol(
            "discord: reading channel history: the answer is not a list",
        ));
    };
    let mut messages: Vec<(u64, Option<Message>)> = page
        .iter()
        .filter_map(|raw| {
            let id = raw["id"].as_str().and_then(crate::config::snowflake)?;
            let message = match serde_json::from_value::<Message>(raw.clone()) {
                Ok(message) => Some(message),
                Err(error) => {
                    warn!(channel, message = id, %error, "a discord message in the history could not be read; it is passed over");
                    None
                }
            };
            Some((id, message))
        })
        .collect();
    messages.sort_by_key(|(id, _)| *id);
    Ok(messages)
}

/// Why something could not be read from Discord.
#[derive(Debug)]
pub enum ReadError {
    /// Not there, or not for us (404, 403): asking again will not help.
    Gone(ChannelError),
    /// Anything else (a 502, a timeout, an answer that makes no sense): try again later.
    Failed(ChannelError),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Gone(e) | Self::Failed(e) => e.fmt(f),
        }
    }
}

/// How long one attachment download may take (the client's own timeout is for API calls).
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// Discord's CDN hosts, the only places attachments are fetched from on Discord.
const CDN_HOSTS: [&str; 2] = ["cdn.discordapp.com", "media.discordapp.net"];

/// Where attachment URLs may point: Discord's CDN over https, and, when `api_url` is a proxy or
/// a local fake, that host too. A URL in a message is the sender's to choose, so anything
/// else (an internal address, a cloud metadata service) is refused without a request.
#[derive(Clone, Debug)]
pub struct Cdn {
    proxy: Option<reqwest::Url>,
}

impl Cdn {
    pub fn new(settings: &DiscordSettings) -> Self {
        let proxy = if settings.is_discord() {
            None
        } else {
            reqwest::Url::parse(&settings.api_url).ok()
        };
        Self { proxy }
    }

    /// Whether hearth may fetch `url`.
    pub fn allows(&self, url: &reqwest::Url) -> bool {
        if !url.username().is_empty() || url.password().is_some() {
            return false;
        }
        let discord = url.scheme() == "https"
            && url.port().is_none()
            && url.host_str().is_some_and(|host| CDN_HOSTS.contains(&host));
        let proxy = self.proxy.as_ref().is_some_and(|proxy| {
            url.scheme() == proxy.scheme()
                && url.host_str() == proxy.host_str()
                && url.port_or_known_default() == proxy.port_or_known_default()
        });
        discord || proxy
    }
}

/// Downloads an attachment from its `source`: refused (for good) when the URL is not Discord's
/// CDN, when the declared size or the `Content-Length` is over `max_bytes`, or once more than
/// `max_bytes` arrived, without reading further; the body is read chunk by chunk.
pub async fn fetch(
    client: &reqwest::Client,
    cdn: &Cdn,
    attachment: &Attachment,
    max_bytes: u64,
) -> Result<Vec<u8>, ChannelError> {
    let source = attachment
        .source
        .as_deref()
        .ok_or_else(|| ChannelError::rejected("discord: the attachment names no source"))?;
    let url = reqwest::Url::parse(source)
        .ok()
        .filter(|url| cdn.allows(url))
        .ok_or_else(|| {
            ChannelError::rejected(
                "discord: the attachment's URL is not on Discord's CDN; it is not fetched",
            )
        })?;
    let over = |size: u64| {
        ChannelError::rejected(format!(
            "discord: the attachment is {size} bytes, over the limit of {max_bytes}"
        ))
    };
    if let Some(size) = attachment.size
        && size > max_bytes
    {
        return Err(over(size));
    }
    let mut response = client
        .get(url)
        .timeout(DOWNLOAD_TIMEOUT)
        .send()
        .await
        .map_err(|e| crate::error::request("downloading an attachment", e))?;
    let status = response.status();
    if !status.is_success() {
        // A short body (Discord's error) at most: the status says enough.
        let body = response.bytes().await.unwrap_or_default();
        let body = &body[..body.len().min(4096)];
        return Err(crate::error::status(
            "downloading an attachment",
            status.as_u16(),
            body,
        ));
    }
    if let Some(length) = response.content_length()
        && length > max_bytes
    {
        return Err(over(length));
    }
    let expected = attachment.size.unwrap_or(0).min(max_bytes);
    let mut body = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| crate::error::request("downloading an attachment", e))?
    {
        if body.len() as u64 + chunk.len() as u64 > max_bytes {
            debug!(
                read = body.len() + chunk.len(),
                max_bytes, "attachment over the limit; stopped reading"
            );
            return Err(ChannelError::rejected(format!(
                "discord: the attachment is larger than the limit of {max_bytes} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_remember_their_place_and_only_move_forward() {
        let mut cursors = Cursors::default();
        cursors.insert(7, 99, Place::Server(5));
        assert!(cursors.advance(7, 100));
        assert!(!cursors.advance(7, 99));
        assert!(!cursors.advance(9, 5), "no cursor is created by advancing");
        cursors.insert(8, 5, Place::Direct);
        cursors.insert(10, 1, Place::Unknown);
        let json = cursors.to_json();
        assert_eq!(
            json,
            r#"{"10":{"after":"1"},"7":{"after":"100","guild":"5"},"8":{"after":"5","direct":true}}"#
        );
        assert_eq!(Cursors::parse(Some(&json)), cursors);
        assert_eq!(Cursors::parse(Some("not json")), Cursors::default());
    }

    #[test]
    fn cursors_stored_by_an_older_hearth_load_with_an_unknown_place() {
        let cursors = Cursors::parse(Some(r#"{"7":"100","8":"x"}"#));
        assert_eq!(
            cursors.get(7),
            Some(Cursor {
                after: 100,
                place: Place::Unknown
            })
        );
        assert_eq!(cursors.get(8), None, "an unreadable id is dropped");
    }
}
