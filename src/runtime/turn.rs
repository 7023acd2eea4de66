//! One turn: the model and the tools take turns until the model answers in words.
//!
//! Every step is stored as it happens (docs/architecture.md, "The path of a message", rule 3): the
//! model's tool requests before any tool runs, each call marked running before it starts, each
//! result with its message. Running the loop again on the same turn therefore resumes it: calls
//! that never started run now, a call that was running when the daemon died is reported to the
//! model as interrupted and is never run again, and the model is asked again only for what is not
//! stored yet. A call that needs the user's approval parks the turn until the decision arrives (see
//! [`super::calls`]).

use std::sync::Arc;
use std::time::Instant;

use hearth_channel::{Capabilities, ChatRef, OutboundMessage, Progress, TurnEvent};
use tokio_util::sync::CancellationToken;

use super::Runtime;
use super::budget;
use super::calls::{self, Settled, cancel_open_calls, settle_tool_calls};
use super::compact::{Compacted, compact};
use super::context::{self, assemble, summary_block};
use super::plan::PlanView;
use super::plan_mode;
use super::preview::{Preview, PreviewSink, TurnEventSink};
use super::prompt::{Section, compose};
use super::tools::Toolbox;
use crate::agent::{AgentDef, AgentMode};
use crate::provider::{
    ChatMessage, ChatRequest, ChatResponse, ProviderError, ProviderErrorKind, SharedProvider,
    ToolSpec,
};
use crate::store::{
    HistoryKey, ModelCall, NewOutbox, OutboxKind, Payer, StoreError, ToolCallStatus, Turn, TurnEnd,
    TurnStatus,
};

/// At most this many stored messages after the latest summary are read for the request; turns
/// are summarised long before a conversation gets there.
const HISTORY_ROWS: usize = 2_000;

/// What a turn answers and where the answer goes.
pub struct TurnJob {
    pub turn: Turn,
    pub session: i64,
    pub agent: AgentDef,
    pub channel_name: String,
    /// What the channel can show (buttons, preview interval …); the runtime never sees the
    /// channel itself.
    pub capabilities: Capabilities,
    /// Where the streamed preview of the reply goes.
    pub preview: Arc<dyn PreviewSink>,
    /// Where the turn's events go, for channels that show progress.
    pub events: Arc<dyn TurnEventSink>,
    pub chat: ChatRef,
    /// The platform user id of the person whose message this answers; they decide confirmations.
    pub requester: String,
    /// Platform id of the message being answered, quoted by the reply.
    pub reply_to: Option<String>,
    /// The answered event's [`hearth_channel::Inbound::reply_context`], handed back on every
    /// message of the turn (the reply, confirmation prompts) so the channel can thread them.
    pub reply_context: Option<serde_json::Value>,
    /// Shown before the reply, e.g. "💰 Finance" when the agent changed.
    pub note: Option<String>,
    /// Cancelled by `/cancel`.
    pub cancel: CancellationToken,
    /// What a tool call that needs approval does: asked in the chat, or, for a scheduled run
    /// nobody may be watching, the schedule's `on_confirmation` rule.
    pub confirmation: ConfirmationPolicy,
    /// Where this turn's approval prompts are also sent, with buttons (`daemon.approvals_to`):
    /// set when the prompt's own chat shows none, or nobody may be watching it.
    pub approvals_route: Option<ApprovalRoute>,
    /// The schedule whose run this turn is (its spending is counted under it); none for a
    /// message someone sent.
    pub schedule: Option<String>,
}

impl TurnJob {
    /// The job of one run of a plan-mode step: the same turn, chat and people, its messages
    /// kept under `sub_turn`, the agent's tool-call limit the step's, and a cancel of its own
    /// (a child of the turn's, so `/cancel` still stops it) that the step's timeout uses.
    pub(super) fn for_step(&self, sub_turn: i64, max_tool_calls: u32) -> TurnJob {
        let mut turn = self.turn.clone();
        turn.sub_turn = Some(sub_turn);
        // The step's run may have calls stored from before a restart: settle looks for them.
        turn.fresh = false;
        // The step's limits are its own: the turn's counts so far are not held against it.
        turn.tool_calls = 0;
        turn.llm_calls = 0;
        let mut agent = self.agent.clone();
        agent.max_tool_calls = max_tool_calls;
        TurnJob {
            turn,
            session: self.session,
            agent,
            channel_name: self.channel_name.clone(),
            capabilities: self.capabilities.clone(),
            preview: self.preview.clone(),
            events: self.events.clone(),
            chat: self.chat.clone(),
            requester: self.requester.clone(),
            reply_to: self.reply_to.clone(),
            reply_context: self.reply_context.clone(),
            note: None,
            cancel: self.cancel.child_token(),
            confirmation: self.confirmation.clone(),
            approvals_route: self.approvals_route.clone(),
            schedule: self.schedule.clone(),
        }
    }

    /// Shows `event` to the turn's chat, when its channel shows progress
    /// ([`Capabilities::progress`]); others see nothing.
    pub async fn emit(&self, event: TurnEvent) {
        if !self.capabilities.progress {
            return;
        }
        let progress = Progress {
            chat: &self.chat,
            reply_context: self.reply_context.as_ref(),
            event: &event,
        };
        self.events.emit(progress).await;
    }
}

/// The owner's chat a confirmation prompt is also sent to (`daemon.approvals_to`).
#[derive(Clone, Debug)]
pub struct ApprovalRoute {
    /// The channel's name, e.g. `telegram`.
    pub channel: String,
    pub chat: ChatRef,
    /// Where the request comes from, for the copy's reader: "Ann on email", "the scheduled run
    /// “briefing”".
    pub origin: String,
}

