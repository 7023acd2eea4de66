//! The `memory` tools (being written).

use std::sync::Arc;

use super::Tool;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    Vec::new()
}

/// What the system prompt says about the user (filled in with the memory tools).
pub async fn prompt_context(
    _store: &crate::store::Store,
    _user_id: i64,
    _query: &str,
    _now_ms: i64,
) -> Result<Option<String>, crate::store::StoreError> {
    Ok(None)
}
