//! Structured text: JSON formatting and validation, CSV parsing and generation.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{Args, ToolError, ToolInfo};

/// Longest JSON or CSV input accepted, in bytes.
const MAX_INPUT: usize = 1024 * 1024;
/// Most rows `generate_csv` writes.
const MAX_CSV_ROWS: usize = 10_000;

pub(super) fn json_info() -> ToolInfo {
    ToolInfo::new(
        "format_json",
        "utilities",
        "Validate, pretty-print or minify JSON text. Invalid JSON gets the line, column and reason.",
        json!({
            "type": "object",
            "properties": {
                "json": {"type": "string", "description": "the JSON text"},
                "mode": {"type": "string", "enum": ["pretty", "minify", "validate"], "description": "default pretty"},
                "indent": {"type": "integer", "minimum": 0, "maximum": 8, "description": "spaces per level when pretty; default 2"}
            },
            "required": ["json"],
            "additionalProperties": false
        }),
    )
    .tags(&["json", "prettify", "minify", "validate", "lint"])
}

pub(super) fn format_json(arguments: &Value) -> Result<String, ToolError> {
    let args = Args::new(arguments);
    let text = input(&args, "json")?;
    let mode = args.opt_str("mode").unwrap_or("pretty");
    let parsed: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(err) if mode == "validate" => {
            return Ok(json!({"valid": false, "error": describe_json_error(text, &err), "line": err.line(), "column": err.column()}).to_string());
        }
        Err(err) => {
            return Err(ToolError::InvalidArguments(format!(
                "invalid JSON: {}",
                describe_json_error(text, &err)
            )));
        }
    };
    let kind = match &parsed {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    };
    let result = match mode {
        "validate" => return Ok(json!({"valid": true, "type": kind}).to_string()),
        "minify" => parsed.to_string(),
        "pretty" => {
            let indent = args.opt_i64("indent").unwrap_or(2).clamp(0, 8);
            let indent = " ".repeat(usize::try_from(indent).unwrap_or(2));
            let mut out = Vec::new();
            let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
            let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
            parsed
                .serialize(&mut serializer)
                .map_err(|e| ToolError::Failed(format!("cannot format: {e}")))?;
            String::from_utf8_lossy(&out).into_owned()
        }
        other => {
            return Err(ToolError::InvalidArguments(format!(
                "unknown mode {other:?}; use pretty, minify or validate"
            )));
        }
    };
    Ok(json!({"valid": true, "type": kind, "result": result}).to_string())
}

/// serde_json's message plus the offending line with a caret under the column.
fn describe_json_error(text: &str, err: &serde_json::Error) -> String {
    let line = text.lines().nth(err.line().saturating_sub(1)).unwrap_or("");
    let column = err.column().max(1);
    // Show at most 60 characters around the error.
    let chars: Vec<char> = line.chars().collect();
    let from = column.saturating_sub(30).min(chars.len());
    let to = (column + 30).min(chars.len());
    let excerpt: String = chars[from..to].iter().collect();
    let caret = " ".repeat(column.saturating_sub(from + 1));
    format!("{err}\n{excerpt}\n{caret}^")
}

pub(super) fn parse_info() -> ToolInfo {
    ToolInfo::new(
        "parse_csv",
        "utilities",
        "Parse CSV text into rows: objects keyed by the header row (default), or arrays. Quoted fields, \
         embedded commas and newlines are handled.",
        json!({
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "the CSV text"},
                "delimiter": {"type": "string", "minLength": 1, "maxLength": 1, "description": "one character; default , (use \\t for tabs, ; for European CSV)"},
                "has_header": {"type": "boolean", "description": "first row names the columns; default true"},
                "limit": {"type": "integer", "minimum": 1, "description": "rows returned; default 100, max 1000"}
            },
            "required": ["text"],
            "additionalProperties": false
        }),
    )
    .limit("limit", 100, 1000)
    .tags(&["csv", "spreadsheet", "table", "tsv", "import"])
}

