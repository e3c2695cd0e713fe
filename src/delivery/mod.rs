//! Delivery (`04-doorbells.md`, `05-presence.md`): who can hear a doorbell
//! on this instance ([`sessions`]), ringing one of them ([`hub`]), the
//! re-ring sweep ([`sweep`]), and presence with its digests ([`presence`]).
//!
//! [`Delivery`] is the one event path: every "someone must be told" event —
//! a todo became ready (API push, webhook, retry), an endpoint was revoked or
//! expired, presence inputs changed, a transition was claimed — goes through
//! one of its methods, which acts on this instance and publishes the event on
//! the [`Bus`] for the others.
//!
//! A doorbell is a hint. Nothing here waits on a client, and losing a
//! doorbell never loses work: every todo stays pullable.

pub mod hub;
pub mod presence;
pub mod sessions;
pub mod sweep;

use std::sync::Arc;

pub use hub::{Doorbells, DropLabels, DropReason, RingLabels, RingOutcome, Trigger};

use crate::bus::{Bus, Message};
use crate::store::{Store, Todo};
use sessions::SessionRegistry;

/// The store, this instance's doorbells (and so its sessions), and the bus.
pub struct Delivery {
    store: Arc<dyn Store>,
    doorbells: Arc<Doorbells>,
    bus: Arc<dyn Bus>,
}

impl Delivery {
    pub fn new(store: Arc<dyn Store>, doorbells: Arc<Doorbells>, bus: Arc<dyn Bus>) -> Self {
        Self {
            store,
            doorbells,
            bus,
        }
    }

    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    pub fn doorbells(&self) -> &Doorbells {
        &self.doorbells
    }

    /// The sessions of this instance: who can hear a doorbell here.
    pub fn sessions(&self) -> &Arc<SessionRegistry> {
        self.doorbells.sessions()
    }

    pub fn bus(&self) -> &dyn Bus {
        &*self.bus
    }

    /// A genuinely new todo (the caller only calls this when the store
    /// created a row; a dedup hit rings nothing). Held while its endpoint is
    /// out.
    pub async fn todo_created(&self, todo: &Todo) {
        // The sender gate: only todos created by authenticated intake ring.
        if todo.event_id.is_none() || todo.state != crate::domain::todo::TodoState::Pending {
            return;
        }
        self.bus.publish(Message::TodoReady {
            endpoint_id: todo.endpoint_id.clone(),
            todo_id: todo.id.clone(),
        });
        let doorbells = self.doorbells();
        if !doorbells.hosts(&todo.endpoint_id) {
            doorbells.counters.count_drop(DropReason::NoSession);
            return;
        }
        match self.store.unscoped_get_endpoint(&todo.endpoint_id).await {
            Ok(endpoint) if endpoint.is_active() => {
                if presence::is_out(&endpoint, self.store.clock().now()) {
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
    pub async fn todo_retried(&self, todo_id: &str) {
        let store = self.store();
        let Ok(Some(todo)) = store.unscoped_ringable_todo(todo_id).await else {
            return;
        };
        self.bus.publish(Message::TodoReady {
            endpoint_id: todo.endpoint_id.clone(),
            todo_id: todo.id.clone(),
        });
        if let Ok(endpoint) = store.unscoped_get_endpoint(&todo.endpoint_id).await
            && presence::is_out(&endpoint, store.clock().now())
        {
            self.doorbells.counters.count_drop(DropReason::PresenceOut);
            return;
        }
        self.doorbells.ring(&todo, Trigger::Retry);
    }

    /// An endpoint was revoked or expired: its sessions on this instance end
    /// now (their streams close), and the others are told. Returns how many
    /// sessions were closed here.
    pub fn endpoint_revoked(&self, endpoint_id: &str) -> usize {
        self.bus.publish(Message::EndpointRevoked {
            endpoint_id: endpoint_id.to_owned(),
        });
        self.sessions().close_endpoint(endpoint_id)
    }

    /// An endpoint's presence inputs were written here.
    pub(crate) fn presence_inputs_changed(&self, endpoint_id: &str) {
        self.bus.publish(Message::PresenceChanged {
            endpoint_id: endpoint_id.to_owned(),
        });
    }

    /// This instance claimed a presence transition.
    pub(crate) fn transition_claimed(
        &self,
        endpoint_id: &str,
        presence: crate::domain::presence::Presence,
    ) {
        self.bus.publish(Message::TransitionClaimed {
            endpoint_id: endpoint_id.to_owned(),
            presence,
            instance: self.bus.instance().clone(),
        });
    }
}
