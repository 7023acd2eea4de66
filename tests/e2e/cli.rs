//! The `hearth` binary as a user runs it: exit codes, messages, and the terminal chat over a pipe.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};

use hearth_testkit::{FakeOpenAi, Reply};

use crate::support::{
    Signal, WAIT, eventually, free_port, hearth_binary, hearth_command, pending_pairing, poll,
    run_cli, run_cli_async, signal_child,
};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(dir: &Path, name: &str, content: &str) {
    std::fs::write(dir.join(name), content).expect("write file");
}

/// `hearth run` in `dir` with only `env` set (and a model API where nothing listens); its
/// stdout dropped, its stderr as `stderr` says.
fn spawn_run(dir: &Path, env: &[(&str, &str)], stderr: Stdio) -> Child {
    hearth_command(dir, &["run"], env)
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("hearth run starts")
}

/// How `child` exits, waited for off the runtime's threads.
async fn exit_status(mut child: Child) -> ExitStatus {
    tokio::task::spawn_blocking(move || child.wait().expect("wait"))
        .await
        .expect("join")
}

/// `hearth chat` in `dir` against the model API at `url`, typing `stdin`.
async fn chat_at(dir: &Path, url: &str, stdin: &str) -> std::process::Output {
    run_cli_async(dir, &["chat"], &[("OPENAI_BASE_URL", url)], stdin).await
}

/// A directory with a hearth.toml whose one provider is `llm` as a cloud: its key in `MY_KEY`.
fn cloud_config(llm: &FakeOpenAi) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "hearth.toml",
        &format!(
            "[[providers]]\nname = \"cloud\"\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"MY_KEY\"\nmodel = \"m\"\n",
            llm.base_url()
        ),
    );
    dir
}

#[cfg(feature = "telegram")]
#[test]
fn check_reports_every_config_error_with_file_key_and_reason_and_exits_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "hearth.toml",
        r#"
[daemon]
timezone = "Mars/Olympus"
http_listen = "not an address"

[[providers]]
name = "local"
kind = "openai"
base_url = "ftp://example.org"
model = "m"
fallbacks = ["nowhere"]

[router]
sticky_minutes = "long"

[channels.telegram]
token_env = "HEARTH_TEST_UNSET_TOKEN"
allowed_users = [1]
tokn = "typo"
"#,
    );
    let out = run_cli(dir.path(), &["check"], &[], "");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for expected in [
        "hearth.toml: daemon.timezone",
        "hearth.toml: daemon.http_listen",
        "hearth.toml: providers[0].base_url",
        "hearth.toml: providers[0].fallbacks",
        "hearth.toml: router.sticky_minutes",
        "hearth.toml: channels.telegram",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    assert!(
        stderr.contains("tokn"),
        "the unknown key is named:\n{stderr}"
    );
}

#[test]
fn check_reports_syntax_errors_missing_files_and_agent_problems() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "broken.toml", "[daemon\ntimezone = 1\n");
    let out = run_cli(dir.path(), &["--config", "broken.toml", "check"], &[], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("broken.toml"),
        "{}",
        text(&out.stderr)
    );

    let out = run_cli(dir.path(), &["--config", "missing.toml", "check"], &[], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("missing.toml"));

    write(
        dir.path(),
        "agents.toml",
        "[[agent]]\nid = \"Bad Id\"\nname = \"\"\nsystem_prompt = \"x\"\n",
    );
    write(
        dir.path(),
        "hearth.toml",
        "[router]\nagents_file = \"agents.toml\"\n",
    );
    let out = run_cli(dir.path(), &["check"], &[], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("agents.toml"),
        "{}",
        text(&out.stderr)
    );

    write(
        dir.path(),
        "hearth.toml",
        "[router]\ndefault_agent = \"nobody\"\n",
    );
    let out = run_cli(dir.path(), &["check"], &[], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("nobody"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn check_accepts_no_file_and_a_good_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = run_cli(dir.path(), &["check"], &[], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("configuration OK"));

    // The example exactly as shipped, with no variable set: what needs an account is
    // commented out, so a newcomer's first `check` passes.
    write(
        dir.path(),
        "hearth.toml",
        include_str!("../../data/hearth.example.toml"),
    );
    let out = run_cli(dir.path(), &["check"], &[], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("configuration OK"), "{stdout}");
    assert!(!stdout.contains("warning"), "{stdout}");
}

#[test]
fn route_explains_the_decision_and_agents_export_writes_the_shipped_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = run_cli(dir.path(), &["route", "I spent 12 euros on lunch"], &[], "");
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("finance") && stdout.contains("spent"),
        "{stdout}"
    );
    // An agent that does not exist is said, not routed as a conversation with nobody.
    let out = run_cli(
        dir.path(),
        &["route", "hello", "--current", "finanse"],
        &[],
        "",
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("--current: there is no agent `finanse`"),
        "{}",
        text(&out.stderr)
    );

    let out = run_cli(dir.path(), &["agents", "export"], &[], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(dir.path().join("data/agents.toml").exists());
    let out = run_cli(dir.path(), &["agents", "export"], &[], "");
    assert_eq!(out.status.code(), Some(2), "refuses to overwrite");
    let out = run_cli(dir.path(), &["agents", "show", "finance"], &[], "");
    assert!(
        text(&out.stdout).contains("keywords"),
        "{}",
        text(&out.stdout)
    );
    let out = run_cli(dir.path(), &["bogus-command"], &[], "");
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn chat_over_a_pipe_answers_each_line_once_in_order() {
    let llm = FakeOpenAi::start().await;
    llm.push(Reply::text("first answer"));
    llm.push(Reply::text("second answer").streamed(true));
    let dir = tempfile::tempdir().expect("temp dir");
    let url = llm.base_url();
    let out = chat_at(dir.path(), &url, "hello\n\nhow are you?\n/whoami\n").await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "first answer", "{stdout}");
    assert_eq!(lines[1], "second answer", "{stdout}");
    assert!(
        lines[2].starts_with("You are terminal:local (the owner"),
        "{stdout}"
    );
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(
        dir.path().join("data/hearth.db").exists(),
        "SQLite under ./data by default"
    );
    assert_eq!(llm.request_count(), 2);
}

