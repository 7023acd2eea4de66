//! A fake Telegram Bot API server speaking the real JSON.
//!
//! Routes `/bot<token>/<method>` (method names case-insensitive, as teloxide sends PascalCase)
//! and `/file/bot<token>/<path>`. It validates like Telegram where hearth could get it wrong:
//! malformed or unsupported HTML is "can't parse entities", text over 4096 UTF-16 units of
//! visible text is "message is too long", an edit that changes nothing is "message is not
//! modified", and a wrong token is 401 for every method. `getUpdates` long-polls and its
//! `offset` confirms earlier updates, as on Telegram.
//!
//! ```no_run
//! # async fn demo() {
//! use hearth_testkit::telegram::{FakeTelegram, Incoming};
//!
//! let tg = FakeTelegram::start("123:TEST").await;
//! tg.push_text(42, 42, "hello");                            // a private chat
//! tg.push(Incoming::text(-100, 42, "chatter"));              // a group, not addressed
//! tg.push(Incoming::text(-100, 42, "hi").mention().in_thread(7));
//! tg.push_raw_text(42, 42, r#""\ud800""#);                  // a text JSON cannot decode
//! // point the channel at tg.api_url(), then:
//! let replies = tg.wait_for_messages(42, 1, std::time::Duration::from_secs(5)).await;
//! # }
//! ```
//! The server stops when the value is dropped.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::net::Served;

/// The fake bot's user id.
pub const BOT_ID: i64 = 777_000;
/// The fake bot's username.
pub const BOT_USERNAME: &str = "hearth_test_bot";
/// Telegram's limit on a message's visible text, in UTF-16 code units.
pub const MAX_TEXT_LEN: usize = 4096;

/// A message the bot sent, as the chat shows it now.
#[derive(Clone, Debug, PartialEq)]
pub struct FakeMessage {
    pub id: i64,
    /// The visible text (HTML tags removed and entities decoded when sent as HTML).
    pub text: String,
    /// The text exactly as sent in the last `sendMessage` / `editMessageText`.
    pub raw: String,
    /// `Some("HTML")` when sent with a parse mode.
    pub parse_mode: Option<String>,
    /// The inline keyboard, row by row, as (label, callback data).
    pub buttons: Keyboard,
    pub thread_id: Option<i64>,
    /// The message this one replies to.
    pub reply_to: Option<i64>,
    /// How many times it was edited (text or keyboard).
    pub edits: u32,
}

/// An answered callback query.
#[derive(Clone, Debug, PartialEq)]
pub struct AnsweredCallback {
    pub id: String,
    pub text: Option<String>,
    pub show_alert: bool,
}

/// A `sendChatAction` call.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatAction {
    pub chat: i64,
    pub action: String,
    pub thread_id: Option<i64>,
}

/// One request as received, without the token.
#[derive(Clone, Debug)]
pub struct FakeRequest {
    /// The method name as sent (`sendMessage`, `SendMessage` …) or `file` for downloads.
    pub method: String,
    /// The parameters (JSON body, else query string).
    pub body: Value,
    /// When it arrived, for pacing checks.
    pub at: Instant,
}

/// A message from a user, built up and queued with [`FakeTelegram::push`].
#[derive(Clone, Debug)]
pub struct Incoming {
    chat: i64,
    user: i64,
    text: String,
    mention: bool,
    thread_id: Option<i64>,
    reply_to: Option<i64>,
    photo: Option<Vec<u8>>,
    document: Option<(String, String, Vec<u8>)>,
    voice: Option<Vec<u8>>,
    edit_of: Option<i64>,
}

impl Incoming {
    /// A text from `user` in `chat`. Positive chat ids are private chats, negative ones
    /// supergroups, as on Telegram.
    pub fn text(chat: i64, user: i64, text: impl Into<String>) -> Self {
        Self {
            chat,
            user,
            text: text.into(),
            mention: false,
            thread_id: None,
            reply_to: None,
            photo: None,
            document: None,
            voice: None,
            edit_of: None,
        }
    }

    /// Starts the text with `@hearth_test_bot ` and a mention entity.
    pub fn mention(mut self) -> Self {
        self.mention = true;
        self
    }

    /// Posts it in a forum topic.
    pub fn in_thread(mut self, thread_id: i64) -> Self {
        self.thread_id = Some(thread_id);
        self
    }

    /// Makes it a reply to message `message_id` of the chat (the bot's, if the bot sent it).
    pub fn reply_to(mut self, message_id: i64) -> Self {
        self.reply_to = Some(message_id);
        self
    }

    /// Attaches a photo; the text becomes its caption. The largest size serves `bytes`.
    pub fn photo(mut self, bytes: Vec<u8>) -> Self {
        self.photo = Some(bytes);
        self
    }

    /// Attaches a document; the text becomes its caption.
    pub fn document(mut self, name: &str, mime: &str, bytes: Vec<u8>) -> Self {
        self.document = Some((name.to_owned(), mime.to_owned(), bytes));
        self
    }

    /// Attaches a voice note (OGG/Opus as Telegram sends them).
    pub fn voice(mut self, bytes: Vec<u8>) -> Self {
        self.voice = Some(bytes);
        self
    }

    /// Sends it as an `edited_message` of the user's message `message_id`.
    pub fn edit_of(mut self, message_id: i64) -> Self {
        self.edit_of = Some(message_id);
        self
    }
}

#[derive(Default)]
struct Chat {
    next_id: i64,
    /// Every message in the chat (the users' and the bot's), by id.
    messages: Vec<StoredMessage>,
}

