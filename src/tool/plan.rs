//! `update_plan`: the short checklist of a multi-step request, shown in the chat as one message
//! edited as the steps change (issue 48; see `runtime::plan` for the showing). Codex's shape with
//! a note per step. Offered to every agent, whatever its `tool_groups`
//! (`runtime::tools::Toolbox`).
//!
//! Whole-list plan tools lose items: a model rewriting the list forgets steps. So each call is
//! compared with the stored revision, and a step left out before it was done comes back as
//! skipped, in its place, rather than silently vanishing. The reply is a receipt, never the plan
//! echoed back: the model has the plan in its own call.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::untrusted::strip_invisible;
use super::{Tool, ToolContext, ToolError, TypedTool, typed};
use crate::store::plan::{PlanRevision, PlanStep, StepStatus};

/// The tool's name: the runtime shows the plan after a call of it.
pub const NAME: &str = <UpdatePlan as TypedTool>::NAME;

/// Most steps a plan has.
pub const MAX_STEPS: usize = 12;
/// Longest step text, in characters.
pub const MAX_STEP_CHARS: usize = 120;
/// Longest note and explanation, in characters.
pub const MAX_NOTE_CHARS: usize = 200;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![typed::<UpdatePlan>()]
}

/// Keep the user's checklist for a request that takes three or more steps; it is shown in the chat as one message updated as you go. Send the whole list on every call, each step with its status (at most one in_progress), keeping each step's wording the same between calls. Never drop a step: mark it skipped or failed. Not for simple requests.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdatePlan {
    /// One sentence on the plan or on what changed (optional)
    #[serde(default)]
    explanation: Option<String>,
    /// The steps in order, at most 12
    plan: Vec<StepArg>,
}

/// One step as the model writes it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepArg {
    /// What the step does, in a few words (at most 120 characters)
    step: String,
    status: StepStatus,
    /// A short note: what came out, or why it failed (optional)
    #[serde(default)]
    note: Option<String>,
}

impl TypedTool for UpdatePlan {
    const NAME: &'static str = "update_plan";
    const GROUP: &'static str = "utilities";
    const TAGS: &'static str = "plan, checklist, steps, progress, todo";
    type Output = String;

    async fn run(self, ctx: &ToolContext) -> Result<String, ToolError> {
        let previous = ctx.store.plan_of_turn(ctx.turn_id).await?;
        let explanation = clean_note(self.explanation, "explanation")?;
        let stored = previous.as_ref().map(|p| p.steps.as_slice());
        let (steps, kept) = revise(stored, self.plan).map_err(ToolError::InvalidArguments)?;
        let revision = PlanRevision {
            turn_id: ctx.turn_id,
            conversation_id: ctx.conversation_id,
            replaces: previous.as_ref().map_or(0, |p| p.revision),
            explanation: explanation.as_deref(),
            steps: &steps,
        };
        let now = ctx.clock.now_ms();
        let Some(number) = ctx.store.save_plan(&revision, now).await? else {
            return Err(ToolError::Failed(
                "the plan changed meanwhile (another update_plan call in the same answer): call update_plan once per answer, with the whole list".into(),
            ));
        };
        let done = steps
            .iter()
            .filter(|s| s.status == StepStatus::Done)
            .count();
        let mut receipt = format!("Plan updated (rev {number}, {done}/{} done)", steps.len());
        if !kept.is_empty() {
            let names: Vec<String> = kept.iter().map(|s| format!("“{s}”")).collect();
            receipt.push_str(&format!(
                ". Left out before it was done, so kept as skipped: {}",
                names.join(", ")
            ));
        }
        Ok(receipt)
    }
}

/// A note or explanation without invisible characters, trimmed; empty is none.
fn clean_note(text: Option<String>, what: &str) -> Result<Option<String>, ToolError> {
    let Some(text) = text else {
        return Ok(None);
    };
    let text = strip_invisible(&text).trim().to_string();
    if text.chars().count() > MAX_NOTE_CHARS {
        return Err(ToolError::InvalidArguments(format!(
            "the {what} is longer than {MAX_NOTE_CHARS} characters: keep it to a short sentence"
        )));
    }
    Ok((!text.is_empty()).then_some(text))
}

