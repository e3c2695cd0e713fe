//! Webhook deliveries as recorded, and whom a webhook trusts
//! (`docs/intake.md`, "Delivery history").

use std::time::Duration;

use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::{Any, AssertSqlSafe, Row, Transaction};

use super::SqlStore;
use super::paging::{self, Cursor};
use crate::domain::Timestamp;
use crate::mint::new_id;
use crate::store::dialect::Dialect;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::{StoreError, StoreResult};

const COLUMNS: &str = "id, webhook_id, human_id, endpoint_id, received_at, decision, reason, \
    rule, envelope, headers, body, title, kind, source, idempotency_key, todo_id, replay_of, \
    settled_at";

fn record(row: &AnyRow) -> StoreResult<DeliveryRecord> {
    let decision: String = row.try_get("decision")?;
    let envelope: String = row.try_get("envelope")?;
    let headers: String = row.try_get("headers")?;
    Ok(DeliveryRecord {
        id: row.try_get("id")?,
        webhook_id: row.try_get("webhook_id")?,
        human_id: row.try_get("human_id")?,
        endpoint_id: row.try_get("endpoint_id")?,
        received_at: Timestamp::from_millis(row.try_get("received_at")?),
        decision: Decision::parse(&decision)
            .ok_or_else(|| StoreError::internal(format!("unknown decision {decision:?}")))?,
        reason: row.try_get("reason")?,
        rule: row.try_get("rule")?,
        envelope: serde_json::from_str(&envelope)
            .map_err(|e| StoreError::internal(format!("a stored envelope does not parse: {e}")))?,
        headers: serde_json::from_str(&headers).unwrap_or_default(),
        body: row.try_get("body")?,
        title: row.try_get("title")?,
        kind: row.try_get("kind")?,
        source: row.try_get("source")?,
        idempotency_key: row.try_get("idempotency_key")?,
        todo_id: row.try_get("todo_id")?,
        replay_of: row.try_get("replay_of")?,
        settled_at: row
            .try_get::<Option<i64>, _>("settled_at")?
            .map(Timestamp::from_millis),
    })
}

impl SqlStore {
    /// Inserts one delivery row.
    async fn insert_delivery(
        tx: &mut Transaction<'static, Any>,
        new: &NewDelivery,
        todo_id: Option<&str>,
        now: i64,
    ) -> StoreResult<DeliveryRecord> {
        let id = new_id("dl");
        let envelope = serde_json::to_string(&new.envelope)
            .map_err(|e| StoreError::internal(format!("an envelope does not serialise: {e}")))?;
        let row = sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO deliveries (id, webhook_id, human_id, endpoint_id, received_at, decision, \
               reason, rule, event, sender, envelope, headers, body, body_size, title, kind, \
               source, idempotency_key, todo_id, replay_of) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
               $18, $19, $20) RETURNING {COLUMNS}"
        )))
        .bind(&id)
        .bind(&new.webhook_id)
        .bind(&new.human_id)
        .bind(&new.endpoint_id)
        .bind(now)
        .bind(new.decision.as_str())
        .bind(&new.reason)
        .bind(&new.rule)
        .bind(&new.envelope.event)
        .bind(new.envelope.sender.as_ref().map(|s| s.to_ascii_lowercase()))
        .bind(envelope)
        .bind(new.headers.to_string())
        .bind(new.body.clone())
        .bind(new.envelope.size)
        .bind(&new.title)
        .bind(&new.kind)
        .bind(&new.source)
        .bind(&new.idempotency_key)
        .bind(todo_id.or(new.todo_id.as_deref()))
        .bind(&new.replay_of)
        .fetch_one(&mut **tx)
        .await?;
        record(&row)
    }

    /// Moves a quarantined delivery to `to`, in `tx`; `None` when it is not
    /// (or no longer) quarantined.
    async fn settle_in(
        tx: &mut Transaction<'static, Any>,
        human_id: &str,
        id: &str,
        to: Decision,
        todo_id: Option<&str>,
        now: i64,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "UPDATE deliveries SET decision = $1, todo_id = COALESCE($2, todo_id), \
               settled_at = $3 \
             WHERE id = $4 AND human_id = $5 AND decision = 'quarantined' RETURNING {COLUMNS}"
        )))
        .bind(to.as_str())
        .bind(todo_id)
        .bind(now)
        .bind(id)
        .bind(human_id)
        .fetch_optional(&mut **tx)
        .await?;
        row.as_ref().map(record).transpose()
    }

    /// The delivery half of [`DeliveryStore::create_todo_with_delivery`],
    /// inside the todo's transaction.
    pub(super) async fn write_delivery(
        &self,
        tx: &mut Transaction<'static, Any>,
        write: &DeliveryWrite,
        todo_id: &str,
        now: i64,
    ) -> StoreResult<DeliveryRecord> {
        match write {
            DeliveryWrite::Record(new) => Self::insert_delivery(tx, new, Some(todo_id), now).await,
            DeliveryWrite::Release { human_id, id } => {
                Self::settle_in(tx, human_id, id, Decision::Released, Some(todo_id), now)
                    .await?
                    .ok_or_else(not_quarantined)
            }
        }
    }
}

