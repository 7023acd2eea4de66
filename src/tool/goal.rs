//! The `goals` tools: goals with sub-goals, broken into ordered steps, with the next action of
//! each, progress and statistics.
//!
//! A goal is `active`, `completed` or `abandoned`. Its progress is the share of its steps that
//! are done; finishing the last step does not complete the goal by itself (the user may still
//! add steps), only an explicit `complete_goal` or `update_goal` does. Target dates are local
//! calendar dates (`YYYY-MM-DD`); a goal is overdue when it is active and its date has passed in
//! the user's timezone.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::NaiveDate;
use serde_json::{Map, Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::common::write_tx;
use super::time::{format_local, parse_date};
use super::{Args, Risk, Tool, ToolContext, ToolError, ToolInfo, list_limit};

const GROUP: &str = "goals";
/// The states a goal can be in.
pub const STATUSES: &[&str] = &["active", "completed", "abandoned"];
/// Most steps one `decompose_goal` call adds.
const MAX_STEPS: usize = 50;
/// How far up the parent chain the cycle check looks; deeper nesting is refused.
const MAX_DEPTH: usize = 100;

/// The goal columns with the step counts every view of a goal shows.
const GOAL_SELECT: &str =
    "SELECT g.id, g.parent_id, g.title, g.description, g.target_date, g.status,
        g.created_at, g.completed_at,
        (SELECT COUNT(*) FROM goal_steps s WHERE s.goal_id = g.id) AS steps_total,
        (SELECT COUNT(*) FROM goal_steps s WHERE s.goal_id = g.id AND s.done = 1) AS steps_done
    FROM goals g";
/// Goals with a target date first, soonest first.
const GOAL_ORDER: &str =
    "ORDER BY CASE WHEN g.target_date IS NULL THEN 1 ELSE 0 END, g.target_date, g.id";

pub fn tools() -> Vec<Arc<dyn Tool>> {
    [
        Op::Create,
        Op::List,
        Op::Update,
        Op::Decompose,
        Op::NextActions,
        Op::CompleteStep,
        Op::Details,
        Op::Stats,
    ]
    .into_iter()
    .map(|op| Arc::new(GoalTool::new(op)) as Arc<dyn Tool>)
    .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Create,
    List,
    Update,
    Decompose,
    NextActions,
    CompleteStep,
    Details,
    Stats,
}

struct GoalTool {
    info: ToolInfo,
    op: Op,
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

impl GoalTool {
    fn new(op: Op) -> Self {
        let info = match op {
            Op::Create => ToolInfo::new(
                "create_goal",
                GROUP,
                "Create a goal, optionally under a parent goal and with a target date.",
                object(
                    json!({
                        "title": {"type": "string", "minLength": 1, "description": "Short goal title"},
                        "description": {"type": "string", "description": "Why, or what done looks like"},
                        "target_date": {"type": "string", "description": "Target day: YYYY-MM-DD or tomorrow"},
                        "parent_goal_id": {"type": "integer", "description": "Id of the goal this one is part of"}
                    }),
                    &["title"],
                ),
            )
            .risk(Risk::Write)
            .tags(&["objective", "plan", "ambition", "resolution", "milestone"]),
            Op::List => ToolInfo::new(
                "list_goals",
                GROUP,
                "List goals with their progress, soonest target date first.",
                object(
                    json!({
                        "status": {"type": "string", "enum": ["active", "completed", "abandoned", "all"], "description": "Default active"},
                        "parent_goal_id": {"type": "integer", "description": "Only the sub-goals of this goal"},
                        "top_level_only": {"type": "boolean", "description": "Only goals without a parent"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most goals returned; default 20"}
                    }),
                    &[],
                ),
            )
            .limit("limit", 20, 50)
            .tags(&["objectives", "plans", "progress", "show"]),
            Op::Update => ToolInfo::new(
                "update_goal",
                GROUP,
                "Change a goal's title, description, target date, status or parent. null clears target_date or parent_goal_id.",
                object(
                    json!({
                        "goal_id": {"type": "integer", "description": "Id of the goal"},
                        "title": {"type": "string", "minLength": 1},
                        "description": {"type": "string"},
                        "target_date": {"type": ["string", "null"], "description": "YYYY-MM-DD, or null to clear"},
                        "status": {"type": "string", "enum": STATUSES},
                        "parent_goal_id": {"type": ["integer", "null"], "description": "New parent goal, or null for none"}
                    }),
                    &["goal_id"],
                ),
            )
            .risk(Risk::Write)
            .tags(&["edit", "change", "complete", "finish", "abandon", "reschedule"]),
            Op::Decompose => ToolInfo::new(
                "decompose_goal",
                GROUP,
                "Break an active goal into ordered steps (appended after any existing ones).",
                object(
                    json!({
                        "goal_id": {"type": "integer", "description": "Id of the goal"},
                        "steps": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": MAX_STEPS,
                            "items": {"type": "string", "minLength": 1},
                            "description": "Step titles in the order they should be done"
                        }
                    }),
                    &["goal_id", "steps"],
                ),
            )
            .risk(Risk::Write)
            .tags(&["steps", "plan", "break down", "split", "milestones"]),
            Op::NextActions => ToolInfo::new(
                "get_next_actions",
                GROUP,
                "The first open step of every active goal, soonest target date first.",
                object(
                    json!({
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most actions returned; default 20"}
                    }),
                    &[],
                ),
            )
            .limit("limit", 20, 50)
            .tags(&["todo", "next", "what now", "focus", "steps"]),
            Op::CompleteStep => ToolInfo::new(
                "complete_goal_step",
                GROUP,
                "Mark a goal step done. The goal stays active unless complete_goal is true and no other step is open.",
                object(
                    json!({
                        "step_id": {"type": "integer", "description": "Id of the step"},
                        "complete_goal": {"type": "boolean", "description": "Also mark the goal completed (only when this was its last open step)"}
                    }),
                    &["step_id"],
                ),
            )
            .risk(Risk::Write)
            .tags(&["done", "finish", "check off", "progress", "step"]),
            Op::Details => ToolInfo::new(
                "get_goal_details",
                GROUP,
                "A goal with its steps, progress, parent and sub-goals.",
                object(
                    json!({"goal_id": {"type": "integer", "description": "Id of the goal"}}),
                    &["goal_id"],
                ),
            )
            .tags(&["show", "steps", "progress", "subgoals"]),
            Op::Stats => ToolInfo::new(
                "goal_stats",
                GROUP,
                "Counts of goals by status, steps done of total, and overdue goals.",
                object(json!({}), &[]),
            )
            .tags(&["statistics", "overview", "progress", "overdue", "report"]),
        };
        Self { info, op }
    }
}

#[async_trait]
impl Tool for GoalTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let user = ctx.user_id.ok_or_else(|| {
            ToolError::Failed("goals belong to a user, and this call has no user".into())
        })?;
        let limit = list_limit(&self.info, &arguments);
        let result = match self.op {
            Op::Create => create(ctx, user, &arguments).await?,
            Op::List => list(ctx, user, &arguments, limit).await?,
            Op::Update => update(ctx, user, &arguments).await?,
            Op::Decompose => decompose(ctx, user, &arguments).await?,
            Op::NextActions => next_actions(ctx, user, limit).await?,
            Op::CompleteStep => complete_step(ctx, user, &arguments).await?,
            Op::Details => details(ctx, user, &arguments).await?,
            Op::Stats => stats(ctx, user).await?,
        };
        Ok(result.to_string())
    }
}