/// The defect, as a new user met it: with no configuration the database went to `./data` of the
/// current directory (another directory, another assistant) and the timezone was UTC with `TZ`
/// set ("remind me at 9" an hour off). Now both follow the user, and `check` says so.
#[tokio::test]
async fn without_a_configuration_data_follows_the_user_and_time_follows_tz() {
    let llm = FakeOpenAi::start().await;
    llm.push(Reply::text("hello there"));
    let home = tempfile::tempdir().expect("home");
    let here = tempfile::tempdir().expect("one directory");
    let elsewhere = tempfile::tempdir().expect("another directory");
    let home_path = home.path().display().to_string();
    let url = llm.base_url();
    let env = [
        ("HOME", home_path.as_str()),
        ("TZ", "Asia/Tokyo"),
        ("OPENAI_BASE_URL", url.as_str()),
    ];
    let run =
        async |dir: &Path, args: &[&str], stdin: &str| run_cli_async(dir, args, &env, stdin).await;

    let out = run(here.path(), &["check"], "").await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!(
            "data dir: {home_path}/.local/share/hearth (default: ~/.local/share/hearth"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("timezone: Asia/Tokyo (default: $TZ)"),
        "{stdout}"
    );

    let out = run(here.path(), &["chat"], "hi\n").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "hello there");
    assert!(home.path().join(".local/share/hearth/hearth.db").exists());
    assert!(
        !here.path().join("data").exists(),
        "nothing in the current directory"
    );

    // From another directory the same assistant answers: its database is found.
    let out = run(elsewhere.path(), &["pair", "list"], "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("terminal:local"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn chat_without_a_provider_says_how_to_configure_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A port nothing listens on stands in for "no Ollama here".
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let out = run_cli(
        dir.path(),
        &["chat"],
        &[("OPENAI_BASE_URL", &url)],
        "hello\n",
    );
    // Before, the chat opened, printed three log lines and the hint as a reply, and exited 0:
    // now it says only the hint, as its error, and fails.
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(text(&out.stdout), "", "no chat was opened");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("No model provider answered")
            && stderr.contains(&url)
            && stderr.contains("OPENAI_API_KEY"),
        "{stderr}"
    );
}

/// A server on loopback that answers every request with an HTML 501 page, as Python's
/// `http.server` does: something listens, but it is no model API.
async fn html_501_server() -> (String, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::NOT_IMPLEMENTED,
            [(axum::http::header::CONTENT_TYPE, "text/html;charset=utf-8")],
            "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head>\n<title>Error response</title>\n</head>\n<body>\n<h1>Error response</h1>\n<p>Error code: 501</p>\n</body>\n</html>\n",
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let task = tokio::spawn(async move {
        // Ends when the test aborts it.
        let _ = axum::serve(listener, app).await;
    });
    (url, task)
}

/// The defect: a server that answers but is not OpenAI-compatible passed the start check (a
/// TCP connect), then each message got the error page and three warnings, and the chat exited 0.
#[tokio::test]
async fn chat_refuses_a_server_that_is_no_model_api_in_one_line() {
    let (url, server) = html_501_server().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let out = chat_at(dir.path(), &url, "hello\n").await;
    server.abort();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(text(&out.stdout), "", "no chat was opened");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("{url}/models answered HTTP 501 Not Implemented"))
            && stderr.contains("not an OpenAI-compatible API"),
        "{stderr}"
    );
    assert!(!stderr.contains("<html"), "{stderr}");
}

