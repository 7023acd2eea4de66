//! The `tasks` tools: a per-user to-do list with priorities, categories, due dates and tags.
//!
//! The bottom of this file also holds the small helpers the other organiser families (notes,
//! bookmarks, contacts, calendar) share: the calling user, tags as JSON text, case-insensitive
//! LIKE patterns and a query builder that numbers `$N` placeholders.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::common::{
    Bind, Changes, Sql, bad_date, db, delete_owned, id_arg, like_pattern, not_found, opt_text,
    tags_arg, tags_json, tags_value, user_id, write_tx,
};
use super::time::{day_range, format_local, parse_date, parse_datetime};
use super::{Args, Risk, Tool, ToolContext, ToolError, ToolInfo, list_limit};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    [
        Op::Add,
        Op::BatchAdd,
        Op::List,
        Op::Complete,
        Op::Update,
        Op::Delete,
    ]
    .into_iter()
    .map(|op| Arc::new(TaskTool::new(op)) as Arc<dyn Tool>)
    .collect()
}

const PRIORITIES: [&str; 4] = ["low", "medium", "high", "urgent"];
const STATUSES: [&str; 3] = ["pending", "in_progress", "done"];
const MAX_BATCH: usize = 50;

#[derive(Clone, Copy, Debug)]
enum Op {
    Add,
    BatchAdd,
    List,
    Complete,
    Update,
    Delete,
}

struct TaskTool {
    info: ToolInfo,
    op: Op,
}

/// The fields of one new task, shared by `add_task`, the items of `batch_add_tasks` and
/// `update_task`.
fn task_properties() -> serde_json::Map<String, Value> {
    let mut properties = serde_json::Map::new();
    properties.insert(
        "title".into(),
        json!({"type": "string", "description": "What to do, short"}),
    );
    properties.insert(
        "description".into(),
        json!({"type": "string", "description": "Details"}),
    );
    properties.insert(
        "priority".into(),
        json!({"type": "string", "enum": PRIORITIES, "description": "Default: medium"}),
    );
    properties.insert(
        "category".into(),
        json!({"type": "string", "description": "Free-form group such as work, home, shopping"}),
    );
    properties.insert(
        "due".into(),
        json!({"type": "string", "description": "Due date/time in the user's timezone: YYYY-MM-DD (end of that day), YYYY-MM-DD HH:MM, RFC 3339, today, tomorrow, 'in 2 hours'"}),
    );
    properties.insert(
        "tags".into(),
        json!({"type": "array", "items": {"type": "string"}, "description": "Labels, e.g. [\"errand\"]"}),
    );
    properties
}

