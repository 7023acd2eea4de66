//! Text tools: counting, case and shape transforms, and regular expressions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{GROUP, Input};
use crate::tool::typed::Within;
use crate::tool::{ToolContext, ToolError, TypedTool};

/// Longest text accepted, in bytes.
const MAX_TEXT: usize = 1024 * 1024;
/// Longest text `regex_test` searches, in bytes; the `regex` crate is linear-time, this bounds
/// the constant.
const MAX_REGEX_TEXT: usize = 100 * 1024;
const MAX_PATTERN: usize = 1000;
/// Words a minute for reading time.
const READING_WPM: f64 = 200.0;

/// Count characters (with and without spaces), bytes, words, lines, sentences and paragraphs of
/// a text, and estimate its reading time.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TextStats {
    /// the text to count
    text: Input<MAX_TEXT>,
}

impl TypedTool for TextStats {
    const NAME: &'static str = "text_stats";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "count, words, characters, length, reading time, word count";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        let text = self.text.0.as_str();
        let words = text.split_whitespace().count();
        let minutes = words as f64 / READING_WPM;
        let reading = if words == 0 {
            "no reading time".to_string()
        } else if minutes < 1.0 {
            format!("about {} seconds", ((minutes * 60.0).round() as i64).max(1))
        } else {
            format!("about {} min", minutes.round() as i64)
        };
        Ok(json!({
            "characters": text.chars().count(),
            "characters_no_spaces": text.chars().filter(|c| !c.is_whitespace()).count(),
            "bytes": text.len(),
            "words": words,
            "lines": text.lines().count(),
            "sentences": sentences(text),
            "paragraphs": text.split("\n\n").filter(|p| !p.trim().is_empty()).count(),
            "reading_time_minutes": (minutes * 10.0).round() / 10.0,
            "reading_time": reading,
        }))
    }
}

/// Sentences: runs of text ended by `.`, `!` or `?` (a run of them counts once) followed by
/// whitespace or the end; trailing text without an ending counts too.
fn sentences(text: &str) -> usize {
    let mut count = 0;
    let mut in_sentence = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if matches!(c, '.' | '!' | '?' | '…') {
            while chars
                .peek()
                .is_some_and(|n| matches!(n, '.' | '!' | '?' | '…' | '"' | '\'' | ')'))
            {
                chars.next();
            }
            if in_sentence && chars.peek().is_none_or(|n| n.is_whitespace()) {
                count += 1;
                in_sentence = false;
            }
        } else if c.is_alphanumeric() {
            in_sentence = true;
        }
    }
    count + usize::from(in_sentence)
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema)]
enum Operation {
    #[serde(rename = "upper")]
    Upper,
    #[serde(rename = "lower")]
    Lower,
    #[serde(rename = "title")]
    Title,
    #[serde(rename = "sentence")]
    Sentence,
    #[serde(rename = "snake_case")]
    Snake,
    #[serde(rename = "camelCase")]
    Camel,
    #[serde(rename = "PascalCase")]
    Pascal,
    #[serde(rename = "kebab-case")]
    Kebab,
    #[serde(rename = "CONSTANT_CASE")]
    Constant,
    #[serde(rename = "reverse")]
    Reverse,
    #[serde(rename = "trim")]
    Trim,
    #[serde(rename = "slugify")]
    Slugify,
}

/// Change a text's case or shape: upper, lower, title, sentence, snake_case, camelCase,
/// PascalCase, kebab-case, CONSTANT_CASE, reverse, trim (also collapses inner whitespace),
/// slugify (for URLs).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TransformText {
    /// the text to transform
    text: Input<MAX_TEXT>,
    operation: Operation,
}

impl TypedTool for TransformText {
    const NAME: &'static str = "transform_text";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "case, uppercase, lowercase, slug, capitalize, convert";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        let result = transform(&self.text.0, self.operation);
        Ok(json!({"operation": self.operation, "result": result}))
    }
}

