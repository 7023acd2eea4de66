//! The owner's page in a real browser: headless Chromium (Debian's `chromium` and
//! `chromium-driver`) driven over WebDriver against the real `hearth run` with the fake Telegram
//! Bot API. Logs in with a code from `hearth web login`, approves a confirmation raised by a
//! Telegram message and sees the turn resume in Telegram and the prompt show the outcome, sees a
//! confirmation approved in Telegram leave the open page by itself, approves a pairing request,
//! runs a schedule now, finds an old message, checks that Usage fits a 390 px phone with its
//! cost chart, tries the routing box; and saves screenshots of
//! every page, phone-sized and desktop, under the target directory's `tmp/web-screenshots`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hearth_testkit::Reply;
use hearth_testkit::telegram::Incoming;
use serde_json::json;

use crate::support::{free_port, poll};
use crate::telegram::{OWNER, TgHearth};
use crate::web::{WEB_CONFIG, login_code};

const WAIT: Duration = Duration::from_secs(20);
const STRANGER: i64 = 77;
const DESKTOP: (u32, u32) = (1280, 900);
const PHONE: (u32, u32) = (390, 844);

/// A `chromedriver` on a free local port, killed when dropped.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    async fn start() -> Self {
        let port = free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (apt-get install chromium chromium-driver)");
        let driver = Self { child, port };
        let status = format!("http://127.0.0.1:{port}/status");
        poll(WAIT, async || reqwest::get(&status).await.ok().map(|_| ()))
            .await
            .expect("chromedriver answers");
        driver
    }

    async fn browser(&self) -> Client {
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-dev-shm-usage",
                "--disable-gpu",
                "--window-size=1280,900",
            ]}),
        );
        ClientBuilder::rustls()
            .expect("a WebDriver client")
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a Chromium session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Gone already or killed now: nothing to report from a drop.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn screenshot_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// Saves the page as it shows now, desktop then phone-sized (`NAME-desktop.png`,
/// `NAME-phone.png`), and goes back to the desktop size.
async fn screenshots(browser: &Client, name: &str) {
    for (size, (width, height)) in [("phone", PHONE), ("desktop", DESKTOP)] {
        browser
            .set_window_size(width, height)
            .await
            .expect("window size");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let png = browser.screenshot().await.expect("screenshot");
        std::fs::write(screenshot_dir().join(format!("{name}-{size}.png")), png)
            .expect("save screenshot");
    }
}

