//! `POST /oauth/token`: the `authorization_code` and `refresh_token`
//! grants for public clients (`client_id` in the body, no secret), errors
//! as RFC 6749 section 5.2 names them.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::json;

use super::register::store_failure;
use super::{OAuthState, error, json, rate_key, rate_limited};
use crate::ops;
use crate::ops::oauth::{CodeExchange, TokenRefused, Tokens};

/// A token request is a handful of short fields.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

pub(super) async fn token(State(state): State<OAuthState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if let Err(wait) = state.oauth.tokens.check(&rate_key(&parts)) {
        return rate_limited(wait);
    }
    let is_form = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|m| {
            m.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !is_form {
        return refused(TokenRefused::InvalidRequest(
            "body: must be application/x-www-form-urlencoded".into(),
        ));
    }
    let Ok(bytes) = axum::body::to_bytes(body, MAX_TOKEN_BYTES).await else {
        return refused(TokenRefused::InvalidRequest("body: at most 16 KiB".into()));
    };
    let Ok(pairs) = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&bytes) else {
        return refused(TokenRefused::InvalidRequest("body: not a form".into()));
    };
    // RFC 6749 section 3.2: a parameter sent twice is an invalid request.
    let mut seen = std::collections::HashSet::new();
    if let Some((dup, _)) = pairs.iter().find(|(k, _)| !seen.insert(k.as_str())) {
        return refused(TokenRefused::InvalidRequest(format!(
            "{dup}: sent more than once"
        )));
    }
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };
    match answer(&state, &field).await {
        Ok(tokens) => json(
            StatusCode::OK,
            json!({
                "access_token": tokens.access_token,
                "token_type": "Bearer",
                "expires_in": tokens.expires_in,
                "refresh_token": tokens.refresh_token,
            }),
        ),
        Err(refusal) => refused(refusal),
    }
}

async fn answer<'a>(
    state: &OAuthState,
    field: &impl Fn(&str) -> Option<&'a str>,
) -> Result<Tokens, TokenRefused> {
    let grant_type = field("grant_type")
        .ok_or_else(|| TokenRefused::InvalidRequest("grant_type: required".into()))?;
    if !matches!(grant_type, "authorization_code" | "refresh_token") {
        return Err(TokenRefused::UnsupportedGrantType);
    }
    let client_id = field("client_id").ok_or_else(|| {
        TokenRefused::InvalidClient("client_id: required (a public client names itself)".into())
    })?;
    // The client must be known (registered, or its document fetched when
    // it asked for authorization).
    if state
        .delivery
        .store()
        .get_oauth_client(client_id)
        .await?
        .is_none()
    {
        return Err(TokenRefused::InvalidClient(
            "client_id: no such client".into(),
        ));
    }
    let required = |name: &'static str| {
        field(name).ok_or_else(|| TokenRefused::InvalidRequest(format!("{name}: required")))
    };
    if grant_type == "authorization_code" {
        ops::oauth::exchange_code(
            &state.delivery,
            CodeExchange {
                client_id,
                code: required("code")?,
                redirect_uri: required("redirect_uri")?,
                code_verifier: field("code_verifier"),
                resource: field("resource"),
            },
        )
        .await
    } else {
        ops::oauth::refresh(
            &state.delivery,
            client_id,
            required("refresh_token")?,
            field("resource"),
        )
        .await
    }
}

fn refused(refusal: TokenRefused) -> Response {
    let status = match refusal {
        TokenRefused::Store(e) => return store_failure(e),
        TokenRefused::InvalidClient(_) => StatusCode::UNAUTHORIZED,
        _ => StatusCode::BAD_REQUEST,
    };
    error(status, refusal.code(), &refusal.to_string())
}