/// What happens in a turn to a tool call that needs a person's approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfirmationPolicy {
    /// Ask in the chat (interactive turns, schedules with `on_confirmation = "ask"`).
    Ask,
    /// Report it as not run: nobody is there to ask.
    Deny,
    /// Run these tools without asking; the others are reported as not run.
    Allow(Vec<String>),
}

/// How the turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    Answered,
    Failed,
    Cancelled,
    /// Interrupted by shutdown: left running in the database, resumed at the next start.
    Suspended,
    /// Parked until the user approves or denies a tool call.
    AwaitingConfirmation,
}

impl TurnOutcome {
    /// The `outcome` label of `hearth_turns_total`.
    pub fn label(self) -> &'static str {
        match self {
            TurnOutcome::Answered => "answered",
            TurnOutcome::Failed => "failed",
            TurnOutcome::Cancelled => "cancelled",
            TurnOutcome::Suspended => "suspended",
            TurnOutcome::AwaitingConfirmation => "awaiting_confirmation",
        }
    }
}

/// How a turn ends: its status, the reply text, and the message kept in the history.
pub(super) struct Finish {
    pub(super) status: TurnStatus,
    pub(super) text: String,
    keep: Option<ChatMessage>,
    error: Option<String>,
    /// The last model call, stored with the turn's end instead of on its own.
    call: Option<ModelCall>,
}

/// Where the loop stopped.
pub(super) enum Stop {
    Finished(Box<Finish>),
    /// Shutdown: leave everything as stored.
    Shutdown,
    /// A confirmation is pending.
    Waiting,
}

pub async fn run_turn(
    rt: &Runtime,
    job: TurnJob,
    shutdown: &CancellationToken,
) -> Result<TurnOutcome, StoreError> {
    let started = Instant::now();
    let preview = Preview::start(rt, &job);
    let plan = PlanView::start(rt, &job);
    let result = match job.agent.mode {
        AgentMode::React => turn_loop(rt, &job, &preview, &plan, shutdown).await,
        // Boxed: a plan's run holds several loops' state, and react turns need not carry it.
        AgentMode::Plan => Box::pin(plan_mode::run(rt, &job, &preview, &plan, shutdown)).await,
    };
    let draft = preview.finish().await;
    let result = result?;
    // The plan settles in the chat before the answer is queued; on shutdown it stays as
    // shown, and the resumed turn shows it again.
    let plan_end = match &result {
        Stop::Shutdown => None,
        Stop::Waiting => Some(plan.finish(rt, &job, true).await?),
        Stop::Finished(_) => Some(plan.finish(rt, &job, false).await?),
    };
    let plan_text = plan_end.as_ref().and_then(|end| end.above_answer.clone());
    let outcome = match result {
        Stop::Shutdown => TurnOutcome::Suspended,
        Stop::Waiting => {
            rt.store
                .suspend_turn(job.turn.id, job.turn.inbox_id, rt.clock.now_ms())
                .await?;
            TurnOutcome::AwaitingConfirmation
        }
        Stop::Finished(finished) => {
            let Finish {
                status,
                text,
                keep,
                error,
                call,
            } = *finished;
            let text = match plan_text {
                Some(plan) => format!("{plan}\n\n{text}"),
                None => text,
            };
            let text = match &job.note {
                Some(note) => format!("{note}\n\n{text}"),
                None => text,
            };
            let reply = NewOutbox {
                inbox_id: Some(job.turn.inbox_id),
                seq: 0,
                channel: job.channel_name.clone(),
                kind: OutboxKind::Send,
                message: OutboundMessage {
                    chat: job.chat.clone(),
                    text,
                    buttons: Vec::new(),
                    reply_to: job.reply_to.clone(),
                    replaces: draft,
                    delivery_id: None,
                    reply_context: job.reply_context.clone(),
                    answers_press: None,
                },
            };
            let end = TurnEnd {
                status,
                message: keep.as_ref(),
                session: job.session,
                replies: vec![reply],
                error: error.as_deref(),
                call: call.as_ref(),
            };
            rt.store
                .finish_turn(&job.turn, end, rt.clock.now_ms())
                .await?;
            if let Some(call) = &call {
                budget::recorded(rt, call).await?;
            }
            match status {
                TurnStatus::Done => TurnOutcome::Answered,
                TurnStatus::Cancelled => TurnOutcome::Cancelled,
                _ => TurnOutcome::Failed,
            }
        }
    };
    if let Some(end) = plan_end {
        end.queue(rt).await?;
    }
    rt.metrics.observe_turn(started.elapsed(), outcome.label());
    Ok(outcome)
}

pub(super) fn finish(status: TurnStatus, text: String, error: Option<String>) -> Stop {
    Stop::Finished(Box::new(Finish {
        status,
        text,
        keep: None,
        error,
        call: None,
    }))
}

/// Runs steps until the turn ends, waits, or shutdown interrupts it.
async fn turn_loop(
    rt: &Runtime,
    job: &TurnJob,
    preview: &Preview,
    plan: &PlanView,
    shutdown: &CancellationToken,
) -> Result<Stop, StoreError> {
    // A step goes on with its value, starts the loop over, or ends the turn.
    macro_rules! step {
        ($next:expr) => {
            match $next {
                Next::Go(value) => value,
                Next::Again => continue,
                Next::Stop(stop) => return Ok(stop),
            }
        };
    }
    let agent = &job.agent;
    let Some(provider) = rt
        .providers
        .chain(&agent.provider, Some(agent.model.as_str()))
    else {
        return Ok(provider_missing(agent));
    };
    if let Some(stop) = wait_for_mcp(rt, job, shutdown).await? {
        return Ok(stop);
    }
    let mut steps = Steps::new(rt, job, preview, plan, shutdown, provider);
    loop {
        step!(steps.interrupted().await?);
        step!(steps.settle_calls().await?);
        step!(steps.check_caps().await?);
        let history = steps.read_history().await?;
        let request = step!(steps.fit_request(&history).await?);
        let response = step!(steps.call_model(&history.limits, &request).await?);
        let call = steps.account(&history.limits, &request, &response).await;
        if response.tool_calls.is_empty() {
            return Ok(steps.answer(&history.limits, &request, response, call));
        }
        step!(steps.store_tool_request(response, call).await?);
    }
}