fn not_quarantined() -> StoreError {
    StoreError::conflict("the delivery is not quarantined")
}

#[async_trait]
impl DeliveryStore for SqlStore {
    async fn set_webhook_senders(
        &self,
        human_id: &str,
        id: &str,
        senders: &Senders,
    ) -> StoreResult<Webhook> {
        let text = match senders {
            Senders::Everyone => None,
            other => Some(
                serde_json::to_string(other)
                    .map_err(|e| StoreError::internal(format!("senders do not serialise: {e}")))?,
            ),
        };
        let updated =
            sqlx::query("UPDATE webhooks SET senders = $1 WHERE id = $2 AND human_id = $3")
                .bind(text)
                .bind(id)
                .bind(human_id)
                .execute(self.writer()?)
                .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        self.get_webhook(human_id, id).await
    }

    async fn set_webhook_rules(
        &self,
        human_id: &str,
        id: &str,
        rules: Option<&crate::domain::rules::RuleSet>,
    ) -> StoreResult<Webhook> {
        // One statement: the list is replaced whole or not at all.
        let updated = sqlx::query("UPDATE webhooks SET rules = $1 WHERE id = $2 AND human_id = $3")
            .bind(rules.map(|r| r.to_json().to_string()))
            .bind(id)
            .bind(human_id)
            .execute(self.writer()?)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        self.get_webhook(human_id, id).await
    }

    async fn find_dropped_delivery(
        &self,
        webhook_id: &str,
        key: &str,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let row = sqlx::query(AssertSqlSafe(dropped_by_key_sql(self.dialect)))
            .bind(webhook_id)
            .bind(key)
            .fetch_optional(self.writer()?)
            .await?;
        row.as_ref().map(record).transpose()
    }

    async fn record_delivery(&self, new: NewDelivery) -> StoreResult<DeliveryRecord> {
        let now = self.now().as_millis();
        let mut tx = self.begin().await?;
        let record = Self::insert_delivery(&mut tx, &new, None, now).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn create_todo_with_delivery(
        &self,
        new: NewTodo,
        write: DeliveryWrite,
    ) -> StoreResult<(CreatedTodo, Option<DeliveryRecord>)> {
        self.create_todo_writing(new, Some(&write)).await
    }

    async fn get_delivery(&self, human_id: &str, id: &str) -> StoreResult<DeliveryRecord> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM deliveries WHERE id = $1 AND human_id = $2"
        )))
        .bind(id)
        .bind(human_id)
        .fetch_optional(self.writer()?)
        .await?;
        row.as_ref()
            .map(record)
            .unwrap_or(Err(StoreError::NotFound))
    }

    async fn list_deliveries(
        &self,
        human_id: &str,
        webhook_id: &str,
        filter: &DeliveryFilter,
        page: &PageRequest,
    ) -> StoreResult<Page<DeliveryRecord>> {
        // The webhook must be the human's: another's answers as a missing one.
        self.get_webhook(human_id, webhook_id).await?;
        let (limit, cursor) = paging::decode(page)?;
        let (sql, binds) = listing_sql(filter);
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .bind(webhook_id)
            .bind(human_id)
            .bind(cursor.created_at)
            .bind(cursor.id.clone());
        for value in binds {
            query = query.bind(value);
        }
        let rows = query.bind(limit + 1).fetch_all(self.reader()?).await?;
        let items = rows.iter().map(record).collect::<StoreResult<Vec<_>>>()?;
        Ok(paging::page(items, limit, |d| {
            Cursor::new(d.received_at, &d.id)
        }))
    }

    async fn settle_delivery(
        &self,
        human_id: &str,
        id: &str,
        to: Decision,
        todo_id: Option<&str>,
    ) -> StoreResult<DeliveryRecord> {
        let now = self.now().as_millis();
        let mut tx = self.begin().await?;
        let settled = Self::settle_in(&mut tx, human_id, id, to, todo_id, now).await?;
        tx.commit().await?;
        match settled {
            Some(record) => Ok(record),
            None => {
                // Missing (or another's) is 404; present but settled is 409.
                self.get_delivery(human_id, id).await?;
                Err(not_quarantined())
            }
        }
    }

    async fn unscoped_prune_deliveries(
        &self,
        older_than: Duration,
        limit: i64,
    ) -> StoreResult<u64> {
        let cutoff = self.now().saturating_sub(older_than);
        let deleted = sqlx::query(
            "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries \
             WHERE received_at < $1 ORDER BY received_at, id LIMIT $2)",
        )
        .bind(cutoff.as_millis())
        .bind(limit)
        .execute(self.writer()?)
        .await?;
        Ok(deleted.rows_affected())
    }
}

