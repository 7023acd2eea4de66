//! The real `hearth run` binary's OpenAI-compatible endpoint (`/v1/models`,
//! `/v1/chat/completions`) against the fake LLM: driven by the official `openai` Python client
//! (streamed and not, models), and over raw HTTP with the request shapes Open WebUI sends (its
//! `### Task:` background prompts, `stream_options`, its chat id header); conversations that
//! continue from hearth's store, an edited history that branches, a retry answered once,
//! approvals that continue in the stream (decided over the API or by the owner's Telegram button
//! through `approvals_to`) or after `approve CODE`, a closed stream that stops its turn (a Stop
//! button), and every refusal in OpenAI's error shape.

use std::time::Duration;

use futures::StreamExt;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::{Value, json};

// The HTTP channel's test process; the methods below speak its OpenAI-compatible endpoint.
use crate::http::{Api as Chat, answer};

const WAIT: Duration = Duration::from_secs(30);

/// Open WebUI's default title prompt (`DEFAULT_TITLE_GENERATION_PROMPT_TEMPLATE`), as it sends
/// it once the chat history is filled in.
const TITLE_TASK: &str = "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n### Guidelines:\n- The title should clearly represent the main theme or subject of the conversation.\n- Use emojis that enhance understanding of the topic, but avoid quotation marks or special formatting.\n- Write the title in the chat's primary language; default to English if multilingual.\n- Prioritize accuracy over excessive creativity; keep it clear and simple.\n### Output:\nJSON format: { \"title\": \"your concise title here\" }\n### Chat History:\n<chat_history>\nUSER: how much did I spend on groceries?\nASSISTANT: 42 EUR this week.\n</chat_history>";

/// Open WebUI's default follow-up prompt (`DEFAULT_FOLLOW_UP_GENERATION_PROMPT_TEMPLATE`).
const FOLLOW_UP_TASK: &str = "### Task:\nSuggest 3-5 relevant follow-up questions or prompts that the user might naturally ask next in this conversation as a **user**, based on the chat history, to help continue or deepen the discussion.\n### Guidelines:\n- Write all follow-up questions from the user's point of view, directed to the assistant.\n- Make questions concise, clear, and directly related to the discussed topic(s).\n- Response must be a JSON array of strings, no extra text or formatting.\n### Output:\nJSON format: { \"follow_ups\": [\"Question 1?\", \"Question 2?\", \"Question 3?\"] }\n### Chat History:\n<chat_history>\nUSER: how much did I spend on groceries?\nASSISTANT: 42 EUR this week.\n</chat_history>";

impl Chat {
    async fn start(extra: &str) -> Self {
        let mut chat = Self::new(extra).await;
        chat.process.start().await;
        chat
    }

    /// A started chat whose approvals go to `owner`'s chat on a fake Telegram (bot token
    /// `token`), once Telegram is connected.
    #[cfg(feature = "telegram")]
    async fn with_telegram_owner(
        token: &str,
        owner: i64,
    ) -> (Self, hearth_testkit::telegram::FakeTelegram) {
        let tg = hearth_testkit::telegram::FakeTelegram::start(token).await;
        let extra = format!(
            "confirm_wait_secs = 60\n\n[channels.telegram]\ntoken_env = \"TG_TOKEN\"\napi_url = \"{}\"\nallowed_users = [{owner}]\n",
            tg.api_url()
        );
        let route = format!("telegram:{owner}");
        let env = [("TG_TOKEN", token), ("HEARTH_DAEMON__APPROVALS_TO", &route)];
        let mut chat = Self::build(&route, &env, &extra).await;
        chat.process.start().await;
        chat.process
            .wait_for(WAIT, "Telegram connected", async || {
                let (_, health) = chat.process.healthz().await;
                (health["channels"]["telegram"]["state"] == "connected").then_some(())
            })
            .await;
        (chat, tg)
    }

    /// The confirmation prompt, with its buttons, that reached `owner` on Telegram.
    #[cfg(feature = "telegram")]
    async fn routed_prompt(
        &self,
        tg: &hearth_testkit::telegram::FakeTelegram,
        owner: i64,
    ) -> hearth_testkit::telegram::FakeMessage {
        self.process
            .wait_for(WAIT, "the routed prompt", async || {
                tg.messages(owner)
                    .into_iter()
                    .find(|m| !m.buttons.is_empty())
            })
            .await
    }

    fn completions(&self, token: &str) -> reqwest::RequestBuilder {
        self.client
            .post(self.process.url("/v1/chat/completions"))
            .bearer_auth(token)
    }

    /// A non-streamed completion: its status and body.
    async fn complete(&self, token: &str, body: Value) -> (u16, Value) {
        answer(self.completions(token).json(&body)).await
    }

    /// A non-streamed completion of the owner in the conversation `conversation`: the
    /// answer's text.
    async fn say(&self, conversation: &str, messages: Value) -> String {
        self.say_as(&self.owner, conversation, messages).await
    }

