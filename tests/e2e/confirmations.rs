//! Approve / Deny: approved, denied, expired on the test clock, pressed by the wrong user,
//! pressed twice, decided after a restart, decided by the owner.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::TimeZone;
use hearth::clock::ManualClock;
use hearth::tool::{Risk, ToolInfo, ToolRegistry};
use hearth_channel::{MessageRef, SentMessage};
use hearth_testkit::Reply;
use serde_json::json;

use crate::support::{
    CHAT, Hearth, TestTool, USER, WAIT, eventually, general_agent, last_tool_result,
};

pub(crate) async fn hearth(runs: &Arc<AtomicUsize>, clock: Option<Arc<ManualClock>>) -> Hearth {
    let runs = runs.clone();
    let mut h = Hearth::new().await.with_agents(&general_agent("tools = [\"wipe\"]")).with_tools(move || {
        let mut registry = ToolRegistry::with_builtin();
        let schema = json!({"type": "object", "properties": {"what": {"type": "string"}}, "required": ["what"]});
        let info = ToolInfo::new("wipe", "files", "Delete something", schema).risk(Risk::Destructive);
        let runs = runs.clone();
        // `wipe` deletes things (asks first at the default autonomy) and counts its runs.
        let wipe = TestTool::answering(info, move |args| {
            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
            let what = args["what"].as_str().unwrap_or("?");
            Ok(format!("wiped {what} (run #{n})"))
        });
        registry.register(wipe).expect("register");
        registry
    });
    if let Some(clock) = clock {
        h = h.with_clock(clock);
    }
    h.config.daemon.owner = Some("memory:9999".into());
    h
}

/// Sends the message that makes the fake model call `wipe`, and returns the prompt.
pub(crate) async fn ask(h: &Hearth) -> SentMessage {
    h.llm
        .push(Reply::call("c1", "wipe", r#"{"what":"old logs"}"#));
    let before = h.channel.sent().len();
    h.channel.push_text(CHAT, USER, "please wipe the old logs");
    let sent = h.channel.wait_for_sent(before + 1, WAIT).await;
    let prompt = sent[before].clone();
    assert!(
        prompt.text.contains("wants to run `wipe`"),
        "{}",
        prompt.text
    );
    assert_eq!(prompt.buttons.len(), 2, "Approve and Deny");
    prompt
}

fn data(prompt: &SentMessage, index: usize) -> String {
    prompt.buttons[index].data.clone()
}

fn tool_result(h: &Hearth) -> String {
    last_tool_result(&h.llm.last_request().expect("request"))
}

async fn current_text(h: &Hearth, reference: &MessageRef) -> String {
    h.channel
        .sent()
        .into_iter()
        .find(|m| m.id == reference.message_id)
        .map(|m| m.text)
        .unwrap_or_default()
}

#[tokio::test]
async fn approved_by_button_the_tool_runs_and_the_prompt_shows_it() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(&runs, None).await;
    h.start().await;
    let prompt = ask(&h).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "nothing runs before the decision"
    );
    assert!(
        prompt.buttons[0].data.len() <= 64,
        "fits Telegram's callback data"
    );

    h.llm.push(Reply::text("Done, the old logs are gone."));
    h.channel
        .push_press(&prompt.reference(), USER, &data(&prompt, 0));
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "Done, the old logs are gone.");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(tool_result(&h).contains("wiped old logs"));
    eventually("the prompt to show the outcome", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.id == prompt.id && m.text.contains("✅ Approved by") && m.buttons.is_empty())
    })
    .await;
    let presses = h.channel.answered_presses();
    assert!(
        presses
            .iter()
            .any(|p| p.notice.as_deref() == Some("✅ Approved")),
        "{presses:?}"
    );
    let audit = h.daemon().store().recent_audit(10).await.expect("audit");
    assert!(
        audit.contains(&("wipe".to_string(), "ok".to_string())),
        "{audit:?}"
    );
    assert!(
        audit.contains(&("wipe".to_string(), "asked".to_string())),
        "{audit:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn denied_the_tool_does_not_run_and_the_model_is_told() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(&runs, None).await;
    h.start().await;
    let prompt = ask(&h).await;
    h.llm.push(Reply::text("Alright, I left them."));
    h.channel
        .push_press(&prompt.reference(), USER, &data(&prompt, 1));
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "Alright, I left them.");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(tool_result(&h).contains("denied"), "{}", tool_result(&h));
    eventually("the prompt to say denied", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.id == prompt.id && m.text.contains("❌ Denied"))
    })
    .await;
    h.stop().await;
}

