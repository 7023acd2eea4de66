//! What the models cost: one row per model call, sums for the budget caps, and the owner's
//! per-day cap and the warnings already sent.

use super::{Batch, Store, StoreResult};

/// Who a model call was made for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Payer {
    /// `turn`, `summary` or `transcription`.
    pub purpose: &'static str,
    pub user_id: Option<i64>,
    pub agent_id: Option<String>,
    pub schedule: Option<String>,
    pub channel: Option<String>,
    pub conversation_id: Option<i64>,
    pub turn_id: Option<i64>,
}

/// One model call to record. Days are local dates (`YYYY-MM-DD` in `daemon.timezone`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelCall {
    pub at_ms: i64,
    pub day: String,
    pub payer: Payer,
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    /// Billionths of a USD.
    pub cost_nusd: i64,
    /// Cut short (a cancel, a closed stream, shutdown, a timeout after the first words): the
    /// tokens are estimated unless the provider reported them.
    pub cut_short: bool,
}

/// How `hearth usage` and `/usage` group the calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageBy {
    Day,
    Agent,
    Schedule,
    User,
    Model,
}

impl UsageBy {
    pub const NAMES: &'static [&'static str] = &["day", "agent", "schedule", "user", "model"];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "day" => Self::Day,
            "agent" => Self::Agent,
            "schedule" => Self::Schedule,
            "user" => Self::User,
            "model" => Self::Model,
            _ => return None,
        })
    }

    /// The grouping expression; fixed text, never user input.
    fn column(self) -> &'static str {
        match self {
            Self::Day => "m.day",
            Self::Agent => "COALESCE(m.agent_id, '(none)')",
            Self::Schedule => "COALESCE(m.schedule, '(chat)')",
            Self::User => {
                "COALESCE(u.display_name, CASE WHEN m.user_id IS NULL THEN '(nobody)' ELSE 'user #' || CAST(m.user_id AS TEXT) END)"
            }
            Self::Model => "m.provider || '/' || m.model",
        }
    }
}

/// One group's totals.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct UsageRow {
    pub key: String,
    pub calls: i64,
    #[sqlx(rename = "input")]
    pub input_tokens: i64,
    #[sqlx(rename = "output")]
    pub output_tokens: i64,
    #[sqlx(rename = "cost")]
    pub cost_nusd: i64,
    /// Of `calls`, those cut short.
    pub cut_short: i64,
}

/// What was learned of one provider and model's tokens (`model_calibrations`).
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct CalibrationRow {
    /// `provider/model`.
    pub model: String,
    pub chars_per_1000_tokens: i64,
    pub prompt_limit: Option<i64>,
}