    async fn say_as(&self, token: &str, conversation: &str, messages: Value) -> String {
        let (status, body) = answer(
            self.completions(token)
                .header("X-Hearth-Conversation", conversation)
                .json(&json!({ "model": "hearth", "messages": messages })),
        )
        .await;
        assert_eq!(status, 200, "{body}\n{}", self.process.logs());
        assert_eq!(body["object"], "chat.completion");
        body["choices"][0]["message"]["content"]
            .as_str()
            .expect("content")
            .to_string()
    }

    /// The messages of the `n`th request the fake LLM got (from 1).
    async fn llm_messages(&self, n: usize) -> Vec<Value> {
        let requests = self.llm.wait_for_requests(n, WAIT).await;
        requests[n - 1]["messages"]
            .as_array()
            .expect("messages")
            .clone()
    }
}

/// The `data:` payloads of a finished SSE body, `[DONE]` as a string.
fn data_lines(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| {
            let data = data.trim();
            serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_string()))
        })
        .collect()
}

/// The text of a stream's content deltas.
fn streamed_text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect()
}

/// The text of a message as a test reads it: everything the LLM got as one string.
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn all_text(messages: &[Value]) -> String {
    messages.iter().map(text_of).collect::<Vec<_>>().join("\n")
}

/// The code a "Needs approval" answer names.
fn code_in(text: &str) -> String {
    let at = text
        .find("approve ")
        .unwrap_or_else(|| panic!("no code: {text}"));
    text[at + 8..at + 14].to_string()
}

#[tokio::test]
async fn the_official_openai_client_lists_models_and_completes_streamed_and_not() {
    let python = match hearth_testkit::python::openai_python() {
        Ok(python) => python,
        Err(err) => panic!("the openai Python client is needed: {err}"),
    };
    let mut chat = Chat::start("").await;
    let limited = chat.create_token(&["editor", "--agents", "finance"]);
    chat.llm
        .push(Reply::text("Hello from hearth.").usage(11, 7));
    chat.llm.push(Reply::text("A streamed hello.").usage(5, 3));
    let script = chat.process.dir.path().join("client.py");
    std::fs::write(
        &script,
        r#"
import json, sys
import openai

base_url, owner, limited = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base_url, api_key=owner, max_retries=0)
out = {"models": sorted(m.id for m in client.models.list())}
out["limited_models"] = sorted(
    m.id for m in openai.OpenAI(base_url=base_url, api_key=limited, max_retries=0).models.list()
)
done = client.chat.completions.create(
    model="hearth", messages=[{"role": "user", "content": "say hello"}], user="ada"
)
out["plain"] = {
    "object": done.object, "content": done.choices[0].message.content,
    "role": done.choices[0].message.role, "finish": done.choices[0].finish_reason,
    "usage": [done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.total_tokens],
}
text, usage, finishes = "", None, []
for chunk in client.chat.completions.create(
    model="hearth/general", messages=[{"role": "user", "content": "stream a hello"}],
    stream=True, stream_options={"include_usage": True},
):
    if chunk.usage is not None:
        usage = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens]
    for choice in chunk.choices:
        text += choice.delta.content or ""
        if choice.finish_reason:
            finishes.append(choice.finish_reason)
out["streamed"] = {"content": text, "usage": usage, "finishes": finishes}
try:
    client.chat.completions.create(
        model="hearth", messages=[{"role": "user", "content": "x"}],
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    )
    out["tools"] = "accepted"
except openai.BadRequestError as err:
    out["tools"] = [err.status_code, err.code]
try:
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    out["unknown_model"] = "accepted"
except openai.NotFoundError as err:
    out["unknown_model"] = [err.status_code, err.code]
try:
    openai.OpenAI(base_url=base_url, api_key="hth_wrong", max_retries=0).models.list()
    out["wrong_key"] = "accepted"
except openai.AuthenticationError as err:
    out["wrong_key"] = err.status_code
print(json.dumps(out))
"#,
    )
    .expect("script");
    let base_url = chat.process.url("/v1");
    let owner = chat.owner.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .args([&base_url, &owner, &limited])
            .output()
    })
    .await
    .expect("joined")
    .expect("python runs");
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        chat.process.logs()
    );
    let out: Value = serde_json::from_slice(&output.stdout).expect("the script's JSON");
    assert_eq!(
        out["models"],
        json!(["hearth", "hearth/finance", "hearth/general"])
    );
    assert_eq!(
        out["limited_models"],
        json!(["hearth", "hearth/finance"]),
        "a token limited to one agent sees only it"
    );
    assert_eq!(
        out["plain"],
        json!({
            "object": "chat.completion", "content": "Hello from hearth.", "role": "assistant",
            "finish": "stop", "usage": [11, 7, 18],
        })
    );
    assert_eq!(
        out["streamed"],
        json!({ "content": "A streamed hello.", "usage": [5, 3], "finishes": ["stop"] })
    );
    assert_eq!(out["tools"], json!([400, "tools_not_supported"]));
    assert_eq!(out["unknown_model"], json!([404, "model_not_found"]));
    assert_eq!(out["wrong_key"], 401);
    // The turns went through the agents: the second asked for the general agent by name.
    let second = chat.llm_messages(2).await;
    assert!(all_text(&second).contains("PROMPT:general"), "{second:?}");
    chat.process.stop().await;
}

