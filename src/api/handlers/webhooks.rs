use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiPath, HumanAuth};
use crate::api::views::{NewWebhookView, WebhookList, WebhookView};
use crate::http::error::{ApiResult, ErrorBody, NamedEndpoint};
use crate::ops;
use crate::ops::webhooks::IssuedWebhook;
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
            senders: super::deliveries::senders_view(&w.senders),
        }
    }
}

impl From<&IssuedWebhook> for NewWebhookView {
    fn from(issued: &IssuedWebhook) -> Self {
        Self {
            ingest_url: issued.ingest_url.clone(),
            signing_secret: issued.signing_secret.clone(),
            webhook: WebhookView::from(&issued.webhook),
        }
    }
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
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
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
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let issued = ops::webhooks::create(
        &state.delivery,
        &state.api.public_url,
        &auth.human.id,
        &endpoint,
        body.queue,
        body.signed.unwrap_or(false),
    )
    .await?;
    let view = NewWebhookView::from(&issued);
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
    let issued =
        ops::webhooks::rotate(&state.delivery, &state.api.public_url, &auth.human.id, &id).await?;
    Ok(Json(NewWebhookView::from(&issued)))
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
    ops::webhooks::delete(&state.delivery, &auth.human.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
