//! The re-ring sweep with delivery accounting: only endpoints hosted here
//! (and present) are selected and counted, in one statement per tick.

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
    let present = match present_due_endpoints(store, &hosted, config).await {
        Ok(present) => present,
        Err(e) => {
            tracing::error!(error = %e, "re-ring sweep failed");
            return 0;
        }
    };
    if present.is_empty() {
        return 0;
    }
    match store
        .unscoped_claim_due_rings(&present, &config.steps, config.per_tick)
        .await
    {
        Ok(due) => {
            for todo in &due {
                // Counted already; a ring lost in delivery is accepted (`docs/doorbells.md`).
                delivery.ring_candidate(todo, Trigger::Sweep);
            }
            due.len()
        }
        Err(e) => {
            tracing::error!(error = %e, "re-ring sweep failed");
            0
        }
    }
}

/// The hosted endpoints with a ring due that are present (neither out nor
/// revoked), at most `per_tick` of them, the first in the claim's order.
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
        let present: Vec<String> = due
            .iter()
            .filter(|id| verdicts.get(*id).copied().unwrap_or(false))
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
