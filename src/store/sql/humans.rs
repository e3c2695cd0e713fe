//! Humans.

use super::SqlStore;
use crate::domain::Invalid;
use crate::mint::new_id;
use crate::store::error::is_unique_violation;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::{StoreError, StoreResult, Taken, rows};
use async_trait::async_trait;
use sqlx::Row;

/// How long a form's nonce is remembered: a replay later than this is a new submission.
const FORM_NONCE_KEPT_SECS: i64 = 24 * 3600;

#[async_trait]
impl HumanStore for SqlStore {
    async fn claim_form_nonce(
        &self,
        human_id: &str,
        form: &str,
        nonce: &str,
    ) -> StoreResult<Option<PriorSubmission>> {
        let now = self.now();
        sqlx::query("DELETE FROM form_submissions WHERE submitted_at < $1")
            .bind(now.add_secs(-FORM_NONCE_KEPT_SECS).as_millis())
            .execute(self.writer()?)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO form_submissions (nonce, human_id, form, submitted_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (nonce) DO NOTHING RETURNING nonce",
        )
        .bind(nonce)
        .bind(human_id)
        .bind(form)
        .bind(now.as_millis())
        .fetch_optional(self.writer()?)
        .await?;
        if inserted.is_some() {
            return Ok(None);
        }
        let prior = sqlx::query(
            "SELECT form, result FROM form_submissions WHERE nonce = $1 AND human_id = $2",
        )
        .bind(nonce)
        .bind(human_id)
        .fetch_optional(self.writer()?)
        .await?;
        // Another human's nonce (never in practice: 128 random bits) says nothing of it.
        Ok(Some(match prior {
            Some(row) => PriorSubmission {
                form: row.try_get("form")?,
                result: row.try_get("result")?,
            },
            None => PriorSubmission {
                form: form.to_owned(),
                result: None,
            },
        }))
    }

    async fn settle_form_nonce(
        &self,
        human_id: &str,
        nonce: &str,
        result: &str,
    ) -> StoreResult<()> {
        sqlx::query("UPDATE form_submissions SET result = $1 WHERE nonce = $2 AND human_id = $3")
            .bind(result)
            .bind(nonce)
            .bind(human_id)
            .execute(self.writer()?)
            .await?;
        Ok(())
    }

    async fn create_human(&self, name: &str) -> StoreResult<Human> {
        let name = name.trim();
        if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
            return Err(Invalid::new("name", "must be 1-128 characters on one line").into());
        }
        let now = self.now();
        let row = sqlx::query(
            "INSERT INTO humans (id, name, created_at) VALUES ($1, $2, $3) \
             RETURNING id, name, created_at",
        )
        .bind(new_id("hu"))
        .bind(name)
        .bind(now.as_millis())
        .fetch_one(self.writer()?)
        .await
        .map_err(|e| match is_unique_violation(&e) {
            true => StoreError::Taken(Taken::HumanName(name.to_owned())),
            false => StoreError::from(e),
        })?;
        rows::human(&row)
    }

    async fn count_humans(&self) -> StoreResult<i64> {
        let row = sqlx::query("SELECT COUNT(*) FROM humans")
            .fetch_one(self.writer()?)
            .await?;
        Ok(row.get::<i64, _>(0))
    }

    async fn get_human(&self, id: &str) -> StoreResult<Human> {
        let row = sqlx::query("SELECT id, name, created_at FROM humans WHERE id = $1")
            .bind(id)
            .fetch_optional(self.reader()?)
            .await?;
        row.as_ref()
            .map(rows::human)
            .unwrap_or(Err(StoreError::NotFound))
    }

    async fn find_human_by_name(&self, name: &str) -> StoreResult<Human> {
        let row = sqlx::query("SELECT id, name, created_at FROM humans WHERE name = $1")
            .bind(name)
            .fetch_optional(self.reader()?)
            .await?;
        row.as_ref()
            .map(rows::human)
            .unwrap_or(Err(StoreError::NotFound))
    }
}
