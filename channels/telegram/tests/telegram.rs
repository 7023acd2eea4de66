//! The Telegram channel against the fake Bot API server of hearth-testkit.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::testkit::{Document, Harness, MemoryState, RecordingSink, Running, Shown};
use hearth_channel::{
    AttachmentKind, Button, Channel, ChannelError, ChannelStatus, ChatRef, ErrorKind, InboundKind,
    MessageRef, OutboundMessage, PreviewUpdate, Sender,
};
use hearth_telegram::{Mode, Pacing, TelegramChannel, TelegramSettings};
use hearth_testkit::telegram::{BOT_USERNAME, FakeTelegram, Incoming};

const TOKEN: &str = "424242:SECRET-test-token_xyz";
const PATIENCE: Duration = Duration::from_secs(10);
const USER: i64 = 42;

fn settings(tg: &FakeTelegram) -> TelegramSettings {
    let mut settings = TelegramSettings::new(TOKEN).with_api_url(tg.api_url());
    settings.poll_timeout_secs = 2;
    settings.pacing = Pacing::unlimited();
    settings
}

async fn setup() -> (FakeTelegram, Arc<TelegramChannel>) {
    let tg = FakeTelegram::start(TOKEN).await;
    let channel = Arc::new(TelegramChannel::new(settings(&tg)).expect("valid settings"));
    (tg, channel)
}

fn start(channel: &Arc<TelegramChannel>, sink: &RecordingSink, state: &MemoryState) -> Running {
    Running::start(channel.clone(), sink.clone(), state.clone())
}

fn private() -> ChatRef {
    ChatRef::new(USER.to_string())
}

/// The fake Bot API as the conformance suite sees it. The checks talk in the private chat of
/// [`USER`]; threads are forum topics of a supergroup, where the bot is addressed by mention.
struct TgHarness {
    tg: FakeTelegram,
    channel: Arc<TelegramChannel>,
}

const GROUP: i64 = -1_002_000;
const TOPIC: i64 = 77;

fn parse<T: std::str::FromStr>(what: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{what} {value:?} is not a Telegram id"))
}

#[async_trait]
impl Harness for TgHarness {
    fn channel(&self) -> Arc<dyn Channel> {
        self.channel.clone()
    }
    fn chat(&self) -> ChatRef {
        private()
    }
    fn sender(&self) -> Sender {
        Sender::new(USER.to_string())
    }
    fn thread_chat(&self) -> Option<ChatRef> {
        Some(ChatRef::new(GROUP.to_string()).with_thread(TOPIC.to_string()))
    }
    async fn inject_text(&self, chat: &ChatRef, sender: &Sender, text: &str) -> Result<(), String> {
        self.tg.push(incoming(chat, sender, text)?);
        Ok(())
    }
    async fn inject_document(
        &self,
        chat: &ChatRef,
        sender: &Sender,
        caption: &str,
        document: &Document,
    ) -> Result<(), String> {
        let incoming = incoming(chat, sender, caption)?.document(
            &document.name,
            &document.mime,
            document.bytes.clone(),
        );
        self.tg.push(incoming);
        Ok(())
    }
    async fn inject_edit(
        &self,
        chat: &ChatRef,
        sender: &Sender,
        message_id: &str,
        text: &str,
    ) -> Result<(), String> {
        let message_id = parse("message id", message_id)?;
        self.tg
            .push(incoming(chat, sender, text)?.edit_of(message_id));
        Ok(())
    }
    async fn inject_press(
        &self,
        message: &MessageRef,
        sender: &Sender,
        data: &str,
    ) -> Result<(), String> {
        let chat = parse("chat", &message.chat.chat_id)?;
        let user = parse("user", &sender.id)?;
        let message_id = parse("message id", &message.message_id)?;
        self.tg.press(chat, user, message_id, data);
        Ok(())
    }
    async fn redeliver(&self, platform_id: &str) -> Result<(), String> {
        let update_id = parse("update id", platform_id)?;
        if self.tg.redeliver(update_id) {
            Ok(())
        } else {
            Err(format!("no update {update_id}"))
        }
    }
    async fn shown(&self, chat: &ChatRef) -> Vec<Shown> {
        let Ok(id) = chat.chat_id.parse::<i64>() else {
            return Vec::new();
        };
        let thread = chat.thread_id.as_deref().and_then(|t| t.parse().ok());
        self.tg
            .messages(id)
            .into_iter()
            .filter(|m| m.thread_id == thread)
            .map(|m| Shown {
                id: m.id.to_string(),
                text: m.text,
                buttons: m
                    .buttons
                    .into_iter()
                    .flatten()
                    .map(|(label, data)| Button::new(label, data))
                    .collect(),
                reactions: Vec::new(),
                reply_to: m.reply_to.map(|id| id.to_string()),
            })
            .collect()
    }
    async fn answered_presses(&self) -> Vec<String> {
        self.tg
            .answered_callbacks()
            .into_iter()
            .map(|c| c.id)
            .collect()
    }
    async fn typing_shown(&self, chat: &ChatRef) -> Option<usize> {
        let id = chat.chat_id.parse::<i64>().ok()?;
        Some(
            self.tg
                .chat_actions()
                .iter()
                .filter(|a| a.chat == id && a.action == "typing")
                .count(),
        )
    }
    async fn refuse_login(&self) -> Result<(), String> {
        self.tg.set_token_valid(false);
        Ok(())
    }
    async fn hold_login(&self) -> Result<(), String> {
        self.tg.hold("getMe");
        Ok(())
    }
    async fn release_login(&self) -> Result<(), String> {
        self.tg.release("getMe");
        Ok(())
    }
}

