//! The `schedules` tools: cron schedules that run an agent unattended and one-shot reminders.
//!
//! A schedule acts later with nobody watching, so creating, changing and running one is an
//! outward action (it asks first at the default autonomy); a reminder to oneself is a write.
//! People see and change the schedules they made; the owner also sees the config's.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::common::{db, opt_text, user_id};
use super::time::parse_datetime;
use super::{Args, Risk, Tool, ToolContext, ToolError, ToolInfo, list_limit};
use crate::config::OnConfirmation;
use crate::scheduler::timing::{CronExpr, parse_timezone};
use crate::scheduler::{Schedule, on_confirmation_from, on_confirmation_str, parse_target};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    [
        Op::Create,
        Op::List,
        Op::Update,
        Op::Delete,
        Op::RunNow,
        Op::History,
        Op::Remind,
    ]
    .into_iter()
    .map(|op| Arc::new(ScheduleTool::new(op)) as Arc<dyn Tool>)
    .collect()
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Create,
    List,
    Update,
    Delete,
    RunNow,
    History,
    Remind,
}

struct ScheduleTool {
    info: ToolInfo,
    op: Op,
}

const GROUP: &str = "schedules";

fn name_param() -> Value {
    json!({"type": "string", "description": "The schedule's name"})
}

/// The fields create_schedule and update_schedule share.
fn schedule_properties() -> serde_json::Map<String, Value> {
    let mut p = serde_json::Map::new();
    p.insert("cron".into(), json!({"type": "string", "description": "Cron with a seconds field first: second minute hour day-of-month month day-of-week, e.g. '0 30 7 * * Mon-Fri' (07:30 on weekdays)"}));
    p.insert("timezone".into(), json!({"type": "string", "description": "IANA timezone, e.g. Europe/Berlin; default: the user's"}));
    p.insert("prompt".into(), json!({"type": "string", "description": "What the agent is asked each time, e.g. 'Give me my briefing: tasks due today, today's events'"}));
    p.insert("agent".into(), json!({"type": "string", "description": "The agent that answers; default: the current one"}));
    p.insert("target".into(), json!({"type": "string", "description": "Where the reply goes, channel:chat_id (e.g. telegram:123456789); default: this chat"}));
    p.insert("on_confirmation".into(), json!({"type": "string", "enum": ["deny", "ask", "allow"], "description": "When a tool wants an Approve while it runs unattended: deny (default), ask (buttons in the target chat), allow (only the tools in allow_tools)"}));
    p.insert("allow_tools".into(), json!({"type": "array", "items": {"type": "string"}, "description": "With on_confirmation=allow: the tools that may run without asking"}));
    p
}

impl ScheduleTool {
    fn new(op: Op) -> Self {
        let info = match op {
            Op::Create => {
                let mut properties = schedule_properties();
                properties.insert("name".into(), json!({"type": "string", "description": "A unique short name, e.g. morning-briefing"}));
                ToolInfo::new(
                    "create_schedule",
                    GROUP,
                    "Create a recurring schedule: at cron times an agent runs the prompt unattended and the reply goes to a chat.",
                    json!({"type": "object", "properties": properties, "required": ["name", "cron", "prompt"], "additionalProperties": false}),
                )
                .risk(Risk::Outward)
                .tags(&["cron", "recurring", "briefing", "every", "daily", "weekly", "automation"])
            }
            Op::List => ToolInfo::new(
                "list_schedules",
                GROUP,
                "List schedules and reminders with their next fire time in the schedule's local time.",
                json!({"type": "object", "properties": {"include_disabled": {"type": "boolean", "description": "Also fired reminders and switched-off schedules"}}, "additionalProperties": false}),
            )
            .tags(&["cron", "reminders", "briefing", "show"]),
            Op::Update => {
                let mut properties = schedule_properties();
                properties.insert("name".into(), name_param());
                properties.insert("new_name".into(), json!({"type": "string"}));
                properties.insert("enabled".into(), json!({"type": "boolean", "description": "Switch the schedule on or off"}));
                ToolInfo::new(
                    "update_schedule",
                    GROUP,
                    "Change a schedule: any of cron, timezone, prompt, agent, target, on_confirmation, allow_tools, enabled, new_name.",
                    json!({"type": "object", "properties": properties, "required": ["name"], "additionalProperties": false}),
                )
                .risk(Risk::Outward)
                .tags(&["cron", "edit", "pause", "resume", "reschedule"])
            }
            Op::Delete => ToolInfo::new(
                "delete_schedule",
                GROUP,
                "Delete a schedule or reminder and its run history.",
                json!({"type": "object", "properties": {"name": name_param()}, "required": ["name"], "additionalProperties": false}),
            )
            .risk(Risk::Destructive)
            .tags(&["cron", "remove", "cancel reminder"]),
            Op::RunNow => ToolInfo::new(
                "run_schedule_now",
                GROUP,
                "Run a schedule once now (within a second), as if its time had come.",
                json!({"type": "object", "properties": {"name": name_param()}, "required": ["name"], "additionalProperties": false}),
            )
            .risk(Risk::Outward)
            .tags(&["cron", "trigger", "test"]),
            Op::History => ToolInfo::new(
                "schedule_history",
                GROUP,
                "A schedule's runs, newest first: when each was due, started and finished, the outcome and any error.",
                json!({"type": "object", "properties": {"name": name_param(), "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 10"}}, "required": ["name"], "additionalProperties": false}),
            )
            .limit("limit", 10, 50)
            .tags(&["cron", "runs", "log", "failed", "missed"]),
            Op::Remind => ToolInfo::new(
                "remind_me",
                GROUP,
                "Remind the user once, in this chat: at a time ('2026-11-22 09:00', 'tomorrow') or in a while ('20 minutes', '2 hours').",
                json!({"type": "object", "properties": {
                    "message": {"type": "string", "description": "What to remind of, e.g. 'call mum'"},
                    "at": {"type": "string", "description": "When, in the user's timezone: YYYY-MM-DD HH:MM, RFC 3339, tomorrow"},
                    "in": {"type": "string", "description": "How long from now: '20 minutes', '2 hours', '3 days'"}
                }, "required": ["message"], "additionalProperties": false}),
            )
            // A reminder runs an agent later with nobody watching, so it asks like any schedule.
            .risk(Risk::Outward)
            .tags(&["reminder", "remind", "alarm", "later", "timer"]),
        };
        Self { info, op }
    }
}

