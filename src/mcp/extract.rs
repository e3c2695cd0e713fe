//! Request extractors of the MCP endpoint, like the API's (`api::extract`):
//! the endpoint behind the bearer credential ([`McpCaller`]), the session a
//! request names ([`BoundSession`]), the JSON-RPC message a POST carries
//! ([`RpcMessage`]), and the one rejection they share ([`McpRejection`]),
//! which answers exactly as `03-mcp.md` says.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::jsonrpc::{self, Incoming};
use super::transport::{rpc_response, with_security_headers};
use super::{MAX_BODY_BYTES, McpContext, McpState, PROTOCOL_VERSIONS};
use crate::delivery::sessions::Session;
use crate::domain::Timestamp;
use crate::domain::ids::sha256_hex;
use crate::store::Endpoint;

pub(super) const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// Every way an MCP request is refused before (or instead of) a JSON-RPC
/// answer. Each renders as today: an HTTP status with the
/// `{"error": {code, message}}` envelope (plus `WWW-Authenticate` or
/// `Retry-After` where due), or a bare JSON-RPC error.
#[derive(Debug)]
pub enum McpRejection {
    /// The path did not extract: axum's own answer.
    Path(PathRejection),
    /// 403: the DNS-rebinding guard (a non-loopback `Host`).
    NotLoopback,
    /// 401 with `WWW-Authenticate`: no, or no live, `sbk_` credential. One
    /// answer whatever was wrong.
    Unauthenticated,
    /// 403: the credential is another endpoint's.
    ForeignCredential,
    /// 503: the store could not authenticate.
    Unavailable,
    /// 429 with `Retry-After` (whole seconds, at least 1).
    RateLimited { retry_after_secs: u64 },
    /// 415: a POST body that is not `application/json`.
    UnsupportedMediaType,
    /// 413: a POST body over [`MAX_BODY_BYTES`].
    PayloadTooLarge,
    /// 400: an `MCP-Protocol-Version` we do not speak.
    UnsupportedProtocolVersion,
    /// 400: GET/DELETE without `Mcp-Session-Id`.
    SessionRequired,
    /// 400: a POST (other than `initialize`) without `Mcp-Session-Id`.
    InitializeFirst,
    /// 404: `Mcp-Session-Id` names no live session of this endpoint.
    NoSuchSession,
    /// A JSON-RPC error answered as is (parse error, batch, not JSON-RPC,
    /// a sessionless probe of an unknown method).
    Rpc { status: StatusCode, body: Value },
}

impl McpRejection {
    /// A JSON-RPC error without a request id.
    fn rpc(code: i64, message: &str) -> Self {
        Self::Rpc {
            status: StatusCode::BAD_REQUEST,
            body: jsonrpc::error(None, code, message),
        }
    }
}

impl IntoResponse for McpRejection {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            Self::Path(rejection) => return rejection.into_response(),
            Self::Rpc { status, body } => return rpc_response(status, body),
            Self::Unauthenticated => {
                let mut response = http_error(
                    StatusCode::UNAUTHORIZED,
                    "unauthenticated",
                    "a valid endpoint credential is required (Authorization: Bearer sbk_…)",
                );
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"switchboard\""),
                );
                return response;
            }
            Self::RateLimited { retry_after_secs } => {
                let mut response = http_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    "too many requests; slow down",
                );
                if let Ok(value) = HeaderValue::from_str(&retry_after_secs.to_string()) {
                    response.headers_mut().insert(header::RETRY_AFTER, value);
                }
                return response;
            }
            Self::NotLoopback => (
                StatusCode::FORBIDDEN,
                "forbidden",
                "this server only answers requests addressed to the loopback interface",
            ),
            Self::ForeignCredential => (
                StatusCode::FORBIDDEN,
                "forbidden",
                "this credential belongs to another endpoint",
            ),
            Self::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", "try again"),
            Self::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "POST bodies must be application/json",
            ),
            Self::PayloadTooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the body exceeds 1 MiB",
            ),
            Self::UnsupportedProtocolVersion => (
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                "unsupported MCP-Protocol-Version",
            ),
            Self::SessionRequired => (
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                "Mcp-Session-Id header required",
            ),
            Self::InitializeFirst => (
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                "Mcp-Session-Id header required (call initialize first)",
            ),
            Self::NoSuchSession => (StatusCode::NOT_FOUND, "not_found", "no such session"),
        };
        http_error(status, code, message)
    }
}

