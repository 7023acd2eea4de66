//! The real `hearth run` binary against a real Synapse (started by the test kit) and the fake
//! LLM, with people talking to it over the client-server API: invites (accepted from allowed
//! users, declined from strangers), a DM answered, the mention rule in a room, confirmations by
//! reaction and by reply (someone else's reaction does nothing; expiry says so), a SIGKILL
//! with 60 messages sent while down (a limited sync): every one answered once, in order, and the
//! same conversation in an encrypted DM with the owner on an Element-like matrix-sdk client.

use std::time::Duration;

use hearth_testkit::matrix::{Human, Registered, SeenMessage, Synapse, unique_name};
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::Value;

use crate::support::{
    FREE, HearthProcess, TASK_TOOLS, general_agent, last_user_text, llm_sections, poll,
    process_harness,
};

const WAIT: Duration = Duration::from_secs(30);
const PASSWORD: &str = "bot-password-SECRET";

struct MxHearth {
    process: HearthProcess,
    llm: FakeOpenAi,
    server: &'static Synapse,
    bot: Registered,
    owner: Human,
    friend: Human,
}

process_harness!(MxHearth);

impl MxHearth {
    async fn new(extra: &str) -> Self {
        let process = HearthProcess::new("matrix", "SECRET")
            .env("MX_PASSWORD", PASSWORD)
            .env("RUST_LOG", "info,hearth_matrix=debug");
        let server = Synapse::shared().unwrap_or_else(|e| panic!("Synapse: {e}"));
        let bot = server
            .register(&unique_name("hearth"), PASSWORD)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let owner = Human::register(server, "owner")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let friend = Human::register(server, "friend")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let llm = FakeOpenAi::start().await;
        // `@OWNER` in the extra configuration (a schedule's target) is the owner's user id.
        let extra = extra.replace("@OWNER", &owner.user.user_id);
        let config = format!(
            r#"{llm}
{extra}

[channels.matrix]
homeserver = "{url}"
user = "{bot}"
password_env = "MX_PASSWORD"
allowed_users = ["{owner}", "{friend}"]
"#,
            owner = owner.user.user_id,
            friend = friend.user.user_id,
            bot = bot.user_id,
            url = server.url(),
            llm = llm_sections(&llm, false, false, FREE),
        );
        process.write_config(
            &format!("matrix:{}", owner.user.user_id),
            &config,
            &general_agent(TASK_TOOLS),
        );
        Self {
            process,
            llm,
            server,
            bot,
            owner,
            friend,
        }
    }

    /// Waits until `user` has the membership `want` in `room`.
    async fn wait_membership(&self, room: &str, user: &str, want: &str) {
        let what = format!("{user} to be {want} in {room}");
        self.wait_for(WAIT, &what, async || {
            let now = self.owner.membership(room, user).await;
            (now.as_deref() == Some(want)).then_some(())
        })
        .await;
    }

    /// A DM between the owner and hearth, accepted by hearth.
    async fn dm(&self) -> String {
        let room = self
            .owner
            .create_room(&[&self.bot.user_id], true, false)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        self.wait_membership(&room, &self.bot.user_id, "join").await;
        room
    }

    /// Hearth's messages in `room`, oldest first.
    async fn bot_messages(&self, room: &str) -> Vec<SeenMessage> {
        self.owner
            .seen(room)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.sender == self.bot.user_id)
            .collect()
    }

    /// Waits until hearth has sent at least `n` messages in `room`.
    async fn wait_bot(&self, room: &str, n: usize) -> Vec<SeenMessage> {
        let what = format!("{n} messages from hearth in {room}");
        self.wait_for(WAIT, &what, async || {
            let messages = self.bot_messages(room).await;
            (messages.len() >= n).then_some(messages)
        })
        .await
    }

    /// Waits until a message of hearth's in `room` satisfies `check`.
    async fn wait_bot_message(
        &self,
        room: &str,
        what: &str,
        check: impl Fn(&SeenMessage) -> bool,
    ) -> SeenMessage {
        let what = format!("{what} shown in {room}");
        self.wait_for(WAIT, &what, async || {
            self.bot_messages(room).await.into_iter().find(|m| check(m))
        })
        .await
    }
}

