//! Presence in motion (`docs/presence.md`): effective presence of a stored
//! endpoint, dead overrides cleared, transitions claimed exactly once, and
//! the one digest an endpoint gets when it comes back.

use crate::domain::Timestamp;
use crate::domain::doorbell::{DigestReason, digest};
use crate::domain::presence::{
    Effective, Override, OverrideBy, Presence, Schedule, Source, effective,
};
use crate::domain::shift::Shift;
use crate::store::{Endpoint, NextPresenceCheck, Store};
use futures_util::StreamExt;

use super::Delivery;

impl Schedule for Shift {
    fn contains(&self, t: Timestamp) -> bool {
        Shift::contains(self, t)
    }

    fn next_boundary(&self, t: Timestamp) -> Option<Timestamp> {
        Shift::next_boundary(self, t)
    }
}

/// The endpoint's stored shift, parsed. A stored shift was validated when
/// written; one that no longer parses is logged and ignored.
pub fn shift_of(endpoint: &Endpoint) -> Option<Shift> {
    let text = endpoint.shift.as_deref()?;
    match Shift::parse(text) {
        Ok(shift) => Some(shift),
        Err(e) => {
            tracing::error!(endpoint = %endpoint.slug, error = %e, "stored shift does not parse; ignoring it");
            None
        }
    }
}

pub fn override_of(endpoint: &Endpoint) -> Option<Override> {
    Some(Override {
        value: endpoint.presence_override?,
        until: endpoint.override_until,
        set_at: endpoint.override_set_at?,
        by: endpoint.override_by.clone().unwrap_or(OverrideBy::Agent),
    })
}

/// Effective presence of a stored endpoint at `now`.
pub fn effective_of(endpoint: &Endpoint, now: Timestamp) -> Effective {
    let shift = shift_of(endpoint);
    effective(
        shift.as_ref().map(|s| s as &dyn Schedule),
        override_of(endpoint).as_ref(),
        now,
    )
}

/// Whether the endpoint's doorbells are held (presence `out`) at `now`.
pub fn is_out(endpoint: &Endpoint, now: Timestamp) -> bool {
    effective_of(endpoint, now).presence == Presence::Out
}

/// What last changed presence inputs, for the audit and the digest reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause<'a> {
    /// The agent's own verb.
    Agent,
    /// A human's write, with the human's id.
    Operator(&'a str),
    /// Time passed (the evaluator).
    Clock,
}

/// Clears a dead override, then claims the transition when effective
/// presence differs from `presence_seen`; on out→in sends the digest.
/// Returns the effective presence.
pub async fn settle(delivery: &Delivery, endpoint: &Endpoint, cause: Cause<'_>) -> Effective {
    let store = delivery.store();
    let now = store.clock().now();
    let outcome = settle_now(delivery, endpoint, cause, now).await;
    if let Some(at) = outcome.next_check_unwritten {
        let next = NextPresenceCheck {
            inputs: &outcome.inputs,
            at,
        };
        if let Err(e) = store.set_presence_recheck(next).await {
            tracing::warn!(endpoint = %endpoint.slug, error = %e, "could not record the next presence check");
        }
    }
    outcome.effective
}

/// What one settle decided, and from which inputs.
struct Settled {
    effective: Effective,
    /// The presence inputs as this settle left them.
    inputs: Endpoint,
    /// When the evaluator must look again, if the transition claim did not
    /// already record it: when the value can next change, or at once if this
    /// settle could not finish. Guarded on `inputs`, so a concurrent change
    /// of inputs is never hidden.
    next_check_unwritten: Option<Timestamp>,
}

