//! Background tasks' runs (docs/architecture.md, "Background tasks"): a task stored by
//! `start_background_task` runs once the answer that started it is given, as a synthetic inbox
//! entry answered through the same turn machinery as a schedule's fire, and its answer is the
//! report: a reply to the message that started it, written to the outbox in the transaction
//! that finishes the turn, so it is delivered exactly once, across restarts too.
//!
//! The run acts for the person who asked, unattended: its agent's autonomy is capped at `low`
//! (anything that writes or sends waits for their Approve), the `[budget]` caps stop it with a
//! note, and `/cancel N` or its report-by time stops it, withdrawing its pending confirmations.
//! At start every task that was going is resumed (its entry is still pending) or, when its run
//! cannot go on, marked interrupted with a note to the person: never dropped in silence.

use std::sync::Arc;
use std::time::Duration;

use hearth_channel::{Channel, Inbound, OutboundMessage, Sender};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::dispatcher::Dispatcher;
use super::handler::{Handler, Unattended};
use super::preview::ChannelPreview;
use super::sink::InboxSink;
use crate::config::Autonomy;
use crate::provider::ChatMessage;
use crate::runtime::turn::{ConfirmationPolicy, TurnJob, TurnOutcome};
use crate::store::background::{
    BackgroundState, BackgroundTask, SENDER_ID, is_run_event, run_platform_id,
};
use crate::store::inbox::conversation_key;
use crate::store::{InboxEntry, InboxStatus, NewOutbox, OutboxKind, StoreError, TurnStatus};

/// How long the runner sleeps when nothing wakes it: tasks are started in this process and it is
/// woken when a turn ends, so this only catches what another process stored.
const IDLE_WAIT: Duration = Duration::from_secs(60);

/// The synthetic message of task `task`'s run. Its text is not what the run answers (the task's
/// stored instructions are): it is there for the transcript and the logs.
pub fn run_event(task: &BackgroundTask) -> Inbound {
    Inbound::message(
        run_platform_id(task.id),
        task.chat(),
        Sender::new(SENDER_ID).with_name(task.title.clone()),
        format!("Background task #{} “{}”", task.id, task.title),
    )
}

/// What the run's agent is asked: the stored instructions, with what makes its answer a report.
fn run_prompt(task: &BackgroundTask, report_by: Option<String>) -> String {
    let by = report_by
        .map(|at| format!(" The report is due by {at}."))
        .unwrap_or_default();
    format!(
        "[Background task #{id} “{title}”, started earlier in this chat at the user's request. Nobody is watching while it runs: \
         do the work now with your tools, then answer with the report itself, short and complete, as the message the user will read.{by}]\n\n{instructions}",
        id = task.id,
        title = task.title,
        instructions = task.instructions,
    )
}

/// The key under which the dispatcher runs task `task`'s entry.
fn run_key(task: &BackgroundTask) -> String {
    conversation_key(&task.channel, &run_event(task))
}

/// The line a task's report and notes start with.
fn heading(task: &BackgroundTask) -> String {
    format!("📋 Background task #{} “{}”", task.id, task.title)
}

/// The task's latest progress, for `/tasks` and the owner's page: its plan when its turn keeps
/// one (`update_plan`), else its last tool call.
pub async fn progress_line(
    store: &crate::store::Store,
    task: &BackgroundTask,
) -> Result<Option<String>, StoreError> {
    if let Some(turn_id) = store.background_task_turn(task).await?
        && let Some(plan) = store.plan_of_turn(turn_id).await?
    {
        let (done, total) = plan.progress();
        let now = plan
            .steps
            .iter()
            .find(|step| step.status == crate::store::plan::StepStatus::InProgress);
        return Ok(Some(match now {
            Some(step) => format!("plan {done}/{total} done, now: {}", step.step),
            None => format!("plan {done}/{total} done"),
        }));
    }
    Ok(store
        .background_task_last_call(task)
        .await?
        .map(|(tool, status)| format!("last step: {tool} ({status})")))
}

