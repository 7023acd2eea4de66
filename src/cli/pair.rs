//! `hearth pair`: who may talk to hearth.

use std::path::PathBuf;

use clap::Subcommand;

use crate::config::Config;
use crate::store::Store;
use crate::store::user::UserSetting;
use crate::terminal::LOCAL;

use super::database::open_with_identities;
use super::{Failure, load_config, usage};

#[derive(Debug, Subcommand)]
pub enum PairAction {
    /// Pending pairing codes and the users with their identities (the default).
    List,
    /// Allow the sender who got this code.
    Approve { code: String },
    /// Revoke an identity, given as channel:user_id.
    Revoke { identity: String },
    /// Join identity B to A's user: one person, one set of tasks, notes, memories, expenses and
    /// schedules. B's data (when it has its own) moves to A's user. An identity hearth has not
    /// seen yet (an email address, say) is created, allowed.
    Link { a: String, b: String },
    /// Give an identity a user of its own again; the data stays with the other identities.
    Unlink { identity: String },
    /// Set which tools a user may call: none, read, write, execute or admin.
    Permission { identity: String, level: String },
    /// Set how much hearth may do for a user without asking: none, low, medium, high or full.
    Autonomy { identity: String, level: String },
}

/// `text` safe to print on a terminal: control characters (escape sequences that could move
/// the cursor, rewrite lines or change the title) and bidirectional overrides (which reorder
/// what is shown) are written as `\u{…}` escapes.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
            if c.is_control() || bidi {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

pub(super) async fn run(path: Option<PathBuf>, action: PairAction) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    // Linking records an intention before the first start (22.7); everything else reads or
    // changes what the daemon stored.
    let may_create = matches!(action, PairAction::Link { .. });
    let (store, now) = open_with_identities(&config, may_create).await?;
    let result = match action {
        PairAction::List => {
            let open = store.open_pairings(now).await?;
            if open.is_empty() {
                println!("no pending pairing codes");
            } else {
                println!("pending pairing codes:");
                for p in open {
                    let minutes = (p.expires_at - now) / 60_000;
                    // Names and ids come from strangers: never let them steer the terminal.
                    let name = printable(p.display_name.as_deref().unwrap_or(""));
                    println!(
                        "  {}  {}:{} {name} (expires in {minutes} min)",
                        p.code,
                        p.channel,
                        printable(&p.platform_user_id)
                    );
                }
            }
            list_users(&store).await
        }
        PairAction::Link { a, b } => link(&store, &a, &b, now).await,
        PairAction::Unlink { identity } => unlink(&store, &config, &identity, now).await,
        PairAction::Approve { code } => approve(&store, &code.to_uppercase(), now).await,
        PairAction::Permission { identity, level } => {
            set_user_setting(
                &store,
                &identity,
                UserSetting::Permission,
                &level,
                &["none", "read", "write", "execute", "admin"],
            )
            .await
        }
        PairAction::Autonomy { identity, level } => {
            set_user_setting(
                &store,
                &identity,
                UserSetting::Autonomy,
                &level,
                &["none", "low", "medium", "high", "full"],
            )
            .await
        }
        PairAction::Revoke { identity } => {
            let (channel, user) = identity.split_once(':').ok_or_else(|| {
                usage(anyhow::anyhow!(
                    "give the identity as channel:user_id, e.g. telegram:12345"
                ))
            })?;
            if store
                .set_identity_status(channel, user, crate::store::IdentityStatus::Revoked)
                .await?
            {
                println!("revoked {identity}; if it is in a config allowlist, remove it there too");
                Ok(())
            } else {
                Err(usage(anyhow::anyhow!(
                    "no identity {identity}; see `hearth pair list`"
                )))
            }
        }
    };
    store.close().await;
    result
}

