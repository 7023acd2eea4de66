-- A model call cut short (a cancel, a closed stream, shutdown, a timeout after the first words)
-- is recorded like any other, with estimated tokens; `hearth usage` shows how many were.
ALTER TABLE model_calls ADD COLUMN cut_short INTEGER NOT NULL DEFAULT 0;

-- What hearth learned of each provider and model ("provider/model") from the tokens it reported:
-- characters per thousand tokens, and the most prompt tokens its server takes once it refused a
-- request for its length naming its limit (NULL: not known).
CREATE TABLE model_calibrations (
    model                  TEXT PRIMARY KEY,
    chars_per_1000_tokens  INTEGER NOT NULL,
    prompt_limit           INTEGER,
    updated_at             INTEGER NOT NULL
);
