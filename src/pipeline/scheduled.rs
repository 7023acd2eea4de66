//! Scheduled runs: a schedule's synthetic message is answered by the schedule's agent, acting
//! for the owner, with confirmations following the schedule's `on_confirmation` rule; the run's
//! outcome is recorded, and a failed run is reported to the owner. A run whose answer the
//! platform refuses for good fails too: the delivery worker reports each answer's end here. The inbox is the scheduler's
//! [`FireSink`]: fires take the same path as every channel's messages.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hearth_channel::{Channel, ChatRef, Inbound, InboundKind, OutboundMessage, SinkError};
use tokio_util::sync::CancellationToken;

use super::handler::Handler;
use super::preview::ChannelPreview;
use super::sink::InboxSink;
use crate::config::OnConfirmation;
use crate::provider::ChatMessage;
use crate::runtime::turn::{ConfirmationPolicy, TurnJob, TurnOutcome};
use crate::scheduler::{FireSink, ScheduledRun};
use crate::store::schedule::AnswerDelivery;
use crate::store::{Identity, InboxEntry, NewOutbox, OutboxKind, StoreError};

/// Schedule fires go into the inbox like every channel's events, and on to the dispatcher.
#[async_trait]
impl FireSink for InboxSink {
    async fn store_event(&self, channel: &str, event: Inbound) -> Result<Option<i64>, SinkError> {
        InboxSink::store_event(self, channel, event).await
    }
}

/// The confirmation policy of a turn: a scheduled run has nobody watching, so the schedule's
/// `on_confirmation` rule decides; everyone else is asked in the chat.
pub(super) fn confirmation_policy(run: Option<&ScheduledRun>) -> ConfirmationPolicy {
    match run.map(|run| (run.on_confirmation, &run.allow_tools)) {
        None | Some((OnConfirmation::Ask, _)) => ConfirmationPolicy::Ask,
        Some((OnConfirmation::Deny, _)) => ConfirmationPolicy::Deny,
        Some((OnConfirmation::Allow, tools)) => ConfirmationPolicy::Allow(tools.clone()),
    }
}

impl Handler {
    pub(super) async fn scheduled(
        &self,
        entry: &InboxEntry,
        event: &Inbound,
        channel: Arc<dyn Channel>,
        run: ScheduledRun,
        cancel: &CancellationToken,
    ) -> Result<(), StoreError> {
        let rt = &self.rt;
        let store = &rt.store;
        let now = rt.clock.now_ms();
        store.start_schedule_run(run.run_id, now).await?;
        // A target checked when it was added can still be one nobody reads (an `http:` target
        // stored before such targets were refused): the run fails, saying why, rather than
        // being reported done while its answer is dropped.
        let target = format!("{}:{}", entry.channel, event.chat.chat_id);
        if let Err(reason) = crate::config::check_unasked_target(&target, &rt.config.channels) {
            let error = format!("its answer could not be delivered: {reason}");
            return self.fail_unstarted(entry, &run, &error).await;
        }
        // Over a [budget] cap a run that has not begun is skipped with a note, not run.
        if store.turn_for_inbox(entry.id).await?.is_none()
            && let Some(note) = crate::runtime::budget::cap_reached(rt, Some(&run.name)).await?
        {
            tracing::info!(schedule = %run.name, %note, "scheduled run skipped");
            rt.metrics.schedule_run(&run.name, "skipped");
            store
                .finish_schedule_run(run.run_id, false, Some(&note), now)
                .await?;
            return store
                .finish_inbox(entry.id, crate::store::InboxStatus::Done, Some(&note), now)
                .await;
        }
        let owner = self.owner(&entry.channel).await?;
        let agents = rt.agents();
        let Some(agent) = agents
            .get(&run.agent)
            .or_else(|| agents.get(&rt.config.router.default_agent))
            .cloned()
        else {
            let error = format!("no agent `{}` in the agents file", run.agent);
            return self.fail_unstarted(entry, &run, &error).await;
        };
        let text = match &event.kind {
            InboundKind::Message { text, .. } => text.clone(),
            _ => String::new(),
        };
        let conversation = store.conversation(&entry.channel, &event.chat, now).await?;
        let user_message = ChatMessage::user(text);
        // After a restart the run's turn may exist already: resume it.
        let turn = match store.turn_for_inbox(entry.id).await? {
            Some(turn) => turn,
            None => {
                store
                    .start_turn(
                        entry.id,
                        &conversation,
                        owner.as_ref().map(|o| o.user_id),
                        (&agent.id, agents.version(&agent.id)),
                        None,
                        &user_message,
                        now,
                    )
                    .await?
            }
        };
        let job = TurnJob {
            turn,
            session: conversation.session,
            agent,
            channel_name: entry.channel.clone(),
            capabilities: channel.capabilities(),
            preview: ChannelPreview::of(&channel),
            events: ChannelPreview::events_of(&channel),
            chat: event.chat.clone(),
            // Nobody sent this message; with `on_confirmation = "ask"` the owner decides.
            requester: owner
                .map(|o| o.platform_user_id)
                .unwrap_or_else(|| "schedule".into()),
            reply_to: None,
            // Nobody wrote in; the channel starts a conversation of its own.
            reply_context: None,
            note: run.note(),
            cancel: cancel.clone(),
            confirmation: confirmation_policy(Some(&run)),
            approvals_route: self.approvals_route(&entry.channel, event, Some(&run.name)),
            schedule: Some(run.name.clone()),
        };
        self.run(
            job,
            channel,
            Some(super::handler::Unattended::Schedule(run)),
        )
        .await
    }

