//! The owner's outside calendars through the real `hearth run` binary, a real CalDAV server
//! (Radicale) and the fake Telegram: a scheduled briefing that names today's events, also when
//! the server has gone down since (from the cache, with a note), and writes to the calendar
//! that wait for the owner's Approve even at autonomy `full`, the prompt naming the calendar and
//! the event, while hearth's own calendar is written at once at that autonomy. The shipped
//! briefing agent's scheduled message names today's events and the unread mail (Dovecot).

use chrono::{Duration, Utc};
use hearth_testkit::caldav::Radicale;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::Value;

use crate::support::{TASK_TOOLS, general_agent, tool_results};
use crate::telegram::{OWNER, TgHearth};
use crate::weather_feeds::shipped_briefing;

const USER: &str = "owner";
const PASSWORD: &str = "cal-secret-9f2e";
const CALENDAR_TOOLS: &str = "tool_groups = [\"calendar\"]\ntool_mode = \"direct\"";

fn calendars(url: &str, dead: &str) -> String {
    format!(
        "[[calendars]]\nname = \"Work\"\nurl = \"{url}\"\nusername = \"{USER}\"\npassword_env = \"CAL_PASSWORD\"\nwritable = true\n\n[[calendars]]\nname = \"Club\"\nurl = \"{dead}\"\nusername = \"{USER}\"\npassword_env = \"CAL_PASSWORD\"\n"
    )
}

