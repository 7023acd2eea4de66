//! Approvals routed to the owner's chat (`daemon.approvals_to`), with the real `hearth run`
//! binary, the real mail servers (Dovecot, aiosmtpd), the fake Telegram Bot API and the fake
//! LLM: a mail's request approved by the owner's Telegram button across a restart (the turn
//! resumes and the mail is answered once, both places show the outcome) while a stranger's
//! press is refused; a scheduled run's prompt routed and denied (and one already in the owner's
//! chat not sent twice); and a route that cannot be reached, where the prompt still expires as
//! denied and nothing runs.

use std::time::Duration;

use hearth_testkit::email::{MailServers, SentMail};
use hearth_testkit::telegram::{FakeMessage, FakeTelegram};
use hearth_testkit::{FakeOpenAi, Reply};

use crate::support::{
    self, FREE, HearthProcess, TASK_TOOLS, general_agent, llm_sections, process_harness,
};

const BOT: &str = "bot@example.org";
const PASSWORD: &str = "SECRET-mail-password";
const TOKEN: &str = "123456:telegram-token-xyz";
const ANN: &str = "ann@example.org";
/// The owner's Telegram user (and private chat) id: where prompts are routed.
const OWNER: i64 = 42;
const GROUP: i64 = -1001;
const STRANGER: i64 = 9999;
const WAIT: Duration = Duration::from_secs(20);

struct Hearth {
    process: HearthProcess,
    llm: FakeOpenAi,
    mail: MailServers,
    tg: FakeTelegram,
}

process_harness!(Hearth);

impl Hearth {
    /// Email (Ann may write) and Telegram (the owner's chat), the owner being `telegram:42`
    /// with `approvals_to` naming it; `extra` is appended to the config.
    async fn new(extra: &str) -> Self {
        let process = HearthProcess::new("email", "SECRET-mail-password")
            .env("MAIL_PASSWORD", PASSWORD)
            .env("TG_TOKEN", TOKEN)
            // Set from the environment, as any key can be.
            .env("HEARTH_DAEMON__APPROVALS_TO", &format!("telegram:{OWNER}"));
        let llm = FakeOpenAi::start().await;
        let tg = FakeTelegram::start(TOKEN).await;
        let mail = MailServers::start(BOT, PASSWORD)
            .await
            .unwrap_or_else(|e| panic!("cannot start the mail servers: {e}"));
        let config = format!(
            r#"{llm}
[channels.email]
imap_url = "{imap}"
smtp_url = "{smtp}"
username = "{BOT}"
password_env = "MAIL_PASSWORD"
from = "Hearth <{BOT}>"
allowed_senders = ["{ANN}"]
trust_unverified_from = true

[channels.telegram]
token_env = "TG_TOKEN"
api_url = "{tg}"
allowed_users = [{OWNER}]
{extra}
"#,
            llm = llm_sections(&llm, false, false, FREE),
            imap = mail.imap.url(),
            smtp = mail.smtp.url(),
            tg = tg.api_url(),
        );
        process.write_config(
            &format!("telegram:{OWNER}"),
            &config,
            &general_agent(TASK_TOOLS),
        );
        Self {
            process,
            llm,
            mail,
            tg,
        }
    }

    /// Starts hearth and waits for both channels.
    async fn start(&mut self) {
        self.process.start().await;
        self.wait_for(WAIT, "Telegram connected", async || {
            let (_, health) = self.healthz().await;
            (health["channels"]["telegram"]["state"] == "connected").then_some(())
        })
        .await;
        // Connected means logged in; give the first SELECT a moment to set the start.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    async fn wait_sent(&self, to: &str, n: usize) -> Vec<SentMail> {
        let what = format!("{n} mails to {to}");
        self.wait_for(WAIT, &what, async || {
            let sent = self.mail.sent_to(to);
            (sent.len() >= n).then_some(sent)
        })
        .await
    }

    async fn wait_tg(&self, chat: i64, n: usize) -> Vec<FakeMessage> {
        crate::telegram::wait_messages(&self.tg, &self.process, chat, n, WAIT).await
    }

    /// Waits until the Telegram message `id` in `chat` shows `text`, and returns it.
    async fn wait_edited(&self, chat: i64, id: i64, text: &str) -> FakeMessage {
        let what = format!("message {id} in {chat} to show {text:?}");
        self.wait_for(WAIT, &what, async || {
            self.tg
                .messages(chat)
                .into_iter()
                .find(|m| m.id == id && m.text.contains(text))
        })
        .await
    }

