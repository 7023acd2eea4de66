//! Randomness: UUIDs, passwords and random numbers, all from the thread-local CSPRNG
//! (`rand::rng()`, ChaCha seeded from the operating system).

use rand::seq::SliceRandom;
use rand::{Rng, RngCore};
use serde_json::{Value, json};

use super::{Args, ToolError, ToolInfo, number};

pub(super) fn uuid_info() -> ToolInfo {
    ToolInfo::new(
        "generate_uuid",
        "utilities",
        "Generate random (version 4) UUIDs.",
        json!({
            "type": "object",
            "properties": {
                "count": {"type": "integer", "minimum": 1, "maximum": 100, "description": "how many; default 1"},
                "uppercase": {"type": "boolean", "description": "upper-case hex digits; default false"}
            },
            "additionalProperties": false
        }),
    )
    .tags(&["guid", "identifier", "random", "id"])
}

pub(super) fn uuid(arguments: &Value) -> Result<String, ToolError> {
    let args = Args::new(arguments);
    let count = count(&args, 100)?;
    let upper = args.opt_bool("uppercase").unwrap_or(false);
    let mut rng = rand::rng();
    let uuids: Vec<String> = (0..count)
        .map(|_| {
            let text = uuid_v4(&mut rng);
            if upper { text.to_uppercase() } else { text }
        })
        .collect();
    Ok(json!({"uuids": uuids}).to_string())
}

