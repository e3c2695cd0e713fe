//! `complete` with `next` on PostgreSQL (`todos/chained.rs`): the holder's
//! completion and the caller's next claim as ONE statement and one commit,
//! for an endpoint without admission limits; alone
//! ([`statements::complete_then_claim_unlimited`]) or, when others of the
//! same endpoint (and queue) arrive while one runs, together
//! ([`statements::complete_then_claim_batch`], group commit as in
//! `batch.rs`): each completion held to its own guard, and the holders
//! whose completion matched each given the next pending todo in claim
//! order. Under limits the statement completes and claims nothing; the
//! endpoint is then remembered as the claim batches remember it
//! (`claims.rs`), and its calls complete and claim on their own paths.

use std::collections::HashMap;

use sqlx::{AssertSqlSafe, Row};

use crate::store::sql::SqlStore;
use crate::store::sql::postgres::batch::{self, Batched, Batcher, Together};
use crate::store::sql::postgres::claims::{ClaimInput, ClaimKey};
use crate::store::sql::postgres::transitions::ClaimBinds;
use crate::store::sql::statements::{self, ClaimScope};
use crate::store::{Caller, StoreResult, Todo, rows};

/// A holder's completion, as the statements bind it beside the claim.
pub(in crate::store::sql) struct HeldCompletion<'a> {
    pub id: &'a str,
    pub result: Option<String>,
    /// The presented lease token's hash.
    pub fence: Option<String>,
    pub summary: Option<(String, bool)>,
}

/// What [`SqlStore::complete_then_claim_at_once`] did.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "made once per call and moved once, to its caller; boxing would add an allocation"
)]
pub(in crate::store::sql) enum CompletedThenClaimed {
    /// The holder's guard matched nothing, or the endpoint was found under
    /// admission limits lately: nothing written.
    NotRun,
    /// Completed, and the todo it claimed (`None`: nothing was pending, or
    /// the endpoint has admission limits — the claim is for `claim_next`).
    Completed(Todo, Option<Todo>),
}

impl SqlStore {
    /// The holder's completion and the caller's next claim in one statement
    /// and one commit, for an endpoint without admission limits.
    pub(in crate::store::sql) async fn complete_then_claim_at_once(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        binds: &ClaimBinds<'_>,
        held: HeldCompletion<'_>,
    ) -> StoreResult<CompletedThenClaimed> {
        let input = ChainedInput::new(caller, queue, binds, held);
        let batches = self.claims.as_deref();
        if batches.is_some_and(|b| b.limited_lately(&input.key())) {
            return Ok(CompletedThenClaimed::NotRun);
        }
        match batch::call(self, input).await? {
            CompletedThenClaimed::NotRun => Ok(CompletedThenClaimed::NotRun),
            CompletedThenClaimed::Completed(mut done, claimed) => {
                self.prune_ended(&mut done).await?;
                if claimed.is_some() {
                    self.count_claim();
                }
                Ok(CompletedThenClaimed::Completed(done, claimed))
            }
        }
    }
}

/// One `complete` with `next`'s bound values: the claim's, and the
/// completion's (its holder is the claim's owner, at the claim's now).
#[derive(Debug, Clone)]
pub(in crate::store::sql) struct ChainedInput {
    claim: ClaimInput,
    /// The todo completed.
    id: String,
    /// The presented lease token's hash.
    fence: Option<String>,
    result: Option<String>,
    summary: Option<String>,
    truncated: bool,
}

impl ChainedInput {
    fn new(
        caller: &Caller,
        queue: Option<&str>,
        binds: &ClaimBinds<'_>,
        held: HeldCompletion<'_>,
    ) -> Self {
        let (summary, truncated) = match held.summary {
            Some((text, cut)) => (Some(text), cut),
            None => (None, false),
        };
        Self {
            claim: ClaimInput::new(caller, queue, binds),
            id: held.id.to_owned(),
            fence: held.fence,
            result: held.result,
            summary,
            truncated,
        }
    }

