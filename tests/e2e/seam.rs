//! The channel seam as users of Discord, Matrix and email will meet it, on the in-memory
//! platform shaped like each: the state a channel reports in `/healthz` and for systemd's
//! READY=1, confirmations decided by a reaction or a typed short code (with wrong codes limited),
//! outcomes as follow-ups where prompts cannot be edited, presses acknowledged by the adapter,
//! unverified senders treated as strangers, and an email's reply context handed back on every
//! answer.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hearth::tool::{Risk, ToolInfo, ToolRegistry};
use hearth_channel::{
    Capabilities, ChatRef, Inbound, InboundKind, Login, MemoryChannel, OutboundMessage, Sender,
    SentMessage,
};
use hearth_testkit::telegram::FakeTelegram;
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::support::{
    CHAT, Hearth, TestTool, USER, WAIT, eventually, free_port, general_agent, hearth_command,
    last_tool_result, poll, postgres_url,
};

/// The owner's id on the memory channel.
const OWNER: &str = "9999";
/// Someone else the allowlist lets in.
const FRIEND: &str = "2002";

/// A hearth on a memory channel with these capabilities, the `wipe` tool, an owner and a
/// second allowed user.
async fn hearth(caps: Capabilities, runs: &Arc<AtomicUsize>) -> Hearth {
    let runs = runs.clone();
    let mut h = Hearth::new().await.with_agents(&general_agent("tools = [\"wipe\"]")).with_tools(move || {
        let mut registry = ToolRegistry::with_builtin();
        let schema = json!({"type": "object", "properties": {"what": {"type": "string"}}, "required": ["what"]});
        let info =
            ToolInfo::new("wipe", "files", "Delete something", schema).risk(Risk::Destructive);
        let runs = runs.clone();
        // `wipe` deletes things (so it asks first) and counts its runs.
        let wipe = TestTool::answering(info, move |args| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(format!("wiped {}", args["what"].as_str().unwrap_or("?")))
        });
        registry.register(wipe).expect("register");
        registry
    });
    h.channel = Arc::new(MemoryChannel::new("memory").with_capabilities(caps));
    h.config.daemon.owner = Some(format!("memory:{OWNER}").into());
    h
}

/// Starts hearth and lets [`FRIEND`] in as well.
async fn start(h: &mut Hearth) {
    h.start().await;
    h.allow(FRIEND).await;
}

/// Email-like: no buttons, no edits, no reactions.
fn text_only() -> Capabilities {
    Capabilities::default()
}

/// Matrix-like: buttons shown as reactions, edits, reactions.
fn reacting() -> Capabilities {
    Capabilities {
        edits: true,
        reactions: true,
        threads: true,
        buttons_as_reactions: true,
        ..Capabilities::default()
    }
}

/// Makes the fake model call `wipe`, sends the message that triggers it and returns the prompt.
async fn ask(h: &Hearth) -> SentMessage {
    ask_with(h, |chat, text| {
        h.channel.push_text(&chat.chat_id, USER, text);
    })
    .await
}

