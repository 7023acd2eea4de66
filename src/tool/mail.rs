//! The `email` tools: the owner's mailboxes (`[[mailboxes]]`) searched, read and written from
//! (docs: README, "Mailboxes"). The IMAP and SMTP work is `hearth_email::mailbox`; this module
//! is what the model sees and what the owner approves.
//!
//! - `search_email`, `read_email` and `list_unread` only read: the server searches (`UID
//!   SEARCH`), only the hits' headers are fetched, folders are opened read-only and nothing is
//!   marked read.
//! - Everything a mail says (headers, body, attachment names) is outside text: it reaches the
//!   model only inside [`Untrusted`], marked as data, never as instructions.
//! - `send_email` and `reply_email` always ask the owner ([`TypedTool::ALWAYS_CONFIRM`]),
//!   whatever the autonomy, and no schedule may allow them unattended. The prompt is the draft
//!   itself ([`TypedTool::prompt`]): From, To, Cc, Subject and the whole body (capped at
//!   [`MAX_BODY_CHARS`] so it always fits one prompt). The draft is made by [`draft_of`] from
//!   the stored arguments both for the prompt and for the send, so what is sent is what was
//!   shown; a changed draft is a new call and a new prompt.
//! - The tools are the owner's only: other people hearth talks to never reach the mailbox.

use std::sync::Arc;
use std::time::Duration;

use hearth_email::mailbox::{Account, Draft, Found, Mail, Query};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use super::common::user_id;
use super::typed::{Count, Limit, NonEmpty, inline_schema};
use super::untrusted::Untrusted;
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::config::{Config, MailboxConfig, Secret};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<SearchEmail>(),
        typed::<ReadEmail>(),
        typed::<ListUnread>(),
        typed::<SendEmail>(),
        typed::<ReplyEmail>(),
    ]
}

const GROUP: &str = "email";
const LIST_LIMIT: Limit = Limit::new(10, 50);
/// Longest body a sent mail may have: the approval prompt shows it whole, within one message
/// of every channel (Telegram's limit is 4,096 characters).
pub const MAX_BODY_CHARS: usize = 3_000;
/// Longest subject.
const MAX_SUBJECT_CHARS: usize = 200;
/// Most characters of one mail the model is shown.
const MAX_MAIL_CHARS: usize = 20_000;
/// Each IMAP command and each SMTP send waits at most this long.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// A call connects, logs in and runs a few commands.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// An email address as the model writes it: a bare `name@domain`, so the prompt shows exactly
/// where the mail goes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Address(String);

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let text = text.trim();
        hearth_email::check_address(text).map_err(serde::de::Error::custom)?;
        Ok(Self(text.to_owned()))
    }
}

inline_schema!(Address, {
    "type": "string",
    "pattern": "^[^\\s<>@]+@[^\\s<>@]+$",
    "maxLength": 254
});

/// A subject line: line breaks become spaces (a header is one line).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Subject(String);

impl<'de> Deserialize<'de> for Subject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let line: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        if line.chars().count() > MAX_SUBJECT_CHARS {
            return Err(serde::de::Error::custom(format!(
                "at most {MAX_SUBJECT_CHARS} characters"
            )));
        }
        Ok(Self(line.trim().to_owned()))
    }
}

inline_schema!(Subject, {"type": "string", "maxLength": 200});

/// A mail's body, at most [`MAX_BODY_CHARS`].
#[derive(Clone, Debug, PartialEq, Eq)]
struct Body(String);

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.trim().is_empty() {
            return Err(serde::de::Error::custom("must not be empty"));
        }
        if text.chars().count() > MAX_BODY_CHARS {
            return Err(serde::de::Error::custom(format!(
                "at most {MAX_BODY_CHARS} characters"
            )));
        }
        Ok(Self(text))
    }
}

inline_schema!(Body, {"type": "string", "minLength": 1, "maxLength": 3000});

/// A day, `YYYY-MM-DD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Day(chrono::NaiveDate);