pub(super) fn parse_csv(info: &ToolInfo, arguments: &Value) -> Result<String, ToolError> {
    let args = Args::new(arguments);
    let text = input(&args, "text")?;
    let delimiter = delimiter(&args)?;
    let has_header = args.opt_bool("has_header").unwrap_or(true);
    let limit = usize::try_from(crate::tool::list_limit(info, arguments)).unwrap_or(100);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let bad = |e: csv::Error| {
        let at = e
            .position()
            .map(|p| format!(" at line {}", p.line()))
            .unwrap_or_default();
        ToolError::InvalidArguments(format!("invalid CSV{at}: {e}"))
    };
    let mut records = reader.records();
    let headers: Option<Vec<String>> = if has_header {
        match records.next() {
            Some(record) => Some(
                record
                    .map_err(bad)?
                    .iter()
                    .map(|h| h.trim().to_string())
                    .collect(),
            ),
            None => Some(Vec::new()),
        }
    } else {
        None
    };
    let mut rows = Vec::new();
    let mut total = 0usize;
    for record in records {
        let record = record.map_err(bad)?;
        total += 1;
        if rows.len() >= limit {
            continue;
        }
        let row = match &headers {
            Some(headers) => {
                let mut object = Map::new();
                for (i, field) in record.iter().enumerate() {
                    let key = headers
                        .get(i)
                        .filter(|h| !h.is_empty())
                        .cloned()
                        .unwrap_or_else(|| format!("column_{}", i + 1));
                    object.insert(key, json!(field));
                }
                // Short rows get empty values, so every object has every column.
                for header in headers.iter().skip(record.len()).filter(|h| !h.is_empty()) {
                    object.insert(header.clone(), json!(""));
                }
                Value::Object(object)
            }
            None => json!(record.iter().collect::<Vec<_>>()),
        };
        rows.push(row);
    }
    Ok(json!({
        "headers": headers,
        "rows": rows,
        "row_count": total,
        "returned": rows.len(),
        "truncated": total > rows.len(),
    })
    .to_string())
}

pub(super) fn generate_info() -> ToolInfo {
    ToolInfo::new(
        "generate_csv",
        "utilities",
        "Turn an array of objects (or of arrays) into CSV text. Columns follow `columns` if given, otherwise \
         the keys of all objects in alphabetical order; nested values are written as JSON.",
        json!({
            "type": "object",
            "properties": {
                "rows": {"type": "array", "items": {"type": ["object", "array"]}, "maxItems": MAX_CSV_ROWS, "description": "the records"},
                "columns": {"type": "array", "items": {"type": "string"}, "description": "column order (and subset) for object rows"},
                "delimiter": {"type": "string", "minLength": 1, "maxLength": 1, "description": "one character; default ,"},
                "header": {"type": "boolean", "description": "write a header row for object rows; default true"}
            },
            "required": ["rows"],
            "additionalProperties": false
        }),
    )
    .tags(&["csv", "export", "spreadsheet", "table"])
}

pub(super) fn generate_csv(arguments: &Value) -> Result<String, ToolError> {
    let args = Args::new(arguments);
    let rows = args.array("rows")?;
    if rows.len() > MAX_CSV_ROWS {
        return Err(ToolError::InvalidArguments(format!(
            "at most {MAX_CSV_ROWS} rows, got {}",
            rows.len()
        )));
    }
    let delimiter = delimiter(&args)?;
    let objects = rows.iter().any(Value::is_object);
    if objects && rows.iter().any(|r| !r.is_object()) {
        return Err(ToolError::InvalidArguments(
            "`rows` mixes objects and other values; use all objects or all arrays".into(),
        ));
    }
    if !objects && rows.iter().any(|r| !r.is_array()) {
        return Err(ToolError::InvalidArguments(
            "every item of `rows` must be an object or an array".into(),
        ));
    }
    let mut columns = args.strings("columns");
    if objects && columns.is_empty() {
        let mut keys: Vec<String> = rows
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|o| o.keys().cloned())
            .collect();
        keys.sort();
        keys.dedup();
        columns = keys;
    }
    let mut writer = csv::WriterBuilder::new()
        .delimiter(delimiter)
        .flexible(true)
        .from_writer(Vec::new());
    let failed = |e: csv::Error| ToolError::Failed(format!("cannot write CSV: {e}"));
    if objects && args.opt_bool("header").unwrap_or(true) {
        writer.write_record(&columns).map_err(failed)?;
    }
    for row in rows {
        let fields: Vec<String> = match row {
            Value::Object(object) => columns.iter().map(|c| cell(object.get(c))).collect(),
            Value::Array(items) => items.iter().map(|v| cell(Some(v))).collect(),
            _ => Vec::new(),
        };
        writer.write_record(&fields).map_err(failed)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| ToolError::Failed(format!("cannot write CSV: {e}")))?;
    let csv = String::from_utf8_lossy(&bytes).into_owned();
    Ok(json!({"csv": csv, "rows": rows.len(), "columns": columns}).to_string())
}

fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn delimiter(args: &Args<'_>) -> Result<u8, ToolError> {
    let text = args.opt_str("delimiter").unwrap_or(",");
    let text = if text == "\\t" || text.eq_ignore_ascii_case("tab") {
        "\t"
    } else {
        text
    };
    match text.as_bytes() {
        [b] if b.is_ascii() && *b != b'"' && *b != b'\n' && *b != b'\r' => Ok(*b),
        _ => Err(ToolError::InvalidArguments(format!(
            "`delimiter` must be one ASCII character other than a quote or newline, got {text:?}"
        ))),
    }
}

