//! What a store call can answer besides success.
//!
//! Callers branch on the variant, never on the text: [`StoreError::EndpointRevoked`]
//! and [`StoreError::Taken`] are the conflicts a surface treats specially,
//! [`StoreError::Conflict`] carries only a human-readable detail.

use crate::domain::Invalid;

/// Any error, boxed: the source of an `Unavailable` or `Internal`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Bad input; nothing was written.
    #[error("{0}")]
    InvalidArgument(#[from] Invalid),
    /// The caller may not do this to its own resource (a queue outside its scope).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// No such thing in the caller's scope (a foreign id answers the same).
    #[error("not found")]
    NotFound,
    /// The endpoint (the caller's, or the one the todo belongs to) is revoked.
    #[error("conflict: the endpoint is revoked")]
    EndpointRevoked,
    /// A unique thing is already taken (a unique index refused the write).
    #[error("conflict: {0}")]
    Taken(Taken),
    /// The thing exists in the caller's scope but is not in a state that
    /// allows this. The text is for people; never branch on it.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database answers but its schema is not the one this binary expects
    /// (`found` is 0 when no schema is applied).
    #[error("schema is at version {found}, this binary expects {expected}")]
    SchemaMismatch { found: i64, expected: i64 },
    /// The database could not be reached, refused or lost the connection, or
    /// timed out; worth retrying.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// Anything else: a bug or a broken database. Details go to the log, not the caller.
    #[error("internal storage error: {0}")]
    Internal(#[source] BoxError),
}

/// What unique thing a write found already taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Taken {
    /// Another human has this name.
    #[error("a human named {0:?} already exists")]
    HumanName(String),
    /// The human already has an agent of this name.
    #[error("an agent named {0:?} already exists")]
    AgentName(String),
    /// A freshly minted endpoint slug or credential collided; mint again.
    #[error("an endpoint with this slug or credential already exists")]
    SlugOrCredential,
    /// A freshly minted API token collided; mint again.
    #[error("token collision; try again")]
    ApiToken,
    /// Another live todo of the endpoint holds the same idempotency key.
    #[error("a live todo with the same idempotency key exists; finish or retry that one")]
    IdempotencyKey,
}

pub type StoreResult<T> = Result<T, StoreError>;

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        if is_unavailable(&err) {
            StoreError::Unavailable(Box::new(err))
        } else {
            StoreError::Internal(Box::new(err))
        }
    }
}

/// SQLite's writer thread (`sql::sqlite::lane`): a database still locked
/// after the busy timeout, or a file that cannot be opened, is worth
/// retrying; anything else is internal.
impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode::{CannotOpen, DatabaseBusy, DatabaseLocked};
        match err.sqlite_error_code() {
            Some(DatabaseBusy | DatabaseLocked | CannotOpen) => {
                StoreError::Unavailable(Box::new(err))
            }
            _ => StoreError::Internal(Box::new(err)),
        }
    }
}

impl From<Taken> for StoreError {
    fn from(taken: Taken) -> Self {
        StoreError::Taken(taken)
    }
}

/// An error with a sentence of context in front of it, the error kept as its source.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct WithContext {
    pub context: String,
    #[source]
    pub source: BoxError,
}

impl StoreError {
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::Conflict(message.into())
    }

    /// An `Internal` error that is only a sentence (no underlying error).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::Internal(message.into().into())
    }

    /// An `Unavailable` error that is only a sentence (no underlying error).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::Unavailable(message.into().into())
    }

    /// `err` classified as [`From<sqlx::Error>`] does, with `context` in front.
    pub fn with_context(context: impl Into<String>, err: sqlx::Error) -> Self {
        let unavailable = is_unavailable(&err);
        let wrapped: BoxError = Box::new(WithContext {
            context: context.into(),
            source: Box::new(err),
        });
        if unavailable {
            Self::Unavailable(wrapped)
        } else {
            Self::Internal(wrapped)
        }
    }

    /// The stable machine-readable code used by every surface (`docs/mcp.md`, `docs/api.md`).
    /// `EndpointRevoked` and `Taken` are conflicts on the wire.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidArgument(_) => "invalid_argument",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound => "not_found",
            Self::EndpointRevoked | Self::Taken(_) | Self::Conflict(_) => "conflict",
            Self::SchemaMismatch { .. } | Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }
}

