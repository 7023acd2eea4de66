//! Tools as types, in the shape of rmcp's `ToolBase`: the argument struct of a tool derives
//! `Deserialize` and `JsonSchema`, and that one type is the schema the model sees, the parser
//! of each call, the descriptions (its doc comments) and what `get_tool_help` prints.
//!
//! ```ignore
//! /// Mark a task as done.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct CompleteTask {
//!     /// The task's id
//!     task_id: i64,
//! }
//!
//! impl TypedTool for CompleteTask {
//!     const NAME: &'static str = "complete_task";
//!     const GROUP: &'static str = "tasks";
//!     const RISK: Risk = Risk::Write;
//!     type Output = Value;
//!     async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> { … }
//! }
//! ```
//!
//! [`typed`] registers it: the blanket `impl Tool for Typed<T>` makes the schema once and parses
//! every call once, naming the field that is wrong (`tasks[1].title: …`). A tool that keeps
//! state (an HTTP client's limits, a search backend) is a [`StatefulTool`], registered with
//! [`with_state`]; the same blanket impl runs it.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::{Risk, Tool, ToolContext, ToolError, ToolInfo};
use crate::store::query::Page;

/// `JsonSchema` for a type read through its own `Deserialize` (which checks or normalises what
/// it reads): always inline, with another type's schema (`as String`) or one written out
/// (`{"type": "number", "minimum": 0}`).
macro_rules! inline_schema {
    ($ty:ty, as $like:ty) => {
        $crate::tool::typed::inline_schema!(@impl $ty, generator => {
            <$like as schemars::JsonSchema>::json_schema(generator)
        });
    };
    ($ty:ty, $schema:tt) => {
        $crate::tool::typed::inline_schema!(@impl $ty, _generator => {
            schemars::json_schema!($schema)
        });
    };
    (@impl $ty:ty, $generator:ident => $body:block) => {
        impl schemars::JsonSchema for $ty {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($ty).into()
            }

            fn json_schema($generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                $body
            }
        }
    };
}
pub(crate) use inline_schema;

/// The size parameter of a list tool: the runtime fills in `default` when it is missing and the
/// schema caps it at `max` (see [`ToolInfo::limit`]).
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    pub param: &'static str,
    pub default: u64,
    pub max: u64,
}

impl Limit {
    /// The `limit` parameter, `default` when a call gives none, at most `max`.
    pub const fn new(default: u64, max: u64) -> Self {
        Self {
            param: "limit",
            default,
            max,
        }
    }

    /// The value a call asked for, or the default when it asked for none, within 1 and the cap
    /// (through the runtime the schema has refused a value out of bounds and the default is
    /// filled in; unit tests call tools directly).
    pub fn of(self, asked: Option<Count>) -> i64 {
        let default = i64::try_from(self.default).unwrap_or(i64::MAX);
        let max = i64::try_from(self.max).unwrap_or(i64::MAX);
        asked.map_or(default, |c| c.0).clamp(1, max.max(1))
    }

    /// The search/tag/limit block of an organiser family's list tool, as asked.
    pub fn page(self, search: Option<String>, tag: Option<String>, asked: Option<Count>) -> Page {
        Page {
            search: text(search),
            tag: text(tag),
            limit: self.of(asked),
        }
    }
}

/// A whole number (a limit, a count) the model may write as `10`, `10.0` or `"10"`; anything
/// else is refused with a clear message ([`whole_number`]). Its schema is `integer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count(pub i64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        whole_number(&value)
            .map(Count)
            .map_err(serde::de::Error::custom)
    }
}

inline_schema!(Count, as i64);

/// A whole number from `MIN` to `MAX`, read like [`Count`] and refused outside its bounds; its
/// schema is `integer` with both bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Within<const MIN: i64, const MAX: i64>(pub i64);

impl<'de, const MIN: i64, const MAX: i64> Deserialize<'de> for Within<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Count(n) = Count::deserialize(deserializer)?;
        if (MIN..=MAX).contains(&n) {
            Ok(Self(n))
        } else {
            Err(serde::de::Error::custom(format!(
                "must be from {MIN} to {MAX}, got {n}"
            )))
        }
    }
}