impl Handler {
    /// Answers a background task's run entry: links it, starts or resumes its turn.
    pub(super) async fn background(
        &self,
        entry: &InboxEntry,
        event: &Inbound,
        channel: Arc<dyn Channel>,
        task: BackgroundTask,
        cancel: &CancellationToken,
    ) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let now = self.rt.clock.now_ms();
        let finish =
            |why: &'static str| store.finish_inbox(entry.id, InboxStatus::Done, Some(why), now);
        if task.inbox_id.is_some_and(|linked| linked != entry.id) || task.channel != entry.channel {
            tracing::warn!(
                task = task.id,
                inbox_id = entry.id,
                "an entry claims a background task that runs elsewhere; ignored"
            );
            return finish("not this task's run").await;
        }
        if !task.state.is_active() {
            // Stopped while it waited for a decision: its resumed turn ends as cancelled, saying
            // so under the task's heading; stopped while its run waited in the queue: nothing ran.
            let turn = store.turn_for_inbox(entry.id).await?;
            let Some(turn) = turn.filter(|t| t.status == TurnStatus::Running) else {
                return finish("background task ended before it ran").await;
            };
            let Some(conversation) = store.conversation_by_id(task.conversation_id).await? else {
                return finish("background task ended; its conversation is gone").await;
            };
            let agents = self.rt.agents();
            let Some(agent) = agents
                .get(&turn.agent_id)
                .or_else(|| agents.get(&self.rt.config.router.default_agent))
                .cloned()
            else {
                return finish("background task ended; its agent is gone").await;
            };
            let stop = CancellationToken::new();
            stop.cancel();
            let job = self.background_job(
                &task,
                turn,
                conversation.session,
                agent,
                &channel,
                event,
                &stop,
            );
            return self
                .run(job, channel, Some(Unattended::Background(task.id)))
                .await;
        }
        if task.state == BackgroundState::Queued {
            store.launch_background_task(task.id, entry.id, now).await?;
        }
        let Some(conversation) = store.conversation_by_id(task.conversation_id).await? else {
            return self
                .end_background(
                    &task,
                    BackgroundState::Interrupted,
                    "its conversation is gone",
                    entry,
                )
                .await;
        };
        let agents = self.rt.agents();
        let Some(agent) = agents
            .get(&task.agent_id)
            .or_else(|| agents.get(&self.rt.config.router.default_agent))
            .cloned()
        else {
            let error = format!("no agent `{}` in the agents file", task.agent_id);
            return self
                .end_background(&task, BackgroundState::Failed, &error, entry)
                .await;
        };
        let turn = match store.turn_for_inbox(entry.id).await? {
            Some(turn) => turn,
            None => {
                let report_by = task
                    .report_by
                    .map(|at| crate::tool::time::format_local(at, self.rt.timezone));
                let message = ChatMessage::user(run_prompt(&task, report_by));
                store
                    .start_turn(
                        entry.id,
                        &conversation,
                        Some(task.user_id),
                        (&agent.id, agents.version(&agent.id)),
                        None,
                        &message,
                        now,
                    )
                    .await?
            }
        };
        tracing::info!(task = task.id, turn = turn.id, "background task running");
        let job = self.background_job(
            &task,
            turn,
            conversation.session,
            agent,
            &channel,
            event,
            cancel,
        );
        self.run(job, channel, Some(Unattended::Background(task.id)))
            .await
    }

    /// The turn of task `task`'s run, as it starts and as it resumes after a decision.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn background_job(
        &self,
        task: &BackgroundTask,
        turn: crate::store::Turn,
        session: i64,
        mut agent: crate::agent::AgentDef,
        channel: &Arc<dyn Channel>,
        event: &Inbound,
        cancel: &CancellationToken,
    ) -> TurnJob {
        // Unattended: whatever writes or sends waits for the person's Approve.
        agent.autonomy = Some(
            agent
                .autonomy
                .map_or(Autonomy::Low, |a| a.min(Autonomy::Low)),
        );
        let mut capabilities = channel.capabilities();
        // The report is one message, a reply to the one that asked: no draft growing in the
        // chat meanwhile.
        capabilities.preview = None;
        TurnJob {
            turn,
            session,
            agent,
            channel_name: task.channel.clone(),
            capabilities,
            preview: ChannelPreview::of(channel),
            events: ChannelPreview::events_of(channel),
            chat: task.chat(),
            requester: task.requester.clone(),
            reply_to: task.origin_message_id.clone(),
            reply_context: task.reply_context(),
            note: Some(heading(task)),
            cancel: cancel.clone(),
            confirmation: ConfirmationPolicy::Ask,
            approvals_route: self.approvals_route(&task.channel, event, None),
            schedule: None,
        }
    }

    /// Records how a task's turn ended.
    pub(super) async fn finish_background(
        &self,
        task_id: i64,
        turn_id: i64,
        outcome: TurnOutcome,
    ) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let now = self.rt.clock.now_ms();
        let active = BackgroundState::ACTIVE;
        match outcome {
            TurnOutcome::Answered => {
                store
                    .move_background_task(task_id, active, BackgroundState::Succeeded, None, now)
                    .await?;
            }
            TurnOutcome::Failed => {
                let error = store
                    .turn_error(turn_id)
                    .await?
                    .unwrap_or_else(|| "the run did not finish".into());
                store
                    .move_background_task(
                        task_id,
                        active,
                        BackgroundState::Failed,
                        Some(&error),
                        now,
                    )
                    .await?;
            }
            TurnOutcome::Cancelled => {
                store
                    .move_background_task(task_id, active, BackgroundState::Cancelled, None, now)
                    .await?;
            }
            TurnOutcome::AwaitingConfirmation => {
                store
                    .move_background_task(
                        task_id,
                        &[BackgroundState::Running],
                        BackgroundState::WaitingApproval,
                        None,
                        now,
                    )
                    .await?;
            }
            // Shutdown: resumed at the next start.
            TurnOutcome::Suspended => {}
        }
        Ok(())
    }

    /// A task's turn after the decision it waited for: queued again under the run's own key
    /// (the runner hands the reopened entry to the dispatcher). A decision that cancels (the
    /// prompt's Cancel, `/cancel N`) stops the task first, so its turn ends as cancelled.
    pub(super) async fn resume_background(
        &self,
        task: &BackgroundTask,
        turn_id: i64,
        run: i64,
        cancel: &CancellationToken,
    ) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let now = self.rt.clock.now_ms();
        if cancel.is_cancelled() {
            store
                .move_background_task(
                    task.id,
                    BackgroundState::ACTIVE,
                    BackgroundState::Cancelled,
                    Some("stopped from its approval prompt"),
                    now,
                )
                .await?;
        } else {
            store
                .move_background_task(
                    task.id,
                    &[BackgroundState::WaitingApproval],
                    BackgroundState::Running,
                    None,
                    now,
                )
                .await?;
        }
        store.resume_turn(turn_id).await?;
        store.reopen_background_run(run).await?;
        self.background_wake.notify_one();
        Ok(())
    }

    /// The background task whose run `entry` is, if it is one.
    pub(super) async fn background_run_of(
        &self,
        entry: &InboxEntry,
        event: &Inbound,
    ) -> Result<Option<BackgroundTask>, StoreError> {
        if !is_run_event(event) {
            return Ok(None);
        }
        let Some(id) = event
            .platform_id
            .strip_prefix("background:")
            .and_then(|id| id.parse::<i64>().ok())
        else {
            return Ok(None);
        };
        let task = self.rt.store.background_task(id).await?;
        Ok(task.filter(|task| task.channel == entry.channel))
    }

    /// Ends a task whose run cannot start, with a note to the person, and closes its entry.
    async fn end_background(
        &self,
        task: &BackgroundTask,
        state: BackgroundState,
        error: &str,
        entry: &InboxEntry,
    ) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let now = self.rt.clock.now_ms();
        store
            .move_background_task(task.id, BackgroundState::ACTIVE, state, Some(error), now)
            .await?;
        self.note_on_task(task, &format!("⚠️ It could not run: {error}."))
            .await?;
        store
            .finish_inbox(entry.id, InboxStatus::Failed, Some(error), now)
            .await
    }

    /// A note about task `task`, as a reply to the message that started it.
    pub(super) async fn note_on_task(
        &self,
        task: &BackgroundTask,
        text: &str,
    ) -> Result<(), StoreError> {
        let note = NewOutbox {
            inbox_id: None,
            seq: 0,
            channel: task.channel.clone(),
            kind: OutboxKind::Send,
            message: OutboundMessage {
                reply_to: task.origin_message_id.clone(),
                reply_context: task.reply_context(),
                ..OutboundMessage::text(task.chat(), format!("{}\n\n{text}", heading(task)))
            },
        };
        self.rt
            .store
            .enqueue_outbox(&[note], self.rt.clock.now_ms())
            .await?;
        self.outbox.notify_one();
        Ok(())
    }

    /// Stops task `task` (`/cancel N`, its report-by time): moved to `to` with `reason`, its
    /// turn cancelled where it runs, its pending confirmations withdrawn where it waits. False
    /// when it had ended already.
    pub(super) async fn stop_background(
        &self,
        task: &BackgroundTask,
        to: BackgroundState,
        reason: &str,
        dispatcher: &Dispatcher,
    ) -> Result<bool, StoreError> {
        let store = &self.rt.store;
        let now = self.rt.clock.now_ms();
        if !store
            .move_background_task(task.id, BackgroundState::ACTIVE, to, Some(reason), now)
            .await?
        {
            return Ok(false);
        }
        // Running now: its token stops it, and the turn says "Cancelled" under the task's
        // heading as a reply to the message that started it.
        if dispatcher.cancel_conversation(&run_key(task)) {
            return Ok(true);
        }
        let Some(run) = task.inbox_id else {
            // Never ran: nothing else to stop.
            return Ok(true);
        };
        let Some(turn) = store.turn_for_inbox(run).await? else {
            return Ok(true);
        };
        if turn.status != TurnStatus::Suspended {
            return Ok(true);
        }
        // Waiting for approval: the prompts are withdrawn (edited to say so), then the turn
        // resumes already cancelled and ends at once.
        let withdrawn = store
            .withdraw_confirmations(turn.id, "background task stopped", now)
            .await?;
        let mut notes = Vec::new();
        for confirmation in &withdrawn {
            let outcome = format!("⏹ Withdrawn: background task #{} was stopped", task.id);
            let follow_up = format!(
                "⏹ Withdrawn: background task #{} was stopped, so `{}` did not run.",
                task.id, confirmation.tool
            );
            for mut note in self
                .outcomes(run, 0, confirmation, &outcome, &follow_up)
                .await?
            {
                // Not the answer of any entry: the run's entry is finished by its turn.
                note.inbox_id = None;
                note.seq = 0;
                notes.push(note);
            }
        }
        if !notes.is_empty() {
            store.enqueue_outbox(&notes, now).await?;
            self.outbox.notify_one();
        }
        let stop = CancellationToken::new();
        stop.cancel();
        self.resume(turn.id, &stop).await?;
        Ok(true)
    }
}

