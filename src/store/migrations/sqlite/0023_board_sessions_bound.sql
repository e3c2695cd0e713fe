-- A board session is bound to the token it was signed in with (issue 48):
-- the board's own token names that token here, and authenticates only
-- while that token is live too; revoking it revokes its sessions. NULL for
-- every other token.
ALTER TABLE human_tokens ADD COLUMN session_of TEXT REFERENCES human_tokens (id) ON DELETE CASCADE;
CREATE INDEX human_tokens_by_session ON human_tokens (session_of) WHERE session_of IS NOT NULL;
