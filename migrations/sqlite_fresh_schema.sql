-- Made by the test `the_fresh_schema_files_are_the_migrations_replayed` (src/store.rs)
-- from migrations/sqlite: what a new SQLite database is created from. Do not edit;
-- after adding a migration, run `HEARTH_WRITE_SCHEMA=1 cargo test --lib fresh_schema`.

CREATE TABLE users (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    display_name TEXT,
    is_owner     INTEGER NOT NULL DEFAULT 0,
    timezone     TEXT,
    created_at   INTEGER NOT NULL
, permission TEXT, autonomy TEXT);

CREATE TABLE identities (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    channel          TEXT NOT NULL,
    platform_user_id TEXT NOT NULL,
    user_id          INTEGER NOT NULL REFERENCES users(id),
    display_name     TEXT,
    status           TEXT NOT NULL,
    source           TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    UNIQUE (channel, platform_user_id)
);

CREATE TABLE pairing_requests (
    code             TEXT PRIMARY KEY,
    channel          TEXT NOT NULL,
    platform_user_id TEXT NOT NULL,
    display_name     TEXT,
    chat_id          TEXT NOT NULL,
    status           TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL
);

CREATE INDEX pairing_requests_by_identity ON pairing_requests (channel, platform_user_id, created_at);

CREATE TABLE agents (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    emoji       TEXT NOT NULL,
    description TEXT NOT NULL,
    position    INTEGER NOT NULL,
    definition  TEXT NOT NULL,
    active      INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE conversations (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    channel        TEXT NOT NULL,
    chat_id        TEXT NOT NULL,
    thread_id      TEXT NOT NULL DEFAULT '',
    current_agent  TEXT,
    agent_pinned   INTEGER NOT NULL DEFAULT 0,
    session        INTEGER NOT NULL DEFAULT 1,
    last_active_at INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    UNIQUE (channel, chat_id, thread_id)
);

CREATE TABLE inbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    channel          TEXT NOT NULL,
    platform_id      TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending',
    error            TEXT,
    received_at      INTEGER NOT NULL,
    processed_at     INTEGER, stripped_at INTEGER,
    UNIQUE (channel, platform_id)
);

CREATE INDEX inbox_by_status ON inbox (status, id);

CREATE TABLE turns (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    inbox_id        INTEGER NOT NULL UNIQUE REFERENCES inbox(id),
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    user_id         INTEGER REFERENCES users(id),
    agent_id        TEXT NOT NULL,
    status          TEXT NOT NULL,
    llm_calls       INTEGER NOT NULL DEFAULT 0,
    tool_calls      INTEGER NOT NULL DEFAULT 0,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    provider        TEXT,
    model           TEXT,
    error           TEXT,
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER
, agent_version INTEGER);

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    session         INTEGER NOT NULL,
    turn_id         INTEGER REFERENCES turns(id),
    role            TEXT NOT NULL,
    body            TEXT NOT NULL,
    chars           INTEGER NOT NULL,
    created_at      INTEGER NOT NULL
, sub_turn INTEGER);

CREATE INDEX messages_by_conversation ON messages (conversation_id, session, id);

CREATE INDEX messages_by_turn ON messages (turn_id, id);

CREATE TABLE tool_calls (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id     INTEGER NOT NULL REFERENCES turns(id),
    message_id  INTEGER NOT NULL REFERENCES messages(id),
    position    INTEGER NOT NULL,
    call_id     TEXT NOT NULL,
    name        TEXT NOT NULL,
    arguments   TEXT NOT NULL,
    status      TEXT NOT NULL,
    result      TEXT,
    started_at  INTEGER,
    finished_at INTEGER,
    UNIQUE (message_id, position)
);

CREATE INDEX tool_calls_by_turn ON tool_calls (turn_id, status);

CREATE TABLE outbox (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    inbox_id            INTEGER REFERENCES inbox(id),
    seq                 INTEGER NOT NULL DEFAULT 0,
    channel             TEXT NOT NULL,
    chat_key            TEXT NOT NULL,
    kind                TEXT NOT NULL,
    payload             TEXT NOT NULL,
    target              TEXT,
    status              TEXT NOT NULL DEFAULT 'pending',
    attempts            INTEGER NOT NULL DEFAULT 0,
    next_attempt_at     INTEGER NOT NULL,
    last_error          TEXT,
    platform_message_id TEXT,
    created_at          INTEGER NOT NULL,
    sent_at             INTEGER, in_doubt INTEGER NOT NULL DEFAULT 0,
    UNIQUE (inbox_id, seq)
);

CREATE INDEX outbox_due ON outbox (status, next_attempt_at, id);

CREATE TABLE channel_state (
    channel    TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (channel, key)
);

