//! The hot transitions as ONE statement each on PostgreSQL: the pending
//! path of `claim_next` (the claim and its attempt record), `complete`,
//! `fail` and `release` (the guarded update and closing the attempt), as
//! data-modifying CTEs in autocommit. Same guards, same rows written as the
//! transaction paths, but one round trip and one commit instead of
//! BEGIN, two statements, COMMIT (`docs/performance.md`). The texts are
//! [`statements::claim_pending_with_attempt`] and
//! [`statements::finish_with_attempt`]; concurrent calls run in batches
//! (`batch.rs`: the claim's in `claims.rs`, the endings' below).
//!
//! SQLite has no data-modifying CTEs and no round trips to save (it runs in
//! process), so it keeps the transaction paths. Whatever these statements
//! cannot decide alone (nothing pending: a takeover; nothing matched: why)
//! falls back to the transaction path, which re-checks under its own guards.

use std::collections::HashMap;

use sqlx::AssertSqlSafe;

use crate::domain::Timestamp;
use crate::domain::todo as rules;
use crate::store::sql::SqlStore;
use crate::store::sql::postgres::batch::{self, Batched, Batcher, ClaimInput, Together};
use crate::store::sql::statements::{self, Ending};
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
        let input = ClaimInput::new(caller, queue, binds);
        let Some(todo) = batch::call(self, input).await? else {
            return Ok(None);
        };
        self.count_claim();
        let prior = self.prior_attempts_after_commit(&todo).await?;
        Ok(Some((todo, prior)))
    }

    /// The recent history a todo back in the queue after earlier attempts
    /// shows its claimant, read after the claim's one-statement commit.
    /// Closed attempts do not change under a claim, so this sees what the
    /// transaction would have.
    pub(in crate::store::sql) async fn prior_attempts_after_commit(
        &self,
        todo: &Todo,
    ) -> StoreResult<Vec<Attempt>> {
        if todo.attempts_total <= 1 {
            // A first attempt has none: no connection taken for them.
            return Ok(Vec::new());
        }
        let mut conn = self.hot_connection().await?;
        let prior = Self::prior_attempts(&mut conn, todo).await?;
        self.put_hot_connection(conn);
        Ok(prior)
    }

    /// Runs one statement of the hot path on a hot connection (given back
    /// once it completed normally): its rows.
    pub(in crate::store::sql) async fn run_hot<'q>(
        &self,
        statement: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    ) -> StoreResult<Vec<sqlx::any::AnyRow>> {
        let mut conn = self.hot_connection().await?;
        let rows = statement.fetch_all(&mut *conn).await?;
        self.put_hot_connection(conn);
        Ok(rows)
    }

    /// `complete`, `fail` or `release` in one statement: the holder's guarded update
    /// and closing its open attempt; alone, or in one statement with the
    /// others of its kind that arrived while another ran (`batch.rs`).
    /// `None` when the guard matched nothing (the caller then asks why, in a
    /// transaction).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::store::sql) async fn finish_at_once(
        &self,
        ending: Ending,
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
        let input = FinishInput {
            ending,
            id: id.to_owned(),
            endpoint_id: caller.endpoint_id.clone(),
            owner: caller.owner(),
            fence: lease_token_hash,
            result,
            now: now.as_millis(),
            summary,
            truncated,
        };
        let Some(mut todo) = batch::call(self, input).await? else {
            return Ok(None);
        };
        self.prune_ended(&mut todo).await?;
        Ok(Some(todo))
    }

    /// Keeps an ended todo's history to [`rules::KEPT_ATTEMPTS`] after its
    /// one-statement ending. Rare (a todo retried more than that): it runs
    /// in its own transaction, as the transaction path would have.
    pub(in crate::store::sql) async fn prune_ended(&self, todo: &mut Todo) -> StoreResult<()> {
        if todo.attempts_total - todo.attempts_pruned > rules::KEPT_ATTEMPTS {
            let mut tx = self.begin().await?;
            todo.attempts_pruned += Self::prune_attempts(&mut tx, todo).await?;
            tx.commit().await?;
        }
        Ok(())
    }
}

/// One `complete`'s, `fail`'s or `release`'s bound values.
#[derive(Debug, Clone)]
pub(in crate::store::sql) struct FinishInput {
    pub ending: Ending,
    pub id: String,
    pub endpoint_id: String,
    pub owner: String,
    pub fence: Option<String>,
    pub result: Option<String>,
    pub now: i64,
    pub summary: Option<String>,
    pub truncated: bool,
}

/// Each kind of ending batches with its own kind, across endpoints (each
/// row is held to its own guard), each todo once a batch.
impl Batched for FinishInput {
    type Key = Ending;
    /// The ended row, or `None` when the guard matched nothing (the caller
    /// then asks why on the transaction path).
    type Output = Option<Todo>;

    fn key(&self) -> Ending {
        self.ending
    }

    fn once(&self) -> Option<&str> {
        Some(&self.id)
    }

    fn batcher(store: &SqlStore) -> Option<&Batcher<Self>> {
        store.finishes.as_deref()
    }

    /// [`statements::finish_with_attempt`].
    async fn run_one(store: &SqlStore, input: &Self) -> StoreResult<Option<Todo>> {
        let finish = sqlx::query(AssertSqlSafe(statements::finish_with_attempt(input.ending)))
            .bind(input.result.clone())
            .bind(input.now)
            .bind(&input.id)
            .bind(&input.endpoint_id)
            .bind(&input.owner)
            .bind(input.fence.clone())
            .bind(input.summary.clone())
            .bind(i64::from(input.truncated));
        let rows = store.run_hot(finish).await?;
        rows.first().map(rows::todo).transpose()
    }

    /// [`statements::finish_batch`]: every caller answered, matched or not.
    async fn run_together(
        store: &SqlStore,
        inputs: &[&Self],
    ) -> StoreResult<Together<Option<Todo>>> {
        // One JSON parameter: sqlx's Any driver binds no arrays.
        let holders: Vec<serde_json::Value> = inputs
            .iter()
            .map(|i| {
                serde_json::json!({
                    "id": i.id,
                    "endpoint_id": i.endpoint_id,
                    "owner": i.owner,
                    "fence": i.fence,
                    "result": i.result,
                    "now": i.now,
                    "summary": i.summary,
                    "truncated": i64::from(i.truncated),
                })
            })
            .collect();
        let holders = serde_json::Value::Array(holders).to_string();
        let ending = inputs.first().map_or(Ending::Complete, |i| i.ending);
        let batch = sqlx::query(AssertSqlSafe(statements::finish_batch(ending))).bind(holders);
        let rows = store.run_hot(batch).await?;
        let mut ended = HashMap::with_capacity(rows.len());
        for row in &rows {
            let todo = rows::todo(row)?;
            ended.insert(todo.id.clone(), todo);
        }
        Ok(Together {
            answers: inputs.iter().map(|i| Some(ended.remove(&i.id))).collect(),
            run_alone_for: None,
        })
    }
}
