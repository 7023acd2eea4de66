//! The `bookmarks` table: the links each user keeps, as the `bookmarks` tools read and change
//! them.

use super::query::{Listed, Page, Sql, delete_owned};
use super::{Store, StoreResult};

/// A stored link.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct BookmarkRow {
    pub id: i64,
    #[sqlx(flatten)]
    pub bookmark: Bookmark,
    pub created_at: i64,
}

const COLUMNS: &str = "id, url, title, description, tags, created_at";

/// A link as kept (checked by the tool); `tags` is the JSON array text it is kept as.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Bookmark {
    pub url: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub tags: String,
}

impl Store {
    /// The user's bookmark of `url`, if they saved it before.
    pub async fn bookmark_of_url(&self, user: i64, url: &str) -> StoreResult<Option<BookmarkRow>> {
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM bookmarks WHERE user_id = "));
        sql.bind(user).push(" AND url = ").bind(url.to_string());
        sql.fetch_optional(self).await
    }

    /// Saves a link; its id. A concurrent save of the same link between [`Store::bookmark_of_url`] and this
    /// is covered by `ON CONFLICT`: both get the one row.
    pub async fn insert_bookmark(&self, user: i64, link: &Bookmark, now: i64) -> StoreResult<i64> {
        let mut sql = Sql::insert(
            "bookmarks",
            "user_id, url, title, description, tags, created_at",
        );
        sql.value(user)
            .value(link.url.clone())
            .value(link.title.clone())
            .value(link.description.clone())
            .value(link.tags.clone())
            .value(now)
            .push(") ON CONFLICT (user_id, url) DO UPDATE SET url = excluded.url RETURNING id");
        sql.insert_id(self).await
    }

    /// The user's links that match, newest first.
    pub async fn list_bookmarks(&self, user: i64, page: &Page) -> StoreResult<Listed<BookmarkRow>> {
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM bookmarks WHERE user_id = "));
        sql.bind(user);
        page.filter(&mut sql, &["url", "title", "description"]);
        page.fetch(sql, "created_at DESC, id DESC", self).await
    }

    /// Deletes the user's link; its address, or none when no such link is the user's.
    pub async fn delete_bookmark(&self, user: i64, id: i64) -> StoreResult<Option<String>> {
        delete_owned(self, "bookmarks", "url", id, user).await
    }
}
