//! The `expenses` tools: record what the user spent, query it, summarise it by category and
//! month, export it as CSV or JSON, and delete it. Each tool is its argument type
//! ([`TypedTool`]); the SQL is in `store::expense`.
//!
//! Amounts are stored as integer cents (hundredths of the currency unit) so totals never drift
//! the way floats do, and shown as decimal strings ("12.50"). Dates are the user's local
//! calendar dates (`YYYY-MM-DD`), so "today" means today where the user is. Totals are always per
//! currency: hearth converts nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use super::common::{bad_date, not_found, tags_value, user_id};
use super::time::parse_date;
use super::typed::{Batch, Count, Limit, Unchecked, inline_schema, text};
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::store::expense::{Bucket, Expense, ExpenseFilter, ExpenseRow};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<AddExpense>(),
        typed::<BatchAddExpenses>(),
        typed::<ListExpenses>(),
        typed::<ExpenseSummary>(),
        typed::<ExportExpenses>(),
        typed::<DeleteExpense>(),
    ]
}

const GROUP: &str = "expenses";
/// Largest single amount accepted (a trillion units): far beyond any household expense, and
/// small enough that sums of many stay exact in i64 cents and in f64.
const MAX_AMOUNT_CENTS: i64 = 100_000_000_000_000;
/// Most items in one `batch_add_expenses` call.
const MAX_BATCH: usize = 100;
/// Most rows one export returns; the result says when there were more.
const MAX_EXPORT: i64 = 10_000;
const LIST_LIMIT: Limit = Limit::new(20, 100);

/// The categories an expense can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Food,
    Transport,
    Utilities,
    Entertainment,
    Shopping,
    Health,
    Education,
    Travel,
    Subscription,
    Housing,
    Other,
}

impl Category {
    fn name(self) -> &'static str {
        match self {
            Category::Food => "food",
            Category::Transport => "transport",
            Category::Utilities => "utilities",
            Category::Entertainment => "entertainment",
            Category::Shopping => "shopping",
            Category::Health => "health",
            Category::Education => "education",
            Category::Travel => "travel",
            Category::Subscription => "subscription",
            Category::Housing => "housing",
            Category::Other => "other",
        }
    }
}

/// An ISO 4217 code, three letters, kept upper-case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Currency(pub String);

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let code = text.trim().to_uppercase();
        if code.len() == 3 && code.chars().all(|c| c.is_ascii_uppercase()) {
            Ok(Self(code))
        } else {
            Err(serde::de::Error::custom(format!(
                "currency {text:?} is not an ISO 4217 code; use three letters such as EUR, USD, GBP"
            )))
        }
    }
}

inline_schema!(Currency, {"type": "string", "pattern": "^[A-Za-z]{3}$"});

/// An amount spent, as cents: positive, finite, rounded to the nearest cent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cents(pub i64);

impl<'de> Deserialize<'de> for Cents {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = f64::deserialize(deserializer)?;
        let invalid = serde::de::Error::custom;
        if !value.is_finite() || value <= 0.0 {
            return Err(invalid(format!(
                "must be a number greater than 0, got {value}"
            )));
        }
        let cents = (value * 100.0).round();
        if cents < 1.0 {
            return Err(invalid(format!(
                "{value} is less than one cent; give at least 0.01"
            )));
        }
        if cents > MAX_AMOUNT_CENTS as f64 {
            return Err(invalid(format!("{value} is too large")));
        }
        // In range and integral, so the conversion is exact.
        Ok(Self(cents as i64))
    }
}

inline_schema!(Cents, {"type": "number", "exclusiveMinimum": 0});

/// Record one expense. Amount in the currency's units (12.50), a category, optional
/// description, merchant, date and tags.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddExpense {
    /// Amount spent, greater than 0, e.g. 12.5
    amount: Cents,
    /// ISO 4217 code such as EUR, USD, GBP; default EUR
    currency: Option<Currency>,
    /// One of the fixed categories
    category: Category,
    /// What it was for
    description: Option<String>,
    /// Day spent: YYYY-MM-DD, today or yesterday; default today (user's timezone)
    date: Option<String>,
    /// Shop or payee
    merchant: Option<String>,
    /// Free-form labels
    #[serde(default)]
    tags: Vec<String>,
}

