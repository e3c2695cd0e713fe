//! Background sweeps. None of these is scoped to a tenant, which is why the
//! contract names them `unscoped_*`. Each takes a batch limit so a tick's
//! work stays bounded, and each batch is claimed with `SKIP LOCKED` on
//! PostgreSQL so instances sweeping at once split the work.

use super::SqlStore;
use super::endpoints::RevokeReason;
use crate::domain::Timestamp;
use crate::domain::todo::{Disposition, Outcome};
use crate::store::StoreResult;
use crate::store::dialect::{Dialect, placeholders};
use crate::store::model::{ReapReport, TodoRef, *};
use crate::store::prelude::*;
use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};
use std::time::Duration;

fn todo_ref(row: &AnyRow) -> TodoRef {
    TodoRef {
        id: row.get("id"),
        endpoint_id: row.get("endpoint_id"),
        queue: row.get("queue"),
    }
}

/// A retention batch's candidates: `$1` the cutoff, `$2` the limit, `$3`…`$5`
/// the cursor (endpoint, creation time, id) it resumes after.
///
/// It reads the listings' index, `todos_by_endpoint_created`, one endpoint
/// at a time from the cursor's, each endpoint's range only up to the cutoff
/// (`endpoint_id = e.id AND created_at < $1`, an index range): a pass reads
/// what it deletes, the old todos it keeps (still live, or finished after
/// the cutoff), and one probe per endpoint — not the todos created since
/// the cutoff, which are most of the history (one range over the whole
/// index from the cursor read them all: the pass's last batch took 175 ms
/// over 1 000 000 todos on PostgreSQL, 89 ms on SQLite, B5). Not an index of
/// its own keyed by `completed_at`: that index took an entry at every
/// completion, on its right-most page from every completing connection at
/// once, and dropping it made the PostgreSQL agent loop ~19 % faster at 16
/// connections (docs/decisions.md, "Retention walks the listings' index"). A
/// todo is finished after it is created, so the creation range holds every
/// todo due. (With clocks skewed between instances a todo may be stamped
/// finished before it was created; it is then pruned one pass later.)
///
/// PostgreSQL runs it as a `LATERAL` subquery per endpoint, on plain index
/// scans ([`RETENTION_PLAN`]): as one range over the index it estimated the
/// two cutoff conditions as independent, expected few matches, and planned a
/// sequential scan and a sort of the whole table for its custom plans
/// (198 ms per batch over 1 000 000 todos). The batch is ordered by endpoint
/// only, which the scan of `endpoints`' key gives without a sort; each
/// endpoint's todos come in the subquery's order. Ordered by the whole key,
/// PostgreSQL sorted each endpoint's rows apart and, to know an endpoint's
/// rows had ended, read on to the next endpoint with any due — past every
/// endpoint when one endpoint filled the batch (10 000 index probes per
/// batch). (Were a batch cut inside an endpoint ever to return other than
/// its first rows, a todo left behind the cursor would wait for the next
/// pass: retention deletes what is at least this old, never earlier.)
/// SQLite reads the endpoints as an `IN` list on the index's first column,
/// one range each, in the order of the `ORDER BY`.
fn prune_candidates_sql(dialect: Dialect) -> String {
    match dialect {
        Dialect::Postgres => format!(
            "SELECT t.id, t.endpoint_id, t.created_at, t.event_id FROM endpoints e \
             CROSS JOIN LATERAL (SELECT id, endpoint_id, created_at, event_id FROM todos \
               WHERE endpoint_id = e.id AND {} \
               ORDER BY created_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) t \
             WHERE e.id >= $3 ORDER BY e.id LIMIT $2",
            DUE_FOR_RETENTION
        ),
        Dialect::Sqlite => format!(
            "SELECT id, endpoint_id, created_at, event_id \
             FROM todos INDEXED BY todos_by_endpoint_created \
             WHERE endpoint_id IN (SELECT id FROM endpoints WHERE id >= $3) AND {} \
             ORDER BY endpoint_id, created_at, id LIMIT $2",
            DUE_FOR_RETENTION
        ),
    }
}

/// The session settings of a retention batch on PostgreSQL: the per-endpoint
/// read above has one good plan, the ordered index scan of each endpoint's
/// range. Estimating the old range as small, the planner otherwise takes a
/// bitmap scan and a sort of all of it, every batch — quadratic in an
/// endpoint's backlog when retention first meets a long history.
const RETENTION_PLAN: &str = "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off";

