//! Facts about a user that tools ask for.

use super::query::Sql;
use super::{Store, StoreResult};

/// Whether `user` is an owner (false for an unknown user).
pub async fn is_owner(store: &Store, user: i64) -> StoreResult<bool> {
    let mut sql = Sql::new("SELECT is_owner FROM users WHERE id = ");
    sql.bind(user);
    let row: Option<(i64,)> = sql.fetch_optional(store).await?;
    Ok(row.is_some_and(|(owner,)| owner != 0))
}

/// A per-user setting the owner sets with `hearth pair`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserSetting {
    /// How far the user's tools may reach (`none` … `admin`).
    Permission,
    /// How much the user's agent does without asking (`none` … `full`).
    Autonomy,
}

impl UserSetting {
    /// The setting's name, as the CLI and its column call it.
    pub fn name(self) -> &'static str {
        match self {
            UserSetting::Permission => "permission",
            UserSetting::Autonomy => "autonomy",
        }
    }
}

/// The settings row of a user.
#[derive(sqlx::FromRow)]
struct SettingsRow {
    is_owner: i64,
    permission: Option<String>,
    autonomy: Option<String>,
}

impl Store {
    /// Sets a setting of the user behind an identity; false when there is no such identity.
    pub async fn set_user_setting(
        &self,
        channel: &str,
        platform_user_id: &str,
        setting: UserSetting,
        value: &str,
    ) -> StoreResult<bool> {
        let sql = match setting {
            UserSetting::Permission => {
                "UPDATE users SET permission = $1 WHERE id = (SELECT user_id FROM identities WHERE channel = $2 AND platform_user_id = $3)"
            }
            UserSetting::Autonomy => {
                "UPDATE users SET autonomy = $1 WHERE id = (SELECT user_id FROM identities WHERE channel = $2 AND platform_user_id = $3)"
            }
        };
        let done = sqlx::query(sql)
            .bind(value)
            .bind(channel)
            .bind(platform_user_id)
            .execute(&mut *self.write().await?)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// A user's permission and autonomy settings (`None`: defaults), and whether they own hearth.
    pub async fn user_settings(
        &self,
        user_id: i64,
    ) -> StoreResult<(bool, Option<String>, Option<String>)> {
        let row: Option<SettingsRow> =
            sqlx::query_as("SELECT is_owner, permission, autonomy FROM users WHERE id = $1")
                .bind(user_id)
                .fetch_optional(self.pool())
                .await?;
        Ok(row.map_or((false, None, None), |row| {
            (row.is_owner != 0, row.permission, row.autonomy)
        }))
    }
}
