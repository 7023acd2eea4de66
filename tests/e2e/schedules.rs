//! Schedules as a user meets them: `hearth schedule list|add|remove|run` on the binary, and a
//! reminder asked for in chat that arrives in the chat when the (manual) clock gets there.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use chrono::TimeZone;
use hearth::clock::ManualClock;
use hearth_testkit::Reply;

use crate::support::{CHAT, Hearth, USER, WAIT, general_agent, poll, run_cli};

/// Runs `hearth ARGS` in `dir` with a clean environment (and a Telegram token).
fn hearth(dir: &Path, args: &[&str]) -> Output {
    run_cli(dir, args, &[("HEARTH_TELEGRAM_TOKEN", "123:test")], "")
}

fn out(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn err(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const CONFIG: &str = r#"
[daemon]
data_dir = "./data"
timezone = "Europe/Berlin"

[channels.telegram]
token_env = "HEARTH_TELEGRAM_TOKEN"
allowed_users = [42]

[[schedules]]
name = "morning-briefing"
cron = "0 30 7 * * Mon-Fri"
agent = "general"
prompt = "Give me my briefing."
target = "telegram:42"
"#;

fn config_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("hearth.toml"), CONFIG).expect("write config");
    dir
}

#[test]
fn schedule_cli_adds_lists_runs_and_removes() {
    let dir = config_dir();
    // Before the first start the config's schedules are listed with their next fire, and the
    // list says why nothing has run; no empty database is created for it.
    let list = hearth(dir.path(), &["schedule", "list"]);
    assert_eq!(list.status.code(), Some(0), "{}", err(&list));
    let text = out(&list);
    assert!(
        text.contains("morning-briefing  [config]  0 30 7 * * Mon-Fri (weekdays at 07:30)  Europe/Berlin  -> telegram:42"),
        "{text}"
    );
    assert!(
        text.contains("next ") && text.contains(" 07:30 CE") && text.contains("never run"),
        "{text}"
    );
    let database = dir.path().join("data").join("hearth.db");
    assert!(
        text.contains(&format!(
            "nothing has run yet: there is no database at {}",
            database.display()
        )),
        "{text}"
    );
    assert!(
        !dir.path().join("data").exists(),
        "an empty database was created"
    );
    // Running one needs the daemon's database: refused, naming it.
    let run = hearth(dir.path(), &["schedule", "run", "morning-briefing"]);
    assert_eq!(run.status.code(), Some(2), "{}", err(&run));
    assert!(err(&run).contains("no database at"), "{}", err(&run));
    let migrate = hearth(dir.path(), &["migrate"]);
    assert_eq!(migrate.status.code(), Some(0), "{}", err(&migrate));
    let list = hearth(dir.path(), &["schedule", "list"]);
    assert_eq!(list.status.code(), Some(0), "{}", err(&list));
    let text = out(&list);
    assert!(text.contains("morning-briefing  [config]"), "{text}");
    assert!(
        text.contains("0 30 7 * * Mon-Fri (weekdays at 07:30)  Europe/Berlin  -> telegram:42"),
        "{text}"
    );
    assert!(
        text.contains("next ") && text.contains(" 07:30 CE"),
        "local time: {text}"
    );
    assert!(text.contains("never run"), "{text}");

    let add = hearth(
        dir.path(),
        &[
            "schedule",
            "add",
            "weekly-review",
            "--cron",
            "0 0 18 * * Fri",
            "--prompt",
            "Review my week",
            "--target",
            "telegram:42",
            "--timezone",
            "America/New_York",
        ],
    );
    assert_eq!(add.status.code(), Some(0), "{}", err(&add));
    assert!(
        out(&add).contains("added `weekly-review`; next fire"),
        "{}",
        out(&add)
    );
    assert!(
        out(&add).contains("18:00 E"),
        "New York time: {}",
        out(&add)
    );

    let text = out(&hearth(dir.path(), &["schedule"]));
    assert!(
        text.contains("weekly-review  [chat]  0 0 18 * * Fri (Fridays at 18:00)  America/New_York"),
        "{text}"
    );

    let run = hearth(dir.path(), &["schedule", "run", "weekly-review"]);
    assert_eq!(run.status.code(), Some(0), "{}", err(&run));
    assert!(out(&run).contains("due now"), "{}", out(&run));

    // Disabled, it stays disabled through the config sync every command and start does, and
    // cannot be run; enabled, it fires from its next time on.
    let disable = hearth(dir.path(), &["schedule", "disable", "morning-briefing"]);
    assert_eq!(disable.status.code(), Some(0), "{}", err(&disable));
    assert!(
        out(&disable).contains("disabled `morning-briefing`"),
        "{}",
        out(&disable)
    );
    let text = out(&hearth(dir.path(), &["schedule", "list"]));
    assert!(
        text.lines().any(|l| l.starts_with("morning-briefing")
            && l.contains("disabled (hearth schedule enable)")),
        "{text}"
    );
    let run = hearth(dir.path(), &["schedule", "run", "morning-briefing"]);
    assert_eq!(run.status.code(), Some(2), "{}", out(&run));
    assert!(err(&run).contains("is disabled"), "{}", err(&run));
    let enable = hearth(dir.path(), &["schedule", "enable", "morning-briefing"]);
    assert_eq!(enable.status.code(), Some(0), "{}", err(&enable));
    assert!(
        out(&enable).contains("enabled `morning-briefing`; next fire")
            && out(&enable).contains(" 07:30 CE"),
        "{}",
        out(&enable)
    );

    let remove = hearth(dir.path(), &["schedule", "remove", "weekly-review"]);
    assert_eq!(remove.status.code(), Some(0), "{}", err(&remove));
    assert!(!out(&hearth(dir.path(), &["schedule", "list"])).contains("weekly-review"));
}

