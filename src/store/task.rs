//! The `tasks` table: each user's to-do list, as the `tasks` tools read and change it.

use super::query::{Changes, Listed, Page, Sql, delete_owned, get_owned};
use super::{Store, StoreResult, text_enum};

// Plain comments on these enums: the tools take them as arguments, and a doc comment would
// become the description of every field that uses them.
text_enum! {
    // How urgent a task is.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum TaskPriority {
        Low = "low",
        Medium = "medium",
        High = "high",
        Urgent = "urgent",
    }
}

impl TaskPriority {
    /// Sorts where the names would not: low 1 … urgent 4 (the `priority_rank` column).
    pub fn rank(self) -> i64 {
        self as i64 + 1
    }
}

text_enum! {
    // Where a task stands.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum TaskStatus {
        Pending = "pending",
        InProgress = "in_progress",
        Done = "done",
    }
}

/// A stored task; `tags` is the JSON array text it is kept as.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct TaskRow {
    pub id: i64,
    pub title: String,
    pub description: Option<String>,
    pub priority: TaskPriority,
    pub category: Option<String>,
    pub due_at: Option<i64>,
    pub tags: String,
    pub status: TaskStatus,
}

const COLUMNS: &str = "id, title, description, priority, category, due_at, tags, status";

/// A task to add, checked by the tool.
#[derive(Clone, Debug)]
pub struct NewTask {
    pub title: String,
    pub description: Option<String>,
    pub priority: TaskPriority,
    pub category: Option<String>,
    pub due_at: Option<i64>,
    pub tags: String,
}

/// Which statuses a list shows.
#[derive(Clone, Copy, Debug)]
pub enum Statuses {
    /// Everything not done.
    Open,
    All,
    Only(TaskStatus),
}

/// What `list_tasks` asks for; times are Unix milliseconds.
#[derive(Clone, Debug)]
pub struct TaskFilter {
    pub statuses: Statuses,
    pub priority: Option<TaskPriority>,
    /// Lower-case.
    pub category: Option<String>,
    pub due_before: Option<i64>,
    pub due_after: Option<i64>,
    /// Only tasks not done and due before this time.
    pub overdue_at: Option<i64>,
    pub page: Page,
}

/// What an update changes; a field left `None` stays as it is. `Some(None)` clears a column
/// that may be empty.
#[derive(Clone, Debug, Default)]
pub struct TaskPatch {
    pub title: Option<String>,
    pub description: Option<Option<String>>,
    pub priority: Option<TaskPriority>,
    pub category: Option<Option<String>>,
    pub due_at: Option<Option<i64>>,
    /// The JSON array text, replacing the tags.
    pub tags: Option<String>,
    /// A task set to done is completed now; any other status clears its completion time.
    pub status: Option<TaskStatus>,
}

impl TaskPatch {
    pub fn is_empty(&self) -> bool {
        let Self {
            title,
            description,
            priority,
            category,
            due_at,
            tags,
            status,
        } = self;
        title.is_none()
            && description.is_none()
            && priority.is_none()
            && category.is_none()
            && due_at.is_none()
            && tags.is_none()
            && status.is_none()
    }
}

impl Store {
    /// Adds a pending task; its id.
    pub async fn insert_task(&self, user: i64, task: &NewTask, now: i64) -> StoreResult<i64> {
        let mut sql = Sql::insert(
            "tasks",
            "user_id, title, description, priority, priority_rank, category, due_at, tags, \
             status, created_at, updated_at",
        );
        sql.value(user)
            .value(task.title.clone())
            .value(task.description.clone())
            .value(task.priority)
            .value(task.priority.rank())
            .value(task.category.clone())
            .value(task.due_at)
            .value(task.tags.clone())
            .value(TaskStatus::Pending)
            .value(now)
            .value(now)
            .push(") RETURNING id");
        sql.insert_id(self).await
    }

    /// The user's tasks that match, soonest due first (undated last), then most urgent.
    pub async fn list_tasks(&self, user: i64, filter: &TaskFilter) -> StoreResult<Listed<TaskRow>> {
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM tasks WHERE user_id = "));
        sql.bind(user);
        match filter.statuses {
            Statuses::Open => {
                sql.push(" AND status <> ").bind(TaskStatus::Done);
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
            sql.push(" AND status <> ").bind(TaskStatus::Done);
            sql.push(" AND due_at < ").bind(now);
        }
        let order = "due_at IS NULL, due_at, priority_rank DESC, id";
        filter.page.fetch(sql, order, self).await
    }

    /// One of the user's tasks; none when it does not exist or is another user's.
    pub async fn task(&self, user: i64, id: i64) -> StoreResult<Option<TaskRow>> {
        get_owned(self, ("tasks", COLUMNS), id, user).await
    }

    /// Marks the user's task done at `now`; false when no such task is the user's.
    pub async fn complete_task(&self, user: i64, id: i64, now: i64) -> StoreResult<bool> {
        let patch = TaskPatch {
            status: Some(TaskStatus::Done),
            ..TaskPatch::default()
        };
        self.update_task(user, id, patch, now).await
    }

    /// Changes the user's task as `patch` says, updated at `now`; false when no such task is
    /// the user's.
    pub async fn update_task(
        &self,
        user: i64,
        id: i64,
        patch: TaskPatch,
        now: i64,
    ) -> StoreResult<bool> {
        let mut changes = Changes::new("tasks");
        if let Some(title) = patch.title {
            changes.set("title", title);
        }
        if let Some(description) = patch.description {
            changes.set("description", description);
        }
        if let Some(priority) = patch.priority {
            changes.set("priority", priority);
            changes.set("priority_rank", priority.rank());
        }
        if let Some(category) = patch.category {
            changes.set("category", category);
        }
        if let Some(due_at) = patch.due_at {
            changes.set("due_at", due_at);
        }
        if let Some(tags) = patch.tags {
            changes.set("tags", tags);
        }
        if let Some(status) = patch.status {
            changes.set("status", status);
            changes.set("completed_at", (status == TaskStatus::Done).then_some(now));
        }
        changes.set("updated_at", now);
        changes.apply(self, id, user).await
    }

    /// Deletes the user's task; its title, or none when no such task is the user's.
    pub async fn delete_task(&self, user: i64, id: i64) -> StoreResult<Option<String>> {
        delete_owned(self, "tasks", "title", id, user).await
    }
}
