//! The database circuit: remembers that PostgreSQL is unreachable, so that a
//! request answers `unavailable` at once instead of waiting for a pool
//! connection that cannot come (`--db-acquire-timeout` each time).
//!
//! One probe task per store watches the database over a connection of its
//! own (never the pool: a pool exhausted by load is not a database that is
//! down, and must not open the circuit). While the circuit is closed it runs
//! `SELECT 1` every [`HEALTHY_PERIOD`]; a refused or lost connection opens
//! the circuit, and so do two probes in a row without an answer within the
//! acquire timeout (one slow answer on a loaded host is not an outage);
//! while open it reconnects every [`DOWN_PERIOD`], and the first success
//! closes it again. Recovery needs no restart and no request.
//!
//! The circuit is about reachability only: a reconnect that the server
//! refuses for want of a free connection slot (SQLSTATE 53300, a busy
//! `max_connections`) found the database up, and neither opens the circuit
//! nor keeps it open (issue 48).
//!
//! SQLite has no circuit: its database is a local file.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sqlx::{AnyConnection, AnyPool, Connection};
use tokio::sync::watch;

use super::error::{StoreError, is_out_of_connection_slots, is_unavailable};

/// The probe's period while the database answers.
pub const HEALTHY_PERIOD: Duration = Duration::from_millis(500);
/// The probe's period while it does not.
pub const DOWN_PERIOD: Duration = Duration::from_millis(250);

/// Whether the database is known to be unreachable. Cheap to check: one
/// atomic load per store call.
#[derive(Debug, Default)]
pub struct Circuit {
    open: AtomicBool,
    /// Counts the circuit's changes: a connection kept aside from the pool
    /// (`sql::hot`) before the latest one may be dead and is not reused.
    changes: AtomicU64,
}

impl Circuit {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// `Unavailable` at once while the circuit is open.
    pub fn check(&self) -> Result<(), StoreError> {
        if self.open.load(Ordering::Acquire) {
            return Err(StoreError::unavailable(
                "the database is unreachable (the circuit is open; a probe reconnects)",
            ));
        }
        Ok(())
    }

    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// How many times the circuit has opened or closed.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Opens or closes the circuit. On either change the pools' idle
    /// connections are closed: after an outage they are dead (each would
    /// fail one request), and whatever was returned while the circuit opened
    /// may be too.
    fn set_open(&self, open: bool, pools: &[AnyPool]) {
        if self.open.load(Ordering::Acquire) == open {
            return;
        }
        let closed: usize = pools.iter().map(close_idle_connections).sum();
        let was = self.open.swap(open, Ordering::AcqRel);
        if was != open {
            self.changes.fetch_add(1, Ordering::AcqRel);
            tracing::debug!(closed, "idle database connections closed");
            if open {
                tracing::warn!(
                    "database unreachable: answering unavailable at once until it is back"
                );
            } else {
                tracing::info!("database reachable again");
            }
        }
    }

    /// Probes `url` until `stop` turns true (or its sender is dropped);
    /// `pools` are the store's.
    pub fn spawn_probe(
        self: &Arc<Self>,
        pools: Vec<AnyPool>,
        url: String,
        timeout: Duration,
        mut stop: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let circuit = self.clone();
        tokio::spawn(async move {
            let mut connection: Option<AnyConnection> = None;
            let mut slow_in_a_row = 0;
            loop {
                let outcome = probe(&mut connection, &url, timeout).await;
                slow_in_a_row = if outcome == Probe::Slow {
                    slow_in_a_row + 1
                } else {
                    0
                };
                // A refused or lost connection is an outage at once; a probe
                // that is only slow (a loaded host, a slow database) must be
                // slow twice in a row, so that load alone does not turn every
                // request into a 503.
                let down = match outcome {
                    Probe::Healthy => false,
                    Probe::Down => true,
                    Probe::Slow => slow_in_a_row >= SLOW_PROBES_TO_OPEN || circuit.is_open(),
                };
                circuit.set_open(down, &pools);
                let period = if down { DOWN_PERIOD } else { HEALTHY_PERIOD };
                tokio::select! {
                    _ = tokio::time::sleep(period) => {}
                    changed = stop.changed() => {
                        if changed.is_err() || *stop.borrow() {
                            break;
                        }
                    }
                }
            }
            if let Some(connection) = connection {
                let _ = connection.close().await;
            }
        })
    }
}

/// Takes every idle connection out of `pool` and closes it; returns how many.
fn close_idle_connections(pool: &AnyPool) -> usize {
    let mut idle = Vec::new();
    while let Some(mut connection) = pool.try_acquire() {
        connection.close_on_drop();
        idle.push(connection);
    }
    idle.len()
}

/// Slow probes in a row that open the circuit.
const SLOW_PROBES_TO_OPEN: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Healthy,
    /// The database refused or lost the connection (`is_unavailable`).
    Down,
    /// No answer within the timeout.
    Slow,
}

/// One probe. When the probe's own connection fails, a fresh one is tried
/// at once: a database restarted between two probes leaves that connection
/// dead although the database is back, which must not open the circuit.
async fn probe(connection: &mut Option<AnyConnection>, url: &str, timeout: Duration) -> Probe {
    let reused = connection.is_some();
    match probe_once(connection, url, timeout).await {
        Probe::Down if reused => probe_once(connection, url, timeout).await,
        outcome => outcome,
    }
}

/// One `SELECT 1` within `timeout`, connecting first if needed; a
/// connection that failed is dropped so that the next probe reconnects.
async fn probe_once(connection: &mut Option<AnyConnection>, url: &str, timeout: Duration) -> Probe {
    let attempt = async {
        if connection.is_none() {
            *connection = Some(AnyConnection::connect(url).await?);
        }
        let Some(conn) = connection.as_mut() else {
            return Ok(());
        };
        sqlx::query("SELECT 1").execute(conn).await.map(|_| ())
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(())) => Probe::Healthy,
        Ok(Err(e)) => {
            *connection = None;
            if is_out_of_connection_slots(&e) {
                // The database answered: it is up, only every slot is
                // taken (`max_connections`, a role's limit). The pool's
                // connections still work; a call that needs a new one
                // answers `unavailable` by itself. Not an outage.
                tracing::debug!(error = %e, "database probe found no free connection slot");
                Probe::Healthy
            } else if is_unavailable(&e) {
                tracing::debug!(error = %e, "database probe failed");
                Probe::Down
            } else {
                // Not an outage (the circuit is about reachability only).
                tracing::warn!(error = %e, "database probe answered an unexpected error");
                Probe::Healthy
            }
        }
        Err(_) => {
            tracing::debug!(?timeout, "database probe timed out");
            *connection = None;
            Probe::Slow
        }
    }
}
