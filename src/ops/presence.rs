//! Presence writes (`docs/presence.md`): the agent's `clock_in` and
//! `clock_out`, a human's override and shift. Each writes the endpoint's
//! presence inputs, tells the other instances, and settles the endpoint at
//! once (a transition claimed exactly once, a digest on return) through
//! the event path ([`crate::delivery::presence::settle`]).

use crate::delivery::Delivery;
use crate::delivery::presence::{Cause, override_of, settle, shift_of};
use crate::domain::Timestamp;
use crate::domain::presence::{Override, OverrideBy, Presence, Schedule};
use crate::domain::shift::Shift;
use crate::store::{Endpoint, StoreError};

/// `clock_in {for}` may keep an agent in against its shift for at most this long.
pub const MAX_CLOCK_IN: std::time::Duration = std::time::Duration::from_secs(8 * 3_600);
pub const DEFAULT_CLOCK_IN: std::time::Duration = std::time::Duration::from_secs(3_600);

/// The agent's `clock_out`: an `out` override with no end (the next shift
/// boundary ends it). A live open-ended `out` override already there: no-op.
pub async fn clock_out(delivery: &Delivery, endpoint: &Endpoint) -> Result<Endpoint, StoreError> {
    let store = delivery.store();
    let now = store.clock().now();
    let shift = shift_of(endpoint);
    let schedule = shift.as_ref().map(|s| s as &dyn Schedule);
    let already = override_of(endpoint)
        .is_some_and(|o| o.value == Presence::Out && o.until.is_none() && o.is_live(schedule, now));
    let endpoint = if already {
        endpoint.clone()
    } else {
        store
            .set_presence_override(
                &endpoint.id,
                &Override {
                    value: Presence::Out,
                    until: None,
                    set_at: now,
                    by: OverrideBy::Agent,
                },
            )
            .await?
    };
    delivery.presence_inputs_changed(&endpoint.id);
    settle(delivery, &endpoint, Cause::Agent).await;
    Ok(endpoint)
}

/// The agent's `clock_in {for}`: when the shift says out now, an `in`
/// override until `min(now + for, next shift start)`; otherwise any `out`
/// override is cleared (an `in` override is left alone).
pub async fn clock_in(
    delivery: &Delivery,
    endpoint: &Endpoint,
    for_: std::time::Duration,
) -> Result<Endpoint, StoreError> {
    let store = delivery.store();
    let now = store.clock().now();
    let shift = shift_of(endpoint);
    let schedule = shift.as_ref().map(|s| s as &dyn Schedule);
    let current = override_of(endpoint).filter(|o| o.is_live(schedule, now));
    let shift_says_out = shift.as_ref().is_some_and(|s| !s.contains(now));
    let endpoint = if shift_says_out {
        let agent_in_live = current
            .as_ref()
            .is_some_and(|o| o.value == Presence::In && o.by == OverrideBy::Agent);
        if agent_in_live {
            endpoint.clone()
        } else {
            let mut until = now.saturating_add(for_);
            if let Some(start) = shift.as_ref().and_then(|s| s.next_start(now)) {
                until = until.min(start);
            }
            store
                .set_presence_override(
                    &endpoint.id,
                    &Override {
                        value: Presence::In,
                        until: Some(until),
                        set_at: now,
                        by: OverrideBy::Agent,
                    },
                )
                .await?
        }
    } else {
        match endpoint.presence_override {
            Some(Presence::Out) => {
                store.clear_presence_override(&endpoint.id, None).await?;
                store.unscoped_get_endpoint(&endpoint.id).await?
            }
            _ => endpoint.clone(),
        }
    };
    delivery.presence_inputs_changed(&endpoint.id);
    settle(delivery, &endpoint, Cause::Agent).await;
    Ok(endpoint)
}

/// A human's `PUT presence`: an override by `operator:<human_id>`, no
/// duration cap (it still ends at the next shift boundary).
pub async fn operator_set(
    delivery: &Delivery,
    endpoint: &Endpoint,
    human_id: &str,
    value: Presence,
    until: Option<Timestamp>,
) -> Result<Endpoint, StoreError> {
    if !endpoint.is_active() {
        return Err(StoreError::EndpointRevoked);
    }
    let store = delivery.store();
    let now = store.clock().now();
    if let Some(u) = until
        && u <= now
    {
        return Err(crate::domain::Invalid::new("until", "must be in the future").into());
    }
    let endpoint = store
        .set_presence_override(
            &endpoint.id,
            &Override {
                value,
                until,
                set_at: now,
                by: OverrideBy::Operator(human_id.to_owned()),
            },
        )
        .await?;
    delivery.presence_inputs_changed(&endpoint.id);
    settle(delivery, &endpoint, Cause::Operator(human_id)).await;
    Ok(endpoint)
}

/// A human's `DELETE presence`: clears any override.
pub async fn operator_clear(
    delivery: &Delivery,
    endpoint: &Endpoint,
    human_id: &str,
) -> Result<Endpoint, StoreError> {
    let store = delivery.store();
    if !endpoint.is_active() {
        return Err(StoreError::EndpointRevoked);
    }
    store.clear_presence_override(&endpoint.id, None).await?;
    let endpoint = store.unscoped_get_endpoint(&endpoint.id).await?;
    delivery.presence_inputs_changed(&endpoint.id);
    settle(delivery, &endpoint, Cause::Operator(human_id)).await;
    Ok(endpoint)
}

/// A human's `PUT shift`: validated, stored as entered (trimmed); `None`
/// clears it. The override is judged under the old shift first.
pub async fn operator_set_shift(
    delivery: &Delivery,
    endpoint: &Endpoint,
    human_id: &str,
    text: Option<&str>,
) -> Result<Endpoint, StoreError> {
    if !endpoint.is_active() {
        return Err(StoreError::EndpointRevoked);
    }
    let store = delivery.store();
    let text = text.map(str::trim);
    if let Some(t) = text {
        Shift::parse(t)?;
    }
    let now = store.clock().now();
    let dead_under_old = move |e: &Endpoint| {
        let shift = shift_of(e);
        override_of(e).is_some_and(|o| !o.is_live(shift.as_ref().map(|s| s as &dyn Schedule), now))
    };
    let endpoint = store.set_shift(&endpoint.id, text, &dead_under_old).await?;
    delivery.presence_inputs_changed(&endpoint.id);
    settle(delivery, &endpoint, Cause::Operator(human_id)).await;
    Ok(endpoint)
}
