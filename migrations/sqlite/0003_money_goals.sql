-- Expenses and goals, per user.
-- Amounts are integer cents (hundredths of the currency unit) so sums never drift; dates the
-- user gives (spent_on, target_date) are local calendar dates as YYYY-MM-DD text, which sorts and
-- compares correctly as text; other timestamps are Unix milliseconds.

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

-- status: active | completed | abandoned. parent_id makes sub-goals; the tools refuse cycles.
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

-- The ordered steps a goal is broken into; done is 0/1.
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