/// A user's message as the fake queues it: in a group the bot is addressed by mention.
fn incoming(chat: &ChatRef, sender: &Sender, text: &str) -> Result<Incoming, String> {
    let chat_id: i64 = parse("chat", &chat.chat_id)?;
    let user = parse("user", &sender.id)?;
    let mut message = Incoming::text(chat_id, user, text);
    if chat_id < 0 {
        message = message.mention();
    }
    if let Some(thread) = &chat.thread_id {
        message = message.in_thread(parse("thread", thread)?);
    }
    Ok(message)
}

async fn harness() -> TgHarness {
    let (tg, channel) = setup().await;
    TgHarness { tg, channel }
}

mod conformance {
    hearth_channel::conformance_tests!(super::harness);
}

#[tokio::test]
async fn offset_survives_a_restart_without_loss_or_repeat() {
    let (tg, channel) = setup().await;
    let state = MemoryState::new();
    for n in 1..=3 {
        tg.push_text(USER, USER, &format!("before {n}"));
    }
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &state);
    sink.wait_for_events(3, PATIENCE).await;
    running.stop().await;
    let last = sink.events()[2]
        .platform_id
        .parse::<i64>()
        .expect("numeric id");
    assert_eq!(
        state.get("telegram", "offset"),
        Some((last + 1).to_string())
    );

    // Updates arrive while hearth is down.
    let pending: Vec<i64> = (1..=2)
        .map(|n| tg.push_text(USER, USER, &format!("while down {n}")))
        .collect();
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &state);
    sink.wait_text("while down 2", PATIENCE).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.stop().await;
    assert_eq!(sink.texts(), ["while down 1", "while down 2"]);
    assert_eq!(sink.attempts().len(), 2, "an update was offered twice");
    assert_eq!(
        state.get("telegram", "offset"),
        Some((pending[1] + 1).to_string())
    );
}

#[tokio::test]
async fn a_refused_delivery_keeps_the_update_for_the_next_try() {
    let (tg, channel) = setup().await;
    let state = MemoryState::new();
    let sink = RecordingSink::new();
    sink.fail_next(2);
    let id = tg.push_text(USER, USER, "keep me");
    let running = start(&channel, &sink, &state);
    sink.wait_text("keep me", PATIENCE).await;
    running.stop().await;
    assert_eq!(sink.refused(), 2);
    assert_eq!(sink.events().len(), 1);
    assert_eq!(state.get("telegram", "offset"), Some((id + 1).to_string()));
}

