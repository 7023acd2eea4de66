//! The `goals` tools: goals with sub-goals, broken into ordered steps, with the next action of
//! each, progress and statistics. Each tool is its argument type ([`TypedTool`]); the SQL is in
//! `store::goal`.
//!
//! A goal is `active`, `completed` or `abandoned`. Its progress is the share of its steps that
//! are done; finishing the last step does not complete the goal by itself (the user may still
//! add steps), only an explicit `complete_goal` or `update_goal` does. Target dates are local
//! calendar dates (`YYYY-MM-DD`); a goal is overdue when it is active and its date has passed in
//! the user's timezone.
//!
//! `update_goal` tells a field left out from a field set to `null`: left out keeps the stored
//! value, `null` clears it ([`Patch`]). Only `target_date` and `parent_goal_id` can be cleared,
//! so only they take `null` in the schema.

use std::sync::Arc;

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use super::common::{bad_date, user_id};
use super::time::{format_local, parse_date};
use super::typed::{Count, Limit, NonEmpty, Patch, text};
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::store::goal::{
    GoalFilter, GoalPatch, GoalRow as Goal, GoalStatus as Status, NewGoal, StepRow as Step,
};

const GROUP: &str = "goals";
/// Most steps one `decompose_goal` call adds.
const MAX_STEPS: usize = 50;
/// How far up the parent chain the cycle check looks; deeper nesting is refused.
const MAX_DEPTH: usize = 100;
const LIST_LIMIT: Limit = Limit::new(20, 50);

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<CreateGoal>(),
        typed::<ListGoals>(),
        typed::<UpdateGoal>(),
        typed::<DecomposeGoal>(),
        typed::<GetNextActions>(),
        typed::<CompleteGoalStep>(),
        typed::<GetGoalDetails>(),
        typed::<GoalStats>(),
    ]
}

// `list_goals` also takes `all`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ListStatus {
    Active,
    Completed,
    Abandoned,
    All,
}

/// Create a goal, optionally under a parent goal and with a target date.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateGoal {
    /// Short goal title
    #[schemars(length(min = 1))]
    title: NonEmpty,
    /// Why, or what done looks like
    description: Option<String>,
    /// Target day: YYYY-MM-DD or tomorrow
    target_date: Option<String>,
    /// Id of the goal this one is part of
    parent_goal_id: Option<i64>,
}

impl TypedTool for CreateGoal {
    const NAME: &'static str = "create_goal";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "objective, plan, ambition, resolution, milestone";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let target = text(self.target_date)
            .map(|d| target_date(ctx, &d))
            .transpose()?;
        if let Some(parent) = self.parent_goal_id {
            check_parent(ctx, user, None, parent).await?;
        }
        let new = NewGoal {
            parent_id: self.parent_goal_id,
            title: self.title.0,
            description: text(self.description),
            target_date: target,
        };
        let id = ctx
            .store
            .insert_goal(user, &new, ctx.clock.now_ms())
            .await?;
        let goal = goal(ctx, user, id).await?;
        Ok(json!({"created": goal.json(ctx)}))
    }
}

/// List goals with their progress, soonest target date first.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListGoals {
    /// Default active
    status: Option<ListStatus>,
    /// Only the sub-goals of this goal
    parent_goal_id: Option<i64>,
    /// Only goals without a parent
    top_level_only: Option<bool>,
    /// Most goals returned; default 20
    limit: Option<Count>,
}

impl TypedTool for ListGoals {
    const NAME: &'static str = "list_goals";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "objectives, plans, progress, show";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let status = match self.status.unwrap_or(ListStatus::Active) {
            ListStatus::All => None,
            ListStatus::Active => Some(Status::Active),
            ListStatus::Completed => Some(Status::Completed),
            ListStatus::Abandoned => Some(Status::Abandoned),
        };
        let top_level = self.top_level_only.unwrap_or(false);
        if top_level && self.parent_goal_id.is_some() {
            return Err(invalid(
                "give either `parent_goal_id` or `top_level_only`, not both",
            ));
        }
        let filter = GoalFilter {
            status,
            parent: self.parent_goal_id,
            top_level,
        };
        let limit = Some(LIST_LIMIT.of(self.limit));
        let goals = ctx.store.list_goals(user_id(ctx)?, filter, limit).await?;
        let goals: Vec<Value> = goals.iter().map(|g| g.json(ctx)).collect();
        Ok(json!({"count": goals.len(), "goals": goals}))
    }
}