const CALIBRATION_COLUMNS: &str = "model, chars_per_1000_tokens, prompt_limit";

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Store {
    pub async fn record_model_call(&self, call: &ModelCall) -> StoreResult<()> {
        let mut batch = self.batch();
        push_model_call(&mut batch, call);
        self.write_batch(batch).await?;
        Ok(())
    }

    /// What was spent from day `from` to day `to` (both included), in billionths of a USD; only
    /// schedule `schedule`'s calls when given.
    pub async fn spent_nusd(
        &self,
        from: &str,
        to: &str,
        schedule: Option<&str>,
    ) -> StoreResult<i64> {
        let spent: i64 = sqlx::query_scalar(
            "SELECT CAST(COALESCE(SUM(cost_nusd), 0) AS BIGINT) FROM model_calls
             WHERE day >= $1 AND day <= $2 AND ($3 IS NULL OR schedule = $3)",
        )
        .bind(from)
        .bind(to)
        .bind(schedule)
        .fetch_one(self.pool())
        .await?;
        Ok(spent)
    }

    /// Totals per group since day `from`, the most expensive first (by day: newest first);
    /// only `user`'s calls when given.
    pub async fn usage_by(
        &self,
        by: UsageBy,
        from: &str,
        user: Option<i64>,
    ) -> StoreResult<Vec<UsageRow>> {
        let order = if by == UsageBy::Day {
            "key DESC"
        } else {
            "cost DESC, key"
        };
        let sql = format!(
            "SELECT {} AS key, CAST(COUNT(*) AS BIGINT) AS calls,
               CAST(SUM(m.input_tokens) AS BIGINT) AS input, CAST(SUM(m.output_tokens) AS BIGINT) AS output,
               CAST(SUM(m.cost_nusd) AS BIGINT) AS cost, CAST(SUM(m.cut_short) AS BIGINT) AS cut_short
             FROM model_calls m LEFT JOIN users u ON u.id = m.user_id
             WHERE m.day >= $1 AND ($2 IS NULL OR m.user_id = $2) GROUP BY 1 ORDER BY {order}",
            by.column()
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(from)
            .bind(user)
            .fetch_all(self.pool())
            .await?)
    }

    /// Every calibration learned so far, read at start.
    pub async fn calibrations(&self) -> StoreResult<Vec<CalibrationRow>> {
        let sql = format!("SELECT {CALIBRATION_COLUMNS} FROM model_calibrations");
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.pool())
            .await?)
    }

    /// Stores what was learned of `row.model`, replacing what was known.
    pub async fn save_calibration_row(&self, row: &CalibrationRow, now_ms: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO model_calibrations (model, chars_per_1000_tokens, prompt_limit, updated_at)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (model) DO UPDATE SET chars_per_1000_tokens = $2, prompt_limit = $3, updated_at = $4",
        )
        .bind(row.model.as_str())
        .bind(row.chars_per_1000_tokens)
        .bind(row.prompt_limit)
        .bind(now_ms)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// The owner's cap for `day` set with `/budget`, if any.
    pub async fn daily_cap_for(&self, day: &str) -> StoreResult<Option<i64>> {
        Ok(
            sqlx::query_scalar("SELECT daily_cap_nusd FROM budget_days WHERE day = $1")
                .bind(day)
                .fetch_optional(self.pool())
                .await?,
        )
    }

    pub async fn set_daily_cap(&self, day: &str, cap_nusd: i64, now_ms: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO budget_days (day, daily_cap_nusd, set_at) VALUES ($1, $2, $3)
             ON CONFLICT (day) DO UPDATE SET daily_cap_nusd = $2, set_at = $3",
        )
        .bind(day)
        .bind(cap_nusd)
        .bind(now_ms)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// Claims the warning for `period` (`day:2026-11-26`, `month:2026-11`): true the first time
    /// only, so each warning is sent once even with several processes.
    pub async fn claim_budget_warning(&self, period: &str, now_ms: i64) -> StoreResult<bool> {
        let inserted = sqlx::query(
            "INSERT INTO budget_warnings (period, sent_at) VALUES ($1, $2) ON CONFLICT (period) DO NOTHING",
        )
        .bind(period)
        .bind(now_ms)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(inserted.rows_affected() == 1)
    }
}