impl AddExpense {
    /// Records the expense; its id and what was recorded, in words.
    async fn add(self, ctx: &ToolContext, user: i64) -> Result<(i64, String), ToolError> {
        let spent_on = match text(self.date) {
            Some(day) => date(ctx, &day, "date")?,
            None => ctx.clock.now().with_timezone(&ctx.timezone).date_naive(),
        };
        let tags: Vec<String> = self
            .tags
            .iter()
            .filter_map(|t| text(Some(t.clone())))
            .collect();
        let expense = Expense {
            amount_cents: self.amount.0,
            currency: self.currency.map_or_else(|| "EUR".into(), |c| c.0),
            category: self.category.name().into(),
            description: text(self.description),
            merchant: text(self.merchant),
            tags: Value::from(tags).to_string(),
            spent_on: spent_on.format("%Y-%m-%d").to_string(),
        };
        let id = ctx
            .store
            .insert_expense(user, &expense, ctx.clock.now_ms())
            .await?;
        let recorded = format!(
            "{} {} {} on {}",
            format_cents(expense.amount_cents),
            expense.currency,
            expense.category,
            expense.spent_on
        );
        Ok((id, recorded))
    }
}

impl TypedTool for AddExpense {
    const NAME: &'static str = "add_expense";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "spent, paid, bought, cost, money, purchase, spending";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (id, recorded) = self.add(ctx, user_id(ctx)?).await?;
        Ok(json!({"id": id, "recorded": recorded}))
    }
}

/// Record several expenses at once; returns an id or an error for each item.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BatchAddExpenses {
    /// Expenses to record, each like add_expense's arguments (amount and category required);
    /// each succeeds or fails on its own
    expenses: Batch<Unchecked<AddExpense>, MAX_BATCH>,
}

impl TypedTool for BatchAddExpenses {
    const NAME: &'static str = "batch_add_expenses";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "spent, paid, receipts, money, many, bulk";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let results = self
            .expenses
            .each(|item| async move {
                let (id, _) = item.0.add(ctx, user).await?;
                Ok(json!({"id": id}))
            })
            .await;
        Ok(results)
    }
}

/// List expenses, newest first, filtered by date range, category, currency, amount range or
/// text.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListExpenses {
    /// First day included: YYYY-MM-DD, today, yesterday
    date_from: Option<String>,
    /// Last day included: YYYY-MM-DD, today, yesterday
    date_to: Option<String>,
    /// Only this category
    category: Option<Category>,
    /// Only this ISO currency code
    currency: Option<Currency>,
    /// Smallest amount included
    #[schemars(range(min = 0))]
    min_amount: Option<f64>,
    /// Largest amount included
    #[schemars(range(min = 0))]
    max_amount: Option<f64>,
    /// Words to find in description, merchant or tags
    search: Option<String>,
    /// Most expenses returned; default 20
    limit: Option<Count>,
}

impl TypedTool for ListExpenses {
    const NAME: &'static str = "list_expenses";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "query, spending, spent, find, search, money";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let filter = Filters {
            date_from: self.date_from,
            date_to: self.date_to,
            category: self.category,
            currency: self.currency,
            amounts: (self.min_amount, self.max_amount),
            search: self.search,
        }
        .read(ctx)?;
        let limit = LIST_LIMIT.of(self.limit);
        let rows = ctx
            .store
            .find_expenses(user_id(ctx)?, &filter, true, limit)
            .await?;
        let expenses: Vec<Value> = rows.iter().map(view).collect();
        Ok(json!({"count": expenses.len(), "expenses": expenses}))
    }
}

/// Totals and counts per currency, by category and by month (YYYY-MM), over a date range
/// (default: all dates).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExpenseSummary {
    /// First day included: YYYY-MM-DD, today, yesterday
    date_from: Option<String>,
    /// Last day included: YYYY-MM-DD, today, yesterday
    date_to: Option<String>,
    /// Only this category
    category: Option<Category>,
    /// Only this ISO currency code
    currency: Option<Currency>,
}

/// Totals for one currency.
#[derive(Default)]
struct CurrencyTotals {
    total: i64,
    count: i64,
    by_category: Vec<Value>,
    by_month: Vec<Value>,
}

