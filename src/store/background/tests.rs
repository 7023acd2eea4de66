//! The background task family on SQLite and PostgreSQL.

use hearth_channel::ChatRef;

use super::{Admitted, BackgroundState, NewBackgroundTask};
use crate::store::test_support::{on_both_backends, stored_message};
use crate::store::{InboxStatus, Store};

fn new_task(user: i64, conversation: i64, origin: i64, title: &str) -> NewBackgroundTask {
    NewBackgroundTask {
        user_id: user,
        conversation_id: conversation,
        origin_inbox_id: origin,
        channel: "test".into(),
        chat: ChatRef::new("c1"),
        origin_message_id: Some("m1".into()),
        requester: "user".into(),
        reply_context: Some(serde_json::json!({"thread": 7})),
        agent_id: "general".into(),
        title: title.into(),
        instructions: "Compare three flats".into(),
        report_by: Some(5_000),
    }
}

fn stored(admitted: Admitted) -> i64 {
    match admitted {
        Admitted::Stored(id) => id,
        Admitted::Full(running) => panic!("refused; running: {running:?}"),
    }
}

async fn tasks_move_only_from_the_states_they_are_in(store: Store) {
    let user = store
        .allow_identity("test", "user", None, "config", true, 1)
        .await
        .expect("user")
        .user_id;
    let (origin, conversation) = stored_message(&store, 1, "c1").await;
    let channels = vec!["test".to_string()];

    let first = stored(
        store
            .start_background_task(&new_task(user, conversation.id, origin, "flats"), 2, 10)
            .await
            .expect("start"),
    );
    let task = store
        .background_task(first)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(task.state, BackgroundState::Queued);
    assert_eq!(task.chat(), ChatRef::new("c1"));
    assert_eq!(task.reply_context(), Some(serde_json::json!({"thread": 7})));
    assert_eq!(task.report_by, Some(5_000));

    // Not ready while the message that started it is still being answered.
    assert!(
        store
            .ready_background_tasks(&channels)
            .await
            .expect("ready")
            .is_empty()
    );
    store
        .finish_inbox(origin, InboxStatus::Done, None, 11)
        .await
        .expect("answered");
    let ready = store
        .ready_background_tasks(&channels)
        .await
        .expect("ready");
    assert_eq!(ready.iter().map(|t| t.id).collect::<Vec<_>>(), [first]);
    assert!(
        store
            .ready_background_tasks(&["other".to_string()])
            .await
            .expect("ready")
            .is_empty(),
        "another process's channel is not this one's to run"
    );

    // The cap counts tasks going; the refusal lists them and stores nothing.
    let second = stored(
        store
            .start_background_task(&new_task(user, conversation.id, origin, "cars"), 2, 12)
            .await
            .expect("start"),
    );
    match store
        .start_background_task(&new_task(user, conversation.id, origin, "boats"), 2, 13)
        .await
        .expect("start")
    {
        Admitted::Full(running) => {
            let titles: Vec<&str> = running.iter().map(|t| t.title.as_str()).collect();
            assert_eq!(titles, ["flats", "cars"]);
        }
        Admitted::Stored(id) => panic!("a third task was stored as #{id}"),
    }

    // Launch, wait, end: each step only from where it was.
    let (run_inbox, _) = stored_message(&store, 2, "c1").await;
    assert!(
        store
            .launch_background_task(first, run_inbox, 20)
            .await
            .expect("launch")
    );
    assert!(
        !store
            .launch_background_task(first, run_inbox, 21)
            .await
            .expect("twice")
    );
    let task = store
        .background_task_for_inbox(run_inbox)
        .await
        .expect("read")
        .expect("linked");
    assert_eq!(
        (task.id, task.state, task.started_at),
        (first, BackgroundState::Running, Some(20))
    );
    assert!(
        store
            .move_background_task(
                first,
                &[BackgroundState::Running],
                BackgroundState::WaitingApproval,
                None,
                22
            )
            .await
            .expect("wait")
    );
    assert!(
        store
            .move_background_task(
                first,
                BackgroundState::ACTIVE,
                BackgroundState::Failed,
                Some("budget"),
                23
            )
            .await
            .expect("fail")
    );
    assert!(
        !store
            .move_background_task(
                first,
                BackgroundState::ACTIVE,
                BackgroundState::Succeeded,
                None,
                24
            )
            .await
            .expect("too late"),
        "an ended task does not move again"
    );
    let task = store
        .background_task(first)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(
        (task.state, task.last_error.as_deref(), task.finished_at),
        (BackgroundState::Failed, Some("budget"), Some(23))
    );
    assert_eq!(
        store.background_task_cost(&task).await.expect("cost"),
        None,
        "no model call yet"
    );

    // A run entry that is pending is the dispatcher's; one reopened after a decision again.
    let pending = |tasks: Vec<super::BackgroundTask>| tasks.iter().any(|t| t.id == first);
    assert!(pending(
        store
            .background_runs_pending(&channels)
            .await
            .expect("runs")
    ));
    store
        .finish_inbox(run_inbox, InboxStatus::Done, None, 25)
        .await
        .expect("suspended");
    assert!(!pending(
        store
            .background_runs_pending(&channels)
            .await
            .expect("runs")
    ));
    store
        .reopen_background_run(run_inbox)
        .await
        .expect("reopen");
    assert!(pending(
        store
            .background_runs_pending(&channels)
            .await
            .expect("runs")
    ));
    assert_eq!(
        store
            .background_task_last_call(&task)
            .await
            .expect("progress"),
        None
    );

    // A place is free again; the listing shows those going first.
    stored(
        store
            .start_background_task(&new_task(user, conversation.id, origin, "boats"), 2, 30)
            .await
            .expect("start"),
    );
    let listed = store.background_tasks(Some(user), 10).await.expect("list");
    let order: Vec<(&str, BackgroundState)> =
        listed.iter().map(|t| (t.title.as_str(), t.state)).collect();
    assert_eq!(
        order,
        [
            ("boats", BackgroundState::Queued),
            ("cars", BackgroundState::Queued),
            ("flats", BackgroundState::Failed)
        ]
    );
    assert_eq!(
        store.background_tasks(None, 1).await.expect("list").len(),
        1
    );
    let unfinished = store
        .background_tasks_in(&[BackgroundState::Queued], &channels)
        .await
        .expect("queued");
    assert_eq!(unfinished.iter().map(|t| t.id).max(), Some(second + 1));
}

on_both_backends!(
    tasks_move_only_from_the_states_they_are_in_on_sqlite,
    tasks_move_only_from_the_states_they_are_in_on_postgres,
    tasks_move_only_from_the_states_they_are_in
);
