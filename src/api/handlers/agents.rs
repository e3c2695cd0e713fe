use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Deserializer};
use utoipa::ToSchema;

use super::page_request;
use super::tokens::ListQuery;
use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiPath, ApiQuery, HumanAuth};
use crate::api::views::{AgentList, AgentView};
use crate::http::error::{ApiResult, ErrorBody};
use crate::ops;
use crate::store::{Agent, AgentPatch, Endpoint, EndpointActivity, Store};

/// Builds views for agents, with liveness over each one's endpoints.
async fn agent_views(
    store: &dyn Store,
    human_id: &str,
    agents: &[Agent],
) -> ApiResult<Vec<AgentView>> {
    let ids: Vec<String> = agents.iter().map(|a| a.id.clone()).collect();
    let endpoints = store.endpoints_of_agents(human_id, &ids).await?;
    let endpoint_ids: Vec<String> = endpoints.iter().map(|e| e.id.clone()).collect();
    let activity = store.endpoint_activity(&endpoint_ids).await?;
    let idle = EndpointActivity::default();
    let mut by_agent: HashMap<&str, Vec<(&Endpoint, &EndpointActivity)>> = HashMap::new();
    for e in &endpoints {
        by_agent
            .entry(e.agent_id.as_str())
            .or_default()
            .push((e, activity.get(&e.id).unwrap_or(&idle)));
    }
    let now = store.clock().now();
    Ok(agents
        .iter()
        .map(|a| {
            let mine = by_agent
                .get(a.id.as_str())
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            AgentView::build(a, mine, now)
        })
        .collect())
}

/// The caller's agents, newest first, with liveness.
#[utoipa::path(get, path = "/api/v1/agents", operation_id = "list_agents", tag = "agents", params(ListQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, body = AgentList),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<AgentList>> {
    let page = state
        .store
        .list_agents(
            &auth.human.id,
            &page_request(q.limit.as_deref(), q.cursor.as_deref())?,
        )
        .await?;
    Ok(Json(AgentList {
        agents: agent_views(&*state.store, &auth.human.id, &page.items).await?,
        next_cursor: page.next_cursor,
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegisterAgent {
    /// Lowercase `[a-z0-9][a-z0-9-]{0,62}`, unique per human.
    #[schema(pattern = r"^[a-z0-9][a-z0-9-]{0,62}$")]
    pub name: String,
    /// `heartbeat`, `session` (default) or `task`.
    #[schema(pattern = r"^(heartbeat|session|task)$")]
    pub kind: Option<String>,
    /// Overrides the kind's expected interval (1 second to 30 days).
    #[schema(minimum = 1, maximum = 2_592_000)]
    pub expected_interval_seconds: Option<i64>,
    /// One line, at most 500 bytes.
    #[schema(max_length = 500)]
    pub description: Option<String>,
}

/// Registers an agent (grants nothing by itself).
#[utoipa::path(post, path = "/api/v1/agents", operation_id = "register_agent", tag = "agents", request_body = RegisterAgent,
    security(("bearer" = [])),
    responses(
        (status = 201, body = AgentView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn register(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiJson(body): ApiJson<RegisterAgent>,
) -> ApiResult<(StatusCode, Json<AgentView>)> {
    let register = ops::agents::Register {
        name: body.name,
        kind: body.kind,
        expected_interval_seconds: body.expected_interval_seconds,
        description: body.description,
    };
    let agent = ops::agents::register(&state.delivery, &auth.human.id, register).await?;
    let view = agent_views(&*state.store, &auth.human.id, &[agent]).await?;
    Ok((
        StatusCode::CREATED,
        Json(view.into_iter().next().expect("one view")),
    ))
}

/// One agent with liveness.
#[utoipa::path(get, path = "/api/v1/agents/{name}", operation_id = "get_agent", tag = "agents",
    params(("name" = String, Path, description = "Agent name")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = AgentView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn show(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<AgentView>> {
    let agent = state.store.get_agent(&auth.human.id, &name).await?;
    let view = agent_views(&*state.store, &auth.human.id, &[agent]).await?;
    Ok(Json(view.into_iter().next().expect("one view")))
}

/// Distinguishes an absent field (leave alone) from `null` (clear).
pub(crate) fn present<'de, D, T>(de: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(de).map(Some)
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditAgent {
    /// `heartbeat`, `session` or `task`.
    #[schema(pattern = r"^(heartbeat|session|task)$")]
    pub kind: Option<String>,
    /// Seconds (1 second to 30 days), or null to return to the kind's default.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 2_592_000)]
    pub expected_interval_seconds: Option<Option<i64>>,
    /// One line of at most 500 bytes, or null to clear.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 500)]
    pub description: Option<Option<String>>,
}

/// Edits an agent's kind, expected interval or description.
#[utoipa::path(patch, path = "/api/v1/agents/{name}", operation_id = "edit_agent", tag = "agents", request_body = EditAgent,
    params(("name" = String, Path, description = "Agent name")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = AgentView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn edit(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<EditAgent>,
) -> ApiResult<Json<AgentView>> {
    let patch = AgentPatch {
        kind: body
            .kind
            .as_deref()
            .map(ops::agents::parse_kind)
            .transpose()?,
        expected_interval_seconds: body.expected_interval_seconds,
        description: body.description,
    };
    let agent = ops::agents::update(&state.delivery, &auth.human.id, &name, patch).await?;
    let view = agent_views(&*state.store, &auth.human.id, &[agent]).await?;
    Ok(Json(view.into_iter().next().expect("one view")))
}
