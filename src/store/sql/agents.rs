//! Agents and endpoints as a human sees them: lists, reads, edits, vend, delete.

use std::collections::HashMap;

use sqlx::{AssertSqlSafe, Row};

use super::SqlStore;
use super::paging::{self, Cursor};
use super::registry::validate_agent_details;
use crate::domain::lease;
use crate::store::dialect::placeholders;
use crate::store::model::*;
use crate::store::rows::{self, agent_columns, endpoint_columns};
use crate::store::{StoreError, StoreResult, Taken};

impl SqlStore {
    pub(super) async fn select_agents(
        &self,
        human_id: &str,
        page: &PageRequest,
    ) -> StoreResult<Page<Agent>> {
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
        .fetch_all(&self.reader)
        .await?;
        let items = rows
            .iter()
            .map(rows::agent)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(paging::page(items, limit, |a| {
            Cursor::new(a.created_at, &a.id)
        }))
    }

    pub(super) async fn select_agent(&self, human_id: &str, name: &str) -> StoreResult<Agent> {
        let row = sqlx::query(concat!(
            "SELECT ",
            agent_columns!(),
            " FROM agents WHERE human_id = $1 AND name = $2"
        ))
        .bind(human_id)
        .bind(name)
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref()
            .map(rows::agent)
            .unwrap_or(Err(StoreError::NotFound))
    }

    pub(super) async fn patch_agent(
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
        .fetch_optional(&self.writer)
        .await?;
        row.as_ref()
            .map(rows::agent)
            .unwrap_or(Err(StoreError::NotFound))
    }

