//! The email channel against real servers: Dovecot (IMAP with IDLE) and an aiosmtpd SMTP
//! server, started per test on free ports (testkit/src/email.rs). The conformance suite of
//! `hearth-channel`, then the platform's own cases: threading headers, loop rules, first start,
//! UIDVALIDITY change, reconnect after a server restart, unreadable mail.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::testkit::{Document, Harness, MemoryState, RecordingSink, Running, Shown};
use hearth_channel::{
    Channel, ChannelStatus, ChatRef, InboundKind, MessageRef, OutboundMessage, Sender,
};
use hearth_email::{EmailChannel, EmailSettings, Endpoint, IMAP_SCHEMES, SMTP_SCHEMES};
use hearth_testkit::email::{MailServers, mail};
use tokio::sync::Mutex;

const BOT: &str = "bot@example.org";
const PASSWORD: &str = "bot-secret";
const ANN: &str = "ann@example.org";
const PATIENCE: Duration = Duration::from_secs(15);

struct EmailHarness {
    servers: Mutex<MailServers>,
    channel: Arc<EmailChannel>,
    /// Mails injected, by platform id (Message-ID), for redelivery.
    injected: std::sync::Mutex<Vec<(String, String)>>,
}

fn settings(servers: &MailServers) -> EmailSettings {
    let imap = Endpoint::parse(&servers.imap.url(), IMAP_SCHEMES).expect("imap url");
    let smtp = Endpoint::parse(&servers.smtp.url(), SMTP_SCHEMES).expect("smtp url");
    let mut settings = EmailSettings::new(imap, smtp, BOT, PASSWORD);
    settings.command_timeout = Duration::from_secs(5);
    settings
}

async fn servers() -> MailServers {
    MailServers::start(BOT, PASSWORD)
        .await
        .unwrap_or_else(|e| panic!("cannot start the mail servers: {e}"))
}

async fn harness() -> EmailHarness {
    let servers = servers().await;
    let channel = Arc::new(EmailChannel::new(settings(&servers)).expect("channel"));
    EmailHarness {
        servers: Mutex::new(servers),
        channel,
        injected: std::sync::Mutex::new(Vec::new()),
    }
}

impl EmailHarness {
    /// Each mail in the bot's INBOX with its flags, as Dovecot holds them.
    async fn inbox_flags(&self) -> Vec<(u32, String)> {
        self.servers
            .lock()
            .await
            .imap
            .flags(BOT, PASSWORD, "INBOX")
            .await
            .expect("flags")
    }

    async fn deliver(&self, id: String, raw: String) -> Result<(), String> {
        self.servers.lock().await.deliver(&raw).await?;
        self.injected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, raw));
        Ok(())
    }
}

#[async_trait]
impl Harness for EmailHarness {
    fn channel(&self) -> Arc<dyn Channel> {
        self.channel.clone()
    }

    fn chat(&self) -> ChatRef {
        ChatRef::new(ANN)
    }

    fn sender(&self) -> Sender {
        Sender::new(ANN)
    }

    async fn inject_text(
        &self,
        _chat: &ChatRef,
        sender: &Sender,
        text: &str,
    ) -> Result<(), String> {
        let (id, raw) = mail(&sender.id, BOT, "conformance", "", text);
        self.deliver(id, raw).await
    }

    async fn inject_document(
        &self,
        _chat: &ChatRef,
        sender: &Sender,
        caption: &str,
        document: &Document,
    ) -> Result<(), String> {
        use base64::Engine;
        let id = format!("<doc-{}@example.org>", caption.len() + rand_suffix());
        let data = base64::engine::general_purpose::STANDARD.encode(&document.bytes);
        let raw = format!(
            "From: {}\r\nTo: {BOT}\r\nSubject: a document\r\nMessage-ID: {id}\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{caption}\r\n--b1\r\nContent-Type: {}; name=\"{}\"\r\nContent-Disposition: attachment; filename=\"{}\"\r\nContent-Transfer-Encoding: base64\r\n\r\n{data}\r\n--b1--\r\n",
            sender.id, document.mime, document.name, document.name
        );
        self.deliver(id, raw).await
    }

