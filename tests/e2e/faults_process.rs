//! Several hearth processes on one database, and the terminal chat as a user drives it: the
//! chat leaves the daemon's Telegram work and schedules alone, a second daemon refuses to start
//! (SQLite and PostgreSQL) while a killed one never blocks the next, `/cancel` and Ctrl-C stop a
//! slow answer at once and nothing of it leaks into the next session, several confirmations in
//! one turn are told apart, and the small things `hearth check` and `hearth run` say.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth::store::Store;
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::Value;

use crate::support::{
    Signal, eventually, free_port, hearth_command, last_user_text, poll, postgres_url,
    signal_child, spawn_with_input,
};
use crate::telegram::{OWNER, TgHearth};

const TOKEN: &str = "123456:SECRET-telegram-token-xyz";
const WAIT: Duration = Duration::from_secs(15);

/// Answers every request with "answer to: <the user's last message>".
fn echo_responder(llm: &FakeOpenAi) {
    llm.set_responder(|body| Reply::text(format!("answer to: {}", last_user_text(body))));
}

/// Runs `hearth ARGS` to the end with `stdin` piped in.
async fn run_to_end(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: &str,
) -> (Option<i32>, String, String) {
    let child = spawn_with_input(&mut hearth_command(dir, args, env), stdin);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("hearth finishes");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A `hearth chat` whose input stays open: lines are written one at a time while its output is
/// collected as it comes.
struct LiveChat {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let buffer = Arc::new(Mutex::new(String::new()));
    let sink = buffer.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock()
                .expect("buffer")
                .push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    });
    buffer
}

