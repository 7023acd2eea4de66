//! `[plans]`: limits of background work and of plan mode's steps (README, "Plans" and
//! "Background tasks").

use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// `[plans]`: what one user's background work may use, and what one step of a plan-mode agent
/// may do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlansConfig {
    /// Background tasks one user may have running at once; a further start is refused with a
    /// note naming the running ones.
    pub max_background_tasks: u32,
    /// Plan mode: tool calls one step may make; a step that asks for more is stopped and
    /// counts as failed.
    pub max_tool_calls: u32,
    /// Plan mode: seconds one step may run (time spent waiting for an approval not counted);
    /// a step still running then is stopped and counts as failed.
    pub step_timeout_secs: u64,
}

impl Default for PlansConfig {
    fn default() -> Self {
        Self {
            max_background_tasks: 3,
            max_tool_calls: 10,
            step_timeout_secs: 120,
        }
    }
}

impl Section for PlansConfig {
    fn check(&self, checks: &mut Checks<'_>) {
        if self.max_background_tasks == 0 {
            checks.problem(
                "max_background_tasks",
                "must be at least 1, like 3 (remove the tool from the agents to turn background work off)",
            );
        }
        if self.max_tool_calls == 0 {
            checks.problem(
                "max_tool_calls",
                "must be at least 1, like 10: a plan's step with no tool calls cannot do anything",
            );
        }
        if self.step_timeout_secs == 0 {
            checks.problem(
                "step_timeout_secs",
                "must be at least 1 second, like 120: a plan's step needs time to run",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::config::load_from_str;

    #[test]
    fn the_defaults_hold_without_the_section_and_zero_is_refused() {
        let config =
            load_from_str("", "hearth.toml", &HashMap::new()).expect("an empty file loads");
        assert_eq!(config.plans.max_background_tasks, 3);
        assert_eq!(config.plans.max_tool_calls, 10);
        assert_eq!(config.plans.step_timeout_secs, 120);

        let config = load_from_str(
            "[plans]\nmax_tool_calls = 4\nstep_timeout_secs = 30\n",
            "hearth.toml",
            &HashMap::new(),
        )
        .expect("set keys load");
        assert_eq!(
            (config.plans.max_tool_calls, config.plans.step_timeout_secs),
            (4, 30)
        );

        let errors = load_from_str(
            "[plans]\nmax_background_tasks = 0\nmax_tool_calls = 0\nstep_timeout_secs = 0\n",
            "hearth.toml",
            &HashMap::new(),
        )
        .expect_err("zero is refused");
        let found: Vec<(&str, &str)> = errors
            .iter()
            .map(|e| (e.key.as_str(), e.message.as_str()))
            .collect();
        let keys: Vec<&str> = found.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "plans.max_background_tasks",
                "plans.max_tool_calls",
                "plans.step_timeout_secs"
            ],
            "{found:?}"
        );
        assert!(found[1].1.contains("at least 1"), "{found:?}");

        // A key that does nothing is refused, not silently taken.
        assert!(
            load_from_str("[plans]\nmax_steps = 10\n", "hearth.toml", &HashMap::new()).is_err()
        );
    }
}
