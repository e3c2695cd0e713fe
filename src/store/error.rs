//! What a store call can answer besides success.

use crate::domain::Invalid;

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
    /// The thing exists in the caller's scope but is not in a state that allows this.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database could not be reached or timed out; worth retrying.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// Anything else: a bug or a broken database. Details go to the log, not the caller.
    #[error("internal storage error: {0}")]
    Internal(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match &err {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_) => StoreError::Unavailable(err.to_string()),
            _ => StoreError::Internal(err.to_string()),
        }
    }
}

impl StoreError {
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::Conflict(message.into())
    }

    /// The stable machine-readable code used by every surface (`03`, `07`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidArgument(_) => "invalid_argument",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound => "not_found",
            Self::Conflict(_) => "conflict",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }
}

/// True when the database refused a write because of a unique index.
pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}
