-- The HTTP channel (channels/http): per-client tokens, turns started over HTTP and the events a
-- client reads back as Server-Sent Events. Timestamps are Unix milliseconds.

-- A client's token: only its SHA-256 (hex) is kept. scope: chat | approve | admin. agents: the
-- agent ids it may use, comma-separated; empty = any. Each token is the identity http:<name>.
CREATE TABLE http_tokens (
    name         TEXT PRIMARY KEY,
    hash         TEXT NOT NULL UNIQUE,
    scope        TEXT NOT NULL,
    agents       TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);

-- A turn started with POST /api/v1/turns. (token, idem_key) is the client's Idempotency-Key;
-- platform_id is the inbox entry's platform id, so a retry is deduplicated by the inbox too.
-- body_sha is the SHA-256 of the request, to tell a retry from a different request (409).
-- state: queued | running | awaiting_confirmation | completed | failed | cancelled.
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

-- Each turn's events in order; seq is the SSE `id:`, so Last-Event-ID resumes after any
-- disconnect or restart. dedup makes an event written again (a delivery retried after a crash)
-- land once.
CREATE TABLE http_events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    turn       TEXT NOT NULL REFERENCES http_turns(id),
    kind       TEXT NOT NULL,
    data       TEXT NOT NULL,
    dedup      TEXT UNIQUE,
    created_at INTEGER NOT NULL
);
CREATE INDEX http_events_by_turn ON http_events (turn, seq);