impl<const MIN: i64, const MAX: i64> JsonSchema for Within<MIN, MAX> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Within_{MIN}_{MAX}").into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "integer", "minimum": MIN, "maximum": MAX})
    }
}

impl<const MIN: i64, const MAX: i64> Within<MIN, MAX> {
    /// The value as a size or count (never negative where `MIN` is not).
    pub fn get(self) -> usize {
        usize::try_from(self.0).unwrap_or(0)
    }
}

/// A whole number as models write counts and limits: `10`, `10.0` or `"10"`. The one lenient
/// reading of such arguments, for [`Count`] and [`Within`] and the runtime's list limits
/// (`tool::list_limit`); anything else is refused, saying what was expected.
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

/// A tool whose arguments are `Self`. The struct's doc comment is the tool's description and
/// each field's doc comment the parameter's.
pub trait TypedTool: DeserializeOwned + JsonSchema + Send + Sync + 'static {
    /// `^[a-zA-Z][a-zA-Z0-9_]*$`, at most 64 characters.
    const NAME: &'static str;
    /// The family (`tasks`, `notes` …): the category and what `tool_groups` names.
    const GROUP: &'static str;
    /// What a call can do at worst; decides confirmations and the permission needed.
    const RISK: Risk = Risk::Safe;
    /// Extra words `search_tools` matches, never shown to the model: comma-separated, so each
    /// tool's list stays on one line.
    const TAGS: &'static str = "";
    /// For list tools: the limit parameter, its default and its cap.
    const LIMIT: Option<Limit> = None;
    /// Longest a call may run; `None` uses the runtime's default.
    const TIMEOUT: Option<Duration> = None;
    /// Every outward call asks first, whatever the autonomy ([`ToolInfo::always_confirm`]).
    const ALWAYS_CONFIRM: bool = false;

    /// What the model is told: serialized as JSON (a plain string is passed as it is).
    type Output: Serialize + Send;

    /// The risk of this call, when it can be less than [`Self::RISK`].
    fn risk(&self) -> Risk {
        Self::RISK
    }

    /// The risk of this call in the turn it is made in, for a tool whose risk depends on the
    /// turn's stored facts (the message it answers), never on what the model claims; the
    /// runtime takes the higher of this and [`Self::risk`].
    fn risk_in_turn(&self, _ctx: &ToolContext) -> impl Future<Output = Risk> + Send {
        std::future::ready(self.risk())
    }

    /// What a confirmation prompt shows of this call ([`Tool::prompt`]); `arguments` is the
    /// default, the arguments as JSON, for a tool that adds to them rather than replaces them.
    fn prompt(&self, _ctx: &ToolContext, arguments: String) -> impl Future<Output = String> + Send {
        std::future::ready(arguments)
    }

    fn run(self, ctx: &ToolContext)
    -> impl Future<Output = Result<Self::Output, ToolError>> + Send;
}

/// A tool that keeps state its calls share (the web tools' limits, the search backend's
/// settings), in the shape of rmcp's `ToolBase`: `Self` is the state, [`Self::Args`] the
/// argument type (its doc comment the description). [`with_state`] registers one; a
/// [`TypedTool`] is the stateless case.
pub trait StatefulTool: Send + Sync + 'static {
    /// See [`TypedTool::NAME`].
    const NAME: &'static str;
    /// See [`TypedTool::GROUP`].
    const GROUP: &'static str;
    /// See [`TypedTool::RISK`].
    const RISK: Risk = Risk::Safe;
    /// See [`TypedTool::TAGS`].
    const TAGS: &'static str = "";
    /// See [`TypedTool::LIMIT`].
    const LIMIT: Option<Limit> = None;
    /// See [`TypedTool::TIMEOUT`].
    const TIMEOUT: Option<Duration> = None;
    /// See [`TypedTool::ALWAYS_CONFIRM`].
    const ALWAYS_CONFIRM: bool = false;

    /// The arguments of one call: the schema, the parser and the descriptions.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// See [`TypedTool::Output`].
    type Output: Serialize + Send;

    /// The risk of this call, when it can be less than [`Self::RISK`].
    fn risk(&self, _args: &Self::Args) -> Risk {
        Self::RISK
    }

    /// See [`TypedTool::risk_in_turn`].
    fn risk_in_turn(
        &self,
        args: &Self::Args,
        _ctx: &ToolContext,
    ) -> impl Future<Output = Risk> + Send {
        std::future::ready(self.risk(args))
    }

    /// See [`TypedTool::prompt`].
    fn prompt(
        &self,
        _args: &Self::Args,
        _ctx: &ToolContext,
        arguments: String,
    ) -> impl Future<Output = String> + Send {
        std::future::ready(arguments)
    }

    fn run(
        &self,
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;
}