fn transform(text: &str, operation: Operation) -> String {
    let capitalise = |word: &str| {
        let mut chars = word.chars();
        chars.next().map_or(String::new(), |first| {
            first
                .to_uppercase()
                .chain(chars.flat_map(char::to_lowercase))
                .collect()
        })
    };
    let words = || split_words(text);
    match operation {
        Operation::Upper => text.to_uppercase(),
        Operation::Lower => text.to_lowercase(),
        Operation::Title => {
            // Keeps the original spacing and punctuation; capitalises each word.
            let mut out = String::with_capacity(text.len());
            let mut start = true;
            for c in text.chars() {
                if c.is_alphanumeric() || c == '\'' {
                    if start {
                        out.extend(c.to_uppercase());
                    } else {
                        out.extend(c.to_lowercase());
                    }
                    start = false;
                } else {
                    out.push(c);
                    start = true;
                }
            }
            out
        }
        Operation::Sentence => {
            let lower = text.trim().to_lowercase();
            capitalise_first(&lower)
        }
        Operation::Snake => words().join("_"),
        Operation::Kebab => words().join("-"),
        Operation::Constant => words().join("_").to_uppercase(),
        Operation::Camel => {
            let words = words();
            let mut out = words.first().cloned().unwrap_or_default();
            out.extend(words.iter().skip(1).map(|w| capitalise(w)));
            out
        }
        Operation::Pascal => words().iter().map(|w| capitalise(w)).collect(),
        Operation::Reverse => text.chars().rev().collect(),
        Operation::Trim => text.split_whitespace().collect::<Vec<_>>().join(" "),
        Operation::Slugify => slugify(text),
    }
}

fn capitalise_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or(String::new(), |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// Lower-case words, split at anything not a letter or digit and at case changes
/// (`parseHTTPResponse2` -> parse, http, response2).
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        if c.is_uppercase() && !current.is_empty() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_lower) {
                words.push(std::mem::take(&mut current));
            }
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// A URL slug: lower case, common accents folded to ASCII, everything else between words a
/// single `-`.
fn slugify(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut dash = false;
    for c in text.chars().flat_map(char::to_lowercase) {
        let folded = fold_accent(c);
        let piece: &str = match folded {
            Some(ascii) => ascii,
            None if c.is_alphanumeric() => {
                if dash && !out.is_empty() {
                    out.push('-');
                }
                dash = false;
                out.push(c);
                continue;
            }
            None => {
                dash = true;
                continue;
            }
        };
        if dash && !out.is_empty() {
            out.push('-');
        }
        dash = false;
        out.push_str(piece);
    }
    out
}

fn fold_accent(c: char) -> Option<&'static str> {
    Some(match c {
        'a'..='z' | '0'..='9' => return None,
        'à' | 'á' | 'â' | 'ã' | 'å' | 'ā' | 'ą' => "a",
        'ä' | 'æ' => "ae",
        'ç' | 'ć' | 'č' => "c",
        'ď' | 'đ' | 'ð' => "d",
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ę' | 'ě' => "e",
        'ì' | 'í' | 'î' | 'ï' | 'ī' => "i",
        'ł' => "l",
        'ñ' | 'ń' | 'ň' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ø' | 'ō' => "o",
        'ö' | 'œ' => "oe",
        'ř' => "r",
        'ś' | 'š' | 'ş' => "s",
        'ß' => "ss",
        'ť' | 'ţ' => "t",
        'þ' => "th",
        'ù' | 'ú' | 'û' | 'ů' | 'ū' => "u",
        'ü' => "ue",
        'ý' | 'ÿ' => "y",
        'ź' | 'ż' | 'ž' => "z",
        _ => return None,
    })
}

/// Test a regular expression (Rust regex syntax: no look-around or backreferences) against a
/// text: matches with positions and capture groups, optionally the text with matches replaced
/// ($1, ${name}).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RegexTest {
    /// the regular expression
    #[schemars(length(max = MAX_PATTERN))]
    pattern: String,
    /// the text to search (at most 100 KB)
    text: Input<MAX_REGEX_TEXT>,
    /// any of i (ignore case), m (^ $ per line), s (. matches newline), x (verbose)
    flags: Option<String>,
    /// if given, also return the text with every match replaced
    replacement: Option<String>,
    /// matches listed; default 100
    max_matches: Option<Within<1, 1000>>,
}

