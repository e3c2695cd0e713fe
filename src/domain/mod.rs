//! Pure types and rules. Nothing in here performs IO or reads a clock: every
//! rule takes the instant it needs as an argument, so the same function can be
//! called from the store, the server loops and the tests.

pub mod activity;
pub mod admission;
pub mod backoff;
pub mod client_setup;
pub mod doorbell;
pub mod duration;
pub mod hook;
pub mod ids;
pub mod intake;
pub mod invalid;
pub mod lease;
pub mod liveness;
pub mod names;
pub mod oauth;
pub mod presence;
pub mod registry;
pub mod rules;
pub mod schedule;
pub mod scope;
pub mod server_key;
pub mod shift;
pub mod text;
pub mod time;
pub mod todo;

pub use invalid::Invalid;
pub use time::Timestamp;
