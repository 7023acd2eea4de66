//! The `schedules` tools: cron schedules that run an agent unattended and one-shot reminders.
//!
//! A schedule acts later with nobody watching, so creating, changing and running one is an
//! outward action (it asks first at the default autonomy); a reminder to oneself is a write.
//! People see and change the schedules they made; the owner also sees the config's. Each tool
//! is its argument type ([`TypedTool`]).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::common::user_id;
use super::time::parse_datetime;
use super::typed::{Count, Limit, NonEmpty, text};
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::config::OnConfirmation;
use crate::scheduler::timing::CronExpr;
use crate::scheduler::{Schedule, ScheduleSource, on_confirmation_str, parse_target};
use crate::time::parse_timezone;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<CreateSchedule>(),
        typed::<ListSchedules>(),
        typed::<UpdateSchedule>(),
        typed::<DeleteSchedule>(),
        typed::<RunScheduleNow>(),
        typed::<ScheduleHistory>(),
        typed::<RemindMe>(),
    ]
}

const GROUP: &str = "schedules";
const HISTORY_LIMIT: Limit = Limit::new(10, 50);

// Plain comment: a doc comment would replace the field's description.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Confirm {
    Deny,
    Ask,
    Allow,
}

impl From<Confirm> for OnConfirmation {
    fn from(value: Confirm) -> Self {
        match value {
            Confirm::Deny => OnConfirmation::Deny,
            Confirm::Ask => OnConfirmation::Ask,
            Confirm::Allow => OnConfirmation::Allow,
        }
    }
}

/// Create a recurring schedule: at cron times an agent runs the prompt unattended and the reply
/// goes to a chat.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateSchedule {
    /// A unique short name, e.g. morning-briefing
    name: NonEmpty,
    /// Cron with a seconds field first: second minute hour day-of-month month day-of-week, e.g.
    /// '0 30 7 * * Mon-Fri' (07:30 on weekdays)
    cron: NonEmpty,
    /// IANA timezone, e.g. Europe/Berlin; default: the user's
    timezone: Option<String>,
    /// What the agent is asked each time, e.g. 'Give me my briefing: tasks due today, today's
    /// events'
    prompt: NonEmpty,
    /// The agent that answers; default: the current one
    agent: Option<String>,
    /// Where the reply goes, channel:chat_id (e.g. telegram:123456789); default: this chat
    target: Option<String>,
    /// When a tool wants an Approve while it runs unattended: deny (default), ask (buttons in
    /// the target chat), allow (only the tools in allow_tools)
    on_confirmation: Option<Confirm>,
    /// With on_confirmation=allow: the tools that may run without asking
    #[serde(default)]
    allow_tools: Vec<String>,
}

impl TypedTool for CreateSchedule {
    const NAME: &'static str = "create_schedule";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Outward;
    const TAGS: &'static str = "cron, recurring, briefing, every, daily, weekly, automation";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let name = self.name.0;
        if ctx.store.schedule_by_name(&name).await?.is_some() {
            return Err(ToolError::Failed(format!(
                "a schedule named `{name}` exists already; pick another name or use update_schedule"
            )));
        }
        let cron = cron(&self.cron.0)?;
        let timezone = timezone(ctx, self.timezone)?;
        let to = match target(ctx, user, self.target).await? {
            Some(target) => target,
            None => current_chat(ctx).await?,
        };
        let agent_id = self.agent.unwrap_or_else(|| ctx.agent_id.clone());
        let agent = agent(ctx, &agent_id).await?;
        let now = ctx.clock.now_ms();
        let mut schedule = Schedule {
            cron: Some(cron),
            on_confirmation: self.on_confirmation.map(Into::into).unwrap_or_default(),
            allow_tools: self.allow_tools,
            created_by: Some(user),
            ..Schedule::new(name, timezone, agent, self.prompt.0, to, now)
        };
        schedule.next_fire_at = schedule.next_fire_after(now).map_err(invalid)?;
        schedule.id = ctx.store.insert_schedule(&schedule, now).await?;
        Ok(json!({"created": describe(&schedule)}))
    }
}

/// List schedules and reminders with their next fire time in the schedule's local time.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListSchedules {
    /// Also fired reminders and switched-off schedules
    include_disabled: Option<bool>,
}

