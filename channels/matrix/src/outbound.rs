//! Sending: `m.notice` messages with HTML, replies and threads, edits (`m.replace`), the bot's
//! ✅ ❌ reactions on confirmation prompts, typing notices. Sends carry the daemon's delivery
//! id as the Matrix transaction id, so the homeserver shows a resend after a crash once.

use hearth_channel::{ChannelError, ChatRef, MessageRef, OutboundMessage, PreviewUpdate};
use matrix_sdk::Room;
use matrix_sdk::ruma::{OwnedRoomId, OwnedTransactionId, RoomId, UserId};
use serde_json::Value;

use crate::error::MatrixError;
use crate::format;
use crate::{MAX_MESSAGE_BYTES, MatrixChannel};

/// The state key remembering that an event is a confirmation prompt.
pub(crate) fn prompt_key(event_id: &str) -> String {
    format!("prompt:{event_id}")
}

/// The joined room `chat` names, as the sync loop made it known. Never syncs itself: a sync
/// beside the loop's makes matrix-sdk drop the loop's next response as a repeat, and hearth
/// would then save a position past events it never saw. A room unknown before the loop's first
/// sync is a temporary failure (the outbox tries again once the loop has synced); after it, it
/// is a room hearth is not in.
///
/// A user id (`@me:example.org`, a schedule's target) names the direct-message room with that
/// user: the one the account data lists, else one hearth opened since, else a new one, created
/// with the user invited. Only after the first sync (before it no room is known, and every
/// start would open another) and one at a time (a typing notice and the reply it goes with
/// would otherwise open two).
pub(crate) async fn room(channel: &MatrixChannel, chat: &ChatRef) -> Result<Room, ChannelError> {
    let client = channel.client().await?;
    if chat.chat_id.starts_with('@') {
        let user = UserId::parse(&chat.chat_id).map_err(|e| {
            ChannelError::rejected(format!("`{}` is not a Matrix user id: {e}", chat.chat_id))
        })?;
        if !channel.synced.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ChannelError::transient(format!(
                "hearth does not know its direct-message rooms before its first sync; the message to {user} waits for it"
            )));
        }
        let mut opened = channel.opened_dms.lock().await;
        if let Some(room) = client.get_dm_room(&user) {
            return Ok(room);
        }
        if let Some(room) = opened.get(&user).and_then(|id| client.get_room(id)) {
            return Ok(room);
        }
        let room = client
            .create_dm(&user)
            .await
            .map_err(|e| MatrixError::sdk("creating a direct-message room", e))?;
        opened.insert(user, room.room_id().to_owned());
        return Ok(room);
    }
    let room_id: OwnedRoomId = RoomId::parse(&chat.chat_id).map_err(|e| {
        ChannelError::rejected(format!("`{}` is not a Matrix room id: {e}", chat.chat_id))
    })?;
    if let Some(room) = client.get_room(&room_id) {
        return Ok(room);
    }
    if channel.synced.load(std::sync::atomic::Ordering::SeqCst) {
        Err(ChannelError::rejected(format!(
            "hearth is not in the Matrix room {room_id}"
        )))
    } else {
        Err(ChannelError::transient(format!(
            "hearth does not know the Matrix room {room_id} before its first sync; trying again later"
        )))
    }
}

fn check_length(text: &str) -> Result<(), ChannelError> {
    if text.len() > MAX_MESSAGE_BYTES {
        return Err(ChannelError::rejected(format!(
            "a Matrix message of {} bytes is over the limit of {MAX_MESSAGE_BYTES} bytes",
            text.len()
        )));
    }
    Ok(())
}

/// Sends `content` of `event_type`, with `txn` as the transaction id when given; returns the
/// event id.
async fn send_raw(
    room: &Room,
    event_type: &str,
    content: Value,
    txn: Option<String>,
) -> Result<String, MatrixError> {
    let mut request = room.send_raw(event_type, content);
    if let Some(txn) = txn {
        request = request.with_transaction_id(&OwnedTransactionId::from(txn));
    }
    let result = request
        .await
        .map_err(|e| MatrixError::sdk(format!("sending {event_type}"), e))?;
    Ok(result.response.event_id.to_string())
}

