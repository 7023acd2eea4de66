//! Real mail servers for the email channel's tests: Dovecot for IMAP (with IDLE) and an
//! `aiosmtpd` SMTP server that writes every mail it accepts to a directory, both on free ports
//! on 127.0.0.1, both stopped when dropped.
//!
//! - [`Dovecot`] runs Debian's `dovecot` (package `dovecot-imapd`, installed with apt-get when
//!   missing and we are root) from a configuration of its own in a temporary directory: maildir
//!   storage, a passwd file of test users, plain-text login, no TLS. Tests deliver mail by
//!   APPENDing it as a test client ([`Dovecot::append`]), restart the server
//!   ([`Dovecot::restart`]) and change the mailbox's UIDVALIDITY with `doveadm`
//!   ([`Dovecot::change_uidvalidity`]). [`Dovecot::start_recording`] keeps Dovecot's rawlog
//!   of every session, so a test can count the commands a client sent
//!   ([`Dovecot::client_commands`]); [`Dovecot::append_many`] fills a mailbox in one session.
//! - [`SmtpSink`] runs `aiosmtpd` (PyPI) from a virtualenv under
//!   `/var/tmp/hearth-cache/email/venv`, created when missing; it requires AUTH (PLAIN/LOGIN,
//!   without TLS) with the test password, and [`SmtpSink::sent`] reads back what was sent.
//!
//! `.ci/run` installs both ahead of the tests, so no install runs inside a test's time limit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Where installs are cached between runs.
pub const CACHE_DIR: &str = "/var/tmp/hearth-cache/email";

/// One install at a time within a test binary.
static INSTALL: Mutex<()> = Mutex::new(());

fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}-{}-{nanos:x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Installs Dovecot's IMAP server with apt-get when `dovecot` is missing.
pub fn ensure_dovecot() -> Result<(), String> {
    let _guard = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if Path::new("/usr/sbin/dovecot").exists() {
        return Ok(());
    }
    let status = Command::new("apt-get")
        .args(["install", "-y", "-q", "dovecot-imapd"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run apt-get to install dovecot-imapd: {e}"))?;
    if !status.success() {
        return Err("apt-get install dovecot-imapd failed (run `apt-get update` first?)".into());
    }
    Ok(())
}

/// The virtualenv's python with `aiosmtpd`, created under [`CACHE_DIR`] when missing.
pub fn ensure_aiosmtpd() -> Result<PathBuf, String> {
    let _guard = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    let venv = Path::new(CACHE_DIR).join("venv");
    let python = venv.join("bin/python");
    let has = |python: &Path| {
        Command::new(python)
            .args(["-c", "import aiosmtpd"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if has(&python) {
        return Ok(python);
    }
    std::fs::create_dir_all(CACHE_DIR).map_err(|e| format!("cannot create {CACHE_DIR}: {e}"))?;
    // Built beside and renamed into place, so a concurrent test never sees half a venv.
    let building = Path::new(CACHE_DIR).join(format!("venv-{}", unique()));
    let run = |cmd: &mut Command| -> Result<(), String> {
        let out = cmd
            .output()
            .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{cmd:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    run(Command::new("python3").args(["-m", "venv"]).arg(&building))?;
    run(Command::new(building.join("bin/pip")).args(["install", "-q", "aiosmtpd"]))?;
    // Another process may have finished first; either venv works.
    if std::fs::rename(&building, &venv).is_err() {
        // Ignored: only a leftover directory.
        let _ = std::fs::remove_dir_all(&building);
    }
    if has(&python) {
        Ok(python)
    } else {
        Err(format!(
            "aiosmtpd is not importable from {}",
            python.display()
        ))
    }
}

/// A Dovecot IMAP server of the test's own.
pub struct Dovecot {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
    users: Vec<(String, String)>,
    extra_config: String,
    /// Whether every session's traffic is kept (`rawlog_dir`).
    record: bool,
}

impl std::fmt::Debug for Dovecot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dovecot").field("port", &self.port).finish()
    }
}

impl Dovecot {
    /// Starts a server whose users are `users` (`(login, password)`); each has an INBOX.
    pub async fn start(users: &[(&str, &str)]) -> Result<Self, String> {
        Self::start_with(users, "").await
    }

    /// [`Dovecot::start`] with lines added to the server's configuration, e.g.
    /// `imap_capability = IMAP4rev1 UIDPLUS` for a server without IDLE.
    pub async fn start_with(users: &[(&str, &str)], extra_config: &str) -> Result<Self, String> {
        ensure_dovecot()?;
        let dir = tempfile::Builder::new()
            .prefix("hearth-dovecot-")
            .tempdir_in("/var/tmp")
            .map_err(|e| format!("tempdir: {e}"))?;
        let mut server = Self {
            dir,
            port: crate::net::free_port(),
            child: None,
            users: users
                .iter()
                .map(|(u, p)| ((*u).to_owned(), (*p).to_owned()))
                .collect(),
            extra_config: extra_config.to_owned(),
            record: false,
        };
        server.write_config()?;
        server.spawn().await?;
        Ok(server)
    }

    /// [`Dovecot::start_with`] keeping a rawlog of every session, for
    /// [`Dovecot::client_commands`]. The mailbox also has a Sent folder marked `\Sent`.
    pub async fn start_recording(users: &[(&str, &str)]) -> Result<Self, String> {
        let mut server = Self::start_with(users, SENT_FOLDER).await?;
        server.record = true;
        std::fs::create_dir_all(server.dir.path().join("rawlog"))
            .map_err(|e| format!("rawlog dir: {e}"))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            server.dir.path().join("rawlog"),
            std::fs::Permissions::from_mode(0o777),
        )
        .map_err(|e| format!("chmod rawlog: {e}"))?;
        server.write_config()?;
        server.restart().await?;
        Ok(server)
    }

    /// Every command clients sent since the server started, one per line, tags removed
    /// (`UID FETCH 5,4 (UID FLAGS …)`); empty unless started with
    /// [`Dovecot::start_recording`]. Literal data is left out.
    pub fn client_commands(&self) -> Vec<String> {
        let mut commands = Vec::new();
        let mut files: Vec<PathBuf> = walk(&self.dir.path().join("rawlog"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "in"))
            .collect();
        files.sort();
        for file in files {
            let Ok(bytes) = std::fs::read(&file) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let mut skip = 0usize;
            for line in text.split("\r\n") {
                if skip > 0 {
                    // Literal data (an APPEND's mail) is not a command.
                    skip = skip.saturating_sub(line.len() + 2);
                    continue;
                }
                // `[timestamp ]tag command`: rawlog may stamp each line with the time.
                let mut words = line.splitn(3, ' ');
                let first = words.next().unwrap_or_default();
                let stamped = first.contains('.') && first.parse::<f64>().is_ok();
                let command = if stamped {
                    words.nth(1)
                } else {
                    line.split_once(' ').map(|(_, rest)| rest)
                };
                let Some(command) = command else {
                    continue;
                };
                if let Some(open) = line.rfind('{')
                    && let Some(size) = line[open + 1..]
                        .trim_end_matches('}')
                        .trim_end_matches('+')
                        .parse::<usize>()
                        .ok()
                {
                    skip = size;
                }
                commands.push(command.to_owned());
            }
        }
        commands
    }

    /// The `imap://` URL of the server.
    pub fn url(&self) -> String {
        format!("imap://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("dovecot.conf")
    }

    /// The server's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dovecot.log")).unwrap_or_default()
    }

    fn write_config(&self) -> Result<(), String> {
        let root = self.dir.path();
        for sub in ["run", "state", "mail"] {
            std::fs::create_dir_all(root.join(sub)).map_err(|e| format!("{sub}: {e}"))?;
        }
        // Mail processes run as `nobody`: the tree must be reachable and the mail dir writable.
        use std::os::unix::fs::PermissionsExt;
        let perms = |path: &Path, mode| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .map_err(|e| format!("chmod {}: {e}", path.display()))
        };
        perms(root, 0o755)?;
        perms(&root.join("mail"), 0o777)?;
        self.write_passwd()?;
        let r = root.display();
        let config = format!(
            r#"protocols = imap
listen = 127.0.0.1
base_dir = {r}/run
state_dir = {r}/state
log_path = {r}/dovecot.log
info_log_path = {r}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{r}/mail/%u
first_valid_uid = 1
mail_uid = nobody
mail_gid = nogroup
imap_idle_notify_interval = 2 mins
mailbox_list_index = no
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {r}/passwd
}}
userdb {{
  driver = static
  args = uid=nobody gid=nogroup home={r}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
{extra}
{rawlog}
"#,
            port = self.port,
            extra = self.extra_config,
            rawlog = if self.record {
                format!("rawlog_dir = {r}/rawlog")
            } else {
                String::new()
            },
        );
        std::fs::write(self.config_path(), config).map_err(|e| format!("config: {e}"))
    }

    fn write_passwd(&self) -> Result<(), String> {
        let passwd: String = self
            .users
            .iter()
            .map(|(user, password)| format!("{user}:{{PLAIN}}{password}::::::\n"))
            .collect();
        let path = self.dir.path().join("passwd");
        let tmp = self.dir.path().join("passwd.tmp");
        std::fs::write(&tmp, passwd).map_err(|e| format!("passwd: {e}"))?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("passwd: {e}"))
    }

    async fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("/usr/sbin/dovecot")
            .arg("-F")
            .arg("-c")
            .arg(self.config_path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start dovecot: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(stream) = TcpStream::connect(("127.0.0.1", self.port)).await {
                let mut lines = BufReader::new(stream).lines();
                if let Ok(Ok(Some(greeting))) =
                    tokio::time::timeout(Duration::from_secs(2), lines.next_line()).await
                    && greeting.starts_with("* OK")
                {
                    return Ok(());
                }
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                let mut err = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    use std::io::Read;
                    // Ignored: only for the message.
                    let _ = stderr.read_to_string(&mut err);
                }
                return Err(format!("dovecot exited ({status}): {err}\n{}", self.log()));
            }
            if Instant::now() > deadline {
                return Err(format!("dovecot did not start: {}", self.log()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn stop(&mut self) {
        self.thaw();
        if let Some(mut child) = self.child.take() {
            // SIGTERM: the master stops its imap processes too (SIGKILL would orphan them).
            let _ = Command::new("kill") // ignored: the wait below notices a failure
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // Ignored: it is being torn down anyway.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server (every connection drops) and starts it again on the same port, with the
    /// same mail.
    pub async fn restart(&mut self) -> Result<(), String> {
        self.stop();
        self.spawn().await
    }

    /// The master's process and all its children (login, imap, auth processes).
    fn processes(&self) -> Vec<u32> {
        let Some(master) = self.child.as_ref().map(Child::id) else {
            return Vec::new();
        };
        let mut pids = vec![master];
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                    continue;
                };
                let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                    continue;
                };
                // "pid (comm) state ppid …": the command may hold spaces, so split after ')'.
                let ppid = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    .and_then(|p| p.parse::<u32>().ok());
                if ppid == Some(master) {
                    pids.push(pid);
                }
            }
        }
        pids
    }

    fn signal_all(&self, signal: &str) {
        for pid in self.processes() {
            // Ignored: a process that ended meanwhile needs no signal.
            let _ = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(pid.to_string())
                .stderr(Stdio::null())
                .status();
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open and nothing answers, as when a NAT
    /// box silently forgets a connection.
    pub fn freeze(&self) {
        self.signal_all("STOP");
    }

    /// Lets a frozen server go on.
    pub fn thaw(&self) {
        self.signal_all("CONT");
    }

    /// Stops the server until [`Dovecot::restart`].
    pub fn kill(&mut self) {
        self.stop();
    }

    /// Sets a new password for `user`: their next login is refused.
    pub fn set_password(&mut self, user: &str, password: &str) -> Result<(), String> {
        for (u, p) in &mut self.users {
            if u == user {
                *p = password.to_owned();
            }
        }
        self.write_passwd()
    }

    /// Gives `user`'s `mailbox` a new UIDVALIDITY (as a server does after its index was rebuilt).
    pub fn change_uidvalidity(
        &self,
        user: &str,
        mailbox: &str,
        validity: u32,
    ) -> Result<(), String> {
        let out = Command::new("doveadm")
            .arg("-c")
            .arg(self.config_path())
            .args(["mailbox", "update", "-u", user, "--uid-validity"])
            .arg(validity.to_string())
            .arg(mailbox)
            .output()
            .map_err(|e| format!("cannot run doveadm: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "doveadm mailbox update failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// APPENDs `raw` to `user`'s `mailbox` as a mail client would.
    pub async fn append(
        &self,
        user: &str,
        password: &str,
        mailbox: &str,
        raw: &[u8],
    ) -> Result<(), String> {
        let mut client = ImapClient::connect(self.port).await?;
        client
            .command(&format!("LOGIN \"{user}\" \"{password}\""))
            .await?;
        client.append(mailbox, raw).await?;
        // Ignored: the mail is in; the server closes the session anyway.
        let _ = client.command("LOGOUT").await;
        Ok(())
    }

    /// APPENDs every mail of `raws` to `user`'s `mailbox` in one session, each with its flags
    /// (`\\Seen`, or empty) and arrival date (`"01-Feb-2026 10:00:00 +0000"`), if given.
    pub async fn append_many(
        &self,
        user: &str,
        password: &str,
        mailbox: &str,
        raws: &[(String, &str, Option<String>)],
    ) -> Result<(), String> {
        let mut client = ImapClient::connect(self.port).await?;
        client
            .command(&format!("LOGIN \"{user}\" \"{password}\""))
            .await?;
        for (raw, flags, date) in raws {
            client
                .append_with(mailbox, raw.as_bytes(), flags, date.as_deref())
                .await?;
        }
        // Ignored: the mails are in; the server closes the session anyway.
        let _ = client.command("LOGOUT").await;
        Ok(())
    }

    /// Flags of every mail in `user`'s `mailbox`, by UID (`\Seen` once read).
    pub async fn flags(
        &self,
        user: &str,
        password: &str,
        mailbox: &str,
    ) -> Result<Vec<(u32, String)>, String> {
        let mut client = ImapClient::connect(self.port).await?;
        client
            .command(&format!("LOGIN \"{user}\" \"{password}\""))
            .await?;
        client.command(&format!("EXAMINE \"{mailbox}\"")).await?;
        let lines = client.command("UID FETCH 1:* (FLAGS)").await?;
        // Ignored: read-only session.
        let _ = client.command("LOGOUT").await;
        Ok(lines
            .iter()
            .filter_map(|l| {
                let uid = l
                    .split("UID ")
                    .nth(1)?
                    .split(|c: char| !c.is_ascii_digit())
                    .next()?;
                let flags = l.split("FLAGS (").nth(1)?.split(')').next()?;
                Some((uid.parse().ok()?, flags.to_owned()))
            })
            .collect())
    }

    /// The mailbox's UIDVALIDITY as a client sees it.
    pub async fn uidvalidity(
        &self,
        user: &str,
        password: &str,
        mailbox: &str,
    ) -> Result<u32, String> {
        let mut client = ImapClient::connect(self.port).await?;
        client
            .command(&format!("LOGIN \"{user}\" \"{password}\""))
            .await?;
        let lines = client.command(&format!("EXAMINE \"{mailbox}\"")).await?;
        // Ignored: read-only session.
        let _ = client.command("LOGOUT").await;
        lines
            .iter()
            .find_map(|l| {
                l.split("UIDVALIDITY ")
                    .nth(1)?
                    .split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse()
                    .ok()
            })
            .ok_or_else(|| format!("no UIDVALIDITY in {lines:?}"))
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Just enough IMAP to log in, append and look.
struct ImapClient {
    reader: BufReader<TcpStream>,
    tag: u32,
}

impl ImapClient {
    async fn connect(port: u16) -> Result<Self, String> {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("imap connect: {e}"))?;
        let mut client = Self {
            reader: BufReader::new(stream),
            tag: 0,
        };
        client.line().await?;
        Ok(client)
    }

    async fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        let read = tokio::time::timeout(Duration::from_secs(10), self.reader.read_line(&mut line))
            .await
            .map_err(|_| "imap: no answer".to_owned())?
            .map_err(|e| format!("imap read: {e}"))?;
        if read == 0 {
            return Err("imap: connection closed".into());
        }
        Ok(line)
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.reader
            .get_mut()
            .write_all(bytes)
            .await
            .map_err(|e| format!("imap write: {e}"))
    }

    /// Sends a command and returns the untagged lines before its tagged OK.
    async fn command(&mut self, command: &str) -> Result<Vec<String>, String> {
        self.tag += 1;
        let tag = format!("t{}", self.tag);
        self.write(format!("{tag} {command}\r\n").as_bytes())
            .await?;
        self.finish(&tag).await
    }

    async fn finish(&mut self, tag: &str) -> Result<Vec<String>, String> {
        let mut lines = Vec::new();
        loop {
            let line = self.line().await?;
            if let Some(rest) = line.strip_prefix(&format!("{tag} ")) {
                return if rest.starts_with("OK") {
                    Ok(lines)
                } else {
                    Err(format!("imap: {}", line.trim()))
                };
            }
            lines.push(line);
        }
    }

    async fn append(&mut self, mailbox: &str, raw: &[u8]) -> Result<(), String> {
        self.append_with(mailbox, raw, "", None).await
    }

    async fn append_with(
        &mut self,
        mailbox: &str,
        raw: &[u8],
        flags: &str,
        date: Option<&str>,
    ) -> Result<(), String> {
        self.tag += 1;
        let tag = format!("t{}", self.tag);
        let flags = if flags.is_empty() {
            String::new()
        } else {
            format!(" ({flags})")
        };
        let date = date.map(|d| format!(" \"{d}\"")).unwrap_or_default();
        self.write(
            format!(
                "{tag} APPEND \"{mailbox}\"{flags}{date} {{{}}}\r\n",
                raw.len()
            )
            .as_bytes(),
        )
        .await?;
        let go = self.line().await?;
        if !go.starts_with('+') {
            return Err(format!("imap append refused: {}", go.trim()));
        }
        self.write(raw).await?;
        self.write(b"\r\n").await?;
        self.finish(&tag).await.map(|_| ())
    }
}

/// Dovecot configuration for a Sent folder marked `\Sent` (SPECIAL-USE), made on first login.
pub const SENT_FOLDER: &str = "namespace inbox {\n  inbox = yes\n  mailbox Sent {\n    special_use = \\Sent\n    auto = create\n  }\n}\n";

/// Every file under `dir`, at any depth.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

const SMTP_SERVER: &str = r#"
import os, signal, sys, time
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

outdir, port, user, password = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
counter = [0]

class Handler:
    async def handle_DATA(self, server, session, envelope):
        counter[0] += 1
        name = os.path.join(outdir, "%020d-%06d.eml" % (time.time_ns(), counter[0]))
        with open(name + ".tmp", "wb") as f:
            f.write(("X-Envelope-From: %s\r\nX-Envelope-To: %s\r\n" % (envelope.mail_from, ",".join(envelope.rcpt_tos))).encode())
            f.write(envelope.original_content or envelope.content)
        os.rename(name + ".tmp", name)
        return "250 OK queued"

def authenticate(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and auth_data.login.decode() == user and auth_data.password.decode() == password
    return AuthResult(success=ok)

controller = Controller(Handler(), hostname="127.0.0.1", port=port, authenticator=authenticate,
                        auth_required=True, auth_require_tls=False)
controller.start()
print("ready", flush=True)
signal.sigwait([signal.SIGTERM, signal.SIGINT])
controller.stop()
"#;

/// An SMTP server that keeps every mail it accepts.
pub struct SmtpSink {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
    python: PathBuf,
    user: String,
    password: String,
}

impl std::fmt::Debug for SmtpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpSink")
            .field("port", &self.port)
            .finish()
    }
}

/// A mail the SMTP server accepted, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SentMail {
    pub raw: String,
    /// The envelope recipients.
    pub rcpt_to: Vec<String>,
    pub from: String,
    pub to: String,
    pub subject: String,
    /// `<id>`, brackets included.
    pub message_id: String,
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
    pub auto_submitted: Option<String>,
    /// The text/plain part.
    pub text: String,
    /// The visible text of the text/html part.
    pub html_text: String,
    pub has_html: bool,
}

impl SmtpSink {
    /// Starts a server accepting mail from `user` with `password`.
    pub async fn start(user: &str, password: &str) -> Result<Self, String> {
        let python = ensure_aiosmtpd()?;
        let dir = tempfile::Builder::new()
            .prefix("hearth-smtp-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        std::fs::write(dir.path().join("server.py"), SMTP_SERVER)
            .map_err(|e| format!("script: {e}"))?;
        std::fs::create_dir_all(dir.path().join("mail")).map_err(|e| format!("mail dir: {e}"))?;
        let mut sink = Self {
            dir,
            port: crate::net::free_port(),
            child: None,
            python,
            user: user.to_owned(),
            password: password.to_owned(),
        };
        sink.spawn().await?;
        Ok(sink)
    }

    async fn spawn(&mut self) -> Result<(), String> {
        let mut child = Command::new(&self.python)
            .arg(self.dir.path().join("server.py"))
            .arg(self.dir.path().join("mail"))
            .arg(self.port.to_string())
            .arg(&self.user)
            .arg(&self.password)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start aiosmtpd: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("aiosmtpd exited: {status}"));
            }
            if Instant::now() > deadline {
                // Ignored: giving up on it.
                let _ = child.kill();
                return Err("aiosmtpd did not start".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.child = Some(child);
        Ok(())
    }

    /// Stops the server: sends fail until [`SmtpSink::start_again`].
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // Ignored: torn down either way.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill(); // ignored: last resort
        let _ = child.wait();
    }

    /// Starts a stopped server again on the same port, keeping the mail it accepted.
    pub async fn start_again(&mut self) -> Result<(), String> {
        self.stop();
        self.spawn().await
    }

    /// The `smtp://` URL of the server.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every mail accepted so far, oldest first.
    pub fn sent(&self) -> Vec<SentMail> {
        let dir = self.dir.path().join("mail");
        let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "eml"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
            .iter()
            .filter_map(|p| std::fs::read(p).ok())
            .map(|raw| parse_sent(&raw))
            .collect()
    }

    /// Waits until `count` mails matching `filter` were accepted, up to `timeout`, and returns
    /// those.
    pub async fn wait_for(
        &self,
        filter: impl Fn(&SentMail) -> bool,
        count: usize,
        timeout: Duration,
    ) -> Vec<SentMail> {
        let deadline = Instant::now() + timeout;
        loop {
            let found: Vec<SentMail> = self.sent().into_iter().filter(|m| filter(m)).collect();
            if found.len() >= count || Instant::now() > deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.stop();
    }
}

fn bracket(id: &str) -> String {
    format!("<{}>", id.trim_matches(|c| c == '<' || c == '>'))
}

/// Parses a mail the SMTP server wrote.
pub fn parse_sent(raw: &[u8]) -> SentMail {
    let text = String::from_utf8_lossy(raw).into_owned();
    let Some(message) = mail_parser::MessageParser::default().parse(raw) else {
        return SentMail {
            raw: text,
            ..SentMail::default()
        };
    };
    let address = |a: Option<&mail_parser::Address<'_>>| {
        a.and_then(|a| a.first())
            .and_then(|a| a.address())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    let list = |v: &mail_parser::HeaderValue<'_>| match v {
        mail_parser::HeaderValue::Text(id) => vec![bracket(id)],
        mail_parser::HeaderValue::TextList(ids) => ids.iter().map(|id| bracket(id)).collect(),
        _ => Vec::new(),
    };
    let html = message.body_html(0).map(|h| h.into_owned());
    SentMail {
        rcpt_to: message
            .header_raw("X-Envelope-To")
            .unwrap_or("")
            .trim()
            .split(',')
            .map(|s| s.trim().to_ascii_lowercase())
            .collect(),
        from: address(message.from()),
        to: address(message.to()),
        subject: message.subject().unwrap_or("").to_owned(),
        message_id: message.message_id().map(bracket).unwrap_or_default(),
        in_reply_to: list(message.in_reply_to()).into_iter().next(),
        references: list(message.references()),
        auto_submitted: message
            .header_raw("Auto-Submitted")
            .map(|v| v.trim().to_owned()),
        text: message
            .text_bodies()
            .next()
            .and_then(|p| p.text_contents())
            .unwrap_or("")
            .replace("\r\n", "\n")
            .trim_end()
            .to_owned(),
        has_html: message.html_body_count() > 0 && html.is_some(),
        html_text: html.as_deref().map(visible_text).unwrap_or_default(),
        raw: text,
    }
}

/// What a mail client shows of an HTML body: the text, tags removed, entities decoded, the
/// line breaks of `<br>` and paragraphs kept.
pub fn visible_text(html: &str) -> String {
    let body = html
        .split_once("<body")
        .and_then(|(_, b)| b.split_once('>'))
        .map_or(html, |(_, b)| b);
    let body = body.split("</body>").next().unwrap_or(body);
    let mut out = String::new();
    let mut rest = body;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let tag = rest[open + 1..open + close].to_ascii_lowercase();
        if tag.starts_with("/p") || tag.starts_with("/pre") {
            out.push_str("\n\n");
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    let decoded = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    decoded
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned()
}

/// A test mail: `From`, `To`, `Subject`, a fresh `Message-ID` (returned), optional extra
/// header lines, and a text/plain body.
pub fn mail(
    from: &str,
    to: &str,
    subject: &str,
    extra_headers: &str,
    body: &str,
) -> (String, String) {
    let id = format!("<test-{}@example.org>", unique());
    let raw = format!(
        "From: {from}\r\nTo: {to}\r\nSubject: {subject}\r\nMessage-ID: {id}\r\nDate: Mon, 23 Nov 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\n{extra_headers}Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n{}\r\n",
        body.replace('\n', "\r\n")
    );
    (id, raw)
}

/// Both servers for one mailbox: the bot's login on Dovecot and on the SMTP server.
#[derive(Debug)]
pub struct MailServers {
    pub imap: Dovecot,
    pub smtp: SmtpSink,
    pub user: String,
    pub password: String,
}

impl MailServers {
    /// Dovecot and the SMTP sink, with the bot's login `user` / `password`.
    pub async fn start(user: &str, password: &str) -> Result<Self, String> {
        Self::start_with(user, password, "").await
    }

    /// [`MailServers::start`] with lines added to Dovecot's configuration.
    pub async fn start_with(user: &str, password: &str, dovecot: &str) -> Result<Self, String> {
        Ok(Self {
            imap: Dovecot::start_with(&[(user, password)], dovecot).await?,
            smtp: SmtpSink::start(user, password).await?,
            user: user.to_owned(),
            password: password.to_owned(),
        })
    }

    /// Delivers `raw` into the bot's INBOX.
    pub async fn deliver(&self, raw: &str) -> Result<(), String> {
        self.imap
            .append(&self.user, &self.password, "INBOX", raw.as_bytes())
            .await
    }

    /// Delivers a plain mail from `from` to the bot and returns its Message-ID.
    pub async fn deliver_text(
        &self,
        from: &str,
        subject: &str,
        body: &str,
    ) -> Result<String, String> {
        let (id, raw) = mail(from, &self.user, subject, "", body);
        self.deliver(&raw).await?;
        Ok(id)
    }

    /// Mails the bot sent to `address`, oldest first.
    pub fn sent_to(&self, address: &str) -> Vec<SentMail> {
        let address = address.to_ascii_lowercase();
        self.smtp
            .sent()
            .into_iter()
            .filter(|m| m.rcpt_to.contains(&address) || m.to == address)
            .collect()
    }
}

/// A server like Outlook's in front of a real [`Dovecot`]: every command passes through to it,
/// except a `SEARCH` with a `CHARSET`, which it answers itself with
/// `NO [BADCHARSET (US-ASCII)]` (MailKit #808) without passing it on. Stops when dropped.
#[derive(Debug)]
pub struct BadCharsetProxy {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BadCharsetProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl BadCharsetProxy {
    /// A proxy on a free port of 127.0.0.1 to the Dovecot on `upstream`.
    pub async fn start(upstream: u16) -> Self {
        let (listener, addr) = crate::net::local_listener().await;
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await {
                        // Ignored: a session ends when either side closes.
                        let _ = relay(client, server).await;
                    }
                });
            }
        });
        Self {
            port: addr.port(),
            task,
        }
    }

    /// The `imap://` URL of the proxy.
    pub fn url(&self) -> String {
        format!("imap://127.0.0.1:{}", self.port)
    }
}

/// One session through [`BadCharsetProxy`]: the server's bytes go to the client as they come;
/// the client's go to the server one whole command at a time (with its literals), so a refused
/// search is never half sent.
async fn relay(client: TcpStream, server: TcpStream) -> std::io::Result<()> {
    use tokio::io::AsyncReadExt;
    let (client_read, client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let client_write = std::sync::Arc::new(tokio::sync::Mutex::new(client_write));
    let down = {
        let client_write = client_write.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match server_read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if client_write
                            .lock()
                            .await
                            .write_all(&buf[..n])
                            .await
                            .is_err()
                        {
                            break;
                        }
                    }
                }
            }
        })
    };
    let mut reader = BufReader::new(client_read);
    loop {
        let mut command = Vec::new();
        loop {
            let mut line = Vec::new();
            if reader.read_until(b'\n', &mut line).await? == 0 {
                down.abort();
                return Ok(());
            }
            command.extend_from_slice(&line);
            // `{n+}` or `{n}` at the end of a line: n bytes of literal follow, then the rest of
            // the command. A synchronising literal is passed on at once, since the client waits
            // for the server's `+` before sending it.
            let text = String::from_utf8_lossy(&line);
            let Some(size) = text
                .trim_end()
                .strip_suffix('}')
                .and_then(|t| t.rsplit_once('{'))
                .map(|(_, n)| n)
            else {
                break;
            };
            let synchronising = !size.ends_with('+');
            let Ok(size) = size.trim_end_matches('+').parse::<usize>() else {
                break;
            };
            if synchronising {
                server_write.write_all(&command).await?;
                command.clear();
            }
            let mut literal = vec![0u8; size];
            reader.read_exact(&mut literal).await?;
            command.extend_from_slice(&literal);
        }
        let text = String::from_utf8_lossy(&command).into_owned();
        let upper = text.to_ascii_uppercase();
        if upper.contains(" SEARCH ") && upper.contains(" CHARSET ") {
            let tag = text.split(' ').next().unwrap_or("*").to_owned();
            client_write
                .lock()
                .await
                .write_all(
                    format!("{tag} NO [BADCHARSET (US-ASCII)] The specified charset is not supported.\r\n")
                        .as_bytes(),
                )
                .await?;
        } else {
            server_write.write_all(&command).await?;
        }
    }
}