CREATE TABLE tasks (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       INTEGER NOT NULL REFERENCES users(id),
    title         TEXT NOT NULL,
    description   TEXT,
    -- low | medium | high | urgent; priority_rank 1..4 orders them.
    priority      TEXT NOT NULL,
    priority_rank INTEGER NOT NULL,
    category      TEXT,
    due_at        INTEGER,
    tags          TEXT NOT NULL DEFAULT '[]',
    -- pending | in_progress | done
    status        TEXT NOT NULL DEFAULT 'pending',
    completed_at  INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE INDEX tasks_by_user ON tasks (user_id, status, due_at);

CREATE TABLE notes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    title      TEXT NOT NULL,
    content    TEXT NOT NULL,
    tags       TEXT NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE INDEX notes_by_user ON notes (user_id, updated_at);

CREATE TABLE bookmarks (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id     INTEGER NOT NULL REFERENCES users(id),
    url         TEXT NOT NULL,
    title       TEXT,
    description TEXT,
    tags        TEXT NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL,
    UNIQUE (user_id, url)
);

CREATE TABLE contacts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    name       TEXT NOT NULL,
    email      TEXT,
    phone      TEXT,
    -- YYYY-MM-DD
    birthday   TEXT,
    notes      TEXT,
    tags       TEXT NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE INDEX contacts_by_user ON contacts (user_id, name);

CREATE TABLE calendar_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id     INTEGER NOT NULL REFERENCES users(id),
    title       TEXT NOT NULL,
    start_at    INTEGER NOT NULL,
    end_at      INTEGER NOT NULL,
    all_day     INTEGER NOT NULL DEFAULT 0,
    location    TEXT,
    description TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE INDEX calendar_events_by_user ON calendar_events (user_id, start_at);

CREATE TABLE expenses (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      INTEGER NOT NULL REFERENCES users(id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    currency     TEXT NOT NULL,
    category     TEXT NOT NULL,
    description  TEXT,
    merchant     TEXT,
    -- JSON array of strings.
    tags         TEXT NOT NULL DEFAULT '[]',
    spent_on     TEXT NOT NULL,
    created_at   INTEGER NOT NULL
);

CREATE INDEX expenses_by_user_date ON expenses (user_id, spent_on);

CREATE TABLE goals (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      INTEGER NOT NULL REFERENCES users(id),
    parent_id    INTEGER REFERENCES goals(id),
    title        TEXT NOT NULL,
    description  TEXT,
    target_date  TEXT,
    status       TEXT NOT NULL DEFAULT 'active',
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    completed_at INTEGER
);

CREATE INDEX goals_by_user ON goals (user_id, status);

CREATE INDEX goals_by_parent ON goals (parent_id);

CREATE TABLE goal_steps (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    goal_id      INTEGER NOT NULL REFERENCES goals(id) ON DELETE CASCADE,
    user_id      INTEGER NOT NULL REFERENCES users(id),
    position     INTEGER NOT NULL,
    title        TEXT NOT NULL,
    done         INTEGER NOT NULL DEFAULT 0,
    completed_at INTEGER,
    created_at   INTEGER NOT NULL
);

CREATE INDEX goal_steps_by_goal ON goal_steps (goal_id, position);

CREATE TABLE memories (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       INTEGER NOT NULL REFERENCES users(id),
    content       TEXT NOT NULL,
    kind          TEXT NOT NULL,
    importance    REAL NOT NULL,
    tags          TEXT NOT NULL DEFAULT '',
    access_count  INTEGER NOT NULL DEFAULT 0,
    last_accessed INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE INDEX memories_by_importance ON memories (user_id, importance);

CREATE INDEX memories_by_created ON memories (user_id, created_at);

CREATE VIRTUAL TABLE memories_fts USING fts5(
    content, tags,
    content = 'memories', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content, tags) VALUES (new.id, new.content, new.tags);
END;

CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, tags)
        VALUES ('delete', old.id, old.content, old.tags);
END;

CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, tags ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, tags)
        VALUES ('delete', old.id, old.content, old.tags);
    INSERT INTO memories_fts (rowid, content, tags) VALUES (new.id, new.content, new.tags);
END;

CREATE TABLE tool_audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id     INTEGER REFERENCES users(id),
    turn_id     INTEGER,
    agent_id    TEXT,
    tool        TEXT NOT NULL,
    arguments   TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    summary     TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
, client TEXT);

CREATE INDEX tool_audit_by_user ON tool_audit (user_id, created_at);