/// A [`TypedTool`] seen as a [`StatefulTool`] without state, so one blanket impl serves both.
pub struct Stateless<T>(PhantomData<fn() -> T>);

impl<T: TypedTool> StatefulTool for Stateless<T> {
    const NAME: &'static str = T::NAME;
    const GROUP: &'static str = T::GROUP;
    const RISK: Risk = T::RISK;
    const TAGS: &'static str = T::TAGS;
    const LIMIT: Option<Limit> = T::LIMIT;
    const TIMEOUT: Option<Duration> = T::TIMEOUT;
    const ALWAYS_CONFIRM: bool = T::ALWAYS_CONFIRM;
    type Args = T;
    type Output = T::Output;

    fn risk(&self, args: &T) -> Risk {
        args.risk()
    }

    fn risk_in_turn(&self, args: &T, ctx: &ToolContext) -> impl Future<Output = Risk> + Send {
        args.risk_in_turn(ctx)
    }

    fn prompt(
        &self,
        args: &T,
        ctx: &ToolContext,
        arguments: String,
    ) -> impl Future<Output = String> + Send {
        args.prompt(ctx, arguments)
    }

    fn run(
        &self,
        args: T,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<T::Output, ToolError>> + Send {
        args.run(ctx)
    }
}

/// A [`TypedTool`] as the registry holds it.
pub fn typed<T: TypedTool>() -> Arc<dyn Tool> {
    with_state(Stateless::<T>(PhantomData))
}

/// A [`StatefulTool`] with its state, as the registry holds it.
pub fn with_state<T: StatefulTool>(tool: T) -> Arc<dyn Tool> {
    Arc::new(Typed {
        info: info::<T>(),
        tool,
    })
}

/// The registry's view of a [`StatefulTool`]: its info, made once from the types, and its state.
pub struct Typed<T> {
    info: ToolInfo,
    tool: T,
}

#[async_trait]
impl<T: StatefulTool> Tool for Typed<T> {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    fn risk(&self, arguments: &Value) -> Risk {
        parse::<T::Args>(arguments.clone()).map_or(T::RISK, |args| self.tool.risk(&args))
    }

    async fn risk_in_turn(&self, ctx: &ToolContext, arguments: &Value) -> Risk {
        match parse::<T::Args>(arguments.clone()) {
            Ok(args) => self.tool.risk_in_turn(&args, ctx).await,
            Err(_) => T::RISK,
        }
    }

    async fn prompt(&self, ctx: &ToolContext, arguments: &Value) -> String {
        let shown = super::shown_arguments(arguments);
        match parse::<T::Args>(arguments.clone()) {
            Ok(args) => self.tool.prompt(&args, ctx, shown).await,
            // Arguments that do not parse are refused before anyone is asked; shown as they are.
            Err(_) => shown,
        }
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let output = self.tool.run(parse(arguments)?, ctx).await?;
        match serde_json::to_value(output) {
            Ok(Value::String(text)) => Ok(text),
            Ok(value) => Ok(value.to_string()),
            Err(err) => Err(ToolError::Failed(format!(
                "could not write the result: {err}"
            ))),
        }
    }
}

fn info<T: StatefulTool>() -> ToolInfo {
    let (description, parameters) = schema::<T::Args>();
    let mut info = ToolInfo::new(T::NAME, T::GROUP, &description, parameters)
        .risk(T::RISK)
        .tags(
            T::TAGS
                .split(',')
                .map(str::trim)
                .filter(|tag| !tag.is_empty()),
        );
    if let Some(limit) = T::LIMIT {
        info = info.limit(limit.param, limit.default, limit.max);
        // The bounds come from `LIMIT`, so the schema and the runtime's default and cap are one
        // fact.
        if let Some(param) = info.parameters["properties"].get_mut(limit.param) {
            param["minimum"] = 1.into();
            param["maximum"] = limit.max.into();
        }
    }
    if let Some(timeout) = T::TIMEOUT {
        info = info.timeout(timeout);
    }
    if T::ALWAYS_CONFIRM {
        info = info.always_confirm();
    }
    info
}

/// Reads a call's arguments as `T`; a wrong field is named by its path (`tasks[1].title`).
pub fn parse<T: DeserializeOwned>(arguments: Value) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(arguments).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." {
            ToolError::InvalidArguments(inner.to_string())
        } else {
            ToolError::InvalidArguments(format!("`{path}`: {inner}"))
        }
    })
}