impl LiveChat {
    fn start(dir: &Path, env: &[(&str, &str)]) -> Self {
        let mut child = hearth_command(dir, &["chat"], env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("hearth chat starts");
        let stdin = child.stdin.take();
        let stdout = collect(child.stdout.take().expect("stdout"));
        let stderr = collect(child.stderr.take().expect("stderr"));
        Self {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .expect("write a line");
        stdin.flush().expect("flush");
    }

    fn output(&self) -> String {
        self.stdout.lock().expect("buffer").clone()
    }

    fn errors(&self) -> String {
        self.stderr.lock().expect("buffer").clone()
    }

    /// Waits until the output contains `needle`; panics after `timeout`.
    async fn wait_for(&self, needle: &str, timeout: Duration) {
        let seen = poll(timeout, async || {
            self.output().contains(needle).then_some(())
        })
        .await;
        assert!(
            seen.is_some(),
            "no {needle:?} within {timeout:?}; stdout:\n{}\nstderr:\n{}",
            self.output(),
            self.errors()
        );
    }

    fn signal(&self, signal: Signal) {
        signal_child(&self.child, signal);
    }

    /// Closes the input (if still open) and waits for the exit, at most `timeout`.
    async fn finish(mut self, timeout: Duration) -> (ExitStatus, String, String) {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Let the reader threads drain the pipes.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return (status, self.output(), self.errors());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "hearth chat did not exit within {timeout:?}; stdout:\n{}\nstderr:\n{}",
                    self.output(),
                    self.errors()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn open_store(dir: &Path) -> Store {
    Store::connect(&format!(
        "sqlite://{}",
        dir.join("data/hearth.db").display()
    ))
    .await
    .expect("open the database")
}

/// A data directory with a config that uses `llm` and no channels; `extra` is appended.
fn chat_dir(llm: &FakeOpenAi, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("hearth.toml"),
        format!(
            "[daemon]\nhttp_listen = \"\"\n{extra}\n[[providers]]\nname = \"fake\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nmax_retries = 0\n",
            llm.base_url()
        ),
    )
    .expect("config");
    dir
}

const SCHEDULE: &str = r#"
[[schedules]]
name = "briefing"
cron = "0 0 9 * * *"
timezone = "UTC"
agent = "general"
prompt = "Morning briefing please"
target = "telegram:42"
"#;

#[tokio::test]
async fn chat_leaves_the_daemons_telegram_work_and_schedules_alone() {
    let mut h = TgHearth::new(SCHEDULE).await;
    h.start().await;
    // The daemon dies in the middle of a Telegram turn: the message is stored, not answered.
    h.llm
        .push(Reply::text("never delivered").delay(Duration::from_secs(60)));
    echo_responder(&h.llm);
    h.tg.push_text(OWNER, OWNER, "what is on today?");
    h.llm.wait_for_requests(1, WAIT).await;
    h.kill().await;

    // And while it is down, the morning briefing falls due.
    let store = open_store(h.dir.path()).await;
    let schedule = store
        .schedule_by_name("briefing")
        .await
        .expect("query")
        .expect("the config schedule was synced");
    let now = chrono::Utc::now().timestamp_millis();
    assert!(
        store
            .make_schedule_due(schedule.id, now)
            .await
            .expect("query")
    );

    // A chat on the same database answers its own line and nothing else.
    let (code, stdout, stderr) = run_to_end(
        h.dir.path(),
        &["chat"],
        &[("TG_TOKEN", TOKEN)],
        "hello from the terminal\n",
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "answer to: hello from the terminal\n", "{stderr}");
    let pending: Vec<(String, String)> =
        sqlx::query_as("SELECT channel, status FROM inbox WHERE channel = 'telegram'")
            .fetch_all(store.pool())
            .await
            .expect("inbox");
    assert_eq!(
        pending,
        [("telegram".to_string(), "pending".to_string())],
        "the Telegram message waits for the daemon"
    );
    let runs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM schedule_runs")
        .fetch_one(store.pool())
        .await
        .expect("runs");
    assert_eq!(runs, 0, "the chat does not fire schedules");
    assert!(h.tg.messages(OWNER).is_empty());
    store.close().await;

    // The daemon again: the Telegram message is answered once and the briefing fires.
    h.start().await;
    let messages = h.tg.wait_for_messages(OWNER, 2, WAIT).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut texts: Vec<String> = h.tg.messages(OWNER).into_iter().map(|m| m.text).collect();
    texts.sort();
    assert_eq!(
        texts,
        [
            "answer to: what is on today?",
            // A recurring schedule's reply names the schedule that sent it.
            "⏰ briefing\n\nanswer to: Morning briefing please",
        ],
        "{messages:?}\n{}",
        h.logs()
    );
    h.stop().await;
}

#[tokio::test]
async fn a_second_daemon_refuses_with_one_line_and_a_killed_one_does_not_block_the_next() {
    let mut h = TgHearth::new("").await;
    h.start().await;
    let first = h.pid().expect("running");

    let (code, stdout, stderr) =
        run_to_end(h.dir.path(), &["run"], &[("TG_TOKEN", TOKEN)], "").await;
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "error: another hearth is already running on this database (./data/hearth.db, pid {first})\n"
        )
    );

    // The first one never noticed.
    echo_responder(&h.llm);
    h.tg.push_text(OWNER, OWNER, "still there?");
    let messages = h.tg.wait_for_messages(OWNER, 1, WAIT).await;
    assert_eq!(messages[0].text, "answer to: still there?");

    // A chat may run beside the daemon.
    let (code, stdout, stderr) =
        run_to_end(h.dir.path(), &["chat"], &[("TG_TOKEN", TOKEN)], "hi\n").await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "answer to: hi\n");

    // SIGKILL leaves the lock file behind, but not the lock.
    h.kill().await;
    assert!(h.dir.path().join("data/hearth.db.lock").exists());
    h.start().await;
    h.tg.push_text(OWNER, OWNER, "and now?");
    let messages = h.tg.wait_for_messages(OWNER, 2, WAIT).await;
    assert_eq!(messages[1].text, "answer to: and now?");
    h.stop().await;
}

