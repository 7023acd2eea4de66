//! The doors of `daemon.http_listen` against the real `hearth run`, as an attacker on the LAN
//! or a web page in the owner's browser would try them (issue 44, the review of 2026-11-29):
//! half-sent requests neither starve the listener nor stay open; a token has a limited number
//! of event streams; junk tokens do not lock a valid one out; a foreign `Host` gets 421 on
//! every route; open streams end when hearth stops; unknown paths get a page, not the API.

use std::time::{Duration, Instant};

use futures::StreamExt;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http::{Api, answer};

/// Open file descriptors of the daemon.
fn open_fds(api: &Api) -> usize {
    let pid = api.process.pid().expect("running");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the daemon's fds")
        .count()
}

/// `host:port` of the daemon.
fn authority(api: &Api) -> String {
    api.process
        .base_url()
        .trim_start_matches("http://")
        .to_string()
}

/// Whether the peer closed `socket` within `within` (EOF or reset), reading and dropping
/// whatever it sends first.
async fn closed_within(socket: &mut TcpStream, within: Duration) -> bool {
    let mut buffer = [0u8; 4096];
    let read = async {
        loop {
            match socket.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read).await.is_ok()
}

#[tokio::test]
async fn half_sent_requests_neither_starve_the_listener_nor_stay_open() {
    let env = [
        ("HEARTH_DAEMON__HTTP_HEADER_TIMEOUT_SECS", "2"),
        ("HEARTH_DAEMON__HTTP_MAX_CONNECTIONS", "64"),
    ];
    let mut h = Api::build("http:owner", &env, "").await;
    h.process.start().await;
    let address = authority(&h);
    let before = open_fds(&h);

    // 300 requests whose header never ends (slowloris).
    let started = Instant::now();
    let mut held = Vec::new();
    for _ in 0..300 {
        let mut socket = TcpStream::connect(&address).await.expect("connect");
        socket
            .write_all(format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\nX-a: ").as_bytes())
            .await
            .expect("half a request");
        held.push(socket);
    }

    // While they are held, /healthz and a valid token are answered.
    let (status, health) = h.process.healthz().await;
    assert_eq!(status, 200, "{health}");
    let (status, agents) = answer(
        h.client
            .get(h.process.url("/api/v1/agents"))
            .bearer_auth(&h.owner),
    )
    .await;
    assert_eq!(status, 200, "{agents}");
    // The daemon keeps no more of them than its limit (and the reserve for /healthz).
    let during = open_fds(&h);
    assert!(
        during <= before + 64 + 8 + 4,
        "{during} fds open with 300 half-sent requests, {before} before"
    );

    // Each of them is closed by the daemon, within the header timeout (and a margin).
    let closes = held
        .iter_mut()
        .map(|socket| closed_within(socket, Duration::from_secs(6)));
    let closed = futures::future::join_all(closes).await;
    let open = closed.iter().filter(|c| !**c).count();
    assert_eq!(open, 0, "{open} of 300 half-sent requests still open");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );

    // A kept-alive connection that goes quiet is closed too.
    let mut idle = TcpStream::connect(&address).await.expect("connect");
    idle.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n").as_bytes())
        .await
        .expect("a request");
    let mut answer_start = [0u8; 12];
    idle.read_exact(&mut answer_start).await.expect("an answer");
    assert_eq!(&answer_start, b"HTTP/1.1 200");
    assert!(
        closed_within(&mut idle, Duration::from_secs(5)).await,
        "an idle kept-alive connection stays open"
    );
    h.process.stop().await;
}

/// A turn of `api`'s owner that waits for approval (a `delete_task` call); its id.
async fn waiting_turn(api: &Api, key: &str) -> String {
    api.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "delete_task",
        r#"{"task_id": 1}"#,
    )]));
    let (status, started) = answer(
        api.client
            .post(api.process.url("/api/v1/turns"))
            .bearer_auth(&api.owner)
            .header("Idempotency-Key", key)
            .json(&json!({ "text": "delete task 1" })),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let turn = started["turn"].as_str().expect("turn").to_string();
    api.process
        .wait_for(Duration::from_secs(20), "the turn to wait", async || {
            let (_, state) = answer(
                api.client
                    .get(api.process.url(&format!("/api/v1/turns/{turn}")))
                    .bearer_auth(&api.owner),
            )
            .await;
            (state["state"] == "awaiting_confirmation").then_some(())
        })
        .await;
    turn
}

