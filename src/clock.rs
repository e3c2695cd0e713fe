//! The one source of "now". Every time rule reads it through [`Clock`]; tests
//! inject a [`ManualClock`] and advance it instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::domain::Timestamp;

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Timestamp;
}

pub type SharedClock = Arc<dyn Clock>;

/// Wall-clock time of this host.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Timestamp::from_millis(millis)
    }
}

/// The system clock corrected by a measured offset to a reference clock —
/// with PostgreSQL, the database server's — so that every instance of a
/// cluster agrees on "now" within the measurement's error (`docs/cluster.md`, "The
/// clock"): two instances that disagreed about a shift start could
/// otherwise each decide it.
#[derive(Debug, Default)]
pub struct OffsetClock {
    offset_ms: AtomicI64,
}

impl OffsetClock {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Reference minus system time, in milliseconds.
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::Relaxed);
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(SystemClock.now().as_millis() + self.offset_ms())
    }
}

/// One reading of a reference clock, taken between two readings of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Ours just before the query was sent, and just after it answered.
    pub sent_ms: i64,
    pub answered_ms: i64,
    /// The reference's reading.
    pub reference_ms: i64,
}

impl ClockSample {
    pub fn round_trip_ms(&self) -> i64 {
        self.answered_ms - self.sent_ms
    }

    /// Reference minus ours, assuming the reading was taken half-way.
    pub fn offset_ms(&self) -> i64 {
        self.reference_ms - (self.sent_ms + self.answered_ms) / 2
    }
}

/// The offset of the sample with the shortest round trip: its half-way
/// guess is the tightest (the error is at most half its round trip).
pub fn best_offset(samples: &[ClockSample]) -> Option<(i64, i64)> {
    samples
        .iter()
        .min_by_key(|s| s.round_trip_ms())
        .map(|s| (s.offset_ms(), s.round_trip_ms()))
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock {
    millis: AtomicI64,
}

impl ManualClock {
    pub fn new(start: Timestamp) -> Arc<Self> {
        Arc::new(Self {
            millis: AtomicI64::new(start.as_millis()),
        })
    }

    /// Starts at a fixed, readable instant: 2026-01-05T09:00:00Z (a Monday).
    pub fn at_fixed_start() -> Arc<Self> {
        Self::new(Timestamp::from_millis(1_767_603_600_000))
    }

    pub fn advance(&self, by: Duration) {
        self.millis
            .fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }

    pub fn set(&self, to: Timestamp) {
        self.millis.store(to.as_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.millis.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_comes_from_the_tightest_sample() {
        let samples = [
            ClockSample {
                sent_ms: 1_000,
                answered_ms: 1_040,
                reference_ms: 1_520,
            },
            ClockSample {
                sent_ms: 2_000,
                answered_ms: 2_004,
                reference_ms: 2_502,
            },
        ];
        assert_eq!(best_offset(&samples), Some((500, 4)));
        assert_eq!(best_offset(&[]), None);
    }

    #[test]
    fn an_offset_clock_adds_its_offset() {
        let clock = OffsetClock::new();
        let before = SystemClock.now().as_millis();
        clock.set_offset_ms(60_000);
        let shifted = clock.now().as_millis();
        assert!(shifted >= before + 60_000 && shifted < before + 61_000);
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::at_fixed_start();
        let t0 = clock.now();
        assert_eq!(clock.now(), t0);
        clock.advance(Duration::from_secs(90));
        assert_eq!(clock.now().as_millis() - t0.as_millis(), 90_000);
        assert_eq!(t0.to_rfc3339(), "2026-01-05T09:00:00.000Z");
    }
}
