-- Schedules (cron and one-shot reminders) and the record of every run. Timestamps are Unix
-- milliseconds. The scheduler drives itself from these tables (not an in-memory job list) so
-- fire times survive restarts and follow daylight-saving changes of the schedule's timezone.

-- source: config (a [[schedules]] entry, synced at start) | chat (made by a tool or the CLI).
-- A cron schedule has `cron`; a one-shot reminder has `one_shot_at` instead and is disabled
-- after it fires. on_confirmation: deny | ask | allow; allow_tools is a JSON array of names.
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
);
CREATE INDEX schedules_due ON schedules (enabled, next_fire_at);

-- One fire of a schedule. status: queued (its inbox entry exists) | running | done | failed
-- | missed (the daemon was down longer than the catch-up window). A fire is unique per
-- (schedule, scheduled_for), which with the inbox's unique platform id makes it idempotent.
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