#[tokio::test]
async fn open_webui_background_tasks_are_plain_model_calls_and_stream_options_add_usage() {
    let mut chat = Chat::start("").await;
    let webui = chat.create_token(&["webui", "--scope", "approve"]);

    // A chat message as Open WebUI sends it: streamed, usage asked for, its chat id header.
    chat.llm.push(Reply::text("42 EUR this week.").usage(20, 6));
    let response = chat
        .completions(&webui)
        .header(
            "X-OpenWebUI-Chat-Id",
            "6f1c2a9e-0b7d-4c52-9a51-3e2f8d1b7c40",
        )
        .json(&json!({
            "model": "hearth",
            "messages": [
                { "role": "system", "content": "You are helpful." },
                { "role": "user", "content": "how much did I spend on groceries?" },
            ],
            "stream": true,
            "stream_options": { "include_usage": true },
            "temperature": 0.7,
            "max_tokens": 2048,
        }))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let chunks = data_lines(&response.text().await.expect("body"));
    assert_eq!(chunks.last(), Some(&json!("[DONE]")), "{chunks:?}");
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(streamed_text(&chunks), "42 EUR this week.");
    let usage = &chunks[chunks.len() - 2];
    assert_eq!(usage["choices"], json!([]), "{usage}");
    assert_eq!(
        usage["usage"],
        json!({ "prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26 })
    );
    assert_eq!(
        chunks[chunks.len() - 3]["choices"][0]["finish_reason"],
        "stop"
    );
    // The keyword "spend"… no: "spent" is not in the message; the default agent answered.
    let first = chat.llm_messages(1).await;
    assert!(all_text(&first).contains("PROMPT:general"));

    // Its title, as Open WebUI asks for it: not streamed, one user message starting with
    // `### Task:`. One plain model call: no tools, no agent prompt, no history.
    chat.llm
        .push(Reply::text(r#"{ "title": "🛒 Grocery Spending" }"#).usage(90, 9));
    let (status, title) = chat
        .complete(
            &webui,
            json!({
                "model": "hearth",
                "messages": [{ "role": "user", "content": TITLE_TASK }],
                "stream": false,
                "max_completion_tokens": 1000,
            }),
        )
        .await;
    assert_eq!(status, 200, "{title}");
    assert_eq!(
        title["choices"][0]["message"]["content"],
        r#"{ "title": "🛒 Grocery Spending" }"#
    );
    assert_eq!(title["usage"]["prompt_tokens"], 90);
    let requests = chat.llm.wait_for_requests(2, WAIT).await;
    let plain = &requests[1];
    assert!(
        plain
            .get("tools")
            .is_none_or(|t| t.as_array().is_some_and(|t| t.is_empty())),
        "{plain}"
    );
    let messages = plain["messages"].as_array().expect("messages");
    assert_eq!(
        messages.len(),
        1,
        "no system prompt, no history: {messages:?}"
    );
    assert!(text_of(&messages[0]).starts_with("### Task:"));

    // Follow-ups, streamed: the same plain call, answered as a stream.
    chat.llm
        .push(Reply::text(r#"{ "follow_ups": ["And last month?"] }"#));
    let response = chat
        .completions(&webui)
        .json(&json!({
            "model": "hearth/general",
            "messages": [{ "role": "user", "content": FOLLOW_UP_TASK }],
            "stream": true,
        }))
        .send()
        .await
        .expect("answers");
    let chunks = data_lines(&response.text().await.expect("body"));
    assert_eq!(
        streamed_text(&chunks),
        r#"{ "follow_ups": ["And last month?"] }"#
    );
    assert_eq!(chunks.last(), Some(&json!("[DONE]")));
    assert!(
        chunks.iter().all(|c| c.get("usage").is_none()),
        "no usage chunk unless asked: {chunks:?}"
    );

    // The chat goes on where it was: the task prompts are no turns of it.
    chat.llm.push(Reply::text("About 160 EUR."));
    let (status, next) = answer(
        chat.completions(&webui)
            .header(
                "X-OpenWebUI-Chat-Id",
                "6f1c2a9e-0b7d-4c52-9a51-3e2f8d1b7c40",
            )
            .json(&json!({
                "model": "hearth",
                "messages": [
                    { "role": "system", "content": "You are helpful." },
                    { "role": "user", "content": "how much did I spend on groceries?" },
                    { "role": "assistant", "content": "42 EUR this week." },
                    { "role": "user", "content": "and this month?" },
                ],
            })),
    )
    .await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["choices"][0]["message"]["content"], "About 160 EUR.");
    let fourth = chat.llm_messages(4).await;
    let text = all_text(&fourth);
    assert!(!text.contains("### Task:"), "{text}");
    assert_eq!(
        text.matches("how much did I spend on groceries?").count(),
        1,
        "the earlier turn comes from hearth's store, once: {fourth:?}"
    );
    assert!(text.contains("42 EUR this week."));
    chat.process.stop().await;
}

#[tokio::test]
async fn bad_requests_and_tokens_get_openai_shaped_errors() {
    let mut chat = Chat::start("").await;
    let finance_only = chat.create_token(&["books", "--agents", "finance"]);
    let two = chat.create_token(&["two", "--agents", "finance,general"]);
    let revoked = chat.create_token(&["old"]);
    chat.process.cli(&["token", "revoke", "old"]);
    let user = json!([{ "role": "user", "content": "hi" }]);
    let expect = |(status, body): (u16, Value), want: u16, code: &str| {
        assert_eq!(status, want, "{body}");
        let error = &body["error"];
        assert_eq!(error["code"], code, "{body}");
        assert!(error["type"].is_string(), "{body}");
        assert!(
            error["message"].as_str().is_some_and(|m| m.len() > 10),
            "says why: {body}"
        );
    };

    let tool = json!({ "type": "function", "function": { "name": "f", "parameters": {} } });
    expect(
        chat.complete(
            &chat.owner,
            json!({ "model": "hearth", "messages": user, "tools": [tool] }),
        )
        .await,
        400,
        "tools_not_supported",
    );
    expect(
        chat.complete(
            &chat.owner,
            json!({ "model": "hearth", "messages": user, "functions": [{ "name": "f" }] }),
        )
        .await,
        400,
        "tools_not_supported",
    );
    expect(
        chat.complete(
            &chat.owner,
            json!({ "model": "hearth", "messages": [
                { "role": "user", "content": "hi" },
                { "role": "tool", "content": "42", "tool_call_id": "c1" },
            ] }),
        )
        .await,
        400,
        "tools_not_supported",
    );
    expect(
        answer(
            chat.completions(&chat.owner)
                .header("content-type", "application/json")
                .body(r#"{"model": "hearth", "messages": ["#),
        )
        .await,
        400,
        "invalid_json",
    );
    expect(
        chat.complete(
            &chat.owner,
            json!({ "model": "hearth", "messages": [
            { "role": "user", "content": "x".repeat(5000) },
        ] }),
        )
        .await,
        413,
        "request_too_large",
    );
    expect(
        chat.complete(
            &chat.owner,
            json!({ "model": "hearth", "messages": [
            { "role": "system", "content": "be brief" },
        ] }),
        )
        .await,
        400,
        "no_user_message",
    );
    expect(
        chat.complete(
            &chat.owner,
            json!({ "model": "hearth", "messages": [
            { "role": "user", "content": "hi" },
            { "role": "assistant", "content": "hello" },
        ] }),
        )
        .await,
        400,
        "no_user_message",
    );
    expect(
        chat.complete(
            &chat.owner,
            json!({ "model": "hearth", "messages": [
            { "role": "user", "content": [
                { "type": "image_url", "image_url": { "url": "data:image/png;base64,AAAA" } },
            ] },
        ] }),
        )
        .await,
        400,
        "unsupported_content",
    );
    expect(
        chat.complete(&chat.owner, json!({ "model": "gpt-4o", "messages": user }))
            .await,
        404,
        "model_not_found",
    );
    expect(
        chat.complete(
            &chat.owner,
            json!({ "model": "hearth/nobody", "messages": user }),
        )
        .await,
        404,
        "model_not_found",
    );

    // Tokens: missing, wrong, revoked: 401; an agent the token may not use: 403.
    expect(
        answer(
            chat.client
                .post(chat.process.url("/v1/chat/completions"))
                .json(&json!({ "model": "hearth", "messages": user })),
        )
        .await,
        401,
        "invalid_api_key",
    );
    expect(
        chat.complete("hth_wrong", json!({ "model": "hearth", "messages": user }))
            .await,
        401,
        "invalid_api_key",
    );
    expect(
        answer(
            chat.client
                .get(chat.process.url("/v1/models"))
                .bearer_auth(&revoked),
        )
        .await,
        401,
        "invalid_api_key",
    );
    expect(
        chat.complete(
            &finance_only,
            json!({ "model": "hearth/general", "messages": user }),
        )
        .await,
        403,
        "insufficient_permissions",
    );
    expect(
        chat.complete(&two, json!({ "model": "hearth", "messages": user }))
            .await,
        403,
        "model_not_allowed",
    );
    let (status, models) = answer(
        chat.client
            .get(chat.process.url("/v1/models"))
            .bearer_auth(&two),
    )
    .await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = models["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(ids, ["hearth/general", "hearth/finance"], "{models}");
    expect(
        answer(
            chat.client
                .get(chat.process.url("/v1/nothing"))
                .bearer_auth(&chat.owner),
        )
        .await,
        404,
        "not_found",
    );
    assert_eq!(
        chat.llm.request_count(),
        0,
        "no refused request reached the model"
    );
    chat.process.stop().await;
}

#[tokio::test]
async fn a_chat_continues_from_hearths_store_and_an_edited_history_branches() {
    let mut chat = Chat::start("").await;
    chat.llm.push(Reply::text("Nice to meet you, Ada."));
    let first = json!({ "role": "user", "content": "my name is Ada" });
    let reply = json!({ "role": "assistant", "content": "Nice to meet you, Ada." });
    assert_eq!(
        chat.say("c1", json!([first])).await,
        "Nice to meet you, Ada."
    );

    // The next request carries the history; only its last message is new, and the model sees
    // the earlier turn from hearth's store.
    chat.llm.push(Reply::text("You are Ada."));
    let question = json!({ "role": "user", "content": "what is my name?" });
    assert_eq!(
        chat.say("c1", json!([first, reply, question])).await,
        "You are Ada."
    );
    let seen = chat.llm_messages(2).await;
    let roles: Vec<&str> = seen.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"], "{seen:?}");
    assert_eq!(text_of(&seen[1]), "my name is Ada");
    assert_eq!(text_of(&seen[2]), "Nice to meet you, Ada.");
    assert_eq!(text_of(&seen[3]), "what is my name?");

    // The user edits their first message (Open WebUI keeps the rest): no error, a branch
    // whose first turn carries the chat as the client shows it.
    chat.llm.push(Reply::text("You are Bob."));
    let edited = json!({ "role": "user", "content": "my name is Bob" });
    let answered = json!({ "role": "assistant", "content": "You are Ada." });
    assert_eq!(
        chat.say(
            "c1",
            json!([edited, reply, question, answered, { "role": "user", "content": "and now?" }])
        )
        .await,
        "You are Bob."
    );
    let seen = chat.llm_messages(3).await;
    let text = all_text(&seen);
    assert!(text.contains("my name is Bob"), "{text}");
    assert!(
        !text.contains("my name is Ada"),
        "the edited history only: {text}"
    );
    assert!(text.contains("and now?"));

    // The branch goes on like any conversation; the original one is untouched.
    chat.llm.push(Reply::text("Still Bob."));
    let later = json!([
        edited, reply, question, answered,
        { "role": "user", "content": "and now?" },
        { "role": "assistant", "content": "You are Bob." },
        { "role": "user", "content": "sure?" },
    ]);
    assert_eq!(chat.say("c1", later).await, "Still Bob.");
    let seen = chat.llm_messages(4).await;
    let text = all_text(&seen);
    assert_eq!(text.matches("my name is Bob").count(), 1, "{seen:?}");
    assert!(!text.contains("my name is Ada"));
    assert_eq!(text_of(seen.last().expect("last")), "sure?");
    chat.llm.push(Reply::text("Ada, still."));
    let original =
        json!([first, reply, question, answered, { "role": "user", "content": "sure?" }]);
    assert_eq!(chat.say("c1", original).await, "Ada, still.");
    let seen = chat.llm_messages(5).await;
    let text = all_text(&seen);
    assert!(
        text.contains("my name is Ada") && !text.contains("Bob"),
        "{text}"
    );

    // Without a header or `user`, the key is derived from the token and the first message.
    chat.llm.push(Reply::text("Hi!"));
    chat.llm.push(Reply::text("Again hi."));
    let hello = json!({ "role": "user", "content": "hello there" });
    for messages in [
        json!([hello]),
        json!([hello, { "role": "assistant", "content": "Hi!" }, { "role": "user", "content": "again" }]),
    ] {
        let (status, body) = chat
            .complete(
                &chat.owner,
                json!({ "model": "hearth", "messages": messages }),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let seen = chat.llm_messages(7).await;
    let roles: Vec<&str> = seen.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"], "{seen:?}");
    chat.process.stop().await;
}

#[tokio::test]
async fn a_retried_request_gets_its_answer_once_and_a_regeneration_a_new_one() {
    let mut chat = Chat::start("").await;
    let ask = json!([{ "role": "user", "content": "think slowly" }]);
    let request = || {
        chat.completions(&chat.owner)
            .header("X-Hearth-Conversation", "retry")
            .json(&json!({ "model": "hearth", "messages": ask }))
    };
    chat.llm
        .push(Reply::text("A slow answer.").delay(Duration::from_secs(3)));
    // The client gives up before the answer comes, and sends the same request again.
    let gave_up = request().timeout(Duration::from_millis(500)).send().await;
    assert!(gave_up.is_err(), "{gave_up:?}");
    let (status, again) = answer(request()).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["choices"][0]["message"]["content"], "A slow answer.");
    assert_eq!(chat.llm.request_count(), 1, "one turn for both requests");

    // Once the client had the answer, the same request regenerates it.
    chat.llm.push(Reply::text("Another answer."));
    let (status, regenerated) = answer(request()).await;
    assert_eq!(status, 200, "{regenerated}");
    assert_eq!(
        regenerated["choices"][0]["message"]["content"],
        "Another answer."
    );
    assert_eq!(chat.llm.request_count(), 2);
    chat.process.stop().await;
}

/// Reads a streamed answer until `until` is in its text; the text so far and the stream.
async fn read_until<B: AsRef<[u8]> + std::fmt::Debug>(
    stream: &mut (impl futures::Stream<Item = reqwest::Result<B>> + Unpin),
    body: &mut String,
    until: &str,
) {
    let read = async {
        while !streamed_text(&data_lines(body)).contains(until) {
            match stream.next().await {
                Some(Ok(bytes)) => body.push_str(&String::from_utf8_lossy(bytes.as_ref())),
                other => panic!(
                    "the stream ended before {until:?}: {other:?}
{body}"
                ),
            }
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .unwrap_or_else(|_| panic!("no {until:?} in time: {body}"));
}

/// Reads a streamed answer to its end; the `data:` payloads of all of it.
async fn read_to_end<B: AsRef<[u8]>>(
    stream: &mut (impl futures::Stream<Item = reqwest::Result<B>> + Unpin),
    body: &mut String,
) -> Vec<Value> {
    while let Some(Ok(bytes)) = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("the stream ends")
    {
        body.push_str(&String::from_utf8_lossy(bytes.as_ref()));
    }
    data_lines(body)
}

#[tokio::test]
async fn a_turn_waiting_for_approval_goes_on_in_the_stream_when_approved_over_the_api() {
    let mut chat = Chat::start("confirm_wait_secs = 60").await;
    chat.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "delete_task",
        r#"{"task_id": 1}"#,
    )]));
    chat.llm.push(Reply::text("Deleted task 1."));
    let response = chat
        .completions(&chat.owner)
        .header("X-Hearth-Conversation", "tasks")
        .json(&json!({
            "model": "hearth",
            "messages": [{ "role": "user", "content": "delete task 1" }],
            "stream": true,
        }))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut body = String::new();
    read_until(&mut stream, &mut body, "deny ").await;
    let text = streamed_text(&data_lines(&body));
    assert!(text.contains("Needs approval: `delete_task("), "{text}");
    assert!(
        text.contains("task_id"),
        "what the tool wants to do: {text}"
    );
    let code = code_in(&text);
    // While it waits, the stream stays open with keep-alive comments (every 15 s).
    let keep_alive = async {
        while !body.contains("\n: keep-alive") {
            match stream.next().await {
                Some(Ok(bytes)) => body.push_str(&String::from_utf8_lossy(bytes.as_ref())),
                other => panic!("the stream ended while waiting: {other:?}\n{body}"),
            }
        }
    };
    tokio::time::timeout(WAIT, keep_alive)
        .await
        .unwrap_or_else(|_| panic!("no keep-alive comment: {body}"));

    let (status, pending) = answer(
        chat.client
            .get(chat.process.url("/api/v1/confirmations"))
            .bearer_auth(&chat.owner),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(pending["confirmations"][0]["code"], code.as_str());
    let id = pending["confirmations"][0]["id"].as_str().expect("id");
    let (status, decided) = answer(
        chat.client
            .post(chat.process.url(&format!("/api/v1/confirmations/{id}")))
            .bearer_auth(&chat.owner)
            .json(&json!({ "decision": "approve" })),
    )
    .await;
    assert_eq!(status, 200, "{decided}");

    read_until(&mut stream, &mut body, "Deleted task 1.").await;
    let chunks = read_to_end(&mut stream, &mut body).await;
    assert_eq!(chunks.last(), Some(&json!("[DONE]")));
    let text = streamed_text(&chunks);
    // The decision and the answer are two paragraphs, as in every channel (issue 50).
    assert!(text.contains("✅ Approved.\n\n"), "{text}");
    assert!(text.ends_with("Deleted task 1."), "{text}");
    chat.process.stop().await;
}

#[cfg(feature = "telegram")]
#[tokio::test]
async fn a_waiting_stream_goes_on_when_the_owner_approves_with_the_telegram_button() {
    const OWNER: i64 = 4242;
    let (mut chat, tg) = Chat::with_telegram_owner("424242:openai-endpoint-test", OWNER).await;
    chat.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "delete_task",
        r#"{"task_id": 7}"#,
    )]));
    chat.llm.push(Reply::text("Deleted task 7."));
    let response = chat
        .completions(&chat.owner)
        .json(&json!({
            "model": "hearth",
            "messages": [{ "role": "user", "content": "delete task 7" }],
            "stream": true,
        }))
        .send()
        .await
        .expect("answers");
    let mut stream = response.bytes_stream();
    let mut body = String::new();
    read_until(&mut stream, &mut body, "deny ").await;

    // The prompt also went to the owner's Telegram chat, with buttons; the owner approves there.
    let prompt = chat.routed_prompt(&tg, OWNER).await;
    let approve = prompt.buttons[0][0].1.clone();
    tg.press(OWNER, OWNER, prompt.id, &approve);

    read_until(&mut stream, &mut body, "Deleted task 7.").await;
    let chunks = read_to_end(&mut stream, &mut body).await;
    assert_eq!(chunks.last(), Some(&json!("[DONE]")));
    let text = streamed_text(&chunks);
    // The decision and the answer are two paragraphs, as in every channel (issue 50).
    assert!(text.contains("✅ Approved.\n\n"), "{text}");
    assert!(text.ends_with("Deleted task 7."), "{text}");
    chat.process.stop().await;
}

#[tokio::test]
async fn an_approval_not_given_in_time_ends_the_answer_and_a_later_approve_code_resumes_it() {
    let mut chat = Chat::start("confirm_wait_secs = 1").await;
    let reader = chat.create_token(&["reader", "--scope", "chat"]);

    // A chat-only token's turn waits too, but typing the code needs scope approve.
    chat.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "delete_task",
        r#"{"task_id": 1}"#,
    )]));
    let ask = json!({ "role": "user", "content": "delete task 1" });
    let waited = chat.say_as(&reader, "tasks", json!([ask])).await;
    let code = code_in(&waited);
    let (status, refused) = answer(
        chat.completions(&reader)
            .header("X-Hearth-Conversation", "tasks")
            .json(&json!({ "model": "hearth", "messages": [
                ask,
                { "role": "assistant", "content": waited },
                { "role": "user", "content": format!("approve {code}") },
            ] })),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "insufficient_permissions");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("approve")),
        "{refused}"
    );

    // The owner's turn waits longer than the answer does: the answer ends saying so.
    chat.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c2",
        "delete_task",
        r#"{"task_id": 2}"#,
    )]));
    chat.llm.push(Reply::text("Deleted task 2."));
    let ask = json!({ "role": "user", "content": "delete task 2" });
    let waited = chat.say("tasks", json!([ask])).await;
    assert!(waited.contains("Needs approval: `delete_task("), "{waited}");
    assert!(waited.contains("Still waiting for approval"), "{waited}");
    let code = code_in(&waited);

    // The code typed as the chat's next message decides, and the answer is the resumed turn's.
    let resumed = chat
        .say(
            "tasks",
            json!([
                ask,
                { "role": "assistant", "content": waited },
                { "role": "user", "content": format!("approve {}", code.to_lowercase()) },
            ]),
        )
        .await;
    assert!(resumed.contains("Approved"), "{resumed}");
    assert!(resumed.ends_with("Deleted task 2."), "{resumed}");
    chat.process.stop().await;
}

