//! Structured text: JSON formatting and validation, CSV parsing and generation.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value, json};

use super::{GROUP, Input};
use crate::tool::typed::{Count, Limit, Within, inline_schema};
use crate::tool::{ToolContext, ToolError, TypedTool};

/// Longest JSON or CSV input accepted, in bytes.
const MAX_INPUT: usize = 1024 * 1024;
/// Most rows `generate_csv` writes.
const MAX_CSV_ROWS: usize = 10_000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Mode {
    #[default]
    Pretty,
    Minify,
    Validate,
}

/// Validate, pretty-print or minify JSON text. Invalid JSON gets the line, column and reason.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct FormatJson {
    /// the JSON text
    json: Input<MAX_INPUT>,
    /// default pretty
    mode: Option<Mode>,
    /// spaces per level when pretty; default 2
    indent: Option<Within<0, 8>>,
}

impl TypedTool for FormatJson {
    const NAME: &'static str = "format_json";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "json, prettify, minify, validate, lint";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        self.format()
    }
}

impl FormatJson {
    fn format(self) -> Result<Value, ToolError> {
        let text = self.json.0.as_str();
        let mode = self.mode.unwrap_or_default();
        let parsed: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(err) if mode == Mode::Validate => {
                return Ok(
                    json!({"valid": false, "error": describe_json_error(text, &err), "line": err.line(), "column": err.column()}),
                );
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
            Mode::Validate => return Ok(json!({"valid": true, "type": kind})),
            Mode::Minify => parsed.to_string(),
            Mode::Pretty => {
                let indent = " ".repeat(self.indent.map_or(2, Within::get));
                let mut out = Vec::new();
                let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
                let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
                parsed
                    .serialize(&mut serializer)
                    .map_err(|e| ToolError::Failed(format!("cannot format: {e}")))?;
                String::from_utf8_lossy(&out).into_owned()
            }
        };
        Ok(json!({"valid": true, "type": kind, "result": result}))
    }
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

const CSV_LIMIT: Limit = Limit::new(100, 1000);

/// Parse CSV text into rows: objects keyed by the header row (default), or arrays. Quoted
/// fields, embedded commas and newlines are handled.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ParseCsv {
    /// the CSV text
    text: Input<MAX_INPUT>,
    /// one character; default , (use \t for tabs, ; for European CSV)
    delimiter: Option<Delimiter>,
    /// first row names the columns; default true
    has_header: Option<bool>,
    /// rows returned; default 100, max 1000
    limit: Option<Count>,
}

impl TypedTool for ParseCsv {
    const NAME: &'static str = "parse_csv";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "csv, spreadsheet, table, tsv, import";
    const LIMIT: Option<Limit> = Some(CSV_LIMIT);
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        self.parse()
    }
}

impl ParseCsv {
    fn parse(self) -> Result<Value, ToolError> {
        let text = self.text.0.as_str();
        let delimiter = self.delimiter.map_or(b',', |d| d.0);
        let has_header = self.has_header.unwrap_or(true);
        let limit = usize::try_from(CSV_LIMIT.of(self.limit)).unwrap_or(100);
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
        }))
    }
}

/// Generating a CSV row: an object (by column name) or an array (in order).
#[derive(Debug)]
enum Row {
    Object(Map<String, Value>),
    Array(Vec<Value>),
}

impl<'de> Deserialize<'de> for Row {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Object(object) => Ok(Row::Object(object)),
            Value::Array(items) => Ok(Row::Array(items)),
            other => Err(serde::de::Error::custom(format!(
                "must be an object or an array, not {other}"
            ))),
        }
    }
}

inline_schema!(Row, {"type": ["object", "array"]});

/// Turn an array of objects (or of arrays) into CSV text. Columns follow `columns` if given,
/// otherwise the keys of all objects in alphabetical order; nested values are written as JSON.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GenerateCsv {
    /// the records
    #[schemars(length(max = MAX_CSV_ROWS))]
    rows: Vec<Row>,
    /// column order (and subset) for object rows
    columns: Option<Vec<String>>,
    /// one character; default ,
    delimiter: Option<Delimiter>,
    /// write a header row for object rows; default true
    header: Option<bool>,
}

