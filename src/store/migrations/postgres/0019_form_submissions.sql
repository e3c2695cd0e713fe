-- One-time form tokens of the board (docs/decisions.md, "A create form is
-- submitted once"): a form that creates something carries a nonce; the
-- first POST records it here (a guarded insert), and a replay of the same
-- nonce answers with what the first made instead of making it again.
-- Rows older than a day are pruned as new ones arrive.
CREATE TABLE form_submissions (
    nonce         TEXT PRIMARY KEY,
    human_id      TEXT NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    form          TEXT NOT NULL,
    submitted_at  BIGINT NOT NULL,
    result        TEXT
);
CREATE INDEX form_submissions_by_age ON form_submissions (submitted_at);
CREATE INDEX form_submissions_by_human ON form_submissions (human_id);
