//! Retry backoff after a failed attempt (`docs/queue.md`).

use std::time::Duration;

use super::Timestamp;
use super::todo::Disposition;

const BASE: Duration = Duration::from_secs(30);
const CAP: Duration = Duration::from_secs(15 * 60);

/// `backoff(n) = min(30 s · 2^(n−1), 15 min)` for the n-th attempt (n ≥ 1):
/// 30 s, 1 m, 2 m, 4 m, 8 m, 15 m, 15 m, …
pub fn retry_backoff(attempt: i64) -> Duration {
    let exponent = attempt.clamp(1, 64) - 1;
    if exponent >= 5 {
        return CAP;
    }
    (BASE * (1u32 << exponent)).min(CAP)
}

/// What a holder's `fail` leads to (`docs/queue.md`): while attempts remain
/// (`attempt < max_attempts`), a retry after [`retry_backoff`]; else a dead
/// letter, finished now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    RetryAt(Timestamp),
    DeadLetter,
}

pub fn after_failure(attempt: i64, max_attempts: i64, now: Timestamp) -> AfterFailure {
    if attempt < max_attempts {
        AfterFailure::RetryAt(now.saturating_add(retry_backoff(attempt)))
    } else {
        AfterFailure::DeadLetter
    }
}

impl AfterFailure {
    /// The todo's `next_retry_at`.
    pub fn next_retry_at(self) -> Option<Timestamp> {
        match self {
            Self::RetryAt(at) => Some(at),
            Self::DeadLetter => None,
        }
    }

    /// The todo's `completed_at`: a dead letter is finished `now`.
    pub fn completed_at(self, now: Timestamp) -> Option<Timestamp> {
        match self {
            Self::RetryAt(_) => None,
            Self::DeadLetter => Some(now),
        }
    }

    /// The failed attempt's disposition.
    pub fn disposition(self) -> Disposition {
        match self {
            Self::RetryAt(_) => Disposition::RetryScheduled,
            Self::DeadLetter => Disposition::DeadLettered,
        }
    }
}

/// [`retry_backoff`] as a table, for a statement that decides a retry
/// itself (PostgreSQL's one-statement `fail`): the backoffs of attempts 1,
/// 2, … up to the first that reaches the cap. Attempt `n` waits
/// `schedule[clamp(n, 1, len) − 1]`.
pub fn retry_backoff_schedule() -> Vec<Duration> {
    let mut schedule = Vec::new();
    for attempt in 1.. {
        let backoff = retry_backoff(attempt);
        schedule.push(backoff);
        if backoff == CAP {
            return schedule;
        }
    }
    unreachable!("the backoff reaches its cap")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_schedule() {
        let secs: Vec<u64> = (1..=8).map(|n| retry_backoff(n).as_secs()).collect();
        assert_eq!(secs, vec![30, 60, 120, 240, 480, 900, 900, 900]);
        assert_eq!(
            retry_backoff(0).as_secs(),
            30,
            "attempt 0 is treated as the first"
        );
        assert_eq!(retry_backoff(i64::MAX).as_secs(), 900);
    }

    #[test]
    fn a_fail_retries_while_attempts_remain() {
        let now = Timestamp::from_millis(1_000);
        let retry = after_failure(2, 3, now);
        assert_eq!(retry, AfterFailure::RetryAt(now.add_secs(60)), "backoff(2)");
        assert_eq!(retry.completed_at(now), None);
        assert_eq!(retry.disposition(), Disposition::RetryScheduled);
        for (attempt, cap) in [(3, 3), (4, 3), (1, 1)] {
            let dead = after_failure(attempt, cap, now);
            assert_eq!(dead, AfterFailure::DeadLetter, "attempt {attempt} of {cap}");
            assert_eq!(dead.next_retry_at(), None);
            assert_eq!(dead.completed_at(now), Some(now));
            assert_eq!(dead.disposition(), Disposition::DeadLettered);
        }
    }

    #[test]
    fn the_schedule_is_the_rule_for_every_attempt() {
        let schedule = retry_backoff_schedule();
        let last = i64::try_from(schedule.len()).unwrap();
        for attempt in (-3..200).chain([i64::MAX]) {
            let index = usize::try_from(attempt.clamp(1, last) - 1).unwrap();
            assert_eq!(schedule[index], retry_backoff(attempt), "attempt {attempt}");
        }
    }
}
