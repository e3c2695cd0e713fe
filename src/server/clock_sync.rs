//! Keeps this instance's clock aligned to the PostgreSQL server's (`docs/cluster.md`,
//! "The clock"): measured at start and every minute, exposed as
//! `switchboard_clock_offset_seconds`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::clock::{OffsetClock, best_offset};
use crate::metrics::Metrics;
use crate::store::SqlStore;

/// How often the offset is measured again.
pub(super) const PERIOD: Duration = Duration::from_secs(60);

/// An offset change worth a log line.
const NOTABLE_CHANGE_MS: i64 = 50;

/// Measures once and applies the result; `false` when the database could
/// not be read (the previous offset stays).
pub(super) async fn align(
    store: &SqlStore,
    clock: &OffsetClock,
    metrics: Option<&Metrics>,
) -> bool {
    let samples = match store.sample_database_clock().await {
        Ok(samples) => samples,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the database clock; keeping the last offset");
            return false;
        }
    };
    let Some((offset, round_trip)) = best_offset(&samples) else {
        return true; // SQLite: this host's clock is the only one.
    };
    let previous = clock.offset_ms();
    clock.set_offset_ms(offset);
    if let Some(metrics) = metrics {
        metrics.set_clock_offset_ms(offset);
    }
    if (offset - previous).abs() >= NOTABLE_CHANGE_MS {
        tracing::info!(
            offset_ms = offset,
            round_trip_ms = round_trip,
            "clock aligned to the database server"
        );
    }
    true
}

pub(super) fn spawn(
    store: Arc<SqlStore>,
    clock: Arc<OffsetClock>,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => { align(&store, &clock, Some(&metrics)).await; }
                _ = stop.changed() => return,
            }
        }
    })
}