fn db(err: sqlx::Error) -> ToolError {
    ToolError::Failed(format!("database error: {err}"))
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments(message.into())
}

fn not_found(id: i64) -> ToolError {
    ToolError::Failed(format!("goal {id} not found"))
}

fn today(ctx: &ToolContext) -> NaiveDate {
    ctx.clock.now().with_timezone(&ctx.timezone).date_naive()
}

fn target_date(ctx: &ToolContext, text: &str) -> Result<String, ToolError> {
    parse_date(text, ctx.timezone, ctx.clock.now())
        .map(|d| d.format("%Y-%m-%d").to_string())
        .map_err(|err| invalid(format!("`target_date`: {err}")))
}

fn title(args: Args<'_>, name: &str) -> Result<String, ToolError> {
    Ok(args.str(name)?.trim().to_string())
}

/// Text that is present and not blank.
fn opt_text(args: Args<'_>, name: &str) -> Option<String> {
    args.opt_str(name)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A stored goal with its step counts.
#[derive(Debug)]
struct Goal {
    id: i64,
    parent_id: Option<i64>,
    title: String,
    description: Option<String>,
    target_date: Option<String>,
    status: String,
    created_at: i64,
    completed_at: Option<i64>,
    steps_total: i64,
    steps_done: i64,
}

impl Goal {
    fn from_row(row: &AnyRow) -> Result<Self, ToolError> {
        Ok(Self {
            id: row.try_get("id").map_err(db)?,
            parent_id: row.try_get("parent_id").map_err(db)?,
            title: row.try_get("title").map_err(db)?,
            description: row.try_get("description").map_err(db)?,
            target_date: row.try_get("target_date").map_err(db)?,
            status: row.try_get("status").map_err(db)?,
            created_at: row.try_get("created_at").map_err(db)?,
            completed_at: row.try_get("completed_at").map_err(db)?,
            steps_total: row.try_get("steps_total").map_err(db)?,
            steps_done: row.try_get("steps_done").map_err(db)?,
        })
    }

    /// Percent of steps done; without steps, 100 for a completed goal and 0 otherwise.
    fn progress(&self) -> i64 {
        if self.steps_total > 0 {
            (self.steps_done * 100 + self.steps_total / 2) / self.steps_total
        } else if self.status == "completed" {
            100
        } else {
            0
        }
    }

    fn overdue(&self, today: NaiveDate) -> bool {
        self.status == "active"
            && self
                .target_date
                .as_deref()
                .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
                .is_some_and(|d| d < today)
    }

    fn json(&self, ctx: &ToolContext) -> Value {
        let mut map = Map::new();
        map.insert("id".into(), json!(self.id));
        map.insert("title".into(), json!(self.title));
        map.insert("status".into(), json!(self.status));
        if let Some(d) = &self.description {
            map.insert("description".into(), json!(d));
        }
        if let Some(d) = &self.target_date {
            map.insert("target_date".into(), json!(d));
        }
        if self.overdue(today(ctx)) {
            map.insert("overdue".into(), json!(true));
        }
        if let Some(p) = self.parent_id {
            map.insert("parent_goal_id".into(), json!(p));
        }
        map.insert("progress".into(), json!(self.progress()));
        map.insert("steps_done".into(), json!(self.steps_done));
        map.insert("steps_total".into(), json!(self.steps_total));
        map.insert(
            "created".into(),
            json!(format_local(self.created_at, ctx.timezone)),
        );
        if let Some(at) = self.completed_at {
            map.insert("completed".into(), json!(format_local(at, ctx.timezone)));
        }
        Value::Object(map)
    }
}

async fn fetch_goal(ctx: &ToolContext, user: i64, id: i64) -> Result<Option<Goal>, ToolError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{GOAL_SELECT} WHERE g.id = $1 AND g.user_id = $2"
    )))
    .bind(id)
    .bind(user)
    .fetch_optional(ctx.store.pool())
    .await
    .map_err(db)?;
    row.as_ref().map(Goal::from_row).transpose()
}

