//! One person, several channels: `daemon.owner` as a string or a list, identities linked into
//! one user (shared tasks, `/whoami`), confirmations decided from a linked identity on another
//! channel, and `hearth pair link / unlink / list` and `hearth check` on the binary.

use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use hearth::agent::AgentSet;
use hearth::config::Config;
use hearth::daemon::{Daemon, DaemonBuilder};
use hearth::store::Store;
use hearth_channel::{ChatRef, MemoryChannel, MessageRef, SentMessage};
use hearth_testkit::{FakeOpenAi, Reply};

use crate::support::{
    TASK_TOOLS, WAIT, eventually, general_agent, last_tool_result, pending_pairing, postgres_url,
    provider, run_cli, rustls,
};

const TG_USER: &str = "42";
const TG_CHAT: &str = "tg-chat-42";
const TG_STRANGER: &str = "43";
const EMAIL_USER: &str = "me@example.org";
const EMAIL_OTHER: &str = "other@example.org";

/// A hearth with two channels, `telegram` and `email` (memory channels under those names), and
/// a fake model.
struct TwoChannels {
    _dir: tempfile::TempDir,
    llm: FakeOpenAi,
    telegram: Arc<MemoryChannel>,
    email: Arc<MemoryChannel>,
    daemon: Daemon,
}

impl TwoChannels {
    async fn start(owner: Option<hearth::config::Owner>) -> Self {
        rustls();
        let dir = tempfile::tempdir().expect("temp dir");
        let llm = FakeOpenAi::start().await;
        let mut config = Config::default();
        config.daemon.data_dir = dir.path().to_path_buf();
        config.daemon.http_listen = None;
        config.daemon.owner = owner;
        config.runtime.stream = false;
        config.providers = vec![provider("fake", &llm.base_url())];
        let telegram = Arc::new(MemoryChannel::new("telegram"));
        let email = Arc::new(MemoryChannel::new("email"));
        let daemon = DaemonBuilder::new(config)
            .agents(
                AgentSet::parse(&general_agent(TASK_TOOLS), "test agents").expect("agents parse"),
            )
            .channel(
                telegram.clone(),
                &[TG_USER.to_string(), TG_STRANGER.to_string()],
            )
            .channel(
                email.clone(),
                &[EMAIL_USER.to_string(), EMAIL_OTHER.to_string()],
            )
            .start()
            .await
            .expect("daemon starts");
        Self {
            _dir: dir,
            llm,
            telegram,
            email,
            daemon,
        }
    }

    fn store(&self) -> &Store {
        self.daemon.store()
    }

    /// Sends `text` on `channel` from `user` in `chat` and returns the next message sent there.
    async fn say(
        &self,
        channel: &MemoryChannel,
        chat: &str,
        user: &str,
        text: &str,
    ) -> SentMessage {
        let before = channel.sent().len();
        channel.push_text(chat, user, text);
        let sent = channel.wait_for_sent(before + 1, WAIT).await;
        assert!(
            sent.len() > before,
            "no reply to {text:?} within {WAIT:?}; sent: {sent:?}"
        );
        sent[before].clone()
    }

    /// What the last `tool` message the model received says.
    fn last_tool_result(&self) -> String {
        last_tool_result(&self.llm.last_request().expect("a request"))
    }
}

#[tokio::test]
async fn owner_identities_in_a_list_are_one_user_sharing_tasks() {
    let h = TwoChannels::start(Some(
        vec![format!("telegram:{TG_USER}"), format!("email:{EMAIL_USER}")].into(),
    ))
    .await;

    h.llm.push(Reply::call(
        "c1",
        "add_task",
        r#"{"title": "Renew passport"}"#,
    ));
    h.llm.push(Reply::text("Added."));
    let reply = h
        .say(&h.telegram, TG_CHAT, TG_USER, "add a task: renew passport")
        .await;
    assert_eq!(reply.text, "Added.");

    // The same person by email sees the task made on Telegram.
    h.llm.push(Reply::call("c2", "list_tasks", "{}"));
    h.llm.push(Reply::text("You have one task."));
    let reply = h
        .say(&h.email, EMAIL_USER, EMAIL_USER, "what are my tasks?")
        .await;
    assert_eq!(reply.text, "You have one task.");
    assert!(
        h.last_tool_result().contains("Renew passport"),
        "{}",
        h.last_tool_result()
    );

    // Someone else sees none of it.
    h.llm.push(Reply::call("c3", "list_tasks", "{}"));
    h.llm.push(Reply::text("Nothing."));
    h.say(&h.email, EMAIL_OTHER, EMAIL_OTHER, "my tasks?").await;
    assert!(
        !h.last_tool_result().contains("Renew passport"),
        "{}",
        h.last_tool_result()
    );

    let whoami = h
        .say(&h.email, EMAIL_USER, EMAIL_USER, "/whoami")
        .await
        .text;
    assert!(
        whoami.starts_with(&format!("You are email:{EMAIL_USER} (the owner, user #")),
        "{whoami}"
    );
    assert!(
        whoami.contains(&format!("linked identities: telegram:{TG_USER}.")),
        "{whoami}"
    );
    assert!(
        whoami.contains("Permission: admin (the default); autonomy: medium (the default)."),
        "{whoami}"
    );
    let other = h
        .say(&h.email, EMAIL_OTHER, EMAIL_OTHER, "/whoami")
        .await
        .text;
    assert!(
        other.contains("(an allowed user, user #") && other.contains("linked identities: none."),
        "{other}"
    );
    h.daemon.stop().await;
}

