//! `hearth init`: writes a minimal working configuration (one model provider and at most one
//! chat channel), then checks it as `hearth check` does. In a terminal it asks, offering what
//! `hearth chat` would use as the defaults; piped, it takes its flags and those defaults, so a
//! script can set hearth up without a prompt.

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use clap::Args;

use crate::config::{ProviderConfig, ProviderKind};

use super::{Failure, usage};

/// Where `hearth init` writes when neither `--config`, `$HEARTH_CONFIG` nor a home directory
/// says.
const FALLBACK_FILE: &str = "hearth.toml";

/// The terminal's channel name, as `hearth chat` calls it (its user is [`crate::terminal::LOCAL`]).
const TERMINAL_CHANNEL: &str = "terminal";

/// The chat channels `init` sets up; the others have more to them (see the example file).
const CHANNELS: [&str; 3] = ["none", "telegram", "discord"];

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Overwrite the file if it exists.
    #[arg(long)]
    force: bool,
    /// The model server's API: openai (any OpenAI-compatible server) or anthropic.
    #[arg(long)]
    kind: Option<String>,
    /// The model server's base URL, e.g. http://127.0.0.1:11434/v1 (default: what
    /// `hearth chat` would use).
    #[arg(long)]
    base_url: Option<String>,
    /// The model to use.
    #[arg(long)]
    model: Option<String>,
    /// The environment variable holding the API key (none for a local server).
    #[arg(long)]
    api_key_env: Option<String>,
    /// The chat channel to set up: none, telegram or discord (Matrix and email: see
    /// data/hearth.example.toml).
    #[arg(long)]
    channel: Option<String>,
    /// Your user id on that channel: the one person allowed to talk to hearth at first.
    #[arg(long)]
    user: Option<String>,
}

/// What goes into the file.
struct Answers {
    provider: ProviderConfig,
    /// (channel, user id)
    channel: Option<(String, String)>,
}

/// The file `init` writes: `--config`, else `$HEARTH_CONFIG`, else the user's
/// `$XDG_CONFIG_HOME/hearth/hearth.toml` (`~/.config/hearth/hearth.toml`), which every
/// directory finds; `./hearth.toml` only for a process with no home.
fn target_file(explicit: Option<PathBuf>, env: &HashMap<String, String>) -> PathBuf {
    explicit
        .or_else(|| {
            env.get("HEARTH_CONFIG")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
        })
        .or_else(|| crate::config::user_config_path(env))
        .unwrap_or_else(|| PathBuf::from(FALLBACK_FILE))
}

pub(super) async fn run(path: Option<PathBuf>, args: InitArgs) -> Result<(), Failure> {
    let env = crate::config::process_env();
    let path = target_file(path, &env);
    if path.exists() && !args.force {
        return Err(usage(anyhow::anyhow!(
            "{} exists already; `hearth check` checks it, `hearth init --force` replaces it",
            path.display()
        )));
    }
    let interactive = std::io::stdin().is_terminal();
    let answers = if interactive {
        ask(&args).await?
    } else {
        from_flags(&args).await?
    };
    let text = render(&answers);
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(&path, text)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    // The search order puts the current directory's file first: one there would hide this one.
    let local = crate::config::search_paths(&env).into_iter().next();
    if let Some(local) = local.filter(|l| l.is_file() && !same_file(l, &path)) {
        println!(
            "note: {} in this directory is found first here; remove it or run hearth elsewhere to use {}",
            local.display(),
            path.display()
        );
    }
    if let Some((channel, _)) = &answers.channel {
        println!(
            "the bot token goes in the environment, never in the file: export {}=…",
            token_variable(channel)
        );
    }
    println!("checking it:");
    super::check::run(Some(path))?;
    println!("next: `hearth doctor`, then `hearth chat`");
    Ok(())
}

