//! What an operator reads of one endpoint on this instance: its sessions
//! (doorbell hearers) with why each is deaf, and its liveness condition. The API's
//! views and the board both build on these, so they never disagree.

use std::time::Duration;

use super::Doorbells;
use super::hub::DeafReason;
use super::presence::effective_of;
use crate::domain::Timestamp;
use crate::domain::liveness::{self, Assessment, Subject};
use crate::domain::presence::{Effective, Presence};
use crate::store::Endpoint;

/// One session (a doorbell hearer) of an endpoint on this instance.
#[derive(Debug, Clone)]
pub struct SessionStatus {
    /// The first 8 characters of its id, to tell rows apart.
    pub id_prefix: String,
    /// `session`, or `runner` for `switchboard work` (`Hearer::kind`).
    pub kind: &'static str,
    pub transport: &'static str,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    pub protocol_version: Option<String>,
    pub streaming: bool,
    pub deaf_reason: Option<DeafReason>,
    /// Doorbells since its last request whose answer window passed.
    pub unanswered_doorbells: usize,
    /// Since the newest doorbell it has not answered, if any.
    pub unanswered_for: Option<Duration>,
    pub idle_for: Duration,
}

/// This instance's sessions of an endpoint, with why each is deaf.
pub fn session_statuses(doorbells: &Doorbells, endpoint_id: &str) -> Vec<SessionStatus> {
    doorbells
        .sessions()
        .sessions_of(endpoint_id)
        .iter()
        .map(|s| SessionStatus {
            id_prefix: s.id.chars().take(8).collect(),
            kind: s.hearer.kind(),
            transport: s.hearer.transport,
            client_name: s.hearer.client_name.clone(),
            client_version: s.hearer.client_version.clone(),
            protocol_version: s.hearer.protocol_version.clone(),
            streaming: s.is_streaming(),
            deaf_reason: doorbells.deaf_reason(s),
            unanswered_doorbells: s.unanswered_rings(doorbells.unanswered_after()),
            unanswered_for: s.unanswered_for(),
            idle_for: s.idle_for(),
        })
        .collect()
}

/// [`every_hearer_deaf`](crate::domain::liveness::every_hearer_deaf) over this instance's session statuses.
pub fn all_deaf(sessions: &[SessionStatus], hooked: bool) -> bool {
    let deaf = sessions.iter().filter(|s| s.deaf_reason.is_some()).count();
    crate::domain::liveness::every_hearer_deaf(hooked, sessions.len(), deaf)
}

/// An endpoint's effective presence and liveness at `now`, by the one rule
/// (`liveness::assess`).
pub fn assess_endpoint(
    e: &Endpoint,
    holds_claim: bool,
    all_sessions_deaf: bool,
    now: Timestamp,
) -> (Effective, Assessment) {
    let presence = effective_of(e, now);
    let assessment = liveness::assess(
        &Subject {
            kind: e.agent_kind.as_str(),
            expected_interval_seconds: e.agent_expected_interval_seconds,
            effective_lease_seconds: e.effective_lease_seconds(),
            revoked: !e.is_active(),
            presence_out: presence.presence == Presence::Out,
            last_seen: e.last_seen_at,
            all_sessions_deaf,
            holds_claim,
        },
        now,
    );
    (presence, assessment)
}
