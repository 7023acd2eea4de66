//! The `tasks` tools: a per-user to-do list with priorities, categories, due dates and tags.
//! Each tool is its argument type ([`TypedTool`]); the SQL is in `store::task`.

use std::sync::Arc;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::common::{bad_date, deleted, not_found, tags_value, user_id};
use super::time::{day_range, format_local, parse_date, parse_datetime};
use super::typed::{Batch, Count, Limit, NonEmpty, Tags, text};
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::store::task::{
    NewTask, Statuses, TaskFilter, TaskPatch, TaskPriority as Priority, TaskRow,
    TaskStatus as Status,
};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<AddTask>(),
        typed::<BatchAddTasks>(),
        typed::<ListTasks>(),
        typed::<CompleteTask>(),
        typed::<UpdateTask>(),
        typed::<DeleteTask>(),
    ]
}

const MAX_BATCH: usize = 50;
const GROUP: &str = "tasks";
const LIST_LIMIT: Limit = Limit::new(20, 50);

// `list_tasks` also takes `all`.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ListStatus {
    Pending,
    InProgress,
    Done,
    All,
}

/// Add a task to the user's to-do list. Returns its id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddTask {
    /// What to do, short
    title: NonEmpty,
    /// Details
    description: Option<String>,
    /// Default: medium
    priority: Option<Priority>,
    /// Free-form group such as work, home, shopping
    category: Option<String>,
    /// Due date/time in the user's timezone: YYYY-MM-DD (end of that day), YYYY-MM-DD HH:MM,
    /// RFC 3339, today, tomorrow, 'in 2 hours'
    due: Option<String>,
    /// Labels, e.g. ["errand"]
    #[serde(default)]
    tags: Tags,
}

impl AddTask {
    async fn add(self, ctx: &ToolContext, user: i64) -> Result<(i64, TaskRow), ToolError> {
        let priority = self.priority.unwrap_or(Priority::Medium);
        let due_at = text(self.due)
            .map(|due| parse_due(&due, ctx.timezone, ctx.clock.now()))
            .transpose()?;
        let task = NewTask {
            title: self.title.0,
            description: text(self.description),
            priority,
            category: text(self.category),
            due_at,
            tags: self.tags.to_json(),
        };
        let id = ctx
            .store
            .insert_task(user, &task, ctx.clock.now_ms())
            .await?;
        let row = TaskRow {
            id,
            title: task.title,
            description: task.description,
            priority: task.priority,
            category: task.category,
            due_at: task.due_at,
            tags: task.tags,
            status: Status::Pending,
        };
        Ok((id, row))
    }
}

impl TypedTool for AddTask {
    const NAME: &'static str = "add_task";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "todo, to-do, reminder, chore, create";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (id, row) = self.add(ctx, user_id(ctx)?).await?;
        Ok(json!({"id": id, "task": TaskView::new(ctx, row)}))
    }
}

/// Add several tasks at once; each is checked on its own and gets its own id or error.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BatchAddTasks {
    /// The tasks, each with the fields of add_task
    tasks: Batch<AddTask, MAX_BATCH>,
}

impl TypedTool for BatchAddTasks {
    const NAME: &'static str = "batch_add_tasks";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "todo, many, multiple, bulk";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let results = self
            .tasks
            .each(|task| async move {
                let (id, row) = task.add(ctx, user).await?;
                Ok(json!({"id": id, "title": row.title}))
            })
            .await;
        Ok(results)
    }
}

/// List the user's tasks, soonest due first, then by priority. By default only tasks not done.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListTasks {
    /// Default: everything not done
    status: Option<ListStatus>,
    priority: Option<Priority>,
    /// Exact category (case-insensitive)
    category: Option<String>,
    /// Words in the title or description (case-insensitive)
    search: Option<String>,
    /// Only tasks with this tag
    tag: Option<String>,
    /// Due before this date/time (YYYY-MM-DD, YYYY-MM-DD HH:MM, tomorrow …)
    due_before: Option<String>,
    /// Due at or after this date/time
    due_after: Option<String>,
    /// Only tasks past their due time and not done
    overdue: Option<bool>,
    /// Default 20, at most 50
    limit: Option<Count>,
}

impl TypedTool for ListTasks {
    const NAME: &'static str = "list_tasks";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "todo, show, due, overdue, agenda";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let now = ctx.clock.now();
        let time = |value: Option<String>, param: &'static str| {
            text(value)
                .map(|t| parse_datetime(&t, ctx.timezone, now).map_err(bad_date(param)))
                .transpose()
                .map(|t| t.map(|t| t.timestamp_millis()))
        };
        let statuses = match self.status {
            None => Statuses::Open,
            Some(ListStatus::All) => Statuses::All,
            Some(ListStatus::Pending) => Statuses::Only(Status::Pending),
            Some(ListStatus::InProgress) => Statuses::Only(Status::InProgress),
            Some(ListStatus::Done) => Statuses::Only(Status::Done),
        };
        let filter = TaskFilter {
            statuses,
            priority: self.priority,
            category: text(self.category).map(|c| c.to_lowercase()),
            due_before: time(self.due_before, "due_before")?,
            due_after: time(self.due_after, "due_after")?,
            overdue_at: (self.overdue == Some(true)).then(|| now.timestamp_millis()),
            page: LIST_LIMIT.page(self.search, self.tag, self.limit),
        };
        let listed = ctx.store.list_tasks(user, &filter).await?;
        let tasks: Vec<TaskView> = listed
            .rows
            .into_iter()
            .map(|row| TaskView::new(ctx, row))
            .collect();
        Ok(json!({"count": tasks.len(), "more": listed.more, "tasks": tasks}))
    }
}

