-- An MCP client's call that needs the owner's approval (`hearth mcp serve`, `/mcp`) waits on a
-- confirmation like a chat turn's call, prompted in the owner's approvals chat. It belongs to
-- no turn, tool call or conversation, so those columns may now be NULL.
ALTER TABLE confirmations ALTER COLUMN turn_id DROP NOT NULL;
ALTER TABLE confirmations ALTER COLUMN tool_call_id DROP NOT NULL;
ALTER TABLE confirmations ALTER COLUMN conversation_id DROP NOT NULL;

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
    started_at      BIGINT
);
