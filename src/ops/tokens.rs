//! A human's API tokens: issued (the secret shown once, only its hash
//! kept) and revoked.

use crate::delivery::Delivery;
use crate::domain::duration::parse_positive_duration;
use crate::store::{ApiToken, StoreResult, issue_api_token};

/// Issues a token for the human: `expires_in` is a lifetime such as `30d`
/// (none = no expiry). Returns the plain token (shown once) and its record.
pub async fn issue(
    delivery: &Delivery,
    human_id: &str,
    label: Option<String>,
    expires_in: Option<&str>,
) -> StoreResult<(String, ApiToken)> {
    let store = delivery.store();
    let expires_at = match expires_in {
        None => None,
        Some(text) => Some(
            store
                .clock()
                .now()
                .saturating_add(parse_positive_duration(text, "expires_in")?),
        ),
    };
    issue_api_token(store, human_id, label, expires_at).await
}

/// Issues a token for the human that lives `lifetime` from now (the
/// board's sign-in mints its session's token this way).
pub async fn issue_for(
    delivery: &Delivery,
    human_id: &str,
    label: Option<String>,
    lifetime: std::time::Duration,
) -> StoreResult<(String, ApiToken)> {
    let store = delivery.store();
    let expires_at = store.clock().now().saturating_add(lifetime);
    issue_api_token(store, human_id, label, Some(expires_at)).await
}

/// Revokes one of the human's tokens (`Conflict` when already revoked).
pub async fn revoke(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<ApiToken> {
    delivery.store().revoke_api_token(human_id, id).await
}