impl TypedTool for ListSchedules {
    const NAME: &'static str = "list_schedules";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "cron, reminders, briefing, show";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let owner = crate::store::user::is_owner(&ctx.store, user).await?;
        let include_disabled = self.include_disabled.unwrap_or(false);
        let schedules: Vec<Value> = ctx
            .store
            .schedules()
            .await?
            .iter()
            .filter(|s| owner || s.created_by == Some(user))
            .filter(|s| include_disabled || s.enabled)
            .map(describe)
            .collect();
        Ok(json!({"count": schedules.len(), "schedules": schedules}))
    }
}

/// Change a schedule: any of cron, timezone, prompt, agent, target, on_confirmation,
/// allow_tools, enabled, new_name.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateSchedule {
    /// The schedule's name
    name: NonEmpty,
    new_name: Option<String>,
    /// Cron with a seconds field first: second minute hour day-of-month month day-of-week, e.g.
    /// '0 30 7 * * Mon-Fri' (07:30 on weekdays)
    cron: Option<String>,
    /// IANA timezone, e.g. Europe/Berlin; default: the user's
    timezone: Option<String>,
    /// What the agent is asked each time, e.g. 'Give me my briefing: tasks due today, today's
    /// events'
    prompt: Option<String>,
    /// The agent that answers; default: the current one
    agent: Option<String>,
    /// Where the reply goes, channel:chat_id (e.g. telegram:123456789); default: this chat
    target: Option<String>,
    /// When a tool wants an Approve while it runs unattended: deny (default), ask (buttons in
    /// the target chat), allow (only the tools in allow_tools)
    on_confirmation: Option<Confirm>,
    /// With on_confirmation=allow: the tools that may run without asking
    allow_tools: Option<Vec<String>>,
    /// Switch the schedule on or off
    enabled: Option<bool>,
}

impl TypedTool for UpdateSchedule {
    const NAME: &'static str = "update_schedule";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Outward;
    const TAGS: &'static str = "cron, edit, pause, resume, reschedule";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let mut schedule = own_schedule(ctx, &self.name.0, true).await?;
        let mut timing_changed = false;
        if let Some(new_name) = text(self.new_name)
            && new_name != schedule.name
        {
            if ctx.store.schedule_by_name(&new_name).await?.is_some() {
                return Err(ToolError::Failed(format!(
                    "a schedule named `{new_name}` exists already"
                )));
            }
            schedule.name = new_name;
        }
        if let Some(text) = text(self.cron) {
            if schedule.cron.is_none() {
                return Err(invalid(
                    "a reminder has no cron; delete it and create a schedule instead".into(),
                ));
            }
            schedule.cron = Some(cron(&text)?);
            timing_changed = true;
        }
        if let Some(zone) = text(self.timezone) {
            schedule.timezone = timezone(ctx, Some(zone))?;
            timing_changed = true;
        }
        if let Some(prompt) = text(self.prompt) {
            schedule.prompt = prompt;
        }
        if let Some(id) = text(self.agent) {
            schedule.agent = agent(ctx, &id).await?;
        }
        if let Some((channel, chat)) = target(ctx, user, self.target).await? {
            schedule.channel = channel;
            schedule.chat = chat;
        }
        if let Some(value) = self.on_confirmation {
            schedule.on_confirmation = value.into();
        }
        if let Some(tools) = self.allow_tools {
            schedule.allow_tools = tools;
        }
        if let Some(enabled) = self.enabled
            && enabled != schedule.enabled
        {
            schedule.enabled = enabled;
            timing_changed = true;
        }
        let now = ctx.clock.now_ms();
        if timing_changed {
            schedule.next_fire_at = schedule.next_fire_after(now).map_err(invalid)?;
        }
        ctx.store.save_schedule(&schedule, now).await?;
        Ok(json!({"updated": describe(&schedule)}))
    }
}

/// Delete a schedule or reminder and its run history.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteSchedule {
    /// The schedule's name
    name: NonEmpty,
}

impl TypedTool for DeleteSchedule {
    const NAME: &'static str = "delete_schedule";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Destructive;
    const TAGS: &'static str = "cron, remove, cancel reminder";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let schedule = own_schedule(ctx, &self.name.0, true).await?;
        ctx.store.delete_schedule(schedule.id).await?;
        Ok(json!({"deleted": schedule.name}))
    }
}

/// Run a schedule once now (within a second), as if its time had come.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunScheduleNow {
    /// The schedule's name
    name: NonEmpty,
}

