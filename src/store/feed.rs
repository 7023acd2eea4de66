//! The feed tables: what each `[[feeds]]` entry's last answer said (`feed_sources`: the
//! validators for conditional requests), every item a feed has shown (`feed_items`, remembered
//! so an item is new once), and the moments read_feeds measures from (`feed_marks`).

use super::query::Sql;
use super::{Store, StoreResult};

/// The validators the last 200 of a feed carried, for the URL it was fetched from.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct FeedSource {
    pub url: String,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

/// An item as a feed showed it, before it is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewFeedItem {
    /// The item's identity within its feed (see `tool::feeds::item_key`).
    pub key: String,
    pub title: Option<String>,
    pub link: Option<String>,
    /// Plain text, already cut to the tool's cap.
    pub summary: Option<String>,
    /// Milliseconds since the epoch.
    pub published_at: Option<i64>,
}

/// A stored item.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct FeedItemRow {
    pub id: i64,
    pub feed: String,
    pub title: Option<String>,
    pub link: Option<String>,
    pub summary: Option<String>,
    pub published_at: Option<i64>,
    pub first_seen: i64,
    pub presented_at: Option<i64>,
}

const ITEM_COLUMNS: &str = "id, feed, title, link, summary, published_at, first_seen, presented_at";

/// Which stored items a read asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemFilter {
    /// Never shown by read_feeds.
    Unread,
    /// First seen after this moment (ms).
    SeenAfter(i64),
    /// Published (or, without a date, first seen) at or after this moment (ms).
    PublishedSince(i64),
}

impl Store {
    /// What the last successful request of the feed `name` left, if any.
    pub async fn feed_source(&self, name: &str) -> StoreResult<Option<FeedSource>> {
        let mut sql = Sql::new("SELECT url, etag, last_modified FROM feed_sources WHERE name = ");
        sql.bind(name.to_string());
        sql.fetch_optional(self).await
    }

    /// Keeps the validators of a 200 from `source.url`; both are replaced, so a server that
    /// stopped sending one is not asked with a stale one.
    pub async fn save_feed_source(
        &self,
        name: &str,
        source: &FeedSource,
        now: i64,
    ) -> StoreResult<()> {
        let mut sql = Sql::insert("feed_sources", "name, url, etag, last_modified, checked_at");
        sql.value(name.to_string())
            .value(source.url.clone())
            .value(source.etag.clone())
            .value(source.last_modified.clone())
            .value(now)
            .push(
                ") ON CONFLICT (name) DO UPDATE SET url = excluded.url, etag = excluded.etag, \
                 last_modified = excluded.last_modified, checked_at = excluded.checked_at",
            );
        let mut conn = self.write().await?;
        sql.execute_in(&mut conn).await?;
        Ok(())
    }

