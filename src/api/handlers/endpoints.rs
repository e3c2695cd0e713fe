use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::agents::present;
use super::page_request;
use super::tokens::ListQuery;
use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiPath, ApiQuery, HumanAuth};
use crate::api::views::{
    ClientSetup, EndpointList, EndpointView, NewWebhookView, SessionRow, SessionsView, VendView,
    mcp_json,
};
use crate::delivery::Doorbells;
use crate::delivery::fleet::session_statuses;
use crate::http::error::{ApiResult, ErrorBody, NamedEndpoint};
use crate::ops;
use crate::store::{Endpoint, EndpointActivity};

/// Views for endpoints, with their work counts and liveness.
pub(crate) async fn endpoint_views(
    state: &ApiState,
    endpoints: &[Endpoint],
) -> ApiResult<Vec<EndpointView>> {
    let ids: Vec<String> = endpoints.iter().map(|e| e.id.clone()).collect();
    let activity = state.store.endpoint_activity(&ids).await?;
    let idle = EndpointActivity::default();
    let now = state.store.clock().now();
    Ok(endpoints
        .iter()
        .map(|e| {
            let sessions = sessions_view(state.delivery.doorbells(), &e.id);
            EndpointView::build(
                e,
                activity.get(&e.id).unwrap_or(&idle),
                sessions,
                state.delivery.hooks().hooked(&e.id),
                &state.api.public_url,
                now,
            )
        })
        .collect())
}

/// This instance's sessions of an endpoint, with why each is deaf.
fn sessions_view(doorbells: &Doorbells, endpoint_id: &str) -> SessionsView {
    let list: Vec<SessionRow> = session_statuses(doorbells, endpoint_id)
        .into_iter()
        .map(|s| SessionRow {
            id_prefix: s.id_prefix,
            hearer: s.kind.to_owned(),
            client_name: s.client_name,
            client_version: s.client_version,
            protocol_version: s.protocol_version.unwrap_or_default(),
            streaming: s.streaming,
            deaf_reason: s.deaf_reason.map(|r| r.as_str().to_owned()),
            unanswered_doorbells: s.unanswered_doorbells as i64,
            unanswered_since_seconds: s.unanswered_for.map(|d| d.as_secs() as i64),
            idle_seconds: s.idle_for.as_secs() as i64,
        })
        .collect();
    SessionsView {
        attached: list.len() as i64,
        streaming: list.iter().filter(|r| r.streaming).count() as i64,
        deaf: list.iter().filter(|r| r.deaf_reason.is_some()).count() as i64,
        list,
    }
}

async fn endpoint_view(state: &ApiState, endpoint: &Endpoint) -> ApiResult<EndpointView> {
    Ok(endpoint_views(state, std::slice::from_ref(endpoint))
        .await?
        .remove(0))
}

/// The caller's endpoints, newest first.
#[utoipa::path(get, path = "/api/v1/endpoints", operation_id = "list_endpoints", tag = "endpoints", params(ListQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, body = EndpointList),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<EndpointList>> {
    let page = state
        .store
        .list_endpoints(
            &auth.human.id,
            &page_request(q.limit.as_deref(), q.cursor.as_deref())?,
        )
        .await?;
    Ok(Json(EndpointList {
        endpoints: endpoint_views(&state, &page.items).await?,
        next_cursor: page.next_cursor,
    }))
}

#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VendRequest {
    /// The agent's name; created (with `kind`) when it does not exist yet.
    #[schema(pattern = r"^[a-z0-9][a-z0-9-]{0,62}$")]
    pub agent: String,
    /// The name MCP clients know the endpoint by (`.mcp.json` key, `claude
    /// mcp add`, Codex, the channels flag); default `switchboard-<agent>`.
    /// At most 40 characters, so that every `mcp__<name>__<tool>` fits the
    /// 64 characters Claude's API accepts.
    #[schema(pattern = r"^[a-z0-9][a-z0-9_-]{0,39}$")]
    pub server_name: Option<String>,
    /// Kind of a newly created agent: `heartbeat`, `session` (default) or `task`.
    #[schema(pattern = r"^(heartbeat|session|task)$")]
    pub kind: Option<String>,
    /// Queue names (`[a-z0-9][a-z0-9._-]{0,63}`, 1–32 of them); default
    /// `["inbox"]`. Immutable.
    #[schema(min_items = 1, max_items = 32)]
    pub queues: Option<Vec<String>>,
    /// Granted verbs; default all. Immutable.
    pub verbs: Option<Vec<String>>,
    /// Lifetime, e.g. `30d`; the endpoint is revoked when it passes.
    pub expires_in: Option<String>,
    /// 60–86 400 seconds.
    #[schema(minimum = 60, maximum = 86_400)]
    pub default_lease_ttl_seconds: Option<i64>,
    /// Also create a token webhook on the first queue.
    pub webhook: Option<bool>,
}