#[tokio::test]
async fn chat_names_a_refused_key_and_an_unreachable_cloud_by_their_cause() {
    let llm = FakeOpenAi::start().await;
    llm.require_api_key("sk-right");
    let dir = cloud_config(&llm);
    let out = run_cli_async(
        dir.path(),
        &["chat"],
        &[("MY_KEY", "sk-wrong-SECRET")],
        "hello\n",
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("provider `cloud`")
            && stderr.contains("refused the credentials (HTTP 401")
            && stderr.contains("check the key in MY_KEY"),
        "{stderr}"
    );
    assert!(!stderr.contains("SECRET"), "the key leaked: {stderr}");
    assert_eq!(llm.request_count(), 0, "no chat request was sent");

    // An OpenAI key in the environment means a cloud API: when it cannot be reached the cause is
    // said, not advice to start Ollama.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let dir = tempfile::tempdir().expect("temp dir");
    let out = run_cli(
        dir.path(),
        &["chat"],
        &[("OPENAI_API_KEY", "sk-x"), ("OPENAI_BASE_URL", &url)],
        "hello\n",
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot connect to 127.0.0.1:{port}: connection refused"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("ollama"), "{stderr}");
}

#[tokio::test]
async fn piped_chat_exits_1_when_every_message_failed_and_0_when_one_was_answered() {
    let llm = FakeOpenAi::start().await;
    // 400 is not retried: each message fails at once.
    llm.set_responder(|_| Reply::error(400, "model `m` does not exist"));
    let dir = tempfile::tempdir().expect("temp dir");
    let url = llm.base_url();
    let out = chat_at(dir.path(), &url, "hello\nagain\n").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("every message failed (2 of 2)") && stderr.contains("does not exist"),
        "{stderr}"
    );

    llm.push(Reply::text("answered"));
    let out = chat_at(dir.path(), &url, "hello\nagain\n").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("answered"));
}

#[test]
fn migrate_and_pairing_from_the_command_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = run_cli(dir.path(), &["migrate"], &[], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("migration(s) applied"));

    let out = run_cli(dir.path(), &["pair", "approve", "NOSUCHCODE"], &[], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no pairing code"),
        "{}",
        text(&out.stderr)
    );
    let out = run_cli(dir.path(), &["pair", "revoke", "bad"], &[], "");
    assert_eq!(out.status.code(), Some(2));
    let out = run_cli(dir.path(), &["pair"], &[], "");
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("no pending pairing codes"));

    let out = run_cli(
        dir.path(),
        &["pair", "permission", "telegram:1", "superuser"],
        &[],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("none, read, write, execute, admin"),
        "{}",
        text(&out.stderr)
    );
    let out = run_cli(
        dir.path(),
        &["pair", "autonomy", "telegram:1", "high"],
        &[],
        "",
    );
    assert_eq!(out.status.code(), Some(2), "no such identity yet");
    assert!(
        text(&out.stderr).contains("no identity telegram:1"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn run_serves_health_reloads_agents_on_sighup_and_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    write(
        dir.path(),
        "hearth.toml",
        &format!(
            "[daemon]\nhttp_listen = \"127.0.0.1:{port}\"\nshutdown_grace_secs = 1\n[router]\nagents_file = \"agents.toml\"\n"
        ),
    );
    write(
        dir.path(),
        "agents.toml",
        "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"Be kind.\"\n",
    );
    let mut child = spawn_run(dir.path(), &[], Stdio::piped());

    let url = format!("http://127.0.0.1:{port}/healthz");
    let response = poll(WAIT, async || reqwest::get(&url).await.ok())
        .await
        .expect("/healthz answers");
    assert_eq!(response.status(), 200);
    // `hearth status` reads the same, without curl.
    let status = run_cli_async(dir.path(), &["status"], &[], "").await;
    let said = text(&status.stdout);
    assert_eq!(
        status.status.code(),
        Some(0),
        "{said}{}",
        text(&status.stderr)
    );
    assert!(
        said.starts_with(&format!("hearth at 127.0.0.1:{port}: ok\n")),
        "{said}"
    );
    assert!(
        said.contains("  database: ok\n") && said.contains("  queues: "),
        "{said}"
    );

    // A new agent appears after SIGHUP, without a restart.
    write(
        dir.path(),
        "agents.toml",
        "[[agent]]\nid = \"general\"\nname = \"General\"\nsystem_prompt = \"Be kind.\"\n\n[[agent]]\nid = \"cook\"\nname = \"Cook\"\nsystem_prompt = \"Recipes.\"\n",
    );
    signal_child(&child, Signal::HUP);
    let store = hearth::store::Store::connect(&format!(
        "sqlite://{}",
        dir.path().join("data/hearth.db").display()
    ))
    .await
    .expect("open the daemon's database");
    eventually("the agents to be reloaded on SIGHUP", async || {
        store.active_agent_ids().await.expect("query") == ["general", "cook"]
    })
    .await;
    store.close().await;

    signal_child(&child, Signal::TERM);
    let out = tokio::task::spawn_blocking(move || {
        let status = child.wait().expect("wait");
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            std::io::Read::read_to_string(&mut pipe, &mut stderr).expect("read stderr");
        }
        (status, stderr)
    })
    .await
    .expect("join");
    assert_eq!(out.0.code(), Some(0), "{}", out.1);
    assert!(out.1.contains("SIGTERM"), "{}", out.1);
    // The log's first line names the version it runs.
    assert!(
        out.1.contains("hearth started") && out.1.contains("(commit "),
        "{}",
        out.1
    );
    // With the daemon gone, `status` says nobody answered, and fails.
    let status = run_cli_async(dir.path(), &["status"], &[], "").await;
    assert_eq!(status.status.code(), Some(1));
    assert!(
        text(&status.stderr).contains("no hearth answered"),
        "{}",
        text(&status.stderr)
    );
}

