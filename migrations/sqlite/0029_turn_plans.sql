-- The plan a turn shows (issue 48): the latest revision of the checklist the model keeps with
-- `update_plan`, stored with its turn so it survives a restart and `/plan` can show it.
-- `steps` is a JSON array of {step, status, note}; `message_outbox_id` is the outbox row of the
-- chat message that shows it (NULL until it is first shown, or on channels that show the plan
-- with the answer instead).
CREATE TABLE turn_plans (
    turn_id           INTEGER PRIMARY KEY REFERENCES turns(id),
    conversation_id   INTEGER NOT NULL REFERENCES conversations(id),
    revision          INTEGER NOT NULL,
    explanation       TEXT,
    steps             TEXT NOT NULL,
    message_outbox_id INTEGER,
    updated_at        INTEGER NOT NULL
);
CREATE INDEX turn_plans_conversation ON turn_plans (conversation_id, turn_id);
