//! Endpoints: creating and vending them, their human's reads, agents reaching
//! theirs, and the revoke cascade.

use super::paging::Cursor;
use super::sqlite::lane::numbered;
use super::{SqlStore, paging};
use crate::domain::scope::normalize_scope;
use crate::domain::{Invalid, Timestamp, lease};
use crate::mint::new_id;
use crate::store::dialect::{Dialect, json_list, placeholders};
use crate::store::error::is_unique_violation;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::rows::endpoint_columns;
use crate::store::{StoreError, StoreResult, Taken, rows};
use async_trait::async_trait;
use sqlx::{Any, AssertSqlSafe, Row, Transaction};
use std::collections::HashMap;
use std::sync::Arc;

/// Why an endpoint stopped working; recorded in its dead-lettered todos.
#[derive(Debug, Clone, Copy)]
pub(super) enum RevokeReason {
    Revoked,
    Expired,
}

impl RevokeReason {
    fn result_json(self, at: Timestamp) -> String {
        let reason = match self {
            Self::Revoked => "revoked",
            Self::Expired => "expired",
        };
        serde_json::json!({
            "error": "endpoint_revoked",
            "reason": reason,
            "revoked_at": at.to_rfc3339(),
        })
        .to_string()
    }
}

impl SqlStore {
    /// The revoke cascade: every live todo becomes a dead letter, and every
    /// open attempt is closed as `revoked`, in the caller's transaction.
    pub(super) async fn dead_letter_live_todos(
        tx: &mut Transaction<'static, Any>,
        endpoint_id: &str,
        now: Timestamp,
        reason: RevokeReason,
    ) -> StoreResult<u64> {
        sqlx::query(
            "UPDATE todo_attempts SET ended_at = $1, outcome = 'revoked', \
               disposition = 'dead_lettered' \
             WHERE ended_at IS NULL AND todo_id IN \
               (SELECT id FROM todos WHERE endpoint_id = $2 AND state = 'claimed')",
        )
        .bind(now.as_millis())
        .bind(endpoint_id)
        .execute(&mut **tx)
        .await?;
        Self::prune_claimed_attempts_of_endpoint(tx, endpoint_id).await?;
        let done = sqlx::query(
            "UPDATE todos SET state = 'failed', next_retry_at = NULL, lease_expires_at = NULL, \
               lease_token_hash = NULL, result = $3, completed_at = $1, updated_at = $1 \
             WHERE endpoint_id = $2 AND (state IN ('pending', 'claimed', 'delayed') \
               OR (state = 'failed' AND next_retry_at IS NOT NULL))",
        )
        .bind(now.as_millis())
        .bind(endpoint_id)
        .bind(reason.result_json(now))
        .execute(&mut **tx)
        .await?;
        Ok(done.rows_affected())
    }
}

/// The live work counts of the endpoints whose ids are the JSON array bound
/// at `$1` (one parameter however many: a human's whole fleet): rows of
/// (endpoint, kind, count), one branch per kind, each reading only its
/// state's partial index. The board re-reads them every two seconds per open
/// page; as one pass over the endpoints' todos (`state <> 'done'`) they read
/// the whole history the retention window keeps (31 ms over 300 000 todos
/// on PostgreSQL, a scan of the table).
fn activity_counts_sql(dialect: Dialect) -> String {
    [
        (
            "pending",
            "todos_pending_by_endpoint",
            "COUNT(*)",
            "state = 'pending'",
        ),
        // The oldest pending todo's age: the first entry of the same index.
        (
            "oldest",
            "todos_pending_by_endpoint",
            "MIN(created_at)",
            "state = 'pending'",
        ),
        (
            "claimed",
            "todos_claimed_by_endpoint",
            "COUNT(*)",
            "state = 'claimed'",
        ),
        (
            "delayed",
            "todos_delayed_by_endpoint",
            "COUNT(*)",
            "state = 'delayed'",
        ),
        (
            "retrying",
            "todos_retry_by_endpoint",
            "COUNT(*)",
            "state = 'failed' AND next_retry_at IS NOT NULL",
        ),
        (
            "dead",
            "todos_dead_by_endpoint",
            "COUNT(*)",
            "state = 'failed' AND next_retry_at IS NULL",
        ),
    ]
    .map(|(kind, index, value, condition)| {
        format!(
            "SELECT endpoint_id, '{kind}' AS kind, {value} AS n FROM {} \
             WHERE endpoint_id {} AND {condition} GROUP BY endpoint_id",
            dialect.todos_by_index(index),
            dialect.in_short_json_list(1)
        )
    })
    .join(" UNION ALL ")
}