impl TypedTool for RunScheduleNow {
    const NAME: &'static str = "run_schedule_now";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Outward;
    const TAGS: &'static str = "cron, trigger, test";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let schedule = own_schedule(ctx, &self.name.0, false).await?;
        if !schedule.enabled {
            return Err(ToolError::Failed(format!(
                "`{}` is disabled (or a reminder that already fired); enable it with update_schedule first",
                schedule.name
            )));
        }
        ctx.store
            .make_schedule_due(schedule.id, ctx.clock.now_ms())
            .await?;
        Ok(
            json!({"name": schedule.name, "status": "runs within a second; see schedule_history for the outcome"}),
        )
    }
}

/// A schedule's runs, newest first: when each was due, started and finished, the outcome and
/// any error.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScheduleHistory {
    /// The schedule's name
    name: NonEmpty,
    /// Default 10
    limit: Option<Count>,
}

impl TypedTool for ScheduleHistory {
    const NAME: &'static str = "schedule_history";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "cron, runs, log, failed, missed";
    const LIMIT: Option<Limit> = Some(HISTORY_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let schedule = own_schedule(ctx, &self.name.0, false).await?;
        let limit = usize::try_from(HISTORY_LIMIT.of(self.limit)).unwrap_or(10);
        let runs = ctx.store.schedule_runs(schedule.id, limit).await?;
        let local = |ms: Option<i64>| ms.map(|at| schedule.local_time(at));
        let runs: Vec<Value> = runs
            .iter()
            .map(|run| {
                json!({
                    "scheduled_for": schedule.local_time(run.scheduled_for),
                    "started": local(run.started_at),
                    "finished": local(run.finished_at),
                    "outcome": run.status.as_str(),
                    "error": run.error,
                })
            })
            .collect();
        Ok(json!({"name": schedule.name, "runs": runs}))
    }
}

/// Remind the user once, in this chat: at a time ('2026-11-22 09:00', 'tomorrow') or in a
/// while ('20 minutes', '2 hours').
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RemindMe {
    /// What to remind of, e.g. 'call mum'
    message: NonEmpty,
    /// When, in the user's timezone: YYYY-MM-DD HH:MM, RFC 3339, tomorrow
    at: Option<String>,
    /// How long from now: '20 minutes', '2 hours', '3 days'
    #[serde(rename = "in")]
    after: Option<String>,
}

impl TypedTool for RemindMe {
    const NAME: &'static str = "remind_me";
    const GROUP: &'static str = GROUP;
    // A reminder runs an agent later with nobody watching, so it asks like any schedule.
    const RISK: Risk = Risk::Outward;
    const TAGS: &'static str = "reminder, remind, alarm, later, timer";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let message = self.message.0;
        let now = ctx.clock.now();
        let at = match (text(self.at), text(self.after)) {
            (Some(at), None) => parse_datetime(&at, ctx.timezone, now)
                .map_err(|msg| invalid(format!("`at`: {msg}")))?,
            (None, Some(span)) => {
                let span = span.trim_start_matches("in ").to_string();
                parse_datetime(&format!("in {span}"), ctx.timezone, now).map_err(|_| {
                    invalid(format!(
                        "`in`: cannot read {span:?}; use e.g. '20 minutes', '2 hours', '3 days'"
                    ))
                })?
            }
            _ => {
                return Err(invalid(
                    "give exactly one of `at` (e.g. '2026-11-22 09:00') or `in` (e.g. '20 minutes')"
                        .into(),
                ));
            }
        };
        if at <= now {
            return Err(invalid(format!(
                "{} is in the past; reminders are for later",
                at.with_timezone(&ctx.timezone).format("%Y-%m-%d %H:%M")
            )));
        }
        let chat = current_chat(ctx).await?;
        let at_ms = at.timestamp_millis();
        let base = format!(
            "reminder-{}",
            at.with_timezone(&ctx.timezone).format("%Y%m%d-%H%M")
        );
        let mut name = base.clone();
        let mut n = 1;
        while ctx.store.schedule_by_name(&name).await?.is_some() {
            n += 1;
            name = format!("{base}-{n}");
        }
        let prompt = format!(
            "Reminder for the user: {message}. Deliver it as a short reminder; do nothing else."
        );
        let (timezone, agent) = (ctx.timezone.name().to_string(), ctx.agent_id.clone());
        let schedule = Schedule {
            // A reminder only talks; anything that asks is refused.
            on_confirmation: OnConfirmation::Deny,
            catch_up_minutes: 60 * 24,
            one_shot_at: Some(at_ms),
            created_by: Some(user),
            next_fire_at: Some(at_ms),
            ..Schedule::new(name, timezone, agent, prompt, chat, now.timestamp_millis())
        };
        let local = schedule.local_time(at_ms);
        ctx.store
            .insert_schedule(&schedule, now.timestamp_millis())
            .await?;
        Ok(json!({"reminder": message, "at": local, "name": schedule.name}))
    }
}

