//! The one error policy: how every surface answers an error an operation
//! (or a read) returned. The REST API renders an [`Answer`] as its JSON
//! envelope, MCP as a tool error (or, for an outage, the 503 every request
//! gets), the board as a page or a message on one. Same cause, same answer.
//!
//! The table is [`Answer::of`]; it is the only place that decides a code, a
//! status, whether a retry may help, how loudly to log and what the caller
//! may read. Details of an outage or a bug go to the log, never the caller.

use crate::store::StoreError;

/// How loudly a surface logs an error it answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// The caller's own mistake or a refusal: nothing to log.
    Quiet,
    /// The database is unreachable or not ready: worth a warning.
    Warn,
    /// A bug or a broken database.
    Error,
}

/// What every surface answers for one error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The stable machine-readable code (`invalid_argument`, `forbidden`,
    /// `not_found`, `conflict`, `unavailable`, `internal`).
    pub code: &'static str,
    /// The HTTP status of the answer (an MCP tool error is a result, but an
    /// outage answers 503 there too).
    pub status: u16,
    /// Whether the same call may succeed later unchanged (an outage).
    pub retryable: bool,
    pub log: LogLevel,
    /// What the caller may read: never a store detail of an outage or a bug.
    pub message: String,
    /// The input field at fault, for `invalid_argument`.
    pub field: Option<&'static str>,
    /// The endpoint's state, when a conflict is about a revoked endpoint.
    pub state: Option<&'static str>,
    /// `Retry-After` (whole seconds) with the status: an outage says when
    /// to come back ([`RETRY_AFTER_SECS`]).
    pub retry_after_secs: Option<u64>,
}

/// The public text of an outage (a schema that is not current counts: the
/// database is not ready for this binary yet).
pub const UNAVAILABLE_MESSAGE: &str = "the database is unavailable; try again";
pub const INTERNAL_MESSAGE: &str = "internal error";
pub const REVOKED_MESSAGE: &str = "the endpoint is revoked";
/// The `Retry-After` of every `unavailable` answer: the circuit's probe
/// reconnects every 250 ms and SQLite's lock is held for moments, so a
/// second is soon enough to try again and slow enough not to hammer.
pub const RETRY_AFTER_SECS: u64 = 1;

/// How much of a reference an answer repeats (a path may be long).
const REFERENCE_SHOWN_MAX: usize = 80;

impl Answer {
    /// The table.
    pub fn of(err: &StoreError) -> Self {
        let answer = |code, status, message: String| Self {
            code,
            status,
            retryable: false,
            log: LogLevel::Quiet,
            message,
            field: None,
            state: None,
            retry_after_secs: None,
        };
        match err {
            StoreError::InvalidArgument(invalid) => Self {
                field: Some(invalid.field),
                ..answer("invalid_argument", 400, invalid.message.clone())
            },
            StoreError::Forbidden(why) => answer("forbidden", 403, why.clone()),
            // One fixed text: a foreign id must answer exactly like a missing one.
            StoreError::NotFound => answer("not_found", 404, "not found".into()),
            StoreError::EndpointRevoked => Self {
                state: Some("revoked"),
                ..answer("conflict", 409, REVOKED_MESSAGE.into())
            },
            StoreError::Taken(taken) => answer("conflict", 409, taken.to_string()),
            StoreError::Conflict(why) => answer("conflict", 409, why.clone()),
            StoreError::SchemaMismatch { .. } | StoreError::Unavailable(_) => Self {
                retryable: true,
                retry_after_secs: Some(RETRY_AFTER_SECS),
                log: LogLevel::Warn,
                ..answer("unavailable", 503, UNAVAILABLE_MESSAGE.into())
            },
            StoreError::Internal(_) => Self {
                log: LogLevel::Error,
                ..answer("internal", 500, INTERNAL_MESSAGE.into())
            },
        }
    }