/// Change a goal's title, description, target date, status or parent. null clears target_date
/// or parent_goal_id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateGoal {
    /// Id of the goal
    goal_id: i64,
    #[schemars(length(min = 1))]
    title: Option<NonEmpty>,
    description: Option<String>,
    /// YYYY-MM-DD, or null to clear
    #[serde(default)]
    target_date: Patch<String>,
    status: Option<Status>,
    /// New parent goal, or null for none
    #[serde(default)]
    parent_goal_id: Patch<i64>,
}

impl TypedTool for UpdateGoal {
    const NAME: &'static str = "update_goal";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "edit, change, complete, finish, abandon, reschedule";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let id = self.goal_id;
        let current = goal(ctx, user, id).await?;
        let unchanged = self.title.is_none()
            && self.description.is_none()
            && self.target_date.is_keep()
            && self.status.is_none()
            && self.parent_goal_id.is_keep();
        if unchanged {
            return Err(invalid(
                "nothing to change: give title, description, target_date, status or parent_goal_id",
            ));
        }
        let title = self.title.map_or(current.title, |t| t.0);
        let description = match self.description {
            Some(description) => text(Some(description)),
            None => current.description,
        };
        let target = match self.target_date {
            Patch::Keep => current.target_date,
            Patch::Clear => None,
            Patch::Set(day) => text(Some(day)).map(|d| target_date(ctx, &d)).transpose()?,
        };
        let status = self.status.unwrap_or(current.status);
        let parent = match self.parent_goal_id {
            Patch::Keep => current.parent_id,
            Patch::Clear => None,
            Patch::Set(parent) => {
                if current.parent_id != Some(parent) {
                    check_parent(ctx, user, Some(id), parent).await?;
                }
                Some(parent)
            }
        };
        let now = ctx.clock.now_ms();
        let completed_at = match (status, current.status) {
            (Status::Completed, Status::Completed) => current.completed_at,
            (Status::Completed, _) => Some(now),
            _ => None,
        };
        let patch = GoalPatch {
            title,
            description,
            target_date: target,
            status,
            parent_id: parent,
            completed_at,
        };
        if !ctx.store.update_goal(user, id, patch, now).await? {
            return Err(not_found(id));
        }
        let goal = goal(ctx, user, id).await?;
        Ok(json!({"updated": goal.json(ctx)}))
    }
}

/// The step titles of a `decompose_goal` call: 1 to [`MAX_STEPS`], none blank. A bad one
/// refuses them all, so a plan is never half added.
#[derive(Debug)]
struct Steps(Vec<String>);

impl<'de> Deserialize<'de> for Steps {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let items = Vec::<Value>::deserialize(deserializer)?;
        if items.is_empty() || items.len() > MAX_STEPS {
            return Err(serde::de::Error::custom(format!(
                "must hold 1 to {MAX_STEPS} step titles, got {}",
                items.len()
            )));
        }
        let mut titles = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            match item.as_str().map(str::trim).filter(|s| !s.is_empty()) {
                Some(title) => titles.push(title.to_string()),
                None => {
                    return Err(serde::de::Error::custom(format!(
                        "step {index} must be a non-empty string; nothing was added"
                    )));
                }
            }
        }
        Ok(Self(titles))
    }
}

impl JsonSchema for Steps {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Steps".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_STEPS,
            "items": {"type": "string", "minLength": 1}
        })
    }
}

/// Break an active goal into ordered steps (appended after any existing ones).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DecomposeGoal {
    /// Id of the goal
    goal_id: i64,
    /// Step titles in the order they should be done
    steps: Steps,
}