impl TaskTool {
    fn new(op: Op) -> Self {
        let info = match op {
            Op::Add => ToolInfo::new(
                "add_task",
                "tasks",
                "Add a task to the user's to-do list. Returns its id.",
                json!({
                    "type": "object",
                    "properties": task_properties(),
                    "required": ["title"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["todo", "to-do", "reminder", "chore", "create"]),
            Op::BatchAdd => ToolInfo::new(
                "batch_add_tasks",
                "tasks",
                "Add several tasks at once; each is checked on its own and gets its own id or error.",
                json!({
                    "type": "object",
                    "properties": {
                        "tasks": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": MAX_BATCH,
                            "description": "The tasks, each with the fields of add_task",
                            "items": {
                                "type": "object",
                                "properties": task_properties(),
                                "required": ["title"],
                                "additionalProperties": false
                            }
                        }
                    },
                    "required": ["tasks"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["todo", "many", "multiple", "bulk"]),
            Op::List => ToolInfo::new(
                "list_tasks",
                "tasks",
                "List the user's tasks, soonest due first, then by priority. By default only tasks not done.",
                json!({
                    "type": "object",
                    "properties": {
                        "status": {"type": "string", "enum": ["pending", "in_progress", "done", "all"], "description": "Default: everything not done"},
                        "priority": {"type": "string", "enum": PRIORITIES},
                        "category": {"type": "string", "description": "Exact category (case-insensitive)"},
                        "search": {"type": "string", "description": "Words in the title or description (case-insensitive)"},
                        "tag": {"type": "string", "description": "Only tasks with this tag"},
                        "due_before": {"type": "string", "description": "Due before this date/time (YYYY-MM-DD, YYYY-MM-DD HH:MM, tomorrow …)"},
                        "due_after": {"type": "string", "description": "Due at or after this date/time"},
                        "overdue": {"type": "boolean", "description": "Only tasks past their due time and not done"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 20, at most 50"}
                    },
                    "additionalProperties": false
                }),
            )
            .limit("limit", 20, 50)
            .tags(&["todo", "show", "due", "overdue", "agenda"]),
            Op::Complete => ToolInfo::new(
                "complete_task",
                "tasks",
                "Mark a task as done.",
                json!({
                    "type": "object",
                    "properties": {"task_id": {"type": "integer", "description": "The task's id"}},
                    "required": ["task_id"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["todo", "done", "finish", "check off"]),
            Op::Update => {
                let mut properties = task_properties();
                properties.insert(
                    "task_id".into(),
                    json!({"type": "integer", "description": "The task's id"}),
                );
                properties.insert(
                    "status".into(),
                    json!({"type": "string", "enum": STATUSES}),
                );
                properties.insert(
                    "due".into(),
                    json!({"type": "string", "description": "New due date/time (as in add_task); empty string removes it"}),
                );
                ToolInfo::new(
                    "update_task",
                    "tasks",
                    "Change a task: any of title, description, priority, category, due, tags (replaced), status.",
                    json!({
                        "type": "object",
                        "properties": properties,
                        "required": ["task_id"],
                        "additionalProperties": false
                    }),
                )
                .risk(Risk::Write)
                .tags(&["todo", "edit", "change", "reschedule"])
            }
            Op::Delete => ToolInfo::new(
                "delete_task",
                "tasks",
                "Delete a task for good.",
                json!({
                    "type": "object",
                    "properties": {"task_id": {"type": "integer", "description": "The task's id"}},
                    "required": ["task_id"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Destructive)
            .tags(&["todo", "remove"]),
        };
        Self { info, op }
    }
}

#[async_trait]
impl Tool for TaskTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let user = user_id(ctx)?;
        let result = match self.op {
            Op::Add => {
                let task = NewTask::read(ctx, &arguments)?;
                let id = insert(ctx, user, &task).await?;
                json!({"id": id, "task": task.to_json(id, ctx)})
            }
            Op::BatchAdd => batch_add(ctx, user, &arguments).await?,
            Op::List => list(ctx, user, &arguments, list_limit(&self.info, &arguments)).await?,
            Op::Complete => complete(ctx, user, &arguments).await?,
            Op::Update => update(ctx, user, &arguments).await?,
            Op::Delete => {
                let id = id_arg(&arguments, "task_id")?;
                let sql = "DELETE FROM tasks WHERE id = $1 AND user_id = $2 RETURNING title";
                delete_owned(ctx, user, sql, id, "task", "title").await?
            }
        };
        Ok(result.to_string())
    }
}

/// A task as the model described it, checked.
struct NewTask {
    title: String,
    description: Option<String>,
    priority: &'static str,
    category: Option<String>,
    due_at: Option<i64>,
    tags: Vec<String>,
}

impl NewTask {
    fn read(ctx: &ToolContext, arguments: &Value) -> Result<Self, ToolError> {
        let args = Args::new(arguments);
        let priority = match args.opt_str("priority") {
            Some(p) => priority(p)?,
            None => "medium",
        };
        let due_at = match opt_text(arguments, "due") {
            Some(due) => Some(parse_due(&due, ctx.timezone, ctx.clock.now())?),
            None => None,
        };
        Ok(Self {
            title: args.str("title")?.trim().to_string(),
            description: opt_text(arguments, "description"),
            priority,
            category: opt_text(arguments, "category"),
            due_at,
            tags: tags_arg(arguments, "tags"),
        })
    }

    fn to_json(&self, id: i64, ctx: &ToolContext) -> Value {
        task_json(
            ctx,
            TaskRow {
                id,
                title: self.title.clone(),
                description: self.description.clone(),
                priority: self.priority.to_string(),
                category: self.category.clone(),
                due_at: self.due_at,
                tags: tags_json(&self.tags),
                status: "pending".into(),
            },
        )
    }
}

fn priority(text: &str) -> Result<&'static str, ToolError> {
    let lower = text.trim().to_lowercase();
    PRIORITIES.into_iter().find(|p| *p == lower).ok_or_else(|| {
        ToolError::InvalidArguments(format!(
            "priority {text:?} is not one of low, medium, high, urgent"
        ))
    })
}

fn priority_rank(priority: &str) -> i64 {
    PRIORITIES
        .iter()
        .position(|p| *p == priority)
        .map_or(2, |i| i as i64 + 1)
}

fn status(text: &str) -> Result<&'static str, ToolError> {
    let lower = text.trim().to_lowercase();
    STATUSES.into_iter().find(|s| *s == lower).ok_or_else(|| {
        ToolError::InvalidArguments(format!(
            "status {text:?} is not one of pending, in_progress, done"
        ))
    })
}

/// A due time: a bare date (or today/tomorrow) means the end of that local day, so a task due
/// today is not overdue in the morning.
fn parse_due(text: &str, tz: Tz, now: DateTime<Utc>) -> Result<i64, ToolError> {
    let trimmed = text.trim();
    let lower = trimmed.to_lowercase();
    let bare_date = NaiveDate::parse_from_str(trimmed, "%Y-%m-%d").is_ok()
        || matches!(lower.as_str(), "today" | "tomorrow" | "yesterday");
    if bare_date {
        let date = parse_date(trimmed, tz, now).map_err(bad_date("due"))?;
        let (_, end) = day_range(date, tz).map_err(bad_date("due"))?;
        return Ok((end - Duration::minutes(1)).timestamp_millis());
    }
    parse_datetime(trimmed, tz, now)
        .map(|t| t.timestamp_millis())
        .map_err(bad_date("due"))
}

async fn insert(ctx: &ToolContext, user: i64, task: &NewTask) -> Result<i64, ToolError> {
    let now = ctx.clock.now_ms();
    let mut tx = write_tx(ctx).await?;
    let row = sqlx::query(
        "INSERT INTO tasks (user_id, title, description, priority, priority_rank, category, due_at, tags, status, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $9) RETURNING id",
    )
    .bind(user)
    .bind(task.title.clone())
    .bind(task.description.clone())
    .bind(task.priority)
    .bind(priority_rank(task.priority))
    .bind(task.category.clone())
    .bind(task.due_at)
    .bind(tags_json(&task.tags))
    .bind(now)
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    row.try_get("id").map_err(db)
}

async fn batch_add(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let items = Args::new(arguments).array("tasks")?;
    if items.is_empty() || items.len() > MAX_BATCH {
        return Err(ToolError::InvalidArguments(format!(
            "`tasks` must hold 1 to {MAX_BATCH} tasks"
        )));
    }
    let mut results = Vec::with_capacity(items.len());
    let mut added = 0;
    for (index, item) in items.iter().enumerate() {
        let outcome = match NewTask::read(ctx, item) {
            Ok(task) => insert(ctx, user, &task).await.map(|id| (id, task.title)),
            Err(err) => Err(err),
        };
        results.push(match outcome {
            Ok((id, title)) => {
                added += 1;
                json!({"index": index, "id": id, "title": title})
            }
            Err(err) => json!({"index": index, "error": err.to_string()}),
        });
    }
    Ok(json!({"added": added, "failed": items.len() - added, "results": results}))
}

struct TaskRow {
    id: i64,
    title: String,
    description: Option<String>,
    priority: String,
    category: Option<String>,
    due_at: Option<i64>,
    tags: String,
    status: String,
}

const TASK_COLUMNS: &str = "id, title, description, priority, category, due_at, tags, status";

fn task_from_row(row: &AnyRow) -> Result<TaskRow, ToolError> {
    Ok(TaskRow {
        id: row.try_get("id").map_err(db)?,
        title: row.try_get("title").map_err(db)?,
        description: row.try_get("description").map_err(db)?,
        priority: row.try_get("priority").map_err(db)?,
        category: row.try_get("category").map_err(db)?,
        due_at: row.try_get("due_at").map_err(db)?,
        tags: row.try_get("tags").map_err(db)?,
        status: row.try_get("status").map_err(db)?,
    })
}

fn task_json(ctx: &ToolContext, task: TaskRow) -> Value {
    let now = ctx.clock.now_ms();
    let mut value = json!({
        "id": task.id,
        "title": task.title,
        "priority": task.priority,
        "status": task.status,
        "tags": tags_value(&task.tags),
    });
    if let Some(description) = task.description {
        value["description"] = json!(description);
    }
    if let Some(category) = task.category {
        value["category"] = json!(category);
    }
    if let Some(due) = task.due_at {
        value["due"] = json!(format_local(due, ctx.timezone));
        value["overdue"] = json!(due < now && task.status != "done");
    }
    value
}

async fn list(
    ctx: &ToolContext,
    user: i64,
    arguments: &Value,
    limit: i64,
) -> Result<Value, ToolError> {
    let args = Args::new(arguments);
    let now = ctx.clock.now();
    let mut query = Sql::new(&format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE user_id = "
    ));
    query.bind(Bind::Int(user));
    match args.opt_str("status").map(|s| s.trim().to_lowercase()) {
        None => query.push(" AND status <> 'done'"),
        Some(s) if s == "all" => {}
        Some(s) => {
            let s = status(&s)?;
            query.push(" AND status = ");
            query.bind(Bind::Text(s.into()));
        }
    }
    if let Some(p) = args.opt_str("priority") {
        query.push(" AND priority = ");
        query.bind(Bind::Text(priority(p)?.into()));
    }
    if let Some(category) = opt_text(arguments, "category") {
        query.push(" AND LOWER(category) = ");
        query.bind(Bind::Text(category.to_lowercase()));
    }
    if let Some(search) = opt_text(arguments, "search") {
        let pattern = like_pattern(&search);
        query.push(" AND (LOWER(title) LIKE ");
        query.bind(Bind::Text(pattern.clone()));
        query.push(" ESCAPE '\\' OR LOWER(COALESCE(description, '')) LIKE ");
        query.bind(Bind::Text(pattern));
        query.push(" ESCAPE '\\')");
    }
    if let Some(tag) = opt_text(arguments, "tag") {
        query.push_tag_filter(&tag);
    }
    if let Some(before) = opt_text(arguments, "due_before") {
        let t = parse_datetime(&before, ctx.timezone, now).map_err(bad_date("due_before"))?;
        query.push(" AND due_at < ");
        query.bind(Bind::Int(t.timestamp_millis()));
    }
    if let Some(after) = opt_text(arguments, "due_after") {
        let t = parse_datetime(&after, ctx.timezone, now).map_err(bad_date("due_after"))?;
        query.push(" AND due_at >= ");
        query.bind(Bind::Int(t.timestamp_millis()));
    }
    if args.opt_bool("overdue") == Some(true) {
        query.push(" AND status <> 'done' AND due_at < ");
        query.bind(Bind::Int(now.timestamp_millis()));
    }
    query.push(" ORDER BY due_at IS NULL, due_at, priority_rank DESC, id LIMIT ");
    query.bind(Bind::Int(limit + 1));
    let rows = query.fetch_all(ctx).await?;
    let more = rows.len() as i64 > limit;
    let tasks = rows
        .iter()
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(|row| task_from_row(row).map(|t| task_json(ctx, t)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({"count": tasks.len(), "more": more, "tasks": tasks}))
}

async fn fetch_task(ctx: &ToolContext, user: i64, id: i64) -> Result<TaskRow, ToolError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1 AND user_id = $2"
    )))
    .bind(id)
    .bind(user)
    .fetch_optional(ctx.store.pool())
    .await
    .map_err(db)?
    .ok_or_else(|| not_found("task", id))?;
    task_from_row(&row)
}

async fn complete(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let id = id_arg(arguments, "task_id")?;
    let task = fetch_task(ctx, user, id).await?;
    if task.status == "done" {
        return Ok(json!({"id": id, "already_done": true, "task": task_json(ctx, task)}));
    }
    let now = ctx.clock.now_ms();
    sqlx::query(
        "UPDATE tasks SET status = 'done', completed_at = $1, updated_at = $1 WHERE id = $2 AND user_id = $3",
    )
    .bind(now)
    .bind(id)
    .bind(user)
    .execute(ctx.store.pool())
    .await
    .map_err(db)?;
    let task = fetch_task(ctx, user, id).await?;
    Ok(json!({"completed": id, "task": task_json(ctx, task)}))
}

async fn update(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let args = Args::new(arguments);
    let id = id_arg(arguments, "task_id")?;
    let mut changes = Changes::default();
    if arguments.get("title").is_some() {
        changes.set("title", Bind::Text(args.str("title")?.trim().to_string()));
    }
    if arguments.get("description").is_some() {
        changes.set(
            "description",
            Bind::OptText(opt_text(arguments, "description")),
        );
    }
    if let Some(p) = args.opt_str("priority") {
        let p = priority(p)?;
        changes.set("priority", Bind::Text(p.into()));
        changes.set("priority_rank", Bind::Int(priority_rank(p)));
    }
    if arguments.get("category").is_some() {
        changes.set("category", Bind::OptText(opt_text(arguments, "category")));
    }
    if arguments.get("due").is_some() {
        let due = match opt_text(arguments, "due") {
            Some(due) => Some(parse_due(&due, ctx.timezone, ctx.clock.now())?),
            None => None,
        };
        changes.set("due_at", Bind::OptInt(due));
    }
    if arguments.get("tags").is_some() {
        changes.set("tags", Bind::Text(tags_json(&tags_arg(arguments, "tags"))));
    }
    if let Some(s) = args.opt_str("status") {
        let s = status(s)?;
        changes.set("status", Bind::Text(s.into()));
        let completed = (s == "done").then(|| ctx.clock.now_ms());
        changes.set("completed_at", Bind::OptInt(completed));
    }
    if changes.is_empty() {
        return Err(ToolError::InvalidArguments(
            "nothing to change: give at least one of title, description, priority, category, due, tags, status".into(),
        ));
    }
    changes.set("updated_at", Bind::Int(ctx.clock.now_ms()));
    if !changes.apply(ctx, "tasks", id, user).await? {
        return Err(not_found("task", id));
    }
    let task = fetch_task(ctx, user, id).await?;
    Ok(json!({"updated": id, "task": task_json(ctx, task)}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::test_context;

    fn tool(name: &str) -> Arc<dyn Tool> {
        tools()
            .into_iter()
            .find(|t| t.info().name == name)
            .expect("tool exists")
    }

    async fn call(ctx: &ToolContext, name: &str, args: Value) -> Result<Value, ToolError> {
        let text = tool(name).call(ctx, args).await?;
        Ok(serde_json::from_str(&text).expect("tools answer JSON"))
    }

    async fn ok(ctx: &ToolContext, name: &str, args: Value) -> Value {
        call(ctx, name, args).await.expect("call succeeds")
    }

    async fn err(ctx: &ToolContext, name: &str, args: Value) -> String {
        call(ctx, name, args)
            .await
            .expect_err("call fails")
            .to_string()
    }

    /// On a full disk `add_task` fails: it never answers "added" for a task that was not stored
    /// (SQLite's autocommit handed back the new id before the commit failed).
    #[tokio::test]
    async fn adding_on_a_full_disk_fails_and_stores_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let disk = match hearth_testkit::tmpfs::Tmpfs::mount(dir.path(), 2 * 1024 * 1024) {
            Ok(disk) => disk,
            Err(why) => return eprintln!("skipped: {why}"),
        };
        let url = format!("sqlite://{}", disk.path().join("hearth.db").display());
        let store = crate::store::Store::open(&url).await.expect("open");
        let ctx = crate::tool::test_context_on(store, disk.path()).await;
        ok(&ctx, "add_task", json!({"title": "before"})).await;

        disk.fill().expect("fill the disk");
        for _ in 0..3 {
            let message = err(&ctx, "add_task", json!({"title": "x".repeat(2000)})).await;
            assert!(message.contains("full"), "{message}");
        }
        disk.free().expect("free the disk");
        let titles: Vec<String> = sqlx::query_scalar("SELECT title FROM tasks")
            .fetch_all(ctx.store.pool())
            .await
            .expect("read");
        assert_eq!(titles, ["before"], "nothing half-stored");
        ok(&ctx, "add_task", json!({"title": "after"})).await;
    }

    async fn count(ctx: &ToolContext) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM tasks")
            .fetch_one(ctx.store.pool())
            .await
            .expect("count")
    }

    /// A second user in the same database, to prove rows stay their owner's.
    async fn other_user(ctx: &ToolContext) -> ToolContext {
        let user = ctx
            .store
            .allow_identity("test", "u2", None, "config", false, 0)
            .await
            .expect("user");
        let mut other = ctx.clone();
        other.user_id = Some(user.user_id);
        other
    }

    #[tokio::test]
    async fn add_then_list_sorted_by_due_then_priority() {
        let (ctx, _dir) = test_context().await;
        let later = ok(
            &ctx,
            "add_task",
            json!({"title": "File taxes", "due": "2099-04-30", "priority": "low", "tags": ["Money", "#money"]}),
        )
        .await;
        assert_eq!(
            later["task"]["due"], "2099-04-30 23:59",
            "a bare date means the end of it"
        );
        assert_eq!(later["task"]["tags"], json!(["money"]));
        ok(&ctx, "add_task", json!({"title": "Call plumber", "due": "2099-04-30 08:00", "priority": "urgent", "category": "Home"})).await;
        ok(
            &ctx,
            "add_task",
            json!({"title": "Buy milk", "due": "2099-04-30 08:00", "priority": "high"}),
        )
        .await;
        ok(&ctx, "add_task", json!({"title": "Someday: learn piano"})).await;

        let listed = ok(&ctx, "list_tasks", json!({})).await;
        let titles: Vec<_> = listed["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["title"].as_str().expect("title").to_string())
            .collect();
        assert_eq!(
            titles,
            [
                "Call plumber",
                "Buy milk",
                "File taxes",
                "Someday: learn piano"
            ]
        );
        assert_eq!(listed["tasks"][3]["priority"], "medium");

        let found = ok(&ctx, "list_tasks", json!({"search": "PLUMB"})).await;
        assert_eq!(found["count"], 1);
        let found = ok(&ctx, "list_tasks", json!({"category": "home"})).await;
        assert_eq!(found["tasks"][0]["title"], "Call plumber");
        let found = ok(&ctx, "list_tasks", json!({"tag": "money"})).await;
        assert_eq!(found["tasks"][0]["title"], "File taxes");
        let found = ok(&ctx, "list_tasks", json!({"priority": "high"})).await;
        assert_eq!(found["tasks"][0]["title"], "Buy milk");
        let found = ok(
            &ctx,
            "list_tasks",
            json!({"due_before": "2099-04-30 12:00"}),
        )
        .await;
        assert_eq!(found["count"], 2);
        let found = ok(&ctx, "list_tasks", json!({"due_after": "2099-04-30 12:00"})).await;
        assert_eq!(found["tasks"][0]["title"], "File taxes");
        let limited = ok(&ctx, "list_tasks", json!({"limit": 1})).await;
        assert_eq!(
            (limited["count"].clone(), limited["more"].clone()),
            (json!(1), json!(true))
        );
    }

    #[tokio::test]
    async fn search_treats_like_wildcards_literally() {
        let (ctx, _dir) = test_context().await;
        ok(&ctx, "add_task", json!({"title": "100% done"})).await;
        ok(&ctx, "add_task", json!({"title": "1000 things"})).await;
        let found = ok(&ctx, "list_tasks", json!({"search": "0%"})).await;
        assert_eq!(found["count"], 1);
    }

    #[tokio::test]
    async fn overdue_complete_and_status_filters() {
        let (ctx, _dir) = test_context().await;
        let old = ok(
            &ctx,
            "add_task",
            json!({"title": "Old", "due": "2000-01-01 10:00"}),
        )
        .await;
        ok(
            &ctx,
            "add_task",
            json!({"title": "Future", "due": "2099-01-01"}),
        )
        .await;
        let overdue = ok(&ctx, "list_tasks", json!({"overdue": true})).await;
        assert_eq!(overdue["count"], 1);
        assert_eq!(overdue["tasks"][0]["overdue"], true);

        let id = old["id"].as_i64().expect("id");
        let done = ok(&ctx, "complete_task", json!({"task_id": id})).await;
        assert_eq!(done["task"]["status"], "done");
        let again = ok(&ctx, "complete_task", json!({"task_id": id})).await;
        assert_eq!(again["already_done"], true);
        assert_eq!(ok(&ctx, "list_tasks", json!({})).await["count"], 1);
        assert_eq!(
            ok(&ctx, "list_tasks", json!({"status": "done"})).await["count"],
            1
        );
        assert_eq!(
            ok(&ctx, "list_tasks", json!({"status": "all"})).await["count"],
            2
        );
        assert_eq!(
            ok(&ctx, "list_tasks", json!({"overdue": true})).await["count"],
            0
        );
    }

    #[tokio::test]
    async fn update_changes_fields_and_clears_due() {
        let (ctx, _dir) = test_context().await;
        let added = ok(
            &ctx,
            "add_task",
            json!({"title": "Draft", "due": "2099-01-01"}),
        )
        .await;
        let id = added["id"].as_i64().expect("id");
        let updated = ok(
            &ctx,
            "update_task",
            json!({"task_id": id, "title": "Final", "priority": "urgent", "status": "in_progress", "due": "", "tags": "a, b"}),
        )
        .await;
        let task = &updated["task"];
        assert_eq!(task["title"], "Final");
        assert_eq!(task["priority"], "urgent");
        assert_eq!(task["status"], "in_progress");
        assert_eq!(task["tags"], json!(["a", "b"]));
        assert!(task.get("due").is_none(), "{task}");
        let message = err(&ctx, "update_task", json!({"task_id": id})).await;
        assert!(message.contains("nothing to change"), "{message}");
        let message = err(&ctx, "update_task", json!({"task_id": id, "title": " "})).await;
        assert!(message.contains("`title` is required"), "{message}");
        let message = err(
            &ctx,
            "update_task",
            json!({"task_id": id, "status": "finished"}),
        )
        .await;
        assert!(message.contains("pending, in_progress, done"), "{message}");
        assert_eq!(
            ok(&ctx, "list_tasks", json!({})).await["tasks"][0]["title"],
            "Final"
        );
    }

    #[tokio::test]
    async fn bad_input_is_refused_and_stores_nothing() {
        let (ctx, _dir) = test_context().await;
        let message = err(&ctx, "add_task", json!({"title": "  "})).await;
        assert!(message.contains("`title` is required"), "{message}");
        let message = err(
            &ctx,
            "add_task",
            json!({"title": "x", "due": "next blursday"}),
        )
        .await;
        assert!(
            message.contains("`due`") && message.contains("YYYY-MM-DD HH:MM"),
            "{message}"
        );
        let message = err(&ctx, "add_task", json!({"title": "x", "priority": "asap"})).await;
        assert!(message.contains("low, medium, high, urgent"), "{message}");
        let message = err(&ctx, "list_tasks", json!({"due_before": "soonish"})).await;
        assert!(message.contains("`due_before`"), "{message}");
        assert_eq!(count(&ctx).await, 0);

        let mut anonymous = ctx.clone();
        anonymous.user_id = None;
        let message = err(&anonymous, "add_task", json!({"title": "x"})).await;
        assert!(message.contains("not a known user"), "{message}");
    }

    #[tokio::test]
    async fn unknown_and_foreign_ids_are_not_found() {
        let (ctx, _dir) = test_context().await;
        let added = ok(&ctx, "add_task", json!({"title": "Mine"})).await;
        let id = added["id"].as_i64().expect("id");
        let other = other_user(&ctx).await;
        for name in ["complete_task", "delete_task"] {
            let message = err(&other, name, json!({"task_id": id})).await;
            assert_eq!(message, format!("task {id} not found"));
        }
        let message = err(
            &other,
            "update_task",
            json!({"task_id": id, "title": "Theirs"}),
        )
        .await;
        assert_eq!(message, format!("task {id} not found"));
        assert_eq!(ok(&other, "list_tasks", json!({})).await["count"], 0);
        assert_eq!(
            err(&ctx, "delete_task", json!({"task_id": 42})).await,
            "task 42 not found"
        );

        let deleted = ok(&ctx, "delete_task", json!({"task_id": id.to_string()})).await;
        assert_eq!(deleted["title"], "Mine");
        assert_eq!(count(&ctx).await, 0);
    }

    #[tokio::test]
    async fn batch_reports_each_item() {
        let (ctx, _dir) = test_context().await;
        let result = ok(
            &ctx,
            "batch_add_tasks",
            json!({"tasks": [{"title": "One"}, {"title": ""}, {"title": "Three", "due": "someday"}, {"title": "Four", "priority": "high"}]}),
        )
        .await;
        assert_eq!(result["added"], 2);
        assert_eq!(result["failed"], 2);
        assert!(result["results"][0]["id"].is_i64());
        assert!(
            result["results"][1]["error"]
                .as_str()
                .expect("error")
                .contains("title")
        );
        assert!(
            result["results"][2]["error"]
                .as_str()
                .expect("error")
                .contains("due")
        );
        assert_eq!(result["results"][3]["title"], "Four");
        assert_eq!(count(&ctx).await, 2);
        let message = err(&ctx, "batch_add_tasks", json!({"tasks": []})).await;
        assert!(message.contains("1 to 50"), "{message}");
    }

    #[test]
    fn tools_have_the_catalogue_names_and_risks() {
        let names: Vec<_> = tools().iter().map(|t| t.info().name.clone()).collect();
        assert_eq!(
            names,
            [
                "add_task",
                "batch_add_tasks",
                "list_tasks",
                "complete_task",
                "update_task",
                "delete_task"
            ]
        );
        assert_eq!(tool("delete_task").info().risk, Risk::Destructive);
        assert_eq!(tool("list_tasks").info().risk, Risk::Safe);
        assert_eq!(tool("add_task").info().risk, Risk::Write);
    }
}
