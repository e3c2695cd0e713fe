//! Humans, agents and endpoints: the parts of the registry the queue needs,
//! and the revoke cascade.

use sqlx::{Any, Row, Transaction};

use super::SqlStore;
use crate::domain::Timestamp;
use crate::domain::scope::normalize_scope;
use crate::domain::{Invalid, lease};
use crate::mint::new_id;
use crate::store::error::is_unique_violation;
use crate::store::model::*;
use crate::store::rows::{self, agent_columns, endpoint_columns};
use crate::store::{StoreError, StoreResult, Taken};

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
    pub(super) async fn insert_human(&self, name: &str) -> StoreResult<Human> {
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
        .fetch_one(&self.writer)
        .await
        .map_err(|e| match is_unique_violation(&e) {
            true => StoreError::Taken(Taken::HumanName(name.to_owned())),
            false => StoreError::from(e),
        })?;
        rows::human(&row)
    }

    pub(super) async fn insert_agent(&self, new: NewAgent) -> StoreResult<Agent> {
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
        .fetch_one(&self.writer)
        .await
        .map_err(|e| match is_unique_violation(&e) {
            true => StoreError::Taken(Taken::AgentName(new.name.clone())),
            false => StoreError::from(e),
        })?;
        rows::agent(&row)
    }

    pub(super) async fn insert_endpoint(&self, new: NewEndpoint) -> StoreResult<Endpoint> {
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
               default_lease_ttl_seconds) \
             SELECT $1, a.id, a.human_id, $2, $3, $4, $5, $6, $7, $8, $9 \
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
        .execute(&self.writer)
        .await
        .map_err(|e| match is_unique_violation(&e) {
            true => StoreError::Taken(Taken::SlugOrCredential),
            false => StoreError::from(e),
        })?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        self.select_endpoint(&id).await
    }

    pub(super) async fn select_endpoint(&self, id: &str) -> StoreResult<Endpoint> {
        let row = sqlx::query(concat!("SELECT ", endpoint_columns!(), " WHERE e.id = $1"))
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        match row {
            Some(row) => rows::endpoint(&row),
            None => Err(StoreError::NotFound),
        }
    }

    pub(super) async fn revoke(&self, human_id: &str, endpoint_id: &str) -> StoreResult<Revoked> {
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
        tx.commit().await?;
        Ok(Revoked {
            endpoint_id: endpoint_id.to_owned(),
            revoked_at: now,
            dead_lettered,
        })
    }

    pub(super) async fn expire_endpoints(&self, limit: i64) -> StoreResult<Vec<Revoked>> {
        let now = self.now();
        let due: Vec<String> = sqlx::query(
            "SELECT id FROM endpoints \
             WHERE state = 'active' AND expires_at IS NOT NULL AND expires_at <= $1 \
             ORDER BY expires_at LIMIT $2",
        )
        .bind(now.as_millis())
        .bind(limit)
        .fetch_all(&self.writer)
        .await?
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect();
        let mut expired = Vec::with_capacity(due.len());
        for endpoint_id in due {
            let mut tx = self.begin().await?;
            // Guarded again: another instance may have expired it meanwhile.
            let flipped = sqlx::query(
                "UPDATE endpoints SET state = 'revoked', revoked_at = $1 \
                 WHERE id = $2 AND state = 'active' AND expires_at <= $1 RETURNING id",
            )
            .bind(now.as_millis())
            .bind(&endpoint_id)
            .fetch_optional(&mut *tx)
            .await?;
            if flipped.is_none() {
                tx.rollback().await?;
                continue;
            }
            let dead_lettered =
                Self::dead_letter_live_todos(&mut tx, &endpoint_id, now, RevokeReason::Expired)
                    .await?;
            tx.commit().await?;
            expired.push(Revoked {
                endpoint_id,
                revoked_at: now,
                dead_lettered,
            });
        }
        Ok(expired)
    }

    /// The revoke cascade: every live todo becomes a dead letter, and every
    /// open attempt is closed as `revoked`, in the caller's transaction.
    async fn dead_letter_live_todos(
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
             WHERE endpoint_id = $2 AND (state IN ('pending', 'claimed') \
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

/// Agent names: lowercase `[a-z0-9][a-z0-9-]{0,62}`.
pub fn validate_agent_name(name: &str) -> Result<(), Invalid> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if ok {
        Ok(())
    } else {
        Err(Invalid::new(
            "name",
            format!(
                "{name:?} is not an agent name: 1-63 characters of a-z, 0-9 or '-', starting with a letter or digit"
            ),
        ))
    }
}

/// An agent's optional settings: a positive expected interval (at most 30
/// days) and a one-line description of at most 500 bytes.
pub fn validate_agent_details(
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
