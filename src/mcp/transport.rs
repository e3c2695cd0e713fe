//! Streamable HTTP: POST (JSON-RPC in, JSON out), GET (the session's
//! notification stream) and DELETE (end the session), with authentication,
//! the DNS-rebinding guard, limits and liveness stamping.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::McpState;
use super::jsonrpc::{self, Incoming};
use super::{MAX_BODY_BYTES, McpContext, PROTOCOL_VERSIONS, instructions, tools};
use crate::delivery::sessions::Session;
use crate::domain::Timestamp;
use crate::domain::ids::sha256_hex;
use crate::store::Endpoint;

const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// Every response carries these.
pub(super) async fn secure(response: Response) -> Response {
    with_security_headers(response)
}

fn with_security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
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

/// One answer for every authentication failure.
fn unauthenticated() -> Response {
    let mut response = http_error(
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        "a valid endpoint credential is required (Authorization: Bearer sbk_…)",
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"switchboard\""),
    );
    response
}

fn rpc_response(status: StatusCode, body: Value) -> Response {
    with_security_headers((status, axum::Json(body)).into_response())
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

/// Guard, bearer, path binding, liveness stamp and rate limit, in that
/// order (`03`).
async fn authenticate(
    state: &McpState,
    slug: &str,
    headers: &HeaderMap,
) -> Result<Endpoint, Response> {
    if state.mcp.config.loopback_guard && !host_is_loopback(headers) {
        return Err(http_error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this server only answers requests addressed to the loopback interface",
        ));
    }
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|t| t.starts_with("sbk_"))
        .ok_or_else(unauthenticated)?;
    let endpoint = match state.store.authenticate_endpoint(&sha256_hex(token)).await {
        Ok(Some(endpoint)) => endpoint,
        Ok(None) => return Err(unauthenticated()),
        Err(e) => {
            tracing::error!(error = %e, "endpoint authentication failed");
            return Err(http_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "try again",
            ));
        }
    };
    if endpoint.slug != slug {
        return Err(http_error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this credential belongs to another endpoint",
        ));
    }
    // Step 3: an authenticated request is a sign of life, whatever becomes
    // of it next (rate limit, a refused body, an unknown session).
    stamp_seen(state, &endpoint, None).await;
    if let Err(wait) = state.mcp.rate.check(&endpoint.id) {
        let mut response = http_error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            "too many requests; slow down",
        );
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        if let Ok(value) = HeaderValue::from_str(&secs.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return Err(response);
    }
    Ok(endpoint)
}

/// Writes `last_seen_at` at most once per second per endpoint (a stamp
/// failure is logged and never fails the request).
async fn stamp_seen(state: &McpState, endpoint: &Endpoint, last_contact: Option<Timestamp>) {
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

/// `params._meta.last_contact`: RFC 3339 or Unix seconds; anything else is ignored.
fn last_contact(params: Option<&Value>) -> Option<Timestamp> {
    let value = params?.get("_meta")?.get("last_contact")?;
    match value {
        Value::String(s) => Timestamp::parse_rfc3339(s).or_else(|| {
            s.parse::<i64>()
                .ok()
                .map(|secs| Timestamp::from_millis(secs * 1000))
        }),
        Value::Number(n) => n
            .as_f64()
            .map(|secs| Timestamp::from_millis((secs * 1000.0) as i64)),
        _ => None,
    }
}

fn session_header(headers: &HeaderMap) -> Option<&str> {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok())
}

/// The session this request names, if it belongs to `endpoint`.
// The error is the ready HTTP answer; it is returned at once, so its size costs nothing.
#[allow(clippy::result_large_err)]
fn bound_session(
    mcp: &McpContext,
    endpoint: &Endpoint,
    headers: &HeaderMap,
) -> Result<std::sync::Arc<Session>, Response> {
    let Some(id) = session_header(headers) else {
        return Err(http_error(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "Mcp-Session-Id header required",
        ));
    };
    match mcp.sessions.get(id) {
        Some(session) if session.endpoint_id == endpoint.id => Ok(session),
        _ => Err(http_error(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such session",
        )),
    }
}