/// What a step of the turn loop says to do next.
pub(super) enum Next<T> {
    /// Go on with this value.
    Go(T),
    /// Start the loop over: calls were settled, the history compacted, or a "too long" answer
    /// corrected the estimates.
    Again,
    /// The turn ends, waits for a decision, or is suspended.
    Stop(Stop),
}

/// The answer of a turn whose agent names a provider that is not configured.
pub(super) fn provider_missing(agent: &AgentDef) -> Stop {
    let text = format!(
        "⚠️ The agent `{}` uses the provider `{}`, which is not configured. Add it to [[providers]] in hearth.toml or change the agent.",
        agent.id, agent.provider
    );
    finish(
        TurnStatus::Failed,
        text,
        Some("provider not configured".into()),
    )
}

/// On a fresh install no tool list is kept yet: the first turn would be offered none of the MCP
/// servers' tools while they start. It waits for them (each up to its start timeout) instead.
pub(super) async fn wait_for_mcp(
    rt: &Runtime,
    job: &TurnJob,
    shutdown: &CancellationToken,
) -> Result<Option<Stop>, StoreError> {
    let Some(mcp) = rt.mcp.get() else {
        return Ok(None);
    };
    tokio::select! {
        () = mcp.first_start() => Ok(None),
        () = job.cancel.cancelled() => {
            // A resumed turn may have calls waiting: they end as cancelled, not open.
            cancel_open_calls(rt, job).await?;
            Ok(Some(cancelled()))
        }
        () = shutdown.cancelled() => Ok(Some(Stop::Shutdown)),
    }
}

/// One turn's loop: what stays the same from step to step, and what the steps count.
pub(super) struct Steps<'a> {
    rt: &'a Runtime,
    job: &'a TurnJob,
    preview: &'a Preview,
    /// The turn's plan in its chat, looked at after calls that may change it.
    plan: &'a PlanView,
    shutdown: &'a CancellationToken,
    provider: SharedProvider,
    toolbox: Toolbox,
    specs: Arc<[ToolSpec]>,
    /// The tools' schemas are sent with every call: counted once.
    specs_chars: usize,
    /// The conversation's history, as the store keys it.
    key: HistoryKey,
    payer: Payer,
    llm_calls: i64,
    tool_calls_used: i64,
    first_step: bool,
    /// Compaction inside a turn happens at most once; the request then leaves out what does not
    /// fit instead.
    compacted_in_turn: bool,
    /// "Too long" answers from the provider in this turn: each corrects the estimates, and a
    /// third ends the turn, so it never loops.
    overflows: u32,
}

/// The history a request is made from, read afresh at each step.
pub(super) struct History {
    /// Inside the loop: a "too long" answer from the server corrects what fits.
    pub(super) limits: Limits,
    /// The stored messages after the latest summary.
    stored: Vec<crate::store::StoredMessage>,
    unfinished: Vec<i64>,
    /// The system prompt without the summary.
    base: String,
    summary: Option<String>,
    /// Turns the request may leave out, oldest first; never the current one.
    order: Vec<i64>,
}

/// A request to the model and what it is estimated to take.
pub(super) struct Request {
    pub(super) chat: ChatRequest,
    /// Its characters, the tools' schemas included.
    pub(super) chars: usize,
    /// Its tokens, as estimated.
    pub(super) estimate: u64,
}

impl<'a> Steps<'a> {
    pub(super) fn new(
        rt: &'a Runtime,
        job: &'a TurnJob,
        preview: &'a Preview,
        plan: &'a PlanView,
        shutdown: &'a CancellationToken,
        provider: SharedProvider,
    ) -> Self {
        let agent = &job.agent;
        let mut toolbox = Toolbox::for_agent(&rt.tools, agent);
        let window = Limits::of(rt, agent);
        if toolbox.fit_window(rt.estimator.chars_of(&window.model, window.usable)) {
            let first = rt
                .meta_for_window
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(agent.id.clone());
            if first {
                tracing::info!(
                    agent = %agent.id,
                    tools = toolbox.tools.len(),
                    usable_tokens = window.usable,
                    "the tools' schemas would take more than a quarter of the window: offering search_tools, get_tool_help and use_tool instead"
                );
            }
        }
        let specs = toolbox.specs();
        let specs_chars = serde_json::to_string(&specs).map_or(0, |s| s.len());
        Self {
            rt,
            job,
            preview,
            plan,
            shutdown,
            provider,
            toolbox,
            specs,
            specs_chars,
            key: HistoryKey {
                conversation_id: job.turn.conversation_id,
                session: job.session,
                user_id: job.turn.user_id,
            },
            payer: Payer {
                purpose: "turn",
                user_id: job.turn.user_id,
                agent_id: Some(agent.id.clone()),
                schedule: job.schedule.clone(),
                channel: Some(job.channel_name.clone()),
                conversation_id: Some(job.turn.conversation_id),
                turn_id: Some(job.turn.id),
            },
            llm_calls: job.turn.llm_calls,
            tool_calls_used: job.turn.tool_calls,
            first_step: true,
            compacted_in_turn: false,
            overflows: 0,
        }
    }

