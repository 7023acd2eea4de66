//! The tools every installation has. The full catalogue (tasks, notes, memory, expenses …)
//! registers here too as it grows.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolInfo, ToolRegistry};

pub fn register_builtin(registry: &mut ToolRegistry) {
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(CurrentDateTime::new())];
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
        super::file::tools,
    ] {
        tools.extend(family());
    }
    for tool in tools {
        if let Err(err) = registry.register(tool) {
            // Built-in names are fixed at compile time; a clash is a programming error that the
            // unit tests catch, so log instead of taking the daemon down.
            tracing::error!(%err, "built-in tool not registered");
        }
    }
}

/// `get_current_datetime`: the date and time in the user's timezone (or a named one).
struct CurrentDateTime(ToolInfo);

impl CurrentDateTime {
    fn new() -> Self {
        Self(ToolInfo::new(
            "get_current_datetime",
            "utilities",
            "Get the current date, time and weekday, in the user's timezone or a given IANA timezone.",
            json!({
                "type": "object",
                "properties": {
                    "timezone": {"type": "string", "description": "IANA timezone such as Europe/Berlin; default: the user's"}
                },
                "additionalProperties": false
            }),
        ))
    }
}

#[async_trait]
impl Tool for CurrentDateTime {
    fn info(&self) -> &ToolInfo {
        &self.0
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let tz = match arguments.get("timezone").and_then(Value::as_str) {
            Some(name) => name.parse::<chrono_tz::Tz>().map_err(|_| {
                ToolError::InvalidArguments(format!(
                    "unknown timezone {name:?}; use an IANA name like Europe/Berlin"
                ))
            })?,
            None => ctx.timezone,
        };
        let now = ctx.clock.now().with_timezone(&tz);
        Ok(json!({
            "datetime": now.to_rfc3339(),
            "date": now.format("%Y-%m-%d").to_string(),
            "time": now.format("%H:%M:%S").to_string(),
            "weekday": now.format("%A").to_string(),
            "timezone": tz.name(),
        })
        .to_string())
    }
}
