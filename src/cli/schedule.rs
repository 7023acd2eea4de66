//! `hearth schedule list|add|remove|run|enable|disable NAME`. The CLI only changes the table; a running daemon
//! picks the change up within a second (it never runs agents itself).

use anyhow::Context;
use clap::Subcommand;

use super::Failure;
use crate::agent::AgentSet;
use crate::config::Config;
use crate::scheduler::timing::CronExpr;
use crate::scheduler::{RunStatus, Schedule, ScheduleSource, parse_target, sync_config};
use crate::store::Store;
use crate::time::parse_timezone;

#[derive(Debug, Subcommand)]
pub enum ScheduleAction {
    /// Schedules with their next fire time in local time and the last run's outcome (default).
    List,
    /// Add a schedule (kept in the database, like one made in chat).
    Add {
        name: String,
        /// Cron with a seconds field first, e.g. "0 30 7 * * Mon-Fri".
        #[arg(long)]
        cron: String,
        /// What the agent is asked each time.
        #[arg(long)]
        prompt: String,
        /// Where the reply goes: channel:chat_id on a configured channel, e.g.
        /// telegram:123456789; on Discord and Matrix a user id (discord:<user id>,
        /// matrix:@me:example.org) means a direct message to that user.
        #[arg(long)]
        target: String,
        /// The agent that answers (default: router.default_agent).
        #[arg(long)]
        agent: Option<String>,
        /// IANA timezone the cron is read in (default: daemon.timezone).
        #[arg(long)]
        timezone: Option<String>,
    },
    /// Remove a schedule made in chat or with `add` (config schedules live in the config file).
    Remove { name: String },
    /// Make a schedule due now; a running hearth fires it within a second.
    Run { name: String },
    /// Stop a schedule from firing (kept, with its history, across restarts) until `enable`.
    Disable { name: String },
    /// Let a disabled schedule fire again, from its next time on (no catching up).
    Enable { name: String },
}

fn usage(message: String) -> Failure {
    Failure {
        code: 2,
        error: anyhow::anyhow!(message),
    }
}

/// Runs one `hearth schedule` action against the configured database.
pub async fn run(config: &Config, action: ScheduleAction) -> Result<(), Failure> {
    // Validate before touching the database, so bad input never creates one.
    if let ScheduleAction::Add {
        cron,
        timezone,
        target,
        ..
    } = &action
    {
        CronExpr::parse(cron).map_err(usage)?;
        timezone
            .as_deref()
            .map_or(Ok(config.daemon.timezone), parse_timezone)
            .map_err(usage)?;
        crate::config::check_schedule_target(target, &config.channels).map_err(usage)?;
    }
    // Before the first start the config's schedules are still worth seeing: listed from the
    // file, without creating the database.
    if matches!(action, ScheduleAction::List)
        && let Some(path) = crate::store::missing_database(&config.daemon.database_url())
    {
        return list_unstarted(config, &path);
    }
    // Adding records an intention; removing and running read what the daemon keeps.
    if !matches!(action, ScheduleAction::Add { .. }) {
        super::existing_database(config)?;
    }
    let store = Store::open(&config.daemon.database_url())
        .await
        .context("cannot open the database")?;
    let now = chrono::Utc::now().timestamp_millis();
    // The config's schedules are in the table once the daemon ran; sync here too so they can be
    // listed and run before that.
    sync_config(&store, &config.schedules, config.daemon.timezone, now).await?;
    let result = match action {
        ScheduleAction::List => list(&store).await,
        ScheduleAction::Add {
            name,
            cron,
            prompt,
            target,
            agent,
            timezone,
        } => {
            let agent = agent.unwrap_or_else(|| config.router.default_agent.clone());
            let (agents, _) =
                AgentSet::load(&config.router.agents_file).map_err(|err| usage(err.to_string()))?;
            if agents.get(&agent).is_none() {
                return Err(usage(format!(
                    "there is no agent `{agent}`; see `hearth agents`"
                )));
            }
            let timezone = timezone.unwrap_or_else(|| config.daemon.timezone.name().to_string());
            add(&store, name, cron, prompt, &target, agent, timezone, now).await
        }
        ScheduleAction::Remove { name } => remove(&store, &name).await,
        ScheduleAction::Run { name } => run_now(&store, &name, now).await,
        ScheduleAction::Disable { name } => disable(&store, &name, now).await,
        ScheduleAction::Enable { name } => enable(&store, &name, now).await,
    };
    store.close().await;
    result
}

async fn list(store: &Store) -> Result<(), Failure> {
    let schedules = store.schedules().await?;
    if schedules.is_empty() {
        println!("no schedules; add one with `hearth schedule add` or [[schedules]] in the config");
        return Ok(());
    }
    for schedule in schedules {
        let last = match store.schedule_runs(schedule.id, 1).await?.first() {
            Some(run) => {
                let at = schedule.local_time(run.scheduled_for);
                match &run.error {
                    // A skip over budget, a failure: the note says why.
                    Some(note) if run.status != RunStatus::Done => {
                        format!("last {} ({at}): {note}", run.status.as_str())
                    }
                    _ => format!("last {} ({at})", run.status.as_str()),
                }
            }
            None => "never run".into(),
        };
        println!("{}  {last}", line(&schedule));
    }
    Ok(())
}