#[tokio::test]
async fn chat_asks_approve_y_n_on_stdin() {
    let llm = FakeOpenAi::start().await;
    llm.push(Reply::tool_calls(vec![hearth_testkit::ToolCallSpec::new(
        "c1",
        "get_current_datetime",
        "{}",
    )]));
    llm.push(Reply::text("It is noon."));
    llm.push(Reply::tool_calls(vec![hearth_testkit::ToolCallSpec::new(
        "c2",
        "get_current_datetime",
        "{}",
    )]));
    llm.push(Reply::text("Fine, I will not look."));
    let dir = tempfile::tempdir().expect("temp dir");
    let url = llm.base_url();
    // Autonomy "none" asks before every tool, even a harmless read.
    let env = [
        ("OPENAI_BASE_URL", url.as_str()),
        ("HEARTH_TOOLS__AUTONOMY", "none"),
    ];
    let stdin = "what time is it?\ny\nand again?\nn\n";
    let out = run_cli_async(dir.path(), &["chat"], &env, stdin).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Each prompt asks once: its closing question is the y/N line, not printed before it too.
    assert_eq!(
        stdout
            .matches("get_current_datetime {} — Approve within 10 minutes? [y/N]")
            .count(),
        2,
        "{stdout}"
    );
    assert_eq!(stdout.matches("Approve within").count(), 2, "{stdout}");
    assert!(
        stdout.contains("wants to run `get_current_datetime`"),
        "{stdout}"
    );
    assert!(stdout.contains("✅ Approved by local"), "{stdout}");
    assert!(stdout.contains("❌ Denied by local"), "{stdout}");
    let noon = stdout.find("It is noon.").expect("first answer");
    let fine = stdout
        .find("Fine, I will not look.")
        .expect("second answer");
    assert!(noon < fine, "{stdout}");
    let requests = llm.requests();
    assert!(
        requests[1].to_string().contains("weekday"),
        "the approved tool ran"
    );
    assert!(
        requests[3].to_string().contains("denied"),
        "the denied one did not"
    );
}

#[tokio::test]
async fn run_speaks_the_systemd_notify_protocol() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket_path = dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).expect("bind notify socket");
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    let port = free_port();
    write(
        dir.path(),
        "hearth.toml",
        &format!("[daemon]\nhttp_listen = \"127.0.0.1:{port}\"\nshutdown_grace_secs = 1\n"),
    );
    let env = [
        ("NOTIFY_SOCKET", socket_path.to_str().expect("a UTF-8 path")),
        ("WATCHDOG_USEC", "200000"),
    ];
    let child = spawn_run(dir.path(), &env, Stdio::null());
    let received = tokio::task::spawn_blocking(move || {
        let mut messages = Vec::new();
        let mut buf = [0u8; 1024];
        while messages.len() < 4 {
            match socket.recv(&mut buf) {
                Ok(n) => messages.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
                Err(_) => break,
            }
        }
        (messages, socket)
    })
    .await
    .expect("join");
    let (messages, socket) = received;
    assert_eq!(
        messages.first().map(String::as_str),
        Some("STATUS=starting"),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("READY=1\nSTATUS=running")),
        "{messages:?}"
    );
    assert!(
        messages.iter().filter(|m| *m == "WATCHDOG=1").count() >= 1,
        "{messages:?}"
    );

    signal_child(&child, Signal::TERM);
    let stopping = tokio::task::spawn_blocking(move || {
        let mut buf = [0u8; 1024];
        loop {
            match socket.recv(&mut buf) {
                Ok(n) if buf[..n].starts_with(b"STOPPING=1") => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    })
    .await
    .expect("join");
    assert!(stopping, "STOPPING=1 was sent");
    let status = exit_status(child).await;
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn backup_copies_the_database_while_the_daemon_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    write(
        dir.path(),
        "hearth.toml",
        &format!("[daemon]\nhttp_listen = \"127.0.0.1:{port}\"\nshutdown_grace_secs = 1\n"),
    );
    let child = spawn_run(dir.path(), &[], Stdio::null());
    let url = format!("http://127.0.0.1:{port}/healthz");
    eventually("the daemon to come up", async || {
        reqwest::get(&url).await.is_ok()
    })
    .await;

    // As a user runs it: with the usual umask 022, which left the copy world-readable.
    let hearth = hearth_binary();
    let mut backup = Command::new("sh");
    backup
        .args(["-c", "umask 022 && exec \"$0\" backup copy.db", hearth])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    let out = tokio::task::spawn_blocking(move || backup.output().expect("sh runs"))
        .await
        .expect("join");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("copy.db"))
            .expect("the copy")
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "the copy is the owner's alone: {mode:o}"
        );
    }
    let copy = hearth::store::Store::connect(&format!(
        "sqlite://{}",
        dir.path().join("copy.db").display()
    ))
    .await
    .expect("the copy opens");
    assert_eq!(
        copy.migrate().await.expect("migrations"),
        0,
        "the copy has the whole schema"
    );
    copy.close().await;

    let out = run_cli_async(dir.path(), &["backup", "copy.db"], &[], "").await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "an existing file is not overwritten"
    );

    signal_child(&child, Signal::TERM);
    let status = exit_status(child).await;
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn secrets_stay_out_of_logs_and_errors() {
    let llm = FakeOpenAi::start().await;
    llm.push(Reply::error(
        401,
        "Incorrect API key provided: sk-hearth-SECRET-1234",
    ));
    let dir = cloud_config(&llm);
    let out = run_cli_async(
        dir.path(),
        &["chat"],
        &[("MY_KEY", "sk-hearth-SECRET-1234"), ("RUST_LOG", "debug")],
        "hello\n",
    )
    .await;
    let everything = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        everything.contains("refused the credentials"),
        "{everything}"
    );
    assert!(
        !everything.contains("SECRET-1234"),
        "the key leaked:\n{everything}"
    );
    assert_eq!(
        llm.recorded()[0].header("authorization"),
        Some("Bearer sk-hearth-SECRET-1234")
    );
}