/// Starts queued tasks once their answer is given, stops tasks past their report-by time, and
/// at start settles what a restart left.
pub struct BackgroundRunner {
    pub sink: Arc<InboxSink>,
    pub handler: Arc<Handler>,
    /// The channels this process runs: only their tasks are its to run.
    pub channels: Vec<String>,
    /// Woken when a turn ends (it may have started a task, or be the answer one waits for).
    pub wake: Arc<Notify>,
}

impl BackgroundRunner {
    pub async fn run(self, shutdown: CancellationToken) {
        if let Err(err) = self.settle_after_restart().await {
            tracing::warn!(error = %err, "settling background tasks after the restart failed; retried at the next start");
        }
        loop {
            let wait = match self.tick().await {
                Ok(wait) => wait,
                Err(err) => {
                    tracing::warn!(error = %err, "background task runner failed; retrying");
                    Duration::from_secs(1)
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.wake.notified() => {}
                () = shutdown.cancelled() => return,
            }
        }
    }

    /// Starts what may start and stops what is overdue; how long until it must look again.
    async fn tick(&self) -> Result<Duration, StoreError> {
        let store = &self.sink.store;
        for task in store.ready_background_tasks(&self.channels).await? {
            self.launch(&task).await?;
        }
        // Runs reopened after a decision: into the dispatcher under their own key (a run it
        // holds already is not queued twice).
        for task in store.background_runs_pending(&self.channels).await? {
            if let Some(run) = task.inbox_id {
                self.sink.dispatcher.submit(run, run_key(&task), false);
            }
        }
        let now = self.sink.clock.now_ms();
        let mut next: Option<i64> = None;
        for task in store
            .background_tasks_in(BackgroundState::ACTIVE, &self.channels)
            .await?
        {
            let Some(due) = task.report_by else { continue };
            if due > now {
                next = Some(next.map_or(due, |n| n.min(due)));
                continue;
            }
            let at = crate::tool::time::format_local(due, self.handler.rt.timezone);
            let reason = format!("not done by its report-by time, {at}");
            if self
                .handler
                .stop_background(
                    &task,
                    BackgroundState::Failed,
                    &reason,
                    &self.sink.dispatcher,
                )
                .await?
            {
                tracing::info!(
                    task = task.id,
                    "background task stopped at its report-by time"
                );
                self.handler
                    .note_on_task(
                        &task,
                        &format!(
                            "⌛ Not done by {at}, so I stopped it. Ask again if you still want it."
                        ),
                    )
                    .await?;
            }
        }
        // A test's clock is moved from outside: look again within a second while a deadline is
        // set, as the scheduler does.
        Ok(match next {
            Some(due) => {
                let ms = due.saturating_sub(now).clamp(10, 1000);
                Duration::from_millis(u64::try_from(ms).unwrap_or(1000))
            }
            None => IDLE_WAIT,
        })
    }

    /// Puts a task's run into the inbox (once: its platform id is unique per channel); the
    /// entry links itself to the task when it is handled, whichever comes first.
    async fn launch(&self, task: &BackgroundTask) -> Result<(), StoreError> {
        let now = self.sink.clock.now_ms();
        match self.sink.store_event(&task.channel, run_event(task)).await {
            Ok(Some(inbox_id)) => {
                self.sink
                    .store
                    .launch_background_task(task.id, inbox_id, now)
                    .await?;
                tracing::info!(task = task.id, inbox_id, "background task queued to run");
            }
            // Stored by an earlier attempt: that entry is pending and links itself when run.
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(task = task.id, error = %err, "queueing a background task failed; will retry");
            }
        }
        Ok(())
    }