/// The credential lookup, as SQLite's writer thread runs it (`?n` placeholders).
const AUTHENTICATE_ON_LANE: &str = concat!(
    "SELECT ",
    endpoint_columns!(),
    " WHERE e.credential_hash = ?1 AND e.state = 'active' \
      AND (e.expires_at IS NULL OR e.expires_at > ?2)"
);

/// `last_seen_at` only moves forward; `last_contact_at` when the client reports one.
const STAMP_SEEN: &str = "UPDATE endpoints SET \
       last_seen_at = CASE WHEN last_seen_at IS NULL OR last_seen_at < $1 \
                      THEN $1 ELSE last_seen_at END, \
       last_contact_at = COALESCE($2, last_contact_at) \
     WHERE id = $3";

static STAMP_SEEN_ON_LANE: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| numbered(STAMP_SEEN));

#[async_trait]
impl EndpointStore for SqlStore {
    async fn create_endpoint(&self, new: NewEndpoint) -> StoreResult<Endpoint> {
        let (queues, verbs) = normalize_scope(&new.queues, &new.verbs)?;
        let default_lease = lease::validate_endpoint_default(new.default_lease_ttl_seconds)?;
        let now = self.now();
        if let Some(expires_at) = new.expires_at
            && expires_at <= now
        {
            return Err(Invalid::new("expires_at", "must be in the future").into());
        }
        let id = new_id("ep");
        let inserted = sqlx::query(
            "INSERT INTO endpoints (id, agent_id, human_id, slug, credential_hash, \
               credential_prefix, scope_queues, scope_verbs, created_at, expires_at, \
               default_lease_ttl_seconds, server_name) \
             SELECT $1, a.id, a.human_id, $2, $3, $4, $5, $6, $7, $8, $9, $11 \
             FROM agents a WHERE a.id = $10",
        )
        .bind(&id)
        .bind(&new.slug)
        .bind(&new.credential_hash)
        .bind(&new.credential_prefix)
        .bind(serde_json::to_string(&queues).expect("strings serialize"))
        .bind(serde_json::to_string(&verbs).expect("strings serialize"))
        .bind(now.as_millis())
        .bind(new.expires_at.map(Timestamp::as_millis))
        .bind(default_lease)
        .bind(&new.agent_id)
        .bind(&new.server_name)
        .execute(self.writer()?)
        .await
        .map_err(|e| match is_unique_violation(&e) {
            true => StoreError::Taken(Taken::SlugOrCredential),
            false => StoreError::from(e),
        })?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        self.unscoped_get_endpoint(&id).await
    }

    async fn unscoped_get_endpoint(&self, id: &str) -> StoreResult<Endpoint> {
        let row = sqlx::query(concat!("SELECT ", endpoint_columns!(), " WHERE e.id = $1"))
            .bind(id)
            .fetch_optional(self.reader()?)
            .await?;
        match row {
            Some(row) => rows::endpoint(&row),
            None => Err(StoreError::NotFound),
        }
    }