impl TypedTool for DecomposeGoal {
    const NAME: &'static str = "decompose_goal";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "steps, plan, break down, split, milestones";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, id) = (user_id(ctx)?, self.goal_id);
        let current = goal(ctx, user, id).await?;
        if current.status != Status::Active {
            return Err(ToolError::Failed(format!(
                "goal {id} is {}; set its status to active before adding steps",
                current.status
            )));
        }
        let now = ctx.clock.now_ms();
        let added = ctx
            .store
            .add_goal_steps(user, id, &self.steps.0, now)
            .await?;
        let steps: Vec<Value> = added
            .into_iter()
            .zip(self.steps.0)
            .map(|((id, position), title)| json!({"id": id, "position": position, "title": title}))
            .collect();
        let goal = goal(ctx, user, id).await?;
        Ok(json!({
            "goal_id": id,
            "added": steps,
            "progress": goal.progress(),
            "steps_total": goal.steps_total,
        }))
    }
}

/// The first open step of every active goal, soonest target date first.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetNextActions {
    /// Most actions returned; default 20
    limit: Option<Count>,
}

impl TypedTool for GetNextActions {
    const NAME: &'static str = "get_next_actions";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "todo, next, what now, focus, steps";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let active = GoalFilter {
            status: Some(Status::Active),
            ..GoalFilter::default()
        };
        let goals = ctx.store.list_goals(user, active, None).await?;
        // The first open step of each active goal, in one query rather than one per goal.
        let open = ctx.store.open_goal_steps(user).await?;
        let mut first_open = std::collections::HashMap::new();
        for step in open {
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
                    if let Some(d) = &goal.target_date {
                        action["target_date"] = json!(d);
                    }
                    if goal.overdue(today) {
                        action["overdue"] = json!(true);
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
        actions.truncate(usize::try_from(LIST_LIMIT.of(self.limit)).unwrap_or(usize::MAX));
        Ok(json!({
            "count": actions.len(),
            "next_actions": actions,
            "goals_without_steps": without_steps,
        }))
    }
}

/// Mark a goal step done. The goal stays active unless complete_goal is true and no other step
/// is open.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompleteGoalStep {
    /// Id of the step
    step_id: i64,
    /// Also mark the goal completed (only when this was its last open step)
    complete_goal: Option<bool>,
}

impl TypedTool for CompleteGoalStep {
    const NAME: &'static str = "complete_goal_step";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "done, finish, check off, progress, step";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, step_id) = (user_id(ctx)?, self.step_id);
        let complete_goal = self.complete_goal.unwrap_or(false);
        let Some(step) = ctx.store.goal_step(user, step_id).await? else {
            return Err(ToolError::Failed(format!("step {step_id} not found")));
        };
        let others_open = ctx.store.other_open_goal_steps(&step).await?;
        if complete_goal && others_open > 0 {
            return Err(invalid(format!(
                "goal {} still has {others_open} other open step(s); complete them first, or set the goal's status with update_goal. Nothing was changed",
                step.goal_id
            )));
        }
        let already = step.done != 0;
        ctx.store
            .complete_goal_step(&step, complete_goal, ctx.clock.now_ms())
            .await?;
        let goal = goal(ctx, user, step.goal_id).await?;
        let next = ctx
            .store
            .goal_steps(goal.id)
            .await?
            .into_iter()
            .find(|s| s.done == 0)
            .map(|s| json!({"step_id": s.id, "title": s.title}));
        let mut out = json!({
            "step_id": step_id,
            "step": step.title,
            "goal_id": goal.id,
            "goal": goal.title,
            "goal_status": goal.status.as_str(),
            "progress": goal.progress(),
            "steps_done": goal.steps_done,
            "steps_total": goal.steps_total,
            "next_step": next,
        });
        if already {
            out["note"] = json!("this step was already done");
        } else if goal.status == Status::Active && goal.steps_done == goal.steps_total {
            out["note"] = json!(
                "all steps are done; the goal stays active until marked completed (update_goal status=completed)"
            );
        }
        Ok(out)
    }
}