fn invalid(message: String) -> ToolError {
    ToolError::InvalidArguments(message)
}

/// The named schedule, if the caller may see it: their own, or any for the owner. With
/// `change`, config schedules are refused: the next start would undo the change.
async fn own_schedule(ctx: &ToolContext, name: &str, change: bool) -> Result<Schedule, ToolError> {
    let user = user_id(ctx)?;
    let not_found = || {
        ToolError::Failed(format!(
            "no schedule named `{name}`; list_schedules shows them"
        ))
    };
    let schedule = ctx
        .store
        .schedule_by_name(name)
        .await?
        .ok_or_else(not_found)?;
    if schedule.created_by != Some(user) && !crate::store::user::is_owner(&ctx.store, user).await? {
        return Err(not_found());
    }
    if change && schedule.source == ScheduleSource::Config {
        return Err(ToolError::Failed(format!(
            "`{name}` comes from the configuration file; change it there"
        )));
    }
    Ok(schedule)
}

/// The current chat as a target (channel and chat, thread included).
async fn current_chat(ctx: &ToolContext) -> Result<(String, hearth_channel::ChatRef), ToolError> {
    let conversation = ctx
        .store
        .conversation_by_id(ctx.conversation_id)
        .await?
        .ok_or_else(|| {
            invalid(
                "there is no current chat to send to; give a `target` like telegram:123456789"
                    .into(),
            )
        })?;
    Ok((conversation.channel, conversation.chat))
}

/// A target from the arguments (checked), or none for the current chat. Only the owner may
/// send a schedule's replies to a chat other than the one they are in.
async fn target(
    ctx: &ToolContext,
    user: i64,
    target: Option<String>,
) -> Result<Option<(String, hearth_channel::ChatRef)>, ToolError> {
    let Some(text) = text(target) else {
        return Ok(None);
    };
    let (channel, chat) = parse_target(&text).map_err(invalid)?;
    let current = current_chat(ctx).await.ok();
    let same = current
        .as_ref()
        .is_some_and(|(c, ch)| *c == channel && ch.chat_id == chat.chat_id);
    if same {
        return Ok(current);
    }
    if !crate::store::user::is_owner(&ctx.store, user).await? {
        return Err(ToolError::Failed(
            "only the owner can send a schedule's replies to another chat; leave `target` out to use this one".into(),
        ));
    }
    Ok(Some((channel, chat)))
}

/// An agent id that exists (when the agents are known to the database).
async fn agent(ctx: &ToolContext, id: &str) -> Result<String, ToolError> {
    let id = id.trim();
    let known = ctx.store.active_agent_ids().await?;
    if !known.is_empty() && !known.iter().any(|k| k == id) {
        return Err(invalid(format!(
            "there is no agent `{id}`; agents: {}",
            known.join(", ")
        )));
    }
    let well_formed = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if known.is_empty() && !well_formed {
        return Err(invalid(format!("`{id}` is not an agent id")));
    }
    Ok(id.to_string())
}

/// The IANA name of `zone` (checked), or the user's timezone when none is given.
fn timezone(ctx: &ToolContext, zone: Option<String>) -> Result<String, ToolError> {
    match text(zone) {
        Some(name) => parse_timezone(&name)
            .map(|tz| tz.name().to_string())
            .map_err(invalid),
        None => Ok(ctx.timezone.name().to_string()),
    }
}

fn cron(text: &str) -> Result<String, ToolError> {
    CronExpr::parse(text).map_err(invalid)?;
    Ok(text.trim().to_string())
}

