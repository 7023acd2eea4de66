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

/// Adds a note; its id.
pub async fn insert(
    store: &Store,
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
    sql.insert_id(store).await
}

/// The user's notes that match, most recently changed first.
pub async fn list(store: &Store, user: i64, page: &Page) -> StoreResult<Listed<NoteRow>> {
    let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM notes WHERE user_id = "));
    sql.bind(user);
    page.filter(&mut sql, &["title", "content"]);
    page.fetch(sql, "updated_at DESC, id DESC", store).await
}

/// One of the user's notes; none when it does not exist or is another user's.
pub async fn get(store: &Store, user: i64, id: i64) -> StoreResult<Option<NoteRow>> {
    get_owned(store, ("notes", COLUMNS), id, user).await
}

/// The columns an update changes; run with [`Changes::apply`].
pub fn changes() -> Changes {
    Changes::new("notes")
}

/// Deletes the user's note; its title, or none when no such note is the user's.
pub async fn delete(store: &Store, user: i64, id: i64) -> StoreResult<Option<String>> {
    delete_owned(store, "notes", "title", id, user).await
}