async fn ask_with(h: &Hearth, push: impl FnOnce(&ChatRef, &str)) -> SentMessage {
    h.llm
        .push(Reply::call("c1", "wipe", r#"{"what":"old logs"}"#));
    let before = h.channel.sent().len();
    push(&ChatRef::new(CHAT), "please wipe the old logs");
    let sent = h.channel.wait_for_sent(before + 1, WAIT).await;
    let prompt = sent
        .get(before)
        .cloned()
        .unwrap_or_else(|| panic!("no prompt; sent: {sent:?}"));
    assert!(
        prompt.text.contains("wants to run `wipe`"),
        "{}",
        prompt.text
    );
    prompt
}

/// The code a prompt asks to type: the word after `APPROVE`.
fn code_in(prompt: &SentMessage) -> String {
    let words: Vec<&str> = prompt.text.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "APPROVE")
        .unwrap_or_else(|| panic!("no APPROVE in {:?}", prompt.text));
    words[at + 1]
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

fn tool_result(h: &Hearth) -> String {
    last_tool_result(&h.llm.last_request().expect("request"))
}

async fn healthz(h: &Hearth) -> (u16, Value) {
    let addr = h.daemon().http_addr().expect("http");
    let response = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .expect("get /healthz");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"))
}

/// Pushes a text and waits until the inbox entry it made is handled; returns the messages sent
/// since.
async fn say_and_settle(h: &Hearth, sender: &Sender, text: &str) -> Vec<SentMessage> {
    let before = h.channel.sent().len();
    let id = h.channel.push_text_in(&ChatRef::new(CHAT), sender, text);
    eventually("the message to be handled", async || {
        h.channel.acknowledged().contains(&id)
    })
    .await;
    crate::support::settle(h).await;
    // Replies are delivered right after; give the worker a moment.
    tokio::time::sleep(Duration::from_millis(150)).await;
    h.channel.sent()[before..].to_vec()
}

/// How many confirmations wait for a decision.
async fn pending(h: &Hearth) -> i64 {
    h.daemon()
        .store()
        .pending_confirmations()
        .await
        .expect("count")
}

/// `text` from `sender` gets no answer, runs nothing and leaves the one request waiting.
async fn decides_nothing(h: &Hearth, runs: &AtomicUsize, sender: &Sender, text: &str) {
    let answer = say_and_settle(h, sender, text).await;
    assert!(answer.is_empty(), "{sender:?} was answered: {answer:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(pending(h).await, 1);
}

// ----- item 2: the state a channel reports -----

#[tokio::test]
async fn a_refused_login_shows_failed_with_the_reason_in_healthz() {
    let mut h = Hearth::new().await;
    h.channel = Arc::new(
        MemoryChannel::new("memory")
            .with_login(Login::Refuse("401 Unauthorized: token revoked".into())),
    );
    h.start().await;
    // READY=1 may go out: the channel's fate is known.
    tokio::time::timeout(WAIT, h.daemon().channels_settled())
        .await
        .expect("a refused channel counts as settled");
    let (status, health) = healthz(&h).await;
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["channels"]["memory"]["state"], "failed");
    assert_eq!(
        health["channels"]["memory"]["error"],
        "401 Unauthorized: token revoked"
    );
    assert!(h.daemon().status_line().contains("memory failed"));
    h.stop().await;
}

#[tokio::test]
async fn a_slow_login_shows_connecting_until_the_platform_accepts_it() {
    let mut h = Hearth::new().await;
    h.channel = Arc::new(MemoryChannel::new("memory").with_login(Login::Hold));
    h.start().await;
    let (status, health) = healthz(&h).await;
    assert_eq!(status, 200, "connecting is not a failure yet: {health}");
    assert_eq!(health["channels"]["memory"]["state"], "connecting");
    // Nobody can reach hearth through it: degraded at once, unhealthy after the grace.
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["never_connected"], serde_json::json!(["memory"]));
    h.daemon()
        .health()
        .started_ago(hearth::health::FIRST_CONNECT_GRACE);
    let (status, health) = healthz(&h).await;
    assert_eq!(status, 503, "never connected after the grace: {health}");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), h.daemon().channels_settled())
            .await
            .is_err(),
        "READY=1 would go out before the channel is connected"
    );
    // The channel's own directory exists before it runs.
    assert!(
        h.config
            .daemon
            .data_dir
            .join("channels")
            .join("memory")
            .is_dir()
    );

    h.channel.set_login(Login::Accept);
    tokio::time::timeout(WAIT, h.daemon().channels_settled())
        .await
        .expect("settles once connected");
    eventually("the channel to show connected", async || {
        healthz(&h).await.1["channels"]["memory"]["state"] == "connected"
    })
    .await;
    let (status, health) = healthz(&h).await;
    assert_eq!(
        (status, health["status"].as_str()),
        (200, Some("ok")),
        "{health}"
    );
    assert!(
        !h.say("hello").await.text.is_empty(),
        "no answer once connected"
    );
    h.stop().await;
}

