//! Doorbells (`04-doorbells.md`): who is rung when work arrives, the
//! re-ring sweep with delivery accounting, and deaf sessions.
//!
//! A doorbell is a hint. Nothing here waits on a client, and losing a
//! doorbell never loses work: every todo stays pullable.

pub mod hub;
pub mod sweep;

pub use hub::{Doorbells, DropReason, RingOutcome, Trigger};