/// A todo retention deletes: created and finished before the cutoff `$1`,
/// after the cursor `$3`…`$5`.
const DUE_FOR_RETENTION: &str = "created_at < $1 \
     AND (state IN ('done', 'cancelled') OR (state = 'failed' AND next_retry_at IS NULL)) \
     AND completed_at < $1 AND (endpoint_id, created_at, id) > ($3, $4, $5)";

#[async_trait]
impl SweepStore for SqlStore {
    async fn unscoped_reap_lapsed_leases(&self, limit: i64) -> StoreResult<ReapReport> {
        let now = self.now();
        let dead_result = serde_json::json!({
            "error": "lease_expired",
            "message": "the lease lapsed on the last allowed attempt",
        })
        .to_string();
        let mut tx = self.begin().await?;
        let rows = sqlx::query(AssertSqlSafe(format!(
            concat!(
                "UPDATE todos SET state = CASE WHEN ",
                below_attempt_cap!(),
                " THEN 'pending' ELSE 'failed' END, completed_at = CASE WHEN ",
                below_attempt_cap!(),
                " THEN NULL ELSE $1 END, result = CASE WHEN ",
                below_attempt_cap!(),
                " THEN result ELSE $2 END, \
                 owner = NULL, lease_expires_at = NULL, lease_token_hash = NULL, \
                 next_retry_at = NULL, updated_at = $1 \
                 WHERE id IN (SELECT id FROM todos WHERE ",
                lapsed_lease!(),
                " ORDER BY lease_expires_at LIMIT $3{}) \
                 RETURNING id, endpoint_id, queue, state, attempts_total, attempts_pruned"
            ),
            self.dialect.skip_locked()
        )))
        .bind(now.as_millis())
        .bind(dead_result)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        let mut report = ReapReport::default();
        for row in &rows {
            if row.get::<String, _>("state") == "pending" {
                report.requeued.push(todo_ref(row));
            } else {
                report.dead_lettered.push(todo_ref(row));
            }
        }
        for (refs, disposition) in [
            (&report.requeued, Disposition::Requeued),
            (&report.dead_lettered, Disposition::DeadLettered),
        ] {
            if refs.is_empty() {
                continue;
            }
            let sql = format!(
                "UPDATE todo_attempts SET ended_at = $1, outcome = $2, disposition = $3 \
                 WHERE ended_at IS NULL AND todo_id IN ({})",
                placeholders(4, refs.len())
            );
            let mut q = sqlx::query(AssertSqlSafe(sql))
                .bind(now.as_millis())
                .bind(Outcome::Reaped.as_str())
                .bind(disposition.as_str());
            for r in refs {
                q = q.bind(r.id.clone());
            }
            q.execute(&mut *tx).await?;
        }
        // Closing an attempt can take a todo past the kept history, as in
        // every other place that closes one.
        for row in &rows {
            Self::prune_attempts_of(
                &mut tx,
                &row.get::<String, _>("id"),
                row.get("attempts_total"),
                row.get("attempts_pruned"),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(report)
    }

    async fn unscoped_schedule_due_retries(&self, limit: i64) -> StoreResult<Vec<TodoRef>> {
        let now = self.now();
        let rows = sqlx::query(AssertSqlSafe(format!(
            "UPDATE todos SET state = 'pending', owner = NULL, next_retry_at = NULL, updated_at = $1 \
             WHERE id IN (SELECT id FROM todos WHERE state = 'failed' \
               AND next_retry_at IS NOT NULL AND next_retry_at <= $1 \
               ORDER BY next_retry_at LIMIT $2{}) \
             RETURNING id, endpoint_id, queue",
            self.dialect.skip_locked()
        )))
        .bind(now.as_millis())
        .bind(limit)
        .fetch_all(self.writer()?)
        .await?;
        Ok(rows.iter().map(todo_ref).collect())
    }

    async fn unscoped_promote_due_delayed(&self, limit: i64) -> StoreResult<Vec<TodoRef>> {
        let now = self.now();
        let rows = sqlx::query(AssertSqlSafe(format!(
            "UPDATE todos SET state = 'pending', updated_at = $1 \
             WHERE id IN (SELECT id FROM {due} WHERE state = 'delayed' AND run_at <= $1 \
               ORDER BY run_at LIMIT $2{skip}) AND state = 'delayed' \
             RETURNING id, endpoint_id, queue",
            due = self.dialect.todos_by_index("todos_delayed_due"),
            skip = self.dialect.skip_locked()
        )))
        .bind(now.as_millis())
        .bind(limit)
        .fetch_all(self.writer()?)
        .await?;
        Ok(rows.iter().map(todo_ref).collect())
    }

    async fn unscoped_next_delayed_at(&self) -> StoreResult<Option<Timestamp>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT run_at FROM {due} WHERE state = 'delayed' ORDER BY run_at LIMIT 1",
            due = self.dialect.todos_by_index("todos_delayed_due"),
        )))
        .fetch_optional(self.reader()?)
        .await?;
        Ok(row
            .map(|r| r.try_get::<i64, _>("run_at"))
            .transpose()?
            .map(Timestamp::from_millis))
    }

    async fn unscoped_prune_terminal_todos(
        &self,
        older_than: Duration,
        limit: i64,
        after: &RetentionCursor,
    ) -> StoreResult<Pruned> {
        let cutoff = self.now().saturating_sub(older_than);
        let mut tx = self.begin().await?;
        if self.dialect == Dialect::Postgres {
            sqlx::raw_sql(RETENTION_PLAN).execute(&mut *tx).await?;
        }
        let doomed = sqlx::query(AssertSqlSafe(prune_candidates_sql(self.dialect)))
            .bind(cutoff.as_millis())
            .bind(limit)
            .bind(after.endpoint_id.clone())
            .bind(after.created_at.as_millis())
            .bind(after.id.clone())
            .fetch_all(&mut *tx)
            .await?;
        let Some(last) = doomed.last() else {
            return Ok(Pruned {
                deleted: 0,
                resume_after: None,
            });
        };
        let resume_after = RetentionCursor {
            endpoint_id: last.get("endpoint_id"),
            created_at: Timestamp::from_millis(last.get("created_at")),
            id: last.get("id"),
        };
        let ids: Vec<String> = doomed.iter().map(|r| r.get("id")).collect();
        let mut delete = sqlx::query(AssertSqlSafe(format!(
            "DELETE FROM todos WHERE id IN ({})",
            placeholders(1, ids.len())
        )));
        for id in &ids {
            delete = delete.bind(id.clone());
        }
        delete.execute(&mut *tx).await?;
        let event_ids: Vec<String> = doomed
            .iter()
            .filter_map(|r| r.get::<Option<String>, _>("event_id"))
            .collect();
        if !event_ids.is_empty() {
            let sql = format!(
                "DELETE FROM intake_events WHERE id IN ({})",
                placeholders(1, event_ids.len())
            );
            let mut q = sqlx::query(AssertSqlSafe(sql));
            for id in event_ids {
                q = q.bind(id);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(Pruned {
            deleted: ids.len() as u64,
            resume_after: Some(resume_after),
        })
    }

    async fn unscoped_expire_endpoints(&self, limit: i64) -> StoreResult<Vec<Revoked>> {
        let now = self.now();
        let due: Vec<String> = sqlx::query(
            "SELECT id FROM endpoints \
             WHERE state = 'active' AND expires_at IS NOT NULL AND expires_at <= $1 \
             ORDER BY expires_at LIMIT $2",
        )
        .bind(now.as_millis())
        .bind(limit)
        .fetch_all(self.writer()?)
        .await?
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect();
        let mut expired = Vec::with_capacity(due.len());
        for endpoint_id in due {
            let mut tx = self.begin().await?;
            // Guarded again: another instance may have expired it meanwhile.
            let flipped = sqlx::query(
                "UPDATE endpoints SET state = 'revoked', revoked_at = $1 \
                 WHERE id = $2 AND state = 'active' AND expires_at <= $1 RETURNING id",
            )
            .bind(now.as_millis())
            .bind(&endpoint_id)
            .fetch_optional(&mut *tx)
            .await?;
            if flipped.is_none() {
                tx.rollback().await?;
                continue;
            }
            let dead_lettered =
                Self::dead_letter_live_todos(&mut tx, &endpoint_id, now, RevokeReason::Expired)
                    .await?;
            tx.commit().await?;
            self.endpoints_changed();
            expired.push(Revoked {
                endpoint_id,
                revoked_at: now,
                dead_lettered,
            });
        }
        Ok(expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::sqlite_plan;

    #[test]
    fn on_sqlite_retention_reads_each_endpoints_old_range_without_sorting() {
        let plan = sqlite_plan(&prune_candidates_sql(Dialect::Sqlite));
        assert!(
            plan.iter().any(|step| step.contains(
                "USING INDEX todos_by_endpoint_created (endpoint_id=? AND created_at<?)"
            )),
            "{plan:#?}"
        );
        assert!(
            !plan.iter().any(|step| step.contains("TEMP B-TREE")),
            "sorts: {plan:#?}"
        );
    }
}