#[derive(Clone)]
struct StoredMessage {
    from_bot: bool,
    json: Value,
    fake: FakeMessage,
}

/// An update as served: its id and its exact JSON text.
#[derive(Clone)]
struct QueuedUpdate {
    id: i64,
    json: String,
}

/// The text a raw literal replaces in [`FakeTelegram::push_raw_text`].
const RAW_PLACEHOLDER: &str = "\u{0}hearth-testkit-raw-text\u{0}";

struct Failure {
    method: String,
    /// Only calls whose `text` contains this fail.
    text: Option<String>,
    status: u16,
    retry_after: Option<u64>,
    description: Option<String>,
}

impl Failure {
    fn matches(&self, method: &str, params: &Value) -> bool {
        self.method == method && text_matches(self.text.as_deref(), params)
    }
}

/// A call to hold without an answer, like a server that hangs.
struct Hold {
    method: String,
    text: Option<String>,
    /// Whether the call takes effect (the message is shown) before the answer is withheld.
    processed: bool,
    /// Instead of never answering, the answer starts and the connection breaks in the middle
    /// of it (a reset after Telegram took the message).
    cut: bool,
}

fn text_matches(needle: Option<&str>, params: &Value) -> bool {
    needle.is_none_or(|needle| {
        params
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|text| text.contains(needle))
    })
}

#[derive(Default)]
struct Inner {
    token: String,
    token_valid: bool,
    next_update_id: i64,
    /// Updates not yet confirmed by an `offset`, as the JSON text `getUpdates` serves.
    updates: VecDeque<QueuedUpdate>,
    /// Every update ever queued, for `redeliver`.
    history: Vec<QueuedUpdate>,
    /// Updates sent again, returned by the next `getUpdates` whatever its offset.
    redelivered: VecDeque<QueuedUpdate>,
    /// Methods whose calls wait until released (lower case).
    held_methods: std::collections::HashSet<String>,
    confirmed_offset: i64,
    chats: HashMap<i64, Chat>,
    files: HashMap<String, (String, Vec<u8>)>,
    next_file: u64,
    /// `getFile` leaves `file_size` out and downloads come chunked with no length, as a
    /// misbehaving server (or a proxy) would: a client can only count what arrives.
    hide_file_sizes: bool,
    callbacks: HashMap<String, bool>,
    next_callback: u64,
    answered: Vec<AnsweredCallback>,
    actions: Vec<ChatAction>,
    failures: VecDeque<Failure>,
    holds: Vec<Hold>,
    /// How many calls are being held without an answer.
    held: usize,
    requests: Vec<FakeRequest>,
    webhook: Option<Value>,
    commands: Option<Value>,
}

struct Shared {
    inner: Mutex<Inner>,
    /// Bumped on every change, so long polls and waiters wake up.
    changed: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Plain data; a panicking test thread cannot leave it half-updated.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }
}

/// A running fake Bot API server. Stops when dropped.
pub struct FakeTelegram {
    shared: Arc<Shared>,
    served: Served,
}

impl std::fmt::Debug for FakeTelegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeTelegram")
            .field("addr", &self.served.addr())
            .finish_non_exhaustive()
    }
}

