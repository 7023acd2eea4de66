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

/// What an update changes; a field left `None` stays as it is, `Some(None)` clears it.
#[derive(Clone, Debug, Default)]
pub struct ContactPatch {
    pub name: Option<String>,
    pub email: Option<Option<String>>,
    pub phone: Option<Option<String>>,
    /// `YYYY-MM-DD`.
    pub birthday: Option<Option<String>>,
    pub notes: Option<Option<String>>,
    /// The JSON array text, replacing the tags.
    pub tags: Option<String>,
}

impl ContactPatch {
    pub fn is_empty(&self) -> bool {
        let Self {
            name,
            email,
            phone,
            birthday,
            notes,
            tags,
        } = self;
        name.is_none()
            && email.is_none()
            && phone.is_none()
            && birthday.is_none()
            && notes.is_none()
            && tags.is_none()
    }
}

impl Store {
    /// Saves a contact; their id.
    pub async fn insert_contact(&self, user: i64, contact: &Contact, now: i64) -> StoreResult<i64> {
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
        sql.insert_id(self).await
    }

    /// The user's contacts that match, alphabetically.
    pub async fn list_contacts(&self, user: i64, page: &Page) -> StoreResult<Listed<ContactRow>> {
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM contacts WHERE user_id = "));
        sql.bind(user);
        page.filter(&mut sql, &["name", "email", "phone", "notes"]);
        page.fetch(sql, "LOWER(name), id", self).await
    }

    /// One of the user's contacts; none when it does not exist or is another user's.
    pub async fn contact(&self, user: i64, id: i64) -> StoreResult<Option<ContactRow>> {
        get_owned(self, ("contacts", COLUMNS), id, user).await
    }

    /// The user's contacts with a birthday: id, name and birthday.
    pub async fn contact_birthdays(&self, user: i64) -> StoreResult<Vec<(i64, String, String)>> {
        let mut sql = Sql::new("SELECT id, name, birthday FROM contacts WHERE user_id = ");
        sql.bind(user).push(" AND birthday IS NOT NULL");
        sql.fetch_all(self).await
    }

    /// Changes the user's contact as `patch` says, updated at `now`; false when no such
    /// contact is the user's.
    pub async fn update_contact(
        &self,
        user: i64,
        id: i64,
        patch: ContactPatch,
        now: i64,
    ) -> StoreResult<bool> {
        let mut changes = Changes::new("contacts");
        if let Some(name) = patch.name {
            changes.set("name", name);
        }
        if let Some(email) = patch.email {
            changes.set("email", email);
        }
        if let Some(phone) = patch.phone {
            changes.set("phone", phone);
        }
        if let Some(birthday) = patch.birthday {
            changes.set("birthday", birthday);
        }
        if let Some(notes) = patch.notes {
            changes.set("notes", notes);
        }
        if let Some(tags) = patch.tags {
            changes.set("tags", tags);
        }
        changes.set("updated_at", now);
        changes.apply(self, id, user).await
    }

    /// Deletes the user's contact; their name, or none when no such contact is the user's.
    pub async fn delete_contact(&self, user: i64, id: i64) -> StoreResult<Option<String>> {
        delete_owned(self, "contacts", "name", id, user).await
    }
}
