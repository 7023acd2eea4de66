//! `tool_result`: the full text of an earlier tool result that the conversation shows only as a
//! short stub (old results are shortened to keep long conversations within the model's window;
//! see `runtime::context`). Offered to every agent that has tools.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::typed::NonEmpty;
use super::{Tool, ToolContext, ToolError, TypedTool, typed};

/// The tool's name, which the stubs mention.
pub const NAME: &str = <ToolResult as TypedTool>::NAME;

/// The most characters returned: a result larger than a reply is cut with a note.
const MAX_CHARS: usize = 20_000;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![typed::<ToolResult>()]
}

/// Fetch the full text of an earlier tool result that the conversation shows shortened.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ToolResult {
    /// The call_id named in the shortened result
    call_id: NonEmpty,
}

impl TypedTool for ToolResult {
    const NAME: &'static str = "tool_result";
    const GROUP: &'static str = "utilities";
    const TAGS: &'static str = "earlier, full, shortened, result";
    type Output = String;

    async fn run(self, ctx: &ToolContext) -> Result<String, ToolError> {
        let call_id = self.call_id.0;
        let found = ctx
            .store
            .tool_result_in(ctx.conversation_id, ctx.user_id, &call_id)
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
