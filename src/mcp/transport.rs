//! Streamable HTTP: POST (JSON-RPC in, JSON out), GET (the session's
//! notification stream) and DELETE (end the session). Authentication, the
//! rate limit, liveness stamping, the session and the body's checks are
//! extractors (`extract.rs`); the DNS-rebinding guard (`Host`, `Origin`) is
//! the whole router's (`crate::http::host_guard`).

use std::convert::Infallible;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::McpState;
use super::extract::{
    BoundSession, KNOWN_METHODS, McpCaller, McpRejection, RpcMessage, SESSION_HEADER, session_id,
    stamp_seen,
};
use super::jsonrpc::{self, Incoming};
use super::response::{rpc_response, with_security_headers};
use super::{PROTOCOL_VERSIONS, instructions, prompts, tools};
use crate::delivery::sessions::Hearer;
use crate::domain::Timestamp;
use crate::store::Endpoint;

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

/// POST: one JSON-RPC message in, its answer out. `initialize` opens a
/// session; everything else needs one (`Mcp-Session-Id`).
pub(super) async fn post_message(
    State(state): State<McpState>,
    McpCaller { endpoint }: McpCaller,
    headers: HeaderMap,
    RpcMessage(message): RpcMessage,
) -> Result<Response, McpRejection> {
    if let Some(contact) = last_contact(message.params.as_ref()) {
        stamp_seen(&state, &endpoint, Some(contact)).await;
    }

    let method = message.method.as_deref().unwrap_or("");
    if method == "initialize" && message.is_request() {
        return Ok(initialize(&state, &endpoint, &message).await);
    }
    let Some(id) = session_id(&headers) else {
        return Err(sessionless(&message));
    };
    let BoundSession(session) = BoundSession::resolve(&state.mcp, &endpoint, id)?;
    let _in_flight = state.mcp.sessions.begin_request(&session);
    if !message.is_request() {
        // Notifications and responses need no answer.
        return Ok(with_security_headers(StatusCode::ACCEPTED.into_response()));
    }
    let id = message.id.clone().unwrap_or(Value::Null);
    let answer = match method {
        "ping" => jsonrpc::success(&id, json!({})),
        "tools/list" => jsonrpc::success(&id, tools::list(&endpoint)),
        "tools/call" => call_tool(&state, &endpoint, &id, message.params).await?,
        "prompts/list" => jsonrpc::success(&id, prompts::list(&endpoint)),
        "prompts/get" => get_prompt(&endpoint, &id, message.params.as_ref()),
        _ => jsonrpc::error(Some(&id), jsonrpc::METHOD_NOT_FOUND, "method not found"),
    };
    Ok(rpc_response(StatusCode::OK, answer))
}

/// A POST without a session: a sessionless probe such as `server/discover`
/// gets a plain JSON-RPC "method not found", so clients fall back to
/// initialize; anything else is told to initialize first.
fn sessionless(message: &Incoming) -> McpRejection {
    let method = message.method.as_deref().unwrap_or("");
    if message.is_request() && !KNOWN_METHODS.contains(&method) {
        return McpRejection::Rpc {
            status: StatusCode::OK,
            body: jsonrpc::error(
                message.id.as_ref(),
                jsonrpc::METHOD_NOT_FOUND,
                "method not found",
            ),
        };
    }
    McpRejection::InitializeFirst
}

async fn initialize(state: &McpState, endpoint: &Endpoint, message: &Incoming) -> Response {
    let id = message.id.clone().unwrap_or(Value::Null);
    let params = message.params.clone().unwrap_or(Value::Null);
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    let version = requested
        .filter(|v| PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSIONS[0]);
    let client_info = |key: &str| {
        params
            .get("clientInfo")
            .and_then(|c| c.get(key))
            .and_then(Value::as_str)
            .map(|s| crate::domain::text::strip_controls_and_cut(s, 64))
    };
    let (client_name, client_version) = (client_info("name"), client_info("version"));
    let waiting = state.store.count_pending(&endpoint.id).await.unwrap_or(0);
    let hearer = Hearer {
        transport: "mcp",
        client_name,
        client_version,
        protocol_version: Some(version.to_owned()),
    };
    let session = state
        .mcp
        .sessions
        .create(&endpoint.id, &endpoint.slug, hearer);
    tracing::info!(
        endpoint = %endpoint.slug,
        protocol = version,
        client = session.hearer.client_name.as_deref().unwrap_or("?"),
        "MCP session opened"
    );
    let result = json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": true},
            "prompts": {},
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

/// `prompts/get`: an unknown (or not offered) prompt is invalid params, as
/// the protocol asks.
fn get_prompt(endpoint: &Endpoint, id: &Value, params: Option<&Value>) -> Value {
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    let Some(name) = name else {
        return jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, "params.name is required");
    };
    match prompts::get(endpoint, name, params.and_then(|p| p.get("arguments"))) {
        Some(prompt) => jsonrpc::success(id, prompt),
        None => jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, "unknown prompt"),
    }
}

async fn call_tool(
    state: &McpState,
    endpoint: &Endpoint,
    id: &Value,
    params: Option<Value>,
) -> Result<Value, McpRejection> {
    let mut params = params.unwrap_or(Value::Null);
    // Moved out, not copied: the params are this call's own.
    let arguments = params
        .as_object_mut()
        .and_then(|params| params.remove("arguments"));
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Ok(jsonrpc::error(
            Some(id),
            jsonrpc::INVALID_PARAMS,
            "params.name is required",
        ));
    };
    let limits = tools::ToolLimits {
        claim_payload_inline_max: state.mcp.config.claim_payload_inline_max,
    };
    match tools::call_with(&state.delivery, endpoint, name, arguments, limits).await {
        Ok(result) => Ok(jsonrpc::success(id, result)),
        Err(tools::CallFailure::Protocol(message)) => {
            Ok(jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, &message))
        }
        Err(tools::CallFailure::Unavailable) => Err(McpRejection::Unavailable),
    }
}

/// GET: the session's notification stream (SSE).
pub(super) async fn open_stream(
    State(state): State<McpState>,
    McpCaller { endpoint }: McpCaller,
    BoundSession(session): BoundSession,
) -> Response {
    // Read before the stream is registered: every todo created from here on
    // rings this stream itself (or is held for it), so the reconnect check
    // below, which may run well after this, digests only what came earlier.
    let opened_at = state.store.clock().now();
    let (guard, receiver) = state.mcp.sessions.open_stream(&session);
    if state.mcp.sessions.counts(&endpoint.id).streaming == 1 {
        // The endpoint's first streaming session here: maybe a reconnect digest.
        let delivery = state.delivery.clone();
        let endpoint = endpoint.clone();
        tokio::spawn(async move {
            crate::delivery::presence::stream_opened(&delivery, &endpoint, opened_at).await;
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

/// DELETE: end the session.
pub(super) async fn end_session(
    State(state): State<McpState>,
    McpCaller { endpoint }: McpCaller,
    BoundSession(session): BoundSession,
) -> Response {
    state.mcp.sessions.close(&session.id);
    tracing::info!(endpoint = %endpoint.slug, "MCP session ended by the client");
    with_security_headers(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

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
