//! The `bookmarks` tools: links the user wants to keep, with a title, description and tags.
//! Each tool is its argument type ([`TypedTool`]); the SQL is in `store::bookmark`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::common::{deleted, listing, tags_value, user_id};
use super::time::format_local;
use super::typed::{Count, Limit, NonEmpty, Tags, text};
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::store::bookmark::{Bookmark, BookmarkRow};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<AddBookmark>(),
        typed::<ListBookmarks>(),
        typed::<DeleteBookmark>(),
    ]
}

const GROUP: &str = "bookmarks";
const LIST_LIMIT: Limit = Limit::new(20, 50);

/// Save a web link (http or https) for the user. Saving a link twice returns the first.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddBookmark {
    /// The full address, http:// or https://
    url: NonEmpty,
    title: Option<String>,
    /// Why it is worth keeping
    description: Option<String>,
    /// Labels, e.g. ["rust"]
    #[serde(default)]
    tags: Tags,
}

impl TypedTool for AddBookmark {
    const NAME: &'static str = "add_bookmark";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "link, url, save, read later, website";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let url = check_url(&self.url.0)?;
        if let Some(row) = ctx.store.bookmark_of_url(user, &url).await? {
            return Ok(json!({"already_saved": true, "bookmark": BookmarkView::new(ctx, row)}));
        }
        let link = Bookmark {
            url,
            title: text(self.title),
            description: text(self.description),
            tags: self.tags.to_json(),
        };
        let id = ctx
            .store
            .insert_bookmark(user, &link, ctx.clock.now_ms())
            .await?;
        Ok(json!({"id": id, "url": link.url, "title": link.title, "tags": self.tags.0}))
    }
}

/// List or search the user's saved links, newest first.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListBookmarks {
    /// Words in the address, title or description (case-insensitive)
    search: Option<String>,
    /// Only links with this tag
    tag: Option<String>,
    /// Default 20, at most 50
    limit: Option<Count>,
}

impl TypedTool for ListBookmarks {
    const NAME: &'static str = "list_bookmarks";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "link, url, find, show";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let page = LIST_LIMIT.page(self.search, self.tag, self.limit);
        let listed = ctx.store.list_bookmarks(user_id(ctx)?, &page).await?;
        Ok(listing("bookmarks", listed, |row| {
            BookmarkView::new(ctx, row)
        }))
    }
}

/// Delete a saved link.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteBookmark {
    /// The bookmark's id
    bookmark_id: i64,
}

impl TypedTool for DeleteBookmark {
    const NAME: &'static str = "delete_bookmark";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Destructive;
    const TAGS: &'static str = "link, remove";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, id) = (user_id(ctx)?, self.bookmark_id);
        let url = ctx.store.delete_bookmark(user, id).await?;
        deleted("bookmark", id, "url", url)
    }
}

/// An absolute http(s) URL with a host, normalised by the URL parser.
fn check_url(text: &str) -> Result<String, ToolError> {
    let url = reqwest::Url::parse(text.trim()).map_err(|e| {
        ToolError::InvalidArguments(format!(
            "`url` {text:?} is not a valid address ({e}); give a full http:// or https:// URL"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ToolError::InvalidArguments(format!(
            "`url` {text:?}: only http:// and https:// addresses can be bookmarked"
        )));
    }
    Ok(url.to_string())
}

/// A saved link as the model sees it, when it was saved in the user's timezone.
#[derive(Debug, Serialize)]
struct BookmarkView {
    id: i64,
    url: String,
    tags: Value,
    saved: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

impl BookmarkView {
    fn new(ctx: &ToolContext, row: BookmarkRow) -> Self {
        Self {
            id: row.id,
            saved: format_local(row.created_at, ctx.timezone),
            url: row.bookmark.url,
            tags: tags_value(&row.bookmark.tags),
            title: row.bookmark.title,
            description: row.bookmark.description,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::test_context;

    crate::tool::test_calls::family_calls!(tools, "bookmarks");

    #[tokio::test]
    async fn add_list_search_tag_and_duplicates() {
        let (ctx, _dir) = test_context().await;
        let added = ok(
            &ctx,
            "add_bookmark",
            json!({"url": "https://docs.rs/sqlx", "title": "sqlx docs", "tags": ["rust"]}),
        )
        .await;
        let id = added["id"].as_i64().expect("id");
        ok(
            &ctx,
            "add_bookmark",
            json!({"url": "http://example.org/recipes", "description": "Good pasta"}),
        )
        .await;
        let again = ok(&ctx, "add_bookmark", json!({"url": "https://docs.rs/sqlx"})).await;
        assert_eq!(again["already_saved"], true);
        assert_eq!(again["bookmark"]["id"], id);
        assert_eq!(count(&ctx).await, 2);

        assert_eq!(ok(&ctx, "list_bookmarks", json!({})).await["count"], 2);
        let found = ok(&ctx, "list_bookmarks", json!({"search": "PASTA"})).await;
        assert_eq!(found["bookmarks"][0]["url"], "http://example.org/recipes");
        let found = ok(&ctx, "list_bookmarks", json!({"tag": "Rust"})).await;
        assert_eq!(found["bookmarks"][0]["title"], "sqlx docs");
        let found = ok(&ctx, "list_bookmarks", json!({"search": "docs.rs"})).await;
        assert_eq!(found["count"], 1);
    }

    #[tokio::test]
    async fn only_web_addresses_are_accepted() {
        let (ctx, _dir) = test_context().await;
        for bad in [
            "ftp://example.org/file",
            "javascript:alert(1)",
            "example.org",
            "file:///etc/passwd",
        ] {
            let message = err(&ctx, "add_bookmark", json!({"url": bad})).await;
            assert!(message.contains("http"), "{bad}: {message}");
        }
        assert!(
            err(&ctx, "add_bookmark", json!({"url": ""}))
                .await
                .contains("`url`")
        );
        assert_eq!(count(&ctx).await, 0);
    }

    #[tokio::test]
    async fn delete_is_per_user() {
        let (ctx, _dir) = test_context().await;
        let id = ok(&ctx, "add_bookmark", json!({"url": "https://example.org"})).await["id"]
            .as_i64()
            .expect("id");
        let other = crate::tool::other_user(&ctx).await;
        assert_eq!(
            err(&other, "delete_bookmark", json!({"bookmark_id": id})).await,
            format!("bookmark {id} not found")
        );
        assert_eq!(ok(&other, "list_bookmarks", json!({})).await["count"], 0);
        let deleted = ok(&ctx, "delete_bookmark", json!({"bookmark_id": id})).await;
        assert_eq!(deleted["url"], "https://example.org/");
        assert_eq!(count(&ctx).await, 0);
        assert_eq!(tools()[2].info().risk, Risk::Destructive);
    }
}