    /// `not_found` for an endpoint reference (slug or id) that names none of
    /// the caller's endpoints: it repeats the reference the caller sent and
    /// says where to find the right one. It depends on nothing but the
    /// caller's own input, so another human's endpoint still answers exactly
    /// like a missing one.
    pub fn unknown_endpoint(reference: &str) -> Self {
        let shown: String = reference.chars().take(REFERENCE_SHOWN_MAX).collect();
        let more = if shown.len() < reference.len() {
            "…"
        } else {
            ""
        };
        Self {
            code: "not_found",
            status: 404,
            retryable: false,
            log: LogLevel::Quiet,
            message: format!(
                "no endpoint {shown:?}{more} among yours; `switchboard endpoint list` \
                 (GET /api/v1/endpoints) shows their slugs"
            ),
            field: None,
            state: None,
            retry_after_secs: None,
        }
    }

    /// [`Self::of`], with the error's detail logged at the table's level,
    /// naming the surface that answered.
    pub fn logged(err: &StoreError, surface: &'static str) -> Self {
        let answer = Self::of(err);
        match answer.log {
            LogLevel::Quiet => {}
            LogLevel::Warn => tracing::warn!(surface, error = %err, "answered as unavailable"),
            LogLevel::Error => tracing::error!(surface, error = %err, "answered as internal"),
        }
        answer
    }

    /// The message as one line: `field: message` when a field is at fault.
    pub fn text(&self) -> String {
        match self.field {
            Some(field) => format!("{field}: {}", self.message),
            None => self.message.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Invalid;
    use crate::store::Taken;

    #[test]
    fn every_variant_has_one_answer() {
        let cases: Vec<(StoreError, &str, u16, bool)> = vec![
            (
                Invalid::new("queue", "bad").into(),
                "invalid_argument",
                400,
                false,
            ),
            (StoreError::Forbidden("no".into()), "forbidden", 403, false),
            (StoreError::NotFound, "not_found", 404, false),
            (StoreError::EndpointRevoked, "conflict", 409, false),
            (
                StoreError::Taken(Taken::AgentName("w".into())),
                "conflict",
                409,
                false,
            ),
            (StoreError::conflict("done"), "conflict", 409, false),
            (
                StoreError::SchemaMismatch {
                    found: 1,
                    expected: 3,
                },
                "unavailable",
                503,
                true,
            ),
            (StoreError::unavailable("down"), "unavailable", 503, true),
            (StoreError::internal("boom"), "internal", 500, false),
        ];
        for (err, code, status, retryable) in cases {
            let a = Answer::of(&err);
            assert_eq!((a.code, a.status, a.retryable), (code, status, retryable));
            // Whatever may be retried says when.
            assert_eq!(a.retry_after_secs.is_some(), retryable, "{code}");
            // The store's own code agrees with the table.
            assert_eq!(err.code(), code);
        }
    }

    #[test]
    fn outages_and_bugs_never_show_their_detail() {
        let a = Answer::of(&StoreError::internal("secret path /var/x"));
        assert_eq!(a.message, INTERNAL_MESSAGE);
        assert_eq!(a.log, LogLevel::Error);
        let a = Answer::of(&StoreError::unavailable("host 10.0.0.1 refused"));
        assert_eq!(a.message, UNAVAILABLE_MESSAGE);
        assert_eq!(a.log, LogLevel::Warn);
    }

    #[test]
    fn an_unknown_endpoint_is_named_and_pointed_at_the_list() {
        let a = Answer::unknown_endpoint("reviewer-k3x9");
        assert_eq!((a.code, a.status), ("not_found", 404));
        assert_eq!(
            a.message,
            "no endpoint \"reviewer-k3x9\" among yours; `switchboard endpoint list` \
             (GET /api/v1/endpoints) shows their slugs"
        );
        let long = "x".repeat(500);
        let a = Answer::unknown_endpoint(&long);
        assert!(
            a.message.contains(&format!("\"{}\"…", "x".repeat(80))),
            "{}",
            a.message
        );
        assert!(!a.message.contains(&"x".repeat(81)));
    }

    #[test]
    fn fields_and_states_travel() {
        let a = Answer::of(&Invalid::new("title", "too long").into());
        assert_eq!(a.field, Some("title"));
        assert_eq!(a.text(), "title: too long");
        let a = Answer::of(&StoreError::EndpointRevoked);
        assert_eq!(a.state, Some("revoked"));
        assert_eq!(a.text(), "the endpoint is revoked");
    }
}
