//! `tool_result`: the full text of an earlier tool result that the conversation shows only as a
//! short stub (old results are shortened to keep long conversations within the model's window;
//! see `runtime::context`). Offered to every agent that has tools.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolInfo};

/// The tool's name, which the stubs mention.
pub const NAME: &str = "tool_result";

/// The most characters returned: a result larger than a reply is cut with a note.
const MAX_CHARS: usize = 20_000;

struct ToolResultTool {
    info: ToolInfo,
}

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(ToolResultTool {
        info: ToolInfo::new(
            NAME,
            "conversation",
            "Fetch the full text of an earlier tool result that the conversation shows shortened. Pass the call_id the shortened result names.",
            json!({
                "type": "object",
                "properties": {
                    "call_id": {"type": "string", "description": "The call_id named in the shortened result"}
                },
                "required": ["call_id"],
                "additionalProperties": false
            }),
        )
        .tags(&["earlier", "full", "shortened", "result"]),
    })]
}

#[async_trait]
impl Tool for ToolResultTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let call_id = arguments["call_id"]
            .as_str()
            .filter(|id| !id.trim().is_empty())
            .ok_or_else(|| {
                ToolError::InvalidArguments("`call_id` must be a non-empty string".into())
            })?;
        let found = ctx
            .store
            .tool_result_in(ctx.conversation_id, ctx.user_id, call_id)
            .await
            .map_err(|err| ToolError::Failed(format!("reading the result failed: {err}")))?;
        let Some((tool, result)) = found else {
            return Err(ToolError::Failed(format!(
                "no stored result with call_id {call_id:?} in this conversation"
            )));
        };
        let total = result.chars().count();
        if total <= MAX_CHARS {
            return Ok(result);
        }
        let head: String = result.chars().take(MAX_CHARS).collect();
        Ok(format!(
            "{head}\n[… the result of {tool} goes on for {} more characters]",
            total - MAX_CHARS
        ))
    }
}
