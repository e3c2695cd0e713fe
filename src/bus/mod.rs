//! The cluster bus (`01-architecture.md`): how instances tell each other
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

pub use in_process::InProcessBus;

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
    /// A todo became ready to ring (created by intake, or retried).
    TodoReady {
        endpoint_id: String,
        todo_id: String,
    },
    /// An endpoint's presence inputs (override, shift) were written.
    PresenceChanged { endpoint_id: String },
    /// A presence transition was claimed (exactly once in the cluster) by
    /// `instance`; each other instance hosting the endpoint sends its digest.
    TransitionClaimed {
        endpoint_id: String,
        presence: Presence,
        instance: InstanceId,
    },
    /// An endpoint was revoked or expired: its sessions end everywhere.
    EndpointRevoked { endpoint_id: String },
}

/// A message as received: who sent it, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub origin: InstanceId,
    pub message: Message,
}

/// A stream of every message published after subscribing, this instance's
/// own included (a subscriber skips those by [`Envelope::origin`]).
pub type Subscription = tokio::sync::broadcast::Receiver<Envelope>;

/// The bus contract. Publishing never waits on a receiver and never fails
/// the caller: a message that cannot be sent is logged and dropped.
pub trait Bus: Send + Sync + std::fmt::Debug + 'static {
    /// This instance's id, stamped on everything it publishes.
    fn instance(&self) -> &InstanceId;
    fn publish(&self, message: Message);
    fn subscribe(&self) -> Subscription;
}
