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

    /// An integer, also accepted as `42.0` or `"42"` (see [`whole_number`]).
    pub fn opt_i64(&self, name: &str) -> Option<i64> {
        whole_number(self.0.get(name)?).ok()
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

/// A whole number as models write counts and limits: `10`, `10.0` or `"10"`. The one lenient
/// reading of such arguments, for the hand-read tools ([`Args::opt_i64`]) and the typed ones
/// ([`Count`](super::typed::Count)); anything else is refused, saying what was expected.
pub fn whole_number(value: &Value) -> Result<i64, String> {
    let number = match value {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().and_then(integral)),
        Value::String(s) => {
            let s = s.trim();
            s.parse::<i64>()
                .ok()
                .or_else(|| s.parse::<f64>().ok().and_then(integral))
        }
        _ => None,
    };
    number.ok_or_else(|| format!("expected a whole number such as 10, got {value}"))
}

/// `f` when it is a whole number within i64.
fn integral(f: f64) -> Option<i64> {
    // 2^63 as f64 is exact; anything at or beyond it does not fit.
    (f.fract() == 0.0 && f.abs() < 9_223_372_036_854_775_808.0).then_some(f as i64)
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

    #[test]
    fn whole_numbers_are_read_leniently_and_the_rest_refused() {
        for ok in [
            json!(10),
            json!(10.0),
            json!("10"),
            json!(" 10 "),
            json!("10.0"),
        ] {
            assert_eq!(whole_number(&ok), Ok(10), "{ok}");
        }
        assert_eq!(whole_number(&json!(-3)), Ok(-3));
        for bad in [
            json!(10.5),
            json!("ten"),
            json!(""),
            json!(true),
            json!(null),
            json!([10]),
            json!(1e300),
        ] {
            let err = whole_number(&bad).expect_err("refused");
            assert!(err.starts_with("expected a whole number"), "{bad}: {err}");
        }
    }
}