/// Open WebUI with model `hearth/<agent>`: the typed `approve CODE` decides (the agent rides
/// beside the text, so the daemon reads the code as typed), at once rather than when the
/// confirmation expires, and the approval line and the answer are two paragraphs.
#[tokio::test]
async fn a_typed_code_approves_in_a_chat_with_an_agent_model_through_the_official_client() {
    let python = match hearth_testkit::python::openai_python() {
        Ok(python) => python,
        Err(err) => panic!("the openai Python client is needed: {err}"),
    };
    let mut chat = Chat::start("confirm_wait_secs = 2").await;
    let webui = chat.create_token(&["webui", "--scope", "approve"]);
    chat.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "delete_task",
        r#"{"task_id": 3}"#,
    )]));
    chat.llm.push(Reply::text("Deleted task 3."));
    let script = chat.process.dir.path().join("approve.py");
    std::fs::write(
        &script,
        r#"
import json, sys, time
import openai

base_url, key = sys.argv[1], sys.argv[2]
# The confirmation itself expires after 10 minutes: a client still waiting after 60 s failed.
client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=60)
headers = {"X-OpenWebUI-Chat-Id": "chat-with-an-agent-model"}
ask = {"role": "user", "content": "delete task 3"}
first = client.chat.completions.create(
    model="hearth/general", messages=[ask], extra_headers=headers
)
waited = first.choices[0].message.content
code = waited.split("approve ", 1)[1][:6]
started = time.monotonic()
text = ""
for chunk in client.chat.completions.create(
    model="hearth/general",
    messages=[ask, {"role": "assistant", "content": waited},
              {"role": "user", "content": "approve " + code}],
    stream=True, extra_headers=headers,
):
    for choice in chunk.choices:
        text += choice.delta.content or ""
