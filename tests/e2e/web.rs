//! The owner's page over plain HTTP against the real `hearth run`: no cookie gets the login
//! page, a foreign `Host` gets 421, a cross-site POST or a bad CSRF token gets 403, a login code
//! works once and not after its five minutes, `hearth web logout --all` ends the session.
//! The page in a real browser is in `web_browser`.

use hearth::store::Store;
use reqwest::header::{COOKIE, HOST, LOCATION, ORIGIN, SET_COOKIE};
use reqwest::redirect::Policy;

use crate::telegram::TgHearth;

/// `[web]` and a schedule, after the Telegram section.
pub(crate) const WEB_CONFIG: &str = r#"
[tools]
confirmation_timeout_secs = 600

[web]
hosts = ["hearth.example.org"]

[[schedules]]
name = "briefing"
cron = "0 0 5 1 1 *"
agent = "general"
prompt = "Give me my briefing"
target = "telegram:42"
"#;

/// A client that shows redirects instead of following them.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("client")
}

/// The code `hearth web login` prints (its first line).
pub(crate) fn login_code(h: &TgHearth) -> String {
    let out = h.cli(&["web", "login"]);
    let code = out.lines().next().unwrap_or_default().trim().to_string();
    assert_eq!(code.len(), 14, "a code like ABCD-EFGH-JKMN: {out}");
    code
}

/// The CSRF token in a page's forms.
fn csrf_of(page: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = page.find(marker).expect("a form with a CSRF token") + marker.len();
    page[start..].split('"').next().expect("token").to_string()
}

pub(crate) async fn database(h: &TgHearth) -> Store {
    let path = h.dir.path().join("data").join("hearth.db");
    Store::open(&format!("sqlite://{}", path.display()))
        .await
        .expect("the daemon's database")
}

