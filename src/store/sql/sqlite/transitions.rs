//! The agent loop's transitions on SQLite's writer thread ([`super::lane`]):
//! `claim_next`'s pending path, `complete`, `fail`, `release` and
//! `heartbeat`, each one job inside the thread's write transaction (all or
//! nothing: an `Err` undoes the job's writes), with the same guards and the
//! same rows written as the sqlx transaction paths beside them. A job
//! answers `None` when its guard matched nothing; the caller then asks why
//! on the transaction path, which re-checks under its own guards (as
//! `postgres/transitions.rs` does on PostgreSQL). Every text is
//! [`statements`]'s, numbered `?n`.

use std::sync::LazyLock;

use rusqlite::{Connection, OptionalExtension, params};

use super::lane::numbered;
use crate::domain::Timestamp;
use crate::domain::backoff::after_failure;
use crate::domain::ids::sha256_hex;
use crate::domain::todo::{self as rules, Disposition, Outcome};
use crate::store::dialect::Dialect;
use crate::store::sql::statements::{self, ClaimScope};
use crate::store::{Attempt, Caller, StoreResult, Todo, rows};

/// Everything a claim binds, owned: it travels to the writer thread.
pub(in crate::store::sql) struct LaneClaim {
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
pub(in crate::store::sql) struct LaneHolder {
    pub id: String,
    pub endpoint_id: String,
    pub owner: String,
    pub lease_token_hash: Option<String>,
}

impl LaneHolder {
    pub(in crate::store::sql) fn new(caller: &Caller, id: &str, lease_token: Option<&str>) -> Self {
        Self {
            id: id.to_owned(),
            endpoint_id: caller.endpoint_id.clone(),
            owner: caller.owner(),
            lease_token_hash: lease_token.map(sha256_hex),
        }
    }
}

/// Everything a completion binds.
pub(in crate::store::sql) struct LaneFinish {
    pub holder: LaneHolder,
    pub result: Option<String>,
    pub summary: Option<(String, bool)>,
    pub now: Timestamp,
}

/// Everything a heartbeat binds.
pub(in crate::store::sql) struct LaneHeartbeat {
    pub holder: LaneHolder,
    pub note: Option<String>,
    pub now: Timestamp,
    pub expires: Timestamp,
}

// The transaction path's own texts, numbered for rusqlite.
static CLAIM_ANY_QUEUE: LazyLock<String> = LazyLock::new(|| {
    numbered(statements::claim_pending(
        Dialect::Sqlite,
        ClaimScope::AnyQueue,
    ))
});
static CLAIM_ONE_QUEUE: LazyLock<String> = LazyLock::new(|| {
    numbered(statements::claim_pending(
        Dialect::Sqlite,
        ClaimScope::OneQueue,
    ))
});

// Whether a takeover is due, with the transaction path's own subquery.
static TAKEOVER_ANY_QUEUE: LazyLock<String> = LazyLock::new(|| {
    numbered(statements::oldest_takeover(
        Dialect::Sqlite,
        ClaimScope::AnyQueue,
    ))
});
static TAKEOVER_ONE_QUEUE: LazyLock<String> = LazyLock::new(|| {
    numbered(statements::oldest_takeover(
        Dialect::Sqlite,
        ClaimScope::OneQueue,
    ))
});

/// What a claim on the lane found.
#[expect(
    clippy::large_enum_variant,
    reason = "made once per claim and moved once, to its caller; boxing would add an allocation"
)]
pub(in crate::store::sql) enum LaneClaimed {
    /// The oldest pending todo, claimed, and its prior attempts.
    Claimed(Todo, Vec<Attempt>),
    /// Nothing pending and nothing to take over.
    Empty,
    /// Nothing pending, but a lapsed lease or an elapsed retry window is
    /// waiting: the transaction path takes it over (and closes the attempt
    /// its holder left open).
    TakeoverDue,
}

static OPEN_ATTEMPT: LazyLock<String> = LazyLock::new(|| numbered(statements::OPEN_ATTEMPT));
static WINDOW_LEVELS: LazyLock<String> =
    LazyLock::new(|| numbered(statements::window_levels(Dialect::Sqlite)));
static ROLL_WINDOW: LazyLock<String> =
    LazyLock::new(|| numbered(statements::roll_window(Dialect::Sqlite)));
static CHARGE_WINDOW: LazyLock<String> =
    LazyLock::new(|| numbered(&statements::CHARGE_WINDOW_ON_ONE_WRITER));
