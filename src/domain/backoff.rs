//! Retry backoff after a failed attempt (`docs/queue.md`).

use std::time::Duration;

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
}