#[tokio::test]
async fn the_page_is_only_for_the_owner_with_a_fresh_code_and_same_origin_posts() {
    let mut h = TgHearth::new(WEB_CONFIG).await;
    h.start().await;
    let base = h.base_url();
    let host = base.trim_start_matches("http://").to_string();
    let http = client();

    // No cookie: the login page, with the strict headers.
    let response = http.get(format!("{base}/")).send().await.expect("get /");
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()[LOCATION], "/login");
    let response = http
        .get(format!("{base}/login"))
        .send()
        .await
        .expect("login");
    assert_eq!(response.status(), 200);
    let csp = response.headers()["content-security-policy"]
        .to_str()
        .expect("csp")
        .to_string();
    assert!(
        csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert!(
        response
            .text()
            .await
            .expect("body")
            .contains("hearth web login")
    );
    let status = http
        .get(format!("{base}/status"))
        .send()
        .await
        .expect("status");
    assert_eq!(status.status(), 303, "every page needs the login");

    // A Host outside the allowlist (DNS rebinding): 421; a configured one is served.
    let rebound = http
        .get(format!("{base}/login"))
        .header(HOST, "rebound.attacker.example")
        .send()
        .await
        .expect("rebound");
    assert_eq!(rebound.status(), 421);
    let proxied = http
        .get(format!("{base}/login"))
        .header(HOST, "hearth.example.org")
        .send()
        .await
        .expect("proxied");
    assert_eq!(proxied.status(), 200);
    // So does /healthz (it tells channel errors and MCP names); by address it is served.
    let health = http
        .get(format!("{base}/healthz"))
        .header(HOST, "monitor.example")
        .send()
        .await
        .expect("healthz");
    assert_eq!(health.status(), 421);
    let health = http
        .get(format!("{base}/healthz"))
        .header(HOST, "192.0.2.7:8787")
        .send()
        .await
        .expect("healthz");
    assert_eq!(health.status(), 200);

    // A login from another site is refused even with a good code.
    let code = login_code(&h);
    let cross = http
        .post(format!("{base}/login"))
        .header("sec-fetch-site", "cross-site")
        .header(ORIGIN, "http://attacker.example")
        .form(&[("code", code.as_str())])
        .send()
        .await
        .expect("cross-site login");
    assert_eq!(cross.status(), 403);
    let no_origin = http
        .post(format!("{base}/login"))
        .form(&[("code", code.as_str())])
        .send()
        .await
        .expect("login without origin");
    assert_eq!(no_origin.status(), 403, "neither Sec-Fetch-Site nor Origin");
    let wrong = http
        .post(format!("{base}/login"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("code", "AAAA-BBBB-CCCC")])
        .send()
        .await
        .expect("wrong code");
    assert_eq!(wrong.status(), 401);

    // The code, from the same origin (Origin header only, as older browsers send): a session.
    let login = http
        .post(format!("{base}/login"))
        .header(ORIGIN, format!("http://{host}"))
        .form(&[("code", code.to_lowercase().as_str())])
        .send()
        .await
        .expect("login");
    assert_eq!(login.status(), 303, "{:?}", login.text().await);
    let cookie = login.headers()[SET_COOKIE]
        .to_str()
        .expect("cookie")
        .to_string();
    assert!(
        cookie.starts_with("hearth_session=")
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && !cookie.contains("Secure"),
        "plain HTTP: a plain, HttpOnly, strict cookie: {cookie}"
    );
    let session = cookie.split(';').next().expect("pair").to_string();

    // Used once: the same code again is refused.
    let reused = http
        .post(format!("{base}/login"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("code", code.as_str())])
        .send()
        .await
        .expect("reuse");
    assert_eq!(reused.status(), 401);

    // A code older than five minutes is refused.
    let store = database(&h).await;
    let minted_long_ago = chrono::Utc::now().timestamp_millis() - 6 * 60 * 1000;
    let stale = hearth::web::auth::mint_login_code(&store, minted_long_ago)
        .await
        .expect("mint");
    let expired = http
        .post(format!("{base}/login"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("code", stale.as_str())])
        .send()
        .await
        .expect("expired");
    assert_eq!(expired.status(), 401);

    // Logged in: the pages answer.
    for page in [
        "/",
        "/status",
        "/conversations",
        "/schedules",
        "/usage",
        "/agents",
    ] {
        let response = http
            .get(format!("{base}{page}"))
            .header(COOKIE, &session)
            .send()
            .await
            .expect("page");
        assert_eq!(response.status(), 200, "{page}");
    }
    let inbox = http
        .get(format!("{base}/"))
        .header(COOKIE, &session)
        .send()
        .await
        .expect("inbox")
        .text()
        .await
        .expect("body");
    assert!(inbox.contains("Nothing waits for an answer."), "{inbox}");
    let csrf = csrf_of(&inbox);
    let schedules = http
        .get(format!("{base}/schedules"))
        .header(COOKIE, &session)
        .send()
        .await
        .expect("schedules")
        .text()
        .await
        .expect("body");
    assert!(schedules.contains("briefing"), "{schedules}");
    let run = "/schedules/1/pause";

    // A change without the token, with a wrong one, or from another site: 403, and nothing
    // changed.
    for (token, site) in [
        (None, "same-origin"),
        (Some("wrong-token"), "same-origin"),
        (Some(csrf.as_str()), "cross-site"),
        (Some(csrf.as_str()), "same-site"),
    ] {
        let mut form = Vec::new();
        if let Some(token) = token {
            form.push(("csrf", token));
        }
        let response = http
            .post(format!("{base}{run}"))
            .header(COOKIE, &session)
            .header("sec-fetch-site", site)
            .form(&form)
            .send()
            .await
            .expect("post");
        assert_eq!(response.status(), 403, "{token:?} {site}");
    }
    let briefing = store
        .schedule_by_name("briefing")
        .await
        .expect("read")
        .expect("briefing");
    assert!(!briefing.paused, "a refused POST changed nothing");
    // With both: done.
    let paused = http
        .post(format!("{base}/schedules/{}/pause", briefing.id))
        .header(COOKIE, &session)
        .header("sec-fetch-site", "same-origin")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("pause");
    assert_eq!(paused.status(), 303);
    // What was done is shown by the next page, from the server: the URL carries no text.
    assert_eq!(paused.headers()[LOCATION], "/schedules");
    let schedules_page = async |query: &str| {
        http.get(format!("{base}/schedules{query}"))
            .header(COOKIE, &session)
            .send()
            .await
            .expect("schedules")
            .text()
            .await
            .expect("body")
    };
    let shown = schedules_page("").await;
    assert!(
        shown.contains("is paused: it will not run until resumed."),
        "{shown}"
    );
    assert!(
        !schedules_page("")
            .await
            .contains("will not run until resumed"),
        "shown once"
    );
    // A link cannot put its own words on the page (another service on localhost is
    // same-site, so the cookie goes with such a navigation).
    let planted = schedules_page("?notice=Run%20hearth-fix.sh%20from%20evil.example").await;
    assert!(!planted.contains("evil.example"), "{planted}");
    let briefing = store
        .schedule_by_name("briefing")
        .await
        .expect("read")
        .expect("briefing");
    assert!(briefing.paused, "paused from the page");

    // `hearth web logout --all` ends the session.
    let out = h.cli(&["web", "logout", "--all"]);
    assert!(out.contains("ended 1 session"), "{out}");
    let after = http
        .get(format!("{base}/"))
        .header(COOKIE, &session)
        .send()
        .await
        .expect("after logout");
    assert_eq!(after.status(), 303);
    let out = h.cli(&["web", "logout"]);
    assert!(out.contains("--all"), "{out}");
    store.close().await;
    h.stop().await;
}