/// A schedule as `list` shows it, up to its last run: name, source, timing (with the cron in
/// words where it reads as such), timezone, target, agent and next fire.
fn line(schedule: &Schedule) -> String {
    let timing = match (&schedule.cron, schedule.one_shot_at) {
        (Some(cron), _) => match crate::scheduler::timing::describe_cron(cron) {
            Some(words) => format!("{cron} ({words})"),
            None => cron.clone(),
        },
        (None, Some(at)) => format!("once at {}", schedule.local_time(at)),
        (None, None) => "never".into(),
    };
    let next = match (schedule.enabled, schedule.next_fire_at) {
        _ if schedule.paused => "disabled (hearth schedule enable)".to_string(),
        (false, _) => "inactive".to_string(),
        (true, Some(at)) => format!("next {}", schedule.local_time(at)),
        (true, None) => "no next fire".to_string(),
    };
    format!(
        "{}  [{}]  {}  {}  -> {}  agent {}  {next}",
        schedule.name,
        schedule.source,
        timing,
        schedule.timezone,
        schedule.target(),
        schedule.agent
    )
}

/// `list` before hearth first started: the config's schedules with their next fire times, and
/// why none has run (there is no database yet, and none is created here).
fn list_unstarted(config: &Config, database: &std::path::Path) -> Result<(), Failure> {
    let now = chrono::Utc::now().timestamp_millis();
    if config.schedules.is_empty() {
        println!("no schedules; add one with `hearth schedule add` or [[schedules]] in the config");
    }
    for entry in &config.schedules {
        let timezone = entry
            .timezone
            .unwrap_or(config.daemon.timezone)
            .name()
            .to_string();
        // The loader checked the target and the cron; a failure here is still said, not hidden.
        let target = parse_target(&entry.target).map_err(usage)?;
        let mut schedule = Schedule {
            cron: Some(entry.cron.trim().to_string()),
            source: ScheduleSource::Config,
            ..Schedule::new(
                entry.name.clone(),
                timezone,
                entry.agent.clone(),
                entry.prompt.clone(),
                target,
                now,
            )
        };
        schedule.next_fire_at = schedule.next_fire_after(now).map_err(usage)?;
        println!("{}  never run", line(&schedule));
    }
    println!(
        "nothing has run yet: there is no database at {} (hearth creates it on its first start, `hearth run` or `hearth chat`)",
        database.display()
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn add(
    store: &Store,
    name: String,
    cron: String,
    prompt: String,
    target: &str,
    agent: String,
    timezone: String,
    now: i64,
) -> Result<(), Failure> {
    let name = name.trim().to_string();
    if name.is_empty() || prompt.trim().is_empty() {
        return Err(usage("the name and --prompt must not be empty".into()));
    }
    if store.schedule_by_name(&name).await?.is_some() {
        return Err(usage(format!("a schedule named `{name}` exists already")));
    }
    let target = parse_target(target).map_err(usage)?;
    let mut schedule = Schedule {
        cron: Some(cron.trim().to_string()),
        ..Schedule::new(name, timezone, agent, prompt, target, now)
    };
    schedule.next_fire_at = schedule.next_fire_after(now).map_err(usage)?;
    store.insert_schedule(&schedule, now).await?;
    let next = schedule
        .next_fire_at
        .map_or("never".to_string(), |at| schedule.local_time(at));
    println!("added `{}`; next fire {next}", schedule.name);
    Ok(())
}

async fn find(store: &Store, name: &str) -> Result<Schedule, Failure> {
    store.schedule_by_name(name).await?.ok_or_else(|| {
        usage(format!(
            "no schedule named `{name}`; see `hearth schedule list`"
        ))
    })
}

async fn remove(store: &Store, name: &str) -> Result<(), Failure> {
    let schedule = find(store, name).await?;
    if schedule.source == ScheduleSource::Config {
        return Err(usage(format!(
            "`{name}` comes from the config file; remove its [[schedules]] entry there"
        )));
    }
    store.delete_schedule(schedule.id).await?;
    println!("removed `{name}`");
    Ok(())
}

async fn run_now(store: &Store, name: &str, now: i64) -> Result<(), Failure> {
    let schedule = find(store, name).await?;
    if schedule.paused {
        return Err(usage(format!(
            "`{name}` is disabled; `hearth schedule enable {name}` first"
        )));
    }
    if !schedule.enabled {
        return Err(usage(format!(
            "`{name}` is inactive (a reminder that fired, or a config schedule no longer in the file)"
        )));
    }
    store.make_schedule_due(schedule.id, now).await?;
    let last = store.schedule_runs(schedule.id, 1).await?;
    let previous = last
        .first()
        .filter(|run| run.status != RunStatus::Missed)
        .map_or(String::new(), |run| {
            format!(" (previous run: {})", run.status.as_str())
        });
    println!("`{name}` is due now; a running hearth fires it within a second{previous}");
    Ok(())
}

async fn disable(store: &Store, name: &str, now: i64) -> Result<(), Failure> {
    let schedule = find(store, name).await?;
    if schedule.paused {
        println!("`{name}` is disabled already");
        return Ok(());
    }
    store.pause_schedule(schedule.id, now).await?;
    println!("disabled `{name}`: it will not fire until `hearth schedule enable {name}`");
    Ok(())
}

async fn enable(store: &Store, name: &str, now: i64) -> Result<(), Failure> {
    let schedule = find(store, name).await?;
    if !schedule.paused {
        println!("`{name}` is enabled already");
        return Ok(());
    }
    let next_fire_at = schedule.next_fire_after(now).map_err(usage)?;
    store
        .resume_schedule(schedule.id, next_fire_at, now)
        .await?;
    let next = next_fire_at.map_or("never".to_string(), |at| schedule.local_time(at));
    println!("enabled `{name}`; next fire {next}");
    Ok(())
}
