//! Doorbell accounting (`docs/doorbells.md`): the re-ring sweep's one
//! statement that selects due todos and counts the ring.

use super::SqlStore;
use super::statements;
use crate::domain::Timestamp;
use crate::store::dialect::{Dialect, json_list};
use crate::store::model::{RingCandidate, *};
use crate::store::prelude::*;
use crate::store::rows::todo_columns;
use crate::store::{StoreError, StoreResult};
use async_trait::async_trait;
use sqlx::{AnyConnection, AssertSqlSafe, Row};
use std::collections::HashSet;
use std::time::Duration;

/// Ring k (k = ring_attempts + 1) of a pending, push-eligible todo is due at
/// `COALESCE(last_ringed_at, created_at) + step(k)`. `$1` is now, `$2` the
/// budget, and the steps are bound from `$steps_at`.
///
/// Written as one range per ring count (`ring_attempts = i AND clock <=
/// now minus step(i)`) rather than `clock + CASE ring_attempts … END <= now`:
/// the same rows, but each range is a range of the `todos_ring_clock` index
/// (PostgreSQL's migration 0008, SQLite's 0010), so a tick reads only what
/// is due. The budget bound is implied by the ranges and kept as the rule's
/// plain statement.
fn due_condition(steps_at: usize, steps: usize) -> String {
    let ranges: Vec<String> = (0..steps)
        .map(|i| format!("({})", due_range(i, steps_at)))
        .collect();
    format!("{} AND ({})", *RINGABLE, ranges.join(" OR "))
}

/// When a todo's ring clock started: its last ring (or digest), else its
/// creation. Its next ring is due a step after it; the sweep serves the
/// longest-waiting first.
const RING_CLOCK: &str = "COALESCE(last_ringed_at, created_at)";

/// A todo that may ring at all: pending, from intake, below the budget
/// (`$2`), and not paused.
static RINGABLE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "state = 'pending' AND event_id IS NOT NULL AND ring_attempts < $2 AND {}",
        statements::NOT_PAUSED
    )
});

/// Ring `i + 1` is due: the todo has rung `i` times and its ring clock is at
/// least step(i + 1) old (that step bound at `$steps_at + i`, now at `$1`).
fn due_range(i: usize, steps_at: usize) -> String {
    format!(
        "ring_attempts = {i} AND {RING_CLOCK} <= $1 - ${}",
        steps_at + i
    )
}

/// The due todos' `endpoint_id`s with their ring clocks, longest-waiting
/// first, at most `$3` of them, for the due read: one index range scan of
/// `todos_ring_clock` per ring count, each in clock order and cut at `$3`,
/// merged. So a tick reads as many entries as it asks for, however many
/// rings are due (B5: with 5 000 due, reading them all and ranking them per
/// endpoint took 12–30 ms of a 45 ms tick on PostgreSQL).
///
/// On PostgreSQL plain index scans, never a bitmap scan: a bitmap scan never
/// marks an index entry dead. A ring moves a todo's key, so each ring leaves
/// an entry pointing at the old row version; a plain index scan marks those
/// as it meets them (the connection runs without bitmap scans, `hot.rs`), so
/// the next tick skips them (before: ~5 ms instead of ~0.5 with 5 000 todos just
/// rung among 1 000 000 finished ones, B5).
fn due_by_clock(steps_at: usize, steps: usize) -> String {
    // Each range a subquery of its own: SQLite allows no ORDER BY or LIMIT
    // on a bare member of a compound SELECT.
    let ranges: Vec<String> = (0..steps)
        .map(|i| {
            format!(
                "SELECT * FROM (SELECT endpoint_id, {RING_CLOCK} AS clock, id FROM todos \
                 WHERE {} AND {} ORDER BY clock, id LIMIT $3) AS due_{i}",
                *RINGABLE,
                due_range(i, steps_at)
            )
        })
        .collect();
    format!("{} ORDER BY clock, id LIMIT $3", ranges.join(" UNION ALL "))
}

/// A ring candidate from a row with its columns (`id, endpoint_id, queue,
/// title, kind, source, ring_attempts, created_at, last_ringed_at`).
fn ring_candidate(row: &sqlx::any::AnyRow) -> StoreResult<RingCandidate> {
    Ok(RingCandidate {
        id: row.try_get("id")?,
        endpoint_id: row.try_get("endpoint_id")?,
        queue: row.try_get("queue")?,
        title: row.try_get("title")?,
        kind: row.try_get("kind")?,
        source: row.try_get("source")?,
        ring_attempts: row.try_get("ring_attempts")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        last_ringed_at: row
            .try_get::<Option<i64>, _>("last_ringed_at")?
            .map(Timestamp::from_millis),
    })
}

