//! `hearth token`: the HTTP API's client tokens. A token is shown once, when it is made; the
//! database keeps only its SHA-256. Each token is the identity `http:<name>`, which
//! `hearth pair link` can join to a user.

use std::path::PathBuf;

use clap::Subcommand;
use hearth_http::{CHANNEL_NAME, Scope, check_token_name, hash_token, new_token};

use crate::store::{IdentityStatus, Store};

use super::database::open_with_identities;
use super::{Failure, load_config, usage};

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
        } => create(&store, &name, &scope, agents, now).await,
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

async fn create(
    store: &Store,
    name: &str,
    scope: &str,
    agents: Vec<String>,
    now: i64,
) -> Result<(), Failure> {
    check_token_name(name).map_err(|message| usage(anyhow::anyhow!(message)))?;
    let Some(scope) = Scope::parse(scope) else {
        return Err(usage(anyhow::anyhow!(
            "--scope {scope}: expected chat, approve or admin"
        )));
    };
    let agents: Vec<String> = agents
        .into_iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    let token = new_token();
    if !store
        .create_token(name, &hash_token(&token), scope.as_str(), &agents, now)
        .await?
    {
        return Err(usage(anyhow::anyhow!(
            "a token named {name} exists; revoke it first (`hearth token revoke {name}`) or pick another name"
        )));
    }
    // The token's identity: allowed, so its turns are answered; linkable to the owner's user.
    store
        .allow_identity(CHANNEL_NAME, name, Some(name), "token", false, now)
        .await?;
    println!("{token}");
    eprintln!(
        "token {name} (scope {}, agents: {}) is shown once: store it now. Its identity is http:{name} (`hearth pair link telegram:ID http:{name}` makes it yours).",
        scope.as_str(),
        if agents.is_empty() {
            "any".to_string()
        } else {
            agents.join(", ")
        }
    );
    Ok(())
}

async fn list(store: &Store, now: i64) -> Result<(), Failure> {
    let tokens = store.tokens().await?;
    if tokens.is_empty() {
        println!("no tokens; make one with `hearth token create NAME`");
        return Ok(());
    }
    for token in tokens {
        let agents = if token.agents.is_empty() {
            "any".to_string()
        } else {
            token.agents.join(",")
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