    async fn redeliver(&self, platform_id: &str) -> Result<(), String> {
        let raw = self
            .injected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|(id, _)| id == platform_id)
            .map(|(_, raw)| raw.clone())
            .ok_or_else(|| format!("{platform_id} was never injected"))?;
        // The same mail once more, as a server does after a lost acknowledgement: a new UID.
        self.servers.lock().await.deliver(&raw).await
    }

    async fn shown(&self, chat: &ChatRef) -> Vec<Shown> {
        self.servers
            .lock()
            .await
            .sent_to(&chat.chat_id)
            .into_iter()
            .map(|m| Shown {
                id: m.message_id,
                text: m.html_text,
                buttons: Vec::new(),
                reactions: Vec::new(),
                reply_to: m.in_reply_to,
            })
            .collect()
    }

    async fn refuse_login(&self) -> Result<(), String> {
        self.servers
            .lock()
            .await
            .imap
            .set_password(BOT, "another password")
    }
}

fn rand_suffix() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed)
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as usize)
}

mod conformance {
    hearth_channel::conformance_tests!(super::harness);
}

#[tokio::test]
async fn a_reply_is_threaded_automatic_and_has_both_parts() {
    let h = harness().await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let (id, raw) = mail(
        "Ann <ann@example.org>",
        BOT,
        "weekend plans",
        "References: <older@example.org>\r\n",
        "What should we cook?\n\n-- \nAnn",
    );
    h.deliver(id.clone(), raw).await.expect("deliver");
    let event = running
        .sink
        .wait_text("What should we cook?", PATIENCE)
        .await;
    assert_eq!(event.platform_id, id);
    assert_eq!(event.sender.name.as_deref(), Some("Ann"));
    let mut reply = OutboundMessage::text(event.chat.clone(), "Try **pasta**.");
    reply.reply_context = event.reply_context.clone();
    reply.delivery_id = Some("hearth-77.0".into());
    let sent = h.channel.send(&reply).await.expect("send");
    let mails = h.servers.lock().await.sent_to(ANN);
    assert_eq!(mails.len(), 1, "{mails:?}");
    let m = &mails[0];
    assert_eq!(m.message_id, sent.message_id);
    assert_eq!(m.message_id, "<hearth-77.0@example.org>");
    assert_eq!(m.subject, "Re: weekend plans");
    assert_eq!(m.in_reply_to.as_deref(), Some(id.as_str()));
    assert_eq!(
        m.references,
        ["<older@example.org>".to_string(), id.clone()]
    );
    assert_eq!(m.auto_submitted.as_deref(), Some("auto-replied"));
    assert_eq!(m.from, BOT);
    assert_eq!(m.text, "Try **pasta**.");
    assert!(m.has_html && m.html_text == "Try pasta.", "{m:?}");
    // The mail was marked read once stored.
    let flags = h.inbox_flags().await;
    assert!(flags.iter().all(|(_, f)| f.contains("\\Seen")), "{flags:?}");
    running.stop().await;
}

#[tokio::test]
async fn automatic_mail_is_kept_as_a_notice_and_left_unread() {
    let h = harness().await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let (id, raw) = mail(
        ANN,
        BOT,
        "Out of office",
        "Auto-Submitted: auto-replied\r\n",
        "I am away",
    );
    h.deliver(id.clone(), raw).await.expect("deliver");
    let (bounce_id, bounce) = mail(
        "MAILER-DAEMON@example.org",
        BOT,
        "Undelivered Mail Returned to Sender",
        "Return-Path: <>\r\n",
        "delivery failed",
    );
    h.deliver(bounce_id.clone(), bounce).await.expect("deliver");
    let events = running.sink.wait_for_events(2, PATIENCE).await;
    assert_eq!(events.len(), 2, "{events:?}");
    for event in &events {
        assert!(
            matches!(event.kind, InboundKind::Notice { .. }),
            "answerable: {event:?}"
        );
    }
    let flags = h.inbox_flags().await;
    assert!(
        flags.iter().all(|(_, f)| !f.contains("\\Seen")),
        "{flags:?}"
    );
    running.stop().await;
}

#[tokio::test]
async fn the_first_start_skips_mail_that_was_already_there() {
    let h = harness().await;
    let servers = h.servers.lock().await;
    servers
        .deliver_text(ANN, "old", "an old mail")
        .await
        .expect("deliver");
    drop(servers);
    // INTERNALDATE has whole seconds: the first start must be in a later second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    running
        .wait_for_status(|s| *s == ChannelStatus::Connected, PATIENCE)
        .await;
    h.inject_text(&h.chat(), &h.sender(), "a new mail")
        .await
        .expect("deliver");
    running.sink.wait_text("a new mail", PATIENCE).await;
    let texts: Vec<String> = running
        .sink
        .events()
        .iter()
        .filter_map(|e| e.text().map(str::to_owned))
        .collect();
    assert_eq!(texts, ["a new mail"]);
    running.stop().await;
}

