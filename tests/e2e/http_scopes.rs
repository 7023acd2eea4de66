//! The HTTP tokens' scopes hold where decisions are made, over real HTTP against the running
//! daemon: a `chat` token linked to the owner decides nobody's request in any form the daemon
//! reads (typed codes with punctuation or extra words, a quoted first line, a confirmation id
//! anywhere, an id hidden in the history a chat app sends), and its listing shows only what
//! its own turns wait for, without ids; a token of scope `approve` still decides.
//! Rotating an owner-linked token keeps the owner the owner.

use std::time::Duration;

use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::http::{Api, answer};

const WAIT: Duration = Duration::from_secs(30);

impl Api {
    async fn post_as(
        &self,
        token: &str,
        path: &str,
        key: Option<&str>,
        body: Value,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .post(self.process.url(path))
            .bearer_auth(token)
            .json(&body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        answer(request).await
    }

    async fn complete_as(&self, token: &str, body: Value) -> (u16, Value) {
        answer(
            self.client
                .post(self.process.url("/v1/chat/completions"))
                .bearer_auth(token)
                .json(&body),
        )
        .await
    }

    async fn get_as(&self, token: &str, path: &str) -> (u16, Value) {
        answer(self.client.get(self.process.url(path)).bearer_auth(token)).await
    }

    /// Starts a turn of `token` with `text` and waits until it is in one of `states`: the
    /// turn as `GET /turns/{id}` shows it.
    async fn turn_until(&self, token: &str, key: &str, text: &str, states: &[&str]) -> Value {
        let (status, started) = self
            .post_as(token, "/api/v1/turns", Some(key), json!({ "text": text }))
            .await;
        assert_eq!(status, 202, "{started}");
        let path = format!("/api/v1/turns/{}", started["turn"].as_str().expect("turn"));
        self.process
            .wait_for(WAIT, "the turn's state", async || {
                let (_, turn) = self.get_as(token, &path).await;
                states
                    .contains(&turn["state"].as_str().unwrap_or_default())
                    .then_some(turn)
            })
            .await
    }

    /// The confirmation `id` as the owner's listing shows it (`None` once it is no longer
    /// pending).
    async fn pending(&self, id: &str) -> Option<Value> {
        let (status, listed) = self.get_as(&self.owner, "/api/v1/confirmations").await;
        assert_eq!(status, 200, "{listed}");
        listed["confirmations"]
            .as_array()
            .expect("confirmations")
            .iter()
            .find(|c| c["id"] == id)
            .cloned()
    }

    /// A guest's turn that waits for approval of `delete_task`: its confirmation as the owner
    /// sees it.
    async fn guests_waiting_request(&self, guest: &str) -> Value {
        self.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
            "g1",
            "delete_task",
            r#"{"task_id": 1}"#,
        )]));
        let turn = self
            .turn_until(guest, "g1", "delete task 1", &["awaiting_confirmation"])
            .await;
        let (_, listed) = self.get_as(&self.owner, "/api/v1/confirmations").await;
        listed["confirmations"]
            .as_array()
            .expect("confirmations")
            .iter()
            .find(|c| c["turn"] == turn["turn"])
            .cloned()
            .unwrap_or_else(|| panic!("the guest's request is listed for the owner: {listed}"))
    }
}