#[tokio::test]
async fn groups_answer_only_mentions_replies_and_commands() {
    let (tg, channel) = setup().await;
    let group = -1001;
    let ours = channel
        .send(&OutboundMessage::text(
            ChatRef::new(group.to_string()),
            "I said this",
        ))
        .await
        .expect("send to the group");
    let ours: i64 = ours.message_id.parse().expect("numeric id");

    tg.push(Incoming::text(group, 5, "just chatting"));
    tg.push(Incoming::text(group, 5, "what's the time?").mention());
    tg.push(Incoming::text(group, 5, format!("/help@{BOT_USERNAME}")));
    tg.push(Incoming::text(group, 5, "/help@some_other_bot"));
    tg.push(Incoming::text(group, 5, "answering you").reply_to(ours));
    tg.push(Incoming::text(
        group,
        5,
        format!("hey @{} can you", BOT_USERNAME.to_uppercase()),
    ));
    let last = tg.push(Incoming::text(group, 5, "more chatter"));
    tg.push_text(USER, USER, "marker");

    let sink = RecordingSink::new();
    let state = MemoryState::new();
    let running = start(&channel, &sink, &state);
    sink.wait_text("marker", PATIENCE).await;
    running.stop().await;
    assert_eq!(
        sink.texts(),
        [
            "what's the time?",
            "/help",
            "answering you",
            "hey can you",
            "marker"
        ]
    );
    let reply = &sink.events()[2];
    assert!(
        matches!(&reply.kind, InboundKind::Message { reply_to: Some(r), .. } if *r == ours.to_string())
    );
    assert_eq!(reply.sender.name.as_deref(), Some("User 5"));
    // Skipped chatter is confirmed too.
    let offset: i64 = state
        .get("telegram", "offset")
        .and_then(|o| o.parse().ok())
        .expect("offset saved");
    assert!(offset > last);
}

#[tokio::test]
async fn forum_topics_in_and_out() {
    let (tg, channel) = setup().await;
    let group = -1002;
    tg.push(
        Incoming::text(group, 5, "in the topic")
            .mention()
            .in_thread(77),
    );
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    let event = sink.wait_text("in the topic", PATIENCE).await;
    running.stop().await;
    assert_eq!(
        event.chat,
        ChatRef::new(group.to_string()).with_thread("77")
    );
    let InboundKind::Message { message_id, .. } = &event.kind else {
        panic!("not a message: {event:?}");
    };
    let mut reply = OutboundMessage::text(event.chat.clone(), "answer in the topic");
    reply.reply_to = message_id.clone();
    channel.send(&reply).await.expect("send");
    channel.typing(&event.chat).await.expect("typing");
    let shown = tg.messages(group);
    assert_eq!(shown[0].thread_id, Some(77));
    assert_eq!(
        shown[0].reply_to.map(|id| id.to_string()),
        message_id.clone()
    );
    let actions = tg.chat_actions();
    assert_eq!(actions[0].action, "typing");
    assert_eq!(actions[0].thread_id, Some(77));
}

