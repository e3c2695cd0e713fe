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
//! used backend first (measured in `bench/analysis/2026-12-01-postgres-c1.md`).
//!
//! Connections are handed from caller to caller, never given back to the
//! pool while the store runs: a caller that finds the stack empty and the
//! pool at its size waits for the next connection parked here. Giving one
//! back to the pool instead would cost its ping, and that was every call once
//! more callers than connections ran at once (B1 at c = 16 with the
//! default 8: bench CPU 202–220 → 138–141 µs and PostgreSQL CPU
//! 1 036–1 106 → 993–1 005 µs per loop, `docs/decisions.md`). Every user of
//! this pool goes through `take`, so a connection parked here is never one
//! the pool itself waits for.
//!
//! Safety of the shortcut: a connection goes back on the stack only after
//! its statement completed normally. A statement that failed, or a call
//! that was cancelled mid-statement (the future dropped), drops the
//! connection the ordinary way, so the pool's release test flushes or closes
//! it exactly as before (and the pool has room to open another).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyPool};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// The hot path's pool never has more connections than this (every one of
/// them may be parked).
const MAX_HOT_CONNECTIONS: usize = 16;

/// A parked connection and the circuit's change count when it was parked.
type Parked = (PoolConnection<Any>, u64);

/// How long a caller waiting for a connection to be handed over goes before
/// it looks again whether the pool has room: a connection dropped after a
/// failed statement frees a place in the pool without handing anything over.
const RECHECK_ROOM: Duration = Duration::from_millis(20);

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
pub(in crate::store::sql) fn session_url(url: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{SESSION_SETTINGS}")
}

/// How many of the store's connections the hot path's pool gets: a third
/// (at least one, at most [`MAX_HOT_CONNECTIONS`]); the other pool keeps the rest.
pub(in crate::store::sql) fn pool_share(max_connections: u32) -> u32 {
    (max_connections / 3).clamp(1, MAX_HOT_CONNECTIONS as u32)
}

#[derive(Debug)]
pub(in crate::store::sql) struct HotConnections {
    /// The hot path's own pool (on SQLite, whose hot path is the writer
    /// lane, the writer pool: never used by it).
    pool: AnyPool,
    stack: Mutex<Stack>,
}

/// Connections parked, and callers waiting for one (first come, first
/// served). Never both: a connection is parked only when nobody waits.
#[derive(Debug, Default)]
struct Stack {
    parked: Vec<Parked>,
    waiting: VecDeque<oneshot::Sender<Parked>>,
}

impl Stack {
    /// The most recently parked connection, else a place in the queue.
    fn pop_or_queue(&mut self) -> Result<Parked, oneshot::Receiver<Parked>> {
        self.parked.pop().ok_or_else(|| {
            let (sender, receiver) = oneshot::channel();
            self.waiting.push_back(sender);
            receiver
        })
    }
}

/// How a queued caller's wait ended.
enum Turn {
    HandedOver(Parked),
    Opened(PoolConnection<Any>),
}

impl HotConnections {
    pub(in crate::store::sql) fn new(pool: AnyPool) -> Self {
        Self {
            pool,
            stack: Mutex::default(),
        }
    }

    pub(in crate::store::sql) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The most recently parked connection; else a new one from the pool
    /// while it has room, or the next one handed over, whichever comes
    /// first; within the pool's acquire timeout (then `PoolTimedOut`, as the
    /// pool would answer). One parked before the circuit last changed
    /// (`circuit_changes`) may have died in the outage: it is closed, not
    /// reused.
    pub(in crate::store::sql) async fn take(
        &self,
        circuit_changes: u64,
    ) -> Result<PoolConnection<Any>, sqlx::Error> {
        let deadline = Instant::now() + self.pool.options().get_acquire_timeout();
        loop {
            let next = self.lock().pop_or_queue();
            let (conn, parked_at) = match next {
                Ok(parked) => parked,
                Err(mut handed) => match self.wait_for_turn(&mut handed, deadline).await? {
                    Turn::HandedOver(parked) => parked,
                    Turn::Opened(conn) => return Ok(conn),
                },
            };
            if parked_at == circuit_changes && !self.pool.is_closed() {
                return Ok(conn);
            }
            drop(conn.detach());
        }
    }