/// The tool description (the type's doc comment) and the parameters' JSON Schema of `T`.
///
/// The schema is plain, as the models have always been offered: subschemas inline, no `$schema`,
/// `title`, `format` or `default` annotations, and an `Option<T>` field is "may be left out",
/// never `["string", "null"]` (strict validators and several providers refuse null unions, and
/// an explicit `null` is refused as before).
pub fn schema<T: JsonSchema>() -> (String, Value) {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let mut value = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    let description = match value.as_object_mut().and_then(|o| o.remove("description")) {
        Some(Value::String(text)) => text,
        _ => String::new(),
    };
    plain(&mut value);
    if value.get("properties").is_none() {
        value["properties"] = Value::Object(Map::new());
    }
    (unwrap_lines(&description), value)
}

/// Strips a generated schema down to what the model needs (see [`schema`]).
fn plain(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    for key in ["$schema", "title", "format", "default"] {
        object.remove(key);
    }
    // `Option<Struct>` is `anyOf: [struct, null]`: keep the struct.
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(choices)) = object.get_mut(key) {
            choices.retain(|c| c.get("type").and_then(Value::as_str) != Some("null"));
            if let [Value::Object(_)] = choices.as_slice()
                && let Some(Value::Object(only)) = choices.pop()
            {
                object.remove(key);
                for (k, v) in only {
                    object.entry(k).or_insert(v);
                }
            }
        }
    }
    let null_clears = object.remove(NULL_CLEARS).is_some();
    if let Some(Value::Array(types)) = object.get_mut("type")
        && !null_clears
    {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            object.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::String(text)) = object.get_mut("description") {
        *text = unwrap_lines(text);
    }
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(named)) = object.get_mut(key) {
            named.values_mut().for_each(plain);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = object.get_mut(key) {
            plain(sub);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(subs)) = object.get_mut(key) {
            subs.iter_mut().for_each(plain);
        }
    }
}

/// Doc comments arrive one source line per line; a description is one paragraph per line.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// One item of a batch, read on its own: a bad item is reported in its place and does not
/// refuse the others. Its schema is `T`'s.
#[derive(Debug)]
pub struct Each<T>(pub Result<T, ToolError>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Each<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(Each(parse(value)))
    }
}

impl<T: JsonSchema> JsonSchema for Each<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = T::json_schema(generator);
        // The item's own doc comment describes it as a tool; the batch's field says what it is.
        schema.remove("description");
        schema
    }
}

/// The items of a batch tool: 1 to `MAX` of them, each read on its own ([`Each`]).
#[derive(Debug)]
pub struct Batch<T, const MAX: usize>(pub Vec<Each<T>>);

impl<'de, T: DeserializeOwned, const MAX: usize> Deserialize<'de> for Batch<T, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let items = Vec::<Each<T>>::deserialize(deserializer)?;
        if items.is_empty() || items.len() > MAX {
            return Err(serde::de::Error::custom(format!(
                "must hold 1 to {MAX} items, not {}",
                items.len()
            )));
        }
        Ok(Self(items))
    }
}

