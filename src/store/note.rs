//! The `notes` table: each user's free-text notes, as the `notes` tools read and change them.

use super::query::{Changes, Listed, Page, Sql, delete_owned, get_owned};
use super::{Store, StoreResult};

/// A stored note; `tags` is the JSON array text it is kept as.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct NoteRow {
    pub id: i64,
    pub title: String,
    pub content: String,
    pub tags: String,
    pub updated_at: i64,
}

const COLUMNS: &str = "id, title, content, tags, updated_at";

/// What an update changes; a field left `None` stays as it is.
#[derive(Clone, Debug, Default)]
pub struct NotePatch {
    pub title: Option<String>,
    pub content: Option<String>,
    /// The JSON array text, replacing the tags.
    pub tags: Option<String>,
}

impl NotePatch {
    pub fn is_empty(&self) -> bool {
        self.title.is_none() && self.content.is_none() && self.tags.is_none()
    }
}

impl Store {
    /// Adds a note; its id.
    pub async fn insert_note(
        &self,
        user: i64,
        title: &str,
        content: &str,
        tags: &str,
        now: i64,
    ) -> StoreResult<i64> {
        let mut sql = Sql::insert(
            "notes",
            "user_id, title, content, tags, created_at, updated_at",
        );
        sql.value(user)
            .value(title.to_string())
            .value(content.to_string())
            .value(tags.to_string())
            .value(now)
            .value(now)
            .push(") RETURNING id");
        sql.insert_id(self).await
    }

    /// The user's notes that match, most recently changed first.
    pub async fn list_notes(&self, user: i64, page: &Page) -> StoreResult<Listed<NoteRow>> {
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM notes WHERE user_id = "));
        sql.bind(user);
        page.filter(&mut sql, &["title", "content"]);
        page.fetch(sql, "updated_at DESC, id DESC", self).await
    }

    /// One of the user's notes; none when it does not exist or is another user's.
    pub async fn note(&self, user: i64, id: i64) -> StoreResult<Option<NoteRow>> {
        get_owned(self, ("notes", COLUMNS), id, user).await
    }

    /// Changes the user's note as `patch` says, updated at `now`; false when no such note is
    /// the user's.
    pub async fn update_note(
        &self,
        user: i64,
        id: i64,
        patch: NotePatch,
        now: i64,
    ) -> StoreResult<bool> {
        let mut changes = Changes::new("notes");
        if let Some(title) = patch.title {
            changes.set("title", title);
        }
        if let Some(content) = patch.content {
            changes.set("content", content);
        }
        if let Some(tags) = patch.tags {
            changes.set("tags", tags);
        }
        changes.set("updated_at", now);
        changes.apply(self, id, user).await
    }

    /// Deletes the user's note; its title, or none when no such note is the user's.
    pub async fn delete_note(&self, user: i64, id: i64) -> StoreResult<Option<String>> {
        delete_owned(self, "notes", "title", id, user).await
    }
}