/// The new revision of a plan from the model's list and the stored steps: each step checked,
/// and the stored steps the list leaves out put back in their place (as skipped when they were
/// not over yet). Returns the steps and the texts of those put back as skipped; an error names
/// what to fix.
pub fn revise(
    stored: Option<&[PlanStep]>,
    list: Vec<StepArg>,
) -> Result<(Vec<PlanStep>, Vec<String>), String> {
    if list.is_empty() {
        return Err("the plan has no steps: send at least one".into());
    }
    let mut steps: Vec<PlanStep> = Vec::with_capacity(list.len());
    for (n, arg) in list.into_iter().enumerate() {
        let text = strip_invisible(&arg.step).trim().to_string();
        if text.is_empty() {
            return Err(format!("step {} has no text", n + 1));
        }
        if text.chars().count() > MAX_STEP_CHARS {
            return Err(format!(
                "step {} is longer than {MAX_STEP_CHARS} characters: say it in a few words",
                n + 1
            ));
        }
        if steps.iter().any(|s| s.step == text) {
            return Err(format!("the step “{text}” is listed twice"));
        }
        let note = clean_note(arg.note, "note").map_err(|err| match err {
            ToolError::InvalidArguments(msg) | ToolError::Failed(msg) => {
                format!("step {}: {msg}", n + 1)
            }
        })?;
        steps.push(PlanStep::new(text, arg.status, note));
    }
    let mut kept = Vec::new();
    if let Some(stored) = stored {
        // Each stored step the list left out goes back right after the stored step before it.
        for (i, old) in stored.iter().enumerate() {
            if steps.iter().any(|s| s.step == old.step) {
                continue;
            }
            let at = i
                .checked_sub(1)
                .and_then(|before| steps.iter().position(|s| s.step == stored[before].step))
                .map_or(0, |p| p + 1);
            let mut back = old.clone();
            if !back.status.is_settled() {
                back.status = StepStatus::Skipped;
                kept.push(back.step.clone());
            }
            steps.insert(at, back);
        }
    }
    if steps.len() > MAX_STEPS {
        let mut msg = format!("a plan has at most {MAX_STEPS} steps");
        if !kept.is_empty() {
            msg.push_str(&format!(
                ", and steps left out are kept: {} was never done. Mark it skipped or failed and shorten the list",
                kept.iter()
                    .map(|s| format!("“{s}”"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        return Err(msg);
    }
    let running = steps
        .iter()
        .filter(|s| s.status == StepStatus::InProgress)
        .count();
    if running > 1 {
        return Err(format!(
            "{running} steps are in_progress: at most one step is in progress at a time"
        ));
    }
    Ok((steps, kept))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(value: serde_json::Value) -> Vec<StepArg> {
        serde_json::from_value(value).expect("steps")
    }

    fn texts(steps: &[PlanStep]) -> Vec<(&str, StepStatus)> {
        steps.iter().map(|s| (s.step.as_str(), s.status)).collect()
    }

    #[test]
    fn a_first_plan_is_checked_and_cleaned() {
        let (steps, kept) = revise(
            None,
            list(json!([
                {"step": " Find\u{200b} flats ", "status": "in_progress"},
                {"step": "Compare", "status": "pending", "note": "\u{202e}by price"},
            ])),
        )
        .expect("valid");
        assert_eq!(
            texts(&steps),
            [
                ("Find flats", StepStatus::InProgress),
                ("Compare", StepStatus::Pending)
            ]
        );
        assert_eq!(steps[1].note.as_deref(), Some("by price"));
        assert!(kept.is_empty());
    }

    #[test]
    fn bad_lists_are_refused_with_what_to_fix() {
        let cases = [
            (json!([]), "no steps"),
            (
                json!([{"step": "\u{200b} ", "status": "pending"}]),
                "step 1 has no text",
            ),
            (
                json!([{"step": "x".repeat(121), "status": "pending"}]),
                "longer than 120",
            ),
            (
                json!([{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]),
                "at most one step is in progress",
            ),
            (
                json!([{"step": "a", "status": "done"}, {"step": "a", "status": "pending"}]),
                "listed twice",
            ),
            (
                json!([{"step": "a", "status": "done", "note": "n".repeat(201)}]),
                "step 1: the note is longer",
            ),
        ];
        for (value, expected) in cases {
            let err = revise(None, list(value.clone())).expect_err("refused");
            assert!(err.contains(expected), "{value}: {err}");
        }
        let thirteen: Vec<_> = (0..13)
            .map(|i| json!({"step": format!("s{i}"), "status": "pending"}))
            .collect();
        let err = revise(None, list(json!(thirteen))).expect_err("too many");
        assert!(err.contains("at most 12 steps"), "{err}");
        // An unknown status is the schema's to refuse.
        assert!(
            serde_json::from_value::<Vec<StepArg>>(json!([{"step": "a", "status": "completed"}]))
                .is_err()
        );
    }

    #[test]
    fn a_step_left_out_before_it_was_done_comes_back_as_skipped_in_its_place() {
        let stored = [
            PlanStep::new("Find flats".into(), StepStatus::Done, None),
            PlanStep::new("Compare".into(), StepStatus::InProgress, None),
            PlanStep::new("Book a viewing".into(), StepStatus::Pending, None),
        ];
        // The model forgot the done step and the comparison.
        let (steps, kept) = revise(
            Some(&stored),
            list(json!([{"step": "Book a viewing", "status": "in_progress"}])),
        )
        .expect("valid");
        assert_eq!(
            texts(&steps),
            [
                ("Find flats", StepStatus::Done),
                ("Compare", StepStatus::Skipped),
                ("Book a viewing", StepStatus::InProgress),
            ]
        );
        assert_eq!(kept, ["Compare"]);
        // Putting them back would pass the cap: the call is refused, naming the step.
        let eleven: Vec<_> = (0..11)
            .map(|i| json!({"step": format!("s{i}"), "status": "pending"}))
            .collect();
        let err = revise(Some(&stored), list(json!(eleven))).expect_err("too many");
        assert!(err.contains("“Compare”"), "{err}");
        assert!(err.contains("“Book a viewing”"), "{err}");
    }
}
