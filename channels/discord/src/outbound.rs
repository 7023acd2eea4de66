//! Sending and editing: one Discord message per `send` (the daemon splits long replies at
//! 2,000 characters with `hearth_channel::plan`), replies quoting the message they answer,
//! Approve/Deny as a button row, a nonce from the delivery id with `enforce_nonce` so a resend
//! after a crash shows once, and answers to a press shown to the presser alone.

use std::future::Future;
use std::time::Duration;

use hearth_channel::{ChannelError, ChatRef, MessageRef, OutboundMessage};
use serenity::all::{
    ButtonStyle, ChannelId, CreateActionRow, CreateAllowedMentions, CreateButton, CreateMessage,
    EditMessage, MessageFlags, MessageId, MessageReference, Nonce,
};
use serenity::builder::CreateInteractionResponseFollowup;
use serenity::http::Http;

use crate::error;
use crate::format::{MAX_MESSAGE_LEN, render};

/// Discord's longest nonce.
const MAX_NONCE_LEN: usize = 25;

/// Runs one REST call with an overall deadline: serenity's ratelimiter may wait out a 429 again
/// and again, and the reqwest timeout covers one request only.
pub async fn within<T>(
    what: &str,
    deadline: Duration,
    call: impl Future<Output = serenity::Result<T>>,
) -> Result<T, ChannelError> {
    match tokio::time::timeout(deadline, call).await {
        Ok(result) => result.map_err(|e| error::map(what, e)),
        Err(_) => Err(error::timed_out(what, deadline)),
    }
}

/// The channel id of a chat, or why it is not one.
pub fn channel_id(chat: &ChatRef) -> Result<ChannelId, ChannelError> {
    let id = chat.thread_id.as_deref().unwrap_or(&chat.chat_id);
    crate::config::snowflake(id)
        .map(ChannelId::new)
        .ok_or_else(|| ChannelError::rejected(format!("`{id}` is not a discord channel id")))
}

fn message_id(id: &str) -> Result<MessageId, ChannelError> {
    crate::config::snowflake(id)
        .map(MessageId::new)
        .ok_or_else(|| ChannelError::rejected(format!("`{id}` is not a discord message id")))
}

/// Refuses text Discord would refuse, naming the limit.
fn fits(text: &str) -> Result<String, ChannelError> {
    let rendered = render(text);
    let len = rendered.chars().count();
    if len > MAX_MESSAGE_LEN {
        return Err(ChannelError::rejected(format!(
            "discord: a message of {len} characters is over Discord's limit of {MAX_MESSAGE_LEN}"
        )));
    }
    // Discord refuses a message with neither text nor anything else.
    Ok(if rendered.trim().is_empty() {
        "\u{200b}".to_owned()
    } else {
        rendered
    })
}

