//! The `contacts` tools: people the user knows, with email, phone, birthday and notes, and the
//! birthdays coming up.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{Datelike, NaiveDate};
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::common::{
    Bind, Changes, Sql, db, delete_owned, id_arg, like_pattern, not_found, opt_text, tags_arg,
    tags_json, tags_value, user_id, write_tx,
};
use super::{Args, Risk, Tool, ToolContext, ToolError, ToolInfo, list_limit};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    [Op::Add, Op::List, Op::Update, Op::Delete, Op::Birthdays]
        .into_iter()
        .map(|op| Arc::new(ContactTool::new(op)) as Arc<dyn Tool>)
        .collect()
}

const MAX_DAYS: i64 = 366;

#[derive(Clone, Copy, Debug)]
enum Op {
    Add,
    List,
    Update,
    Delete,
    Birthdays,
}

struct ContactTool {
    info: ToolInfo,
    op: Op,
}

fn contact_properties() -> serde_json::Map<String, Value> {
    let value = json!({
        "name": {"type": "string", "description": "Full name"},
        "email": {"type": "string", "description": "Email address"},
        "phone": {"type": "string", "description": "Phone number, e.g. +49 30 1234567"},
        "birthday": {"type": "string", "description": "YYYY-MM-DD"},
        "notes": {"type": "string", "description": "Anything worth remembering about them"},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels, e.g. [\"family\"]"}
    });
    match value {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

fn contact_id_schema() -> Value {
    json!({"type": "integer", "description": "The contact's id"})
}

impl ContactTool {
    fn new(op: Op) -> Self {
        let info = match op {
            Op::Add => ToolInfo::new(
                "add_contact",
                "contacts",
                "Save a person to the user's contacts. Returns their id.",
                json!({
                    "type": "object",
                    "properties": contact_properties(),
                    "required": ["name"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Write)
            .tags(&["person", "people", "address book", "friend", "create"]),
            Op::List => ToolInfo::new(
                "list_contacts",
                "contacts",
                "List or search the user's contacts by name, email, phone or notes, alphabetically.",
                json!({
                    "type": "object",
                    "properties": {
                        "search": {"type": "string", "description": "Text in the name, email, phone or notes (case-insensitive)"},
                        "tag": {"type": "string", "description": "Only contacts with this tag"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 20, at most 50"}
                    },
                    "additionalProperties": false
                }),
            )
            .limit("limit", 20, 50)
            .tags(&["person", "people", "address book", "find", "phone number", "email address"]),
            Op::Update => {
                let mut properties = contact_properties();
                properties.insert("contact_id".into(), contact_id_schema());
                properties.insert(
                    "email".into(),
                    json!({"type": "string", "description": "Email address; empty string removes it"}),
                );
                ToolInfo::new(
                    "update_contact",
                    "contacts",
                    "Change a contact: any of name, email, phone, birthday, notes (empty string removes a field), tags (replaced).",
                    json!({
                        "type": "object",
                        "properties": properties,
                        "required": ["contact_id"],
                        "additionalProperties": false
                    }),
                )
                .risk(Risk::Write)
                .tags(&["person", "edit", "change"])
            }
            Op::Delete => ToolInfo::new(
                "delete_contact",
                "contacts",
                "Delete a contact for good.",
                json!({
                    "type": "object",
                    "properties": {"contact_id": contact_id_schema()},
                    "required": ["contact_id"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::Destructive)
            .tags(&["person", "remove"]),
            Op::Birthdays => ToolInfo::new(
                "upcoming_birthdays",
                "contacts",
                "Contacts whose birthday falls within the next days (today included), soonest first, with the age they turn.",
                json!({
                    "type": "object",
                    "properties": {
                        "days": {"type": "integer", "minimum": 1, "maximum": MAX_DAYS, "description": "How many days ahead; default 30"}
                    },
                    "additionalProperties": false
                }),
            )
            .tags(&["birthday", "anniversary", "person", "upcoming"]),
        };
        Self { info, op }
    }
}

#[async_trait]
impl Tool for ContactTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let user = user_id(ctx)?;
        let result = match self.op {
            Op::Add => add(ctx, user, &arguments).await?,
            Op::List => list(ctx, user, &arguments, list_limit(&self.info, &arguments)).await?,
            Op::Update => update(ctx, user, &arguments).await?,
            Op::Delete => {
                let id = id_arg(&arguments, "contact_id")?;
                let sql = "DELETE FROM contacts WHERE id = $1 AND user_id = $2 RETURNING name";
                delete_owned(ctx, user, sql, id, "contact", "name").await?
            }
            Op::Birthdays => birthdays(ctx, user, &arguments).await?,
        };
        Ok(result.to_string())
    }
}

fn check_email(text: &str) -> Result<String, ToolError> {
    let email = text.trim();
    let valid = email.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty()
            && domain.contains('.')
            && !domain.starts_with('.')
            && !domain.contains('@')
    }) && !email.chars().any(char::is_whitespace);
    if valid {
        Ok(email.to_string())
    } else {
        Err(ToolError::InvalidArguments(format!(
            "`email` {text:?} is not an email address like name@example.org"
        )))
    }
}

fn check_phone(text: &str) -> Result<String, ToolError> {
    let phone = text.trim();
    let allowed = phone
        .chars()
        .all(|c| c.is_ascii_digit() || " +-()./".contains(c));
    let digits = phone.chars().filter(char::is_ascii_digit).count();
    if allowed && (3..=20).contains(&digits) {
        Ok(phone.to_string())
    } else {
        Err(ToolError::InvalidArguments(format!(
            "`phone` {text:?} is not a phone number; use digits with optional +, spaces, -, ( )"
        )))
    }
}

fn check_birthday(text: &str, today: NaiveDate) -> Result<NaiveDate, ToolError> {
    let date = NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").map_err(|_| {
        ToolError::InvalidArguments(format!(
            "`birthday` {text:?} is not a date; use YYYY-MM-DD, e.g. 1990-04-17"
        ))
    })?;
    if date > today {
        return Err(ToolError::InvalidArguments(format!(
            "`birthday` {date} is in the future"
        )));
    }
    Ok(date)
}

fn today(ctx: &ToolContext) -> NaiveDate {
    ctx.clock.now().with_timezone(&ctx.timezone).date_naive()
}

async fn add(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let name = Args::new(arguments).str("name")?.trim().to_string();
    let email = opt_text(arguments, "email")
        .map(|e| check_email(&e))
        .transpose()?;
    let phone = opt_text(arguments, "phone")
        .map(|p| check_phone(&p))
        .transpose()?;
    let birthday = opt_text(arguments, "birthday")
        .map(|b| check_birthday(&b, today(ctx)))
        .transpose()?;
    let now = ctx.clock.now_ms();
    let mut tx = write_tx(ctx).await?;
    let row = sqlx::query(
        "INSERT INTO contacts (user_id, name, email, phone, birthday, notes, tags, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING id",
    )
    .bind(user)
    .bind(name)
    .bind(email)
    .bind(phone)
    .bind(birthday.map(|d| d.to_string()))
    .bind(opt_text(arguments, "notes"))
    .bind(tags_json(&tags_arg(arguments, "tags")))
    .bind(now)
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    let id: i64 = row.try_get("id").map_err(db)?;
    Ok(json!({"id": id, "contact": fetch(ctx, user, id).await?}))
}

const CONTACT_COLUMNS: &str = "id, name, email, phone, birthday, notes, tags";

fn contact_json(row: &AnyRow) -> Result<Value, ToolError> {
    let mut value = json!({
        "id": row.try_get::<i64, _>("id").map_err(db)?,
        "name": row.try_get::<String, _>("name").map_err(db)?,
        "tags": tags_value(&row.try_get::<String, _>("tags").map_err(db)?),
    });
    for field in ["email", "phone", "birthday", "notes"] {
        if let Some(text) = row.try_get::<Option<String>, _>(field).map_err(db)? {
            value[field] = json!(text);
        }
    }
    Ok(value)
}

async fn fetch(ctx: &ToolContext, user: i64, id: i64) -> Result<Value, ToolError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {CONTACT_COLUMNS} FROM contacts WHERE id = $1 AND user_id = $2"
    )))
    .bind(id)
    .bind(user)
    .fetch_optional(ctx.store.pool())
    .await
    .map_err(db)?
    .ok_or_else(|| not_found("contact", id))?;
    contact_json(&row)
}