async fn goal(ctx: &ToolContext, user: i64, id: i64) -> Result<Goal, ToolError> {
    fetch_goal(ctx, user, id)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Checks that `parent` is one of the user's goals and that making it the parent of `goal`
/// (`None` for a new goal) closes no cycle.
async fn check_parent(
    ctx: &ToolContext,
    user: i64,
    goal: Option<i64>,
    parent: i64,
) -> Result<(), ToolError> {
    if goal == Some(parent) {
        return Err(invalid(format!("goal {parent} cannot be its own parent")));
    }
    let mut current = Some(parent);
    for _ in 0..MAX_DEPTH {
        let Some(id) = current else {
            return Ok(());
        };
        if goal == Some(id) {
            return Err(invalid(format!(
                "goal {parent} is a sub-goal of goal {}; making it the parent would create a cycle",
                goal.unwrap_or_default()
            )));
        }
        let row: Option<Option<i64>> =
            sqlx::query_scalar("SELECT parent_id FROM goals WHERE id = $1 AND user_id = $2")
                .bind(id)
                .bind(user)
                .fetch_optional(ctx.store.pool())
                .await
                .map_err(db)?;
        current = match row {
            Some(up) => up,
            None if id == parent => {
                return Err(invalid(format!("parent goal {parent} not found")));
            }
            // An ancestor that vanished ends the chain.
            None => None,
        };
    }
    Err(invalid(format!(
        "goals may be nested at most {MAX_DEPTH} levels deep"
    )))
}

async fn create(ctx: &ToolContext, user: i64, value: &Value) -> Result<Value, ToolError> {
    let args = Args::new(value);
    let title = title(args, "title")?;
    let target = args
        .opt_str("target_date")
        .filter(|d| !d.trim().is_empty())
        .map(|d| target_date(ctx, d))
        .transpose()?;
    let parent = match value.get("parent_goal_id") {
        None | Some(Value::Null) => None,
        Some(_) => Some(
            args.opt_i64("parent_goal_id")
                .ok_or_else(|| invalid("`parent_goal_id` must be an integer"))?,
        ),
    };
    if let Some(parent) = parent {
        check_parent(ctx, user, None, parent).await?;
    }
    let now = ctx.clock.now_ms();
    let mut tx = write_tx(ctx).await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO goals (user_id, parent_id, title, description, target_date, status, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, 'active', $6, $6) RETURNING id",
    )
    .bind(user)
    .bind(parent)
    .bind(title)
    .bind(opt_text(args, "description"))
    .bind(target)
    .bind(now)
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    let goal = goal(ctx, user, id).await?;
    Ok(json!({"created": goal.json(ctx)}))
}

/// A built query's bound values.
enum Bind {
    Int(i64),
    Text(String),
}