#[tokio::test]
async fn ready_is_sent_only_once_telegram_accepted_the_token() {
    crate::support::rustls();
    let dir = tempfile::tempdir().expect("temp dir");
    let llm = FakeOpenAi::start().await;
    let tg = FakeTelegram::start("123456:TOKEN").await;
    tg.hold("getMe");
    let port = free_port();
    std::fs::write(
        dir.path().join("hearth.toml"),
        format!(
            r#"
[daemon]
http_listen = "127.0.0.1:{port}"
shutdown_grace_secs = 1

[[providers]]
name = "fake"
kind = "openai"
base_url = "{llm}"
model = "fake-model"

[channels.telegram]
token_env = "TG_TOKEN"
api_url = "{tg}"
allowed_users = [42]
"#,
            llm = llm.base_url(),
            tg = tg.api_url(),
        ),
    )
    .expect("config");
    let socket_path = dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).expect("bind notify socket");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let notify_socket = socket_path.display().to_string();
    let mut child = hearth_command(
        dir.path(),
        &["run"],
        &[
            ("TG_TOKEN", "123456:TOKEN"),
            ("NOTIFY_SOCKET", &notify_socket),
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("hearth run starts");

    // While getMe hangs, /healthz answers "connecting" and systemd hears no READY=1.
    let url = format!("http://127.0.0.1:{port}/healthz");
    let seen_connecting = poll(WAIT, async || {
        let health = reqwest::get(&url).await.ok()?.json::<Value>().await.ok()?;
        (health["channels"]["telegram"]["state"] == "connecting").then_some(())
    })
    .await
    .is_some();
    let (early, socket) = tokio::task::spawn_blocking(move || {
        let mut messages = Vec::new();
        let mut buf = [0u8; 1024];
        let until = std::time::Instant::now() + Duration::from_millis(800);
        while std::time::Instant::now() < until {
            if let Ok(n) = socket.recv(&mut buf) {
                messages.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
        (messages, socket)
    })
    .await
    .expect("join");
    tg.release("getMe");
    let late = tokio::task::spawn_blocking(move || {
        let mut buf = [0u8; 1024];
        let until = std::time::Instant::now() + WAIT;
        while std::time::Instant::now() < until {
            if let Ok(n) = socket.recv(&mut buf) {
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                if message.starts_with("READY=1") {
                    return Some(message);
                }
            }
        }
        None
    })
    .await
    .expect("join");
    let stop = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(stop.success());
    let status = tokio::task::spawn_blocking(move || child.wait().expect("wait"))
        .await
        .expect("join");

    assert!(seen_connecting, "/healthz never showed telegram connecting");
    assert!(
        !early.iter().any(|m| m.starts_with("READY=1")),
        "READY=1 before Telegram accepted the token: {early:?}"
    );
    let ready = late.expect("READY=1 once getMe answered");
    assert!(ready.contains("telegram connected"), "{ready}");
    assert_eq!(status.code(), Some(0));
}

// ----- item 3: confirmations on every kind of platform -----

#[tokio::test]
async fn a_reaction_by_the_requester_decides_and_others_do_nothing() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(reacting(), &runs).await;
    start(&mut h).await;
    let prompt = ask(&h).await;
    let emoji: Vec<Option<&str>> = prompt.buttons.iter().map(|b| b.emoji.as_deref()).collect();
    assert_eq!(emoji, [Some("✅"), Some("❌")], "buttons carry their emoji");
    assert!(
        prompt.text.contains("React ✅ to approve"),
        "{}",
        prompt.text
    );

    // Someone else's reaction, and an unrelated emoji by the requester, do nothing.
    h.channel.push_reaction(&prompt.reference(), FRIEND, "✅");
    h.channel.push_reaction(&prompt.reference(), USER, "👍");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(h.channel.sent().len(), 1, "nobody was answered");

    // The requester's ✅ (with a variation selector, as some clients send it) approves.
    h.llm.push(Reply::text("Done, the old logs are gone."));
    h.channel
        .push_reaction(&prompt.reference(), USER, "✅\u{fe0f}");
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "Done, the old logs are gone.");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    eventually("the prompt to show the outcome", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.id == prompt.id && m.text.contains("✅ Approved by") && m.buttons.is_empty())
    })
    .await;

    // A reaction on the decided prompt is harmless.
    h.channel.push_reaction(&prompt.reference(), USER, "❌");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(h.channel.sent().len(), 2);
    assert!(h.channel.answered_presses().is_empty());
    h.stop().await;
}

