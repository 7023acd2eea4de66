//! Finding, reading and checking the configuration: TOML syntax, then environment overrides, then
//! the shape of every section, then the meaning of the values. Every problem found is collected
//! and reported with its source, dotted key and reason, so one `hearth check` shows them all.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;
use toml::{Table, Value};

use super::{Config, ProviderConfig, ScheduleConfig, validate};

/// Where the configuration is looked for when neither `--config` nor `$HEARTH_CONFIG` names a
/// file, in order. When none exists the defaults are used, so `hearth chat` works with no setup.
const DEFAULT_PATHS: [&str; 2] = ["./hearth.toml", "/etc/hearth/hearth.toml"];

/// The `source` of errors when no file was found and only defaults and the environment apply.
const DEFAULTS_ORIGIN: &str = "built-in defaults";

/// The environment variable naming the configuration file.
const CONFIG_VAR: &str = "HEARTH_CONFIG";

/// One problem in the configuration, e.g.
/// `hearth.toml: providers[1].fallbacks: unknown provider `gpt``.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file path, or `environment HEARTH_X__Y` when an override supplied the value.
    pub source: String,
    /// Dotted key such as `channels.telegram.allowed_users[0]`; empty when the problem is the
    /// whole file (it is missing, unreadable or not TOML).
    pub key: String,
    /// What is wrong, for a person to read.
    pub message: String,
}

impl ConfigError {
    /// An error of the shape every configuration check reports, for checks made elsewhere (the
    /// agents file cross-checks) so that `hearth check` prints them all alike.
    pub fn new(
        source: impl Into<String>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            source: source.into(),
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.source, self.message)
        } else {
            write!(f, "{}: {}: {}", self.source, self.key, self.message)
        }
    }
}

// Written by hand rather than with thiserror: thiserror would take the field named `source`
// (a String, part of the user-facing contract) for the error's cause.
impl std::error::Error for ConfigError {}

/// Every problem found in one configuration, in the order they were found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The individual errors.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }

    /// How many errors there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none (a `ConfigErrors` returned by this module never is).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        Self(vec![error])
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// A checked configuration and the file it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedConfig {
    pub config: Config,
    /// `None` when no file was found and the defaults (plus environment overrides) are in use.
    pub path: Option<PathBuf>,
}

/// Finds, reads, overrides from the process environment and checks the configuration.
///
/// The file is `explicit` (`--config`; an error if it does not exist), else `$HEARTH_CONFIG`,
/// else `./hearth.toml`, else `/etc/hearth/hearth.toml`, else none at all: the defaults.
pub fn load(explicit: Option<&Path>) -> Result<LoadedConfig, ConfigErrors> {
    // Variables that are not valid UTF-8 cannot be hearth settings or secret names; skip them
    // rather than panic as `std::env::vars` would.
    let env: HashMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let candidates: Vec<PathBuf> = DEFAULT_PATHS.iter().map(PathBuf::from).collect();
    load_with(explicit, &env, &candidates)
}

/// [`load`] with the environment and the default locations given, for tests.
fn load_with(
    explicit: Option<&Path>,
    env: &HashMap<String, String>,
    candidates: &[PathBuf],
) -> Result<LoadedConfig, ConfigErrors> {
    let Some(path) = find_file(explicit, env, candidates)? else {
        let config = load_from_str("", DEFAULTS_ORIGIN, env)?;
        return Ok(LoadedConfig { config, path: None });
    };
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(&path)
        .map_err(|err| ConfigError::new(&origin, "", format!("cannot read the file: {err}")))?;
    let config = load_from_str(&text, &origin, env)?;
    Ok(LoadedConfig {
        config,
        path: Some(path),
    })
}

/// The configuration file to read, or `None` for the defaults.
fn find_file(
    explicit: Option<&Path>,
    env: &HashMap<String, String>,
    candidates: &[PathBuf],
) -> Result<Option<PathBuf>, ConfigError> {
    // A file the user named must exist: silently falling back to defaults would hide a typo.
    let named = match explicit {
        Some(path) => Some((path.to_path_buf(), "given with --config")),
        None => env
            .get(CONFIG_VAR)
            .filter(|p| !p.is_empty())
            .map(|p| (PathBuf::from(p), "named by $HEARTH_CONFIG")),
    };
    if let Some((path, how)) = named {
        if path.exists() {
            return Ok(Some(path));
        }
        return Err(ConfigError::new(
            path.display().to_string(),
            "",
            format!("file not found ({how})"),
        ));
    }
    Ok(candidates.iter().find(|p| p.is_file()).cloned())
}

