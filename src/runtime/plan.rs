//! A turn's plan in its chat (issue 48): the checklist the model keeps with `update_plan`
//! (`tool::plan`), shown as it changes (docs/architecture.md, "What a channel sees of a running
//! turn").
//!
//! - A channel that edits messages and shows no progress events of its own (Telegram, Discord,
//!   Matrix, the terminal) gets one plan message, edited as the steps change. The message and
//!   its edits go through the outbox like every reply: the delivery worker keeps the chat's
//!   order, waits as long as a rate limit says and never gives up on a plan for it (a later
//!   revision replaces one still waiting, `pipeline::delivery`), and sends the text as a new
//!   message when the platform refuses the edit for good. Here the edits are paced: at most
//!   one per [`EDIT_INTERVAL`], none when the text is unchanged, the latest text always shown
//!   last.
//! - Every other channel (email, HTTP) gets the plan above the answer; a channel that shows
//!   progress (the HTTP turns API) also gets `plan.updated` events as it changes.
//!
//! No plan, no cost: nothing here reads the store, sends or edits until the model called
//! `update_plan` in this turn (or the turn resumed, and may have one).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hearth_channel::{OutboundMessage, PlanStepView, TurnEvent};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::Runtime;
use super::turn::TurnJob;
use crate::provider::ToolCall;
use crate::store::plan::{Plan, StepStatus};
use crate::store::{NewOutbox, OutboxKind, Store, StoreError};

/// Least time between two edits of a plan message in one chat: Telegram answers edits faster
/// than this with flood control (and waits of minutes).
pub const EDIT_INTERVAL: Duration = Duration::from_secs(2);

/// What the step in progress shows while a tool call of the turn waits for a decision.
pub const WAITING: &str = "waiting for your approval";

/// How the turn's channel shows a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Showing {
    /// One message, edited as the steps change.
    Message,
    /// Above the answer.
    WithAnswer,
}

/// The plan of one run of a turn: told when the model may have changed it, and shows it.
pub struct PlanView {
    store: Store,
    turn_id: i64,
    showing: Showing,
    /// The turn may have a plan the view has not read yet: `update_plan` was called, or the
    /// turn resumed.
    dirty: AtomicBool,
    /// The plan as last read, and whether a call waits for a decision.
    current: std::sync::Mutex<Option<Plan>>,
    /// The text for the message task; `None` until there is a plan.
    text: watch::Sender<Option<String>>,
    stop: CancellationToken,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// What the chat was last given to show, and when.
    last: Arc<std::sync::Mutex<Shown>>,
    /// What the message task is handed to make its first message and its edits.
    message: Arc<MessageParts>,
}

/// The plan message's last text queued, and when.
#[derive(Default)]
struct Shown {
    text: Option<String>,
    at: Option<Instant>,
}

/// How a turn's run ends for its plan: the text to put above the answer, and the plan message's
/// last edit, queued after the answer ([`PlanEnd::queue`]).
#[must_use]
pub struct PlanEnd {
    pub above_answer: Option<String>,
    last_edit: Option<(String, Duration)>,
    store: Store,
    turn_id: i64,
    message: Arc<MessageParts>,
}

impl PlanEnd {
    /// Queues the plan message's last edit, paced behind the one before it. It goes after the
    /// answer: the message is above it already, and the answer need not wait for the pace.
    pub async fn queue(self, rt: &Runtime) -> Result<(), StoreError> {
        let Some((text, wait)) = self.last_edit else {
            return Ok(());
        };
        let now = rt.clock.now_ms();
        let due = now + i64::try_from(wait.as_millis()).unwrap_or(0);
        show(&self.store, self.turn_id, &self.message, &text, now, due).await
    }
}

/// What a plan message is sent with.
struct MessageParts {
    channel: String,
    template: OutboundMessage,
}

