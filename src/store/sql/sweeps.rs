//! Background sweeps. None of these is scoped to a tenant, which is why the
//! contract names them `unscoped_*`. Each takes a batch limit so a tick's
//! work stays bounded, and each batch is claimed with `SKIP LOCKED` on
//! PostgreSQL so instances sweeping at once split the work.

use super::SqlStore;
use super::endpoints::RevokeReason;
use crate::domain::todo::{Disposition, Outcome};
use crate::store::StoreResult;
use crate::store::dialect::placeholders;
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
            "UPDATE todos SET \
               state = CASE WHEN attempt < max_attempts THEN 'pending' ELSE 'failed' END, \
               completed_at = CASE WHEN attempt < max_attempts THEN NULL ELSE $1 END, \
               result = CASE WHEN attempt < max_attempts THEN result ELSE $2 END, \
               owner = NULL, lease_expires_at = NULL, lease_token_hash = NULL, \
               next_retry_at = NULL, updated_at = $1 \
             WHERE id IN (SELECT id FROM todos WHERE state = 'claimed' AND lease_expires_at <= $1 \
               ORDER BY lease_expires_at LIMIT $3{}) \
             RETURNING id, endpoint_id, queue, state, attempts_total, attempts_pruned",
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

    async fn unscoped_prune_terminal_todos(
        &self,
        older_than: Duration,
        limit: i64,
    ) -> StoreResult<u64> {
        let cutoff = self.now().saturating_sub(older_than);
        let mut tx = self.begin().await?;
        // `completed_at` is when a todo became terminal (done, dead letter or cancelled);
        // pending and claimed todos never match.
        let rows = sqlx::query(AssertSqlSafe(format!(
            "DELETE FROM todos WHERE id IN (SELECT id FROM todos \
               WHERE (state IN ('done', 'cancelled') OR (state = 'failed' AND next_retry_at IS NULL)) \
                 AND completed_at < $1 \
               ORDER BY completed_at LIMIT $2{}) \
             RETURNING event_id",
            self.dialect.skip_locked()
        )))
        .bind(cutoff.as_millis())
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        let event_ids: Vec<String> = rows
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
        Ok(rows.len() as u64)
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
