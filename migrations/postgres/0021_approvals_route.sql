-- Approvals routed to the owner's chat (daemon.approvals_to): a prompt raised where no buttons
-- can be shown (email, HTTP, a schedule's unattended run) is also sent there with buttons.
-- The copy's outbox row and where it went, so a press or reaction on it finds the confirmation
-- and the decision is shown on it too. NULL: the prompt was not routed.
ALTER TABLE confirmations ADD COLUMN routed_channel TEXT;
ALTER TABLE confirmations ADD COLUMN routed_chat_id TEXT;
ALTER TABLE confirmations ADD COLUMN routed_outbox_id BIGINT REFERENCES outbox(id);