#[tokio::test]
async fn a_chat_token_linked_to_the_owner_decides_nothing_and_an_approve_token_does() {
    let mut h = Api::new("").await;
    let guest = h.create_token(&["guest", "--scope", "approve"]);
    let phone = h.create_token(&["phone", "--scope", "chat"]);
    let laptop = h.create_token(&["laptop", "--scope", "approve"]);
    for linked in ["http:phone", "http:laptop"] {
        let out = h.process.cli(&["pair", "link", "http:owner", linked]);
        assert!(!out.contains("rror"), "{out}");
    }
    h.process.start().await;
    let request = h.guests_waiting_request(&guest).await;
    let id = request["id"].as_str().expect("id").to_string();
    let code = request["code"].as_str().expect("code").to_string();

    // The chat token's listing shows none of the guest's requests, though its user (the owner)
    // may decide them.
    let (status, listed) = h.get_as(&phone, "/api/v1/confirmations").await;
    assert_eq!(
        (status, &listed["confirmations"]),
        (200, &json!([])),
        "{listed}"
    );

    // Every form the daemon reads as a decision is refused, on both endpoints.
    let forms = [
        format!("approve {code}."),
        format!("Approve {code} please"),
        format!("> quoted\napprove {code}"),
        format!("ok: approve {id}"),
        format!("please deny {id} thanks"),
    ];
    for (n, text) in forms.iter().enumerate() {
        let (status, refused) = h
            .post_as(
                &phone,
                "/api/v1/turns",
                Some(&format!("p{n}")),
                json!({ "text": text, "conversation": format!("other{n}") }),
            )
            .await;
        assert_eq!(status, 403, "{text}: {refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("scope chat") && m.contains("approve")),
            "{refused}"
        );
        let (status, refused) = h
            .complete_as(
                &phone,
                json!({ "model": "hearth", "messages": [{ "role": "user", "content": text }] }),
            )
            .await;
        assert_eq!(status, 403, "{text}: {refused}");
        assert_eq!(refused["error"]["code"], "insufficient_permissions");
    }

    // A decision the HTTP layer does not look for (in the history a chat app sends along to a
    // new chat) reaches the daemon, which holds the sender to its scope and says so.
    let (status, answered) = answer(
        h.client
            .post(h.process.url("/v1/chat/completions"))
            .bearer_auth(&phone)
            .header("X-Hearth-Conversation", "fresh")
            .json(&json!({ "model": "hearth", "messages": [
                { "role": "user", "content": format!("ok: approve {id}") },
                { "role": "assistant", "content": "Noted." },
                { "role": "user", "content": "thanks" },
            ] })),
    )
    .await;
    assert_eq!(status, 200, "{answered}");
    let text = answered["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    assert!(
        text.contains("not decide confirmations") && text.contains("scope approve"),
        "{text}"
    );
    let still = h
        .pending(&id)
        .await
        .expect("the guest's request still waits");
    assert_eq!(still["status"], "pending");
    assert_eq!(
        h.llm.request_count(),
        1,
        "only the guest's turn called the model"
    );

    // A token of scope approve linked to the owner decides it with the id, in any conversation.
    h.llm.push(Reply::text("Deleted task 1."));
    let decided = h
        .turn_until(&laptop, "l1", &format!("ok: approve {id}"), &["completed"])
        .await;
    assert!(
        decided["text"]
            .as_str()
            .is_some_and(|t| t.contains("Approved by laptop")),
        "{decided}"
    );
    assert!(h.pending(&id).await.is_none(), "decided");
    h.process.stop().await;
}

#[tokio::test]
async fn a_chat_token_lists_only_its_own_waiting_requests_without_ids_and_may_cancel_them() {
    let mut h = Api::new("").await;
    let kiosk = h.create_token(&["kiosk", "--scope", "chat"]);
    h.process.start().await;
    h.llm.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "k1",
        "delete_task",
        r#"{"task_id": 1}"#,
    )]));
    let turn = h
        .turn_until(&kiosk, "k1", "delete task 1", &["awaiting_confirmation"])
        .await;
    let (status, listed) = h.get_as(&kiosk, "/api/v1/confirmations").await;
    assert_eq!(status, 200, "{listed}");
    let own = &listed["confirmations"][0];
    assert_eq!(own["turn"], turn["turn"], "{listed}");
    assert_eq!(own["tool"], "delete_task");
    assert!(
        own.get("id").is_none() && own.get("code").is_none(),
        "{own}"
    );
    let id = h.pending_id_of(turn["turn"].as_str().expect("turn")).await;
    let (status, refused) = h
        .post_as(
            &kiosk,
            &format!("/api/v1/confirmations/{id}"),
            None,
            json!({ "decision": "approve" }),
        )
        .await;
    assert_eq!(status, 403, "{refused}");

    // Its own turn it may still cancel: that decides nothing for anyone else.
    let path = format!("/api/v1/turns/{}", turn["turn"].as_str().expect("turn"));
    let (status, cancelling) = h
        .post_as(&kiosk, &format!("{path}/cancel"), None, json!({}))
        .await;
    assert_eq!(status, 202, "{cancelling}");
    let ended = h
        .process
        .wait_for(WAIT, "the turn to end", async || {
            let (_, turn) = h.get_as(&kiosk, &path).await;
            (turn["state"] == "cancelled").then_some(turn)
        })
        .await;
    assert_eq!(ended["state"], "cancelled");
    assert!(h.pending(&id).await.is_none(), "its request was cancelled");
    h.process.stop().await;
}