    /// This loop offering `toolbox` instead of the agent's tools (a plan-mode step's tools).
    pub(super) fn with_toolbox(mut self, toolbox: Toolbox) -> Self {
        self.specs = toolbox.specs();
        self.specs_chars = serde_json::to_string(&self.specs).map_or(0, |s| s.len());
        self.toolbox = toolbox;
        self
    }

    /// The tools this loop offers.
    pub(super) fn toolbox(&self) -> &Toolbox {
        &self.toolbox
    }

    /// The schemas sent with each request, and their size.
    pub(super) fn specs(&self) -> (Arc<[ToolSpec]>, usize) {
        (self.specs.clone(), self.specs_chars)
    }

    pub(super) fn runtime(&self) -> &'a Runtime {
        self.rt
    }

    /// Records a model call that is not the turn's last: in the usage ledger and the turn's
    /// counts, so budgets see it at once.
    pub(super) async fn bill(
        &self,
        call: &ModelCall,
        response: &ChatResponse,
    ) -> Result<(), StoreError> {
        budget::store_call(self.rt, call).await?;
        self.rt
            .store
            .add_turn_usage(
                self.job.turn.id,
                &response.usage,
                &response.provider,
                &response.model,
            )
            .await
    }

    /// Stops at shutdown or `/cancel`.
    pub(super) async fn interrupted(&self) -> Result<Next<()>, StoreError> {
        if self.shutdown.is_cancelled() {
            return Ok(Next::Stop(Stop::Shutdown));
        }
        if self.job.cancel.is_cancelled() {
            cancel_open_calls(self.rt, self.job).await?;
            return Ok(Next::Stop(cancelled()));
        }
        Ok(Next::Go(()))
    }

    /// Settles tool calls first: after a restart or a decision they may be waiting from before.
    pub(super) async fn settle_calls(&mut self) -> Result<Next<()>, StoreError> {
        let (rt, job) = (self.rt, self.job);
        // A turn that just started has none yet: skip the query on its first step.
        let open = if self.first_step && job.turn.fresh {
            Vec::new()
        } else {
            rt.store.open_tool_calls(job.turn.id).await?
        };
        self.first_step = false;
        if open.is_empty() {
            // A resumed turn shows its plan again, before the model is asked anything.
            self.plan.refresh(rt, job, false).await?;
            return Ok(Next::Go(()));
        }
        let calls: Vec<crate::provider::ToolCall> = open.iter().map(|r| r.call.clone()).collect();
        self.plan.calls(&calls);
        // Boxed, as compaction: a turn waiting on the model holds its whole future, which is as
        // large as its largest step.
        let settled = settle_tool_calls(
            rt,
            job,
            &self.toolbox,
            open,
            self.tool_calls_used,
            self.shutdown,
        );
        Ok(match Box::pin(settled).await? {
            Settled::Done(used) => {
                self.tool_calls_used += used;
                self.plan.refresh(rt, job, false).await?;
                Next::Again
            }
            Settled::Waiting => Next::Stop(Stop::Waiting),
            Settled::Shutdown => Next::Stop(Stop::Shutdown),
        })
    }

    /// Ends the turn at the agent's step limit or a spending cap.
    async fn check_caps(&self) -> Result<Next<()>, StoreError> {
        let agent = &self.job.agent;
        if self.llm_calls >= i64::from(agent.max_turns) {
            let text = format!(
                "I stopped after {} steps without finishing (this agent's limit is {}). Ask me to continue if you want me to go on.",
                self.llm_calls, agent.max_turns
            );
            return Ok(Next::Stop(finish(
                TurnStatus::Done,
                text,
                Some("max turns reached".into()),
            )));
        }
        if let Some(line) = budget::cap_reached(self.rt, self.job.schedule.as_deref()).await? {
            return Ok(Next::Stop(finish(
                TurnStatus::Failed,
                line.clone(),
                Some(line),
            )));
        }
        Ok(Next::Go(()))
    }

    /// The latest summary, the messages after it and the system prompt.
    pub(super) async fn read_history(&self) -> Result<History, StoreError> {
        let (rt, job) = (self.rt, self.job);
        let limits = Limits::of(rt, &job.agent);
        let summary = rt.store.latest_summary(self.key).await?;
        let after = summary.as_ref().map_or(0, |s| s.covers_until);
        let stored = rt
            .store
            .messages_after(self.key, after, HISTORY_ROWS)
            .await?;
        let unfinished = crate::store::unfinished_turns(&stored);
        let user_text = latest_user_text(&stored, job.turn.id);
        let base = system_prompt(rt, &job.agent, &self.toolbox, job.turn.user_id, &user_text).await;
        rt.compactor
            .note_overhead(self.key, base.len() + self.specs_chars);
        let order = context::droppable_turns(&stored, job.turn.id);
        Ok(History {
            limits,
            summary: summary.as_ref().map(summary_block),
            order,
            stored,
            unfinished,
            base,
        })
    }

    /// The request that fits the window: compacted once if it would not, then without the
    /// oldest turns that do not fit.
    pub(super) async fn fit_request(
        &mut self,
        history: &History,
    ) -> Result<Next<Request>, StoreError> {
        let (rt, job, limits) = (self.rt, self.job, &history.limits);
        let mut dropped = 0usize;
        let request = loop {
            let request = self.request(history, dropped);
            if request.estimate <= limits.usable {
                break request;
            }
            if !self.compacted_in_turn {
                // It would not fit: summarise older turns first.
                self.compacted_in_turn = true;
                tracing::info!(
                    turn = job.turn.id,
                    estimate = request.estimate,
                    usable = limits.usable,
                    "request too large; compacting first"
                );
                let compacted = compact(rt, self.key, &job.agent, None);
                if let Compacted::Done { .. } = Box::pin(compacted).await? {
                    return Ok(Next::Again);
                }
            }
            if dropped >= history.order.len() {
                // Every earlier turn is left out. "Start afresh" is the answer only when the
                // system prompt, the tools and the latest message alone do not fit. When it is
                // this turn's own tool calls and results that pass the estimate (a hundred calls
                // in one answer), the request goes as it is and the model server judges it: a
                // "too long" answer corrects the estimates, and a third ends the turn.
                if let Some(stop) = self.too_long_alone(history) {
                    return Ok(Next::Stop(stop));
                }
                tracing::warn!(
                    turn = job.turn.id,
                    estimate = request.estimate,
                    usable = limits.usable,
                    "this turn's own tool calls and results pass the window's estimate; sending the request for the model server to judge"
                );
                break request;
            }
            dropped = self.leave_out_more(history, dropped, request.estimate);
        };
        if dropped > 0 {
            tracing::info!(
                turn = job.turn.id,
                left_out = dropped,
                estimate = request.estimate,
                usable = limits.usable,
                "older turns left out of the request to fit the window"
            );
        }
        Ok(Next::Go(request))
    }

    /// The request of the history without its `dropped` oldest turns.
    fn request(&self, history: &History, dropped: usize) -> Request {
        let (rt, job, limits) = (self.rt, self.job, &history.limits);
        let view;
        let shown: &[crate::store::StoredMessage] = if dropped == 0 {
            &history.stored
        } else {
            view = context::without_oldest(&history.stored, &history.order, dropped);
            &view
        };
        let mut system = history.base.clone();
        if let Some(block) = &history.summary {
            system.push_str("\n\n");
            system.push_str(block);
        }
        if dropped > 0 {
            system.push_str("\n\n");
            system.push_str(&left_out_block(
                rt,
                limits,
                &history.stored,
                &history.order[..dropped],
            ));
        }
        let messages = assemble(shown, job.turn.id, &history.unfinished);
        let chars = system.len()
            + self.specs_chars
            + messages.iter().map(context::message_chars).sum::<usize>();
        let estimate = rt
            .estimator
            .estimate(job.turn.conversation_id, &limits.model, chars);
        Request {
            chat: ChatRequest {
                model: None,
                system,
                messages,
                tools: self.specs.clone(),
                temperature: job.agent.temperature,
                max_tokens: None,
                stream: self.preview.enabled(),
                tool_choice: None,
            },
            chars,
            estimate,
        }
    }

    /// Ends the turn when the system prompt, the tools and the latest message alone pass the
    /// window.
    fn too_long_alone(&self, history: &History) -> Option<Stop> {
        let (rt, job, limits) = (self.rt, self.job, &history.limits);
        let latest_chars: usize = history
            .stored
            .iter()
            .filter(|m| {
                m.turn_id == Some(job.turn.id) && matches!(m.message, ChatMessage::User { .. })
            })
            .map(|m| context::message_chars(&m.message))
            .sum();
        let alone = rt.estimator.estimate(
            job.turn.conversation_id,
            &limits.model,
            history.base.len() + self.specs_chars + latest_chars,
        );
        if alone <= limits.usable {
            return None;
        }
        tracing::warn!(
            turn = job.turn.id,
            estimate = alone,
            usable = limits.usable,
            "the latest message does not fit even alone"
        );
        Some(finish(
            TurnStatus::Failed,
            TOO_LONG.to_string(),
            Some(format!(
                "{alone} tokens for the system prompt, the tools and the latest message; {} fit",
                limits.usable
            )),
        ))
    }

    /// How many of the oldest turns to leave out, after `dropped`, to cover the excess of
    /// `estimate` (at least one more).
    fn leave_out_more(&self, history: &History, mut dropped: usize, estimate: u64) -> usize {
        let limits = &history.limits;
        let excess = self
            .rt
            .estimator
            .chars_of(&limits.model, estimate - limits.usable);
        let mut freed = 0usize;
        while dropped < history.order.len() && (freed == 0 || freed < excess) {
            let turn = history.order[dropped];
            freed += history
                .stored
                .iter()
                .filter(|m| m.turn_id == Some(turn))
                .map(|m| m.chars.max(1) as usize)
                .sum::<usize>();
            dropped += 1;
        }
        dropped
    }

    /// Asks the model. A cut-short call (cancel, shutdown, a stream broken after its first
    /// words) is billed; a "too long" answer corrects the estimates and starts over.
    pub(super) async fn call_model(
        &mut self,
        limits: &Limits,
        request: &Request,
    ) -> Result<Next<ChatResponse>, StoreError> {
        let (rt, job, preview) = (self.rt, self.job, self.preview);
        let call_started = Instant::now();
        let streamed_before = preview.received();
        let response = tokio::select! {
            response = self.provider.complete(&request.chat, preview.sender()) => response,
            () = job.cancel.cancelled() => {
                let streamed = preview.received().saturating_sub(streamed_before);
                cut_short(rt, &self.payer, limits, request.estimate, streamed).await?;
                return Ok(Next::Stop(cancelled()));
            }
            () = self.shutdown.cancelled() => {
                let streamed = preview.received().saturating_sub(streamed_before);
                cut_short(rt, &self.payer, limits, request.estimate, streamed).await?;
                return Ok(Next::Stop(Stop::Shutdown));
            }
        };
        self.llm_calls += 1;
        let err = match response {
            Ok(response) => {
                rt.metrics
                    .observe_llm(&response.provider, call_started.elapsed());
                return Ok(Next::Go(response));
            }
            Err(err) => err,
        };
        rt.metrics.provider_error(&err.provider);
        if is_context_overflow(&err) {
            tracing::warn!(turn = job.turn.id, error = %err, "the provider says the request is too long");
            self.overflows += 1;
            let (limit, counted) = match context::overflow_numbers(&err.message) {
                Some((limit, counted)) => (Some(limit), counted),
                None => (None, None),
            };
            let calibration = rt.estimator.overflowed(
                job.turn.conversation_id,
                &limits.model,
                request.chars,
                limit,
                counted,
            );
            save_calibration(rt, &limits.model, &calibration).await;
            if self.overflows < 3 {
                return Ok(Next::Again);
            }
            return Ok(Next::Stop(finish(
                TurnStatus::Failed,
                TOO_LONG.to_string(),
                Some(err.to_string()),
            )));
        }
        tracing::warn!(turn = job.turn.id, error = %err, "model call failed");
        // A stream that broke or timed out after its first words was served and billed.
        let streamed = preview.received().saturating_sub(streamed_before);
        if streamed > 0
            && matches!(
                err.kind,
                ProviderErrorKind::Timeout | ProviderErrorKind::Network
            )
        {
            cut_short(rt, &self.payer, limits, request.estimate, streamed).await?;
        }
        let text = provider_error_text(rt, &err);
        Ok(Next::Stop(finish(
            TurnStatus::Failed,
            text,
            Some(err.to_string()),
        )))
    }

    /// What the answered call teaches the estimates, and the call as it is billed.
    pub(super) async fn account(
        &self,
        limits: &Limits,
        request: &Request,
        response: &ChatResponse,
    ) -> ModelCall {
        let rt = self.rt;
        let answered_by = if response.provider == limits.provider {
            limits.model.clone()
        } else {
            let model = rt
                .providers
                .config(&response.provider)
                .map_or(response.model.as_str(), |c| c.model.as_str());
            context::model_key(&response.provider, model)
        };
        if let Some(calibration) = rt.estimator.reported(
            self.job.turn.conversation_id,
            &answered_by,
            request.chars,
            response.usage.input_tokens,
        ) {
            save_calibration(rt, &answered_by, &calibration).await;
        }
        budget::model_call(rt, &self.payer, response)
    }

    /// The model answered in words: the turn ends with its answer, and older turns are
    /// summarised later when the next request would pass the threshold.
    pub(super) fn answer(
        &self,
        limits: &Limits,
        request: &Request,
        response: ChatResponse,
        call: ModelCall,
    ) -> Stop {
        let rt = self.rt;
        // The history keeps what the chat shows: a cut answer, not megabytes of it.
        let answer = cap_reply(response.text, rt.config.daemon.max_reply_chars);
        let text = if answer.trim().is_empty() {
            "(The model returned an empty answer.)".to_string()
        } else {
            answer.clone()
        };
        // The next request is this one plus the answer and a new message: when it would pass
        // the threshold, older turns are summarised once the reply is on its way.
        let next = rt.estimator.estimate(
            self.job.turn.conversation_id,
            &limits.model,
            request.chars + answer.len(),
        );
        let conversation = request
            .chat
            .messages
            .iter()
            .map(context::message_chars)
            .sum::<usize>();
        if next > limits.compact_at
            || rt.estimator.tokens_of(&limits.model, conversation) > limits.history
        {
            rt.compactor.want(self.key, &self.job.agent);
        }
        Stop::Finished(Box::new(Finish {
            status: TurnStatus::Done,
            text,
            keep: Some(ChatMessage::assistant(answer)),
            error: None,
            call: Some(call),
        }))
    }

    /// Stores the model's tool request (its calls run at the next step), unless it repeats a
    /// call too often.
    pub(super) async fn store_tool_request(
        &self,
        response: ChatResponse,
        call: ModelCall,
    ) -> Result<Next<()>, StoreError> {
        let (rt, job) = (self.rt, self.job);
        self.bill(&call, &response).await?;
        let repeated = repeated_call(rt, job.turn.id, &response.tool_calls).await?;
        let request_message = ChatMessage::Assistant {
            text: response.text,
            tool_calls: response.tool_calls,
        };
        let records = rt
            .store
            .record_tool_request(&job.turn, job.session, &request_message, rt.clock.now_ms())
            .await?;
        if let Some((name, times)) = repeated {
            return Ok(Next::Stop(
                stop_repeating(rt, job, records, &name, times).await?,
            ));
        }
        Ok(Next::Go(()))
    }
}

