-- Indexes for queries that run on every message: the open turns of a conversation (the window
-- hides their unanswered tool calls) and the delivery worker's pending rows in order.
CREATE INDEX turns_by_conversation ON turns (conversation_id, status);
CREATE INDEX outbox_pending ON outbox (status, id);
