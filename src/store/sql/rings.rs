//! Doorbell accounting (`04-doorbells.md`): the re-ring sweep's one
//! statement that selects due todos and counts the ring.

use std::time::Duration;

use sqlx::AssertSqlSafe;
use sqlx::Row;

use super::SqlStore;
use crate::store::StoreError;
use crate::store::StoreResult;
use crate::store::dialect::json_list;
use crate::store::model::RingCandidate;
use crate::store::rows::todo_columns;

/// Ring k (k = ring_attempts + 1) of a pending, push-eligible todo is due at
/// `COALESCE(last_ringed_at, created_at) + step(k)`. `$1` is now, `$2` the
/// budget, and the steps are bound from `$steps_at`.
fn due_condition(steps_at: usize, steps: usize) -> String {
    let arms: String = (0..steps)
        .map(|i| format!(" WHEN {i} THEN ${}", steps_at + i))
        .collect();
    format!(
        "state = 'pending' AND event_id IS NOT NULL AND ring_attempts < $2 \
         AND COALESCE(last_ringed_at, created_at) + CASE ring_attempts{arms} END <= $1"
    )
}

impl SqlStore {
    /// Which of these endpoints have a ring due: one cheap read, so a sweep
    /// with nothing due does no more.
    pub(super) async fn select_endpoints_with_due_rings(
        &self,
        endpoint_ids: &[String],
        steps: &[Duration],
    ) -> StoreResult<Vec<String>> {
        if endpoint_ids.is_empty() || steps.is_empty() {
            return Ok(Vec::new());
        }
        // Params: $1 now, $2 budget, then one per step, then the ids.
        let sql = format!(
            "SELECT DISTINCT endpoint_id FROM todos WHERE endpoint_id IN ({ids}) AND {due}",
            ids = self.dialect.json_text_list(3 + steps.len()),
            due = due_condition(3, steps.len()),
        );
        let mut q = sqlx::query(AssertSqlSafe(sql))
            .bind(self.now().as_millis())
            .bind(steps.len() as i64);
        for step in steps {
            q = q.bind(step.as_millis() as i64);
        }
        let rows = q
            .bind(json_list(endpoint_ids))
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.iter().map(|r| r.get::<String, _>(0)).collect())
    }

    pub(super) async fn claim_due_rings(
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
            "UPDATE todos SET ring_attempts = ring_attempts + 1, last_ringed_at = $1 \
             WHERE id IN ( \
               SELECT id FROM ( \
                 SELECT id, ROW_NUMBER() OVER (PARTITION BY endpoint_id ORDER BY created_at, id) AS turn \
                 FROM todos WHERE endpoint_id IN ({ids}) AND {due} \
               ) ranked ORDER BY turn, id LIMIT $3 \
             ) AND {due} \
             RETURNING {cols}",
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
            .fetch_all(&self.writer)
            .await?;
        let mut out: Vec<RingCandidate> = rows
            .iter()
            .map(|row| {
                Ok(RingCandidate {
                    id: row.try_get("id")?,
                    endpoint_id: row.try_get("endpoint_id")?,
                    queue: row.try_get("queue")?,
                    title: row.try_get("title")?,
                    kind: row.try_get("kind")?,
                    source: row.try_get("source")?,
                    ring_attempts: row.try_get("ring_attempts")?,
                    created_at: crate::domain::Timestamp::from_millis(row.try_get("created_at")?),
                })
            })
            .collect::<Result<_, StoreError>>()?;
        // RETURNING has no order: restore the round-robin one.
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

    /// A todo by id with what a doorbell needs, if it may ring (pending, from
    /// authenticated intake, on an active endpoint).
    pub(super) async fn select_ringable(&self, id: &str) -> StoreResult<Option<RingCandidate>> {
        let row = sqlx::query(
            "SELECT t.id, t.endpoint_id, t.queue, t.title, t.kind, t.source, t.ring_attempts, \
               t.created_at FROM todos t JOIN endpoints e ON e.id = t.endpoint_id \
             WHERE t.id = $1 AND t.state = 'pending' AND t.event_id IS NOT NULL \
               AND e.state = 'active'",
        )
        .bind(id)
        .fetch_optional(&self.reader)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(RingCandidate {
            id: row.try_get("id")?,
            endpoint_id: row.try_get("endpoint_id")?,
            queue: row.try_get("queue")?,
            title: row.try_get("title")?,
            kind: row.try_get("kind")?,
            source: row.try_get("source")?,
            ring_attempts: row.try_get("ring_attempts")?,
            created_at: crate::domain::Timestamp::from_millis(row.try_get("created_at")?),
        }))
    }

    /// One guarded statement: the first caller for this readiness (the
    /// todo's current `attempt`) gets the candidate, everyone else nothing.
    pub(super) async fn claim_ready_ring(&self, id: &str) -> StoreResult<Option<RingCandidate>> {
        let row = sqlx::query(
            "UPDATE todos SET ready_rung_attempt = attempt \
             WHERE id = $1 AND state = 'pending' AND event_id IS NOT NULL \
               AND (ready_rung_attempt IS NULL OR ready_rung_attempt <> attempt) \
               AND endpoint_id IN (SELECT id FROM endpoints WHERE state = 'active') \
             RETURNING id, endpoint_id, queue, title, kind, source, ring_attempts, created_at",
        )
        .bind(id)
        .fetch_optional(&self.writer)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(RingCandidate {
            id: row.try_get("id")?,
            endpoint_id: row.try_get("endpoint_id")?,
            queue: row.try_get("queue")?,
            title: row.try_get("title")?,
            kind: row.try_get("kind")?,
            source: row.try_get("source")?,
            ring_attempts: row.try_get("ring_attempts")?,
            created_at: crate::domain::Timestamp::from_millis(row.try_get("created_at")?),
        }))
    }

    pub(super) async fn select_unrung_since(
        &self,
        endpoint_ids: &[String],
        since: crate::domain::Timestamp,
        limit: i64,
    ) -> StoreResult<Vec<String>> {
        if endpoint_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id FROM todos WHERE endpoint_id IN ({ids}) AND state = 'pending' \
               AND event_id IS NOT NULL AND ready_rung_attempt IS NULL \
               AND ring_attempts = 0 AND last_ringed_at IS NULL AND created_at >= $1 \
             ORDER BY created_at, id LIMIT $2",
            ids = self.dialect.json_text_list(3),
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(since.as_millis())
            .bind(limit)
            .bind(json_list(endpoint_ids))
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.iter().map(|r| r.get::<String, _>(0)).collect())
    }
}