impl<'de> Deserialize<'de> for Day {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        chrono::NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
            .map(Day)
            .map_err(|_| {
                serde::de::Error::custom(format!("`{text}` is not a date: use YYYY-MM-DD"))
            })
    }
}

inline_schema!(Day, {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"});

/// The account of `name` (the first mailbox when none is named), its password resolved.
fn account(config: &Config, name: Option<&str>) -> Result<(MailboxConfig, Account), ToolError> {
    let entry = match name.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => config
            .mailboxes
            .iter()
            .find(|m| m.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let names: Vec<&str> = config.mailboxes.iter().map(|m| m.name.as_str()).collect();
                ToolError::InvalidArguments(format!(
                    "there is no mailbox `{name}`; the mailboxes are: {}",
                    if names.is_empty() { "none".into() } else { names.join(", ") }
                ))
            })?,
        None => config.mailboxes.first().ok_or_else(|| {
            ToolError::Failed(
                "no mailbox is set up: the owner adds a [[mailboxes]] entry to hearth's config (README, \"Mailboxes\")".into(),
            )
        })?,
    };
    // The problem names the variable, never a value.
    let password = Secret::resolve(&entry.password_env).map_err(|problem| {
        ToolError::Failed(format!(
            "the password of mailbox `{}` ({}): {problem}",
            entry.name, entry.password_env
        ))
    })?;
    let account = Account::new(
        &entry.imap_url,
        entry.smtp_url.as_deref(),
        &entry.username,
        password.expose().to_owned(),
        &entry.address,
        COMMAND_TIMEOUT,
    )
    .map_err(|e| ToolError::Failed(format!("mailbox `{}`: {e}", entry.name)))?;
    Ok((entry.clone(), account))
}

/// The mailbox is the owner's: nobody else hearth talks to may read or send from it.
async fn owner_only(ctx: &ToolContext) -> Result<(), ToolError> {
    let user = user_id(ctx)?;
    if crate::store::user::is_owner(&ctx.store, user).await? {
        Ok(())
    } else {
        Err(ToolError::Failed(
            "the mailbox tools are for hearth's owner only".into(),
        ))
    }
}

fn failed(error: hearth_channel::ChannelError) -> ToolError {
    ToolError::Failed(error.message)
}

fn folder_of(folder: Option<NonEmpty>) -> String {
    folder.map_or_else(|| "INBOX".to_owned(), |f| f.0)
}

/// A header value on one line, as a list shows it.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A search's answer: the uids (hearth's own numbers) apart from the headers (the senders'
/// words, inside the envelope).
fn listing(mailbox: &str, folder: &str, found: &Found) -> Value {
    let lines: Vec<String> = found
        .mails
        .iter()
        .map(|m| {
            format!(
                "uid {} | {} | {}{} | From: {} | Subject: {}",
                m.uid,
                m.date.as_deref().unwrap_or("no date"),
                if m.unread { "unread" } else { "read" },
                if m.size > 0 {
                    format!(" | {} bytes", m.size)
                } else {
                    String::new()
                },
                one_line(&m.from),
                one_line(&m.subject),
            )
        })
        .collect();
    let uids: Vec<u32> = found.mails.iter().map(|m| m.uid).collect();
    let mut value = json!({
        "mailbox": mailbox,
        "folder": folder,
        "matched": found.total,
        "shown": found.mails.len(),
        "uids": uids,
        "mails": Untrusted::new(
            format!("mail headers in {mailbox}/{folder}"),
            &lines.join("\n"),
            MAX_MAIL_CHARS,
        ),
        "hint": "read_email with a uid reads one mail",
    });
    if let Some(note) = &found.note {
        value["note"] = json!(note);
    }
    value
}

