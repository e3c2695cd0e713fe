//! What the serving loop counts about its connections, for `/metrics`: how
//! many are open, and why the server closed the ones it cut short.
//!
//! It sits here, below the surfaces, because the server writes it and the
//! metrics surface reads it (the same shape as the bus's `PgBusStats`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// Why the server closed a connection before its client did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// A request head did not arrive within `--header-read-timeout`.
    HeaderTimeout,
    /// A request body did not arrive within `--body-read-timeout` (answered 408).
    BodyTimeout,
    /// Nothing happened on a kept-alive connection for `--idle-timeout`.
    IdleTimeout,
    /// An idle connection closed to make room for a new one at `--max-connections`.
    EvictedAtCap,
    /// A request in flight moved no byte either way for `--idle-timeout`
    /// (a client that stopped reading its answer; streams write keep-alives).
    Stalled,
}

impl CloseReason {
    pub const ALL: [CloseReason; 5] = [
        Self::HeaderTimeout,
        Self::BodyTimeout,
        Self::IdleTimeout,
        Self::EvictedAtCap,
        Self::Stalled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::HeaderTimeout => "header_timeout",
            Self::BodyTimeout => "body_timeout",
            Self::IdleTimeout => "idle_timeout",
            Self::EvictedAtCap => "evicted_at_cap",
            Self::Stalled => "stalled",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

/// Shared by the serving loop (writes) and the metrics registry (reads).
#[derive(Debug, Default)]
pub struct ConnectionStats {
    /// Connections open now.
    pub open: Gauge,
    /// Connections the server closed, by [`CloseReason`].
    pub closed: Family<ReasonLabels, Counter>,
    /// Times a new connection had to wait for a free slot at the cap.
    pub waited_at_cap: Counter,
}

impl ConnectionStats {
    pub fn new() -> Self {
        let stats = Self::default();
        // Every series shows from the start, at zero.
        for reason in CloseReason::ALL {
            let _ = stats.closed.get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            });
        }
        stats
    }

    pub fn count_closed(&self, reason: CloseReason) {
        self.closed
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// How many were closed for `reason` so far.
    pub fn closed_for(&self, reason: CloseReason) -> u64 {
        self.closed
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .get()
    }
}
