//! Matrix timeline events mapped onto hearth's [`Inbound`] events: messages, edits, reactions
//! on prompts and replies, attachments by reference, and the rules of what a room member can
//! make hearth take ([`crate::receive`] runs the sync loop that calls these).

use hearth_channel::{
    Attachment, AttachmentKind, ChannelContext, ChatRef, Inbound, InboundKind, Sender,
};
use matrix_sdk::deserialized_responses::{
    TimelineEvent, TimelineEventKind, VerificationLevel, VerificationState,
};
use matrix_sdk::ruma::{EventId, OwnedUserId};
use matrix_sdk::{Client, Room};
use serde_json::Value;

use crate::MatrixChannel;
use crate::format::strip_reply_fallback;
use crate::media;
use crate::outbound::prompt_key;

/// What became of one timeline event.
pub(crate) enum Converted {
    Deliver(Box<Inbound>),
    /// An encrypted event from `sender` that could be meant for hearth, as received.
    Undecryptable {
        sender: String,
        event: String,
    },
    Skip,
}

/// Whether the room is a DM: hearth and at most one other member.
pub(crate) fn is_dm(room: &Room) -> bool {
    room.joined_members_count() <= 2
}

/// Whether hearth serves `sender` here: the section's `allowed_users`, or the daemon's
/// identities (owner, allow list, paired users). When the daemon cannot tell (its database is
/// unavailable) the event is kept: the daemon checks the sender again before acting.
pub(crate) async fn serves(channel: &MatrixChannel, ctx: &ChannelContext, sender: &str) -> bool {
    if channel.settings.allowed_users.iter().any(|u| u == sender) {
        return true;
    }
    match ctx.allowlist.allows(sender).await {
        Ok(allowed) => allowed,
        Err(error) => {
            tracing::warn!(%error, %sender, "matrix: cannot tell whether the daemon serves a sender; keeping the event");
            true
        }
    }
}

/// Whether the device that sent `event` is cross-signed by its owner, as far as hearth's
/// crypto store can tell: a decrypted event whose session links it to a device its owner
/// signed. An unencrypted event proves no device at all.
pub(crate) async fn device_verified(client: &Client, event: &TimelineEvent) -> bool {
    let Some(info) = event.encryption_info() else {
        return false;
    };
    match &info.verification_state {
        // Signed by its owner; whether hearth verified the owner plays no part.
        VerificationState::Verified
        | VerificationState::Unverified(VerificationLevel::UnverifiedIdentity) => true,
        // Not signed when the event was decrypted: it may have been since (the owner
        // cross-signed it meanwhile), which the store knows after its next key query.
        VerificationState::Unverified(VerificationLevel::UnsignedDevice) => {
            let Some(device_id) = info.sender_device.as_deref() else {
                return false;
            };
            match client
                .encryption()
                .get_device(&info.sender, device_id)
                .await
            {
                Ok(Some(device)) => device.is_cross_signed_by_owner(),
                Ok(None) => false,
                Err(error) => {
                    tracing::warn!(%error, "matrix: cannot read a sender's device from the crypto store");
                    false
                }
            }
        }
        // A device hearth cannot link to the sender, a changed identity, a mismatched sender.
        VerificationState::Unverified(_) => false,
    }
}

