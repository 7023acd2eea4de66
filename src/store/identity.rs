//! Who may talk to hearth: users, their platform identities, and pairing codes for strangers.

use hearth_channel::{ChatRef, OutboundMessage};

use super::{NewOutbox, OutboxKind, Store, StoreError, StoreResult, text_enum};

text_enum! {
    /// Whether an identity may talk to hearth.
    pub enum IdentityStatus {
        Allowed = "allowed",
        Revoked = "revoked",
    }
}

text_enum! {
    /// Where a pairing code stands.
    pub enum PairingStatus {
        /// Handed to the sender, waiting for the owner (until it expires).
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
    }
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
    /// `config` (allowlist), `domain` (an allowlist's `*@domain`), `paired`, `local` (the
    /// terminal), `owner` or `linked` (`hearth pair link`).
    pub source: String,
    pub is_owner: bool,
}

/// The columns an [`Identity`] is read from, with its user's `is_owner`.
#[derive(sqlx::FromRow)]
struct IdentityRow {
    id: i64,
    channel: String,
    platform_user_id: String,
    user_id: i64,
    display_name: Option<String>,
    status: IdentityStatus,
    source: String,
    /// 0 or 1: the column is an integer on both backends.
    is_owner: i64,
}

impl From<IdentityRow> for Identity {
    fn from(row: IdentityRow) -> Self {
        Self {
            id: row.id,
            channel: row.channel,
            platform_user_id: row.platform_user_id,
            user_id: row.user_id,
            display_name: row.display_name,
            status: row.status,
            source: row.source,
            is_owner: row.is_owner != 0,
        }
    }
}

/// A code handed to an unknown sender, waiting for `hearth pair approve`.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct PairingRequest {
    pub code: String,
    pub channel: String,
    pub platform_user_id: String,
    pub display_name: Option<String>,
    pub chat_id: String,
    pub status: PairingStatus,
    pub created_at: i64,
    pub expires_at: i64,
}

impl PairingRequest {
    /// Still waiting for the owner at `now_ms`: pending and not expired.
    pub fn is_open(&self, now_ms: i64) -> bool {
        self.status == PairingStatus::Pending && self.expires_at > now_ms
    }
}

/// The `source` of an identity let in by an email allowlist entry `*@domain`.
pub const DOMAIN_SOURCE: &str = "domain";

/// Allowlisted senders inserted by one statement: two parameters each, well under the 32,766
/// SQLite and the 65,535 PostgreSQL take.
const NEW_IDENTITIES_PER_STATEMENT: usize = 500;

const IDENTITY_SELECT: &str = "SELECT i.id, i.channel, i.platform_user_id, i.user_id, i.display_name, i.status, i.source, u.is_owner
     FROM identities i JOIN users u ON u.id = i.user_id";

/// `daemon.owner`'s identities, once each, as the channels spell them: email addresses arrive
/// lower-cased from the email channel, so an owner written `email:Me@Example.org` is the same
/// mailbox.
pub fn configured_owners(daemon: &crate::config::DaemonConfig) -> Vec<(String, String)> {
    let mut owners: Vec<(String, String)> = Vec::new();
    for (channel, user) in daemon.owner_identities() {
        let user = if channel == "email" {
            user.to_lowercase()
        } else {
            user.to_string()
        };
        let owner = (channel.to_string(), user);
        if !owners.contains(&owner) {
            owners.push(owner);
        }
    }
    owners
}