impl Api {
    /// The id of the confirmation the turn `turn` waits for, as the owner's listing shows it.
    async fn pending_id_of(&self, turn: &str) -> String {
        let (_, listed) = self.get_as(&self.owner, "/api/v1/confirmations").await;
        listed["confirmations"]
            .as_array()
            .expect("confirmations")
            .iter()
            .find(|c| c["turn"] == turn)
            .and_then(|c| c["id"].as_str())
            .unwrap_or_else(|| panic!("the turn's request is listed: {listed}"))
            .to_string()
    }
}

#[tokio::test]
async fn rotating_an_owner_linked_token_keeps_the_owner_deciding_others_requests() {
    let mut h = Api::new("").await;
    let guest = h.create_token(&["guest", "--scope", "approve"]);
    h.create_token(&["laptop", "--scope", "approve"]);
    let linked = h
        .process
        .cli(&["pair", "link", "http:owner", "http:laptop"]);
    assert!(!linked.contains("rror"), "{linked}");
    // An agent the agents file does not have is refused, and nothing is made.
    let unknown = h
        .process
        .cli(&["token", "create", "kiosk", "--agents", "general,nope"]);
    assert!(
        unknown.contains("no agent nope") && !unknown.contains("hth_"),
        "{unknown}"
    );
    h.process.start().await;

    let request = h.guests_waiting_request(&guest).await;
    let id = request["id"].as_str().expect("id").to_string();
    let token_in = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("hth_"))
            .unwrap_or_else(|| panic!("no token printed: {out}"))
            .to_string()
    };

    // The laptop is lost: revoked and made again with --same-user, it is the owner's again.
    h.process.cli(&["token", "revoke", "laptop"]);
    let same = h.process.cli(&[
        "token",
        "create",
        "laptop",
        "--scope",
        "approve",
        "--same-user",
    ]);
    assert!(
        same.contains("the owner") && same.contains("as before"),
        "{same}"
    );
    let laptop = token_in(&same);
    let (_, mine) = h.get_as(&laptop, "/api/v1/confirmations").await;
    assert_eq!(mine["confirmations"][0]["id"], id.as_str(), "{mine}");
    // And the owner is still the owner: the guest's request is still theirs to decide.
    assert!(h.pending(&id).await.is_some(), "the owner still sees it");

    // Made again without --same-user, the name starts a fresh user, and the CLI says whose it
    // was; the new token is nobody special.
    h.process.cli(&["token", "revoke", "laptop"]);
    let fresh = h
        .process
        .cli(&["token", "create", "laptop", "--scope", "approve"]);
    assert!(
        fresh.contains("was user #") && fresh.contains("the owner") && fresh.contains("fresh user"),
        "{fresh}"
    );
    let laptop = token_in(&fresh);
    let (_, theirs) = h.get_as(&laptop, "/api/v1/confirmations").await;
    assert_eq!(theirs["confirmations"], json!([]), "{theirs}");
    assert!(h.pending(&id).await.is_some(), "the owner still sees it");

    // A name whose identity is live and someone's is refused without --same-user.
    h.process
        .cli(&["pair", "link", "http:owner", "http:tablet"]);
    let refused = h.process.cli(&["token", "create", "tablet"]);
    assert!(
        refused.contains("http:tablet exists and belongs to user #")
            && refused.contains("the owner")
            && refused.contains("--same-user")
            && !refused.contains("hth_"),
        "{refused}"
    );

    h.llm.push(Reply::text("Deleted task 1."));
    let (status, decided) = h
        .post_as(
            &h.owner,
            &format!("/api/v1/confirmations/{id}"),
            None,
            json!({ "decision": "approve" }),
        )
        .await;
    assert_eq!(
        (status, &decided["status"]),
        (200, &json!("approved")),
        "{decided}"
    );
    h.process.stop().await;
}
