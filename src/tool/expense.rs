//! The `expenses` tools: record what the user spent, query it, summarise it by category and
//! month, export it as CSV or JSON, and delete it.
//!
//! Amounts are stored as integer cents (hundredths of the currency unit) so totals never drift
//! the way floats do, and shown as decimal strings ("12.50"). Dates are the user's local
//! calendar dates (`YYYY-MM-DD`), so "today" means today where the user is. Totals are always per
//! currency: hearth converts nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::NaiveDate;
use serde_json::{Map, Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::common::write_tx;
use super::time::parse_date;
use super::{Args, Risk, Tool, ToolContext, ToolError, ToolInfo, list_limit};

/// The categories an expense can have; anything else is refused with this list.
pub const CATEGORIES: &[&str] = &[
    "food",
    "transport",
    "utilities",
    "entertainment",
    "shopping",
    "health",
    "education",
    "travel",
    "subscription",
    "housing",
    "other",
];

const GROUP: &str = "expenses";
/// Largest single amount accepted (a trillion units): far beyond any household expense, and
/// small enough that sums of many stay exact in i64 cents and in f64.
const MAX_AMOUNT_CENTS: i64 = 100_000_000_000_000;
/// Most items in one `batch_add_expenses` call.
const MAX_BATCH: usize = 100;
/// Most rows one export returns; the result says when there were more.
const MAX_EXPORT: i64 = 10_000;
const COLUMNS: &str = "id, amount_cents, currency, category, description, merchant, tags, spent_on";

pub fn tools() -> Vec<Arc<dyn Tool>> {
    [
        Op::Add,
        Op::BatchAdd,
        Op::List,
        Op::Summary,
        Op::Export,
        Op::Delete,
    ]
    .into_iter()
    .map(|op| Arc::new(ExpenseTool::new(op)) as Arc<dyn Tool>)
    .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    BatchAdd,
    List,
    Summary,
    Export,
    Delete,
}

struct ExpenseTool {
    info: ToolInfo,
    op: Op,
}

fn expense_properties() -> Map<String, Value> {
    let props = json!({
        "amount": {"type": "number", "exclusiveMinimum": 0, "description": "Amount spent, greater than 0, e.g. 12.5"},
        "currency": {"type": "string", "pattern": "^[A-Za-z]{3}$", "description": "ISO 4217 code such as EUR, USD, GBP; default EUR"},
        "category": {"type": "string", "enum": CATEGORIES, "description": "One of the fixed categories"},
        "description": {"type": "string", "description": "What it was for"},
        "date": {"type": "string", "description": "Day spent: YYYY-MM-DD, today or yesterday; default today (user's timezone)"},
        "merchant": {"type": "string", "description": "Shop or payee"},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Free-form labels"}
    });
    match props {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The filters shared by listing, summarising and exporting; `amounts` adds the amount range and
/// text search that only make sense for listing and exporting.
fn filter_properties(amounts: bool) -> Map<String, Value> {
    let mut props = Map::new();
    props.insert(
        "date_from".into(),
        json!({"type": "string", "description": "First day included: YYYY-MM-DD, today, yesterday"}),
    );
    props.insert(
        "date_to".into(),
        json!({"type": "string", "description": "Last day included: YYYY-MM-DD, today, yesterday"}),
    );
    props.insert(
        "category".into(),
        json!({"type": "string", "enum": CATEGORIES, "description": "Only this category"}),
    );
    props.insert(
        "currency".into(),
        json!({"type": "string", "pattern": "^[A-Za-z]{3}$", "description": "Only this ISO currency code"}),
    );
    if amounts {
        props.insert(
            "min_amount".into(),
            json!({"type": "number", "minimum": 0, "description": "Smallest amount included"}),
        );
        props.insert(
            "max_amount".into(),
            json!({"type": "number", "minimum": 0, "description": "Largest amount included"}),
        );
        props.insert(
            "search".into(),
            json!({"type": "string", "description": "Words to find in description, merchant or tags"}),
        );
    }
    props
}

fn object(properties: Map<String, Value>, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

impl ExpenseTool {
    fn new(op: Op) -> Self {
        let info = match op {
            Op::Add => ToolInfo::new(
                "add_expense",
                GROUP,
                "Record one expense. Amount in the currency's units (12.50), a category, optional description, merchant, date and tags.",
                object(expense_properties(), &["amount", "category"]),
            )
            .risk(Risk::Write)
            .tags(&["spent", "paid", "bought", "cost", "money", "purchase", "spending"]),
            Op::BatchAdd => {
                // Items are checked one by one in `call` rather than by the schema, so one bad
                // item is reported on its own and the others are still recorded.
                let mut item = expense_properties();
                for field in item.values_mut() {
                    if let Value::Object(field) = field {
                        field.remove("enum");
                        field.remove("exclusiveMinimum");
                        field.remove("pattern");
                    }
                }
                if let Some(Value::Object(category)) = item.get_mut("category") {
                    category.insert(
                        "description".into(),
                        json!(format!("One of: {}", CATEGORIES.join(", "))),
                    );
                }
                let mut props = Map::new();
                props.insert(
                    "expenses".into(),
                    json!({
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_BATCH,
                        "description": "Expenses to record, each like add_expense's arguments (amount and category required); each succeeds or fails on its own",
                        "items": {"type": "object", "properties": item}
                    }),
                );
                ToolInfo::new(
                    "batch_add_expenses",
                    GROUP,
                    "Record several expenses at once; returns an id or an error for each item.",
                    object(props, &["expenses"]),
                )
                .risk(Risk::Write)
                .tags(&["spent", "paid", "receipts", "money", "many", "bulk"])
            }
            Op::List => {
                let mut props = filter_properties(true);
                props.insert(
                    "limit".into(),
                    json!({"type": "integer", "minimum": 1, "maximum": 100, "description": "Most expenses returned; default 20"}),
                );
                ToolInfo::new(
                    "list_expenses",
                    GROUP,
                    "List expenses, newest first, filtered by date range, category, currency, amount range or text.",
                    object(props, &[]),
                )
                .limit("limit", 20, 100)
                .tags(&["query", "spending", "spent", "find", "search", "money"])
            }
            Op::Summary => ToolInfo::new(
                "expense_summary",
                GROUP,
                "Totals and counts per currency, by category and by month (YYYY-MM), over a date range (default: all dates).",
                object(filter_properties(false), &[]),
            )
            .tags(&["budget", "total", "spending", "report", "month", "statistics", "money"]),
            Op::Export => {
                let mut props = filter_properties(true);
                props.insert(
                    "format".into(),
                    json!({"type": "string", "enum": ["csv", "json"], "description": "csv (with a header row) or json"}),
                );
                ToolInfo::new(
                    "export_expenses",
                    GROUP,
                    "Export expenses, oldest first, as CSV or JSON, optionally over a date range and filters.",
                    object(props, &["format"]),
                )
                .tags(&["csv", "json", "download", "spreadsheet", "backup", "money"])
            }
            Op::Delete => {
                let mut props = Map::new();
                props.insert(
                    "expense_id".into(),
                    json!({"type": "integer", "description": "Id of the expense to delete"}),
                );
                ToolInfo::new(
                    "delete_expense",
                    GROUP,
                    "Delete one expense by id.",
                    object(props, &["expense_id"]),
                )
                .risk(Risk::Destructive)
                .tags(&["remove", "expense", "money", "mistake"])
            }
        };
        Self { info, op }
    }
}

#[async_trait]
impl Tool for ExpenseTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let user = ctx.user_id.ok_or_else(|| {
            ToolError::Failed("expenses belong to a user, and this call has no user".into())
        })?;
        let result = match self.op {
            Op::Add => add(ctx, user, &arguments).await?,
            Op::BatchAdd => batch_add(ctx, user, &arguments).await?,
            Op::List => list(ctx, user, &arguments, list_limit(&self.info, &arguments)).await?,
            Op::Summary => summary(ctx, user, &arguments).await?,
            Op::Export => export(ctx, user, &arguments).await?,
            Op::Delete => delete(ctx, user, &arguments).await?,
        };
        Ok(result.to_string())
    }
}

fn db(err: sqlx::Error) -> ToolError {
    ToolError::Failed(format!("database error: {err}"))
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments(message.into())
}

/// An amount as cents: positive, finite, rounded to the nearest cent.
fn amount_cents(value: f64, name: &str) -> Result<i64, ToolError> {
    if !value.is_finite() || value <= 0.0 {
        return Err(invalid(format!(
            "`{name}` must be a number greater than 0, got {value}"
        )));
    }
    let cents = (value * 100.0).round();
    if cents < 1.0 {
        return Err(invalid(format!(
            "`{name}` {value} is less than one cent; give at least 0.01"
        )));
    }
    if cents > MAX_AMOUNT_CENTS as f64 {
        return Err(invalid(format!("`{name}` {value} is too large")));
    }
    // In range and integral, so the conversion is exact.
    Ok(cents as i64)
}

/// Cents as a decimal string: 1250 -> "12.50".
pub fn format_cents(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

fn category(text: &str) -> Result<&'static str, ToolError> {
    let wanted = text.trim().to_lowercase();
    CATEGORIES
        .iter()
        .find(|c| **c == wanted)
        .copied()
        .ok_or_else(|| {
            invalid(format!(
                "unknown category {text:?}; use one of: {}",
                CATEGORIES.join(", ")
            ))
        })
}

fn currency(text: &str) -> Result<String, ToolError> {
    let code = text.trim().to_uppercase();
    if code.len() == 3 && code.chars().all(|c| c.is_ascii_uppercase()) {
        Ok(code)
    } else {
        Err(invalid(format!(
            "currency {text:?} is not an ISO 4217 code; use three letters such as EUR, USD, GBP"
        )))
    }
}

fn date(ctx: &ToolContext, text: &str, name: &str) -> Result<NaiveDate, ToolError> {
    parse_date(text, ctx.timezone, ctx.clock.now())
        .map_err(|err| invalid(format!("`{name}`: {err}")))
}

fn today(ctx: &ToolContext) -> NaiveDate {
    ctx.clock.now().with_timezone(&ctx.timezone).date_naive()
}

/// Text that is present and not blank.
fn text(args: Args<'_>, name: &str) -> Option<String> {
    args.opt_str(name)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// One expense as the model wrote it, checked.
#[derive(Debug, PartialEq)]
struct NewExpense {
    amount_cents: i64,
    currency: String,
    category: &'static str,
    description: Option<String>,
    merchant: Option<String>,
    tags: Vec<String>,
    spent_on: NaiveDate,
}

fn read_expense(ctx: &ToolContext, value: &Value) -> Result<NewExpense, ToolError> {
    if !value.is_object() {
        return Err(invalid("each expense must be an object"));
    }
    let args = Args::new(value);
    let amount = args.f64("amount")?;
    let category_text = args.opt_str("category").ok_or_else(|| {
        invalid(format!(
            "`category` is required: one of {}",
            CATEGORIES.join(", ")
        ))
    })?;
    Ok(NewExpense {
        amount_cents: amount_cents(amount, "amount")?,
        currency: match args.opt_str("currency") {
            Some(code) => currency(code)?,
            None => "EUR".into(),
        },
        category: category(category_text)?,
        description: text(args, "description"),
        merchant: text(args, "merchant"),
        tags: args
            .strings("tags")
            .into_iter()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect(),
        spent_on: match args.opt_str("date") {
            Some(d) => date(ctx, d, "date")?,
            None => today(ctx),
        },
    })
}

async fn insert(ctx: &ToolContext, user: i64, expense: &NewExpense) -> Result<i64, ToolError> {
    let tags = serde_json::to_string(&expense.tags)
        .map_err(|err| ToolError::Failed(format!("cannot store tags: {err}")))?;
    let mut tx = write_tx(ctx).await?;
    let id = sqlx::query_scalar(
        "INSERT INTO expenses (user_id, amount_cents, currency, category, description, merchant, tags, spent_on, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .bind(user)
    .bind(expense.amount_cents)
    .bind(expense.currency.as_str())
    .bind(expense.category)
    .bind(expense.description.as_deref())
    .bind(expense.merchant.as_deref())
    .bind(tags)
    .bind(expense.spent_on.format("%Y-%m-%d").to_string())
    .bind(ctx.clock.now_ms())
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(id)
}

/// A stored expense.
#[derive(Debug)]
struct Expense {
    id: i64,
    amount_cents: i64,
    currency: String,
    category: String,
    description: Option<String>,
    merchant: Option<String>,
    tags: Vec<String>,
    date: String,
}

impl Expense {
    fn from_row(row: &AnyRow) -> Result<Self, ToolError> {
        let tags: String = row.try_get("tags").map_err(db)?;
        Ok(Self {
            id: row.try_get("id").map_err(db)?,
            amount_cents: row.try_get("amount_cents").map_err(db)?,
            currency: row.try_get("currency").map_err(db)?,
            category: row.try_get("category").map_err(db)?,
            description: row.try_get("description").map_err(db)?,
            merchant: row.try_get("merchant").map_err(db)?,
            // Written by this module as a JSON array; an unreadable value shows as no tags.
            tags: serde_json::from_str(&tags).unwrap_or_default(),
            date: row.try_get("spent_on").map_err(db)?,
        })
    }

    fn json(&self) -> Value {
        let mut out = json!({
            "id": self.id,
            "date": self.date,
            "amount": format_cents(self.amount_cents),
            "currency": self.currency,
            "category": self.category,
        });
        if let Value::Object(map) = &mut out {
            if let Some(d) = &self.description {
                map.insert("description".into(), json!(d));
            }
            if let Some(m) = &self.merchant {
                map.insert("merchant".into(), json!(m));
            }
            if !self.tags.is_empty() {
                map.insert("tags".into(), json!(self.tags));
            }
        }
        out
    }
}

async fn add(ctx: &ToolContext, user: i64, args: &Value) -> Result<Value, ToolError> {
    let expense = read_expense(ctx, args)?;
    let id = insert(ctx, user, &expense).await?;
    Ok(json!({
        "id": id,
        "recorded": format!(
            "{} {} {} on {}",
            format_cents(expense.amount_cents),
            expense.currency,
            expense.category,
            expense.spent_on
        ),
    }))
}

async fn batch_add(ctx: &ToolContext, user: i64, args: &Value) -> Result<Value, ToolError> {
    let items = Args::new(args).array("expenses")?;
    if items.is_empty() || items.len() > MAX_BATCH {
        return Err(invalid(format!(
            "`expenses` must hold 1 to {MAX_BATCH} items, got {}",
            items.len()
        )));
    }
    let mut results = Vec::with_capacity(items.len());
    let mut added = 0;
    for (index, item) in items.iter().enumerate() {
        let outcome = match read_expense(ctx, item) {
            Ok(expense) => insert(ctx, user, &expense).await,
            Err(err) => Err(err),
        };
        results.push(match outcome {
            Ok(id) => {
                added += 1;
                json!({"index": index, "id": id})
            }
            Err(err) => json!({"index": index, "error": err.to_string()}),
        });
    }
    Ok(json!({
        "added": added,
        "failed": items.len() - added,
        "results": results,
    }))
}

/// A bound value of a built query.
enum Bind {
    Int(i64),
    Text(String),
}

/// `WHERE` conditions with their values, numbered `$1`, `$2` … as both backends accept.
struct Filter {
    sql: String,
    binds: Vec<Bind>,
}

impl Filter {
    fn new(user: i64) -> Self {
        Self {
            sql: "WHERE user_id = $1".into(),
            binds: vec![Bind::Int(user)],
        }
    }

    /// Adds `AND {condition}` where `?` in `condition` stands for the new placeholder.
    fn and(&mut self, condition: &str, bind: Bind) {
        self.binds.push(bind);
        let placeholder = format!("${}", self.binds.len());
        self.sql.push_str(" AND ");
        self.sql.push_str(&condition.replace('?', &placeholder));
    }

    fn query(&self, sql: String) -> sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for bind in &self.binds {
            query = match bind {
                Bind::Int(n) => query.bind(*n),
                Bind::Text(s) => query.bind(s.as_str()),
            };
        }
        query
    }
}

/// The date range a call asked for, as `(from, to)`, both inclusive.
fn date_range(
    ctx: &ToolContext,
    args: Args<'_>,
) -> Result<(Option<NaiveDate>, Option<NaiveDate>), ToolError> {
    let from = args
        .opt_str("date_from")
        .map(|d| date(ctx, d, "date_from"))
        .transpose()?;
    let to = args
        .opt_str("date_to")
        .map(|d| date(ctx, d, "date_to"))
        .transpose()?;
    if let (Some(from), Some(to)) = (from, to)
        && from > to
    {
        return Err(invalid(format!(
            "`date_from` {from} is after `date_to` {to}"
        )));
    }
    Ok((from, to))
}

fn filter(ctx: &ToolContext, user: i64, value: &Value) -> Result<Filter, ToolError> {
    let args = Args::new(value);
    let mut filter = Filter::new(user);
    let (from, to) = date_range(ctx, args)?;
    if let Some(from) = from {
        filter.and(
            "spent_on >= ?",
            Bind::Text(from.format("%Y-%m-%d").to_string()),
        );
    }
    if let Some(to) = to {
        filter.and(
            "spent_on <= ?",
            Bind::Text(to.format("%Y-%m-%d").to_string()),
        );
    }
    if let Some(c) = args.opt_str("category") {
        filter.and("category = ?", Bind::Text(category(c)?.to_string()));
    }
    if let Some(c) = args.opt_str("currency") {
        filter.and("currency = ?", Bind::Text(currency(c)?));
    }
    let min = args.opt_f64("min_amount");
    let max = args.opt_f64("max_amount");
    for (name, value) in [("min_amount", min), ("max_amount", max)] {
        if let Some(v) = value
            && (!v.is_finite() || v < 0.0)
        {
            return Err(invalid(format!("`{name}` must be 0 or more, got {v}")));
        }
    }
    if let (Some(min), Some(max)) = (min, max)
        && min > max
    {
        return Err(invalid(format!(
            "`min_amount` {min} is larger than `max_amount` {max}"
        )));
    }
    if let Some(min) = min {
        filter.and("amount_cents >= ?", Bind::Int((min * 100.0).round() as i64));
    }
    if let Some(max) = max {
        filter.and(
            "amount_cents <= ?",
            Bind::Int((max * 100.0).round().min(MAX_AMOUNT_CENTS as f64) as i64),
        );
    }
    if let Some(search) = text(args, "search") {
        for word in search.split_whitespace() {
            let escaped = word
                .to_lowercase()
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            filter.and(
                "LOWER(COALESCE(description, '') || ' ' || COALESCE(merchant, '') || ' ' || tags) LIKE ? ESCAPE '\\'",
                Bind::Text(format!("%{escaped}%")),
            );
        }
    }
    Ok(filter)
}

async fn list(ctx: &ToolContext, user: i64, args: &Value, limit: i64) -> Result<Value, ToolError> {
    let filter = filter(ctx, user, args)?;
    let sql = format!(
        "SELECT {COLUMNS} FROM expenses {} ORDER BY spent_on DESC, id DESC LIMIT {limit}",
        filter.sql
    );
    let rows = filter
        .query(sql)
        .fetch_all(ctx.store.pool())
        .await
        .map_err(db)?;
    let expenses = rows
        .iter()
        .map(Expense::from_row)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
        "count": expenses.len(),
        "expenses": expenses.iter().map(Expense::json).collect::<Vec<_>>(),
    }))
}

