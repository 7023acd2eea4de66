//! The resources: the user's tasks, notes, memories and today's calendar, each read through
//! the list tool a model would call, as the caller's user and with their permission, so a
//! resource shows exactly what that tool shows.

use rmcp::model::Resource;
use serde_json::{Value, json};

use super::{Caller, McpServer, ServeError};
use crate::tool::{Permission, ToolError};

/// One resource: its URI, what it is, and the tool call that reads it.
pub(super) struct Served {
    pub uri: &'static str,
    name: &'static str,
    description: &'static str,
    tool: &'static str,
    arguments: fn() -> Value,
}

/// Every resource, in the order they are listed.
const RESOURCES: &[Served] = &[
    Served {
        uri: "hearth://tasks",
        name: "tasks",
        description: "The user's open tasks, soonest due first (list_tasks, up to 50)",
        tool: "list_tasks",
        arguments: || json!({"limit": 50}),
    },
    Served {
        uri: "hearth://notes",
        name: "notes",
        description: "The user's notes, newest first (list_notes, up to 50)",
        tool: "list_notes",
        arguments: || json!({"limit": 50}),
    },
    Served {
        uri: "hearth://memories",
        name: "memories",
        description: "What hearth remembers about the user (list_memories, up to 50)",
        tool: "list_memories",
        arguments: || json!({"limit": 50}),
    },
    Served {
        uri: "hearth://calendar/today",
        name: "calendar-today",
        description: "Today's calendar events, in the user's timezone (list_calendar_events)",
        tool: "list_calendar_events",
        arguments: || json!({"range": "today", "limit": 100}),
    },
];

pub(super) fn listed() -> Vec<Resource> {
    RESOURCES
        .iter()
        .map(|r| {
            Resource::new(r.uri, r.name)
                .with_description(r.description)
                .with_mime_type("text/plain")
        })
        .collect()
}

pub(super) fn uris() -> Vec<&'static str> {
    RESOURCES.iter().map(|r| r.uri).collect()
}

pub(super) fn find(uri: &str) -> Option<&'static Served> {
    RESOURCES.iter().find(|r| r.uri == uri)
}

/// The resource's text, as its tool answers it for `caller`'s user.
pub(super) async fn read(
    server: &McpServer,
    caller: &Caller,
    resource: &Served,
) -> Result<String, ServeError> {
    let Some(tool) = server.rt.tools.get(resource.tool) else {
        return Err(ServeError::Caller(format!(
            "{} cannot be read: this hearth has no `{}` tool",
            resource.uri, resource.tool
        )));
    };
    // The agent whose autonomy cap applies does not matter for a read; the first one the
    // caller may use stands for them (its id is only recorded).
    let Some(agent) = server.agents(caller).into_iter().next() else {
        return Err(ServeError::Caller(
            "this client may use no agent, so it may read nothing".into(),
        ));
    };
    let policy = server.policy(caller, &agent).await?;
    if policy.permission < Permission::Read {
        return Err(ServeError::Caller(format!(
            "the user may not read {} (their permission is {:?})",
            resource.uri, policy.permission
        )));
    }
    let ctx = server.context(caller, &agent);
    match tool.call(&ctx, (resource.arguments)()).await {
        Ok(text) => Ok(text),
        Err(ToolError::InvalidArguments(message) | ToolError::Failed(message)) => Err(
            ServeError::Caller(format!("reading {} failed: {message}", resource.uri)),
        ),
    }
}
