-- A reply too long for one platform message is delivered as several parts. The delivery worker
-- plans them once (the first time it takes the row), stores them here and records each one as
-- the platform accepts it, so a temporary failure or a restart resumes at the first part not yet
-- shown instead of sending the whole reply again. status: pending | sending | sent | failed.
-- A part still 'sending' at start was in flight when the process died: it is sent again and
-- flagged in_doubt (the chat may show it twice); parts already 'sent' are never repeated.
-- outbox.platform_message_id holds the last part's id once every part is sent, so later edits
-- and button updates find the part that carries the buttons.
CREATE TABLE outbox_parts (
    outbox_id           BIGINT NOT NULL REFERENCES outbox(id),
    idx                 BIGINT NOT NULL,
    text                TEXT NOT NULL,
    status              TEXT NOT NULL DEFAULT 'pending',
    platform_message_id TEXT,
    in_doubt            BIGINT NOT NULL DEFAULT 0,
    sent_at             BIGINT,
    PRIMARY KEY (outbox_id, idx)
);
