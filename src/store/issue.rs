//! Issuing a human API token: mint the secret, store only its hash.
//!
//! The API, the CLI's `admin token create` and the first-start bootstrap all
//! issue tokens; this is the one place that does it.

use super::{ApiToken, NewApiToken, Store, StoreResult};
use crate::domain::Timestamp;
use crate::domain::ids::{SHOWN_PREFIX_CHARS, sha256_hex};
use crate::mint::new_human_token;

/// Creates a token for `human_id`: the plain token (shown once) and its record.
pub async fn issue_api_token(
    store: &dyn Store,
    human_id: &str,
    label: Option<String>,
    expires_at: Option<Timestamp>,
) -> StoreResult<(String, ApiToken)> {
    store_api_token(store, human_id, new_human_token(), label, expires_at).await
}

/// Creates a board session's own token for `human_id`, bound to the live
/// token `of` it was signed in with (`NotFound` once that one is dead).
pub async fn issue_session_token(
    store: &dyn Store,
    human_id: &str,
    of: &str,
    label: Option<String>,
    expires_at: Option<Timestamp>,
) -> StoreResult<(String, ApiToken)> {
    let token = new_human_token();
    let record = store
        .create_api_token(NewApiToken {
            human_id: human_id.to_owned(),
            token_hash: sha256_hex(&token),
            prefix: token[..SHOWN_PREFIX_CHARS].to_owned(),
            label,
            expires_at,
            session_of: Some(of.to_owned()),
        })
        .await?;
    Ok((token, record))
}

/// Stores `token`, a secret minted elsewhere (the first start's, or one an
/// orchestrator supplied), for `human_id`: only its hash is kept.
pub async fn store_api_token(
    store: &dyn Store,
    human_id: &str,
    token: String,
    label: Option<String>,
    expires_at: Option<Timestamp>,
) -> StoreResult<(String, ApiToken)> {
    let record = store
        .create_api_token(NewApiToken {
            human_id: human_id.to_owned(),
            token_hash: sha256_hex(&token),
            prefix: token[..SHOWN_PREFIX_CHARS].to_owned(),
            label,
            expires_at,
            session_of: None,
        })
        .await?;
    Ok((token, record))
}
