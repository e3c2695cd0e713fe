//! The bus listener service: applies what other instances tell this one.
//!
//! - an endpoint revoked or expired elsewhere: its sessions here end;
//! - an endpoint changed elsewhere (its default lease): its sessions here
//!   are told their tool list changed;
//! - a transition claimed elsewhere: if this instance hosts the endpoint and
//!   it came back in, this instance sends its own one digest;
//! - a todo ready elsewhere: this instance may be the one to ring it
//!   ([`Delivery::todo_ready`]);
//! - a gap (the bus reconnected, or this subscriber fell behind): catch up
//!   from the database — revocations and returns that were missed.
//!
//! Its own echo is skipped: the instance acted when it published. A
//! revocation (or a change) is applied at once, in the listener; a ring or
//! a digest runs in a task of its own ([`dispatch`]), so that no message
//! ever waits behind another's doorbell.

use std::sync::Arc;

use tokio::sync::watch;

use super::presence::{effective_of, returned_at, send_return_digest};
use super::{Delivery, Trigger};
use crate::bus::{BusEvent, Message, Subscription};
use crate::domain::doorbell::DigestReason;
use crate::domain::presence::Presence;

/// Runs until `stop` turns true or the bus is gone.
pub async fn run(
    delivery: Arc<Delivery>,
    mut subscription: Subscription,
    mut stop: watch::Receiver<bool>,
) {
    // The catch-up runs beside the listener, one at a time: its reads (and
    // their retries while the database comes back) and its rings never hold
    // the messages that follow a gap. Gaps during a catch-up make one more.
    let gap = Arc::new(tokio::sync::Notify::new());
    let catching_up = tokio::spawn({
        let (delivery, gap) = (delivery.clone(), gap.clone());
        async move {
            loop {
                gap.notified().await;
                catch_up(&delivery).await;
            }
        }
    });
    loop {
        let event = tokio::select! {
            e = subscription.next() => match e { Some(e) => e, None => break },
            _ = stop.changed() => break,
        };
        match event {
            BusEvent::Message(envelope) => {
                if &envelope.origin != delivery.bus().instance() {
                    dispatch(&delivery, envelope.message).await;
                }
            }
            BusEvent::Gap => {
                // A lost message may have been a revocation.
                delivery.store().forget_credentials();
                gap.notify_one();
            }
        }
    }
    catching_up.abort();
}

/// Applies one message from another instance without waiting for a
/// doorbell: a ring or a digest (reads, a claim, a write to a session, for
/// a streamless one after a grace) goes to a task of its own, bounded; a
/// revocation, a change or a hook change is applied here, at once, so it is
/// never queued behind a flood of rings. Past the bound a ring is applied
/// here too (its statements, never a sleep).
pub async fn dispatch(delivery: &Arc<Delivery>, message: Message) {
    let rings = matches!(
        message,
        Message::TodoReady { .. }
            | Message::ClaimsResumed { .. }
            | Message::TransitionClaimed {
                presence: Presence::In,
                digest: Some(_),
                ..
            }
    );
    if rings && let Some(permit) = delivery.ring_task_permit() {
        let delivery = delivery.clone();
        tokio::spawn(async move {
            let _permit = permit;
            apply(&delivery, message).await;
        });
        return;
    }
    apply(delivery, message).await;
}

/// Applies one message from another instance.
pub async fn apply(delivery: &Delivery, message: Message) {
    match message {
        Message::EndpointRevoked { endpoint_id } => {
            // Before anything else: no request may authenticate with a
            // cached credential of the revoked endpoint from now on.
            delivery.store().forget_credentials();
            delivery.hooks().forget(&endpoint_id);
            let closed = delivery.sessions().close_endpoint(&endpoint_id);
            if closed > 0 {
                tracing::info!(endpoint = %endpoint_id, closed, "sessions closed: endpoint revoked elsewhere");
            }
        }
        Message::EndpointChanged { endpoint_id } => {
            delivery.endpoint_changed_here(&endpoint_id);
        }
        Message::HooksChanged { endpoint_id } => {
            delivery.hooks().refresh(&endpoint_id).await;
        }
        Message::TransitionClaimed {
            endpoint_id,
            presence: Presence::In,
            digest: Some(reason),
            ..
        } => digest_here(delivery, &endpoint_id, reason).await,
        Message::ClaimsResumed { endpoint_id } => resumed_here(delivery, &endpoint_id).await,
        Message::TodoReady {
            endpoint_id,
            todo_id,
            retried,
        } => {
            let trigger = if retried {
                Trigger::Retry
            } else {
                Trigger::Created
            };
            delivery.todo_ready(&endpoint_id, &todo_id, trigger).await;
        }
        // Presence is read from the database at every ring: nothing to redo.
        Message::PresenceChanged { .. } | Message::TransitionClaimed { .. } => {}
        Message::Keepalive => {}
    }
}