fn protocol_header_ok(headers: &HeaderMap) -> bool {
    match headers.get(PROTOCOL_HEADER).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(v) => PROTOCOL_VERSIONS.contains(&v),
    }
}

const KNOWN_METHODS: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];

pub async fn post_message(
    State(state): State<McpState>,
    Path(slug): Path<String>,
    request: Request,
) -> Response {
    let headers = request.headers().clone();
    let endpoint = match authenticate(&state, &slug, &headers).await {
        Ok(endpoint) => endpoint,
        Err(response) => return response,
    };
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| {
            ct.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
    if !is_json {
        return http_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "POST bodies must be application/json",
        );
    }
    let body: Bytes = match axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return http_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the body exceeds 1 MiB",
            );
        }
    };
    if !protocol_header_ok(&headers) {
        return http_error(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "unsupported MCP-Protocol-Version",
        );
    }
    let value: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(_) => {
            return rpc_response(
                StatusCode::BAD_REQUEST,
                jsonrpc::error(None, jsonrpc::PARSE_ERROR, "parse error"),
            );
        }
    };
    if value.is_array() {
        return rpc_response(
            StatusCode::BAD_REQUEST,
            jsonrpc::error(None, jsonrpc::INVALID_REQUEST, "batches are not supported"),
        );
    }
    let message = match serde_json::from_value::<Incoming>(value) {
        Ok(m) if m.is_well_formed() => m,
        _ => {
            return rpc_response(
                StatusCode::BAD_REQUEST,
                jsonrpc::error(None, jsonrpc::INVALID_REQUEST, "not a JSON-RPC 2.0 message"),
            );
        }
    };
    if let Some(contact) = last_contact(message.params.as_ref()) {
        stamp_seen(&state, &endpoint, Some(contact)).await;
    }

    let method = message.method.as_deref().unwrap_or("");
    if method == "initialize" && message.is_request() {
        return initialize(&state, &endpoint, &message).await;
    }
    let session = match session_header(&headers) {
        Some(_) => match bound_session(&state.mcp, &endpoint, &headers) {
            Ok(session) => session,
            Err(response) => return response,
        },
        None => {
            // A sessionless probe such as `server/discover` gets a plain
            // JSON-RPC "method not found", so clients fall back to initialize.
            if message.is_request() && !KNOWN_METHODS.contains(&method) {
                return rpc_response(
                    StatusCode::OK,
                    jsonrpc::error(
                        message.id.as_ref(),
                        jsonrpc::METHOD_NOT_FOUND,
                        "method not found",
                    ),
                );
            }
            return http_error(
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                "Mcp-Session-Id header required (call initialize first)",
            );
        }
    };
    let _in_flight = state.mcp.sessions.begin_request(&session);
    if !message.is_request() {
        // Notifications and responses need no answer.
        return with_security_headers(StatusCode::ACCEPTED.into_response());
    }
    let id = message.id.clone().unwrap_or(Value::Null);
    let answer = match method {
        "ping" => jsonrpc::success(&id, json!({})),
        "tools/list" => jsonrpc::success(&id, tools::list(&endpoint)),
        "tools/call" => call_tool(&state, &endpoint, &id, message.params).await,
        _ => jsonrpc::error(Some(&id), jsonrpc::METHOD_NOT_FOUND, "method not found"),
    };
    rpc_response(StatusCode::OK, answer)
}