#[tokio::test]
async fn photos_documents_and_voice_become_attachments_fetched_on_demand() {
    let (tg, channel) = setup().await;
    let photo: Vec<u8> = (0..200u8).collect();
    tg.push(Incoming::text(USER, USER, "look").photo(photo.clone()));
    tg.push(Incoming::text(USER, USER, "notes").document(
        "notes.md",
        "text/markdown",
        b"# Notes\nbuy milk".to_vec(),
    ));
    tg.push(Incoming::text(USER, USER, "").document("a.pdf", "application/pdf", vec![1, 2, 3]));
    tg.push(Incoming::text(USER, USER, "").voice(b"OggS-voice".to_vec()));
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    let events = sink.wait_for_events(4, PATIENCE).await;
    running.stop().await;
    // Nothing is downloaded before the daemon knows who sent it.
    assert!(tg.requests_of("getFile").is_empty(), "{:?}", tg.requests());
    assert!(tg.requests_of("file").is_empty(), "{:?}", tg.requests());
    let attachments: Vec<_> = events
        .iter()
        .map(|e| match &e.kind {
            InboundKind::Message { attachments, .. } => attachments[0].clone(),
            other => panic!("not a message: {other:?}"),
        })
        .collect();
    assert_eq!(events[0].text(), Some("look"));
    assert_eq!(attachments[0].kind, AttachmentKind::Image);
    assert_eq!(attachments[0].mime, "image/jpeg");
    assert_eq!(attachments[0].size, Some(200), "not the largest size");
    assert!(
        attachments
            .iter()
            .all(|a| a.data_base64.is_none() && a.source.is_some())
    );
    assert_eq!(attachments[1].kind, AttachmentKind::Document);
    assert_eq!(attachments[1].name.as_deref(), Some("notes.md"));
    assert_eq!(attachments[2].mime, "application/pdf");
    assert_eq!(attachments[3].kind, AttachmentKind::Voice);
    assert_eq!(attachments[3].mime, "audio/ogg");

    let fetch = |i: usize, limit: u64| channel.fetch_attachment(&attachments[i], limit);
    assert_eq!(fetch(0, 1 << 20).await.expect("photo"), photo);
    assert_eq!(
        fetch(1, 1 << 20).await.expect("notes"),
        b"# Notes\nbuy milk"
    );
    assert_eq!(fetch(3, 1 << 20).await.expect("voice"), b"OggS-voice");
    let refused = fetch(0, 100).await.expect_err("over the limit");
    assert_eq!(refused.kind, ErrorKind::Rejected, "{refused}");
    assert!(refused.message.contains("larger than"), "{refused}");
}

#[tokio::test]
async fn a_file_whose_size_telegram_does_not_declare_is_cut_off_at_the_limit() {
    let (tg, channel) = setup().await;
    tg.push(Incoming::text(USER, USER, "big").photo(vec![7u8; 300_000]));
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    let events = sink.wait_for_events(1, PATIENCE).await;
    running.stop().await;
    let InboundKind::Message { attachments, .. } = &events[0].kind else {
        panic!("not a message");
    };
    // A lying or silent platform: no declared size anywhere, so only the stream is counted.
    let mut undeclared = attachments[0].clone();
    undeclared.size = None;
    tg.hide_file_sizes();
    let refused = channel
        .fetch_attachment(&undeclared, 1000)
        .await
        .expect_err("over the limit");
    assert_eq!(refused.kind, ErrorKind::Rejected, "{refused}");
    assert_eq!(tg.requests_of("file").len(), 1, "the download was tried");
}

#[tokio::test]
async fn edits_and_presses_arrive_as_their_kinds() {
    let (tg, channel) = setup().await;
    tg.push(Incoming::text(USER, USER, "fixed text").edit_of(3));
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    let events = sink.wait_for_events(1, PATIENCE).await;
    running.stop().await;
    assert_eq!(
        events[0].kind,
        InboundKind::Edit {
            message_id: "3".into(),
            text: "fixed text".into()
        }
    );
}

#[tokio::test]
async fn entity_rejection_falls_back_to_plain_text() {
    let (tg, channel) = setup().await;
    tg.fail_next_with(
        "sendMessage",
        400,
        "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 9",
    );
    channel
        .send(&OutboundMessage::text(private(), "**bold** and <x>"))
        .await
        .expect("sent as plain text");
    let shown = tg.messages(USER);
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].text, "**bold** and <x>");
    assert_eq!(shown[0].parse_mode, None);
    // Normally it is HTML.
    channel
        .send(&OutboundMessage::text(private(), "**bold** and <x>"))
        .await
        .expect("sent");
    let shown = tg.messages(USER);
    assert_eq!(shown[1].raw, "<b>bold</b> and &lt;x&gt;");
    assert_eq!(shown[1].text, "bold and <x>");
}

