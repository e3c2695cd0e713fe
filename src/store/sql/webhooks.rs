//! Intake webhooks: one endpoint and queue each, addressed by an unguessable
//! URL token (stored hashed), optionally signed.

use super::SqlStore;
use crate::domain::rules::RuleSet;
use crate::domain::{Invalid, Timestamp};
use crate::mint::new_id;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::{StoreError, StoreResult};
use async_trait::async_trait;
use sqlx::Row;
use sqlx::any::AnyRow;

const COLUMNS: &str = "w.id, w.endpoint_id, w.human_id, w.queue, w.signing_secret, \
    w.created_at, w.rotated_at, w.senders, w.rules";

fn webhook(row: &AnyRow) -> StoreResult<Webhook> {
    Ok(Webhook {
        id: row.try_get("id")?,
        endpoint_id: row.try_get("endpoint_id")?,
        human_id: row.try_get("human_id")?,
        queue: row.try_get("queue")?,
        signed: row
            .try_get::<Option<String>, _>("signing_secret")?
            .is_some(),
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        rotated_at: row
            .try_get::<Option<i64>, _>("rotated_at")?
            .map(Timestamp::from_millis),
        // A list that does not parse must not trust everyone: it fails.
        senders: match row.try_get::<Option<String>, _>("senders")? {
            None => Senders::Everyone,
            Some(text) => serde_json::from_str(&text).map_err(|e| {
                StoreError::internal(format!("a webhook's senders do not parse: {e}"))
            })?,
        },
        // Rules that do not parse must not route anything: they fail.
        rules: match row.try_get::<Option<String>, _>("rules")? {
            None => None,
            Some(text) => Some(
                serde_json::from_str(&text)
                    .map_err(|e| e.to_string())
                    .and_then(|v| RuleSet::from_stored(&v).map_err(|e| e.to_string()))
                    .map_err(|e| {
                        StoreError::internal(format!("a webhook's rules do not parse: {e}"))
                    })?,
            ),
        },
    })
}

#[async_trait]
impl WebhookStore for SqlStore {
    async fn create_webhook(
        &self,
        human_id: &str,
        endpoint_id: &str,
        queue: &str,
        token_hash: &str,
        signing_secret: Option<&str>,
    ) -> StoreResult<Webhook> {
        let endpoint = self.get_endpoint(human_id, endpoint_id).await?;
        if !endpoint.is_active() {
            return Err(StoreError::EndpointRevoked);
        }
        if !endpoint.scope_queues.iter().any(|q| q == queue) {
            return Err(Invalid::new(
                "queue",
                format!(
                    "{queue:?} is not in the endpoint's scope ({})",
                    endpoint.scope_queues.join(", ")
                ),
            )
            .into());
        }
        let id = new_id("wh");
        sqlx::query(
            "INSERT INTO webhooks (id, endpoint_id, human_id, queue, token_hash, signing_secret, \
               created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&id)
        .bind(&endpoint.id)
        .bind(human_id)
        .bind(queue)
        .bind(token_hash)
        .bind(signing_secret)
        .bind(self.now().as_millis())
        .execute(self.writer()?)
        .await?;
        self.get_webhook(human_id, &id).await
    }

    async fn get_webhook(&self, human_id: &str, id: &str) -> StoreResult<Webhook> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM webhooks w WHERE w.id = $1 AND w.human_id = $2"
        )))
        .bind(id)
        .bind(human_id)
        .fetch_optional(self.writer()?)
        .await?;
        row.as_ref()
            .map(webhook)
            .unwrap_or(Err(StoreError::NotFound))
    }

    async fn list_webhooks(&self, human_id: &str, endpoint_id: &str) -> StoreResult<Vec<Webhook>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM webhooks w WHERE w.endpoint_id = $1 AND w.human_id = $2 \
             ORDER BY w.created_at DESC, w.id DESC"
        )))
        .bind(endpoint_id)
        .bind(human_id)
        .fetch_all(self.reader()?)
        .await?;
        rows.iter().map(webhook).collect()
    }

    async fn rotate_webhook(
        &self,
        human_id: &str,
        id: &str,
        token_hash: &str,
        signing_secret: Option<&str>,
    ) -> StoreResult<Webhook> {
        // A rotation keeps the webhook signed or unsigned as it was.
        let updated = sqlx::query(
            "UPDATE webhooks SET token_hash = $1, \
               signing_secret = CASE WHEN signing_secret IS NULL THEN NULL ELSE $2 END, \
               rotated_at = $3 WHERE id = $4 AND human_id = $5",
        )
        .bind(token_hash)
        .bind(signing_secret)
        .bind(self.now().as_millis())
        .bind(id)
        .bind(human_id)
        .execute(self.writer()?)
        .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        self.get_webhook(human_id, id).await
    }

    async fn delete_webhook(&self, human_id: &str, id: &str) -> StoreResult<()> {
        let deleted = sqlx::query("DELETE FROM webhooks WHERE id = $1 AND human_id = $2")
            .bind(id)
            .bind(human_id)
            .execute(self.writer()?)
            .await?;
        if deleted.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    async fn unscoped_find_webhook(&self, token_hash: &str) -> StoreResult<Option<WebhookTarget>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS}, e.state AS endpoint_state FROM webhooks w \
             JOIN endpoints e ON e.id = w.endpoint_id WHERE w.token_hash = $1"
        )))
        .bind(token_hash)
        .fetch_optional(self.reader()?)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(Some(WebhookTarget {
            webhook: webhook(&row)?,
            endpoint_active: row.try_get::<String, _>("endpoint_state")? == "active",
            signing_secret: row.try_get("signing_secret")?,
        }))
    }
}
