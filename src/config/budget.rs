//! `[budget]`: spending caps.

use serde::{Deserialize, Serialize};

use super::context::is_share;
use super::{Checks, Section};

/// `[budget]`: spending caps in USD, days and months counted in `daemon.timezone`. Unset caps
/// do not limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// Everything together, per day (the owner's `/budget` changes it for today).
    pub daily_usd: Option<f64>,
    /// Everything together, per calendar month.
    pub monthly_usd: Option<f64>,
    /// Each schedule on its own, per day.
    pub schedule_daily_usd: Option<f64>,
    /// The share of a daily or monthly cap at which the owner is told, once.
    pub warn_at: f64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            daily_usd: None,
            monthly_usd: None,
            schedule_daily_usd: None,
            warn_at: 0.8,
        }
    }
}

impl Section for BudgetConfig {
    fn check(&self, checks: &mut Checks<'_>) {
        if !is_share(self.warn_at) {
            checks.problem(
                "warn_at",
                "must be a share of the cap above 0 and at most 1, like 0.8",
            );
        }
        for (key, cap) in [
            ("daily_usd", self.daily_usd),
            ("monthly_usd", self.monthly_usd),
            ("schedule_daily_usd", self.schedule_daily_usd),
        ] {
            if let Some(cap) = cap
                && !(cap.is_finite() && cap >= 0.0)
            {
                checks.problem(key, "must be an amount in USD, 0 or more");
            }
        }
    }
}
