//! In-memory token buckets (lost on restart, as rate state may be).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Tokens per second and burst size.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

impl Rate {
    pub const fn new(per_second: f64, burst: f64) -> Self {
        Self { per_second, burst }
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// Buckets keyed by a string (a human id, an IP address).
#[derive(Debug)]
pub struct RateLimiter {
    rate: Rate,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    pub fn new(rate: Rate) -> Self {
        Self {
            rate,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `key`, or says how long to wait for one.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > 100_000 {
            // Forget full buckets rather than grow without bound.
            let rate = self.rate;
            buckets.retain(|_, b| b.tokens + elapsed(b, now) * rate.per_second < rate.burst);
        }
        let bucket = buckets.entry(key.to_owned()).or_insert(Bucket {
            tokens: self.rate.burst,
            updated: now,
        });
        bucket.tokens =
            (bucket.tokens + elapsed(bucket, now) * self.rate.per_second).min(self.rate.burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let missing = 1.0 - bucket.tokens;
            Err(Duration::from_secs_f64(missing / self.rate.per_second))
        }
    }
}

fn elapsed(bucket: &Bucket, now: Instant) -> f64 {
    now.duration_since(bucket.updated).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refusal_per_key() {
        let limiter = RateLimiter::new(Rate::new(1.0, 3.0));
        for _ in 0..3 {
            assert!(limiter.check("a").is_ok());
        }
        let wait = limiter.check("a").unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1));
        assert!(limiter.check("b").is_ok(), "keys are independent");
    }
}