#[tokio::test]
async fn a_restarted_server_is_reconnected_and_mail_sent_meanwhile_arrives() {
    let h = harness().await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    h.inject_text(&h.chat(), &h.sender(), "before the restart")
        .await
        .expect("deliver");
    running.sink.wait_text("before the restart", PATIENCE).await;
    h.servers
        .lock()
        .await
        .imap
        .restart()
        .await
        .expect("restart");
    h.inject_text(&h.chat(), &h.sender(), "after the restart")
        .await
        .expect("deliver");
    running.sink.wait_text("after the restart", PATIENCE).await;
    assert_eq!(running.status.current(), ChannelStatus::Connected);
    running.stop().await;
}

/// Gives the bot's INBOX a UIDVALIDITY `by` above its own and restarts Dovecot, as a server
/// does after rebuilding its index; returns the new value.
async fn raise_uidvalidity(h: &EmailHarness, by: u32) -> u32 {
    let mut servers = h.servers.lock().await;
    let old = servers
        .imap
        .uidvalidity(BOT, PASSWORD, "INBOX")
        .await
        .expect("uidvalidity");
    servers
        .imap
        .change_uidvalidity(BOT, "INBOX", old + by)
        .expect("change");
    servers.imap.restart().await.expect("restart");
    old + by
}

#[tokio::test]
async fn a_uidvalidity_change_rescans_without_delivering_twice() {
    let h = harness().await;
    let state = MemoryState::new();
    let running = Running::start(h.channel(), RecordingSink::new(), state.clone());
    h.inject_text(&h.chat(), &h.sender(), "before the change")
        .await
        .expect("deliver");
    let first = running.sink.wait_text("before the change", PATIENCE).await;
    running.stop().await;
    let new = raise_uidvalidity(&h, 1000).await;
    let seen = h
        .servers
        .lock()
        .await
        .imap
        .uidvalidity(BOT, PASSWORD, "INBOX")
        .await;
    assert_eq!(seen, Ok(new));
    let sink = RecordingSink::new();
    let running = Running::start(h.channel(), sink.clone(), state);
    h.inject_text(&h.chat(), &h.sender(), "after the change")
        .await
        .expect("deliver");
    running.sink.wait_text("after the change", PATIENCE).await;
    running.stop().await;
    // The re-scan offered the first mail again under its Message-ID: the inbox would drop it.
    let offered: Vec<String> = sink
        .attempts()
        .iter()
        .filter(|e| e.text() == Some("before the change"))
        .map(|e| e.platform_id.clone())
        .collect();
    assert!(
        offered.iter().all(|id| *id == first.platform_id),
        "{offered:?}"
    );
}

#[tokio::test]
async fn unreadable_mail_is_set_aside_and_later_mail_still_arrives() {
    let h = harness().await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let servers = h.servers.lock().await;
    for raw in [
        // No sender at all.
        "Subject: nobody\r\nMessage-ID: <x1@example.org>\r\n\r\nwho am I\r\n".to_string(),
        // A broken multipart with an unknown charset and a huge header.
        format!(
            "From: {ANN}\r\nMessage-ID: <x2@example.org>\r\nX-Huge: {}\r\nContent-Type: multipart/mixed; boundary=\"never\"\r\n\r\n--nope\r\nContent-Type: text/plain; charset=x-unknown-42\r\n\r\nbroken boundaries\r\n",
            "h".repeat(200_000)
        ),
    ] {
        servers.deliver(&raw).await.expect("deliver");
    }
    drop(servers);
    h.inject_text(&h.chat(), &h.sender(), "normal mail after garbage")
        .await
        .expect("deliver");
    running
        .sink
        .wait_text("normal mail after garbage", PATIENCE)
        .await;
    running.stop().await;
}

