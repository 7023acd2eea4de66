-- Background tasks (`start_background_task`): work that runs after the answer, unattended, and
-- reports back as a reply to the message that started it. A task is a row from the start, so a
-- restart resumes it rather than losing it; its run is a synthetic inbox entry (`inbox_id`), so
-- its turn is stored and resumed like any other. States: queued, running, waiting_approval,
-- succeeded, failed, cancelled, interrupted.
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