/// The dropped delivery that spent a key. SQLite is told the index: without
/// statistics it took the webhook's listing index for the `ORDER BY` and
/// walked the webhook's whole history on every delivery (B9: 11 ms a
/// delivery after 3 000, taken for the cost of 32 routing rules).
fn dropped_by_key_sql(dialect: Dialect) -> String {
    let from = match dialect {
        Dialect::Sqlite => "deliveries INDEXED BY deliveries_dropped_by_key",
        Dialect::Postgres => "deliveries",
    };
    format!(
        "SELECT {COLUMNS} FROM {from} WHERE webhook_id = $1 AND idempotency_key = $2 \
           AND decision = 'dropped' ORDER BY received_at, id LIMIT 1"
    )
}

/// A webhook's deliveries, newest first, after the cursor (`$3`, `$4`),
/// filtered; `$1` the webhook, `$2` the human, the filters' values next, the
/// page size last. Each filter has its index (migration 0021), so a page of
/// a rare decision reads the matching deliveries only.
fn listing_sql(filter: &DeliveryFilter) -> (String, Vec<String>) {
    let mut sql = format!(
        "SELECT {COLUMNS} FROM deliveries WHERE webhook_id = $1 AND human_id = $2 \
           AND (received_at < $3 OR (received_at = $3 AND id < $4))"
    );
    let mut n = 4;
    let mut binds: Vec<String> = Vec::new();
    for (column, value) in [
        ("decision", filter.decision.map(|d| d.as_str().to_owned())),
        ("event", filter.event.clone()),
        (
            "sender",
            filter.sender.as_ref().map(|s| s.to_ascii_lowercase()),
        ),
    ] {
        if let Some(value) = value {
            n += 1;
            sql.push_str(&format!(" AND {column} = ${n}"));
            binds.push(value);
        }
    }
    sql.push_str(&format!(
        " ORDER BY received_at DESC, id DESC LIMIT ${}",
        n + 1
    ));
    (sql, binds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::sqlite_plan;

    #[test]
    fn on_sqlite_each_history_filter_reads_its_own_index() {
        for (filter, index) in [
            (
                DeliveryFilter {
                    decision: Some(Decision::Quarantined),
                    ..DeliveryFilter::default()
                },
                "deliveries_by_decision",
            ),
            (
                DeliveryFilter {
                    event: Some("issues".into()),
                    ..DeliveryFilter::default()
                },
                "deliveries_by_event",
            ),
            (
                DeliveryFilter {
                    sender: Some("mallory".into()),
                    ..DeliveryFilter::default()
                },
                "deliveries_by_sender",
            ),
            (DeliveryFilter::default(), "deliveries_by_webhook"),
        ] {
            let plan = sqlite_plan(&listing_sql(&filter).0);
            assert!(
                plan.iter().any(|step| step.contains(index))
                    && !plan.iter().any(|s| s.contains("TEMP B-TREE")),
                "{index}: {plan:#?}"
            );
        }
    }

    #[test]
    fn on_sqlite_a_spent_key_is_looked_up_by_key_not_by_walking_the_history() {
        let plan = sqlite_plan(&dropped_by_key_sql(Dialect::Sqlite));
        assert!(
            plan.iter()
                .any(|step| step.contains("deliveries_dropped_by_key")),
            "{plan:#?}"
        );
    }
}