#[tokio::test]
async fn buttons_and_edits_are_refused_so_the_daemon_uses_codes() {
    let h = harness().await;
    let mut message = OutboundMessage::text(h.chat(), "pick");
    message.buttons = vec![hearth_channel::Button::new("Yes", "y")];
    let err = h.channel.send(&message).await.expect_err("buttons");
    assert_eq!(err.kind, hearth_channel::ErrorKind::Rejected);
    let target = MessageRef {
        chat: h.chat(),
        message_id: "<x@example.org>".into(),
    };
    let err = h
        .channel
        .edit(&target, &OutboundMessage::text(h.chat(), "x"))
        .await
        .expect_err("edit");
    assert_eq!(err.kind, hearth_channel::ErrorKind::Rejected);
    assert!(h.channel.capabilities().silent_with_strangers);
}

#[tokio::test]
async fn a_server_without_idle_is_polled() {
    let servers = MailServers::start_with(BOT, PASSWORD, "imap_capability = IMAP4rev1 UIDPLUS\n")
        .await
        .unwrap_or_else(|e| panic!("cannot start the mail servers: {e}"));
    let mut settings = settings(&servers);
    settings.poll_interval = Duration::from_millis(300);
    let channel = Arc::new(EmailChannel::new(settings).expect("channel"));
    let running = Running::start(channel, RecordingSink::new(), MemoryState::new());
    running
        .wait_for_status(|s| *s == ChannelStatus::Connected, PATIENCE)
        .await;
    for n in 0..2 {
        servers
            .deliver_text(ANN, "polled", &format!("polled mail {n}"))
            .await
            .expect("deliver");
        running
            .sink
            .wait_text(&format!("polled mail {n}"), PATIENCE)
            .await;
    }
    running.stop().await;
}

#[tokio::test]
async fn idle_is_reissued_and_a_frozen_server_is_left_for_a_new_connection() {
    let servers = servers().await;
    let mut settings = settings(&servers);
    settings.idle_refresh = Duration::from_millis(400);
    settings.command_timeout = Duration::from_secs(1);
    let channel = Arc::new(EmailChannel::new(settings).expect("channel"));
    let running = Running::start(channel, RecordingSink::new(), MemoryState::new());
    running
        .wait_for_status(|s| *s == ChannelStatus::Connected, PATIENCE)
        .await;
    // Several IDLE renewals pass; push still works.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    servers
        .deliver_text(ANN, "x", "after renewals")
        .await
        .expect("deliver");
    running.sink.wait_text("after renewals", PATIENCE).await;
    // The server stops answering without closing anything: the command time limit notices,
    // and the channel reports it is reconnecting.
    servers.imap.freeze();
    let status = running
        .wait_for_status(|s| s.as_str() == "reconnecting", PATIENCE)
        .await;
    assert_eq!(status.as_str(), "reconnecting", "{status}");
    servers.imap.thaw();
    servers
        .deliver_text(ANN, "x", "after the thaw")
        .await
        .expect("deliver");
    running.sink.wait_text("after the thaw", PATIENCE).await;
    let status = running
        .wait_for_status(|s| *s == ChannelStatus::Connected, PATIENCE)
        .await;
    assert_eq!(status, ChannelStatus::Connected);
    running.stop().await;
}

/// A mail from Ann with `bytes` attached as `name` (`mime`), base64 in lines of 76.
fn mail_with_attachment(caption: &str, name: &str, mime: &str, bytes: &[u8]) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    format!(
        "From: {ANN}\r\nTo: {BOT}\r\nSubject: a photo\r\nMessage-ID: <att-{}@example.org>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{caption}\r\n--b1\r\nContent-Type: {mime}; name=\"{name}\"\r\nContent-Disposition: attachment; filename=\"{name}\"\r\nContent-Transfer-Encoding: base64\r\n\r\n{}\r\n--b1--\r\n",
        rand_suffix(),
        lines.join("\r\n")
    )
}

