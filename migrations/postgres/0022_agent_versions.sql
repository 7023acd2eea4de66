-- Every definition an agent has had: a new version whenever the agents file, read at start or
-- on SIGHUP, defines the agent differently from its latest version (compared by hash).
-- changes: what differs from the version before, in words ("first version" for version 1).
CREATE TABLE agent_versions (
    agent_id    TEXT NOT NULL,
    version     BIGINT NOT NULL,
    hash        TEXT NOT NULL,
    definition  TEXT NOT NULL,
    changes     TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (agent_id, version)
);

-- The version of its agent a turn ran; NULL for turns from before versions were kept.
ALTER TABLE turns ADD COLUMN agent_version BIGINT;
