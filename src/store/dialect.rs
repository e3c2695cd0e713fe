//! The few places where SQLite and PostgreSQL need different SQL.

/// Which database a store runs on: the one fact every difference between
/// the two backends hangs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
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

    /// What goes before and after `UPDATE <table> SET …` (before `WHERE`)
    /// so that the statement's commit does not wait for its WAL flush: for
    /// writes that are hints, never the ledger (a ring claim), where losing
    /// the last few hundred milliseconds of them in a database crash costs a
    /// doorbell rung again, never work. Visibility and row locks are those
    /// of any commit, so a guarded statement decides across instances as
    /// before. PostgreSQL: `synchronous_commit = off` for this transaction
    /// only (`set_config(…, true)`, read when the statement's implicit
    /// transaction commits). SQLite (WAL, `synchronous=NORMAL`) never syncs
    /// at a commit anyway.
    pub fn unflushed_update(self) -> (&'static str, &'static str) {
        match self {
            Self::Sqlite => ("", ""),
            Self::Postgres => (
                "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)) ",
                " FROM unflushed",
            ),
        }
    }

    /// The `FROM` item of a read of pending todos by endpoint (the re-ring
    /// sweep, digests, the bus catch-up). SQLite has no statistics (the
    /// product never runs ANALYZE), so the partial pending index and the
    /// listings index on the same columns tie for it, and it may take the
    /// listings one, which walks every finished todo of the endpoint too: a
    /// sweep over 10 000 endpoints with 1 000 000 finished todos took 5.4 s
    /// instead of ~0.1 s (B5, 2026-12-01). PostgreSQL has statistics and
    /// picks by them.
    pub fn pending_todos_by_endpoint(self) -> &'static str {
        match self {
            Self::Sqlite => "todos INDEXED BY todos_pending_by_endpoint",
            Self::Postgres => "todos",
        }
    }

    /// `todos` as the `FROM` item of a read that must use `index`, a live
    /// state's partial index: named with `INDEXED BY` on SQLite, which has
    /// no statistics and may otherwise serve the read from the listings'
    /// index over the whole history (as [`Self::pending_todos_by_endpoint`]
    /// explains); PostgreSQL picks by its statistics.
    pub fn todos_by_index(self, index: &str) -> String {
        match self {
            Self::Sqlite => format!("todos INDEXED BY {index}"),
            Self::Postgres => "todos".to_owned(),
        }
    }

    /// A subquery yielding the strings of a JSON array bound at `$param`:
    /// one parameter however long the list (SQLite's cost per `$n`
    /// placeholder grows with their number; a 10 000-id list costs ~100 ms
    /// as placeholders and ~5 ms this way).
    pub fn json_text_list(self, param: usize) -> String {
        match self {
            Self::Sqlite => format!("SELECT value FROM json_each(${param})"),
            Self::Postgres => format!("SELECT jsonb_array_elements_text(${param}::jsonb)"),
        }
    }

    /// `column <this>`: the column is one of the strings of a JSON array
    /// bound at `$param`, looked up by index, for a short list of keys (a
    /// tick's due endpoints). On PostgreSQL `IN (subquery)` is planned for
    /// 100 rows whatever the list's length, which on the 10 000-row
    /// `endpoints` chose a sequential scan and a hash join (~5 ms for 100
    /// ids, B5); `= ANY(ARRAY(…))` is an index lookup per key (~0.5 ms).
    /// For a long list matched against many rows keep `IN`
    /// ([`Self::json_text_list`]): PostgreSQL hashes it.
    pub fn in_short_json_list(self, param: usize) -> String {
        match self {
            Self::Sqlite => format!("IN ({})", self.json_text_list(param)),
            Self::Postgres => format!("= ANY (ARRAY({}))", self.json_text_list(param)),
        }
    }

    /// Whether `haystack` contains `needle` as a literal substring, ignoring
    /// the case of ASCII letters only, identically on both backends. The
    /// bound `needle` must already be ASCII-lowercased
    /// ([`str::to_ascii_lowercase`]). No LIKE, so `%` and `_` are plain
    /// characters and need no escaping. SQLite's `lower()` folds ASCII only;
    /// PostgreSQL's follows the locale, hence `translate`.
    pub fn contains_ascii_ci(self, haystack: &str, needle: &str) -> String {
        match self {
            Self::Sqlite => format!("instr(lower({haystack}), {needle}) > 0"),
            Self::Postgres => format!(
                "strpos(translate({haystack}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',                  'abcdefghijklmnopqrstuvwxyz'), {needle}) > 0"
            ),
        }
    }

    /// Null-safe equality (`NULL = NULL` is true).
    pub fn null_safe_eq(self) -> &'static str {
        match self {
            Self::Sqlite => "IS",
            Self::Postgres => "IS NOT DISTINCT FROM",
        }
    }
}

/// A list of ids as the one JSON parameter [`Dialect::json_text_list`] reads.
pub fn json_list(ids: &[String]) -> String {
    serde_json::to_string(ids).expect("strings serialize")
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