CREATE TABLE schedules (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    name             TEXT NOT NULL UNIQUE,
    cron             TEXT,
    timezone         TEXT NOT NULL,
    agent            TEXT NOT NULL,
    prompt           TEXT NOT NULL,
    channel          TEXT NOT NULL,
    chat_id          TEXT NOT NULL,
    thread_id        TEXT NOT NULL DEFAULT '',
    on_confirmation  TEXT NOT NULL DEFAULT 'deny',
    allow_tools      TEXT NOT NULL DEFAULT '[]',
    catch_up_minutes INTEGER NOT NULL DEFAULT 60,
    enabled          INTEGER NOT NULL DEFAULT 1,
    source           TEXT NOT NULL,
    one_shot_at      INTEGER,
    created_by       INTEGER REFERENCES users(id),
    last_fire_at     INTEGER,
    next_fire_at     INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
, paused INTEGER NOT NULL DEFAULT 0);

CREATE INDEX schedules_due ON schedules (enabled, next_fire_at);

CREATE TABLE schedule_runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    schedule_id   INTEGER NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
    scheduled_for INTEGER NOT NULL,
    status        TEXT NOT NULL,
    inbox_id      INTEGER UNIQUE REFERENCES inbox(id),
    error         TEXT,
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER,
    UNIQUE (schedule_id, scheduled_for)
);

CREATE INDEX schedule_runs_by_schedule ON schedule_runs (schedule_id, scheduled_for);

CREATE INDEX turns_by_conversation ON turns (conversation_id, status);

CREATE INDEX outbox_pending ON outbox (status, id);

CREATE TABLE outbox_parts (
    outbox_id           INTEGER NOT NULL REFERENCES outbox(id),
    idx                 INTEGER NOT NULL,
    text                TEXT NOT NULL,
    status              TEXT NOT NULL DEFAULT 'pending',
    platform_message_id TEXT,
    in_doubt            INTEGER NOT NULL DEFAULT 0,
    sent_at             INTEGER,
    PRIMARY KEY (outbox_id, idx)
);

CREATE INDEX outbox_by_platform_message ON outbox (channel, platform_message_id);

CREATE INDEX inbox_by_received ON inbox (received_at) WHERE stripped_at IS NULL;

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
, cut_short INTEGER NOT NULL DEFAULT 0);

CREATE INDEX model_calls_by_day ON model_calls (day);

CREATE INDEX model_calls_by_schedule ON model_calls (schedule, day);

CREATE TABLE budget_days (
    day            TEXT PRIMARY KEY,
    daily_cap_nusd INTEGER NOT NULL,
    set_at         INTEGER NOT NULL
);

CREATE TABLE budget_warnings (
    period  TEXT PRIMARY KEY,
    sent_at INTEGER NOT NULL
);

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

CREATE TABLE http_tokens (
    name         TEXT PRIMARY KEY,
    hash         TEXT NOT NULL UNIQUE,
    scope        TEXT NOT NULL,
    agents       TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);

CREATE TABLE http_turns (
    id           TEXT PRIMARY KEY,
    token        TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    body_sha     TEXT NOT NULL,
    platform_id  TEXT NOT NULL UNIQUE,
    conversation TEXT NOT NULL,
    agent        TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'queued',
    final_text   TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    UNIQUE (token, idem_key)
);

CREATE TABLE http_events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    turn       TEXT NOT NULL REFERENCES http_turns(id),
    kind       TEXT NOT NULL,
    data       TEXT NOT NULL,
    dedup      TEXT UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE INDEX http_events_by_turn ON http_events (turn, seq);

CREATE TABLE agent_versions (
    agent_id    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    hash        TEXT NOT NULL,
    definition  TEXT NOT NULL,
    changes     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (agent_id, version)
);

CREATE TABLE web_login_codes (
    code_hash  TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);

CREATE TABLE web_sessions (
    id_hash      TEXT PRIMARY KEY,
    csrf         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
);

CREATE TABLE web_decisions (
    platform_id     TEXT PRIMARY KEY,
    confirmation_id TEXT NOT NULL,
    action          TEXT NOT NULL,
    created_at      INTEGER NOT NULL
);

CREATE TABLE http_chat_turns (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    turn         TEXT NOT NULL UNIQUE REFERENCES http_turns(id),
    token        TEXT NOT NULL,
    conversation TEXT NOT NULL,
    messages     TEXT NOT NULL,
    shown        TEXT,
    created_at   INTEGER NOT NULL
);

CREATE INDEX http_chat_turns_by_conversation ON http_chat_turns (token, conversation, seq);

CREATE TABLE model_calibrations (
    model                  TEXT PRIMARY KEY,
    chars_per_1000_tokens  INTEGER NOT NULL,
    prompt_limit           INTEGER,
    updated_at             INTEGER NOT NULL
);

CREATE TABLE calendar_collections (
    name          TEXT PRIMARY KEY,
    url           TEXT NOT NULL,
    sync_token    TEXT,
    ctag          TEXT,
    etag          TEXT,
    last_modified TEXT,
    fetched_at    INTEGER NOT NULL
);

