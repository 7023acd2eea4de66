//! Helpers the catalogue's database-backed families share: the acting user, not-found and date
//! errors, stored tags, and a transaction for a write whose result a tool reports. The SQL
//! itself is in `store::<family>`, built with `store::query`.

use serde::Serialize;
use serde_json::{Value, json};

use super::{ToolContext, ToolError};
use crate::store::query::Listed;

/// The user a call acts for; tools that keep per-user data cannot run without one.
pub fn user_id(ctx: &ToolContext) -> Result<i64, ToolError> {
    ctx.user_id.ok_or_else(|| {
        ToolError::Failed("this tool keeps per-user data and the caller is not a known user".into())
    })
}

/// `"task 42 not found"`. Another user's rows are "not found" as well.
pub fn not_found(kind: &str, id: i64) -> ToolError {
    ToolError::Failed(format!("{kind} {id} not found"))
}

/// A delete tool's answer: `{"deleted": id, "<label>": what}` (its title, address or name),
/// or `"<kind> <id> not found"` when nothing of the user's was deleted.
pub fn deleted(kind: &str, id: i64, label: &str, what: Option<String>) -> Result<Value, ToolError> {
    match what {
        Some(what) => Ok(json!({"deleted": id, label: what})),
        None => Err(not_found(kind, id)),
    }
}

/// Turns a time-parsing message into an error that names the parameter.
pub fn bad_date(param: &'static str) -> impl Fn(String) -> ToolError {
    move |msg| ToolError::InvalidArguments(format!("`{param}`: {msg}"))
}

/// The stored tags text as a JSON value (an empty array if it is not a JSON array).
pub fn tags_value(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Array(_)) => value,
        _ => json!([]),
    }
}

/// A list tool's answer: `{"count": n, "more": bool, "<key>": [views]}`, each row seen through
/// `view`.
pub fn listing<R, V: Serialize>(key: &str, listed: Listed<R>, view: impl FnMut(R) -> V) -> Value {
    let views: Vec<V> = listed.rows.into_iter().map(view).collect();
    json!({"count": views.len(), "more": listed.more, key: views})
}
