//! Who may talk to hearth: users, their platform identities, and pairing codes for strangers.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Store, StoreResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdentityStatus {
    Allowed,
    Revoked,
}

/// A platform account known to hearth.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub id: i64,
    pub channel: String,
    pub platform_user_id: String,
    pub user_id: i64,
    pub display_name: Option<String>,
    pub status: IdentityStatus,
    /// `config` (allowlist), `paired`, `local` (the terminal) or `owner`.
    pub source: String,
    pub is_owner: bool,
}

/// A code handed to an unknown sender, waiting for `hearth pair approve`.
#[derive(Clone, Debug, PartialEq)]
pub struct PairingRequest {
    pub code: String,
    pub channel: String,
    pub platform_user_id: String,
    pub display_name: Option<String>,
    pub chat_id: String,
    pub status: String,
    pub created_at: i64,
    pub expires_at: i64,
}

const IDENTITY_SELECT: &str = "SELECT i.id, i.channel, i.platform_user_id, i.user_id, i.display_name, i.status, i.source, u.is_owner
     FROM identities i JOIN users u ON u.id = i.user_id";

fn identity_from_row(row: &AnyRow) -> StoreResult<Identity> {
    let status: String = row.try_get("status")?;
    Ok(Identity {
        id: row.try_get("id")?,
        channel: row.try_get("channel")?,
        platform_user_id: row.try_get("platform_user_id")?,
        user_id: row.try_get("user_id")?,
        display_name: row.try_get("display_name")?,
        status: if status == "allowed" {
            IdentityStatus::Allowed
        } else {
            IdentityStatus::Revoked
        },
        source: row.try_get("source")?,
        is_owner: row.try_get::<i64, _>("is_owner")? != 0,
    })
}

fn pairing_from_row(row: &AnyRow) -> StoreResult<PairingRequest> {
    Ok(PairingRequest {
        code: row.try_get("code")?,
        channel: row.try_get("channel")?,
        platform_user_id: row.try_get("platform_user_id")?,
        display_name: row.try_get("display_name")?,
        chat_id: row.try_get("chat_id")?,
        status: row.try_get("status")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
    })
}

