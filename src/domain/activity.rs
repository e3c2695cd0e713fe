//! A queue's activity over time (`docs/board.md`, "Queues"): how many todos
//! were created, completed, failed and dead-lettered per interval, and how
//! long they waited to be claimed and to be done, as percentiles.
//!
//! Activity is kept as buckets of three lengths (a minute, a quarter hour,
//! an hour), one per chart range, so that a chart reads at most 168 buckets
//! per queue whatever the history holds. Latencies are kept as histograms
//! with logarithmic bounds (each √2 times the last), which merge by addition
//! and answer a percentile within a factor of √2 — enough to tell seconds
//! from minutes from hours, which is what an operator reads off the chart.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::Timestamp;

/// The ranges a chart shows, each with the bucket length it is drawn in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActivityRange {
    /// The last hour, per minute.
    Hour,
    /// The last day, per quarter hour.
    Day,
    /// The last week, per hour.
    Week,
}

impl ActivityRange {
    pub const ALL: [Self; 3] = [Self::Hour, Self::Day, Self::Week];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hour => "hour",
            Self::Day => "day",
            Self::Week => "week",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The length of one bucket, in seconds.
    pub fn span_seconds(self) -> i64 {
        match self {
            Self::Hour => 60,
            Self::Day => 900,
            Self::Week => 3_600,
        }
    }

    /// How many buckets the range shows (the current one included).
    pub fn buckets(self) -> i64 {
        match self {
            Self::Hour => 60,
            Self::Day => 96,
            Self::Week => 168,
        }
    }

    /// How long buckets of this length are kept: the range and a margin.
    pub fn keep_millis(self) -> i64 {
        (self.buckets() + self.buckets() / 4) * self.span_seconds() * 1_000
    }

    /// The start of the bucket `at` falls in.
    pub fn bucket_of(self, at: Timestamp) -> Timestamp {
        let span = self.span_seconds() * 1_000;
        Timestamp::from_millis(at.as_millis().div_euclid(span) * span)
    }

    /// The first bucket the range shows at `now`.
    pub fn first_bucket(self, now: Timestamp) -> Timestamp {
        let span = self.span_seconds() * 1_000;
        Timestamp::from_millis(self.bucket_of(now).as_millis() - (self.buckets() - 1) * span)
    }
}

/// Number of histogram bins: bin `i` holds latencies up to `√2^(i+1)` ms,
/// so the last (63) reaches 49 days; anything longer lands there too.
pub const LATENCY_BINS: usize = 64;

/// A latency histogram (milliseconds) with √2-spaced bins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    bins: BTreeMap<u8, u64>,
}

impl LatencyHistogram {
    /// The bin a latency of `millis` falls in: the first whose upper bound
    /// (`√2^(i+1)`) is not below it.
    pub fn bin_of(millis: i64) -> u8 {
        let mut bin = 0usize;
        while bin + 1 < LATENCY_BINS && (Self::upper_bound(bin as u8) as i64) < millis {
            bin += 1;
        }
        bin as u8
    }

    /// The largest latency (ms) bin `i` holds.
    pub fn upper_bound(bin: u8) -> f64 {
        std::f64::consts::SQRT_2.powi(i32::from(bin) + 1)
    }

    pub fn record(&mut self, millis: i64) {
        *self.bins.entry(Self::bin_of(millis.max(0))).or_default() += 1;
    }

    pub fn merge(&mut self, other: &Self) {
        for (bin, n) in &other.bins {
            *self.bins.entry(*bin).or_default() += n;
        }
    }

    pub fn count(&self) -> u64 {
        self.bins.values().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.bins.is_empty()
    }

    /// The latency (ms) below which a share `q` (0–1) of the samples lie:
    /// the upper bound of the bin that holds the sample of that rank.
    /// `None` without samples.
    pub fn percentile(&self, q: f64) -> Option<i64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bin, n) in &self.bins {
            seen += n;
            if seen >= rank {
                return Some(Self::upper_bound(*bin).round() as i64);
            }
        }
        None
    }

    /// The stored form: `bin:count` pairs, space-separated, bins ascending.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        for (bin, n) in &self.bins {
            if !out.is_empty() {
                out.push(' ');
            }
            let _ = write!(out, "{bin}:{n}");
        }
        out
    }

    /// Reads [`Self::encode`]'s form; a malformed pair is skipped (the
    /// column is written only by [`Self::encode`]).
    pub fn decode(s: &str) -> Self {
        let mut h = Self::default();
        for pair in s.split_whitespace() {
            let Some((bin, n)) = pair.split_once(':') else {
                continue;
            };
            if let (Ok(bin), Ok(n)) = (bin.parse::<u8>(), n.parse::<u64>())
                && usize::from(bin) < LATENCY_BINS
            {
                *h.bins.entry(bin).or_default() += n;
            }
        }
        h
    }
}

/// What happened in a queue during one bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    /// Todos created.
    pub created: u64,
    /// Todos completed.
    pub completed: u64,
    /// Attempts that failed: `fail`, or a lease that lapsed (whether a
    /// retry followed or not).
    pub failed: u64,
    /// Todos that became dead letters.
    pub dead_lettered: u64,
    /// From ready (created, or due when delayed) to the first claim.
    pub claim_latency: LatencyHistogram,
    /// From ready to done.
    pub complete_latency: LatencyHistogram,
}

