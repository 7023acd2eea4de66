//! The `calendar_events` table: each user's events, as the `calendar` tools read and change
//! them. Times are Unix milliseconds; an all-day event spans local midnights.

use super::query::{Changes, Listed, Page, Sql, delete_owned, get_owned};
use super::{Store, StoreResult};

/// A stored event; `all_day` is 0 or 1.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct EventRow {
    pub id: i64,
    pub title: String,
    pub start_at: i64,
    pub end_at: i64,
    pub all_day: i64,
    pub location: Option<String>,
    pub description: Option<String>,
}

const COLUMNS: &str = "id, title, start_at, end_at, all_day, location, description";

/// An event to add, checked by the tool.
#[derive(Clone, Debug)]
pub struct NewEvent {
    pub title: String,
    pub start_at: i64,
    pub end_at: i64,
    pub all_day: bool,
    pub location: Option<String>,
    pub description: Option<String>,
}

/// What an update changes; a field left `None` stays as it is, `Some(None)` clears it.
#[derive(Clone, Debug, Default)]
pub struct EventPatch {
    pub title: Option<String>,
    /// The start, the end and whether the event lasts whole days, changed together.
    pub times: Option<(i64, i64, bool)>,
    pub location: Option<Option<String>>,
    pub description: Option<Option<String>>,
}

impl EventPatch {
    pub fn is_empty(&self) -> bool {
        self.title.is_none()
            && self.times.is_none()
            && self.location.is_none()
            && self.description.is_none()
    }
}

impl Store {
    /// Adds an event; its id.
    pub async fn insert_event(&self, user: i64, event: &NewEvent, now: i64) -> StoreResult<i64> {
        let mut sql = Sql::insert(
            "calendar_events",
            "user_id, title, start_at, end_at, all_day, location, description, created_at, updated_at",
        );
        sql.value(user)
            .value(event.title.clone())
            .value(event.start_at)
            .value(event.end_at)
            .value(i64::from(event.all_day))
            .value(event.location.clone())
            .value(event.description.clone())
            .value(now)
            .value(now)
            .push(") RETURNING id");
        sql.insert_id(self).await
    }

    /// One of the user's events; none when it does not exist or is another user's.
    pub async fn event(&self, user: i64, id: i64) -> StoreResult<Option<EventRow>> {
        get_owned(self, ("calendar_events", COLUMNS), id, user).await
    }

    /// The user's events overlapping `[from, to)`, earliest first: they start before its end and
    /// end after its start; an event of no length counts when it starts inside.
    pub async fn events_overlapping(
        &self,
        user: i64,
        (from, to): (i64, i64),
        limit: i64,
    ) -> StoreResult<Listed<EventRow>> {
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS} FROM calendar_events WHERE user_id = "
        ));
        sql.bind(user).push(" AND start_at < ").bind(to);
        sql.push(" AND (end_at > ").bind(from);
        sql.push(" OR start_at >= ").bind(from).push(")");
        let page = Page {
            limit,
            ..Page::default()
        };
        page.fetch(sql, "start_at, id", self).await
    }

    /// Changes the user's event as `patch` says, updated at `now`; false when no such event
    /// is the user's.
    pub async fn update_event(
        &self,
        user: i64,
        id: i64,
        patch: EventPatch,
        now: i64,
    ) -> StoreResult<bool> {
        let mut changes = Changes::new("calendar_events");
        if let Some(title) = patch.title {
            changes.set("title", title);
        }
        if let Some((start_at, end_at, all_day)) = patch.times {
            changes.set("start_at", start_at);
            changes.set("end_at", end_at);
            changes.set("all_day", i64::from(all_day));
        }
        if let Some(location) = patch.location {
            changes.set("location", location);
        }
        if let Some(description) = patch.description {
            changes.set("description", description);
        }
        changes.set("updated_at", now);
        changes.apply(self, id, user).await
    }

    /// Deletes the user's event; its title, or none when no such event is the user's.
    pub async fn delete_event(&self, user: i64, id: i64) -> StoreResult<Option<String>> {
        delete_owned(self, "calendar_events", "title", id, user).await
    }
}
