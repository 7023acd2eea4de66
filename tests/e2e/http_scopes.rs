//! HTTP tokens and the owner, over real HTTP against the running daemon: rotating an
//! owner-linked token keeps the owner the owner.

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