/// Totals for one currency.
#[derive(Default)]
struct CurrencyTotals {
    total: i64,
    count: i64,
    by_category: Vec<Value>,
    by_month: Vec<Value>,
}

async fn summary(ctx: &ToolContext, user: i64, args: &Value) -> Result<Value, ToolError> {
    let filter = filter(ctx, user, args)?;
    let (from, to) = date_range(ctx, Args::new(args))?;
    let by_category = filter
        .query(format!(
            "SELECT currency, category AS bucket, COUNT(*) AS n, CAST(SUM(amount_cents) AS BIGINT) AS total
             FROM expenses {} GROUP BY currency, category ORDER BY currency, total DESC, category",
            filter.sql
        ))
        .fetch_all(ctx.store.pool())
        .await
        .map_err(db)?;
    let by_month = filter
        .query(format!(
            "SELECT currency, SUBSTR(spent_on, 1, 7) AS bucket, COUNT(*) AS n, CAST(SUM(amount_cents) AS BIGINT) AS total
             FROM expenses {} GROUP BY currency, SUBSTR(spent_on, 1, 7) ORDER BY currency, bucket",
            filter.sql
        ))
        .fetch_all(ctx.store.pool())
        .await
        .map_err(db)?;

    let mut currencies: BTreeMap<String, CurrencyTotals> = BTreeMap::new();
    for row in &by_category {
        let (code, bucket, n, total) = bucket_row(row)?;
        let entry = currencies.entry(code).or_default();
        entry.total += total;
        entry.count += n;
        entry.by_category.push(json!({
            "category": bucket, "total": format_cents(total), "count": n
        }));
    }
    for row in &by_month {
        let (code, bucket, n, total) = bucket_row(row)?;
        currencies.entry(code).or_default().by_month.push(json!({
            "month": bucket, "total": format_cents(total), "count": n
        }));
    }
    let count: i64 = currencies.values().map(|c| c.count).sum();
    Ok(json!({
        "date_from": from.map(|d| d.to_string()),
        "date_to": to.map(|d| d.to_string()),
        "count": count,
        "currencies": currencies
            .into_iter()
            .map(|(code, totals)| json!({
                "currency": code,
                "total": format_cents(totals.total),
                "count": totals.count,
                "by_category": totals.by_category,
                "by_month": totals.by_month,
            }))
            .collect::<Vec<_>>(),
    }))
}