impl PlanView {
    /// The plan view of a run of `job`'s turn; a resumed turn (not fresh) looks for its plan
    /// at the first [`PlanView::refresh`].
    pub fn start(rt: &Runtime, job: &TurnJob) -> Self {
        let caps = &job.capabilities;
        let showing = if caps.edits && !caps.progress {
            Showing::Message
        } else {
            Showing::WithAnswer
        };
        let template = OutboundMessage {
            reply_to: None,
            reply_context: job.reply_context.clone(),
            ..OutboundMessage::text(job.chat.clone(), "")
        };
        let (text, _) = watch::channel(None);
        Self {
            store: rt.store.clone(),
            turn_id: job.turn.id,
            showing,
            dirty: AtomicBool::new(!job.turn.fresh),
            current: std::sync::Mutex::new(None),
            text,
            stop: CancellationToken::new(),
            task: std::sync::Mutex::new(None),
            last: Arc::default(),
            message: Arc::new(MessageParts {
                channel: job.channel_name.clone(),
                template,
            }),
        }
    }

    /// Notes that the plan changed (plan mode's runtime keeps it itself).
    pub fn changed(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// Notes that the model's calls may change the plan.
    pub fn calls(&self, calls: &[ToolCall]) {
        if calls.iter().any(touches_plan) {
            self.dirty.store(true, Ordering::Relaxed);
        }
    }

    /// Reads the plan if it may have changed and shows it; `waiting` when a call of the turn
    /// waits for a decision. A store failure is the caller's: the turn stops as for any other.
    pub async fn refresh(
        &self,
        rt: &Runtime,
        job: &TurnJob,
        waiting: bool,
    ) -> Result<(), StoreError> {
        let read = self.dirty.swap(false, Ordering::Relaxed);
        let changed = if read {
            let plan = self.store.plan_of_turn(self.turn_id).await?;
            let first = self.plan().is_none();
            if first && let Some(message) = plan.as_ref().and_then(|p| p.message_outbox_id) {
                self.take_up(rt, message).await?;
            }
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            let changed = plan.as_ref().map(|p| p.revision) != current.as_ref().map(|p| p.revision);
            *current = plan;
            changed
        } else {
            false
        };
        let Some(plan) = self.plan() else {
            return Ok(());
        };
        if changed {
            job.emit(updated_event(&plan, waiting)).await;
        }
        if self.showing == Showing::Message {
            self.ensure_task(rt);
            self.text.send_replace(Some(render(&plan, waiting)));
        }
        Ok(())
    }

    /// A resumed turn's plan message goes on from what it was last given and when: the same
    /// text is not sent again, and the pace holds across the restart.
    async fn take_up(&self, rt: &Runtime, message: i64) -> Result<(), StoreError> {
        let Some((text, at_ms)) = self.store.plan_message_text(message).await? else {
            return Ok(());
        };
        let ago = u64::try_from(rt.clock.now_ms().saturating_sub(at_ms)).unwrap_or(0);
        let at = Instant::now().checked_sub(Duration::from_millis(ago));
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Shown {
            text: Some(text),
            at,
        };
        Ok(())
    }

    fn plan(&self) -> Option<Plan> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn ensure_task(&self, rt: &Runtime) {
        let mut task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if task.is_some() {
            return;
        }
        let receiver = self.text.subscribe();
        let (store, clock) = (self.store.clone(), rt.clock.clone());
        let (turn_id, parts, stop) = (self.turn_id, self.message.clone(), self.stop.clone());
        let last = self.last.clone();
        *task = Some(tokio::spawn(
            async move {
                let mut receiver = receiver;
                loop {
                    tokio::select! {
                        changed = receiver.changed() => if changed.is_err() { break },
                        () = stop.cancelled() => break,
                    }
                    let at = last.lock().unwrap_or_else(|p| p.into_inner()).at;
                    if let Some(at) = at {
                        let wait = EDIT_INTERVAL.saturating_sub(at.elapsed());
                        tokio::select! {
                            () = tokio::time::sleep(wait) => {}
                            () = stop.cancelled() => break,
                        }
                    }
                    let text = receiver.borrow_and_update().clone();
                    let Some(text) = text else { continue };
                    if last.lock().unwrap_or_else(|p| p.into_inner()).text.as_ref() == Some(&text) {
                        continue;
                    }
                    let now = clock.now_ms();
                    match show(&store, turn_id, &parts, &text, now, now).await {
                        Ok(()) => {
                            *last.lock().unwrap_or_else(|p| p.into_inner()) = Shown {
                                text: Some(text),
                                at: Some(Instant::now()),
                            };
                        }
                        // The next change, or the turn's end, tries again.
                        Err(err) => {
                            tracing::warn!(error = %err, "queueing the plan's message failed")
                        }
                    }
                }
            }
            .instrument(tracing::info_span!("plan", turn = turn_id)),
        ));
    }

    /// Ends the view with the plan's last state: what to put above the answer, for channels
    /// that show the plan with it, and the plan message's last edit, queued by the caller after
    /// the answer. A plan never shown yet is shown now, so it sits above the answer. `waiting`
    /// when the turn parks for a decision.
    pub async fn finish(
        self,
        rt: &Runtime,
        job: &TurnJob,
        waiting: bool,
    ) -> Result<PlanEnd, StoreError> {
        // A turn that ends without a tool call since it resumed still shows its plan settled.
        if self.dirty.load(Ordering::Relaxed) {
            self.refresh(rt, job, waiting).await?;
        }
        self.stop.cancel();
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            // A panicking task only loses the edits it had; the last one is made here.
            let _ = task.await;
        }
        let mut end = PlanEnd {
            above_answer: None,
            last_edit: None,
            store: self.store.clone(),
            turn_id: self.turn_id,
            message: self.message.clone(),
        };
        let Some(plan) = self.plan() else {
            return Ok(end);
        };
        let text = render(&plan, waiting);
        let last = std::mem::take(&mut *self.last.lock().unwrap_or_else(|p| p.into_inner()));
        match (self.showing, last) {
            (Showing::WithAnswer, _) => end.above_answer = (!waiting).then_some(text),
            (
                Showing::Message,
                Shown {
                    text: Some(shown), ..
                },
            ) if shown == text => {}
            (Showing::Message, Shown { at: Some(at), .. }) => {
                end.last_edit = Some((text, EDIT_INTERVAL.saturating_sub(at.elapsed())));
            }
            // Shown by no one in this run: a first showing goes before the answer; an edit of a
            // message from before a restart needs no pace.
            (Showing::Message, _) => {
                let now = rt.clock.now_ms();
                show(&self.store, self.turn_id, &self.message, &text, now, now).await?;
            }
        }
        Ok(end)
    }
}