#[tokio::test]
async fn a_long_reply_is_split_within_4096_utf16_units_with_fences_intact() {
    let (tg, channel) = setup().await;
    let mut text = String::from("Here is the program 🦀:\n\n```rust\n");
    let mut n = 0;
    while text.chars().count() < 6000 {
        n += 1;
        text.push_str(&format!("let v{n} = \"😀 a < b && c\";\n"));
    }
    text.push_str("```\n\nThat is **all**.");
    assert!(text.encode_utf16().count() > 6000);
    // The daemon plans the split; the adapter sends one message per part.
    let reply = OutboundMessage::text(private(), &text);
    for part in hearth_channel::plan(&reply, &channel.capabilities()) {
        channel.send(&part.message(&reply)).await.expect("send");
    }
    let shown = tg.messages(USER);
    assert_eq!(shown.len(), 2, "{shown:#?}");
    for part in &shown {
        assert!(part.text.encode_utf16().count() <= 4096);
        assert_eq!(part.parse_mode.as_deref(), Some("HTML"));
        assert!(part.raw.contains("<pre><code class=\"language-rust\">"));
        assert_eq!(
            part.raw.matches("<pre>").count(),
            part.raw.matches("</pre>").count()
        );
    }
    let all: String = shown
        .iter()
        .map(|m| m.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for k in 1..=n {
        assert!(all.contains(&format!("let v{k} = ")), "line {k} lost");
    }
    assert!(shown[1].text.ends_with("That is all."));
}

#[tokio::test]
async fn one_send_is_one_message_and_over_long_text_is_refused_not_split() {
    let (tg, channel) = setup().await;
    let long = "word ".repeat(1_000); // 5,000 units
    let error = channel
        .send(&OutboundMessage::text(private(), &long))
        .await
        .expect_err("over the limit");
    assert_eq!(error.kind, ErrorKind::Rejected);
    assert!(error.message.contains("4096"), "{error}");
    assert!(tg.messages(USER).is_empty(), "nothing was shown");
    assert!(tg.requests_of("sendMessage").is_empty(), "nothing was sent");

    // A part whose HTML would show more than 4096 units (rules render as ten characters)
    // goes out as its Markdown, which the plan measured.
    let rules = vec!["---"; 1000].join("\n");
    channel
        .send(&OutboundMessage::text(private(), &rules))
        .await
        .expect("sent as plain text");
    let shown = tg.messages(USER);
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].parse_mode, None);
    assert_eq!(shown[0].text, rules);
}

#[tokio::test]
async fn a_429_storm_is_reported_with_retry_after_until_it_passes() {
    let (tg, channel) = setup().await;
    for _ in 0..3 {
        tg.fail_next("sendMessage", 429, Some(7));
    }
    let message = OutboundMessage::text(private(), "eventually");
    let mut attempts = 0;
    loop {
        attempts += 1;
        match channel.send(&message).await {
            Ok(_) => break,
            Err(e) => {
                assert_eq!(e.retry_after(), Some(Duration::from_secs(7)), "{e}");
                assert!(e.is_temporary());
            }
        }
        assert!(attempts < 10);
    }
    assert_eq!(attempts, 4);
    let shown = tg.messages(USER);
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].text, "eventually");
}

#[tokio::test]
async fn blocked_and_bad_requests_are_rejected() {
    let (tg, channel) = setup().await;
    tg.fail_next("sendMessage", 403, None);
    let e = channel
        .send(&OutboundMessage::text(private(), "hi"))
        .await
        .expect_err("blocked");
    assert_eq!(e.kind, ErrorKind::Rejected);
    assert!(e.message.contains("blocked by the user"), "{e}");
    tg.fail_next("sendMessage", 500, None);
    let e = channel
        .send(&OutboundMessage::text(private(), "hi"))
        .await
        .expect_err("server error");
    assert_eq!(e.kind, ErrorKind::Transient);
}

#[tokio::test]
async fn a_refused_token_at_start_is_an_auth_error() {
    let (tg, channel) = setup().await;
    tg.set_token_valid(false);
    let running = start(&channel, &RecordingSink::new(), &MemoryState::new());
    let status = running.status.clone();
    let error = running
        .returned(PATIENCE)
        .await
        .expect("run returns")
        .expect_err("run fails");
    assert_eq!(error.kind, ErrorKind::Auth);
    assert!(
        matches!(status.current(), ChannelStatus::Failed { ref reason } if reason.contains("401") || reason.to_lowercase().contains("unauthorized")),
        "{:?}",
        status.current()
    );
    assert!(
        !format!("{error} {error:?}").contains("SECRET"),
        "{error:?}"
    );
    assert!(tg.requests_of("getUpdates").is_empty());
}

