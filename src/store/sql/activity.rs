//! A queue's activity over time (`domain::activity`): each instance adds
//! what it did, bucket by bucket; charts read one key range per endpoint.

use async_trait::async_trait;
use sqlx::{AssertSqlSafe, Row};

use super::SqlStore;
use crate::domain::Timestamp;
use crate::domain::activity::{Activity, ActivityRange, LatencyHistogram};
use crate::store::StoreResult;
use crate::store::dialect::json_list;
use crate::store::model::QueueActivity;
use crate::store::prelude::*;

#[async_trait]
impl ActivityStore for SqlStore {
    /// One transaction, rows in key order (two instances adding the same
    /// buckets lock them in the same order). Counts are added by the
    /// statement; the histograms are read under the row's lock and written
    /// back merged. A row of an endpoint deleted meanwhile is skipped.
    async fn add_queue_activity(&self, rows: &[QueueActivity]) -> StoreResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut sorted: Vec<&QueueActivity> = rows.iter().collect();
        sorted.sort_by(|a, b| {
            (
                &a.endpoint_id,
                a.range.span_seconds(),
                a.bucket_at,
                &a.queue,
            )
                .cmp(&(
                    &b.endpoint_id,
                    b.range.span_seconds(),
                    b.bucket_at,
                    &b.queue,
                ))
        });
        let mut tx = self.begin().await?;
        for row in sorted {
            let a = &row.activity;
            let inserted = sqlx::query(
                "INSERT INTO queue_activity (endpoint_id, span_seconds, bucket_at, queue) \
                 SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM endpoints WHERE id = $1) \
                 ON CONFLICT (endpoint_id, span_seconds, bucket_at, queue) DO NOTHING",
            )
            .bind(&row.endpoint_id)
            .bind(row.range.span_seconds())
            .bind(row.bucket_at.as_millis())
            .bind(&row.queue)
            .execute(&mut *tx)
            .await?;
            let _ = inserted;
            let read = format!(
                "SELECT claim_latency, complete_latency FROM queue_activity \
                 WHERE endpoint_id = $1 AND span_seconds = $2 AND bucket_at = $3 AND queue = $4{}",
                self.dialect.for_update()
            );
            let Some(current) = sqlx::query(AssertSqlSafe(read))
                .bind(&row.endpoint_id)
                .bind(row.range.span_seconds())
                .bind(row.bucket_at.as_millis())
                .bind(&row.queue)
                .fetch_optional(&mut *tx)
                .await?
            else {
                continue;
            };
            let mut claim =
                LatencyHistogram::decode(&current.try_get::<String, _>("claim_latency")?);
            claim.merge(&a.claim_latency);
            let mut complete =
                LatencyHistogram::decode(&current.try_get::<String, _>("complete_latency")?);
            complete.merge(&a.complete_latency);
            sqlx::query(
                "UPDATE queue_activity SET created = created + $5, completed = completed + $6, \
                   failed = failed + $7, dead_lettered = dead_lettered + $8, \
                   claim_latency = $9, complete_latency = $10 \
                 WHERE endpoint_id = $1 AND span_seconds = $2 AND bucket_at = $3 AND queue = $4",
            )
            .bind(&row.endpoint_id)
            .bind(row.range.span_seconds())
            .bind(row.bucket_at.as_millis())
            .bind(&row.queue)
            .bind(a.created as i64)
            .bind(a.completed as i64)
            .bind(a.failed as i64)
            .bind(a.dead_lettered as i64)
            .bind(claim.encode())
            .bind(complete.encode())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn queue_activity(
        &self,
        endpoint_ids: &[String],
        queue: Option<&str>,
        range: ActivityRange,
        since: Timestamp,
    ) -> StoreResult<Vec<QueueActivity>> {
        if endpoint_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT endpoint_id, queue, bucket_at, created, completed, failed, dead_lettered, \
               claim_latency, complete_latency FROM queue_activity \
             WHERE endpoint_id {} AND span_seconds = $2 AND bucket_at >= $3 \
               AND ($4 = '' OR queue = $4) \
             ORDER BY endpoint_id, bucket_at, queue",
            self.dialect.in_short_json_list(1)
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(json_list(endpoint_ids))
            .bind(range.span_seconds())
            .bind(since.as_millis())
            .bind(queue.unwrap_or(""))
            .fetch_all(self.reader()?)
            .await?;
        rows.iter()
            .map(|row| {
                let count = |column: &str| row.try_get::<i64, _>(column).map(|n| n.max(0) as u64);
                Ok(QueueActivity {
                    endpoint_id: row.try_get("endpoint_id")?,
                    queue: row.try_get("queue")?,
                    range,
                    bucket_at: Timestamp::from_millis(row.try_get("bucket_at")?),
                    activity: Activity {
                        created: count("created")?,
                        completed: count("completed")?,
                        failed: count("failed")?,
                        dead_lettered: count("dead_lettered")?,
                        claim_latency: LatencyHistogram::decode(
                            &row.try_get::<String, _>("claim_latency")?,
                        ),
                        complete_latency: LatencyHistogram::decode(
                            &row.try_get::<String, _>("complete_latency")?,
                        ),
                    },
                })
            })
            .collect()
    }

    async fn unscoped_dead_letters_by_queue(
        &self,
        endpoint_id: &str,
    ) -> StoreResult<Vec<(String, i64)>> {
        let rows = sqlx::query(
            "SELECT queue, COUNT(*) AS n FROM todos \
             WHERE endpoint_id = $1 AND state = 'failed' AND next_retry_at IS NULL \
             GROUP BY queue ORDER BY queue",
        )
        .bind(endpoint_id)
        .fetch_all(self.reader()?)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("queue")?, row.try_get("n")?)))
            .collect()
    }

    async fn unscoped_prune_queue_activity(&self) -> StoreResult<u64> {
        let now = self.now();
        let mut deleted = 0;
        for range in ActivityRange::ALL {
            deleted += sqlx::query(
                "DELETE FROM queue_activity WHERE span_seconds = $1 AND bucket_at < $2",
            )
            .bind(range.span_seconds())
            .bind(now.as_millis() - range.keep_millis())
            .execute(self.writer()?)
            .await?
            .rows_affected();
        }
        Ok(deleted)
    }
}
