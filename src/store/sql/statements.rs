//! The statement texts of the queue's transitions, each written once: the
//! generic transaction path (`todos/`), PostgreSQL's one-statement forms
//! (`postgres/`), SQLite's writer-thread jobs (`sqlite/`) and the
//! benchmarks all take their SQL from here. A change to what is claimable
//! (a pause, a priority, a delay) is made in this file and reaches every
//! path at once.
//!
//! Placeholders are `$n` (sqlx accepts them on both dialects; the SQLite
//! writer thread numbers them `?n`). The few texts that differ by dialect
//! take a [`Dialect`].

use std::sync::LazyLock;

use crate::store::dialect::Dialect;
use crate::store::rows::{attempt_columns, todo_columns};

/// The columns a claim sets; `$1` now, `$2` owner, `$3` lease expiry, `$4`
/// fence hash.
pub const CLAIM_SET: &str = "state = 'claimed', owner = $2, lease_expires_at = $3, \
    lease_token_hash = $4, attempt = attempt + 1, attempts_total = attempts_total + 1, \
    claimed_at = $1, updated_at = $1, next_retry_at = NULL, last_note = NULL";

/// What a takeover may claim besides a pending todo: a lapsed lease or an
/// elapsed retry window, below the attempt cap. `$1` is now.
pub const TAKEOVER_CONDITION: &str = concat!(
    below_attempt_cap!(),
    " AND ((",
    lapsed_lease!(),
    ") OR (",
    elapsed_retry!(),
    "))"
);

/// Where a claim looks: the endpoint's whole scope, or one named queue
/// (bound as `$6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimScope {
    AnyQueue,
    OneQueue,
}

impl ClaimScope {
    pub fn of(queue: Option<&str>) -> Self {
        match queue {
            Some(_) => Self::OneQueue,
            None => Self::AnyQueue,
        }
    }

    /// The queue condition, after the endpoint's. Todos exist only in scope
    /// queues, so the whole scope needs none (and uses the endpoint index).
    fn filter(self) -> &'static str {
        match self {
            Self::AnyQueue => "",
            Self::OneQueue => " AND queue = $6",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::AnyQueue => 0,
            Self::OneQueue => 1,
        }
    }
}

fn dialect_index(dialect: Dialect) -> usize {
    match dialect {
        Dialect::Sqlite => 0,
        Dialect::Postgres => 1,
    }
}

fn claim_pending_text(dialect: Dialect, scope: ClaimScope) -> String {
    format!(
        concat!(
            "UPDATE todos SET {set} WHERE id = (SELECT id FROM {from} ",
            "WHERE endpoint_id = $5 AND state = 'pending'{filter} ",
            "ORDER BY created_at, id LIMIT 1{skip}) RETURNING ",
            todo_columns!()
        ),
        set = CLAIM_SET,
        // A named queue's claim takes the per-queue pending index by itself;
        // the whole scope's names its index on SQLite
        // (`Dialect::pending_todos_by_endpoint`).
        from = match scope {
            ClaimScope::AnyQueue => dialect.pending_todos_by_endpoint(),
            ClaimScope::OneQueue => "todos",
        },
        filter = scope.filter(),
        skip = dialect.skip_locked(),
    )
}

static CLAIM_PENDING: LazyLock<[[String; 2]; 2]> = LazyLock::new(|| {
    [Dialect::Sqlite, Dialect::Postgres]
        .map(|d| [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|s| claim_pending_text(d, s)))
});

/// The claim of the oldest pending todo of endpoint `$5` (and queue `$6`):
/// `$1` now, `$2` owner, `$3` lease expiry, `$4` fence hash. Returns the
/// claimed row, or nothing when nothing is pending.
pub fn claim_pending(dialect: Dialect, scope: ClaimScope) -> &'static str {
    &CLAIM_PENDING[dialect_index(dialect)][scope.index()]
}

static CLAIM_PENDING_WITH_ATTEMPT: LazyLock<[String; 2]> = LazyLock::new(|| {
    [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|scope| {
        format!(
            concat!(
                "WITH c AS ({claim}), a AS (INSERT INTO todo_attempts ",
                "(todo_id, seq, attempt, claimant, claimed_at) ",
                "SELECT id, attempts_total, attempt, ${claimant}, $1 FROM c) SELECT ",
                todo_columns!(),
                " FROM c"
            ),
            claim = claim_pending(Dialect::Postgres, scope),
            // The claimant follows the claim's own parameters.
            claimant = match scope {
                ClaimScope::AnyQueue => 6,
                ClaimScope::OneQueue => 7,
            },
        )
    })
});

