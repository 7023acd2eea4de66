//! A fake Discord: the REST API v10 and the gateway websocket, speaking Discord's real JSON.
//!
//! REST (`/api/v10/...`, `Authorization: Bot <token>`): `GET /gateway`, `GET /users/@me`,
//! `POST /channels/{id}/messages` (over 2,000 characters refused with Discord's error, code
//! 50035; a repeated `nonce` with `enforce_nonce` returns the message sent then), `PATCH
//! /channels/{id}/messages/{id}`, `GET /channels/{id}/messages?after=&limit=` (newest first and,
//! as on Discord, without the `guild_id` and `member` that gateway events carry), `GET
//! /channels/{id}` (a server channel names its `guild_id`), `GET /guilds/{id}/members/{user}`
//! (the member's roles), `POST /channels/{id}/typing`, `POST /users/@me/channels` (the DM channel
//! with a user registered with [`FakeDiscord::user`]; a message posted to such a user's id, as
//! if it were a channel, is refused as Discord does, 404 Unknown Channel),
//! `POST /interactions/{id}/{token}/callback`,
//! `POST /webhooks/{app}/{token}` (follow-ups, ephemeral ones recorded as such), and attachment
//! downloads under `/attachments/` (the CDN: every request and every byte served is counted;
//! large files are generated as they are streamed, so a test can send 10 × 8 MB without holding
//! them). A wrong token is 401; [`FakeDiscord::rate_limit_next`] answers the next calls with 429
//! and `retry_after`, [`FakeDiscord::fail_next`] with 502, [`FakeDiscord::fail_history`] the
//! history reads alone with 502.
//!
//! Gateway (`ws://…/gateway`): HELLO (op 10) → IDENTIFY (op 2) → READY; heartbeats (op 1)
//! answered with ACK (op 11); RESUME (op 6) replays what the session missed, then RESUMED;
//! dispatches MESSAGE_CREATE, MESSAGE_UPDATE and INTERACTION_CREATE. Faults: drop the connection
//! ([`FakeDiscord::drop_connection`]), stop acknowledging heartbeats and delivering events on
//! the current connection (a zombie, [`FakeDiscord::zombie`]), close with 4014 or 4004 on the
//! next IDENTIFY ([`FakeDiscord::close_on_identify`]), send an event serenity cannot read
//! ([`FakeDiscord::push_raw_dispatch`]).
//!
//! The server stops when the value is dropped.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::net::{Served, local_listener};

/// The fake bot's user id (and its application id).
pub const BOT_ID: u64 = 900_000_000_000_000_001;
/// The fake bot's username.
pub const BOT_NAME: &str = "hearth";
/// The server ("guild") the fake's server channels belong to.
pub const GUILD_ID: u64 = 800_000_000_000_000_001;
/// Discord's limit on a message's content, in characters.
pub const MAX_CONTENT_LEN: usize = 2000;

/// A message as the channel shows it now.
#[derive(Clone, Debug, PartialEq)]
pub struct FakeMessage {
    pub id: u64,
    pub channel_id: u64,
    pub author_id: u64,
    pub content: String,
    /// The buttons, as (label, custom_id).
    pub buttons: Vec<(String, String)>,
    /// The message this one quotes.
    pub reply_to: Option<u64>,
    pub edits: u32,
    pub nonce: Option<String>,
}

/// A follow-up sent on an interaction token.
#[derive(Clone, Debug, PartialEq)]
pub struct Followup {
    pub token: String,
    pub content: String,
    pub ephemeral: bool,
}

/// A message a user sends, built up and sent with [`FakeDiscord::send`].
#[derive(Clone, Debug)]
pub struct UserMessage {
    channel: u64,
    user: u64,
    text: String,
    mention: bool,
    reply_to: Option<u64>,
    roles: Vec<u64>,
    attachments: Vec<FakeFile>,
}

/// A file attached to a user's message, as the CDN serves it.
#[derive(Clone, Debug)]
struct FakeFile {
    name: String,
    mime: String,
    /// The size the message declares (Discord's `size`).
    declared: u64,
    body: FileBody,
}

#[derive(Clone, Debug)]
enum FileBody {
    /// Served as is, with a `Content-Length`.
    Bytes(Vec<u8>),
    /// `len` bytes generated while they are streamed (byte `i` is `i % 251`), chunked, without
    /// a `Content-Length`: a file the fake need not hold.
    Generated(u64),
}

/// The content of a generated file of `len` bytes (what the CDN streams for
/// [`UserMessage::attach_generated`]).
pub fn generated_bytes(len: u64) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

impl UserMessage {
    /// `text` from `user` in `channel` (a DM unless the channel was made a server channel).
    pub fn new(channel: u64, user: u64, text: impl Into<String>) -> Self {
        Self {
            channel,
            user,
            text: text.into(),
            mention: false,
            reply_to: None,
            roles: Vec::new(),
            attachments: Vec::new(),
        }
    }
    /// Mentions the bot (`<@BOT_ID>` before the text, and in `mentions`).
    pub fn mention(mut self) -> Self {
        self.mention = true;
        self
    }
    /// Replies to message `id`.
    pub fn reply_to(mut self, id: u64) -> Self {
        self.reply_to = Some(id);
        self
    }
    /// The sender has these server roles.
    pub fn roles(mut self, roles: &[u64]) -> Self {
        self.roles = roles.to_vec();
        self
    }
    /// Attaches a file (several calls attach several files).
    pub fn attach(mut self, name: &str, mime: &str, bytes: Vec<u8>) -> Self {
        self.attachments.push(FakeFile {
            name: name.to_owned(),
            mime: mime.to_owned(),
            declared: bytes.len() as u64,
            body: FileBody::Bytes(bytes),
        });
        self
    }
    /// Attaches a file of `len` bytes that the CDN generates as it streams it
    /// ([`generated_bytes`]), served chunked without a `Content-Length`.
    pub fn attach_generated(mut self, name: &str, mime: &str, len: u64) -> Self {
        self.attachments.push(FakeFile {
            name: name.to_owned(),
            mime: mime.to_owned(),
            declared: len,
            body: FileBody::Generated(len),
        });
        self
    }
    /// The last attached file claims `size` bytes in the message (a sender that lies).
    pub fn declare_size(mut self, size: u64) -> Self {
        if let Some(file) = self.attachments.last_mut() {
            file.declared = size;
        }
        self
    }
}