/// Users with their identities grouped under them (only users that have identities).
async fn list_users(store: &Store) -> Result<(), Failure> {
    let users = store.users().await?;
    let users: Vec<_> = users.iter().filter(|u| !u.identities.is_empty()).collect();
    if users.is_empty() {
        println!("no users yet");
        return Ok(());
    }
    println!("users:");
    for user in users {
        let mut about = Vec::new();
        if user.is_owner {
            about.push("owner".to_string());
        }
        if let Some(permission) = &user.permission {
            about.push(format!("permission {permission}"));
        }
        if let Some(autonomy) = &user.autonomy {
            about.push(format!("autonomy {autonomy}"));
        }
        if about.is_empty() {
            println!("  user #{}", user.id);
        } else {
            println!("  user #{} ({})", user.id, about.join(", "));
        }
        for identity in &user.identities {
            println!(
                "    {}:{}  {} ({})",
                identity.channel,
                printable(&identity.platform_user_id),
                identity.status,
                identity.source
            );
        }
    }
    Ok(())
}

/// `channel:user_id` checked the way `daemon.owner` entries are.
fn identity_arg(text: &str) -> Result<(&str, &str), Failure> {
    crate::config::parse_identity(text).map_err(|message| usage(anyhow::anyhow!("{message}")))
}

fn link_failure(err: crate::store::LinkError) -> Failure {
    if err.is_refusal() {
        usage(anyhow::anyhow!("{err}"))
    } else {
        Failure::from(err)
    }
}

async fn link(store: &Store, a: &str, b: &str, now: i64) -> Result<(), Failure> {
    let (a, b) = (identity_arg(a)?, identity_arg(b)?);
    let outcome = store
        .link_identities(a, b, now)
        .await
        .map_err(link_failure)?;
    let (kept, joined, user) = (&outcome.kept, &outcome.joined, outcome.user_id);
    if outcome.already {
        println!("{joined} and {kept} are already one user (#{user}); nothing changed");
        return Ok(());
    }
    let mut line = format!("linked {joined} to {kept} (user #{user})");
    if outcome.created {
        line.push_str(&format!("; {joined} was new to hearth and is allowed now"));
    }
    if outcome.allowed_again {
        line.push_str(&format!("; {joined} was revoked and is allowed again"));
    }
    if let Some(merge) = &outcome.merge {
        line.push_str(&format!("; {merge}"));
    }
    println!("{line}");
    Ok(())
}

async fn unlink(store: &Store, config: &Config, identity: &str, now: i64) -> Result<(), Failure> {
    let (channel, user) = identity_arg(identity)?;
    // Owner identities are linked again at every start; unlinking them would not last.
    if config.daemon.owner_identities().contains(&(channel, user)) {
        return Err(usage(anyhow::anyhow!(
            "{identity} is listed in daemon.owner, and the owner's identities are linked again at every start; remove it there first"
        )));
    }
    if channel == "terminal" && user == LOCAL {
        return Err(usage(anyhow::anyhow!(
            "{identity} is the terminal of `hearth chat`, which always belongs to the owner"
        )));
    }
    let outcome = store
        .unlink_identity(channel, user, now)
        .await
        .map_err(link_failure)?;
    println!(
        "unlinked {identity}: it is user #{} now, with no data and default settings; the data stays with user #{} ({})",
        outcome.new_user,
        outcome.old_user,
        outcome.remaining.join(", ")
    );
    Ok(())
}

async fn set_user_setting(
    store: &Store,
    identity: &str,
    setting: UserSetting,
    level: &str,
    levels: &[&str],
) -> Result<(), Failure> {
    let level = level.to_lowercase();
    if !levels.contains(&level.as_str()) {
        return Err(usage(anyhow::anyhow!(
            "{} must be one of {}",
            setting.name(),
            levels.join(", ")
        )));
    }
    let (channel, user) = identity.split_once(':').ok_or_else(|| {
        usage(anyhow::anyhow!(
            "give the identity as channel:user_id, e.g. telegram:12345"
        ))
    })?;
    if !store
        .set_user_setting(channel, user, setting, &level)
        .await?
    {
        return Err(usage(anyhow::anyhow!(
            "no identity {identity}; see `hearth pair list`"
        )));
    }
    println!("{identity}: {} is now {level}", setting.name());
    Ok(())
}

async fn approve(store: &Store, code: &str, now: i64) -> Result<(), Failure> {
    // The same approval as the page's Inbox (src/store/identity.rs).
    let request = store
        .approve_pairing(code, now)
        .await?
        .map_err(|refusal| usage(anyhow::anyhow!("{refusal}")))?;
    println!(
        "approved {}:{}; they can talk to hearth now",
        request.channel, request.platform_user_id
    );
    Ok(())
}