#[test]
fn schedule_cli_refuses_bad_input_with_one_line_and_exit_2() {
    let dir = config_dir();
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "schedule",
                "add",
                "x",
                "--cron",
                "30 7 * * *",
                "--prompt",
                "p",
                "--target",
                "telegram:42",
            ],
            "try `0 30 7 * * *`",
        ),
        (
            &[
                "schedule",
                "add",
                "x",
                "--cron",
                "0 30 7 * * *",
                "--prompt",
                "p",
                "--target",
                "telegram",
            ],
            "channel:chat_id",
        ),
        (
            &[
                "schedule",
                "add",
                "x",
                "--cron",
                "0 30 7 * * *",
                "--prompt",
                "p",
                "--target",
                "telegram:42",
                "--timezone",
                "Mars/Base",
            ],
            "unknown timezone `Mars/Base`",
        ),
        (
            &[
                "schedule",
                "add",
                "x",
                "--cron",
                "0 30 7 * * *",
                "--prompt",
                "p",
                "--target",
                "telegram:42",
                "--agent",
                "nobody",
            ],
            "there is no agent `nobody`",
        ),
        (
            &[
                "schedule",
                "add",
                "morning-briefing",
                "--cron",
                "0 30 7 * * *",
                "--prompt",
                "p",
                "--target",
                "telegram:42",
            ],
            "exists already",
        ),
        // The same rules as [[schedules]] in the file: a configured channel, no terminal.
        (
            &[
                "schedule",
                "add",
                "x",
                "--cron",
                "0 30 7 * * *",
                "--prompt",
                "p",
                "--target",
                "discord:42",
            ],
            "channel `discord` is not configured",
        ),
        (
            &[
                "schedule",
                "add",
                "x",
                "--cron",
                "0 30 7 * * *",
                "--prompt",
                "p",
                "--target",
                "terminal:local",
            ],
            "the terminal is `hearth chat`'s",
        ),
        (&["schedule", "enable", "nope"], "no schedule named `nope`"),
        (&["schedule", "remove", "nope"], "no schedule named `nope`"),
        (&["schedule", "run", "nope"], "no schedule named `nope`"),
        (
            &["schedule", "remove", "morning-briefing"],
            "comes from the config file",
        ),
    ];
    for (args, expected) in cases {
        let output = hearth(dir.path(), args);
        let stderr = err(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    }
}