async fn settle_now(
    delivery: &Delivery,
    endpoint: &Endpoint,
    cause: Cause<'_>,
    now: Timestamp,
) -> Settled {
    let store = delivery.store();
    let mut inputs = endpoint.clone();
    let shift = shift_of(endpoint);
    let schedule = shift.as_ref().map(|s| s as &dyn Schedule);
    let stored_override = override_of(endpoint);
    let mut ended_override = None;
    if let Some(o) = &stored_override
        && !o.is_live(schedule, now)
    {
        // Guarded on the same set_at: a newer override written meanwhile stays.
        match store
            .clear_presence_override(&endpoint.id, Some(o.set_at))
            .await
        {
            Ok(_) => {
                ended_override = Some(o.clone());
                inputs.presence_override = None;
                inputs.override_until = None;
                inputs.override_set_at = None;
                inputs.override_by = None;
            }
            Err(e) => {
                tracing::warn!(endpoint = %endpoint.slug, error = %e, "could not clear a dead override")
            }
        }
    }
    let now_effective = effective(schedule, stored_override.as_ref(), now);
    let seen = endpoint.presence_seen;
    let override_ends = stored_override
        .as_ref()
        .filter(|o| o.is_live(schedule, now))
        .and_then(|o| o.ends_at(schedule));
    // The value's next change, or an override's end if sooner (a dead
    // override is cleared then, even when the value stays the same).
    let next_check = [now_effective.until, override_ends]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(Timestamp::from_millis(i64::MAX));
    let done = |next_check_unwritten| Settled {
        effective: now_effective,
        inputs: inputs.clone(),
        next_check_unwritten,
    };
    if now_effective.presence == seen || !endpoint.is_active() {
        return done(Some(next_check));
    }
    // Who changed it: the agent's own verb is the agent's doing even when
    // the shift or the default decides afterwards (clock_in clearing an out).
    let by = match (cause, now_effective.source) {
        (Cause::Agent, _) | (Cause::Clock, Source::Agent) => "agent".to_owned(),
        (Cause::Operator(human_id), _) => format!("operator:{human_id}"),
        (Cause::Clock, Source::Operator) => stored_override
            .as_ref()
            .map(|o| o.by.to_string())
            .unwrap_or_else(|| "operator".into()),
        (Cause::Clock, Source::Shift) => "shift".to_owned(),
        (Cause::Clock, Source::Default) => "default".to_owned(),
    };
    let claim = store.claim_presence_transition(
        &endpoint.id,
        now_effective.presence,
        &by,
        now,
        Some(NextPresenceCheck {
            inputs: &inputs,
            at: next_check,
        }),
    );
    let claimed = match claim.await {
        Ok(claimed) => claimed,
        Err(e) => {
            tracing::warn!(endpoint = %endpoint.slug, error = %e, "could not claim a presence transition");
            return done(Some(now));
        }
    };
    if !claimed {
        // Another instance claimed it: the row now says what we computed,
        // and the next check is still ours to record.
        return done(Some(next_check));
    }
    tracing::info!(
        endpoint = %endpoint.slug,
        old = seen.as_str(),
        new = now_effective.presence.as_str(),
        source = now_effective.source.as_str(),
        until = %now_effective.until.map(|t| t.to_rfc3339()).unwrap_or_else(|| "never".into()),
        "presence changed"
    );
    let reason = (now_effective.presence == Presence::In).then(|| {
        digest_reason(
            now_effective.source,
            cause,
            ended_override.as_ref(),
            schedule,
        )
    });
    // The others send their own digests; this instance sends its one here,
    // never again from its own echo.
    delivery.transition_claimed(&endpoint.id, now_effective.presence, reason);
    if let Some(reason) = reason {
        // The row as the claim left it: the same cutoff the others read.
        let claimed_row = Endpoint {
            presence_seen: now_effective.presence,
            presence_changed_at: Some(now),
            presence_changed_by: Some(by),
            ..endpoint.clone()
        };
        send_return_digest(delivery, &claimed_row, reason, true).await;
    }
    done(None)
}

/// Why an out→in happened, as the digest tells it.
fn digest_reason(
    source: Source,
    cause: Cause<'_>,
    ended: Option<&Override>,
    shift: Option<&dyn Schedule>,
) -> DigestReason {
    match (source, cause) {
        (Source::Agent, _) | (_, Cause::Agent) => DigestReason::ClockIn,
        (Source::Operator, _) | (_, Cause::Operator(_)) => DigestReason::Operator,
        (Source::Shift, Cause::Clock) => match ended {
            // An out override whose own `until` came before the shift's
            // boundary ended by itself; otherwise the shift started.
            Some(o)
                if o.until.is_some_and(|u| {
                    shift
                        .and_then(|s| s.next_boundary(o.set_at))
                        .is_none_or(|b| u < b)
                }) =>
            {
                DigestReason::OverrideEnd
            }
            _ => DigestReason::ShiftStart,
        },
        (Source::Default, Cause::Clock) => DigestReason::OverrideEnd,
    }
}

