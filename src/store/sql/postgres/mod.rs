//! What only PostgreSQL gets: the queue's hot-path connections ([`hot`])
//! and the agent loop's two hot transitions as one statement each
//! ([`transitions`]), concurrent `complete`s, and concurrent claims of one endpoint, as one ([`batch`], [`claims`]), and the queue table vacuumed as claims go by
//! ([`vacuum`]). Their SQL is [`super::statements`]'s, the same text
//! the generic transaction path runs; whatever these cannot decide alone
//! falls back to that path, which re-checks under its own guards.

pub(in crate::store::sql) mod batch;
pub(in crate::store::sql) mod chained;
pub(in crate::store::sql) mod claims;
pub(in crate::store::sql) mod hot;
pub(in crate::store::sql) mod transitions;
pub(in crate::store::sql) mod vacuum;
