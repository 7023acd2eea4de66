//! The `notes` tools: free-text notes with a title and tags, per user. Each tool is its
//! argument type ([`TypedTool`]); the SQL is in `store::note`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::common::{deleted, listing, not_found, tags_value, user_id};
use super::time::format_local;
use super::typed::{Batch, Count, Limit, NonBlank, NonEmpty, Tags};
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::store::note::{NotePatch, NoteRow};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<AddNote>(),
        typed::<BatchAddNotes>(),
        typed::<ListNotes>(),
        typed::<UpdateNote>(),
        typed::<DeleteNote>(),
    ]
}

const MAX_BATCH: usize = 50;
const GROUP: &str = "notes";
const LIST_LIMIT: Limit = Limit::new(20, 50);

/// Save a note for the user. Returns its id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddNote {
    /// A short title
    title: NonEmpty,
    /// The note's text
    content: NonBlank,
    /// Labels, e.g. ["recipe"]
    #[serde(default)]
    tags: Tags,
}

impl AddNote {
    async fn add(self, ctx: &ToolContext, user: i64) -> Result<Value, ToolError> {
        let (title, tags) = (self.title.0, self.tags);
        let now = ctx.clock.now_ms();
        let id = ctx
            .store
            .insert_note(user, &title, &self.content.0, &tags.to_json(), now)
            .await?;
        Ok(json!({"id": id, "title": title, "tags": tags.0}))
    }
}

impl TypedTool for AddNote {
    const NAME: &'static str = "add_note";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "write down, jot, save, text, create";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        self.add(ctx, user_id(ctx)?).await
    }
}

/// Save several notes at once; each is checked on its own and gets its own id or error.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BatchAddNotes {
    /// The notes, each with title, content and optional tags
    notes: Batch<AddNote, MAX_BATCH>,
}

impl TypedTool for BatchAddNotes {
    const NAME: &'static str = "batch_add_notes";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "many, multiple, bulk, jot";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let results = self
            .notes
            .each(|note| async move {
                let note = note.add(ctx, user).await?;
                Ok(json!({"id": note["id"], "title": note["title"]}))
            })
            .await;
        Ok(results)
    }
}

/// List or search the user's notes, most recently changed first.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListNotes {
    /// Words in the title or content (case-insensitive)
    search: Option<String>,
    /// Only notes with this tag
    tag: Option<String>,
    /// Default 20, at most 50
    limit: Option<Count>,
}

impl TypedTool for ListNotes {
    const NAME: &'static str = "list_notes";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "find, search, show, read";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let page = LIST_LIMIT.page(self.search, self.tag, self.limit);
        let listed = ctx.store.list_notes(user_id(ctx)?, &page).await?;
        Ok(listing("notes", listed, |row| NoteView::new(ctx, row)))
    }
}

/// Change a note's title, content or tags (tags are replaced).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateNote {
    /// The note's id
    note_id: i64,
    title: Option<NonEmpty>,
    /// The new text (replaces the old)
    content: Option<NonBlank>,
    tags: Option<Tags>,
}

impl TypedTool for UpdateNote {
    const NAME: &'static str = "update_note";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "edit, change";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, id) = (user_id(ctx)?, self.note_id);
        let patch = NotePatch {
            title: self.title.map(|title| title.0),
            content: self.content.map(|content| content.0),
            tags: self.tags.map(|tags| tags.to_json()),
        };
        if patch.is_empty() {
            return Err(ToolError::InvalidArguments(
                "nothing to change: give at least one of title, content, tags".into(),
            ));
        }
        let now = ctx.clock.now_ms();
        if !ctx.store.update_note(user, id, patch, now).await? {
            return Err(not_found("note", id));
        }
        let note = ctx
            .store
            .note(user, id)
            .await?
            .ok_or_else(|| not_found("note", id))?;
        Ok(json!({"updated": id, "note": NoteView::new(ctx, note)}))
    }
}

/// Delete a note for good.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteNote {
    /// The note's id
    note_id: i64,
}

impl TypedTool for DeleteNote {
    const NAME: &'static str = "delete_note";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Destructive;
    const TAGS: &'static str = "remove";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, id) = (user_id(ctx)?, self.note_id);
        let title = ctx.store.delete_note(user, id).await?;
        deleted("note", id, "title", title)
    }
}

/// A note as the model sees it, its last change in the user's timezone.
#[derive(Debug, Serialize)]
struct NoteView {
    id: i64,
    title: String,
    content: String,
    tags: Value,
    updated: String,
}

impl NoteView {
    fn new(ctx: &ToolContext, note: NoteRow) -> Self {
        Self {
            id: note.id,
            title: note.title,
            content: note.content,
            tags: tags_value(&note.tags),
            updated: format_local(note.updated_at, ctx.timezone),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::test_context;

    crate::tool::test_calls::family_calls!(tools, "notes");

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

        let other = crate::tool::other_user(&ctx).await;
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