async fn list(
    ctx: &ToolContext,
    user: i64,
    arguments: &Value,
    limit: i64,
) -> Result<Value, ToolError> {
    let mut query = Sql::new(&format!(
        "SELECT {CONTACT_COLUMNS} FROM contacts WHERE user_id = "
    ));
    query.bind(Bind::Int(user));
    if let Some(search) = opt_text(arguments, "search") {
        let pattern = like_pattern(&search);
        for (i, column) in ["name", "email", "phone", "notes"].into_iter().enumerate() {
            query.push(if i == 0 { " AND (" } else { " OR " });
            query.push(&format!("LOWER(COALESCE({column}, '')) LIKE "));
            query.bind(Bind::Text(pattern.clone()));
            query.push(" ESCAPE '\\'");
        }
        query.push(")");
    }
    if let Some(tag) = opt_text(arguments, "tag") {
        query.push_tag_filter(&tag);
    }
    query.push(" ORDER BY LOWER(name), id LIMIT ");
    query.bind(Bind::Int(limit + 1));
    let rows = query.fetch_all(ctx).await?;
    let more = rows.len() as i64 > limit;
    let contacts = rows
        .iter()
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(contact_json)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({"count": contacts.len(), "more": more, "contacts": contacts}))
}

async fn update(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let id = id_arg(arguments, "contact_id")?;
    let mut changes = Changes::default();
    if arguments.get("name").is_some() {
        let name = Args::new(arguments).str("name")?.trim().to_string();
        changes.set("name", Bind::Text(name));
    }
    if arguments.get("email").is_some() {
        let email = opt_text(arguments, "email")
            .map(|e| check_email(&e))
            .transpose()?;
        changes.set("email", Bind::OptText(email));
    }
    if arguments.get("phone").is_some() {
        let phone = opt_text(arguments, "phone")
            .map(|p| check_phone(&p))
            .transpose()?;
        changes.set("phone", Bind::OptText(phone));
    }
    if arguments.get("birthday").is_some() {
        let birthday = opt_text(arguments, "birthday")
            .map(|b| check_birthday(&b, today(ctx)))
            .transpose()?;
        changes.set("birthday", Bind::OptText(birthday.map(|d| d.to_string())));
    }
    if arguments.get("notes").is_some() {
        changes.set("notes", Bind::OptText(opt_text(arguments, "notes")));
    }
    if arguments.get("tags").is_some() {
        changes.set("tags", Bind::Text(tags_json(&tags_arg(arguments, "tags"))));
    }
    if changes.is_empty() {
        return Err(ToolError::InvalidArguments(
            "nothing to change: give at least one of name, email, phone, birthday, notes, tags"
                .into(),
        ));
    }
    changes.set("updated_at", Bind::Int(ctx.clock.now_ms()));
    if !changes.apply(ctx, "contacts", id, user).await? {
        return Err(not_found("contact", id));
    }
    Ok(json!({"updated": id, "contact": fetch(ctx, user, id).await?}))
}

