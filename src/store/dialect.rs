//! The few places where SQLite and PostgreSQL need different SQL.

use super::Backend;
use super::migrate::{Migration, POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    pub fn backend(self) -> Backend {
        match self {
            Self::Sqlite => Backend::Sqlite,
            Self::Postgres => Backend::Postgres,
        }
    }

    /// How a write transaction starts. SQLite takes the write lock up front
    /// (`BEGIN IMMEDIATE`) so a transaction never fails half-way on a lock
    /// upgrade; PostgreSQL locks rows as it goes.
    pub fn begin_write(self) -> &'static str {
        match self {
            Self::Sqlite => "BEGIN IMMEDIATE",
            Self::Postgres => "BEGIN",
        }
    }

    /// Suffix for a candidate scan that concurrent claimers must not share.
    /// SQLite has one writer at a time, so it needs none.
    pub fn skip_locked(self) -> &'static str {
        match self {
            Self::Sqlite => "",
            Self::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// Suffix for a read that a following write in the same transaction depends on.
    pub fn for_update(self) -> &'static str {
        match self {
            Self::Sqlite => "",
            Self::Postgres => " FOR UPDATE",
        }
    }

    pub fn migrations(self) -> &'static [Migration] {
        match self {
            Self::Sqlite => SQLITE_MIGRATIONS,
            Self::Postgres => POSTGRES_MIGRATIONS,
        }
    }
}

/// `$start, $start+1, …` for `n` bound values, e.g. an `IN (…)` list.
pub fn placeholders(start: usize, n: usize) -> String {
    (start..start + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_lists() {
        assert_eq!(placeholders(3, 2), "$3, $4");
        assert_eq!(placeholders(1, 1), "$1");
    }
}
