//! Reading a tool's arguments by hand, for the families that are not [`TypedTool`]s yet
//! (see `tool.rs`). The registry has already checked them against the tool's JSON Schema, so
//! these helpers mostly turn "missing" into a clear message for the model.
//!
//! [`TypedTool`]: super::TypedTool

use serde_json::Value;

use super::ToolError;

/// The arguments object of one call.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a>(pub &'a Value);

impl<'a> Args<'a> {
    pub fn new(value: &'a Value) -> Self {
        Self(value)
    }

    fn missing(name: &str, what: &str) -> ToolError {
        ToolError::InvalidArguments(format!("`{name}` is required and must be {what}"))
    }

    /// A required, non-empty string.
    pub fn str(&self, name: &str) -> Result<&'a str, ToolError> {
        self.opt_str(name)
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| Self::missing(name, "a non-empty string"))
    }

    pub fn opt_str(&self, name: &str) -> Option<&'a str> {
        self.0.get(name).and_then(Value::as_str)
    }

    pub fn i64(&self, name: &str) -> Result<i64, ToolError> {
        self.opt_i64(name)
            .ok_or_else(|| Self::missing(name, "an integer"))
    }

    /// An integer, also accepted when the model wrote it as a string ("42").
    pub fn opt_i64(&self, name: &str) -> Option<i64> {
        match self.0.get(name)? {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub fn f64(&self, name: &str) -> Result<f64, ToolError> {
        self.opt_f64(name)
            .ok_or_else(|| Self::missing(name, "a number"))
    }

    pub fn opt_f64(&self, name: &str) -> Option<f64> {
        match self.0.get(name)? {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub fn opt_bool(&self, name: &str) -> Option<bool> {
        self.0.get(name).and_then(Value::as_bool)
    }

    /// A list of strings (absent: empty).
    pub fn strings(&self, name: &str) -> Vec<String> {
        match self.0.get(name) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            Some(Value::String(s)) => s
                .split(',')
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A required array (e.g. the items of a batch tool).
    pub fn array(&self, name: &str) -> Result<&'a Vec<Value>, ToolError> {
        self.0
            .get(name)
            .and_then(Value::as_array)
            .ok_or_else(|| Self::missing(name, "an array"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_values_and_explains_missing_ones() {
        let value = json!({"title": "milk", "n": "42", "x": 1.5, "tags": ["a", "b"], "csv": "c, d", "empty": " "});
        let args = Args::new(&value);
        assert_eq!(args.str("title").expect("title"), "milk");
        assert_eq!(args.opt_i64("n"), Some(42));
        assert_eq!(args.f64("x").expect("x"), 1.5);
        assert_eq!(args.strings("tags"), vec!["a", "b"]);
        assert_eq!(args.strings("csv"), vec!["c", "d"]);
        let err = args.str("empty").expect_err("blank");
        assert!(err.to_string().contains("`empty` is required"));
        assert!(args.array("tags").is_ok() && args.array("title").is_err());
    }
}
