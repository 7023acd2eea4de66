//! A real Synapse homeserver for the Matrix tests: installed from PyPI into a venv kept outside
//! the clone (`/var/tmp/hearth-cache/matrix/venv`, made on first use), configured in a temporary
//! directory (127.0.0.1 only, open registration, no federation key servers, rate limits raised),
//! started on a free port, and killed when dropped.
//!
//! Synapse takes a few seconds to start (see [`Synapse::started_in`]), so a test binary shares
//! one server ([`Synapse::shared`]) and each test registers its own users and rooms. The shared
//! server runs under a small shell watchdog that kills it when the test process ends, since a
//! static is never dropped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::net::free_port;

/// Where the venv is cached between runs.
pub const CACHE_DIR: &str = "/var/tmp/hearth-cache/matrix";

/// The server name users live on: `@name:localhost`.
pub const SERVER_NAME: &str = "localhost";

/// A fixed test signing key: the server never federates, so it needs no secret one.
const SIGNING_KEY: &str = "ed25519 a_NnQw BvR5Oy1gMBgaa3+hQzgw63W2BizaRAN2hvGYhqfSN2E\n";

/// A running Synapse.
pub struct Synapse {
    child: Child,
    port: u16,
    dir: PathBuf,
    started_in: Duration,
}

impl std::fmt::Debug for Synapse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synapse")
            .field("port", &self.port)
            .field("started_in", &self.started_in)
            .finish_non_exhaustive()
    }
}

/// A user registered on the server.
#[derive(Clone, Debug)]
pub struct Registered {
    pub user_id: String,
    pub password: String,
    pub access_token: String,
    pub device_id: String,
}

/// The venv's Python, installing Synapse into the cache when it is missing.
pub fn ensure_installed() -> Result<PathBuf, String> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED.get_or_init(install).clone()
}

