//! The OAuth 2.1 authorization server's machine-facing routes
//! (`docs/oauth.md`): the metadata documents (RFC 9728, RFC 8414), client
//! registration (RFC 7591) and the token endpoint. The authorization
//! request itself is a page of the board (it needs the human's sign-in):
//! `board::pages::consent`.

mod metadata;
mod register;
mod token;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::delivery::Delivery;
use crate::http::client_addr::ClientAddr;
use crate::http::ratelimit::{Rate, RateLimiter};
use crate::ops::oauth::OAuthServer;

/// Registrations per client address: 10 at once, then one every 6 s (a
/// hosted client registers once per connection; a script filling the
/// table is held to 10 a minute).
pub const REGISTER_RATE: Rate = Rate::new(1.0 / 6.0, 10.0);
/// Token requests per client address: 5 a second, bursts of 20.
pub const TOKEN_RATE: Rate = Rate::new(5.0, 20.0);

/// What the OAuth routes need.
pub struct OAuthContext {
    pub server: Arc<OAuthServer>,
    pub registrations: RateLimiter,
    pub tokens: RateLimiter,
}

impl OAuthContext {
    pub fn new(server: Arc<OAuthServer>) -> Self {
        Self {
            server,
            registrations: RateLimiter::new(REGISTER_RATE),
            tokens: RateLimiter::new(TOKEN_RATE),
        }
    }
}

/// The OAuth routes' state.
#[derive(Clone)]
pub struct OAuthState {
    pub delivery: Arc<Delivery>,
    pub oauth: Arc<OAuthContext>,
}

/// The well-known documents, `/oauth/register` and `/oauth/token`.
pub fn router(state: OAuthState) -> Router {
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp/{slug}",
            get(metadata::protected_resource),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(metadata::authorization_server),
        )
        .route("/oauth/register", post(register::register))
        .route("/oauth/token", post(token::token))
        .with_state(state)
}

/// A JSON answer that is never cached (RFC 6749 section 5.1).
fn json(status: StatusCode, body: serde_json::Value) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// An OAuth error answer (RFC 6749 section 5.2, RFC 7591 section 3.2.2).
fn error(status: StatusCode, code: &str, description: &str) -> Response {
    json(
        status,
        serde_json::json!({"error": code, "error_description": description}),
    )
}

/// 429 with `Retry-After`, as an OAuth error.
fn rate_limited(wait: std::time::Duration) -> Response {
    let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
    let mut response = error(
        StatusCode::TOO_MANY_REQUESTS,
        "slow_down",
        "too many requests from this address; try again later",
    );
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// The bucket a request spends: its client address.
fn rate_key(parts: &axum::http::request::Parts) -> String {
    ClientAddr::of(parts).map_or_else(|| "unknown".to_owned(), |c| c.0.to_string())
}
