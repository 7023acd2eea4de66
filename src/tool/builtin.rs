//! The tools every installation has: each family's `tools()`, registered once at start.

use std::sync::Arc;

use super::{Tool, ToolRegistry};

pub fn register_builtin(registry: &mut ToolRegistry) {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for family in [
        super::task::tools,
        super::note::tools,
        super::bookmark::tools,
        super::contact::tools,
        super::calendar::tools,
        super::expense::tools,
        super::goal::tools,
        super::memory::tools,
        super::utility::tools,
        super::web::tools,
        super::web_search::tools,
        super::weather::tools,
        super::feeds::tools,
        super::file::tools,
        super::schedule::tools,
        super::background::tools,
        super::tool_result::tools,
        super::plan::tools,
    ] {
        tools.extend(family());
    }
    #[cfg(feature = "email")]
    tools.extend(super::mail::tools());
    for tool in tools {
        if let Err(err) = registry.register(tool) {
            // Built-in names are fixed at compile time; a clash is a programming error that the
            // unit tests catch, so log instead of taking the daemon down.
            tracing::error!(%err, "built-in tool not registered");
        }
    }
}
