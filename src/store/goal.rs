//! The `goals` and `goal_steps` tables: each user's goals, their sub-goals and ordered steps, as
//! the `goals` tools read and change them.

use super::query::{Changes, Sql};
use super::{Store, StoreResult, text_enum};

// A plain comment: the tools take it as an argument, and a doc comment would become the
// description of every field that uses it.
text_enum! {
    // Where a goal stands.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum GoalStatus {
        Active = "active",
        Completed = "completed",
        Abandoned = "abandoned",
    }
}

/// A stored goal with its step counts.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct GoalRow {
    pub id: i64,
    pub parent_id: Option<i64>,
    pub title: String,
    pub description: Option<String>,
    /// `YYYY-MM-DD`.
    pub target_date: Option<String>,
    pub status: GoalStatus,
    pub created_at: i64,
    pub completed_at: Option<i64>,
    pub steps_total: i64,
    pub steps_done: i64,
}

/// A stored step; `done` is 0 or 1.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct StepRow {
    pub id: i64,
    pub goal_id: i64,
    pub position: i64,
    pub title: String,
    pub done: i64,
    pub completed_at: Option<i64>,
}

/// The goal columns with the step counts every view of a goal shows.
const GOAL_SELECT: &str =
    "SELECT g.id, g.parent_id, g.title, g.description, g.target_date, g.status,
        g.created_at, g.completed_at,
        (SELECT COUNT(*) FROM goal_steps s WHERE s.goal_id = g.id) AS steps_total,
        (SELECT COUNT(*) FROM goal_steps s WHERE s.goal_id = g.id AND s.done = 1) AS steps_done
    FROM goals g WHERE g.user_id = ";
/// Goals with a target date first, soonest first.
const GOAL_ORDER: &str =
    " ORDER BY CASE WHEN g.target_date IS NULL THEN 1 ELSE 0 END, g.target_date, g.id";
const STEP_SELECT: &str = "SELECT s.id, s.goal_id, s.position, s.title, s.done, s.completed_at \
     FROM goal_steps s";

/// Which of the user's goals a query reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct GoalFilter {
    /// Only goals in this status.
    pub status: Option<GoalStatus>,
    /// Only the sub-goals of this goal.
    pub parent: Option<i64>,
    /// Only goals without a parent.
    pub top_level: bool,
}

/// A goal to create, checked by the tool.
#[derive(Clone, Debug)]
pub struct NewGoal {
    pub parent_id: Option<i64>,
    pub title: String,
    pub description: Option<String>,
    pub target_date: Option<String>,
}

/// A goal's editable columns as an update leaves them: the tool merges what was asked into the
/// current goal.
#[derive(Clone, Debug)]
pub struct GoalPatch {
    pub title: String,
    pub description: Option<String>,
    /// `YYYY-MM-DD`.
    pub target_date: Option<String>,
    pub status: GoalStatus,
    pub parent_id: Option<i64>,
    pub completed_at: Option<i64>,
}

impl Store {
    /// The user's goals that match, soonest target date first; at most `limit` when given.
    pub async fn list_goals(
        &self,
        user: i64,
        filter: GoalFilter,
        limit: Option<i64>,
    ) -> StoreResult<Vec<GoalRow>> {
        let mut sql = Sql::new(GOAL_SELECT);
        sql.bind(user);
        if let Some(status) = filter.status {
            sql.push(" AND g.status = ").bind(status);
        }
        if let Some(parent) = filter.parent {
            sql.push(" AND g.parent_id = ").bind(parent);
        }
        if filter.top_level {
            sql.push(" AND g.parent_id IS NULL");
        }
        sql.push(GOAL_ORDER);
        if let Some(limit) = limit {
            sql.push(" LIMIT ").bind(limit);
        }
        sql.fetch_all(self).await
    }

    /// One of the user's goals; none when it does not exist or is another user's.
    pub async fn goal(&self, user: i64, id: i64) -> StoreResult<Option<GoalRow>> {
        let mut sql = Sql::new(GOAL_SELECT);
        sql.bind(user).push(" AND g.id = ").bind(id);
        sql.fetch_optional(self).await
    }

    /// The parent of the user's goal `id` (`Some(None)`: a top-level goal); none when the goal is
    /// not the user's.
    pub async fn goal_parent(&self, user: i64, id: i64) -> StoreResult<Option<Option<i64>>> {
        let mut sql = Sql::new("SELECT parent_id FROM goals WHERE id = ");
        sql.bind(id).push(" AND user_id = ").bind(user);
        let row: Option<(Option<i64>,)> = sql.fetch_optional(self).await?;
        Ok(row.map(|(parent,)| parent))
    }

