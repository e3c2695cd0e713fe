//! Claims: by id, or the oldest claimable todo (a takeover included).

use super::*;
use crate::store::sql::postgres::transitions::ClaimBinds;
use crate::store::sql::sqlite::transitions::{self as lane, LaneClaim, LaneClaimed};

pub(super) enum ClaimTarget<'a> {
    ById(&'a str),
    /// The oldest claimable todo; `None` = any of the caller's queues.
    Oldest(Option<&'a str>),
}

/// How many times a claim is read again after another instance's claim
/// took the in-flight slot or the window's last claim it had read as free.
/// Each time, the claim reads the limits afresh, so it either finds room
/// that is really there or finds none and answers like an empty queue. A
/// window's charge fails only when the window is really spent, and slots
/// are spread (`statements::free_slot`), so a claim that loses this often
/// while room remains is all but impossible (B10 saw 9 in a row lost with
/// the lowest-free slot and 8 tries, and answered a false empty).
const ADMISSION_RACE_RETRIES: usize = 64;

/// Whether a claim failed because a concurrent claim (on another instance
/// or connection) took what it had read as free: the same in-flight slot,
/// or the window's last claim (`statements::OVER_BUDGET`); or because it
/// and a batch of claims waited on each other's slots
/// (`statements::DEADLOCK`: PostgreSQL ended this one). Its writes were
/// undone with the statement.
fn lost_admission_race(err: &StoreError) -> bool {
    let StoreError::Internal(source) = err else {
        return false;
    };
    if source.is::<WindowSpent>() {
        return true;
    }
    let Some(sqlx::Error::Database(db)) = source.downcast_ref::<sqlx::Error>() else {
        return false;
    };
    match db.code().as_deref() {
        Some(statements::OVER_BUDGET | statements::DEADLOCK) => true,
        Some(statements::SLOT_TAKEN) => db
            .constraint()
            .is_some_and(|name| name == "todos_endpoint_slot" || name == "todos_queue_slot"),
        _ => false,
    }
}

/// A claim's window charge went over the limit: another claim spent the
/// window's last claim after this one read it as open.
#[derive(Debug, thiserror::Error)]
#[error("the window's claims were spent by another claim")]
struct WindowSpent;

fn over_budget() -> StoreError {
    StoreError::Internal(Box::new(WindowSpent))
}

/// What a claim binds besides its target, worked out (and checked) before
/// anything is written.
pub(super) struct ClaimPrep {
    pub now: Timestamp,
    pub expires: Timestamp,
    pub owner: String,
    pub claimant: Option<String>,
    /// Only for a fenced claim: shown once, stored as `token_hash`.
    pub lease_token: Option<String>,
    pub token_hash: Option<String>,
}

impl ClaimPrep {
    /// The claim of `todo` as its caller sees it.
    pub(super) fn claimed(self, todo: Todo, prior_attempts: Vec<Attempt>) -> Claimed {
        Claimed {
            attempt_seq: todo.attempts_total,
            todo,
            prior_attempts,
            lease_token: self.lease_token,
        }
    }

    /// The claim as a job of SQLite's writer lane.
    pub(super) fn lane_claim(&self, caller: &Caller, queue: Option<&str>) -> LaneClaim {
        LaneClaim {
            endpoint_id: caller.endpoint_id.clone(),
            queue: queue.map(str::to_owned),
            now: self.now,
            owner: self.owner.clone(),
            expires: self.expires,
            token_hash: self.token_hash.clone(),
            claimant: self.claimant.clone(),
        }
    }

    pub(super) fn binds(&self) -> ClaimBinds<'_> {
        ClaimBinds {
            now: self.now,
            owner: &self.owner,
            expires: self.expires,
            token_hash: self.token_hash.as_deref(),
            claimant: self.claimant.as_deref(),
        }
    }
}

impl SqlStore {
    /// The lease, fence and claimant of a claim by `caller` with `opts`; an
    /// invalid lease is refused here, before any write.
    pub(super) fn claim_prep(
        &self,
        caller: &Caller,
        opts: &ClaimOptions,
    ) -> StoreResult<ClaimPrep> {
        let lease_secs =
            resolve_lease_seconds(opts.lease_ttl_seconds, caller.default_lease_ttl_seconds)?;
        let claimant = opts
            .claimant
            .as_deref()
            .map(rules::clean_claimant)
            .filter(|c| !c.is_empty());
        let lease_token = opts.require_fence.then(|| random_token(16));
        let token_hash = lease_token.as_deref().map(sha256_hex);
        let now = self.now();
        Ok(ClaimPrep {
            now,
            expires: now.add_secs(lease_secs),
            owner: caller.owner(),
            claimant,
            lease_token,
            token_hash,
        })
    }
}

impl SqlStore {
    /// Charges a claim of `todo` to its endpoint's and queue's windows (in
    /// the claim's transaction): a window that ended starts anew, then one
    /// shard of each level takes the claim. `false` when a level had no
    /// shard with room left (another claim spent it after this one read the
    /// window as open): the caller rolls the claim back.
    async fn charge_window(
        tx: &mut Transaction<'static, Any>,
        dialect: Dialect,
        todo: &Todo,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let levels: i64 = sqlx::query(AssertSqlSafe(statements::window_levels(dialect)))
            .bind(&todo.endpoint_id)
            .bind(&todo.queue)
            .bind(now.as_millis())
            .fetch_one(&mut **tx)
            .await?
            .try_get("levels")?;
        if levels == 0 {
            return Ok(true);
        }
        sqlx::query(AssertSqlSafe(statements::roll_window(dialect)))
            .bind(now.as_millis())
            .bind(&todo.endpoint_id)
            .bind(&todo.queue)
            .execute(&mut **tx)
            .await?;
        let mut charge = sqlx::query(AssertSqlSafe(statements::charge_window(dialect)))
            .bind(now.as_millis())
            .bind(&todo.endpoint_id)
            .bind(&todo.queue);
        if dialect == Dialect::Postgres {
            charge = charge.bind(&todo.id);
        }
        let charged = charge.fetch_all(&mut **tx).await?;
        Ok(charged.len() as i64 == levels)
    }

