//! Agent versions: what identifies one definition of an agent (a hash of the definition) and
//! how two definitions differ, in words a person reads in `hearth agents history ID`.

use sha2::Digest;

use super::AgentDef;

/// What the first version of an agent says under "changes".
pub const FIRST_VERSION: &str = "first version";

/// The definition as stored with its version: the agent as JSON, every field (defaults
/// included), in declaration order, so the same definition always gives the same text.
pub fn definition_json(agent: &AgentDef) -> Result<String, serde_json::Error> {
    serde_json::to_string(agent)
}

/// SHA-256 of [`definition_json`], in hex: equal hashes mean the agent did not change.
pub fn definition_hash(definition_json: &str) -> String {
    sha2::Sha256::digest(definition_json.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What changed from `old` to `new`, one clause per field, e.g. `keywords added: receipt;
/// prompt changed; model: default → gpt-4o`. Lists are compared as sets (order aside); long
/// texts (the prompt, the description) are only said to have changed.
pub fn describe_changes(old: &AgentDef, new: &AgentDef) -> String {
    let mut changes = Vec::new();
    let mut text = |field: &str, old: &str, new: &str| {
        if old != new {
            changes.push(format!("{field} changed"));
        }
    };
    text("name", &old.name, &new.name);
    text("emoji", &old.emoji, &new.emoji);
    text("description", &old.description, &new.description);
    text("prompt", &old.system_prompt, &new.system_prompt);
    list(
        &mut changes,
        "keywords",
        &old.triggers.keywords,
        &new.triggers.keywords,
    );
    list(&mut changes, "tools", &old.tools, &new.tools);
    list(
        &mut changes,
        "tool groups",
        &old.tool_groups,
        &new.tool_groups,
    );
    let mut value = |field: &str, old: String, new: String| {
        if old != new {
            changes.push(format!("{field}: {old} → {new}"));
        }
    };
    value("provider", old.provider.clone(), new.provider.clone());
    value("model", old.model.clone(), new.model.clone());
    value(
        "max_turns",
        old.max_turns.to_string(),
        new.max_turns.to_string(),
    );
    value(
        "max_tool_calls",
        old.max_tool_calls.to_string(),
        new.max_tool_calls.to_string(),
    );
    value(
        "temperature",
        optional(old.temperature),
        optional(new.temperature),
    );
    value(
        "tool_mode",
        format!("{:?}", old.tool_mode).to_lowercase(),
        format!("{:?}", new.tool_mode).to_lowercase(),
    );
    value(
        "mode",
        format!("{:?}", old.mode).to_lowercase(),
        format!("{:?}", new.mode).to_lowercase(),
    );
    value(
        "autonomy",
        optional(old.autonomy.map(|a| format!("{a:?}").to_lowercase())),
        optional(new.autonomy.map(|a| format!("{a:?}").to_lowercase())),
    );
    if changes.is_empty() {
        // Only the order of a list, or the case of a keyword: still a different definition.
        "definition changed (order or spelling only)".to_string()
    } else {
        changes.join("; ")
    }
}

/// `keywords added: a, b` and `keywords removed: c` for what differs between two lists.
fn list(changes: &mut Vec<String>, field: &str, old: &[String], new: &[String]) {
    let added: Vec<&str> = new
        .iter()
        .filter(|n| !old.contains(n))
        .map(String::as_str)
        .collect();
    let removed: Vec<&str> = old
        .iter()
        .filter(|o| !new.contains(o))
        .map(String::as_str)
        .collect();
    if !added.is_empty() {
        changes.push(format!("{field} added: {}", added.join(", ")));
    }
    if !removed.is_empty() {
        changes.push(format!("{field} removed: {}", removed.join(", ")));
    }
}

fn optional<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "unset".to_string(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentSet;

    fn agent(extra: &str) -> AgentDef {
        let text = format!(
            "[[agent]]\nid = \"finance\"\nname = \"Finance\"\nsystem_prompt = \"Count.\"\n{extra}"
        );
        AgentSet::parse(&text, "test")
            .expect("valid")
            .get("finance")
            .expect("agent")
            .clone()
    }

    #[test]
    fn the_same_definition_has_the_same_hash_and_any_change_another() {
        let one = definition_json(&agent("")).expect("json");
        let again = definition_json(&agent("")).expect("json");
        assert_eq!(definition_hash(&one), definition_hash(&again));
        assert_eq!(definition_hash(&one).len(), 64);
        let other = definition_json(&agent("model = \"big\"")).expect("json");
        assert_ne!(definition_hash(&one), definition_hash(&other));
    }

    #[test]
    fn changes_name_each_field_that_differs() {
        let old =
            agent("tools = [\"add_expense\"]\n[agent.triggers]\nkeywords = [\"spent\", \"paid\"]");
        let new = agent(
            "model = \"big\"\ntemperature = 0.5\ntools = [\"add_expense\", \"list_expenses\"]\n\
             [agent.triggers]\nkeywords = [\"spent\", \"receipt\"]",
        );
        assert_eq!(
            describe_changes(&old, &new),
            "keywords added: receipt; keywords removed: paid; tools added: list_expenses; \
             model: default → big; temperature: unset → 0.5"
        );
        let mut reprompted = old.clone();
        reprompted.system_prompt = "Count carefully.".into();
        assert_eq!(describe_changes(&old, &reprompted), "prompt changed");
        let mut reordered = old.clone();
        reordered.triggers.keywords.reverse();
        assert_eq!(
            describe_changes(&old, &reordered),
            "definition changed (order or spelling only)"
        );
    }
}
