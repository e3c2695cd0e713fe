//! Humans' API tokens.

use super::paging::Cursor;
use super::{SqlStore, paging};
use crate::domain::Invalid;
use crate::mint::new_id;
use crate::store::error::is_unique_violation;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::{StoreError, StoreResult, Taken, rows};
use async_trait::async_trait;
use sqlx::Row;

const TOKEN_COLUMNS: &str = "id, human_id, token_prefix, label, created_at, expires_at, \
     revoked_at, last_used_at, session_of";

/// A token's `last_used_at` is refreshed at most this often (ms), so that
/// authentication does not write on every request.
const LAST_USED_GRANULARITY_MS: i64 = 60_000;

#[async_trait]
impl TokenStore for SqlStore {
    async fn create_api_token(&self, new: NewApiToken) -> StoreResult<ApiToken> {
        let now = self.now();
        if let Some(expires_at) = new.expires_at
            && expires_at <= now
        {
            return Err(Invalid::new("expires_at", "must be in the future").into());
        }
        if let Some(label) = &new.label
            && (label.len() > 100 || label.chars().any(char::is_control))
        {
            return Err(Invalid::new("label", "must be one line of at most 100 bytes").into());
        }
        // A session's token is written only while the token it is of is
        // live (one statement: a revocation racing the sign-in wins).
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO human_tokens (id, human_id, token_hash, token_prefix, label, created_at, \
               expires_at, session_of) \
             SELECT $1, h.id, $2, $3, $4, $5, $6, CAST($8 AS TEXT) FROM humans h WHERE h.id = $7 \
               AND (CAST($8 AS TEXT) IS NULL OR EXISTS (\
                 SELECT 1 FROM human_tokens p WHERE p.id = CAST($8 AS TEXT) \
                   AND p.human_id = h.id AND p.revoked_at IS NULL \
                   AND (p.expires_at IS NULL OR p.expires_at > $5))) \
             RETURNING {TOKEN_COLUMNS}"
        )))
        .bind(new_id("tok"))
        .bind(&new.token_hash)
        .bind(&new.prefix)
        .bind(&new.label)
        .bind(now.as_millis())
        .bind(new.expires_at.map(|t| t.as_millis()))
        .bind(&new.human_id)
        .bind(&new.session_of)
        .fetch_optional(self.writer()?)
        .await
        .map_err(|e| match is_unique_violation(&e) {
            true => StoreError::Taken(Taken::ApiToken),
            false => StoreError::from(e),
        })?;
        row.as_ref()
            .map(rows::api_token)
            .unwrap_or(Err(StoreError::NotFound))
    }

    async fn authenticate_api_token(
        &self,
        token_hash: &str,
    ) -> StoreResult<Option<AuthenticatedToken>> {
        let now = self.now().as_millis();
        // A board session lives only while the token it is of lives.
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {cols}, h.name AS human_name, h.created_at AS human_created_at, \
               p.expires_at AS session_of_expires_at \
             FROM human_tokens t JOIN humans h ON h.id = t.human_id \
             LEFT JOIN human_tokens p ON p.id = t.session_of \
             WHERE t.token_hash = $1 AND t.revoked_at IS NULL \
               AND (t.expires_at IS NULL OR t.expires_at > $2) \
               AND (t.session_of IS NULL OR (p.id IS NOT NULL AND p.revoked_at IS NULL \
                 AND (p.expires_at IS NULL OR p.expires_at > $2)))",
            cols = TOKEN_COLUMNS
                .split(", ")
                .map(|c| format!("t.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
        .bind(token_hash)
        .bind(now)
        .fetch_optional(self.reader()?)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let token = rows::api_token(&row)?;
        let authority_expires_at = match token.session_of {
            Some(_) => row
                .try_get::<Option<i64>, _>("session_of_expires_at")?
                .map(crate::domain::Timestamp::from_millis),
            None => token.expires_at,
        };
        let human = Human {
            id: token.human_id.clone(),
            name: row.try_get("human_name")?,
            created_at: crate::domain::Timestamp::from_millis(row.try_get("human_created_at")?),
        };
        let stale = token
            .last_used_at
            .is_none_or(|t| now - t.as_millis() >= LAST_USED_GRANULARITY_MS);
        if stale {
            sqlx::query("UPDATE human_tokens SET last_used_at = $1 WHERE id = $2")
                .bind(now)
                .bind(&token.id)
                .execute(self.writer()?)
                .await?;
        }
        Ok(Some(AuthenticatedToken {
            human,
            token,
            authority_expires_at,
        }))
    }

    async fn list_api_tokens(
        &self,
        human_id: &str,
        page: &PageRequest,
    ) -> StoreResult<Page<ApiToken>> {
        let (limit, cursor) = paging::decode(page)?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TOKEN_COLUMNS} FROM human_tokens WHERE human_id = $1 \
               AND (created_at < $2 OR (created_at = $2 AND id < $3)) \
             ORDER BY created_at DESC, id DESC LIMIT $4"
        )))
        .bind(human_id)
        .bind(cursor.created_at)
        .bind(&cursor.id)
        .bind(limit + 1)
        .fetch_all(self.reader()?)
        .await?;
        let items = rows
            .iter()
            .map(rows::api_token)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(paging::page(items, limit, |t| {
            Cursor::new(t.created_at, &t.id)
        }))
    }

    async fn revoke_api_token(&self, human_id: &str, id: &str) -> StoreResult<ApiToken> {
        let now = self.now().as_millis();
        // The token and the board sessions signed in with it, at once.
        let revoked = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE human_tokens SET revoked_at = $1 \
             WHERE (id = $2 OR session_of = $2) AND human_id = $3 AND revoked_at IS NULL \
             RETURNING {TOKEN_COLUMNS}"
        )))
        .bind(now)
        .bind(id)
        .bind(human_id)
        .fetch_all(self.writer()?)
        .await?;
        for row in &revoked {
            let token = rows::api_token(row)?;
            if token.id == id {
                return Ok(token);
            }
        }
        let exists = sqlx::query("SELECT 1 FROM human_tokens WHERE id = $1 AND human_id = $2")
            .bind(id)
            .bind(human_id)
            .fetch_optional(self.reader()?)
            .await?;
        Err(match exists {
            Some(_) => StoreError::conflict("the token is already revoked"),
            None => StoreError::NotFound,
        })
    }
}
