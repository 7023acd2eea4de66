//! The real `hearth run` binary against the fake Discord (REST v10 + gateway) and the fake LLM:
//! DMs, the mention rule, pairing codes for strangers, button confirmations, long replies,
//! dropped and zombie connections and a SIGKILL with messages sent in the gap (each answered
//! exactly once), a 429 storm, and 4014 failing the Discord channel while Telegram keeps
//! answering.

use std::time::Duration;

use hearth_testkit::discord::{FakeDiscord, FakeMessage, UserMessage};
use hearth_testkit::telegram::FakeTelegram;
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::Value;

use crate::support::{
    FREE, HearthProcess, TASK_TOOLS, general_agent, last_user_text, llm_sections, process_harness,
};

const TOKEN: &str = "MTIz.SECRET-discord-token-xyz";
const TG_TOKEN: &str = "123456:SECRET-telegram-token-xyz";
const OWNER: u64 = 111_111_111_111_111_111;
const FRIEND: u64 = 111_111_111_111_111_112;
const STRANGER: u64 = 999_999_999_999_999_999;
const DM: u64 = 500_000_000_000_000_001;
const STRANGER_DM: u64 = 500_000_000_000_000_009;
const SERVER: u64 = 600_000_000_000_000_001;
const WAIT: Duration = Duration::from_secs(20);

struct DcHearth {
    process: HearthProcess,
    llm: FakeOpenAi,
    dc: FakeDiscord,
    tg: Option<FakeTelegram>,
}

process_harness!(DcHearth);

impl DcHearth {
    async fn new(extra: &str, with_telegram: bool) -> Self {
        Self::with_stream(extra, with_telegram, false).await
    }

    async fn with_stream(extra: &str, with_telegram: bool, stream: bool) -> Self {
        let process = HearthProcess::new("discord", "SECRET-discord-token")
            .env("DC_TOKEN", TOKEN)
            .env("TG_TOKEN", TG_TOKEN);
        let llm = FakeOpenAi::start().await;
        let dc = FakeDiscord::start(TOKEN).await;
        dc.server_channel(SERVER);
        let tg = if with_telegram {
            Some(FakeTelegram::start(TG_TOKEN).await)
        } else {
            None
        };
        let telegram = tg.as_ref().map_or(String::new(), |tg| {
            format!(
                "[channels.telegram]\ntoken_env = \"TG_TOKEN\"\napi_url = \"{}\"\nallowed_users = [42]\n",
                tg.api_url()
            )
        });
        let config = format!(
            r#"{llm}
[channels.discord]
token_env = "DC_TOKEN"
api_url = "{dc}"
allowed_users = ["{OWNER}", "{FRIEND}"]
{extra}
{telegram}
"#,
            llm = llm_sections(&llm, true, stream, FREE),
            dc = dc.api_url(),
        );
        process.write_config(
            &format!("discord:{OWNER}"),
            &config,
            &general_agent(TASK_TOOLS),
        );
        Self {
            process,
            llm,
            dc,
            tg,
        }
    }

    async fn wait(&self, channel: u64, n: usize) -> Vec<FakeMessage> {
        let messages = self.dc.wait_for_bot_messages(channel, n, WAIT).await;
        assert!(
            messages.len() >= n,
            "expected {n} bot messages in {channel}, got {messages:?}\n{}",
            self.logs()
        );
        messages
    }

    /// The bot's messages in `channel` once nothing new arrived for a moment.
    async fn settled(&self, channel: u64) -> Vec<String> {
        tokio::time::sleep(Duration::from_millis(800)).await;
        self.dc
            .bot_messages(channel)
            .into_iter()
            .map(|m| m.content)
            .collect()
    }
}

fn echo(request: &Value) -> Reply {
    Reply::text(format!("echo: {}", last_user_text(request)))
}

