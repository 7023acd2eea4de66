//! `[plans]`: limits of background work (README, "Background tasks"). Plan mode's per-step
//! limits join this section when plan mode is built.

use serde::{Deserialize, Serialize};

use super::{Checks, Section};

/// `[plans]`: what one user's background work may use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlansConfig {
    /// Background tasks one user may have running at once; a further start is refused with a
    /// note naming the running ones.
    pub max_background_tasks: u32,
}

impl Default for PlansConfig {
    fn default() -> Self {
        Self {
            max_background_tasks: 3,
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
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::config::load_from_str;

    #[test]
    fn the_default_holds_without_the_section_and_zero_is_refused() {
        let config =
            load_from_str("", "hearth.toml", &HashMap::new()).expect("an empty file loads");
        assert_eq!(config.plans.max_background_tasks, 3);

        let errors = load_from_str(
            "[plans]\nmax_background_tasks = 0\n",
            "hearth.toml",
            &HashMap::new(),
        )
        .expect_err("zero is refused");
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["plans.max_background_tasks"]);

        // A key plan mode will bring is not taken before it does anything.
        assert!(
            load_from_str(
                "[plans]\nmax_tool_calls = 10\n",
                "hearth.toml",
                &HashMap::new()
            )
            .is_err()
        );
    }
}
