//! Outbound notify hooks and their bounded delivery log.

use super::SqlStore;
use crate::domain::Timestamp;
use crate::domain::hook::KEPT_DELIVERIES;
use crate::mint::new_id;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::{StoreError, StoreResult};
use async_trait::async_trait;
use sqlx::Row;
use sqlx::any::AnyRow;

const COLUMNS: &str = "h.id, h.endpoint_id, h.human_id, h.url, h.consecutive_failures, \
    h.disabled_reason, h.disabled_at, h.created_at";

fn hook(row: &AnyRow) -> StoreResult<Hook> {
    Ok(Hook {
        id: row.try_get("id")?,
        endpoint_id: row.try_get("endpoint_id")?,
        human_id: row.try_get("human_id")?,
        url: row.try_get("url")?,
        consecutive_failures: row.try_get("consecutive_failures")?,
        disabled_reason: row.try_get("disabled_reason")?,
        disabled_at: row
            .try_get::<Option<i64>, _>("disabled_at")?
            .map(Timestamp::from_millis),
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
    })
}

fn target(row: &AnyRow) -> StoreResult<HookTarget> {
    Ok(HookTarget {
        hook: hook(row)?,
        secret: row.try_get("secret")?,
        endpoint_slug: row.try_get("slug")?,
    })
}

fn delivery(row: &AnyRow) -> StoreResult<HookDelivery> {
    Ok(HookDelivery {
        hook_id: row.try_get("hook_id")?,
        at: Timestamp::from_millis(row.try_get("at")?),
        event: row.try_get("type")?,
        todo_id: row.try_get("todo_id")?,
        outcome: row.try_get("outcome")?,
        status: row.try_get("status")?,
        error: row.try_get("error")?,
        duration_ms: row.try_get("duration_ms")?,
        attempt: row.try_get("attempt")?,
    })
}

#[async_trait]
impl HookStore for SqlStore {
    async fn create_hook(
        &self,
        human_id: &str,
        endpoint_id: &str,
        url: &str,
        secret: &str,
    ) -> StoreResult<Hook> {
        let id = new_id("hk");
        // Guarded on the endpoint being the human's and active, in the one statement.
        let inserted = sqlx::query(
            "INSERT INTO hooks (id, endpoint_id, human_id, url, secret, created_at) \
             SELECT $1, e.id, e.human_id, $2, $3, $4 FROM endpoints e \
             WHERE e.id = $5 AND e.human_id = $6 AND e.state = 'active'",
        )
        .bind(&id)
        .bind(url)
        .bind(secret)
        .bind(self.now().as_millis())
        .bind(endpoint_id)
        .bind(human_id)
        .execute(self.writer()?)
        .await?;
        if inserted.rows_affected() == 0 {
            // Missing, foreign, or revoked: tell which as the other records do.
            let endpoint = self.get_endpoint(human_id, endpoint_id).await?;
            if !endpoint.is_active() {
                return Err(StoreError::EndpointRevoked);
            }
            return Err(StoreError::NotFound);
        }
        self.get_hook(human_id, &id).await
    }

