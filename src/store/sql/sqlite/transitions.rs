//! The agent loop's transitions on SQLite's writer thread (`sqlite_lane`):
//! `claim_next`'s pending path, `complete` and `heartbeat`, each one job
//! inside the thread's write transaction (all or nothing: an `Err` undoes
//! the job's writes), with the same guards and the same rows written as
//! the sqlx transaction paths beside them. A job answers `None` when its guard
//! matched nothing; the caller then asks why on the transaction path, which
//! re-checks under its own guards (as `fast.rs` does on PostgreSQL).

use std::sync::LazyLock;

use rusqlite::{Connection, params};

use super::*;
use crate::store::sql::sqlite_lane::numbered;

/// Everything a claim binds, owned: it travels to the writer thread.
pub(super) struct LaneClaim {
    pub endpoint_id: String,
    pub queue: Option<String>,
    pub now: Timestamp,
    pub owner: String,
    pub expires: Timestamp,
    pub token_hash: Option<String>,
    pub claimant: Option<String>,
}

/// The holder's guard (`holder_guard`): the todo, its endpoint, the
/// holder and the fence hash of the presented lease token.
pub(super) struct LaneHolder {
    pub id: String,
    pub endpoint_id: String,
    pub owner: String,
    pub lease_token_hash: Option<String>,
}

impl LaneHolder {
    pub(super) fn new(caller: &Caller, id: &str, lease_token: Option<&str>) -> Self {
        Self {
            id: id.to_owned(),
            endpoint_id: caller.endpoint_id.clone(),
            owner: caller.owner(),
            lease_token_hash: lease_token.map(sha256_hex),
        }
    }
}

/// Everything a completion binds.
pub(super) struct LaneFinish {
    pub holder: LaneHolder,
    pub result: Option<String>,
    pub summary: Option<(String, bool)>,
    pub now: Timestamp,
}

/// Everything a heartbeat binds.
pub(super) struct LaneHeartbeat {
    pub holder: LaneHolder,
    pub note: Option<String>,
    pub now: Timestamp,
    pub expires: Timestamp,
}

fn claim_pending_sql(one_queue: bool) -> String {
    numbered(&format!(
        concat!(
            "UPDATE todos SET {set} WHERE id = (SELECT id FROM {from} ",
            "WHERE endpoint_id = $5 AND state = 'pending'{filter} ",
            "ORDER BY created_at, id LIMIT 1) RETURNING ",
            todo_columns!()
        ),
        set = CLAIM_SET,
        // A named queue's claim takes the per-queue pending index by itself;
        // the whole scope's needs naming its index (`Dialect::pending_todos_by_endpoint`).
        from = if one_queue {
            "todos"
        } else {
            Dialect::Sqlite.pending_todos_by_endpoint()
        },
        filter = if one_queue { " AND queue = $6" } else { "" },
    ))
}

static CLAIM_ANY_QUEUE: LazyLock<String> = LazyLock::new(|| claim_pending_sql(false));
static CLAIM_ONE_QUEUE: LazyLock<String> = LazyLock::new(|| claim_pending_sql(true));

// Whether a takeover is due, with the transaction path's own subquery.
static TAKEOVER_ANY_QUEUE: LazyLock<String> =
    LazyLock::new(|| numbered(&oldest_takeover(Dialect::Sqlite, "")));
static TAKEOVER_ONE_QUEUE: LazyLock<String> =
    LazyLock::new(|| numbered(&oldest_takeover(Dialect::Sqlite, " AND queue = $6")));

/// What a claim on the lane found.
#[expect(
    clippy::large_enum_variant,
    reason = "made once per claim and moved once, to its caller; boxing would add an allocation"
)]
pub(super) enum LaneClaimed {
    /// The oldest pending todo, claimed, and its prior attempts.
    Claimed(Todo, Vec<Attempt>),
    /// Nothing pending and nothing to take over.
    Empty,
    /// Nothing pending, but a lapsed lease or an elapsed retry window is
    /// waiting: the transaction path takes it over (and closes the attempt
    /// its holder left open).
    TakeoverDue,
}

const OPEN_ATTEMPT: &str = "INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) \
     VALUES (?1, ?2, ?3, ?4, ?5)";

const PRIOR_ATTEMPTS: &str = concat!(
    "SELECT ",
    attempt_columns!(),
    " FROM todo_attempts WHERE todo_id = ?1 AND ended_at IS NOT NULL ORDER BY seq DESC LIMIT ?2"
);

static COMPLETE: LazyLock<String> = LazyLock::new(|| numbered(&COMPLETE_SQL));

const CLOSE_ATTEMPT: &str = "UPDATE todo_attempts SET ended_at = ?1, outcome = ?2, \
     disposition = ?3, summary = ?4, summary_truncated = ?5 \
     WHERE todo_id = ?6 AND ended_at IS NULL";

const PRUNE_ATTEMPTS: &str = "DELETE FROM todo_attempts WHERE todo_id = ?1 AND ended_at IS NOT NULL \
     AND seq <= (SELECT seq FROM todo_attempts WHERE todo_id = ?1 AND ended_at IS NOT NULL \
     ORDER BY seq DESC LIMIT 1 OFFSET ?2)";

const COUNT_PRUNED: &str = "UPDATE todos SET attempts_pruned = attempts_pruned + ?1 WHERE id = ?2";

static HEARTBEAT: LazyLock<String> = LazyLock::new(|| numbered(&HEARTBEAT_SQL));

const HEARTBEAT_ATTEMPT: &str = "UPDATE todo_attempts SET last_heartbeat_at = ?1, \
     note = COALESCE(?2, note) WHERE todo_id = ?3 AND ended_at IS NULL";

