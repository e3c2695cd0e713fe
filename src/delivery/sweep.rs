//! The re-ring sweep with delivery accounting: only endpoints hosted here
//! (and present) are selected and counted, in one statement per tick.
//!
//! Bounded pacing: a tick counts no more rings for an endpoint than its
//! hearers here have buffer room for now (a hook has room always), so a
//! burst of due rings does not overflow the buffers of clients that read —
//! the rest stay due for the next tick. A counted ring that every buffer
//! refused all the same (a push filled it meanwhile) is undone: no ring is
//! counted that no hearer took.

use std::collections::HashMap;
use std::time::Duration;

use super::Delivery;
use super::hub::Trigger;
use super::presence::is_out;
use crate::store::{Store, StoreResult};

/// The default schedule: ring k is due this long after the previous ring
/// (or creation): 5 min, 20 min, 1 h, 6 h, 6 h — five counted rings, then silence.
pub const DEFAULT_STEPS: [Duration; 5] = [
    Duration::from_secs(5 * 60),
    Duration::from_secs(20 * 60),
    Duration::from_secs(60 * 60),
    Duration::from_secs(6 * 60 * 60),
    Duration::from_secs(6 * 60 * 60),
];

#[derive(Debug, Clone)]
pub struct SweepConfig {
    pub steps: Vec<Duration>,
    /// Rings per tick at most.
    pub per_tick: i64,
}

impl Default for SweepConfig {
    fn default() -> Self {
        Self {
            steps: DEFAULT_STEPS.to_vec(),
            per_tick: 100,
        }
    }
}

/// One sweep tick. An instance hosting nothing runs no query at all.
/// Returns how many doorbells were counted (and so attempted).
pub async fn sweep_tick(delivery: &Delivery, config: &SweepConfig) -> usize {
    let (store, doorbells) = (delivery.store(), delivery.doorbells());
    // A ghost hosts nothing: an endpoint whose client left keeps its budget.
    doorbells.sessions().close_ghosts();
    // Endpoints with a session here, and those with an enabled hook (hosted
    // on every instance; the one statement below decides who rings). The
    // session list is sorted: the hooked ones are merged in by binary
    // search, never by a scan per id (10 000 hosted endpoints, B5).
    let with_sessions = doorbells.hosted_endpoints();
    let hooked = delivery.hooks().hooked_endpoints();
    let hosted: std::borrow::Cow<'_, [String]> = if hooked.is_empty() {
        std::borrow::Cow::Borrowed(&with_sessions[..])
    } else {
        let mut all = with_sessions.to_vec();
        all.extend(
            hooked
                .into_iter()
                .filter(|id| with_sessions.binary_search(id).is_err()),
        );
        std::borrow::Cow::Owned(all)
    };
    if hosted.is_empty() {
        return 0;
    }
    // Room per endpoint, read once per tick (memory only).
    let mut rooms: HashMap<String, usize> = HashMap::new();
    let mut room_of = |id: &str| -> usize {
        if let Some(room) = rooms.get(id) {
            return *room;
        }
        let room = if delivery.hooks().hooked(id) {
            usize::MAX
        } else {
            doorbells.room(id)
        };
        rooms.insert(id.to_owned(), room);
        room
    };
    let present = match present_due_endpoints(store, &hosted, config, &mut room_of).await {
        Ok(present) => present,
        Err(e) => {
            tracing::error!(error = %e, "re-ring sweep failed");
            return 0;
        }
    };
    if present.is_empty() {
        return 0;
    }
    let room: usize = present
        .iter()
        .map(|id| room_of(id))
        .fold(0, usize::saturating_add);
    let limit = config.per_tick.min(i64::try_from(room).unwrap_or(i64::MAX));
    match store
        .unscoped_claim_due_rings(&present, &config.steps, limit)
        .await
    {
        Ok(due) => {
            let mut taken = 0;
            for todo in &due {
                if delivery.ring_candidate(todo, Trigger::Sweep) {
                    taken += 1;
                    continue;
                }
                // Every buffer refused it: not counted after all (it is
                // due again at the next tick).
                uncount(store, todo).await;
            }
            taken
        }
        Err(e) => {
            tracing::error!(error = %e, "re-ring sweep failed");
            0
        }
    }
}

/// Puts back a ring the sweep counted that no hearer took.
async fn uncount(store: &dyn Store, todo: &crate::store::RingCandidate) {
    let Some(counted_at) = todo.last_ringed_at else {
        return;
    };
    match store
        .unscoped_uncount_ring(&todo.id, todo.ring_attempts, counted_at)
        .await
    {
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(todo = %todo.id, error = %e, "a refused ring stays counted: undo failed");
        }
    }
}

/// The hosted endpoints with a ring due that are present (neither out nor
/// revoked) and whose hearers here have room for a doorbell, at most
/// `per_tick` of them, the first in the claim's order.
///
/// Work in proportion to what one tick can ring, not to what is due: the
/// claim rings each endpoint's first due todo before anyone's second, so
/// with `per_tick` present endpoints it rings exactly their first todos,
/// whatever other endpoints have rings due. So presence is read for the
/// first `per_tick` due endpoints, and for more (four times as many each
/// round, each endpoint read once) only while some of those are out and
/// more are due. The claim itself stays the one guarded statement.
async fn present_due_endpoints(
    store: &dyn Store,
    hosted: &[String],
    config: &SweepConfig,
    room_of: &mut impl FnMut(&str) -> usize,
) -> StoreResult<Vec<String>> {
    let wanted = usize::try_from(config.per_tick).unwrap_or(0);
    if wanted == 0 {
        return Ok(Vec::new());
    }
    let mut limit = config.per_tick;
    let mut verdicts: HashMap<String, bool> = HashMap::new();
    loop {
        let due = store
            .unscoped_endpoints_with_due_rings(hosted, &config.steps, limit)
            .await?;
        let unread: Vec<String> = due
            .iter()
            .filter(|id| !verdicts.contains_key(*id))
            .cloned()
            .collect();
        if !unread.is_empty() {
            let now = store.clock().now();
            for id in &unread {
                // Missing from the read: gone since, so not present.
                verdicts.insert(id.clone(), false);
            }
            for e in store.unscoped_endpoints_by_ids(&unread).await? {
                let present = e.is_active() && !is_out(&e, now);
                verdicts.insert(e.id.clone(), present);
            }
        }
        // An endpoint whose hearers here have no room now is passed over
        // like one that is out: its rings stay due, uncounted.
        let present: Vec<String> = due
            .iter()
            .filter(|id| verdicts.get(*id).copied().unwrap_or(false) && room_of(id) > 0)
            .take(wanted)
            .cloned()
            .collect();
        let exhausted = usize::try_from(limit).map_or(true, |l| due.len() < l);
        if present.len() >= wanted || exhausted {
            return Ok(present);
        }
        limit = limit.saturating_mul(4);
    }
}
