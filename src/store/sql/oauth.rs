//! OAuth clients, codes, grants and tokens (`docs/oauth.md`). Every
//! decision is one guarded statement: a code is taken by one `DELETE …
//! RETURNING`, a refresh token spent by one `UPDATE … WHERE spent_at IS
//! NULL RETURNING`, and a reused one revokes its grant by one `UPDATE`.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::SqlStore;
use crate::domain::Timestamp;
use crate::domain::oauth::{
    CODE_TTL_MS, ClientMetadata, REFRESH_TTL_MS, REGISTERED_CLIENT_PREFIX, UNUSED_CLIENT_MS,
    access_expiry,
};
use crate::mint::new_id;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::rows::endpoint_columns;
use crate::store::{StoreError, StoreResult, rows};

/// A client's columns, each prefixed with `p` (`"c."`, or `""` in a
/// `RETURNING`, which names the written table's columns bare).
fn client_columns(p: &str) -> String {
    format!(
        "{p}id AS client_id, {p}kind AS client_kind, {p}name AS client_name, \
         {p}client_uri AS client_uri, {p}redirect_uris AS client_redirect_uris, \
         {p}created_at AS client_created_at, {p}fetched_at AS client_fetched_at"
    )
}

/// A grant's columns, each prefixed with `p` (as [`client_columns`]).
fn grant_columns(p: &str) -> String {
    format!(
        "{p}id AS grant_id, {p}client_id AS grant_client_id, {p}human_id AS grant_human_id, \
         {p}endpoint_id AS grant_endpoint_id, {p}resource AS grant_resource, \
         {p}created_at AS grant_created_at, {p}last_used_at AS grant_last_used_at, \
         {p}revoked_at AS grant_revoked_at"
    )
}

/// A grant's `last_used_at` moves at most this often (ms): authentication
/// does not write on every request.
const LAST_USED_GRANULARITY_MS: i64 = 60_000;

/// The one condition under which a grant's tokens are credentials: the
/// grant unrevoked, its endpoint active and unexpired (`$2` is now).
const LIVE_GRANT: &str = "g.revoked_at IS NULL AND e.state = 'active' \
     AND (e.expires_at IS NULL OR e.expires_at > $2)";

fn client(row: &AnyRow) -> StoreResult<OAuthClient> {
    let uris: String = row.try_get("client_redirect_uris")?;
    let opt_ts = |col: &str| -> StoreResult<Option<Timestamp>> {
        Ok(row
            .try_get::<Option<i64>, _>(col)?
            .map(Timestamp::from_millis))
    };
    Ok(OAuthClient {
        id: row.try_get("client_id")?,
        verified: row.try_get::<String, _>("client_kind")? == "document",
        name: row.try_get("client_name")?,
        client_uri: row.try_get("client_uri")?,
        redirect_uris: serde_json::from_str(&uris)
            .map_err(|e| StoreError::Internal(Box::new(e)))?,
        created_at: Timestamp::from_millis(row.try_get("client_created_at")?),
        fetched_at: opt_ts("client_fetched_at")?,
    })
}

fn grant(row: &AnyRow) -> StoreResult<OAuthGrant> {
    let opt_ts = |col: &str| -> StoreResult<Option<Timestamp>> {
        Ok(row
            .try_get::<Option<i64>, _>(col)?
            .map(Timestamp::from_millis))
    };
    Ok(OAuthGrant {
        id: row.try_get("grant_id")?,
        client_id: row.try_get("grant_client_id")?,
        human_id: row.try_get("grant_human_id")?,
        endpoint_id: row.try_get("grant_endpoint_id")?,
        resource: row.try_get("grant_resource")?,
        created_at: Timestamp::from_millis(row.try_get("grant_created_at")?),
        last_used_at: opt_ts("grant_last_used_at")?,
        revoked_at: opt_ts("grant_revoked_at")?,
    })
}

fn uris_json(metadata: &ClientMetadata) -> String {
    serde_json::to_string(&metadata.redirect_uris).unwrap_or_else(|_| "[]".into())
}

impl SqlStore {
    /// Writes an access and a refresh token of `grant_id`: the access token
    /// expires with its endpoint at the latest.
    async fn write_tokens(
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        grant_id: &str,
        tokens: &NewOAuthTokens,
        now: Timestamp,
        endpoint_expires_at: Option<Timestamp>,
    ) -> StoreResult<(Timestamp, Timestamp)> {
        let access_expires_at = access_expiry(now, endpoint_expires_at);
        let refresh_expires_at = Timestamp::from_millis(now.as_millis() + REFRESH_TTL_MS);
        sqlx::query(
            "INSERT INTO oauth_tokens (token_hash, grant_id, kind, created_at, expires_at) \
             VALUES ($1, $3, 'access', $4, $5), ($2, $3, 'refresh', $4, $6)",
        )
        .bind(&tokens.access_hash)
        .bind(&tokens.refresh_hash)
        .bind(grant_id)
        .bind(now.as_millis())
        .bind(access_expires_at.as_millis())
        .bind(refresh_expires_at.as_millis())
        .execute(&mut **tx)
        .await?;
        Ok((access_expires_at, refresh_expires_at))
    }
}