/// Search the owner's mailbox on the mail server (nothing is downloaded to search, nothing is
/// marked read): every given criterion must match. Returns the newest matching mails' uid,
/// date, sender and subject; read one with read_email.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchEmail {
    /// the sender's address or name, or part of it
    from: Option<NonEmpty>,
    /// a recipient's address or name, or part of it
    to: Option<NonEmpty>,
    /// words in the subject
    subject: Option<NonEmpty>,
    /// words anywhere in the mail (slower on large mailboxes)
    text: Option<NonEmpty>,
    /// arrived on or after this day, YYYY-MM-DD
    since: Option<Day>,
    /// arrived before this day, YYYY-MM-DD
    before: Option<Day>,
    /// only mails not yet read
    #[serde(default)]
    unread: bool,
    /// the folder, default INBOX
    folder: Option<NonEmpty>,
    /// which configured mailbox (its name); default the first
    mailbox: Option<NonEmpty>,
    /// how many of the newest matches to show
    limit: Option<Count>,
}

impl TypedTool for SearchEmail {
    const NAME: &'static str = "search_email";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "mail, inbox, imap, find, message, sender";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    const TIMEOUT: Option<Duration> = Some(CALL_TIMEOUT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        owner_only(ctx).await?;
        let (entry, account) = account(&ctx.config, self.mailbox.as_ref().map(|m| m.0.as_str()))?;
        let folder = folder_of(self.folder);
        let query = Query {
            folder: folder.clone(),
            from: self.from.map(|v| v.0),
            to: self.to.map(|v| v.0),
            subject: self.subject.map(|v| v.0),
            text: self.text.map(|v| v.0),
            since: self.since.map(|d| d.0),
            before: self.before.map(|d| d.0),
            unread_only: self.unread,
            limit: usize::try_from(LIST_LIMIT.of(self.limit)).unwrap_or(10),
        };
        let found = account.search(&query).await.map_err(failed)?;
        Ok(listing(&entry.name, &folder, &found))
    }
}

/// The newest unread mails of a folder of the owner's mailbox, as a summary (sender, subject,
/// date); nothing is marked read.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListUnread {
    /// the folder, default INBOX
    folder: Option<NonEmpty>,
    /// which configured mailbox (its name); default the first
    mailbox: Option<NonEmpty>,
    /// how many of the newest unread mails to show
    limit: Option<Count>,
}

impl TypedTool for ListUnread {
    const NAME: &'static str = "list_unread";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "mail, inbox, new mail, unread, briefing";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    const TIMEOUT: Option<Duration> = Some(CALL_TIMEOUT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        owner_only(ctx).await?;
        let (entry, account) = account(&ctx.config, self.mailbox.as_ref().map(|m| m.0.as_str()))?;
        let folder = folder_of(self.folder);
        let query = Query {
            folder: folder.clone(),
            unread_only: true,
            limit: usize::try_from(LIST_LIMIT.of(self.limit)).unwrap_or(10),
            ..Query::default()
        };
        let found = account.search(&query).await.map_err(failed)?;
        let mut value = listing(&entry.name, &folder, &found);
        value["unread"] = json!(found.total);
        Ok(value)
    }
}

/// Read one mail of the owner's mailbox as text: its headers, its body (plain text, or the HTML
/// part turned into text) and its attachments by name and size. It is not marked read.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadEmail {
    /// the mail's uid, from search_email or list_unread
    uid: u32,
    /// the folder, default INBOX
    folder: Option<NonEmpty>,
    /// which configured mailbox (its name); default the first
    mailbox: Option<NonEmpty>,
}

/// One mail as the model reads it: all of it inside the envelope.
fn mail_text(mail: &Mail) -> String {
    let mut text = format!("From: {}\n", one_line(&mail.from));
    if let Some(reply_to) = &mail.reply_to {
        text.push_str(&format!("Reply-To: {}\n", one_line(reply_to)));
    }
    text.push_str(&format!("To: {}\n", one_line(&mail.to)));
    if !mail.cc.is_empty() {
        text.push_str(&format!("Cc: {}\n", one_line(&mail.cc)));
    }
    text.push_str(&format!(
        "Date: {}\nSubject: {}\n\n{}\n",
        mail.date.as_deref().unwrap_or("none"),
        one_line(&mail.subject),
        mail.text.trim_end()
    ));
    if !mail.attachments.is_empty() {
        text.push_str("\nAttachments:\n");
        for a in &mail.attachments {
            text.push_str(&format!(
                "- {} ({}, {} bytes)\n",
                one_line(&a.name),
                a.mime,
                a.size
            ));
        }
    }
    text
}

