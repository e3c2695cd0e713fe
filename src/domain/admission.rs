//! Admission: whether an endpoint's or a queue's todos may be claimed now
//! (`docs/queue.md`, "Admission"). The claim's SQL statement enforces the
//! limits (`store/sql/statements.rs`, `admitted`); this is the same rule in
//! words, for explaining a refused claim and for the pages that show a
//! queue as held. A change to one is a change to both; the conformance
//! suite checks that they agree.

use std::time::Duration;

use serde::Serialize;

use super::{Invalid, Timestamp};

/// The limits set on an endpoint (`queue` = None) or one of its queues.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub paused: bool,
    pub max_in_flight: Option<i64>,
    /// The window's length, when a window budget is set.
    #[serde(skip)]
    pub window: Option<Duration>,
    pub max_claims_per_window: Option<i64>,
}

impl Limits {
    /// Checks a limit set as given: counts are not negative, and a window
    /// budget has both its length and its count. Errors name the field.
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.max_in_flight.is_some_and(|n| n < 0) {
            return Err(Invalid::new(
                "max_in_flight",
                "must be 0 or more (0 pauses)",
            ));
        }
        if self.max_claims_per_window.is_some_and(|n| n < 0) {
            return Err(Invalid::new(
                "max_claims_per_window",
                "must be 0 or more (0 pauses)",
            ));
        }
        match (self.window, self.max_claims_per_window) {
            (Some(_), None) => Err(Invalid::new(
                "max_claims_per_window",
                "a window needs a count of claims it allows",
            )),
            (None, Some(_)) => Err(Invalid::new(
                "window",
                "a count of claims per window needs the window's length (e.g. 1h)",
            )),
            (Some(window), Some(_)) if window.as_millis() < 1_000 => {
                Err(Invalid::new("window", "must be at least 1s"))
            }
            _ => Ok(()),
        }
    }

    /// Whether nothing is limited (the row may as well not exist).
    pub fn is_open(&self) -> bool {
        *self == Self::default()
    }
}

/// What a level has used of its limits now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Live claims (the level's todos in state `claimed`).
    pub in_flight: i64,
    /// When the current window began (its first claim), if one has.
    pub window_started_at: Option<Timestamp>,
    /// Claims charged to that window.
    pub window_claims: i64,
}

/// Why claims are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldReason {
    Paused,
    InFlightLimit,
    WindowBudget,
}

impl HeldReason {
    pub const ALL: [Self; 3] = [Self::Paused, Self::InFlightLimit, Self::WindowBudget];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Paused => "paused",
            Self::InFlightLimit => "in_flight_limit",
            Self::WindowBudget => "window_budget",
        }
    }
}

/// A level's claims held: why, and when they reopen by themselves (a
/// window's end; a pause or an in-flight limit has no time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub reason: HeldReason,
    pub until: Option<Timestamp>,
}

/// Whether `limits` hold claims now, given `usage`. The first reason in the
/// order the claim statement checks them: paused (or a limit of 0), the
/// in-flight limit, the window's budget.
pub fn held(limits: &Limits, usage: &Usage, now: Timestamp) -> Option<Held> {
    let forever = |reason| {
        Some(Held {
            reason,
            until: None,
        })
    };
    if limits.paused {
        return forever(HeldReason::Paused);
    }
    if let Some(max) = limits.max_in_flight {
        if max == 0 {
            return forever(HeldReason::Paused);
        }
        if usage.in_flight >= max {
            return forever(HeldReason::InFlightLimit);
        }
    }
    if let (Some(window), Some(max)) = (limits.window, limits.max_claims_per_window) {
        if max == 0 {
            return forever(HeldReason::Paused);
        }
        let ends = usage
            .window_started_at
            .map(|start| start.saturating_add(window));
        if let Some(ends) = ends.filter(|ends| *ends > now)
            && usage.window_claims >= max
        {
            return Some(Held {
                reason: HeldReason::WindowBudget,
                until: Some(ends),
            });
        }
    }
    None
}

/// A window's budget is kept in `shards` rows that claims charge one at a
/// time (PostgreSQL: concurrent claims charge different rows instead of
/// waiting for each other's commits on one). Shard `k` may take this many
/// of the window's `budget` claims; the shares add up to the budget, so the
/// budget holds while every shard stays within its share. The claim
/// statements compute the same share in SQL (`statements::shard_share`).
pub fn shard_share(budget: i64, shards: i64, k: i64) -> i64 {
    let shards = shards.max(1);
    budget / shards + i64::from(k < budget % shards)
}