fn events_request(api: &Api, token: &str, turn: &str) -> reqwest::RequestBuilder {
    api.client
        .get(api.process.url(&format!("/api/v1/turns/{turn}/events")))
        .bearer_auth(token)
}

#[tokio::test]
async fn a_token_has_a_limited_number_of_open_event_streams() {
    let mut h = Api::new("max_streams_per_token = 2").await;
    let admin = h.create_token(&["watcher", "--scope", "admin"]);
    h.process.start().await;
    let turn = waiting_turn(&h, "k1").await;

    let first = events_request(&h, &h.owner, &turn)
        .send()
        .await
        .expect("first");
    let second = events_request(&h, &h.owner, &turn)
        .send()
        .await
        .expect("second");
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = events_request(&h, &h.owner, &turn)
        .send()
        .await
        .expect("third");
    assert_eq!(third.status(), 429);
    assert!(third.headers().contains_key("retry-after"));
    let body: Value = third.json().await.expect("json");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("max_streams_per_token"), "{body}");
    // A streamed completion counts too, and is refused in OpenAI's shape.
    let (status, refused) = answer(
        h.client
            .post(h.process.url("/v1/chat/completions"))
            .bearer_auth(&h.owner)
            .json(&json!({
                "model": "hearth",
                "messages": [{ "role": "user", "content": "hello" }],
                "stream": true,
            })),
    )
    .await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["error"]["type"], "rate_limit_error", "{refused}");

    // Another token is not held by this one's streams.
    let other = events_request(&h, &admin, &turn)
        .send()
        .await
        .expect("other");
    assert_eq!(other.status(), 200);
    // A stream closed gives its place back.
    drop(first);
    h.process
        // The daemon notices the closed connection at the latest at the next keep-alive (15 s).
        .wait_for(
            Duration::from_secs(20),
            "a place for a stream",
            async || {
                let again = events_request(&h, &h.owner, &turn).send().await.ok()?;
                (again.status() == 200).then_some(())
            },
        )
        .await;
    drop((second, other));
    h.process.stop().await;
}

#[tokio::test]
async fn junk_tokens_slow_their_address_but_never_a_valid_token() {
    let mut h = Api::new("").await;
    h.process.start().await;
    // The junk comes from 127.0.0.2, as a rebinding page or a neighbour behind the same proxy.
    let shared = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .expect("client");
    let junk = |n: usize| {
        shared
            .get(h.process.url("/api/v1/agents"))
            .bearer_auth(format!("hth_junk{n}"))
    };
    let mut statuses = Vec::new();
    for n in 0..10 {
        statuses.push(answer(junk(n)).await.0);
    }
    assert_eq!(&statuses[..6], [401; 6], "{statuses:?}");
    assert!(statuses[6..].iter().all(|s| *s == 429), "{statuses:?}");
    let slowed = junk(11).send().await.expect("answers");
    assert_eq!(slowed.status(), 429);
    assert!(slowed.headers().contains_key("retry-after"));

    // From the same address, at the same time: the valid token is let in, on the API and on
    // the OpenAI endpoint.
    let (status, agents) = answer(
        shared
            .get(h.process.url("/api/v1/agents"))
            .bearer_auth(&h.owner),
    )
    .await;
    assert_eq!(status, 200, "{agents}");
    let (status, models) = answer(
        shared
            .get(h.process.url("/v1/models"))
            .bearer_auth(&h.owner),
    )
    .await;
    assert_eq!(status, 200, "{models}");
    // Letting it in did not clear the junk's record, and another address is not slowed.
    assert_eq!(answer(junk(12)).await.0, 429);
    let elsewhere = h
        .client
        .get(h.process.url("/api/v1/agents"))
        .bearer_auth("hth_junk13");
    assert_eq!(answer(elsewhere).await.0, 401);
    h.process.stop().await;
}

