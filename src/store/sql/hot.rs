//! Connections kept checked out for the queue's hot path (PostgreSQL;
//! issue 14, c = 1).
//!
//! sqlx's pool pings every connection it is given back (a Sync/ReadyForQuery
//! round trip in a spawned task) and hands idle connections out first in,
//! first out. A store call that runs one statement on the pool therefore
//! costs the server a second wake-up, and a single caller's consecutive
//! calls land on a different backend process each time (the one it just
//! used is still answering the ping), cycling through every idle connection
//! with cold caches. The hot path takes its connection from this small
//! stack instead and puts it back on success: no ping, and the most recently
//! used backend first (measured in `/work/notes/pg-c1.md`).
//!
//! Safety of the shortcut: a connection goes back on the stack only after
//! its statement completed normally. A statement that failed, or a call
//! that was cancelled mid-statement (the future dropped), drops the
//! connection the ordinary way, so the pool's release test flushes or closes
//! it exactly as before. A parked connection counts as in use for the pool;
//! the stack is small, and a connection is parked only while the pool still
//! has an idle connection or room to open one, so other callers never wait
//! for one that sits here.

use std::sync::Mutex;

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyPool};

/// The hot path's pool never has more connections than this (every one of
/// them may be parked).
const MAX_HOT_CONNECTIONS: usize = 16;

/// A parked connection and the circuit's change count when it was parked.
type Parked = (PoolConnection<Any>, u64);

/// The session settings of the hot path's connections, as connection URL
/// parameters. No sequential scans: a generic plan made while a table was
/// small must not scan it once it has grown (`docs/decisions.md`). No bitmap
/// scans: they never mark an index entry of a dead row version dead, so a
/// read that meets many of them (the sweep's due read after rings,
/// `rings.rs`) would meet them again every time until a vacuum; a plain
/// index scan marks them and skips them afterwards. `jit = off`: a plan
/// whose only path is a disabled scan is costed above JIT's threshold, and
/// compiling it would cost more than running it. Generic plans only
/// (`plan_cache_mode`): PostgreSQL keeps planning a prepared statement on
/// every run once a custom plan (one for the bound values) is estimated
/// cheaper than the generic one, and after an autoanalyze mid-load
/// `complete`'s custom plan (the claimed-lease index by endpoint) came out
/// cheaper than its key lookup: three runs in four planned again, 13 % of
/// PostgreSQL's CPU (B1 c = 16, perf). Every statement here is written for
/// one plan whatever the values.
const SESSION_SETTINGS: &str = "options[enable_seqscan]=off&options[enable_bitmapscan]=off\
     &options[jit]=off&options[plan_cache_mode]=force_generic_plan";

/// `url` with the hot path's session settings added to its query.
pub(super) fn session_url(url: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{SESSION_SETTINGS}")
}

/// How many of the store's connections the hot path's pool gets: a third
/// (at least one, at most [`MAX_HOT_CONNECTIONS`]); the other pool keeps the rest.
pub(super) fn pool_share(max_connections: u32) -> u32 {
    (max_connections / 3).clamp(1, MAX_HOT_CONNECTIONS as u32)
}

#[derive(Debug)]
pub(super) struct HotConnections {
    /// The hot path's own pool (on SQLite, whose hot path is the writer
    /// lane, the writer pool: never used by it).
    pool: AnyPool,
    parked: Mutex<Vec<Parked>>,
}

impl HotConnections {
    pub(super) fn new(pool: AnyPool) -> Self {
        Self {
            pool,
            parked: Mutex::default(),
        }
    }

    pub(super) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The most recently parked connection, else one from the pool. One
    /// parked before the circuit last changed (`circuit_changes`) may have
    /// died in the outage: it is closed, not reused.
    pub(super) async fn take(
        &self,
        circuit_changes: u64,
    ) -> Result<PoolConnection<Any>, sqlx::Error> {
        let pool = &self.pool;
        loop {
            let parked = self.lock().pop();
            match parked {
                Some((conn, parked_at)) if parked_at == circuit_changes && !pool.is_closed() => {
                    return Ok(conn);
                }
                Some((conn, _)) => drop(conn.detach()),
                None => return pool.acquire().await,
            }
        }
    }

    /// Parks a connection whose statement completed normally, or gives it
    /// back to the pool when parking could make another caller wait.
    pub(super) fn put(&self, conn: PoolConnection<Any>, circuit_changes: u64) {
        let pool = &self.pool;
        let pool_has_room =
            pool.num_idle() > 0 || pool.size() < pool.options().get_max_connections();
        if pool.is_closed() || !pool_has_room {
            return; // dropped: the pool's release path takes it
        }
        let most = pool.options().get_max_connections() as usize;
        let overflow = {
            let mut parked = self.lock();
            if parked.len() < most {
                parked.push((conn, circuit_changes));
                None
            } else {
                Some(conn)
            }
        };
        drop(overflow); // outside the lock: the pool's release spawns its ping
        // A close that raced with the push must not wait for it forever.
        if pool.is_closed() {
            self.drain();
        }
    }

    /// Gives every parked connection back and closes the pool.
    pub(super) async fn close(&self) {
        self.drain();
        self.pool.close().await;
    }

    /// Gives every parked connection back (the pool's `close` waits for them).
    fn drain(&self) {
        let parked = std::mem::take(&mut *self.lock());
        drop(parked);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Parked>> {
        // A panic while holding the lock left a valid Vec behind.
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for HotConnections {
    fn drop(&mut self) {
        // Giving a connection back to the pool spawns a task, which panics
        // outside a runtime (a store dropped after its runtime ended): then
        // just close the sockets.
        if tokio::runtime::Handle::try_current().is_err() {
            for (conn, _) in std::mem::take(&mut *self.lock()) {
                drop(conn.detach());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_settings_join_the_urls_query() {
        assert_eq!(
            session_url("postgres://u@h:5432/db"),
            "postgres://u@h:5432/db?options[enable_seqscan]=off&options[enable_bitmapscan]=off\
             &options[jit]=off&options[plan_cache_mode]=force_generic_plan"
        );
        assert_eq!(
            session_url("postgres://u@h/db?sslmode=disable"),
            "postgres://u@h/db?sslmode=disable&options[enable_seqscan]=off\
             &options[enable_bitmapscan]=off&options[jit]=off\
             &options[plan_cache_mode]=force_generic_plan"
        );
    }

    #[test]
    fn the_hot_pool_gets_a_third_between_one_and_sixteen() {
        assert_eq!(pool_share(2), 1);
        assert_eq!(pool_share(24), 8);
        assert_eq!(pool_share(100), 16);
    }
}
