//! Lease resolution (`docs/queue.md`): per call > endpoint default > 300 s.

use super::Invalid;

pub const DEFAULT_LEASE_SECONDS: i64 = 300;
pub const MAX_LEASE_SECONDS: i64 = 86_400;
pub const MIN_ENDPOINT_DEFAULT_LEASE_SECONDS: i64 = 60;

/// The lease a claim or heartbeat gets, in seconds.
///
/// A per-call value must be positive; above the 24 h cap it is clamped (the
/// spec says "capped"), because an agent asking for a long lease wants the
/// longest one we allow, not an error.
pub fn resolve_lease_seconds(
    per_call: Option<i64>,
    endpoint_default: Option<i64>,
) -> Result<i64, Invalid> {
    match per_call {
        Some(secs) if secs <= 0 => Err(Invalid::new(
            "lease_ttl_seconds",
            format!("must be a positive number of seconds (got {secs})"),
        )),
        Some(secs) => Ok(secs.min(MAX_LEASE_SECONDS)),
        None => Ok(effective_lease_seconds(endpoint_default)),
    }
}

/// The lease a claim gets when it names none: the endpoint's default, else
/// 300 s. The one definition every view, tool and metric uses.
pub fn effective_lease_seconds(endpoint_default: Option<i64>) -> i64 {
    endpoint_default.unwrap_or(DEFAULT_LEASE_SECONDS)
}

/// Validates an endpoint's settable default lease (60–86 400 s, or none).
pub fn validate_endpoint_default(secs: Option<i64>) -> Result<Option<i64>, Invalid> {
    match secs {
        None => Ok(None),
        Some(s) if (MIN_ENDPOINT_DEFAULT_LEASE_SECONDS..=MAX_LEASE_SECONDS).contains(&s) => {
            Ok(Some(s))
        }
        Some(s) => Err(Invalid::new(
            "default_lease_ttl_seconds",
            format!("must be between 60 and 86400 seconds, or null (got {s})"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_call_wins_then_endpoint_then_default() {
        assert_eq!(resolve_lease_seconds(Some(30), Some(600)), Ok(30));
        assert_eq!(resolve_lease_seconds(None, Some(600)), Ok(600));
        assert_eq!(resolve_lease_seconds(None, None), Ok(300));
    }

    #[test]
    fn per_call_is_capped_and_must_be_positive() {
        assert_eq!(resolve_lease_seconds(Some(100_000), None), Ok(86_400));
        for bad in [0, -1] {
            let err = resolve_lease_seconds(Some(bad), Some(600)).unwrap_err();
            assert_eq!(err.field, "lease_ttl_seconds");
        }
    }

    #[test]
    fn endpoint_default_range() {
        assert_eq!(validate_endpoint_default(None), Ok(None));
        assert_eq!(validate_endpoint_default(Some(60)), Ok(Some(60)));
        assert_eq!(validate_endpoint_default(Some(86_400)), Ok(Some(86_400)));
        assert!(validate_endpoint_default(Some(59)).is_err());
        assert!(validate_endpoint_default(Some(86_401)).is_err());
    }
}
