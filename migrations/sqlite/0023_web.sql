-- The owner's page (src/web): one-time login codes from `hearth web login`, the sessions they
-- were exchanged for, and the decisions made on the page. Codes and session ids are stored as
-- SHA-256 hashes only: a copy of the database lets nobody log in. Timestamps are Unix ms.

-- used_at is set when the code is exchanged: a code works once, within its five minutes.
CREATE TABLE web_login_codes (
    code_hash  TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);

-- csrf is the token every POST of the session must carry (not a secret on its own: it only
-- counts together with the session cookie).
CREATE TABLE web_sessions (
    id_hash      TEXT PRIMARY KEY,
    csrf         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
);

-- An Approve / Deny pressed on the page, written before its event enters the inbox. The
-- resolver (pipeline::confirm) honours a press from the page only when this row names the
-- event's platform id (a random nonce), the confirmation and the action: nothing a chat
-- platform delivers can pose as the owner's page.
CREATE TABLE web_decisions (
    platform_id     TEXT PRIMARY KEY,
    confirmation_id TEXT NOT NULL,
    action          TEXT NOT NULL,
    created_at      INTEGER NOT NULL
);