/// The defect, as a new user met it: `hearth backup x.db` in another directory printed "wrote a
/// consistent copy" of a database it had just created empty, and `pair approve CODE` said "no
/// pairing code" while the service's database held it.
#[test]
fn commands_that_read_stored_data_refuse_a_database_that_does_not_exist() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "hearth.toml", "[daemon]\ntimezone = \"UTC\"\n");
    let expected = dir.path().join("data").join("hearth.db");
    for args in [
        &["pair", "list"][..],
        &["pair", "approve", "ABCD2345"],
        &["backup", "copy.db"],
        &["schedule", "run", "brief"],
    ] {
        let out = run_cli(dir.path(), args, &[], "");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("no database at {}", expected.display())),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("--config /etc/hearth/hearth.toml"),
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    assert!(!dir.path().join("data").exists(), "nothing was created");
    assert!(!dir.path().join("copy.db").exists());
}

/// The defect, as a new user met it: the docs installed the configuration root-owned 0640,
/// the unit runs as a dynamic user, and hearth exited 2 ("Permission denied") every 5 s for
/// ever. Here the install line of docs/operations.md ("Running as a service") places the file,
/// and hearth reads it as an unprivileged user, as the service would.
#[test]
fn the_documented_service_install_lets_an_unprivileged_user_read_the_configuration() {
    let is_root = std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    if !is_root || !Path::new("/usr/bin/setpriv").exists() {
        return eprintln!("skipped: needs root and setpriv to act as another user");
    }
    let operations = include_str!("../../docs/operations.md");
    let line = operations
        .lines()
        .find(|l| l.contains("install -Dm") && l.contains("/etc/hearth/hearth.toml"))
        .expect("docs/operations.md installs the configuration");
    let mode = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("-Dm"))
        .expect("the install line gives a mode");
    let dir = tempfile::tempdir().expect("temp dir");
    // The service sees only the file; its directory is as /etc is: traversable by anyone.
    let etc = dir.path().join("etc/hearth");
    std::fs::create_dir_all(&etc).expect("etc dir");
    for d in [dir.path(), &dir.path().join("etc"), &etc] {
        std::process::Command::new("chmod")
            .args(["755", &d.display().to_string()])
            .status()
            .expect("chmod");
    }
    write(
        dir.path(),
        "hearth.toml",
        "[daemon]\ntimezone = \"Europe/Berlin\"\n",
    );
    let installed = etc.join("hearth.toml");
    let status = std::process::Command::new("install")
        .arg(format!("-Dm{mode}"))
        .arg(dir.path().join("hearth.toml"))
        .arg(&installed)
        .status()
        .expect("install runs");
    assert!(status.success());
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(hearth_binary())
        .arg("--config")
        .arg(&installed)
        .arg("check")
        .current_dir("/")
        .env_clear()
        .output()
        .expect("hearth runs as nobody");
    assert_eq!(
        out.status.code(),
        Some(0),
        "mode {mode}: {}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("configuration OK"),
        "{}",
        text(&out.stdout)
    );
    // And a configuration error is not restarted for ever.
    let unit = include_str!("../../systemd/hearth.service");
    assert!(
        unit.lines()
            .any(|l| l.trim() == "RestartPreventExitStatus=2"),
        "{unit}"
    );
}

/// The README's command for approving a pairing code against the service's database, run as a
/// user would: the configuration placed as docs/operations.md installs it (with the `data_dir`
/// it says to set), the database made by the service's own unprivileged user in its state
/// directory, then the command typed as root from another directory with a root's environment.
#[tokio::test]
async fn the_readmes_pair_approve_command_reaches_the_services_database() {
    use std::os::unix::fs::PermissionsExt;
    let is_root = std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    if !is_root || !Path::new("/usr/bin/setpriv").exists() {
        return eprintln!("skipped: needs root and setpriv to act as the service's user");
    }
    let readme = include_str!("../../README.md");
    let command = readme
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("sudo hearth --config /etc/hearth/hearth.toml pair approve"))
        .expect("the README gives the command");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // The unit's StateDirectory=hearth with StateDirectoryMode=0700, owned by its user.
    let state = dir.path().join("var/lib/hearth");
    std::fs::create_dir_all(&state).expect("state dir");
    for d in [dir.path().join("var"), dir.path().join("var/lib")] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::os::unix::fs::chown(&state, Some(65534), Some(65534)).expect("chown");
    let etc = dir.path().join("etc/hearth");
    std::fs::create_dir_all(&etc).expect("etc dir");
    for d in [dir.path().join("etc"), etc.clone()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let config = etc.join("hearth.toml");
    write(
        &etc,
        "hearth.toml",
        &format!("[daemon]\ndata_dir = \"{}\"\n", state.display()),
    );
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).expect("chmod");

    // The service makes its database, as its own user, in its working directory.
    let service = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(hearth_binary())
        .arg("--config")
        .arg(&config)
        .arg("migrate")
        .current_dir(&state)
        .env_clear()
        .env("STATE_DIRECTORY", &state)
        .env("HOME", "/")
        .output()
        .expect("hearth runs as the service's user");
    assert_eq!(service.status.code(), Some(0), "{}", text(&service.stderr));
    // A stranger wrote to the bot and got a code.
    let url = format!("sqlite://{}", state.join("hearth.db").display());
    pending_pairing(&url, "QWER2345", "777", "Mum").await;

    // The README's command, with the test's paths, typed as root elsewhere (sudo: root's HOME).
    let typed = command
        .replace("/etc/hearth/hearth.toml", &config.display().to_string())
        .replace("CODE", "QWER2345");
    let words: Vec<&str> = typed.split_whitespace().collect();
    assert_eq!(&words[..2], ["sudo", "hearth"], "{typed}");
    let out = run_cli_async(Path::new("/"), &words[2..], &[("HOME", "/root")], "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("approved telegram:777"),
        "{}",
        text(&out.stdout)
    );
}