    pub(super) async fn claim_target(
        &self,
        caller: &Caller,
        target: ClaimTarget<'_>,
        opts: ClaimOptions,
    ) -> StoreResult<Option<Claimed>> {
        let mut retries = 0;
        loop {
            match self.claim_target_once(caller, &target, opts.clone()).await {
                Err(err) if lost_admission_race(&err) && retries < ADMISSION_RACE_RETRIES => {
                    retries += 1;
                    // Let the claim that won commit before reading again.
                    tokio::task::yield_now().await;
                }
                Err(err) if lost_admission_race(&err) => return Ok(None),
                answer => return answer,
            }
        }
    }

    async fn claim_target_once(
        &self,
        caller: &Caller,
        target: &ClaimTarget<'_>,
        opts: ClaimOptions,
    ) -> StoreResult<Option<Claimed>> {
        let prep = self.claim_prep(caller, &opts)?;
        let specialised = self.specialised();
        // Nothing pending on PostgreSQL: the transaction below tries a takeover.
        if let (ClaimTarget::Oldest(queue), Specialised::Postgres) = (target, &specialised)
            && let Some((todo, prior_attempts)) = self
                .claim_pending_at_once(caller, *queue, &prep.binds())
                .await?
        {
            return Ok(Some(prep.claimed(todo, prior_attempts)));
        }
        if let (ClaimTarget::Oldest(queue), Specialised::SqliteLane(writer)) = (target, specialised)
        {
            let claim = prep.lane_claim(caller, *queue);
            match writer
                .run(move |conn| lane::claim_pending(conn, claim))
                .await?
            {
                LaneClaimed::Claimed(todo, prior_attempts) => {
                    return Ok(Some(prep.claimed(todo, prior_attempts)));
                }
                LaneClaimed::Empty => return Ok(None),
                // The transaction below takes it over.
                LaneClaimed::TakeoverDue => {}
            }
        }
        let ClaimPrep {
            now,
            expires,
            owner,
            claimant,
            lease_token,
            token_hash,
        } = prep;

        let mut tx = self.begin().await?;
        let bind_claim = |sql: &'static str| {
            sqlx::query(AssertSqlSafe(sql))
                .bind(now.as_millis())
                .bind(owner.clone())
                .bind(expires.as_millis())
                .bind(token_hash.clone())
        };
        let (row, may_be_takeover) = match target {
            ClaimTarget::ById(id) => {
                let row = bind_claim(statements::claim_by_id(self.dialect))
                    .bind((*id).to_owned())
                    .bind(caller.endpoint_id.clone())
                    .fetch_optional(&mut *tx)
                    .await?;
                if row.is_none() {
                    let err = Self::refusal(&mut tx, caller, id, Refused::Claim, now).await;
                    tx.rollback().await?;
                    return Err(err);
                }
                (row, true)
            }
            ClaimTarget::Oldest(queue) => {
                let queue = *queue;
                let scope = ClaimScope::of(queue);
                let bind_scope = |sql: &'static str| {
                    let q = bind_claim(sql).bind(caller.endpoint_id.clone());
                    match queue {
                        Some(name) => q.bind(name.to_owned()),
                        None => q,
                    }
                };
                let pending = bind_scope(statements::claim_pending(self.dialect, scope))
                    .fetch_optional(&mut *tx)
                    .await?;
                if pending.is_some() {
                    (pending, false)
                } else {
                    // Nothing pending: take over a lapsed lease or an elapsed
                    // retry directly, so recovery never waits for the reaper.
                    let takeover = statements::claim_takeover(self.dialect, scope);
                    (bind_scope(takeover).fetch_optional(&mut *tx).await?, true)
                }
            }
        };
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(None);
        };
        let mut todo = rows::todo(&row)?;
        if !Self::charge_window(&mut tx, self.dialect, &todo, now).await? {
            // Another claim spent the window first: undone, read again.
            tx.rollback().await?;
            return Err(over_budget());
        }

        if may_be_takeover {
            // A holder that vanished left its attempt open: close it first.
            let closed = Self::close_open_attempt(
                &mut tx,
                &todo.id,
                now,
                Outcome::LeaseExpired,
                Disposition::Requeued,
                None,
            )
            .await?;
            if closed > 0 {
                todo.attempts_pruned += Self::prune_attempts(&mut tx, &todo).await?;
            }
        }
        let attempt_seq = todo.attempts_total;
        sqlx::query(statements::OPEN_ATTEMPT)
            .bind(&todo.id)
            .bind(attempt_seq)
            .bind(todo.attempt)
            .bind(claimant)
            .bind(now.as_millis())
            .execute(&mut *tx)
            .await?;
        let prior_attempts = Self::prior_attempts(&mut tx, &todo).await?;
        tx.commit().await?;
        Ok(Some(Claimed {
            todo,
            attempt_seq,
            prior_attempts,
            lease_token,
        }))
    }
}
