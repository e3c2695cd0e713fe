//! Group commit of `complete` on PostgreSQL (issue 47; River's batch
//! completer is the model).
//!
//! A `complete` that finds no other `complete` of this store running runs
//! alone, as before: [`statements::COMPLETE_WITH_ATTEMPT`], one statement,
//! one commit. One that arrives while another is running waits, and when
//! that one is done, everything that waited meanwhile runs as ONE statement
//! ([`statements::COMPLETE_BATCH`]) and one commit. Each caller is still
//! answered only once its own change is committed, and only with its own
//! row: every row of the batch is held to its own guard (id, endpoint,
//! owner, state, fence hash), and a caller whose row did not match gets
//! "nothing matched", as alone, and asks why on the transaction path.
//!
//! What keeps the semantics: a batch never holds the same todo twice (a
//! second `complete` of one todo waits for the next batch, so it meets the
//! first one's outcome, as it would alone); a caller that gave up before its
//! batch ran (its future dropped) is left out of it; and when a batch's
//! statement fails (a lost connection, a deadlock with another instance's
//! batch), every caller in it runs alone instead, so each gets the answer
//! it would have had.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::AssertSqlSafe;
use tokio::sync::oneshot;

use crate::store::sql::SqlStore;
use crate::store::sql::statements;
use crate::store::{StoreResult, Todo, rows};

/// The most `complete`s one statement takes.
const MAX_BATCH: usize = 64;

/// One `complete`'s bound values.
#[derive(Debug, Clone)]
pub(in crate::store::sql) struct CompleteInput {
    pub id: String,
    pub endpoint_id: String,
    pub owner: String,
    pub fence: Option<String>,
    pub result: Option<String>,
    pub now: i64,
    pub summary: Option<String>,
    pub truncated: bool,
}

/// A batch's answer to one caller: its row (or nothing matched), or `None`
/// when the batch failed and the caller must run alone.
type Answer = Option<StoreResult<Option<Todo>>>;

type Waiting = (CompleteInput, oneshot::Sender<Answer>);

#[derive(Debug, Default)]
pub(in crate::store::sql) struct CompleteBatcher {
    state: Mutex<State>,
    /// Statements run for more than one `complete`, and the `complete`s they ran.
    batches: AtomicU64,
    batched: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// A `complete` (alone, or a batch) is running.
    running: bool,
    waiting: Vec<Waiting>,
}

/// How a `complete` goes: alone now (the caller leads), or in a batch; or
/// alone with group commit off (`StoreOptions::group_commit`).
pub(in crate::store::sql) enum Turn {
    Alone(CompleteInput),
    Lead(CompleteInput),
    Wait(CompleteInput, oneshot::Receiver<Answer>),
}

impl CompleteBatcher {
    pub(in crate::store::sql) fn join(&self, input: CompleteInput) -> Turn {
        let mut state = self.lock();
        if !state.running {
            state.running = true;
            return Turn::Lead(input);
        }
        let (tx, rx) = oneshot::channel();
        state.waiting.push((input.clone(), tx));
        Turn::Wait(input, rx)
    }

    /// `complete`s waiting for a batch (tests wait for them).
    pub(in crate::store::sql) fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// (statements run for more than one `complete`, `complete`s in them).
    pub(in crate::store::sql) fn counts(&self) -> (u64, u64) {
        (
            self.batches.load(Ordering::Relaxed),
            self.batched.load(Ordering::Relaxed),
        )
    }

    /// The next batch, once the running `complete` is done: every waiting
    /// caller still waiting, each todo once, at most [`MAX_BATCH`]. `None`
    /// (and nothing running any more) when nobody waits.
    fn next_batch(&self) -> Option<Vec<Waiting>> {
        let mut state = self.lock();
        state.waiting.retain(|(_, reply)| !reply.is_closed());
        if state.waiting.is_empty() {
            state.running = false;
            return None;
        }
        let mut ids = HashSet::new();
        let mut batch = Vec::new();
        let mut rest = Vec::new();
        for waiting in std::mem::take(&mut state.waiting) {
            if batch.len() < MAX_BATCH && ids.insert(waiting.0.id.clone()) {
                batch.push(waiting);
            } else {
                rest.push(waiting);
            }
        }
        state.waiting = rest;
        Some(batch)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock left a valid state behind.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Held by the caller running alone: when it is done, however it ends
/// (answered, failed, or its future dropped mid-statement), whatever waited
/// meanwhile runs as the next batch.
pub(in crate::store::sql) struct Leading<'a>(pub &'a SqlStore);

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.0.run_next_batch();
    }
}

impl SqlStore {
    /// Starts the next batch in the background, if anyone waits.
    fn run_next_batch(&self) {
        if let Some(batch) = self.completes.as_ref().and_then(|b| b.next_batch()) {
            let store = self.clone();
            tokio::spawn(async move { store.run_batches(batch).await });
        }
    }

    async fn run_batches(&self, mut batch: Vec<Waiting>) {
        loop {
            if batch.len() == 1 {
                let (input, reply) = batch.pop().expect("one");
                let _ = reply.send(Some(self.complete_one(&input).await));
            } else {
                let inputs: Vec<&CompleteInput> = batch.iter().map(|(i, _)| i).collect();
                match self.complete_together(&inputs).await {
                    Ok(mut done) => {
                        if let Some(batcher) = &self.completes {
                            batcher.batches.fetch_add(1, Ordering::Relaxed);
                            batcher
                                .batched
                                .fetch_add(batch.len() as u64, Ordering::Relaxed);
                        }
                        for (input, reply) in batch.drain(..) {
                            let _ = reply.send(Some(Ok(done.remove(&input.id))));
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "a batch of completes failed; each runs alone");
                        for (_, reply) in batch.drain(..) {
                            let _ = reply.send(None);
                        }
                    }
                }
            }
            match self.completes.as_ref().and_then(|b| b.next_batch()) {
                Some(next) => batch = next,
                None => return,
            }
        }
    }

    /// One `complete` alone: [`statements::COMPLETE_WITH_ATTEMPT`].
    pub(in crate::store::sql) async fn complete_one(
        &self,
        input: &CompleteInput,
    ) -> StoreResult<Option<Todo>> {
        let mut conn = self.hot_connection().await?;
        let row = sqlx::query(AssertSqlSafe(statements::COMPLETE_WITH_ATTEMPT.as_str()))
            .bind(input.result.clone())
            .bind(input.now)
            .bind(&input.id)
            .bind(&input.endpoint_id)
            .bind(&input.owner)
            .bind(input.fence.clone())
            .bind(crate::domain::todo::Outcome::Completed.as_str())
            .bind(crate::domain::todo::Disposition::Done.as_str())
            .bind(input.summary.clone())
            .bind(i64::from(input.truncated))
            .fetch_optional(&mut *conn)
            .await?;
        self.put_hot_connection(conn);
        row.map(|row| rows::todo(&row)).transpose()
    }

    /// Several `complete`s as one statement: the rows completed, by id.
    async fn complete_together(
        &self,
        inputs: &[&CompleteInput],
    ) -> StoreResult<HashMap<String, Todo>> {
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
        let mut conn = self.hot_connection().await?;
        let rows = sqlx::query(AssertSqlSafe(statements::COMPLETE_BATCH.as_str()))
            .bind(holders)
            .fetch_all(&mut *conn)
            .await?;
        self.put_hot_connection(conn);
        let mut done = HashMap::with_capacity(rows.len());
        for row in &rows {
            let todo = rows::todo(row)?;
            done.insert(todo.id.clone(), todo);
        }
        Ok(done)
    }
}