async fn list(ctx: &ToolContext, user: i64, value: &Value, limit: i64) -> Result<Value, ToolError> {
    let args = Args::new(value);
    let mut sql = format!("{GOAL_SELECT} WHERE g.user_id = $1");
    let mut binds = vec![Bind::Int(user)];
    let status = args.opt_str("status").unwrap_or("active");
    match status {
        "all" => {}
        s if STATUSES.contains(&s) => {
            binds.push(Bind::Text(s.to_string()));
            sql.push_str(&format!(" AND g.status = ${}", binds.len()));
        }
        other => {
            return Err(invalid(format!(
                "unknown status {other:?}; use active, completed, abandoned or all"
            )));
        }
    }
    let top_level = args.opt_bool("top_level_only").unwrap_or(false);
    if let Some(parent) = args.opt_i64("parent_goal_id") {
        if top_level {
            return Err(invalid(
                "give either `parent_goal_id` or `top_level_only`, not both",
            ));
        }
        binds.push(Bind::Int(parent));
        sql.push_str(&format!(" AND g.parent_id = ${}", binds.len()));
    } else if top_level {
        sql.push_str(" AND g.parent_id IS NULL");
    }
    sql.push_str(&format!(" {GOAL_ORDER} LIMIT {limit}"));
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for bind in &binds {
        query = match bind {
            Bind::Int(n) => query.bind(*n),
            Bind::Text(s) => query.bind(s.as_str()),
        };
    }
    let rows = query.fetch_all(ctx.store.pool()).await.map_err(db)?;
    let goals = rows
        .iter()
        .map(|row| Goal::from_row(row).map(|g| g.json(ctx)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({"count": goals.len(), "goals": goals}))
}

async fn update(ctx: &ToolContext, user: i64, value: &Value) -> Result<Value, ToolError> {
    let args = Args::new(value);
    let id = args.i64("goal_id")?;
    let current = goal(ctx, user, id).await?;

    let title = match value.get("title") {
        Some(_) => title(args, "title")?,
        None => current.title.clone(),
    };
    let description = match value.get("description") {
        Some(_) => opt_text(args, "description"),
        None => current.description.clone(),
    };
    let target = match value.get("target_date") {
        None => current.target_date.clone(),
        Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => Some(target_date(ctx, s)?),
        Some(_) => return Err(invalid("`target_date` must be YYYY-MM-DD or null")),
    };
    let status = match args.opt_str("status") {
        Some(s) if STATUSES.contains(&s) => s.to_string(),
        Some(other) => {
            return Err(invalid(format!(
                "unknown status {other:?}; use active, completed or abandoned"
            )));
        }
        None => current.status.clone(),
    };
    let parent = match value.get("parent_goal_id") {
        None => current.parent_id,
        Some(Value::Null) => None,
        Some(_) => {
            let parent = args
                .opt_i64("parent_goal_id")
                .ok_or_else(|| invalid("`parent_goal_id` must be an integer or null"))?;
            if current.parent_id != Some(parent) {
                check_parent(ctx, user, Some(id), parent).await?;
            }
            Some(parent)
        }
    };
    let changed = [
        "title",
        "description",
        "target_date",
        "status",
        "parent_goal_id",
    ]
    .iter()
    .any(|f| value.get(*f).is_some());
    if !changed {
        return Err(invalid(
            "nothing to change: give title, description, target_date, status or parent_goal_id",
        ));
    }
    let now = ctx.clock.now_ms();
    let completed_at = match (status.as_str(), current.status.as_str()) {
        ("completed", "completed") => current.completed_at,
        ("completed", _) => Some(now),
        _ => None,
    };
    sqlx::query(
        "UPDATE goals SET title = $1, description = $2, target_date = $3, status = $4, parent_id = $5,
                completed_at = $6, updated_at = $7
         WHERE id = $8 AND user_id = $9",
    )
    .bind(title)
    .bind(description)
    .bind(target)
    .bind(status)
    .bind(parent)
    .bind(completed_at)
    .bind(now)
    .bind(id)
    .bind(user)
    .execute(ctx.store.pool())
    .await
    .map_err(db)?;
    let goal = goal(ctx, user, id).await?;
    Ok(json!({"updated": goal.json(ctx)}))
}

async fn decompose(ctx: &ToolContext, user: i64, value: &Value) -> Result<Value, ToolError> {
    let args = Args::new(value);
    let id = args.i64("goal_id")?;
    let items = args.array("steps")?;
    if items.is_empty() || items.len() > MAX_STEPS {
        return Err(invalid(format!(
            "`steps` must hold 1 to {MAX_STEPS} step titles, got {}",
            items.len()
        )));
    }
    let mut titles = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match item.as_str().map(str::trim).filter(|s| !s.is_empty()) {
            Some(t) => titles.push(t.to_string()),
            None => {
                return Err(invalid(format!(
                    "step {index} must be a non-empty string; nothing was added"
                )));
            }
        }
    }
    let current = goal(ctx, user, id).await?;
    if current.status != "active" {
        return Err(ToolError::Failed(format!(
            "goal {id} is {}; set its status to active before adding steps",
            current.status
        )));
    }
    let now = ctx.clock.now_ms();
    let mut tx = write_tx(ctx).await?;
    let last: i64 =
        sqlx::query_scalar("SELECT COALESCE(MAX(position), 0) FROM goal_steps WHERE goal_id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
    let mut steps = Vec::with_capacity(titles.len());
    for (offset, title) in titles.into_iter().enumerate() {
        let position = last + 1 + i64::try_from(offset).unwrap_or(0);
        let step_id: i64 = sqlx::query_scalar(
            "INSERT INTO goal_steps (goal_id, user_id, position, title, done, created_at)
             VALUES ($1, $2, $3, $4, 0, $5) RETURNING id",
        )
        .bind(id)
        .bind(user)
        .bind(position)
        .bind(title.as_str())
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        steps.push(json!({"id": step_id, "position": position, "title": title}));
    }
    sqlx::query("UPDATE goals SET updated_at = $1 WHERE id = $2")
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    tx.commit().await.map_err(db)?;
    let goal = goal(ctx, user, id).await?;
    Ok(json!({
        "goal_id": id,
        "added": steps,
        "progress": goal.progress(),
        "steps_total": goal.steps_total,
    }))
}

/// A stored step.
#[derive(Debug)]
struct Step {
    id: i64,
    goal_id: i64,
    position: i64,
    title: String,
    done: bool,
    completed_at: Option<i64>,
}

impl Step {
    fn from_row(row: &AnyRow) -> Result<Self, ToolError> {
        Ok(Self {
            id: row.try_get("id").map_err(db)?,
            goal_id: row.try_get("goal_id").map_err(db)?,
            position: row.try_get("position").map_err(db)?,
            title: row.try_get("title").map_err(db)?,
            done: row.try_get::<i64, _>("done").map_err(db)? != 0,
            completed_at: row.try_get("completed_at").map_err(db)?,
        })
    }

    fn json(&self, ctx: &ToolContext) -> Value {
        let mut out = json!({
            "id": self.id,
            "position": self.position,
            "title": self.title,
            "done": self.done,
        });
        if let (Value::Object(map), Some(at)) = (&mut out, self.completed_at) {
            map.insert("completed".into(), json!(format_local(at, ctx.timezone)));
        }
        out
    }
}

const STEP_COLUMNS: &str = "s.id, s.goal_id, s.position, s.title, s.done, s.completed_at";

async fn steps_of(ctx: &ToolContext, goal_id: i64) -> Result<Vec<Step>, ToolError> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {STEP_COLUMNS} FROM goal_steps s WHERE s.goal_id = $1 ORDER BY s.position, s.id"
    )))
    .bind(goal_id)
    .fetch_all(ctx.store.pool())
    .await
    .map_err(db)?;
    rows.iter().map(Step::from_row).collect()
}

async fn next_actions(ctx: &ToolContext, user: i64, limit: i64) -> Result<Value, ToolError> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{GOAL_SELECT} WHERE g.user_id = $1 AND g.status = 'active' {GOAL_ORDER}"
    )))
    .bind(user)
    .fetch_all(ctx.store.pool())
    .await
    .map_err(db)?;
    let goals = rows
        .iter()
        .map(Goal::from_row)
        .collect::<Result<Vec<_>, _>>()?;
    // The first open step of each active goal, in one query rather than one per goal.
    let step_rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {STEP_COLUMNS} FROM goal_steps s JOIN goals g ON g.id = s.goal_id
         WHERE g.user_id = $1 AND g.status = 'active' AND s.done = 0
         ORDER BY s.goal_id, s.position, s.id"
    )))
    .bind(user)
    .fetch_all(ctx.store.pool())
    .await
    .map_err(db)?;
    let mut first_open = std::collections::HashMap::new();
    for row in &step_rows {
        let step = Step::from_row(row)?;
        first_open.entry(step.goal_id).or_insert(step);
    }
    let today = today(ctx);
    let mut actions = Vec::new();
    let mut without_steps = Vec::new();
    for goal in &goals {
        match first_open.get(&goal.id) {
            Some(step) => {
                let mut action = json!({
                    "step_id": step.id,
                    "step": step.title,
                    "goal_id": goal.id,
                    "goal": goal.title,
                    "step_number": format!("{} of {}", goal.steps_done + 1, goal.steps_total),
                });
                if let Value::Object(map) = &mut action {
                    if let Some(d) = &goal.target_date {
                        map.insert("target_date".into(), json!(d));
                    }
                    if goal.overdue(today) {
                        map.insert("overdue".into(), json!(true));
                    }
                }
                actions.push(action);
            }
            None if goal.steps_total == 0 => {
                without_steps.push(json!({"goal_id": goal.id, "goal": goal.title}));
            }
            // Every step done: nothing to do but mark the goal completed.
            None => {}
        }
    }
    actions.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(json!({
        "count": actions.len(),
        "next_actions": actions,
        "goals_without_steps": without_steps,
    }))
}