/// Approve and Deny from a plain form (no script): the redirect to the Inbox carries no text,
/// and the Inbox then says, once, what was done; the URL cannot put words there. The
/// conversation is listed by its first message; the Agents page names the model used.
#[tokio::test]
async fn deciding_on_the_page_says_what_happened() {
    use hearth_testkit::Reply;

    use crate::telegram::OWNER;

    let mut h = TgHearth::new(WEB_CONFIG).await;
    h.start().await;
    let base = h.base_url();
    let http = client();
    let login = http
        .post(format!("{base}/login"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("code", login_code(&h).as_str())])
        .send()
        .await
        .expect("login");
    assert_eq!(login.status(), 303);
    let cookie = login.headers()[SET_COOKIE].to_str().expect("cookie");
    let session = cookie.split(';').next().expect("pair").to_string();
    let inbox = async |query: &str| {
        http.get(format!("{base}/{query}"))
            .header(COOKIE, &session)
            .send()
            .await
            .expect("inbox")
            .text()
            .await
            .expect("body")
    };
    let store = database(&h).await;
    let pending = async || {
        store
            .pending_confirmation_list(chrono::Utc::now().timestamp_millis())
            .await
            .expect("read")
    };

    let mut decided_ids = Vec::new();
    for (n, action, said) in [
        (1, "approve", "Approved delete_task"),
        (2, "deny", "Denied delete_task"),
    ] {
        h.llm.push(Reply::call(
            format!("c{n}"),
            "delete_task",
            format!(r#"{{"task_id": {n}}}"#),
        ));
        h.tg.push_text(OWNER, OWNER, &format!("delete task {n}"));
        h.wait(OWNER, 2 * n - 1).await;
        let id = pending().await.first().expect("a confirmation").id.clone();
        h.llm.push(Reply::text("Done."));
        let page = inbox("").await;
        let decided = http
            .post(format!("{base}/inbox/confirmations/{id}/{action}"))
            .header(COOKIE, &session)
            .header("sec-fetch-site", "same-origin")
            .form(&[("csrf", csrf_of(&page).as_str())])
            .send()
            .await
            .expect("decide");
        assert_eq!(decided.status(), 303);
        assert_eq!(decided.headers()[LOCATION], "/", "no text in the URL");
        let shown = inbox("").await;
        assert!(shown.contains(said), "{action}: {shown}");
        assert!(
            shown.contains("telegram:"),
            "where the turn goes on: {shown}"
        );
        assert!(!shown.contains('`'), "no Markdown on a page: {shown}");
        assert!(!inbox("").await.contains(said), "shown once");
        h.wait(OWNER, 2 * n).await;
        assert!(pending().await.is_empty());
        decided_ids.push(id);
    }
    // Deny on one approved already (a second tab, a stale page): nothing changes, and it says so.
    let page = inbox("").await;
    let again = http
        .post(format!(
            "{base}/inbox/confirmations/{}/deny",
            decided_ids[0]
        ))
        .header(COOKIE, &session)
        .header("sec-fetch-site", "same-origin")
        .form(&[("csrf", csrf_of(&page).as_str())])
        .send()
        .await
        .expect("decide again");
    assert_eq!(again.status(), 303);
    let shown = inbox("").await;
    assert!(
        shown.contains("delete_task was already approved; nothing was changed."),
        "{shown}"
    );
    let first = store
        .confirmation(&decided_ids[0])
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(first.status, hearth::store::ConfirmationStatus::Approved);
    // The conversation is titled by its first message, the chat under it.
    let conversations = inbox("conversations").await;
    assert!(
        conversations.contains(">delete task 1</a>")
            && conversations.contains(&format!("telegram:{OWNER}")),
        "{conversations}"
    );
    // The Agents page names the model a turn uses, not the "default" the agent file says.
    let agents = inbox("agents").await;
    assert!(
        agents.contains("<dd>fake / fake-model</dd>") && !agents.contains("default / default"),
        "{agents}"
    );
    // Usage: the cost per day as inline SVG bars (no style attribute: the CSP allows none),
    // a model's key breakable at its slash.
    let usage = inbox("usage?days=7").await;
    assert_eq!(usage.matches("<rect ").count(), 7, "{usage}");
    assert!(usage.contains("fake/<wbr>fake-model"), "{usage}");
    assert!(!usage.contains("style="), "{usage}");
    let planted = inbox("?notice=Approved%20everything").await;
    assert!(!planted.contains("Approved everything"), "{planted}");
    store.close().await;
    h.stop().await;
}

/// A press that claims to come from the page decides only when the page recorded it first: the
/// page's sender id from a chat, or a recorded decision pressed as another action, decides
/// nothing; the recorded one decides as the owner.
#[tokio::test]
async fn only_presses_the_page_recorded_decide_as_the_owner() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hearth::confirmation::{PAGE_SENDER, parse_button_data};
    use hearth::store::ConfirmationStatus;
    use hearth_channel::{ButtonPress, ChatRef, Inbound, InboundKind, Sender};
    use hearth_testkit::Reply;

    use crate::support::{CHAT, eventually};

    let runs = Arc::new(AtomicUsize::new(0));
    let mut h = crate::confirmations::hearth(&runs, None).await;
    h.start().await;
    let prompt = crate::confirmations::ask(&h).await;
    let data = prompt.buttons[0].data.clone();
    let id = parse_button_data(&data).expect("approve button").id;
    let store = h.daemon().store().clone();
    let press = |platform_id: &str| Inbound {
        platform_id: platform_id.into(),
        chat: ChatRef::new(CHAT),
        sender: Sender::new(PAGE_SENDER).with_name("the owner on the web page"),
        kind: InboundKind::Press(ButtonPress {
            press_id: String::new(),
            data: data.clone(),
            message: None,
        }),
        reply_context: None,
        agent: None,
    };

    // Nothing recorded; recorded as Deny but pressed as Approve.
    store
        .add_web_decision("web:other-action", &id, "deny", 0)
        .await
        .expect("record");
    h.channel.push(press("web:forged"));
    h.channel.push(press("web:other-action"));
    eventually("both presses to be handled", async || {
        sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM inbox WHERE platform_id IN ('web:forged', 'web:other-action') AND status = 'done'",
        )
        .fetch_one(store.pool())
        .await
        .is_ok_and(|n| n == 2)
    })
    .await;
    let confirmation = store.confirmation(&id).await.expect("read").expect("kept");
    assert_eq!(confirmation.status, ConfirmationStatus::Pending);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran");

    // Recorded as pressed: decided as the owner, and the turn goes on.
    h.llm.push(Reply::text("Done, the old logs are gone."));
    store
        .add_web_decision("web:recorded", &id, "approve", 0)
        .await
        .expect("record");
    h.channel.push(press("web:recorded"));
    eventually("the approved tool to run", async || {
        runs.load(Ordering::SeqCst) == 1
    })
    .await;
    let confirmation = store.confirmation(&id).await.expect("read").expect("kept");
    assert_eq!(confirmation.status, ConfirmationStatus::Approved);
    assert_eq!(confirmation.decided_by.as_deref(), Some("web:owner"));
    h.stop().await;
}