impl Store {
    pub async fn identity(
        &self,
        channel: &str,
        platform_user_id: &str,
    ) -> StoreResult<Option<Identity>> {
        let row: Option<IdentityRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "{IDENTITY_SELECT} WHERE i.channel = $1 AND i.platform_user_id = $2"
        )))
        .bind(channel)
        .bind(platform_user_id)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.map(Identity::from))
    }

    /// The identity of `platform_user_id`, or, for an address nobody listed whose domain an
    /// allowlist entry `*@domain` admits (email's domain wildcard, matched on exactly that
    /// domain), a new allowed identity with source `domain`: its own user, so its tasks and
    /// memories are its own. An identity that exists (even revoked) always wins.
    pub async fn identity_or_domain(
        &self,
        channel: &str,
        platform_user_id: &str,
        now_ms: i64,
    ) -> StoreResult<Option<Identity>> {
        if let Some(identity) = self.identity(channel, platform_user_id).await? {
            return Ok(Some(identity));
        }
        let Some((local, domain)) = platform_user_id.rsplit_once('@') else {
            return Ok(None);
        };
        if local.is_empty() || domain.is_empty() || platform_user_id.starts_with('*') {
            return Ok(None);
        }
        let pattern = format!("*@{}", domain.to_lowercase());
        match self.identity(channel, &pattern).await? {
            Some(wildcard) if wildcard.status == IdentityStatus::Allowed => {
                let identity = self
                    .allow_identity(
                        channel,
                        platform_user_id,
                        None,
                        DOMAIN_SOURCE,
                        false,
                        now_ms,
                    )
                    .await?;
                Ok(Some(identity))
            }
            _ => Ok(None),
        }
    }

    pub async fn identities(&self) -> StoreResult<Vec<Identity>> {
        let rows: Vec<IdentityRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "{IDENTITY_SELECT} ORDER BY i.id"
        )))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(Identity::from).collect())
    }

    /// Makes `channel:platform_user_id` an allowed identity (creating its user), with `source`
    /// recording why. Marks the user as the owner when `is_owner`; never lowers it: an
    /// identity allowed again (a token made anew, a pairing) is no reason for its user to stop
    /// being the owner, and the running daemon would stop treating them as one.
    pub async fn allow_identity(
        &self,
        channel: &str,
        platform_user_id: &str,
        display_name: Option<&str>,
        source: &str,
        is_owner: bool,
        now_ms: i64,
    ) -> StoreResult<Identity> {
        let mut tx = self.begin().await?;
        let existing: Option<i64> = sqlx::query_scalar(
            "UPDATE identities SET status = 'allowed', source = $1, display_name = COALESCE($2, display_name)
             WHERE channel = $3 AND platform_user_id = $4 RETURNING user_id",
        )
        .bind(source)
        .bind(display_name)
        .bind(channel)
        .bind(platform_user_id)
        .fetch_optional(&mut *tx)
        .await?;
        match existing {
            Some(user_id) if is_owner => {
                sqlx::query("UPDATE users SET is_owner = 1 WHERE id = $1")
                    .bind(user_id)
                    .execute(&mut *tx)
                    .await?;
            }
            Some(_) => {}
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
        let rows: Vec<(String, IdentityStatus, String)> = sqlx::query_as(
            "SELECT platform_user_id, status, source FROM identities WHERE channel = $1",
        )
        .bind(channel)
        .fetch_all(self.pool())
        .await?;
        let known: std::collections::HashMap<String, (IdentityStatus, String)> = rows
            .into_iter()
            .map(|(id, status, source)| (id, (status, source)))
            .collect();
        let mut tx = self.begin().await?;
        let mut new = Vec::new();
        for user in allowed {
            match known.get(user) {
                Some((IdentityStatus::Allowed, _)) => {}
                Some(_) => {
                    sqlx::query("UPDATE identities SET status = 'allowed', source = 'config' WHERE channel = $1 AND platform_user_id = $2")
                        .bind(channel)
                        .bind(user)
                        .execute(&mut *tx)
                        .await?;
                }
                None if !new.contains(&user) => new.push(user),
                None => {}
            }
        }
        // New senders in bulk: an allowlist of hundreds took two statements each, most of a
        // fresh start. Their users are alike (not owners, created now), so which new id goes
        // with which sender does not matter, and RETURNING's order is not relied on.
        for chunk in new.chunks(NEW_IDENTITIES_PER_STATEMENT) {
            let users = vec!["(0, $1)"; chunk.len()].join(", ");
            let user_ids: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "INSERT INTO users (is_owner, created_at) VALUES {users} RETURNING id"
            )))
            .bind(now_ms)
            .fetch_all(&mut *tx)
            .await?;
            if user_ids.len() != chunk.len() {
                return Err(StoreError::Corrupt(format!(
                    "{} users inserted for {} new identities",
                    user_ids.len(),
                    chunk.len()
                )));
            }
            let rows = (0..chunk.len())
                .map(|n| {
                    format!(
                        "($1, ${}, ${}, 'allowed', 'config', $2)",
                        3 + 2 * n,
                        4 + 2 * n
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO identities (channel, platform_user_id, user_id, status, source, created_at) VALUES {rows}"
            )))
            .bind(channel)
            .bind(now_ms);
            for (user, user_id) in chunk.iter().zip(user_ids) {
                insert = insert.bind(*user).bind(user_id);
            }
            insert.execute(&mut *tx).await?;
        }
        for (user, (status, source)) in &known {
            let from_config = source == "config" || source == "owner";
            // An address let in by `*@domain` stays in exactly as long as that entry does.
            let wildcard_kept = || {
                user.rsplit_once('@')
                    .is_some_and(|(_, domain)| keep.contains(&format!("*@{domain}")))
            };
            let wanted = if source == DOMAIN_SOURCE {
                Some(wildcard_kept())
            } else if from_config && !keep.contains(user) {
                Some(false)
            } else {
                None
            };
            let new_status = match (wanted, status) {
                (Some(false), IdentityStatus::Allowed) => IdentityStatus::Revoked,
                (Some(true), IdentityStatus::Revoked) => IdentityStatus::Allowed,
                _ => continue,
            };
            sqlx::query(
                "UPDATE identities SET status = $1 WHERE channel = $2 AND platform_user_id = $3",
            )
            .bind(new_status)
            .bind(channel)
            .bind(user)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Makes the identities what the configuration says, as every start does: each channel's
    /// allowlist (`allowlists`: channel and its listed user ids) allowed and the ones removed
    /// from it revoked, every owner identity allowed and all of them linked into one user, the
    /// first one's. Returns the links that merged users. The CLI does the same before it acts,
    /// so identities the configuration names are known even before the daemon first ran.
    pub async fn sync_configured_identities(
        &self,
        allowlists: &[(String, Vec<String>)],
        owners: &[(String, String)],
        now_ms: i64,
    ) -> Result<Vec<LinkOutcome>, LinkError> {
        for (channel, allowed) in allowlists {
            let mut keep = allowed.clone();
            keep.extend(
                owners
                    .iter()
                    .filter(|(owner_channel, _)| owner_channel == channel)
                    .map(|(_, user)| user.clone()),
            );
            self.sync_allowlist(channel, allowed, &keep, now_ms).await?;
        }
        for (channel, user) in owners {
            self.allow_identity(channel, user, None, "owner", true, now_ms)
                .await?;
        }
        let mut merges = Vec::new();
        if let Some(((first_channel, first_user), rest)) = owners.split_first() {
            for (channel, user) in rest {
                let linked = self
                    .link_identities((first_channel, first_user), (channel, user), now_ms)
                    .await?;
                if linked.merge.is_some() {
                    merges.push(linked);
                }
            }
        }
        Ok(merges)
    }

    pub async fn set_identity_status(
        &self,
        channel: &str,
        platform_user_id: &str,
        status: IdentityStatus,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE identities SET status = $1 WHERE channel = $2 AND platform_user_id = $3",
        )
        .bind(status)
        .bind(channel)
        .bind(platform_user_id)
        .execute(&mut *self.write().await?)
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
        .bind(request.status)
        .bind(request.created_at)
        .bind(request.expires_at)
        .execute(&mut *self.write().await?)
        .await?;
        self.waiting_changed();
        Ok(())
    }

    /// Pairing requests of one sender created at or after `since_ms`, newest first.
    pub async fn pairings_of(
        &self,
        channel: &str,
        platform_user_id: &str,
        since_ms: i64,
    ) -> StoreResult<Vec<PairingRequest>> {
        Ok(sqlx::query_as(
            "SELECT * FROM pairing_requests WHERE channel = $1 AND platform_user_id = $2 AND created_at >= $3
             ORDER BY created_at DESC",
        )
        .bind(channel)
        .bind(platform_user_id)
        .bind(since_ms)
        .fetch_all(self.pool())
        .await?)
    }

    /// Pending requests that have not expired.
    pub async fn open_pairings(&self, now_ms: i64) -> StoreResult<Vec<PairingRequest>> {
        Ok(sqlx::query_as(
            "SELECT * FROM pairing_requests WHERE status = $1 AND expires_at > $2 ORDER BY created_at",
        )
        .bind(PairingStatus::Pending)
        .bind(now_ms)
        .fetch_all(self.pool())
        .await?)
    }

    pub async fn pairing(&self, code: &str) -> StoreResult<Option<PairingRequest>> {
        Ok(
            sqlx::query_as("SELECT * FROM pairing_requests WHERE code = $1")
                .bind(code)
                .fetch_optional(self.pool())
                .await?,
        )
    }

    pub async fn set_pairing_status(&self, code: &str, status: PairingStatus) -> StoreResult<()> {
        sqlx::query("UPDATE pairing_requests SET status = $1 WHERE code = $2")
            .bind(status)
            .bind(code)
            .execute(&mut *self.write().await?)
            .await?;
        self.waiting_changed();
        Ok(())
    }
}