/// The newcomer's walk as a user takes it: `hearth init` (piped, so from flags), then
/// `hearth check` and `hearth chat` from another directory, on a fresh data directory, with a
/// model server speaking OpenAI's API. The file init wrote is the user's
/// (`~/.config/hearth/hearth.toml`), found from anywhere.
#[tokio::test]
async fn init_then_check_then_chat_on_a_fresh_data_directory() {
    let llm = FakeOpenAi::start().await;
    llm.set_models(&["walk-model", "other-model"]);
    llm.push(Reply::text("Hello! How can I help?"));
    let home = tempfile::tempdir().expect("home");
    let first_dir = tempfile::tempdir().expect("working directory");
    let elsewhere = tempfile::tempdir().expect("another directory");
    let home_path = home.path().display().to_string();
    let written = format!("{home_path}/.config/hearth/hearth.toml");
    let url = llm.base_url();
    let run_in = |dir: &Path, args: Vec<String>, stdin: &'static str| {
        let dir = dir.to_path_buf();
        let home_path = home_path.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_cli(
                &dir,
                &args,
                &[("HOME", home_path.as_str()), ("TZ", "Europe/Berlin")],
                stdin,
            )
        })
    };
    let words = |line: &str| {
        line.split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let run = |args: Vec<String>, stdin: &'static str| run_in(elsewhere.path(), args, stdin);

    // Before init, with no server: the error says that no file was found, and where hearth
    // looked.
    let out = run_cli_async(
        elsewhere.path(),
        &["chat"],
        &[
            ("HOME", home_path.as_str()),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ],
        "hello\n",
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "No configuration file was found (hearth looked for ./hearth.toml, {written}, /etc/hearth/hearth.toml)"
        )),
        "{stderr}"
    );

    let out = run_in(
        first_dir.path(),
        words(&format!("init --base-url {url} --model walk-model")),
        "",
    )
    .await
    .expect("join");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(&format!("wrote {written}")), "{stdout}");
    assert!(
        stdout.contains(&format!("configuration OK: {written}")),
        "{stdout}"
    );
    assert!(!first_dir.path().join("hearth.toml").exists());
    assert!(
        stdout.ends_with("next: `hearth doctor`, then `hearth chat`\n"),
        "{stdout}"
    );
    // Without a chat channel the owner is the terminal's user: owner notices reach someone.
    let file = std::fs::read_to_string(&written).expect("the file init wrote");
    assert!(file.contains("owner = \"terminal:local\""), "{file}");
    assert!(
        stdout.contains(&format!("data dir: {home_path}/.local/share/hearth")),
        "{stdout}"
    );
    assert!(
        stdout.contains("timezone: Europe/Berlin (default: $TZ)"),
        "{stdout}"
    );

    let out = run(words("check"), "").await.expect("join");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("configuration OK: {written}")),
        "found from another directory: {}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stdout).contains(&format!(
            "looked for, in order: ./hearth.toml, {written}, /etc/hearth/hearth.toml"
        )),
        "{}",
        text(&out.stdout)
    );

    let out = run(words("chat"), "hello\n").await.expect("join");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "Hello! How can I help?");
    let asked = llm.requests();
    assert_eq!(asked.last().expect("asked")["model"], "walk-model");
    assert!(home.path().join(".local/share/hearth/hearth.db").exists());

    // A second init does not overwrite the first; a bad answer names the flag.
    let out = run(words("init"), "").await.expect("join");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("exists already"),
        "{}",
        text(&out.stderr)
    );
    // A model the server does not list is refused, naming the ones it does.
    let out = run(
        words(&format!("init --force --base-url {url} --model nosuch")),
        "",
    )
    .await
    .expect("join");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("does not list `nosuch`; it offers walk-model, other-model"),
        "{}",
        text(&out.stderr)
    );
    let out = run(words("init --force --channel telegram --user me"), "")
        .await
        .expect("join");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--user"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn version_names_the_commit_and_the_channels_built_in() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = run_cli(dir.path(), &["--version"], &[], "");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let commit = stdout
        .split("(commit ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect("a commit");
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{stdout}"
    );
    #[cfg(feature = "telegram")]
    assert!(stdout.contains("channels: telegram"), "{stdout}");

    for shell in ["bash", "zsh", "fish"] {
        let out = run_cli(dir.path(), &["completions", shell], &[], "");
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("schedule"), "{shell}");
    }
    // A reader that stops early closes the pipe: no panic, exit 0.
    let out = Command::new("bash")
        .args([
            "-c",
            "set -o pipefail; \"$0\" completions bash | head -1",
            hearth_binary(),
        ])
        .output()
        .expect("bash runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "quiet on a closed pipe");
    assert_eq!(text(&out.stdout).lines().count(), 1);
    let out = run_cli(dir.path(), &["completions", "tcsh"], &[], "");
    assert_eq!(out.status.code(), Some(2), "an unknown shell is bad usage");
    // -v and --log-level reach the log; a level that does not exist is bad usage.
    let out = run_cli(dir.path(), &["--log-level", "loud", "check"], &[], "");
    assert_eq!(out.status.code(), Some(2));
}

