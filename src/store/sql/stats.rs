//! What `/metrics` reads from the database at scrape time: queue-wide counts
//! and the stored liveness inputs of active endpoints, one query each.

use super::SqlStore;
use crate::domain::Timestamp;
use crate::domain::todo::TodoState;
use crate::store::StoreResult;
use crate::store::model::{AgentKind, LivenessInputs, QueueStats};
use crate::store::prelude::*;
use async_trait::async_trait;
use sqlx::Row;

#[async_trait]
impl StatsStore for SqlStore {
    /// One aggregate over the whole todos table. The pending, claimed and
    /// failed counts are small; `done` is not (it holds everything finished
    /// within the retention window), so this is a full scan whose cost grows
    /// with retention. Acceptable at scrape intervals of seconds for now; a
    /// maintained counter table would make it constant if it ever matters.
    async fn unscoped_queue_stats(&self) -> StoreResult<QueueStats> {
        let rows = sqlx::query(
            "SELECT state, COUNT(*) AS n, \
               SUM(CASE WHEN state = 'failed' AND next_retry_at IS NULL THEN 1 ELSE 0 END) AS dead, \
               MIN(CASE WHEN state = 'pending' THEN created_at END) AS oldest \
             FROM todos GROUP BY state",
        )
        .fetch_all(self.reader()?)
        .await?;
        let mut stats = QueueStats::default();
        for row in rows {
            let state: String = row.try_get("state")?;
            // The schema's CHECK allows only the four states.
            let Ok(state) = TodoState::parse_field(&state, "state") else {
                continue;
            };
            stats.by_state.set(state, row.try_get("n")?);
            stats.dead_letters += row.try_get::<Option<i64>, _>("dead")?.unwrap_or(0);
            if let Some(oldest) = row.try_get::<Option<i64>, _>("oldest")? {
                stats.oldest_pending_created_at = Some(Timestamp::from_millis(oldest));
            }
        }
        Ok(stats)
    }

    /// Active endpoints with their agent's kind and interval, last seen, the
    /// presence last recorded, and whether they hold a live claim.
    async fn unscoped_liveness_inputs(&self, limit: i64) -> StoreResult<Vec<LivenessInputs>> {
        let rows = sqlx::query(
            "SELECT e.id, e.last_seen_at, e.default_lease_ttl_seconds, e.presence_seen, \
               a.kind AS agent_kind, a.expected_interval_seconds, \
               CASE WHEN EXISTS (SELECT 1 FROM todos t WHERE t.endpoint_id = e.id \
                 AND t.state = 'claimed' AND t.lease_expires_at > $1) THEN 1 ELSE 0 END AS holds_claim \
             FROM endpoints e JOIN agents a ON a.id = e.agent_id \
             WHERE e.state = 'active' ORDER BY e.id LIMIT $2",
        )
        .bind(self.now().as_millis())
        .bind(limit.max(0))
        .fetch_all(self.reader()?)
        .await?;
        rows.iter()
            .map(|row| {
                let kind: String = row.try_get("agent_kind")?;
                let presence: String = row.try_get("presence_seen")?;
                Ok(LivenessInputs {
                    endpoint_id: row.try_get("id")?,
                    // The schema's CHECK allows only the three kinds.
                    agent_kind: AgentKind::parse(&kind).unwrap_or(AgentKind::Session),
                    agent_expected_interval_seconds: row.try_get("expected_interval_seconds")?,
                    default_lease_ttl_seconds: row.try_get("default_lease_ttl_seconds")?,
                    last_seen_at: row
                        .try_get::<Option<i64>, _>("last_seen_at")?
                        .map(Timestamp::from_millis),
                    presence_out: presence == "out",
                    holds_claim: row.try_get::<i64, _>("holds_claim")? != 0,
                })
            })
            .collect()
    }
}
