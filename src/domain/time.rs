//! Instants as stored: whole milliseconds since the Unix epoch, UTC.
//!
//! Both backends store every `*_at` column as a BIGINT of milliseconds so that
//! the SQL is identical on SQLite and PostgreSQL and no database clock is ever
//! consulted: `now` always comes from the injected clock.

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_millis(millis: i64) -> Self {
        Self(millis)
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    pub fn saturating_add(self, d: Duration) -> Self {
        Self(
            self.0
                .saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        )
    }

    pub fn saturating_sub(self, d: Duration) -> Self {
        Self(
            self.0
                .saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        )
    }

    pub fn add_secs(self, secs: i64) -> Self {
        Self(self.0.saturating_add(secs.saturating_mul(1000)))
    }

    /// RFC 3339 in UTC with millisecond precision, e.g. `2026-11-30T07:41:33.120Z`.
    pub fn to_rfc3339(self) -> String {
        match jiff::Timestamp::from_millisecond(self.0) {
            Ok(ts) => format!("{ts:.3}"),
            Err(_) => format!("@{}ms", self.0),
        }
    }

    /// Parses RFC 3339 (any offset) into an instant.
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        let ts: jiff::Timestamp = s.trim().parse().ok()?;
        Some(Self(ts.as_millisecond()))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_and_parses_rfc3339() {
        let t = Timestamp::from_millis(1_780_000_000_123);
        let s = t.to_rfc3339();
        assert!(s.ends_with('Z'), "{s}");
        assert_eq!(Timestamp::parse_rfc3339(&s), Some(t));
        assert_eq!(
            Timestamp::parse_rfc3339("2026-11-30T09:00:00+01:00"),
            Timestamp::parse_rfc3339("2026-11-30T08:00:00Z")
        );
        assert_eq!(Timestamp::parse_rfc3339("yesterday"), None);
    }
}
