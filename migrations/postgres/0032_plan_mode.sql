-- Plan mode (issue 48): each step of a plan runs as a sub-turn of its turn, its own model
-- requests and tool results kept with the turn (so a restart resumes the step in progress) but
-- apart from the conversation: `sub_turn` names the step's run (NULL for the conversation's own
-- messages, which are all the history a later turn reads).
ALTER TABLE messages ADD COLUMN sub_turn BIGINT;
