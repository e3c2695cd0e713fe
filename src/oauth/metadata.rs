//! The metadata documents: an MCP URL's protected-resource metadata (RFC
//! 9728) names this server as its authorization server, whose own metadata
//! (RFC 8414) says what it supports.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use super::{OAuthState, error, json};
use crate::domain::oauth::{mcp_url, resource_slug};

/// `GET /.well-known/oauth-protected-resource/mcp/{slug}`. Answered for any
/// well-formed slug without a lookup: it says nothing about whether the
/// endpoint exists (its 401 says as much already).
pub(super) async fn protected_resource(
    State(state): State<OAuthState>,
    Path(slug): Path<String>,
) -> Response {
    let issuer = &state.oauth.server.issuer;
    let resource = mcp_url(issuer, &slug);
    if resource_slug(issuer, &resource).is_none() {
        return error(StatusCode::NOT_FOUND, "not_found", "no such MCP URL");
    }
    json(
        StatusCode::OK,
        json!({
            "resource": resource,
            "authorization_servers": [issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "Switchboard",
        }),
    )
}

/// `GET /.well-known/oauth-authorization-server`.
pub(super) async fn authorization_server(State(state): State<OAuthState>) -> Response {
    let issuer = &state.oauth.server.issuer;
    json(
        StatusCode::OK,
        json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/oauth/authorize"),
            "token_endpoint": format!("{issuer}/oauth/token"),
            "registration_endpoint": format!("{issuer}/oauth/register"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "client_id_metadata_document_supported": true,
            "authorization_response_iss_parameter_supported": true,
        }),
    )
}