impl TypedTool for ExpenseSummary {
    const NAME: &'static str = "expense_summary";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "budget, total, spending, report, month, statistics, money";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let filter = Filters {
            date_from: self.date_from,
            date_to: self.date_to,
            category: self.category,
            currency: self.currency,
            amounts: (None, None),
            search: None,
        }
        .read(ctx)?;
        let by_category = ctx
            .store
            .expense_totals(user, &filter, Bucket::Category)
            .await?;
        let by_month = ctx
            .store
            .expense_totals(user, &filter, Bucket::Month)
            .await?;
        let mut currencies: BTreeMap<String, CurrencyTotals> = BTreeMap::new();
        for row in by_category {
            let entry = currencies.entry(row.currency).or_default();
            entry.total += row.total;
            entry.count += row.n;
            entry.by_category.push(json!({
                "category": row.bucket, "total": format_cents(row.total), "count": row.n
            }));
        }
        for row in by_month {
            currencies
                .entry(row.currency)
                .or_default()
                .by_month
                .push(json!({
                    "month": row.bucket, "total": format_cents(row.total), "count": row.n
                }));
        }
        let count: i64 = currencies.values().map(|c| c.count).sum();
        Ok(json!({
            "date_from": filter.from,
            "date_to": filter.to,
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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Format {
    Csv,
    Json,
}

/// Export expenses, oldest first, as CSV or JSON, optionally over a date range and filters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExportExpenses {
    /// First day included: YYYY-MM-DD, today, yesterday
    date_from: Option<String>,
    /// Last day included: YYYY-MM-DD, today, yesterday
    date_to: Option<String>,
    /// Only this category
    category: Option<Category>,
    /// Only this ISO currency code
    currency: Option<Currency>,
    /// Smallest amount included
    #[schemars(range(min = 0))]
    min_amount: Option<f64>,
    /// Largest amount included
    #[schemars(range(min = 0))]
    max_amount: Option<f64>,
    /// Words to find in description, merchant or tags
    search: Option<String>,
    /// csv (with a header row) or json
    format: Format,
}

impl TypedTool for ExportExpenses {
    const NAME: &'static str = "export_expenses";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "csv, json, download, spreadsheet, backup, money";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let filter = Filters {
            date_from: self.date_from,
            date_to: self.date_to,
            category: self.category,
            currency: self.currency,
            amounts: (self.min_amount, self.max_amount),
            search: self.search,
        }
        .read(ctx)?;
        let mut rows = ctx
            .store
            .find_expenses(user_id(ctx)?, &filter, false, MAX_EXPORT + 1)
            .await?;
        let truncated = rows.len() as i64 > MAX_EXPORT;
        rows.truncate(MAX_EXPORT as usize);
        let mut out = json!({"count": rows.len()});
        if truncated {
            out["truncated"] = json!(format!(
                "only the first {MAX_EXPORT}; narrow the date range"
            ));
        }
        match self.format {
            Format::Csv => {
                out["format"] = json!("csv");
                out["content"] = json!(to_csv(&rows));
            }
            Format::Json => {
                out["format"] = json!("json");
                out["expenses"] = json!(rows.iter().map(view).collect::<Vec<_>>());
            }
        }
        Ok(out)
    }
}

/// Delete one expense by id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteExpense {
    /// Id of the expense to delete
    expense_id: i64,
}

impl TypedTool for DeleteExpense {
    const NAME: &'static str = "delete_expense";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Destructive;
    const TAGS: &'static str = "remove, expense, money, mistake";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let id = self.expense_id;
        match ctx.store.delete_expense(user_id(ctx)?, id).await? {
            Some(row) => Ok(json!({"deleted": view(&row)})),
            None => Err(not_found("expense", id)),
        }
    }
}

/// The filters of listing, summarising and exporting as the model gave them.
struct Filters {
    date_from: Option<String>,
    date_to: Option<String>,
    category: Option<Category>,
    currency: Option<Currency>,
    amounts: (Option<f64>, Option<f64>),
    search: Option<String>,
}