#[derive(Default)]
struct Channel {
    guild: bool,
    messages: Vec<Value>,
}

struct Connection {
    id: u64,
    session: Option<String>,
    tx: mpsc::UnboundedSender<Outgoing>,
    zombie: bool,
}

enum Outgoing {
    Frame(Value),
    Raw(String),
    Close(u16, String),
    Drop,
}

#[derive(Default)]
struct Session {
    seq: u64,
    /// Every dispatch of the session, for RESUME.
    sent: Vec<(u64, Value)>,
}

#[derive(Default)]
struct Inner {
    token: String,
    token_refused: bool,
    close_on_identify: Option<u16>,
    heartbeat_ms: u64,
    gateway_url: Option<String>,
    next_id: u64,
    channels: HashMap<u64, Channel>,
    connections: Vec<Connection>,
    next_connection: u64,
    sessions: HashMap<String, Session>,
    current_session: Option<String>,
    attachments: HashMap<String, FakeFile>,
    /// Requests to the CDN, and the bytes it handed to the network.
    cdn_requests: usize,
    cdn_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// Server members' roles, as given with their messages.
    members: HashMap<u64, Vec<u64>>,
    /// Users registered with [`FakeDiscord::user`], and the DM channel opened with each.
    users: HashMap<u64, Option<u64>>,
    fail_history: usize,
    /// How long `POST /channels/{id}/messages` waits after storing before it answers.
    send_delay: Duration,
    typing: HashMap<u64, usize>,
    acknowledged: Vec<(String, u64)>,
    followups: Vec<Followup>,
    nonces: HashMap<String, u64>,
    rate_limit_next: usize,
    retry_after: f64,
    fail_next: usize,
    rate_limited: usize,
    identifies: usize,
    resumes: usize,
    rest_calls: Vec<String>,
    /// `GET /oauth2/applications/@me`'s `flags`.
    application_flags: u64,
}

struct Shared {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
    addr: SocketAddr,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }
}

/// A running fake Discord. Stops when dropped.
pub struct FakeDiscord {
    shared: Arc<Shared>,
    /// Held for its drop, which stops the fake.
    _served: Served,
}

impl std::fmt::Debug for FakeDiscord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeDiscord")
            .field("addr", &self.shared.addr)
            .finish_non_exhaustive()
    }
}

fn user_json(id: u64, bot: bool) -> Value {
    let name = if id == BOT_ID {
        BOT_NAME.to_owned()
    } else {
        format!("user{id}")
    };
    json!({
        "id": id.to_string(),
        "username": name,
        "global_name": name,
        "discriminator": "0",
        "avatar": null,
        "bot": bot,
        "public_flags": 0,
    })
}

fn timestamp(id: u64) -> String {
    // Any valid ISO 8601 time; seconds from the id keep later messages later.
    let secs = 1_700_000_000 + (id % 1_000_000);
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!("2026-01-01T{h:02}:{m:02}:{s:02}.000000+00:00")
}

/// Whether the JSON string `value` is the id `id`.
fn is_id(value: &Value, id: u64) -> bool {
    value.as_str().and_then(|s| s.parse::<u64>().ok()) == Some(id)
}

fn error_body(code: u64, message: &str) -> Value {
    json!({ "code": code, "message": message })
}

