//! Admission limits of an endpoint and its queues (`docs/queue.md`,
//! "Admission"): `GET/PUT /api/v1/endpoints/{ref}/admission` and
//! `PUT /api/v1/endpoints/{ref}/queues/{queue}/admission`.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiPath, HumanAuth};
use crate::domain::admission::{Limits, held};
use crate::domain::duration::parse_positive_duration;
use crate::http::error::{ApiResult, ErrorBody, NamedEndpoint};
use crate::ops;
use crate::ops::admission::AdmissionOf;

/// The limits to set; what is left out (or null) is not limited. A limit
/// of 0 pauses.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetAdmission {
    /// No claims while true (the work is not rung either).
    #[serde(default)]
    pub paused: bool,
    /// At most this many todos claimed at once.
    #[schema(minimum = 0)]
    pub max_in_flight: Option<i64>,
    /// The window of `max_claims_per_window`, e.g. `1h`, `24h`, `15m`.
    pub window: Option<String>,
    /// At most this many claims per window.
    #[schema(minimum = 0)]
    pub max_claims_per_window: Option<i64>,
}

impl SetAdmission {
    fn limits(self) -> Result<Limits, crate::domain::Invalid> {
        let window = self
            .window
            .map(|w| parse_positive_duration(&w, "window"))
            .transpose()?;
        let limits = Limits {
            paused: self.paused,
            max_in_flight: self.max_in_flight,
            window,
            max_claims_per_window: self.max_claims_per_window,
        };
        limits.validate()?;
        Ok(limits)
    }
}

/// One level's limits and what is used of them.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AdmissionLevel {
    /// The queue, or null for the whole endpoint.
    pub queue: Option<String>,
    pub paused: bool,
    pub max_in_flight: Option<i64>,
    /// The window's length, e.g. `3600s`.
    pub window: Option<String>,
    pub max_claims_per_window: Option<i64>,
    /// Todos claimed now.
    pub in_flight: i64,
    /// Claims charged to the current window, while it runs.
    pub window_claims: i64,
    /// `paused`, `in_flight_limit` or `window_budget` while claims are held.
    pub held: Option<String>,
    /// When a held window reopens (RFC 3339).
    pub until: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AdmissionView {
    pub endpoint: String,
    /// The endpoint's own limits first, then its queues' (only levels with
    /// limits set).
    pub levels: Vec<AdmissionLevel>,
}

impl AdmissionView {
    fn of(of: &AdmissionOf, now: crate::domain::Timestamp) -> Self {
        Self {
            endpoint: of.endpoint.slug.clone(),
            levels: of
                .levels
                .iter()
                .map(|a| {
                    let hold = held(&a.limits, &a.usage, now);
                    let window_open = a
                        .limits
                        .window
                        .zip(a.usage.window_started_at)
                        .is_some_and(|(w, start)| start.saturating_add(w) > now);
                    AdmissionLevel {
                        queue: a.queue.clone(),
                        paused: a.limits.paused,
                        max_in_flight: a.limits.max_in_flight,
                        window: a.limits.window.map(|w| format!("{}s", w.as_secs())),
                        max_claims_per_window: a.limits.max_claims_per_window,
                        in_flight: a.usage.in_flight,
                        window_claims: if window_open {
                            a.usage.window_claims
                        } else {
                            0
                        },
                        held: hold.map(|h| h.reason.as_str().to_owned()),
                        until: hold.and_then(|h| h.until).map(|t| t.to_rfc3339()),
                    }
                })
                .collect(),
        }
    }
}

/// The limits set on an endpoint and its queues, with their usage now.
#[utoipa::path(get, path = "/api/v1/endpoints/{reference}/admission", operation_id = "show_admission", tag = "admission",
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = AdmissionView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn show(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
) -> ApiResult<Json<AdmissionView>> {
    let of = ops::admission::read(&state.delivery, &auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    Ok(Json(AdmissionView::of(&of, state.store.clock().now())))
}

/// Sets the endpoint's own limits (all its queues), replacing what was set.
#[utoipa::path(put, path = "/api/v1/endpoints/{reference}/admission", operation_id = "set_endpoint_admission", tag = "admission",
    request_body = SetAdmission,
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = AdmissionView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn set_endpoint(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
    ApiJson(body): ApiJson<SetAdmission>,
) -> ApiResult<Json<AdmissionView>> {
    let limits = body.limits()?;
    let of = ops::admission::set(&state.delivery, &auth.human.id, &reference, None, limits)
        .await
        .or_unknown_endpoint(&reference)?;
    Ok(Json(AdmissionView::of(&of, state.store.clock().now())))
}

/// Sets one queue's limits, replacing what was set.
#[utoipa::path(put, path = "/api/v1/endpoints/{reference}/queues/{queue}/admission", operation_id = "set_queue_admission", tag = "admission",
    request_body = SetAdmission,
    params(
        ("reference" = String, Path, description = "Endpoint slug or id"),
        ("queue" = String, Path, description = "A queue of the endpoint's scope"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, body = AdmissionView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn set_queue(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath((reference, queue)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<SetAdmission>,
) -> ApiResult<Json<AdmissionView>> {
    let limits = body.limits()?;
    let of = ops::admission::set(
        &state.delivery,
        &auth.human.id,
        &reference,
        Some(&queue),
        limits,
    )
    .await
    .or_unknown_endpoint(&reference)?;
    Ok(Json(AdmissionView::of(&of, state.store.clock().now())))
}