fn echo(h: &MxHearth) {
    h.llm
        .set_responder(|request| Reply::text(format!("echo: {}", last_user_text(request))));
}

/// `hearth doctor` beside Synapse: before the first start it says hearth is not logged in yet;
/// after it, the saved session is accepted and the cross-signing state read, and the doctor
/// made no device of its own (it never logs in).
// `cli` blocks while hearth asks the fake model server, which runs on this runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reads_the_saved_session_without_logging_in() {
    let mut h = MxHearth::new("").await;
    let out = h.cli(&["doctor"]);
    assert!(
        out.contains("ok   channel matrix: homeserver") && out.contains("not logged in yet"),
        "{out}"
    );
    echo(&h);
    h.start().await;
    let dm = h.dm().await;
    h.owner
        .text(&dm, "hello", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.wait_bot_message(&dm, "the answer", |m| m.text.contains("echo: hello"))
        .await;
    let device = hearth_matrix::saved_device_id(&h.dir.path().join("data/channels/matrix"))
        .expect("a saved session");

    // Beside the running daemon, which keeps answering.
    let out = h.cli(&["doctor"]);
    assert!(
        out.contains(&format!(
            "ok   channel matrix: the saved session is accepted: {}, device {device}",
            h.bot.user_id
        )),
        "{out}"
    );
    assert!(
        out.contains("ok   channel matrix: cross-signing: not set up"),
        "{out}"
    );
    assert!(!out.contains(PASSWORD), "{out}");
    h.owner
        .text(&dm, "still there?", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.wait_bot_message(&dm, "the second answer", |m| {
        m.text.contains("echo: still there?")
    })
    .await;
    h.stop().await;
    assert_eq!(
        hearth_matrix::saved_device_id(&h.dir.path().join("data/channels/matrix")),
        Some(device)
    );
}

/// A schedule whose target is the owner's user id (`matrix:@me:server`, no room id to look up):
/// hearth opens one direct-message room with the owner (encrypted, the owner invited), and
/// every later run goes to that same room, the first ones included although they race with
/// the typing notice and the loop's first sync.
#[tokio::test]
async fn a_schedule_to_a_user_id_opens_one_direct_message_room_and_keeps_using_it() {
    let schedule = "[[schedules]]\nname = \"briefing\"\ncron = \"*/2 * * * * *\"\ntimezone = \"UTC\"\nagent = \"general\"\nprompt = \"Give me my briefing.\"\ntarget = \"matrix:@OWNER\"\n";
    let mut h = MxHearth::new(schedule).await;
    h.llm
        .set_responder(|_| Reply::text("☀️ Good morning: nothing due today."));
    h.start().await;
    // hearth's own view of its rooms (the owner's client would show the invite).
    let bot = Human::new(&h.server.url(), h.bot.clone());
    let bot_messages = |room: String| {
        let bot = &bot;
        async move {
            bot.events(&room, 50)
                .await
                .unwrap_or_default()
                .into_iter()
                .filter(|e| e["sender"] == bot.user.user_id && e["type"] == "m.room.encrypted")
                .count()
        }
    };
    let room = h
        .wait_for(
            WAIT,
            "hearth's direct-message room with a message",
            async || {
                let rooms = bot.joined_rooms().await.ok()?;
                let room = rooms.first()?.clone();
                (bot_messages(room.clone()).await >= 1).then_some(room)
            },
        )
        .await;
    assert_eq!(
        bot.membership(&room, &h.owner.user.user_id)
            .await
            .as_deref(),
        Some("invite")
    );
    h.owner.join(&room).await.unwrap_or_else(|e| panic!("{e}"));
    h.wait_for(
        WAIT,
        "three runs of the schedule in that room",
        async || (bot_messages(room.clone()).await >= 3).then_some(()),
    )
    .await;
    h.stop().await;
    // Every run went to the one room: hearth opened no second one.
    assert_eq!(
        bot.joined_rooms().await.unwrap_or_else(|e| panic!("{e}")),
        vec![room]
    );
}

#[tokio::test]
async fn invites_from_allowed_users_are_accepted_strangers_declined_dms_answered_rooms_need_a_mention()
 {
    let mut h = MxHearth::new("").await;
    echo(&h);
    h.start().await;

    let dm = h.dm().await;
    h.owner
        .text(&dm, "hello **there**", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let reply = h
        .wait_bot_message(&dm, "the DM answer", |m| m.text.contains("echo: hello"))
        .await;
    assert_eq!(reply.msgtype, "m.notice", "bots answer with notices");
    assert!(
        reply.reply_to.is_some(),
        "the answer quotes the message: {reply:?}"
    );

    let stranger = Human::register(h.server, "stranger")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let theirs = stranger
        .create_room(&[&h.bot.user_id], true, false)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.wait_for(WAIT, "a stranger's invite to be declined", async || {
        let now = stranger.membership(&theirs, &h.bot.user_id).await;
        (now.as_deref() == Some("leave")).then_some(())
    })
    .await;

    // A room of three: only what mentions hearth (or replies to it) is answered.
    let room = h
        .owner
        .create_room(&[&h.bot.user_id, &h.friend.user.user_id], false, false)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.friend.join(&room).await.unwrap_or_else(|e| panic!("{e}"));
    h.wait_membership(&room, &h.bot.user_id, "join").await;
    h.owner
        .text(&room, "just chatting with friends", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mention = format!("{} what is the time?", h.bot.user_id);
    h.friend
        .text(&room, &mention, None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let answer = h
        .wait_bot_message(&room, "the answer to the mention", |m| {
            m.text.contains("what is the time")
        })
        .await;
    h.friend
        .reply(&room, &answer.event_id, "and a reply to hearth")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.wait_bot_message(&room, "the answer to the reply", |m| {
        m.text.contains("and a reply to hearth")
    })
    .await;
    let texts: Vec<String> = h.llm.requests().iter().map(last_user_text).collect();
    assert!(
        !texts.iter().any(|t| t.contains("just chatting")),
        "the chatter reached the model: {texts:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_sigkill_then_60_messages_while_down_are_each_answered_once_in_order() {
    let mut h = MxHearth::new("").await;
    echo(&h);
    h.start().await;
    let dm = h.dm().await;
    h.owner
        .text(&dm, "before the crash", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.wait_bot_message(&dm, "the first answer", |m| {
        m.text.contains("before the crash")
    })
    .await;
    let device = hearth_matrix::saved_device_id(&h.dir.path().join("data/channels/matrix"));
    h.kill().await;

    let texts: Vec<String> = (0..60).map(|i| format!("while down {i:02}")).collect();
    for text in &texts {
        h.owner
            .text(&dm, text, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    h.start().await;
    h.wait_bot(&dm, 61).await;
    // Give a duplicate the time to show up.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let messages: Vec<String> = h
        .bot_messages(&dm)
        .await
        .into_iter()
        .map(|m| m.text)
        .filter(|t| t.contains("while down"))
        .collect();
    let expected: Vec<String> = texts.iter().map(|t| format!("echo: {t}")).collect();
    assert_eq!(
        messages,
        expected,
        "answered {} times for 60 messages",
        messages.len()
    );
    if device.is_some() {
        assert_eq!(
            hearth_matrix::saved_device_id(&h.dir.path().join("data/channels/matrix")),
            device,
            "the restart made a new device"
        );
    }
    assert!(
        h.logs().contains("restored the saved session"),
        "the restart did not restore the session"
    );
    h.stop().await;
}

#[tokio::test]
async fn confirmations_by_reaction_and_by_reply_ignore_others_and_expire() {
    let mut h = MxHearth::new("[tools]\nconfirmation_timeout_secs = 4\n").await;
    h.start().await;
    let room = h
        .owner
        .create_room(&[&h.bot.user_id, &h.friend.user.user_id], false, false)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.friend.join(&room).await.unwrap_or_else(|e| panic!("{e}"));
    h.wait_membership(&room, &h.bot.user_id, "join").await;
    let bot = h.bot.user_id.clone();

    h.llm
        .push(Reply::call("c1", "add_task", r#"{"title": "Old task"}"#));
    h.llm.push(Reply::text("Added."));
    h.owner
        .text(&room, &format!("{bot} add a task"), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.wait_bot_message(&room, "Added.", |m| m.text == "Added.")
        .await;

    // The owner asks; the friend's ✅ does nothing; the owner's ✅ approves.
    h.llm
        .push(Reply::call("c2", "delete_task", r#"{"task_id": 1}"#));
    h.llm.push(Reply::text("Deleted."));
    h.owner
        .text(&room, &format!("{bot} delete task 1"), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let prompt = h
        .wait_bot_message(&room, "the prompt with ✅ ❌", |m| {
            m.text.contains("delete_task")
                && ["✅", "❌"]
                    .iter()
                    .all(|e| m.reactions.iter().any(|(s, k)| *s == bot && k == e))
        })
        .await;
    h.friend
        .react(&room, &prompt.event_id, "✅")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !h.bot_messages(&room)
            .await
            .iter()
            .any(|m| m.text == "Deleted."),
        "someone else's reaction decided"
    );
    h.owner
        .react(&room, &prompt.event_id, "✅")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.wait_bot_message(&room, "Deleted.", |m| m.text == "Deleted.")
        .await;
    h.wait_bot_message(&room, "the prompt showing the outcome", |m| {
        m.event_id == prompt.event_id && m.text.contains("Approved")
    })
    .await;

    // A reply "deny" to the next prompt decides it.
    h.llm
        .push(Reply::call("c3", "delete_task", r#"{"task_id": 2}"#));
    h.llm.push(Reply::text("Left it alone."));
    h.owner
        .text(&room, &format!("{bot} delete task 2"), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let second = h
        .wait_bot_message(&room, "the second prompt", |m| {
            m.text.contains("delete_task") && m.event_id != prompt.event_id
        })
        .await;
    h.owner
        .reply(&room, &second.event_id, "deny")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.wait_bot_message(&room, "Left it alone.", |m| m.text == "Left it alone.")
        .await;
    h.wait_bot_message(&room, "the second prompt showing the outcome", |m| {
        m.event_id == second.event_id && m.text.contains("Denied")
    })
    .await;

    // Nobody answers the third: it expires and says so.
    h.llm
        .push(Reply::call("c4", "delete_task", r#"{"task_id": 3}"#));
    h.llm.push(Reply::text("Nobody approved, so I left it."));
    h.owner
        .text(&room, &format!("{bot} delete task 3"), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.wait_bot_message(&room, "the expiry", |m| {
        m.text == "Nobody approved, so I left it."
    })
    .await;
    let third = h
        .bot_messages(&room)
        .await
        .into_iter()
        .find(|m| m.text.contains("delete_task") && m.text.contains("Expired"));
    assert!(
        third.is_some(),
        "the expired prompt does not say so: {:#?}",
        h.bot_messages(&room).await
    );
    h.stop().await;
}

#[tokio::test]
async fn a_streamed_reply_grows_by_edits_of_one_message() {
    let mut h = MxHearth::new("").await;
    h.start().await;
    let dm = h.dm().await;
    // Streaming on: the fake LLM streams the text in small deltas.
    h.stop().await;
    let path = h.dir.path().join("hearth.toml");
    let text = std::fs::read_to_string(&path).expect("config");
    std::fs::write(&path, text.replace("stream = false", "stream = true")).expect("config");
    h.start().await;
    let long = "word ".repeat(400);
    h.llm.push(Reply::text(long.trim_end()));
    h.owner
        .text(&dm, "tell me a long story", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let reply = h
        .wait_bot_message(&dm, "the whole streamed reply", |m| {
            m.text.matches("word").count() == 400
        })
        .await;
    let messages = h.bot_messages(&dm).await;
    assert_eq!(
        messages.len(),
        1,
        "a streamed reply is one message: {messages:#?}"
    );
    assert!(
        reply.edits >= 1,
        "the reply never grew by an edit: {reply:?}"
    );
    h.stop().await;
}

/// The same conversation in an encrypted DM, as Element makes them, with the owner on a
/// matrix-sdk client (which encrypts what it sends and decrypts what it reads): hearth answers
/// and marks the message read, asks before deleting, takes the owner's (encrypted) ✅, and after a SIGKILL comes back as the
/// same device and answers, once, the message sent while it was down.
#[tokio::test]
async fn an_encrypted_dm_answers_takes_a_reaction_and_decrypts_after_a_sigkill_on_the_same_device()
{
    use hearth_matrix::matrix_sdk::config::SyncSettings;
    use hearth_matrix::matrix_sdk::room::MessagesOptions;
    use hearth_matrix::matrix_sdk::ruma::events::reaction::ReactionEventContent;
    use hearth_matrix::matrix_sdk::ruma::events::receipt::{ReceiptThread, ReceiptType};
    use hearth_matrix::matrix_sdk::ruma::events::relation::Annotation;
    use hearth_matrix::matrix_sdk::ruma::events::room::message::RoomMessageEventContent;
    use hearth_matrix::matrix_sdk::ruma::{EventId, RoomId, UserId};
    use hearth_matrix::matrix_sdk::{Client, Room};

    let mut h = MxHearth::new("").await;
    h.start().await;
    let element = Client::builder()
        .homeserver_url(h.server.url())
        .build()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    element
        .matrix_auth()
        .login_username(&h.owner.user.user_id, &h.owner.user.password)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let quick = || SyncSettings::default().timeout(Duration::from_millis(300));
    element
        .sync_once(quick())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let room_id = h
        .owner
        .create_room(&[&h.bot.user_id], true, true)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.wait_membership(&room_id, &h.bot.user_id, "join").await;
    element
        .sync_once(quick())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let room = element
        .get_room(&RoomId::parse(&room_id).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|| panic!("Element has no room"));
    assert!(
        room.latest_encryption_state()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_encrypted(),
        "the DM is not encrypted"
    );

    // hearth's messages as the owner's client decrypts them: (event id, body), oldest first.
    let bot = h.bot.user_id.clone();
    let decrypted = |room: Room| {
        let (element, bot) = (element.clone(), bot.clone());
        async move {
            element
                .sync_once(quick())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let mut options = MessagesOptions::backward();
            options.limit = 100_u32.into();
            let page = room
                .messages(options)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let mut shown: Vec<(String, String)> = page
                .chunk
                .iter()
                .filter_map(|event| {
                    let json: Value = event.raw().deserialize_as().ok()?;
                    (json["sender"] == bot.as_str() && json["type"] == "m.room.message")
                        .then(|| {
                            Some((
                                json["event_id"].as_str()?.to_owned(),
                                json["content"]["body"].as_str()?.to_owned(),
                            ))
                        })
                        .flatten()
                })
                .collect();
            shown.reverse();
            shown
        }
    };
    let wait_for = |what: &'static str, check: fn(&str) -> bool| {
        let (room, decrypted) = (room.clone(), &decrypted);
        async move {
            let found = poll(WAIT, async || {
                let shown = decrypted(room.clone()).await;
                shown
                    .into_iter()
                    .find(|(_, body)| check(body))
                    .map(|(id, _)| id)
            })
            .await;
            found.unwrap_or_else(|| panic!("{what} never decrypted"))
        }
    };
    let say = |text: &'static str| {
        let room = room.clone();
        async move {
            room.send(RoomMessageEventContent::text_plain(text))
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .response
                .event_id
        }
    };

    h.llm.push(Reply::text("Hello, in secret."));
    let hello = say("hello").await;
    wait_for("the answer", |b| b == "Hello, in secret.").await;
    // hearth's read receipt marks the message read.
    let user = UserId::parse(&bot).unwrap_or_else(|e| panic!("{e}"));
    h.wait_for(WAIT, "hearth's read receipt on the message", async || {
        element
            .sync_once(quick())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let read = room
            .load_user_receipt(ReceiptType::Read, ReceiptThread::Unthreaded, &user)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .map(|(event, _)| event);
        (read.as_ref() == Some(&hello)).then_some(())
    })
    .await;

    h.llm
        .push(Reply::call("c1", "add_task", r#"{"title": "Secret task"}"#));
    h.llm.push(Reply::text("Added."));
    say("add a task").await;
    wait_for("Added.", |b| b == "Added.").await;

    h.llm
        .push(Reply::call("c2", "delete_task", r#"{"task_id": 1}"#));
    h.llm.push(Reply::text("Deleted."));
    say("delete task 1").await;
    let prompt = wait_for("the prompt", |b| b.contains("delete_task")).await;
    room.send(ReactionEventContent::new(Annotation::new(
        EventId::parse(&prompt).unwrap_or_else(|e| panic!("{e}")),
        "✅".to_owned(),
    )))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    wait_for("Deleted.", |b| b == "Deleted.").await;
    // The prompt's edit (encrypted too) shows that the reaction approved it.
    wait_for("the prompt showing the approval", |b| {
        b.contains("delete_task") && b.contains("Approved")
    })
    .await;

    let device = hearth_matrix::saved_device_id(&h.dir.path().join("data/channels/matrix"));
    assert!(device.is_some(), "no device saved");
    h.kill().await;
    h.llm.push(Reply::text("Back, and still reading you."));
    say("are you there?").await;
    h.start().await;
    wait_for("the answer after the restart", |b| {
        b == "Back, and still reading you."
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let answers = decrypted(room.clone())
        .await
        .into_iter()
        .filter(|(_, body)| body == "Back, and still reading you.")
        .count();
    assert_eq!(
        answers, 1,
        "the message sent while down was answered {answers} times"
    );
    assert_eq!(
        hearth_matrix::saved_device_id(&h.dir.path().join("data/channels/matrix")),
        device,
        "the restart made a new device"
    );
    h.stop().await;
}

/// The three-step plan of the Telegram test on a real Synapse: one plan message, edited in place
/// by `m.replace` events, through a tool step, a step waiting for the owner's ✅ and a failed
/// step that is retried.
#[tokio::test]
async fn the_plan_message_is_edited_in_place_through_an_approval_and_a_retried_step() {
    use crate::plans::FINAL_PLAN;

    let mut h = MxHearth::new("").await;
    h.start().await;
    let dm = h.dm().await;
    let bot = h.bot.user_id.clone();
    crate::plans::script_until_approval(&h.llm);
    h.owner
        .text(
            &dm,
            "find flats, wipe the old listing and mark the viewing",
            None,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let waiting = "📋 Plan (1/3 done)\n✅ Look up the flats\n▶️ Wipe old listings — waiting for your approval\n▫️ Send the summary";
    let plan = h
        .wait_bot_message(&dm, "the plan waiting for approval", |m| m.text == waiting)
        .await;
    let prompt = h
        .wait_bot_message(&dm, "the prompt with ✅ ❌", |m| {
            m.text.contains("delete_task")
                && ["✅", "❌"]
                    .iter()
                    .all(|e| m.reactions.iter().any(|(s, k)| *s == bot && k == e))
        })
        .await;

    let answer = "Done: the viewing is booked and the old listing is gone.";
    crate::plans::script_after_approval(&h.llm, answer);
    h.owner
        .react(&dm, &prompt.event_id, "✅")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let reply = h
        .wait_bot_message(&dm, "the answer", |m| m.text == answer)
        .await;
    h.wait_bot_message(&dm, "the plan settled in the same message", |m| {
        m.event_id == plan.event_id && m.text == FINAL_PLAN
    })
    .await;
    let messages = h.bot_messages(&dm).await;
    let plans: Vec<&SeenMessage> = messages
        .iter()
        .filter(|m| m.text.starts_with("📋"))
        .collect();
    assert_eq!(plans.len(), 1, "one plan message: {messages:#?}");
    assert!(
        messages.iter().position(|m| m.event_id == plan.event_id)
            < messages.iter().position(|m| m.event_id == reply.event_id),
        "the plan sits above the answer"
    );
    // Every revision is an `m.replace` edit of that one event.
    let events = h
        .owner
        .events(&dm, 200)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let edits: Vec<String> = events
        .iter()
        .filter(|e| {
            let relation = &e["content"]["m.relates_to"];
            relation["rel_type"] == "m.replace" && relation["event_id"] == plan.event_id.as_str()
        })
        .map(|e| {
            e["content"]["m.new_content"]["body"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    for expected in [
        "▶️ Wipe old listings — waiting for your approval",
        "▶️ Send the summary",
        "❌ Send the summary — no task 99; trying again",
        "✅ Send the summary",
    ] {
        assert!(
            edits.iter().any(|t| t.contains(expected)),
            "{expected:?} never shown: {edits:#?}"
        );
    }
    h.stop().await;
}