/// The welcome a newly approved sender gets.
pub const PAIRING_WELCOME: &str = "✅ You are approved. Say hello!";

impl Store {
    /// Approves a pending pairing code: the sender's identity is allowed and told so. The one
    /// way a code is approved, from `hearth pair approve` and from the page's Inbox. The inner
    /// `Err` says, for the person approving, why the code cannot be approved.
    pub async fn approve_pairing(
        &self,
        code: &str,
        now_ms: i64,
    ) -> StoreResult<Result<PairingRequest, String>> {
        let request = match self.pairing(code).await? {
            Some(r) if r.is_open(now_ms) => r,
            Some(r) if r.status == PairingStatus::Pending => {
                return Ok(Err(format!(
                    "the code {code} has expired; the sender can write again for a new one"
                )));
            }
            Some(_) => return Ok(Err(format!("the code {code} was already used"))),
            None => {
                return Ok(Err(format!(
                    "no pairing code {code}; see `hearth pair list`"
                )));
            }
        };
        self.allow_identity(
            &request.channel,
            &request.platform_user_id,
            request.display_name.as_deref(),
            "paired",
            false,
            now_ms,
        )
        .await?;
        self.set_pairing_status(code, PairingStatus::Approved)
            .await?;
        let welcome = NewOutbox {
            inbox_id: None,
            seq: 0,
            channel: request.channel.clone(),
            kind: OutboxKind::Send,
            message: OutboundMessage::text(ChatRef::new(request.chat_id.clone()), PAIRING_WELCOME),
        };
        self.enqueue_outbox(&[welcome], now_ms).await?;
        Ok(Ok(request))
    }

    /// Rejects a pending pairing code: the sender stays a stranger (a later message gets a new
    /// code, within the usual rate limits). False when the code was not pending.
    pub async fn reject_pairing(&self, code: &str) -> StoreResult<bool> {
        let rejected =
            sqlx::query("UPDATE pairing_requests SET status = $1 WHERE code = $2 AND status = $3")
                .bind(PairingStatus::Rejected)
                .bind(code)
                .bind(PairingStatus::Pending)
                .execute(&mut *self.write().await?)
                .await?;
        self.waiting_changed();
        Ok(rejected.rows_affected() == 1)
    }
}

/// Rows of one table that belong to a user.
struct UserRows {
    table: &'static str,
    /// The column naming the user.
    column: &'static str,
    /// How the one-line merge summary counts them (one, many); `None`: history, not counted.
    label: Option<(&'static str, &'static str)>,
}

const fn rows(
    table: &'static str,
    column: &'static str,
    label: Option<(&'static str, &'static str)>,
) -> UserRows {
    UserRows {
        table,
        column,
        label,
    }
}

/// Tables holding a user's data and history, in the order a merge moves them. A test checks
/// this list against the schema so a new per-user table is not missed, and the final
/// `DELETE FROM users` would fail (rolling the merge back) if one were.
const USER_ROWS: &[UserRows] = &[
    rows("tasks", "user_id", Some(("task", "tasks"))),
    rows("notes", "user_id", Some(("note", "notes"))),
    rows("bookmarks", "user_id", Some(("bookmark", "bookmarks"))),
    rows("contacts", "user_id", Some(("contact", "contacts"))),
    rows(
        "calendar_events",
        "user_id",
        Some(("calendar event", "calendar events")),
    ),
    rows("expenses", "user_id", Some(("expense", "expenses"))),
    rows("goals", "user_id", Some(("goal", "goals"))),
    rows("goal_steps", "user_id", None),
    rows("memories", "user_id", Some(("memory", "memories"))),
    rows("schedules", "created_by", Some(("schedule", "schedules"))),
    rows(
        "background_tasks",
        "user_id",
        Some(("background task", "background tasks")),
    ),
    rows("turns", "user_id", None),
    rows("confirmations", "user_id", None),
    rows("tool_audit", "user_id", None),
    // No foreign key (usage outlives deleted users), but `hearth usage --by user` counts a
    // linked identity's earlier calls as its person's.
    rows("model_calls", "user_id", None),
];

/// A user row as a merge reconciles it.
#[derive(sqlx::FromRow)]
struct UserSettings {
    id: i64,
    display_name: Option<String>,
    is_owner: i64,
    permission: Option<String>,
    autonomy: Option<String>,
    timezone: Option<String>,
}

impl UserSettings {
    /// The settings a merge reconciles, by column: the kept user's value wins, an unset one is
    /// taken from the merged user.
    fn reconciled(&self) -> [(&'static str, &Option<String>); 3] {
        [
            ("permission", &self.permission),
            ("autonomy", &self.autonomy),
            ("timezone", &self.timezone),
        ]
    }
}

/// Why two identities cannot be linked, or one unlinked.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("{0} cannot be linked to itself")]
    SameIdentity(String),
    #[error(
        "neither {0} nor {1} is known to hearth; link to an identity that has talked to hearth or is in an allowlist (see `hearth pair list`)"
    )]
    BothUnknown(String, String),
    #[error("no identity {0}; see `hearth pair list`")]
    Unknown(String),
    #[error("{0} is revoked; link to an allowed identity (see `hearth pair list`)")]
    Revoked(String),
    #[error("{0} is not linked to any other identity")]
    NotLinked(String),
    #[error(transparent)]
    Store(#[from] super::StoreError),
}

