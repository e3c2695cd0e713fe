//! The pending claim on PostgreSQL, alone or in a batch (`batch.rs`).
//!
//! Alone it is [`statements::claim_pending_with_attempt`]: the claim, its
//! attempt record and its window charge in one statement; for an endpoint
//! without admission limits (most), [`statements::claim_pending_unlimited`],
//! the claim and its attempt record only, which says so when it finds
//! limits after all (the endpoint is then remembered as below). Claims of one
//! endpoint (and named queue) that arrive while another runs wait, and run
//! as one statement: the next pending todos in claim order, one per caller,
//! each with the caller's own owner, lease and fence, and an attempt record
//! each. An endpoint without admission limits runs
//! [`statements::claim_pending_batch`]; one with limits
//! [`statements::claim_admitted_batch`], which admits the batch only as a
//! whole (room for all of its rows under every in-flight limit and window,
//! a free slot for each) and else claims nothing, so its callers run alone
//! where admission decides claim by claim. Which of the two an endpoint
//! needs is learned from the first (it checks for limits itself and claims
//! nothing under them) and remembered for [`LIMITS_REMEMBERED`].
//! A caller left without a todo (fewer pending than callers) runs alone
//! too, and learns there what it would have: nothing pending, or a
//! takeover.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::{AssertSqlSafe, Row};

use crate::store::sql::SqlStore;
use crate::store::sql::postgres::batch::{Batched, Batcher, Together};
use crate::store::sql::postgres::chained::ChainedInput;
use crate::store::sql::postgres::transitions::ClaimBinds;
use crate::store::sql::statements::{self, ClaimScope};
use crate::store::{Caller, StoreResult, Todo, rows};

/// How long the claims of an endpoint whose batch was not admitted as a
/// whole (a limit near binding, or rows of several queues) run alone before
/// a batch is tried again.
const ALONE_UNDER_LIMITS: Duration = Duration::from_secs(1);

/// How long an endpoint found under admission limits batches with
/// [`statements::claim_admitted_batch`] before the batch without limits is
/// tried again. Only a cost either way: each statement checks what it needs
/// itself (the one without limits claims nothing under them; the one with
/// them admits an endpoint without limits as well).
const LIMITS_REMEMBERED: Duration = Duration::from_secs(1);

/// How many slots past a batch's size it looks at for free ones before its
/// callers run alone.
const SLOT_TRIES: i64 = 8;

/// Claims of one endpoint and named queue (`None`: the whole scope).
pub(super) type ClaimKey = (String, Option<String>);

/// The claims' batcher, and the keys found under admission limits lately.
#[derive(Debug, Default)]
pub(in crate::store::sql) struct ClaimBatches {
    pub batcher: Batcher<ClaimInput>,
    /// `complete` with `next` of one endpoint (and queue): the same keys.
    pub chained: Batcher<ChainedInput>,
    under_limits: Mutex<HashMap<ClaimKey, Instant>>,
}

impl ClaimBatches {
    pub(super) fn limited_lately(&self, key: &ClaimKey) -> bool {
        let mut keys = self.lock();
        match keys.get(key) {
            Some(until) if Instant::now() < *until => true,
            Some(_) => {
                keys.remove(key);
                false
            }
            None => false,
        }
    }