/// How long `init` waits for the model server's list of models.
const MODELS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The models the server lists (`GET /models` with the key the variable holds), or why it
/// could not be asked: `init` then says so and takes the model as given.
async fn server_models(provider: &ProviderConfig) -> Result<Vec<String>, String> {
    // A key that is not set (yet) is asked without; the server's refusal says what is wrong.
    let key = provider
        .api_key_env
        .as_deref()
        .and_then(|variable| crate::config::Secret::resolve(variable).ok());
    crate::provider::probe_models(provider, key.as_ref(), MODELS_TIMEOUT)
        .await
        .map(|answer| answer.models)
        .map_err(|err| err.message)
}

/// Up to ten model ids, then how many more.
fn listing(models: &[String]) -> String {
    let shown: Vec<&str> = models.iter().take(10).map(String::as_str).collect();
    match models.len().saturating_sub(shown.len()) {
        0 => shown.join(", "),
        more => format!("{}, and {more} more", shown.join(", ")),
    }
}

/// Says that the server's model list could not be read, and why.
fn unasked_note(provider: &ProviderConfig, why: &str) {
    println!(
        "note: could not ask {} for its models ({why}); the model is written as given, and `hearth doctor` asks again once the server runs",
        provider.base_url
    );
}

/// Whether two paths name the same file (`./hearth.toml` and its absolute path, say).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The provider `hearth chat` would use with no configuration, as the starting point.
fn guessed_provider() -> ProviderConfig {
    let (providers, _) = crate::provider::effective_providers(&[]);
    providers
        .into_iter()
        .next()
        .expect("with nothing configured, one provider is always guessed")
}

async fn from_flags(args: &InitArgs) -> Result<Answers, Failure> {
    let mut provider = guessed_provider();
    if let Some(kind) = &args.kind {
        provider = provider_of_kind(kind)?;
    }
    if let Some(url) = &args.base_url {
        provider.base_url = url.clone();
    }
    if let Some(model) = &args.model {
        provider.model = model.clone();
    }
    if let Some(name) = &args.api_key_env {
        provider.api_key_env = Some(name.clone()).filter(|n| !n.is_empty());
    }
    let channel = channel_answer(args.channel.as_deref().unwrap_or("none"), args.user.clone())?;
    match server_models(&provider).await {
        Ok(models) if models.is_empty() || models.contains(&provider.model) => {}
        // No model asked for: the server's first one rather than a guess it does not have.
        Ok(models) if args.model.is_none() => {
            provider.model = models[0].clone();
            println!(
                "the server offers {}; using `{}` (--model picks another)",
                listing(&models),
                provider.model
            );
        }
        Ok(models) => {
            return Err(usage(anyhow::anyhow!(
                "--model: the server at {} does not list `{}`; it offers {}",
                provider.base_url,
                provider.model,
                listing(&models)
            )));
        }
        Err(why) => unasked_note(&provider, &why),
    }
    Ok(Answers { provider, channel })
}