#[tokio::test]
async fn a_single_owner_string_still_works() {
    let h = TwoChannels::start(Some(format!("telegram:{TG_USER}").as_str().into())).await;
    let whoami = h.say(&h.telegram, TG_CHAT, TG_USER, "/whoami").await.text;
    assert!(
        whoami.starts_with(&format!("You are telegram:{TG_USER} (the owner")),
        "{whoami}"
    );
    assert!(whoami.contains("linked identities: none."), "{whoami}");
    let email = h
        .say(&h.email, EMAIL_USER, EMAIL_USER, "/whoami")
        .await
        .text;
    assert!(email.contains("(an allowed user"), "{email}");
    h.daemon.stop().await;
}

#[tokio::test]
async fn a_confirmation_is_decided_by_a_linked_identity_on_another_channel_only() {
    let h = TwoChannels::start(None).await;
    // Linked while hearth runs, as `hearth pair link` does.
    let now = chrono::Utc::now().timestamp_millis();
    h.store()
        .link_identities(("telegram", TG_USER), ("email", EMAIL_USER), now)
        .await
        .expect("linked");

    h.llm
        .push(Reply::call("c1", "add_task", r#"{"title": "Old plan"}"#));
    h.llm.push(Reply::text("Added."));
    h.say(&h.telegram, TG_CHAT, TG_USER, "add the old plan")
        .await;
    h.llm
        .push(Reply::call("c2", "delete_task", r#"{"task_id": 1}"#));
    let prompt = h
        .say(&h.telegram, TG_CHAT, TG_USER, "delete the old plan")
        .await;
    assert!(prompt.text.contains("delete_task"), "{}", prompt.text);
    let approve = prompt.buttons[0].data.clone();
    let id = approve
        .strip_prefix("c:")
        .and_then(|rest| rest.strip_suffix(":a"))
        .expect("c:<id>:a")
        .to_string();

    // Someone else, on the other channel: a press and a typed APPROVE are both refused.
    let elsewhere = MessageRef {
        chat: ChatRef::new(EMAIL_OTHER),
        message_id: "m1".into(),
    };
    h.email.push_press(&elsewhere, EMAIL_OTHER, &approve);
    eventually("the stranger's press to be answered", async || {
        h.email
            .answered_presses()
            .iter()
            .any(|p| p.notice.as_deref() == Some("This request isn't yours to decide.") && p.alert)
    })
    .await;
    // The telegram stranger also may not decide, even on the prompt's own channel.
    h.telegram
        .push_press(&prompt.reference(), TG_STRANGER, &approve);
    eventually("the telegram stranger's press to be answered", async || {
        h.telegram
            .answered_presses()
            .iter()
            .any(|p| p.notice.as_deref() == Some("This request isn't yours to decide."))
    })
    .await;
    let pending = h
        .store()
        .confirmation(&id)
        .await
        .expect("db")
        .expect("stored");
    assert_eq!(
        pending.status,
        hearth::store::ConfirmationStatus::Pending,
        "nobody else decided it"
    );

    // The requester, by email: approved, the tool runs, the answer goes to the Telegram chat.
    h.llm.push(Reply::text("Deleted."));
    let before = h.telegram.sent().len();
    h.email
        .push_text(EMAIL_USER, EMAIL_USER, &format!("APPROVE {id}"));
    let sent = h.telegram.wait_for_sent(before + 1, WAIT).await;
    assert_eq!(sent[before].text, "Deleted.");
    assert!(
        h.last_tool_result().contains("deleted"),
        "{}",
        h.last_tool_result()
    );
    let decided = h
        .store()
        .confirmation(&id)
        .await
        .expect("db")
        .expect("stored");
    assert_eq!(decided.status, hearth::store::ConfirmationStatus::Approved);
    assert_eq!(decided.decided_by.as_deref(), Some("email:me@example.org"));
    eventually("the Telegram prompt to show the outcome", async || {
        h.telegram
            .sent()
            .iter()
            .any(|m| m.id == prompt.id && m.text.contains("✅ Approved by"))
    })
    .await;
    h.daemon.stop().await;
}

// ---------------------------------------------------------------------------------------------
// The binary

/// Runs `hearth ARGS` in `dir` with a clean environment.
fn hearth(dir: &Path, args: &[&str]) -> Output {
    run_cli(dir, args, &[], "")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `hearth ARGS` and returns its stdout, asserting exit code 0.
fn ok(dir: &Path, args: &[&str]) -> String {
    let out = hearth(dir, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs `hearth ARGS` and returns its stderr, asserting exit code 2.
fn refused(dir: &Path, args: &[&str]) -> String {
    let out = hearth(dir, args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stderr)
}

async fn add(store: &Store, sql: &str, user: i64) {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
        .bind(user)
        .execute(store.pool())
        .await
        .expect(sql);
}

async fn count(store: &Store, table: &str, user: i64) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {table} WHERE user_id = $1"
    )))
    .bind(user)
    .fetch_one(store.pool())
    .await
    .expect("count")
}

const TASK: &str = "INSERT INTO tasks (user_id, title, priority, priority_rank, created_at, updated_at) VALUES ($1, 'a task', 'medium', 2, 0, 0)";
const NOTE: &str = "INSERT INTO notes (user_id, title, content, created_at, updated_at) VALUES ($1, 'n', 'a note', 0, 0)";
const MEMORY: &str = "INSERT INTO memories (user_id, content, kind, importance, created_at, updated_at) VALUES ($1, 'likes tea', 'preference', 0.5, 0, 0)";

/// Two users with data of their own: telegram:42 (a task) and discord:7 (two tasks, a note, a
/// memory, permission `admin`). Returns their user ids.
async fn two_users(store: &Store) -> (i64, i64) {
    let a = store
        .allow_identity("telegram", "42", None, "config", false, 0)
        .await
        .expect("allow")
        .user_id;
    let b = store
        .allow_identity("discord", "7", Some("Sam"), "paired", false, 0)
        .await
        .expect("allow")
        .user_id;
    add(store, TASK, a).await;
    add(store, TASK, b).await;
    add(store, TASK, b).await;
    add(store, NOTE, b).await;
    add(store, MEMORY, b).await;
    add(
        store,
        "UPDATE users SET permission = 'admin' WHERE id = $1",
        b,
    )
    .await;
    (a, b)
}

/// The defect, as a new user met it: before the daemon first ran, `pair link` refused the
/// identities the configuration names ("neither telegram:1 nor email:… is known").
#[tokio::test]
async fn pair_link_before_the_first_start_knows_the_configured_owner() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("hearth.toml"),
        "[daemon]\nowner = \"telegram:1\"\n",
    )
    .expect("write config");
    let out = ok(
        dir.path(),
        &["pair", "link", "telegram:1", "email:me@example.org"],
    );
    assert!(
        out.starts_with("linked email:me@example.org to telegram:1 (user #1)"),
        "{out}"
    );
}

/// A stranger chooses their display name: `hearth pair list` must not let it rewrite the
/// owner's terminal (here: clear the screen and print a fake line in its place).
#[tokio::test]
async fn pair_list_shows_a_strangers_escape_codes_as_text() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("hearth.toml"),
        "[daemon]\nowner = \"telegram:1\"\n",
    )
    .expect("write config");
    let url = format!("sqlite://{}", dir.path().join("data/hearth.db").display());
    pending_pairing(&url, "ABCD2345", "666", "\u{1b}[2J\u{1b}[HMum\u{202e}").await;
    let out = ok(dir.path(), &["pair", "list"]);
    assert!(
        !out.contains('\u{1b}') && !out.contains('\u{202e}'),
        "{out:?}"
    );
    assert!(
        out.contains("ABCD2345  telegram:666 \\u{1b}[2J\\u{1b}[HMum\\u{202e}"),
        "{out}"
    );
}