#[tokio::test]
async fn a_text_only_channel_gets_a_short_code_and_a_follow_up_instead_of_an_edit() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(text_only(), &runs).await;
    start(&mut h).await;
    let prompt = ask(&h).await;
    assert!(prompt.buttons.is_empty());
    let code = code_in(&prompt);
    assert!(
        prompt
            .text
            .contains(&format!("Reply APPROVE {code} or DENY {code} within")),
        "{}",
        prompt.text
    );
    assert_eq!(code.len(), 6, "{code}");
    assert!(
        code.chars()
            .all(|c| "ABCDEFGHJKMNPQRSTUVWXYZ23456789".contains(c)),
        "{code} has look-alike characters"
    );

    // Another allowed user's correct code is not theirs to use.
    let answer = say_and_settle(&h, &Sender::new(FRIEND), &format!("APPROVE {code}")).await;
    assert_eq!(answer.len(), 1, "{answer:?}");
    assert_eq!(answer[0].text, "This request isn't yours to decide.");
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // The requester types it on a phone: lower case, with a full stop.
    h.llm.push(Reply::text("Done, the old logs are gone."));
    h.channel
        .push_text(CHAT, USER, &format!("approve {}.", code.to_lowercase()));
    eventually("the tool to run and the reply to arrive", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.text == "Done, the old logs are gone.")
    })
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(tool_result(&h).contains("wiped old logs"));
    let follow_up = h
        .channel
        .sent()
        .into_iter()
        .find(|m| m.text.starts_with("✅ Approved by"))
        .expect("a follow-up with the outcome");
    assert_eq!(follow_up.text, format!("✅ Approved by {USER}: `wipe`"));
    assert_eq!(follow_up.reply_to.as_deref(), Some(prompt.id.as_str()));
    let unchanged = h
        .channel
        .sent()
        .into_iter()
        .find(|m| m.id == prompt.id)
        .expect("prompt");
    assert!(unchanged.edits.is_empty(), "a text-only prompt was edited");
    h.stop().await;
}

#[tokio::test]
async fn five_wrong_codes_deny_the_waiting_request_and_say_so() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(text_only(), &runs).await;
    start(&mut h).await;
    let prompt = ask(&h).await;
    let code = code_in(&prompt);
    let wrong = if code == "ZZZZZZ" { "YYYYYY" } else { "ZZZZZZ" };

    for left in (1..=4).rev() {
        let answer = say_and_settle(&h, &Sender::new(USER), &format!("APPROVE {wrong}")).await;
        let plural = if left == 1 { "" } else { "s" };
        assert_eq!(
            answer.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
            [format!(
                "That code does not match a request waiting here. After {left} more wrong code{plural} the waiting request is denied."
            )]
        );
    }
    assert_eq!(h.llm.requests().len(), 1, "no wrong code reached the model");

    h.llm.push(Reply::text("I did not wipe anything."));
    h.channel.push_text(CHAT, USER, &format!("deny {wrong}"));
    eventually("the denial and the model's answer", async || {
        let texts: Vec<String> = h.channel.sent().into_iter().map(|m| m.text).collect();
        texts.contains(&"❌ Too many wrong codes: the request to run `wipe` was denied.".into())
            && texts.contains(&"I did not wipe anything.".into())
    })
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(
        tool_result(&h).contains("wrong confirmation codes"),
        "{}",
        tool_result(&h)
    );
    assert_eq!(pending(&h).await, 0, "the request still waits");

    // The right code now finds nothing waiting: it is an ordinary message again.
    h.llm.push(Reply::text("There is nothing waiting."));
    h.say(&format!("APPROVE {code}")).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    h.stop().await;
}

#[tokio::test]
async fn a_code_typed_by_a_stranger_decides_nothing_and_gets_no_answer() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(text_only(), &runs).await;
    start(&mut h).await;
    let prompt = ask(&h).await;
    let code = code_in(&prompt);
    let stranger = Sender::new("31337");
    decides_nothing(&h, &runs, &stranger, &format!("APPROVE {code}")).await;
    h.stop().await;
}