/// The content of the last tool result the model was sent.
fn last_tool_result(request: &Value) -> Option<String> {
    request["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
}

/// The tool result the model is answering now: the last message's, when it is one (a
/// schedule's runs share their conversation, so earlier runs' results are there too).
fn answering_tool(request: &Value) -> Option<String> {
    let last = request["messages"].as_array()?.last()?;
    (last["role"] == "tool")
        .then(|| last_tool_result(request))
        .flatten()
}

async fn tg_with_calendars(extra: &str) -> TgHearth {
    let h = TgHearth::new(extra).await;
    let h = TgHearth {
        process: h.process.env("CAL_PASSWORD", PASSWORD),
        ..h
    };
    h.process.write_agents(&general_agent(CALENDAR_TOOLS));
    h
}

#[tokio::test]
async fn a_scheduled_briefing_names_todays_events_also_from_the_cache_when_the_server_is_down() {
    let server = Radicale::start(&[(USER, PASSWORD)]).expect("Radicale starts");
    let url = server
        .make_calendar(USER, PASSWORD, "work")
        .await
        .expect("test value");
    let phone = server.client(USER, PASSWORD);
    // hearth's zone is UTC here: today's events in UTC, whatever the hour the test runs.
    let today = Utc::now().date_naive();
    let day = |d: chrono::NaiveDate| d.format("%Y%m%d").to_string();
    let week_ago = day(today - Duration::days(7));
    let events = [
        (
            "standup",
            format!(
                "DTSTART:{week_ago}T000500Z\r\nDTEND:{week_ago}T003000Z\r\nRRULE:FREQ=WEEKLY\r\nSUMMARY:Weekly standup"
            ),
        ),
        (
            "birthday",
            format!(
                "DTSTART;VALUE=DATE:{}\r\nDTEND;VALUE=DATE:{}\r\nSUMMARY:Mum's birthday",
                day(today),
                day(today + Duration::days(1))
            ),
        ),
        (
            "later",
            format!(
                "DTSTART;VALUE=DATE:{}\r\nSUMMARY:Dentist next week",
                day(today + Duration::days(7))
            ),
        ),
    ];
    for (uid, body) in events {
        let data = format!(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//phone//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20261001T000000Z\r\n{body}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        );
        phone
            .put(&format!("{url}{uid}.ics"), &data)
            .await
            .expect("test value");
    }
    let dead = format!(
        "http://127.0.0.1:{}/owner/club/",
        hearth_testkit::net::free_port()
    );
    let schedule = format!(
        "[[schedules]]\nname = \"briefing\"\ncron = \"*/3 * * * * *\"\ntimezone = \"UTC\"\nagent = \"general\"\nprompt = \"Give me my briefing.\"\ntarget = \"telegram:{OWNER}\"\n"
    );
    let mut h = tg_with_calendars(&format!("{}\n{schedule}", calendars(&url, &dead))).await;
    // The model lists today's events, then speaks of what the tool returned.
    h.llm
        .set_responder(|request| match answering_tool(request) {
            None => Reply::call("c1", "list_calendar_events", r#"{"range": "today"}"#),
            Some(result) => {
                let named: Vec<&str> = ["Weekly standup", "Mum's birthday", "Dentist next week"]
                    .into_iter()
                    .filter(|title| result.contains(title))
                    .collect();
                let cached = if result.contains("copy saved today") {
                    " (from the saved copy)"
                } else {
                    ""
                };
                Reply::text(format!("Today: {}{cached}", named.join(", ")))
            }
        });
    h.start().await;
    let first = h.wait(OWNER, 1).await;
    assert_eq!(
        first[0].text, "⏰ briefing\n\nToday: Weekly standup, Mum's birthday",
        "today's events, nothing of next week"
    );
    let result = h
        .llm
        .requests()
        .iter()
        .find_map(last_tool_result)
        .expect("a tool result");
    assert!(
        result.contains("calendar `Club`"),
        "the dead calendar is named: {result}"
    );

    drop(server);
    // A run already under way may still have read the server: the one after it cannot.
    let before = h.tg.messages(OWNER).len();
    let later = h.wait(OWNER, before + 2).await;
    assert_eq!(
        later[before + 1].text,
        "⏰ briefing\n\nToday: Weekly standup, Mum's birthday (from the saved copy)"
    );
    h.stop().await;
    assert!(
        !h.logs().contains(PASSWORD),
        "the password never reaches the log"
    );
}

#[tokio::test]
async fn adding_moving_and_deleting_an_event_each_wait_for_approve_even_at_full_autonomy() {
    let server = Radicale::start(&[(USER, PASSWORD)]).expect("Radicale starts");
    let url = server
        .make_calendar(USER, PASSWORD, "work")
        .await
        .expect("test value");
    let phone = server.client(USER, PASSWORD);
    let dead = format!(
        "http://127.0.0.1:{}/owner/club/",
        hearth_testkit::net::free_port()
    );
    // At `full` nothing else asks: a write to the owner's real calendar still does.
    let mut h = tg_with_calendars(&format!(
        "[tools]\nautonomy = \"full\"\n\n{}",
        calendars(&url, &dead)
    ))
    .await;
    h.start().await;
    let tomorrow = (Utc::now().date_naive() + Duration::days(1)).to_string();
    let mut sent = 0;

    // Add: the prompt shows the calendar and the event; nothing is written before Approve.
    h.llm.push(Reply::call(
        "c1",
        "add_calendar_event",
        format!(
            r#"{{"calendar": "Work", "title": "Lunch with Anna", "start": "{tomorrow} 12:30"}}"#
        ),
    ));
    h.llm.push(Reply::text("Added."));
    h.tg.push(hearth_testkit::telegram::Incoming::text(
        OWNER,
        OWNER,
        "lunch with Anna tomorrow",
    ));
    let prompt = h.wait(OWNER, sent + 1).await[sent].clone();
    sent += 1;
    assert!(
        prompt.text.contains("add_calendar_event")
            && prompt.text.contains("\"Work\"")
            && prompt.text.contains("Lunch with Anna"),
        "{}",
        prompt.text
    );
    assert!(
        prompt.text.contains("This acts outside hearth."),
        "{}",
        prompt.text
    );
    assert!(
        !phone
            .get(&url)
            .await
            .expect("test value")
            .unwrap_or_default()
            .contains("Lunch with Anna")
    );
    h.tg.press(OWNER, OWNER, prompt.id, &prompt.buttons[0][0].1);
    assert_eq!(h.wait(OWNER, sent + 1).await[sent].text, "Added.");
    sent += 1;
    assert!(
        phone
            .get(&url)
            .await
            .expect("test value")
            .unwrap_or_default()
            .contains("SUMMARY:Lunch with Anna")
    );
    let added = h
        .llm
        .requests()
        .iter()
        .rev()
        .find_map(last_tool_result)
        .expect("the result");
    let uid = serde_json::from_str::<Value>(&added)
        .ok()
        .and_then(|v| v["uid"].as_str().map(str::to_string))
        .or_else(|| {
            added
                .split("\"uid\":\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("a uid in {added}"));

    // Update.
    h.llm.push(Reply::call(
        "c2",
        "update_calendar_event",
        format!(r#"{{"calendar": "Work", "uid": "{uid}", "title": "Lunch with Anna and Ben"}}"#),
    ));
    h.llm.push(Reply::text("Renamed."));
    h.tg.push(hearth_testkit::telegram::Incoming::text(
        OWNER,
        OWNER,
        "Ben comes too",
    ));
    let prompt = h.wait(OWNER, sent + 1).await[sent].clone();
    sent += 1;
    assert!(
        prompt.text.contains("update_calendar_event")
            && prompt.text.contains("Work")
            && prompt.text.contains("Lunch with Anna and Ben"),
        "{}",
        prompt.text
    );
    h.tg.press(OWNER, OWNER, prompt.id, &prompt.buttons[0][0].1);
    assert_eq!(h.wait(OWNER, sent + 1).await[sent].text, "Renamed.");
    sent += 1;
    assert!(
        phone
            .get(&url)
            .await
            .expect("test value")
            .unwrap_or_default()
            .contains("SUMMARY:Lunch with Anna and Ben")
    );

    // Delete.
    h.llm.push(Reply::call(
        "c3",
        "delete_calendar_event",
        format!(r#"{{"calendar": "Work", "uid": "{uid}"}}"#),
    ));
    h.llm.push(Reply::text("Deleted."));
    h.tg.push(hearth_testkit::telegram::Incoming::text(
        OWNER,
        OWNER,
        "cancel the lunch",
    ));
    let prompt = h.wait(OWNER, sent + 1).await[sent].clone();
    sent += 1;
    assert!(
        prompt
            .text
            .contains("Work on 127.0.0.1: the event \"Lunch with Anna and Ben\""),
        "the prompt names the event the uid stands for: {}",
        prompt.text
    );
    assert!(
        prompt.text.contains("delete_calendar_event") && prompt.text.contains("Work"),
        "{}",
        prompt.text
    );
    assert!(
        phone
            .get(&url)
            .await
            .expect("test value")
            .unwrap_or_default()
            .contains("Lunch with Anna and Ben"),
        "still there before Approve"
    );
    h.tg.press(OWNER, OWNER, prompt.id, &prompt.buttons[0][0].1);
    assert_eq!(h.wait(OWNER, sent + 1).await[sent].text, "Deleted.");
    sent += 1;
    assert!(
        !phone
            .get(&url)
            .await
            .expect("test value")
            .unwrap_or_default()
            .contains("Lunch with Anna")
    );

    // hearth's own calendar, at `full`: written at once, no prompt.
    h.llm.push(Reply::call(
        "c4",
        "add_calendar_event",
        format!(r#"{{"title": "Gym", "start": "{tomorrow} 18:00"}}"#),
    ));
    h.llm.push(Reply::text("Gym added."));
    h.tg.push(hearth_testkit::telegram::Incoming::text(
        OWNER,
        OWNER,
        "gym tomorrow",
    ));
    assert_eq!(h.wait(OWNER, sent + 1).await[sent].text, "Gym added.");
    h.stop().await;
}

/// The shipped briefing agent, run by its schedule: one message naming today's events from
/// Radicale and the unread mail's subjects from Dovecot, and nothing of next week or of mail
/// already read.
#[tokio::test]
async fn the_shipped_briefing_names_todays_events_and_the_unread_mail_in_one_message() {
    const ME: &str = "owner@example.org";
    const MAIL_PASSWORD: &str = "mail-secret-71c4";
    let server = Radicale::start(&[(USER, PASSWORD)]).expect("Radicale starts");
    let url = server
        .make_calendar(USER, PASSWORD, "work")
        .await
        .expect("test value");
    let phone = server.client(USER, PASSWORD);
    let today = Utc::now().date_naive();
    let day = |d: chrono::NaiveDate| d.format("%Y%m%d").to_string();
    for (uid, body) in [
        (
            "standup",
            format!(
                "DTSTART:{}T000500Z\r\nDTEND:{}T003000Z\r\nRRULE:FREQ=WEEKLY\r\nSUMMARY:Weekly standup",
                day(today - Duration::days(7)),
                day(today - Duration::days(7))
            ),
        ),
        (
            "later",
            format!(
                "DTSTART;VALUE=DATE:{}\r\nSUMMARY:Dentist next week",
                day(today + Duration::days(7))
            ),
        ),
    ] {
        let data = format!(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//phone//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20261001T000000Z\r\n{body}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        );
        phone
            .put(&format!("{url}{uid}.ics"), &data)
            .await
            .expect("test value");
    }
    let imap = hearth_testkit::email::Dovecot::start(&[(ME, MAIL_PASSWORD)])
        .await
        .unwrap_or_else(|e| panic!("cannot start dovecot: {e}"));
    for (subject, flags) in [("Rent is due", ""), ("Old newsletter", "\\Seen")] {
        let (_, raw) = hearth_testkit::email::mail("landlord@example.org", ME, subject, "", "x");
        imap.append_many(ME, MAIL_PASSWORD, "INBOX", &[(raw, flags, None)])
            .await
            .expect("deliver");
    }
    let extra = format!(
        r#"
[[calendars]]
name = "Work"
url = "{url}"
username = "{USER}"
password_env = "CAL_PASSWORD"

[[mailboxes]]
name = "personal"
imap_url = "{imap}"
username = "{ME}"
password_env = "MAILBOX_PASSWORD"
address = "{ME}"

[[schedules]]
name = "morning-briefing"
cron = "0 30 7 * * *"
timezone = "UTC"
agent = "briefing"
prompt = "Give me my briefing."
target = "telegram:{OWNER}"
"#,
        imap = imap.url(),
    );
    let h = TgHearth::new(&extra).await;
    let mut h = TgHearth {
        process: h
            .process
            .env("CAL_PASSWORD", PASSWORD)
            .env("MAILBOX_PASSWORD", MAIL_PASSWORD),
        ..h
    };
    h.write_agents(&format!(
        "{}\n{}",
        general_agent(TASK_TOOLS),
        shipped_briefing()
    ));
    h.start().await;
    h.llm.push(Reply::tool_calls(vec![
        ToolCallSpec::new("c1", "list_calendar_events", r#"{"range": "today"}"#),
        ToolCallSpec::new("m1", "list_unread", "{}"),
    ]));
    // The model names what the tools returned, no more.
    h.llm.set_responder(|request| {
        let results: String = tool_results(request)
            .into_iter()
            .map(|(_, content)| content)
            .collect();
        let named = |titles: &[&str]| {
            titles
                .iter()
                .filter(|t| results.contains(*t))
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        };
        Reply::text(format!(
            "Today: {}. Unread: {}.",
            named(&["Weekly standup", "Dentist next week"]),
            named(&["Rent is due", "Old newsletter"]),
        ))
    });
    h.cli(&["schedule", "run", "morning-briefing"]);
    let sent = h.wait(OWNER, 1).await;
    assert_eq!(sent.len(), 1, "one message: {sent:?}");
    assert_eq!(
        sent[0].text,
        "⏰ morning-briefing\n\nToday: Weekly standup. Unread: Rent is due.",
        "{}",
        h.logs()
    );
    let first = &h.llm.requests()[0];
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("unread mail (list_unread)"),
        "the shipped briefing prompt"
    );
    h.stop().await;
    let logs = h.logs();
    assert!(!logs.contains(PASSWORD) && !logs.contains(MAIL_PASSWORD));
}