#[async_trait]
impl RingStore for SqlStore {
    async fn unscoped_digest_todos(&self, endpoint_id: &str) -> StoreResult<Vec<DigestTodo>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT id, queue, created_at FROM {todos} \
             WHERE endpoint_id = $1 AND state = 'pending' AND event_id IS NOT NULL \
             ORDER BY created_at, id",
            todos = self.dialect.pending_todos_by_endpoint(),
        )))
        .bind(endpoint_id)
        .fetch_all(self.reader()?)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DigestTodo {
                    id: r.try_get("id")?,
                    queue: r.try_get("queue")?,
                    created_at: Timestamp::from_millis(r.try_get("created_at")?),
                })
            })
            .collect()
    }

    async fn unscoped_mark_rung(&self, ids: &[String], at: Timestamp) -> StoreResult<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        // Exactly the ids the digest counted, and only while still pending:
        // never a predicate re-read, never ring_attempts. Looked up by key:
        // as `IN (subquery)` PostgreSQL planned a hash join over a scan of
        // every todo when the table was small (~4 ms a digest, B5's
        // evaluator), and that grows with the table.
        let sql = format!(
            "UPDATE todos SET last_ringed_at = $1 WHERE state = 'pending' AND id {}",
            self.dialect.in_short_json_list(2)
        );
        let done = sqlx::query(AssertSqlSafe(sql))
            .bind(at.as_millis())
            .bind(json_list(ids))
            .execute(self.writer()?)
            .await?;
        Ok(done.rows_affected())
    }

    /// A todo by id with what a doorbell needs, if it may ring (pending, from
    /// authenticated intake, on an active endpoint).
    async fn unscoped_ringable_todo(&self, id: &str) -> StoreResult<Option<RingCandidate>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT todos.id, todos.endpoint_id, todos.queue, todos.title, todos.kind, \
               todos.source, todos.ring_attempts, todos.created_at, todos.last_ringed_at \
             FROM todos JOIN endpoints e ON e.id = todos.endpoint_id \
             WHERE todos.id = $1 AND todos.state = 'pending' AND todos.event_id IS NOT NULL \
               AND e.state = 'active' AND {}",
            statements::NOT_PAUSED
        )))
        .bind(id)
        .fetch_optional(self.reader()?)
        .await?;
        row.as_ref().map(ring_candidate).transpose()
    }

    /// Which of these endpoints have a ring due, in the order the claim
    /// takes them (by each one's longest-waiting due ring): the first
    /// `limit`, so a sweep with nothing due does no more than one read.
    async fn unscoped_endpoints_with_due_rings(
        &self,
        endpoint_ids: &[String],
        steps: &[Duration],
        limit: i64,
    ) -> StoreResult<Vec<String>> {
        if endpoint_ids.is_empty() || steps.is_empty() || limit <= 0 {
            return Ok(Vec::new());
        }
        let now = self.now();
        match self.dialect {
            Dialect::Sqlite => {
                let mut conn = self.reader()?.acquire().await?;
                due_endpoints_in_rounds(&mut conn, now, endpoint_ids, steps, limit).await
            }
            // On the hot path's connections: no bitmap scans there (see
            // `due_by_clock`). A failed statement drops its connection.
            Dialect::Postgres => {
                let mut conn = self.hot_connection().await?;
                let found =
                    due_endpoints_in_rounds(&mut conn, now, endpoint_ids, steps, limit).await?;
                self.put_hot_connection(conn);
                Ok(found)
            }
        }
    }

    async fn unscoped_claim_due_rings(
        &self,
        endpoint_ids: &[String],
        steps: &[Duration],
        limit: i64,
    ) -> StoreResult<Vec<RingCandidate>> {
        if endpoint_ids.is_empty() || steps.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now().as_millis();
        // Params: $1 now, $2 budget, $3 limit, then one per step, then the ids.
        let due = due_condition(4, steps.len());
        let ids_at = 4 + steps.len();
        let ids_list = self.dialect.json_text_list(ids_at);
        let sql = format!(
            "UPDATE todos SET ring_attempts = ring_attempts + 1, last_ringed_at = $1, \
               prev_ringed_at = last_ringed_at \
             WHERE id IN ( \
               SELECT id FROM ( \
                 SELECT id, {RING_CLOCK} AS clock, \
                   ROW_NUMBER() OVER (PARTITION BY endpoint_id ORDER BY {RING_CLOCK}, id) AS turn \
                 FROM {todos} WHERE endpoint_id IN ({ids}) AND {due} \
               ) ranked ORDER BY turn, clock, id LIMIT $3 \
             ) AND {due} \
             RETURNING {cols}",
            todos = self.dialect.pending_todos_by_endpoint(),
            ids = ids_list,
            cols = todo_columns!(),
        );
        let mut q = sqlx::query(AssertSqlSafe(sql))
            .bind(now)
            .bind(steps.len() as i64)
            .bind(limit);
        for step in steps {
            q = q.bind(step.as_millis() as i64);
        }
        let rows = q
            .bind(json_list(endpoint_ids))
            .fetch_all(self.writer()?)
            .await?;
        let mut out: Vec<RingCandidate> = rows
            .iter()
            .map(ring_candidate)
            .collect::<Result<_, StoreError>>()?;
        // RETURNING has no order, nor the clocks the rows had: write the
        // doorbells round-robin across endpoints, oldest todo first within
        // one (which rang is the statement's choice above).
        let mut turns: std::collections::HashMap<String, i64> = Default::default();
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        let mut keyed: Vec<(i64, RingCandidate)> = out
            .drain(..)
            .map(|c| {
                let turn = turns.entry(c.endpoint_id.clone()).or_insert(0);
                *turn += 1;
                (*turn, c)
            })
            .collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.id.cmp(&b.1.id)));
        Ok(keyed.into_iter().map(|(_, c)| c).collect())
    }

    /// One guarded statement: the first caller for this readiness (the
    /// todo's current `attempt`) gets the candidate, everyone else nothing.
    ///
    /// The claim is a hint (it decides who rings, not what is owed), so its
    /// commit does not wait for the WAL flush: a push on PostgreSQL waits for
    /// one flush (the todo) instead of two. After a database crash a lost
    /// claim rings the todo once more (the catch-up's unrung read).
    async fn unscoped_claim_ready_ring(&self, id: &str) -> StoreResult<Option<RingCandidate>> {
        let (before, from) = self.dialect.unflushed_update();
        let row = sqlx::query(AssertSqlSafe(format!(
            "{before}UPDATE todos SET ready_rung_attempt = attempt{from} \
             WHERE id = $1 AND state = 'pending' AND event_id IS NOT NULL \
               AND (ready_rung_attempt IS NULL OR ready_rung_attempt <> attempt) \
               AND endpoint_id IN (SELECT id FROM endpoints WHERE state = 'active') \
               AND {not_paused} \
             RETURNING id, endpoint_id, queue, title, kind, source, ring_attempts, created_at, \
               last_ringed_at",
            not_paused = statements::NOT_PAUSED,
        )))
        .bind(id)
        .fetch_optional(self.writer()?)
        .await?;
        row.as_ref().map(ring_candidate).transpose()
    }

    /// Guarded by the count and the instant the sweep's statement wrote: a
    /// ring counted since (another tick) or a digest since (its own clock)
    /// is left alone.
    async fn unscoped_uncount_ring(
        &self,
        id: &str,
        ring_attempts: i64,
        counted_at: Timestamp,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE todos SET ring_attempts = ring_attempts - 1, \
               last_ringed_at = prev_ringed_at, prev_ringed_at = NULL \
             WHERE id = $1 AND state = 'pending' AND ring_attempts = $2 \
               AND ring_attempts > 0 AND last_ringed_at = $3",
        )
        .bind(id)
        .bind(ring_attempts)
        .bind(counted_at.as_millis())
        .execute(self.writer()?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn unscoped_unrung_since(
        &self,
        endpoint_ids: &[String],
        since: Timestamp,
        limit: i64,
    ) -> StoreResult<Vec<String>> {
        if endpoint_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id FROM {todos} WHERE endpoint_id IN ({ids}) AND state = 'pending' \
               AND event_id IS NOT NULL AND ready_rung_attempt IS NULL \
               AND ring_attempts = 0 AND last_ringed_at IS NULL \
               AND COALESCE(run_at, created_at) >= $1 \
             ORDER BY COALESCE(run_at, created_at), id LIMIT $2",
            todos = self.dialect.pending_todos_by_endpoint(),
            ids = self.dialect.json_text_list(3),
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(since.as_millis())
            .bind(limit)
            .bind(json_list(endpoint_ids))
            .fetch_all(self.reader()?)
            .await?;
        Ok(rows.iter().map(|r| r.get::<String, _>(0)).collect())
    }
}