/// The next time `birthday` comes round on or after `today`; 29 February is kept on
/// 28 February in other years.
fn next_birthday(birthday: NaiveDate, today: NaiveDate) -> Option<NaiveDate> {
    let on = |year: i32| {
        NaiveDate::from_ymd_opt(year, birthday.month(), birthday.day())
            .or_else(|| NaiveDate::from_ymd_opt(year, birthday.month(), birthday.day() - 1))
    };
    let this_year = on(today.year())?;
    if this_year >= today {
        Some(this_year)
    } else {
        on(today.year() + 1)
    }
}

async fn birthdays(ctx: &ToolContext, user: i64, arguments: &Value) -> Result<Value, ToolError> {
    let days = Args::new(arguments)
        .opt_i64("days")
        .unwrap_or(30)
        .clamp(1, MAX_DAYS);
    let today = today(ctx);
    let rows = sqlx::query(
        "SELECT id, name, birthday FROM contacts WHERE user_id = $1 AND birthday IS NOT NULL",
    )
    .bind(user)
    .fetch_all(ctx.store.pool())
    .await
    .map_err(db)?;
    let mut upcoming = Vec::new();
    for row in &rows {
        let text: String = row.try_get("birthday").map_err(db)?;
        // Rows are validated on the way in; one that does not parse is skipped, not fatal.
        let Ok(birthday) = NaiveDate::parse_from_str(&text, "%Y-%m-%d") else {
            continue;
        };
        let Some(next) = next_birthday(birthday, today) else {
            continue;
        };
        let in_days = (next - today).num_days();
        if in_days < days {
            let name: String = row.try_get("name").map_err(db)?;
            let id: i64 = row.try_get("id").map_err(db)?;
            upcoming.push((in_days, name, id, birthday, next));
        }
    }
    upcoming.sort();
    let birthdays: Vec<Value> = upcoming
        .into_iter()
        .map(|(in_days, name, id, birthday, next)| {
            json!({
                "contact_id": id,
                "name": name,
                "date": next.to_string(),
                "weekday": next.format("%A").to_string(),
                "in_days": in_days,
                "turns": next.year() - birthday.year(),
            })
        })
        .collect();
    Ok(json!({"today": today.to_string(), "days": days, "birthdays": birthdays}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::tool::test_context;
    use chrono::{TimeZone, Utc};

    async fn ok(ctx: &ToolContext, name: &str, args: Value) -> Value {
        crate::tool::test_calls::ok(tools(), ctx, name, args).await
    }

    async fn err(ctx: &ToolContext, name: &str, args: Value) -> String {
        crate::tool::test_calls::err(tools(), ctx, name, args).await
    }

    async fn count(ctx: &ToolContext) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM contacts")
            .fetch_one(ctx.store.pool())
            .await
            .expect("count")
    }

    fn date(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("date")
    }

    #[tokio::test]
    async fn add_search_update_delete() {
        let (ctx, _dir) = test_context().await;
        let ada = ok(
            &ctx,
            "add_contact",
            json!({"name": "Ada Lovelace", "email": "ada@example.org", "phone": "+44 20 1234 5678", "birthday": "1815-12-10", "notes": "Likes engines", "tags": ["Math"]}),
        )
        .await;
        let id = ada["id"].as_i64().expect("id");
        assert_eq!(ada["contact"]["birthday"], "1815-12-10");
        ok(&ctx, "add_contact", json!({"name": "bob builder"})).await;

        let all = ok(&ctx, "list_contacts", json!({})).await;
        assert_eq!(all["contacts"][0]["name"], "Ada Lovelace", "alphabetical");
        for search in ["lovelace", "EXAMPLE.org", "1234", "engines"] {
            let found = ok(&ctx, "list_contacts", json!({"search": search})).await;
            assert_eq!(found["count"], 1, "{search}");
        }
        assert_eq!(
            ok(&ctx, "list_contacts", json!({"tag": "math"})).await["count"],
            1
        );

        let updated = ok(
            &ctx,
            "update_contact",
            json!({"contact_id": id, "email": "", "phone": "030 123"}),
        )
        .await;
        assert!(updated["contact"].get("email").is_none(), "{updated}");
        assert_eq!(updated["contact"]["phone"], "030 123");
        assert!(
            err(&ctx, "update_contact", json!({"contact_id": id}))
                .await
                .contains("nothing to change")
        );
        assert_eq!(
            err(
                &ctx,
                "update_contact",
                json!({"contact_id": 77, "notes": "x"})
            )
            .await,
            "contact 77 not found"
        );

        let user = ctx
            .store
            .allow_identity("test", "u2", None, "config", false, 0)
            .await
            .expect("user");
        let mut other = ctx.clone();
        other.user_id = Some(user.user_id);
        assert_eq!(
            err(&other, "delete_contact", json!({"contact_id": id})).await,
            format!("contact {id} not found")
        );
        assert_eq!(ok(&other, "list_contacts", json!({})).await["count"], 0);
        assert_eq!(
            ok(&ctx, "delete_contact", json!({"contact_id": id})).await["name"],
            "Ada Lovelace"
        );
        assert_eq!(count(&ctx).await, 1);
    }

    #[tokio::test]
    async fn bad_fields_are_refused_and_store_nothing() {
        let (ctx, _dir) = test_context().await;
        assert!(
            err(&ctx, "add_contact", json!({"name": " "}))
                .await
                .contains("`name`")
        );
        let message = err(
            &ctx,
            "add_contact",
            json!({"name": "X", "birthday": "10/12/1815"}),
        )
        .await;
        assert!(message.contains("YYYY-MM-DD"), "{message}");
        assert!(
            err(
                &ctx,
                "add_contact",
                json!({"name": "X", "birthday": "2999-01-01"})
            )
            .await
            .contains("future")
        );
        assert!(
            err(
                &ctx,
                "add_contact",
                json!({"name": "X", "email": "not an email"})
            )
            .await
            .contains("`email`")
        );
        assert!(
            err(
                &ctx,
                "add_contact",
                json!({"name": "X", "phone": "call me"})
            )
            .await
            .contains("`phone`")
        );
        assert_eq!(count(&ctx).await, 0);
    }

    #[test]
    fn next_birthday_wraps_the_year_and_keeps_leap_days() {
        let today = date("2026-12-30");
        assert_eq!(
            next_birthday(date("1990-12-30"), today),
            Some(date("2026-12-30"))
        );
        assert_eq!(
            next_birthday(date("1990-01-02"), today),
            Some(date("2027-01-02"))
        );
        assert_eq!(
            next_birthday(date("2000-02-29"), date("2026-01-01")),
            Some(date("2026-02-28"))
        );
        assert_eq!(
            next_birthday(date("2000-02-29"), date("2027-12-01")),
            Some(date("2028-02-29"))
        );
    }

    #[tokio::test]
    async fn upcoming_birthdays_in_the_users_timezone() {
        let (mut ctx, _dir) = test_context().await;
        // 23:30 UTC on 30 December is already 31 December in Berlin.
        ctx.clock = ManualClock::new(
            Utc.with_ymd_and_hms(2026, 12, 30, 23, 30, 0)
                .single()
                .expect("time"),
        );
        ctx.timezone = "Europe/Berlin".parse().expect("tz");
        ok(
            &ctx,
            "add_contact",
            json!({"name": "Yesterday", "birthday": "1990-12-30"}),
        )
        .await;
        ok(
            &ctx,
            "add_contact",
            json!({"name": "Today", "birthday": "1990-12-31"}),
        )
        .await;
        ok(
            &ctx,
            "add_contact",
            json!({"name": "New Year", "birthday": "2000-01-01"}),
        )
        .await;
        ok(
            &ctx,
            "add_contact",
            json!({"name": "Spring", "birthday": "1980-04-01"}),
        )
        .await;
        ok(&ctx, "add_contact", json!({"name": "No birthday"})).await;

        let result = ok(&ctx, "upcoming_birthdays", json!({})).await;
        assert_eq!(result["today"], "2026-12-31");
        let names: Vec<_> = result["birthdays"]
            .as_array()
            .expect("list")
            .iter()
            .map(|b| b["name"].as_str().expect("name").to_string())
            .collect();
        assert_eq!(names, ["Today", "New Year"]);
        assert_eq!(result["birthdays"][0]["in_days"], 0);
        assert_eq!(result["birthdays"][0]["turns"], 36);
        assert_eq!(result["birthdays"][1]["date"], "2027-01-01");
        assert_eq!(result["birthdays"][1]["turns"], 27);
        let all = ok(&ctx, "upcoming_birthdays", json!({"days": 366})).await;
        assert_eq!(all["birthdays"].as_array().expect("list").len(), 4);
        assert_eq!(all["birthdays"][3]["name"], "Yesterday");
    }
}
