//! MCP calls waiting for approval on SQLite and PostgreSQL: found only by their own caller,
//! run once however often they are asked for, withdrawn once, and expired by the same timer
//! as any confirmation after a restart.

use hearth_channel::{ChatRef, OutboundMessage};

use super::{McpRunState, NewMcpApproval};
use crate::store::test_support::{on_both_backends, stored_message};
use crate::store::{Confirmation, ConfirmationStatus, NewOutbox, OutboxKind, Store};

fn confirmation(id: &str, user: i64, expires_at: i64) -> Confirmation {
    Confirmation {
        id: id.into(),
        turn_id: 0,
        tool_call_id: 0,
        conversation_id: 0,
        channel: "telegram".into(),
        chat_id: "42".into(),
        thread_id: None,
        requester: String::new(),
        user_id: Some(user),
        tool: "delete_task".into(),
        summary: "delete_task({\"task_id\":1})".into(),
        prompt_outbox_id: None,
        status: ConfirmationStatus::Pending,
        decided_by: None,
        created_at: 10,
        expires_at,
        short_code: None,
        wrong_codes: 0,
        routed_channel: None,
        routed_chat_id: None,
        routed_outbox_id: None,
    }
}

fn prompt(text: &str) -> NewOutbox {
    NewOutbox {
        inbox_id: None,
        seq: 0,
        channel: "telegram".into(),
        kind: OutboxKind::Send,
        message: OutboundMessage::text(ChatRef::new("42"), text),
    }
}

async fn create(store: &Store, id: &str, handle: &str, user: i64) {
    let approval = NewMcpApproval {
        handle,
        caller_door: "token phone",
        client: "editor (token phone)",
        agent_id: "general",
        arguments: "{\"task_id\":1}",
    };
    store
        .create_mcp_approval(
            &confirmation(id, user, 1_000),
            &approval,
            &prompt("🔐 delete?"),
            10,
        )
        .await
        .expect("stored");
}

async fn an_approved_call_runs_once_and_a_withdrawn_one_never(store: Store) {
    let user = store
        .allow_identity("telegram", "42", None, "config", true, 1)
        .await
        .expect("user")
        .user_id;
    create(&store, "c1", "h1", user).await;
    create(&store, "c2", "h2", user).await;

    // Its prompt is in the outbox; it belongs to no turn.
    let first = store
        .mcp_approval("c1")
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(first.confirmation.turn_id, 0);
    assert_eq!(first.confirmation.status, ConfirmationStatus::Pending);
    assert_eq!(first.run_state, McpRunState::Waiting);
    let prompt_id = first.confirmation.prompt_outbox_id.expect("a prompt");
    let (shown, _) = store
        .outbox_message(prompt_id)
        .await
        .expect("read")
        .expect("queued");
    assert_eq!(shown.text, "🔐 delete?");
    assert_eq!(
        store
            .confirmation("c1")
            .await
            .expect("read")
            .map(|c| c.tool),
        Some("delete_task".into())
    );

    // Only its caller finds it by its handle.
    let mine = store
        .mcp_approval_by_handle("h1", user, "token phone")
        .await;
    assert_eq!(
        mine.expect("read").map(|a| a.confirmation.id),
        Some("c1".into())
    );
    for (handle, user, door) in [
        ("h1", user, "stdio"),
        ("h1", user + 1, "token phone"),
        ("c1", user, "token phone"),
    ] {
        let other = store.mcp_approval_by_handle(handle, user, door).await;
        assert_eq!(other.expect("read"), None, "{handle} {user} {door}");
    }

    // Not approved yet: nobody may run it.
    assert!(!store.start_mcp_run("c1", 20).await.expect("claim"));
    let (inbox, _) = stored_message(&store, 1, "42").await;
    let approved = (ConfirmationStatus::Approved, "telegram:42");
    assert!(
        store
            .decide_confirmation("c1", approved, inbox, &[], 30)
            .await
            .expect("decide")
    );
    // Approved: the first to ask runs it, the second finds it started.
    assert!(store.start_mcp_run("c1", 40).await.expect("claim"));
    assert!(!store.start_mcp_run("c1", 41).await.expect("claim"));
    store
        .finish_mcp_run("c1", true, "Deleted task 1")
        .await
        .expect("finish");
    let ran = store
        .mcp_approval("c1")
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(ran.run_state, McpRunState::Succeeded);
    assert_eq!(ran.result.as_deref(), Some("Deleted task 1"));
    assert_eq!(ran.started_at, Some(40));
    assert!(!store.start_mcp_run("c1", 50).await.expect("claim"));

    // The other is still pending after a restart (a new handle on the same database): the
    // expiry timer finds it like any confirmation of the channel.
    let expired = store
        .expired_confirmations(1_000, &["telegram".to_string()])
        .await
        .expect("expired");
    assert_eq!(
        expired.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["c2"]
    );

    // Withdrawn once (its prompt edited), then a press changes nothing and it never runs.
    let edit = NewOutbox {
        kind: OutboxKind::Outcome { prompt: prompt_id },
        ..prompt("⏹ Withdrawn")
    };
    assert!(
        store
            .withdraw_mcp_approval("c2", "mcp:gone", &edit, 60)
            .await
            .expect("withdraw")
    );
    assert!(
        !store
            .withdraw_mcp_approval("c2", "mcp:gone", &edit, 61)
            .await
            .expect("again")
    );
    let (inbox, _) = stored_message(&store, 2, "42").await;
    assert!(
        !store
            .decide_confirmation("c2", approved, inbox, &[], 70)
            .await
            .expect("decide")
    );
    assert!(!store.start_mcp_run("c2", 80).await.expect("claim"));
    let withdrawn = store
        .mcp_approval("c2")
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(withdrawn.confirmation.status, ConfirmationStatus::Denied);
    assert_eq!(
        withdrawn.confirmation.decided_by.as_deref(),
        Some("mcp:gone")
    );
    assert_eq!(withdrawn.run_state, McpRunState::Waiting);
}

on_both_backends!(
    an_approved_call_runs_once_and_a_withdrawn_one_never_on_sqlite,
    an_approved_call_runs_once_and_a_withdrawn_one_never_on_postgres,
    an_approved_call_runs_once_and_a_withdrawn_one_never
);