#[tokio::test]
async fn a_foreign_host_gets_421_on_every_route_of_the_listener() {
    let mut h = Api::new("").await;
    h.process.start().await;
    let routes = [
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("GET", "/api/v1/agents"),
        ("GET", "/api/v1/confirmations"),
        ("POST", "/api/v1/turns"),
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/"),
        ("GET", "/login"),
        ("POST", "/login"),
        ("GET", "/favicon.ico"),
        ("GET", "/no/such/path"),
    ];
    for (method, path) in routes {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let request = |host: &str| {
            h.client
                .request(method.clone(), h.process.url(path))
                .header("host", host)
                .bearer_auth(&h.owner)
                .header("Idempotency-Key", "rebound")
                .json(&json!({}))
        };
        // A rebinding name that resolves to 127.0.0.1: nothing answers it.
        let rebound = request("rebind.attacker.example:8787")
            .send()
            .await
            .expect("answers");
        assert_eq!(rebound.status(), 421, "{method} {path}");
        // The listener's own address is served.
        let own = request(&authority(&h)).send().await.expect("answers");
        assert_ne!(own.status(), 421, "{method} {path}");
    }
    h.process.stop().await;
}

#[tokio::test]
async fn unknown_paths_get_a_page_and_the_favicon_is_served() {
    let mut h = Api::new("").await;
    h.process.start().await;
    let response = h
        .client
        .get(h.process.url("/favicon.ico"))
        .send()
        .await
        .expect("favicon");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "image/svg+xml");
    assert!(response.text().await.expect("svg").starts_with("<svg"));

    let response = h
        .client
        .get(h.process.url("/robots.txt"))
        .send()
        .await
        .expect("unknown");
    assert_eq!(response.status(), 404);
    assert!(!response.headers().contains_key("www-authenticate"));
    assert!(
        response.headers()["content-type"]
            .to_str()
            .is_ok_and(|t| t.starts_with("text/html")),
        "{:?}",
        response.headers()
    );
    assert!(
        response
            .text()
            .await
            .expect("page")
            .contains("no page here")
    );

    // Under the API's prefixes the API answers: a token first, then its JSON 404.
    let (status, _) = answer(h.client.get(h.process.url("/api/v1/nothing"))).await;
    assert_eq!(status, 401);
    let (status, body) = answer(
        h.client
            .get(h.process.url("/api/v1/nothing"))
            .bearer_auth(&h.owner),
    )
    .await;
    assert_eq!(status, 404);
    assert!(body["error"]["message"].is_string(), "{body}");
    h.process.stop().await;
}

/// Reads `response` (an event stream) to its end; its text, or `None` when it did not end
/// within `within`.
async fn read_to_end(response: reqwest::Response, within: Duration) -> Option<String> {
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let read = async {
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) => text.push_str(&String::from_utf8_lossy(&chunk)),
                Err(_) => break,
            }
        }
    };
    tokio::time::timeout(within, read).await.ok()?;
    Some(text)
}