impl TypedTool for ReadEmail {
    const NAME: &'static str = "read_email";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "mail, open, message, body, attachment";
    const TIMEOUT: Option<Duration> = Some(CALL_TIMEOUT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        owner_only(ctx).await?;
        let (entry, account) = account(&ctx.config, self.mailbox.as_ref().map(|m| m.0.as_str()))?;
        let folder = folder_of(self.folder);
        let mail = account.read(&folder, self.uid).await.map_err(failed)?;
        Ok(json!({
            "mailbox": entry.name,
            "folder": folder,
            "uid": mail.uid,
            "unread": mail.unread,
            "attachments": mail.attachments.len(),
            "mail": Untrusted::new(
                format!("mail from {}", one_line(&mail.from)),
                &mail_text(&mail),
                MAX_MAIL_CHARS,
            ),
        }))
    }
}

/// The draft a send or a reply makes: the one function behind both the prompt and the send.
fn draft_of(to: &[Address], cc: &[Address], subject: &Subject, body: &Body) -> Draft {
    Draft {
        to: to.iter().map(|a| a.0.clone()).collect(),
        cc: cc.iter().map(|a| a.0.clone()).collect(),
        subject: subject.0.clone(),
        body: body.0.clone(),
        in_reply_to: None,
        references: Vec::new(),
    }
}

/// The prompt's text of `draft`, from `from`, whole.
fn render(from: &str, draft: &Draft, reply: Option<(&str, u32)>) -> String {
    let list = |addresses: &[String]| {
        if addresses.is_empty() {
            "—".to_owned()
        } else {
            addresses.join(", ")
        }
    };
    let mut text = String::from("✉️ Mail to send:\n");
    if let Some((folder, uid)) = reply {
        text.push_str(&format!("In reply to: mail {uid} in {folder}\n"));
    }
    text.push_str(&format!(
        "From: {from}\nTo: {}\nCc: {}\nSubject: {}\n\n{}",
        list(&draft.to),
        list(&draft.cc),
        draft.subject,
        draft.body
    ));
    text
}

/// The From the draft shows, as the send will write it; a mailbox that is not there is said so
/// (the call then fails before anything is sent).
fn shown_from(config: &Config, mailbox: Option<&NonEmpty>) -> String {
    let name = mailbox.map(|m| m.0.as_str());
    let entry = match name {
        Some(name) => config
            .mailboxes
            .iter()
            .find(|m| m.name.eq_ignore_ascii_case(name)),
        None => config.mailboxes.first(),
    };
    match entry.and_then(|e| hearth_email::parse_from(&e.address).ok()) {
        Some((Some(name), address)) => format!("{name} <{address}>"),
        Some((None, address)) => address,
        None => "(no such mailbox: the send will fail)".into(),
    }
}

fn sent(entry: &MailboxConfig, result: &hearth_email::mailbox::Sent, draft: &Draft) -> Value {
    let mut value = json!({
        "sent": true,
        "mailbox": entry.name,
        "to": draft.to,
        "cc": draft.cc,
        "subject": draft.subject,
        "message_id": result.message_id,
    });
    if let Some(folder) = &result.saved_in {
        value["saved_in"] = json!(folder);
    }
    if let Some(why) = &result.not_saved {
        value["not_saved"] = json!(format!("sent, but no copy was kept in Sent: {why}"));
    }
    value
}

/// Send a new mail from the owner's mailbox. The owner always sees the whole draft (From, To,
/// Cc, Subject, body) and approves it first; do not call again while it waits. A changed mail is
/// a new request.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SendEmail {
    /// recipients' addresses, name@domain
    #[schemars(length(min = 1, max = 20))]
    to: Vec<Address>,
    /// copies to these addresses
    #[serde(default)]
    #[schemars(length(max = 20))]
    cc: Vec<Address>,
    /// the subject line
    subject: Subject,
    /// the text of the mail, plain text, at most 3000 characters
    body: Body,
    /// which configured mailbox sends it (its name); default the first
    mailbox: Option<NonEmpty>,
}