impl<T, const MAX: usize> Batch<T, MAX> {
    /// Runs `add` on each item in order, a bad item reported in its place and not stopping the
    /// others: `{"added", "failed", "results": [{"index", …the fields add returned} | {"index",
    /// "error"}]}`.
    pub async fn each<F, Fut>(self, mut add: F) -> Value
    where
        F: FnMut(T) -> Fut,
        Fut: Future<Output = Result<Value, ToolError>>,
    {
        let total = self.0.len();
        let mut results = Vec::with_capacity(total);
        let mut added = 0;
        for (index, item) in self.0.into_iter().enumerate() {
            let outcome = match item.0 {
                Ok(item) => add(item).await,
                Err(err) => Err(err),
            };
            let mut result = Map::new();
            result.insert("index".into(), index.into());
            match outcome {
                Ok(Value::Object(fields)) => {
                    added += 1;
                    result.extend(fields);
                }
                Ok(_) => added += 1,
                Err(err) => {
                    result.insert("error".into(), err.to_string().into());
                }
            }
            results.push(Value::Object(result));
        }
        serde_json::json!({"added": added, "failed": total - added, "results": results})
    }
}

/// A batch item whose schema only names its fields and their types: its other checks
/// (required fields, enums, bounds, patterns) run when the item is read, so one bad item fails
/// on its own instead of the runtime's schema check refusing the whole batch. An enum's values
/// move into the field's description ("One of: a, b").
#[derive(Debug)]
pub struct Unchecked<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Unchecked<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Unchecked)
    }
}

impl<T: JsonSchema> JsonSchema for Unchecked<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Unchecked_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = T::json_schema(generator);
        schema.remove("required");
        schema.remove("additionalProperties");
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            for property in properties.values_mut() {
                let Value::Object(property) = property else {
                    continue;
                };
                for check in ["exclusiveMinimum", "minimum", "maximum", "pattern"] {
                    property.remove(check);
                }
                if let Some(Value::Array(values)) = property.remove("enum") {
                    let names: Vec<String> = values
                        .iter()
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                        .collect();
                    property.insert(
                        "description".into(),
                        format!("One of: {}", names.join(", ")).into(),
                    );
                }
            }
        }
        schema
    }
}

impl<T: JsonSchema, const MAX: usize> JsonSchema for Batch<T, MAX> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Batch_of_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = Vec::<Each<T>>::json_schema(generator);
        schema.insert("minItems".into(), 1.into());
        schema.insert("maxItems".into(), MAX.into());
        schema
    }
}

/// A field of an update that can be cleared: left out keeps the stored value ([`Patch::Keep`],
/// with `#[serde(default)]` on the field), `null` clears it, a value sets it. Its schema takes
/// `null` beside `T` (the one place a schema does; see `schemas_are_strict`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Patch<T> {
    #[default]
    Keep,
    Clear,
    Set(T),
}

impl<T> Patch<T> {
    pub fn is_keep(&self) -> bool {
        matches!(self, Patch::Keep)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Only a present field reaches here (absent is the default, `Keep`).
        Ok(match Option::<T>::deserialize(deserializer)? {
            None => Patch::Clear,
            Some(value) => Patch::Set(value),
        })
    }
}

impl<T: JsonSchema> JsonSchema for Patch<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Patch_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = T::json_schema(generator);
        if let Some(Value::String(kind)) = schema.get("type").cloned() {
            schema.insert("type".into(), serde_json::json!([kind, "null"]));
        }
        // `plain` drops null from every other schema; this marker tells it to keep this one.
        schema.insert(NULL_CLEARS.into(), true.into());
        schema
    }
}

/// Marks a [`Patch`] schema, whose `null` [`plain`] keeps; removed from the schema the model
/// sees.
const NULL_CLEARS: &str = "x-null-clears";

/// A required text, trimmed; blank is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonEmpty(pub String);

impl<'de> Deserialize<'de> for NonEmpty {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(serde::de::Error::custom("must be a non-empty string"));
        }
        Ok(Self(trimmed.to_string()))
    }
}

inline_schema!(NonEmpty, as String);

/// A required text kept as written (a note's content); blank is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonBlank(pub String);

impl<'de> Deserialize<'de> for NonBlank {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.trim().is_empty() {
            return Err(serde::de::Error::custom("must be a non-empty string"));
        }
        Ok(Self(text))
    }
}

inline_schema!(NonBlank, as String);

/// Tags as given, trimmed, without a leading `#`, lower-case and without duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tags(pub Vec<String>);

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut tags: Vec<String> = Vec::new();
        for tag in Vec::<String>::deserialize(deserializer)? {
            let tag = tag.trim().trim_start_matches('#').to_lowercase();
            if !tag.is_empty() && !tags.contains(&tag) {
                tags.push(tag);
            }
        }
        Ok(Self(tags))
    }
}

