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

#[async_trait]
impl HumanStore for SqlStore {
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