impl TypedTool for SendEmail {
    const NAME: &'static str = "send_email";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Outward;
    const ALWAYS_CONFIRM: bool = true;
    const TAGS: &'static str = "mail, write, compose, message, smtp";
    const TIMEOUT: Option<Duration> = Some(CALL_TIMEOUT);
    type Output = Value;

    /// The whole draft, instead of the arguments.
    async fn prompt(&self, ctx: &ToolContext, _arguments: String) -> String {
        let draft = draft_of(&self.to, &self.cc, &self.subject, &self.body);
        render(
            &shown_from(&ctx.config, self.mailbox.as_ref()),
            &draft,
            None,
        )
    }

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        owner_only(ctx).await?;
        let (entry, account) = account(&ctx.config, self.mailbox.as_ref().map(|m| m.0.as_str()))?;
        let draft = draft_of(&self.to, &self.cc, &self.subject, &self.body);
        let result = account.send(&draft).await.map_err(failed)?;
        Ok(sent(&entry, &result, &draft))
    }
}

/// Reply to a mail of the owner's mailbox: threaded under it (In-Reply-To and References). The
/// owner always sees the whole draft and approves it first; do not call again while it waits.
/// Write `to` and `subject` yourself: usually the original's Reply-To or From, and "Re: " with
/// its subject.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReplyEmail {
    /// the uid of the mail answered, from search_email, list_unread or read_email
    uid: u32,
    /// the folder of that mail, default INBOX
    folder: Option<NonEmpty>,
    /// recipients' addresses, name@domain
    #[schemars(length(min = 1, max = 20))]
    to: Vec<Address>,
    /// copies to these addresses
    #[serde(default)]
    #[schemars(length(max = 20))]
    cc: Vec<Address>,
    /// the subject line, usually "Re: " and the original's
    subject: Subject,
    /// the text of the reply, plain text, at most 3000 characters
    body: Body,
    /// which configured mailbox (its name); default the first
    mailbox: Option<NonEmpty>,
}

impl TypedTool for ReplyEmail {
    const NAME: &'static str = "reply_email";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Outward;
    const ALWAYS_CONFIRM: bool = true;
    const TAGS: &'static str = "mail, answer, respond, thread, smtp";
    const TIMEOUT: Option<Duration> = Some(CALL_TIMEOUT);
    type Output = Value;

    /// The whole draft, instead of the arguments.
    async fn prompt(&self, ctx: &ToolContext, _arguments: String) -> String {
        let draft = draft_of(&self.to, &self.cc, &self.subject, &self.body);
        let folder = self.folder.as_ref().map_or("INBOX", |f| f.0.as_str());
        render(
            &shown_from(&ctx.config, self.mailbox.as_ref()),
            &draft,
            Some((folder, self.uid)),
        )
    }

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        owner_only(ctx).await?;
        let (entry, account) = account(&ctx.config, self.mailbox.as_ref().map(|m| m.0.as_str()))?;
        let folder = folder_of(self.folder.clone());
        let mut draft = draft_of(&self.to, &self.cc, &self.subject, &self.body);
        // The threading headers come from the original itself; a mail that is gone is not
        // answered out of its thread.
        let thread = account.thread_of(&folder, self.uid).await.map_err(failed)?;
        draft.in_reply_to = thread.last().cloned();
        draft.references = thread;
        let result = account.send(&draft).await.map_err(failed)?;
        let mut value = sent(&entry, &result, &draft);
        value["in_reply_to"] = json!(draft.in_reply_to);
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(address: &str) -> Config {
        let mut config = Config::default();
        config.mailboxes.push(MailboxConfig {
            name: "personal".into(),
            imap_url: "imaps://imap.example.org".into(),
            smtp_url: Some("smtps://smtp.example.org".into()),
            username: "me@example.org".into(),
            password_env: "MAIL_PW".into(),
            address: address.into(),
        });
        config
    }

