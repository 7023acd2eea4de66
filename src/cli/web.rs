//! `hearth web login` and `hearth web logout --all`: the owner's way into the page. Only someone
//! who can run hearth's commands on the box (and so read its configuration and database) can
//! mint a code: that is what makes them the owner.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;

use crate::store::Store;
use crate::web::auth;

use super::{Failure, existing_database, load_config, usage};

#[derive(Debug, Subcommand)]
pub enum WebAction {
    /// Print a one-time code (five minutes, single use) to log in to the page.
    Login,
    /// End sessions of the page.
    Logout {
        /// End every session (and void unused codes); required, so nobody ends all by accident.
        #[arg(long)]
        all: bool,
    },
}

pub(super) async fn run(path: Option<PathBuf>, action: WebAction) -> Result<(), Failure> {
    let config = load_config(path)?.config;
    if let WebAction::Logout { all: false } = action {
        return Err(usage(anyhow::anyhow!(
            "`hearth web logout --all` ends every session; a single one ends with the page's Log out button"
        )));
    }
    existing_database(&config)?;
    let store = Store::open(&config.daemon.database_url())
        .await
        .context("cannot open the database")?;
    let now = chrono::Utc::now().timestamp_millis();
    let result = match action {
        WebAction::Login => auth::mint_login_code(&store, now).await.map(|code| {
            println!("{code}");
            match config.daemon.http_listen {
                None => eprintln!(
                    "note: daemon.http_listen is empty, so the page is off; set it (e.g. 127.0.0.1:8787) and restart hearth"
                ),
                Some(listen) => {
                    let shown = listen
                        .to_string()
                        .replace("0.0.0.0", "127.0.0.1")
                        .replace("[::]", "[::1]");
                    eprintln!(
                        "open http://{shown}/ and type this code; it works once, within 5 minutes"
                    );
                }
            }
        }),
        WebAction::Logout { .. } => store.end_all_web_sessions().await.map(|ended| {
            println!("ended {ended} session(s) of the page; log in again with `hearth web login`");
        }),
    };
    store.close().await;
    result.context("the database refused")?;
    Ok(())
}