print(json.dumps({"waited": waited, "code": code, "approved": text,
                  "seconds": time.monotonic() - started}))
"#,
    )
    .expect("script");
    let base_url = chat.process.url("/v1");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .args([&base_url, &webui])
            .output()
    })
    .await
    .expect("joined")
    .expect("python runs");
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        chat.process.logs()
    );
    let out: Value = serde_json::from_slice(&output.stdout).expect("the script's JSON");
    let waited = out["waited"].as_str().expect("waited");
    assert!(waited.contains("Needs approval: `delete_task("), "{waited}");
    assert!(waited.contains("Still waiting for approval"), "{waited}");
    let approved = out["approved"].as_str().expect("approved");
    assert!(
        approved.starts_with("✅ Approved by webui"),
        "the typed code decided: {approved}\n{}",
        chat.process.logs()
    );
    assert!(
        approved.ends_with("\n\nDeleted task 3."),
        "the answer is a paragraph of its own: {approved:?}"
    );
    assert!(
        out["seconds"].as_f64().is_some_and(|s| s < 30.0),
        "answered at once, not when the confirmation expired: {out}"
    );
    // The model heard the request and the tool's result, never the code as a message.
    let code = out["code"].as_str().expect("code");
    let requests = chat.llm.wait_for_requests(2, WAIT).await;
    assert_eq!(requests.len(), 2, "{requests:?}");
    for request in &requests {
        let messages = request["messages"].as_array().expect("messages");
        assert!(!all_text(messages).contains(code), "{messages:?}");
    }
    chat.process.stop().await;
}