    /// After a restart: a task whose run is still pending resumes with the inbox (the
    /// dispatcher was handed it at start); one whose run ended while its state was not written
    /// takes its turn's outcome; one whose run cannot go on is marked interrupted and the
    /// person told.
    async fn settle_after_restart(&self) -> Result<(), StoreError> {
        let store = &self.sink.store;
        let now = self.sink.clock.now_ms();
        let going = [BackgroundState::Running, BackgroundState::WaitingApproval];
        for task in store.background_tasks_in(&going, &self.channels).await? {
            let Some(run) = task.inbox_id else { continue };
            let pending = store
                .inbox_entry(run)
                .await?
                .is_some_and(|entry| entry.status == InboxStatus::Pending);
            let turn = store.turn_for_inbox(run).await?;
            let settled = match turn.as_ref().map(|t| t.status) {
                _ if pending => {
                    tracing::info!(
                        task = task.id,
                        "resuming a background task after the restart"
                    );
                    continue;
                }
                Some(TurnStatus::Done) => (BackgroundState::Succeeded, None),
                Some(TurnStatus::Cancelled) => (BackgroundState::Cancelled, None),
                Some(TurnStatus::Failed) => {
                    let error = match &turn {
                        Some(turn) => store.turn_error(turn.id).await?,
                        None => None,
                    };
                    (BackgroundState::Failed, error)
                }
                // Waiting for a decision: the decision resumes it.
                Some(TurnStatus::Suspended) => (BackgroundState::WaitingApproval, None),
                _ => (
                    BackgroundState::Interrupted,
                    Some("its run was set aside when hearth restarted".to_string()),
                ),
            };
            let (state, error) = settled;
            if state == task.state {
                continue;
            }
            store
                .move_background_task(task.id, &going, state, error.as_deref(), now)
                .await?;
            if state == BackgroundState::Interrupted {
                tracing::warn!(task = task.id, "background task interrupted by a restart");
                self.handler
                    .note_on_task(&task, "⚠️ Interrupted: hearth restarted and this task could not go on. Ask again if you still want it.")
                    .await?;
            }
        }
        Ok(())
    }
}

