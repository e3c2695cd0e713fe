//! Admission limits: setting them, and reading them with their usage. The
//! limits are enforced by the claim statements (`statements.rs`).

use std::time::Duration;

use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::SqlStore;
use crate::domain::Invalid;
use crate::domain::Timestamp;
use crate::domain::admission::{Limits, Usage};
use crate::store::dialect::Dialect;
use crate::store::model::Admission;
use crate::store::prelude::*;
use crate::store::{StoreError, StoreResult};

/// The endpoint's own row has this queue name.
const WHOLE_ENDPOINT: &str = "";

fn admission(row: &AnyRow) -> StoreResult<Admission> {
    let queue: String = row.try_get("queue")?;
    let optional = |column: &str| row.try_get::<Option<i64>, _>(column);
    Ok(Admission {
        queue: (queue != WHOLE_ENDPOINT).then_some(queue),
        limits: Limits {
            paused: row.try_get::<i64, _>("paused")? != 0,
            max_in_flight: optional("max_in_flight")?,
            window: optional("window_ms")?.map(|ms| Duration::from_millis(ms as u64)),
            max_claims_per_window: optional("max_claims_per_window")?,
        },
        usage: Usage {
            in_flight: row.try_get("in_flight")?,
            window_started_at: optional("window_started_at")?.map(Timestamp::from_millis),
            window_claims: row.try_get("window_claims")?,
        },
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

#[async_trait]
impl AdmissionStore for SqlStore {
    async fn set_admission(
        &self,
        human_id: &str,
        endpoint_id: &str,
        queue: Option<&str>,
        limits: &Limits,
    ) -> StoreResult<Option<Admission>> {
        limits.validate()?;
        let mut tx = self.begin().await?;
        let endpoint = sqlx::query(
            "SELECT state, scope_queues FROM endpoints WHERE id = $1 AND human_id = $2",
        )
        .bind(endpoint_id)
        .bind(human_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound)?;
        if endpoint.get::<String, _>("state") != "active" {
            return Err(StoreError::EndpointRevoked);
        }
        if let Some(queue) = queue {
            let scope: Vec<String> =
                serde_json::from_str(&endpoint.get::<String, _>("scope_queues"))
                    .unwrap_or_default();
            if !scope.iter().any(|q| q == queue) {
                return Err(Invalid::new(
                    "queue",
                    format!(
                        "{queue:?} is not in the endpoint's scope ({})",
                        scope.join(", ")
                    ),
                )
                .into());
            }
        }
        let queue_key = queue.unwrap_or(WHOLE_ENDPOINT);
        if limits.is_open() {
            sqlx::query("DELETE FROM admission WHERE endpoint_id = $1 AND queue = $2")
                .bind(endpoint_id)
                .bind(queue_key)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            return Ok(None);
        }
        let window_ms = limits.window.map(|w| w.as_millis() as i64);
        // The window's count survives a change of its limit (a new limit is
        // no fresh budget); a new length starts a new window.
        sqlx::query(
            "INSERT INTO admission (endpoint_id, queue, paused, max_in_flight, window_ms, \
               max_claims_per_window, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (endpoint_id, queue) DO UPDATE SET paused = excluded.paused, \
               max_in_flight = excluded.max_in_flight, \
               max_claims_per_window = excluded.max_claims_per_window, \
               window_started_at = CASE WHEN admission.window_ms = excluded.window_ms \
                 THEN admission.window_started_at END, \
               window_claims = CASE WHEN admission.window_ms = excluded.window_ms \
                 THEN admission.window_claims ELSE 0 END, \
               window_ms = excluded.window_ms, updated_at = excluded.updated_at",
        )
        .bind(endpoint_id)
        .bind(queue_key)
        .bind(i64::from(limits.paused))
        .bind(limits.max_in_flight)
        .bind(window_ms)
        .bind(limits.max_claims_per_window)
        .bind(self.now().as_millis())
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(AssertSqlSafe(select(self.dialect, true)))
            .bind(endpoint_id)
            .bind(queue_key)
            .fetch_one(&mut *tx)
            .await?;
        let set = admission(&row)?;
        tx.commit().await?;
        Ok(Some(set))
    }

    async fn unscoped_paused(&self, endpoint_id: &str, queue: &str) -> StoreResult<bool> {
        let found = sqlx::query(
            "SELECT 1 AS paused FROM admission WHERE endpoint_id = $1 AND queue IN ('', $2) \
             AND (paused = 1 OR max_in_flight = 0 OR max_claims_per_window = 0) LIMIT 1",
        )
        .bind(endpoint_id)
        .bind(queue)
        .fetch_optional(self.reader()?)
        .await?;
        Ok(found.is_some())
    }

    async fn unscoped_admission(&self, endpoint_id: &str) -> StoreResult<Vec<Admission>> {
        let rows = sqlx::query(AssertSqlSafe(select(self.dialect, false)))
            .bind(endpoint_id)
            .fetch_all(self.reader()?)
            .await?;
        rows.iter().map(admission).collect()
    }
}

/// An admission row's columns and its level's live claims (read through the
/// claimed index, never the history).
macro_rules! admission_select {
    ($where:literal) => {
        concat!(
            "SELECT a.queue, a.paused, a.max_in_flight, a.window_ms, a.max_claims_per_window, \
               a.window_started_at, a.window_claims, a.updated_at, \
               (SELECT count(*) FROM {claimed} WHERE f.endpoint_id = a.endpoint_id \
                 AND f.state = 'claimed' AND (a.queue = '' OR f.queue = a.queue)) AS in_flight \
             FROM admission a WHERE ",
            $where
        )
    };
}

/// The live claims as `f`; SQLite is told their index (it has no
/// statistics and could otherwise walk the endpoint's history).
fn select(dialect: Dialect, one: bool) -> String {
    let claimed = match dialect {
        Dialect::Sqlite => "todos AS f INDEXED BY todos_claimed_by_endpoint",
        Dialect::Postgres => "todos AS f",
    };
    let sql = if one {
        admission_select!("a.endpoint_id = $1 AND a.queue = $2")
    } else {
        admission_select!("a.endpoint_id = $1 ORDER BY a.queue")
    };
    sql.replace("{claimed}", claimed)
}