impl Chat {
    /// The native API's view of a turn: its state, and its events' kinds and data.
    async fn turn_state(&self, turn: &str) -> Value {
        let (status, state) = answer(
            self.client
                .get(self.process.url(&format!("/api/v1/turns/{turn}")))
                .bearer_auth(&self.owner),
        )
        .await;
        assert_eq!(status, 200, "{state}");
        state
    }

    /// Waits until the turn has ended; its state.
    async fn ended(&self, turn: &str) -> Value {
        self.process
            .wait_for(WAIT, "the turn to end", async || {
                let state = self.turn_state(turn).await;
                ["completed", "failed", "cancelled"]
                    .contains(&state["state"].as_str().unwrap_or_default())
                    .then_some(state)
            })
            .await
    }

    /// The whole event stream of an ended turn, as text.
    async fn turn_events(&self, turn: &str) -> String {
        let response = self
            .client
            .get(self.process.url(&format!("/api/v1/turns/{turn}/events")))
            .bearer_auth(&self.owner)
            .send()
            .await
            .expect("answers");
        tokio::time::timeout(WAIT, response.text())
            .await
            .expect("the events of an ended turn end")
            .expect("events")
    }
}

/// The turn behind a streamed answer: its chunks' id is `chatcmpl-<turn>`.
fn turn_of(body: &str) -> String {
    data_lines(body)[0]["id"]
        .as_str()
        .and_then(|id| id.strip_prefix("chatcmpl-"))
        .unwrap_or_else(|| panic!("no completion id: {body}"))
        .to_string()
}