/// The sizes that decide when to compact, in tokens, for the agent's provider.
pub(crate) struct Limits {
    /// The configured provider's name.
    pub provider: String,
    /// The provider and model, as [`context::model_key`] names them for the estimates.
    pub model: String,
    /// The window less the answer (or less, when the server said so): a request above it
    /// cannot work.
    pub usable: u64,
    /// `[context] compact_at` of `usable`: above it, older turns are summarised.
    pub compact_at: u64,
    /// `[context] compact_to` of `usable`: what a compaction brings the request down to.
    pub compact_to: u64,
    /// `[runtime] history_tokens`: the conversation part alone above it is summarised too.
    pub history: u64,
}

impl Limits {
    pub(crate) fn of(rt: &Runtime, agent: &AgentDef) -> Self {
        let (window, answer, provider, model) = match rt.providers.config(&agent.provider) {
            Some(config) => {
                let model = match agent.model.as_str() {
                    "default" | "" => config.model.clone(),
                    model => model.to_string(),
                };
                (
                    crate::provider::context_window(config, Some(agent.model.as_str())),
                    config.max_tokens,
                    config.name.clone(),
                    model,
                )
            }
            None => (
                crate::provider::UNKNOWN_MODEL_WINDOW,
                0,
                agent.provider.clone(),
                agent.model.clone(),
            ),
        };
        let model = context::model_key(&provider, &model);
        // An answer allowance as large as the window leaves room for half of it.
        let mut usable = u64::from(window.saturating_sub(answer).max(window / 2));
        if let Some(limit) = rt.estimator.calibration(&model).prompt_limit {
            // The server's own limit, with a little room for the estimate's error.
            usable = usable.min(limit * 97 / 100);
        }
        Self {
            provider,
            model,
            usable,
            compact_at: (usable as f64 * rt.config.context.compact_at) as u64,
            compact_to: (usable as f64 * rt.config.context.compact_to) as u64,
            history: rt.config.runtime.history_tokens as u64,
        }
    }
}

