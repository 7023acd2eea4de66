//! Finding, reading and checking the configuration: TOML syntax, then environment overrides, then
//! the shape of every section, then the meaning of the values. Every problem found is collected
//! and reported with its source, dotted key and reason, so one `hearth check` shows them all.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;
use toml::{Table, Value};

use super::host::HostDefaults;
use super::{Config, validate};

/// The configuration file of the current directory, looked for first.
const LOCAL_PATH: &str = "./hearth.toml";
/// The machine's configuration file (a service's), looked for last.
const SYSTEM_PATH: &str = "/etc/hearth/hearth.toml";

/// The `source` of errors when no file was found and only defaults and the environment apply.
const DEFAULTS_ORIGIN: &str = "built-in defaults";

/// Where the machine's zone files are (`localtime`, `timezone`).
const ETC: &str = "/etc";

/// The environment variable naming the configuration file.
const CONFIG_VAR: &str = "HEARTH_CONFIG";

/// One problem in the configuration, displayed as
/// ``hearth.toml: providers[1].fallbacks: unknown provider `gpt` ``.
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
    /// Where the settings with a default from the machine came from.
    pub sources: Sources,
    /// The files looked for, in order, when neither `--config` nor `$HEARTH_CONFIG` named one
    /// (empty when one was named), so `hearth check` and a failing `hearth chat` can say where
    /// hearth looked.
    pub searched: Vec<PathBuf>,
}

impl LoadedConfig {
    /// `./hearth.toml, /home/me/.config/hearth/hearth.toml, /etc/hearth/hearth.toml`: the
    /// files looked for, for a message.
    pub fn searched_list(&self) -> String {
        let paths: Vec<String> = self
            .searched
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        paths.join(", ")
    }
}

/// Where the configuration is looked for when neither `--config` nor `$HEARTH_CONFIG` names a
/// file, in order (docs/configuration.md, first paragraph): `./hearth.toml`, the user's
/// `$XDG_CONFIG_HOME/hearth/hearth.toml` (else `~/.config/hearth/hearth.toml`), then
/// `/etc/hearth/hearth.toml`. When none exists the defaults are used, so `hearth chat` works
/// with no setup.
pub fn search_paths(env: &HashMap<String, String>) -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from(LOCAL_PATH)];
    paths.extend(user_config_path(env));
    paths.push(PathBuf::from(SYSTEM_PATH));
    paths
}

