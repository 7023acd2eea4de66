-- The OpenAI-compatible endpoint (/v1/chat/completions): what each turn of a client's chat
-- covers of the transcript the client sends back, so the next request's history can be checked
-- against it. messages: a JSON array of {"role","content"} (the new user message, or, for the
-- first turn of a branch, the client's earlier transcript and the new message); shown: the
-- assistant text the client was sent, NULL until the answer ended (then any text matches).
CREATE TABLE http_chat_turns (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    turn         TEXT NOT NULL UNIQUE REFERENCES http_turns(id),
    token        TEXT NOT NULL,
    conversation TEXT NOT NULL,
    messages     TEXT NOT NULL,
    shown        TEXT,
    created_at   INTEGER NOT NULL
);
CREATE INDEX http_chat_turns_by_conversation ON http_chat_turns (token, conversation, seq);