/// The system block of a request that leaves out older turns: the note that it does, and the
/// ledger of the actions taken in them (from the stored messages), within a tenth of the window.
fn left_out_block(
    rt: &Runtime,
    limits: &Limits,
    stored: &[crate::store::StoredMessage],
    dropped: &[i64],
) -> String {
    let messages: Vec<&crate::store::StoredMessage> = stored
        .iter()
        .filter(|m| m.turn_id.is_some_and(|t| dropped.contains(&t)))
        .collect();
    let budget = rt.estimator.chars_of(&limits.model, limits.usable / 10);
    let ledger = super::compact::ledger_of_messages(rt, &messages, budget);
    let mut block = context::LEFT_OUT_NOTE.to_string();
    if !ledger.is_empty() {
        block.push('\n');
        block.push_str(&ledger);
    }
    block
}

/// Records a model call that was cut short (a cancel, a closed stream, shutdown, a stream that
/// broke after its first words): the provider served it and bills it, so it counts against
/// the caps, with tokens estimated from what was sent and what had arrived.
async fn cut_short(
    rt: &Runtime,
    payer: &Payer,
    limits: &Limits,
    input_tokens: u64,
    streamed_chars: usize,
) -> Result<(), StoreError> {
    let output_tokens = rt.estimator.tokens_of(&limits.model, streamed_chars);
    let model = limits
        .model
        .strip_prefix(&format!("{}/", limits.provider))
        .unwrap_or(&limits.model);
    let call = budget::cut_short_call(
        rt,
        payer,
        &limits.provider,
        model,
        input_tokens,
        output_tokens,
    );
    tracing::info!(
        provider = %limits.provider,
        input_tokens,
        output_tokens,
        "model call cut short; recorded with estimated tokens"
    );
    budget::store_call(rt, &call).await
}