/// Parses and checks configuration text: `origin` names it in errors (usually the file path) and
/// `env` supplies both the `HEARTH_…__…` overrides and the secrets the `*_env` keys name.
pub fn load_from_str(
    text: &str,
    origin: &str,
    env: &HashMap<String, String>,
) -> Result<Config, ConfigErrors> {
    let mut root = match toml::from_str::<Table>(text) {
        Ok(table) => Value::Table(table),
        // Past a syntax error nothing else can be trusted, so it is the only error reported.
        Err(err) => return Err(syntax_error(text, origin, &err).into()),
    };

    let mut errors = Vec::new();
    let overrides = apply_overrides(&mut root, env, &mut errors);
    let Value::Table(table) = root else {
        unreachable!("the root stays the table it was built as")
    };

    let mut problems = Vec::new();
    let (config, unparsed_providers) = parse_sections(table, &mut problems);
    problems.extend(validate::validate(&config, env, &unparsed_providers));

    errors.extend(problems.into_iter().map(|p| {
        let source = source_of(&p.key, origin, &overrides);
        ConfigError::new(source, p.key, p.message)
    }));
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors(errors))
    }
}

/// A problem at a key, before it is known whether the file or an override supplied the value.
#[derive(Debug)]
pub(super) struct Problem {
    pub key: String,
    pub message: String,
}

impl Problem {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

fn syntax_error(text: &str, origin: &str, err: &toml::de::Error) -> ConfigError {
    let message = err.message().trim_end();
    let Some(span) = err.span() else {
        return ConfigError::new(origin, "", format!("TOML syntax error: {message}"));
    };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    ConfigError::new(
        origin,
        "",
        format!("TOML syntax error at line {line}, column {column}: {message}"),
    )
}

// ---------------------------------------------------------------------------------------------
// Environment overrides

/// A key whose value came from an environment variable, so its errors name the variable.
struct Override {
    key: String,
    var: String,
}

/// Applies every `HEARTH_A__B__C=value` variable to the key `a.b.c`, creating missing tables
/// (and array elements at the next index), and returns which keys were overridden.
fn apply_overrides(
    root: &mut Value,
    env: &HashMap<String, String>,
    errors: &mut Vec<ConfigError>,
) -> Vec<Override> {
    let mut vars: Vec<(Vec<String>, &String, &String)> = env
        .iter()
        .filter_map(|(var, value)| {
            let path = var.strip_prefix("HEARTH_")?;
            path.contains("__").then(|| {
                let segments = path.split("__").map(str::to_lowercase).collect();
                (segments, var, value)
            })
        })
        .collect();
    // Indexes compare as numbers so `…__2__…` creates element 2 before `…__10__…` needs it.
    vars.sort_by_cached_key(|(segments, _, _)| {
        segments
            .iter()
            .map(|s| (s.parse::<usize>().ok(), s.clone()))
            .collect::<Vec<_>>()
    });

    let mut overrides = Vec::new();
    for (segments, var, raw) in vars {
        match set_path(root, &segments, raw) {
            Ok(key) => overrides.push(Override {
                key,
                var: var.clone(),
            }),
            Err(problem) => errors.push(ConfigError::new(
                format!("environment {var}"),
                problem.key,
                problem.message,
            )),
        }
    }
    overrides
}

/// Sets the value at `segments` and returns its dotted key.
fn set_path(root: &mut Value, segments: &[String], raw: &str) -> Result<String, Problem> {
    let mut key = String::new();
    let mut node = root;
    for (i, segment) in segments.iter().enumerate() {
        if segment.is_empty() {
            return Err(Problem::new(
                key,
                "empty key segment: `__` must separate two key names",
            ));
        }
        let last = i + 1 == segments.len();
        let next_is_index = segments
            .get(i + 1)
            .is_some_and(|s| s.parse::<usize>().is_ok());
        let fresh = || {
            if next_is_index {
                Value::Array(Vec::new())
            } else {
                Value::Table(Table::new())
            }
        };
        node = match node {
            Value::Table(table) => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(segment);
                if last {
                    let value = parse_value(raw, table.get(segment));
                    table.insert(segment.clone(), value);
                    return Ok(key);
                }
                table.entry(segment.clone()).or_insert_with(fresh)
            }
            Value::Array(array) => {
                let Ok(index) = segment.parse::<usize>() else {
                    return Err(Problem::new(
                        key,
                        format!("this is an array: expected an index, found `{segment}`"),
                    ));
                };
                if index > array.len() {
                    return Err(Problem::new(
                        key,
                        format!(
                            "index {index} is past the end: the array has {} element(s), so the next new one is {}",
                            array.len(),
                            array.len()
                        ),
                    ));
                }
                key.push_str(&format!("[{index}]"));
                if index == array.len() {
                    array.push(if last { parse_value(raw, None) } else { fresh() });
                    if last {
                        return Ok(key);
                    }
                } else if last {
                    array[index] = parse_value(raw, Some(&array[index]));
                    return Ok(key);
                }
                &mut array[index]
            }
            other => {
                return Err(Problem::new(
                    key,
                    format!(
                        "this is {}, not a table, so `{segment}` cannot be set inside it",
                        value_kind(other)
                    ),
                ));
            }
        };
    }
    Err(Problem::new(key, "no key named"))
}