fn input<'a>(args: &Args<'a>, name: &str) -> Result<&'a str, ToolError> {
    let text = args.opt_str(name).ok_or_else(|| {
        ToolError::InvalidArguments(format!("`{name}` is required and must be a string"))
    })?;
    if text.len() > MAX_INPUT {
        return Err(ToolError::InvalidArguments(format!(
            "`{name}` is longer than {MAX_INPUT} bytes"
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(out: Result<String, ToolError>) -> Value {
        serde_json::from_str(&out.expect("ok")).expect("json")
    }

    #[test]
    fn formats_and_validates_json() {
        let out = result(format_json(&json!({"json": "{\"b\":[1,2],\"a\":null}"})));
        assert_eq!(
            out["result"],
            "{\n  \"a\": null,\n  \"b\": [\n    1,\n    2\n  ]\n}"
        );
        let out = result(format_json(
            &json!({"json": "{ \"a\" : [ 1 , 2 ] }", "mode": "minify"}),
        ));
        assert_eq!(out["result"], "{\"a\":[1,2]}");
        let out = result(format_json(&json!({"json": "[1]", "indent": 4})));
        assert_eq!(out["result"], "[\n    1\n]");
        let out = result(format_json(&json!({"json": "42", "mode": "validate"})));
        assert_eq!(
            (out["valid"].as_bool(), out["type"].as_str()),
            (Some(true), Some("number"))
        );
    }

    #[test]
    fn invalid_json_says_where() {
        let bad = "{\n  \"a\": 1,\n  \"b\": 2 3\n}";
        let out = result(format_json(&json!({"json": bad, "mode": "validate"})));
        assert_eq!(out["valid"], false);
        assert_eq!(out["line"], 3);
        let err = format_json(&json!({"json": bad}))
            .expect_err("invalid")
            .to_string();
        assert!(err.contains("line 3 column"), "{err}");
        assert!(err.contains("\"b\": 2 3\n         ^"), "{err}");
        let err = format_json(&json!({"json": "[1,"}))
            .expect_err("eof")
            .to_string();
        assert!(err.contains("EOF"), "{err}");
    }

    #[test]
    fn parses_csv_with_header_quotes_and_limits() {
        let info = parse_info();
        let text = "name,amount,note\nAnna,12.5,\"likes, commas\"\nBen,3,\"two\nlines\"\nCleo,7\n";
        let out = result(parse_csv(&info, &json!({"text": text})));
        assert_eq!(out["headers"], json!(["name", "amount", "note"]));
        assert_eq!(out["row_count"], 3);
        assert_eq!(out["rows"][0]["note"], "likes, commas");
        assert_eq!(out["rows"][1]["note"], "two\nlines");
        assert_eq!(out["rows"][2]["note"], "", "short rows are padded");
        let out = result(parse_csv(&info, &json!({"text": text, "limit": 1})));
        assert_eq!(out["returned"], 1);
        assert_eq!(out["truncated"], true);
        let out = result(parse_csv(
            &info,
            &json!({"text": "a;b\n1;2", "delimiter": ";", "has_header": false}),
        ));
        assert_eq!(out["rows"], json!([["a", "b"], ["1", "2"]]));
        let out = result(parse_csv(
            &info,
            &json!({"text": "a\tb\n1\t2\t3", "delimiter": "\\t"}),
        ));
        assert_eq!(out["rows"][0], json!({"a": "1", "b": "2", "column_3": "3"}));
        let err = parse_csv(&info, &json!({"text": "a", "delimiter": "ab"})).expect_err("delim");
        assert!(err.to_string().contains("`delimiter`"));
    }

    #[test]
    fn generates_csv_that_parses_back() {
        let rows = json!([
            {"name": "Anna", "amount": 12.5, "tags": ["a", "b"]},
            {"name": "Ben, Jr.", "amount": 3, "note": "said \"hi\""},
        ]);
        let out = result(generate_csv(
            &json!({"rows": rows, "columns": ["name", "amount", "note"]}),
        ));
        let csv = out["csv"].as_str().expect("csv");
        assert_eq!(
            csv,
            "name,amount,note\nAnna,12.5,\n\"Ben, Jr.\",3,\"said \"\"hi\"\"\"\n"
        );
        let back = result(parse_csv(&parse_info(), &json!({"text": csv})));
        assert_eq!(back["rows"][1]["name"], "Ben, Jr.");
        assert_eq!(back["rows"][1]["note"], "said \"hi\"");
        let out = result(generate_csv(&json!({"rows": rows})));
        assert_eq!(out["columns"], json!(["amount", "name", "note", "tags"]));
        assert!(
            out["csv"]
                .as_str()
                .expect("csv")
                .contains("\"[\"\"a\"\",\"\"b\"\"]\"")
        );
        let out = result(generate_csv(
            &json!({"rows": [[1, "x"], [2, null]], "delimiter": ";"}),
        ));
        assert_eq!(out["csv"], "1;x\n2;\n");
        let err = generate_csv(&json!({"rows": [{"a": 1}, [1]]})).expect_err("mixed");
        assert!(err.to_string().contains("mixes"));
        assert!(generate_csv(&json!({"rows": [1, 2]})).is_err());
    }
}
