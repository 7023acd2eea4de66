//! Sending, editing and pacing: hearth's [`OutboundMessage`] as Bot API calls, one Telegram
//! message per call. The daemon splits long replies beforehand (`hearth_channel::plan`) and
//! records each part as Telegram accepts it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use hearth_channel::split::{Measure, head};
use hearth_channel::{
    Button, ChannelError, ChatRef, ErrorKind, MessageRef, OutboundMessage, PreviewUpdate,
};
use serde_json::{Value, json};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::api::Api;
use crate::config::Pacing;
use crate::error::ApiError;
use crate::format::{MAX_MESSAGE_LEN, Part, render};

/// Telegram refuses empty messages; a reply that is only buttons still needs some text.
const EMPTY_TEXT: &str = "…";

/// Sends `message` as one Telegram message and returns it. With `replaces` set, the preview is
/// edited into this message instead, or the message is sent anew if the preview cannot be
/// edited any more. Text over Telegram's limit is `Rejected`: the daemon's plan splits it.
pub(crate) async fn send(
    api: &Api,
    pacer: &Pacer,
    message: &OutboundMessage,
) -> Result<MessageRef, ChannelError> {
    let len = Measure::Utf16.len(&message.text);
    if len > MAX_MESSAGE_LEN {
        return Err(ChannelError::rejected(format!(
            "a Telegram message holds at most {MAX_MESSAGE_LEN} UTF-16 units, this one has {len}; \
             split it with hearth_channel::plan first"
        )));
    }
    let part = render(non_empty(&message.text));
    if let Some(preview) = &message.replaces {
        // The streamed preview becomes this message.
        pacer.wait(&message.chat.chat_id).await;
        match edit_part(api, preview, &part, &message.buttons).await {
            Ok(()) => return Ok(preview.clone()),
            // The preview was deleted or is too old to edit: send the message anew.
            Err(e) if e.kind == ErrorKind::Rejected => {
                warn!(error = %e, "preview could not be replaced; sending the reply anew");
            }
            Err(e) => return Err(e),
        }
    }
    pacer.wait(&message.chat.chat_id).await;
    send_part(
        api,
        &message.chat,
        &part,
        &message.buttons,
        message.reply_to.as_deref(),
    )
    .await
}

/// Replaces the text and buttons of a sent message. Text beyond one message is cut, as an edit
/// cannot add messages (the daemon fits it beforehand with `hearth_channel::plan_edit`).
pub(crate) async fn edit(
    api: &Api,
    pacer: &Pacer,
    target: &MessageRef,
    message: &OutboundMessage,
) -> Result<(), ChannelError> {
    let text = head(non_empty(&message.text), MAX_MESSAGE_LEN, Measure::Utf16);
    if text.len() < message.text.len() {
        warn!("edit longer than one message; only its beginning is shown");
    }
    pacer.wait(&target.chat.chat_id).await;
    edit_part(api, target, &render(&text), &message.buttons).await
}

