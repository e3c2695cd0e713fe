//! The cluster bus (`docs/cluster.md`): how instances tell each other
//! about events that change who should be rung.
//!
//! Payloads are ids only — never a title, a payload or a credential — so a
//! message is a few hundred bytes at most and leaks nothing. Correctness never
//! depends on the bus: the periodic loops catch whatever a lost message would
//! have triggered; a lost message only costs latency.
//!
//! [`InProcessBus`] serves SQLite (one instance) and tests. The PostgreSQL
//! `LISTEN/NOTIFY` bus is a second implementation of [`Bus`].

mod in_process;
pub mod pg;

pub use in_process::InProcessBus;
pub use pg::PgBus;

use tokio::sync::broadcast;

use crate::domain::doorbell::DigestReason;
use crate::domain::presence::Presence;

/// Which running `serve` process sent a message. Each instance mints one at
/// start; an instance ignores its own echo.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct InstanceId(pub String);

impl std::fmt::Display for InstanceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What one instance tells the others. Ids only.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Message {
    /// A todo became ready to ring: created by intake, or (`retried`)
    /// pending again after its retry window.
    TodoReady {
        endpoint_id: String,
        todo_id: String,
        retried: bool,
    },
    /// An endpoint's presence inputs (override, shift) were written.
    PresenceChanged { endpoint_id: String },
    /// A presence transition was claimed (exactly once in the cluster) by
    /// `instance`; for out→in, `digest` says why, and each other instance
    /// hosting the endpoint sends its own digest.
    TransitionClaimed {
        endpoint_id: String,
        presence: Presence,
        digest: Option<DigestReason>,
        instance: InstanceId,
    },
    /// Claims on an endpoint (or one of its queues) were resumed with work
    /// waiting: each other instance hosting it sends its sessions its own
    /// digest (`reason: resumed`), as for a return.
    ClaimsResumed { endpoint_id: String },
    /// An endpoint was revoked or expired: its sessions end everywhere.
    EndpointRevoked { endpoint_id: String },
    /// An endpoint's settings that its sessions see (the default lease)
    /// changed: its sessions everywhere are told their tool list changed.
    EndpointChanged { endpoint_id: String },
    /// An endpoint's notify hooks were added, deleted, enabled or disabled:
    /// every instance reads again whether it has an enabled one.
    HooksChanged { endpoint_id: String },
    /// A listener's probe of its own connection; everyone ignores it.
    Keepalive,
}

/// A message as received: who sent it, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub origin: InstanceId,
    pub message: Message,
}

/// What a subscriber is handed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusEvent {
    Message(Envelope),
    /// Messages may have been lost (the listener reconnected, or this
    /// subscriber fell behind): whatever they would have triggered must be
    /// caught up from the database.
    Gap,
}

/// Every message published after subscribing, this instance's own included
/// (a subscriber skips those by [`Envelope::origin`]), and every gap.
#[derive(Debug)]
pub struct Subscription {
    receiver: broadcast::Receiver<BusEvent>,
}

impl Subscription {
    pub fn new(receiver: broadcast::Receiver<BusEvent>) -> Self {
        Self { receiver }
    }

    /// The next event; `None` once the bus is gone.
    pub async fn next(&mut self) -> Option<BusEvent> {
        match self.receiver.recv().await {
            Ok(event) => Some(event),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(BusEvent::Gap),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// The next event if one is waiting, without waiting.
    pub fn try_next(&mut self) -> Option<BusEvent> {
        match self.receiver.try_recv() {
            Ok(event) => Some(event),
            Err(broadcast::error::TryRecvError::Lagged(_)) => Some(BusEvent::Gap),
            Err(_) => None,
        }
    }
}

/// The bus contract. Publishing never waits on a receiver and never fails
/// the caller: a message that cannot be sent is logged and dropped.
pub trait Bus: Send + Sync + std::fmt::Debug + 'static {
    /// This instance's id, stamped on everything it publishes.
    fn instance(&self) -> &InstanceId;
    /// Whether other instances may be listening. When not (SQLite, one
    /// instance), this instance alone decides who is rung, in memory.
    fn spans_instances(&self) -> bool;
    fn publish(&self, message: Message);
    fn subscribe(&self) -> Subscription;
}