/// Tasks `/tasks` lists: those going and the most recent ended ones.
const LISTED: i64 = 10;

/// How long ago `then` was, in a few characters: `just now`, `5 min`, `3 h`, `2 d`.
fn age(now: i64, then: i64) -> String {
    let minutes = now.saturating_sub(then) / 60_000;
    match minutes {
        0 => "just now".to_string(),
        1..=59 => format!("{minutes} min ago"),
        60..=2879 => format!("{} h ago", minutes / 60),
        _ => format!("{} d ago", minutes / 1440),
    }
}

/// One task as `/tasks` and the owner's page show it.
#[derive(Clone, Debug)]
pub struct TaskSummary {
    pub id: i64,
    pub title: String,
    /// The stored state's name (`running`), for a page's badge.
    pub state: &'static str,
    /// How people read the state (`waiting for your approval`).
    pub label: &'static str,
    /// Since it started, or ended: `5 min ago`.
    pub age: String,
    /// What its run cost so far (`$0.0123`); empty before it ran.
    pub cost: String,
    /// While it goes, its report-by time and latest progress; once it failed, why.
    pub detail: String,
}

/// The facts `/tasks` and the owner's page show of `task`.
pub async fn task_summary(
    rt: &crate::runtime::Runtime,
    task: &BackgroundTask,
) -> Result<TaskSummary, StoreError> {
    let now = rt.clock.now_ms();
    let since = task
        .finished_at
        .or(task.started_at)
        .unwrap_or(task.created_at);
    let cost = rt
        .store
        .background_task_cost(task)
        .await?
        .map(crate::runtime::budget::usd)
        .unwrap_or_default();
    let mut detail = Vec::new();
    if task.state.is_active() {
        if let Some(due) = task.report_by {
            detail.push(format!(
                "report by {}",
                crate::tool::time::format_local(due, rt.timezone)
            ));
        }
        if let Some(progress) = progress_line(&rt.store, task).await? {
            detail.push(progress);
        }
    } else if task.state != BackgroundState::Succeeded
        && let Some(error) = &task.last_error
    {
        detail.push(crate::text::clip(error, 200));
    }
    Ok(TaskSummary {
        id: task.id,
        title: task.title.clone(),
        state: task.state.as_str(),
        label: task.state.label(),
        age: age(now, since),
        cost,
        detail: detail.join("; "),
    })
}