    pub(super) fn remember_limits(&self, key: ClaimKey) {
        self.lock().insert(key, Instant::now() + LIMITS_REMEMBERED);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ClaimKey, Instant>> {
        // A panic while holding the lock left a valid map behind.
        self.under_limits.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One pending claim's bound values.
#[derive(Debug, Clone)]
pub(in crate::store::sql) struct ClaimInput {
    pub(super) endpoint_id: String,
    pub(super) queue: Option<String>,
    pub(super) now: i64,
    pub(super) owner: String,
    pub(super) expires: i64,
    pub(super) token_hash: Option<String>,
    pub(super) claimant: Option<String>,
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
    type Key = ClaimKey;
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
        store.claims.as_deref().map(|c| &c.batcher)
    }

    /// [`statements::claim_pending_unlimited`] first, unless the endpoint
    /// was found under admission limits lately: most endpoints have none,
    /// and the full claim's admission checks, slots and window charge cost
    /// a lone claim a third of its time with nothing to do. Under limits,
    /// [`statements::claim_pending_with_attempt`].
    async fn run_one(store: &SqlStore, input: &Self) -> StoreResult<Option<Todo>> {
        let key = input.key();
        let batches = store.claims.as_deref();
        if !batches.is_some_and(|b| b.limited_lately(&key)) {
            let (todo, limited) = input.claim(store, Claim::Unlimited).await?;
            if !limited {
                return Ok(todo);
            }
            if let Some(batches) = batches {
                batches.remember_limits(key);
            }
        }
        Ok(input.claim(store, Claim::Full).await?.0)
    }

    async fn run_together(
        store: &SqlStore,
        inputs: &[&Self],
    ) -> StoreResult<Together<Option<Todo>>> {
        let key = inputs[0].key();
        let batches = store.claims.as_deref();
        if !batches.is_some_and(|b| b.limited_lately(&key)) {
            let (answers, limited) = Self::without_limits(store, inputs).await?;
            if !limited {
                return Ok(Together {
                    answers,
                    run_alone_for: None,
                });
            }
            if let Some(batches) = batches {
                batches.remember_limits(key);
            }
        }
        let (answers, admitted) = Self::under_limits(store, inputs).await?;
        Ok(Together {
            answers,
            run_alone_for: (!admitted).then_some(ALONE_UNDER_LIMITS),
        })
    }
}

impl ClaimInput {
    /// `sql` with a lone claim's parameters bound: its own (`$1` now, `$2`
    /// owner, `$3` lease expiry, `$4` fence hash, `$5` endpoint, then the
    /// queue when one is named), then its claimant.
    pub(super) fn bound(
        &self,
        sql: &'static str,
    ) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
        let mut q = sqlx::query(AssertSqlSafe(sql))
            .bind(self.now)
            .bind(self.owner.clone())
            .bind(self.expires)
            .bind(self.token_hash.clone())
            .bind(self.endpoint_id.clone());
        if let Some(queue) = &self.queue {
            q = q.bind(queue.clone());
        }
        q.bind(self.claimant.clone())
    }
}

/// Which text a lone claim runs.
#[derive(Clone, Copy)]
enum Claim {
    Unlimited,
    Full,
}

impl ClaimInput {
    /// One claim alone, by `text` (both take the claim's own parameters,
    /// then the claimant): its todo, and whether the unlimited text found
    /// admission limits (then it claimed nothing).
    async fn claim(&self, store: &SqlStore, text: Claim) -> StoreResult<(Option<Todo>, bool)> {
        // Todos exist only in scope queues, so the whole scope needs no
        // queue filter (and uses the endpoint's pending index).
        let scope = ClaimScope::of(self.queue.as_deref());
        let sql = match text {
            Claim::Unlimited => statements::claim_pending_unlimited(scope),
            Claim::Full => statements::claim_pending_with_attempt(scope),
        };
        let rows = store.run_hot(self.bound(sql)).await?;
        let Some(row) = rows.first() else {
            return Ok((None, false));
        };
        if let Claim::Unlimited = text {
            if row.try_get::<bool, _>("limited")? {
                return Ok((None, true));
            }
            if row.try_get::<Option<String>, _>("id")?.is_none() {
                return Ok((None, false));
            }
        }
        Ok((Some(rows::todo(row)?), false))
    }

    /// [`statements::claim_pending_batch`]: the answers, and whether the
    /// endpoint has admission limits (then it claimed nothing).
    async fn without_limits(
        store: &SqlStore,
        inputs: &[&Self],
    ) -> StoreResult<(Vec<Option<Option<Todo>>>, bool)> {
        let first = inputs[0];
        let scope = ClaimScope::of(first.queue.as_deref());
        let mut q = sqlx::query(AssertSqlSafe(statements::claim_pending_batch(scope)))
            .bind(holders(inputs))
            .bind(first.endpoint_id.clone())
            .bind(inputs.len() as i64);
        if let Some(queue) = &first.queue {
            q = q.bind(queue.clone());
        }
        let rows = store.run_hot(q).await?;
        answers(inputs, &rows, "limited")
    }

    /// [`statements::claim_admitted_batch`]: the answers, and whether the
    /// batch was admitted (else it claimed nothing).
    async fn under_limits(
        store: &SqlStore,
        inputs: &[&Self],
    ) -> StoreResult<(Vec<Option<Option<Todo>>>, bool)> {
        let first = inputs[0];
        let scope = ClaimScope::of(first.queue.as_deref());
        // Admission is decided at one moment: the latest caller's.
        let now = inputs.iter().map(|i| i.now).max().unwrap_or(first.now);
        let mut q = sqlx::query(AssertSqlSafe(statements::claim_admitted_batch(scope)))
            .bind(now)
            .bind(holders(inputs))
            .bind(inputs.len() as i64)
            .bind(SLOT_TRIES)
            .bind(first.endpoint_id.clone());
        if let Some(queue) = &first.queue {
            q = q.bind(queue.clone());
        }
        let rows = store.run_hot(q).await?;
        let (answers, admitted) = answers(inputs, &rows, "admitted")?;
        Ok((answers, admitted))
    }
}

/// The callers as the batch statements' JSON parameter (sqlx's Any driver
/// binds no arrays): the n-th caller is holder n.
fn holders(inputs: &[&ClaimInput]) -> String {
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
    serde_json::Value::Array(holders).to_string()
}

/// Each caller's todo from a batch's rows (`None`: it runs alone), and the
/// batch's `flag` column (true on any row).
fn answers(
    inputs: &[&ClaimInput],
    rows: &[sqlx::any::AnyRow],
    flag: &str,
) -> StoreResult<(Vec<Option<Option<Todo>>>, bool)> {
    let mut answers: Vec<Option<Option<Todo>>> = vec![None; inputs.len()];
    let mut flagged = false;
    for row in rows {
        flagged |= row.try_get::<bool, _>(flag)?;
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
    Ok((answers, flagged))
}
