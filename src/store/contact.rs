//! The `contacts` table: the people each user knows, as the `contacts` tools read and change
//! them.

use super::query::{Changes, Listed, Page, Sql, delete_owned, get_owned};
use super::{Store, StoreResult};

/// A stored contact.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ContactRow {
    pub id: i64,
    #[sqlx(flatten)]
    pub contact: Contact,
}

const COLUMNS: &str = "id, name, email, phone, birthday, notes, tags";

/// A person as saved (checked by the tool): `birthday` is `YYYY-MM-DD`, `tags` the JSON array
/// text.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Contact {
    pub name: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub birthday: Option<String>,
    pub notes: Option<String>,
    pub tags: String,
}

/// Saves a contact; their id.
pub async fn insert(store: &Store, user: i64, contact: &Contact, now: i64) -> StoreResult<i64> {
    let mut sql = Sql::insert(
        "contacts",
        "user_id, name, email, phone, birthday, notes, tags, created_at, updated_at",
    );
    sql.value(user)
        .value(contact.name.clone())
        .value(contact.email.clone())
        .value(contact.phone.clone())
        .value(contact.birthday.clone())
        .value(contact.notes.clone())
        .value(contact.tags.clone())
        .value(now)
        .value(now)
        .push(") RETURNING id");
    sql.insert_id(store).await
}

/// The user's contacts that match, alphabetically.
pub async fn list(store: &Store, user: i64, page: &Page) -> StoreResult<Listed<ContactRow>> {
    let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM contacts WHERE user_id = "));
    sql.bind(user);
    page.filter(&mut sql, &["name", "email", "phone", "notes"]);
    page.fetch(sql, "LOWER(name), id", store).await
}

/// One of the user's contacts; none when it does not exist or is another user's.
pub async fn get(store: &Store, user: i64, id: i64) -> StoreResult<Option<ContactRow>> {
    get_owned(store, ("contacts", COLUMNS), id, user).await
}

/// The user's contacts with a birthday: id, name and birthday.
pub async fn with_birthdays(store: &Store, user: i64) -> StoreResult<Vec<(i64, String, String)>> {
    let mut sql = Sql::new("SELECT id, name, birthday FROM contacts WHERE user_id = ");
    sql.bind(user).push(" AND birthday IS NOT NULL");
    sql.fetch_all(store).await
}

/// The columns an update changes; run with [`Changes::apply`].
pub fn changes() -> Changes {
    Changes::new("contacts")
}

/// Deletes the user's contact; their name, or none when no such contact is the user's.
pub async fn delete(store: &Store, user: i64, id: i64) -> StoreResult<Option<String>> {
    delete_owned(store, "contacts", "name", id, user).await
}