#[tokio::test]
async fn a_failing_poll_reports_reconnecting_until_it_recovers() {
    let (tg, channel) = setup().await;
    // Three failed polls in a row, then Telegram answers again.
    for _ in 0..3 {
        tg.fail_next("getUpdates", 502, None);
    }
    let running = start(&channel, &RecordingSink::new(), &MemoryState::new());
    let status = running
        .wait_for_status(
            |s| matches!(s, ChannelStatus::Reconnecting { .. }),
            PATIENCE,
        )
        .await;
    assert!(
        status
            .reason()
            .is_some_and(|r| r.contains("502") || r.to_lowercase().contains("bad gateway")),
        "{status:?}"
    );
    let status = running
        .wait_for_status(|s| *s == ChannelStatus::Connected, PATIENCE)
        .await;
    assert_eq!(status, ChannelStatus::Connected);
    running.stop().await;
}

#[tokio::test]
async fn buttons_press_answer_and_decision_edit() {
    let (tg, channel) = setup().await;
    let mut prompt = OutboundMessage::text(private(), "Delete all notes?");
    prompt.buttons = vec![
        Button::new("✅ Approve", "c:abc:yes"),
        Button::new("❌ Deny", "c:abc:no"),
    ];
    let sent = channel.send(&prompt).await.expect("send");
    let shown = tg.messages(USER);
    assert_eq!(
        shown[0].buttons,
        vec![vec![
            ("✅ Approve".to_owned(), "c:abc:yes".to_owned()),
            ("❌ Deny".to_owned(), "c:abc:no".to_owned())
        ]]
    );
    let id: i64 = sent.message_id.parse().expect("numeric");
    let query = tg.press(USER, USER, id, "c:abc:yes");

    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    let events = sink.wait_for_events(1, PATIENCE).await;
    running.stop().await;
    let InboundKind::Press(press) = &events[0].kind else {
        panic!("not a press: {:?}", events[0]);
    };
    assert_eq!(press.press_id, query);
    assert_eq!(press.data, "c:abc:yes");
    assert_eq!(press.message.as_ref(), Some(&sent));
    assert_eq!(events[0].sender.id, USER.to_string());

    channel
        .answer_press(press, Some("Approved"), false)
        .await
        .expect("answer");
    let answered = tg.answered_callbacks();
    assert_eq!(answered[0].id, query);
    assert_eq!(answered[0].text.as_deref(), Some("Approved"));

    let decided = OutboundMessage::text(private(), "Delete all notes? ✅ approved by User 42");
    channel.edit(&sent, &decided).await.expect("edit");
    // The same edit again changes nothing and is fine.
    channel
        .edit(&sent, &decided)
        .await
        .expect("unmodified edit");
    let shown = tg.messages(USER);
    assert!(shown[0].buttons.is_empty(), "keyboard not removed");
    assert_eq!(shown[0].text, "Delete all notes? ✅ approved by User 42");
    assert_eq!(shown[0].edits, 1);
}

#[tokio::test]
async fn previews_are_edited_and_replaced_by_the_final_reply() {
    let (tg, channel) = setup().await;
    let chat = private();
    let draft = channel
        .preview(PreviewUpdate::first(&chat, "Thinking"))
        .await
        .expect("preview")
        .expect("a draft");
    channel
        .preview(PreviewUpdate {
            draft: Some(&draft),
            ..PreviewUpdate::first(&chat, "Thinking about **it**")
        })
        .await
        .expect("preview update");
    let mut reply = OutboundMessage::text(private(), "Final **answer**");
    reply.replaces = Some(draft.clone());
    let last = channel.send(&reply).await.expect("final");
    assert_eq!(last, draft);
    let shown = tg.messages(USER);
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].text, "Final answer");
    assert_eq!(shown[0].edits, 2);
}