async fn complete_step(ctx: &ToolContext, user: i64, value: &Value) -> Result<Value, ToolError> {
    let args = Args::new(value);
    let step_id = args.i64("step_id")?;
    let complete_goal = args.opt_bool("complete_goal").unwrap_or(false);
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {STEP_COLUMNS} FROM goal_steps s WHERE s.id = $1 AND s.user_id = $2"
    )))
    .bind(step_id)
    .bind(user)
    .fetch_optional(ctx.store.pool())
    .await
    .map_err(db)?;
    let step = match row {
        Some(row) => Step::from_row(&row)?,
        None => return Err(ToolError::Failed(format!("step {step_id} not found"))),
    };
    let others_open: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM goal_steps WHERE goal_id = $1 AND done = 0 AND id <> $2",
    )
    .bind(step.goal_id)
    .bind(step_id)
    .fetch_one(ctx.store.pool())
    .await
    .map_err(db)?;
    if complete_goal && others_open > 0 {
        return Err(invalid(format!(
            "goal {} still has {others_open} other open step(s); complete them first, or set the goal's status with update_goal. Nothing was changed",
            step.goal_id
        )));
    }
    let now = ctx.clock.now_ms();
    let already = step.done;
    if !already {
        sqlx::query("UPDATE goal_steps SET done = 1, completed_at = $1 WHERE id = $2")
            .bind(now)
            .bind(step_id)
            .execute(ctx.store.pool())
            .await
            .map_err(db)?;
    }
    if complete_goal {
        sqlx::query(
            "UPDATE goals SET status = 'completed', completed_at = $1, updated_at = $1
             WHERE id = $2 AND status <> 'completed'",
        )
        .bind(now)
        .bind(step.goal_id)
        .execute(ctx.store.pool())
        .await
        .map_err(db)?;
    } else {
        sqlx::query("UPDATE goals SET updated_at = $1 WHERE id = $2")
            .bind(now)
            .bind(step.goal_id)
            .execute(ctx.store.pool())
            .await
            .map_err(db)?;
    }
    let goal = goal(ctx, user, step.goal_id).await?;
    let next = steps_of(ctx, goal.id)
        .await?
        .into_iter()
        .find(|s| !s.done)
        .map(|s| json!({"step_id": s.id, "title": s.title}));
    let mut out = json!({
        "step_id": step_id,
        "step": step.title,
        "goal_id": goal.id,
        "goal": goal.title,
        "goal_status": goal.status,
        "progress": goal.progress(),
        "steps_done": goal.steps_done,
        "steps_total": goal.steps_total,
        "next_step": next,
    });
    if let Value::Object(map) = &mut out {
        if already {
            map.insert("note".into(), json!("this step was already done"));
        } else if goal.status == "active" && goal.steps_done == goal.steps_total {
            map.insert(
                "note".into(),
                json!("all steps are done; the goal stays active until marked completed (update_goal status=completed)"),
            );
        }
    }
    Ok(out)
}

