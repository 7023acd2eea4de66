-- The organiser families: tasks, notes, bookmarks, contacts and calendar events, each per user.
-- Timestamps are Unix milliseconds; tags are a JSON array of lower-case strings.

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

-- end_at >= start_at always; an all-day event spans local midnight to local midnight.
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
