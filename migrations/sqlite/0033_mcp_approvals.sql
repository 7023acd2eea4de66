-- An MCP client's call that needs the owner's approval (`hearth mcp serve`, `/mcp`) waits on a
-- confirmation like a chat turn's call, prompted in the owner's approvals chat. It belongs to
-- no turn, tool call or conversation, so those columns may now be NULL (SQLite changes a
-- column's constraint only by rebuilding the table; nothing references confirmations).
CREATE TABLE confirmations_new (
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
INSERT INTO confirmations_new (id, turn_id, tool_call_id, conversation_id, channel, chat_id,
    thread_id, requester, user_id, tool, summary, prompt_outbox_id, status, decided_by,
    created_at, expires_at, decided_at, short_code, wrong_codes, routed_channel, routed_chat_id,
    routed_outbox_id)
SELECT id, turn_id, tool_call_id, conversation_id, channel, chat_id, thread_id, requester,
    user_id, tool, summary, prompt_outbox_id, status, decided_by, created_at, expires_at,
    decided_at, short_code, wrong_codes, routed_channel, routed_chat_id, routed_outbox_id
FROM confirmations;
DROP TABLE confirmations;
ALTER TABLE confirmations_new RENAME TO confirmations;
CREATE INDEX confirmations_pending ON confirmations (status, expires_at);
CREATE INDEX confirmations_by_turn ON confirmations (turn_id);
CREATE INDEX confirmations_by_chat ON confirmations (channel, chat_id, status);

-- What an MCP call waiting for approval needs to run once approved, and its result.
-- handle: what the client passes to `check_approval` (not the confirmation's id, which the
-- prompt's buttons carry). The caller is the confirmation's user_id and this door
-- (`stdio`, `token phone`): another caller's handle is no such approval.
-- run_state: waiting | running | succeeded | failed; moved only forward, each step guarded by
-- the one before, so an approved call runs once whoever asks.
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
