//! `hearth token`: the HTTP API's client tokens. A token is shown once, when it is made; the
//! database keeps only its SHA-256. Each token is the identity `http:<name>`, which
//! `hearth pair link` can join to a user.

use std::path::PathBuf;

use clap::Subcommand;
use hearth_http::{CHANNEL_NAME, Scope, check_token_name, hash_token, new_token};

use crate::store::{Identity, IdentityStatus, Store};

use super::database::open_with_identities;
use super::{Failure, load_agents, load_config, usage};

#[derive(Debug, Subcommand)]
pub enum TokenAction {
    /// Make a token for a client; it is printed once and cannot be shown again.
    Create {
        /// 1 to 32 of a-z, 0-9, _ and -; the identity is http:NAME.
        name: String,
        /// chat (turns, agents), approve (also decide confirmations) or admin (everything).
        #[arg(long, default_value = "chat")]
        scope: String,
        /// The agents it may use, comma-separated; any when left out.
        #[arg(long, value_delimiter = ',')]
        agents: Vec<String>,
        /// When http:NAME exists already (a revoked token, or an identity named in
        /// daemon.owner): make the new token that identity's user again, with all it has.
        /// Without it, a revoked name starts a fresh user and a live identity is refused.
        #[arg(long)]
        same_user: bool,
    },
    /// The tokens, with their scope, agents and when each was last used (the default).
    List,
    /// Revoke a token at once; its requests get 401 from then on.
    Revoke { name: String },
}

pub(super) async fn run(path: Option<PathBuf>, action: TokenAction) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    let may_create = matches!(action, TokenAction::Create { .. });
    let (store, now) = open_with_identities(&config, may_create).await?;
    let result = match action {
        TokenAction::Create {
            name,
            scope,
            agents,
            same_user,
        } => {
            let known: Vec<String> = match load_agents(&config) {
                Ok((set, _)) => set.ids().iter().map(|id| id.to_string()).collect(),
                Err(err) => {
                    store.close().await;
                    return Err(err);
                }
            };
            let asked = Asked {
                name: &name,
                scope: &scope,
                agents,
                same_user,
            };
            create(&store, asked, &known, now).await
        }
        TokenAction::List => list(&store, now).await,
        TokenAction::Revoke { name } => revoke(&store, &name).await,
    };
    if config.channels.http.is_none() {
        eprintln!(
            "note: [channels.http] is not in the configuration, so no HTTP API serves these tokens yet"
        );
    }
    store.close().await;
    result
}

/// What `hearth token create` was asked for.
struct Asked<'a> {
    name: &'a str,
    scope: &'a str,
    agents: Vec<String>,
    same_user: bool,
}