#[tokio::test]
async fn two_daemons_on_one_postgres_database_do_not_run_at_once() {
    let Some((url, _server)) = postgres_url("hearth_lock") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    std::fs::write(
        dir.path().join("hearth.toml"),
        format!(
            "[daemon]\ndatabase_url = \"{url}\"\nhttp_listen = \"127.0.0.1:{port}\"\nshutdown_grace_secs = 1\n"
        ),
    )
    .expect("config");
    let env = [("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")];
    let start = || {
        hearth_command(dir.path(), &["run"], &env)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("hearth run starts")
    };
    let healthy = || async {
        let url = format!("http://127.0.0.1:{port}/healthz");
        poll(WAIT, async || reqwest::get(&url).await.ok())
            .await
            .is_some()
    };

    let mut first = start();
    assert!(healthy().await, "the first daemon came up");
    let (code, _, stderr) = run_to_end(dir.path(), &["run"], &env, "").await;
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: another hearth is already running on this database (postgres")
            && stderr.contains(&format!("pid {})", first.id())),
        "{stderr}"
    );
    assert!(
        !stderr.contains("password"),
        "the URL is shown without secrets"
    );

    // Killed: the server ends its session and with it the lock.
    first.kill().expect("kill");
    first.wait().expect("wait");
    let mut next = start();
    assert!(healthy().await, "a new daemon starts after SIGKILL");
    next.kill().expect("kill");
    next.wait().expect("wait");
}

#[tokio::test]
async fn cancel_typed_during_a_slow_answer_stops_it_and_the_chat_goes_on() {
    let llm = FakeOpenAi::start().await;
    llm.push(
        Reply::text("Once upon a time there was a very long story").pace(Duration::from_secs(3)),
    );
    llm.push(Reply::text("Here I am."));
    let dir = chat_dir(&llm, "");
    let mut chat = LiveChat::start(dir.path(), &[]);
    chat.say("tell me a long story");
    chat.wait_for("Once", WAIT).await;

    let typed = Instant::now();
    chat.say("/cancel");
    chat.wait_for("⏹ Cancelled.", WAIT).await;
    let stopped = typed.elapsed();
    eprintln!("/cancel stopped the answer in {stopped:?}");
    chat.say("and now?");
    chat.wait_for("Here I am.", WAIT).await;
    let (status, stdout, stderr) = chat.finish(WAIT).await;

    assert_eq!(status.code(), Some(0), "{stderr}");
    // The rest of the story would have taken four more pieces of three seconds each.
    assert!(
        stopped < Duration::from_secs(6),
        "/cancel took {stopped:?}:\n{stdout}"
    );
    assert!(!stdout.contains("long story"), "{stdout}");
    assert_eq!(stdout.matches("⏹ Cancelled.").count(), 1, "{stdout}");
    assert!(stdout.ends_with("Here I am.\n"), "{stdout}");
    assert!(
        !stdout.contains("Nothing is running"),
        "the /cancel line needs no reply of its own:\n{stdout}"
    );
    assert_eq!(llm.request_count(), 2);
}

/// `hearth chat` on a pseudo-terminal, as a person runs it: what is typed goes through the
/// terminal's line discipline, echo included, and the screen is what the other end reads.
struct TerminalChat {
    child: Child,
    /// The person's end: keys are written to it, the screen is read from it.
    keys: std::fs::File,
    screen: Arc<Mutex<String>>,
    /// The chat's end, kept to read the terminal's settings after the chat left.
    tty: std::fs::File,
}

impl TerminalChat {
    fn start(dir: &Path) -> Self {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        use std::os::unix::fs::OpenOptionsExt;
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("a pseudo-terminal");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let name = ptsname(&master, Vec::new()).expect("ptsname");
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            // Not this test process's controlling terminal.
            .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
            .open(name.to_str().expect("a path"))
            .expect("the terminal's end");
        let child = hearth_command(dir, &["chat"], &[])
            .stdin(tty.try_clone().expect("tty"))
            .stdout(tty.try_clone().expect("tty"))
            .stderr(Stdio::null())
            .spawn()
            .expect("hearth chat starts");
        let keys = std::fs::File::from(master);
        let screen = collect(keys.try_clone().expect("master"));
        Self {
            child,
            keys,
            screen,
            tty,
        }
    }

