//! The safety net for typed tools: every built-in tool as the model saw it before the tools
//! became types (name, description, group, risk, tags, limit and the whole parameter schema),
//! kept in `schemas.snapshot.json`, and a test that the tools of today mean the same. Each
//! difference is listed in [`INTENDED`] with its reason; anything else fails the test. A new
//! tool is added to the snapshot with `HEARTH_WRITE_SNAPSHOT=1 cargo test -p hearth --lib
//! tools_mean_what_they_meant`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{ToolInfo, ToolRegistry};

/// Differences from the snapshot that are meant: tool, JSON pointer into its entry, why.
const INTENDED: &[(&str, &str, &str)] = &[
    (
        "parse_csv",
        "/parameters/properties/limit/maximum",
        "a typed list tool's schema states its cap (1000, which the description already gave); \
         a larger limit is refused by the schema instead of cut to the cap",
    ),
    (
        "read_file",
        "/parameters/properties/limit/maximum",
        "the cap of the typed list tools (10000, as the description says) is in the schema",
    ),
    (
        "list_directory",
        "/parameters/properties/limit/maximum",
        "the cap of the typed list tools (1000, as the description says) is in the schema",
    ),
    (
        "search_files",
        "/parameters/properties/limit/maximum",
        "the cap of the typed list tools (200, as the description says) is in the schema",
    ),
    (
        "update_calendar_event",
        "/parameters/properties/instance_start",
        "one instance of a recurring outside event is changed by naming its start (a \
         RECURRENCE-ID override); without it a change applies to the whole series",
    ),
];

/// A tool's entry as the snapshot keeps it; `required` lists are sorted (they are sets).
fn entry(info: &ToolInfo) -> Value {
    let mut parameters = info.parameters.clone();
    sort_required(&mut parameters);
    json!({
        "description": info.description,
        "group": info.group,
        "risk": format!("{:?}", info.risk),
        "permission": format!("{:?}", info.permission),
        "tags": info.tags,
        "limit": info.limit.as_ref().map(|l| json!([l.param, l.default, l.max])),
        "timeout_ms": info.timeout.map(|t| t.as_millis() as u64),
        "parameters": parameters,
    })
}

fn sort_required(value: &mut Value) {
    match value {
        Value::Object(object) => {
            for (key, sub) in object.iter_mut() {
                if key == "required" {
                    if let Value::Array(names) = sub {
                        names.sort_by_key(Value::to_string);
                    }
                } else {
                    sort_required(sub);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(sort_required),
        _ => {}
    }
}

/// Every place where `after` differs from `before`, as JSON pointers with both values.
fn differences(path: &str, before: &Value, after: &Value, out: &mut Vec<(String, String)>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for key in keys {
                let sub = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (b.get(key), a.get(key)) {
                    (Some(b), Some(a)) => differences(&sub, b, a, out),
                    (Some(b), None) => out.push((sub, format!("{b} → (absent)"))),
                    (None, Some(a)) => out.push((sub, format!("(absent) → {a}"))),
                    (None, None) => {}
                }
            }
        }
        _ if before != after => out.push((path.to_string(), format!("{before} → {after}"))),
        _ => {}
    }
}

fn current() -> BTreeMap<String, Value> {
    ToolRegistry::with_builtin()
        .iter()
        .map(|tool| (tool.info().name.clone(), entry(tool.info())))
        .collect()
}

#[test]
fn tools_mean_what_they_meant() {
    let snapshot: BTreeMap<String, Value> =
        serde_json::from_str(include_str!("schemas.snapshot.json")).expect("snapshot is JSON");
    let current = current();
    if std::env::var_os("HEARTH_WRITE_SNAPSHOT").is_some() {
        // A new tool enters the snapshot as it is today; a changed one still needs INTENDED.
        let mut written = snapshot.clone();
        for (name, entry) in &current {
            written.entry(name.clone()).or_insert_with(|| entry.clone());
        }
        let text = serde_json::to_string_pretty(&written).expect("snapshot is JSON") + "\n";
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/tool/schemas.snapshot.json"
        );
        std::fs::write(path, text).expect("write the snapshot");
        return;
    }
    let mut unexpected = Vec::new();
    let mut seen = Vec::new();
    let names: std::collections::BTreeSet<&String> =
        snapshot.keys().chain(current.keys()).collect();
    for name in names {
        let (Some(before), Some(after)) = (snapshot.get(name), current.get(name)) else {
            // A new tool's entry, printed to be added to the snapshot.
            let entry = current
                .get(name)
                .map_or_else(String::new, |e| format!(": add {e}"));
            unexpected.push(format!(
                "{name}: only in one of snapshot and registry{entry}"
            ));
            continue;
        };
        let mut found = Vec::new();
        differences("", before, after, &mut found);
        for (path, change) in found {
            match INTENDED
                .iter()
                .position(|(tool, at, _)| tool == name && *at == path)
            {
                Some(index) => seen.push(index),
                None => unexpected.push(format!("{name} {path}: {change}")),
            }
        }
    }
    let stale: Vec<_> = (0..INTENDED.len())
        .filter(|i| !seen.contains(i))
        .map(|i| format!("{} {}", INTENDED[i].0, INTENDED[i].1))
        .collect();
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "tools changed in ways not listed in INTENDED:\n{}\nINTENDED entries that no longer \
         differ:\n{}",
        unexpected.join("\n"),
        stale.join("\n")
    );
}

/// Tools whose schema takes an explicit `null` on purpose, and why.
const NULL_MEANS_SOMETHING: &[(&str, &str)] = &[(
    "update_goal",
    "null clears target_date and parent_goal_id, which leaving them out keeps",
)];

/// Every tool's schema is one a strict validator accepts: valid JSON Schema, no null unions
/// (but those of [`NULL_MEANS_SOMETHING`]), no repeated enum values.
#[test]
fn schemas_are_strict() {
    fn check(name: &str, schema: &Value) {
        if let Value::Object(object) = schema {
            if let Some(Value::Array(types)) = object.get("type") {
                let allowed = NULL_MEANS_SOMETHING.iter().any(|(tool, _)| *tool == name);
                assert!(
                    allowed || !types.contains(&json!("null")),
                    "{name}: a null union"
                );
            }
            if let Some(Value::Array(values)) = object.get("enum") {
                let unique: std::collections::BTreeSet<String> =
                    values.iter().map(Value::to_string).collect();
                assert_eq!(unique.len(), values.len(), "{name}: repeated enum values");
                assert!(!values.contains(&Value::Null), "{name}: null in an enum");
            }
            object.values().for_each(|v| check(name, v));
        } else if let Value::Array(items) = schema {
            items.iter().for_each(|v| check(name, v));
        }
    }
    for tool in ToolRegistry::with_builtin().iter() {
        let info = tool.info();
        assert!(
            jsonschema::meta::is_valid(&info.parameters),
            "{}",
            info.name
        );
        assert!(
            !info.description.is_empty(),
            "{} has no description",
            info.name
        );
        check(&info.name, &info.parameters);
    }
}