    async fn get_hook(&self, human_id: &str, id: &str) -> StoreResult<Hook> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM hooks h WHERE h.id = $1 AND h.human_id = $2"
        )))
        .bind(id)
        .bind(human_id)
        .fetch_optional(self.writer()?)
        .await?;
        row.as_ref().map(hook).unwrap_or(Err(StoreError::NotFound))
    }

    async fn list_hooks(&self, human_id: &str, endpoint_id: &str) -> StoreResult<Vec<Hook>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM hooks h WHERE h.endpoint_id = $1 AND h.human_id = $2 \
             ORDER BY h.created_at, h.id"
        )))
        .bind(endpoint_id)
        .bind(human_id)
        .fetch_all(self.reader()?)
        .await?;
        rows.iter().map(hook).collect()
    }

    async fn delete_hook(&self, human_id: &str, id: &str) -> StoreResult<()> {
        let deleted = sqlx::query("DELETE FROM hooks WHERE id = $1 AND human_id = $2")
            .bind(id)
            .bind(human_id)
            .execute(self.writer()?)
            .await?;
        if deleted.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    async fn enable_hook(&self, human_id: &str, id: &str) -> StoreResult<Hook> {
        let updated = sqlx::query(
            "UPDATE hooks SET consecutive_failures = 0, disabled_reason = NULL, \
             disabled_at = NULL WHERE id = $1 AND human_id = $2",
        )
        .bind(id)
        .bind(human_id)
        .execute(self.writer()?)
        .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        self.get_hook(human_id, id).await
    }

    async fn hook_target(&self, human_id: &str, id: &str) -> StoreResult<HookTarget> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS}, h.secret, e.slug FROM hooks h \
             JOIN endpoints e ON e.id = h.endpoint_id WHERE h.id = $1 AND h.human_id = $2"
        )))
        .bind(id)
        .bind(human_id)
        .fetch_optional(self.writer()?)
        .await?;
        row.as_ref()
            .map(target)
            .unwrap_or(Err(StoreError::NotFound))
    }

    async fn list_hook_deliveries(
        &self,
        human_id: &str,
        hook_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<HookDelivery>> {
        let rows = sqlx::query(
            "SELECT d.hook_id, d.at, d.type, d.todo_id, d.outcome, d.status, d.error, \
             d.duration_ms, d.attempt FROM hook_deliveries d \
             JOIN hooks h ON h.id = d.hook_id \
             WHERE d.hook_id = $1 AND h.human_id = $2 ORDER BY d.at DESC, d.id DESC LIMIT $3",
        )
        .bind(hook_id)
        .bind(human_id)
        .bind(limit)
        .fetch_all(self.reader()?)
        .await?;
        rows.iter().map(delivery).collect()
    }

    async fn unscoped_enabled_hooks(&self, endpoint_id: &str) -> StoreResult<Vec<HookTarget>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS}, h.secret, e.slug FROM hooks h \
             JOIN endpoints e ON e.id = h.endpoint_id \
             WHERE h.endpoint_id = $1 AND h.disabled_at IS NULL AND e.state = 'active' \
             ORDER BY h.created_at, h.id"
        )))
        .bind(endpoint_id)
        .fetch_all(self.reader()?)
        .await?;
        rows.iter().map(target).collect()
    }

    async fn unscoped_hooked_endpoints(&self) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(
            "SELECT DISTINCT h.endpoint_id FROM hooks h \
             JOIN endpoints e ON e.id = h.endpoint_id \
             WHERE h.disabled_at IS NULL AND e.state = 'active' ORDER BY h.endpoint_id",
        )
        .fetch_all(self.reader()?)
        .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("endpoint_id").map_err(Into::into))
            .collect()
    }

    async fn unscoped_record_hook_delivery(&self, d: &HookDelivery) -> StoreResult<()> {
        let writer = self.writer()?;
        let inserted = sqlx::query(
            "INSERT INTO hook_deliveries (id, hook_id, at, type, todo_id, outcome, status, \
             error, duration_ms, attempt) \
             SELECT $1, h.id, $2, $3, $4, $5, $6, $7, $8, $9 FROM hooks h WHERE h.id = $10",
        )
        .bind(new_id("hd"))
        .bind(d.at.as_millis())
        .bind(&d.event)
        .bind(d.todo_id.as_deref())
        .bind(&d.outcome)
        .bind(d.status)
        .bind(d.error.as_deref())
        .bind(d.duration_ms)
        .bind(d.attempt)
        .bind(&d.hook_id)
        .execute(writer)
        .await?;
        if inserted.rows_affected() == 0 {
            // Deleted meanwhile: nothing to log.
            return Ok(());
        }
        // Keep the last KEPT_DELIVERIES.
        sqlx::query(
            "DELETE FROM hook_deliveries WHERE hook_id = $1 AND id NOT IN (\
               SELECT id FROM hook_deliveries WHERE hook_id = $1 \
               ORDER BY at DESC, id DESC LIMIT $2)",
        )
        .bind(&d.hook_id)
        .bind(KEPT_DELIVERIES)
        .execute(writer)
        .await?;
        Ok(())
    }

    async fn unscoped_hook_succeeded(&self, hook_id: &str) -> StoreResult<()> {
        sqlx::query(
            "UPDATE hooks SET consecutive_failures = 0 WHERE id = $1 AND consecutive_failures <> 0",
        )
        .bind(hook_id)
        .execute(self.writer()?)
        .await?;
        Ok(())
    }

    async fn unscoped_hook_failed(
        &self,
        hook_id: &str,
        disable_after: i64,
        reason: &str,
    ) -> StoreResult<HookFailure> {
        let writer = self.writer()?;
        let row = sqlx::query(
            "UPDATE hooks SET consecutive_failures = consecutive_failures + 1 \
             WHERE id = $1 RETURNING consecutive_failures",
        )
        .bind(hook_id)
        .fetch_optional(writer)
        .await?;
        let Some(row) = row else {
            return Err(StoreError::NotFound);
        };
        let failures: i64 = row.try_get("consecutive_failures")?;
        let disabled = sqlx::query(
            "UPDATE hooks SET disabled_at = $1, disabled_reason = $2 \
             WHERE id = $3 AND disabled_at IS NULL AND consecutive_failures >= $4",
        )
        .bind(self.now().as_millis())
        .bind(reason)
        .bind(hook_id)
        .bind(disable_after)
        .execute(writer)
        .await?;
        Ok(HookFailure {
            consecutive_failures: failures,
            disabled_now: disabled.rows_affected() == 1,
        })
    }
}