/// One line of `/tasks`: `#3 “Flats” – running, 5 min ago, $0.01; last step: web_search (done)`.
fn task_line(task: &TaskSummary) -> String {
    let mut line = format!(
        "#{} “{}” – {}, {}",
        task.id, task.title, task.label, task.age
    );
    if !task.cost.is_empty() {
        line.push_str(&format!(", {}", task.cost));
    }
    if !task.detail.is_empty() {
        line.push_str(&format!("; {}", task.detail));
    }
    line
}

/// `/tasks`: the background tasks going and the recent ones, the user's own (everyone's for the
/// owner, `user` = `None`).
pub async fn tasks_text(
    rt: &crate::runtime::Runtime,
    user: Option<i64>,
) -> Result<String, StoreError> {
    let tasks = rt.store.background_tasks(user, LISTED).await?;
    if tasks.is_empty() {
        return Ok(
            "No background tasks yet. Ask for one in words: “look into it and tell me tonight”."
                .to_string(),
        );
    }
    let mut out = String::from("Background tasks:");
    for task in &tasks {
        out.push('\n');
        out.push_str(&task_line(&task_summary(rt, task).await?));
    }
    if tasks.iter().any(|t| t.state.is_active()) {
        out.push_str("\nStop one with /cancel N.");
    }
    Ok(out)
}

