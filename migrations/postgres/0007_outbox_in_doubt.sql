-- A delivery is marked 'sending' before the platform is called. Rows still 'sending' at start
-- were interrupted by a crash: they are sent again and flagged here, because the platform may
-- or may not have shown them (no chat platform offers idempotent sends).
ALTER TABLE outbox ADD COLUMN in_doubt BIGINT NOT NULL DEFAULT 0;