#[tokio::test]
async fn wrong_codes_from_people_who_cannot_decide_use_up_no_tries() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(text_only(), &runs).await;
    start(&mut h).await;
    let prompt = ask(&h).await;
    let code = code_in(&prompt);
    let wrong = if code == "ZZZZZZ" { "YYYYYY" } else { "ZZZZZZ" };
    // Six forged mails claiming the requester, and a stranger's guesses: before, five of them
    // denied the requester's waiting request.
    for _ in 0..6 {
        let forged = say_and_settle(
            &h,
            &Sender::new(USER).unverified(),
            &format!("APPROVE {wrong}"),
        )
        .await;
        assert!(
            forged.is_empty(),
            "a forged sender was answered: {forged:?}"
        );
    }
    for _ in 0..3 {
        say_and_settle(&h, &Sender::new("31337"), &format!("DENY {wrong}")).await;
    }
    assert_eq!(pending(&h).await, 1, "the request still waits");
    assert!(
        !h.channel
            .sent()
            .iter()
            .any(|m| m.text.contains("Too many wrong codes")),
        "{:?}",
        h.channel.sent()
    );
    // The requester's own try still counts, and the right code still decides.
    let answer = say_and_settle(&h, &Sender::new(USER), &format!("APPROVE {wrong}")).await;
    assert!(
        answer[0].text.contains("After 4 more wrong codes"),
        "{answer:?}"
    );
    h.llm.push(Reply::text("Done."));
    h.channel.push_text(CHAT, USER, &format!("APPROVE {code}"));
    eventually("the tool to run", async || runs.load(Ordering::SeqCst) == 1).await;
    h.stop().await;
}

#[tokio::test]
async fn a_requester_revoked_while_the_prompt_waits_can_no_longer_decide() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(text_only(), &runs).await;
    start(&mut h).await;
    let prompt = ask(&h).await;
    let code = code_in(&prompt);
    h.daemon()
        .store()
        .set_identity_status("memory", USER, hearth::store::IdentityStatus::Revoked)
        .await
        .expect("revoke");
    let revoked = Sender::new(USER);
    decides_nothing(&h, &runs, &revoked, &format!("APPROVE {code}")).await;
    // The owner still decides it.
    h.llm.push(Reply::text("Done."));
    h.channel.push_text(CHAT, OWNER, &format!("APPROVE {code}"));
    eventually("the tool to run", async || runs.load(Ordering::SeqCst) == 1).await;
    h.stop().await;
}

#[tokio::test]
async fn an_unverified_sender_is_a_stranger_whatever_identity_it_claims() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(text_only(), &runs).await;
    start(&mut h).await;

    // A forged message claiming to be the owner: no answer, no turn, no pairing code.
    let answer = say_and_settle(&h, &Sender::new(OWNER).unverified(), "/whoami").await;
    assert!(answer.is_empty(), "{answer:?}");
    assert!(h.llm.requests().is_empty());
    let pairings = h
        .daemon()
        .store()
        .pairings_of("memory", OWNER, 0)
        .await
        .expect("pairings");
    assert!(
        pairings.is_empty(),
        "an unverified sender got a pairing code"
    );

    // Nor can it decide the requester's confirmation with the right code.
    let prompt = ask(&h).await;
    let code = code_in(&prompt);
    let unverified = Sender::new(USER).unverified();
    decides_nothing(&h, &runs, &unverified, &format!("APPROVE {code}")).await;

    // The verified requester still can.
    h.llm.push(Reply::text("Done."));
    h.channel.push_text(CHAT, USER, &format!("APPROVE {code}"));
    eventually("the tool to run", async || runs.load(Ordering::SeqCst) == 1).await;
    h.stop().await;
}

#[tokio::test]
async fn an_unverified_press_is_refused() {
    let runs = Arc::new(AtomicUsize::new(0));
    let caps = Capabilities {
        buttons: true,
        edits: true,
        ..Capabilities::default()
    };
    let mut h = hearth(caps, &runs).await;
    start(&mut h).await;
    let prompt = ask(&h).await;
    h.channel.push(Inbound {
        platform_id: "forged-press".into(),
        chat: ChatRef::new(CHAT),
        sender: Sender::new(USER).unverified(),
        kind: InboundKind::Press(hearth_channel::ButtonPress {
            press_id: "q-forged".into(),
            data: prompt.buttons[0].data.clone(),
            message: Some(prompt.reference()),
        }),
        reply_context: None,
        agent: None,
    });
    eventually("the press to be answered", async || {
        !h.channel.answered_presses().is_empty()
    })
    .await;
    assert_eq!(
        h.channel.answered_presses()[0].notice.as_deref(),
        Some("This request isn't yours to decide.")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    h.stop().await;
}

#[tokio::test]
async fn presses_acknowledged_on_receipt_get_their_answer_as_messages() {
    let runs = Arc::new(AtomicUsize::new(0));
    let caps = Capabilities {
        buttons: true,
        edits: true,
        acks_presses_on_receipt: true,
        ..Capabilities::default()
    };
    let mut h = hearth(caps, &runs).await;
    start(&mut h).await;
    let prompt = ask(&h).await;

    // Someone else's press: told in the chat, quoting the prompt, not by answer_press.
    h.channel
        .push_press(&prompt.reference(), FRIEND, &prompt.buttons[0].data);
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "This request isn't yours to decide.");
    assert_eq!(sent[1].reply_to.as_deref(), Some(prompt.id.as_str()));

    h.llm.push(Reply::text("Done."));
    h.channel
        .push_press(&prompt.reference(), USER, &prompt.buttons[0].data);
    eventually("the prompt to show the outcome", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.id == prompt.id && m.text.contains("✅ Approved by"))
    })
    .await;
    eventually("the tool to run", async || runs.load(Ordering::SeqCst) == 1).await;
    assert!(
        h.channel.answered_presses().is_empty(),
        "answer_press was called on a channel that acknowledges presses itself"
    );
    h.stop().await;
}

