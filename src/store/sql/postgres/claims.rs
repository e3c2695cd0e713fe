//! The pending claim on PostgreSQL, alone or in a batch (`batch.rs`).
//!
//! Alone it is [`statements::claim_pending_with_attempt`]: the claim, its
//! attempt record and its window charge in one statement. Claims of one
//! endpoint (and named queue) that arrive while another runs wait, and run
//! as one [`statements::claim_pending_batch`]: the next pending todos in
//! claim order, one per caller, each with the caller's own owner, lease and
//! fence, and an attempt record each. A batch serves only an endpoint
//! without admission limits (an in-flight slot or a window's charge is
//! decided per claim): under limits it claims nothing, says so, and its
//! callers, and the key's claims for [`ALONE_UNDER_LIMITS`], run alone.
//! A caller left without a todo (fewer pending than callers) runs alone
//! too, and learns there what it would have: nothing pending, or a
//! takeover.

use std::time::Duration;

use sqlx::{AssertSqlSafe, Row};

use crate::store::sql::SqlStore;
use crate::store::sql::postgres::batch::{Batched, Batcher, Together};
use crate::store::sql::postgres::transitions::ClaimBinds;
use crate::store::sql::statements::{self, ClaimScope};
use crate::store::{Caller, StoreResult, Todo, rows};

/// How long the claims of an endpoint that a batch found under admission
/// limits run alone before a batch is tried again. Only a cost: a batch
/// checks the limits itself, so a limit set meanwhile is never missed.
const ALONE_UNDER_LIMITS: Duration = Duration::from_secs(1);

/// One pending claim's bound values.
#[derive(Debug, Clone)]
pub(in crate::store::sql) struct ClaimInput {
    endpoint_id: String,
    queue: Option<String>,
    now: i64,
    owner: String,
    expires: i64,
    token_hash: Option<String>,
    claimant: Option<String>,
}

impl ClaimInput {
    pub(in crate::store::sql) fn new(
        caller: &Caller,
        queue: Option<&str>,
        binds: &ClaimBinds<'_>,
    ) -> Self {
        Self {
            endpoint_id: caller.endpoint_id.clone(),
            queue: queue.map(str::to_owned),
            now: binds.now.as_millis(),
            owner: binds.owner.to_owned(),
            expires: binds.expires.as_millis(),
            token_hash: binds.token_hash.map(str::to_owned),
            claimant: binds.claimant.map(str::to_owned),
        }
    }
}

/// Claims batch per endpoint and named queue (`None`: the whole scope).
impl Batched for ClaimInput {
    type Key = (String, Option<String>);
    /// The claimed todo, or `None` when nothing was pending and admitted
    /// (the caller then tries a takeover).
    type Output = Option<Todo>;

    fn key(&self) -> Self::Key {
        (self.endpoint_id.clone(), self.queue.clone())
    }

    fn once(&self) -> Option<&str> {
        None
    }

    fn batcher(store: &SqlStore) -> Option<&Batcher<Self>> {
        store.claims.as_deref()
    }

    async fn run_one(store: &SqlStore, input: &Self) -> StoreResult<Option<Todo>> {
        // Todos exist only in scope queues, so the whole scope needs no
        // queue filter (and uses the endpoint's pending index).
        let scope = ClaimScope::of(input.queue.as_deref());
        let sql = statements::claim_pending_with_attempt(scope);
        let mut q = sqlx::query(sql)
            .bind(input.now)
            .bind(input.owner.clone())
            .bind(input.expires)
            .bind(input.token_hash.clone())
            .bind(input.endpoint_id.clone());
        if let Some(queue) = &input.queue {
            q = q.bind(queue.clone());
        }
        let rows = store.run_hot(q.bind(input.claimant.clone())).await?;
        rows.first().map(rows::todo).transpose()
    }

    async fn run_together(
        store: &SqlStore,
        inputs: &[&Self],
    ) -> StoreResult<Together<Option<Todo>>> {
        let first = inputs[0];
        // One JSON parameter: sqlx's Any driver binds no arrays.
        let holders: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(n, i)| {
                serde_json::json!({
                    "n": n + 1,
                    "now": i.now,
                    "owner": i.owner,
                    "expires": i.expires,
                    "fence": i.token_hash,
                    "claimant": i.claimant,
                })
            })
            .collect();
        let holders = serde_json::Value::Array(holders).to_string();
        let scope = ClaimScope::of(first.queue.as_deref());
        let mut q = sqlx::query(AssertSqlSafe(statements::claim_pending_batch(scope)))
            .bind(holders)
            .bind(first.endpoint_id.clone())
            .bind(inputs.len() as i64);
        if let Some(queue) = &first.queue {
            q = q.bind(queue.clone());
        }
        let rows = store.run_hot(q).await?;
        let mut answers: Vec<Option<Option<Todo>>> = vec![None; inputs.len()];
        let mut limited = false;
        for row in &rows {
            limited |= row.try_get::<bool, _>("limited")?;
            let Some(holder) = row.try_get::<Option<i64>, _>("holder")? else {
                continue;
            };
            let todo = rows::todo(row)?;
            let slot = usize::try_from(holder - 1)
                .ok()
                .and_then(|n| answers.get_mut(n));
            if let Some(slot) = slot {
                *slot = Some(Some(todo));
            }
        }
        Ok(Together {
            answers,
            run_alone_for: limited.then_some(ALONE_UNDER_LIMITS),
        })
    }
}