/// An override's value: a TOML value when it parses as one (`42`, `true`, `[1, 2]`, `"x"`), else
/// the text as a string. A key that already holds a string keeps getting strings, so a model
/// named `4` or a token variable named `123` is not turned into a number.
fn parse_value(raw: &str, existing: Option<&Value>) -> Value {
    let parsed = toml::from_str::<Table>(&format!("v = {raw}"))
        .ok()
        .filter(|t| t.len() == 1)
        .and_then(|mut t| t.remove("v"));
    match (parsed, existing) {
        (Some(Value::String(s)), _) => Value::String(s),
        (_, Some(Value::String(_))) => Value::String(raw.to_string()),
        // No hearth key is a date; `2024-01-01` is more likely meant as text.
        (Some(Value::Datetime(_)), _) | (None, _) => Value::String(raw.to_string()),
        (Some(value), _) => value,
    }
}

/// The source to name for an error at `key`: the variable that set it (or a table above it),
/// else the file.
fn source_of(key: &str, origin: &str, overrides: &[Override]) -> String {
    overrides
        .iter()
        .filter(|o| {
            key == o.key
                || key
                    .strip_prefix(&o.key)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
        .max_by_key(|o| o.key.len())
        .map_or_else(|| origin.to_string(), |o| format!("environment {}", o.var))
}

// ---------------------------------------------------------------------------------------------
// Sections

const TOP_KEYS: &[&str] = &[
    "daemon",
    "providers",
    "router",
    "runtime",
    "channels",
    "schedules",
];
const CHANNEL_KEYS: &[&str] = &["telegram", "discord", "matrix", "email"];

/// Deserializes each section, and each element of `providers` and `schedules`, on its own so
/// that a mistake in one does not hide a mistake in another. A section that fails keeps its
/// default. Also returns the names of providers that failed, so fallbacks naming them are not
/// reported a second time as unknown.
fn parse_sections(table: Table, problems: &mut Vec<Problem>) -> (Config, Vec<String>) {
    let mut config = Config::default();
    let mut unparsed_providers = Vec::new();
    for (name, value) in table {
        match name.as_str() {
            "daemon" => {
                if let Some(daemon) = section(value, "daemon", problems) {
                    config.daemon = daemon;
                }
            }
            "router" => {
                if let Some(router) = section(value, "router", problems) {
                    config.router = router;
                }
            }
            "runtime" => {
                if let Some(runtime) = section(value, "runtime", problems) {
                    config.runtime = runtime;
                }
            }
            "providers" => {
                config.providers = elements::<ProviderConfig>(value, "providers", problems, |raw| {
                    if let Some(name) = raw.get("name").and_then(Value::as_str) {
                        unparsed_providers.push(name.to_string());
                    }
                });
            }
            "schedules" => {
                config.schedules =
                    elements::<ScheduleConfig>(value, "schedules", problems, |_| {});
            }
            "channels" => {
                let Value::Table(channels) = value else {
                    problems.push(wrong_kind("channels", "a table", &value));
                    continue;
                };
                for (channel, value) in channels {
                    let key = format!("channels.{channel}");
                    let slot = &mut config.channels;
                    match channel.as_str() {
                        "telegram" => slot.telegram = section(value, &key, problems),
                        "discord" => slot.discord = section(value, &key, problems),
                        "matrix" => slot.matrix = section(value, &key, problems),
                        "email" => slot.email = section(value, &key, problems),
                        _ => problems.push(unknown_key(&key, &channel, CHANNEL_KEYS)),
                    }
                }
            }
            _ => problems.push(unknown_key(&name, &name, TOP_KEYS)),
        }
    }
    (config, unparsed_providers)
}

/// Deserializes one section, recording the first problem inside it with its full key.
fn section<T: DeserializeOwned>(value: Value, key: &str, problems: &mut Vec<Problem>) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(parsed) => Some(parsed),
        Err(err) => {
            let mut full_key = key.to_string();
            for segment in err.path().iter() {
                match segment {
                    Segment::Seq { index } => full_key.push_str(&format!("[{index}]")),
                    Segment::Map { key } => push_dotted(&mut full_key, key),
                    Segment::Enum { variant } => push_dotted(&mut full_key, variant),
                    Segment::Unknown => push_dotted(&mut full_key, "?"),
                }
            }
            problems.push(Problem::new(full_key, humanize(err.inner().message())));
            None
        }
    }
}