/// A schedule as the model sees it.
fn describe(schedule: &Schedule) -> Value {
    json!({
        "name": schedule.name,
        "when": match (&schedule.cron, schedule.one_shot_at) {
            (Some(cron), _) => cron.clone(),
            (None, Some(at)) => format!("once at {}", schedule.local_time(at)),
            (None, None) => "never".into(),
        },
        "timezone": schedule.timezone,
        "next_fire": if schedule.enabled { schedule.next_fire_at.map(|at| schedule.local_time(at)) } else { None },
        "enabled": schedule.enabled,
        "agent": schedule.agent,
        "prompt": schedule.prompt,
        "target": schedule.target(),
        "on_confirmation": on_confirmation_str(schedule.on_confirmation),
        "allow_tools": schedule.allow_tools,
        "source": schedule.source.as_str(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::test_context;

    /// The tools by what they do, so each test reads as the operation it calls.
    #[derive(Clone, Copy)]
    enum Op {
        Create,
        List,
        Update,
        Delete,
        RunNow,
        History,
        Remind,
    }

    fn tool(op: Op) -> Arc<dyn Tool> {
        let name = match op {
            Op::Create => "create_schedule",
            Op::List => "list_schedules",
            Op::Update => "update_schedule",
            Op::Delete => "delete_schedule",
            Op::RunNow => "run_schedule_now",
            Op::History => "schedule_history",
            Op::Remind => "remind_me",
        };
        tools()
            .into_iter()
            .find(|t| t.info().name == name)
            .expect("tool exists")
    }

    async fn call(ctx: &ToolContext, op: Op, arguments: Value) -> Result<Value, ToolError> {
        let text = tool(op).call(ctx, arguments).await?;
        Ok(serde_json::from_str(&text).expect("tools answer JSON"))
    }

    /// A context whose conversation is a real chat `memory:chat-1`.
    async fn chat_context() -> (ToolContext, tempfile::TempDir) {
        let (mut ctx, dir) = test_context().await;
        let conversation = ctx
            .store
            .conversation("memory", &hearth_channel::ChatRef::new("chat-1"), 0)
            .await
            .expect("conversation");
        ctx.conversation_id = conversation.id;
        ctx.timezone = "Europe/Berlin".parse().expect("tz");
        (ctx, dir)
    }

    #[test]
    fn risks_follow_what_the_tools_do() {
        let risk = |op| tool(op).info().risk;
        assert_eq!(risk(Op::Create), Risk::Outward);
        assert_eq!(risk(Op::Update), Risk::Outward);
        assert_eq!(risk(Op::RunNow), Risk::Outward);
        assert_eq!(risk(Op::Delete), Risk::Destructive);
        assert_eq!(
            risk(Op::Remind),
            Risk::Outward,
            "a reminder acts later, unattended"
        );
        assert_eq!(risk(Op::List), Risk::Safe);
        assert_eq!(risk(Op::History), Risk::Safe);
        assert_eq!(tools().len(), 7);
    }

    #[tokio::test]
    async fn create_list_update_run_and_delete_a_schedule() {
        let (ctx, _dir) = chat_context().await;
        let created = call(
            &ctx,
            Op::Create,
            json!({"name": "briefing", "cron": "0 30 7 * * Mon-Fri", "prompt": "brief me"}),
        )
        .await
        .expect("created");
        assert_eq!(created["created"]["target"], "memory:chat-1");
        assert_eq!(created["created"]["timezone"], "Europe/Berlin");
        assert_eq!(created["created"]["agent"], "test");
        assert!(
            created["created"]["next_fire"]
                .as_str()
                .is_some_and(|t| t.contains("07:30")),
            "{created}"
        );

        let listed = call(&ctx, Op::List, json!({})).await.expect("list");
        assert_eq!(listed["count"], 1);

        let updated = call(
            &ctx,
            Op::Update,
            json!({"name": "briefing", "cron": "0 0 8 * * *", "on_confirmation": "allow", "allow_tools": ["list_tasks"]}),
        )
        .await
        .expect("updated");
        assert!(
            updated["updated"]["next_fire"]
                .as_str()
                .is_some_and(|t| t.contains("08:00")),
            "{updated}"
        );
        assert_eq!(updated["updated"]["allow_tools"], json!(["list_tasks"]));

        call(&ctx, Op::RunNow, json!({"name": "briefing"}))
            .await
            .expect("run now");
        let stored = ctx
            .store
            .schedule_by_name("briefing")
            .await
            .expect("db")
            .expect("exists");
        assert!(stored.next_fire_at <= Some(ctx.clock.now_ms()), "due now");

        let history = call(&ctx, Op::History, json!({"name": "briefing"}))
            .await
            .expect("history");
        assert_eq!(history["runs"], json!([]));

        call(&ctx, Op::Delete, json!({"name": "briefing"}))
            .await
            .expect("deleted");
        let listed = call(&ctx, Op::List, json!({})).await.expect("list");
        assert_eq!(listed["count"], 0);
    }

    #[tokio::test]
    async fn bad_input_gets_a_clear_message() {
        let (ctx, _dir) = chat_context().await;
        let err = |args: Value| async {
            call(&ctx, Op::Create, args)
                .await
                .expect_err("refused")
                .to_string()
        };
        let cron = err(json!({"name": "a", "cron": "30 7 * * *", "prompt": "p"})).await;
        assert!(cron.contains("try `0 30 7 * * *`"), "{cron}");
        let tz = err(
            json!({"name": "a", "cron": "0 0 8 * * *", "prompt": "p", "timezone": "Mars/Base"}),
        )
        .await;
        assert!(tz.contains("unknown timezone"), "{tz}");
        let target =
            err(json!({"name": "a", "cron": "0 0 8 * * *", "prompt": "p", "target": "telegram"}))
                .await;
        assert!(target.contains("channel:chat_id"), "{target}");
        let agent =
            err(json!({"name": "a", "cron": "0 0 8 * * *", "prompt": "p", "agent": "no such"}))
                .await;
        assert!(agent.contains("not an agent id"), "{agent}");

        call(
            &ctx,
            Op::Create,
            json!({"name": "a", "cron": "0 0 8 * * *", "prompt": "p"}),
        )
        .await
        .expect("first");
        let twice = err(json!({"name": "a", "cron": "0 0 8 * * *", "prompt": "p"})).await;
        assert!(twice.contains("exists already"), "{twice}");
        let missing = call(&ctx, Op::Delete, json!({"name": "nope"}))
            .await
            .expect_err("missing")
            .to_string();
        assert!(missing.contains("no schedule named `nope`"), "{missing}");

        let when = call(&ctx, Op::Remind, json!({"message": "x"}))
            .await
            .expect_err("no time")
            .to_string();
        assert!(when.contains("exactly one of `at`"), "{when}");
        let past = call(
            &ctx,
            Op::Remind,
            json!({"message": "x", "at": "2001-01-01 10:00"}),
        )
        .await
        .expect_err("past")
        .to_string();
        assert!(past.contains("in the past"), "{past}");
    }

    #[tokio::test]
    async fn a_reminder_is_a_one_shot_schedule_for_this_chat() {
        let (ctx, _dir) = chat_context().await;
        let now = ctx.clock.now_ms();
        let made = call(
            &ctx,
            Op::Remind,
            json!({"message": "call mum", "in": "20 minutes"}),
        )
        .await
        .expect("reminder");
        let name = made["name"].as_str().expect("name");
        let stored = ctx
            .store
            .schedule_by_name(name)
            .await
            .expect("db")
            .expect("stored");
        assert!(stored.cron.is_none());
        let at = stored.one_shot_at.expect("one-shot");
        assert!((at - now - 20 * 60_000).abs() < 5_000, "{at} vs {now}");
        assert_eq!(stored.next_fire_at, Some(at));
        assert!(stored.prompt.contains("call mum"));
        assert_eq!(stored.target(), "memory:chat-1");
        // A second reminder for the same minute gets its own name.
        let again = call(
            &ctx,
            Op::Remind,
            json!({"message": "call dad", "in": "20 minutes"}),
        )
        .await
        .expect("second");
        assert_ne!(again["name"], made["name"]);
    }

    #[tokio::test]
    async fn others_do_not_see_or_change_your_schedules_and_config_ones_stay_put() {
        let (ctx, _dir) = chat_context().await;
        call(
            &ctx,
            Op::Create,
            json!({"name": "mine", "cron": "0 0 8 * * *", "prompt": "p"}),
        )
        .await
        .expect("created");
        let theirs = crate::tool::other_user(&ctx).await;
        assert_eq!(
            call(&theirs, Op::List, json!({})).await.expect("list")["count"],
            0
        );
        assert!(
            call(&theirs, Op::Delete, json!({"name": "mine"}))
                .await
                .is_err()
        );
        let elsewhere = call(
            &theirs,
            Op::Create,
            json!({"name": "x", "cron": "0 0 8 * * *", "prompt": "p", "target": "telegram:42"}),
        )
        .await
        .expect_err("not the owner")
        .to_string();
        assert!(elsewhere.contains("only the owner"), "{elsewhere}");

        let mut config = ctx
            .store
            .schedule_by_name("mine")
            .await
            .expect("db")
            .expect("row");
        config.source = ScheduleSource::Config;
        ctx.store.save_schedule(&config, 0).await.expect("save");
        let err = call(&ctx, Op::Delete, json!({"name": "mine"}))
            .await
            .expect_err("config")
            .to_string();
        assert!(err.contains("configuration file"), "{err}");
    }
}
