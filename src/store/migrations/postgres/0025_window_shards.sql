-- A window budget's count, spread over shard rows (docs/queue.md,
-- "Admission"). Every claim charged its level's one `admission` row, so an
-- endpoint's concurrent claims waited for each other's commits (B10: 65 %
-- of the loop without limits). Now a claim charges one of 16 shards, each
-- allowed its share of the budget (`domain::admission::shard_share`); the
-- shares add up to the budget, so it still holds across instances, and a
-- claim finding its shard spent takes another. The window's start stays
-- on the `admission` row, written once per window; `admission.window_claims`
-- is no longer read.
CREATE TABLE admission_windows (
    endpoint_id       TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    queue             TEXT NOT NULL,
    shard             BIGINT NOT NULL,
    window_started_at BIGINT,
    claims            BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (endpoint_id, queue, shard)
);

-- Each level's count so far, spread with the first shards filled first.
INSERT INTO admission_windows (endpoint_id, queue, shard, window_started_at, claims)
SELECT a.endpoint_id, a.queue, n, a.window_started_at,
       LEAST(a.max_claims_per_window / 16 + CASE WHEN n < a.max_claims_per_window % 16 THEN 1 ELSE 0 END,
             GREATEST(0, a.window_claims
               - (n * (a.max_claims_per_window / 16) + LEAST(n, a.max_claims_per_window % 16))))
FROM admission a CROSS JOIN generate_series(0, 15) AS n
WHERE a.window_ms IS NOT NULL AND a.max_claims_per_window IS NOT NULL;
