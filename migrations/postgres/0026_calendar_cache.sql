-- The owner's outside calendars ([[calendars]], src/calendar.rs), cached per collection so a
-- briefing does not download a whole calendar each time and an unreachable server still
-- answers from what was last fetched. Timestamps are Unix ms.

-- One row per configured calendar, by name. url is the URL the cache was filled from: a
-- changed URL starts afresh. sync_token and ctag are CalDAV's change markers (an empty token
-- is never stored); etag and last_modified are an ICS feed's HTTP validators. fetched_at is
-- the last time the server answered.
CREATE TABLE calendar_collections (
    name          TEXT PRIMARY KEY,
    url           TEXT NOT NULL,
    sync_token    TEXT,
    ctag          TEXT,
    etag          TEXT,
    last_modified TEXT,
    fetched_at    BIGINT NOT NULL
);

-- The calendar's iCalendar objects as the server sent them: one per CalDAV resource (href),
-- or the whole feed under the feed's URL. Recurrences are expanded from these at each read.
CREATE TABLE calendar_objects (
    calendar TEXT NOT NULL REFERENCES calendar_collections (name) ON DELETE CASCADE,
    href     TEXT NOT NULL,
    etag     TEXT,
    data     TEXT NOT NULL,
    PRIMARY KEY (calendar, href)
);
