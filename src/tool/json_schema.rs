//! Checks a tool call's arguments against the tool's JSON Schema before the tool runs.
//!
//! Built-in tools parse their arguments with serde as well; the schema check is what every
//! tool gets, MCP tools included (their schemas come from the server), and its messages name
//! where an argument is wrong so the model can fix the call. It is the part of JSON Schema
//! that tool schemas use, written out here rather than a full validator (the `jsonschema`
//! crate was 1.1 MB of the binary for the same checks):
//!
//! - checked: `type`, `enum`, `const`, `properties`, `required`, `additionalProperties`,
//!   `patternProperties`, `minProperties`/`maxProperties`, `items` (and draft 4's tuple form
//!   with `additionalItems`), `prefixItems`, `minItems`/`maxItems`, `uniqueItems`,
//!   `minLength`/`maxLength`, `pattern`, `minimum`/`maximum`, `exclusiveMinimum`/
//!   `exclusiveMaximum` (draft 4's booleans too), `multipleOf`, `anyOf`, `oneOf`, `allOf`,
//!   `not`, and `$ref` to a place in the same schema (`#/$defs/…`, `#/definitions/…`, `#`);
//! - passed over, as annotations or checks the MCP server makes itself: `format`, `title`,
//!   `description`, `default`, `examples`, `if`/`then`/`else`, `contains`, `dependent*`,
//!   `propertyNames` and anything else.
//!
//! A schema is checked once, when its tool is registered: a keyword with a value of the wrong
//! kind (`"type": "nonsense"`, a pattern that is not a regex, a `$ref` elsewhere) is an error
//! then, not at a call.

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Map, Value};

/// How deep schemas may nest, `$ref`s followed included: a schema that refers to itself
/// without descending into the arguments (`{"$ref": "#"}`) stops here instead of overflowing
/// the stack.
const MAX_DEPTH: usize = 64;

/// The longest rendering of an argument value in a message.
const MAX_SHOWN: usize = 80;

const TYPES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "string", "integer",
];

/// What checking a tool's parameter schema leaves to keep: its patterns, compiled. The schema
/// itself stays with the tool (`ToolInfo::parameters`) and is passed to [`Self::errors`]: a
/// copy here held every tool's schema twice (about 260 KB of an idle daemon's heap).
#[derive(Debug)]
pub struct ArgumentSchema {
    patterns: HashMap<String, Regex>,
}

impl ArgumentSchema {
    /// Checks `schema` and compiles its patterns; the error says which keyword is wrong and
    /// where.
    pub fn new(schema: &Value) -> Result<Self, String> {
        let mut patterns = HashMap::new();
        check_schema(schema, schema, "", &mut patterns, 0)?;
        Ok(Self { patterns })
    }

    /// Every way `instance` breaks `schema` (the one this was made from), each as `path: what`
    /// (`/priority: "huge" is not one of ["low","high"]`), or just `what` for the arguments as
    /// a whole; empty when it fits.
    pub fn errors(&self, schema: &Value, instance: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        let check = Check {
            root: schema,
            patterns: &self.patterns,
        };
        check.validate(schema, instance, &mut String::new(), &mut errors, 0);
        errors
    }
}

/// One check of arguments against a schema: `root` for its references, the patterns compiled.
struct Check<'a> {
    root: &'a Value,
    patterns: &'a HashMap<String, Regex>,
}