impl FakeDiscord {
    /// Starts the fake on a free port of 127.0.0.1, accepting `token`. Heartbeats are asked
    /// every 45 s, as on Discord; tests of dead connections shorten it with
    /// [`FakeDiscord::set_heartbeat`].
    pub async fn start(token: &str) -> Self {
        // Bound first: the gateway URL the fake hands out names its own address.
        let (listener, addr) = local_listener().await;
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                token: token.to_owned(),
                heartbeat_ms: 45_000,
                next_id: 1_000_000_000_000_000_000,
                retry_after: 0.05,
                // GATEWAY_MESSAGE_CONTENT_LIMITED: the intent switched on, as a small bot has it.
                application_flags: 1 << 19,
                ..Inner::default()
            }),
            changed: watch::channel(0).0,
            addr,
        });
        let api = Router::new()
            .route("/gateway", get(gateway_url))
            .route("/gateway/bot", get(gateway_url))
            .route("/users/@me", get(users_me))
            .route("/users/@me/channels", post(open_dm))
            .route("/oauth2/applications/@me", get(application))
            .route("/channels/{channel}", get(channel_info))
            .route("/guilds/{guild}/members/{user}", get(member))
            .route(
                "/channels/{channel}/messages",
                post(create_message).get(history),
            )
            .route(
                "/channels/{channel}/messages/{message}",
                patch(edit_message),
            )
            .route("/channels/{channel}/typing", post(typing))
            .route("/interactions/{id}/{token}/callback", post(callback))
            .route("/webhooks/{app}/{token}", post(followup));
        let app = Router::new()
            .nest("/api/v10", api)
            .route("/", get(websocket))
            .route("/gateway", get(websocket))
            .route("/attachments/{name}", get(attachment))
            .with_state(shared.clone());
        Self {
            shared,
            _served: Served::on(listener, app),
        }
    }

    /// Where the fake listens (plain HTTP and the gateway).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.shared.addr
    }

    /// The `api_url` for hearth: `http://127.0.0.1:PORT`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// Heartbeat interval announced in the next HELLOs.
    pub fn set_heartbeat(&self, every: Duration) {
        self.shared.lock().heartbeat_ms = every.as_millis().max(50) as u64;
    }

    /// Hands out `url` as the gateway (a port where nothing listens, say).
    pub fn set_gateway_url(&self, url: &str) {
        self.shared.lock().gateway_url = Some(url.to_owned());
    }

    /// Makes `user` a Discord user the bot can open a DM with (`POST /users/@me/channels`); a
    /// message posted to `user` as a channel id is refused with 404 Unknown Channel.
    pub fn user(&self, user: u64) {
        self.shared.lock().users.entry(user).or_insert(None);
    }

    /// The DM channel opened with `user`, if one was.
    pub fn dm_channel(&self, user: u64) -> Option<u64> {
        self.shared.lock().users.get(&user).copied().flatten()
    }

    /// Makes `channel` a server channel (messages there carry the guild id).
    pub fn server_channel(&self, channel: u64) {
        self.shared
            .lock()
            .channels
            .entry(channel)
            .or_default()
            .guild = true;
    }

    /// Answers `GET /oauth2/applications/@me` with these flags (the Message Content intent is
    /// bit 18 or 19; on by default).
    pub fn set_application_flags(&self, flags: u64) {
        self.shared.lock().application_flags = flags;
    }

    /// Refuses the token from now on (401 on REST, 4004 on IDENTIFY).
    pub fn refuse_token(&self) {
        self.shared.lock().token_refused = true;
    }

    /// Closes the gateway with `code` (4014: disallowed intents, 4004: bad token) on every
    /// IDENTIFY from now on.
    pub fn close_on_identify(&self, code: u16) {
        self.shared.lock().close_on_identify = Some(code);
    }

    /// Cuts the current gateway connections without a close frame, as a network failure does.
    pub fn drop_connection(&self) {
        let mut inner = self.shared.lock();
        for connection in inner.connections.drain(..) {
            // A connection whose task ended has nothing left to cut.
            let _ = connection.tx.send(Outgoing::Drop);
        }
    }

    /// Makes the current gateway connections zombies: open, but heartbeats are no longer
    /// acknowledged and events no longer delivered on them (they stay in the session).
    pub fn zombie(&self) {
        for connection in &mut self.shared.lock().connections {
            connection.zombie = true;
        }
    }

    /// Answers the next `count` REST calls with 429 and `retry_after` seconds.
    pub fn rate_limit_next(&self, count: usize, retry_after: f64) {
        let mut inner = self.shared.lock();
        inner.rate_limit_next = count;
        inner.retry_after = retry_after;
    }

    /// Answers the next `count` REST calls (follow-ups included) with 502.
    pub fn fail_next(&self, count: usize) {
        self.shared.lock().fail_next = count;
    }

    /// Answers the next `count` history reads (`GET /channels/{id}/messages`) with 502, other
    /// calls as usual.
    pub fn fail_history(&self, count: usize) {
        self.shared.lock().fail_history = count;
    }

    /// Stores each sent message at once but answers `POST /channels/{id}/messages` only after
    /// `delay`: a client that gives up first does not know the message arrived.
    pub fn delay_send_answers(&self, delay: Duration) {
        self.shared.lock().send_delay = delay;
    }

    /// How many requests reached the CDN (`/attachments/`), and how many bytes it sent.
    pub fn cdn_traffic(&self) -> (usize, u64) {
        let inner = self.shared.lock();
        (
            inner.cdn_requests,
            inner.cdn_bytes.load(std::sync::atomic::Ordering::SeqCst),
        )
    }

    /// How many REST calls were answered 429.
    pub fn rate_limited(&self) -> usize {
        self.shared.lock().rate_limited
    }

    /// How many IDENTIFYs and RESUMEs the gateway saw.
    pub fn logins(&self) -> (usize, usize) {
        let inner = self.shared.lock();
        (inner.identifies, inner.resumes)
    }

    /// Whether a gateway connection is open and identified (not a zombie).
    pub fn connected(&self) -> bool {
        let inner = self.shared.lock();
        inner
            .connections
            .iter()
            .any(|c| c.session.is_some() && !c.zombie)
    }

    /// Waits until a healthy gateway connection is identified.
    pub async fn wait_connected(&self, patience: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + patience;
        let mut changed = self.shared.changed.subscribe();
        loop {
            if self.connected() {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed.changed())
                .await
                .is_err()
            {
                return self.connected();
            }
        }
    }

    fn next_id(inner: &mut Inner) -> u64 {
        inner.next_id += 1;
        inner.next_id
    }

    /// A user sends a message; it is dispatched as MESSAGE_CREATE (or kept for RESUME and the
    /// history when no healthy connection is there). Returns its id.
    pub fn send(&self, message: UserMessage) -> u64 {
        let addr = self.shared.addr;
        let mut inner = self.shared.lock();
        let id = Self::next_id(&mut inner);
        let guild = inner
            .channels
            .get(&message.channel)
            .is_some_and(|c| c.guild);
        let mut content = message.text.clone();
        if message.mention {
            content = format!("<@{BOT_ID}> {content}");
        }
        let referenced = message.reply_to.and_then(|reply| {
            inner
                .channels
                .get(&message.channel)
                .and_then(|c| c.messages.iter().find(|m| is_id(&m["id"], reply)).cloned())
        });
        let mut json = json!({
            "id": id.to_string(),
            "channel_id": message.channel.to_string(),
            "author": user_json(message.user, false),
            "content": content,
            "timestamp": timestamp(id),
            "edited_timestamp": null,
            "tts": false,
            "mention_everyone": false,
            "mentions": if message.mention { vec![user_json(BOT_ID, true)] } else { Vec::new() },
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": false,
            "type": if message.reply_to.is_some() { 19 } else { 0 },
            "flags": 0,
            "components": [],
        });
        if guild {
            json["guild_id"] = json!(GUILD_ID.to_string());
            json["member"] = json!({
                "roles": message.roles.iter().map(u64::to_string).collect::<Vec<_>>(),
                "joined_at": timestamp(1),
                "deaf": false,
                "mute": false,
                "flags": 0,
            });
        }
        if let Some(reply) = message.reply_to {
            json["message_reference"] = json!({
                "type": 0,
                "message_id": reply.to_string(),
                "channel_id": message.channel.to_string(),
            });
            json["referenced_message"] = referenced.unwrap_or(Value::Null);
        }
        if !message.attachments.is_empty() {
            let mut listed = Vec::new();
            for (i, file) in message.attachments.iter().enumerate() {
                let key = format!("{id}-{i}-{}", file.name);
                let file_id = Self::next_id(&mut inner);
                listed.push(json!({
                    "id": file_id.to_string(),
                    "filename": file.name,
                    "content_type": file.mime,
                    "size": file.declared,
                    "url": format!("http://{addr}/attachments/{key}"),
                    "proxy_url": format!("http://{addr}/attachments/{key}"),
                }));
                inner.attachments.insert(key, file.clone());
            }
            json["attachments"] = json!(listed);
        }
        if guild {
            inner.members.insert(message.user, message.roles.clone());
        }
        inner
            .channels
            .entry(message.channel)
            .or_default()
            .messages
            .push(json.clone());
        dispatch(&mut inner, "MESSAGE_CREATE", json);
        drop(inner);
        self.shared.bump();
        id
    }

    /// Sends MESSAGE_CREATE for the stored message `id` once more (a redelivery).
    pub fn redeliver(&self, id: u64) -> bool {
        let mut inner = self.shared.lock();
        let found = inner
            .channels
            .values()
            .flat_map(|c| c.messages.iter())
            .find(|m| is_id(&m["id"], id))
            .cloned();
        match found {
            Some(message) => {
                dispatch(&mut inner, "MESSAGE_CREATE", message);
                true
            }
            None => false,
        }
    }

    /// `user` edits their message `id` to `text` (MESSAGE_UPDATE).
    pub fn edit(&self, id: u64, user: u64, text: &str) -> bool {
        let mut inner = self.shared.lock();
        let Some(message) = inner
            .channels
            .values_mut()
            .flat_map(|c| c.messages.iter_mut())
            .find(|m| is_id(&m["id"], id) && is_id(&m["author"]["id"], user))
        else {
            return false;
        };
        message["content"] = json!(text);
        message["edited_timestamp"] = json!(timestamp(id + 1));
        let update = message.clone();
        dispatch(&mut inner, "MESSAGE_UPDATE", update);
        true
    }

    /// `user` presses the button `custom_id` under the bot's message `message` (an
    /// INTERACTION_CREATE of type 3). Returns the interaction id.
    pub fn press(&self, message: u64, user: u64, custom_id: &str) -> Option<u64> {
        let mut inner = self.shared.lock();
        let shown = inner
            .channels
            .values()
            .flat_map(|c| c.messages.iter())
            .find(|m| is_id(&m["id"], message))
            .cloned()?;
        let channel: u64 = shown["channel_id"].as_str()?.parse().ok()?;
        let guild = inner.channels.get(&channel).is_some_and(|c| c.guild);
        let id = Self::next_id(&mut inner);
        let mut interaction = json!({
            "id": id.to_string(),
            "application_id": BOT_ID.to_string(),
            "type": 3,
            "data": { "custom_id": custom_id, "component_type": 2 },
            "channel_id": channel.to_string(),
            "user": user_json(user, false),
            "token": format!("itoken{id}"),
            "version": 1,
            "message": shown,
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 26_214_400,
            "authorizing_integration_owners": {},
            "app_permissions": "0",
        });
        if guild {
            interaction["guild_id"] = json!(GUILD_ID.to_string());
            interaction["member"] = json!({
                "user": user_json(user, false),
                "roles": [],
                "joined_at": timestamp(1),
                "deaf": false,
                "mute": false,
                "flags": 0,
                "permissions": "0",
            });
        }
        dispatch(&mut inner, "INTERACTION_CREATE", interaction);
        Some(id)
    }

    /// Dispatches `data` as event `kind` exactly as given (an event serenity cannot read).
    pub fn push_raw_dispatch(&self, kind: &str, data: Value) {
        let mut inner = self.shared.lock();
        dispatch(&mut inner, kind, data);
    }

    /// What `channel` shows, oldest first.
    pub fn messages(&self, channel: u64) -> Vec<FakeMessage> {
        let inner = self.shared.lock();
        inner
            .channels
            .get(&channel)
            .map(|c| c.messages.iter().map(fake_message).collect())
            .unwrap_or_default()
    }

    /// The bot's messages in `channel`, oldest first.
    pub fn bot_messages(&self, channel: u64) -> Vec<FakeMessage> {
        self.messages(channel)
            .into_iter()
            .filter(|m| m.author_id == BOT_ID)
            .collect()
    }

    /// Waits until the bot has at least `count` messages in `channel` and returns them.
    pub async fn wait_for_bot_messages(
        &self,
        channel: u64,
        count: usize,
        patience: Duration,
    ) -> Vec<FakeMessage> {
        self.wait(patience, || {
            let found = self.bot_messages(channel);
            (found.len() >= count).then_some(found)
        })
        .await
        .unwrap_or_else(|| self.bot_messages(channel))
    }

    /// Waits until `check` gives something, or the patience runs out.
    pub async fn wait<T>(&self, patience: Duration, check: impl Fn() -> Option<T>) -> Option<T> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut changed = self.shared.changed.subscribe();
        loop {
            if let Some(found) = check() {
                return Some(found);
            }
            if tokio::time::timeout_at(deadline, changed.changed())
                .await
                .is_err()
            {
                return check();
            }
        }
    }

    /// Interactions the bot acknowledged, as (interaction id, callback type).
    pub fn acknowledged(&self) -> Vec<(String, u64)> {
        self.shared.lock().acknowledged.clone()
    }

    /// Follow-ups sent on interaction tokens.
    pub fn followups(&self) -> Vec<Followup> {
        self.shared.lock().followups.clone()
    }

    /// Typing indicators shown in `channel`.
    pub fn typing(&self, channel: u64) -> usize {
        self.shared
            .lock()
            .typing
            .get(&channel)
            .copied()
            .unwrap_or(0)
    }

    /// The REST calls so far, as `METHOD /path`.
    pub fn rest_calls(&self) -> Vec<String> {
        self.shared.lock().rest_calls.clone()
    }
}