    /// A queued caller's wait: a connection handed over, or a new one from
    /// the pool once it has room, whichever comes first.
    async fn wait_for_turn(
        &self,
        handed: &mut oneshot::Receiver<Parked>,
        deadline: Instant,
    ) -> Result<Turn, sqlx::Error> {
        let closed = |_| sqlx::Error::PoolClosed;
        loop {
            if self.pool.is_closed() {
                return Err(sqlx::Error::PoolClosed);
            }
            let now = Instant::now();
            if now >= deadline {
                self.give_back(handed);
                return Err(sqlx::Error::PoolTimedOut);
            }
            if self.pool_has_room() {
                // Another caller may take the room first, and nothing is
                // ever given back to the pool, so the acquire alone could
                // wait for nothing (an unfinished connect is dropped, and
                // its place freed).
                tokio::select! {
                    opened = self.pool.acquire() => {
                        self.give_back(handed);
                        return opened.map(Turn::Opened);
                    }
                    parked = &mut *handed => return parked.map(Turn::HandedOver).map_err(closed),
                }
            }
            let wait = RECHECK_ROOM.min(deadline - now);
            if let Ok(parked) = tokio::time::timeout(wait, &mut *handed).await {
                return parked.map(Turn::HandedOver).map_err(closed);
            }
        }
    }

    /// A waiter that stops waiting: a connection handed over meanwhile goes
    /// to the next.
    fn give_back(&self, handed: &mut oneshot::Receiver<Parked>) {
        handed.close();
        if let Ok((conn, parked_at)) = handed.try_recv() {
            self.put(conn, parked_at);
        }
    }

    /// Opens connections until `count` are parked (at most the pool's
    /// size), so that the calls that follow find them ready.
    pub(in crate::store::sql) async fn open(
        &self,
        count: usize,
        circuit_changes: u64,
    ) -> Result<(), sqlx::Error> {
        let count = count.min(self.pool.options().get_max_connections() as usize);
        let mut opened = Vec::with_capacity(count);
        while opened.len() < count {
            opened.push(self.take(circuit_changes).await?);
        }
        for conn in opened {
            self.put(conn, circuit_changes);
        }
        Ok(())
    }

    /// Hands a connection whose statement completed normally to the caller
    /// that has waited longest, else parks it for the next `take`.
    pub(in crate::store::sql) fn put(&self, conn: PoolConnection<Any>, circuit_changes: u64) {
        if self.pool.is_closed() {
            return; // dropped: the pool's release path takes it
        }
        let mut parked = (conn, circuit_changes);
        {
            let mut stack = self.lock();
            loop {
                match stack.waiting.pop_front() {
                    // A waiter that gave up hands it back.
                    Some(waiter) => match waiter.send(parked) {
                        Ok(()) => return,
                        Err(back) => parked = back,
                    },
                    None => {
                        stack.parked.push(parked);
                        break;
                    }
                }
            }
        }
        // A close that raced with the push must not wait for it forever.
        if self.pool.is_closed() {
            self.drain();
        }
    }

    /// Whether the pool can hand out a connection without waiting for one
    /// to come back: an idle one, or room to open another.
    fn pool_has_room(&self) -> bool {
        let pool = &self.pool;
        pool.num_idle() > 0 || pool.size() < pool.options().get_max_connections()
    }

    /// Gives every parked connection back and closes the pool.
    pub(in crate::store::sql) async fn close(&self) {
        self.drain();
        self.pool.close().await;
    }

    /// Gives every parked connection back (the pool's `close` waits for
    /// them) and tells every waiter the pool is closed.
    fn drain(&self) {
        let stack = std::mem::take(&mut *self.lock());
        drop(stack);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Stack> {
        // A panic while holding the lock left a valid stack behind.
        self.stack.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for HotConnections {
    fn drop(&mut self) {
        // Giving a connection back to the pool spawns a task, which panics
        // outside a runtime (a store dropped after its runtime ended): then
        // just close the sockets.
        if tokio::runtime::Handle::try_current().is_err() {
            for (conn, _) in std::mem::take(&mut self.lock().parked) {
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
