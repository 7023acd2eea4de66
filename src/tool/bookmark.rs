//! The `bookmark` tools (being written).

use std::sync::Arc;

use super::Tool;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    Vec::new()
}
