//! The two hot transitions as ONE statement each on PostgreSQL:
//! the pending path of `claim_next` (the claim and its attempt record) and
//! `complete` (the guarded update and closing the attempt), as
//! data-modifying CTEs in autocommit. Same guards, same rows written as the
//! transaction paths, but one round trip and one commit instead of
//! BEGIN, two statements, COMMIT (`docs/performance.md`). The texts are
//! [`statements::claim_pending_with_attempt`] and
//! [`statements::COMPLETE_WITH_ATTEMPT`].
//!
//! SQLite has no data-modifying CTEs and no round trips to save (it runs in
//! process), so it keeps the transaction paths. Whatever these statements
//! cannot decide alone (nothing pending: a takeover; nothing matched: why)
//! falls back to the transaction path, which re-checks under its own guards.

use crate::domain::Timestamp;
use crate::domain::todo as rules;
use crate::store::sql::SqlStore;
use crate::store::sql::postgres::batch::{CompleteInput, Leading, Turn};
use crate::store::sql::statements::{self, ClaimScope};
use crate::store::{Attempt, Caller, StoreResult, Todo, rows};

/// The claim's bound values, computed once by `claim_target`.
pub(in crate::store::sql) struct ClaimBinds<'a> {
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
    pub(in crate::store::sql) async fn claim_pending_at_once(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        binds: &ClaimBinds<'_>,
    ) -> StoreResult<Option<(Todo, Vec<Attempt>)>> {
        // Todos exist only in scope queues, so the whole scope needs no
        // queue filter (and uses the endpoint's pending index).
        let sql = statements::claim_pending_with_attempt(ClaimScope::of(queue));
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
        self.count_claim();
        let todo = rows::todo(&row)?;
        // A todo back in the queue after earlier attempts shows the claimant
        // its recent history. Closed attempts do not change under a claim,
        // so reading them after the commit sees what the transaction would.
        let prior = Self::prior_attempts(&mut conn, &todo).await?;
        self.put_hot_connection(conn);
        Ok(Some((todo, prior)))
    }

    /// `complete` in one statement: the holder's guarded update and closing
    /// its open attempt; alone, or in one statement with the `complete`s
    /// that arrived while another ran (`batch.rs`). `None` when the guard
    /// matched nothing (the caller then asks why, in a transaction).
    pub(in crate::store::sql) async fn complete_at_once(
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
        let input = CompleteInput {
            id: id.to_owned(),
            endpoint_id: caller.endpoint_id.clone(),
            owner: caller.owner(),
            fence: lease_token_hash,
            result,
            now: now.as_millis(),
            summary,
            truncated,
        };
        let turn = match &self.completes {
            Some(batcher) => batcher.join(input),
            None => Turn::Alone(input),
        };
        let todo = match turn {
            Turn::Alone(input) => self.complete_one(&input).await?,
            Turn::Lead(input) => {
                let _leading = Leading(self);
                self.complete_one(&input).await?
            }
            Turn::Wait(input, answer) => match answer.await {
                Ok(Some(answer)) => answer?,
                // The batch failed (or the runtime is shutting down): alone.
                Ok(None) | Err(_) => self.complete_one(&input).await?,
            },
        };
        let Some(mut todo) = todo else {
            return Ok(None);
        };
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