/// Keeps a learned calibration across restarts; a failed write only costs the learning.
pub(crate) async fn save_calibration(
    rt: &Runtime,
    model: &str,
    calibration: &context::Calibration,
) {
    if let Err(err) = rt
        .store
        .save_calibration_row(&calibration.row(model), rt.clock.now_ms())
        .await
    {
        tracing::warn!(model, error = %err, "storing the token calibration failed");
    }
}

/// What the user reads when the system prompt, the tools and the latest message alone do not fit.
const TOO_LONG: &str = "⚠️ Your message does not fit the model's context window even with every earlier turn left out: the instructions, the tools and the message alone are too long. Send a shorter message, or /new to start afresh (memories, tasks and notes stay).";

/// Whether a provider refused the request for its length. Providers word it differently:
/// OpenAI "maximum context length", Anthropic "prompt is too long", llama.cpp "exceeds the
/// available context size", vLLM "longer than the maximum model length".
fn is_context_overflow(err: &ProviderError) -> bool {
    if !matches!(
        err.kind,
        ProviderErrorKind::Client {
            status: 400 | 413 | 422
        }
    ) {
        return false;
    }
    let message = err.message.to_lowercase();
    [
        "context length",
        "context_length",
        "context window",
        "context size",
        "prompt is too long",
        "too many tokens",
        "maximum model length",
        "input is too long",
    ]
    .iter()
    .any(|phrase| message.contains(phrase))
}

/// The tool and count when one of `calls` repeats a call this turn already made
/// `[runtime] max_repeated_calls` times with the same arguments.
async fn repeated_call(
    rt: &Runtime,
    turn_id: i64,
    calls: &[crate::provider::ToolCall],
) -> Result<Option<(String, usize)>, StoreError> {
    let limit = rt.config.runtime.max_repeated_calls as usize;
    let earlier = rt.store.tool_call_arguments_of_turn(turn_id).await?;
    let same = |name: &str, arguments: &str| {
        let key = canonical(arguments);
        earlier
            .iter()
            .filter(|(n, a)| n == name && canonical(a) == key)
            .count()
    };
    Ok(calls.iter().find_map(|call| {
        let times = same(&call.name, &call.arguments);
        (times >= limit).then(|| (call.name.clone(), times + 1))
    }))
}

/// Arguments compared as JSON when they are JSON, so spacing and key order do not matter.
fn canonical(arguments: &str) -> String {
    serde_json::from_str::<serde_json::Value>(arguments)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| arguments.to_string())
}

/// Ends a turn whose model keeps repeating a call: the model is told on each call of this
/// answer (so every call keeps its result), the user in the reply.
async fn stop_repeating(
    rt: &Runtime,
    job: &TurnJob,
    records: Vec<crate::store::ToolCallRecord>,
    name: &str,
    times: usize,
) -> Result<Stop, StoreError> {
    tracing::warn!(
        turn = job.turn.id,
        tool = name,
        times,
        "turn stopped: the same tool call again and again"
    );
    for record in records {
        let content = format!(
            "Not run: `{name}` was asked for {times} times in this turn with the same arguments, so the turn was stopped. \
             The result would not change; do not call it again with these arguments. Answer with what you have or ask the user."
        );
        calls::close_unrun(rt, job, &record, ToolCallStatus::Skipped, content).await?;
    }
    rt.metrics.tool_call(name, "repeated");
    let text = format!(
        "⚠️ I stopped: the model called `{name}` {times} times with the same arguments without getting further. Ask again, perhaps in other words."
    );
    Ok(finish(
        TurnStatus::Done,
        text,
        Some(format!("repeated tool call {name}")),
    ))
}