fn fake_message(json: &Value) -> FakeMessage {
    let id = |v: &Value| v.as_str().and_then(|s| s.parse::<u64>().ok());
    let buttons = json["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
        .map(|b| {
            (
                b["label"].as_str().unwrap_or_default().to_owned(),
                b["custom_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    FakeMessage {
        id: id(&json["id"]).unwrap_or_default(),
        channel_id: id(&json["channel_id"]).unwrap_or_default(),
        author_id: id(&json["author"]["id"]).unwrap_or_default(),
        content: json["content"].as_str().unwrap_or_default().to_owned(),
        buttons,
        reply_to: id(&json["message_reference"]["message_id"]),
        edits: json["hearth_edits"].as_u64().unwrap_or(0) as u32,
        nonce: json["nonce"].as_str().map(str::to_owned),
    }
}

/// Sends a dispatch on the current session: kept for RESUME, and sent on its connection when
/// that is healthy.
fn dispatch(inner: &mut Inner, kind: &str, data: Value) {
    let Some(session_id) = inner.current_session.clone() else {
        return; // nobody ever identified: the history still has messages
    };
    let session = inner.sessions.entry(session_id.clone()).or_default();
    session.seq += 1;
    let frame = json!({ "op": 0, "t": kind, "s": session.seq, "d": data });
    session.sent.push((session.seq, frame.clone()));
    for connection in &inner.connections {
        if connection.session.as_deref() == Some(&session_id) && !connection.zombie {
            // A connection whose task ended is removed by it; nothing to do here.
            let _ = connection.tx.send(Outgoing::Frame(frame.clone()));
        }
    }
}

/// `Ok` when the request carries the token; the refusal otherwise. Also counts and applies
/// the injected 429s and 502s.
fn authorize(shared: &Shared, headers: &HeaderMap, call: String) -> Result<(), Box<Response>> {
    let mut inner = shared.lock();
    inner.rest_calls.push(call);
    let expected = format!("Bot {}", inner.token);
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if inner.token_refused || given != expected {
        return Err(Box::new(
            (
                StatusCode::UNAUTHORIZED,
                axum::Json(error_body(0, "401: Unauthorized")),
            )
                .into_response(),
        ));
    }
    if inner.rate_limit_next > 0 {
        inner.rate_limit_next -= 1;
        inner.rate_limited += 1;
        let retry_after = inner.retry_after;
        drop(inner);
        shared.bump();
        return Err(Box::new(
            (
                StatusCode::TOO_MANY_REQUESTS,
                [
                    ("retry-after", format!("{}", retry_after.ceil() as u64)),
                    ("x-ratelimit-scope", "user".to_owned()),
                    ("x-ratelimit-bucket", "fake".to_owned()),
                    ("x-ratelimit-limit", "5".to_owned()),
                    ("x-ratelimit-remaining", "0".to_owned()),
                    ("x-ratelimit-reset-after", format!("{retry_after}")),
                ],
                axum::Json(json!({
                    "message": "You are being rate limited.",
                    "retry_after": retry_after,
                    "global": false,
                })),
            )
                .into_response(),
        ));
    }
    if inner.fail_next > 0 {
        inner.fail_next -= 1;
        return Err(Box::new(
            (StatusCode::BAD_GATEWAY, "<html>502 Bad Gateway</html>").into_response(),
        ));
    }
    Ok(())
}

async fn gateway_url(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Err(refused) = authorize(&shared, &headers, "GET /gateway".into()) {
        return *refused;
    }
    axum::Json(json!({
        "url": shared.lock().gateway_url.clone().unwrap_or_else(|| format!("ws://{}", shared.addr)),
        "shards": 1,
        "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
    }))
    .into_response()
}

async fn users_me(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Err(refused) = authorize(&shared, &headers, "GET /users/@me".into()) {
        return *refused;
    }
    axum::Json(user_json(BOT_ID, true)).into_response()
}

async fn application(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Err(refused) = authorize(&shared, &headers, "GET /oauth2/applications/@me".into()) {
        return *refused;
    }
    axum::Json(json!({
        "id": BOT_ID.to_string(),
        "name": BOT_NAME,
        "icon": null,
        "description": "",
        "bot_public": false,
        "bot_require_code_grant": false,
        "verify_key": "00",
        "flags": shared.lock().application_flags,
        "owner": user_json(1, false),
    }))
    .into_response()
}

/// Discord's answer to content over 2,000 characters.
fn too_long() -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({
            "code": 50035,
            "errors": {"content": {"_errors": [{
                "code": "BASE_TYPE_MAX_LENGTH",
                "message": "Must be 2000 or fewer in length."
            }]}},
            "message": "Invalid Form Body",
        })),
    )
        .into_response()
}

/// `POST /channels/{id}/messages`, answered after the delay set with
/// [`FakeDiscord::delay_send_answers`].
async fn create_message(
    State(shared): State<Arc<Shared>>,
    Path(channel): Path<u64>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let response = store_message(&shared, channel, &headers, body);
    let delay = shared.lock().send_delay;
    tokio::time::sleep(delay).await;
    response
}

fn store_message(shared: &Arc<Shared>, channel: u64, headers: &HeaderMap, body: Bytes) -> Response {
    if let Err(refused) = authorize(
        shared,
        headers,
        format!("POST /channels/{channel}/messages"),
    ) {
        return *refused;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(error_body(50109, "The request body contains invalid JSON.")),
        )
            .into_response();
    };
    let content = body["content"].as_str().unwrap_or_default().to_owned();
    if content.chars().count() > MAX_CONTENT_LEN {
        return too_long();
    }
    let mut inner = shared.lock();
    if inner.users.contains_key(&channel) {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(error_body(10003, "Unknown Channel")),
        )
            .into_response();
    }
    let nonce = match &body["nonce"] {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    if let Some(nonce) = &nonce
        && body["enforce_nonce"] == json!(true)
        && let Some(existing) = inner.nonces.get(nonce).copied()
        && let Some(found) = inner
            .channels
            .get(&channel)
            .and_then(|c| c.messages.iter().find(|m| is_id(&m["id"], existing)))
    {
        return axum::Json(found.clone()).into_response();
    }
    let id = FakeDiscord::next_id(&mut inner);
    let guild = inner.channels.get(&channel).is_some_and(|c| c.guild);
    let mut message = json!({
        "id": id.to_string(),
        "channel_id": channel.to_string(),
        "author": user_json(BOT_ID, true),
        "content": content,
        "timestamp": timestamp(id),
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": false,
        "type": 0,
        "flags": 0,
        "components": components(&body["components"]),
    });
    if guild {
        message["guild_id"] = json!(GUILD_ID.to_string());
    }
    if let Some(nonce) = &nonce {
        message["nonce"] = json!(nonce);
        inner.nonces.insert(nonce.clone(), id);
    }
    if let Some(reply) = body["message_reference"]["message_id"].as_str() {
        message["type"] = json!(19);
        message["message_reference"] =
            json!({"type": 0, "message_id": reply, "channel_id": channel.to_string()});
    }
    inner
        .channels
        .entry(channel)
        .or_default()
        .messages
        .push(message.clone());
    // The bot's own message comes back over the gateway, as on Discord.
    dispatch(&mut inner, "MESSAGE_CREATE", message.clone());
    drop(inner);
    shared.bump();
    if let Some(map) = message.as_object_mut() {
        // Only gateway events name the server.
        map.remove("guild_id");
    }
    axum::Json(message).into_response()
}

