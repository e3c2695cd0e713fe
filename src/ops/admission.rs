//! Admission: a human pauses, limits or resumes an endpoint's or a queue's
//! claims; an agent's empty claim learns why (`docs/queue.md`,
//! "Admission"). The claim statements enforce the limits; this is where
//! they are set and explained.

use crate::delivery::Delivery;
use crate::domain::Timestamp;
use crate::domain::admission::{Held, Limits, held};
use crate::store::{Admission, Endpoint, StoreResult};

/// An endpoint's limits: its own and its queues'.
#[derive(Debug, Clone)]
pub struct AdmissionOf {
    pub endpoint: Endpoint,
    pub levels: Vec<Admission>,
}

/// The limits set on one of the human's endpoints (by slug or id) and its
/// queues, with their usage now.
pub async fn read(
    delivery: &Delivery,
    human_id: &str,
    reference: &str,
) -> StoreResult<AdmissionOf> {
    let store = delivery.store();
    let endpoint = store.get_endpoint(human_id, reference).await?;
    let levels = store.unscoped_admission(&endpoint.id).await?;
    Ok(AdmissionOf { endpoint, levels })
}

/// Sets an endpoint's (`queue` None) or a queue's limits, replacing what
/// was set. When that lets claims through that were held, the endpoint gets
/// one digest of what waits (`reason = "resumed"`), never a ring per todo.
pub async fn set(
    delivery: &Delivery,
    human_id: &str,
    reference: &str,
    queue: Option<&str>,
    limits: Limits,
) -> StoreResult<AdmissionOf> {
    let store = delivery.store();
    let endpoint = store.get_endpoint(human_id, reference).await?;
    let now = store.clock().now();
    let hold_of = |levels: &[Admission], queue: Option<&str>| {
        levels
            .iter()
            .find(|a| a.queue.as_deref() == queue)
            .and_then(|a| held(&a.limits, &a.usage, now))
    };
    let before = hold_of(&store.unscoped_admission(&endpoint.id).await?, queue);
    store
        .set_admission(human_id, &endpoint.id, queue, &limits)
        .await?;
    tracing::info!(endpoint = %endpoint.slug, queue = queue.unwrap_or("*"), ?limits, "admission set");
    let levels = store.unscoped_admission(&endpoint.id).await?;
    // A queue resumed under a paused endpoint still waits: no digest yet.
    let still_held =
        hold_of(&levels, queue).is_some() || (queue.is_some() && hold_of(&levels, None).is_some());
    if before.is_some() && !still_held {
        delivery.claims_resumed(&endpoint).await;
    }
    Ok(AdmissionOf { endpoint, levels })
}

/// Pauses or resumes an endpoint's (`queue` None) or a queue's claims,
/// keeping the level's limits; resuming sends the digest [`set`] sends.
pub async fn set_paused(
    delivery: &Delivery,
    human_id: &str,
    reference: &str,
    queue: Option<&str>,
    paused: bool,
) -> StoreResult<AdmissionOf> {
    let current = read(delivery, human_id, reference).await?;
    let mut limits = current
        .levels
        .into_iter()
        .find(|a| a.queue.as_deref() == queue)
        .map(|a| a.limits)
        .unwrap_or_default();
    limits.paused = paused;
    set(delivery, human_id, &current.endpoint.id, queue, limits).await
}

/// Why a claim of the endpoint's work (of `queue`, or any of its queues)
/// found nothing it may take, if admission is why: the endpoint's own hold
/// first, else the named queue's, else — for any queue — the hold of every
/// queue with limits, when all of the endpoint's queues are held (the one
/// that reopens first).
pub fn held_for(
    levels: &[Admission],
    scope: &[String],
    queue: Option<&str>,
    now: Timestamp,
) -> Option<Held> {
    let hold = |q: Option<&str>| {
        levels
            .iter()
            .find(|a| a.queue.as_deref() == q)
            .and_then(|a| held(&a.limits, &a.usage, now))
    };
    if let Some(endpoint_hold) = hold(None) {
        return Some(endpoint_hold);
    }
    match queue {
        Some(queue) => hold(Some(queue)),
        None => {
            let holds: Vec<Held> = scope.iter().map(|q| hold(Some(q))).collect::<Option<_>>()?;
            holds
                .into_iter()
                .min_by_key(|h| h.until.map_or(i64::MAX, Timestamp::as_millis))
        }
    }
}