    /// Remembers the items of one answer of `feed`: new ones with `first_seen = now`, known ones
    /// updated in place (title, link, summary, date) with their `first_seen` and `presented_at`
    /// kept, so a retitled item is never new again. How many were new.
    pub async fn remember_feed_items(
        &self,
        feed: &str,
        items: &[NewFeedItem],
        now: i64,
    ) -> StoreResult<u64> {
        if items.is_empty() {
            return Ok(0);
        }
        let mut tx = self.begin().await?;
        let mut new = 0;
        for item in items {
            let mut known = Sql::new("SELECT id FROM feed_items WHERE feed = ");
            known
                .bind(feed.to_string())
                .push(" AND item_key = ")
                .bind(item.key.clone());
            let exists: Option<(i64,)> = known.fetch_optional_in(&mut tx).await?;
            let write = match exists {
                Some((id,)) => {
                    let mut sql = Sql::new("UPDATE feed_items SET title = ");
                    sql.bind(item.title.clone())
                        .push(", link = ")
                        .bind(item.link.clone())
                        .push(", summary = ")
                        .bind(item.summary.clone())
                        .push(", published_at = COALESCE(")
                        .bind(item.published_at)
                        .push(", published_at) WHERE id = ")
                        .bind(id);
                    sql
                }
                None => {
                    new += 1;
                    let mut sql = Sql::insert(
                        "feed_items",
                        "feed, item_key, title, link, summary, published_at, first_seen",
                    );
                    sql.value(feed.to_string())
                        .value(item.key.clone())
                        .value(item.title.clone())
                        .value(item.link.clone())
                        .value(item.summary.clone())
                        .value(item.published_at)
                        .value(now)
                        .push(")");
                    sql
                }
            };
            write.execute_in(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(new)
    }

    /// The items of `feeds` that `filter` admits, newest first, at most `limit`; and how many
    /// match in all.
    pub async fn feed_items(
        &self,
        feeds: &[String],
        filter: ItemFilter,
        limit: i64,
    ) -> StoreResult<(i64, Vec<FeedItemRow>)> {
        if feeds.is_empty() {
            return Ok((0, Vec::new()));
        }
        let matching = |select: &str| {
            let mut sql = Sql::new(&format!("SELECT {select} FROM feed_items WHERE feed IN ("));
            for feed in feeds {
                sql.value(feed.clone());
            }
            sql.push(")");
            match filter {
                ItemFilter::Unread => {
                    sql.push(" AND presented_at IS NULL");
                }
                ItemFilter::SeenAfter(at) => {
                    sql.push(" AND first_seen > ").bind(at);
                }
                ItemFilter::PublishedSince(at) => {
                    sql.push(" AND COALESCE(published_at, first_seen) >= ")
                        .bind(at);
                }
            }
            sql
        };
        let (total,): (i64,) = matching("COUNT(*)")
            .fetch_optional(self)
            .await?
            .unwrap_or((0,));
        let mut sql = matching(ITEM_COLUMNS);
        sql.push(" ORDER BY COALESCE(published_at, first_seen) DESC, id DESC LIMIT ")
            .bind(limit);
        Ok((total, sql.fetch_all(self).await?))
    }

    /// Records that read_feeds showed the items `ids` at `now`; items shown before keep their
    /// first time.
    pub async fn mark_feed_items_presented(&self, ids: &[i64], now: i64) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut sql = Sql::new("UPDATE feed_items SET presented_at = ");
        sql.bind(now)
            .push(" WHERE presented_at IS NULL AND id IN (");
        for id in ids {
            sql.value(*id);
        }
        sql.push(")");
        let mut conn = self.write().await?;
        sql.execute_in(&mut conn).await?;
        Ok(())
    }

    /// The moment named `mark` (`last_briefing`), if it was ever set.
    pub async fn feed_mark(&self, mark: &str) -> StoreResult<Option<i64>> {
        let mut sql = Sql::new("SELECT at FROM feed_marks WHERE mark = ");
        sql.bind(mark.to_string());
        let row: Option<(i64,)> = sql.fetch_optional(self).await?;
        Ok(row.map(|(at,)| at))
    }

    pub async fn set_feed_mark(&self, mark: &str, at: i64) -> StoreResult<()> {
        let mut sql = Sql::insert("feed_marks", "mark, at");
        sql.value(mark.to_string())
            .value(at)
            .push(") ON CONFLICT (mark) DO UPDATE SET at = excluded.at");
        let mut conn = self.write().await?;
        sql.execute_in(&mut conn).await?;
        Ok(())
    }
}

/// The feed store's round trip, run on SQLite here and on PostgreSQL by
/// `tool::postgres_tests`.
#[cfg(test)]
pub(crate) async fn exercise(store: &Store) {
    let item = |key: &str, title: &str, published: Option<i64>| NewFeedItem {
        key: key.into(),
        title: Some(title.into()),
        link: Some(format!("https://example.org/{key}")),
        summary: Some("text".into()),
        published_at: published,
    };
    let feeds = vec!["blog".to_string()];
    assert_eq!(store.feed_source("blog").await.expect("read"), None);
    let source = FeedSource {
        url: "https://example.org/feed".into(),
        etag: Some("\"v1\"".into()),
        last_modified: None,
    };
    store
        .save_feed_source("blog", &source, 1)
        .await
        .expect("saved");
    let mut changed = source.clone();
    changed.etag = None;
    changed.last_modified = Some("Sun, 29 Nov 2026 08:00:00 GMT".into());
    store
        .save_feed_source("blog", &changed, 2)
        .await
        .expect("replaced");
    assert_eq!(
        store.feed_source("blog").await.expect("read"),
        Some(changed)
    );

    let new = store
        .remember_feed_items(
            "blog",
            &[item("a", "A", Some(100)), item("b", "B", None)],
            10,
        )
        .await
        .expect("remembered");
    assert_eq!(new, 2);
    // The same items again, one retitled: nothing new, the title follows.
    let new = store
        .remember_feed_items(
            "blog",
            &[item("a", "A, fixed", Some(100)), item("c", "C", Some(50))],
            20,
        )
        .await
        .expect("remembered");
    assert_eq!(new, 1);

    let (total, unread) = store
        .feed_items(&feeds, ItemFilter::Unread, 2)
        .await
        .expect("unread");
    assert_eq!(total, 3);
    assert_eq!(unread.len(), 2);
    // Newest first: b has no date and was first seen at 10, so a (100) and c (50) come first.
    let titles: Vec<_> = unread.iter().filter_map(|i| i.title.clone()).collect();
    assert_eq!(titles, ["A, fixed", "C"]);
    assert_eq!(
        unread[0].first_seen, 10,
        "a retitled item keeps its first sighting"
    );
    let ids: Vec<i64> = unread.iter().map(|i| i.id).collect();
    store
        .mark_feed_items_presented(&ids, 30)
        .await
        .expect("marked");
    let (total, rest) = store
        .feed_items(&feeds, ItemFilter::Unread, 10)
        .await
        .expect("unread");
    assert_eq!((total, rest.len()), (1, 1));
    assert_eq!(rest[0].title.as_deref(), Some("B"));

    let (seen_after, _) = store
        .feed_items(&feeds, ItemFilter::SeenAfter(10), 10)
        .await
        .expect("since");
    assert_eq!(seen_after, 1, "only c was first seen after 10");
    let (published, _) = store
        .feed_items(&feeds, ItemFilter::PublishedSince(50), 10)
        .await
        .expect("published");
    assert_eq!(published, 2);
    let (other, _) = store
        .feed_items(&["news".to_string()], ItemFilter::Unread, 10)
        .await
        .expect("other feed");
    assert_eq!(other, 0);

    assert_eq!(store.feed_mark("last_briefing").await.expect("mark"), None);
    store.set_feed_mark("last_briefing", 5).await.expect("set");
    store.set_feed_mark("last_briefing", 7).await.expect("set");
    assert_eq!(
        store.feed_mark("last_briefing").await.expect("mark"),
        Some(7)
    );
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn items_are_new_once_and_validators_are_replaced() {
        let (store, _dir) = crate::store::test_support::temp_store().await;
        super::exercise(&store).await;
    }
}