impl FakeTelegram {
    /// Starts the server on a free port of 127.0.0.1, accepting `token`.
    pub async fn start(token: &str) -> Self {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                token: token.to_owned(),
                token_valid: true,
                next_update_id: 100_000,
                ..Inner::default()
            }),
            changed: watch::channel(0).0,
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        Self {
            shared,
            served: Served::start(app).await,
        }
    }

    /// The Bot API base URL (`http://127.0.0.1:PORT`), without `/bot<token>`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.served.addr())
    }

    /// Queues a private-chat text from `user` (chat id = user id when `chat` is the user).
    /// Returns the update id.
    pub fn push_text(&self, chat: i64, user: i64, text: &str) -> i64 {
        self.push(Incoming::text(chat, user, text))
    }

    /// Queues a user's message as an update; returns the update id.
    pub fn push(&self, incoming: Incoming) -> i64 {
        let id = {
            let mut inner = self.shared.lock();
            let message = inner.user_message(&incoming);
            let key = if incoming.edit_of.is_some() {
                "edited_message"
            } else {
                "message"
            };
            inner.queue(key, message)
        };
        self.shared.bump();
        id
    }

    /// Queues a raw update (the `update_id` is added); returns the update id.
    pub fn push_update(&self, mut update: Value) -> i64 {
        let id = {
            let mut inner = self.shared.lock();
            let id = inner.next_update_id;
            inner.next_update_id += 1;
            update["update_id"] = json!(id);
            let update = QueuedUpdate {
                id,
                json: update.to_string(),
            };
            inner.history.push(update.clone());
            inner.updates.push_back(update);
            id
        };
        self.shared.bump();
        id
    }

    /// Queues an update given as JSON text, served byte for byte as written, so it may hold
    /// what a JSON library would refuse (a lone UTF-16 surrogate `\ud800`, a number out of
    /// range). `object` is a JSON object without `update_id`; `{"update_id":N,` replaces its
    /// opening brace. Returns the update id.
    pub fn push_raw_update(&self, object: &str) -> i64 {
        let body = object.trim_start().strip_prefix('{').unwrap_or(object);
        let id = {
            let mut inner = self.shared.lock();
            let id = inner.next_update_id;
            inner.next_update_id += 1;
            let separator = if body.trim_start().starts_with('}') {
                ""
            } else {
                ","
            };
            inner.updates.push_back(QueuedUpdate {
                id,
                json: format!("{{\"update_id\":{id}{separator}{body}"),
            });
            id
        };
        self.shared.bump();
        id
    }

    /// Queues a private-chat text message like [`FakeTelegram::push_text`] whose `text` is the
    /// JSON string literal `literal`, quotes included, served byte for byte: `r#""\ud800""#`
    /// is a lone surrogate Telegram's JSON can carry and strict decoders refuse. Returns the
    /// update id.
    pub fn push_raw_text(&self, chat: i64, user: i64, literal: &str) -> i64 {
        let id = {
            let mut inner = self.shared.lock();
            let message = inner.user_message(&Incoming::text(chat, user, RAW_PLACEHOLDER));
            let id = inner.queue("message", message);
            let placeholder = Value::String(RAW_PLACEHOLDER.to_owned()).to_string();
            if let Some(update) = inner.updates.back_mut() {
                update.json = update.json.replacen(&placeholder, literal, 1);
            }
            id
        };
        self.shared.bump();
        id
    }

    /// Queues a press by `user` of the button with `data` under message `message_id` in `chat`.
    /// Returns the callback query id.
    pub fn press(&self, chat: i64, user: i64, message_id: i64, data: &str) -> String {
        let id = {
            let mut inner = self.shared.lock();
            inner.next_callback += 1;
            let query_id = format!("cbq-{}", inner.next_callback);
            inner.callbacks.insert(query_id.clone(), false);
            let message = inner
                .chats
                .get(&chat)
                .and_then(|c| c.messages.iter().find(|m| m.fake.id == message_id))
                .map(|m| m.json.clone())
                .unwrap_or_else(
                    || json!({"message_id": message_id, "date": 0, "chat": chat_json(chat, user)}),
                );
            let query = json!({
                "id": query_id,
                "from": user_json(user),
                "message": message,
                "chat_instance": format!("ci-{chat}"),
                "data": data,
            });
            inner.queue("callback_query", query);
            query_id
        };
        self.shared.bump();
        id
    }

    /// What the bot sent to `chat`, in order, as it shows now.
    pub fn messages(&self, chat: i64) -> Vec<FakeMessage> {
        self.shared.lock().bot_messages(chat)
    }

    /// Waits until the bot sent at least `n` messages to `chat` (or `timeout` passed) and
    /// returns them; the caller asserts on what arrived.
    pub async fn wait_for_messages(
        &self,
        chat: i64,
        n: usize,
        timeout: Duration,
    ) -> Vec<FakeMessage> {
        let mut changed = self.shared.changed.subscribe();
        let wait = async {
            loop {
                changed.borrow_and_update();
                if self.messages(chat).len() >= n {
                    return;
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        };
        // Timing out is an expected outcome: the caller asserts on the result.
        let _ = tokio::time::timeout(timeout, wait).await;
        self.messages(chat)
    }

    /// Every answered callback query, in order.
    pub fn answered_callbacks(&self) -> Vec<AnsweredCallback> {
        self.shared.lock().answered.clone()
    }

    /// Every `sendChatAction`, in order.
    pub fn chat_actions(&self) -> Vec<ChatAction> {
        self.shared.lock().actions.clone()
    }

    /// Makes the next call of `method` fail with `status` (429 with `retry_after`, 403 "bot was
    /// blocked", 500 …). Queued failures are used in order, one call each.
    pub fn fail_next(&self, method: &str, status: u16, retry_after: Option<u64>) {
        self.shared.lock().failures.push_back(Failure {
            method: method.to_ascii_lowercase(),
            text: None,
            status,
            retry_after,
            description: None,
        });
    }

    /// Makes the next call of `method` whose `text` contains `needle` fail with `status` (and
    /// `retry_after` for a 429), once: e.g. the second part of a split reply.
    pub fn fail_next_containing(
        &self,
        method: &str,
        needle: &str,
        status: u16,
        retry_after: Option<u64>,
    ) {
        self.shared.lock().failures.push_back(Failure {
            method: method.to_ascii_lowercase(),
            text: Some(needle.to_owned()),
            status,
            retry_after,
            description: None,
        });
    }

    /// From now on `getFile` declares no `file_size` and downloads carry no `Content-Length`.
    pub fn hide_file_sizes(&self) {
        self.shared.lock().hide_file_sizes = true;
    }

    /// Makes the next call of `method` fail with `status` and Telegram's `description`, e.g.
    /// `400, "Bad Request: can't parse entities: ..."`.
    pub fn fail_next_with(&self, method: &str, status: u16, description: &str) {
        self.shared.lock().failures.push_back(Failure {
            method: method.to_ascii_lowercase(),
            text: None,
            status,
            retry_after: None,
            description: Some(description.to_owned()),
        });
    }

    /// Makes the next call of `method` whose `text` contains `needle` hang: it is never
    /// answered (until the server stops), as when a server or the network stalls. With
    /// `processed` the call takes effect first (the message is shown, the answer is lost: what
    /// a client that dies now cannot tell apart); without, it has no effect at all.
    pub fn hold_next_containing(&self, method: &str, needle: &str, processed: bool) {
        self.shared.lock().holds.push(Hold {
            method: method.to_ascii_lowercase(),
            text: Some(needle.to_owned()),
            processed,
            cut: false,
        });
    }

    /// The next call of `method` whose text contains `needle` takes effect (the message is
    /// shown), and then its answer breaks off mid-body: the client cannot know the outcome.
    pub fn cut_next_containing(&self, method: &str, needle: &str) {
        self.shared.lock().holds.push(Hold {
            method: method.to_ascii_lowercase(),
            text: Some(needle.to_owned()),
            processed: true,
            cut: true,
        });
    }

    /// Waits until at least `n` calls are being held (or `timeout` passed); returns how many.
    pub async fn wait_for_held(&self, n: usize, timeout: Duration) -> usize {
        let mut changed = self.shared.changed.subscribe();
        let wait = async {
            loop {
                changed.borrow_and_update();
                if self.shared.lock().held >= n {
                    return;
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        };
        // Timing out is an expected outcome: the caller asserts on the count.
        let _ = tokio::time::timeout(timeout, wait).await;
        self.shared.lock().held
    }

    /// While false, every call is refused with 401 as for a revoked token.
    pub fn set_token_valid(&self, valid: bool) {
        self.shared.lock().token_valid = valid;
    }

    /// Every request, in order; the token is not part of it.
    pub fn requests(&self) -> Vec<FakeRequest> {
        self.shared.lock().requests.clone()
    }

    /// The requests of one method (compared case-insensitively).
    pub fn requests_of(&self, method: &str) -> Vec<FakeRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.method.eq_ignore_ascii_case(method))
            .collect()
    }

    /// Sends the update `update_id` once more, with its id, as Telegram does when it did not
    /// get (or lost) the acknowledgement of a delivery. The next `getUpdates` returns it
    /// whatever its offset. False if no such update was ever queued.
    pub fn redeliver(&self, update_id: i64) -> bool {
        let found = {
            let mut inner = self.shared.lock();
            let update = inner.history.iter().find(|u| u.id == update_id).cloned();
            update.map(|u| inner.redelivered.push_back(u)).is_some()
        };
        self.shared.bump();
        found
    }

    /// Makes calls of `method` wait (as a slow server would) until [`FakeTelegram::release`].
    pub fn hold(&self, method: &str) {
        self.shared
            .lock()
            .held_methods
            .insert(method.to_ascii_lowercase());
        self.shared.bump();
    }

    /// Lets held and later calls of `method` through.
    pub fn release(&self, method: &str) {
        self.shared
            .lock()
            .held_methods
            .remove(&method.to_ascii_lowercase());
        self.shared.bump();
    }

    /// The highest offset a `getUpdates` confirmed: updates below it are gone.
    pub fn confirmed_offset(&self) -> i64 {
        self.shared.lock().confirmed_offset
    }

    /// Updates queued and not yet confirmed.
    pub fn pending_updates(&self) -> usize {
        self.shared.lock().updates.len()
    }

    /// The commands registered with `setMyCommands`.
    pub fn commands(&self) -> Option<Value> {
        self.shared.lock().commands.clone()
    }

    /// The parameters of the last `setWebhook`, until `deleteWebhook`.
    pub fn webhook(&self) -> Option<Value> {
        self.shared.lock().webhook.clone()
    }
}

impl Inner {
    fn queue(&mut self, key: &str, payload: Value) -> i64 {
        let id = self.next_update_id;
        self.next_update_id += 1;
        let json = json!({ "update_id": id, key: payload }).to_string();
        let update = QueuedUpdate { id, json };
        self.history.push(update.clone());
        self.updates.push_back(update);
        id
    }

    fn add_file(&mut self, bytes: Vec<u8>, prefix: &str) -> Value {
        self.next_file += 1;
        let file_id = format!("{prefix}-{}", self.next_file);
        let path = format!("{prefix}s/file_{}.bin", self.next_file);
        let size = bytes.len();
        self.files.insert(file_id.clone(), (path, bytes));
        json!({ "file_id": file_id, "file_unique_id": format!("u{file_id}"), "file_size": size })
    }

    fn user_message(&mut self, m: &Incoming) -> Value {
        let mut text = m.text.clone();
        let mut entities = Vec::new();
        if m.mention {
            text = format!("@{BOT_USERNAME} {text}");
            entities
                .push(json!({"type": "mention", "offset": 0, "length": BOT_USERNAME.len() + 1}));
        }
        if text.starts_with('/') {
            let len = text
                .split_whitespace()
                .next()
                .map_or(0, |w| w.encode_utf16().count());
            entities.push(json!({"type": "bot_command", "offset": 0, "length": len}));
        }
        let reply = m.reply_to.and_then(|id| {
            self.chats
                .get(&m.chat)
                .and_then(|c| c.messages.iter().find(|s| s.fake.id == id))
                .map(|s| s.json.clone())
        });
        let chat = self.chats.entry(m.chat).or_default();
        let message_id = match m.edit_of {
            Some(id) => id,
            None => {
                chat.next_id += 1;
                chat.next_id
            }
        };
        let mut message = json!({
            "message_id": message_id,
            "from": user_json(m.user),
            "chat": chat_json(m.chat, m.user),
            "date": 1_700_000_000,
        });
        if let Some(thread) = m.thread_id {
            message["message_thread_id"] = json!(thread);
            message["is_topic_message"] = json!(true);
        }
        if let Some(reply) = reply {
            message["reply_to_message"] = reply;
        } else if let Some(id) = m.reply_to {
            message["reply_to_message"] =
                json!({"message_id": id, "date": 0, "chat": chat_json(m.chat, m.user)});
        }
        if m.edit_of.is_some() {
            message["edit_date"] = json!(1_700_000_100);
        }
        let media = m.photo.is_some() || m.document.is_some() || m.voice.is_some();
        let (text_key, entities_key) = if media {
            ("caption", "caption_entities")
        } else {
            ("text", "entities")
        };
        if !text.is_empty() {
            message[text_key] = json!(text);
        }
        if !entities.is_empty() {
            message[entities_key] = json!(entities);
        }
        if let Some(bytes) = &m.photo {
            // Smaller renditions first, as Telegram lists them, each a different file.
            let small = self.add_file(bytes.iter().take(16).copied().collect(), "photo");
            let medium = self.add_file(bytes.iter().take(64).copied().collect(), "photo");
            let large = self.add_file(bytes.clone(), "photo");
            let size = |mut f: Value, w: u32, h: u32| {
                f["width"] = json!(w);
                f["height"] = json!(h);
                f
            };
            message["photo"] = json!([
                size(small, 90, 60),
                size(medium, 320, 213),
                size(large, 1280, 853)
            ]);
        }
        if let Some((name, mime, bytes)) = &m.document {
            let mut file = self.add_file(bytes.clone(), "document");
            file["file_name"] = json!(name);
            file["mime_type"] = json!(mime);
            message["document"] = file;
        }
        if let Some(bytes) = &m.voice {
            let mut file = self.add_file(bytes.clone(), "voice");
            file["duration"] = json!(3);
            file["mime_type"] = json!("audio/ogg");
            message["voice"] = file;
        }
        let fake = FakeMessage {
            id: message_id,
            text: text.clone(),
            raw: text,
            parse_mode: None,
            buttons: Vec::new(),
            thread_id: m.thread_id,
            reply_to: m.reply_to,
            edits: 0,
        };
        let chat = self.chats.entry(m.chat).or_default();
        if m.edit_of.is_none() {
            chat.messages.push(StoredMessage {
                from_bot: false,
                json: message.clone(),
                fake,
            });
        }
        message
    }

    fn bot_messages(&self, chat: i64) -> Vec<FakeMessage> {
        self.chats
            .get(&chat)
            .map(|c| {
                c.messages
                    .iter()
                    .filter(|m| m.from_bot)
                    .map(|m| m.fake.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn user_json(user: i64) -> Value {
    json!({
        "id": user, "is_bot": false,
        "first_name": "User", "last_name": user.to_string(),
        "username": format!("user{user}"), "language_code": "en",
    })
}

fn bot_json() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "Hearth", "username": BOT_USERNAME})
}

fn chat_json(chat: i64, user: i64) -> Value {
    if chat > 0 {
        json!({"id": chat, "type": "private", "first_name": "User", "last_name": user.to_string()})
    } else {
        json!({"id": chat, "type": "supergroup", "title": format!("Group {chat}"), "is_forum": true})
    }
}

/// A Bot API error answer.
fn error(status: u16, description: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        axum::Json(json!({"ok": false, "error_code": status, "description": description})),
    )
        .into_response()
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    raw: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        return download(&shared, rest);
    }
    let Some(rest) = path.strip_prefix("/bot") else {
        return error(404, "Not Found");
    };
    let Some((token, method)) = rest.split_once('/') else {
        return error(404, "Not Found");
    };
    // Parameters come as JSON, or as a query string / form like some clients send them.
    let params = serde_json::from_slice::<Value>(&raw).unwrap_or_else(|_| {
        let form: HashMap<String, String> = serde_urlencoded_pairs(&raw);
        let map = query.into_iter().chain(form).map(|(k, v)| {
            let v = serde_json::from_str(&v).unwrap_or(Value::String(v));
            (k, v)
        });
        Value::Object(map.collect())
    });
    let hold;
    {
        let mut inner = shared.lock();
        inner.requests.push(FakeRequest {
            method: method.to_owned(),
            body: params.clone(),
            at: Instant::now(),
        });
        if token != inner.token || !inner.token_valid {
            return error(401, "Unauthorized");
        }
        let lower = method.to_ascii_lowercase();
        if let Some(at) = inner
            .failures
            .iter()
            .position(|f| f.matches(&lower, &params))
        {
            let failure = inner.failures.remove(at).expect("position is in range");
            return failure_response(&failure);
        }
        hold = inner
            .holds
            .iter()
            .position(|h| h.method == lower && text_matches(h.text.as_deref(), &params))
            .map(|at| inner.holds.remove(at));
    }
    shared.bump();
    let method = method.to_ascii_lowercase();
    if hold.as_ref().is_some_and(|h| !h.processed) {
        return hang(&shared).await;
    }
    // A held method answers only once released (a server slow to accept a login).
    let mut changed = shared.changed.subscribe();
    while shared.lock().held_methods.contains(&method) {
        if changed.changed().await.is_err() {
            break;
        }
    }
    if method == "getupdates" {
        return get_updates(&shared, &params).await;
    }
    let response = {
        let mut inner = shared.lock();
        call(&mut inner, &method, &params)
    };
    shared.bump();
    if hold.as_ref().is_some_and(|h| h.cut) {
        return cut_off();
    }
    if hold.is_some() {
        return hang(&shared).await;
    }
    match response {
        Ok(result) => ok(result),
        Err((status, description)) => error(status, &description),
    }
}

/// An answer whose body breaks off after a few bytes: the connection ends mid-response.
fn cut_off() -> Response {
    let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
        Ok(Bytes::from_static(b"{\"ok\":true,\"res")),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset",
        )),
    ];
    (
        [(header::CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(futures::stream::iter(chunks)),
    )
        .into_response()
}

/// Never answers: counts the call as held and waits until the server stops (or the client
/// goes away and the request is dropped).
async fn hang(shared: &Shared) -> Response {
    shared.lock().held += 1;
    shared.bump();
    std::future::pending::<()>().await;
    error(504, "Gateway Timeout")
}

/// `a=1&b=2` bodies; only what tests need (no percent-decoding of `+`).
fn serde_urlencoded_pairs(raw: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(raw)
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn failure_response(failure: &Failure) -> Response {
    if let Some(description) = &failure.description {
        return error(failure.status, description);
    }
    match failure.status {
        429 => {
            let wait = failure.retry_after.unwrap_or(5);
            let code = StatusCode::TOO_MANY_REQUESTS;
            (
                code,
                axum::Json(json!({
                    "ok": false, "error_code": 429,
                    "description": format!("Too Many Requests: retry after {wait}"),
                    "parameters": {"retry_after": wait},
                })),
            )
                .into_response()
        }
        401 => error(401, "Unauthorized"),
        403 => error(403, "Forbidden: bot was blocked by the user"),
        400 => error(400, "Bad Request: chat not found"),
        409 => error(
            409,
            "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
        ),
        502 => error(502, "Bad Gateway"),
        status => error(status, "Internal Server Error"),
    }
}

fn download(shared: &Shared, rest: &str) -> Response {
    let mut inner = shared.lock();
    let Some((token, path)) = rest.split_once('/') else {
        return StatusCode::NOT_FOUND.into_response();
    };
    inner.requests.push(FakeRequest {
        method: "file".to_owned(),
        body: json!({ "file_path": path }),
        at: Instant::now(),
    });
    if token != inner.token || !inner.token_valid {
        return error(401, "Unauthorized");
    }
    match inner.files.values().find(|(p, _)| p == path) {
        Some((_, bytes)) if inner.hide_file_sizes => {
            let chunks: Vec<Result<Bytes, std::io::Error>> = bytes
                .chunks(16 * 1024)
                .map(|c| Ok(Bytes::copy_from_slice(c)))
                .collect();
            axum::body::Body::from_stream(futures::stream::iter(chunks)).into_response()
        }
        Some((_, bytes)) => bytes.clone().into_response(),
        None => error(404, "Not Found"),
    }
}

/// Long polling: confirms updates below `offset`, then answers at once if any are left, else
/// waits up to `timeout` seconds for one.
async fn get_updates(shared: &Shared, params: &Value) -> Response {
    let offset = params.get("offset").and_then(Value::as_i64);
    let timeout = params.get("timeout").and_then(Value::as_u64).unwrap_or(0);
    let limit = params
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(100, |l| l.clamp(1, 100)) as usize;
    {
        let mut inner = shared.lock();
        if inner.webhook.is_some() {
            return error(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
            );
        }
        if let Some(offset) = offset {
            inner.updates.retain(|u| u.id >= offset);
            inner.confirmed_offset = inner.confirmed_offset.max(offset);
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let mut changed = shared.changed.subscribe();
    loop {
        changed.borrow_and_update();
        let found: Vec<String> = {
            let mut inner = shared.lock();
            let again: Vec<QueuedUpdate> = inner.redelivered.drain(..).collect();
            again
                .into_iter()
                .chain(
                    inner
                        .updates
                        .iter()
                        .filter(|u| offset.is_none_or(|o| u.id >= o))
                        .cloned(),
                )
                .take(limit)
                .map(|u| u.json)
                .collect()
        };
        if !found.is_empty() {
            // Assembled as text so raw updates reach the client exactly as queued.
            let body = format!("{{\"ok\":true,\"result\":[{}]}}", found.join(","));
            return ([(header::CONTENT_TYPE, "application/json")], body).into_response();
        }
        match tokio::time::timeout_at(deadline, changed.changed()).await {
            Ok(Ok(())) => {}
            _ => return ok(json!([])),
        }
    }
}

type CallResult = Result<Value, (u16, String)>;

fn bad(description: &str) -> (u16, String) {
    (400, format!("Bad Request: {description}"))
}

fn call(inner: &mut Inner, method: &str, p: &Value) -> CallResult {
    match method {
        "getme" => Ok(json!({
            "id": BOT_ID, "is_bot": true, "first_name": "Hearth", "username": BOT_USERNAME,
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false, "can_connect_to_business": false,
            "has_main_web_app": false,
        })),
        "getwebhookinfo" => Ok(json!({
            "url": inner.webhook.as_ref().and_then(|w| w.get("url")).cloned().unwrap_or(json!("")),
            "has_custom_certificate": false,
            "pending_update_count": inner.updates.len(),
        })),
        "deletewebhook" => {
            inner.webhook = None;
            if p.get("drop_pending_updates").and_then(Value::as_bool) == Some(true) {
                inner.updates.clear();
            }
            Ok(json!(true))
        }
        "setwebhook" => {
            if p.get("url")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                inner.webhook = None;
            } else {
                inner.webhook = Some(p.clone());
            }
            Ok(json!(true))
        }
        "setmycommands" => {
            let commands = p
                .get("commands")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("parameter \"commands\" is required"))?;
            for c in commands {
                let name = c.get("command").and_then(Value::as_str).unwrap_or("");
                let valid = (1..=32).contains(&name.len())
                    && name
                        .chars()
                        .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_');
                if !valid
                    || c.get("description")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                {
                    return Err(bad("BOT_COMMAND_INVALID"));
                }
            }
            inner.commands = Some(json!(commands));
            Ok(json!(true))
        }
        "sendmessage" => send_message(inner, p),
        "editmessagetext" => edit_message(inner, p, true),
        "editmessagereplymarkup" => edit_message(inner, p, false),
        "answercallbackquery" => {
            let id = p
                .get("callback_query_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            match inner.callbacks.get_mut(id) {
                Some(answered) if !*answered => *answered = true,
                _ => {
                    return Err(bad(
                        "query is too old and response timeout expired or query ID is invalid",
                    ));
                }
            }
            inner.answered.push(AnsweredCallback {
                id: id.to_owned(),
                text: p.get("text").and_then(Value::as_str).map(str::to_owned),
                show_alert: p
                    .get("show_alert")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            });
            Ok(json!(true))
        }
        "sendchataction" => {
            let chat = chat_param(p)?;
            let action = p.get("action").and_then(Value::as_str).unwrap_or("");
            if action.is_empty() {
                return Err(bad("wrong parameter action in request"));
            }
            inner.actions.push(ChatAction {
                chat,
                action: action.to_owned(),
                thread_id: p.get("message_thread_id").and_then(Value::as_i64),
            });
            Ok(json!(true))
        }
        "getfile" => {
            let id = p.get("file_id").and_then(Value::as_str).unwrap_or("");
            let (path, bytes) = inner.files.get(id).ok_or_else(|| bad("invalid file_id"))?;
            let mut file = json!({"file_id": id, "file_unique_id": format!("u{id}"), "file_size": bytes.len(), "file_path": path});
            if inner.hide_file_sizes
                && let Some(file) = file.as_object_mut()
            {
                file.remove("file_size");
            }
            Ok(file)
        }
        _ => Err((404, "Not Found".to_owned())),
    }
}

fn chat_param(p: &Value) -> Result<i64, (u16, String)> {
    match p.get("chat_id") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| bad("chat not found"))
}

/// The visible text and parse mode of a `text` parameter, validated like Telegram.
fn parse_text(p: &Value) -> Result<(String, String, Option<String>), (u16, String)> {
    let raw = p
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let parse_mode = p
        .get("parse_mode")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let visible = match parse_mode.as_deref() {
        None => raw.clone(),
        Some(mode) if mode.eq_ignore_ascii_case("html") => {
            parse_html(&raw).map_err(|e| bad(&format!("can't parse entities: {e}")))?
        }
        Some(_) => return Err(bad("unsupported parse_mode")),
    };
    if visible.trim().is_empty() {
        return Err(bad("message text is empty"));
    }
    if visible.encode_utf16().count() > MAX_TEXT_LEN {
        return Err(bad("message is too long"));
    }
    Ok((visible, raw, parse_mode))
}

/// An inline keyboard, row by row, as (label, callback data).
pub type Keyboard = Vec<Vec<(String, String)>>;

fn parse_buttons(p: &Value) -> Result<Keyboard, (u16, String)> {
    let Some(markup) = p.get("reply_markup") else {
        return Ok(Vec::new());
    };
    // Some clients send the markup as a JSON string.
    let markup = match markup {
        Value::String(s) => serde_json::from_str(s)
            .map_err(|_| bad("can't parse reply keyboard markup JSON object"))?,
        other => other.clone(),
    };
    let rows = markup
        .get("inline_keyboard")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("can't parse inline keyboard button: InlineKeyboardMarkup must be an Array of Arrays"))?;
    let mut out = Vec::new();
    for row in rows {
        let row = row.as_array().ok_or_else(|| bad("can't parse inline keyboard button: InlineKeyboardMarkup must be an Array of Arrays"))?;
        let mut buttons = Vec::new();
        for b in row {
            let text = b.get("text").and_then(Value::as_str).unwrap_or("");
            let data = b.get("callback_data").and_then(Value::as_str).unwrap_or("");
            if text.is_empty() {
                return Err(bad(
                    "can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard",
                ));
            }
            if data.is_empty() || data.len() > 64 {
                return Err(bad("BUTTON_DATA_INVALID"));
            }
            buttons.push((text.to_owned(), data.to_owned()));
        }
        if !buttons.is_empty() {
            out.push(buttons);
        }
    }
    Ok(out)
}

