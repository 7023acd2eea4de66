//! The `contacts` tools: people the user knows, with email, phone, birthday and notes, and the
//! birthdays coming up. Each tool is its argument type ([`TypedTool`]); the SQL is in
//! `store::contact`.

use std::sync::Arc;

use chrono::{Datelike, NaiveDate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::common::{deleted, listing, not_found, tags_value, user_id};
use super::typed::{Count, Limit, NonEmpty, Tags, text};
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::store::contact::{Contact, ContactPatch, ContactRow};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<AddContact>(),
        typed::<ListContacts>(),
        typed::<UpdateContact>(),
        typed::<DeleteContact>(),
        typed::<UpcomingBirthdays>(),
    ]
}

const MAX_DAYS: i64 = 366;
const GROUP: &str = "contacts";
const LIST_LIMIT: Limit = Limit::new(20, 50);

/// Save a person to the user's contacts. Returns their id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddContact {
    /// Full name
    name: NonEmpty,
    /// Email address
    email: Option<String>,
    /// Phone number, e.g. +49 30 1234567
    phone: Option<String>,
    /// YYYY-MM-DD
    birthday: Option<String>,
    /// Anything worth remembering about them
    notes: Option<String>,
    /// Labels, e.g. ["family"]
    #[serde(default)]
    tags: Tags,
}

impl TypedTool for AddContact {
    const NAME: &'static str = "add_contact";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "person, people, address book, friend, create";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let user = user_id(ctx)?;
        let contact = Contact {
            name: self.name.0,
            email: text(self.email).map(|e| check_email(&e)).transpose()?,
            phone: text(self.phone).map(|p| check_phone(&p)).transpose()?,
            birthday: text(self.birthday)
                .map(|b| check_birthday(&b, today(ctx)).map(|d| d.to_string()))
                .transpose()?,
            notes: text(self.notes),
            tags: self.tags.to_json(),
        };
        let id = ctx
            .store
            .insert_contact(user, &contact, ctx.clock.now_ms())
            .await?;
        Ok(json!({"id": id, "contact": fetch(ctx, user, id).await?}))
    }
}

/// List or search the user's contacts by name, email, phone or notes, alphabetically.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListContacts {
    /// Text in the name, email, phone or notes (case-insensitive)
    search: Option<String>,
    /// Only contacts with this tag
    tag: Option<String>,
    /// Default 20, at most 50
    limit: Option<Count>,
}

impl TypedTool for ListContacts {
    const NAME: &'static str = "list_contacts";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "person, people, address book, find, phone number, email address";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let page = LIST_LIMIT.page(self.search, self.tag, self.limit);
        let listed = ctx.store.list_contacts(user_id(ctx)?, &page).await?;
        Ok(listing("contacts", listed, ContactView::from))
    }
}

/// Change a contact: any of name, email, phone, birthday, notes (empty string removes a field),
/// tags (replaced).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateContact {
    /// The contact's id
    contact_id: i64,
    /// Full name
    name: Option<NonEmpty>,
    /// Email address; empty string removes it
    email: Option<String>,
    /// Phone number, e.g. +49 30 1234567
    phone: Option<String>,
    /// YYYY-MM-DD
    birthday: Option<String>,
    /// Anything worth remembering about them
    notes: Option<String>,
    /// Labels, e.g. ["family"]
    tags: Option<Tags>,
}

impl TypedTool for UpdateContact {
    const NAME: &'static str = "update_contact";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "person, edit, change";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, id) = (user_id(ctx)?, self.contact_id);
        let email = self
            .email
            .map(|email| text(Some(email)).map(|e| check_email(&e)).transpose());
        let phone = self
            .phone
            .map(|phone| text(Some(phone)).map(|p| check_phone(&p)).transpose());
        let birthday = self.birthday.map(|birthday| {
            text(Some(birthday))
                .map(|b| check_birthday(&b, today(ctx)).map(|d| d.to_string()))
                .transpose()
        });
        let patch = ContactPatch {
            name: self.name.map(|name| name.0),
            email: email.transpose()?,
            phone: phone.transpose()?,
            birthday: birthday.transpose()?,
            notes: self.notes.map(|notes| text(Some(notes))),
            tags: self.tags.map(|tags| tags.to_json()),
        };
        if patch.is_empty() {
            return Err(ToolError::InvalidArguments(
                "nothing to change: give at least one of name, email, phone, birthday, notes, tags"
                    .into(),
            ));
        }
        let now = ctx.clock.now_ms();
        if !ctx.store.update_contact(user, id, patch, now).await? {
            return Err(not_found("contact", id));
        }
        Ok(json!({"updated": id, "contact": fetch(ctx, user, id).await?}))
    }
}

/// Delete a contact for good.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteContact {
    /// The contact's id
    contact_id: i64,
}

impl TypedTool for DeleteContact {
    const NAME: &'static str = "delete_contact";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Destructive;
    const TAGS: &'static str = "person, remove";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (user, id) = (user_id(ctx)?, self.contact_id);
        let name = ctx.store.delete_contact(user, id).await?;
        deleted("contact", id, "name", name)
    }
}

/// Contacts whose birthday falls within the next days (today included), soonest first, with
/// the age they turn.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpcomingBirthdays {
    /// How many days ahead; default 30
    #[schemars(range(min = 1, max = MAX_DAYS))]
    days: Option<i64>,
}

impl TypedTool for UpcomingBirthdays {
    const NAME: &'static str = "upcoming_birthdays";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "birthday, anniversary, person, upcoming";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let days = self.days.unwrap_or(30).clamp(1, MAX_DAYS);
        let today = today(ctx);
        let mut upcoming = Vec::new();
        for (id, name, text) in ctx.store.contact_birthdays(user_id(ctx)?).await? {
            // Rows are validated on the way in; one that does not parse is skipped, not fatal.
            let Ok(birthday) = NaiveDate::parse_from_str(&text, "%Y-%m-%d") else {
                continue;
            };
            let Some(next) = next_birthday(birthday, today) else {
                continue;
            };
            let in_days = (next - today).num_days();
            if in_days < days {
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
}

/// A contact as the model sees it: the fields they have.
#[derive(Debug, Serialize)]
struct ContactView {
    id: i64,
    name: String,
    tags: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    phone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    birthday: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<String>,
}

impl From<ContactRow> for ContactView {
    fn from(row: ContactRow) -> Self {
        let contact = row.contact;
        Self {
            id: row.id,
            name: contact.name,
            tags: tags_value(&contact.tags),
            email: contact.email,
            phone: contact.phone,
            birthday: contact.birthday,
            notes: contact.notes,
        }
    }
}

async fn fetch(ctx: &ToolContext, user: i64, id: i64) -> Result<ContactView, ToolError> {
    ctx.store
        .contact(user, id)
        .await?
        .map(ContactView::from)
        .ok_or_else(|| not_found("contact", id))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::tool::test_context;
    use chrono::{TimeZone, Utc};

    crate::tool::test_calls::family_calls!(tools, "contacts");

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

        let other = crate::tool::other_user(&ctx).await;
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