impl TypedTool for GenerateCsv {
    const NAME: &'static str = "generate_csv";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "csv, export, spreadsheet, table";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        self.generate()
    }
}

impl GenerateCsv {
    fn generate(self) -> Result<Value, ToolError> {
        let rows = &self.rows;
        if rows.len() > MAX_CSV_ROWS {
            return Err(ToolError::InvalidArguments(format!(
                "at most {MAX_CSV_ROWS} rows, got {}",
                rows.len()
            )));
        }
        let delimiter = self.delimiter.map_or(b',', |d| d.0);
        let objects = rows.iter().any(|r| matches!(r, Row::Object(_)));
        if objects && rows.iter().any(|r| matches!(r, Row::Array(_))) {
            return Err(ToolError::InvalidArguments(
                "`rows` mixes objects and other values; use all objects or all arrays".into(),
            ));
        }
        let mut columns = self.columns.unwrap_or_default();
        if objects && columns.is_empty() {
            let mut keys: Vec<String> = rows
                .iter()
                .flat_map(|r| match r {
                    Row::Object(o) => o.keys().cloned().collect(),
                    Row::Array(_) => Vec::new(),
                })
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
        if objects && self.header.unwrap_or(true) {
            writer.write_record(&columns).map_err(failed)?;
        }
        for row in rows {
            let fields: Vec<String> = match row {
                Row::Object(object) => columns.iter().map(|c| cell(object.get(c))).collect(),
                Row::Array(items) => items.iter().map(|v| cell(Some(v))).collect(),
            };
            writer.write_record(&fields).map_err(failed)?;
        }
        let bytes = writer
            .into_inner()
            .map_err(|e| ToolError::Failed(format!("cannot write CSV: {e}")))?;
        let csv = String::from_utf8_lossy(&bytes).into_owned();
        Ok(json!({"csv": csv, "rows": rows.len(), "columns": columns}))
    }
}

fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A CSV delimiter: one ASCII character other than a quote or newline (`\\t` or `tab` also mean
/// a tab).
#[derive(Clone, Copy, Debug)]
struct Delimiter(u8);

impl<'de> Deserialize<'de> for Delimiter {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let text = if text == "\\t" || text.eq_ignore_ascii_case("tab") {
            "\t"
        } else {
            &text
        };
        match text.as_bytes() {
            [b] if b.is_ascii() && *b != b'"' && *b != b'\n' && *b != b'\r' => Ok(Self(*b)),
            _ => Err(serde::de::Error::custom(format!(
                "must be one ASCII character other than a quote or newline, got {text:?}"
            ))),
        }
    }
}

inline_schema!(Delimiter, {"type": "string", "minLength": 1, "maxLength": 1});

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;