fn keyboard_json(buttons: &[Vec<(String, String)>]) -> Value {
    json!({"inline_keyboard": buttons.iter().map(|row| row.iter().map(|(t, d)| json!({"text": t, "callback_data": d})).collect::<Vec<_>>()).collect::<Vec<_>>()})
}

fn send_message(inner: &mut Inner, p: &Value) -> CallResult {
    let chat_id = chat_param(p)?;
    let (visible, raw, parse_mode) = parse_text(p)?;
    let buttons = parse_buttons(p)?;
    let thread_id = p.get("message_thread_id").and_then(Value::as_i64);
    let reply = p.get("reply_parameters");
    let reply_to = reply
        .and_then(|r| r.get("message_id"))
        .and_then(Value::as_i64)
        .or_else(|| p.get("reply_to_message_id").and_then(Value::as_i64));
    let chat = inner.chats.entry(chat_id).or_default();
    let replied = reply_to
        .and_then(|id| chat.messages.iter().find(|m| m.fake.id == id))
        .map(|m| m.json.clone());
    let without_reply = reply
        .and_then(|r| r.get("allow_sending_without_reply"))
        .and_then(Value::as_bool)
        == Some(true);
    if reply_to.is_some() && replied.is_none() && !without_reply {
        return Err(bad("message to be replied not found"));
    }
    chat.next_id += 1;
    let id = chat.next_id;
    let mut json = json!({
        "message_id": id,
        "from": bot_json(),
        "chat": chat_json(chat_id, chat_id),
        "date": 1_700_000_000,
        "text": visible,
    });
    if let Some(thread) = thread_id {
        json["message_thread_id"] = json!(thread);
        json["is_topic_message"] = json!(true);
    }
    if let Some(replied) = replied {
        json["reply_to_message"] = replied;
    }
    if !buttons.is_empty() {
        json["reply_markup"] = keyboard_json(&buttons);
    }
    chat.messages.push(StoredMessage {
        from_bot: true,
        json: json.clone(),
        fake: FakeMessage {
            id,
            text: visible,
            raw,
            parse_mode,
            buttons,
            thread_id,
            reply_to: reply_to.filter(|_| json.get("reply_to_message").is_some()),
            edits: 0,
        },
    });
    Ok(json)
}