CREATE TABLE calendar_objects (
    calendar TEXT NOT NULL REFERENCES calendar_collections (name) ON DELETE CASCADE,
    href     TEXT NOT NULL,
    etag     TEXT,
    data     TEXT NOT NULL,
    PRIMARY KEY (calendar, href)
);

CREATE TABLE weather_places (
    query       TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    admin1      TEXT,
    country     TEXT,
    latitude    REAL NOT NULL,
    longitude   REAL NOT NULL,
    timezone    TEXT,
    created_at  INTEGER NOT NULL
);

CREATE TABLE feed_sources (
    name            TEXT PRIMARY KEY,
    url             TEXT NOT NULL,
    etag            TEXT,
    last_modified   TEXT,
    checked_at      INTEGER NOT NULL
);

CREATE TABLE feed_items (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    feed          TEXT NOT NULL,
    item_key      TEXT NOT NULL,
    title         TEXT,
    link          TEXT,
    summary       TEXT,
    published_at  INTEGER,
    first_seen    INTEGER NOT NULL,
    presented_at  INTEGER,
    UNIQUE (feed, item_key)
);

CREATE INDEX feed_items_first_seen ON feed_items (first_seen);

CREATE TABLE feed_marks (
    mark  TEXT PRIMARY KEY,
    at    INTEGER NOT NULL
);

CREATE TABLE turn_plans (
    turn_id           INTEGER PRIMARY KEY REFERENCES turns(id),
    conversation_id   INTEGER NOT NULL REFERENCES conversations(id),
    revision          INTEGER NOT NULL,
    explanation       TEXT,
    steps             TEXT NOT NULL,
    message_outbox_id INTEGER,
    updated_at        INTEGER NOT NULL
);

CREATE INDEX turn_plans_conversation ON turn_plans (conversation_id, turn_id);

CREATE TABLE background_tasks (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id           INTEGER NOT NULL REFERENCES users(id),
    conversation_id   INTEGER NOT NULL REFERENCES conversations(id),
    origin_inbox_id   INTEGER NOT NULL REFERENCES inbox(id),
    channel           TEXT NOT NULL,
    chat_id           TEXT NOT NULL,
    thread_id         TEXT,
    origin_message_id TEXT,
    requester         TEXT NOT NULL,
    reply_context     TEXT,
    agent_id          TEXT NOT NULL,
    title             TEXT NOT NULL,
    instructions      TEXT NOT NULL,
    report_by         INTEGER,
    state             TEXT NOT NULL,
    inbox_id          INTEGER UNIQUE REFERENCES inbox(id),
    last_error        TEXT,
    created_at        INTEGER NOT NULL,
    started_at        INTEGER,
    finished_at       INTEGER,
    updated_at        INTEGER NOT NULL
);

CREATE INDEX background_tasks_by_user ON background_tasks (user_id, state);

CREATE INDEX background_tasks_by_state ON background_tasks (state);

CREATE TABLE "confirmations" (
    id                TEXT PRIMARY KEY,
    turn_id           INTEGER REFERENCES turns(id),
    tool_call_id      INTEGER REFERENCES tool_calls(id),
    conversation_id   INTEGER REFERENCES conversations(id),
    channel           TEXT NOT NULL,
    chat_id           TEXT NOT NULL,
    thread_id         TEXT NOT NULL DEFAULT '',
    requester         TEXT NOT NULL,
    user_id           INTEGER REFERENCES users(id),
    tool              TEXT NOT NULL,
    summary           TEXT NOT NULL,
    prompt_outbox_id  INTEGER REFERENCES outbox(id),
    status            TEXT NOT NULL,
    decided_by        TEXT,
    created_at        INTEGER NOT NULL,
    expires_at        INTEGER NOT NULL,
    decided_at        INTEGER,
    short_code        TEXT,
    wrong_codes       INTEGER NOT NULL DEFAULT 0,
    routed_channel    TEXT,
    routed_chat_id    TEXT,
    routed_outbox_id  INTEGER REFERENCES outbox(id)
);

CREATE INDEX confirmations_pending ON confirmations (status, expires_at);

CREATE INDEX confirmations_by_turn ON confirmations (turn_id);

CREATE INDEX confirmations_by_chat ON confirmations (channel, chat_id, status);

CREATE TABLE mcp_approvals (
    confirmation_id TEXT PRIMARY KEY REFERENCES confirmations(id),
    handle          TEXT NOT NULL UNIQUE,
    caller_door     TEXT NOT NULL,
    client          TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    run_state       TEXT NOT NULL,
    result          TEXT,
    started_at      INTEGER
);