/// True when the database refused a write because of a unique index.
pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// True when `err` means the database could not be reached, refused or lost
/// the connection, or is shutting down: a retry (on another connection) may work.
pub fn is_unavailable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => match db.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
            Some(sqlite) => sqlx::error::DatabaseError::code(sqlite)
                .and_then(|code| code.parse::<i32>().ok())
                .is_some_and(is_busy_sqlite_code),
            None => db.code().as_deref().is_some_and(is_connection_sqlstate),
        },
        _ => false,
    }
}

/// SQLite's result codes of a file another connection holds locked past
/// the busy timeout (`SQLITE_BUSY` 5, `SQLITE_LOCKED` 6, and their
/// extended forms, whose low byte is the primary code), or that cannot be
/// opened now (`SQLITE_CANTOPEN` 14): worth retrying, as the writer
/// thread's `rusqlite` errors are (`From<rusqlite::Error>`).
fn is_busy_sqlite_code(code: i32) -> bool {
    matches!(code & 0xff, 5 | 6 | 14)
}

/// Whether `err` says the database answered but has no connection slot
/// free for a new session (SQLSTATE 53300, `too_many_connections`: the
/// server's `max_connections` or a role's `CONNECTION LIMIT`). A call that
/// meets it answers `unavailable`, but the database is reachable: the
/// circuit (`circuit.rs`) must not open on it.
pub fn is_out_of_connection_slots(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db)
        if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_none()
            && db.code().as_deref() == Some("53300"))
}