/// One timeline event as hearth sees it.
pub(crate) async fn convert(
    channel: &MatrixChannel,
    client: &Client,
    room: &Room,
    own: &OwnedUserId,
    ctx: &ChannelContext,
    event: &TimelineEvent,
    skip_before: Option<u64>,
) -> Converted {
    let json: Value = match serde_json::from_str(event.raw().json().get()) {
        Ok(json) => json,
        Err(error) => {
            tracing::warn!(%error, "matrix: an event that is not JSON; skipped");
            return Converted::Skip;
        }
    };
    let (Some(event_id), Some(sender)) = (json["event_id"].as_str(), json["sender"].as_str())
    else {
        return Converted::Skip;
    };
    if sender == own.as_str() {
        return Converted::Skip;
    }
    if let Some(cutoff) = skip_before
        && json["origin_server_ts"]
            .as_u64()
            .is_some_and(|ts| ts < cutoff)
    {
        tracing::debug!(event = %event_id, "matrix: history before the first start; skipped");
        return Converted::Skip;
    }
    if let TimelineEventKind::UnableToDecrypt { event, .. } = &event.kind {
        // Kept to be tried again only when it could be meant for hearth: in a DM, or from
        // someone hearth serves (group rooms are full of members hearth never answers).
        if !is_dm(room) && !serves(channel, ctx, sender).await {
            tracing::debug!(event = %event_id, %sender, "matrix: an undecryptable event in a group room from a sender hearth does not serve; skipped");
            return Converted::Skip;
        }
        return Converted::Undecryptable {
            sender: sender.to_owned(),
            event: event.json().get().to_owned(),
        };
    }
    // With `require_verified_devices`, a sender whose device is not cross-signed by its owner
    // (or whose event was not encrypted, which proves no device) is unverified: the daemon
    // treats them as a stranger, whatever account they claim.
    let verified =
        !channel.settings.require_verified_devices || device_verified(client, event).await;
    if !verified {
        tracing::info!(event = %event_id, %sender, "matrix: the sender's device is not cross-signed by its owner; delivered as unverified");
    }
    let who = if verified {
        Sender::new(sender)
    } else {
        Sender::new(sender).unverified()
    };
    let inbound = |chat: ChatRef, kind: InboundKind| {
        Converted::Deliver(Box::new(Inbound {
            platform_id: event_id.to_owned(),
            chat,
            sender: who.clone(),
            kind,
            reply_context: None,
            agent: None,
        }))
    };
    let content = &json["content"];
    let chat = ChatRef::new(room.room_id().to_string());
    let Some(reading) = read_event(&json, event_id) else {
        return Converted::Skip;
    };
    let chat = match reading.thread() {
        Some(root) => chat.with_thread(root),
        None => chat,
    };
    match reading {
        Reading::Reaction { target, .. } => {
            // In a group room only a reaction on one of hearth's prompts is for hearth.
            if !is_dm(room) && !is_prompt(channel, target).await {
                return Converted::Skip;
            }
        }
        Reading::Edit { .. } => {
            // In a group room only the edits of people hearth serves matter.
            if !is_dm(room) && !serves(channel, ctx, sender).await {
                return Converted::Skip;
            }
        }
        Reading::Message { text, reply_to, .. } => {
            if !is_dm(room) && !addressed(room, own, content, reply_to).await {
                return Converted::Skip;
            }
            if let Some(target) = reply_to
                && let Some(emoji) = decision_emoji(text)
                && is_prompt(channel, target).await
            {
                return inbound(
                    chat,
                    InboundKind::Reaction {
                        message_id: target.to_owned(),
                        emoji: emoji.to_owned(),
                    },
                );
            }
        }
    }
    inbound(chat, reading.event(content, event_id))
}

/// What a timeline event is to hearth, read from its JSON alone. The checks that need the room,
/// the store or the homeserver (is it a DM, one of hearth's prompts, a sender hearth serves, a
/// reply to hearth) come after it, in [`convert`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Reading<'a> {
    /// An `m.annotation` reaction with `key` on `target`.
    Reaction { target: &'a str, key: &'a str },
    /// An `m.replace` edit of `original` to `text`.
    Edit { original: &'a str, text: &'a str },
    /// A text or file message; `text` is its body without a reply's quoted fallback.
    Message {
        msgtype: &'a str,
        text: &'a str,
        /// The root of the thread it is in.
        thread: Option<&'a str>,
        /// The event it replies to (not a thread's fallback reply to its root).
        reply_to: Option<&'a str>,
    },
}

/// Reads `json`, an event of a room's timeline: `None` for what hearth never takes (other event
/// types, notices, a reaction or edit missing what it needs, a message without a text body).
pub(crate) fn read_event<'a>(json: &'a Value, event_id: &str) -> Option<Reading<'a>> {
    let content = &json["content"];
    let relates = &content["m.relates_to"];
    match json["type"].as_str() {
        Some("m.reaction") => {
            let (Some(target), Some(key)) = (relates["event_id"].as_str(), relates["key"].as_str())
            else {
                tracing::warn!(event = %event_id, "matrix: a reaction without a target or key; skipped");
                return None;
            };
            (relates["rel_type"] == "m.annotation").then_some(Reading::Reaction { target, key })
        }
        Some("m.room.message") => {
            if relates["rel_type"] == "m.replace" {
                let (Some(original), Some(text)) = (
                    relates["event_id"].as_str(),
                    content["m.new_content"]["body"].as_str(),
                ) else {
                    tracing::warn!(event = %event_id, "matrix: an edit without new content; skipped");
                    return None;
                };
                return Some(Reading::Edit { original, text });
            }
            let (Some(msgtype), Some(body)) =
                (content["msgtype"].as_str(), content["body"].as_str())
            else {
                tracing::warn!(event = %event_id, "matrix: a message without a text body; skipped");
                return None;
            };
            // Notices are what bots send (hearth's own replies are notices): answering another
            // bot's notice could start two bots talking forever.
            if msgtype == "m.notice" {
                tracing::debug!(event = %event_id, "matrix: a notice; skipped");
                return None;
            }
            let thread = (relates["rel_type"] == "m.thread")
                .then(|| relates["event_id"].as_str())
                .flatten();
            let falling_back = relates["is_falling_back"].as_bool().unwrap_or(false);
            let reply_to = relates["m.in_reply_to"]["event_id"]
                .as_str()
                .filter(|_| thread.is_none() || !falling_back);
            let text = if reply_to.is_some() {
                strip_reply_fallback(body)
            } else {
                body
            };
            Some(Reading::Message {
                msgtype,
                text,
                thread,
                reply_to,
            })
        }
        _ => None,
    }
}

