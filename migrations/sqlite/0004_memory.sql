-- Long-term memory: what the assistant knows about each user (the `memory` tools).
-- kind: fact | preference | event | skill. importance: 0..1. tags: lowercase, stored as
-- ",tag1,tag2," so one tag is matched exactly with LIKE '%,tag,%' (empty when none).
CREATE TABLE memories (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       INTEGER NOT NULL REFERENCES users(id),
    content       TEXT NOT NULL,
    kind          TEXT NOT NULL,
    importance    REAL NOT NULL,
    tags          TEXT NOT NULL DEFAULT '',
    access_count  INTEGER NOT NULL DEFAULT 0,
    last_accessed INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
-- The profile in every prompt reads by (user, importance); lists read by (user, created_at).
CREATE INDEX memories_by_importance ON memories (user_id, importance);
CREATE INDEX memories_by_created ON memories (user_id, created_at);

-- Full-text index over content and tags, an external-content FTS5 table kept in sync by the
-- triggers below. Only changes to content or tags touch it, not the access bookkeeping.
CREATE VIRTUAL TABLE memories_fts USING fts5(
    content, tags,
    content = 'memories', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content, tags) VALUES (new.id, new.content, new.tags);
END;

CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, tags)
        VALUES ('delete', old.id, old.content, old.tags);
END;

CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, tags ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, tags)
        VALUES ('delete', old.id, old.content, old.tags);
    INSERT INTO memories_fts (rowid, content, tags) VALUES (new.id, new.content, new.tags);
END;
