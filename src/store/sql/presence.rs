//! Presence inputs and the transition ledger on the endpoint row (`docs/presence.md`).

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

/// The evaluator's due candidates after `$1`, `$2` at most, due by `$3`.
///
/// The due rows are found through `endpoints_presence_recheck`, one range
/// per branch, and only they are read and sorted. Written as one `OR`
/// beside `ORDER BY e.id`, both planners walked every endpoint in id order
/// instead: SQLite always (4-8 ms per tick at 10 000 endpoints, none due),
/// PostgreSQL whenever its statistics still said the column was NULL, as
/// they do after the first tick settles everyone (15 ms, against 3.5 ms this
/// way; B5 in bench/RESULTS.md).
const PRESENCE_CANDIDATES: &str = concat!(
    "SELECT ",
    endpoint_columns!(),
    " WHERE e.id IN (\
       SELECT id FROM endpoints WHERE state = 'active' \
         AND presence_recheck_at IS NULL AND id > $1 \
       UNION ALL SELECT id FROM endpoints WHERE state = 'active' \
         AND presence_recheck_at <= $3 AND id > $1) \
       AND (e.shift IS NOT NULL OR e.presence_override IS NOT NULL \
         OR e.presence_seen = 'out') \
     ORDER BY e.id LIMIT $2"
);

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
        next_check: Option<NextPresenceCheck<'_>>,
    ) -> StoreResult<bool> {
        let inputs_unchanged = self.presence_inputs_unchanged(6);
        let sql = format!(
            "UPDATE endpoints SET presence_seen = $1, presence_changed_at = $2, \
               presence_changed_by = $3, \
               presence_recheck_at = CASE WHEN $5 IS NOT NULL AND {inputs_unchanged} \
                 THEN $5 ELSE presence_recheck_at END \
             WHERE id = $4 AND presence_seen <> $1 RETURNING id"
        );
        let query = sqlx::query(AssertSqlSafe(sql))
            .bind(new.as_str())
            .bind(at.as_millis())
            .bind(by)
            .bind(endpoint_id)
            .bind(next_check.map(|next| next.at.as_millis()));
        let claimed = bind_presence_inputs(query, next_check.map(|next| next.inputs))
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
        let rows = sqlx::query(PRESENCE_CANDIDATES)
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
    async fn set_presence_recheck(&self, next: NextPresenceCheck<'_>) -> StoreResult<()> {
        let inputs_unchanged = self.presence_inputs_unchanged(3);
        let sql = format!(
            "UPDATE endpoints SET presence_recheck_at = $1 WHERE id = $2 AND {inputs_unchanged}"
        );
        let query = sqlx::query(AssertSqlSafe(sql))
            .bind(next.at.as_millis())
            .bind(&next.inputs.id);
        bind_presence_inputs(query, Some(next.inputs))
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

impl SqlStore {
    /// The row's presence inputs equal the four parameters from `$first`
    /// on, NULL equal to NULL (bound by [`bind_presence_inputs`]).
    fn presence_inputs_unchanged(&self, first: usize) -> String {
        let eq = self.dialect.null_safe_eq();
        let [shift, value, set_at, until] = [0, 1, 2, 3].map(|i| first + i);
        format!(
            "shift {eq} ${shift} AND presence_override {eq} ${value} \
             AND override_set_at {eq} ${set_at} AND override_until {eq} ${until}"
        )
    }
}

/// Binds the presence inputs [`SqlStore::presence_inputs_unchanged`]
/// compares (all NULL without inputs).
fn bind_presence_inputs<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    inputs: Option<&'q Endpoint>,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    query
        .bind(inputs.and_then(|e| e.shift.as_deref()))
        .bind(inputs.and_then(|e| e.presence_override).map(|p| p.as_str()))
        .bind(
            inputs
                .and_then(|e| e.override_set_at)
                .map(Timestamp::as_millis),
        )
        .bind(
            inputs
                .and_then(|e| e.override_until)
                .map(Timestamp::as_millis),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::sqlite_plan;

    #[test]
    fn on_sqlite_the_evaluator_reads_the_due_endpoints_not_all_of_them() {
        let plan = sqlite_plan(PRESENCE_CANDIDATES);
        let uses = |step: &str| plan.iter().any(|s| s.contains(step));
        assert!(uses("endpoints_presence_recheck"), "{plan:#?}");
        assert!(
            !uses("SCAN e") && !uses("(id>?)"),
            "walks every endpoint: {plan:#?}"
        );
    }
}