impl Activity {
    pub fn merge(&mut self, other: &Self) {
        self.created += other.created;
        self.completed += other.completed;
        self.failed += other.failed;
        self.dead_lettered += other.dead_lettered;
        self.claim_latency.merge(&other.claim_latency);
        self.complete_latency.merge(&other.complete_latency);
    }

    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// A latency as an operator reads it: `850 ms`, `4.2 s`, `3 min`, `2.5 h`,
/// `1.5 d` (the board's charts, `switchboard endpoint activity`).
pub fn latency_label(ms: i64) -> String {
    let ms = ms.max(0) as f64;
    let (value, unit) = if ms < 1_000.0 {
        return format!("{} ms", ms.round());
    } else if ms < 60_000.0 {
        (ms / 1_000.0, "s")
    } else if ms < 3_600_000.0 {
        (ms / 60_000.0, "min")
    } else if ms < 86_400_000.0 {
        (ms / 3_600_000.0, "h")
    } else {
        (ms / 86_400_000.0, "d")
    };
    if value < 10.0 && value.fract() >= 0.05 {
        format!("{value:.1} {unit}")
    } else {
        format!("{} {unit}", value.round())
    }
}

/// When a todo became ready to be claimed: its creation, or its `run_at`
/// when it was delayed past it.
pub fn ready_at(created_at: Timestamp, run_at: Option<Timestamp>) -> Timestamp {
    run_at.map_or(created_at, |r| r.max(created_at))
}

/// A range's buckets in order, oldest first, with the activity of each
/// (empty where nothing happened): `buckets` holds any number of rows per
/// bucket start (one per queue), which are summed.
pub fn series(
    range: ActivityRange,
    now: Timestamp,
    buckets: impl IntoIterator<Item = (Timestamp, Activity)>,
) -> Vec<(Timestamp, Activity)> {
    let first = range.first_bucket(now);
    let span = range.span_seconds() * 1_000;
    let mut out: Vec<(Timestamp, Activity)> = (0..range.buckets())
        .map(|i| {
            (
                Timestamp::from_millis(first.as_millis() + i * span),
                Activity::default(),
            )
        })
        .collect();
    for (at, activity) in buckets {
        let offset = at.as_millis() - first.as_millis();
        if offset < 0 || offset % span != 0 {
            continue;
        }
        if let Some((_, slot)) = out.get_mut((offset / span) as usize) {
            slot.merge(&activity);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_falls_in_the_first_bin_whose_bound_holds_it() {
        assert_eq!(LatencyHistogram::bin_of(0), 0);
        assert_eq!(LatencyHistogram::bin_of(1), 0);
        assert_eq!(LatencyHistogram::bin_of(2), 1);
        assert_eq!(LatencyHistogram::bin_of(3), 3);
        // An hour is 3 600 000 ms: √2^44 ≈ 4.19 M, √2^43 ≈ 2.97 M.
        assert_eq!(LatencyHistogram::bin_of(3_600_000), 43);
        assert_eq!(LatencyHistogram::bin_of(i64::MAX), (LATENCY_BINS - 1) as u8);
    }

    #[test]
    fn percentiles_are_within_a_factor_of_root_two() {
        let mut h = LatencyHistogram::default();
        for ms in 1..=1_000 {
            h.record(ms * 10);
        }
        for (q, exact) in [(0.5, 5_000.0), (0.95, 9_500.0), (0.99, 9_900.0)] {
            let got = h.percentile(q).unwrap() as f64;
            assert!(
                got >= exact && got <= exact * std::f64::consts::SQRT_2 + 1.0,
                "p{q}: {got} for {exact}"
            );
        }
        assert_eq!(LatencyHistogram::default().percentile(0.5), None);
    }

    #[test]
    fn histograms_merge_by_addition_and_survive_their_stored_form() {
        let mut a = LatencyHistogram::default();
        let mut b = LatencyHistogram::default();
        a.record(5);
        a.record(5_000);
        b.record(5);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        let back = LatencyHistogram::decode(&a.encode());
        assert_eq!(back, a);
        assert_eq!(LatencyHistogram::decode("x 3:q 99:1 4:2").count(), 2);
    }

    #[test]
    fn a_series_has_every_bucket_of_its_range_and_sums_the_queues() {
        let now = Timestamp::from_millis(10 * 3_600_000 + 30 * 60_000 + 5_000);
        let first = ActivityRange::Hour.first_bucket(now);
        assert_eq!(first.as_millis(), 9 * 3_600_000 + 31 * 60_000);
        let one = |created| Activity {
            created,
            ..Activity::default()
        };
        let last = ActivityRange::Hour.bucket_of(now);
        let s = series(
            ActivityRange::Hour,
            now,
            [
                (last, one(2)),
                (last, one(3)),
                (first, one(1)),
                // Older than the range, and not on a bucket boundary.
                (Timestamp::from_millis(first.as_millis() - 60_000), one(9)),
                (Timestamp::from_millis(first.as_millis() + 1), one(9)),
            ],
        );
        assert_eq!(s.len(), 60);
        assert_eq!(s[0].1.created, 1);
        assert_eq!(s[59].0, last);
        assert_eq!(s[59].1.created, 5);
        assert_eq!(s.iter().map(|(_, a)| a.created).sum::<u64>(), 6);
    }

    #[test]
    fn latencies_read_in_the_unit_an_operator_thinks_in() {
        assert_eq!(latency_label(850), "850 ms");
        assert_eq!(latency_label(4_200), "4.2 s");
        assert_eq!(latency_label(45_000), "45 s");
        assert_eq!(latency_label(180_000), "3 min");
        assert_eq!(latency_label(9_000_000), "2.5 h");
        assert_eq!(latency_label(86_400_000 * 3), "3 d");
    }

    #[test]
    fn a_delayed_todo_is_ready_at_its_run_at() {
        let t = Timestamp::from_millis;
        assert_eq!(ready_at(t(10), None), t(10));
        assert_eq!(ready_at(t(10), Some(t(50))), t(50));
        assert_eq!(ready_at(t(10), Some(t(5))), t(10));
    }
}
