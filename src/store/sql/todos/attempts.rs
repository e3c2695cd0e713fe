//! Attempt history: closing the open attempt when a lease ends, and pruning
//! old attempts.

use super::*;

impl SqlStore {
    /// The common end of every transition that ends a lease: close the open
    /// attempt with its outcome, prune old history, commit, and return the row.
    pub(super) async fn end_lease_and_commit(
        mut tx: Transaction<'static, Any>,
        row: &sqlx::any::AnyRow,
        now: Timestamp,
        outcome: Outcome,
        disposition: Disposition,
        summary: Option<(String, bool)>,
    ) -> StoreResult<Todo> {
        let mut todo = rows::todo(row)?;
        Self::close_open_attempt(&mut tx, &todo.id, now, outcome, disposition, summary).await?;
        todo.attempts_pruned += Self::prune_attempts(&mut tx, &todo).await?;
        tx.commit().await?;
        Ok(todo)
    }

    /// The closed attempts a claimant of `todo` is shown (its recent
    /// history; none on a first attempt).
    pub(in crate::store::sql) async fn prior_attempts(
        conn: &mut sqlx::AnyConnection,
        todo: &Todo,
    ) -> StoreResult<Vec<Attempt>> {
        if todo.attempts_total <= 1 {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(statements::PRIOR_ATTEMPTS)
            .bind(&todo.id)
            .bind(rules::PRIOR_ATTEMPTS_ON_CLAIM)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter().map(rows::attempt).collect()
    }

    /// Closes the todo's open attempt, if any. Returns how many were closed (0 or 1).
    pub(in crate::store::sql) async fn close_open_attempt(
        tx: &mut Transaction<'static, Any>,
        todo_id: &str,
        now: Timestamp,
        outcome: Outcome,
        disposition: Disposition,
        summary: Option<(String, bool)>,
    ) -> StoreResult<u64> {
        let (summary, truncated) = match summary {
            Some((text, cut)) => (Some(text), cut),
            None => (None, false),
        };
        let done = sqlx::query(statements::CLOSE_ATTEMPT)
            .bind(now.as_millis())
            .bind(outcome.as_str())
            .bind(disposition.as_str())
            .bind(summary)
            .bind(i64::from(truncated))
            .bind(todo_id)
            .execute(&mut **tx)
            .await?;
        Ok(done.rows_affected())
    }

    /// Keeps the newest [`rules::KEPT_ATTEMPTS`] closed attempts; counts the rest
    /// in `attempts_pruned`. Returns how many it pruned.
    pub(in crate::store::sql) async fn prune_attempts(
        tx: &mut Transaction<'static, Any>,
        todo: &Todo,
    ) -> StoreResult<i64> {
        Self::prune_attempts_of(tx, &todo.id, todo.attempts_total, todo.attempts_pruned).await
    }

    /// [`Self::prune_attempts`] for callers that hold only the todo's counters
    /// (the reaper and the revoke cascade close attempts in bulk).
    pub(in crate::store::sql) async fn prune_attempts_of(
        tx: &mut Transaction<'static, Any>,
        todo_id: &str,
        attempts_total: i64,
        attempts_pruned: i64,
    ) -> StoreResult<i64> {
        if attempts_total - attempts_pruned <= rules::KEPT_ATTEMPTS {
            return Ok(0);
        }
        let pruned = sqlx::query(statements::PRUNE_ATTEMPTS)
            .bind(todo_id)
            .bind(rules::KEPT_ATTEMPTS)
            .execute(&mut **tx)
            .await?
            .rows_affected() as i64;
        if pruned > 0 {
            sqlx::query(statements::COUNT_PRUNED)
                .bind(pruned)
                .bind(todo_id)
                .execute(&mut **tx)
                .await?;
        }
        Ok(pruned)
    }

    /// Prunes the histories of an endpoint's claimed todos once the revoke
    /// cascade has closed their open attempts. Only todos holding more than
    /// [`rules::KEPT_ATTEMPTS`] records are touched.
    pub(in crate::store::sql) async fn prune_claimed_attempts_of_endpoint(
        tx: &mut Transaction<'static, Any>,
        endpoint_id: &str,
    ) -> StoreResult<()> {
        let overfull = sqlx::query(
            "SELECT id, attempts_total, attempts_pruned FROM todos \
             WHERE endpoint_id = $1 AND state = 'claimed' \
               AND attempts_total - attempts_pruned > $2",
        )
        .bind(endpoint_id)
        .bind(rules::KEPT_ATTEMPTS)
        .fetch_all(&mut **tx)
        .await?;
        for row in &overfull {
            Self::prune_attempts_of(
                tx,
                &row.get::<String, _>("id"),
                row.get("attempts_total"),
                row.get("attempts_pruned"),
            )
            .await?;
        }
        Ok(())
    }
}