    fn type_keys(&mut self, keys: &str) {
        self.keys.write_all(keys.as_bytes()).expect("type");
        self.keys.flush().expect("flush");
    }

    /// The screen's text, lines ending in `\n` (the terminal writes `\r\n`).
    fn screen(&self) -> String {
        self.screen.lock().expect("buffer").replace('\r', "")
    }

    async fn wait_for(&self, needle: &str) {
        let seen = poll(WAIT, async || self.screen().contains(needle).then_some(())).await;
        assert!(
            seen.is_some(),
            "no {needle:?} within {WAIT:?}; the screen:\n{}",
            self.screen()
        );
    }
}

/// The walk's terminal item: `/cancel` typed while an answer streams does not land inside the
/// streamed line. The echo is off meanwhile: the cancelled answer ends its line, the next line
/// says it was cancelled, a line typed ahead shows after the `›` when its turn comes, and the
/// terminal echoes again once the chat has left.
#[tokio::test]
async fn cancel_typed_on_a_terminal_does_not_land_inside_the_streamed_line() {
    let llm = FakeOpenAi::start().await;
    llm.push(
        Reply::text("Once upon a time there was a very long story").pace(Duration::from_secs(3)),
    );
    llm.push(Reply::text("Here I am."));
    let dir = chat_dir(&llm, "");
    let mut chat = TerminalChat::start(dir.path());
    chat.wait_for("› ").await;
    chat.type_keys("tell me a long story\n");
    chat.wait_for("Once").await;
    chat.type_keys("/cancel\n");
    chat.type_keys("and now?\n");
    chat.wait_for("Here I am.").await;
    // Ctrl-D at the start of a line: the end of input.
    chat.type_keys("\u{4}");
    let exited = poll(WAIT, async || chat.child.try_wait().expect("try_wait")).await;
    let screen = chat.screen();
    assert_eq!(exited.and_then(|s| s.code()), Some(0), "{screen}");

    assert!(screen.contains("› tell me a long story\n"), "{screen}");
    // Only the greeting names it: the typed one was never echoed.
    assert_eq!(screen.matches("/cancel").count(), 1, "{screen}");
    let lines: Vec<&str> = screen.lines().collect();
    let story = lines
        .iter()
        .position(|line| line.starts_with("Once"))
        .expect("the story's line");
    assert!(
        "Once upon a time there was a very long story".starts_with(lines[story]),
        "{screen}"
    );
    assert_eq!(lines[story + 1], "⏹ Cancelled.", "{screen}");
    assert_eq!(lines[story + 2], "› and now?", "{screen}");
    assert_eq!(lines[story + 3], "Here I am.", "{screen}");
    let settings = rustix::termios::tcgetattr(&chat.tty).expect("the terminal's settings");
    assert!(
        settings
            .local_modes
            .contains(rustix::termios::LocalModes::ECHO),
        "the chat left the terminal without its echo"
    );
}