    /// Vend: finds the human's agent by name (creating it with `kind` when it
    /// does not exist yet) and creates the endpoint.
    pub(super) async fn vend(
        &self,
        human_id: &str,
        agent_name: &str,
        kind: AgentKind,
        mut new: NewEndpoint,
    ) -> StoreResult<(Agent, Endpoint, bool)> {
        let (agent, agent_created) = match self.select_agent(human_id, agent_name).await {
            Ok(agent) => (agent, false),
            Err(StoreError::NotFound) => {
                let created = self
                    .insert_agent(NewAgent {
                        human_id: human_id.to_owned(),
                        name: agent_name.to_owned(),
                        kind,
                        expected_interval_seconds: None,
                        description: None,
                    })
                    .await;
                match created {
                    Ok(agent) => (agent, true),
                    // Created concurrently by another request: use that one.
                    Err(StoreError::Taken(Taken::AgentName(_))) => {
                        (self.select_agent(human_id, agent_name).await?, false)
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        new.agent_id = agent.id.clone();
        let endpoint = self.insert_endpoint(new).await?;
        Ok((agent, endpoint, agent_created))
    }

    pub(super) async fn select_endpoints(
        &self,
        human_id: &str,
        page: &PageRequest,
    ) -> StoreResult<Page<Endpoint>> {
        let (limit, cursor) = paging::decode(page)?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            endpoint_columns!(),
            " WHERE e.human_id = $1 \
              AND (e.created_at < $2 OR (e.created_at = $2 AND e.id < $3)) \
             ORDER BY e.created_at DESC, e.id DESC LIMIT $4"
        ))
        .bind(human_id)
        .bind(cursor.created_at)
        .bind(&cursor.id)
        .bind(limit + 1)
        .fetch_all(&self.reader)
        .await?;
        let items = rows
            .iter()
            .map(rows::endpoint)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(paging::page(items, limit, |e| {
            Cursor::new(e.created_at, &e.id)
        }))
    }

    /// Every endpoint of the given agents (all the human's own).
    pub(super) async fn select_endpoints_of_agents(
        &self,
        human_id: &str,
        agent_ids: &[String],
    ) -> StoreResult<Vec<Endpoint>> {
        if agent_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            concat!(
                "SELECT ",
                endpoint_columns!(),
                " WHERE e.human_id = $1 AND e.agent_id IN ({}) ORDER BY e.created_at DESC"
            ),
            placeholders(2, agent_ids.len())
        );
        let mut q = sqlx::query(AssertSqlSafe(sql)).bind(human_id.to_owned());
        for id in agent_ids {
            q = q.bind(id.clone());
        }
        let rows = q.fetch_all(&self.reader).await?;
        rows.iter().map(rows::endpoint).collect()
    }

    /// One of the human's endpoints by slug or id.
    pub(super) async fn select_endpoint_for(
        &self,
        human_id: &str,
        reference: &str,
    ) -> StoreResult<Endpoint> {
        let row = sqlx::query(concat!(
            "SELECT ",
            endpoint_columns!(),
            " WHERE e.human_id = $1 AND (e.slug = $2 OR e.id = $2)"
        ))
        .bind(human_id)
        .bind(reference)
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref()
            .map(rows::endpoint)
            .unwrap_or(Err(StoreError::NotFound))
    }

    pub(super) async fn select_endpoint_by_credential(
        &self,
        credential_hash: &str,
    ) -> StoreResult<Option<Endpoint>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            endpoint_columns!(),
            " WHERE e.credential_hash = $1 AND e.state = 'active' \
              AND (e.expires_at IS NULL OR e.expires_at > $2)"
        ))
        .bind(credential_hash)
        .bind(self.now().as_millis())
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref().map(rows::endpoint).transpose()
    }

    pub(super) async fn update_endpoint_seen(
        &self,
        endpoint_id: &str,
        seen_at: crate::domain::Timestamp,
        last_contact: Option<crate::domain::Timestamp>,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE endpoints SET \
               last_seen_at = CASE WHEN last_seen_at IS NULL OR last_seen_at < $1 \
                              THEN $1 ELSE last_seen_at END, \
               last_contact_at = COALESCE($2, last_contact_at) \
             WHERE id = $3",
        )
        .bind(seen_at.as_millis())
        .bind(last_contact.map(|t| t.as_millis()))
        .bind(endpoint_id)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    pub(super) async fn select_pending_count(&self, endpoint_id: &str) -> StoreResult<i64> {
        let row =
            sqlx::query("SELECT COUNT(*) FROM todos WHERE endpoint_id = $1 AND state = 'pending'")
                .bind(endpoint_id)
                .fetch_one(&self.reader)
                .await?;
        Ok(row.get::<i64, _>(0))
    }

    /// Sets (or clears) an active endpoint's default lease.
    pub(super) async fn update_default_lease(
        &self,
        endpoint_id: &str,
        seconds: Option<i64>,
    ) -> StoreResult<Endpoint> {
        let seconds = lease::validate_endpoint_default(seconds)?;
        let updated = sqlx::query(
            "UPDATE endpoints SET default_lease_ttl_seconds = $1 WHERE id = $2 AND state = 'active'",
        )
        .bind(seconds)
        .bind(endpoint_id)
        .execute(&self.writer)
        .await?;
        let endpoint = self.select_endpoint(endpoint_id).await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::EndpointRevoked);
        }
        Ok(endpoint)
    }

    /// Deletes one of the human's endpoints; only a revoked one may go.
    pub(super) async fn remove_endpoint(
        &self,
        human_id: &str,
        endpoint_id: &str,
    ) -> StoreResult<()> {
        let deleted = sqlx::query(
            "DELETE FROM endpoints WHERE id = $1 AND human_id = $2 AND state = 'revoked'",
        )
        .bind(endpoint_id)
        .bind(human_id)
        .execute(&self.writer)
        .await?;
        if deleted.rows_affected() == 1 {
            return Ok(());
        }
        let exists = sqlx::query("SELECT 1 FROM endpoints WHERE id = $1 AND human_id = $2")
            .bind(endpoint_id)
            .bind(human_id)
            .fetch_optional(&self.reader)
            .await?;
        Err(match exists {
            Some(_) => StoreError::conflict("the endpoint is active; revoke it before deleting it"),
            None => StoreError::NotFound,
        })
    }

    /// Work counts of several endpoints in one pass over their live todos.
    pub(super) async fn select_activity(
        &self,
        endpoint_ids: &[String],
    ) -> StoreResult<HashMap<String, EndpointActivity>> {
        let mut out: HashMap<String, EndpointActivity> = endpoint_ids
            .iter()
            .map(|id| (id.clone(), EndpointActivity::default()))
            .collect();
        if endpoint_ids.is_empty() {
            return Ok(out);
        }
        let list = placeholders(1, endpoint_ids.len());
        let sql = format!(
            "SELECT endpoint_id, \
               SUM(CASE WHEN state = 'pending' THEN 1 ELSE 0 END) AS pending, \
               SUM(CASE WHEN state = 'claimed' THEN 1 ELSE 0 END) AS claimed, \
               SUM(CASE WHEN state = 'failed' AND next_retry_at IS NULL THEN 1 ELSE 0 END) AS dead \
             FROM todos WHERE endpoint_id IN ({list}) AND state <> 'done' \
             GROUP BY endpoint_id"
        );
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for id in endpoint_ids {
            q = q.bind(id.clone());
        }
        for row in q.fetch_all(&self.reader).await? {
            let id: String = row.get("endpoint_id");
            if let Some(a) = out.get_mut(&id) {
                a.pending = row.try_get::<Option<i64>, _>("pending")?.unwrap_or(0);
                a.claimed = row.try_get::<Option<i64>, _>("claimed")?.unwrap_or(0);
                a.dead_letters = row.try_get::<Option<i64>, _>("dead")?.unwrap_or(0);
            }
        }
        let sql = format!(
            "SELECT endpoint_id, MIN(id) AS todo_id FROM todos \
             WHERE endpoint_id IN ({list}) AND state = 'claimed' AND lease_expires_at > ${n} \
             GROUP BY endpoint_id",
            n = endpoint_ids.len() + 1
        );
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for id in endpoint_ids {
            q = q.bind(id.clone());
        }
        for row in q
            .bind(self.now().as_millis())
            .fetch_all(&self.reader)
            .await?
        {
            let id: String = row.get("endpoint_id");
            if let Some(a) = out.get_mut(&id) {
                a.working_on = row.get("todo_id");
            }
        }
        Ok(out)
    }
}