fn http_error(status: StatusCode, code: &str, message: &str) -> Response {
    with_security_headers(
        (
            status,
            axum::Json(json!({"error": {"code": code, "message": message}})),
        )
            .into_response(),
    )
}

/// The endpoint behind the request's bearer credential, bound to the
/// `/mcp/{slug}` it is addressed to. In order (`03`): the DNS-rebinding
/// guard, the bearer, the path binding, the liveness stamp, the rate limit.
///
/// Extracted once per request (kept in the request's extensions), so a
/// handler may take it beside a [`BoundSession`].
#[derive(Debug, Clone)]
pub struct McpCaller {
    pub endpoint: Endpoint,
}

impl FromRequestParts<McpState> for McpCaller {
    type Rejection = McpRejection;

    async fn from_request_parts(parts: &mut Parts, state: &McpState) -> Result<Self, McpRejection> {
        if let Some(caller) = parts.extensions.get::<McpCaller>() {
            return Ok(caller.clone());
        }
        let Path(slug) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(McpRejection::Path)?;
        let endpoint = authenticate(state, &slug, &parts.headers).await?;
        let caller = McpCaller { endpoint };
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}

async fn authenticate(
    state: &McpState,
    slug: &str,
    headers: &HeaderMap,
) -> Result<Endpoint, McpRejection> {
    if state.mcp.config.loopback_guard && !host_is_loopback(headers) {
        return Err(McpRejection::NotLoopback);
    }
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|t| t.starts_with("sbk_"))
        .ok_or(McpRejection::Unauthenticated)?;
    let endpoint = match state.store.authenticate_endpoint(&sha256_hex(token)).await {
        Ok(Some(endpoint)) => endpoint,
        Ok(None) => return Err(McpRejection::Unauthenticated),
        Err(e) => {
            tracing::error!(error = %e, "endpoint authentication failed");
            return Err(McpRejection::Unavailable);
        }
    };
    if endpoint.slug != slug {
        return Err(McpRejection::ForeignCredential);
    }
    // Step 3: an authenticated request is a sign of life, whatever becomes
    // of it next (rate limit, a refused body, an unknown session).
    stamp_seen(state, &endpoint, None).await;
    if let Err(wait) = state.mcp.rate.check(&endpoint.id) {
        return Err(McpRejection::RateLimited {
            retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
        });
    }
    Ok(endpoint)
}

/// `Host` must name the loopback interface when we listen on it.
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name == "::1"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Writes `last_seen_at` at most once per second per endpoint (a stamp
/// failure is logged and never fails the request); always when the client
/// reports a `last_contact`.
pub(super) async fn stamp_seen(
    state: &McpState,
    endpoint: &Endpoint,
    last_contact: Option<Timestamp>,
) {
    let now = state.store.clock().now();
    let due = {
        let mut stamps = state
            .mcp
            .last_stamp
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let due = stamps
            .get(&endpoint.id)
            .is_none_or(|last| now.as_millis() - last >= 1_000);
        if due || last_contact.is_some() {
            stamps.insert(endpoint.id.clone(), now.as_millis());
        }
        due
    };
    if (due || last_contact.is_some())
        && let Err(e) = state
            .store
            .stamp_endpoint_seen(&endpoint.id, now, last_contact)
            .await
    {
        tracing::warn!(endpoint = %endpoint.slug, error = %e, "could not stamp last_seen");
    }
}

/// The `Mcp-Session-Id` header, if present and readable.
pub(super) fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok())
}

/// The live session `Mcp-Session-Id` names, of the caller's endpoint (a
/// foreign session answers exactly like a missing one). Extracting it
/// extracts the [`McpCaller`] first.
#[derive(Debug, Clone)]
pub struct BoundSession(pub Arc<Session>);