async fn create(
    store: &Store,
    asked: Asked<'_>,
    known_agents: &[String],
    now: i64,
) -> Result<(), Failure> {
    let name = asked.name;
    check_token_name(name).map_err(|message| usage(anyhow::anyhow!(message)))?;
    let Some(scope) = Scope::parse(asked.scope) else {
        return Err(usage(anyhow::anyhow!(
            "--scope {}: expected chat, approve or admin",
            asked.scope
        )));
    };
    let agents: Vec<String> = asked
        .agents
        .into_iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    // An agent id that is not in the agents file would make a token that can talk to nothing
    // (or to an agent added later under that name, which nobody chose).
    let unknown: Vec<&str> = agents
        .iter()
        .filter(|a| !known_agents.contains(a))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(usage(anyhow::anyhow!(
            "--agents: no agent {} in the agents file (its agents: {}; `hearth agents list` shows them)",
            unknown.join(", "),
            known_agents.join(", ")
        )));
    }
    if store
        .tokens()
        .await?
        .iter()
        .any(|t| t.name == name && t.revoked_at.is_none())
    {
        return Err(live_token_exists(name));
    }
    // A name whose identity exists belongs to a user already: perhaps the owner (a rotated
    // token that was linked to them, or an identity in daemon.owner). Saying whose it is, and
    // doing what was asked, keeps a new token from silently inheriting someone's notes and
    // rights, or from being cut off from them.
    let mut note = format!(
        "Its identity is http:{name} (`hearth pair link telegram:ID http:{name}` makes it yours)."
    );
    if let Some(existing) = store.identity(CHANNEL_NAME, name).await? {
        let whose = whose_user(store, &existing).await?;
        if asked.same_user {
            note = format!("Its identity http:{name} is {whose}, as before (--same-user).");
        } else if existing.status == IdentityStatus::Allowed {
            return Err(usage(anyhow::anyhow!(
                "http:{name} exists and belongs to {whose}. `hearth token create {name} --same-user` makes the new token theirs, with all their rights; or pick another name"
            )));
        } else {
            store
                .move_identity_to_fresh_user(CHANNEL_NAME, name, now)
                .await?;
            note = format!(
                "http:{name} was {whose}; the new token starts a fresh user (`--same-user` would have kept it theirs)."
            );
        }
    }
    let token = new_token();
    if !store
        .create_token(name, &hash_token(&token), scope.as_str(), &agents, now)
        .await?
    {
        return Err(live_token_exists(name));
    }
    // The token's identity: allowed, so its turns are answered. Never the owner by this, nor
    // less of one: `allow_identity` only ever raises the owner flag.
    store
        .allow_identity(CHANNEL_NAME, name, Some(name), "token", false, now)
        .await?;
    println!("{token}");
    eprintln!(
        "token {name} (scope {}, agents: {}) is shown once: store it now. {note}",
        scope.as_str(),
        if agents.is_empty() {
            "any".to_string()
        } else {
            agents.join(", ")
        }
    );
    Ok(())
}

fn live_token_exists(name: &str) -> Failure {
    usage(anyhow::anyhow!(
        "a token named {name} exists; revoke it first (`hearth token revoke {name}`) or pick another name"
    ))
}

/// Whose user an identity belongs to, for a person reading the CLI: `user #3 (the owner; also
/// telegram:42, http:phone)`.
async fn whose_user(store: &Store, identity: &Identity) -> Result<String, Failure> {
    let others: Vec<String> = store
        .identities_of_user(identity.user_id)
        .await?
        .into_iter()
        .filter(|i| i.id != identity.id)
        .map(|i| format!("{}:{}", i.channel, i.platform_user_id))
        .collect();
    let mut about = Vec::new();
    if identity.is_owner {
        about.push("the owner".to_string());
    }
    if !others.is_empty() {
        about.push(format!("also {}", others.join(", ")));
    }
    Ok(if about.is_empty() {
        format!("user #{}", identity.user_id)
    } else {
        format!("user #{} ({})", identity.user_id, about.join("; "))
    })
}

async fn list(store: &Store, now: i64) -> Result<(), Failure> {
    let tokens = store.tokens().await?;
    if tokens.is_empty() {
        println!("no tokens; make one with `hearth token create NAME`");
        return Ok(());
    }
    for token in tokens {
        let agents = if token.agents.0.is_empty() {
            "any".to_string()
        } else {
            token.agents.0.join(",")
        };
        let used = match token.last_used_at {
            Some(at) => ago(now - at),
            None => "never".to_string(),
        };
        let state = match token.revoked_at {
            Some(_) => "revoked",
            None => "live",
        };
        println!(
            "{}  {state}  scope={}  agents={agents}  last used {used}",
            token.name, token.scope
        );
    }
    Ok(())
}

fn ago(ms: i64) -> String {
    let minutes = ms.max(0) / 60_000;
    match minutes {
        0 => "just now".to_string(),
        1..=119 => format!("{minutes} min ago"),
        120..=2879 => format!("{} h ago", minutes / 60),
        _ => format!("{} days ago", minutes / 1440),
    }
}

async fn revoke(store: &Store, name: &str) -> Result<(), Failure> {
    if !store
        .revoke_token(name, chrono::Utc::now().timestamp_millis())
        .await?
    {
        return Err(usage(anyhow::anyhow!(
            "no live token named {name}; see `hearth token list`"
        )));
    }
    store
        .set_identity_status(CHANNEL_NAME, name, IdentityStatus::Revoked)
        .await?;
    println!("revoked token {name}");
    Ok(())
}