/// Creates or updates the plain-text preview of a reply being generated.
pub(crate) async fn preview(
    api: &Api,
    pacer: &Pacer,
    update: PreviewUpdate<'_>,
) -> Result<Option<MessageRef>, ChannelError> {
    let (chat, draft, text) = (update.chat, update.draft, update.text);
    let reply_to = update.reply_to;
    let plain = head(non_empty(text), MAX_MESSAGE_LEN, Measure::Utf16);
    pacer.wait(&chat.chat_id).await;
    match draft {
        None => {
            let mut body = json!({ "chat_id": chat_id(&chat.chat_id), "text": plain });
            add_thread(&mut body, chat);
            add_quote(&mut body, reply_to);
            let sent: Value = api.call("sendMessage", &body).await?;
            Ok(Some(message_ref(chat, &sent)?))
        }
        Some(draft) => {
            let body = json!({
                "chat_id": chat_id(&draft.chat.chat_id),
                "message_id": message_id(draft)?,
                "text": plain,
            });
            match api.call::<Value>("editMessageText", &body).await {
                Ok(_) => Ok(Some(draft.clone())),
                Err(e) if e.is_not_modified() => Ok(Some(draft.clone())),
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// Quotes `reply_to` (a Telegram message id); if it was deleted meanwhile, the message goes
/// out anyway.
fn add_quote(body: &mut Value, reply_to: Option<&str>) {
    if let Some(reply_to) = reply_to.and_then(|r| r.parse::<i64>().ok()) {
        body["reply_parameters"] =
            json!({ "message_id": reply_to, "allow_sending_without_reply": true });
    }
}

/// `text`, or a placeholder where Telegram would refuse an empty message.
fn non_empty(text: &str) -> &str {
    if text.trim().is_empty() {
        EMPTY_TEXT
    } else {
        text
    }
}

/// The request body's text: HTML when the rendering fits, else the Markdown as plain text.
fn set_text(body: &mut Value, part: &Part) {
    match &part.html {
        Some(html) => {
            body["text"] = json!(html);
            body["parse_mode"] = json!("HTML");
        }
        None => {
            debug!(
                "the HTML rendering would exceed Telegram's limit; sending the Markdown as plain text"
            );
            plain(body, part);
        }
    }
}

async fn send_part(
    api: &Api,
    chat: &ChatRef,
    part: &Part,
    buttons: &[Button],
    reply_to: Option<&str>,
) -> Result<MessageRef, ChannelError> {
    let mut body = json!({ "chat_id": chat_id(&chat.chat_id) });
    set_text(&mut body, part);
    add_thread(&mut body, chat);
    add_quote(&mut body, reply_to);
    if !buttons.is_empty() {
        body["reply_markup"] = keyboard(buttons);
    }
    let sent: Value = match api.call("sendMessage", &body).await {
        Ok(sent) => sent,
        Err(e) if e.is_cant_parse_entities() && part.html.is_some() => {
            warn!(error = %e, "Telegram refused the HTML; sending the reply as plain text");
            plain(&mut body, part);
            api.call("sendMessage", &body).await?
        }
        Err(e) => return Err(e.into()),
    };
    message_ref(chat, &sent)
}

async fn edit_part(
    api: &Api,
    target: &MessageRef,
    part: &Part,
    buttons: &[Button],
) -> Result<(), ChannelError> {
    let mut body = json!({
        "chat_id": chat_id(&target.chat.chat_id),
        "message_id": message_id(target)?,
        // An empty keyboard removes the buttons (an approved prompt loses Approve / Deny).
        "reply_markup": keyboard(buttons),
    });
    set_text(&mut body, part);
    let result = match api.call::<Value>("editMessageText", &body).await {
        Err(e) if e.is_cant_parse_entities() && part.html.is_some() => {
            warn!(error = %e, "Telegram refused the HTML; editing with plain text");
            plain(&mut body, part);
            api.call::<Value>("editMessageText", &body).await
        }
        other => other,
    };
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_modified() => {
            debug!("edit changed nothing");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

fn plain(body: &mut Value, part: &Part) {
    body["text"] = json!(part.markdown);
    if let Some(map) = body.as_object_mut() {
        map.remove("parse_mode");
    }
}

fn keyboard(buttons: &[Button]) -> Value {
    let row: Vec<Value> = buttons
        .iter()
        .map(|b| json!({ "text": b.label, "callback_data": b.data }))
        .collect();
    if row.is_empty() {
        json!({ "inline_keyboard": [] })
    } else {
        json!({ "inline_keyboard": [row] })
    }
}

fn add_thread(body: &mut Value, chat: &ChatRef) {
    if let Some(thread) = chat
        .thread_id
        .as_deref()
        .and_then(|t| t.parse::<i64>().ok())
    {
        body["message_thread_id"] = json!(thread);
    }
}

/// Telegram takes numeric chat ids as numbers and public chats as `@name`.
pub(crate) fn chat_id(chat: &str) -> Value {
    chat.parse::<i64>()
        .map_or_else(|_| json!(chat), |id| json!(id))
}

fn message_id(target: &MessageRef) -> Result<i64, ChannelError> {
    target.message_id.parse().map_err(|_| {
        ChannelError::rejected(format!(
            "{:?} is not a Telegram message id",
            target.message_id
        ))
    })
}

fn message_ref(chat: &ChatRef, sent: &Value) -> Result<MessageRef, ChannelError> {
    let id = sent
        .get("message_id")
        .and_then(Value::as_i64)
        .ok_or_else(|| {
            ChannelError::from(ApiError::Decode {
                method: "sendMessage".into(),
                message: "the sent message has no message_id".into(),
            })
        })?;
    Ok(MessageRef {
        chat: chat.clone(),
        message_id: id.to_string(),
    })
}

/// Spaces out messages so Telegram's flood limits are rarely hit: a token bucket per chat and
/// one for the whole bot. Waiting here is cheaper than a 429 with a long `retry_after`.
pub(crate) struct Pacer {
    pacing: Pacing,
    buckets: Mutex<Buckets>,
}

struct Buckets {
    global: Bucket,
    chats: HashMap<String, Bucket>,
}

/// A token bucket: `tokens` available as of `at`.
#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(capacity: f64) -> Self {
        Self {
            tokens: capacity,
            at: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant, capacity: f64, per_second: f64) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_second).min(capacity);
        self.at = now;
    }

    /// How long until one token is available.
    fn wait(&self, per_second: f64) -> Duration {
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / per_second)
        }
    }
}

impl Pacer {
    pub(crate) fn new(pacing: Pacing) -> Self {
        Self {
            buckets: Mutex::new(Buckets {
                global: Bucket::full(f64::from(pacing.global_per_second)),
                chats: HashMap::new(),
            }),
            pacing,
        }
    }

    /// Waits until one more message to `chat` is within the limits, and takes it.
    pub(crate) async fn wait(&self, chat: &str) {
        let chat_rate = match self.pacing.per_chat_interval.as_secs_f64() {
            s if s > 0.0 => 1.0 / s,
            _ => f64::INFINITY,
        };
        let chat_capacity = f64::from(self.pacing.per_chat_burst.max(1));
        let global_rate = f64::from(self.pacing.global_per_second.max(1));
        loop {
            let delay = {
                // Plain arithmetic under the lock; poisoning cannot leave it inconsistent.
                let mut b = self
                    .buckets
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                let now = Instant::now();
                if b.chats.len() > 10_000 {
                    // Forget chats whose bucket has refilled; they start full again anyway.
                    b.chats.retain(|_, bucket| {
                        bucket.refill(now, chat_capacity, chat_rate);
                        bucket.tokens < chat_capacity
                    });
                }
                b.global.refill(now, global_rate, global_rate);
                let bucket = b
                    .chats
                    .entry(chat.to_owned())
                    .or_insert_with(|| Bucket::full(chat_capacity));
                bucket.refill(now, chat_capacity, chat_rate);
                let delay = bucket.wait(chat_rate).max(b.global.wait(global_rate));
                if delay.is_zero() {
                    if let Some(bucket) = b.chats.get_mut(chat) {
                        bucket.tokens -= 1.0;
                    }
                    b.global.tokens -= 1.0;
                }
                delay
            };
            if delay.is_zero() {
                return;
            }
            tokio::time::sleep(delay).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacing() -> Pacing {
        Pacing {
            per_chat_interval: Duration::from_secs(1),
            per_chat_burst: 3,
            global_per_second: 30,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn one_chat_gets_a_burst_then_one_a_second() {
        let pacer = Pacer::new(pacing());
        let start = Instant::now();
        let mut at = Vec::new();
        for _ in 0..6 {
            pacer.wait("1").await;
            at.push(start.elapsed().as_millis());
        }
        // Three at once, then about one a second.
        assert_eq!(&at[..3], &[0, 0, 0]);
        for pair in at[2..].windows(2) {
            assert!((990..=1010).contains(&(pair[1] - pair[0])), "{at:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn many_chats_share_the_global_limit() {
        let pacer = Pacer::new(pacing());
        let start = Instant::now();
        for chat in 0..90 {
            pacer.wait(&chat.to_string()).await;
        }
        // 30 at once, then 30 a second: the 90th goes out after two seconds.
        let elapsed = start.elapsed();
        assert!(
            elapsed >= Duration::from_millis(1990) && elapsed < Duration::from_millis(2100),
            "{elapsed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn other_chats_are_not_held_up_by_a_busy_one() {
        let pacer = Pacer::new(pacing());
        for _ in 0..3 {
            pacer.wait("busy").await;
        }
        let start = Instant::now();
        pacer.wait("quiet").await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[test]
    fn chat_ids_are_numbers_or_names() {
        assert_eq!(chat_id("-100123"), json!(-100123));
        assert_eq!(chat_id("@channel"), json!("@channel"));
    }

    #[test]
    fn empty_buttons_clear_the_keyboard() {
        assert_eq!(keyboard(&[]), json!({"inline_keyboard": []}));
    }
}
