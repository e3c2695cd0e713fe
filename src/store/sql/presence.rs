//! Presence inputs and the transition ledger on the endpoint row (`05-presence.md`).

use super::SqlStore;
use crate::domain::Timestamp;
use crate::domain::presence::{Override, Presence};
use crate::store::dialect::json_list;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::rows::endpoint_columns;
use crate::store::{StoreError, StoreResult, rows};
use async_trait::async_trait;
use sqlx::AssertSqlSafe;

#[async_trait]
impl PresenceStore for SqlStore {
    async fn set_presence_override(
        &self,
        endpoint_id: &str,
        o: &Override,
    ) -> StoreResult<Endpoint> {
        let updated = sqlx::query(
            "UPDATE endpoints SET presence_override = $1, override_until = $2, \
               override_set_at = $3, override_by = $4, presence_recheck_at = NULL \
             WHERE id = $5 AND state = 'active'",
        )
        .bind(o.value.as_str())
        .bind(o.until.map(Timestamp::as_millis))
        .bind(o.set_at.as_millis())
        .bind(o.by.to_string())
        .bind(endpoint_id)
        .execute(self.writer()?)
        .await?;
        self.endpoints_changed();
        if updated.rows_affected() == 0 {
            self.unscoped_get_endpoint(endpoint_id).await?;
            return Err(StoreError::EndpointRevoked);
        }
        self.unscoped_get_endpoint(endpoint_id).await
    }

    async fn clear_presence_override(
        &self,
        endpoint_id: &str,
        only_if_set_at: Option<Timestamp>,
    ) -> StoreResult<bool> {
        let cleared = sqlx::query(
            "UPDATE endpoints SET presence_override = NULL, override_until = NULL, \
               override_set_at = NULL, override_by = NULL, presence_recheck_at = NULL \
             WHERE id = $1 AND presence_override IS NOT NULL \
               AND ($2 IS NULL OR override_set_at = $2)",
        )
        .bind(endpoint_id)
        .bind(only_if_set_at.map(Timestamp::as_millis))
        .execute(self.writer()?)
        .await?;
        self.endpoints_changed();
        Ok(cleared.rows_affected() > 0)
    }

    async fn set_shift(
        &self,
        endpoint_id: &str,
        shift: Option<&str>,
        override_dead_under_old_shift: &(dyn for<'e> Fn(&'e Endpoint) -> bool + Send + Sync),
    ) -> StoreResult<Endpoint> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(AssertSqlSafe(format!(
            concat!("SELECT ", endpoint_columns!(), " WHERE e.id = $1{}"),
            match self.dialect {
                crate::store::dialect::Dialect::Postgres => " FOR UPDATE OF e",
                crate::store::dialect::Dialect::Sqlite => "",
            }
        )))
        .bind(endpoint_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Err(StoreError::NotFound);
        };
        let current = rows::endpoint(&row)?;
        if !current.is_active() {
            return Err(StoreError::EndpointRevoked);
        }
        // Evaluate the override under the OLD shift first: removing a shift
        // must not revive a clock-out that had already ended.
        if current.presence_override.is_some() && override_dead_under_old_shift(&current) {
            sqlx::query(
                "UPDATE endpoints SET presence_override = NULL, override_until = NULL, \
                   override_set_at = NULL, override_by = NULL WHERE id = $1",
            )
            .bind(endpoint_id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE endpoints SET shift = $1, presence_recheck_at = NULL WHERE id = $2")
            .bind(shift)
            .bind(endpoint_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.endpoints_changed();
        self.unscoped_get_endpoint(endpoint_id).await
    }

    async fn claim_presence_transition(
        &self,
        endpoint_id: &str,
        new: Presence,
        by: &str,
        at: Timestamp,
    ) -> StoreResult<bool> {
        let claimed = sqlx::query(
            "UPDATE endpoints SET presence_seen = $1, presence_changed_at = $2, \
               presence_changed_by = $3 WHERE id = $4 AND presence_seen <> $1 RETURNING id",
        )
        .bind(new.as_str())
        .bind(at.as_millis())
        .bind(by)
        .bind(endpoint_id)
        .fetch_optional(self.writer()?)
        .await?;
        if claimed.is_some() {
            self.endpoints_changed();
        }
        Ok(claimed.is_some())
    }

    async fn unscoped_presence_candidates(
        &self,
        after_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<Endpoint>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            endpoint_columns!(),
            " WHERE e.state = 'active' AND (e.shift IS NOT NULL \
               OR e.presence_override IS NOT NULL OR e.presence_seen = 'out') \
               AND (e.presence_recheck_at IS NULL OR e.presence_recheck_at <= $3) \
               AND e.id > $1 \
             ORDER BY e.id LIMIT $2"
        ))
        .bind(after_id.unwrap_or(""))
        .bind(limit)
        .bind(self.now().as_millis())
        .fetch_all(self.reader()?)
        .await?;
        rows.iter().map(rows::endpoint).collect()
    }

    /// Records when the evaluator must next look at the endpoint, unless its
    /// presence inputs changed since they were read (then another settle,
    /// or the next tick, decides).
    async fn set_presence_recheck(&self, endpoint: &Endpoint, at: Timestamp) -> StoreResult<()> {
        let eq = self.dialect.null_safe_eq();
        let sql = format!(
            "UPDATE endpoints SET presence_recheck_at = $1 WHERE id = $2 \
               AND shift {eq} $3 AND presence_override {eq} $4 AND override_set_at {eq} $5 \
               AND override_until {eq} $6"
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(at.as_millis())
            .bind(&endpoint.id)
            .bind(&endpoint.shift)
            .bind(endpoint.presence_override.map(|p| p.as_str()))
            .bind(endpoint.override_set_at.map(Timestamp::as_millis))
            .bind(endpoint.override_until.map(Timestamp::as_millis))
            .execute(self.writer()?)
            .await?;
        Ok(())
    }

    async fn unscoped_endpoints_by_ids(&self, ids: &[String]) -> StoreResult<Vec<Endpoint>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            concat!("SELECT ", endpoint_columns!(), " WHERE e.id {}"),
            self.dialect.in_short_json_list(1)
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(json_list(ids))
            .fetch_all(self.reader()?)
            .await?;
        rows.iter().map(rows::endpoint).collect()
    }
}
