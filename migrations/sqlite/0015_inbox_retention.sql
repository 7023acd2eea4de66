-- Handled inbox entries give up their content after daemon.inbox_retention_days: the payload is
-- replaced by a stub that keeps what recognises a redelivery (the unique channel + platform_id,
-- the chat and the sender), and stripped_at records when. NULL: the content is still there.
ALTER TABLE inbox ADD COLUMN stripped_at INTEGER;
CREATE INDEX inbox_by_received ON inbox (received_at) WHERE stripped_at IS NULL;