#[tokio::test]
async fn pair_link_unlink_and_list_on_the_command_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("hearth.toml"),
        "[daemon]\nowner = [\"telegram:1\", \"terminal:local\"]\n",
    )
    .expect("write config");
    let url = format!("sqlite://{}", dir.path().join("data/hearth.db").display());
    let store = Store::open(&url).await.expect("open");
    let (a, b) = two_users(&store).await;
    store.close().await;

    // Refusals: exit 2 and one line saying why; nothing changes.
    let dir = dir.path();
    for (args, message) in [
        (
            vec!["pair", "link", "telegram:42", "telegram:42"],
            "telegram:42 cannot be linked to itself",
        ),
        (
            vec!["pair", "link", "telegram:42", "telegram:me"],
            "`me` is not a telegram user id: expected a number",
        ),
        (
            vec!["pair", "link", "slack:U1", "telegram:42"],
            "unknown channel `slack`",
        ),
        (
            vec!["pair", "link", "email:a@example.org", "email:b@example.org"],
            "neither email:a@example.org nor email:b@example.org is known to hearth",
        ),
        (
            vec!["pair", "unlink", "telegram:42"],
            "telegram:42 is not linked to any other identity",
        ),
        (
            vec!["pair", "unlink", "telegram:99"],
            "no identity telegram:99",
        ),
        (
            vec!["pair", "unlink", "telegram:1"],
            "telegram:1 is listed in daemon.owner",
        ),
    ] {
        let stderr = refused(dir, &args);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }

    // Linking two users with data merges them, in one line.
    let out = ok(dir, &["pair", "link", "telegram:42", "discord:7"]);
    assert_eq!(
        out,
        format!(
            "linked discord:7 to telegram:42 (user #{a}); merged user #{b}: 2 tasks, 1 note, 1 memory; \
             took permission `admin` from user #{b}\n"
        )
    );
    // An address hearth has never seen joins the same user.
    let out = ok(
        dir,
        &["pair", "link", "telegram:42", "email:me@example.org"],
    );
    assert_eq!(
        out,
        format!(
            "linked email:me@example.org to telegram:42 (user #{a}); email:me@example.org was new to hearth and is allowed now\n"
        )
    );
    let out = ok(dir, &["pair", "link", "discord:7", "email:me@example.org"]);
    assert!(out.contains("are already one user"), "{out}");

    let list = ok(dir, &["pair", "list"]);
    let expected = format!(
        "users:\n  user #{a} (permission admin)\n    telegram:42  allowed (config)\n    discord:7  allowed (paired)\n    email:me@example.org  allowed (linked)\n"
    );
    assert!(list.contains(&expected), "{list}");

    let store = Store::open(&url).await.expect("open");
    assert_eq!(count(&store, "tasks", a).await, 3);
    assert_eq!(count(&store, "notes", a).await, 1);
    assert_eq!(count(&store, "memories", a).await, 1);
    store.close().await;

    // Unlinking: a new empty user; the data stays.
    let out = ok(dir, &["pair", "unlink", "discord:7"]);
    let store = Store::open(&url).await.expect("open");
    let discord = store
        .identity("discord", "7")
        .await
        .expect("db")
        .expect("known");
    assert_eq!(
        out,
        format!(
            "unlinked discord:7: it is user #{} now, with no data and default settings; the data stays with user #{a} (telegram:42, email:me@example.org)\n",
            discord.user_id
        )
    );
    assert_eq!(count(&store, "tasks", a).await, 3);
    assert_eq!(count(&store, "tasks", discord.user_id).await, 0);
    store.close().await;
    let list = ok(dir, &["pair"]);
    assert!(
        list.contains(&format!(
            "  user #{}\n    discord:7  allowed (paired)\n",
            discord.user_id
        )),
        "{list}"
    );
}

