//! `POST /oauth/register`: Dynamic Client Registration (RFC 7591) for
//! public clients, rate-limited per client address.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::json;

use super::{OAuthState, error, json, rate_key, rate_limited};
use crate::domain::oauth::ClientMetadataInput;
use crate::ops;
use crate::store::StoreError;

/// A registration is small; anything larger is refused unread.
const MAX_REGISTRATION_BYTES: usize = 16 * 1024;

pub(super) async fn register(State(state): State<OAuthState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if let Err(wait) = state.oauth.registrations.check(&rate_key(&parts)) {
        return rate_limited(wait);
    }
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_client_metadata",
            "body: must be application/json",
        );
    }
    let Ok(bytes) = axum::body::to_bytes(body, MAX_REGISTRATION_BYTES).await else {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_client_metadata",
            "body: at most 16 KiB",
        );
    };
    let input: ClientMetadataInput = match serde_json::from_slice(&bytes) {
        Ok(input) => input,
        Err(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_client_metadata",
                "body: not a JSON object of client metadata",
            );
        }
    };
    match ops::oauth::register(&state.delivery, input).await {
        Ok(client) => {
            let mut body = json!({
                "client_id": client.id,
                "client_id_issued_at": client.created_at.as_millis() / 1000,
                "redirect_uris": client.redirect_uris,
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            });
            // Absent, not null: clients validate these as optional strings.
            if let Some(name) = client.name {
                body["client_name"] = name.into();
            }
            if let Some(uri) = client.client_uri {
                body["client_uri"] = uri.into();
            }
            json(StatusCode::CREATED, body)
        }
        Err(StoreError::InvalidArgument(invalid)) => {
            let code = if invalid.field == "redirect_uris" {
                "invalid_redirect_uri"
            } else {
                "invalid_client_metadata"
            };
            error(StatusCode::BAD_REQUEST, code, &invalid.to_string())
        }
        Err(e) => store_failure(e),
    }
}

/// The one error policy's answer, as an OAuth `server_error` (or
/// `temporarily_unavailable` when the database is down).
pub(super) fn store_failure(e: StoreError) -> Response {
    let answer = ops::Answer::logged(&e, "oauth");
    if answer.status == 503 {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "the database is unavailable; try again",
        );
    }
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        "something went wrong; the server log has the details",
    )
}
