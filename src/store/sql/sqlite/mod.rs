//! What only SQLite gets: a `rusqlite` writer thread of its own ([`lane`]:
//! an idle caller runs on it directly, the thread batches under load, group
//! commit, a checkpointer) and the agent loop's transitions as jobs for it
//! ([`transitions`]). Their SQL is [`super::statements`]'s, numbered `?n`;
//! whatever a job cannot decide alone falls back to the generic transaction
//! path, which re-checks under its own guards.

pub(in crate::store::sql) mod lane;
pub(in crate::store::sql) mod transitions;