pub(crate) async fn send(
    channel: &MatrixChannel,
    message: &OutboundMessage,
) -> Result<MessageRef, ChannelError> {
    check_length(&message.text)?;
    let room = room(channel, &message.chat).await?;
    let event_id = match &message.replaces {
        // The streamed preview becomes the reply. Only when the homeserver refused the edit is
        // the reply sent as a new message; when the outcome is unknown (the connection broke
        // after the request went out) the edit may have landed, so the send fails temporarily
        // and the retry repeats the edit under the same transaction id, which the homeserver
        // shows once.
        Some(preview) => {
            let txn = message.delivery_id.as_ref().map(|id| format!("{id}.edit"));
            match edit_in(&room, &preview.message_id, &message.text, txn).await {
                Ok(()) => preview.message_id.clone(),
                Err(error) => {
                    let error = error.kind_error();
                    if error.kind != hearth_channel::ErrorKind::Rejected {
                        return Err(error);
                    }
                    tracing::warn!(%error, "matrix: the preview could not be replaced; sending anew");
                    send_new(&room, message).await?
                }
            }
        }
        None => send_new(&room, message).await?,
    };
    seed_reactions(channel, &room, &event_id, message).await?;
    Ok(MessageRef {
        chat: message.chat.clone(),
        message_id: event_id,
    })
}

async fn send_new(room: &Room, message: &OutboundMessage) -> Result<String, ChannelError> {
    let content = format::with_relations(
        format::notice(&message.text),
        message.chat.thread_id.as_deref(),
        message.reply_to.as_deref(),
    );
    Ok(send_raw(room, "m.room.message", content, message.delivery_id.clone()).await?)
}

/// Puts the buttons' emoji on a prompt as the bot's own reactions, and remembers the prompt so
/// a reply "approve"/"deny" to it decides. Each reaction has a transaction id derived from the
/// delivery id, so a resend does not add them twice.
async fn seed_reactions(
    channel: &MatrixChannel,
    room: &Room,
    event_id: &str,
    message: &OutboundMessage,
) -> Result<(), ChannelError> {
    if message.buttons.is_empty() {
        return Ok(());
    }
    if let Some(state) = channel.state() {
        state
            .save(&prompt_key(event_id), "1")
            .await
            .map_err(|e| ChannelError::transient(e.to_string()))?;
    }
    for (i, button) in message.buttons.iter().enumerate() {
        let Some(emoji) = button.emoji.as_deref().filter(|e| !e.is_empty()) else {
            continue;
        };
        let txn = message.delivery_id.as_ref().map(|id| format!("{id}.r{i}"));
        send_raw(room, "m.reaction", format::reaction(event_id, emoji), txn).await?;
    }
    Ok(())
}

async fn edit_in(
    room: &Room,
    event_id: &str,
    text: &str,
    txn: Option<String>,
) -> Result<(), MatrixError> {
    send_raw(
        room,
        "m.room.message",
        format::replacement(event_id, text),
        txn,
    )
    .await?;
    Ok(())
}

pub(crate) async fn edit(
    channel: &MatrixChannel,
    target: &MessageRef,
    message: &OutboundMessage,
) -> Result<(), ChannelError> {
    check_length(&message.text)?;
    let room = room(channel, &target.chat).await?;
    let txn = message.delivery_id.as_ref().map(|id| format!("{id}.edit"));
    edit_in(&room, &target.message_id, &message.text, txn).await?;
    Ok(())
}

pub(crate) async fn preview(
    channel: &MatrixChannel,
    update: PreviewUpdate<'_>,
) -> Result<MessageRef, ChannelError> {
    let (chat, draft, text) = (update.chat, update.draft, update.text);
    let reply_to = update.reply_to;
    check_length(text)?;
    let room = room(channel, chat).await?;
    let message_id = match draft {
        Some(draft) => {
            edit_in(&room, &draft.message_id, text, None).await?;
            draft.message_id.clone()
        }
        None => {
            let content =
                format::with_relations(format::notice(text), chat.thread_id.as_deref(), reply_to);
            send_raw(&room, "m.room.message", content, None).await?
        }
    };
    Ok(MessageRef {
        chat: chat.clone(),
        message_id,
    })
}

pub(crate) async fn typing(channel: &MatrixChannel, chat: &ChatRef) -> Result<(), ChannelError> {
    let room = room(channel, chat).await?;
    room.typing_notice(true)
        .await
        .map_err(|e| MatrixError::sdk("sending a typing notice", e))?;
    Ok(())
}
