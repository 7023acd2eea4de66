//! The `expenses` table: what each user spent, as the `expenses` tools record, query, total and
//! delete it. Amounts are integer cents; `spent_on` is the user's local date, `YYYY-MM-DD`.

use super::query::{Sql, like_pattern};
use super::{Store, StoreResult};

/// A stored expense; `tags` is the JSON array text it is kept as.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ExpenseRow {
    pub id: i64,
    #[sqlx(flatten)]
    pub expense: Expense,
}

const COLUMNS: &str = "id, amount_cents, currency, category, description, merchant, tags, spent_on";

/// An expense as recorded (checked by the tool); `tags` is the JSON array text it is kept as.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Expense {
    pub amount_cents: i64,
    pub currency: String,
    pub category: String,
    pub description: Option<String>,
    pub merchant: Option<String>,
    pub tags: String,
    pub spent_on: String,
}

/// Which of the user's expenses a query covers; every bound is inclusive.
#[derive(Clone, Debug, Default)]
pub struct ExpenseFilter {
    pub from: Option<String>,
    pub to: Option<String>,
    pub category: Option<String>,
    pub currency: Option<String>,
    pub min_cents: Option<i64>,
    pub max_cents: Option<i64>,
    /// Each word must appear (case-insensitive) in the description, merchant or tags.
    pub words: Vec<String>,
}

impl ExpenseFilter {
    /// `{select} FROM expenses WHERE user_id = … AND …`.
    fn query(&self, select: &str, user: i64) -> Sql {
        let mut sql = Sql::new(&format!("{select} FROM expenses WHERE user_id = "));
        sql.bind(user);
        let bounds = [
            ("spent_on >= ", self.from.clone().map(Bound::Text)),
            ("spent_on <= ", self.to.clone().map(Bound::Text)),
            ("category = ", self.category.clone().map(Bound::Text)),
            ("currency = ", self.currency.clone().map(Bound::Text)),
            ("amount_cents >= ", self.min_cents.map(Bound::Int)),
            ("amount_cents <= ", self.max_cents.map(Bound::Int)),
        ];
        for (condition, value) in bounds {
            match value {
                Some(Bound::Text(text)) => sql.push(" AND ").push(condition).bind(text),
                Some(Bound::Int(n)) => sql.push(" AND ").push(condition).bind(n),
                None => &mut sql,
            };
        }
        for word in &self.words {
            sql.push(
                " AND LOWER(COALESCE(description, '') || ' ' || COALESCE(merchant, '') || ' ' || tags) LIKE ",
            )
            .bind(like_pattern(word))
            .push(" ESCAPE '\\'");
        }
        sql
    }
}

enum Bound {
    Text(String),
    Int(i64),
}

/// What [`Store::expense_totals`] groups by.
#[derive(Clone, Copy, Debug)]
pub enum Bucket {
    Category,
    /// `YYYY-MM`.
    Month,
}

/// The count and sum of the matching expenses of one currency in one bucket.
#[derive(Debug, sqlx::FromRow)]
pub struct Total {
    pub currency: String,
    pub bucket: String,
    pub n: i64,
    pub total: i64,
}

impl Store {
    /// Records an expense; its id.
    pub async fn insert_expense(&self, user: i64, expense: &Expense, now: i64) -> StoreResult<i64> {
        let mut sql = Sql::insert(
            "expenses",
            "user_id, amount_cents, currency, category, description, merchant, tags, spent_on, \
             created_at",
        );
        sql.value(user)
            .value(expense.amount_cents)
            .value(expense.currency.clone())
            .value(expense.category.clone())
            .value(expense.description.clone())
            .value(expense.merchant.clone())
            .value(expense.tags.clone())
            .value(expense.spent_on.clone())
            .value(now)
            .push(") RETURNING id");
        sql.insert_id(self).await
    }

    /// At most `limit` of the user's expenses that match, newest or oldest first (by date, then
    /// by id).
    pub async fn find_expenses(
        &self,
        user: i64,
        filter: &ExpenseFilter,
        newest_first: bool,
        limit: i64,
    ) -> StoreResult<Vec<ExpenseRow>> {
        let mut sql = filter.query(&format!("SELECT {COLUMNS}"), user);
        sql.push(if newest_first {
            " ORDER BY spent_on DESC, id DESC LIMIT "
        } else {
            " ORDER BY spent_on, id LIMIT "
        })
        .bind(limit);
        sql.fetch_all(self).await
    }

    /// Totals per currency and bucket: by currency, then largest total first (categories) or in
    /// order (months).
    pub async fn expense_totals(
        &self,
        user: i64,
        filter: &ExpenseFilter,
        by: Bucket,
    ) -> StoreResult<Vec<Total>> {
        let (bucket, order) = match by {
            Bucket::Category => ("category", "currency, total DESC, category"),
            Bucket::Month => ("SUBSTR(spent_on, 1, 7)", "currency, bucket"),
        };
        let mut sql = filter.query(
            &format!(
                "SELECT currency, {bucket} AS bucket, COUNT(*) AS n, CAST(SUM(amount_cents) AS BIGINT) AS total"
            ),
            user,
        );
        sql.push(&format!(" GROUP BY currency, {bucket} ORDER BY {order}"));
        sql.fetch_all(self).await
    }

    /// Deletes the user's expense; what it was, or none when no such expense is the user's.
    pub async fn delete_expense(&self, user: i64, id: i64) -> StoreResult<Option<ExpenseRow>> {
        let mut sql = Sql::new("DELETE FROM expenses WHERE id = ");
        sql.bind(id).push(" AND user_id = ").bind(user);
        sql.push(&format!(" RETURNING {COLUMNS}"));
        sql.write_returning(self).await
    }
}