/// One digest on this instance for a return claimed elsewhere, if it hosts
/// the endpoint and the endpoint is still in. It arrives a while after the
/// return, so it counts only what waited until the return as the row records
/// it ([`returned_at`]): a todo created since rang here on its own.
async fn digest_here(delivery: &Delivery, endpoint_id: &str, reason: DigestReason) {
    if !delivery.doorbells().hosts(endpoint_id) {
        return;
    }
    let store = delivery.store();
    let endpoint = match store.unscoped_get_endpoint(endpoint_id).await {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(endpoint = %endpoint_id, error = %e, "digest skipped: endpoint unreadable");
            return;
        }
    };
    // A catch-up beside the listener may have digested this return already.
    let digested = returned_at(&endpoint)
        .is_some_and(|at| delivery.doorbells().digested_since(endpoint_id, at));
    if endpoint.is_active()
        && !digested
        && effective_of(&endpoint, store.clock().now()).presence == Presence::In
    {
        send_return_digest(delivery, &endpoint, reason, false).await;
    }
}

/// One digest on this instance of what waits, for claims resumed on
/// another, if it hosts the endpoint (a hook's digest is the resuming
/// instance's alone).
async fn resumed_here(delivery: &Delivery, endpoint_id: &str) {
    if !delivery.doorbells().hosts(endpoint_id) {
        return;
    }
    match delivery.store().unscoped_get_endpoint(endpoint_id).await {
        Ok(endpoint) if endpoint.is_active() => {
            super::presence::send_resumed_digest_here(delivery, &endpoint).await;
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(endpoint = %endpoint_id, error = %e, "digest skipped: endpoint unreadable");
        }
    }
}

/// What a lost message would have done, found in the database: sessions of
/// endpoints revoked meanwhile end; an endpoint that came back in meanwhile
/// (claimed by another instance) and that this instance has not digested
/// since gets this instance's digest; todos that became ready and whose
/// ring no instance claimed ring once.
///
/// "Meanwhile" is never the time the last message was heard: a todo
/// committed just before the gap may have been announced after it. What
/// decides is the database's ledger — the ring claim on the todo's row —
/// over the catch-up window (the first re-ring step: an older todo nobody
/// rang is due for the sweep, which rings it at its next tick).
pub async fn catch_up(delivery: &Delivery) {
    let since = delivery.catch_up_since();
    // A lost message may have been a hook change.
    delivery.hooks().reload().await;
    let hosted = delivery.doorbells().hosted_endpoints();
    // Endpoints with an enabled hook are hosted here too, for their rings.
    let hooked_only: Vec<String> = delivery
        .hooks()
        .hooked_endpoints()
        .into_iter()
        .filter(|id| !hosted.contains(id))
        .collect();
    if hosted.is_empty() {
        if !hooked_only.is_empty() {
            let rung = delivery.ring_missed(&hooked_only, since).await;
            tracing::info!(hooked = hooked_only.len(), rung, "bus catch-up done");
        }
        return;
    }
    let store = delivery.store();
    let endpoints =
        match super::retry_unavailable(|| store.unscoped_endpoints_by_ids(&hosted)).await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "bus catch-up could not read hosted endpoints");
                return;
            }
        };
    let mut revoked = 0;
    for endpoint in &endpoints {
        if !endpoint.is_active() {
            revoked += delivery.sessions().close_endpoint(&endpoint.id);
            continue;
        }
        // A return this instance did not claim and has not digested since
        // (its message may have been lost, whenever it was sent).
        let returned_meanwhile = returned_at(endpoint).is_some_and(|at| {
            at >= since
                && !delivery.claimed_here_since(&endpoint.id, at)
                && !delivery.doorbells().digested_since(&endpoint.id, at)
        });
        if returned_meanwhile {
            let reason = reason_of(endpoint.presence_changed_by.as_deref());
            send_return_digest(delivery, endpoint, reason, false).await;
        }
    }
    // Endpoints deleted outright are gone from the read: their sessions too.
    for id in hosted.iter() {
        if !endpoints.iter().any(|e| &e.id == id) {
            revoked += delivery.sessions().close_endpoint(id);
        }
    }
    let mut ringable = hosted.to_vec();
    ringable.extend(hooked_only);
    let rung = delivery.ring_missed(&ringable, since).await;
    tracing::info!(
        hosted = hosted.len(),
        sessions_closed = revoked,
        rung,
        "bus catch-up done"
    );
}

/// The digest reason a stored transition implies (`presence_changed_by`).
fn reason_of(changed_by: Option<&str>) -> DigestReason {
    match changed_by {
        Some("agent") => DigestReason::ClockIn,
        Some("shift") => DigestReason::ShiftStart,
        Some("default") => DigestReason::OverrideEnd,
        _ => DigestReason::Operator,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_transition_names_its_digest_reason() {
        assert_eq!(reason_of(Some("agent")), DigestReason::ClockIn);
        assert_eq!(reason_of(Some("operator:hu_1")), DigestReason::Operator);
        assert_eq!(reason_of(Some("shift")), DigestReason::ShiftStart);
        assert_eq!(reason_of(Some("default")), DigestReason::OverrideEnd);
    }
}