impl From<sqlx::Error> for LinkError {
    fn from(err: sqlx::Error) -> Self {
        Self::Store(err.into())
    }
}

impl LinkError {
    /// A refusal caused by what was asked (exit code 2), rather than a database failure.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, Self::Store(_))
    }
}

/// What [`Store::link_identities`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkOutcome {
    /// The user both identities belong to now.
    pub user_id: i64,
    /// The identity whose user was kept, `channel:id`.
    pub kept: String,
    /// The identity that joined it, `channel:id`.
    pub joined: String,
    /// The joining identity was new to hearth and was created (allowed, source `linked`).
    pub created: bool,
    /// Both identities were one user already; nothing changed.
    pub already: bool,
    /// The joining identity was revoked and is allowed again.
    pub allowed_again: bool,
    /// The joining identity's user had its own rows and was merged into the kept user.
    pub merge: Option<Merge>,
}

/// A user merged into another: what moved and how the settings were reconciled.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Merge {
    /// The user that no longer exists.
    pub from_user: i64,
    /// Counted data moved, e.g. `("tasks", 3)`; only non-zero counts.
    pub moved: Vec<(String, u64)>,
    /// Other identities of the merged user that came along, `channel:id`.
    pub identities: Vec<String>,
    /// The merged user's bookmarks of a URL the kept user had already (kept once).
    pub duplicate_bookmarks: u64,
    /// How settings were reconciled, e.g. "kept permission `read` (user #2 had `admin`)".
    pub settings: Vec<String>,
}

impl std::fmt::Display for Merge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .moved
            .iter()
            .map(|(label, n)| format!("{n} {label}"))
            .collect();
        if parts.is_empty() {
            write!(f, "merged user #{} (it had no data)", self.from_user)?;
        } else {
            write!(f, "merged user #{}: {}", self.from_user, parts.join(", "))?;
        }
        if !self.identities.is_empty() {
            write!(f, "; also joined {}", self.identities.join(", "))?;
        }
        if self.duplicate_bookmarks > 0 {
            write!(
                f,
                "; {} bookmark(s) of a URL already saved kept once",
                self.duplicate_bookmarks
            )?;
        }
        for note in &self.settings {
            write!(f, "; {note}")?;
        }
        Ok(())
    }
}

/// What [`Store::unlink_identity`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct UnlinkOutcome {
    /// The user keeping the data.
    pub old_user: i64,
    /// The identity's new user, with no data and default settings.
    pub new_user: i64,
    /// Identities still with the old user, `channel:id`.
    pub remaining: Vec<String>,
}

/// A user and every identity it has, for `hearth pair list`.
#[derive(Clone, Debug, PartialEq)]
pub struct UserSummary {
    pub id: i64,
    pub is_owner: bool,
    pub permission: Option<String>,
    pub autonomy: Option<String>,
    pub identities: Vec<Identity>,
}

fn name(channel: &str, platform_user_id: &str) -> String {
    format!("{channel}:{platform_user_id}")
}

/// The user and status of one identity, inside a transaction.
async fn identity_row(
    conn: &mut sqlx::AnyConnection,
    channel: &str,
    platform_user_id: &str,
) -> StoreResult<Option<(i64, IdentityStatus)>> {
    Ok(sqlx::query_as(
        "SELECT user_id, status FROM identities WHERE channel = $1 AND platform_user_id = $2",
    )
    .bind(channel)
    .bind(platform_user_id)
    .fetch_optional(&mut *conn)
    .await?)
}

/// Moves everything of user `from` to user `into` and deletes `from`, inside a transaction.
async fn merge_users(conn: &mut sqlx::AnyConnection, into: i64, from: i64) -> StoreResult<Merge> {
    let mut merge = Merge {
        from_user: from,
        ..Merge::default()
    };
    // Bookmarks are unique per user and URL: the kept user's copy stays.
    merge.duplicate_bookmarks = sqlx::query(
        "DELETE FROM bookmarks WHERE user_id = $1 AND url IN (SELECT url FROM bookmarks WHERE user_id = $2)",
    )
    .bind(from)
    .bind(into)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    for UserRows {
        table,
        column,
        label,
    } in USER_ROWS
    {
        let moved = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET {column} = $1 WHERE {column} = $2"
        )))
        .bind(into)
        .bind(from)
        .execute(&mut *conn)
        .await?
        .rows_affected();
        if let Some((one, many)) = label
            && moved > 0
        {
            let label = if moved == 1 { one } else { many };
            merge.moved.push(((*label).to_string(), moved));
        }
    }
    let others: Vec<(String, String)> = sqlx::query_as(
        "SELECT channel, platform_user_id FROM identities WHERE user_id = $1 ORDER BY id",
    )
    .bind(from)
    .fetch_all(&mut *conn)
    .await?;
    for (channel, platform_user_id) in &others {
        merge.identities.push(name(channel, platform_user_id));
    }
    sqlx::query("UPDATE identities SET user_id = $1 WHERE user_id = $2")
        .bind(into)
        .bind(from)
        .execute(&mut *conn)
        .await?;

    // Settings: the kept user's win; unset ones come from the merged user. Owner if either was.
    let settings: Vec<UserSettings> = sqlx::query_as(
        "SELECT id, display_name, is_owner, permission, autonomy, timezone FROM users WHERE id = $1 OR id = $2",
    )
    .bind(into)
    .bind(from)
    .fetch_all(&mut *conn)
    .await?;
    let (mut kept, mut merged) = (None, None);
    for row in settings {
        if row.id == into {
            kept = Some(row);
        } else {
            merged = Some(row);
        }
    }
    let (Some(kept), Some(merged)) = (kept, merged) else {
        return Err(super::StoreError::Corrupt(format!(
            "user #{into} or #{from} vanished during a merge"
        )));
    };
    for ((setting, ours), (_, theirs)) in kept.reconciled().into_iter().zip(merged.reconciled()) {
        match (ours, theirs) {
            (Some(ours), Some(theirs)) if ours != theirs => merge.settings.push(format!(
                "kept {setting} `{ours}` (user #{from} had `{theirs}`)"
            )),
            (None, Some(theirs)) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "UPDATE users SET {setting} = $1 WHERE id = $2"
                )))
                .bind(theirs)
                .bind(into)
                .execute(&mut *conn)
                .await?;
                merge
                    .settings
                    .push(format!("took {setting} `{theirs}` from user #{from}"));
            }
            _ => {}
        }
    }
    if merged.is_owner != 0 && kept.is_owner == 0 {
        sqlx::query("UPDATE users SET is_owner = 1 WHERE id = $1")
            .bind(into)
            .execute(&mut *conn)
            .await?;
        merge
            .settings
            .push(format!("user #{into} is the owner now (user #{from} was)"));
    }
    if kept.display_name.is_none()
        && let Some(display) = merged.display_name
    {
        sqlx::query("UPDATE users SET display_name = $1 WHERE id = $2")
            .bind(display)
            .bind(into)
            .execute(&mut *conn)
            .await?;
    }
    sqlx::query("DELETE FROM users WHERE id = $1")
        .bind(from)
        .execute(&mut *conn)
        .await?;
    Ok(merge)
}