#[tokio::test]
async fn a_press_before_the_platform_confirmed_the_prompt_still_edits_it() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(&runs, None).await;
    h.start().await;
    // The platform shows the prompt at once but answers hearth's send 500 ms later: the press
    // arrives while hearth does not yet know which message the prompt became.
    h.channel.answer_sends_after(Duration::from_millis(500));
    let prompt = ask(&h).await;
    h.llm.push(Reply::text("Alright, I left them."));
    h.channel
        .push_press(&prompt.reference(), USER, &data(&prompt, 1));
    eventually("the prompt to say denied", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.id == prompt.id && m.text.contains("❌ Denied") && m.buttons.is_empty())
    })
    .await;
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "Alright, I left them.");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    h.stop().await;
}

#[tokio::test]
async fn an_unanswered_prompt_expires_and_counts_as_denied() {
    let clock = ManualClock::new(chrono::Utc.with_ymd_and_hms(2026, 11, 21, 9, 0, 0).unwrap());
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(&runs, Some(clock.clone())).await;
    h.start().await;
    let prompt = ask(&h).await;
    h.llm
        .push(Reply::text("Nobody answered, so I did nothing."));
    clock.advance(Duration::from_secs(601));
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "Nobody answered, so I did nothing.");
    assert!(
        tool_result(&h).contains("Nobody approved this call"),
        "{}",
        tool_result(&h)
    );
    eventually("the prompt to say expired", async || {
        h.channel
            .sent()
            .iter()
            .any(|m| m.id == prompt.id && m.text.contains("Expired"))
    })
    .await;

    // A late press changes nothing.
    h.channel
        .push_press(&prompt.reference(), USER, &data(&prompt, 0));
    eventually("the late press to be answered", async || {
        h.channel.answered_presses().len() == 1
    })
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    h.stop().await;
}

#[tokio::test]
async fn only_the_requester_or_the_owner_may_decide_and_a_second_press_does_nothing() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(&runs, None).await;
    h.start().await;
    let prompt = ask(&h).await;

    // A stranger in the same group chat presses Approve.
    h.channel
        .push_press(&prompt.reference(), "5555", &data(&prompt, 0));
    eventually("the stranger to be answered", async || {
        h.channel.answered_presses().len() == 1
    })
    .await;
    let answer = &h.channel.answered_presses()[0];
    assert_eq!(
        answer.notice.as_deref(),
        Some("This request isn't yours to decide.")
    );
    assert!(answer.alert);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(
        current_text(&h, &prompt.reference())
            .await
            .ends_with("minutes?"),
        "the prompt is unchanged"
    );

    // The owner may decide for anyone.
    h.llm.push(Reply::text("Done."));
    h.channel
        .push_press(&prompt.reference(), "9999", &data(&prompt, 0));
    h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // A second press (by the requester) changes nothing.
    h.channel
        .push_press(&prompt.reference(), USER, &data(&prompt, 1));
    eventually("the second press to be answered", async || {
        h.channel.answered_presses().len() == 3
    })
    .await;
    assert_eq!(
        h.channel.answered_presses()[2].notice.as_deref(),
        Some("This request was already decided.")
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(h.channel.sent().len(), 2);
    h.stop().await;
}

#[tokio::test]
async fn a_decision_after_a_restart_resumes_the_turn() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(&runs, None).await;
    h.start().await;
    let prompt = ask(&h).await;
    h.stop().await;

    h.start().await;
    h.llm.push(Reply::text("Wiped after the restart."));
    h.channel
        .push_press(&prompt.reference(), USER, &data(&prompt, 0));
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "Wiped after the restart.");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    h.stop().await;
}

#[tokio::test]
async fn other_messages_go_on_while_a_prompt_waits() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(&runs, None).await;
    h.start().await;
    let prompt = ask(&h).await;
    h.llm.push(Reply::text("It is sunny."));
    assert_eq!(h.say("how is the weather?").await.text, "It is sunny.");
    // The waiting call is not shown in the other turn's history.
    let request = h.llm.last_request().expect("request");
    assert!(!request.to_string().contains("\"tool_calls\""), "{request}");

    h.llm.push(Reply::text("Wiped."));
    h.channel
        .push_press(&prompt.reference(), USER, &data(&prompt, 0));
    let sent = h.channel.wait_for_sent(3, WAIT).await;
    assert_eq!(sent[2].text, "Wiped.");
    h.stop().await;
}