impl Check<'_> {
    fn validate(
        &self,
        schema: &Value,
        instance: &Value,
        path: &mut String,
        errors: &mut Vec<String>,
        depth: usize,
    ) {
        let schema = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                let message = format!("False schema does not allow {}", shown(instance));
                return push(errors, path, message);
            }
            Value::Object(schema) => schema,
            // Refused at registration.
            _ => return,
        };
        if depth > MAX_DEPTH {
            return push(
                errors,
                path,
                "the schema nests too deeply to check".to_owned(),
            );
        }

        if let Some(reference) = schema.get("$ref").and_then(Value::as_str)
            && let Some(target) = resolve(self.root, reference)
        {
            self.validate(target, instance, path, errors, depth + 1);
        }

        if let Some(expected) = schema.get("type")
            && !type_matches(expected, instance)
        {
            let names: Vec<String> = match expected {
                Value::Array(names) => names.iter().map(Value::to_string).collect(),
                name => vec![name.to_string()],
            };
            let noun = if names.len() == 1 { "type" } else { "types" };
            let message = format!("{} is not of {noun} {}", shown(instance), names.join(", "));
            push(errors, path, message);
        }
        if let Some(Value::Array(allowed)) = schema.get("enum")
            && !allowed.iter().any(|value| equal(value, instance))
        {
            let message = format!(
                "{} is not one of {}",
                shown(instance),
                shown(&Value::Array(allowed.clone()))
            );
            push(errors, path, message);
        }
        if let Some(expected) = schema.get("const")
            && !equal(expected, instance)
        {
            push(errors, path, format!("{} was expected", shown(expected)));
        }

        match instance {
            Value::Object(object) => self.object(schema, object, path, errors, depth),
            Value::Array(items) => self.array(schema, items, path, errors, depth),
            Value::String(text) => self.string(schema, text, path, errors),
            Value::Number(_) => number(schema, instance, path, errors),
            Value::Null | Value::Bool(_) => {}
        }

        for (keyword, all) in [("allOf", true), ("anyOf", false), ("oneOf", false)] {
            let Some(Value::Array(branches)) = schema.get(keyword) else {
                continue;
            };
            let mut failed = Vec::new();
            let mut passed = 0;
            for branch in branches {
                let mut branch_errors = Vec::new();
                self.validate(branch, instance, path, &mut branch_errors, depth + 1);
                if branch_errors.is_empty() {
                    passed += 1;
                } else {
                    failed.push(branch_errors);
                }
            }
            if all {
                // allOf: every branch's own errors, as if its keywords stood here.
                errors.extend(failed.into_iter().flatten());
            } else if passed == 0 {
                push(
                    errors,
                    path,
                    format!(
                        "{} is not valid under any of the schemas listed in the '{keyword}' keyword",
                        shown(instance)
                    ),
                );
            } else if keyword == "oneOf" && passed > 1 {
                push(
                    errors,
                    path,
                    format!(
                        "{} is valid under more than one of the schemas listed in the 'oneOf' keyword",
                        shown(instance)
                    ),
                );
            }
        }
        if let Some(not) = schema.get("not") {
            let mut branch_errors = Vec::new();
            self.validate(not, instance, path, &mut branch_errors, depth + 1);
            if branch_errors.is_empty() {
                push(
                    errors,
                    path,
                    format!(
                        "{} should not be valid under {}",
                        shown(instance),
                        shown(not)
                    ),
                );
            }
        }
    }

    fn object(
        &self,
        schema: &Map<String, Value>,
        object: &Map<String, Value>,
        path: &mut String,
        errors: &mut Vec<String>,
        depth: usize,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let patterns: Vec<(&Regex, &Value)> = schema
            .get("patternProperties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(pattern, sub)| Some((self.patterns.get(pattern)?, sub)))
            .collect();
        let additional = schema.get("additionalProperties");
        let mut unexpected = Vec::new();
        for (key, value) in object {
            let declared = properties.and_then(|properties| properties.get(key));
            let mut matched = declared.is_some();
            let length = path.len();
            path.push('/');
            path.push_str(&pointer_token(key));
            if let Some(sub) = declared {
                self.validate(sub, value, path, errors, depth + 1);
            }
            for (regex, sub) in &patterns {
                if regex.is_match(key) {
                    matched = true;
                    self.validate(sub, value, path, errors, depth + 1);
                }
            }
            if !matched {
                match additional {
                    Some(Value::Bool(false)) => unexpected.push(key.as_str()),
                    Some(sub @ Value::Object(_)) => {
                        self.validate(sub, value, path, errors, depth + 1);
                    }
                    _ => {}
                }
            }
            path.truncate(length);
        }
        if !unexpected.is_empty() {
            let names: Vec<String> = unexpected.iter().map(|key| format!("'{key}'")).collect();
            let verb = if names.len() == 1 { "was" } else { "were" };
            push(
                errors,
                path,
                format!(
                    "Additional properties are not allowed ({} {verb} unexpected)",
                    names.join(", ")
                ),
            );
        }
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    push(errors, path, format!("\"{name}\" is a required property"));
                }
            }
        }
        let count = object.len() as u64;
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && count < min
        {
            push(
                errors,
                path,
                format!("{} has less than {min} properties", shown_object(object)),
            );
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && count > max
        {
            push(
                errors,
                path,
                format!("{} has more than {max} properties", shown_object(object)),
            );
        }
    }

    fn array(
        &self,
        schema: &Map<String, Value>,
        items: &[Value],
        path: &mut String,
        errors: &mut Vec<String>,
        depth: usize,
    ) {
        // Positional schemas (2020-12's prefixItems, or draft 4's items array), then the
        // schema for the rest (items, or draft 4's additionalItems).
        let (positional, rest): (&[Value], Option<&Value>) =
            match (schema.get("prefixItems"), schema.get("items")) {
                (Some(Value::Array(prefix)), items) => (prefix, items),
                (_, Some(Value::Array(tuple))) => (tuple, schema.get("additionalItems")),
                (_, items) => (&[], items),
            };
        for (index, item) in items.iter().enumerate() {
            let Some(sub) = positional.get(index).or(rest) else {
                break;
            };
            let length = path.len();
            path.push('/');
            path.push_str(&index.to_string());
            self.validate(sub, item, path, errors, depth + 1);
            path.truncate(length);
        }
        let count = items.len() as u64;
        let shown_items = || shown(&Value::Array(items.to_vec()));
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && count < min
        {
            push(
                errors,
                path,
                format!("{} has less than {min} item(s)", shown_items()),
            );
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && count > max
        {
            push(
                errors,
                path,
                format!("{} has more than {max} item(s)", shown_items()),
            );
        }
        if schema.get("uniqueItems") == Some(&Value::Bool(true))
            && items
                .iter()
                .enumerate()
                .any(|(i, a)| items[i + 1..].iter().any(|b| equal(a, b)))
        {
            push(
                errors,
                path,
                format!("{} has non-unique elements", shown_items()),
            );
        }
    }

    fn string(
        &self,
        schema: &Map<String, Value>,
        text: &str,
        path: &str,
        errors: &mut Vec<String>,
    ) {
        let length = text.chars().count() as u64;
        let quoted = || shown(&Value::String(text.to_owned()));
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && length < min
        {
            push(
                errors,
                path,
                format!("{} is shorter than {min} character(s)", quoted()),
            );
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && length > max
        {
            push(
                errors,
                path,
                format!("{} is longer than {max} character(s)", quoted()),
            );
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && let Some(regex) = self.patterns.get(pattern)
            && !regex.is_match(text)
        {
            push(
                errors,
                path,
                format!("{} does not match \"{pattern}\"", quoted()),
            );
        }
    }
}

fn number(schema: &Map<String, Value>, instance: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(value) = instance.as_f64() else {
        return;
    };
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    // Draft 4: `exclusiveMinimum: true` makes `minimum` exclusive.
    let exclusive = |key: &str| schema.get(key) == Some(&Value::Bool(true));
    if let Some(min) = bound("minimum") {
        if exclusive("exclusiveMinimum") && value <= min {
            push(
                errors,
                path,
                format!("{instance} is less than or equal to the minimum of {min}"),
            );
        } else if value < min {
            push(
                errors,
                path,
                format!("{instance} is less than the minimum of {min}"),
            );
        }
    }
    if let Some(max) = bound("maximum") {
        if exclusive("exclusiveMaximum") && value >= max {
            push(
                errors,
                path,
                format!("{instance} is greater than or equal to the maximum of {max}"),
            );
        } else if value > max {
            push(
                errors,
                path,
                format!("{instance} is greater than the maximum of {max}"),
            );
        }
    }
    if let Some(min) = bound("exclusiveMinimum")
        && value <= min
    {
        push(
            errors,
            path,
            format!("{instance} is less than or equal to the minimum of {min}"),
        );
    }
    if let Some(max) = bound("exclusiveMaximum")
        && value >= max
    {
        push(
            errors,
            path,
            format!("{instance} is greater than or equal to the maximum of {max}"),
        );
    }
    if let Some(divisor) = bound("multipleOf")
        && divisor > 0.0
    {
        let quotient = value / divisor;
        if (quotient - quotient.round()).abs() > 1e-9 {
            push(
                errors,
                path,
                format!("{instance} is not a multiple of {divisor}"),
            );
        }
    }
}

fn push(errors: &mut Vec<String>, path: &str, message: String) {
    errors.push(if path.is_empty() {
        message
    } else {
        format!("{path}: {message}")
    });
}

/// A JSON Pointer token: `~` and `/` escaped, so the path names the property exactly.
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The value, cut to [`MAX_SHOWN`] characters: a message repeats the argument, and a long one
/// would crowd out what is wrong with it.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(MAX_SHOWN) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

fn shown_object(object: &Map<String, Value>) -> String {
    shown(&Value::Object(object.clone()))
}

fn type_matches(expected: &Value, instance: &Value) -> bool {
    match expected {
        Value::String(name) => is_type(name, instance),
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .any(|name| is_type(name, instance)),
        _ => true,
    }
}

fn is_type(name: &str, instance: &Value) -> bool {
    match name {
        "null" => instance.is_null(),
        "boolean" => instance.is_boolean(),
        "object" => instance.is_object(),
        "array" => instance.is_array(),
        "string" => instance.is_string(),
        "number" => instance.is_number(),
        // 1.0 is an integer too (JSON Schema counts values, not spellings).
        "integer" => {
            instance.is_i64()
                || instance.is_u64()
                || instance.as_f64().is_some_and(|n| n.fract() == 0.0)
        }
        _ => false,
    }
}

/// JSON equality, where 1 and 1.0 are the same number.
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || matches!((x.as_f64(), y.as_f64()), (Some(x), Some(y)) if x == y)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, x)| y.get(key).is_some_and(|y| equal(x, y)))
        }
        _ => a == b,
    }
}