fn install() -> Result<PathBuf, String> {
    let venv = Path::new(CACHE_DIR).join("venv");
    let python = venv.join("bin/python");
    let works = |python: &Path| {
        Command::new(python)
            .args(["-c", "import synapse.app.homeserver"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if python.exists() && works(&python) {
        return Ok(python);
    }
    std::fs::create_dir_all(CACHE_DIR).map_err(|e| format!("cannot create {CACHE_DIR}: {e}"))?;
    eprintln!("installing Synapse into {} (once)", venv.display());
    let base = ["python3.11", "python3"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("--version")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .ok_or("no python3 found to install Synapse with")?;
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    run(
        Command::new(base).args(["-m", "venv"]).arg(&venv),
        "creating the venv",
    )?;
    run(
        Command::new(venv.join("bin/pip")).args(["install", "-q", "matrix-synapse"]),
        "pip install matrix-synapse",
    )?;
    if works(&python) {
        Ok(python)
    } else {
        Err("Synapse was installed but does not import".into())
    }
}

fn config(dir: &Path, port: u16) -> String {
    let d = dir.display();
    let unlimited = "{per_second: 10000, burst_count: 10000}";
    format!(
        r#"server_name: "{SERVER_NAME}"
pid_file: {d}/homeserver.pid
listeners:
  - port: {port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: {d}/homeserver.db
log_config: "{d}/log.config"
media_store_path: {d}/media_store
registration_shared_secret: "hearth-test-registration"
report_stats: false
macaroon_secret_key: "hearth-test-macaroon"
form_secret: "hearth-test-form"
signing_key_path: "{d}/signing.key"
trusted_key_servers: []
suppress_key_server_warning: true
enable_registration: true
enable_registration_without_verification: true
presence:
  enabled: false
url_preview_enabled: false
rc_message: {unlimited}
rc_registration: {unlimited}
rc_login:
  address: {unlimited}
  account: {unlimited}
  failed_attempts: {unlimited}
rc_joins:
  local: {unlimited}
  remote: {unlimited}
rc_joins_per_room: {unlimited}
rc_invites:
  per_room: {unlimited}
  per_user: {unlimited}
  per_issuer: {unlimited}
rc_key_requests: {unlimited}
rc_room_creation: {unlimited}
rc_3pid_validation: {unlimited}
rc_admin_redaction: {unlimited}
"#
    )
}

fn log_config(dir: &Path) -> String {
    format!(
        "version: 1\nformatters:\n  precise:\n    format: '%(asctime)s - %(name)s - %(levelname)s - %(message)s'\nhandlers:\n  file:\n    class: logging.FileHandler\n    formatter: precise\n    filename: {}/homeserver.log\nroot:\n  level: WARNING\n  handlers: [file]\ndisable_existing_loggers: false\n",
        dir.display()
    )
}

/// `GET path` on 127.0.0.1:`port`; the status code, if the server answered.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 32];
    let n = stream.read(&mut head).ok()?;
    let text = String::from_utf8_lossy(&head[..n]);
    text.split_whitespace().nth(1)?.parse().ok()
}

impl Synapse {
    /// Installs (when missing), configures and starts a Synapse, and waits until it answers
    /// `/_matrix/client/versions`.
    pub fn start() -> Result<Self, String> {
        Self::start_watched(None)
    }

    /// The server shared by every test of this process, started on first use and killed when
    /// the process ends.
    pub fn shared() -> Result<&'static Synapse, String> {
        static SHARED: OnceLock<Result<Synapse, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| Self::start_watched(Some(std::process::id())))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn start_watched(parent: Option<u32>) -> Result<Self, String> {
        let python = ensure_installed()?;
        let dir = std::env::temp_dir().join(format!(
            "hearth-synapse-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let port = free_port();
        let write = |name: &str, text: &str| {
            std::fs::write(dir.join(name), text).map_err(|e| format!("cannot write {name}: {e}"))
        };
        write("homeserver.yaml", &config(&dir, port))?;
        write("log.config", &log_config(&dir))?;
        write("signing.key", SIGNING_KEY)?;
        let started = Instant::now();
        let mut command = match parent {
            // `exec` keeps the server's pid the shell's until the watchdog loop: the shell runs
            // Synapse in the background and kills it once the parent test process is gone.
            Some(parent) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(
                        "\"$0\" -m synapse.app.homeserver -c \"$1\" & child=$!; \
                         trap 'kill $child 2>/dev/null; exit 0' TERM INT; \
                         while kill -0 \"$2\" 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 1; done; \
                         kill $child 2>/dev/null; wait $child",
                    )
                    .arg(&python)
                    .arg(dir.join("homeserver.yaml"))
                    .arg(parent.to_string());
                c
            }
            None => {
                let mut c = Command::new(&python);
                c.args(["-m", "synapse.app.homeserver", "-c"])
                    .arg(dir.join("homeserver.yaml"));
                c
            }
        };
        let stderr = std::fs::File::create(dir.join("stderr.log"))
            .map_err(|e| format!("cannot create the log: {e}"))?;
        let child = command
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start Synapse: {e}"))?;
        let mut server = Self {
            child,
            port,
            dir,
            started_in: Duration::ZERO,
        };
        let deadline = started + Duration::from_secs(90);
        loop {
            if http_status(port, "/_matrix/client/versions") == Some(200) {
                break;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                let log =
                    std::fs::read_to_string(server.dir.join("stderr.log")).unwrap_or_default();
                return Err(format!("Synapse exited with {status}: {log}"));
            }
            if Instant::now() > deadline {
                return Err("Synapse did not answer within 90 s".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        server.started_in = started.elapsed();
        eprintln!(
            "Synapse answered on port {port} after {:?}",
            server.started_in
        );
        Ok(server)
    }

    /// The client API base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// How long the server took from spawn to its first answer on `/versions`.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The directory with the server's config, database and log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Registers `@localpart:localhost` with `password` (`m.login.dummy`).
    pub async fn register(&self, localpart: &str, password: &str) -> Result<Registered, String> {
        let body = serde_json::json!({
            "username": localpart,
            "password": password,
            "auth": {"type": "m.login.dummy"},
            "inhibit_login": false,
        });
        let response = reqwest::Client::new()
            .post(format!("{}/_matrix/client/v3/register", self.url()))
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("register {localpart}: {e}"))?;
        let status = response.status();
        let json: serde_json::Value = response
            .json()
            .await
            .map_err(|e| format!("register {localpart}: {e}"))?;
        if !status.is_success() {
            return Err(format!("register {localpart}: {status} {json}"));
        }
        let field = |name: &str| json[name].as_str().unwrap_or_default().to_owned();
        Ok(Registered {
            user_id: field("user_id"),
            password: password.to_owned(),
            access_token: field("access_token"),
            device_id: field("device_id"),
        })
    }

    /// Changes `user`'s password (so a saved login of theirs stays valid but a new one with
    /// the old password is refused).
    pub async fn change_password(&self, user: &Registered, new: &str) -> Result<(), String> {
        let body = serde_json::json!({
            "new_password": new,
            "logout_devices": false,
            "auth": {"type": "m.login.password", "identifier": {"type": "m.id.user", "user": user.user_id}, "password": user.password},
        });
        let response = reqwest::Client::new()
            .post(format!("{}/_matrix/client/v3/account/password", self.url()))
            .bearer_auth(&user.access_token)
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("change password: {e}"))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("change password: {}", response.status()))
        }
    }
}

impl Drop for Synapse {
    fn drop(&mut self) {
        // Already gone is fine; the directory is ours to remove.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A unique localpart for a test user: `prefix` plus a counter and the time.
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}{}x{nanos:x}", N.fetch_add(1, Ordering::Relaxed))
}

/// A person on the server, speaking the client-server API with plain HTTP (no encryption; the
/// encrypted tests use a matrix-sdk client instead).
#[derive(Clone, Debug)]
pub struct Human {
    base: String,
    pub user: Registered,
    http: reqwest::Client,
}

/// A message as a person in the room sees it: edits applied, reactions collected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeenMessage {
    pub event_id: String,
    pub sender: String,
    /// The visible text: the HTML rendering without tags when there is one, else the body.
    pub text: String,
    /// The raw `formatted_body`, if any.
    pub html: Option<String>,
    pub msgtype: String,
    /// The message it quotes (`m.in_reply_to`, not a thread's fallback).
    pub reply_to: Option<String>,
    /// The thread root, for messages in a thread.
    pub thread: Option<String>,
    /// `(sender, key)` of every reaction on it.
    pub reactions: Vec<(String, String)>,
    /// How many times it was edited.
    pub edits: usize,
}

/// Visible text of a `formatted_body`: tags dropped, the five entities decoded.
pub fn html_text(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
        .trim()
        .to_owned()
}

impl Human {
    /// `user` talking to the server at `base`.
    pub fn new(base: &str, user: Registered) -> Self {
        Self {
            base: base.to_owned(),
            user,
            http: reqwest::Client::new(),
        }
    }

    /// Registers a new person on `server`.
    pub async fn register(server: &Synapse, prefix: &str) -> Result<Self, String> {
        let user = server
            .register(&unique_name(prefix), "human-password")
            .await?;
        Ok(Self::new(&server.url(), user))
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<serde_json::Value, String> {
        let mut request = self
            .http
            .request(
                method.clone(),
                format!("{}/_matrix/client/v3{path}", self.base),
            )
            .bearer_auth(&self.user.access_token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("{method} {path}: {e}"))?;
        let status = response.status();
        let json: serde_json::Value = response.json().await.unwrap_or_default();
        if status.is_success() {
            Ok(json)
        } else {
            Err(format!("{method} {path}: {status} {json}"))
        }
    }

    /// Creates a room inviting `invite`; a DM (`is_direct`) when asked, encrypted when asked.
    pub async fn create_room(
        &self,
        invite: &[&str],
        is_direct: bool,
        encrypted: bool,
    ) -> Result<String, String> {
        let mut body = serde_json::json!({
            "preset": "private_chat",
            "invite": invite,
            "is_direct": is_direct,
        });
        if encrypted {
            body["initial_state"] = serde_json::json!([{
                "type": "m.room.encryption", "state_key": "",
                "content": {"algorithm": "m.megolm.v1.aes-sha2"}
            }]);
        }
        let json = self
            .call(reqwest::Method::POST, "/createRoom", Some(body))
            .await?;
        json["room_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("createRoom answered {json}"))
    }

    /// Invites `user` into `room`.
    pub async fn invite(&self, room: &str, user: &str) -> Result<(), String> {
        self.call(
            reqwest::Method::POST,
            &format!("/rooms/{}/invite", enc(room)),
            Some(serde_json::json!({"user_id": user})),
        )
        .await
        .map(drop)
    }

    /// Joins `room` (accepts an invite).
    pub async fn join(&self, room: &str) -> Result<(), String> {
        self.call(
            reqwest::Method::POST,
            &format!("/join/{}", enc(room)),
            Some(serde_json::json!({})),
        )
        .await
        .map(drop)
    }

    /// The rooms this person has joined.
    pub async fn joined_rooms(&self) -> Result<Vec<String>, String> {
        let json = self
            .call(reqwest::Method::GET, "/joined_rooms", None)
            .await?;
        Ok(json["joined_rooms"]
            .as_array()
            .map(|rooms| {
                rooms
                    .iter()
                    .filter_map(|r| r.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The user ids joined to `room`.
    pub async fn joined_members(&self, room: &str) -> Result<Vec<String>, String> {
        let json = self
            .call(
                reqwest::Method::GET,
                &format!("/rooms/{}/joined_members", enc(room)),
                None,
            )
            .await?;
        Ok(json["joined"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default())
    }

    /// The membership of `user` in `room` (`join`, `invite`, `leave` …), if any.
    pub async fn membership(&self, room: &str, user: &str) -> Option<String> {
        let json = self
            .call(
                reqwest::Method::GET,
                &format!("/rooms/{}/state/m.room.member/{}", enc(room), enc(user)),
                None,
            )
            .await
            .ok()?;
        json["membership"].as_str().map(str::to_owned)
    }

    /// Sends an event with `content`; returns its id.
    pub async fn send(
        &self,
        room: &str,
        event_type: &str,
        content: serde_json::Value,
    ) -> Result<String, String> {
        let txn = unique_name("t");
        let json = self
            .call(
                reqwest::Method::PUT,
                &format!("/rooms/{}/send/{event_type}/{txn}", enc(room)),
                Some(content),
            )
            .await?;
        json["event_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("send answered {json}"))
    }

    /// Sends a text message, in `thread` when given.
    pub async fn text(
        &self,
        room: &str,
        text: &str,
        thread: Option<&str>,
    ) -> Result<String, String> {
        let mut content = serde_json::json!({"msgtype": "m.text", "body": text});
        if let Some(root) = thread {
            content["m.relates_to"] = serde_json::json!({
                "rel_type": "m.thread", "event_id": root, "is_falling_back": true,
                "m.in_reply_to": {"event_id": root},
            });
        }
        self.send(room, "m.room.message", content).await
    }

    /// Sends a text message that replies to `event`.
    pub async fn reply(&self, room: &str, event: &str, text: &str) -> Result<String, String> {
        self.send(
            room,
            "m.room.message",
            serde_json::json!({
                "msgtype": "m.text", "body": text,
                "m.relates_to": {"m.in_reply_to": {"event_id": event}},
            }),
        )
        .await
    }

    /// Reacts to `event` with `key`.
    pub async fn react(&self, room: &str, event: &str, key: &str) -> Result<String, String> {
        self.send(
            room,
            "m.reaction",
            serde_json::json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": event, "key": key}}),
        )
        .await
    }

    /// Edits their message `event` to `text`.
    pub async fn edit(&self, room: &str, event: &str, text: &str) -> Result<String, String> {
        self.send(
            room,
            "m.room.message",
            serde_json::json!({
                "msgtype": "m.text", "body": format!("* {text}"),
                "m.new_content": {"msgtype": "m.text", "body": text},
                "m.relates_to": {"rel_type": "m.replace", "event_id": event},
            }),
        )
        .await
    }

    /// Uploads `bytes`; returns the `mxc://` URI.
    pub async fn upload(&self, bytes: Vec<u8>, mime: &str, name: &str) -> Result<String, String> {
        let response = self
            .http
            .post(format!(
                "{}/_matrix/media/v3/upload?filename={}",
                self.base,
                enc(name)
            ))
            .bearer_auth(&self.user.access_token)
            .header("content-type", mime)
            .body(bytes)
            .send()
            .await
            .map_err(|e| format!("upload: {e}"))?;
        let json: serde_json::Value = response.json().await.map_err(|e| format!("upload: {e}"))?;
        json["content_uri"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("upload answered {json}"))
    }

    /// The room's events, oldest first (the newest `limit`).
    pub async fn events(&self, room: &str, limit: usize) -> Result<Vec<serde_json::Value>, String> {
        let json = self
            .call(
                reqwest::Method::GET,
                &format!("/rooms/{}/messages?dir=b&limit={limit}", enc(room)),
                None,
            )
            .await?;
        let mut events: Vec<serde_json::Value> =
            json["chunk"].as_array().cloned().unwrap_or_default();
        events.reverse();
        Ok(events)
    }

    /// The messages of `room` as a person sees them, oldest first: replacements applied to
    /// their originals, reactions attached.
    pub async fn seen(&self, room: &str) -> Result<Vec<SeenMessage>, String> {
        let events = self.events(room, 1000).await?;
        let mut messages: Vec<SeenMessage> = Vec::new();
        let mut edits: Vec<(String, serde_json::Value)> = Vec::new();
        let mut reactions: Vec<(String, String, String)> = Vec::new();
        for event in &events {
            let content = &event["content"];
            let relates = &content["m.relates_to"];
            let sender = event["sender"].as_str().unwrap_or_default().to_owned();
            match event["type"].as_str() {
                Some("m.room.message") if relates["rel_type"] == "m.replace" => {
                    if let Some(target) = relates["event_id"].as_str() {
                        edits.push((target.to_owned(), content["m.new_content"].clone()));
                    }
                }
                Some("m.room.message") => {
                    let thread = (relates["rel_type"] == "m.thread")
                        .then(|| relates["event_id"].as_str().map(str::to_owned))
                        .flatten();
                    let falling_back = relates["is_falling_back"].as_bool().unwrap_or(false);
                    let reply_to = relates["m.in_reply_to"]["event_id"]
                        .as_str()
                        .filter(|_| thread.is_none() || !falling_back)
                        .map(str::to_owned);
                    let mut message = SeenMessage {
                        event_id: event["event_id"].as_str().unwrap_or_default().to_owned(),
                        sender,
                        reply_to,
                        thread,
                        ..SeenMessage::default()
                    };
                    apply(&mut message, content);
                    messages.push(message);
                }
                Some("m.reaction") => {
                    if let (Some(target), Some(key)) =
                        (relates["event_id"].as_str(), relates["key"].as_str())
                    {
                        reactions.push((target.to_owned(), sender, key.to_owned()));
                    }
                }
                _ => {}
            }
        }
        for (target, new_content) in edits {
            if let Some(message) = messages.iter_mut().find(|m| m.event_id == target) {
                apply(message, &new_content);
                message.edits += 1;
            }
        }
        for (target, sender, key) in reactions {
            if let Some(message) = messages.iter_mut().find(|m| m.event_id == target) {
                message.reactions.push((sender, key));
            }
        }
        Ok(messages)
    }
}

fn apply(message: &mut SeenMessage, content: &serde_json::Value) {
    let body = content["body"].as_str().unwrap_or_default();
    message.msgtype = content["msgtype"].as_str().unwrap_or_default().to_owned();
    message.html = content["formatted_body"].as_str().map(str::to_owned);
    message.text = match &message.html {
        Some(html) => html_text(html),
        None => body.to_owned(),
    };
}

/// Percent-encodes a path segment (room ids start with `!`, user ids with `@`).
fn enc(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A reverse proxy in front of Synapse that counts the requests whose path contains a given
/// part and can answer some of them with an error instead of passing them on: for tests that
/// check what the adapter downloads (`/media/download`) or how it takes a failing `/messages`.
/// It stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    faults: std::sync::Arc<std::sync::Mutex<Vec<(String, u16, usize)>>>,
    /// Held for its drop, which stops the proxy.
    _served: crate::net::Served,
}

#[derive(Clone)]
struct ProxyState {
    upstream: String,
    http: reqwest::Client,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    faults: std::sync::Arc<std::sync::Mutex<Vec<(String, u16, usize)>>>,
}

impl Proxy {
    /// A proxy on a free local port passing everything to `upstream` (e.g. [`Synapse::url`]).
    pub async fn start(upstream: &str) -> Result<Self, String> {
        let state = ProxyState {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            seen: Default::default(),
            faults: Default::default(),
        };
        let (seen, faults) = (state.seen.clone(), state.faults.clone());
        let app = axum::Router::new().fallback(forward).with_state(state);
        let served = crate::net::Served::start(app).await;
        Ok(Self {
            url: format!("http://{}", served.addr()),
            seen,
            faults,
            _served: served,
        })
    }

    /// The proxy's base URL, to use as the homeserver URL.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// How many requests so far had `part` in their path.
    pub fn count(&self, part: &str) -> usize {
        lock(&self.seen).iter().filter(|p| p.contains(part)).count()
    }

    /// Answers the next `times` requests whose path contains `part` with `status` (and a
    /// Matrix error body) instead of passing them on. (matrix-sdk itself retries a 5xx or 429
    /// for up to 15 minutes before its caller sees it; see [`Proxy::reset_next`].)
    pub fn fail_next(&self, part: &str, status: u16, times: usize) {
        lock(&self.faults).push((part.to_owned(), status, times));
    }

    /// Breaks the connection of the next `times` requests whose path contains `part` in the
    /// middle of the answer (headers sent, the body cut off), as a restarting homeserver or
    /// reverse proxy does: a network failure, which matrix-sdk hands to its caller at once.
    pub fn reset_next(&self, part: &str, times: usize) {
        lock(&self.faults).push((part.to_owned(), 0, times));
    }

    /// Passes the next `times` requests whose path contains `part` on to the homeserver, then
    /// breaks the connection instead of returning its answer: the request took effect, but the
    /// client cannot know (an outcome-unknown failure).
    pub fn lose_answer_next(&self, part: &str, times: usize) {
        lock(&self.faults).push((part.to_owned(), 1, times));
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data: a panic elsewhere cannot leave it half-written.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

async fn forward(
    axum::extract::State(state): axum::extract::State<ProxyState>,
    request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    lock(&state.seen).push(path.clone());
    let fault = {
        let mut faults = lock(&state.faults);
        let hit = faults
            .iter_mut()
            .find(|(part, _, times)| *times > 0 && path.contains(part.as_str()));
        hit.map(|(_, status, times)| {
            *times -= 1;
            *status
        })
    };
    let cut = || {
        let cut = futures::stream::once(async {
            Err::<axum::body::Bytes, std::io::Error>(std::io::Error::other(
                "connection cut by the test proxy",
            ))
        });
        axum::response::Response::new(axum::body::Body::from_stream(cut))
    };
    if fault == Some(0) {
        return cut();
    }
    let lose_answer = fault == Some(1);
    if let Some(status) = fault.filter(|s| *s > 1) {
        let status =
            axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::BAD_GATEWAY);
        let body =
            serde_json::json!({"errcode": "M_UNKNOWN", "error": "injected by the test proxy"});
        return (status, axum::Json(body)).into_response();
    }
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let body = match axum::body::to_bytes(body, 256 << 20).await {
        Ok(body) => body,
        Err(e) => return (axum::http::StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let mut upstream = state
        .http
        .request(parts.method, format!("{}{path}{query}", state.upstream))
        .body(body);
    for (name, value) in &parts.headers {
        if name != axum::http::header::HOST && name != axum::http::header::CONTENT_LENGTH {
            upstream = upstream.header(name, value);
        }
    }
    let response = match upstream.send().await {
        Ok(response) => response,
        Err(e) => return (axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    if lose_answer {
        // The homeserver acted on the request; its answer is what gets lost.
        drop(response.bytes().await);
        return cut();
    }
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = match response.bytes().await {
        Ok(bytes) => bytes,
        Err(e) => return (axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut out = (status, bytes).into_response();
    for (name, value) in &headers {
        let hop = [
            axum::http::header::CONTENT_LENGTH,
            axum::http::header::TRANSFER_ENCODING,
            axum::http::header::CONNECTION,
        ];
        if !hop.contains(name) {
            out.headers_mut().append(name, value.clone());
        }
    }
    out
}