fn uuid_v4(rng: &mut impl RngCore) -> String {
    let mut bytes = [0u8; 16];
    rng.fill_bytes(&mut bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex = super::encode::hex(&bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGITS: &str = "0123456789";
const SYMBOLS: &str = "!@#$%^&*()-_=+[]{};:,.<>/?~";
const AMBIGUOUS: &str = "0O1lI|";

pub(super) fn password_info() -> ToolInfo {
    ToolInfo::new(
        "generate_password",
        "utilities",
        "Generate strong random passwords with a CSPRNG; every chosen character class appears at least once.",
        json!({
            "type": "object",
            "properties": {
                "length": {"type": "integer", "minimum": 8, "maximum": 128, "description": "characters; default 16"},
                "uppercase": {"type": "boolean", "description": "include A-Z; default true"},
                "lowercase": {"type": "boolean", "description": "include a-z; default true"},
                "digits": {"type": "boolean", "description": "include 0-9; default true"},
                "symbols": {"type": "boolean", "description": "include symbols like !@#$%; default true"},
                "exclude_ambiguous": {"type": "boolean", "description": "leave out 0 O 1 l I |; default false"},
                "count": {"type": "integer", "minimum": 1, "maximum": 20, "description": "how many; default 1"}
            },
            "additionalProperties": false
        }),
    )
    .tags(&["passphrase", "secret", "random", "security"])
}

pub(super) fn password(arguments: &Value) -> Result<String, ToolError> {
    let args = Args::new(arguments);
    let length = args.opt_i64("length").unwrap_or(16);
    if !(8..=128).contains(&length) {
        return Err(ToolError::InvalidArguments(format!(
            "`length` must be from 8 to 128, got {length}"
        )));
    }
    let count = count(&args, 20)?;
    let ambiguous = args.opt_bool("exclude_ambiguous").unwrap_or(false);
    let classes: Vec<Vec<char>> = [
        ("lowercase", LOWER),
        ("uppercase", UPPER),
        ("digits", DIGITS),
        ("symbols", SYMBOLS),
    ]
    .iter()
    .filter(|(name, _)| args.opt_bool(name).unwrap_or(true))
    .map(|(_, chars)| {
        chars
            .chars()
            .filter(|c| !(ambiguous && AMBIGUOUS.contains(*c)))
            .collect()
    })
    .collect();
    if classes.is_empty() {
        return Err(ToolError::InvalidArguments(
            "choose at least one character class (uppercase, lowercase, digits, symbols)".into(),
        ));
    }
    let all: Vec<char> = classes.concat();
    let length = usize::try_from(length).unwrap_or(16);
    let mut rng = rand::rng();
    let passwords: Vec<String> = (0..count)
        .map(|_| {
            // One of each class first, the rest from all of them, then shuffled.
            let mut chars: Vec<char> = classes
                .iter()
                .map(|class| class[rng.random_range(0..class.len())])
                .collect();
            while chars.len() < length {
                chars.push(all[rng.random_range(0..all.len())]);
            }
            chars.shuffle(&mut rng);
            chars.into_iter().collect()
        })
        .collect();
    let entropy_bits = (length as f64 * (all.len() as f64).log2()).floor();
    Ok(json!({"passwords": passwords, "length": length, "entropy_bits": entropy_bits}).to_string())
}

pub(super) fn number_info() -> ToolInfo {
    ToolInfo::new(
        "random_number",
        "utilities",
        "Random numbers between min and max inclusive: integers (default) or decimals; e.g. dice rolls, picking a winner.",
        json!({
            "type": "object",
            "properties": {
                "min": {"type": "number", "description": "lowest value; default 1"},
                "max": {"type": "number", "description": "highest value; default 100"},
                "integer": {"type": "boolean", "description": "whole numbers; default true"},
                "count": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "how many; default 1"}
            },
            "additionalProperties": false
        }),
    )
    .tags(&["dice", "roll", "random", "pick", "lottery"])
}

pub(super) fn random_number(arguments: &Value) -> Result<String, ToolError> {
    let args = Args::new(arguments);
    let min = args.opt_f64("min").unwrap_or(1.0);
    let max = args.opt_f64("max").unwrap_or(100.0);
    let count = count(&args, 1000)?;
    if !min.is_finite() || !max.is_finite() {
        return Err(ToolError::InvalidArguments(
            "`min` and `max` must be finite numbers".into(),
        ));
    }
    if min > max {
        return Err(ToolError::InvalidArguments(format!(
            "`min` ({min}) is greater than `max` ({max})"
        )));
    }
    let mut rng = rand::rng();
    let numbers: Vec<Value> = if args.opt_bool("integer").unwrap_or(true) {
        const LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53: integers f64 carries exactly
        let (low, high) = (min.ceil(), max.floor());
        if low > high {
            return Err(ToolError::InvalidArguments(format!(
                "there is no whole number between {min} and {max}"
            )));
        }
        if low < -LIMIT || high > LIMIT {
            return Err(ToolError::InvalidArguments(
                "integer bounds must be within ±9007199254740992".into(),
            ));
        }
        let (low, high) = (low as i64, high as i64);
        (0..count)
            .map(|_| json!(rng.random_range(low..=high)))
            .collect()
    } else {
        (0..count)
            .map(|_| {
                let x = if min == max {
                    min
                } else {
                    rng.random_range(min..=max)
                };
                number(x)
            })
            .collect()
    };
    Ok(json!({"numbers": numbers, "min": number(min), "max": number(max)}).to_string())
}

/// The `count` argument: 1 by default, at most `max`.
fn count(args: &Args<'_>, max: i64) -> Result<usize, ToolError> {
    let count = args.opt_i64("count").unwrap_or(1);
    if !(1..=max).contains(&count) {
        return Err(ToolError::InvalidArguments(format!(
            "`count` must be from 1 to {max}, got {count}"
        )));
    }
    Ok(usize::try_from(count).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("json")
    }

    #[test]
    fn uuids_are_version_4_and_distinct() {
        let out = parse(&uuid(&json!({"count": 5})).expect("ok"));
        let uuids = out["uuids"].as_array().expect("array");
        assert_eq!(uuids.len(), 5);
        for id in uuids {
            let id = id.as_str().expect("text");
            assert_eq!(id.len(), 36);
            assert_eq!(&id[14..15], "4", "{id}");
            assert!("89ab".contains(&id[19..20]), "{id}");
        }
        let distinct: std::collections::HashSet<&str> =
            uuids.iter().filter_map(Value::as_str).collect();
        assert_eq!(distinct.len(), 5);
        assert!(uuid(&json!({"count": 0})).is_err());
        assert!(uuid(&json!({"count": 101})).is_err());
    }

    #[test]
    fn passwords_have_the_length_and_classes_asked_for() {
        let out = parse(&password(&json!({"length": 12, "count": 20})).expect("ok"));
        for pw in out["passwords"].as_array().expect("array") {
            let pw = pw.as_str().expect("text");
            assert_eq!(pw.chars().count(), 12);
            assert!(pw.chars().any(|c| c.is_ascii_lowercase()), "{pw}");
            assert!(pw.chars().any(|c| c.is_ascii_uppercase()), "{pw}");
            assert!(pw.chars().any(|c| c.is_ascii_digit()), "{pw}");
            assert!(pw.chars().any(|c| SYMBOLS.contains(c)), "{pw}");
        }
        let out = parse(
            &password(&json!({"length": 64, "symbols": false, "uppercase": false, "exclude_ambiguous": true}))
                .expect("ok"),
        );
        let pw = out["passwords"][0].as_str().expect("text");
        assert!(
            pw.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        assert!(!pw.contains(['0', '1', 'l']));
        assert!(password(&json!({"length": 7})).is_err());
        assert!(password(&json!({"length": 129})).is_err());
        let err = password(
            &json!({"uppercase": false, "lowercase": false, "digits": false, "symbols": false}),
        )
        .expect_err("no classes");
        assert!(err.to_string().contains("at least one character class"));
    }

    #[test]
    fn random_numbers_stay_within_bounds() {
        let out = parse(&random_number(&json!({"min": 1, "max": 6, "count": 200})).expect("ok"));
        for n in out["numbers"].as_array().expect("array") {
            let n = n.as_i64().expect("integer");
            assert!((1..=6).contains(&n));
        }
        let out = parse(
            &random_number(&json!({"min": 0.5, "max": 0.75, "integer": false, "count": 50}))
                .expect("ok"),
        );
        for n in out["numbers"].as_array().expect("array") {
            let n = n.as_f64().expect("number");
            assert!((0.5..=0.75).contains(&n));
        }
        let out = parse(&random_number(&json!({"min": 7, "max": 7})).expect("ok"));
        assert_eq!(out["numbers"], json!([7]));
        let err = random_number(&json!({"min": 10, "max": 1})).expect_err("reversed");
        assert!(err.to_string().contains("greater than"));
        let err = random_number(&json!({"min": 0.2, "max": 0.8})).expect_err("no integer");
        assert!(err.to_string().contains("no whole number"));
        assert!(random_number(&json!({"count": 1001})).is_err());
    }
}
