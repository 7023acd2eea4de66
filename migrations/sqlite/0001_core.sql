-- The core schema: people, agents, conversations and the durable message pipeline
-- (inbox -> turns/messages/tool_calls -> outbox). Timestamps are Unix milliseconds.
-- Forward-only: once released, this file is never edited; later changes add new files.

CREATE TABLE users (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    display_name TEXT,
    is_owner     INTEGER NOT NULL DEFAULT 0,
    timezone     TEXT,
    created_at   INTEGER NOT NULL
);

-- A platform account and the user it belongs to. status: allowed | revoked.
-- source: config (allowlist) | paired (hearth pair approve) | local (terminal).
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

-- One-time codes handed to unknown senders. status: pending | approved | rejected.
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

-- The agents file as last synced; definition is the agent as JSON.
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

-- A chat (or thread within it) on a channel. session grows on /new and /reset so older
-- messages leave the model's window without being deleted.
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

-- Every inbound event, stored before the platform cursor moves. status: pending | done | failed.
CREATE TABLE inbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    channel          TEXT NOT NULL,
    platform_id      TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending',
    error            TEXT,
    received_at      INTEGER NOT NULL,
    processed_at     INTEGER,
    UNIQUE (channel, platform_id)
);
CREATE INDEX inbox_by_status ON inbox (status, id);

-- One agent turn answering one inbox entry. status: running | suspended | done | failed | cancelled.
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
);

-- The conversation as the model sees it; body is a provider-neutral ChatMessage as JSON.
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    session         INTEGER NOT NULL,
    turn_id         INTEGER REFERENCES turns(id),
    role            TEXT NOT NULL,
    body            TEXT NOT NULL,
    chars           INTEGER NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, session, id);
CREATE INDEX messages_by_turn ON messages (turn_id, id);

-- Each tool call the model asked for. status: pending (not started) | running | done | error
-- | interrupted (the daemon died while it ran; never re-run) | cancelled | skipped.
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

-- Replies and edits waiting for delivery, in order per chat. kind: send | edit.
-- status: pending | sent | failed.
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
    sent_at             INTEGER,
    UNIQUE (inbox_id, seq)
);
CREATE INDEX outbox_due ON outbox (status, next_attempt_at, id);

-- Platform cursors and other small per-channel state.
CREATE TABLE channel_state (
    channel    TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (channel, key)
);