/// Whether a call may change the plan: `update_plan`, direct or through `use_tool`.
fn touches_plan(call: &ToolCall) -> bool {
    call.name == crate::tool::plan::NAME
        || (call.name == "use_tool" && call.arguments.contains(crate::tool::plan::NAME))
}

/// Queues `text` as the plan's message: its first showing, or an edit of it delivered no sooner
/// than `due`.
async fn show(
    store: &Store,
    turn_id: i64,
    parts: &MessageParts,
    text: &str,
    now: i64,
    due: i64,
) -> Result<(), StoreError> {
    let message = OutboundMessage {
        text: text.to_string(),
        ..parts.template.clone()
    };
    let mut item = NewOutbox {
        inbox_id: None,
        seq: 0,
        channel: parts.channel.clone(),
        kind: OutboxKind::Send,
        message,
    };
    if store
        .show_plan_message(turn_id, &item, now)
        .await?
        .is_some()
    {
        return Ok(());
    }
    let Some(shown) = store
        .plan_of_turn(turn_id)
        .await?
        .and_then(|p| p.message_outbox_id)
    else {
        return Ok(());
    };
    item.kind = OutboxKind::Revise { message: shown };
    store.enqueue_outbox_due(&item, now, due).await?;
    Ok(())
}

/// The `plan.updated` event of `plan`.
fn updated_event(plan: &Plan, waiting: bool) -> TurnEvent {
    let (done, total) = plan.progress();
    TurnEvent::PlanUpdated {
        revision: plan.revision,
        explanation: plan.explanation.clone(),
        steps: plan
            .steps
            .iter()
            .map(|s| PlanStepView {
                step: s.step.clone(),
                status: s.status.as_str().to_string(),
                note: s.note.clone(),
            })
            .collect(),
        done,
        total,
        waiting,
        text: render(plan, waiting),
    }
}