/// `text` cut to at most `max` characters at a natural break (code fences closed), with a note
/// saying so; shorter text is returned as it is. A runaway model answer (megabytes of it) would
/// otherwise become thousands of messages that block the chat for an hour.
pub(crate) fn cap_reply(text: String, max: usize) -> String {
    if text.char_indices().nth(max).is_none() {
        return text;
    }
    let kept = hearth_channel::split::head(&text, max, hearth_channel::Measure::Chars);
    let total = text.chars().count();
    tracing::warn!(chars = total, max, "model answer cut to the reply limit");
    format!(
        "{}\n\n✂️ The answer was cut here: it ran to {total} characters, and replies are limited to {max} (daemon.max_reply_chars).",
        kept.trim_end()
    )
}

pub(super) fn cancelled() -> Stop {
    finish(
        TurnStatus::Cancelled,
        "⏹ Cancelled.".into(),
        Some("cancelled by the user".into()),
    )
}

/// The text of the user's message in this turn, for finding relevant memories.
fn latest_user_text(stored: &[crate::store::StoredMessage], turn_id: i64) -> String {
    stored
        .iter()
        .filter(|m| m.turn_id == Some(turn_id))
        .find_map(|m| match &m.message {
            ChatMessage::User { content } => Some(
                content
                    .iter()
                    .filter_map(|p| match p {
                        crate::provider::ContentPart::Text { text } => Some(text.as_str()),
                        crate::provider::ContentPart::Image { .. } => None,
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

/// The agent's prompt, then what hearth knows about the user, the tools and the time.
async fn system_prompt(
    rt: &Runtime,
    agent: &AgentDef,
    toolbox: &Toolbox,
    user_id: Option<i64>,
    user_text: &str,
) -> String {
    let now = rt.clock.now().with_timezone(&rt.timezone);
    let time = format!(
        "It is {} ({}), timezone {}.",
        now.format("%A, %Y-%m-%d %H:%M"),
        now.format("%:z"),
        rt.timezone.name()
    );
    let about_user = match user_id {
        Some(user) => {
            match crate::tool::memory::prompt_context(&rt.store, user, user_text, rt.clock.now_ms())
                .await
            {
                Ok(context) => context.unwrap_or_default(),
                Err(err) => {
                    tracing::warn!(error = %err, "reading memories for the prompt failed");
                    String::new()
                }
            }
        }
        None => String::new(),
    };
    let tools = if toolbox.tools.is_empty() {
        String::new()
    } else if toolbox.meta {
        format!(
            "You have {} tools in these categories: {}. Find them with search_tools, read get_tool_help when unsure of \
             the parameters, then call use_tool (or batch_use_tool for several independent calls). When a call fails, \
             read the message and fix the call.",
            toolbox.tools.len(),
            categories(toolbox).join(", ")
        )
    } else {
        "Call a tool when it gives a better answer than guessing; after a tool fails, read its message and fix the \
         call or explain the problem. Some tools ask the user to approve them first; if a call is denied, accept it."
            .to_string()
    };
    let sections = [
        Section::new("About the user", about_user),
        Section::new("Tools", tools),
        Section::new("Time", time),
    ];
    compose(
        &agent.system_prompt,
        &sections,
        rt.config.runtime.max_prompt_chars,
    )
}

fn categories(toolbox: &Toolbox) -> Vec<String> {
    let mut groups: Vec<String> = toolbox
        .tools
        .iter()
        .map(|t| t.info().group.clone())
        .collect();
    groups.sort();
    groups.dedup();
    groups
}

/// The short explanation a user gets when the model cannot be reached.
fn provider_error_text(rt: &Runtime, err: &ProviderError) -> String {
    match err.kind {
        ProviderErrorKind::Client {
            status: status @ (401 | 403),
        } => {
            format!(
                "⚠️ The model provider `{}` refused the credentials (HTTP {status}). Check its API key.",
                err.provider
            )
        }
        ProviderErrorKind::Client { status } => {
            format!(
                "⚠️ The model provider `{}` rejected the request (HTTP {status}): {}",
                err.provider, err.message
            )
        }
        ProviderErrorKind::Network if rt.provider_hint.is_some() => {
            rt.provider_hint.clone().unwrap_or_default()
        }
        _ => format!(
            "⚠️ The model provider is not answering right now ({err}). Your message is saved; please try again in a moment."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_replies_are_untouched_and_long_ones_cut_with_a_note() {
        assert_eq!(cap_reply("hello".into(), 10), "hello");
        assert_eq!(cap_reply("0123456789".into(), 10), "0123456789");
        let long = "lorem ipsum ".repeat(1_000);
        let capped = cap_reply(long.clone(), 200);
        let (kept, note) = capped.split_once("\n\n✂️").expect("a note");
        assert!(kept.chars().count() <= 200, "{kept:?}");
        assert!(long.starts_with(kept), "the beginning is kept as it was");
        assert!(
            kept.ends_with("ipsum") || kept.ends_with("lorem"),
            "cut at a word break: {kept:?}"
        );
        assert!(note.contains("12000 characters") && note.contains("limited to 200"));
    }

    #[test]
    fn a_cut_inside_a_code_block_closes_it() {
        let code = (0..500).map(|i| format!("x{i} = {i}")).collect::<Vec<_>>();
        let text = format!("Code:\n\n```python\n{}\n```", code.join("\n"));
        let capped = cap_reply(text, 300);
        let fences = capped.lines().filter(|l| l.starts_with("```")).count();
        assert_eq!(fences, 2, "{capped}");
        assert!(capped.contains("✂️"));
    }
}
