use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::page_request;
use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiPath, ApiQuery, HumanAuth, parse_param};
use crate::api::views::{
    AttemptView, BulkResult, CreatedTodoView, IntakeEventView, TodoDetail, TodoList, TodoView,
};
use crate::domain::todo::{KEPT_ATTEMPTS, TodoState, validate_bulk_ids};
use crate::http::error::{ApiError, ApiResult, ErrorBody, NamedEndpoint};
use crate::ops;
use crate::store::{BulkTarget, TodoFilter};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PushTodo {
    /// One line, at most 200 bytes.
    #[schema(min_length = 1, max_length = 200)]
    pub title: String,
    /// May be omitted when the endpoint has exactly one queue.
    #[schema(pattern = r"^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub queue: Option<String>,
    /// Default `operator`; 1–64 printable ASCII characters without spaces.
    #[schema(pattern = r"^[!-~]{1,64}$")]
    pub kind: Option<String>,
    /// Any JSON value, at most 256 KiB once serialised.
    pub payload: Option<Value>,
    /// Idempotency key (at most 256 bytes): a live todo with the same key is
    /// returned instead of a new one.
    #[schema(min_length = 1, max_length = 256)]
    pub key: Option<String>,
    /// Higher is claimed first (default 0), within ±1 000 000.
    #[schema(minimum = -1000000, maximum = 1000000)]
    pub priority: Option<i64>,
    /// Not claimable or rung before this RFC 3339 time: the todo is
    /// `delayed` until then (at most 366 days ahead).
    #[schema(format = DateTime)]
    pub run_at: Option<String>,
    /// The same as a duration from now (`90m`, `2h`, `1d`); not with `run_at`.
    pub delay: Option<String>,
}