async fn ask(args: &InitArgs) -> Result<Answers, Failure> {
    let mut stdin = std::io::stdin().lock();
    let mut question = |text: &str, default: &str| -> Result<String, Failure> {
        if default.is_empty() {
            print!("{text}: ");
        } else {
            print!("{text} [{default}]: ");
        }
        std::io::stdout().flush()?;
        let mut line = String::new();
        // End of input: nothing more will come, so stop rather than ask forever.
        if stdin.read_line(&mut line)? == 0 {
            return Err(usage(anyhow::anyhow!(
                "no answer (end of input); nothing was written"
            )));
        }
        let line = line.trim();
        Ok(if line.is_empty() { default } else { line }.to_string())
    };
    // A wrong answer is said with the reason and asked again: every earlier answer stays.
    let again = |failure: Failure| println!("{} — try again.", failure.error);
    let guessed = guessed_provider();
    let mut provider = loop {
        let kind = question(
            "Model API (openai = any OpenAI-compatible server, anthropic)",
            args.kind.as_deref().unwrap_or(kind_name(guessed.kind)),
        )?;
        if kind == kind_name(guessed.kind) {
            break guessed;
        }
        match provider_of_kind(&kind) {
            Ok(provider) => break provider,
            Err(failure) => again(failure),
        }
    };
    provider.base_url = question(
        "Model server URL",
        args.base_url.as_deref().unwrap_or(&provider.base_url),
    )?;
    let key = question(
        "Variable holding the API key (empty for a local server)",
        args.api_key_env
            .as_deref()
            .or(provider.api_key_env.as_deref())
            .unwrap_or(""),
    )?;
    provider.api_key_env = Some(key).filter(|k| !k.is_empty());
    let models = match server_models(&provider).await {
        Ok(models) => {
            println!("The server offers: {}", listing(&models));
            models
        }
        Err(why) => {
            unasked_note(&provider, &why);
            Vec::new()
        }
    };
    let default_model = args
        .model
        .clone()
        .filter(|m| models.is_empty() || models.contains(m))
        .or_else(|| {
            models
                .contains(&provider.model)
                .then(|| provider.model.clone())
        })
        .or_else(|| models.first().cloned())
        .unwrap_or_else(|| provider.model.clone());
    provider.model = loop {
        let model = question("Model", &default_model)?;
        if models.is_empty() || models.contains(&model) {
            break model;
        }
        println!(
            "`{model}` is not one of the server's models ({}) — try again.",
            listing(&models)
        );
    };
    let channel = loop {
        let channel = question(
            "Chat channel (none, telegram, discord)",
            args.channel.as_deref().unwrap_or("none"),
        )?;
        if channel == "none" {
            break None;
        }
        if !CHANNELS.contains(&channel.as_str()) {
            // Refused for the channel, before any user id is looked at.
            if let Err(failure) = channel_answer(&channel, None) {
                again(failure);
            }
            continue;
        }
        let answer = loop {
            let user = question(
                &format!("Your {channel} user id ({})", user_id_hint(&channel)),
                args.user.as_deref().unwrap_or(""),
            )?;
            match channel_answer(&channel, Some(user)) {
                Ok(answer) => break answer,
                Err(failure) => again(failure),
            }
        };
        break answer;
    };
    Ok(Answers { provider, channel })
}

/// Where to find one's user id on `channel`, for the question that asks it.
fn user_id_hint(channel: &str) -> &'static str {
    match channel {
        "telegram" => "a number: message @userinfobot on Telegram to learn yours",
        "discord" => {
            "a number: in Discord turn on Settings → Advanced → Developer Mode, then right-click your name → Copy User ID"
        }
        _ => "as the platform shows it",
    }
}

fn kind_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Openai => "openai",
        ProviderKind::Anthropic => "anthropic",
    }
}

/// The usual provider of a kind: OpenAI's API with its key, or Anthropic's.
fn provider_of_kind(kind: &str) -> Result<ProviderConfig, Failure> {
    let mut provider = guessed_provider();
    match kind {
        "openai" => {
            if provider.kind != ProviderKind::Openai {
                provider.kind = ProviderKind::Openai;
                provider.base_url = "https://api.openai.com/v1".into();
                provider.api_key_env = Some("OPENAI_API_KEY".into());
                provider.model = "gpt-4o-mini".into();
            }
        }
        "anthropic" => {
            provider.kind = ProviderKind::Anthropic;
            provider.base_url = "https://api.anthropic.com".into();
            provider.api_key_env = Some("ANTHROPIC_API_KEY".into());
            provider.model = "claude-sonnet-4-5".into();
        }
        other => {
            return Err(usage(anyhow::anyhow!(
                "unknown model API `{other}`: expected openai (any OpenAI-compatible server) or anthropic"
            )));
        }
    }
    Ok(provider)
}