impl TypedTool for RegexTest {
    const NAME: &'static str = "regex_test";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "regexp, pattern, match, search, replace";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        self.test()
    }
}

impl RegexTest {
    fn test(self) -> Result<Value, ToolError> {
        let pattern = self.pattern.as_str();
        if pattern.is_empty() {
            return Err(ToolError::InvalidArguments("`pattern` is empty".into()));
        }
        if pattern.len() > MAX_PATTERN {
            return Err(ToolError::InvalidArguments(format!(
                "`pattern` is longer than {MAX_PATTERN} characters"
            )));
        }
        let text = self.text.0.as_str();
        let max = self.max_matches.map_or(100, Within::get);
        let mut builder = regex::RegexBuilder::new(pattern);
        builder.size_limit(1 << 20).dfa_size_limit(1 << 22);
        for flag in self.flags.as_deref().unwrap_or("").chars() {
            match flag {
                'i' => builder.case_insensitive(true),
                'm' => builder.multi_line(true),
                's' => builder.dot_matches_new_line(true),
                'x' => builder.ignore_whitespace(true),
                'g' | 'u' | ' ' | ',' => &mut builder, // JavaScript habits: all matches are listed anyway
                other => {
                    return Err(ToolError::InvalidArguments(format!(
                        "unknown flag {other:?}; use i, m, s or x"
                    )));
                }
            };
        }
        let regex = builder
            .build()
            .map_err(|e| ToolError::InvalidArguments(format!("invalid pattern: {e}")))?;
        let names: Vec<Option<&str>> = regex.capture_names().collect();
        let mut matches = Vec::new();
        let mut total = 0;
        // Character offsets are computed incrementally so many matches stay linear.
        let (mut byte_pos, mut char_pos) = (0, 0);
        let mut char_at = |byte: usize| {
            char_pos += text[byte_pos..byte].chars().count();
            byte_pos = byte;
            char_pos
        };
        for caps in regex.captures_iter(text) {
            total += 1;
            if matches.len() >= max {
                continue;
            }
            let Some(whole) = caps.get(0) else { continue };
            let mut groups = Vec::new();
            let mut named = Map::new();
            for (i, name) in names.iter().enumerate().skip(1) {
                let value = caps.get(i).map(|m| m.as_str());
                groups.push(json!(value));
                if let Some(name) = name {
                    named.insert((*name).to_string(), json!(value));
                }
            }
            let start = char_at(whole.start());
            let end = char_at(whole.end());
            let mut entry =
                json!({"match": whole.as_str(), "start": start, "end": end, "groups": groups});
            if !named.is_empty() {
                entry["named"] = Value::Object(named);
            }
            matches.push(entry);
        }
        let mut out = json!({
            "matched": total > 0,
            "count": total,
            "matches": matches,
            "listed": matches.len(),
        });
        if let Some(replacement) = &self.replacement {
            out["replaced"] = json!(regex.replace_all(text, replacement.as_str()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;

    #[tokio::test]
    async fn counts_words_lines_and_sentences() {
        let out = call(
            "text_stats",
            json!({"text": "Hello world. How are you?\nFine!\n\nNew paragraph"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["words"], 8);
        assert_eq!(out["lines"], 4);
        assert_eq!(out["sentences"], 4);
        assert_eq!(out["paragraphs"], 2);
        assert_eq!(out["characters"], 46);
        assert_eq!(out["reading_time"], "about 2 seconds");
        let out = call("text_stats", json!({"text": "word ".repeat(1000)}))
            .await
            .expect("ok");
        assert_eq!(out["reading_time"], "about 5 min");
        assert_eq!(out["reading_time_minutes"], 5.0);
        let out = call("text_stats", json!({"text": "Dr. Who... is here!! ok"}))
            .await
            .expect("ok");
        assert_eq!(out["sentences"], 4, "naive but stable");
        let out = call("text_stats", json!({"text": ""})).await.expect("ok");
        assert_eq!(out["words"], 0);
        assert_eq!(out["sentences"], 0);
        assert!(call("text_stats", json!({})).await.is_err());
    }

    #[tokio::test]
    async fn transforms_case_and_shape() {
        let t = async |text: &str, op: &str| {
            call("transform_text", json!({"text": text, "operation": op}))
                .await
                .expect("ok")["result"]
                .as_str()
                .expect("text")
                .to_string()
        };
        assert_eq!(t("Hello World", "upper").await, "HELLO WORLD");
        assert_eq!(t("Hello World", "lower").await, "hello world");
        assert_eq!(
            t("the QUICK brown-fox", "title").await,
            "The Quick Brown-Fox"
        );
        assert_eq!(t("HELLO there. ok", "sentence").await, "Hello there. ok");
        assert_eq!(
            t("parseHTTPResponse now", "snake_case").await,
            "parse_http_response_now"
        );
        assert_eq!(t("Hello big World", "camelCase").await, "helloBigWorld");
        assert_eq!(t("hello_big world", "PascalCase").await, "HelloBigWorld");
        assert_eq!(t("Hello Big World", "kebab-case").await, "hello-big-world");
        assert_eq!(
            t("max retry count", "CONSTANT_CASE").await,
            "MAX_RETRY_COUNT"
        );
        assert_eq!(t("abc ü", "reverse").await, "ü cba");
        assert_eq!(t("  a \n  b  ", "trim").await, "a b");
        assert_eq!(
            t("Crème Brûlée & Straße: 2024!", "slugify").await,
            "creme-brulee-strasse-2024"
        );
        assert_eq!(t("version2Beta", "snake_case").await, "version2_beta");
        let err = call("transform_text", json!({"text": "x", "operation": "shout"}))
            .await
            .expect_err("op");
        assert!(
            err.to_string()
                .contains("`operation`: unknown variant `shout`"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn regex_lists_matches_groups_and_replacements() {
        let out = call(
            "regex_test",
            json!({
                "pattern": r"(?P<year>\d{4})-(\d{2})",
                "text": "née 2024-05, then 2025-11",
                "replacement": "$2/${year}",
            }),
        )
        .await
        .expect("ok");
        assert_eq!(out["count"], 2);
        assert_eq!(out["matches"][0]["match"], "2024-05");
        assert_eq!(out["matches"][0]["start"], 4, "character offset, not byte");
        assert_eq!(out["matches"][0]["groups"], json!(["2024", "05"]));
        assert_eq!(out["matches"][1]["named"]["year"], "2025");
        assert_eq!(out["replaced"], "née 05/2024, then 11/2025");
        let out = call(
            "regex_test",
            json!({"pattern": "^b", "text": "a\nB", "flags": "im"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["matched"], true);
        let out = call(
            "regex_test",
            json!({"pattern": "a", "text": "aaaa", "max_matches": 2}),
        )
        .await
        .expect("ok");
        assert_eq!(
            (out["count"].as_i64(), out["listed"].as_i64()),
            (Some(4), Some(2))
        );
        let out = call("regex_test", json!({"pattern": "z", "text": "abc"}))
            .await
            .expect("ok");
        assert_eq!(out["matched"], false);
    }

    #[tokio::test]
    async fn regex_errors_are_clear() {
        let err = call("regex_test", json!({"pattern": "(unclosed", "text": "x"}))
            .await
            .expect_err("pattern");
        assert!(err.to_string().contains("invalid pattern"), "{err}");
        let err = call("regex_test", json!({"pattern": "(?=x)", "text": "x"}))
            .await
            .expect_err("lookahead");
        assert!(err.to_string().contains("invalid pattern"));
        let err = call(
            "regex_test",
            json!({"pattern": "a", "text": "x", "flags": "q"}),
        )
        .await
        .expect_err("flag");
        assert!(err.to_string().contains("unknown flag"));
        let big = "a".repeat(MAX_REGEX_TEXT + 1);
        let err = call("regex_test", json!({"pattern": "a", "text": big}))
            .await
            .expect_err("size");
        assert!(err.to_string().contains("longer than"));
        let err = call(
            "regex_test",
            json!({"pattern": "a{1000}{1000}", "text": "a"}),
        )
        .await
        .expect_err("huge");
        assert!(err.to_string().contains("invalid pattern"), "{err}");
    }
}