#[tokio::test]
async fn closing_a_streamed_answer_stops_its_turn_and_the_chat_goes_on() {
    let mut chat = Chat::start("").await;
    // A slow model, visibly writing: about ten seconds for the whole answer.
    chat.llm.push(
        Reply::text("One, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve.")
            .pace(Duration::from_millis(400)),
    );
    let ask = json!({ "role": "user", "content": "count slowly" });
    let response = chat
        .completions(&chat.owner)
        .header("X-Hearth-Conversation", "stop")
        .json(&json!({ "model": "hearth", "messages": [ask], "stream": true }))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut body = String::new();
    read_until(&mut stream, &mut body, "On").await;
    let turn = turn_of(&body);
    // The Stop button: the client closes the connection after the first words.
    drop(stream);

    let state = chat.ended(&turn).await;
    assert_eq!(state["state"], "cancelled", "{state}");
    let events = chat.turn_events(&turn).await;
    assert!(
        events.contains("event: turn.cancelling")
            && events.contains("the client closed the streamed completion"),
        "why is recorded: {events}"
    );
    assert!(events.contains("event: turn.failed"), "{events}");
    assert_eq!(chat.llm.request_count(), 1);

    // Asked again, the stopped question is answered anew (not with the cancelled turn).
    chat.llm.push(Reply::text("One to twelve."));
    let again = chat.say("stop", json!([ask])).await;
    assert_eq!(again, "One to twelve.");
    // And the chat goes on.
    chat.llm.push(Reply::text("Twelve to one."));
    let next = chat
        .say(
            "stop",
            json!([
                ask,
                { "role": "assistant", "content": again },
                { "role": "user", "content": "and backwards?" },
            ]),
        )
        .await;
    assert_eq!(next, "Twelve to one.");

    // A client that gives up on a whole (not streamed) answer stops nothing: its retry gets
    // the answer (a_retried_request_gets_its_answer_once_and_a_regeneration_a_new_one).
    chat.process.stop().await;
}

