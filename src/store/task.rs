//! The `tasks` table: each user's to-do list, as the `tasks` tools read and change it.

use super::query::{Changes, Listed, Page, Sql, delete_owned, get_owned};
use super::{Store, StoreResult};

/// A stored task; `tags` is the JSON array text it is kept as.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct TaskRow {
    pub id: i64,
    pub title: String,
    pub description: Option<String>,
    pub priority: String,
    pub category: Option<String>,
    pub due_at: Option<i64>,
    pub tags: String,
    pub status: String,
}

const COLUMNS: &str = "id, title, description, priority, category, due_at, tags, status";

/// A task to add, checked by the tool.
#[derive(Clone, Debug)]
pub struct NewTask {
    pub title: String,
    pub description: Option<String>,
    pub priority: &'static str,
    /// Sorts the priorities (low 1 … urgent 4) where their names would not.
    pub priority_rank: i64,
    pub category: Option<String>,
    pub due_at: Option<i64>,
    pub tags: String,
}

/// Adds a pending task; its id.
pub async fn insert(store: &Store, user: i64, task: &NewTask, now: i64) -> StoreResult<i64> {
    let mut sql = Sql::insert(
        "tasks",
        "user_id, title, description, priority, priority_rank, category, due_at, tags, status, \
         created_at, updated_at",
    );
    sql.value(user)
        .value(task.title.clone())
        .value(task.description.clone())
        .value(task.priority)
        .value(task.priority_rank)
        .value(task.category.clone())
        .value(task.due_at)
        .value(task.tags.clone())
        .value("pending")
        .value(now)
        .value(now)
        .push(") RETURNING id");
    sql.insert_id(store).await
}

/// Which statuses a list shows.
#[derive(Clone, Copy, Debug)]
pub enum Statuses {
    /// Everything not done.
    Open,
    All,
    Only(&'static str),
}

/// What `list_tasks` asks for; times are Unix milliseconds.
#[derive(Clone, Debug)]
pub struct TaskFilter {
    pub statuses: Statuses,
    pub priority: Option<&'static str>,
    /// Lower-case.
    pub category: Option<String>,
    pub due_before: Option<i64>,
    pub due_after: Option<i64>,
    /// Only tasks not done and due before this time.
    pub overdue_at: Option<i64>,
    pub page: Page,
}

/// The user's tasks that match, soonest due first (undated last), then most urgent.
pub async fn list(store: &Store, user: i64, filter: &TaskFilter) -> StoreResult<Listed<TaskRow>> {
    let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM tasks WHERE user_id = "));
    sql.bind(user);
    match filter.statuses {
        Statuses::Open => {
            sql.push(" AND status <> 'done'");
        }
        Statuses::All => {}
        Statuses::Only(status) => {
            sql.push(" AND status = ").bind(status);
        }
    }
    if let Some(priority) = filter.priority {
        sql.push(" AND priority = ").bind(priority);
    }
    if let Some(category) = &filter.category {
        sql.push(" AND LOWER(category) = ").bind(category.clone());
    }
    filter.page.filter(&mut sql, &["title", "description"]);
    if let Some(before) = filter.due_before {
        sql.push(" AND due_at < ").bind(before);
    }
    if let Some(after) = filter.due_after {
        sql.push(" AND due_at >= ").bind(after);
    }
    if let Some(now) = filter.overdue_at {
        sql.push(" AND status <> 'done' AND due_at < ").bind(now);
    }
    let order = "due_at IS NULL, due_at, priority_rank DESC, id";
    filter.page.fetch(sql, order, store).await
}

/// One of the user's tasks; none when it does not exist or is another user's.
pub async fn get(store: &Store, user: i64, id: i64) -> StoreResult<Option<TaskRow>> {
    get_owned(store, ("tasks", COLUMNS), id, user).await
}

/// Marks the user's task done at `now`; false when no such task is the user's.
pub async fn complete(store: &Store, user: i64, id: i64, now: i64) -> StoreResult<bool> {
    let mut changes = Changes::new("tasks");
    changes.set("status", "done").set("completed_at", now);
    changes.set("updated_at", now);
    changes.apply(store, id, user).await
}

/// The columns an update changes; run with [`Changes::apply`].
pub fn changes() -> Changes {
    Changes::new("tasks")
}

/// Deletes the user's task; its title, or none when no such task is the user's.
pub async fn delete(store: &Store, user: i64, id: i64) -> StoreResult<Option<String>> {
    delete_owned(store, "tasks", "title", id, user).await
}
