//! `hearth check`: the configuration and the agents file, every problem named.

use std::path::PathBuf;

use crate::agent::AgentSource;
use crate::config;

use super::{Failure, load_agents, load_config, usage};

pub(super) fn run(path: Option<PathBuf>) -> Result<(), Failure> {
    let loaded = load_config(path)?;
    let config = &loaded.config;
    let (agents, source) = load_agents(config)?;
    let provider_names: Vec<String> = config.providers.iter().map(|p| p.name.clone()).collect();
    let mut problems = agents.validate_against(&config.router.default_agent, &provider_names);
    let registry = crate::tool::ToolRegistry::with_builtin();
    let mut groups: Vec<&str> = crate::tool::KNOWN_GROUPS.to_vec();
    let mut tools: Vec<String> = registry.iter().map(|t| t.info().name.clone()).collect();
    // MCP servers are groups too; their tools are only known once connected, so any
    // `<server>__…` name of a configured server passes here.
    for server in &config.mcp_servers {
        groups.push(&server.name);
        let prefix = format!("{}__", server.name);
        for agent in agents.iter() {
            tools.extend(
                agent
                    .tools
                    .iter()
                    .filter(|t| t.starts_with(&prefix))
                    .cloned(),
            );
        }
    }
    let tools: Vec<&str> = tools.iter().map(String::as_str).collect();
    problems.extend(agents.validate_tools(&groups, &tools));
    for schedule in &config.schedules {
        if agents.get(&schedule.agent).is_none() {
            problems.push(format!(
                "schedules ({}): agent: there is no agent `{}`",
                schedule.name, schedule.agent
            ));
        }
    }
    let file = loaded.path.as_ref().map_or_else(
        || format!("(defaults: no file at {})", loaded.searched_list()),
        |p| p.display().to_string(),
    );
    if !problems.is_empty() {
        let lines: Vec<String> = problems.iter().map(|p| format!("{file}: {p}")).collect();
        return Err(usage(anyhow::anyhow!("{}", lines.join("\n"))));
    }
    let agents_from = match source {
        AgentSource::Shipped => "the agents shipped with hearth".to_string(),
        AgentSource::File(path) => path.display().to_string(),
    };
    let providers = if config.providers.is_empty() {
        // What `hearth chat` and `hearth run` will use: the provider found in the environment.
        let (found, _) = crate::provider::effective_providers(&config.providers);
        match found.first() {
            Some(provider) => format!(
                "no [[providers]] configured: hearth uses {}",
                crate::provider::describe_discovered(provider)
            ),
            None => "no [[providers]] configured".to_string(),
        }
    } else {
        let names: Vec<&str> = config.providers.iter().map(|p| p.name.as_str()).collect();
        format!(
            "{} provider(s): {}",
            config.providers.len(),
            names.join(", ")
        )
    };
    let daemon = &config.daemon;
    println!(
        "configuration OK: {file}\n  data dir: {} ({})\n  timezone: {} ({})\n  {providers}\n  {} schedule(s), {} agent(s) from {agents_from}",
        daemon.data_dir.display(),
        loaded.sources.data_dir,
        daemon.timezone,
        loaded.sources.timezone,
        config.schedules.len(),
        agents.len()
    );
    if loaded.path.is_some() && !loaded.searched.is_empty() {
        println!("  looked for, in order: {}", loaded.searched_list());
    }
    for warning in config::warnings(config)
        .into_iter()
        .chain(super::old_default_database(&loaded))
    {
        println!("warning: {warning}");
    }
    Ok(())
}
