//! Doorbells (`04-doorbells.md`): who is rung when work arrives, the
//! re-ring sweep with delivery accounting, and deaf sessions.
//!
//! A doorbell is a hint. Nothing here waits on a client, and losing a
//! doorbell never loses work: every todo stays pullable.

pub mod hub;
pub mod presence;
pub mod sessions;
pub mod sweep;

pub use hub::{Doorbells, DropLabels, DropReason, RingLabels, RingOutcome, Trigger};

use crate::store::{Store, Todo};

/// A genuinely new todo (the caller only calls this when the store created
/// a row; a dedup hit rings nothing). Held while its endpoint is out.
pub async fn todo_created(store: &dyn Store, doorbells: &Doorbells, todo: &Todo) {
    // The sender gate: only todos created by authenticated intake ring.
    if todo.event_id.is_none() || todo.state != crate::domain::todo::TodoState::Pending {
        return;
    }
    if !doorbells.hosts(&todo.endpoint_id) {
        doorbells.counters.count_drop(DropReason::NoSession);
        return;
    }
    match store.unscoped_get_endpoint(&todo.endpoint_id).await {
        Ok(endpoint) if endpoint.is_active() => {
            if presence::is_out(&endpoint, store.clock().now()) {
                doorbells.counters.count_drop(DropReason::PresenceOut);
                return;
            }
            doorbells.ring(&crate::store::RingCandidate::from(todo), Trigger::Created);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "doorbell skipped: endpoint unreadable"),
    }
}

/// A failed todo's retry window elapsed and it is pending again.
pub async fn todo_retried(store: &dyn Store, doorbells: &Doorbells, todo_id: &str) {
    let Ok(Some(todo)) = store.unscoped_ringable_todo(todo_id).await else {
        return;
    };
    if let Ok(endpoint) = store.unscoped_get_endpoint(&todo.endpoint_id).await
        && presence::is_out(&endpoint, store.clock().now())
    {
        doorbells.counters.count_drop(DropReason::PresenceOut);
        return;
    }
    doorbells.ring(&todo, Trigger::Retry);
}
