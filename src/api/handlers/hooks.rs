use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiPath, HumanAuth};
use crate::api::views::{HookDeliveryView, HookList, HookTestView, HookView, NewHookView};
use crate::delivery::hooks::Delivered;
use crate::http::error::{ApiResult, ErrorBody, NamedEndpoint};
use crate::ops;
use crate::store::{Hook, HookDelivery};

/// Tries shown per hook in a listing.
const LISTED_DELIVERIES: i64 = 5;

impl From<&Hook> for HookView {
    fn from(h: &Hook) -> Self {
        Self {
            id: h.id.clone(),
            endpoint_id: h.endpoint_id.clone(),
            url: h.url.clone(),
            state: if h.is_enabled() {
                "enabled"
            } else {
                "disabled"
            },
            consecutive_failures: h.consecutive_failures,
            disabled_reason: h.disabled_reason.clone(),
            disabled_at: h.disabled_at.map(|t| t.to_rfc3339()),
            created_at: h.created_at.to_rfc3339(),
            last_deliveries: None,
        }
    }
}

impl From<&HookDelivery> for HookDeliveryView {
    fn from(d: &HookDelivery) -> Self {
        Self {
            at: d.at.to_rfc3339(),
            event: d.event.clone(),
            todo_id: d.todo_id.clone(),
            outcome: d.outcome.clone(),
            status: d.status,
            error: d.error.clone(),
            duration_ms: d.duration_ms,
            attempt: d.attempt,
        }
    }
}

impl From<&Delivered> for HookTestView {
    fn from(d: &Delivered) -> Self {
        Self {
            outcome: d.outcome.label(),
            status: d.outcome.status(),
            error: d.outcome.error().map(str::to_owned),
            duration_ms: d.duration_ms,
        }
    }
}

/// The notify hooks of one endpoint, with their state and last deliveries.
#[utoipa::path(get, path = "/api/v1/endpoints/{reference}/hooks", operation_id = "list_hooks", tag = "hooks",
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = HookList),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
) -> ApiResult<Json<HookList>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let hooks = state.store.list_hooks(&auth.human.id, &endpoint.id).await?;
    let mut views = Vec::with_capacity(hooks.len());
    for hook in &hooks {
        let deliveries = state
            .store
            .list_hook_deliveries(&auth.human.id, &hook.id, LISTED_DELIVERIES)
            .await?;
        views.push(HookView {
            last_deliveries: Some(deliveries.iter().map(HookDeliveryView::from).collect()),
            ..HookView::from(hook)
        });
    }
    Ok(Json(HookList { hooks: views }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddHook {
    /// An absolute http(s) URL without a user name or password, at most 2048 bytes.
    pub url: String,
}

/// Adds a notify hook; its signing secret is shown once.
#[utoipa::path(post, path = "/api/v1/endpoints/{reference}/hooks", operation_id = "add_hook", tag = "hooks",
    request_body = AddHook,
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 201, body = NewHookView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn add(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
    ApiJson(body): ApiJson<AddHook>,
) -> ApiResult<(StatusCode, Json<NewHookView>)> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let issued = ops::hooks::add(&state.delivery, &auth.human.id, &endpoint, &body.url).await?;
    let view = NewHookView {
        secret: issued.secret,
        hook: HookView::from(&issued.hook),
    };
    Ok((StatusCode::CREATED, Json(view)))
}

/// Deletes a notify hook.
#[utoipa::path(delete, path = "/api/v1/hooks/{id}", operation_id = "delete_hook", tag = "hooks",
    params(("id" = String, Path, description = "Hook id")),
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
    ops::hooks::delete(&state.delivery, &auth.human.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Enables a hook again (after it was disabled by failures), failures reset.
#[utoipa::path(post, path = "/api/v1/hooks/{id}/enable", operation_id = "enable_hook", tag = "hooks",
    params(("id" = String, Path, description = "Hook id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = HookView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn enable(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<HookView>> {
    let hook = ops::hooks::enable(&state.delivery, &auth.human.id, &id).await?;
    Ok(Json(HookView::from(&hook)))
}

/// Sends a `type: "test"` delivery now (one try) and answers how it went.
#[utoipa::path(post, path = "/api/v1/hooks/{id}/test", operation_id = "test_hook", tag = "hooks",
    params(("id" = String, Path, description = "Hook id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = HookTestView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn test(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<HookTestView>> {
    let delivered = ops::hooks::test(&state.delivery, &auth.human.id, &id).await?;
    Ok(Json(HookTestView::from(&delivered)))
}
