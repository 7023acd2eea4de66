-- Confirmations decided by hand on channels without buttons (email, other text-only chats):
-- a short code the prompt shows ("Reply APPROVE K7M2QX or DENY K7M2QX"), and how many wrong
-- codes were typed in the chat while it waited. NULL short_code: the prompt had buttons.
ALTER TABLE confirmations ADD COLUMN short_code TEXT;
ALTER TABLE confirmations ADD COLUMN wrong_codes INTEGER NOT NULL DEFAULT 0;

-- Typed codes and reactions find the pending confirmations of one chat.
CREATE INDEX confirmations_by_chat ON confirmations (channel, chat_id, status);

-- A reaction names the platform message it was added to; the prompt's outbox row records it.
CREATE INDEX outbox_by_platform_message ON outbox (channel, platform_message_id);
