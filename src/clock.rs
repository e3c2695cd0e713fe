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
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::at_fixed_start();
        let t0 = clock.now();
        assert_eq!(clock.now(), t0);
        clock.advance(Duration::from_secs(90));
        assert_eq!(clock.now().as_millis() - t0.as_millis(), 90_000);
        assert_eq!(t0.to_rfc3339(), "2026-01-05T09:00:00.000Z");
    }
}