/// `/cancel N`: stops the user's task N (any task for the owner).
pub(super) async fn cancel_text(
    handler: &Handler,
    identity: &crate::store::Identity,
    id: i64,
    dispatcher: &Dispatcher,
) -> Result<String, StoreError> {
    let task = handler
        .rt
        .store
        .background_task(id)
        .await?
        .filter(|task| identity.is_owner || task.user_id == identity.user_id);
    let Some(task) = task else {
        return Ok(format!(
            "There is no background task #{id} of yours. /tasks lists them."
        ));
    };
    if !task.state.is_active() {
        return Ok(format!(
            "Background task #{id} “{}” is {} already.",
            task.title,
            task.state.label()
        ));
    }
    let reason = "stopped with /cancel";
    if handler
        .stop_background(&task, BackgroundState::Cancelled, reason, dispatcher)
        .await?
    {
        tracing::info!(task = id, "background task cancelled");
        Ok(format!("⏹ Stopped background task #{id} “{}”.", task.title))
    } else {
        Ok(format!(
            "Background task #{id} “{}” had just ended.",
            task.title
        ))
    }
}

#[cfg(test)]
mod tests {
    use hearth_channel::ChatRef;

    use super::progress_line;
    use crate::store::Store;
    use crate::store::background::{Admitted, NewBackgroundTask};
    use crate::store::plan::{PlanRevision, PlanStep, StepStatus};
    use crate::store::test_support::{on_both_backends, stored_message};

    fn step(text: &str, status: StepStatus) -> PlanStep {
        PlanStep::new(text.into(), status, None)
    }

    /// `/tasks` shows a running task's last tool call, and its plan once its turn keeps one.
    async fn progress_is_the_plan_when_the_run_has_one(store: Store) {
        let user = store
            .allow_identity("test", "user", None, "config", true, 1)
            .await
            .expect("user")
            .user_id;
        let (origin, conversation) = stored_message(&store, 1, "c1").await;
        let task = NewBackgroundTask {
            user_id: user,
            conversation_id: conversation.id,
            origin_inbox_id: origin,
            channel: "test".into(),
            chat: ChatRef::new("c1"),
            origin_message_id: Some("m1".into()),
            requester: "user".into(),
            reply_context: None,
            agent_id: "general".into(),
            title: "flats".into(),
            instructions: "Compare three flats".into(),
            report_by: None,
        };
        let Admitted::Stored(id) = store
            .start_background_task(&task, 3, 10)
            .await
            .expect("start")
        else {
            panic!("refused")
        };
        let (run, _) = stored_message(&store, 2, "c1").await;
        assert!(
            store
                .launch_background_task(id, run, 20)
                .await
                .expect("launch")
        );
        let task = store
            .background_task(id)
            .await
            .expect("read")
            .expect("stored");
        assert_eq!(progress_line(&store, &task).await.expect("progress"), None);

        let turn = store
            .start_turn(
                run,
                &conversation,
                None,
                ("general", Some(1)),
                None,
                &crate::provider::ChatMessage::user("Compare three flats"),
                30,
            )
            .await
            .expect("turn");
        let steps = [
            step("find flats", StepStatus::Done),
            step("compare them", StepStatus::InProgress),
            step("recommend one", StepStatus::Pending),
        ];
        let plan = PlanRevision {
            turn_id: turn.id,
            conversation_id: conversation.id,
            replaces: 0,
            explanation: None,
            steps: &steps,
        };
        assert_eq!(store.save_plan(&plan, 40).await.expect("save"), Some(1));
        assert_eq!(
            progress_line(&store, &task)
                .await
                .expect("progress")
                .as_deref(),
            Some("plan 1/3 done, now: compare them")
        );
    }

    on_both_backends!(
        progress_is_the_plan_when_the_run_has_one_on_sqlite,
        progress_is_the_plan_when_the_run_has_one_on_postgres,
        progress_is_the_plan_when_the_run_has_one
    );
}