static PRIOR_ATTEMPTS: LazyLock<String> = LazyLock::new(|| numbered(statements::PRIOR_ATTEMPTS));
static COMPLETE: LazyLock<String> = LazyLock::new(|| numbered(&statements::COMPLETE));
static CLOSE_ATTEMPT: LazyLock<String> = LazyLock::new(|| numbered(statements::CLOSE_ATTEMPT));
static FAIL_HELD: LazyLock<String> = LazyLock::new(|| numbered(&statements::FAIL_HELD));
static FAIL: LazyLock<String> = LazyLock::new(|| numbered(statements::FAIL));
static PRUNE_ATTEMPTS: LazyLock<String> = LazyLock::new(|| numbered(statements::PRUNE_ATTEMPTS));
static COUNT_PRUNED: LazyLock<String> = LazyLock::new(|| numbered(statements::COUNT_PRUNED));
static HEARTBEAT: LazyLock<String> = LazyLock::new(|| numbered(&statements::HEARTBEAT));
static RELEASE: LazyLock<String> = LazyLock::new(|| numbered(&statements::RELEASE));
static HEARTBEAT_ATTEMPT: LazyLock<String> =
    LazyLock::new(|| numbered(statements::HEARTBEAT_ATTEMPT));
static ENDPOINT_NOTE: LazyLock<String> = LazyLock::new(|| numbered(statements::ENDPOINT_NOTE));

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

/// Starts the claimed todo's windows anew where they ended (`rolls`: some
/// did) and charges the claim to each ([`statements::roll_window`],
/// [`statements::CHARGE_WINDOW_ON_ONE_WRITER`]).
fn charge_window(tx: &Connection, now: Timestamp, todo: &Todo, rolls: bool) -> StoreResult<()> {
    if rolls {
        tx.prepare_cached(&ROLL_WINDOW)?.execute(params![
            now.as_millis(),
            todo.endpoint_id,
            todo.queue
        ])?;
    }
    tx.prepare_cached(&CHARGE_WINDOW)?.execute(params![
        now.as_millis(),
        todo.endpoint_id,
        todo.queue
    ])?;
    Ok(())
}

/// Keeps the newest [`rules::KEPT_ATTEMPTS`] closed attempts, as
/// `prune_attempts_of` does on the transaction path. Returns how many went.
fn prune(tx: &Connection, todo: &Todo) -> StoreResult<i64> {
    if todo.attempts_total - todo.attempts_pruned <= rules::KEPT_ATTEMPTS {
        return Ok(0);
    }
    let pruned = tx
        .prepare_cached(&PRUNE_ATTEMPTS)?
        .execute(params![todo.id, rules::KEPT_ATTEMPTS])? as i64;
    if pruned > 0 {
        tx.prepare_cached(&COUNT_PRUNED)?
            .execute(params![pruned, todo.id])?;
    }
    Ok(pruned)
}