#[tokio::test]
async fn sends_to_one_chat_are_paced() {
    let tg = FakeTelegram::start(TOKEN).await;
    let mut settings = settings(&tg);
    settings.pacing = Pacing {
        per_chat_interval: Duration::from_millis(200),
        per_chat_burst: 1,
        global_per_second: 1000,
    };
    let channel = TelegramChannel::new(settings).expect("valid");
    for n in 0..5 {
        channel
            .send(&OutboundMessage::text(private(), format!("m{n}")))
            .await
            .expect("send");
    }
    let at: Vec<_> = tg.requests_of("sendMessage").iter().map(|r| r.at).collect();
    // A lower bound only: a slow machine makes the gaps longer, never shorter.
    for pair in at.windows(2) {
        let gap = pair[1].duration_since(pair[0]);
        assert!(gap >= Duration::from_millis(150), "sends {gap:?} apart");
    }
}

#[tokio::test]
async fn webhook_mode_checks_the_secret_and_acknowledges_only_stored_updates() {
    let tg = FakeTelegram::start(TOKEN).await;
    let listen = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        probe.local_addr().expect("addr")
    };
    let mut settings = settings(&tg);
    settings.mode = Mode::Webhook {
        listen,
        url: "https://hearth.example.org/telegram".into(),
        secret_token: hearth_channel::Secret::new("hook_secret-1"),
    };
    let channel = Arc::new(TelegramChannel::new(settings).expect("valid"));
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &MemoryState::new());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tg.webhook().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "setWebhook never called"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(tg.webhook().expect("set")["secret_token"], "hook_secret-1");
    let update = serde_json::json!({
        "update_id": 9001,
        "message": {"message_id": 1, "date": 0, "text": "via webhook",
            "chat": {"id": USER, "type": "private"}, "from": {"id": USER, "is_bot": false, "first_name": "U"}},
    });
    let http = reqwest::Client::new();
    let url = format!("http://{listen}/telegram");
    let post = |secret: Option<&'static str>| {
        let mut request = http.post(&url).json(&update);
        if let Some(secret) = secret {
            request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
        }
        request.send()
    };
    // The listener may need a moment after setWebhook.
    let status = post(None).await.expect("reachable").status();
    assert_eq!(status, 401);
    assert_eq!(post(Some("wrong")).await.expect("reachable").status(), 401);
    sink.fail_next(1);
    assert_eq!(
        post(Some("hook_secret-1"))
            .await
            .expect("reachable")
            .status(),
        500
    );
    assert_eq!(
        post(Some("hook_secret-1"))
            .await
            .expect("reachable")
            .status(),
        200
    );
    running.stop().await;
    assert_eq!(sink.texts(), ["via webhook"]);
    assert_eq!(sink.events()[0].platform_id, "9001");
}

/// A message update whose `date` is a number no JSON decoder of 64-bit numbers accepts:
/// syntactically fine, so it splits off from its batch, but undecodable on its own.
const POISON: &str = r#"{"message":{"message_id":99,"date":1e400,"text":"never",
    "chat":{"id":42,"type":"private"},"from":{"id":42,"is_bot":false,"first_name":"U"}}}"#;

