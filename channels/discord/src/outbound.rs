//! Sending and editing: one Discord message per `send` (the daemon splits long replies at
//! 2,000 characters with `hearth_channel::plan`), replies quoting the message they answer,
//! Approve/Deny as a button row, a nonce from the delivery id with `enforce_nonce` so a resend
//! after a crash or a timeout shows once (within Discord's nonce window), and answers to a press
//! shown to the presser alone.
//!
//! A part that Discord's rendering makes longer than 2,000 characters (a `---` rule becomes a
//! drawn line) is sent as written instead: a reply is never lost to formatting.
//!
//! Interaction calls (acknowledging a press, the private follow-up) carry the interaction token
//! in their URL. hearth makes them with its own client rather than serenity's, whose request
//! spans print the route with the token into every debug line inside them, and their errors
//! keep no URL.

use std::future::Future;
use std::time::Duration;

use hearth_channel::{
    ChannelError, ChatRef, ErrorKind, MessageRef, OutboundMessage, PreviewUpdate,
};
use serenity::all::{
    ButtonStyle, ChannelId, CreateActionRow, CreateAllowedMentions, CreateButton, CreateMessage,
    EditMessage, MessageId, MessageReference, Nonce,
};
use serenity::http::Http;
use tracing::debug;

use crate::error;
use crate::format::{MAX_MESSAGE_LEN, render};

/// Discord's longest nonce.
const MAX_NONCE_LEN: usize = 25;

/// Discord's JSON error code for a channel id it does not know.
const UNKNOWN_CHANNEL: isize = 10003;

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

