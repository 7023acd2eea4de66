//! The `bookmarks` tools: links the user wants to keep, with a title, description and tags.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::common::{
    Bind, Sql, db, delete_owned, id_arg, like_pattern, opt_text, tags_arg, tags_json, tags_value,
    user_id, write_tx,
};
use super::time::format_local;
use super::{Args, Risk, Tool, ToolContext, ToolError, ToolInfo, list_limit};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    [Op::Add, Op::List, Op::Delete]
        .into_iter()
        .map(|op| Arc::new(BookmarkTool::new(op)) as Arc<dyn Tool>)
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Add,
    List,
    Delete,
}

struct BookmarkTool {
    info: ToolInfo,
    op: Op,
}

impl BookmarkTool {
    fn new(op: Op) -> Self {
        let info = match op {
            Op::Add => ToolInfo::new(
                "add_bookmark",
                "bookmarks",
                "Save a web link (http or https) for the user. Saving a link twice returns the first.",
                json!({
                    "type": "object",
                    "properties": {
                        "url": {"type": "string", "description": "The full address, http:// or https://"},
                        "title": {"type": "string"},
                        "description": {"type": "string", "description": "Why it is worth keeping"},
                        "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels, e.g. [\"rust\"]"}
                    },
                    "required": ["url"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["link", "url", "save", "read later", "website"]),
            Op::List => ToolInfo::new(
                "list_bookmarks",
                "bookmarks",
                "List or search the user's saved links, newest first.",
                json!({
                    "type": "object",
                    "properties": {
                        "search": {"type": "string", "description": "Words in the address, title or description (case-insensitive)"},
                        "tag": {"type": "string", "description": "Only links with this tag"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 20, at most 50"}
                    },
                    "additionalProperties": false
                }),
            )
            .limit("limit", 20, 50)
            .tags(&["link", "url", "find", "show"]),
            Op::Delete => ToolInfo::new(
                "delete_bookmark",
                "bookmarks",
                "Delete a saved link.",
                json!({
                    "type": "object",
                    "properties": {"bookmark_id": {"type": "integer", "description": "The bookmark's id"}},
                    "required": ["bookmark_id"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Destructive)
            .tags(&["link", "remove"]),
        };
        Self { info, op }
    }
}

#[async_trait]
impl Tool for BookmarkTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let user = user_id(ctx)?;
        let result = match self.op {
            Op::Add => add(ctx, user, &arguments).await?,
            Op::List => list(ctx, user, &arguments, list_limit(&self.info, &arguments)).await?,
            Op::Delete => {
                let id = id_arg(&arguments, "bookmark_id")?;
                let sql = "DELETE FROM bookmarks WHERE id = $1 AND user_id = $2 RETURNING url";
                delete_owned(ctx, user, sql, id, "bookmark", "url").await?
            }
        };
        Ok(result.to_string())
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

async fn add(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let url = check_url(Args::new(arguments).str("url")?)?;
    let title = opt_text(arguments, "title");
    let tags = tags_arg(arguments, "tags");
    let existing = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {BOOKMARK_COLUMNS} FROM bookmarks WHERE user_id = $1 AND url = $2"
    )))
    .bind(user)
    .bind(url.clone())
    .fetch_optional(ctx.store.pool())
    .await
    .map_err(db)?;
    if let Some(row) = existing {
        return Ok(json!({"already_saved": true, "bookmark": bookmark_json(ctx, &row)?}));
    }
    // ON CONFLICT covers a concurrent save of the same link between the check and the insert.
    let mut tx = write_tx(ctx).await?;
    let row = sqlx::query(
        "INSERT INTO bookmarks (user_id, url, title, description, tags, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (user_id, url) DO UPDATE SET url = excluded.url RETURNING id",
    )
    .bind(user)
    .bind(url.clone())
    .bind(title.clone())
    .bind(opt_text(arguments, "description"))
    .bind(tags_json(&tags))
    .bind(ctx.clock.now_ms())
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    let id: i64 = row.try_get("id").map_err(db)?;
    Ok(json!({"id": id, "url": url, "title": title, "tags": tags}))
}

const BOOKMARK_COLUMNS: &str = "id, url, title, description, tags, created_at";

fn bookmark_json(ctx: &ToolContext, row: &AnyRow) -> Result<Value, ToolError> {
    let tags: String = row.try_get("tags").map_err(db)?;
    let created: i64 = row.try_get("created_at").map_err(db)?;
    let mut value = json!({
        "id": row.try_get::<i64, _>("id").map_err(db)?,
        "url": row.try_get::<String, _>("url").map_err(db)?,
        "tags": tags_value(&tags),
        "saved": format_local(created, ctx.timezone),
    });
    if let Some(title) = row.try_get::<Option<String>, _>("title").map_err(db)? {
        value["title"] = json!(title);
    }
    if let Some(description) = row
        .try_get::<Option<String>, _>("description")
        .map_err(db)?
    {
        value["description"] = json!(description);
    }
    Ok(value)
}

async fn list(
    ctx: &ToolContext,
    user: i64,
    arguments: &Value,
    limit: i64,
) -> Result<Value, ToolError> {
    let mut query = Sql::new(&format!(
        "SELECT {BOOKMARK_COLUMNS} FROM bookmarks WHERE user_id = "
    ));
    query.bind(Bind::Int(user));
    if let Some(search) = opt_text(arguments, "search") {
        let pattern = like_pattern(&search);
        query.push(" AND (LOWER(url) LIKE ");
        query.bind(Bind::Text(pattern.clone()));
        query.push(" ESCAPE '\\' OR LOWER(COALESCE(title, '')) LIKE ");
        query.bind(Bind::Text(pattern.clone()));
        query.push(" ESCAPE '\\' OR LOWER(COALESCE(description, '')) LIKE ");
        query.bind(Bind::Text(pattern));
        query.push(" ESCAPE '\\')");
    }
    if let Some(tag) = opt_text(arguments, "tag") {
        query.push_tag_filter(&tag);
    }
    query.push(" ORDER BY created_at DESC, id DESC LIMIT ");
    query.bind(Bind::Int(limit + 1));
    let rows = query.fetch_all(ctx).await?;
    let more = rows.len() as i64 > limit;
    let bookmarks = rows
        .iter()
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(|row| bookmark_json(ctx, row))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({"count": bookmarks.len(), "more": more, "bookmarks": bookmarks}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::test_context;

    async fn ok(ctx: &ToolContext, name: &str, args: Value) -> Value {
        crate::tool::test_calls::ok(tools(), ctx, name, args).await
    }

    async fn err(ctx: &ToolContext, name: &str, args: Value) -> String {
        crate::tool::test_calls::err(tools(), ctx, name, args).await
    }

    async fn count(ctx: &ToolContext) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM bookmarks")
            .fetch_one(ctx.store.pool())
            .await
            .expect("count")
    }

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
        let user = ctx
            .store
            .allow_identity("test", "u2", None, "config", false, 0)
            .await
            .expect("user");
        let mut other = ctx.clone();
        other.user_id = Some(user.user_id);
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
