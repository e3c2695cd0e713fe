use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiPath, HumanAuth};
use crate::delivery::presence::{self as service, PresenceView};
use crate::domain::Timestamp;
use crate::domain::presence::Presence;
use crate::http::error::{ApiError, ApiResult, ErrorBody, NamedEndpoint};
use crate::ops;
use crate::store::Endpoint;

/// Presence as the API shows it (`docs/presence.md`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PresenceBody {
    /// `in` or `out`.
    pub presence: String,
    /// `shift`, `agent`, `operator` or `default`.
    pub source: String,
    /// When the value next changes; null = never.
    #[schema(format = DateTime)]
    pub until: Option<String>,
    pub shift: Option<String>,
    /// Push-eligible pending todos.
    pub pending: i64,
}

impl From<PresenceView> for PresenceBody {
    fn from(v: PresenceView) -> Self {
        Self {
            presence: v.presence.to_owned(),
            source: v.source.to_owned(),
            until: v.until,
            shift: v.shift,
            pending: v.pending,
        }
    }
}

async fn body(state: &ApiState, endpoint: &Endpoint) -> ApiResult<Json<PresenceBody>> {
    let fresh = state.store.unscoped_get_endpoint(&endpoint.id).await?;
    let view = service::view(&*state.store, &fresh, state.store.clock().now()).await;
    Ok(Json(view.into()))
}

/// The endpoint's effective presence.
#[utoipa::path(get, path = "/api/v1/endpoints/{reference}/presence", operation_id = "get_presence", tag = "presence",
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = PresenceBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn show(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
) -> ApiResult<Json<PresenceBody>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    body(&state, &endpoint).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetPresence {
    /// `in` or `out`.
    pub presence: String,
    /// RFC 3339, in the future; null = until the next shift boundary or a change.
    pub until: Option<String>,
}

/// Writes an operator override (no duration cap; it still ends at the next
/// shift boundary).
#[utoipa::path(put, path = "/api/v1/endpoints/{reference}/presence", operation_id = "set_presence", tag = "presence",
    request_body = SetPresence,
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = PresenceBody),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn set(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
    ApiJson(req): ApiJson<SetPresence>,
) -> ApiResult<Json<PresenceBody>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let value = Presence::parse(&req.presence)
        .ok_or_else(|| ApiError::invalid("presence", "must be \"in\" or \"out\""))?;
    let until = match req.until.as_deref() {
        None => None,
        Some(text) => Some(
            Timestamp::parse_rfc3339(text)
                .ok_or_else(|| ApiError::invalid("until", "must be an RFC 3339 time"))?,
        ),
    };
    let endpoint =
        ops::presence::operator_set(&state.delivery, &endpoint, &auth.human.id, value, until)
            .await?;
    body(&state, &endpoint).await
}

/// Clears any override: the shift (or the default, in) decides again.
#[utoipa::path(delete, path = "/api/v1/endpoints/{reference}/presence", operation_id = "clear_presence", tag = "presence",
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = PresenceBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn clear(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
) -> ApiResult<Json<PresenceBody>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let endpoint =
        ops::presence::operator_clear(&state.delivery, &endpoint, &auth.human.id).await?;
    body(&state, &endpoint).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetShift {
    /// A weekly schedule such as `TZ=Europe/Berlin Mon-Fri 09:00-17:00`; null clears it.
    pub shift: Option<String>,
}

/// Sets or clears the endpoint's shift.
#[utoipa::path(put, path = "/api/v1/endpoints/{reference}/shift", operation_id = "set_shift", tag = "presence",
    request_body = SetShift,
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = PresenceBody),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn set_shift(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
    ApiJson(req): ApiJson<SetShift>,
) -> ApiResult<Json<PresenceBody>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let endpoint = ops::presence::operator_set_shift(
        &state.delivery,
        &endpoint,
        &auth.human.id,
        req.shift.as_deref(),
    )
    .await?;
    body(&state, &endpoint).await
}