inline_schema!(Tags, as Vec<String>);

impl Tags {
    /// As stored: a JSON array in a text column.
    pub fn to_json(&self) -> String {
        Value::from(self.0.clone()).to_string()
    }
}

/// An optional text, trimmed; blank counts as absent.
pub fn text(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Sorting of the day's errands.
    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Errand {
        /// What to do
        title: NonEmpty,
        /// Details, on
        /// two lines
        note: Option<String>,
        #[serde(default)]
        level: Option<Level>,
        #[serde(default)]
        tags: Tags,
        #[schemars(range(min = 1, max = 50))]
        count: Option<i64>,
        items: Option<Vec<Each<Inner>>>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Level {
        Low,
        High,
    }

    /// An inner item
    #[allow(dead_code)]
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        name: NonEmpty,
    }

    #[test]
    fn options_are_not_required_and_never_null() {
        let (description, schema) = schema::<Errand>();
        assert_eq!(description, "Sorting of the day's errands.");
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string", "description": "What to do"},
                    "note": {"type": "string", "description": "Details, on two lines"},
                    "level": {"type": "string", "enum": ["low", "high"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "count": {"type": "integer", "minimum": 1, "maximum": 50},
                    "items": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                        "additionalProperties": false
                    }}
                },
                "required": ["title"],
                "additionalProperties": false
            })
        );
        assert!(jsonschema::meta::is_valid(&schema));
    }

    #[test]
    fn a_wrong_field_is_named_by_its_path() {
        let err = parse::<Errand>(json!({"title": " "})).err().expect("blank");
        assert_eq!(
            err.to_string(),
            "invalid arguments: `title`: must be a non-empty string"
        );
        let err = parse::<Errand>(json!({"title": "x", "level": "mid"}))
            .err()
            .expect("enum");
        assert!(
            err.to_string().contains("`level`: unknown variant"),
            "{err}"
        );
        let err = parse::<Errand>(json!({"title": "x", "extra": 1}))
            .err()
            .expect("unknown");
        assert!(err.to_string().contains("unknown field `extra`"), "{err}");
        let err = parse::<Errand>(json!({})).err().expect("missing");
        assert!(err.to_string().contains("missing field `title`"), "{err}");
    }

    /// An update whose `due` can be cleared.
    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Reschedule {
        /// New due day, or null for none
        #[serde(default)]
        due: Patch<String>,
        note: Option<String>,
    }

    #[test]
    fn a_patch_tells_null_from_absent() {
        let absent: Reschedule = parse(json!({})).expect("absent");
        assert_eq!(absent.due, Patch::Keep);
        let null: Reschedule = parse(json!({"due": null})).expect("null");
        assert_eq!(null.due, Patch::Clear);
        let set: Reschedule = parse(json!({"due": "friday"})).expect("set");
        assert_eq!(set.due, Patch::Set("friday".into()));
        let err = parse::<Reschedule>(json!({"due": 5}))
            .err()
            .expect("wrong type");
        assert!(err.to_string().contains("`due`"), "{err}");
        let (_, schema) = schema::<Reschedule>();
        assert_eq!(
            schema["properties"],
            json!({
                "due": {"type": ["string", "null"], "description": "New due day, or null for none"},
                "note": {"type": "string"}
            })
        );
        assert!(schema.get("required").is_none());
    }

    #[test]
    fn tags_are_normalised_and_batch_items_fail_alone() {
        let errand: Errand = parse(json!({
            "title": " Shop ",
            "tags": ["Food", "#food", " ", "x"],
            "items": [{"name": "a"}, {"name": ""}]
        }))
        .expect("valid");
        assert_eq!(errand.title.0, "Shop");
        assert_eq!(errand.tags.0, ["food", "x"]);
        let items = errand.items.expect("items");
        assert!(items[0].0.is_ok());
        let err = items[1].0.as_ref().expect_err("blank name");
        assert!(err.to_string().contains("`name`"), "{err}");
        assert_eq!(text(Some("  ".into())), None);
        assert_eq!(text(Some(" a ".into())), Some("a".into()));
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