#[cfg(feature = "telegram")]
#[tokio::test]
async fn closing_a_stream_waiting_for_approval_cancels_the_turn_and_the_owners_prompt_says_so() {
    const OWNER: i64 = 4243;
    let (mut chat, tg) = Chat::with_telegram_owner("424242:openai-endpoint-stop", OWNER).await;
    chat.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "delete_task",
        r#"{"task_id": 7}"#,
    )]));
    let ask = json!({ "role": "user", "content": "delete task 7" });
    let response = chat
        .completions(&chat.owner)
        .header("X-Hearth-Conversation", "tasks")
        .json(&json!({ "model": "hearth", "messages": [ask], "stream": true }))
        .send()
        .await
        .expect("answers");
    let mut stream = response.bytes_stream();
    let mut body = String::new();
    read_until(&mut stream, &mut body, "deny ").await;
    let turn = turn_of(&body);
    let shown = streamed_text(&data_lines(&body));
    let code = code_in(&shown);
    let prompt = chat.routed_prompt(&tg, OWNER).await;

    // Stop while it waits: the turn is cancelled, and the owner's prompt shows it.
    drop(stream);
    let state = chat.ended(&turn).await;
    assert_eq!(state["state"], "cancelled", "{state}");
    chat.process
        .wait_for(WAIT, "the owner's prompt to show the cancel", async || {
            tg.messages(OWNER)
                .into_iter()
                .find(|m| m.id == prompt.id && m.text.contains("Cancelled by"))
        })
        .await;
    let (_, pending) = answer(
        chat.client
            .get(chat.process.url("/api/v1/confirmations"))
            .bearer_auth(&chat.owner),
    )
    .await;
    assert_eq!(pending["confirmations"], json!([]));

    // The code typed afterwards says the request is no longer pending; the tool never ran.
    let later = chat
        .say(
            "tasks",
            json!([
                ask,
                { "role": "assistant", "content": shown },
                { "role": "user", "content": format!("approve {code}") },
            ]),
        )
        .await;
    assert!(later.contains("no longer pending"), "{later}");
    assert_eq!(chat.llm.request_count(), 1, "the model was not asked again");
    chat.process.stop().await;
}
