//! Request extractors of the MCP endpoint, like the API's (`api::extract`):
//! the endpoint behind the bearer credential ([`McpCaller`]), the session a
//! request names ([`BoundSession`]), the JSON-RPC message a POST carries
//! ([`RpcMessage`]), and the one rejection they share ([`McpRejection`]),
//! which answers exactly as `docs/mcp.md` says.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::jsonrpc::{self, Incoming};
use super::response::{rpc_response, with_security_headers};
use super::{MAX_BODY_BYTES, McpContext, McpState, PROTOCOL_VERSIONS};
use crate::delivery::sessions::Session;
use crate::domain::Timestamp;
use crate::domain::oauth::resource_metadata_url;
use crate::http::auth;
use crate::ops;
use crate::store::Endpoint;

pub(super) const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// Every way an MCP request is refused before (or instead of) a JSON-RPC
/// answer. Each renders as today: an HTTP status with the
/// `{"error": {code, message}}` envelope (plus `WWW-Authenticate` or
/// `Retry-After` where due), or a bare JSON-RPC error.
#[derive(Debug)]
pub(super) enum McpRejection {
    /// The path did not extract: axum's own answer.
    Path(PathRejection),
    /// 401 with `WWW-Authenticate`: no, or no live, `sbk_` credential. One
    /// body whatever was wrong; the header adds `error="invalid_token"`
    /// when a bearer token was presented (RFC 6750 section 3.1).
    Unauthenticated {
        token_presented: bool,
        /// Where the MCP URL's protected-resource metadata is (RFC 9728):
        /// how an OAuth client finds the authorization server.
        resource_metadata: String,
    },
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
    /// 400: an `MCP-Protocol-Version` we do not speak: a JSON-RPC error,
    /// -32601 for a method of a newer protocol (`server/discover`), else
    /// -32600, with `data.supported`.
    UnsupportedProtocolVersion {
        id: Option<Value>,
        newer_method: bool,
    },
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
            Self::Unauthenticated {
                token_presented,
                resource_metadata,
            } => {
                let mut response = http_error(
                    StatusCode::UNAUTHORIZED,
                    "unauthenticated",
                    "a valid endpoint credential is required (Authorization: Bearer sbk_…)",
                );
                let error = if token_presented {
                    ", error=\"invalid_token\""
                } else {
                    ""
                };
                let challenge = format!(
                    "Bearer realm=\"switchboard\"{error}, resource_metadata=\"{resource_metadata}\""
                );
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, value);
                }
                return response;
            }
            Self::UnsupportedProtocolVersion { id, newer_method } => {
                let (code, message) = if newer_method {
                    (
                        jsonrpc::METHOD_NOT_FOUND,
                        "method not found in the protocol versions this server speaks; \
                         call initialize",
                    )
                } else {
                    (jsonrpc::INVALID_REQUEST, "unsupported MCP-Protocol-Version")
                };
                let mut body = jsonrpc::error(id.as_ref(), code, message);
                body["error"]["data"] = json!({"supported": PROTOCOL_VERSIONS});
                return rpc_response(StatusCode::BAD_REQUEST, body);
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
            Self::ForeignCredential => (
                StatusCode::FORBIDDEN,
                "forbidden",
                "this credential belongs to another endpoint",
            ),
            Self::Unavailable => {
                let mut response =
                    http_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "try again");
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(ops::error::RETRY_AFTER_SECS),
                );
                return response;
            }
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
/// `/mcp/{slug}` it is addressed to. In order (`docs/mcp.md`): the bearer, the path
/// binding, the liveness stamp, the rate limit. (The DNS-rebinding guard,
/// `Host` and `Origin`, is the whole router's: `crate::http::host_guard`.)
///
/// Extracted once per request (kept in the request's extensions), so a
/// handler may take it beside a [`BoundSession`].
#[derive(Debug, Clone)]
pub(super) struct McpCaller {
    /// Shared with the credential cache and the request's extensions.
    pub endpoint: Arc<Endpoint>,
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
) -> Result<Arc<Endpoint>, McpRejection> {
    let bearer = auth::bearer(headers);
    // Built on refusal only: its URL is a string made per request.
    let refused = || McpRejection::Unauthenticated {
        token_presented: bearer.is_some(),
        resource_metadata: resource_metadata_url(&state.mcp.public_url, slug),
    };
    let Some(secret) = bearer else {
        return Err(refused());
    };
    let endpoint = match auth::endpoint(&*state.store, secret).await {
        Ok(Some(endpoint)) => endpoint,
        Ok(None) => return Err(refused()),
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
    if due || last_contact.is_some() {
        ops::endpoints::stamp_seen(&state.delivery, endpoint, now, last_contact).await;
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
pub(super) struct BoundSession(pub Arc<Session>);

impl BoundSession {
    /// Session `id`, if it is a live session of `endpoint`.
    pub(super) fn resolve(
        mcp: &McpContext,
        endpoint: &Endpoint,
        id: &str,
    ) -> Result<Self, McpRejection> {
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
pub(super) struct RpcMessage(pub Incoming);

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
        let protocol = unsupported_protocol(headers);
        let body: Bytes = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|_| McpRejection::PayloadTooLarge)?;
        if let Some(version) = protocol {
            return Err(protocol_refusal(&version, &body));
        }
        // One pass for what nearly every POST is, a well-formed message
        // object; anything else (an array, a duplicate key, a non-object,
        // not JSON, not JSON-RPC) is classified below, exactly as before.
        if body.trim_ascii_start().first() == Some(&b'{')
            && let Ok(message) = serde_json::from_slice::<Incoming>(&body)
            && message.is_well_formed()
        {
            return Ok(RpcMessage(message));
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

/// The `MCP-Protocol-Version` header when it names a version we do not
/// speak (an unreadable one reads as empty).
fn unsupported_protocol(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(PROTOCOL_HEADER)?;
    let version = value.to_str().unwrap_or("").trim();
    (!PROTOCOL_VERSIONS.contains(&version)).then(|| version.to_owned())
}

/// The refusal of a message sent under an unsupported protocol `version`:
/// -32601 when the version is newer than ours and the method is none of
/// ours (a 2026-era request such as `server/discover`, so the client falls
/// back to `initialize`), else -32600. The message's id is kept when the
/// body is a JSON-RPC request.
fn protocol_refusal(version: &str, body: &[u8]) -> McpRejection {
    let message: Option<Incoming> = serde_json::from_slice(body).ok();
    let id = message
        .as_ref()
        .and_then(|m| m.id.clone())
        .filter(|id| id.is_string() || id.is_number());
    let method = message.as_ref().and_then(|m| m.method.as_deref());
    McpRejection::UnsupportedProtocolVersion {
        id,
        newer_method: newer_than_ours(version) && method.is_some_and(|m| !is_known_method(m)),
    }
}

/// A protocol version later than our newest (versions are dates, `YYYY-MM-DD`).
fn newer_than_ours(version: &str) -> bool {
    let is_date = version.len() == 10
        && version.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    is_date && version > PROTOCOL_VERSIONS[0]
}

/// A method of the protocol versions we speak (ours, or one we accept as a
/// notification such as `notifications/initialized`).
pub(super) fn is_known_method(method: &str) -> bool {
    KNOWN_METHODS.contains(&method) || method.starts_with("notifications/")
}

/// The requests we answer.
pub(super) const KNOWN_METHODS: [&str; 6] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_refusals() {
        let discover = br#"{"jsonrpc":"2.0","id":"d1","method":"server/discover","params":{}}"#;
        let ping = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
        for (version, body, id, newer) in [
            ("2026-07-28", &discover[..], json!("d1"), true),
            ("2099-01-01", &discover[..], json!("d1"), true),
            // A method we know, under a newer version: invalid request.
            ("2026-07-28", &ping[..], json!(7), false),
            // An older or nonsense version: invalid request.
            ("2024-11-05", &discover[..], json!("d1"), false),
            ("banana", &discover[..], json!("d1"), false),
            ("2026-07-28", &b"{not json"[..], Value::Null, false),
        ] {
            match protocol_refusal(version, body) {
                McpRejection::UnsupportedProtocolVersion {
                    id: got,
                    newer_method,
                } => {
                    assert_eq!(got.unwrap_or(Value::Null), id, "{version}");
                    assert_eq!(newer_method, newer, "{version}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    async fn body(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn rejections_answer_with_status_headers_and_envelope() {
        let prm = "https://sb.example/.well-known/oauth-protected-resource/mcp/w";
        let r = McpRejection::Unauthenticated {
            token_presented: false,
            resource_metadata: prm.into(),
        }
        .into_response();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            r.headers()[header::WWW_AUTHENTICATE],
            format!("Bearer realm=\"switchboard\", resource_metadata=\"{prm}\"").as_str()
        );
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-store");
        assert_eq!(r.headers()["x-accel-buffering"], "no");
        assert_eq!(body(r).await["error"]["code"], "unauthenticated");

        let r = McpRejection::Unauthenticated {
            token_presented: true,
            resource_metadata: prm.into(),
        }
        .into_response();
        assert_eq!(
            r.headers()[header::WWW_AUTHENTICATE],
            format!(
                "Bearer realm=\"switchboard\", error=\"invalid_token\", resource_metadata=\"{prm}\""
            )
            .as_str()
        );
        assert_eq!(body(r).await["error"]["code"], "unauthenticated");

        for (newer_method, code) in [
            (true, jsonrpc::METHOD_NOT_FOUND),
            (false, jsonrpc::INVALID_REQUEST),
        ] {
            let r = McpRejection::UnsupportedProtocolVersion {
                id: Some(json!(3)),
                newer_method,
            }
            .into_response();
            assert_eq!(r.status(), StatusCode::BAD_REQUEST);
            let v = body(r).await;
            assert_eq!(v["jsonrpc"], "2.0");
            assert_eq!(v["id"], 3);
            assert_eq!(v["error"]["code"], code);
            assert_eq!(v["error"]["data"]["supported"], json!(PROTOCOL_VERSIONS));
        }

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