#[tokio::test]
async fn full_autonomy_runs_without_asking() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(&runs, None).await;
    h.config.tools.autonomy = hearth::config::Autonomy::Full;
    h.start().await;
    h.llm.push(Reply::call("c1", "wipe", r#"{"what":"x"}"#));
    h.llm.push(Reply::text("done"));
    assert_eq!(h.say("wipe x").await.text, "done");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    h.stop().await;
}

/// A sender its channel lets only chat (an HTTP token of scope `chat`): the owner's identity,
/// holding less than the owner.
fn chat_only(id: &str) -> hearth_channel::Sender {
    hearth_channel::Sender::new(id).with_authority(hearth_channel::Authority::Chat)
}

#[tokio::test]
async fn a_sender_that_may_only_chat_decides_nothing_by_press_or_id_even_as_the_owner() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(&runs, None).await;
    h.start().await;
    let prompt = ask(&h).await;
    let approve = data(&prompt, 0);

    // The owner's press, from a client that may only chat.
    h.channel.push(hearth_channel::Inbound {
        platform_id: "chat-only-press".into(),
        chat: prompt.chat.clone(),
        sender: chat_only("9999"),
        kind: hearth_channel::InboundKind::Press(hearth_channel::ButtonPress {
            press_id: "q1".into(),
            data: approve.clone(),
            message: Some(prompt.reference()),
        }),
        reply_context: None,
        agent: None,
    });
    eventually("the press to be answered", async || {
        h.channel.answered_presses().len() == 1
    })
    .await;
    let answer = &h.channel.answered_presses()[0];
    assert!(
        answer
            .notice
            .as_deref()
            .is_some_and(|n| n.contains("not decide confirmations")),
        "{answer:?}"
    );

    // The confirmation's id typed in a sentence, from the owner's own chat.
    let id = approve
        .strip_prefix("c:")
        .and_then(|rest| rest.rsplit_once(':'))
        .map(|(id, _)| id.to_string())
        .expect("button data");
    let before = h.channel.sent().len();
    h.channel.push_text_in(
        &hearth_channel::ChatRef::new("owner-dm"),
        &chat_only("9999"),
        &format!("ok: approve {id}"),
    );
    let sent = h.channel.wait_for_sent(before + 1, WAIT).await;
    assert!(
        sent[before].text.contains("not decide confirmations"),
        "{}",
        sent[before].text
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(
        current_text(&h, &prompt.reference())
            .await
            .ends_with("minutes?"),
        "the prompt still waits"
    );

    // The owner with full rights still decides.
    h.llm.push(Reply::text("Done."));
    h.channel.push_press(&prompt.reference(), "9999", &approve);
    eventually("the tool to run", async || runs.load(Ordering::SeqCst) == 1).await;
    h.stop().await;
}

#[tokio::test]
async fn a_code_typed_by_a_sender_that_may_only_chat_is_refused_and_uses_no_tries() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = hearth(&runs, None).await;
    h.channel = Arc::new(
        hearth_channel::MemoryChannel::new("memory").with_capabilities(
            hearth_channel::Capabilities {
                buttons: false,
                edits: true,
                ..hearth_channel::Capabilities::default()
            },
        ),
    );
    h.start().await;
    h.llm
        .push(Reply::call("c1", "wipe", r#"{"what":"old logs"}"#));
    h.channel.push_text(CHAT, USER, "please wipe the old logs");
    let prompt = h.channel.wait_for_sent(1, WAIT).await.remove(0);
    let code = prompt
        .text
        .split("APPROVE ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a code in the prompt")
        .to_string();
    let requester = chat_only(USER);
    let chat = hearth_channel::ChatRef::new(CHAT);
    // The right code, as typed from a client that may only chat, in every form the daemon reads,
    // and more wrong codes than the chat may type: refused each time, said so, no try used.
    let tries = [
        format!("Approve {code} please"),
        format!("> quoted\napprove {code}."),
        "approve AAAAAA".to_string(),
        "approve BBBBBB".to_string(),
        "approve CCCCCC".to_string(),
        "approve DDDDDD".to_string(),
        "approve EEEEEE".to_string(),
        "approve FFFFFF".to_string(),
    ];
    for (n, text) in tries.iter().enumerate() {
        h.channel.push_text_in(&chat, &requester, text);
        let sent = h.channel.wait_for_sent(n + 2, WAIT).await;
        assert!(
            sent[n + 1].text.contains("not decide confirmations"),
            "{text}: {}",
            sent[n + 1].text
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // The requester, typing it with full rights, still decides: the waiting request was neither
    // decided nor denied by the tries above.
    h.llm.push(Reply::text("Wiped."));
    h.channel.push_text(CHAT, USER, &format!("approve {code}"));
    eventually("the tool to run", async || runs.load(Ordering::SeqCst) == 1).await;
    h.stop().await;
}