const ENDPOINT_NOTE: &str = "UPDATE endpoints SET last_note = ?1, last_note_at = ?2 WHERE id = ?3";

/// The first row `sql` returns, decoded as a todo.
fn todo_row(
    tx: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> StoreResult<Option<Todo>> {
    let mut stmt = tx.prepare_cached(sql)?;
    let mut found = stmt.query(params)?;
    match found.next()? {
        Some(row) => Ok(Some(rows::todo(&rows::NamedRow::new(row))?)),
        None => Ok(None),
    }
}

/// Keeps the newest [`rules::KEPT_ATTEMPTS`] closed attempts, as
/// `prune_attempts_of` does on the transaction path. Returns how many went.
fn prune(tx: &Connection, todo: &Todo) -> StoreResult<i64> {
    if todo.attempts_total - todo.attempts_pruned <= rules::KEPT_ATTEMPTS {
        return Ok(0);
    }
    let pruned = tx
        .prepare_cached(PRUNE_ATTEMPTS)?
        .execute(params![todo.id, rules::KEPT_ATTEMPTS])? as i64;
    if pruned > 0 {
        tx.prepare_cached(COUNT_PRUNED)?
            .execute(params![pruned, todo.id])?;
    }
    Ok(pruned)
}

/// Claims the oldest pending todo and opens its attempt, in one
/// transaction. When nothing is pending it says whether a takeover is due,
/// so that an empty queue (how every drain ends) costs no second
/// transaction on the sqlx writer connection.
pub(super) fn claim_pending(tx: &Connection, claim: LaneClaim) -> StoreResult<LaneClaimed> {
    let common = (
        claim.now.as_millis(),
        &claim.owner,
        claim.expires.as_millis(),
        &claim.token_hash,
        &claim.endpoint_id,
    );
    let todo = match &claim.queue {
        Some(queue) => todo_row(
            tx,
            &CLAIM_ONE_QUEUE,
            params![common.0, common.1, common.2, common.3, common.4, queue],
        )?,
        None => todo_row(
            tx,
            &CLAIM_ANY_QUEUE,
            params![common.0, common.1, common.2, common.3, common.4],
        )?,
    };
    let Some(todo) = todo else {
        let due = match &claim.queue {
            Some(queue) => tx.prepare_cached(&TAKEOVER_ONE_QUEUE)?.exists(params![
                common.0, common.1, common.2, common.3, common.4, queue
            ])?,
            None => tx
                .prepare_cached(&TAKEOVER_ANY_QUEUE)?
                .exists(params![common.0, common.1, common.2, common.3, common.4])?,
        };
        return Ok(if due {
            LaneClaimed::TakeoverDue
        } else {
            LaneClaimed::Empty
        });
    };
    tx.prepare_cached(OPEN_ATTEMPT)?.execute(params![
        todo.id,
        todo.attempts_total,
        todo.attempt,
        claim.claimant,
        claim.now.as_millis()
    ])?;
    let prior = if todo.attempts_total > 1 {
        let mut stmt = tx.prepare_cached(PRIOR_ATTEMPTS)?;
        let mut found = stmt.query(params![todo.id, rules::PRIOR_ATTEMPTS_ON_CLAIM])?;
        let mut prior = Vec::new();
        while let Some(row) = found.next()? {
            prior.push(rows::attempt(&rows::NamedRow::new(row))?);
        }
        prior
    } else {
        Vec::new()
    };
    Ok(LaneClaimed::Claimed(todo, prior))
}

/// The holder's completion and the closing of its attempt. `None` when the
/// holder's guard matched nothing.
pub(super) fn complete(tx: &Connection, finish: LaneFinish) -> StoreResult<Option<Todo>> {
    let now = finish.now.as_millis();
    let Some(mut todo) = todo_row(
        tx,
        &COMPLETE,
        params![
            finish.result,
            now,
            finish.holder.id,
            finish.holder.endpoint_id,
            finish.holder.owner,
            finish.holder.lease_token_hash
        ],
    )?
    else {
        return Ok(None);
    };
    let (summary, truncated) = match finish.summary {
        Some((text, cut)) => (Some(text), cut),
        None => (None, false),
    };
    tx.prepare_cached(CLOSE_ATTEMPT)?.execute(params![
        now,
        Outcome::Completed.as_str(),
        Disposition::Done.as_str(),
        summary,
        i64::from(truncated),
        todo.id
    ])?;
    todo.attempts_pruned += prune(tx, &todo)?;
    Ok(Some(todo))
}

/// The holder's heartbeat: the lease extended, the attempt's and the
/// endpoint's note stamped. `None` when the holder's guard matched nothing.
pub(super) fn heartbeat(tx: &Connection, beat: LaneHeartbeat) -> StoreResult<Option<Todo>> {
    let now = beat.now.as_millis();
    let Some(todo) = todo_row(
        tx,
        &HEARTBEAT,
        params![
            beat.expires.as_millis(),
            now,
            beat.note,
            beat.holder.id,
            beat.holder.endpoint_id,
            beat.holder.owner,
            beat.holder.lease_token_hash
        ],
    )?
    else {
        return Ok(None);
    };
    tx.prepare_cached(HEARTBEAT_ATTEMPT)?
        .execute(params![now, beat.note, beat.holder.id])?;
    if let Some(note) = &beat.note {
        tx.prepare_cached(ENDPOINT_NOTE)?
            .execute(params![note, now, beat.holder.endpoint_id])?;
    }
    Ok(Some(todo))
}
