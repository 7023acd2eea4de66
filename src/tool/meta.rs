//! The meta-tools an agent with many tools sees instead of them ([`META_TOOLS`](super::META_TOOLS)):
//! `search_tools`, `get_tool_help`, `use_tool` and `batch_use_tool`. Their argument types are
//! their schemas and their parsers, as for every built-in tool; the runtime
//! (`runtime::tools::Toolbox`, `runtime::calls`) runs them, since they act on the agent's
//! toolbox rather than on the user's data.

use std::sync::{Arc, Mutex, PoisonError};

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::typed::{Batch, NonEmpty, inline_schema, schema};
use crate::provider::ToolSpec;

/// Most calls one `batch_use_tool` makes.
pub const MAX_OPERATIONS: usize = 20;

/// Find tools by keywords (all words must match name, description or tags); query "all" lists
/// every tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchTools {
    /// keywords, or "all"
    pub query: String,
    // One of the agent's categories: the schema's enum is filled in per agent (`specs`).
    pub category: Option<String>,
    /// also show each tool's parameters
    #[serde(default)]
    pub include_params: bool,
}

/// Show a tool's description and parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetToolHelp {
    pub tool_name: String,
}

/// Call a tool found with search_tools.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UseTool {
    pub tool_name: NonEmpty,
    /// the tool's arguments
    #[serde(default)]
    pub arguments: Arguments,
}

/// Call several tools at once; each result is independent.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchUseTool {
    pub operations: Batch<Operation, MAX_OPERATIONS>,
}

// One call of a batch, read on its own (a bad one fails alone). A plain comment: a doc comment
// would describe the items, which the schema has never done.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Operation {
    pub tool_name: NonEmpty,
    #[serde(default)]
    pub arguments: Arguments,
}

/// The inner call's arguments: an object, or JSON text of one (models send both); absent or
/// `null` is `{}`. The tool's own schema checks them when the call is prepared.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Arguments(pub Map<String, Value>);

impl<'de> Deserialize<'de> for Arguments {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = match Value::deserialize(deserializer)? {
            Value::String(text) => serde_json::from_str(&text).map_err(|err| {
                serde::de::Error::custom(format!("is text that is not JSON ({err})"))
            })?,
            value => value,
        };
        match value {
            Value::Null => Ok(Self::default()),
            Value::Object(object) => Ok(Self(object)),
            other => Err(serde::de::Error::custom(format!(
                "must be an object, got: {other}"
            ))),
        }
    }
}

inline_schema!(Arguments, {"type": "object"});

/// The meta-tools as the model sees them; `categories` (each once) are the values `search_tools`
/// offers for `category`. Made once per set of categories and shared: every turn of an agent
/// with many tools sends them, and schemars builds a schema anew on each call (with a
/// thousand turns in flight, their copies were a tenth of the heap).
pub fn specs(categories: &[&str]) -> Arc<[ToolSpec]> {
    /// Agents rarely differ in their categories; a few sets are kept, the oldest dropped first.
    const KEPT: usize = 8;
    /// The categories a set was made for, and the schemas made.
    type Made = (Vec<String>, Arc<[ToolSpec]>);
    static MADE: Mutex<Vec<Made>> = Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, specs)) = made.iter().find(|(kept, _)| kept.iter().eq(categories)) {
        return specs.clone();
    }
    let specs: Arc<[ToolSpec]> = make_specs(categories).into();
    if made.len() >= KEPT {
        made.remove(0);
    }
    made.push((
        categories.iter().map(|c| (*c).to_string()).collect(),
        specs.clone(),
    ));
    specs
}

