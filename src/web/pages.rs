//! The pages besides the Inbox: Status, Conversations, Schedules, Usage and Agents.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::{Change, Session, WebState, local_time, render, server_error, span};
use crate::provider::{ChatMessage, ContentPart};
use crate::runtime::budget::usd;
use crate::scheduler::RunStatus;
use crate::store::{Backend, UsageBy};
use crate::text::clip;

// ---------------------------------------------------------------------------------------------
// Status

pub struct ChannelView {
    pub name: String,
    pub state: String,
    pub error: String,
}

pub struct McpView {
    pub name: String,
    pub state: String,
    pub transport: String,
    pub tools: usize,
    pub error: String,
}

#[derive(askama::Template)]
#[template(path = "status.html")]
struct StatusPage {
    csrf: String,
    active: &'static str,
    overall: &'static str,
    version: String,
    uptime: String,
    channels: Vec<ChannelView>,
    never_connected: Vec<String>,
    faults: Vec<String>,
    mcp: Vec<McpView>,
    database: &'static str,
    backend: &'static str,
    location: String,
    database_size: String,
    disk_free: String,
    inbox: i64,
    outbox: i64,
    in_progress: usize,
    pending_confirmations: i64,
}

/// The free space of the file system that holds `path`.
fn disk_free(path: &std::path::Path) -> String {
    match rustix::fs::statvfs(path) {
        Ok(stat) => crate::text::bytes(stat.f_bavail.saturating_mul(stat.f_frsize)),
        Err(err) => format!("unknown ({err})"),
    }
}

/// The same facts as `/healthz`, readable: channels, write faults, MCP servers, queues, the
/// database and disk, the version and uptime.
pub(super) async fn status(State(state): State<WebState>, session: Session) -> Response {
    let store = &state.rt.store;
    let mut channels: Vec<ChannelView> = state
        .health
        .channels()
        .into_iter()
        .map(|(name, health)| ChannelView {
            name,
            state: health.state.to_string(),
            error: health.error.unwrap_or_default(),
        })
        .collect();
    channels.sort_by(|a, b| a.name.cmp(&b.name));
    let faults = state.health.faults();
    let (never_connected, _) = state.health.never_connected();
    let (inbox, outbox, database) = match (store.inbox_depth().await, store.outbox_depth().await) {
        (Ok(inbox), Ok(outbox)) => (inbox, outbox, "ok"),
        _ => (-1, -1, "unavailable"),
    };
    let pending_confirmations = store.pending_confirmations().await.unwrap_or(-1);
    let overall = state.health.verdict(database == "ok").as_str();
    let mcp = state
        .mcp
        .health()
        .into_iter()
        .map(|(name, health)| McpView {
            name,
            state: health.state.to_string(),
            transport: health.transport.to_string(),
            tools: health.tools,
            error: health.error.unwrap_or_default(),
        })
        .collect();
    let backend = match store.backend() {
        Backend::Sqlite => "SQLite",
        Backend::Postgres => "PostgreSQL",
    };
    let database_size = match store.backend() {
        // Recent writes live in the write-ahead log until a checkpoint: both are the database.
        Backend::Sqlite => match std::fs::metadata(store.location()) {
            Ok(main) => {
                let wal =
                    std::fs::metadata(format!("{}-wal", store.location())).map_or(0, |m| m.len());
                crate::text::bytes(main.len() + wal)
            }
            Err(_) => "unknown".into(),
        },
        Backend::Postgres => "(on the PostgreSQL server)".into(),
    };
    let uptime_ms = i64::try_from(state.started.elapsed().as_millis()).unwrap_or(i64::MAX);
    render(&StatusPage {
        csrf: session.csrf,
        active: "status",
        overall,
        version: format!(
            "{} (commit {})",
            env!("CARGO_PKG_VERSION"),
            env!("HEARTH_COMMIT")
        ),
        uptime: span(uptime_ms),
        channels,
        never_connected,
        faults,
        mcp,
        database,
        backend,
        location: store.location().to_string(),
        database_size,
        disk_free: disk_free(&state.rt.config.daemon.data_dir),
        inbox,
        outbox,
        in_progress: state.dispatcher.queued(),
        pending_confirmations,
    })
}