/// The nonce for a delivery id: the id itself when it fits Discord's 25 characters, else a
/// stable hash of it (FNV-1a, so it is the same in every process and version).
pub fn nonce(delivery_id: &str) -> String {
    if delivery_id.len() <= MAX_NONCE_LEN {
        return delivery_id.to_owned();
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in delivery_id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("h{hash:016x}")
}

/// The button row: ✅ green, ❌ red, anything else grey; the press data is the `custom_id`.
fn components(message: &OutboundMessage) -> Vec<CreateActionRow> {
    if message.buttons.is_empty() {
        return Vec::new();
    }
    let buttons = message
        .buttons
        .iter()
        .map(|button| {
            let style = match button
                .emoji
                .as_deref()
                .map(|e| e.trim_end_matches('\u{fe0f}'))
            {
                Some("✅") => ButtonStyle::Success,
                Some("❌") => ButtonStyle::Danger,
                _ => ButtonStyle::Secondary,
            };
            CreateButton::new(button.data.clone())
                .label(button.label.clone())
                .style(style)
        })
        .collect();
    vec![CreateActionRow::Buttons(buttons)]
}

/// Mentions in replies ping nobody (an LLM writing `@everyone` must not wake a server) except
/// the author of the message answered.
fn mentions() -> CreateAllowedMentions {
    CreateAllowedMentions::new().replied_user(true)
}

/// Sends one message.
pub async fn send(
    http: &Http,
    deadline: Duration,
    message: &OutboundMessage,
) -> Result<MessageRef, ChannelError> {
    let content = fits(&message.text)?;
    let channel = channel_id(&message.chat)?;
    if let Some(press) = &message.answers_press
        && let Some(sent) = answer_press_privately(http, deadline, message, press, &content).await
    {
        return Ok(sent);
    }
    if let Some(draft) = &message.replaces {
        match edit(http, deadline, draft, message).await {
            Ok(()) => return Ok(draft.clone()),
            Err(e) if e.is_temporary() => return Err(e),
            Err(e) => {
                tracing::debug!(error = %e, "the preview could not be replaced; sending anew")
            }
        }
    }
    let mut builder = CreateMessage::new()
        .content(content)
        .allowed_mentions(mentions())
        .components(components(message));
    if let Some(reply_to) = message
        .reply_to
        .as_deref()
        .and_then(crate::config::snowflake)
    {
        let mut reference = MessageReference::from((channel, MessageId::new(reply_to)));
        // A reply to a message deleted meanwhile is sent without the quote.
        reference.fail_if_not_exists = Some(false);
        builder = builder.reference_message(reference);
    }
    if let Some(id) = &message.delivery_id {
        builder = builder.nonce(Nonce::String(nonce(id))).enforce_nonce(true);
    }
    let sent = within(
        "sending a message",
        deadline,
        http.send_message(channel, Vec::new(), &builder),
    )
    .await?;
    Ok(MessageRef {
        chat: message.chat.clone(),
        message_id: sent.id.to_string(),
    })
}

/// "Not yours" and "already decided" go only to whoever pressed, as an ephemeral follow-up of
/// their press; `None` when the press cannot be answered any more (its token lasts 15 minutes),
/// and the answer is sent to the chat instead.
async fn answer_press_privately(
    http: &Http,
    deadline: Duration,
    message: &OutboundMessage,
    press: &str,
    content: &str,
) -> Option<MessageRef> {
    let mut parts = press.splitn(3, ':');
    let (_interaction, application, token) = (parts.next()?, parts.next()?, parts.next()?);
    let application = crate::config::snowflake(application)?;
    http.set_application_id(serenity::all::ApplicationId::new(application));
    let builder = CreateInteractionResponseFollowup::new()
        .content(content)
        .flags(MessageFlags::EPHEMERAL);
    match within(
        "answering a press",
        deadline,
        http.create_followup_message(token, &builder, Vec::new()),
    )
    .await
    {
        Ok(sent) => Some(MessageRef {
            chat: message.chat.clone(),
            message_id: sent.id.to_string(),
        }),
        Err(error) => {
            tracing::debug!(%error, "the press could not be answered privately; answering in the chat");
            None
        }
    }
}

/// Replaces a message's text and buttons (no buttons: the row is removed).
pub async fn edit(
    http: &Http,
    deadline: Duration,
    target: &MessageRef,
    message: &OutboundMessage,
) -> Result<(), ChannelError> {
    let content = fits(&message.text)?;
    let channel = channel_id(&target.chat)?;
    let id = message_id(&target.message_id)?;
    let builder = EditMessage::new()
        .content(content)
        .allowed_mentions(mentions())
        .components(components(message));
    within(
        "editing a message",
        deadline,
        http.edit_message(channel, id, &builder, Vec::new()),
    )
    .await?;
    Ok(())
}

/// Creates or updates a streamed preview.
pub async fn preview(
    http: &Http,
    deadline: Duration,
    chat: &ChatRef,
    draft: Option<&MessageRef>,
    text: &str,
) -> Result<Option<MessageRef>, ChannelError> {
    let message = OutboundMessage::text(chat.clone(), text);
    match draft {
        Some(draft) => {
            edit(http, deadline, draft, &message).await?;
            Ok(Some(draft.clone()))
        }
        None => send(http, deadline, &message).await.map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_fit_discord_and_stay_stable() {
        assert_eq!(nonce("hearth-12.0"), "hearth-12.0");
        let long = "outbox-1234567890123456789.12";
        assert_eq!(nonce(long), nonce(long));
        assert!(nonce(long).len() <= MAX_NONCE_LEN);
        assert_ne!(nonce(long), nonce("outbox-1234567890123456789.13"));
    }

    #[test]
    fn over_limit_text_is_refused_naming_the_limit() {
        let err = fits(&"x".repeat(2001)).expect_err("too long");
        assert_eq!(err.kind, hearth_channel::ErrorKind::Rejected);
        assert!(err.message.contains("2000"), "{err}");
        assert_eq!(fits("").expect("fits"), "\u{200b}");
    }
}