#[tokio::test]
async fn ctrl_c_stops_the_answer_at_once_and_the_next_session_starts_clean() {
    let llm = FakeOpenAi::start().await;
    llm.push(
        Reply::text("Once upon a time there was a very long story").pace(Duration::from_secs(5)),
    );
    // The grace SIGTERM gives a daemon's turns must not hold up a chat someone left.
    let dir = chat_dir(&llm, "shutdown_grace_secs = 30\n");
    let mut chat = LiveChat::start(dir.path(), &[]);
    chat.say("tell me a long story");
    chat.wait_for("Once", WAIT).await;
    let interrupted = Instant::now();
    chat.signal(Signal::INT);
    let (status, stdout, stderr) = chat.finish(Duration::from_secs(25)).await;
    let took = interrupted.elapsed();
    eprintln!("Ctrl-C: hearth chat exited {took:?} after SIGINT");
    // 128 + SIGINT, as shells and most CLIs exit on Ctrl-C.
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(!stderr.contains("error: "), "{stderr}");
    assert!(
        took < Duration::from_secs(10),
        "Ctrl-C took {took:?} (the grace is 30 s)"
    );
    assert!(!stdout.contains("long story"), "{stdout}");

    let store = open_store(dir.path()).await;
    let turns: Vec<(String,)> = sqlx::query_as("SELECT status FROM turns")
        .fetch_all(store.pool())
        .await
        .expect("turns");
    assert_eq!(turns, [("cancelled".to_string(),)]);
    store.close().await;

    // Three lines, three answers: nothing of the abandoned story.
    echo_responder(&llm);
    let (code, stdout, stderr) = run_to_end(dir.path(), &["chat"], &[], "one\ntwo\nthree\n").await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout, "answer to: one\nanswer to: two\nanswer to: three\n",
        "{stderr}"
    );
}

#[tokio::test]
async fn a_killed_chat_session_is_not_resumed_by_the_next() {
    let llm = FakeOpenAi::start().await;
    llm.push(Reply::call("c1", "get_current_datetime", "{}"));
    let dir = chat_dir(&llm, "");
    // Autonomy "none" asks before every tool: the chat is killed while it asks.
    let env = [("HEARTH_TOOLS__AUTONOMY", "none")];
    let mut chat = LiveChat::start(dir.path(), &env);
    chat.say("what time is it?");
    chat.wait_for("[y/N]", WAIT).await;
    chat.signal(Signal::KILL);
    let (status, _, _) = chat.finish(WAIT).await;
    assert_eq!(status.code(), None, "killed");

    echo_responder(&llm);
    let (code, stdout, stderr) = run_to_end(dir.path(), &["chat"], &env, "one\ntwo\n").await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "answer to: one\nanswer to: two\n", "{stderr}");

    // The killed turn is closed like a cancelled one: its call answered as not run, its
    // confirmation expired, so the next turns' history stays well-formed for the model.
    let store = open_store(dir.path()).await;
    let turn: (String, Option<String>) =
        sqlx::query_as("SELECT status, error FROM turns ORDER BY id LIMIT 1")
            .fetch_one(store.pool())
            .await
            .expect("turn");
    assert_eq!(turn.0, "cancelled");
    assert!(
        turn.1
            .as_deref()
            .is_some_and(|e| e.contains("chat session ended")),
        "{turn:?}"
    );
    let call: (String,) = sqlx::query_as("SELECT status FROM tool_calls")
        .fetch_one(store.pool())
        .await
        .expect("call");
    assert_eq!(call.0, "cancelled");
    let confirmation: (String,) = sqlx::query_as("SELECT status FROM confirmations")
        .fetch_one(store.pool())
        .await
        .expect("confirmation");
    assert_eq!(confirmation.0, "expired");
    store.close().await;
    let requests = llm.requests();
    let last: &Value = requests.last().expect("requests");
    let messages = last["messages"].as_array().expect("messages");
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "user",
            "assistant",
            "user"
        ],
        "{last}"
    );
    assert!(
        messages[3]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("Not run")),
        "{last}"
    );
}