/// The subschema a `$ref` within the same schema names (`#`, `#/$defs/Item`), or `None`.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    let decoded = percent_encoding::percent_decode_str(pointer)
        .decode_utf8()
        .ok()?;
    root.pointer(&decoded)
}

/// Checks the keywords [`ArgumentSchema`] uses have values of the right kind, compiling the
/// patterns on the way.
fn check_schema(
    root: &Value,
    schema: &Value,
    at: &str,
    patterns: &mut HashMap<String, Regex>,
    depth: usize,
) -> Result<(), String> {
    let wrong = |keyword: &str, what: &str| Err(format!("{at}/{keyword}: {what}"));
    let schema = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(schema) => schema,
        other => {
            return Err(format!(
                "{at}: {other} is not a schema (an object or a boolean)"
            ));
        }
    };
    if depth > MAX_DEPTH {
        return Err(format!("{at}: the schema nests too deeply"));
    }
    for (keyword, value) in schema {
        match keyword.as_str() {
            "type" => {
                let names: Vec<&Value> = match value {
                    Value::Array(names) => names.iter().collect(),
                    name => vec![name],
                };
                for name in names {
                    if !name.as_str().is_some_and(|name| TYPES.contains(&name)) {
                        return wrong(keyword, &format!("{name} is not a JSON type"));
                    }
                }
            }
            "enum" if !value.is_array() => return wrong(keyword, "not an array"),
            "required"
                if !value
                    .as_array()
                    .is_some_and(|names| names.iter().all(Value::is_string)) =>
            {
                return wrong(keyword, "not an array of property names");
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
            | "maxProperties"
                if value.as_u64().is_none() =>
            {
                return wrong(keyword, "not a non-negative integer");
            }
            "minimum" | "maximum" | "multipleOf" if !value.is_number() => {
                return wrong(keyword, "not a number");
            }
            "exclusiveMinimum" | "exclusiveMaximum"
                if !(value.is_number() || value.is_boolean()) =>
            {
                return wrong(keyword, "not a number");
            }
            "uniqueItems" if !value.is_boolean() => return wrong(keyword, "not a boolean"),
            "pattern" => match value.as_str() {
                Some(pattern) => compile(patterns, pattern, &format!("{at}/{keyword}"))?,
                None => return wrong(keyword, "not a string"),
            },
            "$ref" => {
                let Some(reference) = value.as_str() else {
                    return wrong(keyword, "not a string");
                };
                if resolve(root, reference).is_none() {
                    return wrong(
                        keyword,
                        &format!("{reference:?} names no place in this schema"),
                    );
                }
            }
            "properties" | "patternProperties" | "$defs" | "definitions" => {
                let Some(subschemas) = value.as_object() else {
                    return wrong(keyword, "not an object");
                };
                for (name, sub) in subschemas {
                    if keyword == "patternProperties" {
                        compile(patterns, name, &format!("{at}/{keyword}"))?;
                    }
                    let here = format!("{at}/{keyword}/{}", pointer_token(name));
                    check_schema(root, sub, &here, patterns, depth + 1)?;
                }
            }
            "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                let Some(subschemas) = value.as_array().filter(|list| !list.is_empty()) else {
                    return wrong(keyword, "not a non-empty array of schemas");
                };
                for (index, sub) in subschemas.iter().enumerate() {
                    check_schema(
                        root,
                        sub,
                        &format!("{at}/{keyword}/{index}"),
                        patterns,
                        depth + 1,
                    )?;
                }
            }
            "items" if value.is_array() => {
                for (index, sub) in value.as_array().into_iter().flatten().enumerate() {
                    check_schema(
                        root,
                        sub,
                        &format!("{at}/items/{index}"),
                        patterns,
                        depth + 1,
                    )?;
                }
            }
            "items" | "additionalItems" | "additionalProperties" | "not" => {
                check_schema(root, value, &format!("{at}/{keyword}"), patterns, depth + 1)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Compiles `pattern` into `patterns` once.
fn compile(patterns: &mut HashMap<String, Regex>, pattern: &str, at: &str) -> Result<(), String> {
    if !patterns.contains_key(pattern) {
        let regex = Regex::new(pattern)
            .map_err(|err| format!("{at}: {pattern:?} is not a regex: {err}"))?;
        patterns.insert(pattern.to_owned(), regex);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The errors, sorted: their order follows the arguments' keys, which is insertion order
    /// or sorted depending on serde_json's features.
    fn errors(schema: Value, instance: Value) -> Vec<String> {
        let mut errors = ArgumentSchema::new(&schema)
            .expect("a valid schema")
            .errors(&schema, &instance);
        errors.sort();
        errors
    }

    #[test]
    fn objects_properties_required_and_unexpected_ones() {
        let schema = json!({
            "type": "object",
            "properties": {
                "priority": {"type": "string", "enum": ["low", "high"]},
                "n": {"type": "integer"}
            },
            "required": ["n"],
            "additionalProperties": false
        });
        assert!(errors(schema.clone(), json!({"n": 1, "priority": "low"})).is_empty());
        assert!(
            errors(schema.clone(), json!({"n": 2.0})).is_empty(),
            "2.0 is an integer"
        );
        assert_eq!(
            errors(schema.clone(), json!({"priority": "huge", "x": 1, "y": 2})),
            [
                r#""n" is a required property"#,
                r#"/priority: "huge" is not one of ["low","high"]"#,
                "Additional properties are not allowed ('x', 'y' were unexpected)",
            ]
        );
        assert_eq!(
            errors(schema.clone(), json!({"n": 1.5})),
            ["/n: 1.5 is not of type \"integer\""]
        );
        assert_eq!(
            errors(schema, json!([1])),
            ["[1] is not of type \"object\""]
        );
    }

    #[test]
    fn additional_and_pattern_properties_take_their_own_schemas() {
        let schema = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": {"type": "boolean"},
            "minProperties": 1,
            "maxProperties": 3
        });
        assert!(errors(schema.clone(), json!({"name": "a", "x-n": 1, "flag": true})).is_empty());
        assert_eq!(
            errors(schema.clone(), json!({"x-n": "one", "flag": 3})),
            [
                "/flag: 3 is not of type \"boolean\"",
                "/x-n: \"one\" is not of type \"integer\""
            ]
        );
        assert_eq!(
            errors(schema.clone(), json!({})),
            ["{} has less than 1 properties"]
        );
        assert_eq!(
            errors(schema, json!({"a": true, "b": true, "c": true, "d": true})).len(),
            1
        );
    }

    #[test]
    fn arrays_items_counts_and_uniqueness() {
        let schema = json!({
            "type": "object",
            "properties": {
                "tags": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": 3},
                    "minItems": 1,
                    "maxItems": 2,
                    "uniqueItems": true
                },
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}
            }
        });
        assert!(
            errors(
                schema.clone(),
                json!({"tags": ["a", "bc"], "pair": ["x", 1]})
            )
            .is_empty()
        );
        assert_eq!(
            errors(schema.clone(), json!({"tags": ["", "long!"]})),
            [
                "/tags/0: \"\" is shorter than 1 character(s)",
                "/tags/1: \"long!\" is longer than 3 character(s)"
            ]
        );
        assert_eq!(
            errors(schema.clone(), json!({"tags": []})),
            ["/tags: [] has less than 1 item(s)"]
        );
        assert_eq!(
            errors(schema.clone(), json!({"tags": ["a", "a", "b"]})),
            [
                "/tags: [\"a\",\"a\",\"b\"] has more than 2 item(s)",
                "/tags: [\"a\",\"a\",\"b\"] has non-unique elements"
            ]
        );
        assert_eq!(
            errors(schema.clone(), json!({"pair": [1, 1, 1]})),
            [
                "/pair/0: 1 is not of type \"string\"",
                "/pair/2: False schema does not allow 1"
            ]
        );
        // Draft 4's tuple form.
        let tuple = json!({"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "integer"}});
        assert!(errors(tuple.clone(), json!(["a", 1, 2])).is_empty());
        assert_eq!(
            errors(tuple, json!(["a", "b"])),
            ["/1: \"b\" is not of type \"integer\""]
        );
    }

    #[test]
    fn numbers_bounds_and_multiples() {
        let schema = json!({
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                "price": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01},
                "old": {"type": "number", "minimum": 0, "exclusiveMinimum": true}
            }
        });
        assert!(errors(schema.clone(), json!({"limit": 50, "price": 0.5, "old": 1})).is_empty());
        assert_eq!(
            errors(schema.clone(), json!({"limit": 51, "price": 0, "old": 0})),
            [
                "/limit: 51 is greater than the maximum of 50",
                "/old: 0 is less than or equal to the minimum of 0",
                "/price: 0 is less than or equal to the minimum of 0"
            ]
        );
        assert_eq!(
            errors(schema, json!({"limit": 0, "price": 0.005})),
            [
                "/limit: 0 is less than the minimum of 1",
                "/price: 0.005 is not a multiple of 0.01"
            ]
        );
    }

    #[test]
    fn strings_patterns_const_and_nullable_types() {
        let schema = json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "kind": {"const": "event"},
                "note": {"type": ["string", "null"]}
            }
        });
        assert!(
            errors(
                schema.clone(),
                json!({"code": "EUR", "kind": "event", "note": null})
            )
            .is_empty()
        );
        assert_eq!(
            errors(schema, json!({"code": "eur", "kind": "task", "note": 1})),
            [
                "/code: \"eur\" does not match \"^[A-Z]{3}$\"",
                "/kind: \"event\" was expected",
                "/note: 1 is not of types \"string\", \"null\""
            ]
        );
    }

    #[test]
    fn combinators_and_references() {
        // The shape pydantic (Python MCP servers) writes: `$defs` and `$ref`, `anyOf` with null.
        let schema = json!({
            "$defs": {
                "Item": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
                    "required": ["name"]
                }
            },
            "type": "object",
            "properties": {
                "item": {"anyOf": [{"$ref": "#/$defs/Item"}, {"type": "null"}]},
                "mode": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},
                "both": {"allOf": [{"type": "string"}, {"minLength": 2}]},
                "other": {"not": {"type": "string"}}
            }
        });
        assert!(
            errors(
                schema.clone(),
                json!({"item": {"name": "a", "children": [{"name": "b", "children": []}]}, "mode": 1, "both": "ab", "other": 1})
            )
            .is_empty()
        );
        assert!(errors(schema.clone(), json!({"item": null})).is_empty());
        assert_eq!(
            errors(
                schema.clone(),
                json!({"item": {"children": [{}]}, "mode": 7, "both": "a", "other": "x"})
            ),
            [
                "/both: \"a\" is shorter than 2 character(s)",
                "/item: {\"children\":[{}]} is not valid under any of the schemas listed in the 'anyOf' keyword",
                "/mode: 7 is valid under more than one of the schemas listed in the 'oneOf' keyword",
                "/other: \"x\" should not be valid under {\"type\":\"string\"}"
            ]
        );
        // A schema that refers to itself without descending stops instead of overflowing.
        let looping = json!({"$ref": "#"});
        assert_eq!(
            errors(looping, json!(1)),
            ["the schema nests too deeply to check"]
        );
    }

    #[test]
    fn path_tokens_are_escaped_and_long_values_cut() {
        let schema = json!({"type": "object", "properties": {"a/b": {"type": "integer"}}});
        let long = "x".repeat(500);
        let errors = errors(schema, json!({"a/b": long}));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("/a~1b: \"xxx"), "{errors:?}");
        assert!(errors[0].contains("…"), "{errors:?}");
        assert!(errors[0].len() < 200, "{errors:?}");
    }

    #[test]
    fn bad_schemas_are_refused_naming_the_keyword() {
        for (schema, expected) in [
            (
                json!({"type": "nonsense"}),
                "/type: \"nonsense\" is not a JSON type",
            ),
            (
                json!({"type": ["string", 3]}),
                "/type: 3 is not a JSON type",
            ),
            (
                json!({"required": "name"}),
                "/required: not an array of property names",
            ),
            (
                json!({"properties": {"a": {"pattern": "("}}}),
                "/properties/a/pattern: \"(\" is not a regex",
            ),
            (
                json!({"properties": {"a": 3}}),
                "/properties/a: 3 is not a schema",
            ),
            (
                json!({"$ref": "https://example.org/schema"}),
                "/$ref: \"https://example.org/schema\" names no place",
            ),
            (
                json!({"$ref": "#/$defs/Missing"}),
                "/$ref: \"#/$defs/Missing\" names no place",
            ),
            (
                json!({"anyOf": []}),
                "/anyOf: not a non-empty array of schemas",
            ),
            (
                json!({"maxLength": -1}),
                "/maxLength: not a non-negative integer",
            ),
            (json!({"minimum": "1"}), "/minimum: not a number"),
            (
                json!({"items": {"type": 1}}),
                "/items/type: 1 is not a JSON type",
            ),
            (json!([]), ": [] is not a schema"),
        ] {
            let err = ArgumentSchema::new(&schema).expect_err("refused");
            assert!(err.starts_with(expected), "{schema}: {err}");
        }
        // Keywords it passes over are no error.
        assert!(
            ArgumentSchema::new(&json!({"format": "date", "title": "x", "if": {}, "x-custom": 1}))
                .is_ok()
        );
        assert!(ArgumentSchema::new(&json!(true)).is_ok());
    }
}