    fn tool(name: &str) -> Arc<dyn Tool> {
        tools()
            .into_iter()
            .find(|t| t.info().name == name)
            .unwrap_or_else(|| panic!("no tool {name}"))
    }

    #[test]
    fn reads_are_safe_and_sends_always_ask() {
        for name in ["search_email", "read_email", "list_unread"] {
            let info = tool(name).info().clone();
            assert_eq!(
                (info.risk, info.always_confirm),
                (Risk::Safe, false),
                "{name}"
            );
            assert_eq!(info.group, "email");
        }
        for name in ["send_email", "reply_email"] {
            let info = tool(name).info().clone();
            assert_eq!(info.risk, Risk::Outward, "{name}");
            assert!(info.always_confirm, "{name}");
            // Also at `full`, where an outward risk alone would not ask.
            assert!(
                info.asks(info.risk, crate::config::Autonomy::Full),
                "{name}"
            );
        }
    }

    #[tokio::test]
    async fn the_prompt_is_the_whole_draft_made_as_the_send_makes_it() {
        let args = json!({
            "to": ["ann@example.org"],
            "cc": ["bob@example.org", "cat@example.org"],
            "subject": "Keys\r\nBcc: x@evil.example",
            "body": "Under the mat.\nBye",
        });
        let (mut ctx, _dir) = crate::tool::test_context().await;
        ctx.config = Arc::new(config("Me <me@example.org>"));
        let shown = tool("send_email").prompt(&ctx, &args).await;
        assert_eq!(
            shown,
            "✉️ Mail to send:\nFrom: Me <me@example.org>\nTo: ann@example.org\nCc: bob@example.org, cat@example.org\nSubject: Keys  Bcc: x@evil.example\n\nUnder the mat.\nBye"
        );
        let reply = json!({
            "uid": 7, "folder": "Archive", "to": ["ann@example.org"],
            "subject": "Re: x", "body": "ok",
        });
        ctx.config = Arc::new(config("me@example.org"));
        let shown = tool("reply_email").prompt(&ctx, &reply).await;
        assert!(shown.starts_with("✉️ Mail to send:\nIn reply to: mail 7 in Archive\nFrom: me@example.org\nTo: ann@example.org\nCc: —\n"), "{shown}");
    }

    #[test]
    fn bad_drafts_are_refused_before_anyone_is_asked() {
        let registry = crate::tool::ToolRegistry::with_builtin();
        for (args, why) in [
            (
                json!({"to": [], "subject": "s", "body": "b"}),
                "no recipient",
            ),
            (
                json!({"to": ["Ann <ann@x.org>"], "subject": "s", "body": "b"}),
                "a display name",
            ),
            (
                json!({"to": ["a@x.org"], "subject": "s", "body": "b".repeat(MAX_BODY_CHARS + 1)}),
                "a long body",
            ),
            (
                json!({"to": ["a@x.org"], "subject": "s", "body": ""}),
                "an empty body",
            ),
            (
                json!({"to": ["a@x.org"], "subject": "s", "body": "b", "bcc": ["x@y.org"]}),
                "an unknown field",
            ),
        ] {
            assert!(
                registry.validate("send_email", &args).is_err(),
                "{why}: {args}"
            );
        }
        let good = json!({"to": ["a@x.org"], "subject": "s", "body": "b"});
        assert!(registry.validate("send_email", &good).is_ok());
    }

    #[test]
    fn a_missing_mailbox_or_password_is_a_clear_error_without_secrets() {
        let Err(ToolError::Failed(message)) = account(&Config::default(), None) else {
            panic!("no mailbox configured");
        };
        assert!(message.contains("[[mailboxes]]"), "{message}");
        let Err(ToolError::InvalidArguments(message)) =
            account(&config("me@example.org"), Some("work"))
        else {
            panic!("no such mailbox");
        };
        assert!(message.contains("personal"), "{message}");
        let Err(ToolError::Failed(message)) = account(&config("me@example.org"), None) else {
            panic!("the password variable is not set");
        };
        assert!(message.contains("MAIL_PW"), "{message}");
    }
}