// ---------------------------------------------------------------------------------------------
// Conversations

pub struct ConversationView {
    pub id: i64,
    /// The first message, shortened to one line; the chat where there is none.
    pub title: String,
    pub chat: String,
    pub agent: String,
    pub last_active: String,
    pub messages: i64,
}

pub struct HitView {
    pub conversation_id: i64,
    /// The conversation's title, as the list shows it.
    pub title: String,
    pub chat: String,
    pub at: String,
    pub text: String,
}

#[derive(askama::Template)]
#[template(path = "conversations.html")]
struct ConversationsPage {
    csrf: String,
    active: &'static str,
    query: String,
    hits: Vec<HitView>,
    searched: bool,
    conversations: Vec<ConversationView>,
}

/// The text a person sees of a stored message: user text, the assistant's words, a tool's
/// result.
fn visible_text(message: &ChatMessage) -> String {
    match message {
        ChatMessage::User { content } => content
            .iter()
            .map(|part| match part {
                ContentPart::Text { text } => text.clone(),
                ContentPart::Image { mime, .. } => format!("[{mime}]"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        ChatMessage::Assistant { text, .. } => text.clone(),
        ChatMessage::Tool { content, .. } => content.clone(),
    }
}

/// How long a conversation's title may be, in characters.
const TITLE_CHARS: usize = 60;

/// A conversation's title from the stored body of its first message: the visible text on one
/// line (whitespace runs folded), cut to `max` characters. None when the body cannot be read or
/// has no text (an image alone shows as its type).
fn title_of(body: &str, max: usize) -> Option<String> {
    let message = serde_json::from_str::<ChatMessage>(body).ok()?;
    let text = visible_text(&message);
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!line.is_empty()).then(|| clip(&line, max))
}

/// The title a conversation shows wherever the page names it (the list, a search hit, its
/// transcript), from the stored body of its first message.
fn conversation_title(first_message: Option<&str>) -> String {
    first_message
        .and_then(|body| title_of(body, TITLE_CHARS))
        .unwrap_or_else(|| "(no message yet)".into())
}

fn chat_label(channel: &str, chat_id: &str, thread_id: &str) -> String {
    if thread_id.is_empty() {
        format!("{channel}:{chat_id}")
    } else {
        format!("{channel}:{chat_id} (thread {thread_id})")
    }
}

#[derive(serde::Deserialize)]
pub(super) struct SearchQuery {
    q: Option<String>,
}

/// The conversations, and the full-text search (a LIKE search, the same on SQLite and
/// PostgreSQL).
pub(super) async fn conversations(
    State(state): State<WebState>,
    session: Session,
    Query(query): Query<SearchQuery>,
) -> Response {
    let store = &state.rt.store;
    let tz = state.timezone();
    let text = query.q.unwrap_or_default().trim().to_string();
    let conversations: Vec<ConversationView> = match store.conversation_list(200).await {
        Ok(list) => list
            .into_iter()
            .map(|c| ConversationView {
                id: c.id,
                title: conversation_title(c.first_message.as_deref()),
                chat: chat_label(&c.channel, &c.chat_id, &c.thread_id),
                agent: c.current_agent.unwrap_or_else(|| "-".into()),
                last_active: local_time(c.last_active_at, tz),
                messages: c.messages,
            })
            .collect(),
        Err(err) => return server_error(&err),
    };
    // Hits are titled as the list titles them; a conversation older than the list is read.
    let mut titles: HashMap<i64, String> = conversations
        .iter()
        .map(|c| (c.id, c.title.clone()))
        .collect();
    let mut hits = Vec::new();
    if !text.is_empty() {
        let found = match store.search_messages(&text, 200).await {
            Ok(found) => found,
            Err(err) => return server_error(&err),
        };
        let needle = text.to_lowercase();
        // The stored body is JSON: a hit counts only where the visible text has the words.
        for hit in found {
            let Ok(message) = serde_json::from_str::<ChatMessage>(&hit.body) else {
                continue;
            };
            let visible = visible_text(&message);
            let lower = visible.to_lowercase();
            let Some(at) = lower.find(&needle) else {
                continue;
            };
            // Some context around the match, cut on character boundaries.
            let before = lower[..at].chars().count();
            let start = before.saturating_sub(60);
            let snippet: String = visible
                .chars()
                .skip(start)
                .take(needle.chars().count() + 160)
                .collect();
            let title = match titles.get(&hit.conversation_id) {
                Some(title) => title.clone(),
                None => match store.first_message(hit.conversation_id).await {
                    Ok(first) => {
                        let title = conversation_title(first.as_deref());
                        titles.insert(hit.conversation_id, title.clone());
                        title
                    }
                    Err(err) => return server_error(&err),
                },
            };
            hits.push(HitView {
                conversation_id: hit.conversation_id,
                title,
                chat: format!("{}:{}", hit.channel, hit.chat_id),
                at: local_time(hit.created_at, tz),
                text: if start > 0 {
                    format!("…{snippet}")
                } else {
                    snippet
                },
            });
            if hits.len() == 50 {
                break;
            }
        }
    }
    render(&ConversationsPage {
        csrf: session.csrf,
        active: "conversations",
        searched: !text.is_empty(),
        query: text,
        hits,
        conversations,
    })
}

pub struct CallView {
    pub name: String,
    pub arguments: String,
    pub status: String,
    /// The confirmation's outcome and who decided, when one was asked.
    pub confirmation: String,
}

pub struct MessageView {
    pub id: i64,
    /// `user`, `assistant` or `tool`.
    pub role: &'static str,
    pub who: String,
    pub at: String,
    pub text: String,
    pub calls: Vec<CallView>,
    /// A new session (`/new`, `/reset`) starts with this message.
    pub new_session: bool,
}

#[derive(askama::Template)]
#[template(path = "conversation.html")]
struct ConversationPage {
    csrf: String,
    active: &'static str,
    /// Its first message, shortened, as the list titles it.
    title: String,
    chat: String,
    agent: String,
    messages: Vec<MessageView>,
}

/// How many of a conversation's latest messages the transcript shows.
const TRANSCRIPT_LIMIT: i64 = 500;

/// One conversation's transcript, read-only: who said what, the agent, each tool call with its
/// confirmation's outcome, the tools' results.
pub(super) async fn conversation(
    State(state): State<WebState>,
    session: Session,
    Path(id): Path<i64>,
) -> Response {
    let store = &state.rt.store;
    let tz = state.timezone();
    let conversation = match store.conversation_by_id(id).await {
        Ok(Some(c)) => c,
        Ok(None) => return (StatusCode::NOT_FOUND, "no such conversation").into_response(),
        Err(err) => return server_error(&err),
    };
    let (rows, calls, first) = match (
        store.transcript(id, TRANSCRIPT_LIMIT).await,
        store.conversation_tool_calls(id).await,
        store.first_message(id).await,
    ) {
        (Ok(rows), Ok(calls), Ok(first)) => (rows, calls, first),
        (Err(err), _, _) | (_, Err(err), _) | (_, _, Err(err)) => return server_error(&err),
    };
    let mut calls_of: HashMap<i64, Vec<CallView>> = HashMap::new();
    for call in calls {
        let confirmation = match (call.confirmation, call.decided_by) {
            (Some(status), Some(by)) => format!("{status} by {by}"),
            (Some(status), None) => status,
            (None, _) => String::new(),
        };
        calls_of.entry(call.message_id).or_default().push(CallView {
            name: call.name,
            arguments: clip(&call.arguments, 600),
            status: call.status,
            confirmation,
        });
    }
    let mut session_seen = None;
    let messages = rows
        .into_iter()
        .map(|row| {
            let new_session = session_seen.is_some_and(|s| s != row.session);
            session_seen = Some(row.session);
            let (role, text) = match serde_json::from_str::<ChatMessage>(&row.body) {
                Ok(message) => {
                    let role = match &message {
                        ChatMessage::User { .. } => "user",
                        ChatMessage::Assistant { .. } => "assistant",
                        ChatMessage::Tool { .. } => "tool",
                    };
                    let text = match &message {
                        ChatMessage::Tool { name, .. } => {
                            format!("{name}: {}", clip(&visible_text(&message), 1500))
                        }
                        _ => visible_text(&message),
                    };
                    (role, text)
                }
                Err(_) => ("tool", "(a message hearth cannot read back)".to_string()),
            };
            let who = match role {
                "user" => "user".to_string(),
                "assistant" => row.agent_id.clone().unwrap_or_else(|| "assistant".into()),
                _ => "tool result".to_string(),
            };
            MessageView {
                id: row.id,
                role,
                who,
                at: local_time(row.created_at, tz),
                text,
                calls: calls_of.remove(&row.id).unwrap_or_default(),
                new_session,
            }
        })
        .collect();
    render(&ConversationPage {
        csrf: session.csrf,
        active: "conversations",
        title: conversation_title(first.as_deref()),
        chat: chat_label(
            &conversation.channel,
            &conversation.chat.chat_id,
            conversation.chat.thread_id.as_deref().unwrap_or(""),
        ),
        agent: conversation.current_agent.unwrap_or_else(|| "-".into()),
        messages,
    })
}

// ---------------------------------------------------------------------------------------------
// Schedules

pub struct RunView {
    pub at: String,
    pub status: String,
    pub error: String,
    pub tokens: String,
    pub cost: String,
}

pub struct ScheduleView {
    pub id: i64,
    pub name: String,
    pub timing: String,
    pub timezone: String,
    pub target: String,
    pub agent: String,
    pub source: String,
    pub next: String,
    pub paused: bool,
    pub runnable: bool,
    pub runs: Vec<RunView>,
}

#[derive(askama::Template)]
#[template(path = "schedules.html")]
struct SchedulesPage {
    csrf: String,
    active: &'static str,
    notice: Option<String>,
    schedules: Vec<ScheduleView>,
    /// Background tasks, beside the schedules: those going first, then the recent ones.
    tasks: Vec<crate::pipeline::background::TaskSummary>,
}

/// Background tasks shown on the schedules page.
const TASKS_SHOWN: i64 = 20;

/// Runs shown per schedule.
const RUNS_SHOWN: usize = 5;

/// The schedules, with the message a change left for this session (see `Flash`).
pub(super) async fn schedules(State(state): State<WebState>, session: Session) -> Response {
    let notice = state.flash.take(&session);
    schedules_page(&state, session, notice).await
}

async fn schedules_page(state: &WebState, session: Session, notice: Option<String>) -> Response {
    let store = &state.rt.store;
    let list = match store.schedules().await {
        Ok(list) => list,
        Err(err) => return server_error(&err),
    };
    let mut schedules = Vec::with_capacity(list.len());
    for schedule in list {
        let runs = match store.schedule_runs(schedule.id, RUNS_SHOWN).await {
            Ok(runs) => runs,
            Err(err) => return server_error(&err),
        };
        let mut run_views = Vec::with_capacity(runs.len());
        for run in runs {
            let cost = match run.inbox_id {
                Some(inbox) => store.inbox_cost(inbox).await.unwrap_or_default(),
                None => Default::default(),
            };
            run_views.push(RunView {
                at: schedule.local_time(run.scheduled_for),
                status: run.status.as_str().to_string(),
                error: run.error.clone().unwrap_or_default(),
                tokens: if run.status == RunStatus::Missed {
                    "-".into()
                } else {
                    format!("{} in / {} out", cost.input_tokens, cost.output_tokens)
                },
                cost: usd(cost.cost_nusd),
            });
        }
        let timing = match (&schedule.cron, schedule.one_shot_at) {
            (Some(cron), _) => cron.clone(),
            (None, Some(at)) => format!("once at {}", schedule.local_time(at)),
            (None, None) => "never".into(),
        };
        let next = match (schedule.enabled, schedule.next_fire_at) {
            _ if schedule.paused => "paused".to_string(),
            (false, _) => "inactive".to_string(),
            (true, Some(at)) => schedule.local_time(at),
            (true, None) => "no next run".to_string(),
        };
        schedules.push(ScheduleView {
            id: schedule.id,
            runnable: schedule.enabled && !schedule.paused,
            name: schedule.name.clone(),
            timing,
            timezone: schedule.timezone.clone(),
            target: schedule.target(),
            agent: schedule.agent.clone(),
            source: schedule.source.to_string(),
            next,
            paused: schedule.paused,
            runs: run_views,
        });
    }
    let stored = match store.background_tasks(None, TASKS_SHOWN).await {
        Ok(stored) => stored,
        Err(err) => return server_error(&err),
    };
    let mut tasks = Vec::with_capacity(stored.len());
    for task in &stored {
        match crate::pipeline::background::task_summary(&state.rt, task).await {
            Ok(summary) => tasks.push(summary),
            Err(err) => return server_error(&err),
        }
    }
    render(&SchedulesPage {
        csrf: session.csrf,
        active: "schedules",
        notice,
        schedules,
        tasks,
    })
}

/// Run now, pause or resume: what `hearth schedule run|disable|enable` do, with the same
/// checks.
pub(super) async fn schedule_action(
    State(state): State<WebState>,
    Path((id, action)): Path<(i64, String)>,
    change: Change,
) -> Response {
    let store = &state.rt.store;
    let now = state.now();
    let schedule = match store.schedule_by_id(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return (StatusCode::NOT_FOUND, "no such schedule").into_response(),
        Err(err) => return server_error(&err),
    };
    let name = &schedule.name;
    let done = match action.as_str() {
        "run" if schedule.paused => Ok(format!("`{name}` is paused; resume it first.")),
        "run" if !schedule.enabled => Ok(format!(
            "`{name}` is inactive (a reminder that fired, or a config schedule no longer in the file)."
        )),
        "run" => store
            .make_schedule_due(schedule.id, now)
            .await
            .map(|_| format!("`{name}` runs now.")),
        "pause" if schedule.paused => Ok(format!("`{name}` is paused already.")),
        "pause" => store
            .pause_schedule(schedule.id, now)
            .await
            .map(|_| format!("`{name}` is paused: it will not run until resumed.")),
        "resume" if !schedule.paused => Ok(format!("`{name}` is running already.")),
        "resume" => match schedule.next_fire_after(now) {
            Ok(next) => store
                .resume_schedule(schedule.id, next, now)
                .await
                .map(|_| match next {
                    Some(at) => format!("`{name}` resumed; next run {}.", schedule.local_time(at)),
                    None => format!("`{name}` resumed; it has no next run."),
                }),
            Err(reason) => Ok(format!("`{name}` cannot resume: {reason}")),
        },
        _ => return (StatusCode::NOT_FOUND, "no such action").into_response(),
    };
    let notice = match done {
        Ok(notice) => notice,
        Err(err) => return server_error(&err),
    };
    tracing::info!(schedule = %name, %action, "schedule changed on the owner's page");
    if change.htmx {
        return schedules_page(&state, change.session, Some(notice)).await;
    }
    state.flash.leave(&change.session, notice);
    Redirect::to("/schedules").into_response()
}

// ---------------------------------------------------------------------------------------------
// Usage

pub struct UsageTable {
    pub by: &'static str,
    pub rows: Vec<UsageView>,
}

pub struct UsageView {
    /// The key cut after each `/` (a model's `provider/model`), so a narrow screen breaks it
    /// there and not inside a word.
    pub key_parts: Vec<String>,
    pub calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost: String,
}

#[derive(askama::Template)]
#[template(path = "usage.html")]
struct UsagePage {
    csrf: String,
    active: &'static str,
    days: u32,
    from: String,
    timezone: String,
    total_calls: i64,
    total_tokens: i64,
    total_cost: String,
    tables: Vec<UsageTable>,
    chart: CostChart,
}

/// One day's bar in the cost chart, in the SVG's units (each day 10 wide, 100 high).
pub struct Bar {
    pub x: u32,
    pub y: u32,
    pub height: u32,
    pub day: String,
    pub cost: String,
}

/// Cost per day as an inline SVG (no script, nothing fetched: the page's CSP allows neither).
pub struct CostChart {
    pub width: u32,
    pub bars: Vec<Bar>,
    pub first: String,
    pub last: String,
    pub highest: String,
}

/// The bars for every day from `from` through `days` days, a day without calls at zero;
/// `costs` are (`YYYY-MM-DD`, nano-USD). The highest day fills the height; a day that cost
/// anything shows at least a sliver.
fn cost_chart(costs: &[(String, i64)], from: chrono::NaiveDate, days: u32) -> CostChart {
    let by_day: HashMap<&str, i64> = costs.iter().map(|(d, c)| (d.as_str(), *c)).collect();
    let max = costs.iter().map(|(_, c)| *c).max().unwrap_or(0).max(0);
    let mut bars = Vec::with_capacity(days as usize);
    for n in 0..days {
        let Some(date) = from.checked_add_days(chrono::Days::new(u64::from(n))) else {
            break;
        };
        let day = date.format("%Y-%m-%d").to_string();
        let cost = by_day.get(day.as_str()).copied().unwrap_or(0).max(0);
        let height = if max == 0 || cost == 0 {
            0
        } else {
            // 1..=100; the ratio of two non-negative i64 fits f64 well enough for a picture.
            ((cost as f64 / max as f64) * 100.0)
                .round()
                .clamp(1.0, 100.0) as u32
        };
        bars.push(Bar {
            x: n * 10 + 1,
            y: 100 - height,
            height,
            cost: usd(cost),
            day,
        });
    }
    CostChart {
        width: (bars.len() as u32).max(1) * 10,
        first: bars.first().map(|b| b.day.clone()).unwrap_or_default(),
        last: bars.last().map(|b| b.day.clone()).unwrap_or_default(),
        highest: usd(max),
        bars,
    }
}

/// `provider/model` as `["provider/", "model"]`.
fn key_parts(key: &str) -> Vec<String> {
    key.split_inclusive('/').map(str::to_string).collect()
}

#[derive(serde::Deserialize)]
pub(super) struct DaysQuery {
    days: Option<u32>,
}

/// Tokens and cost of the model calls per day, agent, schedule, user and model, from the
/// `model_calls` table (as `hearth usage`).
pub(super) async fn usage(
    State(state): State<WebState>,
    session: Session,
    Query(query): Query<DaysQuery>,
) -> Response {
    let days = query.days.unwrap_or(30).clamp(1, 366);
    let tz = state.timezone();
    let today = chrono::Utc::now().with_timezone(&tz).date_naive();
    let first_day = today - chrono::Days::new(u64::from(days - 1));
    let from = first_day.format("%Y-%m-%d").to_string();
    let groups = [
        (UsageBy::Day, "day"),
        (UsageBy::Agent, "agent"),
        (UsageBy::Schedule, "schedule"),
        (UsageBy::User, "user"),
        (UsageBy::Model, "model"),
    ];
    let mut tables = Vec::with_capacity(groups.len());
    let mut daily = Vec::new();
    let (mut total_calls, mut total_tokens, mut total_nusd) = (0, 0, 0);
    for (group, by) in groups {
        let rows = match state.rt.store.usage_by(group, &from, None).await {
            Ok(rows) => rows,
            Err(err) => return server_error(&err),
        };
        if group == UsageBy::Day {
            for row in &rows {
                total_calls += row.calls;
                total_tokens += row.input_tokens + row.output_tokens;
                total_nusd += row.cost_nusd;
                daily.push((row.key.clone(), row.cost_nusd));
            }
        }
        tables.push(UsageTable {
            by,
            rows: rows
                .into_iter()
                .map(|row| UsageView {
                    key_parts: key_parts(&row.key),
                    calls: row.calls,
                    input_tokens: row.input_tokens,
                    output_tokens: row.output_tokens,
                    cost: usd(row.cost_nusd),
                })
                .collect(),
        });
    }
    render(&UsagePage {
        csrf: session.csrf,
        active: "usage",
        days,
        from,
        timezone: tz.name().to_string(),
        total_calls,
        total_tokens,
        total_cost: usd(total_nusd),
        tables,
        chart: cost_chart(&daily, first_day, days),
    })
}

// ---------------------------------------------------------------------------------------------
// Agents

pub struct VersionView {
    pub version: i64,
    pub at: String,
    pub changes: String,
    pub turns: i64,
}

pub struct AgentView {
    pub id: String,
    pub emoji: String,
    pub name: String,
    pub description: String,
    pub is_default: bool,
    pub keywords: String,
    pub tools: String,
    pub model: String,
    /// Every definition hearth has seen, newest first (`hearth agents history ID`).
    pub versions: Vec<VersionView>,
}

#[derive(askama::Template)]
#[template(path = "agents.html")]
struct AgentsPage {
    csrf: String,
    active: &'static str,
    origin: String,
    agents: Vec<AgentView>,
    /// The "try routing" answer when the page was asked with a text (without script).
    routed: String,
}

pub(super) async fn agents(
    State(state): State<WebState>,
    session: Session,
    Query(query): Query<RouteQuery>,
) -> Response {
    let agents = state.rt.agents();
    let default_agent = &state.rt.config.router.default_agent;
    let tz = state.timezone();
    let mut views = Vec::with_capacity(agents.set.len());
    for agent in agents.set.iter() {
        let versions = match state.rt.store.agent_versions(&agent.id).await {
            Ok(versions) => versions
                .into_iter()
                .map(|v| VersionView {
                    version: v.version,
                    at: local_time(v.created_at, tz),
                    changes: clip(&v.changes, 300),
                    turns: v.turns,
                })
                .collect(),
            Err(err) => return server_error(&err),
        };
        let mut tools: Vec<String> = agent
            .tool_groups
            .iter()
            .map(|group| format!("{group} (group)"))
            .collect();
        tools.extend(agent.tools.iter().cloned());
        views.push(AgentView {
            id: agent.id.clone(),
            emoji: agent.emoji.clone(),
            name: agent.name.clone(),
            description: agent.description.clone(),
            is_default: &agent.id == default_agent,
            keywords: agent.triggers.keywords.join(", "),
            tools: if tools.is_empty() {
                "none".into()
            } else {
                tools.join(", ")
            },
            model: model_used(&state, agent),
            versions,
        });
    }
    let routed = match query.text.as_deref().map(str::trim) {
        Some(text) if !text.is_empty() => {
            match askama::Template::render(&route_result(&state, text)) {
                Ok(html) => html,
                Err(err) => return server_error(&err),
            }
        }
        _ => String::new(),
    };
    render(&AgentsPage {
        csrf: session.csrf,
        active: "agents",
        origin: agents.set.origin().to_string(),
        agents: views,
        routed,
    })
}

/// The provider and model a turn of `agent` uses, resolved as the runtime does
/// (`runtime::turn::Limits::of`): provider "default" is the first configured one, model
/// "default" (or none) that provider's model.
fn model_used(state: &WebState, agent: &crate::agent::AgentDef) -> String {
    match state.rt.providers.config(&agent.provider) {
        Some(config) => {
            let model = match agent.model.as_str() {
                "default" | "" => config.model.as_str(),
                model => model,
            };
            format!("{} / {model}", config.name)
        }
        // The config check refuses such an agent at start; said plainly should it get here.
        None => format!(
            "{} / {} (no provider of that name is configured)",
            agent.provider, agent.model
        ),
    }
}

#[derive(askama::Template)]
#[template(path = "route_result.html")]
struct RouteResult {
    text: String,
    report: String,
}

#[derive(serde::Deserialize)]
pub(super) struct RouteQuery {
    text: Option<String>,
}

/// The "try routing" box: what `hearth route TEXT` prints, for a new conversation. Reads
/// only, so a GET; htmx puts the answer under the box.
pub(super) async fn route(
    State(state): State<WebState>,
    _session: Session,
    Query(query): Query<RouteQuery>,
) -> Response {
    render(&route_result(
        &state,
        query.text.as_deref().unwrap_or_default(),
    ))
}

/// What the router decides for `text` in a new conversation, as `hearth route` prints it.
fn route_result(state: &WebState, text: &str) -> RouteResult {
    let text = clip(text.trim(), 2000);
    let agents = state.rt.agents();
    let report = if text.is_empty() {
        String::new()
    } else {
        let routing = agents.router.decide(
            &text,
            crate::router::Situation {
                current_agent: None,
                pinned: false,
                recent: true,
                default_agent: &state.rt.config.router.default_agent,
            },
        );
        crate::router::explain(&routing.decision, &agents.set)
    };
    RouteResult { text, report }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_the_first_message_on_one_short_line() {
        let body = |text: &str| {
            serde_json::to_string(&ChatMessage::User {
                content: vec![ContentPart::Text { text: text.into() }],
            })
            .expect("json")
        };
        assert_eq!(
            title_of(&body("what is  on\nmy calendar?"), 60).as_deref(),
            Some("what is on my calendar?")
        );
        assert_eq!(
            title_of(&body("remember the zucchini recipe from grandma"), 12).as_deref(),
            Some("remember the…")
        );
        assert_eq!(title_of(&body("  \n "), 60), None, "nothing to show");
        assert_eq!(title_of("not json", 60), None, "an unreadable body");
    }

    #[test]
    fn the_chart_has_a_bar_per_day_and_the_dearest_fills_it() {
        let from = chrono::NaiveDate::from_ymd_opt(2026, 11, 27).expect("date");
        let costs = vec![
            ("2026-11-27".to_string(), 2_000_000_000),
            ("2026-11-29".to_string(), 10_000),
        ];
        let chart = cost_chart(&costs, from, 3);
        let heights: Vec<u32> = chart.bars.iter().map(|b| b.height).collect();
        assert_eq!(
            heights,
            [100, 0, 1],
            "a day without calls is empty, a cheap one shows"
        );
        assert_eq!(chart.bars[1].day, "2026-11-28");
        assert_eq!(
            (chart.first.as_str(), chart.last.as_str()),
            ("2026-11-27", "2026-11-29")
        );
        assert_eq!(chart.width, 30);
        assert_eq!(chart.bars[0].y, 0);
        let empty = cost_chart(&[], from, 1);
        assert_eq!(empty.bars.len(), 1);
        assert_eq!(empty.bars[0].height, 0);
        assert_eq!(key_parts("fake/fake-model"), ["fake/", "fake-model"]);
        assert_eq!(key_parts("briefing"), ["briefing"]);
    }
}