/// A goal with its steps, progress, parent and sub-goals.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetGoalDetails {
    /// Id of the goal
    goal_id: i64,
}

impl TypedTool for GetGoalDetails {
    const NAME: &'static str = "get_goal_details";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "show, steps, progress, subgoals";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, id) = (user_id(ctx)?, self.goal_id);
        let goal = goal(ctx, user, id).await?;
        let steps = ctx.store.goal_steps(id).await?;
        let children = GoalFilter {
            parent: Some(id),
            ..GoalFilter::default()
        };
        let subs = ctx.store.list_goals(user, children, None).await?;
        let sub_goals: Vec<Value> = subs
            .iter()
            .map(|g| json!({"id": g.id, "title": g.title, "status": g.status.as_str(), "progress": g.progress()}))
            .collect();
        let mut out = goal.json(ctx);
        if let Some(parent_id) = goal.parent_id
            && let Some(parent) = ctx.store.goal(user, parent_id).await?
        {
            out["parent"] = json!({"id": parent.id, "title": parent.title});
        }
        out["steps"] = json!(steps.iter().map(|s| s.json(ctx)).collect::<Vec<_>>());
        out["sub_goals"] = json!(sub_goals);
        Ok(out)
    }
}

/// Counts of goals by status, steps done of total, and overdue goals.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GoalStats {}

impl TypedTool for GoalStats {
    const NAME: &'static str = "goal_stats";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "statistics, overview, progress, overdue, report";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let goals = ctx
            .store
            .list_goals(user_id(ctx)?, GoalFilter::default(), None)
            .await?;
        let count = |status: Status| goals.iter().filter(|g| g.status == status).count();
        let today = today(ctx);
        let overdue: Vec<Value> = goals
            .iter()
            .filter(|g| g.overdue(today))
            .map(|g| {
                let days = g.target().map(|d| (today - d).num_days());
                json!({"id": g.id, "title": g.title, "target_date": g.target_date, "days_overdue": days})
            })
            .collect();
        let open_in_active: i64 = goals
            .iter()
            .filter(|g| g.status == Status::Active)
            .map(|g| g.steps_total - g.steps_done)
            .sum();
        Ok(json!({
            "goals": {
                "total": goals.len(),
                "active": count(Status::Active),
                "completed": count(Status::Completed),
                "abandoned": count(Status::Abandoned),
            },
            "steps": {
                "done": goals.iter().map(|g| g.steps_done).sum::<i64>(),
                "total": goals.iter().map(|g| g.steps_total).sum::<i64>(),
                "open_in_active_goals": open_in_active,
            },
            "overdue_count": overdue.len(),
            "overdue": overdue,
        }))
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments(message.into())
}

fn not_found(id: i64) -> ToolError {
    super::common::not_found("goal", id)
}

fn today(ctx: &ToolContext) -> NaiveDate {
    ctx.clock.now().with_timezone(&ctx.timezone).date_naive()
}

fn target_date(ctx: &ToolContext, text: &str) -> Result<String, ToolError> {
    parse_date(text, ctx.timezone, ctx.clock.now())
        .map(|d| d.format("%Y-%m-%d").to_string())
        .map_err(bad_date("target_date"))
}

impl Goal {
    /// Percent of steps done; without steps, 100 for a completed goal and 0 otherwise.
    fn progress(&self) -> i64 {
        if self.steps_total > 0 {
            (self.steps_done * 100 + self.steps_total / 2) / self.steps_total
        } else if self.status == Status::Completed {
            100
        } else {
            0
        }
    }

    fn target(&self) -> Option<NaiveDate> {
        self.target_date
            .as_deref()
            .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
    }

    fn overdue(&self, today: NaiveDate) -> bool {
        self.status == Status::Active && self.target().is_some_and(|d| d < today)
    }