#[tokio::test]
async fn an_attachment_is_stored_by_reference_and_fetched_exactly_within_its_limit() {
    let h = harness().await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    // A 3 MB "photo" whose bytes are all different enough to catch any mix-up.
    let photo: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let raw = mail_with_attachment("my holiday", "beach.jpg", "image/jpeg", &photo);
    h.servers.lock().await.deliver(&raw).await.expect("deliver");
    let event = running.sink.wait_text("my holiday", PATIENCE).await;
    running.stop().await;
    let InboundKind::Message { attachments, .. } = &event.kind else {
        unreachable!()
    };
    assert_eq!(attachments.len(), 1, "{attachments:?}");
    let photo_ref = &attachments[0];
    // The stored event holds the reference, never the photo.
    assert_eq!(photo_ref.data_base64, None);
    assert_eq!(photo_ref.kind, hearth_channel::AttachmentKind::Image);
    assert_eq!(photo_ref.name.as_deref(), Some("beach.jpg"));
    assert_eq!(photo_ref.size, Some(3_000_000));
    let source = photo_ref.source.as_deref().expect("a source");
    assert!(
        source.starts_with("imap:") && source.ends_with(":2:base64:INBOX"),
        "{source}"
    );
    let stored = serde_json::to_string(&event).expect("json");
    assert!(
        stored.len() < 2_000,
        "the stored event is {} bytes",
        stored.len()
    );
    // Fetched after the daemon checked the sender: the exact bytes.
    let fetched = h
        .channel
        .fetch_attachment(photo_ref, 20_000_000)
        .await
        .expect("fetched");
    assert_eq!(fetched.len(), photo.len());
    assert!(fetched == photo, "the fetched photo differs");
    // Over the limit by its declared size: refused for good, without a connection.
    let small = h
        .channel
        .fetch_attachment(photo_ref, 1024)
        .await
        .expect_err("over the limit");
    assert!(!small.is_temporary(), "{small}");
    assert!(small.to_string().contains("3000000 bytes"), "{small}");
    // Without a declared size the fetch itself stops at the limit.
    let undeclared = hearth_channel::Attachment {
        size: None,
        ..photo_ref.clone()
    };
    let err = h
        .channel
        .fetch_attachment(&undeclared, 1024)
        .await
        .expect_err("over the limit");
    assert!(!err.is_temporary(), "{err}");
    assert!(err.to_string().contains("limit of 1024"), "{err}");
    // A reference that is no mail part, or to a renumbered mailbox, is refused too.
    let bogus = hearth_channel::Attachment {
        source: Some("https://evil.example/x".into()),
        ..photo_ref.clone()
    };
    let err = h
        .channel
        .fetch_attachment(&bogus, 1 << 20)
        .await
        .expect_err("bogus");
    assert!(!err.is_temporary(), "{err}");
    let mut fields: Vec<String> = source.split(':').map(str::to_owned).collect();
    let validity: u32 = fields[1].parse().expect("validity");
    fields[1] = (validity + 1).to_string();
    let renumbered = hearth_channel::Attachment {
        source: Some(fields.join(":")),
        ..photo_ref.clone()
    };
    let err = h
        .channel
        .fetch_attachment(&renumbered, 20_000_000)
        .await
        .expect_err("renumbered");
    assert!(err.to_string().contains("renumbered"), "{err}");
}

#[tokio::test]
async fn a_script_bomb_from_a_stranger_does_not_hold_up_the_next_mail() {
    // H4's mail, scaled to 200,000 tags (3.4 MB): a multipart that never closes around an
    // HTML part of `<script></script>`s. The old HTML-to-text needed minutes for it.
    let h = harness().await;
    let running = Running::start(h.channel(), RecordingSink::new(), MemoryState::new());
    let bomb = format!(
        "From: stranger@evil.example\r\nTo: {BOT}\r\nMessage-ID: <bomb@evil.example>\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/html\r\n\r\n{}hello from the bomb",
        "<script></script>".repeat(200_000)
    );
    h.servers
        .lock()
        .await
        .deliver(&bomb)
        .await
        .expect("deliver");
    h.inject_text(&h.chat(), &h.sender(), "the mail after the bomb")
        .await
        .expect("deliver");
    let started = std::time::Instant::now();
    running
        .sink
        .wait_text("the mail after the bomb", PATIENCE)
        .await;
    let bomb_event = running
        .sink
        .wait_for_event(|e| e.platform_id == "<bomb@evil.example>", PATIENCE)
        .await
        .expect("the bomb is read and recorded, not stuck");
    assert_eq!(bomb_event.sender.id, "stranger@evil.example");
    running.stop().await;
    eprintln!("bomb and the next mail read in {:?}", started.elapsed());
}