#[async_trait]
impl Tool for ScheduleTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let result = match self.op {
            Op::Create => create(ctx, &arguments).await?,
            Op::List => list(ctx, &arguments).await?,
            Op::Update => update(ctx, &arguments).await?,
            Op::Delete => {
                let schedule = own_schedule(ctx, &arguments, true).await?;
                ctx.store
                    .delete_schedule(schedule.id)
                    .await
                    .map_err(store_err)?;
                json!({"deleted": schedule.name})
            }
            Op::RunNow => {
                let schedule = own_schedule(ctx, &arguments, false).await?;
                if !schedule.enabled {
                    return Err(ToolError::Failed(format!(
                        "`{}` is disabled (or a reminder that already fired); enable it with update_schedule first",
                        schedule.name
                    )));
                }
                let now = ctx.clock.now_ms();
                ctx.store
                    .make_schedule_due(schedule.id, now)
                    .await
                    .map_err(store_err)?;
                json!({"name": schedule.name, "status": "runs within a second; see schedule_history for the outcome"})
            }
            Op::History => {
                let schedule = own_schedule(ctx, &arguments, false).await?;
                let limit = usize::try_from(list_limit(&self.info, &arguments)).unwrap_or(10);
                let runs = ctx
                    .store
                    .schedule_runs(schedule.id, limit)
                    .await
                    .map_err(store_err)?;
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
                json!({"name": schedule.name, "runs": runs})
            }
            Op::Remind => remind(ctx, &arguments).await?,
        };
        Ok(result.to_string())
    }
}

fn store_err(err: crate::store::StoreError) -> ToolError {
    ToolError::Failed(format!("database error: {err}"))
}

fn invalid(message: String) -> ToolError {
    ToolError::InvalidArguments(message)
}

async fn is_owner(ctx: &ToolContext, user: i64) -> Result<bool, ToolError> {
    let owner: Option<i64> = sqlx::query_scalar("SELECT is_owner FROM users WHERE id = $1")
        .bind(user)
        .fetch_optional(ctx.store.pool())
        .await
        .map_err(db)?;
    Ok(owner.unwrap_or(0) != 0)
}

