//! The re-ring sweep with delivery accounting: only endpoints hosted here
//! (and present) are selected and counted, in one statement per tick.

use std::time::Duration;

use super::Delivery;
use super::hub::Trigger;
use super::presence::is_out;
use crate::store::Store;

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
    let hosted = doorbells.hosted_endpoints();
    if hosted.is_empty() {
        return 0;
    }
    // Work in proportion to what is due: which hosted endpoints have a ring
    // due, then presence for only those.
    let due = match store
        .unscoped_endpoints_with_due_rings(&hosted, &config.steps)
        .await
    {
        Ok(due) => due,
        Err(e) => {
            tracing::error!(error = %e, "re-ring sweep failed");
            return 0;
        }
    };
    if due.is_empty() {
        return 0;
    }
    let hosted = present_endpoints(store, due).await;
    if hosted.is_empty() {
        return 0;
    }
    match store
        .unscoped_claim_due_rings(&hosted, &config.steps, config.per_tick)
        .await
    {
        Ok(due) => {
            for todo in &due {
                // Counted already; a ring lost in delivery is accepted (`04`).
                doorbells.ring(todo, Trigger::Sweep);
            }
            due.len()
        }
        Err(e) => {
            tracing::error!(error = %e, "re-ring sweep failed");
            0
        }
    }
}

/// Endpoints that are out (or revoked) are neither selected nor counted:
/// an agent that comes back has not spent its re-rings while away.
async fn present_endpoints(store: &dyn Store, hosted: Vec<String>) -> Vec<String> {
    let now = store.clock().now();
    match store.unscoped_endpoints_by_ids(&hosted).await {
        Ok(endpoints) => endpoints
            .iter()
            .filter(|e| e.is_active() && !is_out(e, now))
            .map(|e| e.id.clone())
            .collect(),
        Err(e) => {
            tracing::error!(error = %e, "re-ring sweep could not read presence");
            Vec::new()
        }
    }
}