/// When the endpoint came back in, as its row records it: the instant of
/// its last out→in transition claim (`presence_changed_at`) while
/// `presence_seen` is in; `None` when the row records no return (it never
/// changed, or it is out again).
///
/// This is the cutoff of every digest of a return: a todo created after
/// this instant did not wait. The endpoint was in, so it rang a live session
/// on its own, and counting it again would ring it twice. It matters most
/// on the instances that did not claim the transition, which digest when the
/// bus message arrives (or at a catch-up), well after the return.
pub(crate) fn returned_at(endpoint: &Endpoint) -> Option<Timestamp> {
    if endpoint.presence_seen == Presence::In {
        endpoint.presence_changed_at
    } else {
        None
    }
}

/// The one digest of this instance for a return (`clock_in`, `operator`,
/// `shift_start`, `override_end`): [`send_digest`] counting only the todos
/// created at or before [`returned_at`]. Nothing is sent when the row
/// records no return. `claimer`: this instance claimed the transition (it
/// alone delivers a digest to a hook). Returns whether a digest was written.
pub(crate) async fn send_return_digest(
    delivery: &Delivery,
    endpoint: &Endpoint,
    reason: DigestReason,
    claimer: bool,
) -> bool {
    let Some(returned) = returned_at(endpoint) else {
        tracing::debug!(endpoint = %endpoint.slug, reason = reason.as_str(), "no return on record; no digest");
        return false;
    };
    // The return's own millisecond counts: a todo pushed while out and the
    // return right after it often share one (and that todo was held), while
    // a todo created after the return within that same millisecond costs at
    // most one doorbell more.
    let cutoff = returned.saturating_add(std::time::Duration::from_millis(1));
    send_digest(delivery, endpoint, reason, cutoff, claimer).await
}

/// Sends one digest to one session of this instance (prefer streaming,
/// rotate) when the endpoint has push-eligible pending todos created before
/// `created_before` (a todo created later did not wait: it rang on its own);
/// marks exactly the counted todos' `last_ringed_at` after a successful
/// write. Returns whether a digest was written.
///
/// An endpoint with an enabled hook gets its digest at one hook instead,
/// from the instance that claimed the transition only (`claimer`): one
/// POST per return in the whole cluster, and no session digest.
async fn send_digest(
    delivery: &Delivery,
    endpoint: &Endpoint,
    reason: DigestReason,
    created_before: Timestamp,
    claimer: bool,
) -> bool {
    let (store, doorbells) = (delivery.store(), delivery.doorbells());
    let hooked = delivery.hooks().hooked(&endpoint.id);
    if hooked && !claimer {
        return false;
    }
    let todos = match store.unscoped_digest_todos(&endpoint.id).await {
        Ok(mut todos) => {
            todos.retain(|t| t.created_at < created_before);
            todos
        }
        Err(e) => {
            tracing::warn!(endpoint = %endpoint.slug, error = %e, "digest count failed");
            return false;
        }
    };
    if todos.is_empty() {
        return false;
    }
    let now = store.clock().now();
    let mut counts: Vec<(String, usize)> = Vec::new();
    for t in &todos {
        match counts.iter_mut().find(|(q, _)| *q == t.queue) {
            Some((_, n)) => *n += 1,
            None => counts.push((t.queue.clone(), 1)),
        }
    }
    let oldest = todos.iter().map(|t| t.created_at).min().unwrap_or(now);
    if hooked {
        // Handed to the hook's own task: marked as a written digest is.
        delivery
            .hooks()
            .digest(&endpoint.id, todos.len() as i64, reason.as_str());
        doorbells.count_hook_ring("digest", super::Trigger::Digest(reason));
    } else if !doorbells.send_digest(
        &endpoint.id,
        digest(reason, &counts, now.as_millis() - oldest.as_millis()),
        reason,
        now,
    ) {
        tracing::warn!(endpoint = %endpoint.slug, reason = reason.as_str(), "digest not delivered; nothing marked");
        return false;
    }
    let ids: Vec<String> = todos.into_iter().map(|t| t.id).collect();
    if let Err(e) = store.unscoped_mark_rung(&ids, now).await {
        tracing::warn!(endpoint = %endpoint.slug, error = %e, "digest sent but marking failed");
    }
    tracing::debug!(endpoint = %endpoint.slug, reason = reason.as_str(), pending = ids.len(), "digest sent");
    true
}

/// Endpoints an evaluator tick settles at once. A return is a few
/// statements each waiting for its commit's WAL flush (the transition
/// claim with the next check, the digest's marks): one after another, ten
/// returns in one tick took 35–60 ms on PostgreSQL (B5), against a 50 ms
/// budget for the whole tick. Endpoints settle independently; each one's
/// own steps stay in order.
const SETTLES_AT_ONCE: usize = 8;