/// The named schedule, if the caller may see it: their own, or any for the owner. With
/// `change`, config schedules are refused: the next start would undo the change.
async fn own_schedule(
    ctx: &ToolContext,
    arguments: &Value,
    change: bool,
) -> Result<Schedule, ToolError> {
    let user = user_id(ctx)?;
    let name = Args::new(arguments).str("name")?.trim().to_string();
    let not_found = || {
        ToolError::Failed(format!(
            "no schedule named `{name}`; list_schedules shows them"
        ))
    };
    let schedule = ctx
        .store
        .schedule_by_name(&name)
        .await
        .map_err(store_err)?
        .ok_or_else(not_found)?;
    if schedule.created_by != Some(user) && !is_owner(ctx, user).await? {
        return Err(not_found());
    }
    if change && schedule.source == "config" {
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
        .await
        .map_err(store_err)?
        .ok_or_else(|| {
            invalid(
                "there is no current chat to send to; give a `target` like telegram:123456789"
                    .into(),
            )
        })?;
    Ok((conversation.channel, conversation.chat))
}

/// A target from the arguments (checked), or the current chat. Only the owner may send a
/// schedule's replies to a chat other than the one they are in.
async fn target(
    ctx: &ToolContext,
    user: i64,
    arguments: &Value,
) -> Result<Option<(String, hearth_channel::ChatRef)>, ToolError> {
    let Some(text) = opt_text(arguments, "target") else {
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
    if !is_owner(ctx, user).await? {
        return Err(ToolError::Failed(
            "only the owner can send a schedule's replies to another chat; leave `target` out to use this one".into(),
        ));
    }
    Ok(Some((channel, chat)))
}

/// An agent id that exists (when the agents are known to the database).
async fn agent(ctx: &ToolContext, id: &str) -> Result<String, ToolError> {
    let id = id.trim();
    let known = ctx.store.active_agent_ids().await.map_err(store_err)?;
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

fn on_confirmation(arguments: &Value) -> Result<Option<OnConfirmation>, ToolError> {
    match Args::new(arguments).opt_str("on_confirmation") {
        None => Ok(None),
        Some(text) => on_confirmation_from(text).map(Some).ok_or_else(|| {
            invalid(format!(
                "on_confirmation {text:?} is not one of deny, ask, allow"
            ))
        }),
    }
}

fn timezone(ctx: &ToolContext, arguments: &Value) -> Result<String, ToolError> {
    match opt_text(arguments, "timezone") {
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
        "source": schedule.source,
    })
}

async fn create(ctx: &ToolContext, arguments: &Value) -> Result<Value, ToolError> {
    let user = user_id(ctx)?;
    let args = Args::new(arguments);
    let name = args.str("name")?.trim().to_string();
    if ctx
        .store
        .schedule_by_name(&name)
        .await
        .map_err(store_err)?
        .is_some()
    {
        return Err(ToolError::Failed(format!(
            "a schedule named `{name}` exists already; pick another name or use update_schedule"
        )));
    }
    let cron = cron(args.str("cron")?)?;
    let timezone = timezone(ctx, arguments)?;
    let (channel, chat) = match target(ctx, user, arguments).await? {
        Some(target) => target,
        None => current_chat(ctx).await?,
    };
    let agent = agent(ctx, args.opt_str("agent").unwrap_or(&ctx.agent_id)).await?;
    let now = ctx.clock.now_ms();
    let mut schedule = Schedule {
        id: 0,
        name,
        cron: Some(cron),
        timezone,
        agent,
        prompt: args.str("prompt")?.trim().to_string(),
        channel,
        chat,
        on_confirmation: on_confirmation(arguments)?.unwrap_or_default(),
        allow_tools: args.strings("allow_tools"),
        catch_up_minutes: 60,
        enabled: true,
        paused: false,
        source: "chat".into(),
        one_shot_at: None,
        created_by: Some(user),
        last_fire_at: None,
        next_fire_at: None,
        created_at: now,
        updated_at: now,
    };
    schedule.next_fire_at = schedule.next_fire_after(now).map_err(invalid)?;
    schedule.id = ctx
        .store
        .insert_schedule(&schedule, now)
        .await
        .map_err(store_err)?;
    Ok(json!({"created": describe(&schedule)}))
}

async fn list(ctx: &ToolContext, arguments: &Value) -> Result<Value, ToolError> {
    let user = user_id(ctx)?;
    let owner = is_owner(ctx, user).await?;
    let include_disabled = Args::new(arguments)
        .opt_bool("include_disabled")
        .unwrap_or(false);
    let schedules: Vec<Value> = ctx
        .store
        .schedules()
        .await
        .map_err(store_err)?
        .iter()
        .filter(|s| owner || s.created_by == Some(user))
        .filter(|s| include_disabled || s.enabled)
        .map(describe)
        .collect();
    Ok(json!({"count": schedules.len(), "schedules": schedules}))
}

async fn update(ctx: &ToolContext, arguments: &Value) -> Result<Value, ToolError> {
    let user = user_id(ctx)?;
    let mut schedule = own_schedule(ctx, arguments, true).await?;
    let args = Args::new(arguments);
    let mut timing_changed = false;
    if let Some(new_name) = opt_text(arguments, "new_name")
        && new_name != schedule.name
    {
        if ctx
            .store
            .schedule_by_name(&new_name)
            .await
            .map_err(store_err)?
            .is_some()
        {
            return Err(ToolError::Failed(format!(
                "a schedule named `{new_name}` exists already"
            )));
        }
        schedule.name = new_name;
    }
    if let Some(text) = opt_text(arguments, "cron") {
        if schedule.cron.is_none() {
            return Err(invalid(
                "a reminder has no cron; delete it and create a schedule instead".into(),
            ));
        }
        schedule.cron = Some(cron(&text)?);
        timing_changed = true;
    }
    if opt_text(arguments, "timezone").is_some() {
        schedule.timezone = timezone(ctx, arguments)?;
        timing_changed = true;
    }
    if let Some(prompt) = opt_text(arguments, "prompt") {
        schedule.prompt = prompt;
    }
    if let Some(id) = opt_text(arguments, "agent") {
        schedule.agent = agent(ctx, &id).await?;
    }
    if let Some((channel, chat)) = target(ctx, user, arguments).await? {
        schedule.channel = channel;
        schedule.chat = chat;
    }
    if let Some(value) = on_confirmation(arguments)? {
        schedule.on_confirmation = value;
    }
    if arguments.get("allow_tools").is_some() {
        schedule.allow_tools = args.strings("allow_tools");
    }
    if let Some(enabled) = args.opt_bool("enabled")
        && enabled != schedule.enabled
    {
        schedule.enabled = enabled;
        timing_changed = true;
    }
    let now = ctx.clock.now_ms();
    if timing_changed {
        schedule.next_fire_at = schedule.next_fire_after(now).map_err(invalid)?;
    }
    ctx.store
        .save_schedule(&schedule, now)
        .await
        .map_err(store_err)?;
    Ok(json!({"updated": describe(&schedule)}))
}

async fn remind(ctx: &ToolContext, arguments: &Value) -> Result<Value, ToolError> {
    let user = user_id(ctx)?;
    let args = Args::new(arguments);
    let message = args.str("message")?.trim().to_string();
    let now = ctx.clock.now();
    let at = match (opt_text(arguments, "at"), opt_text(arguments, "in")) {
        (Some(at), None) => {
            parse_datetime(&at, ctx.timezone, now).map_err(|msg| invalid(format!("`at`: {msg}")))?
        }
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
    let (channel, chat) = current_chat(ctx).await?;
    let at_ms = at.timestamp_millis();
    let base = format!(
        "reminder-{}",
        at.with_timezone(&ctx.timezone).format("%Y%m%d-%H%M")
    );
    let mut name = base.clone();
    let mut n = 1;
    while ctx
        .store
        .schedule_by_name(&name)
        .await
        .map_err(store_err)?
        .is_some()
    {
        n += 1;
        name = format!("{base}-{n}");
    }
    let schedule = Schedule {
        id: 0,
        name,
        cron: None,
        timezone: ctx.timezone.name().to_string(),
        agent: ctx.agent_id.clone(),
        prompt: format!(
            "Reminder for the user: {message}. Deliver it as a short reminder; do nothing else."
        ),
        channel,
        chat,
        // A reminder only talks; anything that asks is refused.
        on_confirmation: OnConfirmation::Deny,
        allow_tools: Vec::new(),
        catch_up_minutes: 60 * 24,
        enabled: true,
        paused: false,
        source: "chat".into(),
        one_shot_at: Some(at_ms),
        created_by: Some(user),
        last_fire_at: None,
        next_fire_at: Some(at_ms),
        created_at: now.timestamp_millis(),
        updated_at: now.timestamp_millis(),
    };
    let local = schedule.local_time(at_ms);
    ctx.store
        .insert_schedule(&schedule, now.timestamp_millis())
        .await
        .map_err(store_err)?;
    Ok(json!({"reminder": message, "at": local, "name": schedule.name}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::test_context;

    fn tool(op: Op) -> ScheduleTool {
        ScheduleTool::new(op)
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
        let risk = |op| tool(op).info.risk;
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
        let other = ctx
            .store
            .allow_identity("test", "u2", None, "config", false, 0)
            .await
            .expect("second user");
        let mut theirs = ctx.clone();
        theirs.user_id = Some(other.user_id);
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
        config.source = "config".into();
        ctx.store.save_schedule(&config, 0).await.expect("save");
        let err = call(&ctx, Op::Delete, json!({"name": "mine"}))
            .await
            .expect_err("config")
            .to_string();
        assert!(err.contains("configuration file"), "{err}");
    }
}