/// The due read: the due todos longest-waiting first ([`due_by_clock`]),
/// each endpoint named at its first one, the named endpoints kept. Reads
/// `limit` due todos, and four times as many each round while the ones read
/// name too few of `endpoint_ids` (an endpoint with many due rings, or due
/// rings of endpoints hosted elsewhere) and more are due: work in
/// proportion to what one tick rings when what is due is hosted here, and
/// at worst a few reads of everything due.
async fn due_endpoints_in_rounds(
    conn: &mut AnyConnection,
    now: Timestamp,
    endpoint_ids: &[String],
    steps: &[Duration],
    limit: i64,
) -> StoreResult<Vec<String>> {
    let named: HashSet<&str> = endpoint_ids.iter().map(String::as_str).collect();
    let wanted = usize::try_from(limit).unwrap_or(usize::MAX);
    let sql = due_by_clock(4, steps.len());
    let mut todos = limit;
    loop {
        // Params: $1 now, $2 budget, $3 how many todos, then one per step.
        let mut q = sqlx::query(AssertSqlSafe(sql.as_str()))
            .bind(now.as_millis())
            .bind(steps.len() as i64)
            .bind(todos);
        for step in steps {
            q = q.bind(step.as_millis() as i64);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        let mut found: Vec<String> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for row in &rows {
            let endpoint: &str = row.try_get(0)?;
            if named.contains(endpoint) && seen.insert(endpoint) {
                found.push(endpoint.to_owned());
                if found.len() == wanted {
                    break;
                }
            }
        }
        let exhausted = usize::try_from(todos).map_or(true, |t| rows.len() < t);
        if found.len() >= wanted || exhausted {
            return Ok(found);
        }
        todos = todos.saturating_mul(4);
    }
}