#[tokio::test]
async fn dms_are_answered_servers_need_a_mention_and_strangers_get_a_code() {
    let mut h = DcHearth::new("", false).await;
    h.start().await;
    h.llm.push(Reply::text("Hello **there**."));
    let asked = h.dc.send(UserMessage::new(DM, OWNER, "hi hearth"));
    let replies = h.wait(DM, 1).await;
    assert_eq!(
        replies[0].content, "Hello **there**.",
        "Discord shows Markdown itself"
    );
    assert_eq!(
        replies[0].reply_to,
        Some(asked),
        "the reply quotes the message"
    );
    assert!(h.dc.typing(DM) > 0, "typing was shown while the turn ran");

    h.dc.send(UserMessage::new(
        SERVER,
        OWNER,
        "just chatting, not for the bot",
    ));
    h.dc.send(UserMessage::new(SERVER, STRANGER, "a stranger mentions").mention());
    h.llm.push(Reply::text("You called?"));
    h.dc.send(UserMessage::new(SERVER, FRIEND, "hey bot").mention());
    let server = h.wait(SERVER, 1).await;
    assert_eq!(server[0].content, "You called?");

    h.dc.send(UserMessage::new(STRANGER_DM, STRANGER, "who are you?"));
    let code = h.wait(STRANGER_DM, 1).await;
    assert!(
        code[0].content.contains("pairing code"),
        "{}",
        code[0].content
    );

    assert_eq!(h.settled(SERVER).await, ["You called?"]);
    assert_eq!(
        h.llm.request_count(),
        2,
        "chatter and strangers never reached the model"
    );
    h.stop().await;
}

