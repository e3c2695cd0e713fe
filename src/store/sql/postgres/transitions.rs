//! The two hot transitions as ONE statement each on PostgreSQL (issue 14):
//! the pending path of `claim_next` (the claim and its attempt record) and
//! `complete` (the guarded update and closing the attempt), as
//! data-modifying CTEs in autocommit. Same guards, same rows written as the
//! transaction paths, but one round trip and one commit instead of
//! BEGIN, two statements, COMMIT (measured in `bench/RESULTS.md`).
//!
//! SQLite has no data-modifying CTEs and no round trips to save (it runs in
//! process), so it keeps the transaction paths. Whatever these statements
//! cannot decide alone (nothing pending: a takeover; nothing matched: why)
//! falls back to the transaction path, which re-checks under its own guards.

use std::sync::LazyLock;

use super::*;

/// The claim of the oldest pending todo with its attempt record; `$1` now,
/// `$2` owner, `$3` lease expiry, `$4` fence hash, `$5` endpoint, then the
/// queue (when named) and the claimant. Built once: the statement cache is
/// keyed by the text, and rebuilding it per call is wasted work.
fn claim_sql(queue_filter: &str, claimant_param: usize) -> String {
    format!(
        concat!(
            "WITH c AS (UPDATE todos SET {set} WHERE id = (SELECT id FROM todos ",
            "WHERE endpoint_id = $5 AND state = 'pending'{filter} ",
            "ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING ",
            todo_columns!(),
            "), a AS (INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) ",
            "SELECT id, attempts_total, attempt, ${claimant}, $1 FROM c) SELECT ",
            todo_columns!(),
            " FROM c"
        ),
        set = CLAIM_SET,
        filter = queue_filter,
        claimant = claimant_param,
    )
}

// Leaked once each, so every call passes the text without copying it.
static CLAIM_IN_SCOPE: LazyLock<&'static str> = LazyLock::new(|| claim_sql("", 6).leak());
static CLAIM_IN_QUEUE: LazyLock<&'static str> =
    LazyLock::new(|| claim_sql(" AND queue = $6", 7).leak());

/// `complete` with closing its attempt: `$1` result, `$2` now, `$3`–`$6` the
/// holder's guard, `$7`–`$10` the attempt's outcome, disposition and summary.
static COMPLETE: LazyLock<&'static str> = LazyLock::new(|| {
    format!(
        concat!(
            "WITH d AS (UPDATE todos SET state = 'done', result = $1, completed_at = $2, ",
            "updated_at = $2, lease_expires_at = NULL, lease_token_hash = NULL ",
            "WHERE {guard} RETURNING ",
            todo_columns!(),
            "), a AS (UPDATE todo_attempts SET ended_at = $2, outcome = $7, ",
            "disposition = $8, summary = $9, summary_truncated = $10 ",
            "WHERE todo_id = (SELECT id FROM d) AND ended_at IS NULL) SELECT ",
            todo_columns!(),
            " FROM d"
        ),
        guard = holder_guard(3),
    )
    .leak()
});

/// The claim's bound values, computed once by `claim_target`.
pub(super) struct ClaimBinds<'a> {
    pub now: Timestamp,
    pub owner: &'a str,
    pub expires: Timestamp,
    pub token_hash: Option<&'a str>,
    pub claimant: Option<&'a str>,
}

impl SqlStore {
    /// Claims the oldest pending todo of `queues` (`None` = the caller's
    /// whole scope) and opens its attempt in one statement. `None` when
    /// nothing is pending (the caller then tries a takeover).
    pub(super) async fn claim_pending_at_once(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        binds: &ClaimBinds<'_>,
    ) -> StoreResult<Option<(Todo, Vec<Attempt>)>> {
        // Todos exist only in scope queues, so the whole scope needs no
        // queue filter (and uses the endpoint's pending index).
        let sql: &'static str = match queue {
            Some(_) => *CLAIM_IN_QUEUE,
            None => *CLAIM_IN_SCOPE,
        };
        let mut conn = self.hot_connection().await?;
        let mut q = sqlx::query(sql)
            .bind(binds.now.as_millis())
            .bind(binds.owner.to_owned())
            .bind(binds.expires.as_millis())
            .bind(binds.token_hash.map(str::to_owned))
            .bind(caller.endpoint_id.clone());
        if let Some(queue) = queue {
            q = q.bind(queue.to_owned());
        }
        let row = q
            .bind(binds.claimant.map(str::to_owned))
            .fetch_optional(&mut *conn)
            .await?;
        let Some(row) = row else {
            self.put_hot_connection(conn);
            return Ok(None);
        };
        let todo = rows::todo(&row)?;
        // A todo back in the queue after earlier attempts shows the claimant
        // its recent history. Closed attempts do not change under a claim,
        // so reading them after the commit sees what the transaction would.
        let prior = if todo.attempts_total > 1 {
            let rows = sqlx::query(concat!(
                "SELECT ",
                attempt_columns!(),
                " FROM todo_attempts WHERE todo_id = $1 AND ended_at IS NOT NULL \
                 ORDER BY seq DESC LIMIT $2"
            ))
            .bind(&todo.id)
            .bind(rules::PRIOR_ATTEMPTS_ON_CLAIM)
            .fetch_all(&mut *conn)
            .await?;
            rows.iter()
                .map(rows::attempt)
                .collect::<StoreResult<Vec<_>>>()?
        } else {
            Vec::new()
        };
        self.put_hot_connection(conn);
        Ok(Some((todo, prior)))
    }

    /// `complete` in one statement: the holder's guarded update and closing
    /// its open attempt. `None` when the guard matched nothing (the caller
    /// then asks why, in a transaction).
    pub(super) async fn complete_at_once(
        &self,
        caller: &Caller,
        id: &str,
        result: Option<String>,
        lease_token_hash: Option<String>,
        summary: Option<(String, bool)>,
        now: Timestamp,
    ) -> StoreResult<Option<Todo>> {
        let (summary, truncated) = match summary {
            Some((text, cut)) => (Some(text), cut),
            None => (None, false),
        };
        let mut conn = self.hot_connection().await?;
        let row = sqlx::query(*COMPLETE)
            .bind(result)
            .bind(now.as_millis())
            .bind(id)
            .bind(&caller.endpoint_id)
            .bind(caller.owner())
            .bind(lease_token_hash)
            .bind(Outcome::Completed.as_str())
            .bind(Disposition::Done.as_str())
            .bind(summary)
            .bind(i64::from(truncated))
            .fetch_optional(&mut *conn)
            .await?;
        self.put_hot_connection(conn);
        let Some(row) = row else {
            return Ok(None);
        };
        let mut todo = rows::todo(&row)?;
        if todo.attempts_total - todo.attempts_pruned > rules::KEPT_ATTEMPTS {
            // Rare (a todo retried more than KEPT_ATTEMPTS times): prune in
            // its own transaction, as the transaction path would have.
            let mut tx = self.begin().await?;
            todo.attempts_pruned += Self::prune_attempts(&mut tx, &todo).await?;
            tx.commit().await?;
        }
        Ok(Some(todo))
    }
}