fn make_specs(categories: &[&str]) -> Vec<ToolSpec> {
    let spec = |name: &str, (description, parameters): (String, Value)| ToolSpec {
        name: name.into(),
        description,
        parameters,
    };
    let mut search = spec("search_tools", schema::<SearchTools>());
    search.parameters["properties"]["category"] =
        serde_json::json!({"type": "string", "enum": categories});
    vec![
        search,
        spec("get_tool_help", schema::<GetToolHelp>()),
        spec("use_tool", schema::<UseTool>()),
        spec("batch_use_tool", schema::<BatchUseTool>()),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tool::typed::parse;

    /// The meta-tools mean what their hand-written schemas meant.
    #[test]
    fn the_schemas_are_the_ones_the_models_were_offered() {
        let specs = specs(&["notes", "tasks"]);
        let by_name = |name: &str| {
            let spec = specs.iter().find(|s| s.name == name).expect(name);
            (spec.description.as_str(), spec.parameters.clone())
        };
        assert_eq!(
            by_name("search_tools"),
            (
                "Find tools by keywords (all words must match name, description or tags); query \"all\" lists every tool.",
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "keywords, or \"all\""},
                        "category": {"type": "string", "enum": ["notes", "tasks"]},
                        "include_params": {"type": "boolean", "description": "also show each tool's parameters"}
                    },
                    "required": ["query"],
                    "additionalProperties": false
                })
            )
        );
        assert_eq!(
            by_name("get_tool_help"),
            (
                "Show a tool's description and parameters.",
                json!({
                    "type": "object",
                    "properties": {"tool_name": {"type": "string"}},
                    "required": ["tool_name"],
                    "additionalProperties": false
                })
            )
        );
        assert_eq!(
            by_name("use_tool"),
            (
                "Call a tool found with search_tools.",
                json!({
                    "type": "object",
                    "properties": {
                        "tool_name": {"type": "string"},
                        "arguments": {"type": "object", "description": "the tool's arguments"}
                    },
                    "required": ["tool_name"],
                    "additionalProperties": false
                })
            )
        );
        assert_eq!(
            by_name("batch_use_tool"),
            (
                "Call several tools at once; each result is independent.",
                json!({
                    "type": "object",
                    "properties": {
                        "operations": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": 20,
                            "items": {
                                "type": "object",
                                "properties": {"tool_name": {"type": "string"}, "arguments": {"type": "object"}},
                                "required": ["tool_name"]
                            }
                        }
                    },
                    "required": ["operations"],
                    "additionalProperties": false
                })
            )
        );
    }

    #[test]
    fn inner_arguments_may_be_an_object_or_json_text_and_bad_ones_are_named() {
        let call: UseTool =
            parse(json!({"tool_name": "x", "arguments": {"a": 1}})).expect("object");
        assert_eq!(Value::Object(call.arguments.0), json!({"a": 1}));
        let call: UseTool =
            parse(json!({"tool_name": "x", "arguments": "{\"a\": 2}"})).expect("text");
        assert_eq!(Value::Object(call.arguments.0), json!({"a": 2}));
        let call: UseTool = parse(json!({"tool_name": "x"})).expect("absent");
        assert!(call.arguments.0.is_empty());
        for (bad, expected) in [
            (json!({"arguments": {}}), "missing field `tool_name`"),
            (
                json!({"tool_name": " "}),
                "`tool_name`: must be a non-empty string",
            ),
            (
                json!({"tool_name": "x", "arguments": [1]}),
                "`arguments`: must be an object",
            ),
            (
                json!({"tool_name": "x", "arguments": "{"}),
                "`arguments`: is text that is not JSON",
            ),
        ] {
            let err = parse::<UseTool>(bad).expect_err(expected);
            assert!(err.to_string().contains(expected), "{err}");
        }
        let batch: BatchUseTool =
            parse(json!({"operations": [{"tool_name": "a"}, {"arguments": 3}]}))
                .expect("items are read on their own");
        assert!(batch.operations.0[0].0.is_ok());
        assert!(batch.operations.0[1].0.is_err());
        let err = parse::<BatchUseTool>(json!({"operations": []})).expect_err("empty");
        assert!(err.to_string().contains("must hold 1 to 20 items"), "{err}");
    }

    /// Each set of categories is made once and shared; another set gets its own enum, and an
    /// earlier set is found again after others were made.
    #[test]
    fn the_schemas_are_made_once_per_set_of_categories() {
        let first = specs(&["notes", "tasks"]);
        assert!(Arc::ptr_eq(&first, &specs(&["notes", "tasks"])));
        let other = specs(&["money"]);
        assert!(!Arc::ptr_eq(&first, &other));
        let enum_of = |specs: &[ToolSpec]| {
            specs
                .iter()
                .find(|s| s.name == "search_tools")
                .expect("search_tools")
                .parameters["properties"]["category"]["enum"]
                .clone()
        };
        assert_eq!(enum_of(&other), json!(["money"]));
        assert_eq!(enum_of(&first), json!(["notes", "tasks"]));
        assert!(Arc::ptr_eq(&first, &specs(&["notes", "tasks"])));
        // A prefix is another set.
        assert_eq!(enum_of(&specs(&["notes"])), json!(["notes"]));
        // More sets than are kept: all are still right.
        for i in 0..20 {
            let name = format!("group{i}");
            assert_eq!(enum_of(&specs(&[name.as_str()])), json!([name]));
        }
        assert_eq!(
            enum_of(&specs(&["notes", "tasks"])),
            json!(["notes", "tasks"])
        );
    }
}