impl<'a> Reading<'a> {
    /// The thread root of a message in a thread.
    pub(crate) fn thread(&self) -> Option<&'a str> {
        match self {
            Reading::Message { thread, .. } => *thread,
            _ => None,
        }
    }

    /// The event hearth takes this reading as; `content` is the event's content, for a file
    /// message's attachment.
    pub(crate) fn event(self, content: &Value, event_id: &str) -> InboundKind {
        match self {
            Reading::Reaction { target, key } => InboundKind::Reaction {
                message_id: target.to_owned(),
                emoji: key.to_owned(),
            },
            Reading::Edit { original, text } => InboundKind::Edit {
                message_id: original.to_owned(),
                text: text.to_owned(),
            },
            Reading::Message {
                msgtype,
                text,
                reply_to,
                ..
            } => {
                let (text, attachments) = match msgtype {
                    "m.file" | "m.image" | "m.audio" | "m.video" => {
                        attachment(content, msgtype, event_id)
                    }
                    _ => (text.to_owned(), Vec::new()),
                };
                InboundKind::Message {
                    text,
                    attachments,
                    message_id: Some(event_id.to_owned()),
                    reply_to: reply_to.map(str::to_owned),
                }
            }
        }
    }
}

/// Whether a message in a group room is meant for hearth: it mentions the bot (`m.mentions`,
/// its id in the text or a pill, or its localpart as a word) or replies to one of its messages.
pub(crate) async fn addressed(
    room: &Room,
    own: &OwnedUserId,
    content: &Value,
    reply_to: Option<&str>,
) -> bool {
    if mentions(own, content) {
        return true;
    }
    let Some(target) = reply_to.and_then(|id| EventId::parse(id).ok()) else {
        return false;
    };
    match room.event(&target, None).await {
        Ok(event) => event
            .raw()
            .get_field::<String>("sender")
            .ok()
            .flatten()
            .is_some_and(|sender| sender == own.as_str()),
        Err(error) => {
            tracing::warn!(%error, "matrix: cannot fetch the message a reply answers");
            false
        }
    }
}

/// Whether a message's `content` mentions hearth (`own`): in `m.mentions`, its id in the text
/// or a pill, or its localpart as a word.
pub(crate) fn mentions(own: &OwnedUserId, content: &Value) -> bool {
    let mentioned = content["m.mentions"]["user_ids"]
        .as_array()
        .is_some_and(|ids| ids.iter().any(|id| id.as_str() == Some(own.as_str())));
    if mentioned {
        return true;
    }
    let body = content["body"].as_str().unwrap_or_default();
    let html = content["formatted_body"].as_str().unwrap_or_default();
    if body.contains(own.as_str()) || html.contains(own.as_str()) {
        return true;
    }
    let localpart = own.localpart().to_lowercase();
    body.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
        .any(|word| word == localpart)
}

/// ✅ for a reply that only says approve/yes, ❌ for deny/no.
pub(crate) fn decision_emoji(text: &str) -> Option<&'static str> {
    let word = text
        .trim()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    match word.as_str() {
        "approve" | "approved" | "yes" => Some("✅"),
        "deny" | "denied" | "no" => Some("❌"),
        _ => None,
    }
}

pub(crate) async fn is_prompt(channel: &MatrixChannel, event_id: &str) -> bool {
    let Some(state) = channel.state() else {
        return false;
    };
    matches!(state.load(&prompt_key(event_id)).await, Ok(Some(_)))
}

/// The caption and the file of an `m.file`/`m.image`/… message, by reference: the file is not
/// downloaded here (see [`crate::media`]), so a stranger's files cost nothing. A file message
/// that names no file says so in the text.
pub(crate) fn attachment(
    content: &Value,
    msgtype: &str,
    event_id: &str,
) -> (String, Vec<Attachment>) {
    let body = content["body"].as_str().unwrap_or_default().to_owned();
    let filename = content["filename"].as_str().map(str::to_owned);
    // Spec: with a `filename` different from `body`, `body` is a caption.
    let caption = match &filename {
        Some(name) if *name != body => body.clone(),
        _ => String::new(),
    };
    let name = filename.or(Some(body)).filter(|n| !n.is_empty());
    let mime = content["info"]["mimetype"]
        .as_str()
        .unwrap_or("application/octet-stream")
        .to_owned();
    let kind = match msgtype {
        "m.image" => AttachmentKind::Image,
        "m.audio" => AttachmentKind::Voice,
        _ => AttachmentKind::Document,
    };
    let Some(source) = media::source_of(content) else {
        tracing::warn!(event = %event_id, "matrix: a file message without a file");
        let text = format!("{caption}\n[an attachment without a file]");
        return (text.trim().to_owned(), Vec::new());
    };
    let mut attachment = Attachment::remote(kind, mime, source);
    attachment.name = name;
    if let Some(size) = content["info"]["size"].as_u64() {
        attachment = attachment.with_size(size);
    }
    (caption, vec![attachment])
}
