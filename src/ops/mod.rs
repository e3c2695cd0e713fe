//! Operations: one function per write a human, an agent or a sender
//! performs. Each validates its input (a typed [`Invalid`] naming the
//! field), mints what it needs, writes through the store, tells
//! [`Delivery`] whom the change concerns, and counts it — once, here. The
//! surfaces (API, board, MCP, intake) parse their own wire shapes, call one
//! of these, and render the result; reads may go to the store directly.
//!
//! - [`todos`]: a human's push, retry, release, cancel, delete and the bulk pair; a
//!   webhook delivery's todo.
//! - [`work`]: the agent's verbs on the todos it holds (claim, heartbeat,
//!   complete, fail, release).
//! - [`endpoints`]: vend, revoke, delete, the default lease.
//! - [`webhooks`], [`tokens`], [`agents`]: the human's other records.
//! - [`forms`]: one-time form submissions (a create form's nonce).
//! - [`hooks`]: notify hooks (add, delete, enable, test).
//! - [`schedules`]: recurring todos (add, pause, resume, delete; the due-check).
//! - [`presence`]: clock in/out (the agent's) and overrides and shifts (a
//!   human's); the settling itself is the event path's
//!   ([`crate::delivery::presence`]).
//! - [`activity`]: each queue's activity, written down for the charts.
//! - [`error`]: the one error policy every surface renders.
//!
//! A new write is a new function here, in the file of its record; its
//! consequences (who is told, what is counted) are decided in that one
//! place (`docs/decisions.md`, "Operations").
//!
//! [`Invalid`]: crate::domain::Invalid
//! [`Delivery`]: crate::delivery::Delivery

pub mod activity;
pub mod admission;
pub mod agents;
pub mod endpoints;
pub mod error;
pub mod forms;
pub mod hooks;
pub mod intake;
pub mod oauth;
pub mod presence;
pub mod rules;
pub mod schedules;
pub mod todos;
pub mod tokens;
pub mod webhooks;
pub mod work;

pub use error::Answer;