/// Components as Discord echoes them (with the `type` of each button).
fn components(requested: &Value) -> Value {
    requested.as_array().map_or(json!([]), |rows| {
        json!(
            rows.iter()
                .map(|row| json!({
                    "type": 1,
                    "components": row["components"].as_array().cloned().unwrap_or_default().into_iter().map(|b| json!({
                        "type": 2,
                        "style": b["style"].clone(),
                        "label": b["label"].clone(),
                        "custom_id": b["custom_id"].clone(),
                    })).collect::<Vec<_>>(),
                }))
                .collect::<Vec<_>>()
        )
    })
}

async fn edit_message(
    State(shared): State<Arc<Shared>>,
    Path((channel, message)): Path<(u64, u64)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refused) = authorize(
        &shared,
        &headers,
        format!("PATCH /channels/{channel}/messages/{message}"),
    ) {
        return *refused;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(error_body(50109, "invalid JSON")),
        )
            .into_response();
    };
    if let Some(content) = body["content"].as_str()
        && content.chars().count() > MAX_CONTENT_LEN
    {
        return too_long();
    }
    let mut inner = shared.lock();
    let Some(found) = inner
        .channels
        .get_mut(&channel)
        .and_then(|c| c.messages.iter_mut().find(|m| is_id(&m["id"], message)))
    else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(error_body(10008, "Unknown Message")),
        )
            .into_response();
    };
    if !is_id(&found["author"]["id"], BOT_ID) {
        return (
            StatusCode::FORBIDDEN,
            axum::Json(error_body(
                50005,
                "Cannot edit a message authored by another user",
            )),
        )
            .into_response();
    }
    if let Some(content) = body["content"].as_str() {
        found["content"] = json!(content);
    }
    if body.get("components").is_some() {
        found["components"] = components(&body["components"]);
    }
    found["edited_timestamp"] = json!(timestamp(message + 1));
    let edits = found["hearth_edits"].as_u64().unwrap_or(0) + 1;
    found["hearth_edits"] = json!(edits);
    let mut answer = found.clone();
    drop(inner);
    shared.bump();
    if let Some(map) = answer.as_object_mut() {
        map.remove("hearth_edits");
    }
    axum::Json(answer).into_response()
}