/// The text of the first element matching `css`, or "" when there is none.
async fn text_of(browser: &Client, css: &str) -> String {
    match browser.find(Locator::Css(css)).await {
        Ok(element) => element.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Waits until the text of `css` satisfies `check`; fails with `what` and the page.
async fn until_text(browser: &Client, css: &str, what: &str, check: impl Fn(&str) -> bool) {
    let seen = poll(WAIT, async || {
        let text = text_of(browser, css).await;
        check(&text).then_some(())
    })
    .await;
    if seen.is_none() {
        let page = browser.source().await.unwrap_or_default();
        panic!("timed out waiting for {what}; the page:\n{page}");
    }
}

/// Waits until `css` matches exactly `n` elements; fails with `what` and the page.
async fn until_count(browser: &Client, css: &str, n: usize, what: &str) {
    let seen = poll(WAIT, async || {
        let found = browser.find_all(Locator::Css(css)).await.ok()?;
        (found.len() == n).then_some(())
    })
    .await;
    if seen.is_none() {
        let page = browser.source().await.unwrap_or_default();
        panic!("timed out waiting for {what}; the page:\n{page}");
    }
}

async fn click(browser: &Client, css: &str) {
    browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|err| panic!("no {css}: {err}"))
        .click()
        .await
        .unwrap_or_else(|err| panic!("clicking {css}: {err}"));
}

#[tokio::test]
async fn the_owner_uses_the_page_in_a_real_browser() {
    let mut h = TgHearth::new(WEB_CONFIG).await;
    // The tasks tools and background tasks, which the Schedules page lists.
    h.write_agents(
        &(crate::support::general_agent(
            "tool_groups = [\"tasks\", \"background\"]\ntool_mode = \"direct\"",
        ) + crate::telegram::FINANCE_AGENT),
    );
    h.start().await;
    let base = h.base_url();

    // An old message to find later, a task, then a request that needs the owner's approval.
    h.llm.push(Reply::text("Noted: the zucchini recipe."));
    h.tg.push_text(OWNER, OWNER, "remember the zucchini recipe from grandma");
    h.wait(OWNER, 1).await;
    h.llm
        .push(Reply::call("c1", "add_task", r#"{"title": "Old task"}"#));
    h.llm.push(Reply::text("Added."));
    h.tg.push_text(OWNER, OWNER, "add a task");
    h.wait(OWNER, 2).await;
    h.llm
        .push(Reply::call("c2", "delete_task", r#"{"task_id": 1}"#));
    h.tg.push_text(OWNER, OWNER, "delete task 1");
    let prompt = h.wait(OWNER, 3).await[2].clone();
    assert!(prompt.text.contains("delete_task"), "{}", prompt.text);
    // A stranger asks to talk to hearth and gets a pairing code.
    h.tg.push(Incoming::text(STRANGER, STRANGER, "hello, may I?"));
    h.wait(STRANGER, 1).await;

    let driver = Driver::start().await;
    let browser = driver.browser().await;

    // No session: the login page. The code from `hearth web login` logs in.
    browser.goto(&format!("{base}/")).await.expect("goto");
    let field = browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("#code"))
        .await
        .expect("the login form");
    screenshots(&browser, "login").await;
    field
        .send_keys(&login_code(&h))
        .await
        .expect("type the code");
    click(&browser, "button[type=submit]").await;

    // The Inbox: the confirmation (who, agent, tool, arguments, expiry) and the pairing request.
    until_text(&browser, "#inbox-list", "the pending confirmation", |t| {
        t.contains("delete_task") && t.contains(&STRANGER.to_string())
    })
    .await;
    let inbox = text_of(&browser, "#inbox-list").await;
    assert!(inbox.contains("general"), "the agent: {inbox}");
    assert!(inbox.contains(&format!("telegram:{OWNER}")), "who: {inbox}");
    assert!(inbox.contains("Expires in"), "{inbox}");
    screenshots(&browser, "inbox").await;

    // Approve on the page: the turn resumes in Telegram and the prompt shows the outcome.
    h.llm.push(Reply::text("Deleted."));
    click(&browser, ".confirmation button.approve").await;
    let messages = h.wait(OWNER, 4).await;
    assert_eq!(messages[3].text, "Deleted.");
    h.wait_for(WAIT, "the prompt to show the outcome", async || {
        let prompt =
            h.tg.messages(OWNER)
                .into_iter()
                .find(|m| m.id == prompt.id)?;
        prompt
            .text
            .contains("Approved by the owner on the web page")
            .then_some(())
    })
    .await;
    until_count(
        &browser,
        "#inbox-list .confirmation",
        0,
        "the approved request to leave",
    )
    .await;
    // The page says what happened, beside the list.
    until_text(&browser, "#inbox-notice", "the outcome", |t| {
        t.contains("Approved delete_task")
    })
    .await;

    // Live: a new request appears on the open page, and one approved in Telegram leaves it.
    h.llm
        .push(Reply::call("c3", "delete_task", r#"{"task_id": 2}"#));
    h.tg.push_text(OWNER, OWNER, "delete task 2");
    let second = h.wait(OWNER, 5).await[4].clone();
    until_count(
        &browser,
        "#inbox-list .confirmation",
        1,
        "the new request to appear",
    )
    .await;
    // The live refresh of the list left the notice of the last decision in place.
    let notice = text_of(&browser, "#inbox-notice").await;
    assert!(notice.contains("Approved delete_task"), "{notice}");
    h.llm.push(Reply::text("There was no task 2."));
    let approve = second.buttons[0][0].1.clone();
    h.tg.press(OWNER, OWNER, second.id, &approve);
    h.wait(OWNER, 6).await;
    until_count(
        &browser,
        "#inbox-list .confirmation",
        0,
        "the request approved in Telegram to leave",
    )
    .await;

    // The pairing request, approved from the page: the stranger is welcomed.
    click(&browser, ".pairing button.approve").await;
    let welcome = h.wait(STRANGER, 2).await;
    assert!(welcome[1].text.contains("You are approved"), "{welcome:?}");
    until_count(&browser, "#inbox-list .pairing", 0, "the pairing to leave").await;
    screenshots(&browser, "inbox-empty").await;

    // Schedules: run now; the briefing arrives in Telegram and the run shows as done.
    browser
        .goto(&format!("{base}/schedules"))
        .await
        .expect("goto");
    until_text(&browser, "#schedules", "the schedule", |t| {
        t.contains("briefing")
    })
    .await;
    h.llm.push(Reply::text("Nothing is due today."));
    click(&browser, "#schedules button.approve").await;
    h.wait_for(WAIT, "the scheduled run's message", async || {
        h.tg.messages(OWNER)
            .iter()
            .any(|m| m.text.contains("Nothing is due today."))
            .then_some(())
    })
    .await;
    let done = poll(WAIT, async || {
        browser.refresh().await.ok()?;
        text_of(&browser, ".runs")
            .await
            .contains("done")
            .then_some(())
    })
    .await;
    assert!(
        done.is_some(),
        "{}",
        browser.source().await.unwrap_or_default()
    );
    // A background task asked for in words: the answer at once, the report as a reply, and the
    // page lists it beside the schedules, done, with its cost.
    h.llm.push(Reply::call(
        "c9",
        "start_background_task",
        r#"{"title": "Flats", "instructions": "Compare three flats"}"#,
    ));
    h.llm
        .push(Reply::text("I'll look into it and report back here."));
    h.llm.push(Reply::text("Flat A is the best of three."));
    h.tg.push_text(OWNER, OWNER, "compare the flats and tell me tonight");
    h.wait_for(WAIT, "the background task's report", async || {
        h.tg.messages(OWNER)
            .iter()
            .any(|m| m.text.contains("Flat A is the best of three."))
            .then_some(())
    })
    .await;
    let listed = poll(WAIT, async || {
        browser.refresh().await.ok()?;
        let text = text_of(&browser, "#background-tasks").await;
        (text.contains("#1 Flats") && text.contains("done")).then_some(text)
    })
    .await;
    assert!(
        listed.is_some(),
        "{}",
        browser.source().await.unwrap_or_default()
    );
    screenshots(&browser, "schedules").await;

    // Conversations: the search finds the old message; its transcript shows the tool call and
    // the decision made on the page.
    browser
        .goto(&format!("{base}/conversations"))
        .await
        .expect("goto");
    let search = browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("input[name=q]"))
        .await
        .expect("the search box");
    search.send_keys("ZUCCHINI").await.expect("type");
    click(&browser, ".search button").await;
    until_text(&browser, ".hits", "the old message", |t| {
        t.contains("zucchini recipe from grandma")
    })
    .await;
    // The hit names its conversation as the list does: by its first message, the chat under it.
    let first_message = "remember the zucchini recipe from grandma";
    assert_eq!(text_of(&browser, ".hits a").await, first_message);
    assert!(
        text_of(&browser, ".hits .chat")
            .await
            .contains(&format!("telegram:{OWNER}"))
    );
    screenshots(&browser, "search").await;
    click(&browser, ".hits a").await;
    until_text(&browser, ".transcript", "the transcript", |t| {
        t.contains("delete_task") && t.contains("approved by web:owner")
    })
    .await;
    assert_eq!(text_of(&browser, "h1").await, first_message);
    assert_eq!(
        browser.title().await.expect("the page's title"),
        format!("{first_message} · hearth")
    );
    screenshots(&browser, "conversation").await;

    // Usage, Agents (with the routing box) and Status. Two earlier days that cost something
    // (the fake model is free), for bars in the chart.
    let store = crate::web::database(&h).await;
    for (days_ago, cost_nusd) in [(3, 40_000_000), (1, 15_000_000)] {
        let day = chrono::Utc::now().date_naive() - chrono::Days::new(days_ago);
        let call = hearth::store::ModelCall {
            at_ms: chrono::Utc::now().timestamp_millis() - days_ago as i64 * 86_400_000,
            day: day.format("%Y-%m-%d").to_string(),
            payer: hearth::store::Payer {
                purpose: "turn",
                agent_id: Some("finance".into()),
                ..Default::default()
            },
            provider: "fake".into(),
            model: "fake-model".into(),
            input_tokens: 1200,
            output_tokens: 300,
            cost_nusd,
            ..Default::default()
        };
        store.record_model_call(&call).await.expect("record a call");
    }
    store.close().await;
    browser.goto(&format!("{base}/usage")).await.expect("goto");
    until_text(&browser, "main", "the usage tables", |t| {
        t.contains("By model")
    })
    .await;
    screenshots(&browser, "usage").await;
    // On a 390 px phone nothing sticks out sideways, and the cost chart is there.
    browser
        .set_window_size(PHONE.0, PHONE.1)
        .await
        .expect("window size");
    let widths = poll(WAIT, async || {
        let widths = browser
            .execute(
                "return [document.documentElement.scrollWidth, window.innerWidth];",
                vec![],
            )
            .await
            .ok()?;
        let inner = widths.get(1)?.as_u64()?;
        (inner <= u64::from(PHONE.0)).then_some(widths)
    })
    .await
    .expect("the phone-sized window");
    let scroll = widths[0].as_u64().expect("scrollWidth");
    std::fs::write(
        screenshot_dir().join("usage-390.png"),
        browser.screenshot().await.expect("screenshot"),
    )
    .expect("save screenshot");
    assert!(
        scroll <= u64::from(PHONE.0),
        "the Usage page is {scroll} px wide on a {} px phone (window {widths})",
        PHONE.0
    );
    let bars = browser
        .find_all(Locator::Css("figure.chart svg rect"))
        .await
        .expect("bars");
    assert_eq!(bars.len(), 30, "a bar for each of the 30 days");
    let mut heights = Vec::new();
    for bar in bars {
        heights.push(
            bar.attr("height")
                .await
                .expect("height")
                .unwrap_or_default(),
        );
    }
    assert_eq!(
        heights[26], "100",
        "the dearest day fills the chart: {heights:?}"
    );
    assert_eq!(heights[28], "38", "{heights:?}");
    browser
        .set_window_size(DESKTOP.0, DESKTOP.1)
        .await
        .expect("window size");
    browser.goto(&format!("{base}/agents")).await.expect("goto");
    let route = browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("input[name=text]"))
        .await
        .expect("the routing box");
    route
        .send_keys("I spent 12 euros on lunch")
        .await
        .expect("type");
    click(&browser, ".search button").await;
    until_text(&browser, "#routed", "the routing decision", |t| {
        t.contains("finance")
    })
    .await;
    // Each agent's version history (synced from the agents file at start).
    click(&browser, "#agent-general .versions summary").await;
    until_text(
        &browser,
        "#agent-general .versions",
        "the version history",
        |t| t.contains("first version"),
    )
    .await;
    screenshots(&browser, "agents").await;
    browser.goto(&format!("{base}/status")).await.expect("goto");
    until_text(&browser, "main", "the channel states", |t| {
        t.contains("telegram") && t.contains("connected")
    })
    .await;
    screenshots(&browser, "status").await;

    browser.close().await.expect("close the browser");
    drop(driver);
    eprintln!("screenshots in {}", screenshot_dir().display());
    h.stop().await;
}