/// Vends an endpoint: its credential and `.mcp.json` block are shown once.
#[utoipa::path(post, path = "/api/v1/endpoints", operation_id = "vend_endpoint", tag = "endpoints", request_body = VendRequest,
    security(("bearer" = [])),
    responses(
        (status = 201, body = VendView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn vend(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiJson(body): ApiJson<VendRequest>,
) -> ApiResult<(StatusCode, Json<VendView>)> {
    let request = ops::endpoints::Vend {
        agent: body.agent,
        kind: body.kind,
        server_name: body.server_name,
        queues: body.queues,
        verbs: body.verbs,
        expires_in: body.expires_in,
        default_lease_ttl_seconds: body.default_lease_ttl_seconds,
        webhook: body.webhook == Some(true),
    };
    let vended = ops::endpoints::vend(
        &state.delivery,
        &state.api.public_url,
        &auth.human.id,
        request,
    )
    .await?;
    let (server_name, url) = (&vended.server_name, &vended.mcp_url);
    Ok((
        StatusCode::CREATED,
        Json(VendView {
            mcp_json: mcp_json(server_name, url),
            client: ClientSetup::new(server_name, url, &vended.credential),
            agent_created: vended.agent_created,
            webhook: vended.webhook.as_ref().map(NewWebhookView::from),
            endpoint: endpoint_view(&state, &vended.endpoint).await?,
            token: vended.credential,
        }),
    ))
}

/// One endpoint by slug or id.
#[utoipa::path(get, path = "/api/v1/endpoints/{reference}", operation_id = "get_endpoint", tag = "endpoints",
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = EndpointView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn show(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
) -> ApiResult<Json<EndpointView>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    Ok(Json(endpoint_view(&state, &endpoint).await?))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditEndpoint {
    /// 60–86 400 seconds, or null for the server default (300). Scope fields
    /// are immutable and refused.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>, minimum = 60, maximum = 86_400)]
    pub default_lease_ttl_seconds: Option<Option<i64>>,
}

/// Changes an endpoint's default lease (the only editable field).
#[utoipa::path(patch, path = "/api/v1/endpoints/{reference}", operation_id = "edit_endpoint", tag = "endpoints",
    request_body = EditEndpoint,
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = EndpointView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn edit(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
    ApiJson(body): ApiJson<EditEndpoint>,
) -> ApiResult<Json<EndpointView>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let endpoint = match body.default_lease_ttl_seconds {
        None => endpoint,
        Some(value) => {
            ops::endpoints::set_default_lease(&state.delivery, &endpoint.id, value).await?
        }
    };
    Ok(Json(endpoint_view(&state, &endpoint).await?))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestRingRequest {
    /// How long to wait for the agent side to answer, 1–120 seconds (default 10).
    #[schema(minimum = 1, maximum = 120)]
    pub wait_seconds: Option<i64>,
}

/// What a test doorbell found.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TestRingView {
    /// `rung`, `held` (the endpoint is out: doorbells are held, the test's
    /// too) or `no_hearer` (nothing of the endpoint on the instance that
    /// answered can hear one).
    pub outcome: &'static str,
    /// `session`, `runner` or `hook`, when rung.
    pub hearer: Option<&'static str>,
    /// The rung session's `clientInfo.name`, when it gave one.
    pub client_name: Option<String>,
    /// The rung hearer: a session's first 8 characters, or the hook's id.
    pub hearer_id: Option<String>,
    /// Whether the hearer answered (any request) within the wait.
    pub answered: bool,
    /// How soon it answered, in milliseconds.
    pub answered_after_ms: Option<i64>,
}

impl From<crate::delivery::TestRing> for TestRingView {
    fn from(ring: crate::delivery::TestRing) -> Self {
        use crate::delivery::TestRing;
        let none = |outcome| TestRingView {
            outcome,
            hearer: None,
            client_name: None,
            hearer_id: None,
            answered: false,
            answered_after_ms: None,
        };
        match ring {
            TestRing::Held => none("held"),
            TestRing::NoHearer => none("no_hearer"),
            TestRing::Rung {
                hearer,
                client,
                hearer_id,
                answered_after,
            } => TestRingView {
                outcome: "rung",
                hearer: Some(hearer),
                client_name: client,
                hearer_id: Some(hearer_id),
                answered: answered_after.is_some(),
                answered_after_ms: answered_after.map(|d| d.as_millis() as i64),
            },
        }
    }
}

/// Sends a test doorbell to one hearer of the endpoint (counted against no
/// todo) and waits for any request from it: does the agent side hear its
/// doorbells, and how fast? (`switchboard doctor --ring`.)
#[utoipa::path(post, path = "/api/v1/endpoints/{reference}/test-ring", operation_id = "test_ring_endpoint", tag = "endpoints",
    request_body = TestRingRequest,
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = TestRingView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn test_ring(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
    ApiJson(body): ApiJson<TestRingRequest>,
) -> ApiResult<Json<TestRingView>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let ring = ops::endpoints::test_ring(&state.delivery, &endpoint, body.wait_seconds).await?;
    Ok(Json(ring.into()))
}

/// Revokes an endpoint at once: its live todos become dead letters and its
/// credential stops working. 409 when it is already revoked.
#[utoipa::path(post, path = "/api/v1/endpoints/{reference}/revoke", operation_id = "revoke_endpoint", tag = "endpoints",
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = EndpointView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn revoke(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
) -> ApiResult<Json<EndpointView>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    ops::endpoints::revoke(&state.delivery, &auth.human.id, &endpoint).await?;
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &endpoint.id)
        .await?;
    Ok(Json(endpoint_view(&state, &endpoint).await?))
}

/// Deletes a revoked endpoint and its history (409 while it is active).
#[utoipa::path(delete, path = "/api/v1/endpoints/{reference}", operation_id = "delete_endpoint", tag = "endpoints",
    params(("reference" = String, Path, description = "Endpoint slug or id")),
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
    ApiPath(reference): ApiPath<String>,
) -> ApiResult<StatusCode> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    ops::endpoints::delete(&state.delivery, &auth.human.id, &endpoint.id).await?;
    Ok(StatusCode::NO_CONTENT)
}