/// PostgreSQL SQLSTATEs of a lost or refused connection: class 08
/// (connection exception), class 28 (the login was refused: a role that
/// may not log in now, a password changed under a running server),
/// 57P01/57P02/57P03 (admin shutdown, crash shutdown, cannot connect now)
/// and 53300 (too many connections).
fn is_connection_sqlstate(code: &str) -> bool {
    matches!(
        code.as_bytes(),
        [b'0', b'8', _, _, _] | [b'2', b'8', _, _, _]
    ) || matches!(code, "57P01" | "57P02" | "57P03" | "53300")
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::error::Error as _;

    use super::*;

    /// A database error with a chosen SQLSTATE, as a driver would report it.
    #[derive(Debug)]
    struct FakeDbError {
        code: &'static str,
        kind: sqlx::error::ErrorKind,
    }

    impl std::fmt::Display for FakeDbError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "fake database error {}", self.code)
        }
    }

    impl std::error::Error for FakeDbError {}

    impl sqlx::error::DatabaseError for FakeDbError {
        fn message(&self) -> &str {
            "fake"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.code))
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            match self.kind {
                sqlx::error::ErrorKind::UniqueViolation => sqlx::error::ErrorKind::UniqueViolation,
                _ => sqlx::error::ErrorKind::Other,
            }
        }
    }

    fn db(code: &'static str) -> sqlx::Error {
        sqlx::Error::Database(Box::new(FakeDbError {
            code,
            kind: sqlx::error::ErrorKind::Other,
        }))
    }

    fn kind(err: sqlx::Error) -> &'static str {
        StoreError::from(err).code()
    }

    #[test]
    fn lost_or_refused_connections_are_unavailable() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        for err in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::Io(io),
            sqlx::Error::Tls("handshake failed".into()),
            sqlx::Error::Protocol("unexpected message".into()),
            sqlx::Error::WorkerCrashed,
        ] {
            let shown = err.to_string();
            assert_eq!(kind(err), "unavailable", "{shown}");
        }
    }

    #[test]
    fn connection_sqlstates_are_unavailable() {
        for code in [
            "08000", "08003", "08006", "08001", "08004", "28000", "28P01", "57P01", "57P02",
            "57P03", "53300",
        ] {
            assert_eq!(kind(db(code)), "unavailable", "{code}");
        }
    }

    #[test]
    fn other_errors_are_internal() {
        for err in [
            sqlx::Error::RowNotFound,
            sqlx::Error::ColumnNotFound("x".into()),
            db("42P01"),
            db("23505"),
            db("40001"),
            db("57014"),
            db("0800"),
            db("5"),
        ] {
            let shown = err.to_string();
            assert_eq!(kind(err), "internal", "{shown}");
        }
    }

    /// A real SQLite file locked by another connection: sqlx's error
    /// carries SQLite's code 5 (`SQLITE_BUSY`), which is an outage worth
    /// retrying, never `internal`.
    #[tokio::test]
    async fn a_locked_sqlite_file_is_unavailable() {
        use sqlx::sqlite::SqliteConnectOptions;
        use sqlx::{ConnectOptions, Connection};
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("busy.db"))
            .create_if_missing(true)
            .busy_timeout(std::time::Duration::ZERO);
        let mut holder = options.connect().await.unwrap();
        sqlx::raw_sql("CREATE TABLE t (n INTEGER); BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
            .execute(&mut holder)
            .await
            .unwrap();
        let mut writer = options.connect().await.unwrap();
        let err = sqlx::query("INSERT INTO t VALUES (2)")
            .execute(&mut writer)
            .await
            .expect_err("the file is locked");
        assert!(is_unavailable(&err), "{err}");
        assert!(!is_out_of_connection_slots(&err), "{err}");
        assert_eq!(kind(err), "unavailable");
        let _ = writer.close().await;
        let _ = holder.close().await;
    }

    #[test]
    fn out_of_connection_slots_is_unavailable_but_told_apart() {
        assert!(is_out_of_connection_slots(&db("53300")));
        assert_eq!(kind(db("53300")), "unavailable");
        for other in [db("08006"), db("57P03"), sqlx::Error::PoolTimedOut] {
            assert!(!is_out_of_connection_slots(&other), "{other}");
        }
    }

    #[test]
    fn unique_violations_are_recognised() {
        let unique = sqlx::Error::Database(Box::new(FakeDbError {
            code: "23505",
            kind: sqlx::error::ErrorKind::UniqueViolation,
        }));
        assert!(is_unique_violation(&unique));
        assert!(!is_unique_violation(&db("23503")));
        assert!(!is_unique_violation(&sqlx::Error::PoolTimedOut));
    }

    #[test]
    fn the_sqlx_error_stays_the_source() {
        let err = StoreError::from(sqlx::Error::PoolTimedOut);
        assert!(matches!(err, StoreError::Unavailable(_)));
        let source = err.source().expect("a source");
        assert!(source.downcast_ref::<sqlx::Error>().is_some());

        let err = StoreError::with_context("cannot connect to x", db("08006"));
        assert!(matches!(err, StoreError::Unavailable(_)));
        assert_eq!(
            err.to_string(),
            "database unavailable: cannot connect to x: error returned from database: \
             fake database error 08006"
        );
        let err = StoreError::with_context("cannot open x", sqlx::Error::RowNotFound);
        assert!(matches!(err, StoreError::Internal(_)));
    }

    #[test]
    fn wire_codes_are_stable() {
        assert_eq!(StoreError::EndpointRevoked.code(), "conflict");
        assert_eq!(
            StoreError::Taken(Taken::SlugOrCredential).code(),
            "conflict"
        );
        assert_eq!(StoreError::conflict("x").code(), "conflict");
        assert_eq!(
            StoreError::SchemaMismatch {
                found: 1,
                expected: 3
            }
            .code(),
            "unavailable"
        );
        assert_eq!(StoreError::internal("x").code(), "internal");
        assert_eq!(StoreError::unavailable("x").code(), "unavailable");
        assert_eq!(
            StoreError::Taken(Taken::HumanName("admin".into())).to_string(),
            "conflict: a human named \"admin\" already exists"
        );
    }
}