async fn details(ctx: &ToolContext, user: i64, value: &Value) -> Result<Value, ToolError> {
    let id = Args::new(value).i64("goal_id")?;
    let goal = goal(ctx, user, id).await?;
    let steps = steps_of(ctx, id).await?;
    let sub_rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{GOAL_SELECT} WHERE g.user_id = $1 AND g.parent_id = $2 {GOAL_ORDER}"
    )))
    .bind(user)
    .bind(id)
    .fetch_all(ctx.store.pool())
    .await
    .map_err(db)?;
    let sub_goals = sub_rows
        .iter()
        .map(|row| {
            Goal::from_row(row).map(|g| {
                json!({"id": g.id, "title": g.title, "status": g.status, "progress": g.progress()})
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = goal.json(ctx);
    if let Value::Object(map) = &mut out {
        if let Some(parent_id) = goal.parent_id
            && let Some(parent) = fetch_goal(ctx, user, parent_id).await?
        {
            map.insert(
                "parent".into(),
                json!({"id": parent.id, "title": parent.title}),
            );
        }
        map.insert(
            "steps".into(),
            json!(steps.iter().map(|s| s.json(ctx)).collect::<Vec<_>>()),
        );
        map.insert("sub_goals".into(), json!(sub_goals));
    }
    Ok(out)
}

async fn stats(ctx: &ToolContext, user: i64) -> Result<Value, ToolError> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{GOAL_SELECT} WHERE g.user_id = $1 {GOAL_ORDER}"
    )))
    .bind(user)
    .fetch_all(ctx.store.pool())
    .await
    .map_err(db)?;
    let goals = rows
        .iter()
        .map(Goal::from_row)
        .collect::<Result<Vec<_>, _>>()?;
    let count = |status: &str| goals.iter().filter(|g| g.status == status).count();
    let today = today(ctx);
    let overdue: Vec<Value> = goals
        .iter()
        .filter(|g| g.overdue(today))
        .map(|g| {
            let days = g
                .target_date
                .as_deref()
                .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
                .map(|d| (today - d).num_days());
            json!({"id": g.id, "title": g.title, "target_date": g.target_date, "days_overdue": days})
        })
        .collect();
    let active: Vec<&Goal> = goals.iter().filter(|g| g.status == "active").collect();
    Ok(json!({
        "goals": {
            "total": goals.len(),
            "active": count("active"),
            "completed": count("completed"),
            "abandoned": count("abandoned"),
        },
        "steps": {
            "done": goals.iter().map(|g| g.steps_done).sum::<i64>(),
            "total": goals.iter().map(|g| g.steps_total).sum::<i64>(),
            "open_in_active_goals": active.iter().map(|g| g.steps_total - g.steps_done).sum::<i64>(),
        },
        "overdue_count": overdue.len(),
        "overdue": overdue,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use chrono::TimeZone;

    /// A context whose clock reads 2026-03-10 12:00 UTC.
    async fn context() -> (ToolContext, tempfile::TempDir) {
        let (mut ctx, dir) = crate::tool::test_context().await;
        let now = chrono::Utc
            .with_ymd_and_hms(2026, 3, 10, 12, 0, 0)
            .single()
            .expect("valid");
        ctx.clock = ManualClock::new(now);
        (ctx, dir)
    }

    async fn call(ctx: &ToolContext, name: &str, args: Value) -> Result<Value, ToolError> {
        let tool = tools()
            .into_iter()
            .find(|t| t.info().name == name)
            .expect("tool exists");
        let text = tool.call(ctx, args).await?;
        Ok(serde_json::from_str(&text).expect("results are JSON"))
    }

    async fn ok(ctx: &ToolContext, name: &str, args: Value) -> Value {
        call(ctx, name, args).await.expect(name)
    }

    async fn err(ctx: &ToolContext, name: &str, args: Value) -> ToolError {
        call(ctx, name, args.clone())
            .await
            .expect_err(&format!("{name} {args} is refused"))
    }

    async fn new_goal(ctx: &ToolContext, args: Value) -> i64 {
        ok(ctx, "create_goal", args).await["created"]["id"]
            .as_i64()
            .expect("id")
    }

    async fn count(ctx: &ToolContext, table: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
            .fetch_one(ctx.store.pool())
            .await
            .expect("count")
    }

    #[tokio::test]
    async fn create_goal_with_parent_and_target_date() {
        let (ctx, _dir) = context().await;
        let out = ok(
            &ctx,
            "create_goal",
            json!({"title": " Run a marathon ", "description": "Sub 4h", "target_date": "2026-10-04"}),
        )
        .await;
        let goal = &out["created"];
        assert_eq!(goal["title"], "Run a marathon");
        assert_eq!(goal["status"], "active");
        assert_eq!(goal["target_date"], "2026-10-04");
        assert_eq!(goal["progress"], 0);
        assert_eq!(goal["created"], "2026-03-10 12:00");
        let parent = goal["id"].as_i64().expect("id");
        let child = ok(
            &ctx,
            "create_goal",
            json!({"title": "Run a half marathon", "parent_goal_id": parent, "target_date": "tomorrow"}),
        )
        .await;
        assert_eq!(child["created"]["parent_goal_id"], parent);
        assert_eq!(child["created"]["target_date"], "2026-03-11");
    }

    #[tokio::test]
    async fn create_goal_refuses_bad_input_and_stores_nothing() {
        let (mut ctx, _dir) = context().await;
        let theirs = new_goal(&ctx, json!({"title": "Someone else's"})).await;
        let other = ctx
            .store
            .allow_identity("test", "u2", None, "config", false, 0)
            .await
            .expect("user");
        ctx.user_id = Some(other.user_id);
        for (args, expected) in [
            (json!({"title": "  "}), "`title` is required"),
            (json!({}), "`title` is required"),
            (
                json!({"title": "x", "target_date": "2026-02-30"}),
                "`target_date`",
            ),
            (
                json!({"title": "x", "parent_goal_id": 999}),
                "parent goal 999 not found",
            ),
            (
                json!({"title": "x", "parent_goal_id": theirs}),
                &format!("parent goal {theirs} not found"),
            ),
        ] {
            let e = err(&ctx, "create_goal", args.clone()).await;
            assert!(matches!(e, ToolError::InvalidArguments(_)), "{args}: {e}");
            assert!(e.to_string().contains(expected), "{args}: {e}");
        }
        assert_eq!(count(&ctx, "goals").await, 1);
        assert_eq!(
            ok(&ctx, "list_goals", json!({"status": "all"})).await["count"],
            0
        );
        let e = err(&ctx, "get_goal_details", json!({"goal_id": theirs})).await;
        assert_eq!(e.to_string(), format!("goal {theirs} not found"));
        ctx.user_id = None;
        let e = err(&ctx, "goal_stats", json!({})).await;
        assert!(e.to_string().contains("no user"));
    }

    #[tokio::test]
    async fn list_goals_by_status_and_parent() {
        let (ctx, _dir) = context().await;
        let a = new_goal(&ctx, json!({"title": "A", "target_date": "2026-06-01"})).await;
        let b = new_goal(&ctx, json!({"title": "B"})).await;
        let c = new_goal(
            &ctx,
            json!({"title": "C", "target_date": "2026-04-01", "parent_goal_id": a}),
        )
        .await;
        ok(
            &ctx,
            "update_goal",
            json!({"goal_id": b, "status": "completed"}),
        )
        .await;
        let titles = |v: &Value| -> Vec<String> {
            v["goals"]
                .as_array()
                .expect("goals")
                .iter()
                .map(|g| g["title"].as_str().expect("title").to_string())
                .collect()
        };
        let active = ok(&ctx, "list_goals", json!({})).await;
        assert_eq!(titles(&active), ["C", "A"], "soonest target first");
        let all = ok(&ctx, "list_goals", json!({"status": "all"})).await;
        assert_eq!(titles(&all), ["C", "A", "B"], "goals without a date last");
        let done = ok(&ctx, "list_goals", json!({"status": "completed"})).await;
        assert_eq!(titles(&done), ["B"]);
        assert_eq!(done["goals"][0]["progress"], 100);
        let children = ok(&ctx, "list_goals", json!({"parent_goal_id": a})).await;
        assert_eq!(children["goals"][0]["id"], c);
        let top = ok(
            &ctx,
            "list_goals",
            json!({"status": "all", "top_level_only": true}),
        )
        .await;
        assert_eq!(titles(&top), ["A", "B"]);
        let one = ok(&ctx, "list_goals", json!({"status": "all", "limit": 1})).await;
        assert_eq!(one["count"], 1);
        let e = err(&ctx, "list_goals", json!({"status": "paused"})).await;
        assert!(
            e.to_string()
                .contains("active, completed, abandoned or all")
        );
        let e = err(
            &ctx,
            "list_goals",
            json!({"parent_goal_id": a, "top_level_only": true}),
        )
        .await;
        assert!(e.to_string().contains("not both"));
    }

    #[tokio::test]
    async fn update_goal_changes_fields_and_refuses_cycles() {
        let (ctx, _dir) = context().await;
        let a = new_goal(&ctx, json!({"title": "A", "target_date": "2026-06-01"})).await;
        let b = new_goal(&ctx, json!({"title": "B", "parent_goal_id": a})).await;
        let c = new_goal(&ctx, json!({"title": "C", "parent_goal_id": b})).await;

        let out = ok(
            &ctx,
            "update_goal",
            json!({"goal_id": a, "title": "A2", "description": "new", "target_date": null, "status": "completed"}),
        )
        .await;
        let updated = &out["updated"];
        assert_eq!(updated["title"], "A2");
        assert_eq!(updated["description"], "new");
        assert!(updated.get("target_date").is_none());
        assert_eq!(updated["status"], "completed");
        assert_eq!(updated["completed"], "2026-03-10 12:00");
        let out = ok(
            &ctx,
            "update_goal",
            json!({"goal_id": a, "status": "active"}),
        )
        .await;
        assert!(out["updated"].get("completed").is_none());
        assert_eq!(out["updated"]["title"], "A2", "unchanged fields stay");

        for (args, expected) in [
            (json!({"goal_id": a, "parent_goal_id": a}), "its own parent"),
            (json!({"goal_id": a, "parent_goal_id": c}), "cycle"),
            (json!({"goal_id": b, "parent_goal_id": c}), "cycle"),
            (
                json!({"goal_id": a, "parent_goal_id": 999}),
                "parent goal 999 not found",
            ),
            (json!({"goal_id": a, "status": "paused"}), "unknown status"),
            (
                json!({"goal_id": a, "target_date": "soon"}),
                "`target_date`",
            ),
            (json!({"goal_id": a, "title": ""}), "`title` is required"),
            (json!({"goal_id": a}), "nothing to change"),
        ] {
            let e = err(&ctx, "update_goal", args.clone()).await;
            assert!(matches!(e, ToolError::InvalidArguments(_)), "{args}: {e}");
            assert!(e.to_string().contains(expected), "{args}: {e}");
        }
        let e = err(&ctx, "update_goal", json!({"goal_id": 999, "title": "x"})).await;
        assert_eq!(e.to_string(), "goal 999 not found");

        // Moving C to the top and then under A is fine; detaching with null works.
        let out = ok(
            &ctx,
            "update_goal",
            json!({"goal_id": c, "parent_goal_id": null}),
        )
        .await;
        assert!(out["updated"].get("parent_goal_id").is_none());
        let out = ok(
            &ctx,
            "update_goal",
            json!({"goal_id": c, "parent_goal_id": a}),
        )
        .await;
        assert_eq!(out["updated"]["parent_goal_id"], a);
        let details = ok(&ctx, "get_goal_details", json!({"goal_id": a})).await;
        assert_eq!(details["title"], "A2");
        assert_eq!(details["sub_goals"].as_array().expect("subs").len(), 2);
    }

    #[tokio::test]
    async fn decompose_next_actions_and_completion() {
        let (ctx, _dir) = context().await;
        let trip = new_goal(
            &ctx,
            json!({"title": "Trip to Japan", "target_date": "2026-09-01"}),
        )
        .await;
        let garden = new_goal(
            &ctx,
            json!({"title": "Garden", "target_date": "2026-03-01"}),
        )
        .await;
        let empty = new_goal(&ctx, json!({"title": "Learn piano"})).await;

        let out = ok(
            &ctx,
            "decompose_goal",
            json!({"goal_id": trip, "steps": ["Passport", "Book flights", "Book hotels"]}),
        )
        .await;
        assert_eq!(out["steps_total"], 3);
        let added = out["added"].as_array().expect("added");
        assert_eq!(added[1]["title"], "Book flights");
        assert_eq!(added[1]["position"], 2);
        let step_ids: Vec<i64> = added
            .iter()
            .map(|s| s["id"].as_i64().expect("id"))
            .collect();
        let out = ok(
            &ctx,
            "decompose_goal",
            json!({"goal_id": garden, "steps": ["Dig beds"]}),
        )
        .await;
        let dig = out["added"][0]["id"].as_i64().expect("id");

        let next = ok(&ctx, "get_next_actions", json!({})).await;
        assert_eq!(next["count"], 2);
        assert_eq!(
            next["next_actions"][0]["step"], "Dig beds",
            "soonest target first"
        );
        assert_eq!(next["next_actions"][0]["overdue"], true);
        assert_eq!(next["next_actions"][1]["step"], "Passport");
        assert_eq!(next["next_actions"][1]["step_number"], "1 of 3");
        assert_eq!(next["goals_without_steps"][0]["goal_id"], empty);
        let limited = ok(&ctx, "get_next_actions", json!({"limit": 1})).await;
        assert_eq!(limited["count"], 1);

        let out = ok(&ctx, "complete_goal_step", json!({"step_id": step_ids[0]})).await;
        assert_eq!(out["progress"], 33);
        assert_eq!(out["next_step"]["title"], "Book flights");
        let next = ok(&ctx, "get_next_actions", json!({})).await;
        assert_eq!(next["next_actions"][1]["step"], "Book flights");
        assert_eq!(next["next_actions"][1]["step_number"], "2 of 3");

        // complete_goal with other steps open changes nothing.
        let e = err(
            &ctx,
            "complete_goal_step",
            json!({"step_id": step_ids[1], "complete_goal": true}),
        )
        .await;
        assert!(e.to_string().contains("1 other open step"), "{e}");
        let details = ok(&ctx, "get_goal_details", json!({"goal_id": trip})).await;
        assert_eq!(details["steps"][1]["done"], false);

        ok(&ctx, "complete_goal_step", json!({"step_id": step_ids[1]})).await;
        let out = ok(&ctx, "complete_goal_step", json!({"step_id": step_ids[2]})).await;
        assert_eq!(out["progress"], 100);
        assert_eq!(
            out["goal_status"], "active",
            "the last step alone does not complete the goal"
        );
        assert!(out["note"].as_str().expect("note").contains("stays active"));
        assert_eq!(out["next_step"], Value::Null);
        let again = ok(&ctx, "complete_goal_step", json!({"step_id": step_ids[2]})).await;
        assert_eq!(again["note"], "this step was already done");

        let out = ok(
            &ctx,
            "complete_goal_step",
            json!({"step_id": dig, "complete_goal": true}),
        )
        .await;
        assert_eq!(out["goal_status"], "completed");
        let next = ok(&ctx, "get_next_actions", json!({})).await;
        assert_eq!(next["count"], 0, "{next}");

        let details = ok(&ctx, "get_goal_details", json!({"goal_id": trip})).await;
        assert_eq!(details["progress"], 100);
        assert_eq!(details["steps"].as_array().expect("steps").len(), 3);
        assert_eq!(details["steps"][0]["completed"], "2026-03-10 12:00");

        // More steps can be added to an active goal; not to a completed one.
        let out = ok(
            &ctx,
            "decompose_goal",
            json!({"goal_id": trip, "steps": ["Pack"]}),
        )
        .await;
        assert_eq!(out["added"][0]["position"], 4);
        assert_eq!(out["progress"], 75);
        let e = err(
            &ctx,
            "decompose_goal",
            json!({"goal_id": garden, "steps": ["More"]}),
        )
        .await;
        assert!(e.to_string().contains("is completed"));
    }

    #[tokio::test]
    async fn decompose_and_complete_refuse_bad_input() {
        let (ctx, _dir) = context().await;
        let g = new_goal(&ctx, json!({"title": "G"})).await;
        for (args, expected) in [
            (json!({"goal_id": g, "steps": []}), "1 to 50"),
            (
                json!({"goal_id": g, "steps": ["ok", "  "]}),
                "step 1 must be a non-empty string",
            ),
            (json!({"goal_id": g}), "`steps` is required"),
        ] {
            let e = err(&ctx, "decompose_goal", args.clone()).await;
            assert!(e.to_string().contains(expected), "{args}: {e}");
        }
        assert_eq!(count(&ctx, "goal_steps").await, 0, "nothing half-added");
        let e = err(
            &ctx,
            "decompose_goal",
            json!({"goal_id": 999, "steps": ["x"]}),
        )
        .await;
        assert_eq!(e.to_string(), "goal 999 not found");
        let e = err(&ctx, "complete_goal_step", json!({"step_id": 999})).await;
        assert_eq!(e.to_string(), "step 999 not found");
        let e = err(&ctx, "get_goal_details", json!({})).await;
        assert!(matches!(e, ToolError::InvalidArguments(_)));
    }

    #[tokio::test]
    async fn goal_stats_count_statuses_steps_and_overdue() {
        let (ctx, _dir) = context().await;
        let late = new_goal(&ctx, json!({"title": "Late", "target_date": "2026-03-05"})).await;
        let later = new_goal(&ctx, json!({"title": "Later", "target_date": "2026-12-01"})).await;
        let done = new_goal(&ctx, json!({"title": "Done", "target_date": "2026-01-01"})).await;
        let dropped = new_goal(&ctx, json!({"title": "Dropped"})).await;
        ok(
            &ctx,
            "update_goal",
            json!({"goal_id": done, "status": "completed"}),
        )
        .await;
        ok(
            &ctx,
            "update_goal",
            json!({"goal_id": dropped, "status": "abandoned"}),
        )
        .await;
        let out = ok(
            &ctx,
            "decompose_goal",
            json!({"goal_id": late, "steps": ["a", "b"]}),
        )
        .await;
        ok(
            &ctx,
            "decompose_goal",
            json!({"goal_id": later, "steps": ["c"]}),
        )
        .await;
        ok(
            &ctx,
            "complete_goal_step",
            json!({"step_id": out["added"][0]["id"]}),
        )
        .await;

        let stats = ok(&ctx, "goal_stats", json!({})).await;
        assert_eq!(
            stats["goals"],
            json!({"total": 4, "active": 2, "completed": 1, "abandoned": 1})
        );
        assert_eq!(
            stats["steps"],
            json!({"done": 1, "total": 3, "open_in_active_goals": 2})
        );
        assert_eq!(
            stats["overdue_count"], 1,
            "completed goals are never overdue"
        );
        assert_eq!(stats["overdue"][0]["id"], late);
        assert_eq!(stats["overdue"][0]["days_overdue"], 5);
    }

    #[test]
    fn schemas_describe_the_tools() {
        let tools = tools();
        let names: Vec<&str> = tools.iter().map(|t| t.info().name.as_str()).collect();
        assert_eq!(
            names,
            [
                "create_goal",
                "list_goals",
                "update_goal",
                "decompose_goal",
                "get_next_actions",
                "complete_goal_step",
                "get_goal_details",
                "goal_stats"
            ]
        );
        for tool in &tools {
            let info = tool.info();
            assert_eq!(info.group, "goals");
            assert_eq!(info.parameters["additionalProperties"], false);
            assert!(!info.requires_confirmation(), "{}", info.name);
        }
        assert_eq!(tools[0].info().risk, Risk::Write);
        assert_eq!(tools[7].info().risk, Risk::Safe);
    }
}
