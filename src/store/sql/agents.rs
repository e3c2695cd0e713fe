//! Agents as their human sees them: register, list, read, edit.

use super::paging::Cursor;
use super::{SqlStore, paging};
use crate::domain::Invalid;
use crate::domain::names::validate_agent_name;
use crate::mint::new_id;
use crate::store::error::is_unique_violation;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::rows::agent_columns;
use crate::store::{StoreError, StoreResult, Taken, rows};
use async_trait::async_trait;

#[async_trait]
impl AgentStore for SqlStore {
    async fn create_agent(
        &self,
        human_id: &str,
        name: &str,
        kind: AgentKind,
    ) -> StoreResult<Agent> {
        self.register_agent(NewAgent {
            human_id: human_id.to_owned(),
            name: name.to_owned(),
            kind,
            expected_interval_seconds: None,
            description: None,
        })
        .await
    }

    async fn register_agent(&self, new: NewAgent) -> StoreResult<Agent> {
        validate_agent_name(&new.name)?;
        validate_agent_details(new.expected_interval_seconds, new.description.as_deref())?;
        let now = self.now().as_millis();
        let row = sqlx::query(concat!(
            "INSERT INTO agents (id, human_id, name, kind, expected_interval_seconds, \
               description, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING ",
            agent_columns!()
        ))
        .bind(new_id("ag"))
        .bind(&new.human_id)
        .bind(&new.name)
        .bind(new.kind.as_str())
        .bind(new.expected_interval_seconds)
        .bind(&new.description)
        .bind(now)
        .fetch_one(self.writer()?)
        .await
        .map_err(|e| match is_unique_violation(&e) {
            true => StoreError::Taken(Taken::AgentName(new.name.clone())),
            false => StoreError::from(e),
        })?;
        rows::agent(&row)
    }

    async fn list_agents(&self, human_id: &str, page: &PageRequest) -> StoreResult<Page<Agent>> {
        let (limit, cursor) = paging::decode(page)?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            agent_columns!(),
            " FROM agents WHERE human_id = $1 \
              AND (created_at < $2 OR (created_at = $2 AND id < $3)) \
             ORDER BY created_at DESC, id DESC LIMIT $4"
        ))
        .bind(human_id)
        .bind(cursor.created_at)
        .bind(&cursor.id)
        .bind(limit + 1)
        .fetch_all(self.reader()?)
        .await?;
        let items = rows
            .iter()
            .map(rows::agent)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(paging::page(items, limit, |a| {
            Cursor::new(a.created_at, &a.id)
        }))
    }

    async fn get_agent(&self, human_id: &str, name: &str) -> StoreResult<Agent> {
        let row = sqlx::query(concat!(
            "SELECT ",
            agent_columns!(),
            " FROM agents WHERE human_id = $1 AND name = $2"
        ))
        .bind(human_id)
        .bind(name)
        .fetch_optional(self.reader()?)
        .await?;
        row.as_ref()
            .map(rows::agent)
            .unwrap_or(Err(StoreError::NotFound))
    }

    async fn update_agent(
        &self,
        human_id: &str,
        name: &str,
        patch: AgentPatch,
    ) -> StoreResult<Agent> {
        validate_agent_details(
            patch.expected_interval_seconds.flatten(),
            patch.description.as_ref().and_then(|d| d.as_deref()),
        )?;
        // Each field is written only when the patch names it (flag = 1).
        let row = sqlx::query(concat!(
            "UPDATE agents SET \
               kind = COALESCE($1, kind), \
               expected_interval_seconds = CASE WHEN $2 = 1 THEN $3 ELSE expected_interval_seconds END, \
               description = CASE WHEN $4 = 1 THEN $5 ELSE description END, \
               updated_at = $6 \
             WHERE human_id = $7 AND name = $8 RETURNING ",
            agent_columns!()
        ))
        .bind(patch.kind.map(AgentKind::as_str))
        .bind(i64::from(patch.expected_interval_seconds.is_some()))
        .bind(patch.expected_interval_seconds.flatten())
        .bind(i64::from(patch.description.is_some()))
        .bind(patch.description.flatten())
        .bind(self.now().as_millis())
        .bind(human_id)
        .bind(name)
        .fetch_optional(self.writer()?)
        .await?;
        self.endpoints_changed();
        row.as_ref()
            .map(rows::agent)
            .unwrap_or(Err(StoreError::NotFound))
    }
}

/// An agent's optional settings: a positive expected interval (at most 30
/// days) and a one-line description of at most 500 bytes.
pub(super) fn validate_agent_details(
    expected_interval_seconds: Option<i64>,
    description: Option<&str>,
) -> Result<(), Invalid> {
    if let Some(secs) = expected_interval_seconds
        && !(1..=30 * 86_400).contains(&secs)
    {
        return Err(Invalid::new(
            "expected_interval",
            "must be between 1 second and 30 days",
        ));
    }
    if let Some(text) = description
        && (text.len() > 500 || text.chars().any(char::is_control))
    {
        return Err(Invalid::new(
            "description",
            "must be one line of at most 500 bytes",
        ));
    }
    Ok(())
}
