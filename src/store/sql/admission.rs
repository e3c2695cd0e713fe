//! Admission limits: setting them, and reading them with their usage. The
//! limits are enforced by the claim statements (`statements.rs`).

use std::time::Duration;

use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::{Any, AssertSqlSafe, Row, Transaction};

use super::SqlStore;
use super::statements;
use crate::domain::Invalid;
use crate::domain::Timestamp;
use crate::domain::admission::{Limits, Usage, spread_window_claims};
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
            for table in ["admission", "admission_windows"] {
                sqlx::query(AssertSqlSafe(format!(
                    "DELETE FROM {table} WHERE endpoint_id = $1 AND queue = $2"
                )))
                .bind(endpoint_id)
                .bind(queue_key)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            return Ok(None);
        }
        let spent = self.window_spent(&mut tx, endpoint_id, queue_key).await?;
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
        self.respread_window(&mut tx, endpoint_id, queue_key, limits, spent)
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

impl SqlStore {
    /// The claims charged to a level's running window, its shard rows
    /// locked first (PostgreSQL) so that no claim charges them between this
    /// read and [`Self::respread_window`]'s rewrite.
    async fn window_spent(
        &self,
        tx: &mut Transaction<'static, Any>,
        endpoint_id: &str,
        queue: &str,
    ) -> StoreResult<i64> {
        sqlx::query(
            "UPDATE admission_windows SET claims = claims WHERE endpoint_id = $1 AND queue = $2",
        )
        .bind(endpoint_id)
        .bind(queue)
        .execute(&mut **tx)
        .await?;
        let spent = sqlx::query(AssertSqlSafe(format!(
            "SELECT {claims} AS spent FROM admission a WHERE a.endpoint_id = $1 AND a.queue = $2",
            claims = statements::window_claims("a"),
        )))
        .bind(endpoint_id)
        .bind(queue)
        .fetch_optional(&mut **tx)
        .await?;
        Ok(match spent {
            Some(row) => row.try_get("spent")?,
            None => 0,
        })
    }

    /// Rewrites a level's window shards for its limits as set: the claims
    /// the running window has spent (`spent`; none when a new window
    /// length started a new window) spread over the shards by their new
    /// shares (`domain::admission::spread_window_claims`), so a limit change
    /// neither forgets claims nor lets the shards take more than the budget.
    async fn respread_window(
        &self,
        tx: &mut Transaction<'static, Any>,
        endpoint_id: &str,
        queue: &str,
        limits: &Limits,
        spent: i64,
    ) -> StoreResult<()> {
        sqlx::query("DELETE FROM admission_windows WHERE endpoint_id = $1 AND queue = $2")
            .bind(endpoint_id)
            .bind(queue)
            .execute(&mut **tx)
            .await?;
        let (Some(_), Some(budget)) = (limits.window, limits.max_claims_per_window) else {
            return Ok(());
        };
        let started: Option<i64> = sqlx::query(
            "SELECT window_started_at FROM admission WHERE endpoint_id = $1 AND queue = $2",
        )
        .bind(endpoint_id)
        .bind(queue)
        .fetch_one(&mut **tx)
        .await?
        .try_get("window_started_at")?;
        let spent = if started.is_some() { spent } else { 0 };
        let shards = statements::window_shards(self.dialect);
        for (shard, claims) in spread_window_claims(spent, budget, shards)
            .into_iter()
            .enumerate()
        {
            sqlx::query(
                "INSERT INTO admission_windows (endpoint_id, queue, shard, window_started_at, \
                   claims) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(endpoint_id)
            .bind(queue)
            .bind(shard as i64)
            .bind(started)
            .bind(claims)
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }
}

/// An admission row's columns and its level's live claims (read through the
/// claimed index, never the history).
macro_rules! admission_select {
    ($where:literal) => {
        concat!(
            "SELECT a.queue, a.paused, a.max_in_flight, a.window_ms, a.max_claims_per_window, \
               a.window_started_at, {window_claims} AS window_claims, a.updated_at, \
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
        .replace("{window_claims}", &statements::window_claims("a"))
}
