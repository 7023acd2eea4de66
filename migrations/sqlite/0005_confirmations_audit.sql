-- Approve/Deny confirmations, the tool audit log, and per-user permission and autonomy.

-- A tool call waiting for (or decided by) the person who caused it.
-- status: pending | approved | denied | expired.
CREATE TABLE confirmations (
    id                TEXT PRIMARY KEY,
    turn_id           INTEGER NOT NULL REFERENCES turns(id),
    tool_call_id      INTEGER NOT NULL REFERENCES tool_calls(id),
    conversation_id   INTEGER NOT NULL REFERENCES conversations(id),
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
    decided_at        INTEGER
);
CREATE INDEX confirmations_pending ON confirmations (status, expires_at);
CREATE INDEX confirmations_by_turn ON confirmations (turn_id);

-- Every tool call: what, by whom, how it went. outcome: ok | error | invalid | denied |
-- refused (permission, rate limit) | interrupted | cancelled | skipped | timeout.
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
);
CREATE INDEX tool_audit_by_user ON tool_audit (user_id, created_at);

-- none | read | write | execute | admin; NULL: the default for the user's kind.
ALTER TABLE users ADD COLUMN permission TEXT;
-- none | low | medium | high | full; NULL: the config's tools.autonomy.
ALTER TABLE users ADD COLUMN autonomy TEXT;