#[tokio::test]
async fn confirmations_are_buttons_decided_by_the_requester_and_expire() {
    let mut h = DcHearth::new("[tools]\nconfirmation_timeout_secs = 2\n", false).await;
    h.start().await;
    h.llm
        .push(Reply::call("c1", "add_task", r#"{"title": "Old task"}"#));
    h.llm.push(Reply::text("Added."));
    h.dc.send(UserMessage::new(SERVER, OWNER, "add a task").mention());
    h.wait(SERVER, 1).await;
    h.llm
        .push(Reply::call("c2", "delete_task", r#"{"task_id": 1}"#));
    h.dc.send(UserMessage::new(SERVER, FRIEND, "delete task 1").mention());
    let prompt = h.wait(SERVER, 2).await[1].clone();
    assert!(prompt.content.contains("delete_task"), "{}", prompt.content);
    assert_eq!(prompt.buttons.len(), 2, "{:?}", prompt.buttons);
    assert!(prompt.buttons[0].0.contains("Approve") && prompt.buttons[1].0.contains("Deny"));
    let approve = prompt.buttons[0].1.clone();

    // Someone else presses: acknowledged at once, told privately it is not theirs.
    let stranger = h.dc.press(prompt.id, STRANGER, &approve).expect("pressed");
    let private =
        h.dc.wait(WAIT, || {
            h.dc.followups()
                .into_iter()
                .find(|f| f.token == format!("itoken{stranger}"))
        })
        .await
        .unwrap_or_else(|| panic!("the stranger was never answered\n{}", h.logs()));
    assert!(
        private.ephemeral && private.content.contains("isn't yours"),
        "{private:?}"
    );
    assert!(
        h.dc.acknowledged()
            .iter()
            .any(|(id, _)| *id == stranger.to_string()),
        "the press was acknowledged on receipt"
    );

    // The requester approves: the prompt shows who decided, its buttons go away.
    h.llm.push(Reply::text("Deleted."));
    h.dc.press(prompt.id, FRIEND, &approve).expect("pressed");
    let messages = h.wait(SERVER, 3).await;
    assert_eq!(messages[2].content, "Deleted.");
    let edited =
        h.dc.bot_messages(SERVER)
            .into_iter()
            .find(|m| m.id == prompt.id)
            .expect("prompt");
    assert!(edited.content.contains("Approved by"), "{}", edited.content);
    assert!(edited.buttons.is_empty(), "{:?}", edited.buttons);

    // A prompt nobody answers expires and says so.
    h.llm
        .push(Reply::call("c3", "delete_task", r#"{"task_id": 2}"#));
    h.llm.push(Reply::text("Nobody approved, so I left it."));
    h.dc.send(UserMessage::new(SERVER, OWNER, "delete task 2").mention());
    let messages = h.wait(SERVER, 5).await;
    assert_eq!(messages[4].content, "Nobody approved, so I left it.");
    let expired = h.dc.bot_messages(SERVER)[3].clone();
    assert!(expired.content.contains("Expired"), "{}", expired.content);
    assert!(expired.buttons.is_empty());
    assert!(
        !h.dc
            .bot_messages(SERVER)
            .iter()
            .any(|m| m.content.contains("isn't yours")),
        "the refusal was shown to the whole channel"
    );
    h.stop().await;
}

#[tokio::test]
async fn long_replies_are_split_at_2000_characters_without_breaking_code() {
    let mut h = DcHearth::new("", false).await;
    h.start().await;
    let long = format!(
        "{}\n\n```rust\n{}\n```\n\n{}",
        "a ".repeat(900),
        "let x = 1;\n".repeat(150),
        "b ".repeat(500)
    );
    h.llm.push(Reply::text(long));
    h.dc.send(UserMessage::new(DM, OWNER, "write a lot"));
    let parts = h.wait(DM, 3).await;
    for part in &parts {
        let chars = part.content.chars().count();
        assert!(chars <= 2000, "{chars} characters");
        assert_eq!(
            part.content.matches("```").count() % 2,
            0,
            "{}",
            part.content
        );
    }
    assert_eq!(parts.len(), h.settled(DM).await.len());
    h.stop().await;
}

#[tokio::test]
async fn dropped_and_zombie_connections_lose_nothing_and_repeat_nothing() {
    let mut h = DcHearth::new("", false).await;
    h.dc.set_heartbeat(Duration::from_millis(400));
    h.llm.set_responder(echo);
    h.start().await;
    h.dc.send(UserMessage::new(DM, OWNER, "first"));
    h.wait(DM, 1).await;

    h.dc.drop_connection();
    h.dc.send(UserMessage::new(DM, OWNER, "during the drop"));
    h.wait(DM, 2).await;

    h.dc.zombie();
    h.dc.send(UserMessage::new(DM, OWNER, "during the zombie 1"));
    h.dc.send(UserMessage::new(DM, OWNER, "during the zombie 2"));
    h.wait(DM, 4).await;
    h.dc.send(UserMessage::new(DM, OWNER, "after"));
    h.wait(DM, 5).await;
    assert_eq!(
        h.settled(DM).await,
        [
            "echo: first",
            "echo: during the drop",
            "echo: during the zombie 1",
            "echo: during the zombie 2",
            "echo: after"
        ],
        "every message answered exactly once, in order\n{}",
        h.logs()
    );
    let (identifies, _) = h.dc.logins();
    assert!(identifies >= 2, "the zombie was never replaced");
    h.stop().await;
}

#[tokio::test]
async fn a_sigkill_with_messages_sent_while_down_answers_each_exactly_once() {
    let mut h = DcHearth::new("", false).await;
    h.llm
        .set_responder(|request| echo(request).delay(Duration::from_millis(300)));
    h.start().await;
    for i in 1..=3 {
        h.dc.send(UserMessage::new(DM, OWNER, format!("before {i}")));
    }
    h.llm.wait_for_requests(1, WAIT).await;
    h.kill().await;
    for i in 1..=3 {
        h.dc.send(UserMessage::new(DM, OWNER, format!("while down {i}")));
    }
    h.start().await;
    h.wait(DM, 6).await;
    let mut expected: Vec<String> = (1..=3).map(|i| format!("echo: before {i}")).collect();
    expected.extend((1..=3).map(|i| format!("echo: while down {i}")));
    assert_eq!(h.settled(DM).await, expected, "{}", h.logs());
    h.stop().await;
}

#[tokio::test]
async fn a_429_storm_is_delivered_in_full_and_in_order_and_counted() {
    let mut h = DcHearth::new("", false).await;
    h.llm.set_responder(echo);
    h.start().await;
    h.dc.rate_limit_next(4, 0.2);
    for i in 1..=4 {
        h.dc.send(UserMessage::new(DM, OWNER, format!("message {i}")));
    }
    h.wait(DM, 4).await;
    assert_eq!(
        h.settled(DM).await,
        [
            "echo: message 1",
            "echo: message 2",
            "echo: message 3",
            "echo: message 4"
        ]
    );
    assert!(h.dc.rate_limited() >= 4);
    let (_, metrics) = h.get("/metrics").await;
    let line = metrics
        .lines()
        .find(|l| {
            l.starts_with("hearth_channel_events_total{channel=\"discord\",event=\"ratelimited\"}")
        })
        .unwrap_or_else(|| panic!("no rate-limit counter in /metrics:\n{metrics}"));
    let count: u64 = line
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(count >= 1, "{line}");
    h.stop().await;
}

#[tokio::test]
async fn intent_refused_fails_discord_while_telegram_keeps_answering() {
    let mut h = DcHearth::new("", true).await;
    h.dc.close_on_identify(4014);
    h.start_until("failed").await;
    let (status, body) = h.get("/healthz").await;
    assert_eq!(status, 503, "{body}");
    let health: Value = serde_json::from_str(&body).expect("json");
    let reason = health["channels"]["discord"].to_string();
    assert!(reason.contains("Message Content Intent"), "{reason}");
    let tg = h.tg.as_ref().expect("telegram");
    h.llm.push(Reply::text("Still here on Telegram."));
    tg.push_text(42, 42, "are you there?");
    let messages = tg.wait_for_messages(42, 1, WAIT).await;
    assert_eq!(
        messages.first().map(|m| m.text.as_str()),
        Some("Still here on Telegram."),
        "{}",
        h.logs()
    );
    let failures = h
        .logs()
        .lines()
        .filter(|l| l.contains("Message Content Intent"))
        .count();
    assert!(failures >= 1, "the one line was never logged");
    h.stop().await;
}

#[tokio::test]
async fn an_image_reaches_the_model() {
    let mut h = DcHearth::new("", false).await;
    h.start().await;
    h.llm.push(Reply::text("A tiny picture."));
    h.dc.send(UserMessage::new(DM, OWNER, "what is this?").attach(
        "cat.jpg",
        "image/jpeg",
        vec![0xff, 0xd8, 0xff, 0xe0, 1, 2, 3],
    ));
    h.wait(DM, 1).await;
    let request = h.llm.requests()[0].to_string();
    assert!(
        request.contains("data:image/jpeg;base64,/9j/4AECAw=="),
        "{request}"
    );
    assert!(request.contains("what is this?"));
    h.stop().await;
}

#[tokio::test]
async fn a_streamed_reply_is_one_message_edited_in_place() {
    let mut h = DcHearth::with_stream("", false, true).await;
    h.start().await;
    let long = "word ".repeat(400);
    h.llm
        .push(Reply::text(long.trim_end()).delay(Duration::from_millis(1500)));
    h.dc.send(UserMessage::new(DM, OWNER, "tell me a story"));
    let replies = h.wait(DM, 1).await;
    h.wait_for(WAIT, "the preview to become the whole reply", async || {
        let shown = h.dc.bot_messages(DM);
        shown
            .first()
            .is_some_and(|m| m.content == long.trim_end())
            .then_some(())
    })
    .await;
    let shown = h.dc.bot_messages(DM);
    assert_eq!(shown.len(), 1, "the preview became the reply: {shown:?}");
    assert_eq!(replies[0].id, shown[0].id);
    assert!(
        shown[0].edits >= 1,
        "the preview was edited into the reply: {shown:?}"
    );
    h.stop().await;
}

/// After a restart the server channel's history is read with the server rules (Discord's REST
/// messages name no server): the stranger who mentioned hearth meanwhile gets no pairing code
/// in public, the owner's chatter is not answered, the owner's question is answered once, and
/// the DM still catches up.
#[tokio::test]
async fn after_a_restart_the_server_channel_keeps_its_rules() {
    let mut h = DcHearth::new("", false).await;
    h.llm.set_responder(echo);
    h.start().await;
    h.dc.send(UserMessage::new(SERVER, OWNER, "hello bot").mention());
    h.wait(SERVER, 1).await;
    h.dc.send(UserMessage::new(DM, OWNER, "hello in the DM"));
    h.wait(DM, 1).await;
    h.stop().await;

    h.dc.send(UserMessage::new(SERVER, STRANGER, "stranger asks while down").mention());
    h.dc.send(UserMessage::new(
        SERVER,
        OWNER,
        "we should drop the old tasks while down",
    ));
    h.dc.send(UserMessage::new(SERVER, OWNER, "owner asks while down").mention());
    h.dc.send(UserMessage::new(DM, OWNER, "DM while down"));
    h.start().await;
    h.wait(SERVER, 2).await;
    h.wait(DM, 2).await;
    assert_eq!(
        h.settled(SERVER).await,
        ["echo: hello bot", "echo: owner asks while down"],
        "no pairing code, no answer to chatter, one answer to the question\n{}",
        h.logs()
    );
    assert_eq!(
        h.settled(DM).await,
        ["echo: hello in the DM", "echo: DM while down"]
    );
    let asked: String = h.llm.requests().iter().map(Value::to_string).collect();
    assert!(!asked.contains("stranger asks") && !asked.contains("drop the old tasks"));
    h.stop().await;
}

/// Discord's history answers 502 while hearth catches up after a restart: `/healthz` shows the
/// channel degraded, and once the history answers again every message of the gap is answered
/// once, in order.
#[tokio::test]
async fn a_history_that_fails_after_a_restart_is_read_again_and_loses_nothing() {
    let mut h = DcHearth::new("", false).await;
    h.llm.set_responder(echo);
    h.start().await;
    h.dc.send(UserMessage::new(DM, OWNER, "before"));
    h.wait(DM, 1).await;
    h.stop().await;
    for i in 1..=3 {
        h.dc.send(UserMessage::new(DM, OWNER, format!("while down {i}")));
    }
    // Every try of the catch-up after READY meets a 502.
    h.dc.fail_history(4);
    h.start_until("connected").await;
    let degraded = h
        .wait_for(WAIT, "/healthz to show discord degraded", async || {
            let (_, body) = h.get("/healthz").await;
            body.contains("could not be read").then_some(body)
        })
        .await;
    assert!(degraded.contains("reconnecting"), "{degraded}");
    h.wait(DM, 4).await;
    assert_eq!(
        h.settled(DM).await,
        [
            "echo: before",
            "echo: while down 1",
            "echo: while down 2",
            "echo: while down 3"
        ],
        "{}",
        h.logs()
    );
    let (_, health) = h.get("/healthz").await;
    assert!(!health.contains("could not be read"), "{health}");
    h.stop().await;
}

/// A 40-section answer with `---` between the sections: Discord's rendering makes its parts
/// longer than 2,000 characters, and they are sent as written instead of being refused.
#[tokio::test]
async fn a_forty_section_answer_separated_by_rules_arrives_whole() {
    let mut h = DcHearth::new("", false).await;
    h.start().await;
    let sections: Vec<String> = (0..40)
        .map(|i| format!("Section {i}: {}", "word ".repeat(12).trim_end()))
        .collect();
    h.llm.push(Reply::text(sections.join("\n---\n")));
    h.dc.send(UserMessage::new(DM, OWNER, "the long briefing please"));
    h.wait(DM, 2).await;
    let shown = h.settled(DM).await;
    let all = shown.concat();
    for section in &sections {
        assert!(
            all.contains(section.as_str()),
            "{section} is missing\n{}",
            h.logs()
        );
    }
    assert!(shown.iter().all(|m| m.chars().count() <= 2000));
    h.stop().await;
}