impl Filters {
    /// Checked and in the store's terms: dates in the user's timezone, amounts in cents.
    fn read(self, ctx: &ToolContext) -> Result<ExpenseFilter, ToolError> {
        let from = text(self.date_from)
            .map(|d| date(ctx, &d, "date_from"))
            .transpose()?;
        let to = text(self.date_to)
            .map(|d| date(ctx, &d, "date_to"))
            .transpose()?;
        if let (Some(from), Some(to)) = (from, to)
            && from > to
        {
            return Err(invalid(format!(
                "`date_from` {from} is after `date_to` {to}"
            )));
        }
        let (min, max) = self.amounts;
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
        let cents = |amount: f64| (amount * 100.0).round().min(MAX_AMOUNT_CENTS as f64) as i64;
        Ok(ExpenseFilter {
            from: from.map(|d| d.format("%Y-%m-%d").to_string()),
            to: to.map(|d| d.format("%Y-%m-%d").to_string()),
            category: self.category.map(|c| c.name().to_string()),
            currency: self.currency.map(|c| c.0),
            min_cents: min.map(cents),
            max_cents: max.map(cents),
            words: text(self.search)
                .map(|s| s.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
        })
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments(message.into())
}

/// Cents as a decimal string: 1250 -> "12.50".
pub fn format_cents(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

fn date(ctx: &ToolContext, text: &str, name: &'static str) -> Result<NaiveDate, ToolError> {
    parse_date(text, ctx.timezone, ctx.clock.now()).map_err(bad_date(name))
}

/// The tags of a stored expense (written as a JSON array; anything else reads as none).
fn tags(row: &ExpenseRow) -> Vec<String> {
    serde_json::from_str(&row.expense.tags).unwrap_or_default()
}

/// A stored expense as the model sees it; empty fields are left out.
fn view(row: &ExpenseRow) -> Value {
    let expense = &row.expense;
    let mut out = json!({
        "id": row.id,
        "date": expense.spent_on,
        "amount": format_cents(expense.amount_cents),
        "currency": expense.currency,
        "category": expense.category,
    });
    if let Some(d) = &expense.description {
        out["description"] = json!(d);
    }
    if let Some(m) = &expense.merchant {
        out["merchant"] = json!(m);
    }
    let tags = tags_value(&expense.tags);
    if tags.as_array().is_some_and(|t| !t.is_empty()) {
        out["tags"] = tags;
    }
    out
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

fn to_csv(rows: &[ExpenseRow]) -> String {
    let mut out = String::from("id,date,amount,currency,category,description,merchant,tags\n");
    for row in rows {
        let expense = &row.expense;
        let fields = [
            row.id.to_string(),
            expense.spent_on.clone(),
            format_cents(expense.amount_cents),
            expense.currency.clone(),
            expense.category.clone(),
            expense.description.clone().unwrap_or_default(),
            expense.merchant.clone().unwrap_or_default(),
            tags(row).join(";"),
        ];
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// A context whose clock reads 2026-03-10 20:00 UTC.
    async fn context() -> (ToolContext, tempfile::TempDir) {
        let now = chrono::Utc.with_ymd_and_hms(2026, 3, 10, 20, 0, 0).single();
        crate::tool::test_context_at(now.expect("valid")).await
    }

    async fn call(ctx: &ToolContext, name: &str, args: Value) -> Result<Value, ToolError> {
        crate::tool::test_calls::call(tools(), ctx, name, args).await
    }

    async fn ok(ctx: &ToolContext, name: &str, args: Value) -> Value {
        call(ctx, name, args).await.expect(name)
    }

    async fn stored(ctx: &ToolContext) -> i64 {
        crate::tool::test_calls::rows(ctx, "expenses").await
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
        let cents = |v: f64| serde_json::from_value::<Cents>(json!(v)).map(|c| c.0);
        assert_eq!(cents(19.99).expect("ok"), 1999);
        assert_eq!(cents(0.1 + 0.2).expect("ok"), 30);
        assert!(cents(0.004).is_err());
        assert!(cents(f64::NAN).is_err());
        assert!(cents(1e20).is_err());
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
            json!({"amount": 19.99, "category": "food", "description": "Pizza"}),
        )
        .await;
        assert_eq!(out["recorded"], "19.99 EUR food on 2026-03-11");
        let row: Expense = sqlx::query_as(
            "SELECT amount_cents, currency, category, description, merchant, tags, spent_on
             FROM expenses WHERE id = $1",
        )
        .bind(out["id"].as_i64().expect("id"))
        .fetch_one(ctx.store.pool())
        .await
        .expect("row");
        assert_eq!(row.amount_cents, 1999);
        assert_eq!(row.currency, "EUR");
        assert_eq!(row.category, "food");
        assert_eq!(row.spent_on, "2026-03-11");
        assert_eq!(row.tags, "[]");

        let out = ok(
            &ctx,
            "add_expense",
            json!({"amount": 3.5, "currency": "usd", "category": "other", "date": "yesterday", "merchant": "Kiosk", "tags": ["snack"]}),
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
            (json!({"category": "food"}), "missing field `amount`"),
            (
                json!({"amount": 5, "category": "gadgets"}),
                "`category`: unknown variant `gadgets`, expected one of `food`, `transport`",
            ),
            (json!({"amount": 5}), "missing field `category`"),
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
        assert!(err.to_string().contains("not a known user"));
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
                .contains("unknown variant `gizmos`")
        );
        assert!(
            results[3]["error"]
                .as_str()
                .expect("e")
                .contains("invalid type: string")
        );
        assert!(results[4]["id"].is_i64());
        assert_eq!(stored(&ctx).await, 2);

        let err = call(&ctx, "batch_add_expenses", json!({"expenses": []}))
            .await
            .expect_err("empty");
        assert!(err.to_string().contains("1 to 100"));
        let err = call(&ctx, "batch_add_expenses", json!({}))
            .await
            .expect_err("missing");
        assert!(err.to_string().contains("missing field `expenses`"));
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
            (json!({"category": "fun"}), "unknown variant `fun`"),
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
        let first = ctx.user_id;
        ctx.user_id = crate::tool::other_user(&ctx).await.user_id;
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
        assert!(err.to_string().contains("`csv` or `json`"), "{err}");
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