    /// Remembers the endpoint under limits when a statement found them.
    fn found_limits(&self, store: &SqlStore, limited: bool) {
        if let (true, Some(batches)) = (limited, store.claims.as_deref()) {
            batches.remember_limits(self.key());
        }
    }
}

/// Calls of one endpoint and named queue run together, each todo once a
/// batch.
impl Batched for ChainedInput {
    type Key = ClaimKey;
    type Output = CompletedThenClaimed;

    fn key(&self) -> ClaimKey {
        self.claim.key()
    }

    fn once(&self) -> Option<&str> {
        Some(&self.id)
    }

    fn batcher(store: &SqlStore) -> Option<&Batcher<Self>> {
        store.claims.as_deref().map(|c| &c.chained)
    }

    /// [`statements::complete_then_claim_unlimited`].
    async fn run_one(store: &SqlStore, input: &Self) -> StoreResult<CompletedThenClaimed> {
        let scope = ClaimScope::of(input.claim.queue.as_deref());
        let q = input
            .claim
            .bound(statements::complete_then_claim_unlimited(scope))
            .bind(input.result.clone())
            .bind(input.id.clone())
            .bind(input.fence.clone())
            .bind(input.summary.clone())
            .bind(i64::from(input.truncated));
        let rows = store.run_hot(q).await?;
        let mut outcome = Outcome::default();
        for row in &rows {
            outcome.add(row)?;
        }
        input.found_limits(store, outcome.limited);
        Ok(match outcome.done {
            Some(done) => CompletedThenClaimed::Completed(done, outcome.claimed),
            None => CompletedThenClaimed::NotRun,
        })
    }

    /// [`statements::complete_then_claim_batch`]: every caller answered.
    async fn run_together(
        store: &SqlStore,
        inputs: &[&Self],
    ) -> StoreResult<Together<CompletedThenClaimed>> {
        let first = inputs[0];
        let holders: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(n, i)| {
                serde_json::json!({
                    "n": n + 1,
                    "id": i.id,
                    "owner": i.claim.owner,
                    "fence": i.fence,
                    "result": i.result,
                    "now": i.claim.now,
                    "summary": i.summary,
                    "truncated": i64::from(i.truncated),
                    "expires": i.claim.expires,
                    "new_fence": i.claim.token_hash,
                    "claimant": i.claim.claimant,
                })
            })
            .collect();
        let scope = ClaimScope::of(first.claim.queue.as_deref());
        let mut q = sqlx::query(AssertSqlSafe(statements::complete_then_claim_batch(scope)))
            .bind(serde_json::Value::Array(holders).to_string())
            .bind(first.claim.endpoint_id.clone());
        if let Some(queue) = &first.claim.queue {
            q = q.bind(queue.clone());
        }
        let rows = store.run_hot(q).await?;
        let mut by_holder: HashMap<i64, Outcome> = HashMap::with_capacity(inputs.len());
        let mut limited = false;
        for row in &rows {
            let holder: i64 = row.try_get("holder")?;
            let outcome = by_holder.entry(holder).or_default();
            outcome.add(row)?;
            limited |= outcome.limited;
        }
        first.found_limits(store, limited);
        let answers = (1..=inputs.len() as i64)
            .map(|n| {
                let outcome = by_holder.remove(&n).unwrap_or_default();
                Some(match outcome.done {
                    Some(done) => CompletedThenClaimed::Completed(done, outcome.claimed),
                    None => CompletedThenClaimed::NotRun,
                })
            })
            .collect();
        Ok(Together {
            answers,
            run_alone_for: None,
        })
    }
}

/// One holder's rows of a statement: its completed row, its claimed row,
/// and whether the endpoint has admission limits.
#[derive(Default)]
struct Outcome {
    done: Option<Todo>,
    claimed: Option<Todo>,
    limited: bool,
}

impl Outcome {
    fn add(&mut self, row: &sqlx::any::AnyRow) -> StoreResult<()> {
        self.limited |= row.try_get::<bool, _>("limited")?;
        let todo = rows::todo(row)?;
        if row.try_get::<bool, _>("done")? {
            self.done = Some(todo);
        } else {
            self.claimed = Some(todo);
        }
        Ok(())
    }
}