#[tokio::test]
async fn a_uidvalidity_change_never_answers_mail_from_before_the_first_start() {
    let h = harness().await;
    // Mail that was in the mailbox before hearth's first start: never to be answered.
    h.inject_text(&h.chat(), &h.sender(), "old mail from before hearth")
        .await
        .expect("deliver");
    // INTERNALDATE counts whole seconds.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let state = MemoryState::new();
    let running = Running::start(h.channel(), RecordingSink::new(), state.clone());
    running
        .wait_for_status(|s| *s == ChannelStatus::Connected, PATIENCE)
        .await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    h.inject_text(&h.chat(), &h.sender(), "seen before the change")
        .await
        .expect("deliver");
    let seen = running
        .sink
        .wait_text("seen before the change", PATIENCE)
        .await;
    running.stop().await;
    // The server rebuilt its index (as with Dovecot's uid list removed).
    raise_uidvalidity(&h, 7).await;
    let sink = RecordingSink::new();
    let running = Running::start(h.channel(), sink.clone(), state);
    h.inject_text(&h.chat(), &h.sender(), "new after the change")
        .await
        .expect("deliver");
    running
        .sink
        .wait_text("new after the change", PATIENCE)
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    running.stop().await;
    let offered: Vec<(String, Option<String>)> = sink
        .attempts()
        .iter()
        .map(|e| (e.platform_id.clone(), e.text().map(str::to_owned)))
        .collect();
    assert!(
        offered
            .iter()
            .all(|(_, text)| text.as_deref() != Some("old mail from before hearth")),
        "the old inbox was offered again: {offered:?}"
    );
    // The last mail seen may be offered again, under its Message-ID (the inbox drops it).
    assert!(
        offered
            .iter()
            .filter(|(_, text)| text.as_deref() == Some("seen before the change"))
            .all(|(id, _)| *id == seen.platform_id),
        "{offered:?}"
    );
}

/// An SMTP server that takes every command, reads the mail after DATA, and then never answers:
/// the reply to DATA is lost, as when a connection dies after the mail went through. Returns
/// its port and the mails it read.
async fn smtp_that_swallows_the_reply() -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let mails = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = mails.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut lines = BufReader::new(read).lines();
                // Ignored throughout: the client may hang up at any point.
                let _ = write.write_all(b"220 fake ESMTP\r\n").await;
                let mut data: Option<String> = None;
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(mail) = data.as_mut() {
                        if line == "." {
                            let mail = data.take().unwrap_or_default();
                            seen.lock().unwrap_or_else(|p| p.into_inner()).push(mail);
                            // The mail is taken; the reply never comes.
                            continue;
                        }
                        mail.push_str(&line);
                        mail.push('\n');
                        continue;
                    }
                    let upper = line.to_ascii_uppercase();
                    let reply: &[u8] = if upper.starts_with("EHLO") {
                        b"250-fake\r\n250 AUTH PLAIN LOGIN\r\n"
                    } else if upper.starts_with("AUTH") {
                        b"235 ok\r\n"
                    } else if upper.starts_with("DATA") {
                        data = Some(String::new());
                        b"354 go on\r\n"
                    } else if upper.starts_with("QUIT") {
                        b"221 bye\r\n"
                    } else {
                        b"250 ok\r\n"
                    };
                    let _ = write.write_all(reply).await;
                }
            });
        }
    });
    (port, mails)
}

#[tokio::test]
async fn a_send_whose_reply_is_lost_is_outcome_unknown_and_retried_with_the_same_message_id() {
    let servers = servers().await;
    let (port, mails) = smtp_that_swallows_the_reply().await;
    let mut settings = settings(&servers);
    settings.smtp =
        Endpoint::parse(&format!("smtp://127.0.0.1:{port}"), SMTP_SCHEMES).expect("url");
    settings.command_timeout = Duration::from_secs(1);
    let channel = EmailChannel::new(settings).expect("channel");
    let mut message = OutboundMessage::text(ChatRef::new(ANN), "your answer");
    message.delivery_id = Some("hearth-7.0".into());
    let mut ids = Vec::new();
    for _ in 0..2 {
        let err = channel.send(&message).await.expect_err("no reply to DATA");
        assert!(err.is_temporary(), "{err}");
        assert!(err.to_string().contains("outcome unknown"), "{err}");
        assert!(
            err.outcome_unknown,
            "the daemon flags the retry in doubt: {err}"
        );
    }
    for mail in mails.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        let id = mail
            .lines()
            .find_map(|l| l.strip_prefix("Message-ID: "))
            .expect("a Message-ID")
            .to_owned();
        ids.push(id);
    }
    assert_eq!(ids.len(), 2, "both attempts reached DATA: {ids:?}");
    assert_eq!(ids[0], ids[1], "a retry must carry the same Message-ID");
}