/// `hearth doctor` against the test kit's servers, one of them down: a line for each, the
/// failed one with its fix, and exit 1; with the down one left out, exit 0.
#[tokio::test]
async fn doctor_checks_each_server_and_names_the_one_that_is_down() {
    let llm = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let down = free_port();
    let provider = format!(
        "[daemon]\ntimezone = \"Europe/Berlin\"\n\n[[providers]]\nname = \"local\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\n",
        llm.base_url()
    );
    write(
        dir.path(),
        "hearth.toml",
        &format!(
            "{provider}\n[[mcp_servers]]\nname = \"homeassistant\"\nurl = \"http://127.0.0.1:{down}/mcp\"\ntimeout_secs = 3\n"
        ),
    );
    let out = run_cli_async(dir.path(), &["doctor"], &[], "").await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let line = |start: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?} in:\n{stdout}"))
            .to_string()
    };
    assert!(
        line("ok   provider `local`").contains("model(s)"),
        "{stdout}"
    );
    assert!(line("FAIL mcp homeassistant").contains("fix:"), "{stdout}");
    assert!(
        line("ok   data dir").contains("writable") && line("ok   data dir").contains("MiB free"),
        "{stdout}"
    );
    assert!(line("ok   database").contains("none yet"), "{stdout}");
    assert!(line("ok   clock").contains("Europe/Berlin"), "{stdout}");
    assert!(
        text(&out.stderr).contains("1 check(s) failed"),
        "{}",
        text(&out.stderr)
    );

    write(dir.path(), "hearth.toml", &provider);
    let out = run_cli_async(dir.path(), &["doctor"], &[], "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    // A model the server does not list is a warning (an alias may still work), with the fix.
    write(
        dir.path(),
        "hearth.toml",
        &provider.replace("model = \"fake-model\"", "model = \"nosuch\""),
    );
    let out = run_cli_async(dir.path(), &["doctor"], &[], "").await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let warned = stdout
        .lines()
        .find(|l| l.starts_with("warn provider `local`"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        warned.contains(
            "`nosuch` is not among its 1 model(s) (fake-model) — fix: set model to one of them"
        ),
        "{warned}"
    );

    // A server that is down: one cause and one fix on its line.
    write(
        dir.path(),
        "hearth.toml",
        &provider.replace(&llm.base_url(), &format!("http://127.0.0.1:{down}/v1")),
    );
    let out = run_cli_async(dir.path(), &["doctor"], &[], "").await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let failed = stdout
        .lines()
        .find(|l| l.starts_with("FAIL provider `local`"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(
        failed,
        format!(
            "FAIL provider `local`: cannot connect to 127.0.0.1:{down}: connection refused (nothing listens there) — fix: start the model server there, or correct base_url"
        )
    );
}

/// `hearth doctor` on a data directory whose disk is nearly full (a real 2 MiB tmpfs): the data
/// dir line fails with the free space and the fix, and the doctor exits 1.
#[tokio::test]
async fn doctor_names_a_nearly_full_disk() {
    use hearth_testkit::tmpfs::Tmpfs;
    let llm = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let _disk = match Tmpfs::mount(&data, 2 * 1024 * 1024) {
        Ok(disk) => disk,
        Err(why) => return eprintln!("skipped: a tmpfs is needed for a real small disk: {why}"),
    };
    write(
        dir.path(),
        "hearth.toml",
        &format!(
            "[daemon]\ndata_dir = \"{}\"\n\n[[providers]]\nname = \"local\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n",
            data.display(),
            llm.base_url()
        ),
    );
    let out = run_cli_async(dir.path(), &["doctor"], &[], "").await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let line = stdout
        .lines()
        .find(|l| l.starts_with("FAIL data dir"))
        .unwrap_or_else(|| panic!("no failed data dir line in:\n{stdout}"));
    assert!(
        line.contains("MiB free") && line.contains("fix: free disk space"),
        "{line}"
    );
}

/// `hearth doctor` asks each chat platform what it can without disturbing a running daemon:
/// Telegram's `getMe`, Discord's bot user and its Message Content intent. A refused token and
/// an intent switched off are failures with their fix.
#[cfg(all(feature = "telegram", feature = "discord"))]
#[tokio::test]
async fn doctor_asks_each_chat_platform_and_names_what_to_fix() {
    let llm = FakeOpenAi::start().await;
    let telegram = hearth_testkit::telegram::FakeTelegram::start("123:tg-token").await;
    let discord = hearth_testkit::discord::FakeDiscord::start("dc-token").await;
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "hearth.toml",
        &format!(
            "[[providers]]\nname = \"local\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n\n\
             [channels.telegram]\ntoken_env = \"TG\"\napi_url = \"{}\"\nallowed_users = [42]\n\n\
             [channels.discord]\ntoken_env = \"DC\"\napi_url = \"{}\"\nallowed_users = [\"42\"]\n",
            llm.base_url(),
            telegram.api_url(),
            discord.api_url()
        ),
    );
    let doctor = async |dir: &Path| {
        run_cli_async(
            dir,
            &["doctor"],
            &[("TG", "123:tg-token"), ("DC", "dc-token")],
            "",
        )
        .await
    };
    let out = doctor(dir.path()).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("ok   channel telegram: getMe: the token belongs to @"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ok   channel discord: the token belongs to"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ok   channel discord: the Message Content intent is on"),
        "{stdout}"
    );

    // The intent switched off in the Developer Portal, and a token Telegram refuses.
    discord.set_application_flags(0);
    telegram.set_token_valid(false);
    let out = doctor(dir.path()).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let intent = stdout
        .lines()
        .find(|l| l.starts_with("FAIL channel discord: the Message Content intent is off"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(intent.contains("fix: Developer Portal"), "{intent}");
    let token = stdout
        .lines()
        .find(|l| l.starts_with("FAIL channel telegram: getMe"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(token.contains("@BotFather"), "{token}");
    assert!(
        !stdout.contains("tg-token"),
        "the token is never printed: {stdout}"
    );
}

/// The walk's M5: a setup without `daemon.owner` (as `hearth init --channel none` made it
/// before) and a budget. The person at `hearth chat` is the owner there, so the budget warning
/// comes into the chat instead of a raw WARN line saying it went to nobody.
#[tokio::test]
async fn with_no_owner_configured_the_terminal_user_hears_owner_notices_in_the_chat() {
    let llm = FakeOpenAi::start().await;
    llm.push(Reply::text("First answer.").usage(600_000, 0));
    llm.push(Reply::text("Second answer.").usage(10, 0));
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "hearth.toml",
        &format!(
            "[[providers]]\nname = \"fake\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\nmax_retries = 0\nprice_input_per_mtok = 1.0\nprice_output_per_mtok = 1.0\n\n[budget]\ndaily_usd = 1.0\nwarn_at = 0.5\n",
            llm.base_url()
        ),
    );
    let out = run_cli_async(dir.path(), &["chat"], &[], "hello one\nhello two\n").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("💸 60% of today's budget of $1.00 is spent"),
        "{stdout}"
    );
    assert!(stdout.contains("Second answer."), "{stdout}");
    assert!(!stderr.contains("for nobody"), "{stderr}");
}

/// Interactive `hearth init` (in a terminal, here `script`'s): a wrong answer is said with the
/// reason and a hint and asked again, every earlier answer kept; the model is chosen from the
/// server's list, and one it does not list is asked again.
#[tokio::test]
async fn interactive_init_asks_again_after_a_wrong_answer_and_offers_the_servers_models() {
    let llm = FakeOpenAi::start().await;
    llm.set_models(&["walk-model", "other-model"]);
    let home = tempfile::tempdir().expect("home");
    let url = llm.base_url();
    let answers =
        format!("bogus\nopenai\n{url}\n\nnosuch\nother-model\ntelegram\n@myname\n123456789\n");
    let mut command = Command::new("script");
    command
        .args(["-qec", &format!("{} init", hearth_binary()), "/dev/null"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .env("HEARTH_TELEGRAM_TOKEN", "1:t");
    let mut child = crate::support::spawn_with_input(&mut command, &answers);
    let out = tokio::time::timeout(
        WAIT,
        tokio::task::spawn_blocking(move || {
            let status = child.wait().expect("wait");
            let mut stdout = String::new();
            std::io::Read::read_to_string(child.stdout.as_mut().expect("stdout"), &mut stdout)
                .expect("read");
            (status, stdout)
        }),
    )
    .await
    .expect("init finished")
    .expect("join");
    let (status, stdout) = out;
    assert_eq!(status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("unknown model API `bogus`"), "{stdout}");
    assert!(
        stdout.contains("The server offers: walk-model, other-model"),
        "{stdout}"
    );
    assert!(
        stdout.contains("`nosuch` is not one of the server's models"),
        "{stdout}"
    );
    assert!(stdout.contains("@userinfobot"), "{stdout}");
    assert!(
        stdout.contains("is not a telegram user id") && stdout.contains("try again"),
        "{stdout}"
    );
    let file =
        std::fs::read_to_string(home.path().join(".config/hearth/hearth.toml")).expect("written");
    assert!(file.contains("model = \"other-model\""), "{file}");
    assert!(file.contains("allowed_users = [\"123456789\"]"), "{file}");
    assert!(file.contains("owner = \"telegram:123456789\""), "{file}");
}