    /// Records how a scheduled turn ended; a failure is reported to the owner.
    pub(super) async fn finish_scheduled(
        &self,
        run: &ScheduledRun,
        turn_id: i64,
        outcome: TurnOutcome,
    ) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let now = self.rt.clock.now_ms();
        match outcome {
            TurnOutcome::Answered => {
                store
                    .finish_schedule_run(run.run_id, true, None, now)
                    .await?;
                self.follow_answer(run).await
            }
            TurnOutcome::Failed | TurnOutcome::Cancelled => {
                self.rt.metrics.schedule_run(&run.name, "failed");
                let error = store
                    .turn_error(turn_id)
                    .await?
                    .unwrap_or_else(|| "the run did not finish".into());
                store
                    .finish_schedule_run(run.run_id, false, Some(&error), now)
                    .await?;
                self.tell_owner(run, &error).await
            }
            // Still going: it ends when the turn resumes.
            TurnOutcome::Suspended | TurnOutcome::AwaitingConfirmation => Ok(()),
        }
    }

    /// A run whose turn answered counts as done once its answer is delivered; until then it
    /// waits in [`AnswersOnTheirWay`] for the delivery worker's word.
    async fn follow_answer(&self, run: &ScheduledRun) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let Some((outbox_id, _)) = store.run_answer(run.run_id).await? else {
            // Nothing to deliver: done as it stands.
            self.rt.metrics.schedule_run(&run.name, "done");
            return Ok(());
        };
        self.answers.expect(outbox_id, &run.name);
        // Read again after registering: a delivery that ended before found nothing to report
        // to, and is settled here instead.
        match store.run_answer(run.run_id).await? {
            Some((_, AnswerDelivery::Delivered)) => self.answer_delivered(outbox_id),
            Some((_, AnswerDelivery::Failed(error))) => {
                return self.answer_refused(outbox_id, &error).await;
            }
            Some((_, AnswerDelivery::OnItsWay)) | None => {}
        }
        Ok(())
    }

    /// The delivery worker delivered outbox row `outbox_id`: if it was a run's answer, the run
    /// is done.
    pub(super) fn answer_delivered(&self, outbox_id: i64) {
        if let Some(name) = self.answers.settle(outbox_id) {
            self.rt.metrics.schedule_run(&name, "done");
        }
    }

    /// The platform refused outbox row `outbox_id` for good: if it was a run's answer, the run
    /// fails with the platform's reason, and the owner is told as of any failed run.
    pub(super) async fn answer_refused(
        &self,
        outbox_id: i64,
        error: &str,
    ) -> Result<(), StoreError> {
        self.answers.settle(outbox_id);
        let error = format!("its answer could not be delivered: {error}");
        let now = self.rt.clock.now_ms();
        let Some(run) = self
            .rt
            .store
            .fail_undelivered_run(outbox_id, &error, now)
            .await?
        else {
            return Ok(());
        };
        self.rt.metrics.schedule_run(&run.name, "failed");
        self.tell_owner(&run, &error).await
    }

    /// A run that fails before its turn begins: counted, stored with the reason, told to the
    /// owner, and its inbox entry closed as failed.
    async fn fail_unstarted(
        &self,
        entry: &InboxEntry,
        run: &ScheduledRun,
        error: &str,
    ) -> Result<(), StoreError> {
        let store = &self.rt.store;
        let now = self.rt.clock.now_ms();
        self.rt.metrics.schedule_run(&run.name, "failed");
        store
            .finish_schedule_run(run.run_id, false, Some(error), now)
            .await?;
        self.tell_owner(run, error).await?;
        store
            .finish_inbox(
                entry.id,
                crate::store::InboxStatus::Failed,
                Some(error),
                now,
            )
            .await
    }

    /// The owner's identity (`daemon.owner`) the run acts as: the one on the run's own channel
    /// (so the owner can answer its prompts there), else the first one configured and known.
    async fn owner(&self, channel: &str) -> Result<Option<Identity>, StoreError> {
        let mut owners = self.rt.config.daemon.owner_identities();
        owners.sort_by_key(|(owner_channel, _)| *owner_channel != channel);
        for (owner_channel, user) in owners {
            if let Some(identity) = self.rt.store.identity(owner_channel, user).await? {
                return Ok(Some(identity));
            }
        }
        Ok(None)
    }

    /// Sends the owner a short note about a failed run, in their own chat: on the first owner
    /// identity whose channel is running and shows messages of the daemon's own (not only
    /// answers to its events, where the note would reach nobody).
    async fn tell_owner(&self, run: &ScheduledRun, error: &str) -> Result<(), StoreError> {
        tracing::warn!(schedule = %run.name, %error, "scheduled run failed");
        let owners = self.rt.config.daemon.owner_identities();
        let Some((channel, user)) = owners.into_iter().find(|(channel, _)| {
            self.channels.contains_key(*channel) && crate::channels::sends_unasked(channel)
        }) else {
            return Ok(());
        };
        let note = NewOutbox {
            inbox_id: None,
            seq: 0,
            channel: channel.to_string(),
            kind: OutboxKind::Send,
            message: OutboundMessage::text(
                ChatRef::new(user),
                format!("⚠️ The scheduled run “{}” failed: {error}", run.name),
            ),
        };
        self.rt
            .store
            .enqueue_outbox(&[note], self.rt.clock.now_ms())
            .await?;
        self.outbox.notify_one();
        Ok(())
    }
}