/// A human-authored todo. 201 when created; 200 with `created: false` when
/// `key` matched a live todo (nothing is created and nothing rings).
#[utoipa::path(post, path = "/api/v1/endpoints/{reference}/todos", operation_id = "push_todo", tag = "todos",
    request_body = PushTodo,
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 201, body = CreatedTodoView),
        (status = 200, body = CreatedTodoView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn push(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
    ApiJson(body): ApiJson<PushTodo>,
) -> ApiResult<(StatusCode, Json<CreatedTodoView>)> {
    let push = ops::todos::Push {
        title: body.title,
        queue: body.queue,
        kind: body.kind,
        payload: body.payload,
        key: body.key,
        priority: body.priority,
        run_at: body.run_at,
        delay: body.delay,
    };
    let (endpoint, created) = ops::todos::push(&state.delivery, &auth.human.id, &reference, push)
        .await
        .or_unknown_endpoint(&reference)?;
    let status = if created.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(CreatedTodoView {
            id: created.todo.id,
            endpoint: endpoint.slug,
            queue: created.todo.queue,
            state: created.todo.state.as_str().to_owned(),
            created: created.created,
        }),
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct TodoQuery {
    /// Endpoint slug or id (404 when it is not one of the caller's).
    pub endpoint: Option<String>,
    pub queue: Option<String>,
    /// `pending`, `claimed`, `done`, `failed` or `cancelled`.
    pub state: Option<String>,
    /// `true` for dead letters only, `false` to exclude them.
    #[param(value_type = Option<bool>)]
    pub dead_letter: Option<String>,
    /// The todo's kind, exactly (e.g. `pull_request.opened`).
    pub kind: Option<String>,
    /// The todo's source, exactly (e.g. `github`, `operator`).
    pub source: Option<String>,
    /// A title substring: literal (`%` and `_` are plain characters), ASCII
    /// case-insensitive, 1–200 bytes.
    #[param(min_length = 1, max_length = 200)]
    pub q: Option<String>,
    /// 1–200, default 50.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 200)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The caller's todos, newest first, filtered.
#[utoipa::path(get, path = "/api/v1/todos", operation_id = "list_todos", tag = "todos", params(TodoQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, body = TodoList),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiQuery(q): ApiQuery<TodoQuery>,
) -> ApiResult<Json<TodoList>> {
    let page = page_request(q.limit.as_deref(), q.cursor.as_deref())?;
    let endpoint_id = match q.endpoint.as_deref() {
        None => None,
        Some(reference) => Some(
            state
                .store
                .get_endpoint(&auth.human.id, reference)
                .await
                .or_unknown_endpoint(reference)?
                .id,
        ),
    };
    let filter = TodoFilter {
        endpoint_id,
        queue: q.queue,
        state: q
            .state
            .as_deref()
            .map(|s| TodoState::parse_field(s, "state"))
            .transpose()?,
        dead_letter: parse_param(q.dead_letter.as_deref(), "dead_letter", "true or false")?,
        kind: q.kind,
        source: q.source,
        q: q.q,
    };
    let todos = state
        .store
        .human_list_todos(&auth.human.id, &filter, &page)
        .await?;
    Ok(Json(TodoList {
        todos: todos.items.iter().map(TodoView::from).collect(),
        next_cursor: todos.next_cursor,
    }))
}

/// A todo with its attempt history (newest first).
#[utoipa::path(get, path = "/api/v1/todos/{id}", operation_id = "get_todo", tag = "todos",
    params(("id" = String, Path, description = "Todo id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = TodoDetail),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn show(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<TodoDetail>> {
    let todo = state.store.human_get_todo(&auth.human.id, &id).await?;
    let attempts = state
        .store
        .human_list_attempts(&auth.human.id, &id, KEPT_ATTEMPTS)
        .await?;
    Ok(Json(TodoDetail {
        attempts_pruned: todo.attempts_pruned,
        attempts: attempts.iter().map(AttemptView::from).collect(),
        todo: TodoView::from(&todo),
    }))
}

/// What a human may change on a live todo.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditTodo {
    /// Higher is claimed first, within ±1 000 000.
    #[schema(minimum = -1000000, maximum = 1000000)]
    pub priority: i64,
}

/// Changes a pending, claimed or retrying todo's priority (the next claim
/// sees it).
#[utoipa::path(patch, path = "/api/v1/todos/{id}", operation_id = "edit_todo", tag = "todos",
    request_body = EditTodo,
    params(("id" = String, Path, description = "Todo id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = TodoView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn edit(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<EditTodo>,
) -> ApiResult<Json<TodoView>> {
    let todo =
        ops::todos::set_priority(&state.delivery, &auth.human.id, &id, body.priority).await?;
    Ok(Json(TodoView::from(&todo)))
}

/// The intake event that created a todo: trust mode, sanitized headers, whole body.
#[utoipa::path(get, path = "/api/v1/todos/{id}/event", operation_id = "get_todo_event", tag = "todos",
    params(("id" = String, Path, description = "Todo id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = IntakeEventView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn event(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<IntakeEventView>> {
    let event = state
        .store
        .human_get_intake_event(&auth.human.id, &id)
        .await?;
    Ok(Json(IntakeEventView::build(&id, &event)))
}

/// Retries a failed, dead-lettered or cancelled todo: back to pending with
/// `attempt = 0`, and its doorbell rung at once.
#[utoipa::path(post, path = "/api/v1/todos/{id}/retry", operation_id = "retry_todo", tag = "todos",
    params(("id" = String, Path, description = "Todo id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = TodoView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn retry(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<TodoView>> {
    let todo = ops::todos::retry(&state.delivery, &auth.human.id, &id).await?;
    Ok(Json(TodoView::from(&todo)))
}

/// Releases a claimed todo back to pending.
#[utoipa::path(post, path = "/api/v1/todos/{id}/release", operation_id = "release_todo", tag = "todos",
    params(("id" = String, Path, description = "Todo id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = TodoView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn release(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<TodoView>> {
    let todo = ops::todos::release(&state.delivery, &auth.human.id, &id).await?;
    Ok(Json(TodoView::from(&todo)))
}

/// Cancels a pending, claimed or waiting-for-retry todo: terminal `cancelled`.
/// The holder of a claimed one gets `conflict` on its next call; the attempt
/// history records who cancelled it. A done, dead-letter or cancelled todo → 409.
#[utoipa::path(post, path = "/api/v1/todos/{id}/cancel", operation_id = "cancel_todo", tag = "todos",
    params(("id" = String, Path, description = "Todo id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = TodoView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn cancel(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<TodoView>> {
    let todo = ops::todos::cancel(&state.delivery, &auth.human.id, &id).await?;
    Ok(Json(TodoView::from(&todo)))
}

/// Deletes a todo for good, with its attempt history and the intake event
/// that created it (`docs/decisions.md`, "Deleting a todo"). A claimed todo
/// → 409: cancel or release it first.
#[utoipa::path(delete, path = "/api/v1/todos/{id}", operation_id = "delete_todo", tag = "todos",
    params(("id" = String, Path, description = "Todo id")),
    security(("bearer" = [])),
    responses(
        (status = 204),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn remove(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    ops::todos::delete(&state.delivery, &auth.human.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What a bulk retry or cancel acts on: explicit `ids`, or every todo of the
/// caller's matching the filter fields (none = all of them). Not both.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BulkRequest {
    /// Todo ids, 1–1 000; ids that are not the caller's, or that the action
    /// does not apply to, are skipped. Excludes every filter field.
    #[schema(min_items = 1, max_items = 1000)]
    pub ids: Option<Vec<String>>,
    /// Endpoint slug or id (404 when it is not one of the caller's).
    pub endpoint: Option<String>,
    pub queue: Option<String>,
    /// Retry: `failed` (the default) or `cancelled`. Cancel: `pending`,
    /// `claimed` or `failed` (default: all three).
    pub state: Option<String>,
    /// `true` for dead letters only, `false` to exclude them.
    pub dead_letter: Option<bool>,
    pub kind: Option<String>,
    pub source: Option<String>,
    /// A title substring: literal, ASCII case-insensitive, 1–200 bytes.
    #[schema(min_length = 1, max_length = 200)]
    pub q: Option<String>,
}

impl BulkRequest {
    fn has_filter(&self) -> bool {
        self.endpoint.is_some()
            || self.queue.is_some()
            || self.state.is_some()
            || self.dead_letter.is_some()
            || self.kind.is_some()
            || self.source.is_some()
            || self.q.is_some()
    }

    async fn target(mut self, state: &ApiState, human_id: &str) -> ApiResult<BulkTarget> {
        if let Some(ids) = self.ids.take() {
            if self.has_filter() {
                return Err(ApiError::invalid(
                    "ids",
                    "give either ids or filter fields, not both",
                ));
            }
            validate_bulk_ids(&ids, "ids")?;
            return Ok(BulkTarget::Ids(ids));
        }
        let endpoint_id = match self.endpoint.as_deref() {
            None => None,
            Some(reference) => Some(
                state
                    .store
                    .get_endpoint(human_id, reference)
                    .await
                    .or_unknown_endpoint(reference)?
                    .id,
            ),
        };
        Ok(BulkTarget::Filter(TodoFilter {
            endpoint_id,
            queue: self.queue,
            state: self
                .state
                .as_deref()
                .map(|s| TodoState::parse_field(s, "state"))
                .transpose()?,
            dead_letter: self.dead_letter,
            kind: self.kind,
            source: self.source,
            q: self.q,
        }))
    }
}

/// Retries (`attempt = 0`, back to pending) at most 1 000 of the caller's
/// failed todos matching the filter — or, with `state: "cancelled"`, cancelled
/// ones; with `ids`, either — oldest first, in one transaction. Of finished
/// todos sharing an idempotency key only the newest is retried, and none
/// whose key a live todo holds.
#[utoipa::path(post, path = "/api/v1/todos/retry", operation_id = "bulk_retry_todos", tag = "todos",
    request_body = BulkRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, body = BulkResult),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn bulk_retry(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiJson(body): ApiJson<BulkRequest>,
) -> ApiResult<Json<BulkResult>> {
    let target = body.target(&state, &auth.human.id).await?;
    let outcome = ops::todos::bulk_retry(&state.delivery, &auth.human.id, &target).await?;
    Ok(Json(BulkResult::from(outcome)))
}

/// Cancels at most 1 000 of the caller's pending, claimed or
/// waiting-for-retry todos matching the filter (or `ids`), oldest first, in
/// one transaction. Call again while `more` is true.
#[utoipa::path(post, path = "/api/v1/todos/cancel", operation_id = "bulk_cancel_todos", tag = "todos",
    request_body = BulkRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, body = BulkResult),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn bulk_cancel(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiJson(body): ApiJson<BulkRequest>,
) -> ApiResult<Json<BulkResult>> {
    let target = body.target(&state, &auth.human.id).await?;
    let outcome = ops::todos::bulk_cancel(&state.delivery, &auth.human.id, &target).await?;
    Ok(Json(BulkResult::from(outcome)))
}

/// `GET /api/v1/todos/retry` and `…/cancel`: those paths are the bulk routes,
/// so the router would answer 405; as todo ids they are merely missing.
pub(crate) async fn show_reserved(auth: HumanAuth) -> ApiResult<Json<TodoDetail>> {
    let _ = auth;
    Err(ApiError::not_found())
}
