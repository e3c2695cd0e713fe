use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiPath, HumanAuth};
use crate::api::views::{NewWebhookView, WebhookList, WebhookView};
use crate::domain::ids::sha256_hex;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::mint::{new_signing_secret, new_webhook_url_token};
use crate::store::Webhook;

impl From<&Webhook> for WebhookView {
    fn from(w: &Webhook) -> Self {
        Self {
            id: w.id.clone(),
            endpoint_id: w.endpoint_id.clone(),
            queue: w.queue.clone(),
            signed: w.signed,
            created_at: w.created_at.to_rfc3339(),
            rotated_at: w.rotated_at.map(|t| t.to_rfc3339()),
        }
    }
}

pub(crate) fn ingest_url(public_url: &str, url_token: &str) -> String {
    format!(
        "{}/webhooks/w/{url_token}",
        public_url.trim_end_matches('/')
    )
}

/// Creates a webhook and returns its one-time URL (and secret).
pub(crate) async fn issue_webhook(
    state: &ApiState,
    human_id: &str,
    endpoint_id: &str,
    queue: &str,
    signed: bool,
) -> ApiResult<NewWebhookView> {
    let url_token = new_webhook_url_token();
    let secret = signed.then(new_signing_secret);
    let webhook = state
        .store
        .create_webhook(
            human_id,
            endpoint_id,
            queue,
            &sha256_hex(&url_token),
            secret.as_deref(),
        )
        .await?;
    Ok(NewWebhookView {
        ingest_url: ingest_url(&state.api.public_url, &url_token),
        signing_secret: secret,
        webhook: WebhookView::from(&webhook),
    })
}

/// The webhooks of one endpoint.
#[utoipa::path(get, path = "/api/v1/endpoints/{reference}/webhooks", operation_id = "list_webhooks", tag = "webhooks",
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = WebhookList),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
) -> ApiResult<Json<WebhookList>> {
    let endpoint = state.store.get_endpoint(&auth.human.id, &reference).await?;
    let webhooks = state
        .store
        .list_webhooks(&auth.human.id, &endpoint.id)
        .await?;
    Ok(Json(WebhookList {
        webhooks: webhooks.iter().map(WebhookView::from).collect(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateWebhook {
    /// A queue of the endpoint's scope; may be omitted when it has one queue.
    #[schema(pattern = r"^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub queue: Option<String>,
    /// Require an HMAC-SHA256 signature (`X-Hub-Signature-256`).
    pub signed: Option<bool>,
}

/// Creates a webhook; its ingest URL (and signing secret) are shown once.
#[utoipa::path(post, path = "/api/v1/endpoints/{reference}/webhooks", operation_id = "create_webhook", tag = "webhooks",
    request_body = CreateWebhook,
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 201, body = NewWebhookView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn create(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
    ApiJson(body): ApiJson<CreateWebhook>,
) -> ApiResult<(StatusCode, Json<NewWebhookView>)> {
    let endpoint = state.store.get_endpoint(&auth.human.id, &reference).await?;
    if !endpoint.is_active() {
        return Err(ApiError::revoked());
    }
    let queue = match body.queue {
        Some(q) => q,
        None if endpoint.scope_queues.len() == 1 => endpoint.scope_queues[0].clone(),
        None => {
            return Err(ApiError::invalid(
                "queue",
                "required: the endpoint has several queues",
            ));
        }
    };
    let view = issue_webhook(
        &state,
        &auth.human.id,
        &endpoint.id,
        &queue,
        body.signed.unwrap_or(false),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Issues a new URL (and secret, when signed); the old ones stop working at once.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/rotate", operation_id = "rotate_webhook", tag = "webhooks",
    params(("id" = String, Path, description = "Webhook id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = NewWebhookView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn rotate(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<NewWebhookView>> {
    let current = state.store.get_webhook(&auth.human.id, &id).await?;
    let url_token = new_webhook_url_token();
    let secret = current.signed.then(new_signing_secret);
    let webhook = state
        .store
        .rotate_webhook(
            &auth.human.id,
            &id,
            &sha256_hex(&url_token),
            secret.as_deref(),
        )
        .await?;
    Ok(Json(NewWebhookView {
        ingest_url: ingest_url(&state.api.public_url, &url_token),
        signing_secret: secret,
        webhook: WebhookView::from(&webhook),
    }))
}

/// Deletes a webhook; its URL stops working.
#[utoipa::path(delete, path = "/api/v1/webhooks/{id}", operation_id = "delete_webhook", tag = "webhooks",
    params(("id" = String, Path, description = "Webhook id")),
    security(("bearer" = [])),
    responses(
        (status = 204),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn remove(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    state.store.delete_webhook(&auth.human.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