/// Adds `call`'s row to `batch`: [`Store::record_model_call`] on its own, and
/// [`Store::finish_turn`] with the turn's end.
pub(super) fn push_model_call(batch: &mut Batch, call: &ModelCall) {
    batch
        .push(
            "INSERT INTO model_calls (at, day, purpose, provider, model, user_id, agent_id, schedule, channel,
               conversation_id, turn_id, input_tokens, cached_input_tokens, output_tokens, cost_nusd, cut_short)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        )
        .bind(call.at_ms)
        .bind(call.day.as_str())
        .bind(call.payer.purpose)
        .bind(call.provider.as_str())
        .bind(call.model.as_str())
        .bind(call.payer.user_id)
        .bind(call.payer.agent_id.as_deref())
        .bind(call.payer.schedule.as_deref())
        .bind(call.payer.channel.as_deref())
        .bind(call.payer.conversation_id)
        .bind(call.payer.turn_id)
        .bind(to_i64(call.input_tokens))
        .bind(to_i64(call.cached_input_tokens))
        .bind(to_i64(call.output_tokens))
        .bind(call.cost_nusd)
        .bind(i64::from(call.cut_short));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::on_both_backends;

    fn call(day: &str, schedule: Option<&str>, cost: i64) -> ModelCall {
        ModelCall {
            at_ms: 1,
            day: day.into(),
            payer: Payer {
                purpose: "turn",
                agent_id: Some("general".into()),
                schedule: schedule.map(str::to_string),
                ..Payer::default()
            },
            provider: "p".into(),
            model: "m".into(),
            input_tokens: 10,
            output_tokens: 5,
            cost_nusd: cost,
            ..ModelCall::default()
        }
    }

    on_both_backends!(
        sums_by_days_and_schedule_and_groups,
        sums_by_days_and_schedule_and_groups_on_postgres,
        check
    );

    async fn check(store: Store) {
        store
            .record_model_call(&call("2026-11-25", None, 100))
            .await
            .expect("insert");
        store
            .record_model_call(&call("2026-11-26", Some("brief"), 30))
            .await
            .expect("insert");
        store
            .record_model_call(&call("2026-11-26", None, 7))
            .await
            .expect("insert");
        assert_eq!(
            store
                .spent_nusd("2026-11-26", "2026-11-26", None)
                .await
                .expect("sum"),
            37
        );
        assert_eq!(
            store
                .spent_nusd("2026-11-01", "2026-11-30", None)
                .await
                .expect("sum"),
            137
        );
        assert_eq!(
            store
                .spent_nusd("2026-11-26", "2026-11-26", Some("brief"))
                .await
                .expect("sum"),
            30
        );
        assert_eq!(
            store
                .spent_nusd("2026-12-01", "2026-12-31", None)
                .await
                .expect("sum"),
            0
        );
        let by_day = store
            .usage_by(UsageBy::Day, "2026-11-01", None)
            .await
            .expect("by day");
        assert_eq!(by_day[0].key, "2026-11-26");
        assert_eq!((by_day[0].calls, by_day[0].cost_nusd), (2, 37));
        let by_schedule = store
            .usage_by(UsageBy::Schedule, "2026-11-01", None)
            .await
            .expect("rows");
        assert_eq!(by_schedule[0].key, "(chat)");
        assert_eq!(by_schedule[1].key, "brief");
        let by_user = store
            .usage_by(UsageBy::User, "2026-11-01", None)
            .await
            .expect("rows");
        assert_eq!(by_user[0].key, "(nobody)");
        assert!(
            store
                .claim_budget_warning("day:2026-11-26", 1)
                .await
                .expect("claim")
        );
        assert!(
            !store
                .claim_budget_warning("day:2026-11-26", 2)
                .await
                .expect("claim")
        );
        assert_eq!(store.daily_cap_for("2026-11-26").await.expect("cap"), None);
        store.set_daily_cap("2026-11-26", 5, 1).await.expect("set");
        store.set_daily_cap("2026-11-26", 9, 2).await.expect("set");
        assert_eq!(
            store.daily_cap_for("2026-11-26").await.expect("cap"),
            Some(9)
        );
        // A call cut short is counted and marked.
        let mut stopped = call("2026-11-26", None, 3);
        stopped.cut_short = true;
        store.record_model_call(&stopped).await.expect("insert");
        let by_day = store
            .usage_by(UsageBy::Day, "2026-11-26", None)
            .await
            .expect("by day");
        assert_eq!((by_day[0].calls, by_day[0].cut_short), (3, 1));
        // Calibrations: stored, replaced, read back.
        let mut row = CalibrationRow {
            model: "local/llama3.1".into(),
            chars_per_1000_tokens: 3_500,
            prompt_limit: None,
        };
        store.save_calibration_row(&row, 1).await.expect("save");
        row.prompt_limit = Some(4_000);
        row.chars_per_1000_tokens = 3_200;
        store.save_calibration_row(&row, 2).await.expect("save");
        assert_eq!(store.calibrations().await.expect("read"), vec![row]);
    }
}