impl BoundSession {
    /// Session `id`, if it is a live session of `endpoint`.
    pub fn resolve(mcp: &McpContext, endpoint: &Endpoint, id: &str) -> Result<Self, McpRejection> {
        match mcp.sessions.get(id) {
            Some(session) if session.endpoint_id == endpoint.id => Ok(Self(session)),
            _ => Err(McpRejection::NoSuchSession),
        }
    }
}

impl FromRequestParts<McpState> for BoundSession {
    type Rejection = McpRejection;

    async fn from_request_parts(parts: &mut Parts, state: &McpState) -> Result<Self, McpRejection> {
        let caller = McpCaller::from_request_parts(parts, state).await?;
        let id = session_id(&parts.headers).ok_or(McpRejection::SessionRequired)?;
        Self::resolve(&state.mcp, &caller.endpoint, id)
    }
}

/// The JSON-RPC message of a POST: `application/json`, at most 1 MiB, a
/// protocol version we speak (when stated), one well-formed JSON-RPC 2.0
/// object (no batches). Checked in that order.
#[derive(Debug)]
pub struct RpcMessage(pub Incoming);

impl FromRequest<McpState> for RpcMessage {
    type Rejection = McpRejection;

    async fn from_request(request: Request, _state: &McpState) -> Result<Self, McpRejection> {
        let headers = request.headers();
        let is_json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| {
                ct.split(';')
                    .next()
                    .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
            });
        if !is_json {
            return Err(McpRejection::UnsupportedMediaType);
        }
        let protocol_ok = protocol_header_ok(headers);
        let body: Bytes = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|_| McpRejection::PayloadTooLarge)?;
        if !protocol_ok {
            return Err(McpRejection::UnsupportedProtocolVersion);
        }
        let value: Value = serde_json::from_slice(&body)
            .map_err(|_| McpRejection::rpc(jsonrpc::PARSE_ERROR, "parse error"))?;
        if value.is_array() {
            return Err(McpRejection::rpc(
                jsonrpc::INVALID_REQUEST,
                "batches are not supported",
            ));
        }
        match serde_json::from_value::<Incoming>(value) {
            Ok(message) if message.is_well_formed() => Ok(RpcMessage(message)),
            _ => Err(McpRejection::rpc(
                jsonrpc::INVALID_REQUEST,
                "not a JSON-RPC 2.0 message",
            )),
        }
    }
}

fn protocol_header_ok(headers: &HeaderMap) -> bool {
    match headers.get(PROTOCOL_HEADER).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(v) => PROTOCOL_VERSIONS.contains(&v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_host(host: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        h
    }

    #[test]
    fn loopback_hosts() {
        for ok in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8080",
            "127.1.2.3",
        ] {
            assert!(host_is_loopback(&with_host(ok)), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "10.0.0.1",
            "localhost.evil.example",
            "[::2]",
        ] {
            assert!(!host_is_loopback(&with_host(bad)), "{bad}");
        }
        assert!(!host_is_loopback(&HeaderMap::new()));
    }

    async fn body(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn rejections_answer_with_status_headers_and_envelope() {
        let r = McpRejection::Unauthenticated.into_response();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            r.headers()[header::WWW_AUTHENTICATE],
            "Bearer realm=\"switchboard\""
        );
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-store");
        assert_eq!(body(r).await["error"]["code"], "unauthenticated");

        let r = McpRejection::RateLimited {
            retry_after_secs: 2,
        }
        .into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "2");

        for (rejection, status, code) in [
            (McpRejection::NoSuchSession, 404, "not_found"),
            (McpRejection::SessionRequired, 400, "invalid_argument"),
            (McpRejection::InitializeFirst, 400, "invalid_argument"),
            (McpRejection::NotLoopback, 403, "forbidden"),
            (McpRejection::PayloadTooLarge, 413, "payload_too_large"),
        ] {
            let r = rejection.into_response();
            assert_eq!(r.status().as_u16(), status);
            assert_eq!(body(r).await["error"]["code"], code);
        }

        let r = McpRejection::rpc(jsonrpc::PARSE_ERROR, "parse error").into_response();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let v = body(r).await;
        assert_eq!(v["error"]["code"], jsonrpc::PARSE_ERROR);
        assert_eq!(v["id"], Value::Null);
    }
}
