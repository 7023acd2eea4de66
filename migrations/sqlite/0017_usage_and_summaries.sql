-- Every model call with its tokens and cost (turns, summaries, transcriptions), for /usage,
-- `hearth usage` and the [budget] caps. day is the local date (daemon.timezone) the call was made,
-- YYYY-MM-DD, so daily and monthly sums need no timezone arithmetic in SQL. cost_nusd is the
-- cost in billionths of a USD: integers sum exactly on both backends.
CREATE TABLE model_calls (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    at                  INTEGER NOT NULL,
    day                 TEXT NOT NULL,
    purpose             TEXT NOT NULL,
    provider            TEXT NOT NULL,
    model               TEXT NOT NULL,
    user_id             INTEGER,
    agent_id            TEXT,
    schedule            TEXT,
    channel             TEXT,
    conversation_id     INTEGER,
    turn_id             INTEGER,
    input_tokens        INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cost_nusd           INTEGER NOT NULL
);
CREATE INDEX model_calls_by_day ON model_calls (day);
CREATE INDEX model_calls_by_schedule ON model_calls (schedule, day);

-- The owner's /budget for one day: that day's cap instead of budget.daily_usd.
CREATE TABLE budget_days (
    day            TEXT PRIMARY KEY,
    daily_cap_nusd INTEGER NOT NULL,
    set_at         INTEGER NOT NULL
);

-- Warnings sent, one row per period ("day:2026-11-26", "month:2026-11"), so each goes out once.
CREATE TABLE budget_warnings (
    period  TEXT PRIMARY KEY,
    sent_at INTEGER NOT NULL
);

-- Older turns of a conversation replaced by a summary. The messages stay in `messages`; the
-- model sees this summary instead of those up to covers_until (a messages.id). user_id is the
-- member whose turns it covers (each member of a shared chat has their own history).
CREATE TABLE conversation_summaries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    session         INTEGER NOT NULL,
    user_id         INTEGER,
    covers_until    INTEGER NOT NULL,
    turns           INTEGER NOT NULL,
    narrative       TEXT NOT NULL,
    ledger          TEXT NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE INDEX conversation_summaries_latest ON conversation_summaries (conversation_id, session, id);
