//! Intake webhooks: created, rotated and deleted by the endpoint's human.
//! The URL token (and a signed webhook's secret) are minted here, stored
//! only as a hash, and returned this once.

use crate::delivery::Delivery;
use crate::domain::Invalid;
use crate::domain::client_setup::ingest_url;
use crate::domain::ids::sha256_hex;
use crate::mint::{new_signing_secret, new_webhook_url_token};
use crate::store::{Endpoint, StoreError, StoreResult, Webhook};

/// A webhook just made or rotated, with what is shown this once.
#[derive(Debug, Clone)]
pub struct IssuedWebhook {
    pub webhook: Webhook,
    /// The URL a sender posts to; it holds the secret URL token.
    pub ingest_url: String,
    /// The HMAC secret of a signed webhook.
    pub signing_secret: Option<String>,
}

/// Creates a webhook on one of the endpoint's queues (`queue` may be
/// omitted when it has one); `signed` asks for an HMAC secret.
pub async fn create(
    delivery: &Delivery,
    public_url: &str,
    human_id: &str,
    endpoint: &Endpoint,
    queue: Option<String>,
    signed: bool,
) -> StoreResult<IssuedWebhook> {
    if !endpoint.is_active() {
        return Err(StoreError::EndpointRevoked);
    }
    let queue = match queue {
        Some(q) => q,
        None if endpoint.scope_queues.len() == 1 => endpoint.scope_queues[0].clone(),
        None => {
            return Err(Invalid::new("queue", "required: the endpoint has several queues").into());
        }
    };
    let url_token = new_webhook_url_token();
    let secret = signed.then(new_signing_secret);
    let webhook = delivery
        .store()
        .create_webhook(
            human_id,
            &endpoint.id,
            &queue,
            &sha256_hex(&url_token),
            secret.as_deref(),
        )
        .await?;
    Ok(IssuedWebhook {
        webhook,
        ingest_url: ingest_url(public_url, &url_token),
        signing_secret: secret,
    })
}

/// A new URL (and secret, when signed); the old ones stop working at once.
pub async fn rotate(
    delivery: &Delivery,
    public_url: &str,
    human_id: &str,
    id: &str,
) -> StoreResult<IssuedWebhook> {
    let store = delivery.store();
    let current = store.get_webhook(human_id, id).await?;
    let url_token = new_webhook_url_token();
    let secret = current.signed.then(new_signing_secret);
    let webhook = store
        .rotate_webhook(human_id, id, &sha256_hex(&url_token), secret.as_deref())
        .await?;
    Ok(IssuedWebhook {
        webhook,
        ingest_url: ingest_url(public_url, &url_token),
        signing_secret: secret,
    })
}

/// Deletes a webhook; its URL stops working.
pub async fn delete(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<()> {
    delivery.store().delete_webhook(human_id, id).await
}

/// Sets whom a webhook trusts (`docs/intake.md`, "Trusted senders").
pub async fn set_senders(
    delivery: &Delivery,
    human_id: &str,
    id: &str,
    senders: &crate::store::Senders,
) -> StoreResult<Webhook> {
    delivery
        .store()
        .set_webhook_senders(human_id, id, senders)
        .await
}