#[tokio::test]
async fn a_reminder_asked_for_in_chat_arrives_when_its_time_comes() {
    let start = chrono::Utc
        .with_ymd_and_hms(2026, 3, 28, 9, 0, 0)
        .single()
        .expect("valid");
    let clock = ManualClock::new(start);
    let mut h = Hearth::new()
        .await
        .with_agents(&general_agent(
            "description = \"Anything\"\ntool_groups = [\"schedules\"]",
        ))
        .with_clock(clock.clone());
    h.config.daemon.owner = Some(format!("memory:{USER}").into());
    h.start().await;
    let store = h.daemon().store().clone();

    // A reminder acts later with nobody watching, so creating one asks first.
    h.llm.push(Reply::call(
        "c1",
        "remind_me",
        r#"{"message": "call mum", "in": "20 minutes"}"#,
    ));
    let prompt = h.say("remind me in 20 minutes to call mum").await;
    assert!(
        prompt.text.contains("wants to run `remind_me`"),
        "{}",
        prompt.text
    );
    assert!(
        store.schedules().await.expect("schedules").is_empty(),
        "nothing before the approval"
    );
    h.llm.push(Reply::text("I'll remind you at 09:20."));
    h.channel
        .push_press(&prompt.reference(), USER, &prompt.buttons[0].data);
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "I'll remind you at 09:20.");

    let schedules = store.schedules().await.expect("schedules");
    assert_eq!(schedules.len(), 1);
    let reminder = &schedules[0];
    assert_eq!(reminder.target(), format!("memory:{CHAT}"));
    assert_eq!(
        reminder.one_shot_at,
        Some(start.timestamp_millis() + 20 * 60_000)
    );

    h.llm.push(Reply::text("⏰ Time to call mum!"));
    let before = h.channel.sent().len();
    clock.advance(Duration::from_secs(21 * 60));
    let sent = h.channel.wait_for_sent(before + 1, WAIT).await;
    assert!(sent.len() > before, "the reminder was delivered: {sent:?}");
    assert_eq!(sent[before].text, "⏰ Time to call mum!");
    assert_eq!(sent[before].chat.chat_id, CHAT);

    // The model was asked with the reminder text as the prompt.
    let last = h.llm.requests().last().cloned().expect("a request");
    assert!(
        last.to_string().contains("Reminder for the user: call mum"),
        "{last}"
    );

    // The reply can reach the chat before the scheduler has committed the run's link and
    // disabled the one-shot (the dispatcher starts as soon as the inbox entry exists).
    let linked = poll(WAIT, async || {
        let runs = store.schedule_runs(reminder.id, 10).await.expect("runs");
        runs.first()
            .is_some_and(|run| run.inbox_id.is_some())
            .then_some(runs)
    })
    .await;
    let runs = match linked {
        Some(runs) => runs,
        None => store.schedule_runs(reminder.id, 10).await.expect("runs"),
    };
    assert_eq!(runs.len(), 1);
    let inbox_id = runs[0].inbox_id.expect("linked to its inbox entry");
    let entry = store
        .inbox_entry(inbox_id)
        .await
        .expect("db")
        .expect("entry");
    assert_eq!(
        entry.platform_id,
        format!(
            "schedule:{}:{}",
            reminder.id,
            reminder.one_shot_at.unwrap_or(0)
        )
    );
    let after = store
        .schedule_by_name(&reminder.name)
        .await
        .expect("db")
        .expect("kept for its history");
    assert!(!after.enabled, "a reminder fires once");
    h.stop().await;
}

/// The walk's M2: someone with only the HTTP API (`hearth init --channel none`) adds a schedule
/// for `http:laptop`. It is refused, naming what can receive; one stored before such targets
/// were refused fails when it fires (in `schedule list` and `/metrics`) instead of being
/// reported done while its answer is dropped.
#[cfg(feature = "http")]
#[tokio::test]
async fn a_schedule_for_an_http_client_is_refused_and_a_stored_one_fails_where_it_shows() {
    let mut api = crate::http::Api::new("").await;
    api.process.start().await;
    // The start log says where the page and the APIs are, for someone who just started it.
    let logs = api.process.logs();
    assert!(
        logs.contains("the owner's page is listening")
            && logs.contains(&api.process.url("/api/v1"))
            && logs.contains(&api.process.url("/v1")),
        "{logs}"
    );
    let added = api.process.cli(&[
        "schedule",
        "add",
        "brief",
        "--cron",
        "0 30 7 * * Mon-Fri",
        "--prompt",
        "Give me my briefing",
        "--target",
        "http:laptop",
    ]);
    assert!(
        added.contains("would reach nobody")
            && added.contains("no channel configured here can: add a section for one of")
            && added.contains("telegram"),
        "{added}"
    );
    assert!(!api.process.cli(&["schedule", "list"]).contains("brief"));

    let database = api.process.dir.path().join("data").join("hearth.db");
    let store = hearth::store::Store::connect(&format!("sqlite://{}", database.display()))
        .await
        .expect("the database opens");
    sqlx::query(
        "INSERT INTO schedules (name, cron, timezone, agent, prompt, channel, chat_id, source,
             next_fire_at, created_at, updated_at)
         VALUES ('brief', '0 30 7 * * Mon-Fri', 'UTC', 'general', 'Give me my briefing', 'http',
             'laptop', 'chat', 4102444800000, 0, 0)",
    )
    .execute(store.pool())
    .await
    .expect("a schedule stored by an older hearth");
    store.close().await;

    let ran = api.process.cli(&["schedule", "run", "brief"]);
    assert!(ran.contains("brief"), "{ran}");
    let listed = api
        .process
        .wait_for(WAIT, "the run to fail", async || {
            let listed = api.process.cli(&["schedule", "list"]);
            listed.contains("failed").then_some(listed)
        })
        .await;
    assert!(listed.contains("could not be delivered"), "{listed}");
    let (_, metrics) = api.process.get("/metrics").await;
    assert!(
        metrics.contains(r#"hearth_schedule_runs_total{schedule="brief",outcome="failed"} 1"#),
        "{metrics}"
    );
    assert!(!metrics.contains(r#"outcome="done""#), "{metrics}");
    // Nothing was asked of the model for an answer nobody would read.
    assert!(api.llm.requests().is_empty());
    api.process.stop().await;
}