/// A client whose connections come from `address` (any of 127.0.0.0/8 reaches the daemon).
fn client_from(address: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .local_address(std::net::IpAddr::from(address))
        .build()
        .expect("client")
}

#[tokio::test]
async fn wrong_codes_slow_their_address_and_a_fresh_right_code_always_works() {
    let mut h = TgHearth::new(WEB_CONFIG).await;
    h.start().await;
    let base = h.base_url();
    let try_code = async |http: &reqwest::Client, code: &str| {
        http.post(format!("{base}/login"))
            .header("sec-fetch-site", "same-origin")
            .form(&[("code", code)])
            .send()
            .await
            .expect("login answers")
    };
    // Ten wrong codes from elsewhere, then that address is told to wait.
    let guesser = client_from([127, 0, 0, 2]);
    for n in 0..10 {
        let wrong = try_code(&guesser, &format!("AAAA-BBBB-CCC{n}")).await;
        assert_eq!(wrong.status(), 401, "wrong code {n}");
    }
    assert_eq!(try_code(&guesser, "AAAA-BBBB-DDDD").await.status(), 429);

    // The owner's address is not held, and a fresh right code works.
    let owner = client_from([127, 0, 0, 1]);
    assert_eq!(try_code(&owner, "AAAA-BBBB-EEEE").await.status(), 401);
    let login = try_code(&owner, &login_code(&h)).await;
    assert_eq!(login.status(), 303, "{:?}", login.text().await);
    assert!(login.headers().contains_key(SET_COOKIE));
    // Even from the slowed address (a tunnel or proxy the owner shares), a right code works.
    let login = try_code(&guesser, &login_code(&h)).await;
    assert_eq!(login.status(), 303, "{:?}", login.text().await);
    assert!(
        h.logs()
            .contains("too many wrong codes for the page's login from this address"),
        "the lockout is logged"
    );
    h.stop().await;
}