/// PostgreSQL: [`claim_pending`] and its attempt record ([`OPEN_ATTEMPT`])
/// as one data-modifying statement; the claimant is the parameter after
/// the claim's own (`$6`, or `$7` with a named queue).
pub fn claim_pending_with_attempt(scope: ClaimScope) -> &'static str {
    &CLAIM_PENDING_WITH_ATTEMPT[scope.index()]
}

/// A subquery yielding the id of the oldest todo of endpoint `$5` (and
/// queue `$6`) that a takeover may claim ([`TAKEOVER_CONDITION`]); `$1` is
/// now.
///
/// It reads only the endpoint's live claims and open retry windows, never
/// its history. SQLite has no statistics (the product never runs ANALYZE)
/// and served the `ORDER BY` from the listings' index, walking every
/// finished todo of the endpoint: an empty `claim_next` took 67 ms against
/// 400 000 finished todos, and sixteen agents draining a queue at once ran
/// the single writer connection past its acquire timeout. So on SQLite the
/// two partial indexes are named, one branch each, and the few candidates
/// sorted. PostgreSQL combines the same two indexes by itself (a BitmapOr)
/// and locks the row it takes.
pub fn oldest_takeover(dialect: Dialect, scope: ClaimScope) -> &'static str {
    &OLDEST_TAKEOVER[dialect_index(dialect)][scope.index()]
}

static OLDEST_TAKEOVER: LazyLock<[[String; 2]; 2]> = LazyLock::new(|| {
    [Dialect::Sqlite, Dialect::Postgres].map(|d| {
        [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|s| oldest_takeover_text(d, s.filter()))
    })
});

fn oldest_takeover_text(dialect: Dialect, filter: &str) -> String {
    match dialect {
        Dialect::Sqlite => format!(
            concat!(
                "SELECT id FROM (",
                "SELECT id, created_at FROM todos INDEXED BY todos_claimed_by_endpoint ",
                "WHERE endpoint_id = $5{filter} AND ",
                lapsed_lease!(),
                " AND ",
                below_attempt_cap!(),
                " UNION ALL ",
                "SELECT id, created_at FROM todos INDEXED BY todos_retry_by_endpoint ",
                "WHERE endpoint_id = $5{filter} AND ",
                elapsed_retry!(),
                " AND ",
                below_attempt_cap!(),
                ") ORDER BY created_at, id LIMIT 1"
            ),
            filter = filter
        ),
        Dialect::Postgres => format!(
            "SELECT id FROM todos WHERE endpoint_id = $5{filter} AND {TAKEOVER_CONDITION} \
             ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED"
        ),
    }
}

/// The takeover of [`oldest_takeover`]'s todo, with [`CLAIM_SET`]'s
/// parameters.
pub fn claim_takeover(dialect: Dialect, scope: ClaimScope) -> &'static str {
    &CLAIM_TAKEOVER[dialect_index(dialect)][scope.index()]
}

static CLAIM_TAKEOVER: LazyLock<[[String; 2]; 2]> = LazyLock::new(|| {
    [Dialect::Sqlite, Dialect::Postgres].map(|d| {
        [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|s| {
            format!(
                concat!(
                    "UPDATE todos SET {set} WHERE id = ({oldest}) RETURNING ",
                    todo_columns!()
                ),
                set = CLAIM_SET,
                oldest = oldest_takeover(d, s),
            )
        })
    })
});

/// The claim of one todo by id (`$5`) of endpoint `$6`: pending, or one a
/// takeover may claim.
pub static CLAIM_BY_ID: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            "UPDATE todos SET {} WHERE id = $5 AND endpoint_id = $6 ",
            "AND (state = 'pending' OR ({})) RETURNING ",
            todo_columns!()
        ),
        CLAIM_SET, TAKEOVER_CONDITION
    )
});

/// The holder's guard: `$h` the id, `$h+1` the endpoint, `$h+2` the owner,
/// `$h+3` the fence hash (a fenced lease needs its token; an unfenced one
/// ignores it).
pub fn holder_guard(h: usize) -> String {
    format!(
        "id = ${} AND endpoint_id = ${} AND state = 'claimed' AND owner = ${} \
         AND (lease_token_hash IS NULL OR lease_token_hash = ${})",
        h,
        h + 1,
        h + 2,
        h + 3
    )
}

/// The holder's completion: `$1` result, `$2` now, `$3`–`$6` the holder's
/// guard.
pub static COMPLETE: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            "UPDATE todos SET state = 'done', result = $1, completed_at = $2, ",
            "updated_at = $2, lease_expires_at = NULL, lease_token_hash = NULL ",
            "WHERE {} RETURNING ",
            todo_columns!()
        ),
        holder_guard(3)
    )
});