async fn initialize(state: &McpState, endpoint: &Endpoint, message: &Incoming) -> Response {
    let id = message.id.clone().unwrap_or(Value::Null);
    let params = message.params.clone().unwrap_or(Value::Null);
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    let version = requested
        .filter(|v| PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSIONS[0]);
    let client_name = params
        .get("clientInfo")
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str)
        .map(|s| crate::domain::text::strip_controls_and_cut(s, 64));
    let waiting = state.store.count_pending(&endpoint.id).await.unwrap_or(0);
    let session = state
        .mcp
        .sessions
        .create(&endpoint.id, &endpoint.slug, version, client_name);
    tracing::info!(
        endpoint = %endpoint.slug,
        protocol = version,
        client = session.client_name.as_deref().unwrap_or("?"),
        "MCP session opened"
    );
    let result = json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": true},
            "experimental": {"claude/channel": {}}
        },
        "serverInfo": {"name": "switchboard", "version": env!("CARGO_PKG_VERSION")},
        "instructions": instructions::text(endpoint.effective_lease_seconds(), waiting),
    });
    let mut response = rpc_response(StatusCode::OK, jsonrpc::success(&id, result));
    if let Ok(value) = HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

async fn call_tool(
    state: &McpState,
    endpoint: &Endpoint,
    id: &Value,
    params: Option<Value>,
) -> Value {
    let params = params.unwrap_or(Value::Null);
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, "params.name is required");
    };
    let arguments = params.get("arguments").cloned();
    let mut effects = tools::SideEffects::default();
    match tools::call(&state.delivery, endpoint, name, arguments, &mut effects).await {
        Ok(result) => {
            if effects.tools_changed {
                let note = jsonrpc::notification("notifications/tools/list_changed", json!({}));
                for session in state.mcp.sessions.sessions_of(&endpoint.id) {
                    let _ = session.try_send(note.clone());
                }
            }
            jsonrpc::success(id, result)
        }
        Err(message) => jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, &message),
    }
}

pub async fn open_stream(
    State(state): State<McpState>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    let endpoint = match authenticate(&state, &slug, &headers).await {
        Ok(endpoint) => endpoint,
        Err(response) => return response,
    };
    let session = match bound_session(&state.mcp, &endpoint, &headers) {
        Ok(session) => session,
        Err(response) => return response,
    };
    let (guard, receiver) = state.mcp.sessions.open_stream(&session);
    if state.mcp.sessions.counts(&endpoint.id).streaming == 1 {
        // The endpoint's first streaming session here: maybe a reconnect digest.
        let delivery = state.delivery.clone();
        let endpoint = endpoint.clone();
        tokio::spawn(async move {
            crate::delivery::presence::stream_opened(&delivery, &endpoint).await;
        });
    }
    tracing::debug!(endpoint = %endpoint.slug, "notification stream opened");
    // The guard lives inside the stream: when the connection goes away the
    // stream is dropped, and the session stops counting as streaming.
    let stream =
        futures_util::stream::unfold((receiver, guard), |(mut receiver, guard)| async move {
            let message = receiver.recv().await?;
            let event = Event::default().event("message").data(message.to_string());
            Some((Ok::<_, Infallible>(event), (receiver, guard)))
        });
    with_security_headers(
        Sse::new(stream)
            .keep_alive(KeepAlive::new().interval(state.mcp.config.keepalive))
            .into_response(),
    )
}

pub async fn end_session(
    State(state): State<McpState>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    let endpoint = match authenticate(&state, &slug, &headers).await {
        Ok(endpoint) => endpoint,
        Err(response) => return response,
    };
    let session = match bound_session(&state.mcp, &endpoint, &headers) {
        Ok(session) => session,
        Err(response) => return response,
    };
    state.mcp.sessions.close(&session.id);
    tracing::info!(endpoint = %endpoint.slug, "MCP session ended by the client");
    with_security_headers(StatusCode::NO_CONTENT.into_response())
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

    #[test]
    fn last_contact_forms() {
        let p = |v: Value| last_contact(Some(&json!({"_meta": {"last_contact": v}})));
        assert_eq!(
            p(json!(1_700_000_000)),
            Some(Timestamp::from_millis(1_700_000_000_000))
        );
        assert_eq!(
            p(json!("2026-01-05T09:00:00Z")),
            Timestamp::parse_rfc3339("2026-01-05T09:00:00Z")
        );
        assert_eq!(p(json!({"x": 1})), None);
        assert_eq!(last_contact(None), None);
    }
}