fn edit_message(inner: &mut Inner, p: &Value, with_text: bool) -> CallResult {
    let chat_id = chat_param(p)?;
    let message_id = p
        .get("message_id")
        .and_then(Value::as_i64)
        .ok_or_else(|| bad("message identifier is not specified"))?;
    let text = if with_text {
        Some(parse_text(p)?)
    } else {
        None
    };
    let buttons = parse_buttons(p)?;
    let stored = inner
        .chats
        .get_mut(&chat_id)
        .and_then(|c| c.messages.iter_mut().find(|m| m.fake.id == message_id))
        .ok_or_else(|| bad("message to edit not found"))?;
    if !stored.from_bot {
        return Err(bad("message can't be edited"));
    }
    let same_text = text.as_ref().is_none_or(|(visible, raw, mode)| {
        *visible == stored.fake.text && *raw == stored.fake.raw && *mode == stored.fake.parse_mode
    });
    if same_text && buttons == stored.fake.buttons {
        return Err(bad(
            "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        ));
    }
    if let Some((visible, raw, mode)) = text {
        stored.json["text"] = json!(visible);
        stored.fake.text = visible;
        stored.fake.raw = raw;
        stored.fake.parse_mode = mode;
    }
    stored.fake.buttons = buttons;
    if stored.fake.buttons.is_empty() {
        if let Some(map) = stored.json.as_object_mut() {
            map.remove("reply_markup");
        }
    } else {
        stored.json["reply_markup"] = keyboard_json(&stored.fake.buttons);
    }
    stored.fake.edits += 1;
    stored.json["edit_date"] = json!(1_700_000_200);
    Ok(stored.json.clone())
}

/// Telegram's HTML subset: returns the visible text or the reason it is refused.
pub fn parse_html(html: &str) -> Result<String, String> {
    const TAGS: &[&str] = &[
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-emoji",
    ];
    let mut out = String::new();
    let mut stack: Vec<String> = Vec::new();
    let mut i = 0;
    while i < html.len() {
        let rest = &html[i..];
        let c = rest.chars().next().unwrap_or(' ');
        match c {
            '<' => {
                let end = rest
                    .find('>')
                    .ok_or_else(|| format!("Unclosed start tag at byte offset {i}"))?;
                let inside = &rest[1..end];
                if let Some(name) = inside.strip_prefix('/') {
                    let name = name.trim().to_ascii_lowercase();
                    match stack.pop() {
                        Some(open) if open == name => {}
                        Some(open) => {
                            return Err(format!(
                                "Unmatched end tag at byte offset {i}, expected \"</{open}>\", found \"</{name}>\""
                            ));
                        }
                        None => return Err(format!("Unexpected end tag at byte offset {i}")),
                    }
                } else {
                    let name: String = inside
                        .chars()
                        .take_while(|c| !c.is_whitespace() && *c != '/')
                        .collect::<String>()
                        .to_ascii_lowercase();
                    if name.is_empty() || !TAGS.contains(&name.as_str()) {
                        return Err(format!(
                            "Unsupported start tag \"{name}\" at byte offset {i}"
                        ));
                    }
                    if name == "a" && !inside.contains("href=") {
                        return Err(format!(
                            "Can't find href attribute of the tag \"a\" at byte offset {i}"
                        ));
                    }
                    stack.push(name);
                }
                i += end + 1;
            }
            '&' => {
                let end = rest.find(';').filter(|e| *e <= 10);
                let entity = end.map(|e| &rest[1..e]);
                let decoded = match entity {
                    Some("lt") => Some('<'),
                    Some("gt") => Some('>'),
                    Some("amp") => Some('&'),
                    Some("quot") => Some('"'),
                    Some(e) if e.starts_with("#x") => u32::from_str_radix(&e[2..], 16)
                        .ok()
                        .and_then(char::from_u32),
                    Some(e) if e.starts_with('#') => e[1..].parse().ok().and_then(char::from_u32),
                    _ => None,
                };
                match (decoded, end) {
                    (Some(ch), Some(e)) => {
                        out.push(ch);
                        i += e + 1;
                    }
                    // Telegram passes an `&` that starts no entity through as text.
                    _ => {
                        out.push('&');
                        i += 1;
                    }
                }
            }
            _ => {
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    if let Some(open) = stack.pop() {
        return Err(format!(
            "Can't find end tag corresponding to start tag \"{open}\""
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_subset() {
        assert_eq!(parse_html("<b>a</b> &lt; <i>b</i>").as_deref(), Ok("a < b"));
        assert_eq!(
            parse_html("<a href=\"https://x\">l</a>").as_deref(),
            Ok("l")
        );
        assert!(parse_html("<b>open").is_err());
        assert!(parse_html("<b><i>x</b></i>").is_err());
        assert!(parse_html("<div>x</div>").is_err());
        assert!(parse_html("a < b").is_err());
        assert_eq!(parse_html("AT&T").as_deref(), Ok("AT&T"));
    }
}