    async fn revoke_endpoint(&self, human_id: &str, endpoint_id: &str) -> StoreResult<Revoked> {
        let now = self.now();
        let mut tx = self.begin().await?;
        let flipped = sqlx::query(
            "UPDATE endpoints SET state = 'revoked', revoked_at = $1 \
             WHERE id = $2 AND human_id = $3 AND state = 'active' RETURNING id",
        )
        .bind(now.as_millis())
        .bind(endpoint_id)
        .bind(human_id)
        .fetch_optional(&mut *tx)
        .await?;
        if flipped.is_none() {
            let exists = sqlx::query("SELECT state FROM endpoints WHERE id = $1 AND human_id = $2")
                .bind(endpoint_id)
                .bind(human_id)
                .fetch_optional(&mut *tx)
                .await?;
            tx.rollback().await?;
            return Err(match exists {
                Some(_) => StoreError::EndpointRevoked,
                None => StoreError::NotFound,
            });
        }
        let dead_lettered =
            Self::dead_letter_live_todos(&mut tx, endpoint_id, now, RevokeReason::Revoked).await?;
        // Its OAuth clients' access goes with it (authentication checks the
        // endpoint too; this keeps the board's list honest).
        sqlx::query(
            "UPDATE oauth_grants SET revoked_at = $1 WHERE endpoint_id = $2 AND revoked_at IS NULL",
        )
        .bind(now.as_millis())
        .bind(endpoint_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.endpoints_changed();
        Ok(Revoked {
            endpoint_id: endpoint_id.to_owned(),
            revoked_at: now,
            dead_lettered,
        })
    }

    /// Vend: finds the human's agent by name (creating it with `kind` when it
    /// does not exist yet) and creates the endpoint.
    async fn vend_endpoint(
        &self,
        human_id: &str,
        agent_name: &str,
        kind: AgentKind,
        mut new: NewEndpoint,
    ) -> StoreResult<(Agent, Endpoint, bool)> {
        // Everything create_endpoint would refuse is refused before the
        // agent is created: a refused vend writes nothing.
        normalize_scope(&new.queues, &new.verbs)?;
        lease::validate_endpoint_default(new.default_lease_ttl_seconds)?;
        if let Some(expires_at) = new.expires_at
            && expires_at <= self.now()
        {
            return Err(Invalid::new("expires_at", "must be in the future").into());
        }
        let (agent, agent_created) = match self.get_agent(human_id, agent_name).await {
            Ok(agent) => (agent, false),
            Err(StoreError::NotFound) => {
                let created = self
                    .register_agent(NewAgent {
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
                        (self.get_agent(human_id, agent_name).await?, false)
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        new.agent_id = agent.id.clone();
        let endpoint = self.create_endpoint(new).await?;
        Ok((agent, endpoint, agent_created))
    }

    async fn list_endpoints(
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
        .fetch_all(self.reader()?)
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
    async fn endpoints_of_agents(
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
        let rows = q.fetch_all(self.reader()?).await?;
        rows.iter().map(rows::endpoint).collect()
    }

    /// One of the human's endpoints by slug or id.
    async fn get_endpoint(&self, human_id: &str, reference: &str) -> StoreResult<Endpoint> {
        let row = sqlx::query(concat!(
            "SELECT ",
            endpoint_columns!(),
            " WHERE e.human_id = $1 AND (e.slug = $2 OR e.id = $2)"
        ))
        .bind(human_id)
        .bind(reference)
        .fetch_optional(self.reader()?)
        .await?;
        row.as_ref()
            .map(rows::endpoint)
            .unwrap_or(Err(StoreError::NotFound))
    }

    /// Sets (or clears) an active endpoint's default lease.
    async fn set_default_lease(
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
        .execute(self.writer()?)
        .await?;
        self.endpoints_changed();
        let endpoint = self.unscoped_get_endpoint(endpoint_id).await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::EndpointRevoked);
        }
        Ok(endpoint)
    }

    /// Deletes one of the human's endpoints; only a revoked one may go.
    async fn delete_endpoint(&self, human_id: &str, endpoint_id: &str) -> StoreResult<()> {
        let deleted = sqlx::query(
            "DELETE FROM endpoints WHERE id = $1 AND human_id = $2 AND state = 'revoked'",
        )
        .bind(endpoint_id)
        .bind(human_id)
        .execute(self.writer()?)
        .await?;
        if deleted.rows_affected() == 1 {
            return Ok(());
        }
        let exists = sqlx::query("SELECT 1 FROM endpoints WHERE id = $1 AND human_id = $2")
            .bind(endpoint_id)
            .bind(human_id)
            .fetch_optional(self.reader()?)
            .await?;
        Err(match exists {
            Some(_) => StoreError::conflict("the endpoint is active; revoke it before deleting it"),
            None => StoreError::NotFound,
        })
    }

    /// Work counts of several endpoints from their live todos' indexes.
    async fn endpoint_activity(
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
        let ids = json_list(endpoint_ids);
        let counts = sqlx::query(AssertSqlSafe(activity_counts_sql(self.dialect)))
            .bind(ids.clone())
            .fetch_all(self.reader()?)
            .await?;
        for row in counts {
            let id: String = row.try_get("endpoint_id")?;
            let kind: String = row.try_get("kind")?;
            let n: i64 = row.try_get("n")?;
            if let Some(a) = out.get_mut(&id) {
                match kind.as_str() {
                    "pending" => a.pending = n,
                    "oldest" => a.oldest_pending_at = Some(Timestamp::from_millis(n)),
                    "claimed" => a.claimed = n,
                    "retrying" => a.retrying = n,
                    "delayed" => a.delayed = n,
                    _ => a.dead_letters = n,
                }
            }
        }
        let sql = format!(
            "SELECT endpoint_id, MIN(id) AS todo_id FROM todos \
             WHERE endpoint_id {} AND state = 'claimed' AND lease_expires_at > $2 \
             GROUP BY endpoint_id",
            self.dialect.in_short_json_list(1)
        );
        for row in sqlx::query(AssertSqlSafe(sql))
            .bind(ids)
            .bind(self.now().as_millis())
            .fetch_all(self.reader()?)
            .await?
        {
            let id: String = row.get("endpoint_id");
            if let Some(a) = out.get_mut(&id) {
                a.working_on = row.get("todo_id");
            }
        }
        Ok(out)
    }

    async fn authenticate_endpoint(
        &self,
        credential_hash: &str,
    ) -> StoreResult<Option<Arc<Endpoint>>> {
        let now = self.now();
        if let Some(endpoint) = self.auth_cache.get(credential_hash, now) {
            return Ok(Some(endpoint));
        }
        // Read before the lookup: a write racing it leaves the entry stale.
        let generation = self.auth_cache.generation();
        let endpoint = if let Some(writer) = &self.lane {
            // In process, on the writer's connection: no hand-off to sqlx's
            // worker. Its transaction begins by noticing any commit another
            // connection made, so a row changed behind the store is never
            // cached as it was.
            let hash = credential_hash.to_owned();
            writer
                .run(move |conn| {
                    let mut stmt = conn.prepare_cached(AUTHENTICATE_ON_LANE)?;
                    let mut found = stmt.query(rusqlite::params![hash, now.as_millis()])?;
                    match found.next()? {
                        Some(row) => Ok(Some(rows::endpoint(&rows::NamedRow::new(row))?)),
                        None => Ok(None),
                    }
                })
                .await?
        } else {
            let row = sqlx::query(concat!(
                "SELECT ",
                endpoint_columns!(),
                " WHERE e.credential_hash = $1 AND e.state = 'active' \
                  AND (e.expires_at IS NULL OR e.expires_at > $2)"
            ))
            .bind(credential_hash)
            .bind(now.as_millis())
            .fetch_optional(self.reader()?)
            .await?;
            row.as_ref().map(rows::endpoint).transpose()?
        };
        let endpoint = endpoint.map(Arc::new);
        if let Some(endpoint) = &endpoint {
            self.auth_cache
                .put(credential_hash, endpoint.clone(), generation);
        }
        Ok(endpoint)
    }

    async fn stamp_endpoint_seen(
        &self,
        endpoint_id: &str,
        seen_at: crate::domain::Timestamp,
        last_contact: Option<crate::domain::Timestamp>,
    ) -> StoreResult<()> {
        if let Some(writer) = &self.lane {
            let id = endpoint_id.to_owned();
            let contact = last_contact.map(|t| t.as_millis());
            return writer
                .run(move |conn| {
                    conn.prepare_cached(&STAMP_SEEN_ON_LANE)?
                        .execute(rusqlite::params![seen_at.as_millis(), contact, id])?;
                    Ok(())
                })
                .await;
        }
        sqlx::query(STAMP_SEEN)
            .bind(seen_at.as_millis())
            .bind(last_contact.map(|t| t.as_millis()))
            .bind(endpoint_id)
            .execute(self.writer()?)
            .await?;
        Ok(())
    }

    async fn count_pending(&self, endpoint_id: &str) -> StoreResult<i64> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM {} WHERE endpoint_id = $1 AND state = 'pending'",
            self.dialect.pending_todos_by_endpoint()
        )))
        .bind(endpoint_id)
        .fetch_one(self.reader()?)
        .await?;
        Ok(row.get::<i64, _>(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::sqlite_plan;

    #[test]
    fn on_sqlite_the_work_counts_read_the_live_indexes_not_the_history() {
        let plan = sqlite_plan(&activity_counts_sql(Dialect::Sqlite));
        let uses = |index: &str| plan.iter().any(|step| step.contains(index));
        for index in [
            "todos_pending_by_endpoint",
            "todos_claimed_by_endpoint",
            "todos_dead_by_endpoint",
        ] {
            assert!(uses(index), "{index}: {plan:#?}");
        }
        assert!(
            !uses("todos_by_endpoint_created") && !uses("SCAN todos"),
            "the counts walk the history: {plan:#?}"
        );
    }
}
