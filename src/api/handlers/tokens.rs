use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::page_request;
use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiPath, ApiQuery, HumanAuth};
use crate::api::views::{NewTokenView, TokenList, TokenView};
use crate::http::error::{ApiResult, ErrorBody};
use crate::ops;

/// `?limit=&cursor=` of a list route. The values arrive as text and are
/// parsed by [`super::page_request`], so that errors name the parameter.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// 1–200, default 50.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 200)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The caller's API tokens, newest first.
#[utoipa::path(get, path = "/api/v1/tokens", operation_id = "list_tokens", tag = "humans", params(ListQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, body = TokenList),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<TokenList>> {
    let page = state
        .store
        .list_api_tokens(
            &auth.human.id,
            &page_request(q.limit.as_deref(), q.cursor.as_deref())?,
        )
        .await?;
    Ok(Json(TokenList {
        tokens: page.items.iter().map(TokenView::from).collect(),
        next_cursor: page.next_cursor,
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateToken {
    /// A name to recognise the token by: one line, at most 100 bytes.
    #[schema(max_length = 100)]
    pub label: Option<String>,
    /// Lifetime, e.g. `30d` or `12h`; none = no expiry. Never past the
    /// expiry of the token that creates it: a token of 1 h makes tokens
    /// of 1 h at most.
    pub expires_in: Option<String>,
}

/// A new API token for the caller; the token is shown once.
#[utoipa::path(post, path = "/api/v1/tokens", operation_id = "create_token", tag = "humans", request_body = CreateToken,
    security(("bearer" = [])),
    responses(
        (status = 201, body = NewTokenView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn create(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiJson(body): ApiJson<CreateToken>,
) -> ApiResult<(StatusCode, Json<NewTokenView>)> {
    let (token, record) = ops::tokens::issue(
        &state.delivery,
        &auth.human.id,
        auth.authority_expires_at,
        body.label,
        body.expires_in.as_deref(),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(NewTokenView {
            token,
            record: TokenView::from(&record),
        }),
    ))
}

/// Revokes one of the caller's tokens (409 when already revoked).
#[utoipa::path(delete, path = "/api/v1/tokens/{id}", operation_id = "revoke_token", tag = "humans",
    params(("id" = String, Path, description = "Token id")),
    security(("bearer" = [])),
    responses(
        (status = 204),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn revoke(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    ops::tokens::revoke(&state.delivery, &auth.human.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
