//! Randomness: UUIDs, passwords and random numbers, all from the thread-local CSPRNG
//! (`rand::rng()`, ChaCha seeded from the operating system).

use rand::seq::SliceRandom;
use rand::{Rng, RngCore};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{GROUP, number};
use crate::tool::typed::Within;
use crate::tool::{ToolContext, ToolError, TypedTool};

/// Generate random (version 4) UUIDs.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GenerateUuid {
    /// how many; default 1
    count: Option<Within<1, 100>>,
    /// upper-case hex digits; default false
    uppercase: Option<bool>,
}

impl TypedTool for GenerateUuid {
    const NAME: &'static str = "generate_uuid";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "guid, identifier, random, id";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        let upper = self.uppercase.unwrap_or(false);
        let mut rng = rand::rng();
        let uuids: Vec<String> = (0..self.count.map_or(1, Within::get))
            .map(|_| {
                let text = uuid_v4(&mut rng);
                if upper { text.to_uppercase() } else { text }
            })
            .collect();
        Ok(json!({"uuids": uuids}))
    }
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

/// Generate strong random passwords with a CSPRNG; every chosen character class appears at
/// least once.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GeneratePassword {
    /// characters; default 16
    length: Option<Within<8, 128>>,
    /// include A-Z; default true
    uppercase: Option<bool>,
    /// include a-z; default true
    lowercase: Option<bool>,
    /// include 0-9; default true
    digits: Option<bool>,
    /// include symbols like !@#$%; default true
    symbols: Option<bool>,
    /// leave out 0 O 1 l I |; default false
    exclude_ambiguous: Option<bool>,
    /// how many; default 1
    count: Option<Within<1, 20>>,
}

impl TypedTool for GeneratePassword {
    const NAME: &'static str = "generate_password";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "passphrase, secret, random, security";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        let length = self.length.map_or(16, Within::get);
        let ambiguous = self.exclude_ambiguous.unwrap_or(false);
        let classes: Vec<Vec<char>> = [
            (self.lowercase, LOWER),
            (self.uppercase, UPPER),
            (self.digits, DIGITS),
            (self.symbols, SYMBOLS),
        ]
        .iter()
        .filter(|(wanted, _)| wanted.unwrap_or(true))
        .map(|(_, chars)| {
            chars
                .chars()
                .filter(|c| !(ambiguous && AMBIGUOUS.contains(*c)))
                .collect()
        })
        .collect();
        if classes.is_empty() {
            return Err(ToolError::InvalidArguments(
                "choose at least one character class (uppercase, lowercase, digits, symbols)"
                    .into(),
            ));
        }
        let all: Vec<char> = classes.concat();
        let mut rng = rand::rng();
        let passwords: Vec<String> = (0..self.count.map_or(1, Within::get))
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
        Ok(json!({"passwords": passwords, "length": length, "entropy_bits": entropy_bits}))
    }
}

/// Random numbers between min and max inclusive: integers (default) or decimals; e.g. dice
/// rolls, picking a winner.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RandomNumber {
    /// lowest value; default 1
    min: Option<f64>,
    /// highest value; default 100
    max: Option<f64>,
    /// whole numbers; default true
    integer: Option<bool>,
    /// how many; default 1
    count: Option<Within<1, 1000>>,
}

impl TypedTool for RandomNumber {
    const NAME: &'static str = "random_number";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "dice, roll, random, pick, lottery";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        let min = self.min.unwrap_or(1.0);
        let max = self.max.unwrap_or(100.0);
        let count = self.count.map_or(1, Within::get);
        if min > max {
            return Err(ToolError::InvalidArguments(format!(
                "`min` ({min}) is greater than `max` ({max})"
            )));
        }
        let mut rng = rand::rng();
        let numbers: Vec<Value> = if self.integer.unwrap_or(true) {
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
        Ok(json!({"numbers": numbers, "min": number(min), "max": number(max)}))
    }
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;

    #[tokio::test]
    async fn uuids_are_version_4_and_distinct() {
        let out = call("generate_uuid", json!({"count": 5}))
            .await
            .expect("ok");
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
        assert!(call("generate_uuid", json!({"count": 0})).await.is_err());
        assert!(call("generate_uuid", json!({"count": 101})).await.is_err());
    }

    #[tokio::test]
    async fn passwords_have_the_length_and_classes_asked_for() {
        let out = call("generate_password", json!({"length": 12, "count": 20}))
            .await
            .expect("ok");
        for pw in out["passwords"].as_array().expect("array") {
            let pw = pw.as_str().expect("text");
            assert_eq!(pw.chars().count(), 12);
            assert!(pw.chars().any(|c| c.is_ascii_lowercase()), "{pw}");
            assert!(pw.chars().any(|c| c.is_ascii_uppercase()), "{pw}");
            assert!(pw.chars().any(|c| c.is_ascii_digit()), "{pw}");
            assert!(pw.chars().any(|c| SYMBOLS.contains(c)), "{pw}");
        }
        let out = call(
            "generate_password",
            json!({"length": 64, "symbols": false, "uppercase": false, "exclude_ambiguous": true}),
        )
        .await
        .expect("ok");
        let pw = out["passwords"][0].as_str().expect("text");
        assert!(
            pw.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        assert!(!pw.contains(['0', '1', 'l']));
        let err = call("generate_password", json!({"length": 7}))
            .await
            .expect_err("too short");
        assert!(
            err.to_string()
                .contains("`length`: must be from 8 to 128, got 7"),
            "{err}"
        );
        assert!(
            call("generate_password", json!({"length": 129}))
                .await
                .is_err()
        );
        let err = call(
            "generate_password",
            json!({"uppercase": false, "lowercase": false, "digits": false, "symbols": false}),
        )
        .await
        .expect_err("no classes");
        assert!(err.to_string().contains("at least one character class"));
    }

    #[tokio::test]
    async fn random_numbers_stay_within_bounds() {
        let out = call("random_number", json!({"min": 1, "max": 6, "count": 200}))
            .await
            .expect("ok");
        for n in out["numbers"].as_array().expect("array") {
            let n = n.as_i64().expect("integer");
            assert!((1..=6).contains(&n));
        }
        let out = call(
            "random_number",
            json!({"min": 0.5, "max": 0.75, "integer": false, "count": 50}),
        )
        .await
        .expect("ok");
        for n in out["numbers"].as_array().expect("array") {
            let n = n.as_f64().expect("number");
            assert!((0.5..=0.75).contains(&n));
        }
        let out = call("random_number", json!({"min": 7, "max": 7}))
            .await
            .expect("ok");
        assert_eq!(out["numbers"], json!([7]));
        let err = call("random_number", json!({"min": 10, "max": 1}))
            .await
            .expect_err("reversed");
        assert!(err.to_string().contains("greater than"));
        let err = call("random_number", json!({"min": 0.2, "max": 0.8}))
            .await
            .expect_err("no integer");
        assert!(err.to_string().contains("no whole number"));
        assert!(call("random_number", json!({"count": 1001})).await.is_err());
    }
}