impl Store {
    pub async fn identity(
        &self,
        channel: &str,
        platform_user_id: &str,
    ) -> StoreResult<Option<Identity>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{IDENTITY_SELECT} WHERE i.channel = $1 AND i.platform_user_id = $2"
        )))
        .bind(channel)
        .bind(platform_user_id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(identity_from_row).transpose()
    }

    pub async fn identities(&self) -> StoreResult<Vec<Identity>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{IDENTITY_SELECT} ORDER BY i.id"
        )))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(identity_from_row).collect()
    }

    /// Makes `channel:platform_user_id` an allowed identity (creating its user), with `source`
    /// recording why. Marks the user as the owner when `is_owner`.
    pub async fn allow_identity(
        &self,
        channel: &str,
        platform_user_id: &str,
        display_name: Option<&str>,
        source: &str,
        is_owner: bool,
        now_ms: i64,
    ) -> StoreResult<Identity> {
        let mut tx = self.pool().begin().await?;
        let existing: Option<i64> = sqlx::query_scalar(
            "SELECT user_id FROM identities WHERE channel = $1 AND platform_user_id = $2",
        )
        .bind(channel)
        .bind(platform_user_id)
        .fetch_optional(&mut *tx)
        .await?;
        match existing {
            Some(user_id) => {
                sqlx::query(
                    "UPDATE identities SET status = 'allowed', source = $1, display_name = COALESCE($2, display_name)
                     WHERE channel = $3 AND platform_user_id = $4",
                )
                .bind(source)
                .bind(display_name)
                .bind(channel)
                .bind(platform_user_id)
                .execute(&mut *tx)
                .await?;
                sqlx::query("UPDATE users SET is_owner = $1 WHERE id = $2")
                    .bind(i64::from(is_owner))
                    .bind(user_id)
                    .execute(&mut *tx)
                    .await?;
            }
            None => {
                let user_id: i64 = sqlx::query_scalar(
                    "INSERT INTO users (display_name, is_owner, created_at) VALUES ($1, $2, $3) RETURNING id",
                )
                .bind(display_name)
                .bind(i64::from(is_owner))
                .bind(now_ms)
                .fetch_one(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO identities (channel, platform_user_id, user_id, display_name, status, source, created_at)
                     VALUES ($1, $2, $3, $4, 'allowed', $5, $6)",
                )
                .bind(channel)
                .bind(platform_user_id)
                .bind(user_id)
                .bind(display_name)
                .bind(source)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        self.identity(channel, platform_user_id)
            .await?
            .ok_or_else(|| super::StoreError::Corrupt("identity vanished after insert".into()))
    }

    /// Makes `channel`'s identities match its configured allowlist in one transaction: listed
    /// users are allowed (created when new), config-listed users no longer in `keep` are revoked.
    /// Unchanged identities cost nothing, so a start with a large allowlist stays fast.
    pub async fn sync_allowlist(
        &self,
        channel: &str,
        allowed: &[String],
        keep: &[String],
        now_ms: i64,
    ) -> StoreResult<()> {
        let rows = sqlx::query(
            "SELECT platform_user_id, status, source FROM identities WHERE channel = $1",
        )
        .bind(channel)
        .fetch_all(self.pool())
        .await?;
        let mut known = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            let id: String = row.try_get("platform_user_id")?;
            let status: String = row.try_get("status")?;
            let source: String = row.try_get("source")?;
            known.insert(id, (status, source));
        }
        let mut tx = self.pool().begin().await?;
        for user in allowed {
            match known.get(user) {
                Some((status, _)) if status == "allowed" => {}
                Some(_) => {
                    sqlx::query("UPDATE identities SET status = 'allowed', source = 'config' WHERE channel = $1 AND platform_user_id = $2")
                        .bind(channel)
                        .bind(user)
                        .execute(&mut *tx)
                        .await?;
                }
                None => {
                    let user_id: i64 = sqlx::query_scalar(
                        "INSERT INTO users (is_owner, created_at) VALUES (0, $1) RETURNING id",
                    )
                    .bind(now_ms)
                    .fetch_one(&mut *tx)
                    .await?;
                    sqlx::query(
                        "INSERT INTO identities (channel, platform_user_id, user_id, status, source, created_at)
                         VALUES ($1, $2, $3, 'allowed', 'config', $4)",
                    )
                    .bind(channel)
                    .bind(user)
                    .bind(user_id)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        for (user, (status, source)) in &known {
            let from_config = source == "config" || source == "owner";
            if from_config && status == "allowed" && !keep.contains(user) {
                sqlx::query("UPDATE identities SET status = 'revoked' WHERE channel = $1 AND platform_user_id = $2")
                    .bind(channel)
                    .bind(user)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn set_identity_status(
        &self,
        channel: &str,
        platform_user_id: &str,
        status: IdentityStatus,
    ) -> StoreResult<bool> {
        let status = match status {
            IdentityStatus::Allowed => "allowed",
            IdentityStatus::Revoked => "revoked",
        };
        let done = sqlx::query(
            "UPDATE identities SET status = $1 WHERE channel = $2 AND platform_user_id = $3",
        )
        .bind(status)
        .bind(channel)
        .bind(platform_user_id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    pub async fn create_pairing(&self, request: &PairingRequest) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO pairing_requests (code, channel, platform_user_id, display_name, chat_id, status, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&request.code)
        .bind(&request.channel)
        .bind(&request.platform_user_id)
        .bind(&request.display_name)
        .bind(&request.chat_id)
        .bind(&request.status)
        .bind(request.created_at)
        .bind(request.expires_at)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Pairing requests of one sender created at or after `since_ms`, newest first.
    pub async fn pairings_of(
        &self,
        channel: &str,
        platform_user_id: &str,
        since_ms: i64,
    ) -> StoreResult<Vec<PairingRequest>> {
        let rows = sqlx::query(
            "SELECT * FROM pairing_requests WHERE channel = $1 AND platform_user_id = $2 AND created_at >= $3
             ORDER BY created_at DESC",
        )
        .bind(channel)
        .bind(platform_user_id)
        .bind(since_ms)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(pairing_from_row).collect()
    }

    /// Pending requests that have not expired.
    pub async fn open_pairings(&self, now_ms: i64) -> StoreResult<Vec<PairingRequest>> {
        let rows = sqlx::query(
            "SELECT * FROM pairing_requests WHERE status = 'pending' AND expires_at > $1 ORDER BY created_at",
        )
        .bind(now_ms)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(pairing_from_row).collect()
    }

    pub async fn pairing(&self, code: &str) -> StoreResult<Option<PairingRequest>> {
        let row = sqlx::query("SELECT * FROM pairing_requests WHERE code = $1")
            .bind(code)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(pairing_from_row).transpose()
    }

    pub async fn set_pairing_status(&self, code: &str, status: &str) -> StoreResult<()> {
        sqlx::query("UPDATE pairing_requests SET status = $1 WHERE code = $2")
            .bind(status)
            .bind(code)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::temp_store;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    async fn status(store: &Store, user: &str) -> Option<IdentityStatus> {
        store
            .identity("telegram", user)
            .await
            .expect("db")
            .map(|i| i.status)
    }

    #[tokio::test]
    async fn the_allowlist_follows_the_config_and_leaves_paired_users_alone() {
        let (store, _dir) = temp_store().await;
        store
            .sync_allowlist("telegram", &ids(&["1", "2"]), &ids(&["1", "2"]), 0)
            .await
            .expect("sync");
        store
            .allow_identity("telegram", "3", None, "paired", false, 0)
            .await
            .expect("pair");
        assert_eq!(status(&store, "2").await, Some(IdentityStatus::Allowed));

        // "2" leaves the config: revoked at the next start; the paired "3" stays.
        store
            .sync_allowlist("telegram", &ids(&["1"]), &ids(&["1"]), 1)
            .await
            .expect("sync");
        assert_eq!(status(&store, "1").await, Some(IdentityStatus::Allowed));
        assert_eq!(status(&store, "2").await, Some(IdentityStatus::Revoked));
        assert_eq!(status(&store, "3").await, Some(IdentityStatus::Allowed));

        // Listed again: allowed again, with the same user (and history).
        let before = store
            .identity("telegram", "2")
            .await
            .expect("db")
            .expect("known")
            .user_id;
        store
            .sync_allowlist("telegram", &ids(&["1", "2"]), &ids(&["1", "2"]), 2)
            .await
            .expect("sync");
        let after = store
            .identity("telegram", "2")
            .await
            .expect("db")
            .expect("known");
        assert_eq!(
            (after.status, after.user_id),
            (IdentityStatus::Allowed, before)
        );
    }
}