async fn history(
    State(shared): State<Arc<Shared>>,
    Path(channel): Path<u64>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = authorize(
        &shared,
        &headers,
        format!("GET /channels/{channel}/messages"),
    ) {
        return *refused;
    }
    {
        let mut inner = shared.lock();
        if inner.fail_history > 0 {
            inner.fail_history -= 1;
            return (StatusCode::BAD_GATEWAY, "<html>502 Bad Gateway</html>").into_response();
        }
    }
    let after: u64 = query.get("after").and_then(|a| a.parse().ok()).unwrap_or(0);
    let limit: usize = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(50)
        .clamp(1, 100);
    let inner = shared.lock();
    let Some(found) = inner.channels.get(&channel) else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(error_body(10003, "Unknown Channel")),
        )
            .into_response();
    };
    // Discord returns the `limit` messages right after `after`, newest first.
    let mut page: Vec<Value> = found
        .messages
        .iter()
        .filter(|m| {
            m["id"]
                .as_str()
                .and_then(|id| id.parse::<u64>().ok())
                .is_some_and(|id| id > after)
        })
        .take(limit)
        .map(|m| {
            let mut m = m.clone();
            if let Some(map) = m.as_object_mut() {
                map.remove("hearth_edits");
                // REST messages carry neither: only gateway events name the server and member.
                map.remove("guild_id");
                map.remove("member");
            }
            m
        })
        .collect();
    page.reverse();
    axum::Json(page).into_response()
}