/// Claims the oldest pending todo and opens its attempt, in one
/// transaction. When nothing is pending it says whether a takeover is due,
/// so that an empty queue (how every drain ends) costs no second
/// transaction on the sqlx writer connection.
pub(in crate::store::sql) fn claim_pending(
    tx: &Connection,
    claim: LaneClaim,
) -> StoreResult<LaneClaimed> {
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
    // The writer thread runs one claim at a time, so the window the claim
    // read as open is still open: its shard has room for the charge, and
    // no other claim rolls a window between this read and the charge. A
    // todo without a window (most) skips the roll and the charge: run with
    // nothing to do, they cost the writer ~5 µs a claim (B10 "off").
    let (levels, ended): (i64, i64) = tx.prepare_cached(&WINDOW_LEVELS)?.query_row(
        params![todo.endpoint_id, todo.queue, claim.now.as_millis()],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    if levels > 0 {
        charge_window(tx, claim.now, &todo, ended > 0)?;
    }
    tx.prepare_cached(&OPEN_ATTEMPT)?.execute(params![
        todo.id,
        todo.attempts_total,
        todo.attempt,
        claim.claimant,
        claim.now.as_millis()
    ])?;
    let prior = if todo.attempts_total > 1 {
        let mut stmt = tx.prepare_cached(&PRIOR_ATTEMPTS)?;
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
pub(in crate::store::sql) fn complete(
    tx: &Connection,
    finish: LaneFinish,
) -> StoreResult<Option<Todo>> {
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
    let done = Disposition::Done;
    close_attempt(
        tx,
        &mut todo,
        finish.now,
        Outcome::Completed,
        done,
        finish.summary,
    )?;
    Ok(Some(todo))
}

/// The holder's completion and, once it matched, the caller's claim of its
/// next todo, in one job (`complete` with `next`). `None` when the holder's
/// guard matched nothing: nothing was claimed.
pub(in crate::store::sql) fn complete_then_claim(
    tx: &Connection,
    finish: LaneFinish,
    claim: LaneClaim,
) -> StoreResult<Option<(Todo, LaneClaimed)>> {
    let Some(done) = complete(tx, finish)? else {
        return Ok(None);
    };
    Ok(Some((done, claim_pending(tx, claim)?)))
}

/// Closes the ended todo's open attempt (outcome, disposition, summary) and
/// keeps its history to [`rules::KEPT_ATTEMPTS`].
fn close_attempt(
    tx: &Connection,
    todo: &mut Todo,
    now: Timestamp,
    outcome: Outcome,
    disposition: Disposition,
    summary: Option<(String, bool)>,
) -> StoreResult<()> {
    let (summary, truncated) = match summary {
        Some((text, cut)) => (Some(text), cut),
        None => (None, false),
    };
    tx.prepare_cached(&CLOSE_ATTEMPT)?.execute(params![
        now.as_millis(),
        outcome.as_str(),
        disposition.as_str(),
        summary,
        i64::from(truncated),
        todo.id
    ])?;
    todo.attempts_pruned += prune(tx, todo)?;
    Ok(())
}

/// The holder's failure: a retry after its backoff while attempts remain,
/// else a dead letter ([`after_failure`]), and the closing of its attempt.
/// `None` when the holder's guard matched nothing. The lane's one writer
/// makes the read and the update one decision (the transaction path locks
/// the row for it).
pub(in crate::store::sql) fn fail(
    tx: &Connection,
    finish: LaneFinish,
) -> StoreResult<Option<Todo>> {
    let now = finish.now;
    let held = tx
        .prepare_cached(&FAIL_HELD)?
        .query_row(
            params![
                finish.holder.id,
                finish.holder.endpoint_id,
                finish.holder.owner,
                finish.holder.lease_token_hash
            ],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
        )
        .optional()?;
    let Some((attempt, max_attempts)) = held else {
        return Ok(None);
    };
    let after = after_failure(attempt, max_attempts, now);
    let Some(mut todo) = todo_row(
        tx,
        &FAIL,
        params![
            finish.result,
            after.next_retry_at().map(Timestamp::as_millis),
            after.completed_at(now).map(Timestamp::as_millis),
            now.as_millis(),
            finish.holder.id
        ],
    )?
    else {
        return Ok(None);
    };
    let disposition = after.disposition();
    close_attempt(
        tx,
        &mut todo,
        now,
        Outcome::Failed,
        disposition,
        finish.summary,
    )?;
    Ok(Some(todo))
}

/// The holder's release: the todo pending again and its attempt closed as
/// released (requeued). `None` when the holder's guard matched nothing.
pub(in crate::store::sql) fn release(
    tx: &Connection,
    holder: LaneHolder,
    summary: Option<(String, bool)>,
    now: Timestamp,
) -> StoreResult<Option<Todo>> {
    let Some(mut todo) = todo_row(
        tx,
        &RELEASE,
        params![
            now.as_millis(),
            holder.id,
            holder.endpoint_id,
            holder.owner,
            holder.lease_token_hash
        ],
    )?
    else {
        return Ok(None);
    };
    let requeued = Disposition::Requeued;
    close_attempt(tx, &mut todo, now, Outcome::Released, requeued, summary)?;
    Ok(Some(todo))
}

/// The holder's heartbeat: the lease extended, the attempt's and the
/// endpoint's note stamped. `None` when the holder's guard matched nothing.
pub(in crate::store::sql) fn heartbeat(
    tx: &Connection,
    beat: LaneHeartbeat,
) -> StoreResult<Option<Todo>> {
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
    tx.prepare_cached(&HEARTBEAT_ATTEMPT)?
        .execute(params![now, beat.note, beat.holder.id])?;
    if let Some(note) = &beat.note {
        tx.prepare_cached(&ENDPOINT_NOTE)?
            .execute(params![note, now, beat.holder.endpoint_id])?;
    }
    Ok(Some(todo))
}
