//! `start_background_task`: the admission rule, the cap and bad input.

use hearth_channel::{ChatRef, Inbound, Sender};
use serde_json::json;

use super::{asks_for_later, tools};
use crate::provider::ChatMessage;
use crate::store::background::BackgroundState;
use crate::tool::{Risk, ToolContext, ToolError, test_context};

#[test]
fn later_is_asked_for_in_words_not_in_passing() {
    for asked in [
        "Look into it and tell me tonight",
        "Find flats near the station, no rush",
        "report back when you're done",
        "When you’re done, send me the list",
        "Kannst du das im Hintergrund machen?",
        "Schau es dir an und melde dich heute Abend",
        "do it LATER please",
    ] {
        assert!(asks_for_later(asked), "{asked}");
    }
    for not_asked in [
        "What's the weather now?",
        "Find flats near the station",
        "let me know the time",
        "the backgrounds of these photos",
        "collateral damage",
        "",
    ] {
        assert!(!asks_for_later(not_asked), "{not_asked}");
    }
}

/// `ctx` answering a message `text` from `sender` with a turn of its own.
async fn answering(ctx: &mut ToolContext, n: i64, sender: &str, text: &str) -> i64 {
    let event = Inbound::message(
        format!("m{n}"),
        ChatRef::new("c1"),
        Sender::new(sender),
        text,
    );
    let mut event = event;
    if let hearth_channel::InboundKind::Message { message_id, .. } = &mut event.kind {
        *message_id = Some(format!("platform-{n}"));
    }
    let inbox = ctx
        .store
        .insert_inbox("test", &event, n)
        .await
        .expect("inbox")
        .expect("new");
    let conversation = ctx
        .store
        .conversation("test", &event.chat, n)
        .await
        .expect("conversation");
    let turn = ctx
        .store
        .start_turn(
            inbox,
            &conversation,
            ctx.user_id,
            ("general", None),
            None,
            &ChatMessage::user(text),
            n,
        )
        .await
        .expect("turn");
    ctx.conversation_id = conversation.id;
    ctx.turn_id = turn.id;
    inbox
}

async fn risk(ctx: &ToolContext) -> Risk {
    let tool = tools().remove(0);
    tool.risk_in_turn(ctx, &json!({"title": "t", "instructions": "i"}))
        .await
}

async fn start(ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
    tools().remove(0).call(ctx, args).await
}

#[tokio::test]
async fn a_task_starts_unasked_only_when_the_persons_message_asks_for_it() {
    let (mut ctx, _dir) = test_context().await;
    let origin = answering(&mut ctx, 1, "u1", "Compare flats and tell me tonight").await;
    assert_eq!(
        risk(&ctx).await,
        Risk::Write,
        "asked for: no prompt at medium"
    );

    let text = start(
        &ctx,
        json!({"title": "Flats", "instructions": "Compare three flats", "report_by": "in 3 hours"}),
    )
    .await
    .expect("started");
    assert!(
        text.contains("Background task #1 “Flats” is stored"),
        "{text}"
    );
    let task = ctx
        .store
        .background_task(1)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(task.state, BackgroundState::Queued);
    assert_eq!(task.origin_inbox_id, origin);
    assert_eq!(task.origin_message_id.as_deref(), Some("platform-1"));
    assert_eq!(task.requester, "u1");
    assert!(task.report_by.is_some());

    // An ordinary request: the model wanting to go off on its own asks first.
    answering(&mut ctx, 2, "u1", "Compare flats near the station").await;
    assert_eq!(risk(&ctx).await, Risk::Outward);

    // A schedule's run cannot start one at all.
    answering(
        &mut ctx,
        3,
        crate::scheduler::SENDER_ID,
        "Look into it later",
    )
    .await;
    let refused = start(&ctx, json!({"title": "x", "instructions": "y"}))
        .await
        .expect_err("refused");
    assert!(
        refused.to_string().contains("only from a person's message"),
        "{refused}"
    );
}

#[tokio::test]
async fn bad_times_and_a_full_cap_are_refused_with_what_to_do() {
    let (mut ctx, _dir) = test_context().await;
    answering(&mut ctx, 1, "u1", "look into these later").await;
    let past = start(
        &ctx,
        json!({"title": "a", "instructions": "b", "report_by": "2001-01-01 10:00"}),
    )
    .await
    .expect_err("past");
    assert!(past.to_string().contains("not in the future"), "{past}");
    let garbage = start(
        &ctx,
        json!({"title": "a", "instructions": "b", "report_by": "whenever"}),
    )
    .await
    .expect_err("unreadable");
    assert!(
        matches!(garbage, ToolError::InvalidArguments(_)),
        "{garbage}"
    );
    let blank = start(&ctx, json!({"title": "  ", "instructions": "b"}))
        .await
        .expect_err("blank title");
    assert!(blank.to_string().contains("non-empty"), "{blank}");
    assert_eq!(
        crate::tool::test_calls::rows(&ctx, "background_tasks").await,
        0
    );

    for n in 1..=3 {
        start(
            &ctx,
            json!({"title": format!("task {n}"), "instructions": "b"}),
        )
        .await
        .expect("within the cap");
    }
    let full = start(&ctx, json!({"title": "task 4", "instructions": "b"}))
        .await
        .expect_err("over the cap");
    let full = full.to_string();
    assert!(
        full.contains("3 background tasks going already (#1 “task 1”, #2 “task 2”, #3 “task 3”)"),
        "{full}"
    );
    assert!(full.contains("/cancel N"), "{full}");
    assert_eq!(
        crate::tool::test_calls::rows(&ctx, "background_tasks").await,
        3
    );
}