#[tokio::test]
async fn the_reply_context_comes_back_on_every_answer() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(text_only(), &runs).await;
    start(&mut h).await;
    let context = json!({
        "subject": "Old logs",
        "message_id": "<m1@example.org>",
        "references": ["<m0@example.org>"],
    });
    let with_context = |id: &str, text: &str, context: &Value| Inbound {
        platform_id: id.into(),
        chat: ChatRef::new(CHAT),
        sender: Sender::new(USER),
        kind: InboundKind::Message {
            text: text.into(),
            attachments: Vec::new(),
            message_id: Some(id.into()),
            reply_to: None,
        },
        reply_context: Some(context.clone()),
        agent: None,
    };

    // A plain reply.
    h.llm.push(Reply::text("Hello there."));
    h.channel.push(with_context("mail-1", "hello", &context));
    h.channel.wait_for_sent(1, WAIT).await;

    // A confirmation prompt, the outcome follow-up and the reply after it.
    let prompt = ask_with(&h, |_, text| {
        h.channel.push(with_context("mail-2", text, &context));
    })
    .await;
    let code = code_in(&prompt);
    let decision_context = json!({"subject": "Re: Old logs", "message_id": "<m3@example.org>"});
    h.llm.push(Reply::text("Done, the old logs are gone."));
    h.channel.push(with_context(
        "mail-3",
        &format!("APPROVE {code}\n\n> Reply APPROVE {code} or DENY {code}"),
        &decision_context,
    ));
    eventually("the turn to finish", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.text == "Done, the old logs are gone.")
    })
    .await;

    // The inbox stored it, and every message the adapter was asked to send carries it back.
    let attempts: Vec<OutboundMessage> = h.channel.send_attempts();
    let of = |text: &str| {
        attempts
            .iter()
            .find(|m| m.text.starts_with(text))
            .unwrap_or_else(|| panic!("no {text:?} in {attempts:?}"))
            .reply_context
            .clone()
    };
    assert_eq!(of("Hello there."), Some(context.clone()));
    assert_eq!(of("🔐"), Some(context.clone()), "the prompt");
    assert_eq!(of("✅ Approved by"), Some(context.clone()), "the outcome");
    assert_eq!(
        of("Done, the old logs are gone."),
        Some(context.clone()),
        "the resumed turn's reply answers the original message"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    h.stop().await;
}

/// The new queries (codes, wrong tries, prompts found by their platform message) on PostgreSQL.
#[tokio::test]
async fn codes_and_reactions_work_on_postgres() {
    let Some((url, _server)) = postgres_url("hearth_seam") else {
        return;
    };
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(reacting(), &runs).await;
    h.config.daemon.database_url = Some(url);
    start(&mut h).await;
    let prompt = ask(&h).await;
    let code = code_in(&prompt);
    let wrong = if code == "ZZZZZZ" { "YYYYYY" } else { "ZZZZZZ" };
    let answer = say_and_settle(&h, &Sender::new(USER), &format!("APPROVE {wrong}")).await;
    assert!(
        answer[0].text.starts_with("That code does not match"),
        "{answer:?}"
    );
    h.llm.push(Reply::text("Done."));
    h.channel.push_reaction(&prompt.reference(), USER, "✅");
    eventually("the tool to run", async || runs.load(Ordering::SeqCst) == 1).await;
    eventually("the prompt to show the outcome", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.id == prompt.id && m.text.contains("✅ Approved by"))
    })
    .await;
    h.stop().await;
}