/// `GET /channels/{id}`: a server text channel names its server; any other channel the fake
/// knows is a DM with the user who wrote there.
async fn channel_info(
    State(shared): State<Arc<Shared>>,
    Path(channel): Path<u64>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = authorize(&shared, &headers, format!("GET /channels/{channel}")) {
        return *refused;
    }
    let inner = shared.lock();
    let Some(found) = inner.channels.get(&channel) else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(error_body(10003, "Unknown Channel")),
        )
            .into_response();
    };
    let last = found.messages.last().map(|m| m["id"].clone());
    if found.guild {
        return axum::Json(json!({
            "id": channel.to_string(),
            "type": 0,
            "guild_id": GUILD_ID.to_string(),
            "name": format!("channel-{channel}"),
            "position": 0,
            "permission_overwrites": [],
            "nsfw": false,
            "topic": null,
            "last_message_id": last,
            "parent_id": null,
            "rate_limit_per_user": 0,
            "flags": 0,
        }))
        .into_response();
    }
    let recipient = found
        .messages
        .iter()
        .find(|m| !is_id(&m["author"]["id"], BOT_ID))
        .and_then(|m| m["author"]["id"].as_str()?.parse::<u64>().ok())
        .unwrap_or(1);
    axum::Json(json!({
        "id": channel.to_string(),
        "type": 1,
        "last_message_id": last,
        "flags": 0,
        "recipients": [user_json(recipient, false)],
    }))
    .into_response()
}

/// `POST /users/@me/channels` with `recipient_id`: the DM channel with a registered user, the
/// same one each time; 400 Unknown User (10013) for anyone else.
async fn open_dm(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(refused) = authorize(&shared, &headers, "POST /users/@me/channels".into()) {
        return *refused;
    }
    let recipient =
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|b| match &b["recipient_id"] {
                Value::String(s) => s.parse::<u64>().ok(),
                other => other.as_u64(),
            });
    let mut inner = shared.lock();
    let Some(user) = recipient.filter(|user| inner.users.contains_key(user)) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(error_body(10013, "Unknown User")),
        )
            .into_response();
    };
    let channel = match inner.users.get(&user).copied().flatten() {
        Some(channel) => channel,
        None => {
            let channel = FakeDiscord::next_id(&mut inner);
            inner.users.insert(user, Some(channel));
            inner.channels.entry(channel).or_default();
            channel
        }
    };
    axum::Json(json!({
        "id": channel.to_string(),
        "type": 1,
        "last_message_id": null,
        "flags": 0,
        "recipients": [user_json(user, false)],
    }))
    .into_response()
}

/// `GET /guilds/{id}/members/{user}`: anyone who wrote in a server channel is a member, with
/// the roles given with their last message there.
async fn member(
    State(shared): State<Arc<Shared>>,
    Path((guild, user)): Path<(u64, u64)>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = authorize(
        &shared,
        &headers,
        format!("GET /guilds/{guild}/members/{user}"),
    ) {
        return *refused;
    }
    let roles = shared.lock().members.get(&user).cloned();
    match roles {
        Some(roles) if guild == GUILD_ID => axum::Json(json!({
            "user": user_json(user, false),
            "nick": null,
            "avatar": null,
            "roles": roles.iter().map(u64::to_string).collect::<Vec<_>>(),
            "joined_at": timestamp(1),
            "deaf": false,
            "mute": false,
            "flags": 0,
            "pending": false,
        }))
        .into_response(),
        _ => (
            StatusCode::NOT_FOUND,
            axum::Json(error_body(10007, "Unknown Member")),
        )
            .into_response(),
    }
}

async fn typing(
    State(shared): State<Arc<Shared>>,
    Path(channel): Path<u64>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = authorize(
        &shared,
        &headers,
        format!("POST /channels/{channel}/typing"),
    ) {
        return *refused;
    }
    *shared.lock().typing.entry(channel).or_default() += 1;
    shared.bump();
    StatusCode::NO_CONTENT.into_response()
}

async fn callback(
    State(shared): State<Arc<Shared>>,
    Path((id, token)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    // Interaction callbacks are authorised by their token, not the bot token.
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(error_body(50109, "invalid JSON")),
        )
            .into_response();
    };
    if !token.starts_with("itoken") {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(error_body(10062, "Unknown interaction")),
        )
            .into_response();
    }
    let kind = body["type"].as_u64().unwrap_or(0);
    shared.lock().acknowledged.push((id, kind));
    shared.bump();
    StatusCode::NO_CONTENT.into_response()
}

async fn followup(
    State(shared): State<Arc<Shared>>,
    Path((app, token)): Path<(u64, String)>,
    body: Bytes,
) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(error_body(50109, "invalid JSON")),
        )
            .into_response();
    };
    if app != BOT_ID || !token.starts_with("itoken") {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(error_body(10015, "Unknown Webhook")),
        )
            .into_response();
    }
    let content = body["content"].as_str().unwrap_or_default().to_owned();
    let ephemeral = body["flags"].as_u64().unwrap_or(0) & 64 != 0;
    let mut inner = shared.lock();
    if inner.fail_next > 0 {
        inner.fail_next -= 1;
        return (StatusCode::BAD_GATEWAY, "<html>502 Bad Gateway</html>").into_response();
    }
    let id = FakeDiscord::next_id(&mut inner);
    inner.followups.push(Followup {
        token,
        content: content.clone(),
        ephemeral,
    });
    drop(inner);
    shared.bump();
    axum::Json(json!({
        "id": id.to_string(),
        "channel_id": "1",
        "author": user_json(BOT_ID, true),
        "content": content,
        "timestamp": timestamp(id),
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": false,
        "type": 0,
        "flags": if ephemeral { 64 } else { 0 },
        "components": [],
    }))
    .into_response()
}