#[async_trait]
impl OAuthStore for SqlStore {
    async fn get_oauth_client(&self, client_id: &str) -> StoreResult<Option<OAuthClient>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM oauth_clients c WHERE c.id = $1",
            client_columns("c.")
        )))
        .bind(client_id)
        .fetch_optional(self.reader()?)
        .await?;
        row.as_ref().map(client).transpose()
    }

    async fn register_oauth_client(&self, metadata: &ClientMetadata) -> StoreResult<OAuthClient> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO oauth_clients (id, kind, name, client_uri, redirect_uris, created_at) \
             VALUES ($1, 'registered', $2, $3, $4, $5) RETURNING {}",
            client_columns("")
        )))
        .bind(new_id(REGISTERED_CLIENT_PREFIX.trim_end_matches('_')))
        .bind(&metadata.name)
        .bind(&metadata.client_uri)
        .bind(uris_json(metadata))
        .bind(self.now().as_millis())
        .fetch_one(self.writer()?)
        .await?;
        client(&row)
    }

    async fn put_oauth_document_client(
        &self,
        client_id: &str,
        metadata: &ClientMetadata,
    ) -> StoreResult<OAuthClient> {
        // A registered client's id never looks like a URL, so the upsert
        // can only ever refresh a document client.
        let now = self.now().as_millis();
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO oauth_clients \
               (id, kind, name, client_uri, redirect_uris, created_at, fetched_at) \
             VALUES ($1, 'document', $2, $3, $4, $5, $5) \
             ON CONFLICT (id) DO UPDATE SET name = excluded.name, \
               client_uri = excluded.client_uri, redirect_uris = excluded.redirect_uris, \
               fetched_at = excluded.fetched_at WHERE oauth_clients.kind = 'document' \
             RETURNING {}",
            client_columns("")
        )))
        .bind(client_id)
        .bind(&metadata.name)
        .bind(&metadata.client_uri)
        .bind(uris_json(metadata))
        .bind(now)
        .fetch_optional(self.writer()?)
        .await?;
        row.as_ref()
            .map(client)
            .unwrap_or(Err(StoreError::NotFound))
    }

    async fn create_oauth_code(&self, new: NewOAuthCode) -> StoreResult<()> {
        let now = self.now().as_millis();
        // Codes nobody redeemed go here, cheaply (indexed by expiry).
        sqlx::query("DELETE FROM oauth_codes WHERE expires_at <= $1")
            .bind(now)
            .execute(self.writer()?)
            .await?;
        // Tenancy in the statement: only an active, unexpired endpoint of
        // this human gets a code.
        let written = sqlx::query(
            "INSERT INTO oauth_codes (code_hash, client_id, human_id, endpoint_id, redirect_uri, \
               code_challenge, resource, created_at, expires_at) \
             SELECT $1, $2, e.human_id, e.id, $5, $6, $7, $8, $9 FROM endpoints e \
             WHERE e.id = $4 AND e.human_id = $3 AND e.state = 'active' \
               AND (e.expires_at IS NULL OR e.expires_at > $8)",
        )
        .bind(&new.code_hash)
        .bind(&new.client_id)
        .bind(&new.human_id)
        .bind(&new.endpoint_id)
        .bind(&new.redirect_uri)
        .bind(&new.code_challenge)
        .bind(&new.resource)
        .bind(now)
        .bind(now + CODE_TTL_MS)
        .execute(self.writer()?)
        .await?;
        match written.rows_affected() {
            0 => Err(StoreError::NotFound),
            _ => Ok(()),
        }
    }

    async fn take_oauth_code(&self, code_hash: &str) -> StoreResult<Option<OAuthCode>> {
        let row = sqlx::query(
            "DELETE FROM oauth_codes WHERE code_hash = $1 RETURNING client_id, human_id, \
               endpoint_id, redirect_uri, code_challenge, resource, expires_at",
        )
        .bind(code_hash)
        .fetch_optional(self.writer()?)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(Some(OAuthCode {
            client_id: row.try_get("client_id")?,
            human_id: row.try_get("human_id")?,
            endpoint_id: row.try_get("endpoint_id")?,
            redirect_uri: row.try_get("redirect_uri")?,
            code_challenge: row.try_get("code_challenge")?,
            resource: row.try_get("resource")?,
            expires_at: Timestamp::from_millis(row.try_get("expires_at")?),
        }))
    }

    async fn create_oauth_grant(
        &self,
        code: &OAuthCode,
        tokens: NewOAuthTokens,
    ) -> StoreResult<OAuthIssued> {
        let now = self.now();
        let mut tx = self.begin().await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO oauth_grants (id, client_id, human_id, endpoint_id, resource, \
               created_at, last_used_at) \
             SELECT $1, $3, e.human_id, e.id, $5, $2, $2 FROM endpoints e \
             WHERE e.id = $4 AND e.human_id = $6 AND e.state = 'active' \
               AND (e.expires_at IS NULL OR e.expires_at > $2) \
             RETURNING {}",
            grant_columns("")
        )))
        .bind(new_id("og"))
        .bind(now.as_millis())
        .bind(&code.client_id)
        .bind(&code.endpoint_id)
        .bind(&code.resource)
        .bind(&code.human_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Err(StoreError::NotFound);
        };
        let grant = grant(&row)?;
        let expires: Option<i64> = sqlx::query("SELECT expires_at FROM endpoints WHERE id = $1")
            .bind(&code.endpoint_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        let (access_expires_at, refresh_expires_at) = Self::write_tokens(
            &mut tx,
            &grant.id,
            &tokens,
            now,
            expires.map(Timestamp::from_millis),
        )
        .await?;
        tx.commit().await?;
        Ok(OAuthIssued {
            grant,
            access_expires_at,
            refresh_expires_at,
        })
    }

    async fn refresh_oauth_grant(
        &self,
        client_id: &str,
        refresh_hash: &str,
        tokens: NewOAuthTokens,
    ) -> StoreResult<OAuthRefresh> {
        let now = self.now();
        let mut tx = self.begin().await?;
        // Spent once: the one decision. A second presenter finds it spent.
        let spent = sqlx::query(
            "UPDATE oauth_tokens SET spent_at = $2 WHERE token_hash = $1 AND kind = 'refresh' \
               AND spent_at IS NULL AND expires_at > $2 RETURNING grant_id",
        )
        .bind(refresh_hash)
        .bind(now.as_millis())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(spent) = spent else {
            tx.rollback().await?;
            // Reuse of a spent token: the whole grant dies, in one statement.
            let revoked = sqlx::query(
                "UPDATE oauth_grants SET revoked_at = $2 WHERE revoked_at IS NULL AND id = \
                   (SELECT grant_id FROM oauth_tokens WHERE token_hash = $1 \
                      AND kind = 'refresh' AND spent_at IS NOT NULL) \
                 RETURNING id, endpoint_id",
            )
            .bind(refresh_hash)
            .bind(now.as_millis())
            .fetch_optional(self.writer()?)
            .await?;
            return Ok(match revoked {
                Some(row) => {
                    self.endpoints_changed();
                    OAuthRefresh::Reused {
                        grant_id: row.try_get(0)?,
                        endpoint_id: row.try_get(1)?,
                    }
                }
                None => OAuthRefresh::Refused,
            });
        };
        let grant_id: String = spent.try_get(0)?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {}, e.expires_at AS endpoint_expires_at FROM oauth_grants g \
             JOIN endpoints e ON e.id = g.endpoint_id \
             WHERE g.id = $1 AND g.client_id = $3 AND {LIVE_GRANT}",
            grant_columns("g.")
        )))
        .bind(&grant_id)
        .bind(now.as_millis())
        .bind(client_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            // Another client's token, or a dead grant: nothing is spent.
            tx.rollback().await?;
            return Ok(OAuthRefresh::Refused);
        };
        let mut grant = grant(&row)?;
        let endpoint_expires_at = row
            .try_get::<Option<i64>, _>("endpoint_expires_at")?
            .map(Timestamp::from_millis);
        let (access_expires_at, refresh_expires_at) =
            Self::write_tokens(&mut tx, &grant_id, &tokens, now, endpoint_expires_at).await?;
        sqlx::query("UPDATE oauth_grants SET last_used_at = $2 WHERE id = $1")
            .bind(&grant_id)
            .bind(now.as_millis())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        grant.last_used_at = Some(now);
        Ok(OAuthRefresh::Rotated(OAuthIssued {
            grant,
            access_expires_at,
            refresh_expires_at,
        }))
    }

    async fn authenticate_oauth_token(
        &self,
        access_hash: &str,
    ) -> StoreResult<Option<Arc<Endpoint>>> {
        let now = self.now();
        if let Some(endpoint) = self.auth_cache.get(access_hash, now) {
            return Ok(Some(endpoint));
        }
        let generation = self.auth_cache.generation();
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT g.id AS grant_id, g.last_used_at AS grant_last_used_at, \
               t.expires_at AS token_expires_at, {columns} \
             JOIN oauth_grants g ON g.endpoint_id = e.id \
             JOIN oauth_tokens t ON t.grant_id = g.id \
             WHERE t.token_hash = $1 AND t.kind = 'access' AND t.expires_at > $2 AND {LIVE_GRANT}",
            columns = endpoint_columns!()
        )))
        .bind(access_hash)
        .bind(now.as_millis())
        .fetch_optional(self.reader()?)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let endpoint = Arc::new(rows::endpoint(&row)?);
        let token_expires_at = Timestamp::from_millis(row.try_get("token_expires_at")?);
        let last_used: Option<i64> = row.try_get("grant_last_used_at")?;
        if last_used.is_none_or(|t| now.as_millis() - t >= LAST_USED_GRANULARITY_MS) {
            let grant_id: String = row.try_get("grant_id")?;
            sqlx::query("UPDATE oauth_grants SET last_used_at = $2 WHERE id = $1")
                .bind(&grant_id)
                .bind(now.as_millis())
                .execute(self.writer()?)
                .await?;
        }
        self.auth_cache.put_until(
            access_hash,
            endpoint.clone(),
            generation,
            Some(token_expires_at),
        );
        Ok(Some(endpoint))
    }

    async fn list_oauth_connections(
        &self,
        human_id: &str,
        endpoint_id: &str,
    ) -> StoreResult<Vec<OAuthConnection>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {}, {} FROM oauth_grants g \
             JOIN oauth_clients c ON c.id = g.client_id \
             WHERE g.human_id = $1 AND g.endpoint_id = $2 AND g.revoked_at IS NULL \
             ORDER BY g.created_at DESC, g.id DESC LIMIT 100",
            grant_columns("g."),
            client_columns("c.")
        )))
        .bind(human_id)
        .bind(endpoint_id)
        .fetch_all(self.reader()?)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(OAuthConnection {
                    grant: grant(row)?,
                    client: client(row)?,
                })
            })
            .collect()
    }

    async fn revoke_oauth_grant(
        &self,
        human_id: &str,
        endpoint_id: &str,
        grant_id: &str,
    ) -> StoreResult<OAuthGrant> {
        let now = self.now().as_millis();
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE oauth_grants SET revoked_at = $4 \
             WHERE id = $3 AND human_id = $1 AND endpoint_id = $2 AND revoked_at IS NULL \
             RETURNING {}",
            grant_columns("")
        )))
        .bind(human_id)
        .bind(endpoint_id)
        .bind(grant_id)
        .bind(now)
        .fetch_optional(self.writer()?)
        .await?;
        if let Some(row) = row {
            self.endpoints_changed();
            return grant(&row);
        }
        let exists = sqlx::query(
            "SELECT 1 FROM oauth_grants WHERE id = $3 AND human_id = $1 AND endpoint_id = $2",
        )
        .bind(human_id)
        .bind(endpoint_id)
        .bind(grant_id)
        .fetch_optional(self.reader()?)
        .await?;
        Err(match exists {
            Some(_) => StoreError::conflict("the client's access is already revoked"),
            None => StoreError::NotFound,
        })
    }

    async fn unscoped_prune_oauth(&self) -> StoreResult<u64> {
        let now = self.now().as_millis();
        let mut pruned = 0;
        for (sql, at) in [
            ("DELETE FROM oauth_codes WHERE expires_at <= $1", now),
            // A spent refresh token is kept while it could still be
            // presented (reuse detection), then goes with the others.
            ("DELETE FROM oauth_tokens WHERE expires_at <= $1", now),
            (
                "DELETE FROM oauth_tokens WHERE expires_at > $1 AND grant_id IN \
                   (SELECT id FROM oauth_grants WHERE revoked_at IS NOT NULL)",
                now,
            ),
            // Clients nobody used: registrations (open to anyone) and
            // documents fetched for an authorization never granted.
            (
                "DELETE FROM oauth_clients WHERE created_at <= $1 \
                   AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = oauth_clients.id) \
                   AND NOT EXISTS (SELECT 1 FROM oauth_codes k WHERE k.client_id = oauth_clients.id)",
                now - UNUSED_CLIENT_MS,
            ),
        ] {
            pruned += sqlx::query(sql)
                .bind(at)
                .execute(self.writer()?)
                .await?
                .rows_affected();
        }
        Ok(pruned)
    }
}