#[tokio::test]
async fn open_streams_end_with_a_comment_when_hearth_stops_and_it_exits_in_time() {
    let mut h = Api::new("confirm_wait_secs = 600").await;
    h.process.start().await;
    let turn = waiting_turn(&h, "k1").await;
    let events = events_request(&h, &h.owner, &turn)
        .send()
        .await
        .expect("events");
    assert_eq!(events.status(), 200);
    // A streamed completion waiting for its own approval.
    h.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c2",
        "delete_task",
        r#"{"task_id": 2}"#,
    )]));
    let completion = h
        .client
        .post(h.process.url("/v1/chat/completions"))
        .bearer_auth(&h.owner)
        .json(&json!({
            "model": "hearth",
            "messages": [{ "role": "user", "content": "delete task 2" }],
            "stream": true,
        }))
        .send()
        .await
        .expect("completion");
    assert_eq!(completion.status(), 200);
    let mut completion = completion.bytes_stream();
    let mut seen = String::new();
    let asked = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(chunk)) = completion.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("Needs approval") {
                return;
            }
        }
    })
    .await;
    assert!(asked.is_ok(), "the completion never asked: {seen}");

    let stopping = Instant::now();
    h.process.signal(rustix::process::Signal::TERM);
    let text = read_to_end(events, Duration::from_secs(10))
        .await
        .expect("the event stream ends when hearth stops");
    assert!(
        text.contains(": hearth is stopping; reconnect (with Last-Event-ID) to resume"),
        "{text}"
    );
    assert!(text.contains("event: confirmation.required"), "{text}");
    let rest = tokio::time::timeout(Duration::from_secs(10), async {
        let mut rest = String::new();
        while let Some(Ok(chunk)) = completion.next().await {
            rest.push_str(&String::from_utf8_lossy(&chunk));
        }
        rest
    })
    .await
    .expect("the streamed completion ends when hearth stops");
    assert!(rest.contains(": hearth is stopping"), "{rest}");
    // The daemon is gone within its grace period (1 s here) and a margin, with exit 0.
    tokio::time::timeout(Duration::from_secs(10), h.process.stop())
        .await
        .expect("hearth exits within the grace period");
    assert!(stopping.elapsed() < Duration::from_secs(10));
    // A stop is no Stop button: the turn the completion followed was not cancelled.
    assert!(
        !h.process
            .logs()
            .contains("the client closed the streamed completion"),
        "the stop cancelled a turn"
    );
}

#[tokio::test]
async fn a_trusted_proxy_names_the_client_and_others_cannot() {
    let mut h = Api::new("trusted_proxies = [\"127.0.0.2/32\"]").await;
    h.process.start().await;
    let from = |last: u8| {
        reqwest::Client::builder()
            .local_address(std::net::IpAddr::from([127, 0, 0, last]))
            .build()
            .expect("client")
    };
    let (proxy, stranger) = (from(2), from(3));
    let junk = |client: &reqwest::Client, forwarded: &str| {
        client
            .get(h.process.url("/api/v1/agents"))
            .bearer_auth("hth_junk")
            .header("x-forwarded-for", forwarded)
    };
    // Through the proxy: one client's junk slows that client only.
    for _ in 0..6 {
        assert_eq!(answer(junk(&proxy, "203.0.113.9")).await.0, 401);
    }
    assert_eq!(answer(junk(&proxy, "203.0.113.9")).await.0, 429);
    assert_eq!(answer(junk(&proxy, "203.0.113.10")).await.0, 401);
    assert!(
        h.process.logs().contains("203.0.113.9"),
        "the log names the client"
    );
    // From a peer that is no trusted proxy the header is ignored: the peer is slowed, whatever
    // it claims to be.
    for n in 0..6 {
        assert_eq!(
            answer(junk(&stranger, &format!("198.51.100.{n}"))).await.0,
            401
        );
    }
    assert_eq!(answer(junk(&stranger, "198.51.100.99")).await.0, 429);
    h.process.stop().await;
}

#[tokio::test]
async fn hearth_check_names_a_bad_proxy_range_and_listener_limit() {
    let h = Api::new("").await;
    let path = h.process.dir.path().join("hearth.toml");
    let config = std::fs::read_to_string(&path).expect("config");
    let config = config
        .replacen("[daemon]\n", "[daemon]\nhttp_max_connections = 3\n", 1)
        .replacen(
            "[channels.http]\n",
            "[channels.http]\ntrusted_proxies = [\"172.16.0.0/12\", \"10.0.0.0/33\"]\n",
            1,
        );
    std::fs::write(&path, config).expect("config");
    let out = h.process.cli(&["check"]);
    assert!(
        out.contains("channels.http.trusted_proxies[1]: `10.0.0.0/33` is not an address range"),
        "{out}"
    );
    assert!(
        out.contains("daemon.http_max_connections: 3: expected 16 to 65536"),
        "{out}"
    );
}