    /// Creates an active goal; its id.
    pub async fn insert_goal(&self, user: i64, goal: &NewGoal, now: i64) -> StoreResult<i64> {
        let mut sql = Sql::insert(
            "goals",
            "user_id, parent_id, title, description, target_date, status, created_at, updated_at",
        );
        sql.value(user)
            .value(goal.parent_id)
            .value(goal.title.clone())
            .value(goal.description.clone())
            .value(goal.target_date.clone())
            .value(GoalStatus::Active)
            .value(now)
            .value(now)
            .push(") RETURNING id");
        sql.insert_id(self).await
    }

    /// Writes `patch` over the user's goal, updated at `now`; false when no such goal is the
    /// user's.
    pub async fn update_goal(
        &self,
        user: i64,
        id: i64,
        patch: GoalPatch,
        now: i64,
    ) -> StoreResult<bool> {
        let mut changes = Changes::new("goals");
        changes
            .set("title", patch.title)
            .set("description", patch.description)
            .set("target_date", patch.target_date)
            .set("status", patch.status)
            .set("parent_id", patch.parent_id)
            .set("completed_at", patch.completed_at)
            .set("updated_at", now);
        changes.apply(self, id, user).await
    }

    /// Appends steps to goal `goal` in one transaction (all or none); each new step's id and
    /// position.
    pub async fn add_goal_steps(
        &self,
        user: i64,
        goal: i64,
        titles: &[String],
        now: i64,
    ) -> StoreResult<Vec<(i64, i64)>> {
        let mut tx = self.begin().await?;
        let last: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(position), 0) FROM goal_steps WHERE goal_id = $1",
        )
        .bind(goal)
        .fetch_one(&mut *tx)
        .await?;
        let mut added = Vec::with_capacity(titles.len());
        for (position, title) in (last + 1..).zip(titles) {
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO goal_steps (goal_id, user_id, position, title, done, created_at)
                 VALUES ($1, $2, $3, $4, 0, $5) RETURNING id",
            )
            .bind(goal)
            .bind(user)
            .bind(position)
            .bind(title.as_str())
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            added.push((id, position));
        }
        sqlx::query("UPDATE goals SET updated_at = $1 WHERE id = $2")
            .bind(now)
            .bind(goal)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(added)
    }

    /// The steps of a goal in order.
    pub async fn goal_steps(&self, goal: i64) -> StoreResult<Vec<StepRow>> {
        let mut sql = Sql::new(STEP_SELECT);
        sql.push(" WHERE s.goal_id = ").bind(goal);
        sql.push(" ORDER BY s.position, s.id");
        sql.fetch_all(self).await
    }

    /// The open steps of the user's active goals, by goal and then in order.
    pub async fn open_goal_steps(&self, user: i64) -> StoreResult<Vec<StepRow>> {
        let mut sql = Sql::new(STEP_SELECT);
        sql.push(" JOIN goals g ON g.id = s.goal_id WHERE g.user_id = ")
            .bind(user);
        sql.push(" AND g.status = ").bind(GoalStatus::Active);
        sql.push(" AND s.done = 0 ORDER BY s.goal_id, s.position, s.id");
        sql.fetch_all(self).await
    }

    /// One of the user's steps; none when it does not exist or is another user's.
    pub async fn goal_step(&self, user: i64, id: i64) -> StoreResult<Option<StepRow>> {
        let mut sql = Sql::new(STEP_SELECT);
        sql.push(" WHERE s.id = ").bind(id);
        sql.push(" AND s.user_id = ").bind(user);
        sql.fetch_optional(self).await
    }

    /// How many steps of the step's goal besides it are still open.
    pub async fn other_open_goal_steps(&self, step: &StepRow) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM goal_steps WHERE goal_id = $1 AND done = 0 AND id <> $2",
        )
        .bind(step.goal_id)
        .bind(step.id)
        .fetch_one(self.pool())
        .await?)
    }

    /// Marks the step done (when it is not yet) and touches its goal; with `complete_goal` the goal
    /// is completed as well. One transaction.
    pub async fn complete_goal_step(
        &self,
        step: &StepRow,
        complete_goal: bool,
        now: i64,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        if step.done == 0 {
            sqlx::query("UPDATE goal_steps SET done = 1, completed_at = $1 WHERE id = $2")
                .bind(now)
                .bind(step.id)
                .execute(&mut *tx)
                .await?;
        }
        let touch = if complete_goal {
            "UPDATE goals SET status = 'completed', completed_at = $1, updated_at = $1
             WHERE id = $2 AND status <> 'completed'"
        } else {
            "UPDATE goals SET updated_at = $1 WHERE id = $2"
        };
        sqlx::query(touch)
            .bind(now)
            .bind(step.goal_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