/// The channel and user, checked: a known channel and a user id of its shape.
fn channel_answer(
    channel: &str,
    user: Option<String>,
) -> Result<Option<(String, String)>, Failure> {
    if channel == "none" {
        return Ok(None);
    }
    if !CHANNELS.contains(&channel) {
        return Err(usage(anyhow::anyhow!(
            "`hearth init` sets up {}; for Matrix and email copy their section from data/hearth.example.toml",
            CHANNELS.join(", ")
        )));
    }
    let Some(user) = user.filter(|u| !u.trim().is_empty()) else {
        return Err(usage(anyhow::anyhow!(
            "--user: your {channel} user id, so that hearth answers you (and strangers get a pairing code)"
        )));
    };
    let identity = format!("{channel}:{}", user.trim());
    let (_, user) = crate::config::parse_identity(&identity)
        .map_err(|message| usage(anyhow::anyhow!("--user: {message}")))?;
    Ok(Some((channel.to_string(), user.to_string())))
}

fn token_variable(channel: &str) -> String {
    format!("HEARTH_{}_TOKEN", channel.to_uppercase())
}

/// A TOML string literal.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

fn render(answers: &Answers) -> String {
    let provider = &answers.provider;
    let mut text = String::from(
        "# Written by `hearth init`. Every key, with its default: data/hearth.example.toml.\n\
         # The data (SQLite database, channel state) lives in $XDG_DATA_HOME/hearth unless\n\
         # [daemon] data_dir says otherwise; `hearth check` shows where.\n\n",
    );
    text.push_str("[[providers]]\nname = \"default\"\n");
    text.push_str(&format!("kind = {}\n", quoted(kind_name(provider.kind))));
    text.push_str(&format!("base_url = {}\n", quoted(&provider.base_url)));
    text.push_str(&format!("model = {}\n", quoted(&provider.model)));
    if let Some(name) = &provider.api_key_env {
        text.push_str(&format!(
            "api_key_env = {}                # the variable holding the key, not the key\n",
            quoted(name)
        ));
    }
    if let Some((channel, user)) = &answers.channel {
        text.push_str(&format!(
            "\n[channels.{channel}]\ntoken_env = {}\nallowed_users = [{}]\n",
            quoted(&token_variable(channel)),
            quoted(user)
        ));
        text.push_str(&format!(
            "\n[daemon]\nowner = {}\n",
            quoted(&format!("{channel}:{user}"))
        ));
    } else {
        // Without a chat channel the owner is you in `hearth chat`: budget warnings and
        // failed-run reports then reach someone instead of nobody.
        text.push_str(&format!(
            "\n[daemon]\nowner = {}                # you, in `hearth chat`\n",
            quoted(&format!("{TERMINAL_CHANNEL}:{}", crate::terminal::LOCAL))
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "telegram")]
    fn what_init_writes_loads_and_names_the_token_variable_not_a_token() {
        let answers = Answers {
            provider: provider_of_kind("anthropic").expect("known"),
            channel: channel_answer("telegram", Some("123456789".into())).expect("valid"),
        };
        let text = render(&answers);
        let env: std::collections::HashMap<String, String> = [
            ("ANTHROPIC_API_KEY", "sk"),
            ("HEARTH_TELEGRAM_TOKEN", "1:t"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let config = crate::config::load_from_str(&text, "hearth.toml", &env).expect("valid");
        assert_eq!(
            config.providers[0].api_key_env.as_deref(),
            Some("ANTHROPIC_API_KEY")
        );
        assert!(config.channels.telegram.is_some());
        assert_eq!(
            config.daemon.owner_identities(),
            [("telegram", "123456789")]
        );
        assert!(
            text.contains("token_env = \"HEARTH_TELEGRAM_TOKEN\""),
            "{text}"
        );
    }

    #[test]
    fn bad_answers_are_refused_with_what_to_give() {
        let err = channel_answer("telegram", Some("me".into())).expect_err("not a number");
        assert!(err.error.to_string().contains("--user"), "{}", err.error);
        let err = channel_answer("telegram", None).expect_err("no user");
        assert!(err.error.to_string().contains("your telegram user id"));
        let err = channel_answer("matrix", Some("@me:x.org".into())).expect_err("not here");
        assert!(err.error.to_string().contains("data/hearth.example.toml"));
        assert!(provider_of_kind("gemini").is_err());
    }
}