/// Deserializes each element of an array of tables on its own; `on_failure` sees the raw
/// element of each one that fails.
fn elements<T: DeserializeOwned>(
    value: Value,
    key: &str,
    problems: &mut Vec<Problem>,
    mut on_failure: impl FnMut(&Value),
) -> Vec<T> {
    let Value::Array(items) = value else {
        problems.push(wrong_kind(
            key,
            &format!("an array of tables (`[[{key}]]`)"),
            &value,
        ));
        return Vec::new();
    };
    let mut parsed = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let raw = item.clone();
        match section(item, &format!("{key}[{i}]"), problems) {
            Some(element) => parsed.push(element),
            None => on_failure(&raw),
        }
    }
    parsed
}

fn push_dotted(key: &mut String, segment: &str) {
    if !key.is_empty() {
        key.push('.');
    }
    key.push_str(segment);
}

fn unknown_key(key: &str, name: &str, expected: &[&str]) -> Problem {
    let expected: Vec<String> = expected.iter().map(|k| format!("`{k}`")).collect();
    Problem::new(
        key,
        format!(
            "unknown key `{name}`, expected one of {}",
            expected.join(", ")
        ),
    )
}

fn wrong_kind(key: &str, expected: &str, found: &Value) -> Problem {
    Problem::new(
        key,
        format!("expected {expected}, found {}", value_kind(found)),
    )
}

fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

/// Rewrites serde's messages in the words of a TOML file: keys and tables rather than fields and
/// maps, "an integer" rather than `u64`.
fn humanize(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field ") {
        return format!("unknown key {rest}");
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return format!("missing key {rest}");
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        return format!("unknown value {rest}");
    }
    if let Some((found, expected)) = message
        .strip_prefix("invalid type: ")
        .and_then(|rest| rest.split_once(", expected "))
    {
        return format!(
            "expected {}, found {}",
            describe_expected(expected),
            describe_found(found)
        );
    }
    if let Some((found, expected)) = message
        .strip_prefix("invalid value: ")
        .and_then(|rest| rest.split_once(", expected "))
    {
        let expected = match expected {
            "u8" => "an integer from 0 to 255".to_string(),
            "u16" => "an integer from 0 to 65535".to_string(),
            "u32" => format!("an integer from 0 to {}", u32::MAX),
            "u64" | "usize" => "a non-negative integer".to_string(),
            other => describe_expected(other),
        };
        let found = found.split_once(' ').map_or(found, |(_, literal)| literal);
        return format!("expected {expected}, found {}", found.trim_matches('`'));
    }
    message.to_string()
}

/// serde's `expected …` in TOML words.
fn describe_expected(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize" => {
            "an integer".into()
        }
        "f32" | "f64" => "a number".into(),
        "a sequence" => "an array".into(),
        "a map" => "a table".into(),
        "path string" | "a borrowed string" => "a string".into(),
        e if e.starts_with("struct ") => "a table".into(),
        e if e.starts_with("enum ") => "a string".into(),
        e => e.into(),
    }
}

/// serde's `Unexpected` (`string "x"`, `integer `5``, `map` …) in TOML words, with the value.
fn describe_found(found: &str) -> String {
    let (kind, literal) = found.split_once(' ').unwrap_or((found, ""));
    let kind = match kind {
        "string" => "a string",
        "integer" => "an integer",
        "floating" => "a float",
        "boolean" => "a boolean",
        "sequence" => "an array",
        "map" => "a table",
        _ => return found.to_string(),
    };
    // `floating point `1.5`` splits after "floating"; drop the rest of the kind's name.
    let literal = literal.trim_start_matches("point ").trim_matches('`');
    if literal.is_empty() {
        kind.to_string()
    } else {
        format!("{kind} {literal}")
    }
}