fn bucket_row(row: &AnyRow) -> Result<(String, String, i64, i64), ToolError> {
    Ok((
        row.try_get("currency").map_err(db)?,
        row.try_get("bucket").map_err(db)?,
        row.try_get("n").map_err(db)?,
        row.try_get("total").map_err(db)?,
    ))
}

/// One CSV field: quoted when it holds a comma, a quote, a line break or edge spaces, with
/// quotes doubled (RFC 4180).
fn csv_field(field: &str) -> String {
    let needs_quotes =
        field.contains([',', '"', '\n', '\r']) || field.starts_with(' ') || field.ends_with(' ');
    if needs_quotes {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

fn to_csv(expenses: &[Expense]) -> String {
    let mut out = String::from("id,date,amount,currency,category,description,merchant,tags\n");
    for e in expenses {
        let fields = [
            e.id.to_string(),
            e.date.clone(),
            format_cents(e.amount_cents),
            e.currency.clone(),
            e.category.clone(),
            e.description.clone().unwrap_or_default(),
            e.merchant.clone().unwrap_or_default(),
            e.tags.join(";"),
        ];
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

async fn export(ctx: &ToolContext, user: i64, args: &Value) -> Result<Value, ToolError> {
    let format = match Args::new(args).str("format")? {
        "csv" => "csv",
        "json" => "json",
        other => {
            return Err(invalid(format!(
                "unknown format {other:?}; use csv or json"
            )));
        }
    };
    let filter = filter(ctx, user, args)?;
    let sql = format!(
        "SELECT {COLUMNS} FROM expenses {} ORDER BY spent_on, id LIMIT {}",
        filter.sql,
        MAX_EXPORT + 1
    );
    let rows = filter
        .query(sql)
        .fetch_all(ctx.store.pool())
        .await
        .map_err(db)?;
    let mut expenses = rows
        .iter()
        .map(Expense::from_row)
        .collect::<Result<Vec<_>, _>>()?;
    let truncated = expenses.len() as i64 > MAX_EXPORT;
    expenses.truncate(MAX_EXPORT as usize);
    let mut out = json!({"format": format, "count": expenses.len()});
    if let Value::Object(map) = &mut out {
        if truncated {
            map.insert(
                "truncated".into(),
                json!(format!(
                    "only the first {MAX_EXPORT}; narrow the date range"
                )),
            );
        }
        if format == "csv" {
            map.insert("content".into(), json!(to_csv(&expenses)));
        } else {
            map.insert(
                "expenses".into(),
                json!(expenses.iter().map(Expense::json).collect::<Vec<_>>()),
            );
        }
    }
    Ok(out)
}

async fn delete(ctx: &ToolContext, user: i64, args: &Value) -> Result<Value, ToolError> {
    let id = Args::new(args).i64("expense_id")?;
    let mut tx = write_tx(ctx).await?;
    let row = sqlx::query(
        "DELETE FROM expenses WHERE id = $1 AND user_id = $2
         RETURNING id, amount_cents, currency, category, description, merchant, tags, spent_on",
    )
    .bind(id)
    .bind(user)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    match row {
        Some(row) => Ok(json!({"deleted": Expense::from_row(&row)?.json()})),
        None => Err(ToolError::Failed(format!("expense {id} not found"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use chrono::TimeZone;

    /// A context whose clock reads 2026-03-10 20:00 UTC.
    async fn context() -> (ToolContext, tempfile::TempDir) {
        let (mut ctx, dir) = crate::tool::test_context().await;
        let now = chrono::Utc
            .with_ymd_and_hms(2026, 3, 10, 20, 0, 0)
            .single()
            .expect("valid");
        ctx.clock = ManualClock::new(now);
        (ctx, dir)
    }

    async fn call(ctx: &ToolContext, name: &str, args: Value) -> Result<Value, ToolError> {
        let tool = tools()
            .into_iter()
            .find(|t| t.info().name == name)
            .expect("tool exists");
        let text = tool.call(ctx, args).await?;
        Ok(serde_json::from_str(&text).expect("results are JSON"))
    }

    async fn ok(ctx: &ToolContext, name: &str, args: Value) -> Value {
        call(ctx, name, args).await.expect(name)
    }

    async fn stored(ctx: &ToolContext) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM expenses")
            .fetch_one(ctx.store.pool())
            .await
            .expect("count")
    }

    async fn seed(ctx: &ToolContext) {
        for (amount, currency, category, date, description, merchant) in [
            (
                12.5,
                "EUR",
                "food",
                "2026-01-15",
                "Lunch, with \"Bob\"",
                "Cafe Uno",
            ),
            (40.0, "EUR", "transport", "2026-01-20", "Train ticket", "DB"),
            (7.25, "EUR", "food", "2026-02-03", "Groceries", "Aldi"),
            (100.0, "USD", "travel", "2026-02-10", "Hotel deposit", "Inn"),
            (
                9.99,
                "EUR",
                "subscription",
                "2026-03-01",
                "Music 100% ad free",
                "Tunes",
            ),
        ] {
            ok(
                ctx,
                "add_expense",
                json!({"amount": amount, "currency": currency, "category": category, "date": date,
                       "description": description, "merchant": merchant, "tags": ["t-".to_string() + category]}),
            )
            .await;
        }
    }

    #[test]
    fn cents_are_formatted_and_parsed_without_drift() {
        assert_eq!(format_cents(1250), "12.50");
        assert_eq!(format_cents(5), "0.05");
        assert_eq!(format_cents(-199), "-1.99");
        assert_eq!(amount_cents(19.99, "amount").expect("ok"), 1999);
        assert_eq!(amount_cents(0.1 + 0.2, "amount").expect("ok"), 30);
        assert!(amount_cents(0.004, "amount").is_err());
        assert!(amount_cents(f64::NAN, "amount").is_err());
        assert!(amount_cents(1e20, "amount").is_err());
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field(" pad"), "\" pad\"");
    }

    #[tokio::test]
    async fn add_expense_stores_cents_with_defaults_in_the_users_timezone() {
        let (mut ctx, _dir) = context().await;
        // 20:00 UTC on the 10th is already the 11th in Auckland.
        ctx.timezone = "Pacific/Auckland".parse().expect("tz");
        let out = ok(
            &ctx,
            "add_expense",
            json!({"amount": 19.99, "category": "Food", "description": "Pizza"}),
        )
        .await;
        assert_eq!(out["recorded"], "19.99 EUR food on 2026-03-11");
        let row = sqlx::query(
            "SELECT amount_cents, currency, category, spent_on, tags FROM expenses WHERE id = $1",
        )
        .bind(out["id"].as_i64().expect("id"))
        .fetch_one(ctx.store.pool())
        .await
        .expect("row");
        assert_eq!(row.try_get::<i64, _>("amount_cents").expect("c"), 1999);
        assert_eq!(row.try_get::<String, _>("currency").expect("c"), "EUR");
        assert_eq!(row.try_get::<String, _>("category").expect("c"), "food");
        assert_eq!(
            row.try_get::<String, _>("spent_on").expect("c"),
            "2026-03-11"
        );
        assert_eq!(row.try_get::<String, _>("tags").expect("c"), "[]");

        let out = ok(
            &ctx,
            "add_expense",
            json!({"amount": "3.5", "currency": "usd", "category": "other", "date": "yesterday", "merchant": "Kiosk", "tags": ["snack"]}),
        )
        .await;
        assert_eq!(out["recorded"], "3.50 USD other on 2026-03-10");
    }

    #[tokio::test]
    async fn add_expense_refuses_bad_input_and_stores_nothing() {
        let (ctx, _dir) = context().await;
        let cases = [
            (json!({"amount": 0, "category": "food"}), "greater than 0"),
            (json!({"amount": -5, "category": "food"}), "greater than 0"),
            (
                json!({"amount": 0.001, "category": "food"}),
                "less than one cent",
            ),
            (json!({"category": "food"}), "`amount` is required"),
            (
                json!({"amount": 5, "category": "gadgets"}),
                "use one of: food, transport, utilities, entertainment, shopping, health, education, travel, subscription, housing, other",
            ),
            (json!({"amount": 5}), "`category` is required"),
            (
                json!({"amount": 5, "category": "food", "currency": "EURO"}),
                "ISO 4217",
            ),
            (
                json!({"amount": 5, "category": "food", "date": "2026-02-30"}),
                "`date`",
            ),
            (
                json!({"amount": 5, "category": "food", "date": "someday"}),
                "cannot read",
            ),
        ];
        for (args, expected) in cases {
            let err = call(&ctx, "add_expense", args.clone())
                .await
                .expect_err("refused");
            assert!(
                matches!(err, ToolError::InvalidArguments(_)),
                "{args}: {err}"
            );
            assert!(err.to_string().contains(expected), "{args}: {err}");
        }
        assert_eq!(stored(&ctx).await, 0);
    }

    #[tokio::test]
    async fn calls_without_a_user_fail_clearly() {
        let (mut ctx, _dir) = context().await;
        ctx.user_id = None;
        let err = call(&ctx, "list_expenses", json!({}))
            .await
            .expect_err("no user");
        assert!(matches!(err, ToolError::Failed(_)));
        assert!(err.to_string().contains("no user"));
    }

    #[tokio::test]
    async fn batch_add_reports_each_item_on_its_own() {
        let (ctx, _dir) = context().await;
        let out = ok(
            &ctx,
            "batch_add_expenses",
            json!({"expenses": [
                {"amount": 4.2, "category": "food"},
                {"amount": -1, "category": "food"},
                {"amount": 10, "category": "gizmos"},
                "not an object",
                {"amount": 60, "category": "utilities", "date": "2026-03-01"}
            ]}),
        )
        .await;
        assert_eq!(out["added"], 2);
        assert_eq!(out["failed"], 3);
        let results = out["results"].as_array().expect("results");
        assert!(results[0]["id"].is_i64());
        assert!(
            results[1]["error"]
                .as_str()
                .expect("e")
                .contains("greater than 0")
        );
        assert!(
            results[2]["error"]
                .as_str()
                .expect("e")
                .contains("use one of")
        );
        assert!(results[3]["error"].as_str().expect("e").contains("object"));
        assert!(results[4]["id"].is_i64());
        assert_eq!(stored(&ctx).await, 2);

        let err = call(&ctx, "batch_add_expenses", json!({"expenses": []}))
            .await
            .expect_err("empty");
        assert!(err.to_string().contains("1 to 100"));
        let err = call(&ctx, "batch_add_expenses", json!({}))
            .await
            .expect_err("missing");
        assert!(err.to_string().contains("`expenses` is required"));
    }

    #[tokio::test]
    async fn list_expenses_filters_and_orders_newest_first() {
        let (ctx, _dir) = context().await;
        seed(&ctx).await;
        let all = ok(&ctx, "list_expenses", json!({})).await;
        assert_eq!(all["count"], 5);
        let dates: Vec<&str> = all["expenses"]
            .as_array()
            .expect("list")
            .iter()
            .map(|e| e["date"].as_str().expect("date"))
            .collect();
        assert_eq!(
            dates,
            [
                "2026-03-01",
                "2026-02-10",
                "2026-02-03",
                "2026-01-20",
                "2026-01-15"
            ]
        );
        assert_eq!(all["expenses"][0]["amount"], "9.99");
        assert_eq!(all["expenses"][0]["tags"], json!(["t-subscription"]));

        let count = |v: &Value| v["count"].as_i64().expect("count");
        let food = ok(&ctx, "list_expenses", json!({"category": "food"})).await;
        assert_eq!(count(&food), 2);
        let jan = ok(
            &ctx,
            "list_expenses",
            json!({"date_from": "2026-01-01", "date_to": "2026-01-31"}),
        )
        .await;
        assert_eq!(count(&jan), 2);
        let mid = ok(
            &ctx,
            "list_expenses",
            json!({"min_amount": 9.99, "max_amount": 40}),
        )
        .await;
        assert_eq!(count(&mid), 3, "bounds are inclusive: {mid}");
        let usd = ok(&ctx, "list_expenses", json!({"currency": "usd"})).await;
        assert_eq!(usd["expenses"][0]["category"], "travel");
        let search = ok(&ctx, "list_expenses", json!({"search": "ALDI"})).await;
        assert_eq!(search["expenses"][0]["description"], "Groceries");
        let tag = ok(&ctx, "list_expenses", json!({"search": "t-travel"})).await;
        assert_eq!(count(&tag), 1);
        let percent = ok(&ctx, "list_expenses", json!({"search": "100%"})).await;
        assert_eq!(count(&percent), 1, "% is matched literally");
        let two_words = ok(&ctx, "list_expenses", json!({"search": "train db"})).await;
        assert_eq!(count(&two_words), 1);
        let limited = ok(&ctx, "list_expenses", json!({"limit": 2})).await;
        assert_eq!(count(&limited), 2);

        for (args, expected) in [
            (
                json!({"date_from": "2026-02-01", "date_to": "2026-01-01"}),
                "after",
            ),
            (json!({"min_amount": 50, "max_amount": 10}), "larger than"),
            (json!({"min_amount": -1}), "0 or more"),
            (json!({"category": "fun"}), "use one of"),
            (json!({"date_to": "31/01/2026"}), "`date_to`"),
        ] {
            let err = call(&ctx, "list_expenses", args.clone())
                .await
                .expect_err("refused");
            assert!(err.to_string().contains(expected), "{args}: {err}");
        }
    }

    #[tokio::test]
    async fn expenses_are_private_to_their_user() {
        let (mut ctx, _dir) = context().await;
        seed(&ctx).await;
        let other = ctx
            .store
            .allow_identity("test", "u2", None, "config", false, 0)
            .await
            .expect("user");
        let first = ctx.user_id;
        ctx.user_id = Some(other.user_id);
        assert_eq!(ok(&ctx, "list_expenses", json!({})).await["count"], 0);
        assert_eq!(ok(&ctx, "expense_summary", json!({})).await["count"], 0);
        let err = call(&ctx, "delete_expense", json!({"expense_id": 1}))
            .await
            .expect_err("not theirs");
        assert_eq!(err.to_string(), "expense 1 not found");
        ctx.user_id = first;
        assert_eq!(stored(&ctx).await, 5);
    }

    #[tokio::test]
    async fn summary_totals_by_category_and_month_per_currency() {
        let (ctx, _dir) = context().await;
        seed(&ctx).await;
        // 0.1 + 0.2 adds up exactly.
        ok(
            &ctx,
            "add_expense",
            json!({"amount": 0.1, "category": "food", "date": "2026-03-02"}),
        )
        .await;
        ok(
            &ctx,
            "add_expense",
            json!({"amount": 0.2, "category": "food", "date": "2026-03-02"}),
        )
        .await;
        let out = ok(&ctx, "expense_summary", json!({})).await;
        assert_eq!(out["count"], 7);
        let eur = &out["currencies"][0];
        assert_eq!(eur["currency"], "EUR");
        assert_eq!(eur["total"], "70.04");
        assert_eq!(eur["count"], 6);
        assert_eq!(
            eur["by_category"],
            json!([
                {"category": "transport", "total": "40.00", "count": 1},
                {"category": "food", "total": "20.05", "count": 4},
                {"category": "subscription", "total": "9.99", "count": 1},
            ])
        );
        assert_eq!(
            eur["by_month"],
            json!([
                {"month": "2026-01", "total": "52.50", "count": 2},
                {"month": "2026-02", "total": "7.25", "count": 1},
                {"month": "2026-03", "total": "10.29", "count": 3},
            ])
        );
        assert_eq!(out["currencies"][1]["currency"], "USD");
        assert_eq!(out["currencies"][1]["total"], "100.00");

        let feb = ok(
            &ctx,
            "expense_summary",
            json!({"date_from": "2026-02-01", "date_to": "2026-02-28", "currency": "EUR"}),
        )
        .await;
        assert_eq!(feb["date_from"], "2026-02-01");
        assert_eq!(feb["count"], 1);
        assert_eq!(feb["currencies"][0]["by_category"][0]["category"], "food");
        let empty = ok(&ctx, "expense_summary", json!({"date_from": "2030-01-01"})).await;
        assert_eq!(empty["currencies"], json!([]));
    }

    #[tokio::test]
    async fn export_writes_quoted_csv_and_json() {
        let (ctx, _dir) = context().await;
        seed(&ctx).await;
        ok(
            &ctx,
            "add_expense",
            json!({"amount": 1, "category": "other", "date": "2026-03-05", "description": "two\nlines", "tags": ["a", "b"]}),
        )
        .await;
        let out = ok(
            &ctx,
            "export_expenses",
            json!({"format": "csv", "date_from": "2026-01-01", "date_to": "2026-01-31"}),
        )
        .await;
        assert_eq!(out["count"], 2);
        assert_eq!(
            out["content"],
            "id,date,amount,currency,category,description,merchant,tags\n\
             1,2026-01-15,12.50,EUR,food,\"Lunch, with \"\"Bob\"\"\",Cafe Uno,t-food\n\
             2,2026-01-20,40.00,EUR,transport,Train ticket,DB,t-transport\n"
        );
        let out = ok(
            &ctx,
            "export_expenses",
            json!({"format": "csv", "category": "other"}),
        )
        .await;
        assert_eq!(
            out["content"],
            "id,date,amount,currency,category,description,merchant,tags\n\
             6,2026-03-05,1.00,EUR,other,\"two\nlines\",,a;b\n"
        );
        let out = ok(
            &ctx,
            "export_expenses",
            json!({"format": "json", "currency": "USD"}),
        )
        .await;
        assert_eq!(
            out["expenses"],
            json!([{"id": 4, "date": "2026-02-10", "amount": "100.00", "currency": "USD", "category": "travel",
                    "description": "Hotel deposit", "merchant": "Inn", "tags": ["t-travel"]}])
        );
        let none = ok(
            &ctx,
            "export_expenses",
            json!({"format": "csv", "date_from": "2030-01-01"}),
        )
        .await;
        assert_eq!(
            none["content"],
            "id,date,amount,currency,category,description,merchant,tags\n"
        );
        let err = call(&ctx, "export_expenses", json!({"format": "xlsx"}))
            .await
            .expect_err("format");
        assert!(err.to_string().contains("csv or json"));
    }

    #[tokio::test]
    async fn delete_expense_removes_it_once() {
        let (ctx, _dir) = context().await;
        seed(&ctx).await;
        let out = ok(&ctx, "delete_expense", json!({"expense_id": 2})).await;
        assert_eq!(out["deleted"]["description"], "Train ticket");
        assert_eq!(stored(&ctx).await, 4);
        let err = call(&ctx, "delete_expense", json!({"expense_id": 2}))
            .await
            .expect_err("gone");
        assert!(matches!(err, ToolError::Failed(_)));
        assert_eq!(err.to_string(), "expense 2 not found");
        let err = call(&ctx, "delete_expense", json!({}))
            .await
            .expect_err("id");
        assert!(matches!(err, ToolError::InvalidArguments(_)));
    }

    #[test]
    fn schemas_describe_the_tools() {
        let tools = tools();
        let names: Vec<&str> = tools.iter().map(|t| t.info().name.as_str()).collect();
        assert_eq!(
            names,
            [
                "add_expense",
                "batch_add_expenses",
                "list_expenses",
                "expense_summary",
                "export_expenses",
                "delete_expense"
            ]
        );
        for tool in &tools {
            let info = tool.info();
            assert_eq!(info.group, "expenses");
            assert_eq!(info.parameters["type"], "object");
            assert_eq!(info.parameters["additionalProperties"], false);
        }
        assert_eq!(
            tools[0].info().parameters["properties"]["category"]["enum"][10],
            "other"
        );
        assert_eq!(tools[5].info().risk, Risk::Destructive);
        assert!(tools[5].info().requires_confirmation());
        assert_eq!(tools[0].info().risk, Risk::Write);
        let limit = tools[2].info().limit.clone().expect("limit");
        assert_eq!((limit.default, limit.max), (20, 100));
    }
}
