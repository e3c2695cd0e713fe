use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiPath, HumanAuth};
use crate::api::views::{ScheduleList, ScheduleView};
use crate::http::error::{ApiResult, ErrorBody, NamedEndpoint};
use crate::ops;

/// The schedules of one endpoint, with their next occurrence.
#[utoipa::path(get, path = "/api/v1/endpoints/{reference}/schedules", operation_id = "list_schedules", tag = "schedules",
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = ScheduleList),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
) -> ApiResult<Json<ScheduleList>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let schedules = state
        .store
        .list_schedules(&auth.human.id, &endpoint.id)
        .await?;
    Ok(Json(ScheduleList {
        schedules: schedules.iter().map(ScheduleView::from).collect(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddSchedule {
    /// May be omitted when the endpoint has exactly one queue.
    #[schema(pattern = r"^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub queue: Option<String>,
    /// 5 fields: minute hour day-of-month month day-of-week (`*`, lists,
    /// ranges, steps, `jan`–`dec`, `sun`–`sat`), or `@hourly`, `@daily`,
    /// `@weekly`, `@monthly`, `@yearly`.
    pub cron: String,
    /// IANA time zone name, e.g. `Europe/Berlin` or `UTC`.
    pub tz: String,
    /// The todos' title; `{date}`, `{time}` and `{datetime}` become the
    /// occurrence's local date and time.
    #[schema(min_length = 1, max_length = 200)]
    pub title: String,
    /// Default `schedule`.
    #[schema(pattern = r"^[!-~]{1,64}$")]
    pub kind: Option<String>,
    pub payload: Option<Value>,
    /// `one` (default): occurrences missed while no instance ran make one
    /// todo, for the latest; `none`: they are skipped.
    pub catch_up: Option<String>,
}

/// Adds a schedule: a todo at each occurrence, exactly once across instances.
#[utoipa::path(post, path = "/api/v1/endpoints/{reference}/schedules", operation_id = "add_schedule", tag = "schedules",
    request_body = AddSchedule,
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 201, body = ScheduleView),
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
    ApiJson(body): ApiJson<AddSchedule>,
) -> ApiResult<(StatusCode, Json<ScheduleView>)> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let add = ops::schedules::AddSchedule {
        queue: body.queue,
        cron: body.cron,
        tz: body.tz,
        title: body.title,
        kind: body.kind,
        payload: body.payload,
        catch_up: body.catch_up,
    };
    let schedule = ops::schedules::add(&state.delivery, &auth.human.id, &endpoint, add).await?;
    Ok((StatusCode::CREATED, Json(ScheduleView::from(&schedule))))
}

/// Deletes a schedule (the todos it made stay).
#[utoipa::path(delete, path = "/api/v1/schedules/{id}", operation_id = "delete_schedule", tag = "schedules",
    params(("id" = String, Path, description = "Schedule id")),
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
    ops::schedules::delete(&state.delivery, &auth.human.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pauses a schedule: no todo is made while it is paused.
#[utoipa::path(post, path = "/api/v1/schedules/{id}/pause", operation_id = "pause_schedule", tag = "schedules",
    params(("id" = String, Path, description = "Schedule id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = ScheduleView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn pause(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ScheduleView>> {
    let schedule = ops::schedules::pause(&state.delivery, &auth.human.id, &id).await?;
    Ok(Json(ScheduleView::from(&schedule)))
}

/// Resumes a schedule from its next future occurrence.
#[utoipa::path(post, path = "/api/v1/schedules/{id}/resume", operation_id = "resume_schedule", tag = "schedules",
    params(("id" = String, Path, description = "Schedule id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = ScheduleView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn resume(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ScheduleView>> {
    let schedule = ops::schedules::resume(&state.delivery, &auth.human.id, &id).await?;
    Ok(Json(ScheduleView::from(&schedule)))
}
