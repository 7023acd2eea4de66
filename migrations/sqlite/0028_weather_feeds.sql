-- Weather: a place name from `[weather] location` (or a tool call) geocoded once through
-- Open-Meteo and kept, so the geocoder is asked once per name, not once per forecast. `query`
-- is the name as written, lowercased and trimmed.
CREATE TABLE weather_places (
    query       TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    admin1      TEXT,
    country     TEXT,
    latitude    REAL NOT NULL,
    longitude   REAL NOT NULL,
    timezone    TEXT,
    created_at  INTEGER NOT NULL
);

-- Feeds: what the last request of each `[[feeds]]` entry (by name) learned. The validators
-- (ETag, Last-Modified) are replaced on every 200 and sent back only to the same URL.
CREATE TABLE feed_sources (
    name            TEXT PRIMARY KEY,
    url             TEXT NOT NULL,
    etag            TEXT,
    last_modified   TEXT,
    checked_at      INTEGER NOT NULL
);

-- Every item a feed has shown, keyed by (feed, item_key): the source's id, else its normalised
-- link, else a hash of title and date. `first_seen` never changes (a retitled item is an update,
-- not a new item); `presented_at` is when read_feeds first showed it.
CREATE TABLE feed_items (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    feed          TEXT NOT NULL,
    item_key      TEXT NOT NULL,
    title         TEXT,
    link          TEXT,
    summary       TEXT,
    published_at  INTEGER,
    first_seen    INTEGER NOT NULL,
    presented_at  INTEGER,
    UNIQUE (feed, item_key)
);
CREATE INDEX feed_items_first_seen ON feed_items (first_seen);

-- Named moments the feed tools remember: `last_briefing`, when read_feeds last finished with
-- since = "last briefing".
CREATE TABLE feed_marks (
    mark  TEXT PRIMARY KEY,
    at    INTEGER NOT NULL
);
