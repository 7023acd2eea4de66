//! `[plans]`: limits of plan mode's steps and of background tasks (docs: README, "Plans and
//! background work").

use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// `[plans]`: what one plan-mode step and one user's background work may use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlansConfig {
    /// Tool calls one step of a plan-mode agent may make before it is stopped and counted as
    /// failed (then retried once, then replanned once).
    pub max_tool_calls: u32,
    /// Seconds one step may run, waiting for an approval aside.
    pub step_timeout_secs: u64,
    /// Background tasks one user may have running at once; a further start is refused with a
    /// note naming the running ones.
    pub max_background_tasks: u32,
}

impl Default for PlansConfig {
    fn default() -> Self {
        Self {
            max_tool_calls: 10,
            step_timeout_secs: 120,
            max_background_tasks: 3,
        }
    }
}

impl Section for PlansConfig {
    fn check(&self, checks: &mut Checks<'_>) {
        if self.max_tool_calls == 0 {
            checks.problem("max_tool_calls", "must be at least 1, like 10");
        }
        if self.step_timeout_secs == 0 {
            checks.problem("step_timeout_secs", "must be at least 1 second, like 120");
        }
        if self.max_background_tasks == 0 {
            checks.problem(
                "max_background_tasks",
                "must be at least 1, like 3 (remove the tool from the agents to turn background work off)",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::config::load_from_str;

    #[test]
    fn defaults_hold_without_the_section_and_zero_limits_are_refused() {
        let config =
            load_from_str("", "hearth.toml", &HashMap::new()).expect("an empty file loads");
        assert_eq!(config.plans, super::PlansConfig::default());
        assert_eq!(config.plans.max_tool_calls, 10);
        assert_eq!(config.plans.step_timeout_secs, 120);
        assert_eq!(config.plans.max_background_tasks, 3);

        let text = "[plans]\nmax_tool_calls = 0\nstep_timeout_secs = 0\nmax_background_tasks = 0\n";
        let errors = load_from_str(text, "hearth.toml", &HashMap::new())
            .expect_err("zero limits are refused");
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "plans.max_tool_calls",
                "plans.step_timeout_secs",
                "plans.max_background_tasks"
            ]
        );
    }
}
