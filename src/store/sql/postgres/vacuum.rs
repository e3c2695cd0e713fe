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
//!
//! PostgreSQL answers a skipped vacuum with a `WARNING`, which sqlx logs at
//! `WARN` (`sqlx::postgres::notice`): under load, a line every second or so
//! in the server's log about nothing an operator can act on. The vacuum's
//! connection says errors only (`client_min_messages`) and leaves the pool
//! afterwards, so the setting never reaches a caller's statement. The one
//! warning that matters — the store's role may not vacuum the table, which
//! PostgreSQL also skips with a warning — is checked once, before the first
//! vacuum, and logged once; the store then leaves the table to autovacuum.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
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

/// Whether the store's role may vacuum `todos` (PostgreSQL 15: its owner, the
/// database's owner, or a superuser, who holds every role).
const MAY_VACUUM: &str = "SELECT pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE') \
     FROM pg_class c, pg_database d \
     WHERE c.oid = CAST('todos' AS regclass) AND d.datname = current_database()";

/// What the vacuum's connection is told to say: errors only.
const ERRORS_ONLY: &str = "SET client_min_messages = error";

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
    /// Whether the role may vacuum the table: `None` until checked.
    may_vacuum: OnceLock<bool>,
}

impl QueueVacuum {
    pub(in crate::store::sql) fn new(every: u64) -> Self {
        Self {
            every: every.max(1),
            claims: AtomicU64::new(0),
            running: AtomicBool::new(false),
            not_before: Mutex::new(Instant::now()),
            runs: AtomicU64::new(0),
            may_vacuum: OnceLock::new(),
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
        if self.may_vacuum.get() == Some(&false) {
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
            match this.vacuum(&pool).await {
                Ok(true) => {
                    this.runs.fetch_add(1, Ordering::Relaxed);
                }
                // Refused for good: none starts again.
                Ok(false) => return,
                // Never a caller's error: the next due claim tries again.
                Err(e) => tracing::debug!(error = %e, "vacuum of the queue table failed"),
            }
            let took = started.elapsed();
            *this.lock() = Instant::now() + (took * PAUSE_FACTOR).max(MIN_PAUSE);
            this.running.store(false, Ordering::Release);
        });
    }

    /// One vacuum on a connection of its own; `false` when the role may not
    /// vacuum the table at all.
    async fn vacuum(&self, pool: &AnyPool) -> Result<bool, sqlx::Error> {
        let mut conn = pool.acquire().await?;
        let may = match self.may_vacuum.get() {
            Some(&may) => may,
            None => {
                let (may,): (bool,) = sqlx::query_as(MAY_VACUUM).fetch_one(&mut *conn).await?;
                let _ = self.may_vacuum.set(may);
                if !may {
                    tracing::warn!(
                        "the store's database role does not own the todos table, so the store \
                         cannot vacuum it as the queue moves: claims slow down between \
                         autovacuum's visits (docs/storage.md, \"The store vacuums todos itself\")"
                    );
                }
                may
            }
        };
        if !may {
            return Ok(false);
        }
        // Its settings change: the connection is closed, not pooled again.
        conn.close_on_drop();
        sqlx::raw_sql(ERRORS_ONLY).execute(&mut *conn).await?;
        sqlx::raw_sql(VACUUM).execute(&mut *conn).await?;
        Ok(true)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Instant> {
        self.not_before.lock().unwrap_or_else(|e| e.into_inner())
    }
}