/// `claims` already charged to a window, spread over its `shards` so that
/// each holds at most its share, the first shards filled first: how a
/// limit change rewrites the count without losing it or lending a shard
/// room the budget does not have. Claims beyond the budget are dropped
/// (every shard is full, which already holds the window).
pub fn spread_window_claims(claims: i64, budget: i64, shards: i64) -> Vec<i64> {
    let mut left = claims.max(0);
    (0..shards.max(1))
        .map(|k| {
            let take = left.min(shard_share(budget, shards, k));
            left -= take;
            take
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_millis(secs * 1000)
    }

    #[test]
    fn open_limits_hold_nothing() {
        assert_eq!(held(&Limits::default(), &Usage::default(), at(0)), None);
        assert!(Limits::default().is_open());
    }

    #[test]
    fn a_pause_or_a_limit_of_zero_holds_without_an_end() {
        let paused = Limits {
            paused: true,
            ..Limits::default()
        };
        let zero = Limits {
            max_in_flight: Some(0),
            ..Limits::default()
        };
        let zero_budget = Limits {
            window: Some(Duration::from_secs(60)),
            max_claims_per_window: Some(0),
            ..Limits::default()
        };
        for limits in [paused, zero, zero_budget] {
            let verdict = held(&limits, &Usage::default(), at(0)).unwrap();
            assert_eq!(verdict.reason, HeldReason::Paused);
            assert_eq!(verdict.until, None);
        }
    }

    #[test]
    fn the_in_flight_limit_holds_at_the_limit_not_below() {
        let limits = Limits {
            max_in_flight: Some(2),
            ..Limits::default()
        };
        let usage = |in_flight| Usage {
            in_flight,
            ..Usage::default()
        };
        assert_eq!(held(&limits, &usage(1), at(0)), None);
        assert_eq!(
            held(&limits, &usage(2), at(0)).unwrap().reason,
            HeldReason::InFlightLimit
        );
    }

    #[test]
    fn a_spent_window_holds_until_it_ends_and_then_reopens() {
        let limits = Limits {
            window: Some(Duration::from_secs(3600)),
            max_claims_per_window: Some(3),
            ..Limits::default()
        };
        let usage = Usage {
            in_flight: 0,
            window_started_at: Some(at(100)),
            window_claims: 3,
        };
        let verdict = held(&limits, &usage, at(200)).unwrap();
        assert_eq!(verdict.reason, HeldReason::WindowBudget);
        assert_eq!(verdict.until, Some(at(3700)));
        assert_eq!(held(&limits, &usage, at(3700)), None);
        let not_spent = Usage {
            window_claims: 2,
            ..usage
        };
        assert_eq!(held(&limits, &not_spent, at(200)), None);
    }

    #[test]
    fn validation_names_the_field() {
        let half_window = Limits {
            window: Some(Duration::from_secs(60)),
            ..Limits::default()
        };
        assert_eq!(
            half_window.validate().unwrap_err().field,
            "max_claims_per_window"
        );
        let half_count = Limits {
            max_claims_per_window: Some(5),
            ..Limits::default()
        };
        assert_eq!(half_count.validate().unwrap_err().field, "window");
        let negative = Limits {
            max_in_flight: Some(-1),
            ..Limits::default()
        };
        assert_eq!(negative.validate().unwrap_err().field, "max_in_flight");
    }

    #[test]
    fn the_shards_shares_add_up_to_the_budget() {
        for budget in [0, 1, 5, 15, 16, 17, 100, 10_000_000] {
            for shards in [1, 4, 16] {
                let total: i64 = (0..shards).map(|k| shard_share(budget, shards, k)).sum();
                assert_eq!(total, budget, "budget {budget} over {shards} shards");
            }
        }
        assert_eq!(shard_share(5, 16, 4), 1);
        assert_eq!(shard_share(5, 16, 5), 0);
    }

    #[test]
    fn spread_claims_fill_the_first_shards_and_keep_the_count() {
        assert_eq!(spread_window_claims(7, 8, 4), vec![2, 2, 2, 1]);
        assert_eq!(spread_window_claims(0, 8, 4), vec![0, 0, 0, 0]);
        // More claims than the budget: every shard full, none over.
        assert_eq!(spread_window_claims(20, 8, 4), vec![2, 2, 2, 2]);
        assert_eq!(spread_window_claims(3, 10, 1), vec![3]);
    }
}
