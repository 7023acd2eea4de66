//! The cache of the owner's outside calendars (`calendar_collections`, `calendar_objects`):
//! per collection its change markers (CalDAV sync token and ctag, an ICS feed's ETag and
//! Last-Modified) and the iCalendar objects last fetched, so a read sends only what changed
//! and an unreachable server still answers (`src/calendar.rs`).

use super::{Store, StoreResult};

/// One calendar's change markers and when its server last answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct CalendarCollection {
    pub name: String,
    /// The URL the cache was filled from; another URL starts afresh.
    pub url: String,
    pub sync_token: Option<String>,
    pub ctag: Option<String>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// When the server last answered (Unix ms).
    pub fetched_at: i64,
}

/// One cached iCalendar object: a CalDAV resource, or a whole feed.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct CalendarObject {
    pub href: String,
    pub etag: Option<String>,
    pub data: String,
}

/// What one successful contact with a calendar's server changes in its cache.
#[derive(Debug, Default)]
pub struct CalendarSync {
    /// The new markers and the time of the answer.
    pub collection: CalendarCollection,
    /// Drop every cached object first (a full listing, a new URL, a replaced feed).
    pub replace_all: bool,
    /// Objects that are new or changed.
    pub changed: Vec<CalendarObject>,
    /// Hrefs the server no longer has.
    pub removed: Vec<String>,
}

impl Store {
    /// The cached markers of the calendar `name`, if it was ever fetched.
    pub async fn calendar_collection(&self, name: &str) -> StoreResult<Option<CalendarCollection>> {
        Ok(sqlx::query_as(
            "SELECT name, url, sync_token, ctag, etag, last_modified, fetched_at
             FROM calendar_collections WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(self.pool())
        .await?)
    }

    /// The cached objects of the calendar `name`, by href.
    pub async fn calendar_objects(&self, name: &str) -> StoreResult<Vec<CalendarObject>> {
        Ok(sqlx::query_as(
            "SELECT href, etag, data FROM calendar_objects WHERE calendar = $1 ORDER BY href",
        )
        .bind(name)
        .fetch_all(self.pool())
        .await?)
    }

    /// Applies one contact's changes to the calendar's cache in one transaction, so a reader
    /// never sees new markers with old objects.
    pub async fn save_calendar_sync(&self, sync: &CalendarSync) -> StoreResult<()> {
        let c = &sync.collection;
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO calendar_collections
                 (name, url, sync_token, ctag, etag, last_modified, fetched_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (name) DO UPDATE SET url = excluded.url,
                 sync_token = excluded.sync_token, ctag = excluded.ctag, etag = excluded.etag,
                 last_modified = excluded.last_modified, fetched_at = excluded.fetched_at",
        )
        .bind(&c.name)
        .bind(&c.url)
        .bind(&c.sync_token)
        .bind(&c.ctag)
        .bind(&c.etag)
        .bind(&c.last_modified)
        .bind(c.fetched_at)
        .execute(&mut *tx)
        .await?;
        if sync.replace_all {
            sqlx::query("DELETE FROM calendar_objects WHERE calendar = $1")
                .bind(&c.name)
                .execute(&mut *tx)
                .await?;
        }
        for href in &sync.removed {
            sqlx::query("DELETE FROM calendar_objects WHERE calendar = $1 AND href = $2")
                .bind(&c.name)
                .bind(href)
                .execute(&mut *tx)
                .await?;
        }
        for object in &sync.changed {
            sqlx::query(
                "INSERT INTO calendar_objects (calendar, href, etag, data) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (calendar, href) DO UPDATE SET etag = excluded.etag, data = excluded.data",
            )
            .bind(&c.name)
            .bind(&object.href)
            .bind(&object.etag)
            .bind(&object.data)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Forgets one cached object (after hearth deleted it on the server).
    pub async fn delete_calendar_object(&self, name: &str, href: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM calendar_objects WHERE calendar = $1 AND href = $2")
            .bind(name)
            .bind(href)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(())
    }

    /// Saves one object hearth itself wrote, with the ETag the server gave it, so the next
    /// write is guarded by that version. Nothing is saved for a calendar never read.
    pub async fn put_calendar_object(
        &self,
        name: &str,
        object: &CalendarObject,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO calendar_objects (calendar, href, etag, data)
             SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM calendar_collections WHERE name = $1)
             ON CONFLICT (calendar, href) DO UPDATE SET etag = excluded.etag, data = excluded.data",
        )
        .bind(name)
        .bind(&object.href)
        .bind(&object.etag)
        .bind(&object.data)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }
}