/// PostgreSQL: [`COMPLETE`] and closing its attempt as one data-modifying
/// statement; `$7`–`$10` the attempt's outcome, disposition, summary and
/// whether the summary was cut.
pub static COMPLETE_WITH_ATTEMPT: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            "WITH d AS ({complete}), a AS (UPDATE todo_attempts SET ended_at = $2, outcome = $7, ",
            "disposition = $8, summary = $9, summary_truncated = $10 ",
            "WHERE todo_id = (SELECT id FROM d) AND ended_at IS NULL) SELECT ",
            todo_columns!(),
            " FROM d"
        ),
        complete = COMPLETE.as_str(),
    )
});

/// The holder's heartbeat: `$1` lease expiry, `$2` now, `$3` note, `$4`–`$7`
/// the holder's guard.
pub static HEARTBEAT: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            "UPDATE todos SET lease_expires_at = $1, updated_at = $2, ",
            "last_note = COALESCE($3, last_note) WHERE {} RETURNING ",
            todo_columns!()
        ),
        holder_guard(4)
    )
});

/// A claim's attempt record: `$1` todo, `$2` seq, `$3` attempt, `$4`
/// claimant, `$5` now.
pub const OPEN_ATTEMPT: &str = "INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) \
     VALUES ($1, $2, $3, $4, $5)";

/// The closed attempts a claimant is shown: `$1` todo, `$2` how many.
pub const PRIOR_ATTEMPTS: &str = concat!(
    "SELECT ",
    attempt_columns!(),
    " FROM todo_attempts WHERE todo_id = $1 AND ended_at IS NOT NULL ORDER BY seq DESC LIMIT $2"
);

/// Closes the todo's open attempt: `$1` now, `$2` outcome, `$3`
/// disposition, `$4` summary, `$5` whether it was cut, `$6` the todo.
pub const CLOSE_ATTEMPT: &str = "UPDATE todo_attempts SET ended_at = $1, outcome = $2, \
     disposition = $3, summary = $4, summary_truncated = $5 \
     WHERE todo_id = $6 AND ended_at IS NULL";

/// Deletes all but the newest `$2` closed attempts of todo `$1`.
pub const PRUNE_ATTEMPTS: &str = "DELETE FROM todo_attempts WHERE todo_id = $1 AND ended_at IS NOT NULL \
     AND seq <= (SELECT seq FROM todo_attempts WHERE todo_id = $1 AND ended_at IS NOT NULL \
     ORDER BY seq DESC LIMIT 1 OFFSET $2)";

/// Counts `$1` pruned attempts on todo `$2`.
pub const COUNT_PRUNED: &str =
    "UPDATE todos SET attempts_pruned = attempts_pruned + $1 WHERE id = $2";

/// A heartbeat's mark on the open attempt: `$1` now, `$2` note, `$3` todo.
pub const HEARTBEAT_ATTEMPT: &str = "UPDATE todo_attempts SET last_heartbeat_at = $1, \
     note = COALESCE($2, note) WHERE todo_id = $3 AND ended_at IS NULL";

/// A heartbeat's note on its endpoint: `$1` note, `$2` now, `$3` endpoint.
pub const ENDPOINT_NOTE: &str =
    "UPDATE endpoints SET last_note = $1, last_note_at = $2 WHERE id = $3";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_claim_text_names_the_same_set_and_order() {
        for dialect in [Dialect::Sqlite, Dialect::Postgres] {
            for scope in [ClaimScope::AnyQueue, ClaimScope::OneQueue] {
                let claim = claim_pending(dialect, scope);
                assert!(claim.contains(CLAIM_SET), "{claim}");
                assert!(claim.contains("ORDER BY created_at, id LIMIT 1"), "{claim}");
                assert_eq!(claim.contains("$6"), scope == ClaimScope::OneQueue);
                assert!(claim_takeover(dialect, scope).contains(oldest_takeover(dialect, scope)));
            }
        }
        for scope in [ClaimScope::AnyQueue, ClaimScope::OneQueue] {
            let fused = claim_pending_with_attempt(scope);
            assert!(fused.contains(claim_pending(Dialect::Postgres, scope)));
        }
        assert!(COMPLETE_WITH_ATTEMPT.contains(COMPLETE.as_str()));
        assert!(claim_pending(Dialect::Postgres, ClaimScope::AnyQueue).contains("SKIP LOCKED"));
        assert!(!claim_pending(Dialect::Sqlite, ClaimScope::AnyQueue).contains("SKIP LOCKED"));
    }
}