impl Store {
    /// Every identity of user `user_id`, oldest first.
    pub async fn identities_of_user(&self, user_id: i64) -> StoreResult<Vec<Identity>> {
        let rows: Vec<IdentityRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "{IDENTITY_SELECT} WHERE i.user_id = $1 ORDER BY i.id"
        )))
        .bind(user_id)
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(Identity::from).collect())
    }

    /// Every user with its identities, in the order users were created.
    pub async fn users(&self) -> StoreResult<Vec<UserSummary>> {
        let users: Vec<(i64, i64, Option<String>, Option<String>)> =
            sqlx::query_as("SELECT id, is_owner, permission, autonomy FROM users ORDER BY id")
                .fetch_all(self.pool())
                .await?;
        let mut identities = self.identities().await?;
        let mut summaries = Vec::with_capacity(users.len());
        for (id, is_owner, permission, autonomy) in users {
            let (mine, rest) = identities.into_iter().partition(|i| i.user_id == id);
            identities = rest;
            summaries.push(UserSummary {
                id,
                is_owner: is_owner != 0,
                permission,
                autonomy,
                identities: mine,
            });
        }
        Ok(summaries)
    }

    /// Makes `b` the same person as `a`: one user, one set of tasks, notes, memories … When `b`
    /// has a user of its own, everything of that user moves to `a`'s (in one transaction) and
    /// the emptied user is deleted. An identity hearth has never seen is created (allowed,
    /// source `linked`) in the other's user, so channels can be linked before they are used;
    /// linking also allows a revoked `b`, since it is declared to be `a`'s person.
    pub async fn link_identities(
        &self,
        a: (&str, &str),
        b: (&str, &str),
        now_ms: i64,
    ) -> Result<LinkOutcome, LinkError> {
        let (a_name, b_name) = (name(a.0, a.1), name(b.0, b.1));
        if a == b {
            return Err(LinkError::SameIdentity(a_name));
        }
        let mut tx = self.begin().await?;
        let known_a = identity_row(&mut tx, a.0, a.1).await?;
        let known_b = identity_row(&mut tx, b.0, b.1).await?;
        // The kept user is `a`'s, unless only `b` is known (the order is then immaterial: the
        // new identity has no data).
        let (kept, kept_name, joiner, joiner_name, joiner_row) = match (known_a, known_b) {
            (None, None) => return Err(LinkError::BothUnknown(a_name, b_name)),
            (Some(a_row), b_row) => (a_row, a_name, b, b_name, b_row),
            (None, Some(b_row)) => (b_row, b_name, a, a_name, None),
        };
        let (user_id, kept_status) = kept;
        if kept_status != IdentityStatus::Allowed {
            return Err(LinkError::Revoked(kept_name));
        }
        let mut outcome = LinkOutcome {
            user_id,
            kept: kept_name,
            joined: joiner_name,
            created: false,
            already: false,
            allowed_again: false,
            merge: None,
        };
        match joiner_row {
            None => {
                sqlx::query(
                    "INSERT INTO identities (channel, platform_user_id, user_id, status, source, created_at)
                     VALUES ($1, $2, $3, 'allowed', 'linked', $4)",
                )
                .bind(joiner.0)
                .bind(joiner.1)
                .bind(user_id)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
                outcome.created = true;
            }
            Some((joiner_user, joiner_status)) => {
                if joiner_status != IdentityStatus::Allowed {
                    outcome.allowed_again = true;
                    sqlx::query(
                        "UPDATE identities SET status = 'allowed', source = 'linked' WHERE channel = $1 AND platform_user_id = $2",
                    )
                    .bind(joiner.0)
                    .bind(joiner.1)
                    .execute(&mut *tx)
                    .await?;
                }
                if joiner_user == user_id {
                    outcome.already = !outcome.allowed_again;
                } else {
                    let mut merge = merge_users(&mut tx, user_id, joiner_user).await?;
                    merge.identities.retain(|i| *i != outcome.joined);
                    outcome.merge = Some(merge);
                }
            }
        }
        tx.commit().await?;
        Ok(outcome)
    }

    /// Gives `identity` a new user of its own, with no data and default settings; everything
    /// stays with the user its other identities keep.
    /// Moves `channel:platform_user_id` to a user of its own, made now: its old user keeps
    /// its rows (notes, tasks, memories) and its other identities. For a name made anew (a
    /// token re-created after a revoke) that should not inherit what the old one had. Returns
    /// the new user's id, or `None` when the identity is unknown.
    pub async fn move_identity_to_fresh_user(
        &self,
        channel: &str,
        platform_user_id: &str,
        now_ms: i64,
    ) -> StoreResult<Option<i64>> {
        let mut tx = self.begin().await?;
        let new_user: Option<i64> = sqlx::query_scalar(
            "INSERT INTO users (display_name, is_owner, created_at)
             SELECT display_name, 0, $1 FROM identities WHERE channel = $2 AND platform_user_id = $3
             RETURNING id",
        )
        .bind(now_ms)
        .bind(channel)
        .bind(platform_user_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(new_user) = new_user else {
            return Ok(None);
        };
        sqlx::query(
            "UPDATE identities SET user_id = $1 WHERE channel = $2 AND platform_user_id = $3",
        )
        .bind(new_user)
        .bind(channel)
        .bind(platform_user_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(new_user))
    }

    pub async fn unlink_identity(
        &self,
        channel: &str,
        platform_user_id: &str,
        now_ms: i64,
    ) -> Result<UnlinkOutcome, LinkError> {
        let identity_name = name(channel, platform_user_id);
        let mut tx = self.begin().await?;
        let Some((old_user, _)) = identity_row(&mut tx, channel, platform_user_id).await? else {
            return Err(LinkError::Unknown(identity_name));
        };
        let others: Vec<(String, String)> = sqlx::query_as(
            "SELECT channel, platform_user_id FROM identities WHERE user_id = $1 AND NOT (channel = $2 AND platform_user_id = $3) ORDER BY id",
        )
        .bind(old_user)
        .bind(channel)
        .bind(platform_user_id)
        .fetch_all(&mut *tx)
        .await?;
        if others.is_empty() {
            return Err(LinkError::NotLinked(identity_name));
        }
        let remaining = others
            .iter()
            .map(|(channel, platform_user_id)| name(channel, platform_user_id))
            .collect();
        let new_user: i64 = sqlx::query_scalar(
            "INSERT INTO users (display_name, is_owner, created_at)
             SELECT display_name, 0, $1 FROM identities WHERE channel = $2 AND platform_user_id = $3
             RETURNING id",
        )
        .bind(now_ms)
        .bind(channel)
        .bind(platform_user_id)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE identities SET user_id = $1 WHERE channel = $2 AND platform_user_id = $3",
        )
        .bind(new_user)
        .bind(channel)
        .bind(platform_user_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(UnlinkOutcome {
            old_user,
            new_user,
            remaining,
        })
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
    async fn allowing_an_identity_again_never_demotes_the_owner_and_a_fresh_user_keeps_the_old_rows()
     {
        let (store, _dir) = temp_store().await;
        let owner = store
            .allow_identity("http", "boss", None, "owner", true, 0)
            .await
            .expect("owner");
        store
            .link_identities(("http", "boss"), ("http", "laptop"), 0)
            .await
            .expect("link");
        // The token `laptop` made again: its identity is allowed again, as not-the-owner.
        let laptop = store
            .allow_identity("http", "laptop", Some("laptop"), "token", false, 1)
            .await
            .expect("again");
        assert_eq!(laptop.user_id, owner.user_id);
        assert!(laptop.is_owner, "still the owner");
        let boss = store
            .identity("http", "boss")
            .await
            .expect("db")
            .expect("boss");
        assert!(boss.is_owner);

        let fresh = store
            .move_identity_to_fresh_user("http", "laptop", 2)
            .await
            .expect("move")
            .expect("known");
        let laptop = store
            .identity("http", "laptop")
            .await
            .expect("db")
            .expect("laptop");
        assert_eq!(laptop.user_id, fresh);
        assert!(!laptop.is_owner, "a fresh user is nobody's owner");
        let boss = store
            .identity("http", "boss")
            .await
            .expect("db")
            .expect("boss");
        assert_eq!((boss.user_id, boss.is_owner), (owner.user_id, true));
        assert_eq!(
            store
                .move_identity_to_fresh_user("http", "nobody", 3)
                .await
                .expect("db"),
            None
        );
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

#[cfg(test)]
mod link_tests {
    use super::*;
    use crate::store::test_support::temp_store;

    async fn exec(store: &Store, sql: &str, user: i64) {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
            .bind(user)
            .execute(store.pool())
            .await
            .expect(sql);
    }

    async fn add_task(store: &Store, user: i64, title: &str) {
        sqlx::query(
            "INSERT INTO tasks (user_id, title, priority, priority_rank, created_at, updated_at) VALUES ($1, $2, 'medium', 2, 0, 0)",
        )
        .bind(user)
        .bind(title)
        .execute(store.pool())
        .await
        .expect("task");
    }

    async fn add_bookmark(store: &Store, user: i64, url: &str) {
        sqlx::query("INSERT INTO bookmarks (user_id, url, created_at) VALUES ($1, $2, 0)")
            .bind(user)
            .bind(url)
            .execute(store.pool())
            .await
            .expect("bookmark");
    }

    async fn count(store: &Store, table: &str, user: i64) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM {table} WHERE user_id = $1"
        )))
        .bind(user)
        .fetch_one(store.pool())
        .await
        .expect("count")
    }

    async fn user_of(store: &Store, channel: &str, id: &str) -> i64 {
        store
            .identity(channel, id)
            .await
            .expect("db")
            .expect("known")
            .user_id
    }

    async fn allow(store: &Store, channel: &str, id: &str) -> i64 {
        store
            .allow_identity(channel, id, None, "paired", false, 0)
            .await
            .expect("allow")
            .user_id
    }

    #[tokio::test]
    async fn linking_an_unseen_identity_creates_it_allowed_in_the_same_user() {
        let (store, _dir) = temp_store().await;
        let user = allow(&store, "telegram", "42").await;
        let outcome = store
            .link_identities(("telegram", "42"), ("email", "me@example.org"), 5)
            .await
            .expect("linked");
        assert!(outcome.created && outcome.merge.is_none());
        let email = store
            .identity("email", "me@example.org")
            .await
            .expect("db")
            .expect("created");
        assert_eq!(
            (email.user_id, email.status, email.source.as_str()),
            (user, IdentityStatus::Allowed, "linked")
        );

        // Either order works when only one side is known; a second link changes nothing.
        let outcome = store
            .link_identities(("matrix", "@me:example.org"), ("telegram", "42"), 6)
            .await
            .expect("linked");
        assert_eq!(outcome.kept, "telegram:42");
        assert_eq!(user_of(&store, "matrix", "@me:example.org").await, user);
        let again = store
            .link_identities(("telegram", "42"), ("email", "me@example.org"), 7)
            .await
            .expect("linked");
        assert!(again.already);
        let names: Vec<String> = store
            .identities_of_user(user)
            .await
            .expect("db")
            .iter()
            .map(|i| format!("{}:{}", i.channel, i.platform_user_id))
            .collect();
        assert_eq!(
            names,
            [
                "telegram:42",
                "email:me@example.org",
                "matrix:@me:example.org"
            ]
        );
    }

    #[tokio::test]
    async fn linking_two_users_with_data_merges_everything_into_the_first() {
        let (store, _dir) = temp_store().await;
        let a = allow(&store, "telegram", "42").await;
        let b = allow(&store, "discord", "7").await;
        allow(&store, "matrix", "@me:example.org").await;
        store
            .link_identities(("discord", "7"), ("matrix", "@me:example.org"), 1)
            .await
            .expect("b's own link");
        add_task(&store, a, "a's task").await;
        add_task(&store, b, "b's task").await;
        add_task(&store, b, "b's other task").await;
        add_bookmark(&store, a, "https://example.org/").await;
        add_bookmark(&store, b, "https://example.org/").await;
        add_bookmark(&store, b, "https://example.net/").await;
        exec(
            &store,
            "INSERT INTO memories (user_id, content, kind, importance, created_at, updated_at) VALUES ($1, 'likes tea', 'preference', 0.5, 0, 0)",
            b,
        )
        .await;
        exec(
            &store,
            "INSERT INTO expenses (user_id, amount_cents, currency, category, spent_on, created_at) VALUES ($1, 450, 'EUR', 'food', '2024-05-01', 0)",
            b,
        )
        .await;
        exec(
            &store,
            "UPDATE users SET permission = 'read', autonomy = NULL WHERE id = $1",
            a,
        )
        .await;
        exec(
            &store,
            "UPDATE users SET permission = 'admin', autonomy = 'high' WHERE id = $1",
            b,
        )
        .await;

        let outcome = store
            .link_identities(("telegram", "42"), ("discord", "7"), 2)
            .await
            .expect("linked");
        let merge = outcome.merge.expect("merged");
        assert_eq!(
            merge.to_string(),
            format!(
                "merged user #{b}: 2 tasks, 1 bookmark, 1 expense, 1 memory; also joined matrix:@me:example.org; \
                 1 bookmark(s) of a URL already saved kept once; kept permission `read` (user #{b} had `admin`); \
                 took autonomy `high` from user #{b}"
            )
        );
        assert_eq!(count(&store, "tasks", a).await, 3);
        assert_eq!(count(&store, "bookmarks", a).await, 2);
        assert_eq!(count(&store, "memories", a).await, 1);
        assert_eq!(count(&store, "expenses", a).await, 1);
        assert_eq!(user_of(&store, "discord", "7").await, a);
        assert_eq!(user_of(&store, "matrix", "@me:example.org").await, a);
        let (_, permission, autonomy) = store.user_settings(a).await.expect("settings");
        assert_eq!(
            (permission.as_deref(), autonomy.as_deref()),
            (Some("read"), Some("high"))
        );
        let gone: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE id = $1")
            .bind(b)
            .fetch_one(store.pool())
            .await
            .expect("count");
        assert_eq!(gone, 0, "the emptied user is deleted");
    }

    #[tokio::test]
    async fn the_owner_flag_follows_the_person() {
        let (store, _dir) = temp_store().await;
        let a = allow(&store, "telegram", "42").await;
        store
            .allow_identity("terminal", "local", None, "owner", true, 0)
            .await
            .expect("owner");
        let outcome = store
            .link_identities(("telegram", "42"), ("terminal", "local"), 1)
            .await
            .expect("linked");
        assert!(
            outcome
                .merge
                .expect("merged")
                .to_string()
                .contains(&format!("user #{a} is the owner now")),
        );
        assert!(
            store
                .identity("telegram", "42")
                .await
                .expect("db")
                .expect("known")
                .is_owner
        );
    }

    #[tokio::test]
    async fn a_merge_that_cannot_finish_changes_nothing() {
        let (store, _dir) = temp_store().await;
        let a = allow(&store, "telegram", "42").await;
        let b = allow(&store, "discord", "7").await;
        add_task(&store, b, "b's task").await;
        // A table the merge does not know still points at b's user: deleting it must fail, and
        // with it the whole merge.
        sqlx::query("CREATE TABLE extra (user_id INTEGER NOT NULL REFERENCES users(id))")
            .execute(store.pool())
            .await
            .expect("create");
        exec(&store, "INSERT INTO extra (user_id) VALUES ($1)", b).await;
        let err = store
            .link_identities(("telegram", "42"), ("discord", "7"), 1)
            .await
            .expect_err("the foreign key stops the delete");
        assert!(!err.is_refusal(), "{err}");
        assert_eq!(count(&store, "tasks", b).await, 1);
        assert_eq!(count(&store, "tasks", a).await, 0);
        assert_eq!(user_of(&store, "discord", "7").await, b);
    }

    #[tokio::test]
    async fn linking_a_revoked_identity_allows_it_again() {
        let (store, _dir) = temp_store().await;
        let a = allow(&store, "telegram", "42").await;
        allow(&store, "discord", "7").await;
        store
            .set_identity_status("discord", "7", IdentityStatus::Revoked)
            .await
            .expect("revoke");
        let outcome = store
            .link_identities(("telegram", "42"), ("discord", "7"), 1)
            .await
            .expect("linked");
        assert!(outcome.allowed_again && !outcome.already && outcome.merge.is_some());
        let discord = store
            .identity("discord", "7")
            .await
            .expect("db")
            .expect("known");
        assert_eq!(
            (discord.user_id, discord.status, discord.source.as_str()),
            (a, IdentityStatus::Allowed, "linked")
        );
    }

    #[tokio::test]
    async fn refusals_say_why() {
        let (store, _dir) = temp_store().await;
        allow(&store, "telegram", "42").await;
        allow(&store, "telegram", "43").await;
        store
            .set_identity_status("telegram", "43", IdentityStatus::Revoked)
            .await
            .expect("revoke");
        let cases = [
            (
                ("telegram", "42"),
                ("telegram", "42"),
                "cannot be linked to itself",
            ),
            (
                ("email", "a@b.c"),
                ("email", "d@e.f"),
                "neither email:a@b.c nor email:d@e.f is known",
            ),
            (
                ("telegram", "43"),
                ("email", "d@e.f"),
                "telegram:43 is revoked",
            ),
        ];
        for (a, b, message) in cases {
            let err = store.link_identities(a, b, 1).await.expect_err(message);
            assert!(
                err.is_refusal() && err.to_string().contains(message),
                "{err}"
            );
        }
        let err = store
            .unlink_identity("telegram", "42", 1)
            .await
            .expect_err("alone");
        assert_eq!(
            err.to_string(),
            "telegram:42 is not linked to any other identity"
        );
        let err = store
            .unlink_identity("telegram", "99", 1)
            .await
            .expect_err("unknown");
        assert!(
            err.to_string().starts_with("no identity telegram:99"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn unlinking_gives_a_new_empty_user_and_the_data_stays() {
        let (store, _dir) = temp_store().await;
        let a = allow(&store, "telegram", "42").await;
        store
            .link_identities(("telegram", "42"), ("email", "me@example.org"), 1)
            .await
            .expect("linked");
        exec(
            &store,
            "UPDATE users SET permission = 'admin' WHERE id = $1",
            a,
        )
        .await;
        add_task(&store, a, "shared").await;
        let outcome = store
            .unlink_identity("email", "me@example.org", 2)
            .await
            .expect("unlinked");
        assert_eq!(outcome.old_user, a);
        assert_eq!(outcome.remaining, ["telegram:42"]);
        let email = store
            .identity("email", "me@example.org")
            .await
            .expect("db")
            .expect("still known");
        assert_eq!(email.user_id, outcome.new_user);
        assert_eq!(email.status, IdentityStatus::Allowed);
        assert!(!email.is_owner);
        assert_eq!(count(&store, "tasks", a).await, 1);
        assert_eq!(count(&store, "tasks", outcome.new_user).await, 0);
        assert_eq!(
            store
                .user_settings(outcome.new_user)
                .await
                .expect("settings"),
            (false, None, None)
        );
        let users = store.users().await.expect("users");
        assert_eq!(users.len(), 2);
        assert_eq!(users[0].identities.len(), 1);
    }

    /// Every column that points at a user is moved by a merge; a new per-user table must be
    /// added to `USER_ROWS`.
    #[tokio::test]
    async fn the_merge_knows_every_table_that_points_at_users() {
        let (store, _dir) = temp_store().await;
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.name AS tbl, f.\"from\" AS col FROM sqlite_master m, pragma_foreign_key_list(m.name) f
             WHERE m.type = 'table' AND f.\"table\" = 'users' ORDER BY m.name, f.\"from\"",
        )
        .fetch_all(store.pool())
        .await
        .expect("schema");
        let mut missing = Vec::new();
        for (table, column) in &rows {
            let known = table == "identities"
                || USER_ROWS
                    .iter()
                    .any(|rows| rows.table == table && rows.column == column);
            if !known {
                missing.push(format!("{table}.{column}"));
            }
        }
        assert!(
            rows.len() >= USER_ROWS.len(),
            "the query finds the references"
        );
        assert!(missing.is_empty(), "not moved by a merge: {missing:?}");
    }

    #[tokio::test]
    async fn a_domain_wildcard_admits_exactly_that_domain_while_it_is_listed() {
        let (store, _dir) = temp_store().await;
        let listed = vec!["me@example.org".to_string(), "*@family.example".to_string()];
        store
            .sync_allowlist("email", &listed, &listed, 0)
            .await
            .expect("sync");
        let lookup = |address: &'static str| {
            let store = store.clone();
            async move {
                store
                    .identity_or_domain("email", address, 1)
                    .await
                    .expect("db")
                    .map(|i| (i.status, i.source))
            }
        };
        assert_eq!(
            lookup("kid@family.example").await,
            Some((IdentityStatus::Allowed, DOMAIN_SOURCE.to_string()))
        );
        // Exactly the domain: not a subdomain, not a look-alike, not another channel.
        assert_eq!(lookup("kid@mail.family.example").await, None);
        assert_eq!(lookup("kid@family.example.evil").await, None);
        assert_eq!(lookup("kid@otherfamily.example").await, None);
        assert!(
            store
                .identity_or_domain("telegram", "kid@family.example", 1)
                .await
                .expect("db")
                .is_none()
        );
        // Each address is its own user.
        let kid = store
            .identity("email", "kid@family.example")
            .await
            .expect("db")
            .expect("kid");
        let aunt = store
            .identity_or_domain("email", "aunt@family.example", 1)
            .await
            .expect("db")
            .expect("aunt");
        assert_ne!(kid.user_id, aunt.user_id);

        // The wildcard leaves the config: its addresses are revoked at the next start, and
        // allowed again (same user) when it comes back.
        let only_me = vec!["me@example.org".to_string()];
        store
            .sync_allowlist("email", &only_me, &only_me, 2)
            .await
            .expect("sync");
        assert_eq!(
            lookup("kid@family.example").await.map(|(status, _)| status),
            Some(IdentityStatus::Revoked)
        );
        assert_eq!(lookup("new@family.example").await, None);
        store
            .sync_allowlist("email", &listed, &listed, 3)
            .await
            .expect("sync");
        let back = store
            .identity("email", "kid@family.example")
            .await
            .expect("db")
            .expect("kid");
        assert_eq!(
            (back.status, back.user_id),
            (IdentityStatus::Allowed, kid.user_id)
        );
    }
}