    fn json(&self, ctx: &ToolContext) -> Value {
        let mut map = Map::new();
        map.insert("id".into(), json!(self.id));
        map.insert("title".into(), json!(self.title));
        map.insert("status".into(), json!(self.status.as_str()));
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

async fn goal(ctx: &ToolContext, user: i64, id: i64) -> Result<Goal, ToolError> {
    ctx.store.goal(user, id).await?.ok_or_else(|| not_found(id))
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
        current = match ctx.store.goal_parent(user, id).await? {
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

impl Step {
    fn json(&self, ctx: &ToolContext) -> Value {
        let mut out = json!({
            "id": self.id,
            "position": self.position,
            "title": self.title,
            "done": self.done != 0,
        });
        if let Some(at) = self.completed_at {
            out["completed"] = json!(format_local(at, ctx.timezone));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// A context whose clock reads 2026-03-10 12:00 UTC.
    async fn context() -> (ToolContext, tempfile::TempDir) {
        let now = chrono::Utc.with_ymd_and_hms(2026, 3, 10, 12, 0, 0).single();
        crate::tool::test_context_at(now.expect("valid")).await
    }

    async fn call(ctx: &ToolContext, name: &str, args: Value) -> Result<Value, ToolError> {
        crate::tool::test_calls::call(tools(), ctx, name, args).await
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
        crate::tool::test_calls::rows(ctx, table).await
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
        ctx.user_id = crate::tool::other_user(&ctx).await.user_id;
        for (args, expected) in [
            (
                json!({"title": "  "}),
                "`title`: must be a non-empty string",
            ),
            (json!({}), "missing field `title`"),
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
        assert!(e.to_string().contains("not a known user"));
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
                .contains("expected one of `active`, `completed`, `abandoned`, `all`")
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
            (
                json!({"goal_id": a, "status": "paused"}),
                "unknown variant `paused`",
            ),
            (
                json!({"goal_id": a, "target_date": "soon"}),
                "`target_date`",
            ),
            (
                json!({"goal_id": a, "title": ""}),
                "`title`: must be a non-empty string",
            ),
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

    /// In `update_goal` a field left out keeps its value and `null` clears it.
    #[tokio::test]
    async fn update_goal_tells_null_from_absent() {
        let (ctx, _dir) = context().await;
        let parent = new_goal(&ctx, json!({"title": "P"})).await;
        let g = new_goal(
            &ctx,
            json!({"title": "G", "target_date": "2026-06-01", "parent_goal_id": parent}),
        )
        .await;
        let kept = ok(&ctx, "update_goal", json!({"goal_id": g, "title": "G2"})).await;
        assert_eq!(kept["updated"]["target_date"], "2026-06-01");
        assert_eq!(kept["updated"]["parent_goal_id"], parent);
        let cleared = ok(
            &ctx,
            "update_goal",
            json!({"goal_id": g, "target_date": null}),
        )
        .await;
        assert!(cleared["updated"].get("target_date").is_none());
        assert_eq!(cleared["updated"]["parent_goal_id"], parent, "absent keeps");
        let cleared = ok(
            &ctx,
            "update_goal",
            json!({"goal_id": g, "parent_goal_id": null}),
        )
        .await;
        assert!(cleared["updated"].get("parent_goal_id").is_none());
        assert_eq!(cleared["updated"]["title"], "G2");
        let e = err(
            &ctx,
            "update_goal",
            json!({"goal_id": g, "parent_goal_id": "none"}),
        )
        .await;
        assert!(e.to_string().contains("`parent_goal_id`"), "{e}");
        // Only the two clearable fields take null in the schema the model sees.
        let tool = tools()
            .into_iter()
            .find(|t| t.info().name == "update_goal")
            .expect("tool");
        let properties = &tool.info().parameters["properties"];
        assert_eq!(properties["target_date"]["type"], json!(["string", "null"]));
        assert_eq!(
            properties["parent_goal_id"]["type"],
            json!(["integer", "null"])
        );
        assert_eq!(properties["title"]["type"], "string");
        assert_eq!(properties["status"]["type"], "string");
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
            (json!({"goal_id": g}), "missing field `steps`"),
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