#[tokio::test]
async fn the_terminal_joins_the_owner_listed_in_the_config() {
    let llm = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("hearth.toml"),
        format!(
            "[daemon]\nowner = [\"telegram:42\", \"email:me@example.org\"]\n\n[[providers]]\nname = \"fake\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n",
            llm.base_url()
        ),
    )
    .expect("write config");
    let path = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || run_cli(&path, &["chat"], &[], "/whoami\n"))
        .await
        .expect("join");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.starts_with("You are terminal:local (the owner, user #")
            && stdout.contains("); linked identities: telegram:42, email:me@example.org."),
        "{stdout}"
    );
}

#[test]
fn check_names_a_bad_owner_entry() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("hearth.toml"),
        "[daemon]\nowner = [\"telegram:42\", \"telegram:me\", \"email:me@example.org\"]\n",
    )
    .expect("write config");
    let stderr = refused(dir.path(), &["check"]);
    assert!(
        stderr.contains(
            "hearth.toml: daemon.owner[1]: `me` is not a telegram user id: expected a number"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "only the bad entry: {stderr}");

    std::fs::write(
        dir.path().join("hearth.toml"),
        "[daemon]\nowner = [\"telegram:42\", \"email:me@example.org\"]\n",
    )
    .expect("write config");
    let out = ok(dir.path(), &["check"]);
    assert!(out.starts_with("configuration OK"), "{out}");
    std::fs::write(
        dir.path().join("hearth.toml"),
        "[daemon]\nowner = \"telegram:42\"\n",
    )
    .expect("write config");
    ok(dir.path(), &["check"]);
}