/// The answers of scheduled runs on their way to the platform (outbox row → schedule name),
/// so `/metrics` counts such a run once: done when its answer is delivered, failed when the
/// platform refuses it. Kept in memory, like the counters: an answer delivered after a restart
/// is not counted (this process's counters never saw its run), while a refused one still fails
/// its run, found through the database.
#[derive(Debug, Default)]
pub struct AnswersOnTheirWay(Mutex<HashMap<i64, String>>);

impl AnswersOnTheirWay {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, String>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn expect(&self, outbox_id: i64, schedule: &str) {
        self.lock().insert(outbox_id, schedule.to_string());
    }

    /// Takes the row's schedule out: whoever takes it (the delivery worker or the run's end,
    /// whichever sees the outcome first) reports it, and only once.
    fn settle(&self, outbox_id: i64) -> Option<String> {
        self.lock().remove(&outbox_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_rule_becomes_the_turns_confirmation_policy() {
        let run = |on_confirmation| ScheduledRun {
            run_id: 1,
            schedule_id: 1,
            name: "briefing".into(),
            agent: "general".into(),
            on_confirmation,
            allow_tools: vec!["send_email".into()],
            recurring: true,
        };
        assert_eq!(confirmation_policy(None), ConfirmationPolicy::Ask);
        let ask = run(OnConfirmation::Ask);
        assert_eq!(confirmation_policy(Some(&ask)), ConfirmationPolicy::Ask);
        let deny = run(OnConfirmation::Deny);
        assert_eq!(confirmation_policy(Some(&deny)), ConfirmationPolicy::Deny);
        let allow = run(OnConfirmation::Allow);
        assert_eq!(
            confirmation_policy(Some(&allow)),
            ConfirmationPolicy::Allow(vec!["send_email".into()])
        );
    }
}
