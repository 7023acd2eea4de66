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