/// Candidates an evaluator tick reads per page (the server's setting).
pub const EVALUATOR_PAGE: i64 = 1_000;

/// The evaluator: shift starts and override expiries happen with nobody
/// calling anything, so every period each candidate endpoint that is due
/// (its recorded next check has come) is settled. Returns how many were.
pub async fn evaluator_tick(delivery: &Delivery, page: i64) -> usize {
    let store = delivery.store();
    let mut seen = 0;
    let mut after: Option<String> = None;
    // Every candidate, page by page: an endpoint past the first page must
    // get its shift start as surely as the first one.
    loop {
        let candidates = match store
            .unscoped_presence_candidates(after.as_deref(), page.max(1))
            .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "presence evaluator failed");
                return seen;
            }
        };
        futures_util::stream::iter(&candidates)
            .for_each_concurrent(SETTLES_AT_ONCE, |endpoint| async move {
                settle(delivery, endpoint, Cause::Clock).await;
            })
            .await;
        seen += candidates.len();
        match candidates.last() {
            Some(last) if (candidates.len() as i64) >= page.max(1) => after = Some(last.id.clone()),
            _ => return seen,
        }
    }
}

/// An endpoint got its first streaming session on this instance at
/// `opened_at`: if it is in and work waited then, one `reconnect` digest —
/// at most once per endpoint per 10 minutes per instance (transition digests
/// arm the same gate).
///
/// Only todos created before `opened_at` are counted. This runs in a task of
/// its own after the stream opened (the GET handler does not wait for it),
/// and on a loaded machine it can run after a todo created meanwhile has
/// already rung on this very stream: counting that todo too would ring it
/// twice, the second time as a digest about work that never waited.
pub async fn stream_opened(delivery: &Delivery, endpoint: &Endpoint, opened_at: Timestamp) {
    let (store, doorbells) = (delivery.store(), delivery.doorbells());
    let now = store.clock().now();
    if is_out(endpoint, now) || !doorbells.reconnect_gate_open(&endpoint.id, now) {
        return;
    }
    let reason = DigestReason::Reconnect;
    if !send_digest(delivery, endpoint, reason, opened_at, false).await {
        // Nothing was sent, so nothing is rationed: a reconnect a minute
        // later with work waiting still gets its digest.
        doorbells.disarm_reconnect_gate(&endpoint.id, now);
    }
}

/// The presence shape every self verb and the API return.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PresenceView {
    pub presence: &'static str,
    pub source: &'static str,
    pub until: Option<String>,
    pub shift: Option<String>,
    /// The endpoint's push-eligible pending todos.
    pub pending: i64,
}

pub async fn view(store: &dyn Store, endpoint: &Endpoint, now: Timestamp) -> PresenceView {
    let e = effective_of(endpoint, now);
    let pending = store
        .unscoped_digest_todos(&endpoint.id)
        .await
        .map(|t| t.len() as i64)
        .unwrap_or(0);
    PresenceView {
        presence: e.presence.as_str(),
        source: e.source.as_str(),
        until: e.until.map(|t| t.to_rfc3339()),
        shift: endpoint.shift.clone(),
        pending,
    }
}

/// Claims on the endpoint (or one of its queues) were resumed: one digest of
/// what waits, to one hearer, when the endpoint is in; never a ring per
/// todo. Returns whether a digest was written.
pub(crate) async fn send_resumed_digest(delivery: &Delivery, endpoint: &Endpoint) -> bool {
    resumed_digest(delivery, endpoint, true).await
}

/// [`send_resumed_digest`] on an instance told of it by the bus: its own
/// sessions' digest (a hook's is the resuming instance's).
pub(crate) async fn send_resumed_digest_here(delivery: &Delivery, endpoint: &Endpoint) -> bool {
    resumed_digest(delivery, endpoint, false).await
}

async fn resumed_digest(delivery: &Delivery, endpoint: &Endpoint, resumer: bool) -> bool {
    let now = delivery.store().clock().now();
    if effective_of(endpoint, now).presence != Presence::In {
        return false;
    }
    let cutoff = now.saturating_add(std::time::Duration::from_millis(1));
    send_digest(delivery, endpoint, DigestReason::Resumed, cutoff, resumer).await
}