/// The page's live inbox hears a confirmation the daemon asks for at once: the store's signal
/// wakes `/events`, well before its fallback poll (10 s) would have looked.
#[tokio::test]
async fn the_live_inbox_hears_a_new_confirmation_without_waiting_for_its_poll() {
    use std::time::{Duration, Instant};

    use futures::StreamExt;
    use hearth_testkit::Reply;

    use crate::telegram::OWNER;

    let mut h = TgHearth::new(WEB_CONFIG).await;
    h.start().await;
    let base = h.base_url();
    let http = client();
    let login = http
        .post(format!("{base}/login"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("code", login_code(&h).as_str())])
        .send()
        .await
        .expect("login");
    assert_eq!(login.status(), 303);
    let cookie = login.headers()[SET_COOKIE].to_str().expect("cookie");
    let session = cookie.split(';').next().expect("pair").to_string();
    let events = http
        .get(format!("{base}/events"))
        .header(COOKIE, &session)
        .send()
        .await
        .expect("events");
    assert_eq!(events.status(), 200);
    let mut stream = events.bytes_stream();

    h.llm
        .push(Reply::call("c1", "delete_task", r#"{"task_id": 1}"#));
    h.tg.push_text(OWNER, OWNER, "delete task 1");
    let store = database(&h).await;
    let asked = loop {
        let now = chrono::Utc::now().timestamp_millis();
        if !store
            .pending_confirmation_list(now)
            .await
            .expect("read")
            .is_empty()
        {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut heard = String::new();
    while !heard.contains("event: inbox") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("`inbox` within 5 s of the confirmation, not at the 10 s poll")
            .expect("the stream stays open")
            .expect("a chunk");
        heard.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "heard {:?} after the confirmation was stored",
        asked.elapsed()
    );
}