    #[tokio::test]
    async fn formats_and_validates_json() {
        let out = call("format_json", json!({"json": "{\"b\":[1,2],\"a\":null}"}))
            .await
            .expect("ok");
        assert_eq!(
            out["result"],
            "{\n  \"a\": null,\n  \"b\": [\n    1,\n    2\n  ]\n}"
        );
        let out = call(
            "format_json",
            json!({"json": "{ \"a\" : [ 1 , 2 ] }", "mode": "minify"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["result"], "{\"a\":[1,2]}");
        let out = call("format_json", json!({"json": "[1]", "indent": 4}))
            .await
            .expect("ok");
        assert_eq!(out["result"], "[\n    1\n]");
        let out = call("format_json", json!({"json": "42", "mode": "validate"}))
            .await
            .expect("ok");
        assert_eq!(
            (out["valid"].as_bool(), out["type"].as_str()),
            (Some(true), Some("number"))
        );
    }

    #[tokio::test]
    async fn invalid_json_says_where() {
        let bad = "{\n  \"a\": 1,\n  \"b\": 2 3\n}";
        let out = call("format_json", json!({"json": bad, "mode": "validate"}))
            .await
            .expect("ok");
        assert_eq!(out["valid"], false);
        assert_eq!(out["line"], 3);
        let err = call("format_json", json!({"json": bad}))
            .await
            .expect_err("invalid")
            .to_string();
        assert!(err.contains("line 3 column"), "{err}");
        assert!(err.contains("\"b\": 2 3\n         ^"), "{err}");
        let err = call("format_json", json!({"json": "[1,"}))
            .await
            .expect_err("eof")
            .to_string();
        assert!(err.contains("EOF"), "{err}");
    }

    #[tokio::test]
    async fn parses_csv_with_header_quotes_and_limits() {
        let text = "name,amount,note\nAnna,12.5,\"likes, commas\"\nBen,3,\"two\nlines\"\nCleo,7\n";
        let out = call("parse_csv", json!({"text": text})).await.expect("ok");
        assert_eq!(out["headers"], json!(["name", "amount", "note"]));
        assert_eq!(out["row_count"], 3);
        assert_eq!(out["rows"][0]["note"], "likes, commas");
        assert_eq!(out["rows"][1]["note"], "two\nlines");
        assert_eq!(out["rows"][2]["note"], "", "short rows are padded");
        let out = call("parse_csv", json!({"text": text, "limit": 1}))
            .await
            .expect("ok");
        assert_eq!(out["returned"], 1);
        assert_eq!(out["truncated"], true);
        let out = call(
            "parse_csv",
            json!({"text": "a;b\n1;2", "delimiter": ";", "has_header": false}),
        )
        .await
        .expect("ok");
        assert_eq!(out["rows"], json!([["a", "b"], ["1", "2"]]));
        let out = call(
            "parse_csv",
            json!({"text": "a\tb\n1\t2\t3", "delimiter": "\\t"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["rows"][0], json!({"a": "1", "b": "2", "column_3": "3"}));
        let err = call("parse_csv", json!({"text": "a", "delimiter": "ab"}))
            .await
            .expect_err("delim");
        assert!(
            err.to_string().contains("`delimiter`: must be one ASCII"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn generates_csv_that_parses_back() {
        let rows = json!([
            {"name": "Anna", "amount": 12.5, "tags": ["a", "b"]},
            {"name": "Ben, Jr.", "amount": 3, "note": "said \"hi\""},
        ]);
        let out = call(
            "generate_csv",
            json!({"rows": rows, "columns": ["name", "amount", "note"]}),
        )
        .await
        .expect("ok");
        let csv = out["csv"].as_str().expect("csv");
        assert_eq!(
            csv,
            "name,amount,note\nAnna,12.5,\n\"Ben, Jr.\",3,\"said \"\"hi\"\"\"\n"
        );
        let back = call("parse_csv", json!({"text": csv})).await.expect("ok");
        assert_eq!(back["rows"][1]["name"], "Ben, Jr.");
        assert_eq!(back["rows"][1]["note"], "said \"hi\"");
        let out = call("generate_csv", json!({"rows": rows}))
            .await
            .expect("ok");
        assert_eq!(out["columns"], json!(["amount", "name", "note", "tags"]));
        assert!(
            out["csv"]
                .as_str()
                .expect("csv")
                .contains("\"[\"\"a\"\",\"\"b\"\"]\"")
        );
        let out = call(
            "generate_csv",
            json!({"rows": [[1, "x"], [2, null]], "delimiter": ";"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["csv"], "1;x\n2;\n");
        let err = call("generate_csv", json!({"rows": [{"a": 1}, [1]]}))
            .await
            .expect_err("mixed");
        assert!(err.to_string().contains("mixes"));
        let err = call("generate_csv", json!({"rows": [1, 2]}))
            .await
            .expect_err("not rows");
        assert!(
            err.to_string()
                .contains("`rows[0]`: must be an object or an array"),
            "{err}"
        );
    }
}