/// The content to send for `text`: rendered for Discord, or as written when the rendering
/// would not fit (the daemon's plan measured the text as written); refused, naming the limit,
/// only when the text itself is over it.
pub(crate) fn fits(text: &str) -> Result<String, ChannelError> {
    let len = text.chars().count();
    if len > MAX_MESSAGE_LEN {
        return Err(ChannelError::rejected(format!(
            "discord: a message of {len} characters is over Discord's limit of {MAX_MESSAGE_LEN}"
        )));
    }
    let rendered = render(text);
    let content = if rendered.chars().count() <= MAX_MESSAGE_LEN {
        rendered
    } else {
        debug!(
            len,
            rendered = rendered.chars().count(),
            "the rendered part is over Discord's limit; sent as written"
        );
        text.to_owned()
    };
    // Discord refuses a message with neither text nor anything else.
    Ok(if content.trim().is_empty() {
        "\u{200b}".to_owned()
    } else {
        content
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
    interactions: &Interactions,
    deadline: Duration,
    message: &OutboundMessage,
) -> Result<MessageRef, ChannelError> {
    let content = fits(&message.text)?;
    if let Some(press) = &message.answers_press
        && let Some(sent) = answer_press_privately(interactions, message, press, &content).await?
    {
        return Ok(sent);
    }
    send_to_chat(http, deadline, message, content).await
}

/// Sends one message to its chat (`content` is `message.text` as it fits Discord).
async fn send_to_chat(
    http: &Http,
    deadline: Duration,
    message: &OutboundMessage,
    content: String,
) -> Result<MessageRef, ChannelError> {
    let channel = channel_id(&message.chat)?;
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
    let attempt = tokio::time::timeout(deadline, http.send_message(channel, Vec::new(), &builder))
        .await
        .map_err(|_| error::timed_out("sending a message", deadline))?;
    let (sent, chat) = match attempt {
        Ok(sent) => (sent, message.chat.clone()),
        // Channel and user ids look alike: a user id where a channel was expected (a schedule
        // sending to `discord:<my user id>`) means the DM with that user, which Discord opens
        // or finds. The reference names the DM channel, so later edits reach the message.
        Err(e) if is_unknown_channel(&e) && message.chat.thread_id.is_none() => {
            let recipient = serde_json::json!({ "recipient_id": channel.get().to_string() });
            let dm = within(
                "opening a direct message (the id is no channel, so it was tried as a user)",
                deadline,
                http.create_private_channel(&recipient),
            )
            .await?;
            let sent = within(
                "sending a direct message",
                deadline,
                http.send_message(dm.id, Vec::new(), &builder),
            )
            .await?;
            (sent, ChatRef::new(dm.id.to_string()))
        }
        Err(e) => return Err(error::map("sending a message", e)),
    };
    Ok(MessageRef {
        chat,
        message_id: sent.id.to_string(),
    })
}

/// Whether Discord answered that the channel does not exist.
fn is_unknown_channel(error: &serenity::Error) -> bool {
    matches!(
        error,
        serenity::Error::Http(serenity::http::HttpError::UnsuccessfulRequest(response))
            if response.error.code == UNKNOWN_CHANNEL
    )
}

/// "Not yours" and "already decided" go only to whoever pressed, as an ephemeral follow-up of
/// their press. `Ok(None)` when Discord refused the follow-up for good (the press's token lasts
/// 15 minutes): the answer is then sent to the chat instead. A follow-up whose outcome is
/// unknown (a timeout, a reset connection, a 5xx) is an error to retry, never also posted in
/// the chat, where the presser might see it twice and everyone else once.
async fn answer_press_privately(
    interactions: &Interactions,
    message: &OutboundMessage,
    press: &str,
    content: &str,
) -> Result<Option<MessageRef>, ChannelError> {
    let mut parts = press.splitn(3, ':');
    let (Some(_interaction), Some(application), Some(token)) =
        (parts.next(), parts.next(), parts.next())
    else {
        debug!("the press id has no interaction token; answering in the chat");
        return Ok(None);
    };
    let Some(application) = crate::config::snowflake(application) else {
        debug!("the press id names no application; answering in the chat");
        return Ok(None);
    };
    match interactions.follow_up(application, token, content).await {
        Ok(id) => Ok(Some(MessageRef {
            chat: message.chat.clone(),
            message_id: id,
        })),
        Err(error) if error.kind == ErrorKind::Rejected => {
            debug!(%error, "the press could not be answered privately; answering in the chat");
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// Interaction calls, made with hearth's own HTTP client: the interaction token is in the URL,
/// and no URL reaches an error or a log line.
#[derive(Clone, Debug)]
pub struct Interactions {
    client: reqwest::Client,
    /// `<api_url>/api/v10`.
    base: String,
    timeout: Duration,
}

impl Interactions {
    pub fn new(client: reqwest::Client, api_url: &str, timeout: Duration) -> Self {
        Self {
            client,
            base: format!("{}/api/v10", api_url.trim_end_matches('/')),
            timeout,
        }
    }

    /// Acknowledges a button press (a deferred update: the prompt is edited later).
    pub async fn acknowledge(&self, interaction: u64, token: &str) -> Result<(), ChannelError> {
        let url = format!("{}/interactions/{interaction}/{token}/callback", self.base);
        self.post(
            "acknowledging a press",
            &url,
            &serde_json::json!({ "type": 6 }),
        )
        .await
        .map(|_| ())
    }

    /// An ephemeral follow-up on a press; returns the id of the message sent.
    pub async fn follow_up(
        &self,
        application: u64,
        token: &str,
        content: &str,
    ) -> Result<String, ChannelError> {
        let url = format!("{}/webhooks/{application}/{token}", self.base);
        let body = serde_json::json!({
            "content": content,
            "flags": 64,
            "allowed_mentions": { "parse": [], "replied_user": false },
        });
        let answer = self.post("answering a press", &url, &body).await?;
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
        answer["id"].as_str().map(str::to_owned).ok_or_else(|| {
            ChannelError::protocol("discord: answering a press: the answer names no message")
        })
    }

    /// POSTs `body` to `url`; the answer's body on success.
    async fn post(
        &self,
        what: &str,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<Vec<u8>, ChannelError> {
        let response = self
            .client
            .post(url)
            .timeout(self.timeout)
            .json(body)
            .send()
            .await
            .map_err(|e| error::request(what, e))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| error::request(what, e))?;
        if status.is_success() {
            Ok(body.to_vec())
        } else {
            Err(error::status(what, status.as_u16(), &body))
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
    update: PreviewUpdate<'_>,
) -> Result<Option<MessageRef>, ChannelError> {
    let (chat, draft, text) = (update.chat, update.draft, update.text);
    let reply_to = update.reply_to;
    let message = OutboundMessage {
        reply_to: reply_to.map(str::to_owned),
        ..OutboundMessage::text(chat.clone(), text)
    };
    match draft {
        Some(draft) => {
            edit(http, deadline, draft, &message).await?;
            Ok(Some(draft.clone()))
        }
        None => {
            let content = fits(text)?;
            send_to_chat(http, deadline, &message, content)
                .await
                .map(Some)
        }
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

    #[test]
    fn a_part_the_rendering_makes_too_long_is_sent_as_written() {
        // 1,990 characters with two rules: rendered, each `---` grows to a 10-character line.
        let text = format!("{}\n---\n{}\n---\nend", "a".repeat(1000), "b".repeat(975));
        assert!(text.chars().count() <= MAX_MESSAGE_LEN);
        assert!(render(&text).chars().count() > MAX_MESSAGE_LEN);
        assert_eq!(fits(&text).expect("sent"), text);
        assert_eq!(fits("a\n---\nb").expect("sent"), "a\n──────────\nb");
    }
}