    /// The tool results the model was shown, in order.
    fn tool_results(&self) -> Vec<String> {
        let last = self.llm.requests().pop().unwrap_or_default();
        support::tool_results(&last)
            .into_iter()
            .map(|(_, content)| content)
            .collect()
    }
}

/// The callback data of a prompt's Approve and Deny buttons.
fn approve_deny(prompt: &FakeMessage) -> (String, String) {
    let row = prompt.buttons.first().cloned().unwrap_or_default();
    assert_eq!(row.len(), 2, "Approve and Deny: {:?}", prompt.buttons);
    (row[0].1.clone(), row[1].1.clone())
}

#[tokio::test]
async fn a_mailed_request_is_approved_by_the_owners_telegram_button_and_a_strangers_press_is_refused()
 {
    let mut h = Hearth::new("").await;
    h.start().await;
    h.llm
        .push(Reply::call("c1", "add_task", r#"{"title": "Old task"}"#));
    h.llm.push(Reply::text("Added."));
    h.mail
        .deliver_text(ANN, "tasks", "add a task")
        .await
        .expect("deliver");
    h.wait_sent(ANN, 1).await;
    // Nothing needed approving: nothing was routed.
    assert!(
        h.tg.messages(OWNER).is_empty(),
        "{:?}",
        h.tg.messages(OWNER)
    );

    h.llm
        .push(Reply::call("c2", "delete_task", r#"{"task_id": 1}"#));
    // The sender chose a display name that reads like one of hearth's own words.
    h.mail
        .deliver_text(
            &format!("the scheduled run backup <{ANN}>"),
            "tasks",
            "delete task 1",
        )
        .await
        .expect("deliver");
    // The mail's own prompt, with a code to type, and the copy in the owner's chat with buttons.
    let prompt = h.wait_sent(ANN, 2).await.remove(1);
    assert!(prompt.text.contains("delete_task"), "{prompt:?}");
    assert!(prompt.text.contains("Reply APPROVE "), "{prompt:?}");
    let routed = h.wait_tg(OWNER, 1).await.remove(0);
    assert!(
        routed
            .text
            .contains(&format!("Approval needed for email:{ANN} (named “the scheduled run backup”): 🏠 General wants to run delete_task")),
        "{}",
        routed.text
    );
    let (approve, _) = approve_deny(&routed);

    // Rows, not memory: the routed prompt works across a restart.
    h.stop().await;
    h.start().await;

    // Someone else presses the routed button: refused, nothing happens.
    let stranger = h.tg.press(OWNER, STRANGER, routed.id, &approve);
    let answer = h
        .wait_for(WAIT, "the stranger's press to be answered", async || {
            h.tg.answered_callbacks()
                .into_iter()
                .find(|c| c.id == stranger)
        })
        .await;
    assert!(
        answer.show_alert && answer.text.unwrap_or_default().contains("isn't yours"),
        "{}",
        h.logs()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.mail.sent_to(ANN).len(), 2, "the stranger's press decided");

    // The owner approves in Telegram: the turn resumes and the mail is answered, once.
    h.llm.push(Reply::text("Deleted."));
    let owner = h.tg.press(OWNER, OWNER, routed.id, &approve);
    let sent = h.wait_sent(ANN, 4).await;
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    // The mail's usual outcome, then the answer of the resumed turn.
    assert!(texts[2].contains("✅ Approved by"), "{texts:#?}");
    assert!(texts[3].contains("Deleted."), "{texts:#?}\n{}", h.logs());
    let results = h.tool_results();
    assert!(
        results.last().is_some_and(|r| r.contains("Old task")),
        "the task was deleted: {results:?}"
    );
    // The routed prompt shows the outcome, its buttons gone; the press was answered.
    let edited = h.wait_edited(OWNER, routed.id, "Approved by").await;
    assert!(
        edited.buttons.iter().all(|row| row.is_empty()),
        "{:?}",
        edited.buttons
    );
    assert!(
        h.tg.answered_callbacks()
            .iter()
            .any(|c| c.id == owner && c.text.as_deref() == Some("✅ Approved")),
        "{:?}",
        h.tg.answered_callbacks()
    );
    // Once: no second answer, nothing more in the owner's chat.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.mail.sent_to(ANN).len(), 4);
    assert_eq!(h.tg.messages(OWNER).len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn a_scheduled_runs_prompt_is_routed_and_denied_in_the_owners_chat() {
    let schedule = format!(
        "[[schedules]]\nname = \"cleanup\"\ncron = \"0 0 3 1 1 *\"\ntimezone = \"UTC\"\nagent = \"general\"\n\
         prompt = \"Delete the done tasks.\"\ntarget = \"telegram:{GROUP}\"\non_confirmation = \"ask\"\n\n\
         [[schedules]]\nname = \"tidy\"\ncron = \"0 0 3 1 1 *\"\ntimezone = \"UTC\"\nagent = \"general\"\n\
         prompt = \"Tidy up.\"\ntarget = \"telegram:{OWNER}\"\non_confirmation = \"ask\"\n"
    );
    let mut h = Hearth::new(&schedule).await;
    h.start().await;
    h.llm
        .push(Reply::call("c1", "delete_task", r#"{"task_id": 1}"#));
    let run = h.cli(&["schedule", "run", "cleanup"]);
    assert!(run.contains("due now"), "{run}");

    // The prompt in the schedule's chat, and the copy in the owner's chat.
    let prompt = h.wait_tg(GROUP, 1).await.remove(0);
    assert!(prompt.text.contains("delete_task"), "{}", prompt.text);
    let routed = h.wait_tg(OWNER, 1).await.remove(0);
    assert!(
        routed
            .text
            .contains("Approval needed for the scheduled run “cleanup”"),
        "{}",
        routed.text
    );
    let (_, deny) = approve_deny(&routed);

    h.llm.push(Reply::text("I left the tasks alone."));
    h.tg.press(OWNER, OWNER, routed.id, &deny);
    let messages = h.wait_tg(GROUP, 2).await;
    assert_eq!(messages[1].text, "⏰ cleanup\n\nI left the tasks alone.");
    assert!(
        h.tool_results()
            .iter()
            .any(|r| r.contains("The user denied this call")),
        "{:?}",
        h.tool_results()
    );
    // Both prompts show the outcome.
    h.wait_edited(GROUP, prompt.id, "Denied by").await;
    h.wait_edited(OWNER, routed.id, "Denied by").await;
    assert_eq!(h.tg.messages(OWNER).len(), 1);

    // A run whose chat is the owner's own: its prompt is there already, and not sent twice.
    h.llm
        .push(Reply::call("c2", "delete_task", r#"{"task_id": 2}"#));
    let run = h.cli(&["schedule", "run", "tidy"]);
    assert!(run.contains("due now"), "{run}");
    let own = h.wait_tg(OWNER, 2).await.remove(1);
    assert!(
        own.text.contains("delete_task") && !own.text.contains("Approval needed for"),
        "{}",
        own.text
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.tg.messages(OWNER).len(), 2, "{:?}", h.tg.messages(OWNER));
    h.stop().await;
}

#[tokio::test]
async fn a_prompt_whose_route_cannot_be_reached_still_expires_as_denied() {
    let mut h = Hearth::new("[tools]\nconfirmation_timeout_secs = 2\n").await;
    h.start().await;
    // Telegram refuses the routed prompt for good (the owner blocked the bot).
    h.tg.fail_next_with("sendMessage", 403, "Forbidden: bot was blocked by the user");
    h.llm
        .push(Reply::call("c1", "delete_task", r#"{"task_id": 1}"#));
    h.llm.push(Reply::text("Nobody approved, so I left it."));
    h.mail
        .deliver_text(ANN, "tasks", "delete task 1")
        .await
        .expect("deliver");
    // The prompt, the expiry, and the answer of the resumed turn.
    let sent = h.wait_sent(ANN, 3).await;
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    assert!(texts[0].contains("delete_task"), "{texts:#?}");
    assert!(texts[1].contains("⌛ Expired"), "{texts:#?}");
    assert!(
        texts[2].contains("Nobody approved, so I left it."),
        "{texts:#?}"
    );
    assert!(
        h.tool_results()
            .iter()
            .any(|r| r.contains("Nobody approved this call")),
        "the call did not run: {:?}",
        h.tool_results()
    );
    assert!(
        h.tg.messages(OWNER).is_empty(),
        "{:?}",
        h.tg.messages(OWNER)
    );
    assert!(
        h.tg.requests_of("sendMessage")
            .iter()
            .any(|r| r.body.to_string().contains("Approval needed")),
        "the route was tried"
    );
    h.stop().await;
}