/// The user's configuration file, which `hearth init` writes: `$XDG_CONFIG_HOME/hearth/
/// hearth.toml`, else `$HOME/.config/hearth/hearth.toml` (an empty or relative
/// `XDG_CONFIG_HOME` is ignored, as the XDG base directory rules say); `None` without a home.
pub fn user_config_path(env: &HashMap<String, String>) -> Option<PathBuf> {
    let absolute = |name: &str| {
        env.get(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute("XDG_CONFIG_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".config")))
        .map(|base| base.join("hearth").join("hearth.toml"))
}

/// The process environment as text; variables that are not valid UTF-8 cannot be hearth
/// settings or secret names, so they are skipped rather than panic as `std::env::vars` would.
pub fn process_env() -> HashMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// Where `daemon.data_dir` and `daemon.timezone` came from, in words `hearth check` prints:
/// `daemon.data_dir from /etc/hearth/hearth.toml`, `default: $XDG_DATA_HOME/hearth`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sources {
    pub data_dir: String,
    pub timezone: String,
    /// Whether `daemon.data_dir` is the machine's default rather than given.
    pub data_dir_is_default: bool,
}

/// Finds, reads, overrides from the process environment and checks the configuration.
///
/// The file is `explicit` (`--config`; an error if it does not exist), else `$HEARTH_CONFIG`,
/// else the first of [`search_paths`] that exists, else none at all: the defaults.
pub fn load(explicit: Option<&Path>) -> Result<LoadedConfig, ConfigErrors> {
    let env = process_env();
    let candidates = search_paths(&env);
    let host = HostDefaults::detect(&env, Some(Path::new(ETC)));
    load_with(explicit, &env, &candidates, &host)
}

/// [`load`] with the environment, the default locations and the machine's defaults given, for
/// tests.
fn load_with(
    explicit: Option<&Path>,
    env: &HashMap<String, String>,
    candidates: &[PathBuf],
    host: &HostDefaults,
) -> Result<LoadedConfig, ConfigErrors> {
    let named = explicit.is_some() || env.get(CONFIG_VAR).is_some_and(|p| !p.is_empty());
    let searched = if named {
        Vec::new()
    } else {
        candidates.to_vec()
    };
    let Some(path) = find_file(explicit, env, candidates)? else {
        let (config, sources) = read("", DEFAULTS_ORIGIN, env, host)?;
        return Ok(LoadedConfig {
            config,
            path: None,
            sources,
            searched,
        });
    };
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(&path)
        .map_err(|err| ConfigError::new(&origin, "", format!("cannot read the file: {err}")))?;
    let (config, sources) = read(&text, &origin, env, host)?;
    Ok(LoadedConfig {
        config,
        path: Some(path),
        sources,
        searched,
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
/// `env` supplies both the `HEARTH_…__…` overrides and the secrets the `*_env` keys name. The
/// defaults the machine supplies come from `env` alone (`$XDG_DATA_HOME`, `$HOME`, `$TZ`), not
/// from its zone files: [`load`] reads those.
pub fn load_from_str(
    text: &str,
    origin: &str,
    env: &HashMap<String, String>,
) -> Result<Config, ConfigErrors> {
    let host = HostDefaults::detect(env, None);
    read(text, origin, env, &host).map(|(config, _)| config)
}

/// [`load_from_str`] with the machine's defaults given, saying where those settings came from.
fn read(
    text: &str,
    origin: &str,
    env: &HashMap<String, String>,
    host: &HostDefaults,
) -> Result<(Config, Sources), ConfigErrors> {
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

    let given = Given::of(&table);
    let mut problems = Vec::new();
    let (mut config, parsed) = parse_sections(table, &mut problems);
    let sources = given.apply_defaults(&mut config, host, |key| source_of(key, origin, &overrides));
    let mut checked = Vec::new();
    config.check_sections(env, &parsed, &mut checked);
    checked.extend(validate::across_sections(&config, &parsed));
    // A key whose value was refused was read as its default; what the checks say about that
    // default is not news.
    let refused: Vec<String> = problems.iter().map(|p| p.key.clone()).collect();
    problems.extend(
        checked
            .into_iter()
            .filter(|p| !refused.iter().any(|key| is_within(&p.key, key))),
    );

    errors.extend(problems.into_iter().map(|p| {
        let source = source_of(&p.key, origin, &overrides);
        ConfigError::new(source, p.key, p.message)
    }));
    if errors.is_empty() {
        Ok((config, sources))
    } else {
        Err(ConfigErrors(errors))
    }
}

/// Which of the settings with a default from the machine or from `data_dir` the file (or an
/// override) gives.
struct Given {
    data_dir: bool,
    timezone: bool,
    agents_file: bool,
    workspace_dir: bool,
}

impl Given {
    fn of(table: &Table) -> Self {
        let has = |section: &str, key: &str| {
            table
                .get(section)
                .and_then(Value::as_table)
                .is_some_and(|section| section.contains_key(key))
        };
        Self {
            data_dir: has("daemon", "data_dir"),
            timezone: has("daemon", "timezone"),
            agents_file: has("router", "agents_file"),
            workspace_dir: has("tools", "workspace_dir"),
        }
    }

    /// Fills in what was not given: the data dir and timezone from the machine, then the
    /// paths inside the data dir, so that moving the data dir moves everything (the database URL
    /// derives from it the same way, in [`super::DaemonConfig::database_url`]). `source` names
    /// the file or variable a given key came from.
    fn apply_defaults(
        &self,
        config: &mut Config,
        host: &HostDefaults,
        source: impl Fn(&str) -> String,
    ) -> Sources {
        let mut sources = Sources {
            data_dir: format!("daemon.data_dir from {}", source("daemon.data_dir")),
            timezone: format!("daemon.timezone from {}", source("daemon.timezone")),
            data_dir_is_default: !self.data_dir,
        };
        if !self.data_dir {
            config.daemon.data_dir = host.data_dir.value.clone();
            sources.data_dir = format!("default: {}", host.data_dir.from);
        }
        if !self.timezone {
            config.daemon.timezone = host.timezone.value;
            sources.timezone = format!("default: {}", host.timezone.from);
        }
        let data_dir = &config.daemon.data_dir;
        if !self.agents_file {
            config.router.agents_file = data_dir.join(super::AGENTS_FILE_NAME);
        }
        if !self.workspace_dir {
            config.tools.workspace_dir = data_dir.join(super::WORKSPACE_DIR_NAME);
        }
        sources
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
        let mut created = Vec::new();
        match set_path(root, &segments, raw, &mut created) {
            Ok(key) => {
                for key in created.into_iter().chain([key]) {
                    overrides.push(Override {
                        key,
                        var: var.clone(),
                    });
                }
            }
            Err(problem) => errors.push(ConfigError::new(
                format!("environment {var}"),
                problem.key,
                problem.message,
            )),
        }
    }
    overrides
}

/// Sets the value at `segments` and returns its dotted key, recording in `created` the keys of
/// tables and array elements it had to create (errors about them are the variable's too).
fn set_path(
    root: &mut Value,
    segments: &[String],
    raw: &str,
    created: &mut Vec<String>,
) -> Result<String, Problem> {
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
                if !table.contains_key(segment) {
                    created.push(key.clone());
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
                    if last {
                        array.push(parse_value(raw, None));
                        return Ok(key);
                    }
                    created.push(key.clone());
                    array.push(fresh());
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

/// What parsing leaves for the checks of array sections and references: where each parsed
/// entry sits in the file, and which entries were there but failed to parse.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    /// For each array of tables: the file's index of each entry that parsed (entries that failed
    /// are left out of the config, so the two can differ).
    indexes: HashMap<&'static str, Vec<usize>>,
    /// For each section: the names of its entries (providers by `name`, channels by theirs) that
    /// failed to parse. References to them are not reported again as dangling.
    failed: HashMap<&'static str, Vec<String>>,
}

impl Parsed {
    pub fn indexes(&self, section: &str) -> &[usize] {
        self.indexes.get(section).map_or(&[], Vec::as_slice)
    }

    pub fn failed(&self, section: &str) -> &[String] {
        self.failed.get(section).map_or(&[], Vec::as_slice)
    }
}

/// Reading one top-level section: where its problems go, and what the checks will need to
/// know of it.
pub(super) struct Parse<'a> {
    /// The section's key, set by `Config::parse_section`.
    pub key: &'static str,
    problems: &'a mut Vec<Problem>,
    parsed: &'a mut Parsed,
}

impl Parse<'_> {
    /// The section as one table, read by serde.
    pub fn table<T: DeserializeOwned>(&mut self, value: Value) -> Option<T> {
        self.table_at(value, self.key)
    }

    /// A table inside the section, at its full key.
    pub fn table_at<T: DeserializeOwned>(&mut self, value: Value, key: &str) -> Option<T> {
        section(value, key, self.problems)
    }

    /// The section as an array of tables (`[[providers]]`), each entry read on its own so that
    /// a mistake in one does not hide a mistake in another.
    pub fn array<T: DeserializeOwned>(&mut self, value: Value) -> Option<Vec<T>> {
        let key = self.key;
        let Value::Array(items) = value else {
            self.problem(wrong_kind(
                key,
                &format!("an array of tables (`[[{key}]]`)"),
                &value,
            ));
            return Some(Vec::new());
        };
        let mut entries = Vec::new();
        let mut indexes = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let name = item.get("name").and_then(Value::as_str).map(str::to_string);
            match section(item, &format!("{key}[{i}]"), self.problems) {
                Some(entry) => {
                    entries.push(entry);
                    indexes.push(i);
                }
                None => {
                    if let Some(name) = name {
                        self.failed(name);
                    }
                }
            }
        }
        self.parsed.indexes.insert(key, indexes);
        Some(entries)
    }

    pub fn problem(&mut self, problem: Problem) {
        self.problems.push(problem);
    }

    /// An entry of the section, called `name`, that was there but failed to parse.
    pub fn failed(&mut self, name: String) {
        self.parsed.failed.entry(self.key).or_default().push(name);
    }
}

/// Deserializes each section on its own (see `Config::parse_section`) so that a mistake in one
/// does not hide a mistake in another. A section that fails keeps its default.
fn parse_sections(table: Table, problems: &mut Vec<Problem>) -> (Config, Parsed) {
    let mut config = Config::default();
    let mut parsed = Parsed::default();
    for (name, value) in table {
        let mut parse = Parse {
            key: "",
            problems: &mut *problems,
            parsed: &mut parsed,
        };
        if !config.parse_section(&name, value, &mut parse) {
            problems.push(unknown_key(&name, &name, Config::KEYS));
        }
    }
    (config, parsed)
}

/// Deserializes one section, recording every problem inside it with its full key.
///
/// serde stops at the first problem, so a key that is unknown or has a bad value is reported,
/// taken out, and the section read again: a typo next to a bad timezone shows both in one run of
/// `hearth check`. The section then parses from what is left (and its values are checked like any
/// other); it stays unparsed only when something it needs is missing.
fn section<T: DeserializeOwned>(value: Value, key: &str, problems: &mut Vec<Problem>) -> Option<T> {
    let mut value = value;
    // Full keys taken out: when one of them turns out to be required, its own problem was
    // reported already and "missing key" would say the same thing again.
    let mut removed: Vec<String> = Vec::new();
    // Tables an unknown key was taken out of: a key missing there is almost always that same
    // typo (`modle` for `model`), which one line says well enough.
    let mut misspelt_in: Vec<String> = Vec::new();
    // Each pass removes one key, so a section cannot need more passes than it has values.
    for _ in 0..=count_values(&value) {
        let err = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(parsed) => return Some(parsed),
            Err(err) => err,
        };
        let mut full_key = key.to_string();
        // Where the offending value sits: the map keys down to it (array elements are dropped
        // with their whole array, so later indices keep meaning what the file says).
        let mut map_path: Vec<String> = Vec::new();
        let mut removable = true;
        for segment in err.path().iter() {
            match segment {
                Segment::Seq { index } => full_key.push_str(&format!("[{index}]")),
                Segment::Map { key } => {
                    push_dotted(&mut full_key, key);
                    if removable {
                        map_path.push(key.clone());
                    }
                }
                Segment::Enum { variant } => {
                    push_dotted(&mut full_key, variant);
                    removable = false;
                }
                Segment::Unknown => {
                    push_dotted(&mut full_key, "?");
                    removable = false;
                }
            }
            if matches!(segment, Segment::Seq { .. }) {
                removable = false;
            }
        }
        let message = err.inner().message();
        if let Some(missing) = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            let mut missing_key = full_key.clone();
            push_dotted(&mut missing_key, missing);
            if !removed.contains(&missing_key) && !misspelt_in.contains(&full_key) {
                problems.push(Problem::new(full_key, humanize(message)));
            }
            return None;
        }
        problems.push(Problem::new(full_key, humanize(message)));
        // Nothing to take out (the problem is the section itself): it stays unparsed.
        let removed_key = remove_path(&mut value, &map_path)?;
        let mut table = key.to_string();
        for part in map_path.iter().take(map_path.len().saturating_sub(1)) {
            push_dotted(&mut table, part);
        }
        if message.starts_with("unknown field ") {
            misspelt_in.push(table.clone());
        }
        push_dotted(&mut table, &removed_key);
        removed.push(table);
    }
    None
}

/// How many values a TOML value holds, nested ones included.
fn count_values(value: &Value) -> usize {
    match value {
        Value::Table(table) => table.values().map(count_values).sum::<usize>() + 1,
        Value::Array(items) => items.iter().map(count_values).sum::<usize>() + 1,
        _ => 1,
    }
}

/// Removes the key at `path` (map keys from `value` down); returns its name, or `None` when
/// there is no such key.
fn remove_path(value: &mut Value, path: &[String]) -> Option<String> {
    let (last, parents) = path.split_last()?;
    let mut table = value.as_table_mut()?;
    for parent in parents {
        table = table.get_mut(parent)?.as_table_mut()?;
    }
    table.remove(last).map(|_| last.clone())
}

/// Whether `key` is `outer` or a key inside it.
fn is_within(key: &str, outer: &str) -> bool {
    key.strip_prefix(outer)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

fn push_dotted(key: &mut String, segment: &str) {
    if !key.is_empty() {
        key.push('.');
    }
    key.push_str(segment);
}

pub(super) fn unknown_key(key: &str, name: &str, expected: &[&str]) -> Problem {
    let expected: Vec<String> = expected.iter().map(|k| format!("`{k}`")).collect();
    Problem::new(
        key,
        format!(
            "unknown key `{name}`, expected one of {}",
            expected.join(", ")
        ),
    )
}

pub(super) fn wrong_kind(key: &str, expected: &str, found: &Value) -> Problem {
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

#[cfg(test)]
mod tests {
    use hearth_channel::testkit::env;

    use super::*;

    /// A machine that supplies no defaults: `./data` and UTC.
    fn bare() -> HostDefaults {
        HostDefaults::detect(&HashMap::new(), None)
    }

    /// The errors of loading `text`, as (source, key, message).
    fn errors(text: &str, vars: &[(&str, &str)]) -> Vec<(String, String, String)> {
        match load_from_str(text, "hearth.toml", &env(vars)) {
            Ok(config) => panic!("expected errors, got {config:?}"),
            Err(errors) => errors
                .iter()
                .map(|e| (e.source.clone(), e.key.clone(), e.message.clone()))
                .collect(),
        }
    }

    fn has(errors: &[(String, String, String)], source: &str, key: &str, message: &str) {
        assert!(
            errors
                .iter()
                .any(|(s, k, m)| s == source && k == key && m.contains(message)),
            "no error {source}: {key}: …{message}… in {errors:#?}"
        );
    }

    fn ok(text: &str, vars: &[(&str, &str)]) -> Config {
        match load_from_str(text, "hearth.toml", &env(vars)) {
            Ok(config) => config,
            Err(errors) => panic!("unexpected errors:\n{errors}"),
        }
    }

    const PROVIDER: &str = r#"
[[providers]]
name = "local"
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
model = "llama3.1"
"#;

    #[test]
    fn a_new_provider_is_a_table_of_four_keys() {
        let config = ok(PROVIDER, &[]);
        let new = crate::config::ProviderConfig::new(
            "local",
            crate::config::ProviderKind::Openai,
            "http://127.0.0.1:11434/v1",
            "llama3.1",
        );
        assert_eq!(config.providers, vec![new]);
    }

    const EXAMPLE: &str = include_str!("../../data/hearth.example.toml");
    #[cfg(all(
        feature = "telegram",
        feature = "discord",
        feature = "matrix",
        feature = "email"
    ))]
    const EXAMPLE_SECRETS: &[(&str, &str)] = &[
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("OPENAI_API_KEY", "sk-openai"),
        ("HEARTH_TELEGRAM_TOKEN", "123:abc"),
        ("HEARTH_DISCORD_TOKEN", "discord"),
        ("HEARTH_MATRIX_PASSWORD", "matrix"),
        ("HEARTH_EMAIL_PASSWORD", "email"),
        ("HEARTH_HA_TOKEN", "ha"),
        ("HEARTH_GITHUB_TOKEN", "gh"),
        ("HEARTH_FASTMAIL_PASSWORD", "fastmail"),
        ("HEARTH_NEXTCLOUD_PASSWORD", "nextcloud"),
    ];

    #[test]
    fn empty_text_is_all_defaults() {
        assert_eq!(ok("", &[]), Config::default());
    }

    #[test]
    fn data_dir_and_timezone_default_from_the_machine_and_say_where_they_came_from() {
        let vars = env(&[("HOME", "/home/me"), ("TZ", "Asia/Tokyo")]);
        let host = HostDefaults::detect(&vars, None);
        let (config, sources) = read("", "hearth.toml", &vars, &host).expect("valid");
        assert_eq!(
            config.daemon.data_dir,
            PathBuf::from("/home/me/.local/share/hearth")
        );
        assert_eq!(
            config.daemon.database_url(),
            "sqlite:///home/me/.local/share/hearth/hearth.db"
        );
        assert_eq!(
            config.router.agents_file,
            PathBuf::from("/home/me/.local/share/hearth/agents.toml")
        );
        assert_eq!(config.daemon.timezone.name(), "Asia/Tokyo");
        assert!(
            sources
                .data_dir
                .starts_with("default: ~/.local/share/hearth"),
            "{sources:?}"
        );
        assert_eq!(sources.timezone, "default: $TZ");

        // Given in the file or the environment, the file or the variable is named.
        let vars = env(&[
            ("HOME", "/home/me"),
            ("TZ", "Asia/Tokyo"),
            ("HEARTH_DAEMON__DATA_DIR", "/srv/hearth"),
        ]);
        let (config, sources) = read(
            "[daemon]\ntimezone = \"Europe/Berlin\"\n",
            "hearth.toml",
            &vars,
            &host,
        )
        .expect("valid");
        assert_eq!(config.daemon.data_dir, PathBuf::from("/srv/hearth"));
        assert_eq!(config.daemon.timezone.name(), "Europe/Berlin");
        assert_eq!(
            sources.data_dir,
            "daemon.data_dir from environment HEARTH_DAEMON__DATA_DIR"
        );
        assert_eq!(sources.timezone, "daemon.timezone from hearth.toml");
    }

    #[test]
    fn paths_not_given_follow_the_data_dir() {
        let config = ok("[daemon]\ndata_dir = \"/srv/hearth\"\n", &[]);
        assert_eq!(
            config.router.agents_file,
            PathBuf::from("/srv/hearth/agents.toml")
        );
        assert_eq!(
            config.tools.workspace_dir,
            PathBuf::from("/srv/hearth/workspace")
        );
        assert_eq!(
            config.daemon.database_url(),
            "sqlite:///srv/hearth/hearth.db"
        );
        // Moved from the environment, the same.
        let config = ok("", &[("HEARTH_DAEMON__DATA_DIR", "/var/lib/hearth")]);
        assert_eq!(
            config.router.agents_file,
            PathBuf::from("/var/lib/hearth/agents.toml")
        );
        // What is given stays where it is put.
        let config = ok(
            "[daemon]\ndata_dir = \"/srv/hearth\"\n[router]\nagents_file = \"/etc/hearth/agents.toml\"\n[tools]\nworkspace_dir = \"/srv/files\"\n",
            &[],
        );
        assert_eq!(
            config.router.agents_file,
            PathBuf::from("/etc/hearth/agents.toml")
        );
        assert_eq!(config.tools.workspace_dir, PathBuf::from("/srv/files"));
    }

    /// The file as shipped: a newcomer who copies it gets `configuration OK` with no account and
    /// no variable set.
    #[test]
    fn example_file_as_shipped_is_valid_with_an_empty_environment() {
        let config = ok(EXAMPLE, &[]);
        assert_eq!(config.providers.len(), 1);
        assert_eq!(config.providers[0].name, "local");
        assert!(config.schedules.is_empty());
        assert_eq!(config.channels, crate::config::ChannelsConfig::default());
        assert_eq!(
            config.router.agents_file,
            PathBuf::from("./data/agents.toml")
        );
    }

    #[cfg(all(
        feature = "telegram",
        feature = "discord",
        feature = "matrix",
        feature = "email"
    ))]
    #[test]
    fn example_file_commented_sections_are_valid_too() {
        // Uncomment every optional section: a user who does so (and sets the variables the
        // sections name) must get a valid file.
        let mut in_section = false;
        let text: String = EXAMPLE
            .lines()
            .map(|line| {
                if line.starts_with("# [") {
                    in_section = true;
                } else if !line.starts_with("# ") {
                    in_section = false;
                }
                let line = if in_section {
                    line.trim_start_matches("# ")
                } else {
                    line
                };
                format!("{line}\n")
            })
            .collect();
        let config = ok(&text, EXAMPLE_SECRETS);
        assert_eq!(config.providers.len(), 2);
        assert!(config.transcription.is_some());
        assert!(config.channels.telegram.is_some());
        assert!(config.channels.discord.is_some());
        assert!(config.channels.matrix.is_some());
        assert!(config.channels.email.is_some());
        assert_eq!(config.schedules[0].name, "morning-briefing");
        assert_eq!(config.mcp_servers.len(), 2);
        assert_eq!(config.mcp_servers[0].name, "homeassistant");
        assert_eq!(config.mcp_servers[1].command.as_deref(), Some("uvx"));
    }

    #[test]
    fn mcp_server_problems_name_the_entry_as_it_is_in_the_file() {
        let text = "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n\n[[mcp_servers]]\nname = \"b\"\ncommand = \"x\"\nrisk = { \"*\" = \"maybe\" }\n\n[[mcp_servers]]\nname = \"c\"\nurl = \"http://127.0.0.1/mcp\"\nheaders = { Accept = \"x\", Authorization = \"y\" }\nbearer_token_env = \"HA\"\ntimeout_secs = 0\n";
        let errors = errors(text, &[("HA", "t")]);
        has(
            &errors,
            "hearth.toml",
            "mcp_servers[1].risk.*",
            "unknown value `maybe`",
        );
        has(
            &errors,
            "hearth.toml",
            "mcp_servers[2].timeout_secs",
            "greater than 0",
        );
        has(
            &errors,
            "hearth.toml",
            "mcp_servers[2].headers",
            "Accept is set by hearth",
        );
        has(
            &errors,
            "hearth.toml",
            "mcp_servers[2].headers",
            "`bearer_token_env`",
        );
        assert_eq!(errors.len(), 4, "{errors:?}");
    }

    #[test]
    fn mcp_server_secrets_come_from_the_environment() {
        let text = "[[mcp_servers]]\nname = \"gh\"\ncommand = \"x\"\nsecrets_env = { TOKEN = \"GH\" }\n\n[[mcp_servers]]\nname = \"ha\"\nurl = \"https://ha.local/mcp\"\nheaders_env = { \"X-Key\" = \"HA_KEY\" }\n";
        let errors = errors(text, &[]);
        has(
            &errors,
            "hearth.toml",
            "mcp_servers[0].secrets_env.TOKEN",
            "GH is not set",
        );
        has(
            &errors,
            "hearth.toml",
            "mcp_servers[1].headers_env.X-Key",
            "HA_KEY is not set",
        );
        let config = ok(text, &[("GH", "g"), ("HA_KEY", "k")]);
        assert_eq!(config.mcp_servers.len(), 2);
    }

    #[test]
    fn syntax_error_is_the_only_error_and_has_line_and_column() {
        let errors = errors("[daemon]\ntimezone = \"UTC\"\ndata_dir = = 1\n", &[]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (source, key, message) = &errors[0];
        assert_eq!(source, "hearth.toml");
        assert_eq!(key, "");
        assert!(message.contains("line 3, column"), "{message}");
    }

    #[cfg(feature = "telegram")]
    #[test]
    fn unknown_key_is_named_with_the_expected_keys() {
        let errors = errors("[channels.telegram]\ntokn_env = \"T\"\n", &[]);
        has(
            &errors,
            "hearth.toml",
            "channels.telegram.tokn_env",
            "unknown key `tokn_env`, expected one of `token_env`, `api_url`, `allowed_users`",
        );
    }

    #[test]
    fn unknown_section_and_channel_are_rejected() {
        let errors = errors("[deamon]\nx = 1\n[channels.slack]\nx = 1\n", &[]);
        has(
            &errors,
            "hearth.toml",
            "deamon",
            "unknown key `deamon`, expected one of `daemon`",
        );
        has(
            &errors,
            "hearth.toml",
            "channels.slack",
            "unknown key `slack`, expected one of `telegram`",
        );
    }

    /// Without the telegram feature: its section, an owner and a schedule target on it are each
    /// refused naming the feature, also when the environment creates the section.
    #[cfg(not(feature = "telegram"))]
    #[test]
    fn built_without_a_channel_its_section_owner_and_targets_are_clear_errors() {
        let reason =
            "hearth was built without the telegram channel; rebuild with --features telegram";
        let text = "[daemon]\nowner = \"telegram:1\"\n[channels.telegram]\ntoken_env = \"TG\"\n[[schedules]]\nname = \"s\"\ncron = \"0 0 7 * * *\"\nagent = \"general\"\nprompt = \"hi\"\ntarget = \"telegram:1\"\n";
        let found = errors(text, &[("TG", "t")]);
        has(&found, "hearth.toml", "channels.telegram", reason);
        has(&found, "hearth.toml", "daemon.owner", reason);
        has(&found, "hearth.toml", "schedules[0].target", reason);
        assert_eq!(found.len(), 3, "{found:#?}");

        let var = "HEARTH_CHANNELS__TELEGRAM__TOKEN_ENV";
        let found = errors("", &[(var, "TG"), ("TG", "t")]);
        has(
            &found,
            &format!("environment {var}"),
            "channels.telegram",
            reason,
        );
        assert_eq!(found.len(), 1, "{found:#?}");

        // The other channels are unaffected: checked when built in, a clear error otherwise.
        let found = errors("[channels.discord]\ntoken_env = \"DC\"\n", &[]);
        #[cfg(feature = "discord")]
        has(
            &found,
            "hearth.toml",
            "channels.discord.token_env",
            "DC is not set",
        );
        #[cfg(not(feature = "discord"))]
        has(
            &found,
            "hearth.toml",
            "channels.discord",
            "hearth was built without the discord channel; rebuild with --features discord",
        );
    }

    #[cfg(feature = "telegram")]
    #[test]
    fn wrong_types_name_what_was_expected_and_found() {
        let text = r#"
[daemon]
max_concurrent_conversations = "many"
[runtime]
stream = 1.5
[channels.telegram]
token_env = "T"
allowed_users = [1, "x"]
"#;
        let errors = errors(text, &[("T", "token")]);
        has(
            &errors,
            "hearth.toml",
            "daemon.max_concurrent_conversations",
            "expected an integer, found a string \"many\"",
        );
        has(
            &errors,
            "hearth.toml",
            "runtime.stream",
            "expected a boolean, found a float 1.5",
        );
        has(
            &errors,
            "hearth.toml",
            "channels.telegram.allowed_users[1]",
            "`x` is not a telegram user id: expected a number",
        );
    }

    #[test]
    fn negative_number_for_an_unsigned_key() {
        let errors = errors("[daemon]\nshutdown_grace_secs = -1\n", &[]);
        has(
            &errors,
            "hearth.toml",
            "daemon.shutdown_grace_secs",
            "expected a non-negative integer, found -1",
        );
    }

    #[test]
    fn missing_key_and_unknown_enum_value_in_separate_providers() {
        let text = format!("{PROVIDER}kind = \"gemini\"\n[[providers]]\nname = \"b\"\n")
            .replace("kind = \"openai\"\n", "");
        let errors = errors(&text, &[]);
        has(
            &errors,
            "hearth.toml",
            "providers[0].kind",
            "unknown value `gemini`, expected `openai` or `anthropic`",
        );
        has(&errors, "hearth.toml", "providers[1]", "missing key `kind`");
    }

    #[test]
    fn providers_must_be_an_array_of_tables() {
        let errors = errors("[providers]\nname = \"x\"\n", &[]);
        has(
            &errors,
            "hearth.toml",
            "providers",
            "expected an array of tables (`[[providers]]`), found a table",
        );
    }

    #[test]
    fn errors_in_every_section_are_all_reported() {
        let text = format!(
            "[daemon]\ntimezone = 5\n{PROVIDER}\n[[providers]]\nname = \"x\"\n\n[[schedules]]\nname = \"s\"\n[router]\nsticky_minutes = \"long\"\n"
        );
        let errors = errors(&text, &[]);
        has(
            &errors,
            "hearth.toml",
            "daemon.timezone",
            "expected a string, found an integer 5",
        );
        has(&errors, "hearth.toml", "providers[1]", "missing key");
        has(&errors, "hearth.toml", "schedules[0]", "missing key");
        has(
            &errors,
            "hearth.toml",
            "router.sticky_minutes",
            "expected an integer, found a string",
        );
        assert_eq!(errors.len(), 4, "{errors:#?}");
    }

    #[test]
    fn problems_after_an_unknown_key_in_the_same_section_are_reported_too() {
        let text = "[daemon]\ntimezon = \"UTC\"\ntimezone = \"Mars/Olympus\"\nmax_concurrent_conversations = \"many\"\n\n[channels.telegram]\ntokn = \"x\"\ntoken_env = \"HEARTH_TEST_UNSET\"\napi_url = \"ftp://x\"\n";
        let errors = errors(text, &[]);
        has(
            &errors,
            "hearth.toml",
            "daemon.timezon",
            "unknown key `timezon`",
        );
        has(
            &errors,
            "hearth.toml",
            "daemon.max_concurrent_conversations",
            "expected an integer, found a string",
        );
        has(
            &errors,
            "hearth.toml",
            "daemon.timezone",
            "unknown timezone `Mars/Olympus`",
        );
        has(
            &errors,
            "hearth.toml",
            "channels.telegram.tokn",
            "unknown key `tokn`",
        );
        has(
            &errors,
            "hearth.toml",
            "channels.telegram.token_env",
            "HEARTH_TEST_UNSET",
        );
        has(&errors, "hearth.toml", "channels.telegram.api_url", "ftp");
        assert_eq!(errors.len(), 6, "{errors:#?}");
    }

    #[test]
    fn a_refused_required_key_is_not_reported_missing_as_well() {
        let text = "[[providers]]\nname = \"local\"\nkind = \"gemini\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\nmodle = \"typo\"\n";
        let errors = errors(text, &[]);
        has(
            &errors,
            "hearth.toml",
            "providers[0].kind",
            "unknown value `gemini`",
        );
        has(
            &errors,
            "hearth.toml",
            "providers[0].modle",
            "unknown key `modle`",
        );
        assert_eq!(errors.len(), 2, "{errors:#?}");

        // `modle` in place of `model`: the typo is the one problem, not also "missing model".
        let text = PROVIDER.replace("model = ", "modle = ");
        let typo = super::tests::errors(&text, &[]);
        has(
            &typo,
            "hearth.toml",
            "providers[0].modle",
            "unknown key `modle`",
        );
        assert_eq!(typo.len(), 1, "{typo:#?}");
    }

    #[test]
    fn display_is_source_key_message_one_per_line() {
        let errors = ConfigErrors(vec![
            ConfigError::new("a.toml", "daemon.timezone", "unknown timezone"),
            ConfigError::new("a.toml", "", "file not found"),
        ]);
        assert_eq!(
            errors.to_string(),
            "a.toml: daemon.timezone: unknown timezone\na.toml: file not found"
        );
    }

    // ----- environment overrides

    #[cfg(feature = "telegram")]
    #[test]
    fn override_scalar_nested_and_array_element() {
        let vars = [
            ("HEARTH_DAEMON__DATA_DIR", "/srv/hearth"),
            ("HEARTH_CHANNELS__TELEGRAM__TOKEN_ENV", "TG"),
            (
                "HEARTH_CHANNELS__TELEGRAM__API_URL",
                "http://127.0.0.1:8081",
            ),
            ("HEARTH_PROVIDERS__0__MODEL", "qwen3"),
            ("TG", "123:abc"),
        ];
        let config = ok(PROVIDER, &vars);
        assert_eq!(config.daemon.data_dir, PathBuf::from("/srv/hearth"));
        let telegram = config
            .channels
            .telegram
            .expect("telegram created by the environment");
        assert_eq!(telegram.api_url, "http://127.0.0.1:8081");
        assert_eq!(telegram.token_env, "TG");
        assert_eq!(config.providers[0].model, "qwen3");
    }

    #[test]
    fn override_segments_are_case_insensitive() {
        let config = ok("", &[("HEARTH_daemon__Timezone", "Europe/Paris")]);
        assert_eq!(config.daemon.timezone.name(), "Europe/Paris");
    }

    #[cfg(feature = "telegram")]
    #[test]
    fn override_values_are_typed_as_toml() {
        let vars = [
            ("HEARTH_DAEMON__SHUTDOWN_GRACE_SECS", "5"),
            ("HEARTH_RUNTIME__STREAM", "false"),
            ("HEARTH_DAEMON__HTTP_LISTEN", ""),
            ("HEARTH_CHANNELS__TELEGRAM__TOKEN_ENV", "TG"),
            ("HEARTH_CHANNELS__TELEGRAM__ALLOWED_USERS", "[1, 2]"),
            ("TG", "t"),
        ];
        let config = ok("", &vars);
        assert_eq!(config.daemon.shutdown_grace_secs, 5);
        assert!(!config.runtime.stream);
        assert_eq!(config.daemon.http_listen, None);
        assert_eq!(
            config.channels.telegram.expect("telegram").allowed_users,
            [1, 2]
        );
    }

    #[test]
    fn override_of_a_string_key_stays_a_string() {
        let config = ok(PROVIDER, &[("HEARTH_PROVIDERS__0__MODEL", "4")]);
        assert_eq!(config.providers[0].model, "4");
    }

    #[cfg(feature = "telegram")]
    #[test]
    fn override_can_add_array_elements_in_index_order() {
        let mut vars = Vec::new();
        for i in 0..12 {
            vars.push((format!("HEARTH_SCHEDULES__{i}__NAME"), format!("s{i}")));
            vars.push((
                format!("HEARTH_SCHEDULES__{i}__CRON"),
                "0 0 7 * * *".to_string(),
            ));
            vars.push((
                format!("HEARTH_SCHEDULES__{i}__AGENT"),
                "general".to_string(),
            ));
            vars.push((format!("HEARTH_SCHEDULES__{i}__PROMPT"), "hi".to_string()));
            vars.push((
                format!("HEARTH_SCHEDULES__{i}__TARGET"),
                "telegram:1".to_string(),
            ));
        }
        vars.push(("HEARTH_CHANNELS__TELEGRAM__TOKEN_ENV".into(), "TG".into()));
        vars.push(("TG".into(), "t".into()));
        let env: HashMap<String, String> = vars.into_iter().collect();
        let config = load_from_str("", "hearth.toml", &env).expect("valid");
        assert_eq!(config.schedules.len(), 12);
        assert_eq!(config.schedules[11].name, "s11");
    }

    #[test]
    fn variables_without_double_underscore_are_not_overrides() {
        let config = ok(
            "",
            &[
                ("HEARTH_TELEGRAM_TOKEN", "x"),
                ("HEARTH_CONFIG", "/nope"),
                ("OTHER__X", "1"),
            ],
        );
        assert_eq!(config, Config::default());
    }

    #[test]
    fn bad_overrides_name_the_variable() {
        // One variable at a time: within one section only the first problem is found.
        let cases = [
            (
                "HEARTH_DAEMON__SHUTDOWN_GRACE_SECS",
                "soon",
                "daemon.shutdown_grace_secs",
                "expected an integer, found a string \"soon\"",
            ),
            (
                "HEARTH_DAEMON__NOPE",
                "1",
                "daemon.nope",
                "unknown key `nope`",
            ),
            (
                "HEARTH_DAEMON__TIMEZONE",
                "Mars/Olympus",
                "daemon.timezone",
                "unknown timezone `Mars/Olympus`",
            ),
            (
                "HEARTH_DAEMON__DATA_DIR__X",
                "1",
                "daemon.data_dir",
                "expected a string, found a table",
            ),
            (
                "HEARTH_DAEMON__TIMEZONE__X",
                "1",
                "daemon.timezone",
                "this is a string, not a table",
            ),
            (
                "HEARTH_PROVIDERS__5__MODEL",
                "m",
                "providers",
                "index 5 is past the end",
            ),
            (
                "HEARTH_PROVIDERS__X",
                "m",
                "providers",
                "expected an index, found `x`",
            ),
            (
                "HEARTH_PROVIDERS__1__MODEL",
                "m",
                "providers[1]",
                "missing key `name`",
            ),
            ("HEARTH_ROUTER____X", "m", "router", "empty key segment"),
        ];
        for (var, value, key, message) in cases {
            let text = format!("{PROVIDER}[daemon]\ntimezone = \"UTC\"\n");
            let errors = errors(&text, &[(var, value)]);
            has(&errors, &format!("environment {var}"), key, message);
            assert_eq!(errors.len(), 1, "{errors:#?}");
        }
    }

    #[test]
    fn overrides_in_different_sections_are_all_reported() {
        let vars = [
            ("HEARTH_DAEMON__SHUTDOWN_GRACE_SECS", "soon"),
            ("HEARTH_RUNTIME__STREAM", "maybe"),
            ("HEARTH_PROVIDERS__0__TIMEOUT_SECS", "0"),
        ];
        let errors = errors(PROVIDER, &vars);
        assert_eq!(errors.len(), 3, "{errors:#?}");
        has(
            &errors,
            "environment HEARTH_PROVIDERS__0__TIMEOUT_SECS",
            "providers[0].timeout_secs",
            "greater than 0",
        );
    }

    // ----- finding the file

    #[test]
    fn discovery_order_explicit_then_env_then_candidates_then_defaults() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, timezone: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, format!("[daemon]\ntimezone = \"{timezone}\"\n")).expect("write");
            path
        };
        let explicit = write("explicit.toml", "Europe/Berlin");
        let named = write("named.toml", "Europe/Paris");
        let first = write("first.toml", "Asia/Tokyo");
        let second = write("second.toml", "America/New_York");
        let absent = dir.path().join("absent.toml");
        let env_named = env(&[("HEARTH_CONFIG", named.to_str().expect("utf-8 temp path"))]);
        let none = env(&[]);
        let candidates = [absent.clone(), first.clone(), second.clone()];

        let loaded =
            load_with(Some(&explicit), &env_named, &candidates, &bare()).expect("explicit");
        assert_eq!(loaded.path.as_deref(), Some(explicit.as_path()));
        assert_eq!(loaded.config.daemon.timezone.name(), "Europe/Berlin");

        let loaded = load_with(None, &env_named, &candidates, &bare()).expect("named");
        assert_eq!(loaded.path.as_deref(), Some(named.as_path()));

        let loaded = load_with(None, &none, &candidates, &bare()).expect("first candidate");
        assert_eq!(loaded.path.as_deref(), Some(first.as_path()));
        assert_eq!(loaded.config.daemon.timezone.name(), "Asia/Tokyo");

        let loaded =
            load_with(None, &none, &[absent.clone(), second.clone()], &bare()).expect("second");
        assert_eq!(loaded.config.daemon.timezone.name(), "America/New_York");

        let loaded =
            load_with(None, &none, std::slice::from_ref(&absent), &bare()).expect("defaults");
        assert_eq!(loaded.path, None);
        assert_eq!(loaded.config, Config::default());
    }

    #[test]
    fn the_users_config_dir_is_searched_after_the_current_directory() {
        let paths = search_paths(&env(&[("HOME", "/home/me")]));
        assert_eq!(
            paths,
            [
                PathBuf::from("./hearth.toml"),
                PathBuf::from("/home/me/.config/hearth/hearth.toml"),
                PathBuf::from("/etc/hearth/hearth.toml"),
            ]
        );
        let xdg = env(&[("HOME", "/home/me"), ("XDG_CONFIG_HOME", "/x/conf")]);
        assert_eq!(
            user_config_path(&xdg),
            Some(PathBuf::from("/x/conf/hearth/hearth.toml"))
        );
        // An empty or relative XDG_CONFIG_HOME is ignored, as the XDG rules say.
        let relative = env(&[("HOME", "/home/me"), ("XDG_CONFIG_HOME", "conf")]);
        assert_eq!(
            user_config_path(&relative),
            Some(PathBuf::from("/home/me/.config/hearth/hearth.toml"))
        );
        assert_eq!(user_config_path(&env(&[])), None);
        assert_eq!(search_paths(&env(&[])).len(), 2);

        // What was searched is kept for the messages; a named file searched nothing.
        let dir = tempfile::tempdir().expect("temp dir");
        let absent = dir.path().join("absent.toml");
        let loaded =
            load_with(None, &env(&[]), std::slice::from_ref(&absent), &bare()).expect("defaults");
        assert_eq!(loaded.searched_list(), absent.display().to_string());
        let named = dir.path().join("named.toml");
        std::fs::write(&named, "").expect("write");
        let vars = env(&[("HEARTH_CONFIG", named.to_str().expect("utf-8 temp path"))]);
        let loaded = load_with(None, &vars, &[absent], &bare()).expect("named");
        assert!(loaded.searched.is_empty());
    }

    #[test]
    fn a_named_file_that_does_not_exist_is_an_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let absent = dir.path().join("absent.toml");

        let errors =
            load_with(Some(&absent), &env(&[]), &[], &bare()).expect_err("missing explicit");
        assert_eq!(errors.0[0].source, absent.display().to_string());
        assert!(errors.0[0].message.contains("file not found"), "{errors}");

        let vars = env(&[("HEARTH_CONFIG", absent.to_str().expect("utf-8 temp path"))]);
        let errors = load_with(None, &vars, &[], &bare()).expect_err("missing $HEARTH_CONFIG");
        assert!(errors.to_string().contains("HEARTH_CONFIG"), "{errors}");
    }

    #[test]
    fn defaults_still_take_overrides_and_name_them_in_errors() {
        let dir = tempfile::tempdir().expect("temp dir");
        let vars = env(&[("HEARTH_RUNTIME__STREAM", "maybe")]);
        let errors =
            load_with(None, &vars, &[dir.path().join("absent.toml")], &bare()).expect_err("bad");
        assert_eq!(
            errors.to_string(),
            "environment HEARTH_RUNTIME__STREAM: runtime.stream: expected a boolean, found a string \"maybe\""
        );
    }
}
