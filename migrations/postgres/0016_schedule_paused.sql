-- `hearth schedule disable NAME` pauses a schedule: it keeps its place and history but never
-- fires until `hearth schedule enable NAME`. A column of its own rather than `enabled`, which
-- the config sync sets at every start (a config schedule removed from the file is disabled,
-- one put back is enabled): a pause must survive restarts and config syncs.
ALTER TABLE schedules ADD COLUMN paused BIGINT NOT NULL DEFAULT 0;
