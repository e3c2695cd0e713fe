//! An endpoint's connected OAuth clients (`docs/oauth.md`): listed, and
//! one revoked (its tokens stop working at once).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::ApiState;
use crate::api::extract::{ApiPath, HumanAuth};
use crate::http::error::{ApiResult, ErrorBody, NamedEndpoint};
use crate::ops;
use crate::store::OAuthConnection;

/// A client connected to an endpoint through OAuth.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct OAuthClientView {
    /// The connection's id (what `DELETE` takes).
    pub id: String,
    /// The client's `client_id`: `oc_…` when it registered itself, else
    /// the URL of its metadata document.
    pub client_id: String,
    /// The name the client gave (verified only when `verified`).
    pub client_name: Option<String>,
    /// Whether the client's metadata was fetched from its own URL (a
    /// metadata document) rather than asserted at registration.
    pub verified: bool,
    pub redirect_uris: Vec<String>,
    pub created_at: String,
    pub last_used_at: Option<String>,
}

impl From<&OAuthConnection> for OAuthClientView {
    fn from(c: &OAuthConnection) -> Self {
        Self {
            id: c.grant.id.clone(),
            client_id: c.client.id.clone(),
            client_name: c.client.name.clone(),
            verified: c.client.verified,
            redirect_uris: c.client.redirect_uris.clone(),
            created_at: c.grant.created_at.to_rfc3339(),
            last_used_at: c.grant.last_used_at.map(|t| t.to_rfc3339()),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct OAuthClientList {
    pub oauth_clients: Vec<OAuthClientView>,
}

/// The OAuth clients connected to one endpoint (live connections, newest first).
#[utoipa::path(get, path = "/api/v1/endpoints/{reference}/oauth-clients", operation_id = "list_oauth_clients", tag = "endpoints",
    params(("reference" = String, Path, description = "Endpoint slug or id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = OAuthClientList),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
) -> ApiResult<Json<OAuthClientList>> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    let connections = state
        .store
        .list_oauth_connections(&auth.human.id, &endpoint.id)
        .await?;
    Ok(Json(OAuthClientList {
        oauth_clients: connections.iter().map(OAuthClientView::from).collect(),
    }))
}

/// Revokes a client's connection to the endpoint: its access and refresh
/// tokens stop working at once.
#[utoipa::path(delete, path = "/api/v1/endpoints/{reference}/oauth-clients/{id}", operation_id = "revoke_oauth_client", tag = "endpoints",
    params(
        ("reference" = String, Path, description = "Endpoint slug or id"),
        ("id" = String, Path, description = "Connection id (`og_…`)"),
    ),
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
    ApiPath((reference, id)): ApiPath<(String, String)>,
) -> ApiResult<StatusCode> {
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    ops::oauth::revoke_connection(&state.delivery, &auth.human.id, &endpoint.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