fn mark(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Pending => "▫️",
        StepStatus::InProgress => "▶️",
        StepStatus::Done => "✅",
        StepStatus::Skipped => "⏭️",
        StepStatus::Failed => "❌",
    }
}

/// The plan as the chat shows it, kept short: one line a step, done steps without their notes;
/// the step in progress says when it waits for a decision.
pub fn render(plan: &Plan, waiting: bool) -> String {
    let (done, total) = plan.progress();
    let mut text = format!("📋 Plan ({done}/{total} done)");
    let mut waits_shown = false;
    for step in &plan.steps {
        text.push('\n');
        text.push_str(mark(step.status));
        text.push(' ');
        text.push_str(&step.step);
        let note = match step.status {
            StepStatus::Done => None,
            StepStatus::InProgress if waiting => {
                waits_shown = true;
                Some(WAITING)
            }
            _ => step.note.as_deref(),
        };
        if let Some(note) = note {
            text.push_str(" — ");
            text.push_str(note);
        }
    }
    if waiting && !waits_shown {
        text.push_str(&format!("\n⏳ {WAITING}"));
    }
    text
}

/// The plan in full, as `/plan` shows it: every note, and the explanation.
pub fn render_full(plan: &Plan) -> String {
    let (done, total) = plan.progress();
    let mut text = format!("📋 Plan, revision {} ({done}/{total} done)", plan.revision);
    if let Some(explanation) = &plan.explanation {
        text.push('\n');
        text.push_str(explanation);
    }
    for (n, step) in plan.steps.iter().enumerate() {
        text.push_str(&format!(
            "\n{}. {} {} ({})",
            n + 1,
            mark(step.status),
            step.step,
            step.status.as_str().replace('_', " ")
        ));
        if let Some(note) = &step.note {
            text.push_str(" — ");
            text.push_str(note);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::plan::PlanStep;

    fn plan(steps: &[(&str, StepStatus, Option<&str>)]) -> Plan {
        Plan {
            turn_id: 1,
            conversation_id: 1,
            revision: 3,
            explanation: Some("Flats near the station".into()),
            steps: steps
                .iter()
                .map(|(step, status, note)| {
                    PlanStep::new((*step).into(), *status, note.map(str::to_string))
                })
                .collect(),
            message_outbox_id: None,
            updated_at: 0,
        }
    }

    #[test]
    fn done_steps_fold_to_one_line_and_a_wait_is_shown_on_the_step_in_progress() {
        let p = plan(&[
            ("Find flats", StepStatus::Done, Some("found 3 under 900 €")),
            ("Compare them", StepStatus::InProgress, Some("by distance")),
            ("Book a viewing", StepStatus::Pending, None),
        ]);
        assert_eq!(
            render(&p, false),
            "📋 Plan (1/3 done)\n✅ Find flats\n▶️ Compare them — by distance\n▫️ Book a viewing"
        );
        assert_eq!(
            render(&p, true),
            "📋 Plan (1/3 done)\n✅ Find flats\n▶️ Compare them — waiting for your approval\n▫️ Book a viewing"
        );
        let full = render_full(&p);
        assert!(full.contains("revision 3"), "{full}");
        assert!(full.contains("Flats near the station"), "{full}");
        assert!(
            full.contains("1. ✅ Find flats (done) — found 3 under 900 €"),
            "{full}"
        );
        assert!(full.contains("2. ▶️ Compare them (in progress)"), "{full}");
    }

    #[test]
    fn a_wait_with_no_step_in_progress_gets_a_line_of_its_own() {
        let p = plan(&[("Ask", StepStatus::Pending, None)]);
        assert_eq!(
            render(&p, true),
            "📋 Plan (0/1 done)\n▫️ Ask\n⏳ waiting for your approval"
        );
    }

    #[test]
    fn only_plan_calls_make_the_view_look() {
        let call = |name: &str, arguments: &str| ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: arguments.into(),
        };
        assert!(touches_plan(&call("update_plan", "{}")));
        assert!(touches_plan(&call(
            "use_tool",
            r#"{"tool_name":"update_plan","arguments":{}}"#
        )));
        assert!(!touches_plan(&call("add_task", "{}")));
    }
}