#[tokio::test]
async fn link_merge_and_unlink_on_postgres() {
    rustls();
    let Some((url, _server)) = postgres_url("hearth_identities") else {
        return;
    };
    let store = Store::open(&url).await.expect("open");
    let (a, b) = two_users(&store).await;
    add(
        &store,
        "INSERT INTO bookmarks (user_id, url, created_at) VALUES ($1, 'https://example.org/', 0)",
        a,
    )
    .await;
    add(
        &store,
        "INSERT INTO bookmarks (user_id, url, created_at) VALUES ($1, 'https://example.org/', 0)",
        b,
    )
    .await;
    let outcome = store
        .link_identities(("telegram", "42"), ("discord", "7"), 1)
        .await
        .expect("linked");
    let merge = outcome.merge.expect("merged");
    assert_eq!(
        merge.to_string(),
        format!(
            "merged user #{b}: 2 tasks, 1 note, 1 memory; 1 bookmark(s) of a URL already saved kept once; \
             took permission `admin` from user #{b}"
        )
    );
    assert_eq!(count(&store, "tasks", a).await, 3);
    assert_eq!(count(&store, "bookmarks", a).await, 1);
    let users: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
        .fetch_one(store.pool())
        .await
        .expect("count");
    assert_eq!(users, 1, "the emptied user is gone");

    let created = store
        .link_identities(("email", "me@example.org"), ("telegram", "42"), 2)
        .await
        .expect("linked");
    assert!(created.created && created.kept == "telegram:42");
    let unlinked = store
        .unlink_identity("discord", "7", 3)
        .await
        .expect("unlinked");
    assert_eq!(unlinked.remaining, ["telegram:42", "email:me@example.org"]);
    assert_eq!(count(&store, "tasks", unlinked.new_user).await, 0);
    assert_eq!(
        store
            .identity("discord", "7")
            .await
            .expect("db")
            .expect("known")
            .display_name
            .as_deref(),
        Some("Sam"),
        "the identity keeps its name"
    );
    store.close().await;
}

/// A long allowlist: every listed sender, a duplicate included, is let in with a user of its
/// own, across more rows than one bulk insert takes, and a second sync changes nothing.
async fn a_long_allowlist_gets_one_user_each(store: &Store) {
    let mut listed: Vec<String> = (0..1_201).map(|n| format!("{}", 500_000 + n)).collect();
    listed.push("500007".into());
    store
        .allow_identity("telegram", "500003", None, "paired", false, 0)
        .await
        .expect("paired before");
    store
        .set_identity_status("telegram", "500003", hearth::store::IdentityStatus::Revoked)
        .await
        .expect("revoke");
    for round in 0..2 {
        store
            .sync_allowlist("telegram", &listed, &listed, round)
            .await
            .expect("sync");
        let (identities, allowed, users): (i64, i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), SUM(CASE WHEN status = 'allowed' THEN 1 ELSE 0 END), COUNT(DISTINCT user_id)
             FROM identities WHERE channel = 'telegram'",
        )
        .fetch_one(store.pool())
        .await
        .expect("count");
        assert_eq!(
            (identities, allowed, users),
            (1_201, 1_201, 1_201),
            "round {round}"
        );
    }
    let all_users: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
        .fetch_one(store.pool())
        .await
        .expect("count");
    assert_eq!(all_users, 1_201, "no user without an identity");
}

#[tokio::test]
async fn a_long_allowlist_is_synced_in_bulk() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("hearth.db").display());
    let store = Store::open(&url).await.expect("open");
    a_long_allowlist_gets_one_user_each(&store).await;
}

#[tokio::test]
async fn a_long_allowlist_is_synced_in_bulk_on_postgres() {
    rustls();
    let Some((url, _server)) = postgres_url("hearth_allowlist") else {
        return;
    };
    let store = Store::open(&url).await.expect("open");
    a_long_allowlist_gets_one_user_each(&store).await;
}