/// Mark a task as done.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompleteTask {
    /// The task's id
    task_id: i64,
}

impl TypedTool for CompleteTask {
    const NAME: &'static str = "complete_task";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "todo, done, finish, check off";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, id) = (user_id(ctx)?, self.task_id);
        let task = fetch(ctx, user, id).await?;
        if task.status == Status::Done {
            return Ok(json!({"id": id, "already_done": true, "task": TaskView::new(ctx, task)}));
        }
        if !ctx
            .store
            .complete_task(user, id, ctx.clock.now_ms())
            .await?
        {
            return Err(not_found("task", id));
        }
        let task = fetch(ctx, user, id).await?;
        Ok(json!({"completed": id, "task": TaskView::new(ctx, task)}))
    }
}

/// Change a task: any of title, description, priority, category, due, tags (replaced), status.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateTask {
    /// The task's id
    task_id: i64,
    /// What to do, short
    title: Option<NonEmpty>,
    /// Details
    description: Option<String>,
    /// Default: medium
    priority: Option<Priority>,
    /// Free-form group such as work, home, shopping
    category: Option<String>,
    /// New due date/time (as in add_task); empty string removes it
    due: Option<String>,
    /// Labels, e.g. ["errand"]
    tags: Option<Tags>,
    status: Option<Status>,
}

impl TypedTool for UpdateTask {
    const NAME: &'static str = "update_task";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "todo, edit, change, reschedule";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, id) = (user_id(ctx)?, self.task_id);
        let due_at = self
            .due
            .map(|due| {
                text(Some(due))
                    .map(|due| parse_due(&due, ctx.timezone, ctx.clock.now()))
                    .transpose()
            })
            .transpose()?;
        let patch = TaskPatch {
            title: self.title.map(|title| title.0),
            description: self.description.map(|d| text(Some(d))),
            priority: self.priority,
            category: self.category.map(|c| text(Some(c))),
            due_at,
            tags: self.tags.map(|tags| tags.to_json()),
            status: self.status,
        };
        if patch.is_empty() {
            return Err(ToolError::InvalidArguments(
                "nothing to change: give at least one of title, description, priority, category, due, tags, status".into(),
            ));
        }
        let now = ctx.clock.now_ms();
        if !ctx.store.update_task(user, id, patch, now).await? {
            return Err(not_found("task", id));
        }
        let task = fetch(ctx, user, id).await?;
        Ok(json!({"updated": id, "task": TaskView::new(ctx, task)}))
    }
}

/// Delete a task for good.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteTask {
    /// The task's id
    task_id: i64,
}

impl TypedTool for DeleteTask {
    const NAME: &'static str = "delete_task";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Destructive;
    const TAGS: &'static str = "todo, remove";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, id) = (user_id(ctx)?, self.task_id);
        let title = ctx.store.delete_task(user, id).await?;
        deleted("task", id, "title", title)
    }
}

/// A task as the model sees it: the due time in the user's timezone, and whether it is late.
#[derive(Debug, Serialize)]
struct TaskView {
    id: i64,
    title: String,
    priority: &'static str,
    status: &'static str,
    tags: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    category: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    due: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    overdue: Option<bool>,
}

impl TaskView {
    fn new(ctx: &ToolContext, task: TaskRow) -> Self {
        let now = ctx.clock.now_ms();
        let late = task
            .due_at
            .map(|due| due < now && task.status != Status::Done);
        Self {
            id: task.id,
            title: task.title,
            priority: task.priority.as_str(),
            tags: tags_value(&task.tags),
            description: task.description,
            category: task.category,
            due: task.due_at.map(|due| format_local(due, ctx.timezone)),
            overdue: late,
            status: task.status.as_str(),
        }
    }
}

async fn fetch(ctx: &ToolContext, user: i64, id: i64) -> Result<TaskRow, ToolError> {
    ctx.store
        .task(user, id)
        .await?
        .ok_or_else(|| not_found("task", id))
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
        crate::tool::test_calls::rows(ctx, "tasks").await
    }

    /// A second user in the same database, to prove rows stay their owner's.

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
            json!({"task_id": id, "title": "Final", "priority": "urgent", "status": "in_progress", "due": "", "tags": ["a", "b"]}),
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
        assert!(
            message.contains("`title`: must be a non-empty string"),
            "{message}"
        );
        let message = err(
            &ctx,
            "update_task",
            json!({"task_id": id, "status": "finished"}),
        )
        .await;
        assert!(
            message.contains("`status`") && message.contains("`in_progress`"),
            "{message}"
        );
        assert_eq!(
            ok(&ctx, "list_tasks", json!({})).await["tasks"][0]["title"],
            "Final"
        );
    }

    #[tokio::test]
    async fn bad_input_is_refused_and_stores_nothing() {
        let (ctx, _dir) = test_context().await;
        let message = err(&ctx, "add_task", json!({"title": "  "})).await;
        assert!(
            message.contains("`title`: must be a non-empty string"),
            "{message}"
        );
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
        assert!(
            message.contains("`priority`") && message.contains("`urgent`"),
            "{message}"
        );
        let message = err(&ctx, "add_task", json!({"title": "x", "tags": "a, b"})).await;
        assert!(message.contains("`tags`"), "{message}");
        let message = err(&ctx, "add_task", json!({"title": "x", "colour": "red"})).await;
        assert!(message.contains("unknown field `colour`"), "{message}");
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
        let other = crate::tool::other_user(&ctx).await;
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

        let message = err(&ctx, "delete_task", json!({"task_id": id.to_string()})).await;
        assert!(message.contains("`task_id`"), "{message}");
        let deleted = ok(&ctx, "delete_task", json!({"task_id": id})).await;
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