/// The CDN: streams the file in 64 KiB chunks, counting each chunk as it is handed to the
/// network, so a client that stops reading leaves the count short of the file.
async fn attachment(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    const CHUNK: u64 = 64 * 1024;
    let (file, served) = {
        let mut inner = shared.lock();
        inner.cdn_requests += 1;
        (
            inner.attachments.get(&name).cloned(),
            inner.cdn_bytes.clone(),
        )
    };
    shared.bump();
    let Some(file) = file else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let (len, length_header) = match &file.body {
        FileBody::Bytes(bytes) => (bytes.len() as u64, Some(bytes.len().to_string())),
        FileBody::Generated(len) => (*len, None),
    };
    let body = Arc::new(file.body);
    let stream = futures::stream::unfold(0u64, move |at| {
        let body = body.clone();
        let served = served.clone();
        async move {
            if at >= len {
                return None;
            }
            let end = (at + CHUNK).min(len);
            let chunk: Vec<u8> = match &*body {
                FileBody::Bytes(bytes) => bytes[at as usize..end as usize].to_vec(),
                FileBody::Generated(_) => (at..end).map(|i| (i % 251) as u8).collect(),
            };
            served.fetch_add(end - at, std::sync::atomic::Ordering::SeqCst);
            Some((Ok::<_, std::io::Error>(Bytes::from(chunk)), end))
        }
    });
    let mut response = axum::body::Body::from_stream(stream).into_response();
    let headers = response.headers_mut();
    if let Ok(mime) = file.mime.parse() {
        headers.insert("content-type", mime);
    }
    if let Some(length) = length_header.and_then(|l| l.parse().ok()) {
        headers.insert("content-length", length);
    }
    response
}

async fn websocket(State(shared): State<Arc<Shared>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| connection(shared, socket))
}

/// One gateway connection: HELLO, then IDENTIFY or RESUME, heartbeats and dispatches.
async fn connection(shared: Arc<Shared>, mut socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (id, heartbeat_ms) = {
        let mut inner = shared.lock();
        inner.next_connection += 1;
        let id = inner.next_connection;
        inner.connections.push(Connection {
            id,
            session: None,
            tx: tx.clone(),
            zombie: false,
        });
        (id, inner.heartbeat_ms)
    };
    let hello = json!({"op": 10, "d": {"heartbeat_interval": heartbeat_ms}});
    if socket
        .send(WsMessage::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    loop {
        tokio::select! {
            outgoing = rx.recv() => {
                let frame = match outgoing {
                    Some(Outgoing::Frame(frame)) => WsMessage::Text(frame.to_string().into()),
                    Some(Outgoing::Raw(text)) => WsMessage::Text(text.into()),
                    Some(Outgoing::Close(code, reason)) => {
                        // The connection ends either way.
                        let _ = socket.send(WsMessage::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
                        break;
                    }
                    Some(Outgoing::Drop) | None => break,
                };
                if socket.send(frame).await.is_err() {
                    break;
                }
            }
            incoming = socket.recv() => {
                let Some(Ok(incoming)) = incoming else { break };
                let text = match incoming {
                    WsMessage::Text(text) => text.to_string(),
                    WsMessage::Binary(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    WsMessage::Close(_) => break,
                    _ => continue,
                };
                let Ok(frame) = serde_json::from_str::<Value>(&text) else { continue };
                gateway_frame(&shared, id, &tx, &frame);
            }
        }
    }
    shared.lock().connections.retain(|c| c.id != id);
    shared.bump();
}

fn gateway_frame(
    shared: &Shared,
    connection: u64,
    tx: &mpsc::UnboundedSender<Outgoing>,
    frame: &Value,
) {
    let mut inner = shared.lock();
    let zombie = inner
        .connections
        .iter()
        .any(|c| c.id == connection && c.zombie);
    match frame["op"].as_u64() {
        Some(1) if !zombie => {
            // The receiver lives as long as the connection.
            let _ = tx.send(Outgoing::Frame(json!({"op": 11})));
        }
        Some(2) => {
            inner.identifies += 1;
            let token = frame["d"]["token"].as_str().unwrap_or_default();
            let token = token.strip_prefix("Bot ").unwrap_or(token);
            if inner.token_refused || token != inner.token {
                let _ = tx.send(Outgoing::Close(4004, "Authentication failed.".into()));
                return;
            }
            if let Some(code) = inner.close_on_identify {
                let reason = if code == 4014 {
                    "Disallowed intent(s)."
                } else {
                    "Authentication failed."
                };
                let _ = tx.send(Outgoing::Close(code, reason.into()));
                return;
            }
            let session_id = format!("session{}", inner.identifies);
            inner
                .sessions
                .insert(session_id.clone(), Session::default());
            inner.current_session = Some(session_id.clone());
            if let Some(c) = inner.connections.iter_mut().find(|c| c.id == connection) {
                c.session = Some(session_id.clone());
            }
            let ready = json!({
                "v": 10,
                "user": {
                    "id": BOT_ID.to_string(), "username": BOT_NAME, "global_name": null,
                    "discriminator": "0", "avatar": null, "bot": true, "verified": true,
                    "mfa_enabled": false, "flags": 0,
                },
                "guilds": [],
                "session_id": session_id,
                "resume_gateway_url": format!("ws://{}", shared.addr),
                "application": {"id": BOT_ID.to_string(), "flags": 0},
            });
            dispatch(&mut inner, "READY", ready);
        }
        Some(6) => {
            inner.resumes += 1;
            let session_id = frame["d"]["session_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let seq = frame["d"]["seq"].as_u64().unwrap_or(0);
            let known = inner.current_session.as_deref() == Some(session_id.as_str())
                && inner.sessions.contains_key(&session_id);
            if !known {
                let _ = tx.send(Outgoing::Frame(json!({"op": 9, "d": false})));
                return;
            }
            if let Some(c) = inner.connections.iter_mut().find(|c| c.id == connection) {
                c.session = Some(session_id.clone());
            }
            let missed: Vec<Value> = inner.sessions[&session_id]
                .sent
                .iter()
                .filter(|(s, _)| *s > seq)
                .map(|(_, f)| f.clone())
                .collect();
            for frame in missed {
                let _ = tx.send(Outgoing::Frame(frame));
            }
            dispatch(&mut inner, "RESUMED", json!({}));
        }
        _ => {}
    }
    drop(inner);
    shared.bump();
}

impl FakeDiscord {
    /// Sends `text` as it is on the current connections (a frame that is not even JSON).
    pub fn push_raw_frame(&self, text: &str) {
        for connection in &self.shared.lock().connections {
            // A connection whose task ended is removed by it.
            let _ = connection.tx.send(Outgoing::Raw(text.to_owned()));
        }
    }
}