#[tokio::test]
async fn one_undecodable_update_does_not_hold_up_its_batch() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let (tg, channel) = setup().await;
    // One batch: a good text, a text with a lone UTF-16 surrogate (which serde_json refuses
    // as a string), an update nothing decodes, and another good text.
    tg.push_text(USER, USER, "first");
    let broken = tg.push_raw_text(USER, USER, r#""broken \ud800 text""#);
    let poison = tg.push_raw_update(POISON);
    let last = tg.push_text(USER, USER, "last");
    let state = MemoryState::new();
    let sink = RecordingSink::new();
    let running = start(&channel, &sink, &state);
    sink.wait_text("last", PATIENCE).await;
    // The next poll confirms the whole batch at Telegram.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tg.confirmed_offset() <= last {
        assert!(
            tokio::time::Instant::now() < deadline,
            "batch never confirmed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.stop().await;

    assert_eq!(sink.texts(), ["first", "broken \u{fffd} text", "last"]);
    assert_eq!(sink.events()[1].platform_id, broken.to_string());
    assert_eq!(tg.pending_updates(), 0);
    assert_eq!(
        state.get("telegram", "offset"),
        Some((last + 1).to_string())
    );
    let logs =
        String::from_utf8_lossy(&logs.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
    let skipped = logs
        .lines()
        .find(|l| l.contains("cannot be decoded; skipped"))
        .unwrap_or_else(|| panic!("no line about the skipped update:\n{logs}"));
    assert!(
        skipped.contains(&format!("update_id={poison}")),
        "{skipped}"
    );
    assert!(skipped.contains("WARN"), "{skipped}");
    assert!(
        logs.lines()
            .any(|l| l.contains("lone UTF-16 surrogate")
                && l.contains(&format!("update_id={broken}"))),
        "{logs}"
    );
}

#[tokio::test]
async fn a_refusing_inbox_is_retried_with_a_growing_wait_until_it_stores() {
    let (tg, channel) = setup().await;
    let state = MemoryState::new();
    let sink = RecordingSink::new();
    sink.fail_next(usize::MAX);
    let id = tg.push_text(USER, USER, "wait for space");
    let running = start(&channel, &sink, &state);
    // Refused attempts come 250 ms, 500 ms, 1 s … apart: four take about 1.75 s, where a
    // fixed 250 ms would have made about eight.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while sink.refused() < 4 {
        assert!(tokio::time::Instant::now() < deadline, "not retried");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let refused = sink.refused();
    assert!(refused <= 6, "{refused} refusals: the wait does not grow");
    assert_eq!(tg.confirmed_offset(), 0, "nothing confirmed while refused");
    assert_eq!(state.get("telegram", "offset"), None);

    // Space is back: the update is stored once and confirmed.
    sink.fail_next(0);
    sink.wait_text("wait for space", PATIENCE).await;
    running.stop().await;
    assert_eq!(sink.events().len(), 1);
    assert_eq!(state.get("telegram", "offset"), Some((id + 1).to_string()));
}

/// A log writer that keeps everything in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_token_appears_in_no_error_and_no_log_line() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let (tg, channel) = setup().await;
    let mut errors: Vec<ChannelError> = Vec::new();
    // Network failure: nothing listens on the port any more.
    let dead = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        probe.local_addr().expect("addr")
    };
    let offline =
        TelegramChannel::new(TelegramSettings::new(TOKEN).with_api_url(format!("http://{dead}")))
            .expect("valid");
    errors.push(
        offline
            .send(&OutboundMessage::text(private(), "x"))
            .await
            .expect_err("offline"),
    );
    for (status, retry) in [(429, Some(3)), (403, None), (500, None), (400, None)] {
        tg.fail_next("sendMessage", status, retry);
        errors.push(
            channel
                .send(&OutboundMessage::text(private(), "x"))
                .await
                .expect_err("failure"),
        );
    }
    // Failures inside the receive loop are logged.
    tg.fail_next("getUpdates", 502, None);
    tg.fail_next_with("sendMessage", 400, "Bad Request: can't parse entities: x");
    channel
        .send(&OutboundMessage::text(private(), "**fallback**"))
        .await
        .expect("plain fallback");
    let sink = RecordingSink::new();
    sink.fail_next(1);
    tg.push_text(USER, USER, "logged");
    let running = start(&channel, &sink, &MemoryState::new());
    sink.wait_text("logged", PATIENCE).await;
    running.stop().await;
    tg.set_token_valid(false);
    let running = start(&channel, &RecordingSink::new(), &MemoryState::new());
    let result = running.returned(PATIENCE).await.expect("run returns");
    errors.push(result.expect_err("auth"));

    for error in &errors {
        let mut text = format!("{error} {error:?}");
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            text.push_str(&format!(" {cause} {cause:?}"));
            source = cause.source();
        }
        assert!(!text.contains("SECRET"), "token in an error: {text}");
    }
    let logs =
        String::from_utf8_lossy(&logs.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
    assert!(
        logs.contains("getUpdates failed"),
        "the failures were not logged: {logs}"
    );
    assert!(logs.contains("plain text"), "{logs}");
    assert!(!logs.contains("SECRET"), "token in the logs:\n{logs}");
}
