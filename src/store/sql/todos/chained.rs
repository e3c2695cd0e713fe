//! `complete` with `next` (`TodoStore::complete_then_claim_next`): the
//! holder's completion and the caller's next claim — the agent's loop in
//! one call. On PostgreSQL, for an endpoint without admission limits, one
//! statement and one commit; on SQLite one job of the writer's lane. What
//! those cannot decide (a refused completion, admission limits, a takeover)
//! runs as `complete` and then `claim_next` would, each on its own path.

use super::*;
use crate::store::sql::postgres::chained::{CompletedThenClaimed, HeldCompletion};
use crate::store::sql::sqlite::transitions::LaneClaimed;

/// What the fast path did.
#[expect(
    clippy::large_enum_variant,
    reason = "made once per call and moved once, to its caller; boxing would add an allocation"
)]
enum Chained {
    /// Completed, and the claim decided: the todo claimed, or nothing
    /// claimable.
    Both(Todo, Option<Claimed>),
    /// Completed; the claim runs as `claim_next` would.
    Completed(Todo),
    /// Nothing written (no fast path, or the holder's guard matched
    /// nothing): `complete` runs, and says why when it refuses.
    NotRun,
}

impl SqlStore {
    pub(super) async fn complete_then_claim(
        &self,
        caller: &Caller,
        id: &str,
        finish: Finish,
        queue: Option<&str>,
        opts: ClaimOptions,
    ) -> StoreResult<(Todo, Option<Claimed>)> {
        // Whatever the claim would refuse is refused before the completion.
        check_claim_queue(caller, queue)?;
        let prep = self.claim_prep(caller, &opts)?;
        let binds = FinishBinds::of(&finish, prep.now)?;
        let chained = match self.specialised() {
            Specialised::Postgres => {
                let held = HeldCompletion {
                    id,
                    result: binds.result,
                    fence: finish.lease_token.as_deref().map(sha256_hex),
                    summary: binds.summary,
                };
                let at_once = self
                    .complete_then_claim_at_once(caller, queue, &prep.binds(), held)
                    .await?;
                match at_once {
                    CompletedThenClaimed::NotRun => Chained::NotRun,
                    // Nothing pending may still be a takeover, and limits
                    // need the full claim: both are `claim_next`'s.
                    CompletedThenClaimed::Completed(done, None) => Chained::Completed(done),
                    CompletedThenClaimed::Completed(done, Some(todo)) => {
                        let prior = self.prior_attempts_after_commit(&todo).await?;
                        Chained::Both(done, Some(prep.claimed(todo, prior)))
                    }
                }
            }
            Specialised::SqliteLane(writer) => {
                let finish = lane::LaneFinish {
                    holder: lane::LaneHolder::new(caller, id, finish.lease_token.as_deref()),
                    result: binds.result,
                    summary: binds.summary,
                    now: binds.now,
                };
                let claim = prep.lane_claim(caller, queue);
                let job = writer
                    .run(move |conn| lane::complete_then_claim(conn, finish, claim))
                    .await?;
                match job {
                    None => Chained::NotRun,
                    Some((done, LaneClaimed::Claimed(todo, prior))) => {
                        Chained::Both(done, Some(prep.claimed(todo, prior)))
                    }
                    Some((done, LaneClaimed::Empty)) => Chained::Both(done, None),
                    Some((done, LaneClaimed::TakeoverDue)) => Chained::Completed(done),
                }
            }
            Specialised::None => Chained::NotRun,
        };
        let done = match chained {
            Chained::Both(done, claimed) => return Ok((done, claimed)),
            Chained::Completed(done) => done,
            Chained::NotRun => self.complete(caller, id, finish).await?,
        };
        let claimed = self
            .claim_target(caller, ClaimTarget::Oldest(queue), opts)
            .await?;
        Ok((done, claimed))
    }
}