#[tokio::test]
async fn two_confirmations_in_one_turn_are_numbered_and_named() {
    let llm = FakeOpenAi::start().await;
    llm.push(Reply::tool_calls(vec![
        ToolCallSpec::new("c1", "get_current_datetime", "{}"),
        ToolCallSpec::new("c2", "calculate", r#"{"expression": "6 * 7"}"#),
    ]));
    llm.push(Reply::text("Done asking."));
    let dir = chat_dir(&llm, "");
    // Autonomy "none" asks before every tool, even harmless ones.
    let (code, stdout, stderr) = run_to_end(
        dir.path(),
        &["chat"],
        &[("HEARTH_TOOLS__AUTONOMY", "none")],
        "the time and six times seven please\ny\nn\n",
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("[1] 🔐") && stdout.contains("[2] 🔐"),
        "each prompt is numbered:\n{stdout}"
    );
    assert!(
        stdout.contains("[1] get_current_datetime {} — Approve within 10 minutes? [y/N] y"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            r#"[2] calculate {"expression":"6 * 7"} — Approve within 10 minutes? [y/N] n"#
        ),
        "{stdout}"
    );
    assert!(stdout.ends_with("Done asking.\n"), "{stdout}");
    // The arguments show once, on the y/N line, and no Markdown fence reaches the terminal.
    assert!(!stdout.contains("```"), "{stdout}");
    assert_eq!(stdout.matches("6 * 7").count(), 1, "{stdout}");
    // The tools' results, by call: the approved one ran, the denied one did not (its result
    // says so instead of 42). Looked up by call id: the time itself may well contain "42".
    let request = &llm.requests()[1];
    let result_of = |id: &str| {
        request["messages"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["tool_call_id"] == id))
            .map(|m| m["content"].to_string())
            .unwrap_or_default()
    };
    assert!(result_of("c1").contains("weekday"), "the approved call ran");
    let denied = result_of("c2");
    assert!(
        denied.contains("denied") && !denied.contains("42"),
        "{denied}"
    );
}

#[tokio::test]
async fn run_without_channels_says_so_in_one_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    std::fs::write(
        dir.path().join("hearth.toml"),
        format!("[daemon]\nhttp_listen = \"127.0.0.1:{port}\"\nshutdown_grace_secs = 1\n"),
    )
    .expect("config");
    let mut child = hearth_command(
        dir.path(),
        &["run"],
        &[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("hearth run starts");
    let stderr = collect(child.stderr.take().expect("stderr"));
    let url = format!("http://127.0.0.1:{port}/healthz");
    eventually("/healthz to answer without channels", async || {
        reqwest::get(&url).await.is_ok()
    })
    .await;
    signal_child(&child, Signal::TERM);
    let exit = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = stderr.lock().expect("buffer").clone();
    assert_eq!(exit.code(), Some(0), "{log}");
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("no channels configured"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(
        lines[0].contains("[channels.telegram]") && lines[0].contains("hearth chat"),
        "says how to add one:\n{log}"
    );
}

#[tokio::test]
async fn check_names_the_provider_chat_would_use_and_every_problem_of_a_section() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, stdout, stderr) = run_to_end(
        dir.path(),
        &["check"],
        &[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")],
        "",
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.contains("0 provider(s)"), "{stdout}");
    assert!(
        stdout.contains(
            "no [[providers]] configured: hearth uses the OpenAI-compatible API at http://127.0.0.1:8080/v1, model llama3.1"
        ),
        "{stdout}"
    );
    let (_, stdout, _) = run_to_end(
        dir.path(),
        &["check"],
        &[("ANTHROPIC_API_KEY", "sk-ant")],
        "",
    )
    .await;
    assert!(
        stdout.contains("the Anthropic API at https://api.anthropic.com")
            && stdout.contains("ANTHROPIC_API_KEY is set"),
        "{stdout}"
    );

    // A typo no longer hides the bad timezone beside it: both in one run.
    std::fs::write(
        dir.path().join("hearth.toml"),
        "[daemon]\ntimezon = \"Europe/Berlin\"\ntimezone = \"Mars/Olympus\"\n",
    )
    .expect("config");
    let (code, _, stderr) = run_to_end(dir.path(), &["check"], &[], "").await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("hearth.toml: daemon.timezon: unknown key `timezon`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hearth.toml: daemon.timezone: unknown timezone `Mars/Olympus`"),
        "{stderr}"
    );
}
