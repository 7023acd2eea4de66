//! The `notes` tools: free-text notes with a title and tags, per user.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::common::{
    Bind, Changes, Sql, db, delete_owned, id_arg, like_pattern, not_found, opt_text, tags_arg,
    tags_json, tags_value, user_id, write_tx,
};
use super::time::format_local;
use super::{Args, Risk, Tool, ToolContext, ToolError, ToolInfo, list_limit};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    [Op::Add, Op::BatchAdd, Op::List, Op::Update, Op::Delete]
        .into_iter()
        .map(|op| Arc::new(NoteTool::new(op)) as Arc<dyn Tool>)
        .collect()
}

const MAX_BATCH: usize = 50;

#[derive(Clone, Copy, Debug)]
enum Op {
    Add,
    BatchAdd,
    List,
    Update,
    Delete,
}

struct NoteTool {
    info: ToolInfo,
    op: Op,
}

fn note_properties() -> Value {
    json!({
        "title": {"type": "string", "description": "A short title"},
        "content": {"type": "string", "description": "The note's text"},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels, e.g. [\"recipe\"]"}
    })
}

fn note_id_schema() -> Value {
    json!({"type": "integer", "description": "The note's id"})
}

impl NoteTool {
    fn new(op: Op) -> Self {
        let info = match op {
            Op::Add => ToolInfo::new(
                "add_note",
                "notes",
                "Save a note for the user. Returns its id.",
                json!({
                    "type": "object",
                    "properties": note_properties(),
                    "required": ["title", "content"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["write down", "jot", "save", "text", "create"]),
            Op::BatchAdd => ToolInfo::new(
                "batch_add_notes",
                "notes",
                "Save several notes at once; each is checked on its own and gets its own id or error.",
                json!({
                    "type": "object",
                    "properties": {
                        "notes": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": MAX_BATCH,
                            "description": "The notes, each with title, content and optional tags",
                            "items": {
                                "type": "object",
                                "properties": note_properties(),
                                "required": ["title", "content"],
                                "additionalProperties": false
                            }
                        }
                    },
                    "required": ["notes"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["many", "multiple", "bulk", "jot"]),
            Op::List => ToolInfo::new(
                "list_notes",
                "notes",
                "List or search the user's notes, most recently changed first.",
                json!({
                    "type": "object",
                    "properties": {
                        "search": {"type": "string", "description": "Words in the title or content (case-insensitive)"},
                        "tag": {"type": "string", "description": "Only notes with this tag"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 20, at most 50"}
                    },
                    "additionalProperties": false
                }),
            )
            .limit("limit", 20, 50)
            .tags(&["find", "search", "show", "read"]),
            Op::Update => ToolInfo::new(
                "update_note",
                "notes",
                "Change a note's title, content or tags (tags are replaced).",
                json!({
                    "type": "object",
                    "properties": {
                        "note_id": note_id_schema(),
                        "title": {"type": "string"},
                        "content": {"type": "string", "description": "The new text (replaces the old)"},
                        "tags": {"type": "array", "items": {"type": "string"}}
                    },
                    "required": ["note_id"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["edit", "change"]),
            Op::Delete => ToolInfo::new(
                "delete_note",
                "notes",
                "Delete a note for good.",
                json!({
                    "type": "object",
                    "properties": {"note_id": note_id_schema()},
                    "required": ["note_id"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Destructive)
            .tags(&["remove"]),
        };
        Self { info, op }
    }
}

#[async_trait]
impl Tool for NoteTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let user = user_id(ctx)?;
        let result = match self.op {
            Op::Add => {
                let note = NewNote::read(&arguments)?;
                let id = insert(ctx, user, &note).await?;
                json!({"id": id, "title": note.title, "tags": note.tags})
            }
            Op::BatchAdd => batch_add(ctx, user, &arguments).await?,
            Op::List => list(ctx, user, &arguments, list_limit(&self.info, &arguments)).await?,
            Op::Update => update(ctx, user, &arguments).await?,
            Op::Delete => {
                let id = id_arg(&arguments, "note_id")?;
                let sql = "DELETE FROM notes WHERE id = $1 AND user_id = $2 RETURNING title";
                delete_owned(ctx, user, sql, id, "note", "title").await?
            }
        };
        Ok(result.to_string())
    }
}

struct NewNote {
    title: String,
    content: String,
    tags: Vec<String>,
}

impl NewNote {
    fn read(arguments: &Value) -> Result<Self, ToolError> {
        let args = Args::new(arguments);
        Ok(Self {
            title: args.str("title")?.trim().to_string(),
            content: args.str("content")?.to_string(),
            tags: tags_arg(arguments, "tags"),
        })
    }
}

async fn insert(ctx: &ToolContext, user: i64, note: &NewNote) -> Result<i64, ToolError> {
    let mut tx = write_tx(ctx).await?;
    let row = sqlx::query(
        "INSERT INTO notes (user_id, title, content, tags, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $5) RETURNING id",
    )
    .bind(user)
    .bind(note.title.clone())
    .bind(note.content.clone())
    .bind(tags_json(&note.tags))
    .bind(ctx.clock.now_ms())
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    row.try_get("id").map_err(db)
}

async fn batch_add(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let items = Args::new(arguments).array("notes")?;
    if items.is_empty() || items.len() > MAX_BATCH {
        return Err(ToolError::InvalidArguments(format!(
            "`notes` must hold 1 to {MAX_BATCH} notes"
        )));
    }
    let mut results = Vec::with_capacity(items.len());
    let mut added = 0;
    for (index, item) in items.iter().enumerate() {
        let outcome = match NewNote::read(item) {
            Ok(note) => insert(ctx, user, &note).await.map(|id| (id, note.title)),
            Err(err) => Err(err),
        };
        results.push(match outcome {
            Ok((id, title)) => {
                added += 1;
                json!({"index": index, "id": id, "title": title})
            }
            Err(err) => json!({"index": index, "error": err.to_string()}),
        });
    }
    Ok(json!({"added": added, "failed": items.len() - added, "results": results}))
}

const NOTE_COLUMNS: &str = "id, title, content, tags, updated_at";

fn note_json(ctx: &ToolContext, row: &AnyRow) -> Result<Value, ToolError> {
    let tags: String = row.try_get("tags").map_err(db)?;
    let updated: i64 = row.try_get("updated_at").map_err(db)?;
    Ok(json!({
        "id": row.try_get::<i64, _>("id").map_err(db)?,
        "title": row.try_get::<String, _>("title").map_err(db)?,
        "content": row.try_get::<String, _>("content").map_err(db)?,
        "tags": tags_value(&tags),
        "updated": format_local(updated, ctx.timezone),
    }))
}

async fn list(
    ctx: &ToolContext,
    user: i64,
    arguments: &Value,
    limit: i64,
) -> Result<Value, ToolError> {
    let mut query = Sql::new(&format!(
        "SELECT {NOTE_COLUMNS} FROM notes WHERE user_id = "
    ));
    query.bind(Bind::Int(user));
    if let Some(search) = opt_text(arguments, "search") {
        let pattern = like_pattern(&search);
        query.push(" AND (LOWER(title) LIKE ");
        query.bind(Bind::Text(pattern.clone()));
        query.push(" ESCAPE '\\' OR LOWER(content) LIKE ");
        query.bind(Bind::Text(pattern));
        query.push(" ESCAPE '\\')");
    }
    if let Some(tag) = opt_text(arguments, "tag") {
        query.push_tag_filter(&tag);
    }
    query.push(" ORDER BY updated_at DESC, id DESC LIMIT ");
    query.bind(Bind::Int(limit + 1));
    let rows = query.fetch_all(ctx).await?;
    let more = rows.len() as i64 > limit;
    let notes = rows
        .iter()
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(|row| note_json(ctx, row))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({"count": notes.len(), "more": more, "notes": notes}))
}

async fn update(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let args = Args::new(arguments);
    let id = id_arg(arguments, "note_id")?;
    let mut changes = Changes::default();
    if arguments.get("title").is_some() {
        changes.set("title", Bind::Text(args.str("title")?.trim().to_string()));
    }
    if arguments.get("content").is_some() {
        changes.set("content", Bind::Text(args.str("content")?.to_string()));
    }
    if arguments.get("tags").is_some() {
        changes.set("tags", Bind::Text(tags_json(&tags_arg(arguments, "tags"))));
    }
    if changes.is_empty() {
        return Err(ToolError::InvalidArguments(
            "nothing to change: give at least one of title, content, tags".into(),
        ));
    }
    changes.set("updated_at", Bind::Int(ctx.clock.now_ms()));
    if !changes.apply(ctx, "notes", id, user).await? {
        return Err(not_found("note", id));
    }
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {NOTE_COLUMNS} FROM notes WHERE id = $1 AND user_id = $2"
    )))
    .bind(id)
    .bind(user)
    .fetch_optional(ctx.store.pool())
    .await
    .map_err(db)?
    .ok_or_else(|| not_found("note", id))?;
    Ok(json!({"updated": id, "note": note_json(ctx, &row)?}))
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
        sqlx::query_scalar("SELECT COUNT(*) FROM notes")
            .fetch_one(ctx.store.pool())
            .await
            .expect("count")
    }

    #[tokio::test]
    async fn add_list_search_and_tag() {
        let (ctx, _dir) = test_context().await;
        let added = ok(
            &ctx,
            "add_note",
            json!({"title": "Pancakes", "content": "200 g flour, 2 eggs, milk", "tags": ["Recipe"]}),
        )
        .await;
        assert_eq!(added["tags"], json!(["recipe"]));
        ok(
            &ctx,
            "add_note",
            json!({"title": "Wifi", "content": "password is hunter2"}),
        )
        .await;

        let all = ok(&ctx, "list_notes", json!({})).await;
        assert_eq!(all["count"], 2);
        let found = ok(&ctx, "list_notes", json!({"search": "FLOUR"})).await;
        assert_eq!(found["notes"][0]["title"], "Pancakes");
        let found = ok(&ctx, "list_notes", json!({"tag": "recipe"})).await;
        assert_eq!(found["count"], 1);
        let found = ok(&ctx, "list_notes", json!({"tag": "recip"})).await;
        assert_eq!(found["count"], 0, "tags match whole");
        let limited = ok(&ctx, "list_notes", json!({"limit": 1})).await;
        assert_eq!(limited["more"], true);
    }

    #[tokio::test]
    async fn update_and_delete_with_errors() {
        let (ctx, _dir) = test_context().await;
        let id = ok(&ctx, "add_note", json!({"title": "Draft", "content": "v1"})).await["id"]
            .as_i64()
            .expect("id");
        let updated = ok(
            &ctx,
            "update_note",
            json!({"note_id": id, "content": "v2", "tags": ["x"]}),
        )
        .await;
        assert_eq!(updated["note"]["content"], "v2");
        assert_eq!(updated["note"]["title"], "Draft");
        assert!(
            err(&ctx, "update_note", json!({"note_id": id}))
                .await
                .contains("nothing to change")
        );
        assert!(
            err(&ctx, "update_note", json!({"note_id": id, "content": ""}))
                .await
                .contains("`content`")
        );
        assert_eq!(
            err(&ctx, "update_note", json!({"note_id": 99, "title": "x"})).await,
            "note 99 not found"
        );
        assert_eq!(
            err(&ctx, "delete_note", json!({"note_id": 99})).await,
            "note 99 not found"
        );

        let other_user = ctx
            .store
            .allow_identity("test", "u2", None, "config", false, 0)
            .await
            .expect("user");
        let mut other = ctx.clone();
        other.user_id = Some(other_user.user_id);
        assert_eq!(
            err(&other, "delete_note", json!({"note_id": id})).await,
            format!("note {id} not found")
        );
        assert_eq!(ok(&other, "list_notes", json!({})).await["count"], 0);

        assert_eq!(
            ok(&ctx, "delete_note", json!({"note_id": id})).await["title"],
            "Draft"
        );
        assert_eq!(count(&ctx).await, 0);
    }

    #[tokio::test]
    async fn bad_input_stores_nothing_and_batches_report_each_item() {
        let (ctx, _dir) = test_context().await;
        assert!(
            err(&ctx, "add_note", json!({"title": "", "content": "x"}))
                .await
                .contains("`title`")
        );
        assert!(
            err(&ctx, "add_note", json!({"title": "x"}))
                .await
                .contains("`content`")
        );
        assert_eq!(count(&ctx).await, 0);
        let result = ok(
            &ctx,
            "batch_add_notes",
            json!({"notes": [{"title": "A", "content": "a"}, {"title": "B"}, {"title": "C", "content": "c"}]}),
        )
        .await;
        assert_eq!(
            (result["added"].clone(), result["failed"].clone()),
            (json!(2), json!(1))
        );
        assert!(
            result["results"][1]["error"]
                .as_str()
                .expect("error")
                .contains("content")
        );
        assert_eq!(count(&ctx).await, 2);
        assert_eq!(tools()[4].info().risk, Risk::Destructive);
    }
}
