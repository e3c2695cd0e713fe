//! The queue table vacuumed as the queue moves (PostgreSQL; issue 47, "no
//! decay").
//!
//! A claim takes the head of the pending index and turns it into a dead
//! entry, which stays in the index until a VACUUM removes it: every later
//! claim steps over all of them (marked dead after the first visit, but
//! still read, page by page) before it reaches the first live todo. So a
//! claim's cost grows with the claims made since the last vacuum, and the
//! loop slows within seconds. Autovacuum visits a database at most once per
//! `autovacuum_naptime` (default 60 s, a server-wide setting), whatever the
//! table's own thresholds (migration 0007): between its visits the claim
//! read 838 index pages at the end of a 60 s run at c = 16, where it reads 3
//! after a vacuum (`docs/performance.md`, "No decay").
//!
//! So the store vacuums `todos` itself once enough of its own claims have
//! gone by: one `VACUUM` at a time, in the background on a connection of the
//! main pool, never on a caller's path. How often is bounded by what the
//! vacuum costs: the next one waits at least [`PAUSE_FACTOR`] times as long
//! as the last one took (a vacuum reads every index of the table whole,
//! so it costs more as the history grows, and then runs less often), and
//! never before [`MIN_CLAIMS`] claims (by default). An idle queue is never vacuumed
//! here. `SKIP_LOCKED`: while autovacuum or another instance is vacuuming
//! the table, this one is skipped, not queued. `INDEX_CLEANUP ON`: left
//! to itself, VACUUM skips the indexes when few heap pages hold dead rows
//! (under 2 %, as in a long history), and the index entries are the point.
//! A role that does not own the table gets a warning from PostgreSQL and
//! nothing happens, as before.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::AnyPool;

/// Claims between two vacuums at least (`StoreOptions::queue_vacuum_claims`).
pub(in crate::store::sql) const MIN_CLAIMS: u64 = 2_000;

/// The pause after a vacuum is at least this many times its duration: a
/// vacuum takes at most about a tenth of one connection's time.
const PAUSE_FACTOR: u32 = 10;

/// The pause after a vacuum is never shorter than this.
const MIN_PAUSE: Duration = Duration::from_secs(1);

const VACUUM: &str = "VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) todos";

#[derive(Debug)]
pub(in crate::store::sql) struct QueueVacuum {
    /// Claims between two vacuums at least.
    every: u64,
    /// Claims since the last vacuum started.
    claims: AtomicU64,
    /// A vacuum is running.
    running: AtomicBool,
    /// No vacuum starts before this.
    not_before: Mutex<Instant>,
    /// How many vacuums ran (tests and benchmarks read it).
    runs: AtomicU64,
}

impl QueueVacuum {
    pub(in crate::store::sql) fn new(every: u64) -> Self {
        Self {
            every: every.max(1),
            claims: AtomicU64::new(0),
            running: AtomicBool::new(false),
            not_before: Mutex::new(Instant::now()),
            runs: AtomicU64::new(0),
        }
    }

    pub(in crate::store::sql) fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }

    /// Counts one claim from the pending index; starts a vacuum in the
    /// background when one is due.
    pub(in crate::store::sql) fn claimed(self: &std::sync::Arc<Self>, pool: &AnyPool) {
        if self.claims.fetch_add(1, Ordering::Relaxed) + 1 < self.every {
            return;
        }
        if Instant::now() < *self.lock() {
            return;
        }
        if self
            .running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        self.claims.store(0, Ordering::Relaxed);
        let (this, pool) = (self.clone(), pool.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            match sqlx::raw_sql(VACUUM).execute(&pool).await {
                Ok(_) => {
                    this.runs.fetch_add(1, Ordering::Relaxed);
                }
                // Never a caller's error: the next due claim tries again.
                Err(e) => tracing::debug!(error = %e, "vacuum of the queue table failed"),
            }
            let took = started.elapsed();
            *this.lock() = Instant::now() + (took * PAUSE_FACTOR).max(MIN_PAUSE);
            this.running.store(false, Ordering::Release);
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Instant> {
        self.not_before.lock().unwrap_or_else(|e| e.into_inner())
    }
}
