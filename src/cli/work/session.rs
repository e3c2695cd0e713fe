//! The runner's MCP session over Streamable HTTP, as our server speaks it
//! (`docs/mcp.md`): `initialize` (POST, the session id comes back in
//! `Mcp-Session-Id`), `notifications/initialized`, JSON-RPC requests by POST
//! with the session id, and the session's notification stream by GET (SSE
//! `message` events, each one JSON-RPC message). The bearer token is sent on
//! every request and appears in no error or log.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::{Value, json};

/// The protocol version the runner asks for.
pub(super) const PROTOCOL_VERSION: &str = "2025-11-25";
/// `clientInfo.name`: how the server (and an operator) tells a runner's session.
pub(super) const CLIENT_NAME: &str = "switchboard-work";

const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_HEADER: &str = "mcp-protocol-version";
/// A POST may take this long (a tool call on a busy server).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call did not get an answer.
#[derive(Debug, thiserror::Error)]
pub(super) enum McpError {
    /// The server is away or struggling (connection refused, reset, a
    /// timeout, a 5xx or a 429): try again later.
    #[error("the server is unreachable ({0})")]
    Away(String),
    /// The session is unknown to the server (404, e.g. after its restart):
    /// initialize a new one.
    #[error("the MCP session is gone")]
    SessionGone,
    /// The credential was refused (401, 403) or the URL is not an MCP
    /// endpoint: trying again will not help.
    #[error("{0}")]
    Refused(String),
    /// A JSON-RPC error or a tool error (`isError`).
    #[error("{0}")]
    Rpc(String),
}

pub(super) struct McpClient {
    http: reqwest::Client,
    url: String,
    authorization: HeaderValue,
    client_name: &'static str,
    session: Mutex<Option<String>>,
    next_id: AtomicU64,
}

impl McpClient {
    pub(super) fn new(url: &str, token: &str) -> anyhow::Result<Self> {
        Self::named(url, token, CLIENT_NAME)
    }

    /// A client that introduces itself as `client_name` (`clientInfo.name`).
    pub(super) fn named(url: &str, token: &str, client_name: &'static str) -> anyhow::Result<Self> {
        let mut authorization = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| anyhow::anyhow!("the token has characters a header cannot carry"))?;
        authorization.set_sensitive(true);
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            http,
            url: url.to_owned(),
            authorization,
            client_name,
            session: Mutex::new(None),
            next_id: AtomicU64::new(1),
        })
    }

    fn session_id(&self) -> Option<String> {
        self.session.lock().unwrap().clone()
    }

    pub(super) fn has_session(&self) -> bool {
        self.session.lock().unwrap().is_some()
    }

    /// Ends the session (DELETE), best effort: the server would otherwise
    /// keep it until its stream's grace runs out.
    pub(super) async fn close(&self) {
        let Some(id) = self.session_id() else { return };
        let _ = self
            .http
            .delete(&self.url)
            .timeout(Duration::from_secs(2))
            .header(AUTHORIZATION, self.authorization.clone())
            .header(SESSION_HEADER, id)
            .header(PROTOCOL_HEADER, PROTOCOL_VERSION)
            .send()
            .await;
        self.forget_session();
    }

    /// Forgets the session (the next call must initialize).
    pub(super) fn forget_session(&self) {
        *self.session.lock().unwrap() = None;
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.url)
            .timeout(REQUEST_TIMEOUT)
            .header(AUTHORIZATION, self.authorization.clone())
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(id) = self.session_id() {
            request = request
                .header(SESSION_HEADER, id)
                .header(PROTOCOL_HEADER, PROTOCOL_VERSION);
        }
        request
    }

    /// Opens a new session: `initialize`, then `notifications/initialized`.
    pub(super) async fn initialize(&self) -> Result<(), McpError> {
        self.forget_session();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({
            "jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": self.client_name, "version": env!("CARGO_PKG_VERSION")}
            }
        });
        let response = self.post(&body).send().await.map_err(away)?;
        let response = check_status(response)?;
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| McpError::Refused("initialize answered without a session id".into()))?;
        let answer = read_json(response).await?;
        rpc_result(answer)?;
        *self.session.lock().unwrap() = Some(session);
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = self.post(&initialized).send().await.map_err(away)?;
        check_status(response)?;
        Ok(())
    }

    /// One JSON-RPC request on the session; its `result`.
    pub(super) async fn request(&self, method: &str, params: Value) -> Result<Value, McpError> {
        if self.session_id().is_none() {
            return Err(McpError::SessionGone);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let response = self.post(&body).send().await.map_err(away)?;
        let response = check_status(response)?;
        rpc_result(read_json(response).await?)
    }

    /// `tools/call`: the tool's `structuredContent`, or its error.
    pub(super) async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, McpError> {
        let result = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            let message = result
                .pointer("/structuredContent/error/message")
                .and_then(Value::as_str)
                .unwrap_or("the tool failed");
            return Err(McpError::Rpc(format!("{name}: {message}")));
        }
        Ok(result
            .get("structuredContent")
            .cloned()
            .unwrap_or(Value::Null))
    }

    /// The session's notification stream (GET): the response whose body is
    /// the SSE stream.
    pub(super) async fn open_stream(&self) -> Result<reqwest::Response, McpError> {
        let Some(id) = self.session_id() else {
            return Err(McpError::SessionGone);
        };
        let response = self
            .http
            .get(&self.url)
            .header(AUTHORIZATION, self.authorization.clone())
            .header(ACCEPT, "text/event-stream")
            .header(SESSION_HEADER, id)
            .header(PROTOCOL_HEADER, PROTOCOL_VERSION)
            .send()
            .await
            .map_err(away)?;
        check_status(response)
    }
}

/// A transport failure: the server is away. The URL (never the token) is
/// in reqwest's message; keep only its kind.
fn away(error: reqwest::Error) -> McpError {
    let kind = if error.is_connect() {
        "connection refused or unreachable"
    } else if error.is_timeout() {
        "timed out"
    } else {
        "connection failed"
    };
    McpError::Away(kind.to_owned())
}

fn check_status(response: reqwest::Response) -> Result<reqwest::Response, McpError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    Err(match status {
        StatusCode::NOT_FOUND => McpError::SessionGone,
        StatusCode::UNAUTHORIZED => McpError::Refused(
            "the server refused the token (401): is it revoked or expired?".into(),
        ),
        StatusCode::FORBIDDEN => McpError::Refused(
            "the server refused the token for this URL (403): it is another endpoint's".into(),
        ),
        s if s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS => {
            McpError::Away(format!("HTTP {}", s.as_u16()))
        }
        s => McpError::Refused(format!("the server answered HTTP {}", s.as_u16())),
    })
}

/// A POST's answer: JSON, or (a server that streams its answer) the first
/// SSE `message` event's data.
async fn read_json(response: reqwest::Response) -> Result<Value, McpError> {
    let is_sse = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let bytes = response.bytes().await.map_err(away)?;
    let text = if is_sse {
        let mut parser = super::sse::SseParser::new();
        let mut events = parser.feed(&bytes);
        events.extend(parser.feed(b"\n\n"));
        events
            .into_iter()
            .find(|e| e.event == "message")
            .map(|e| e.data)
            .unwrap_or_default()
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    };
    serde_json::from_str(&text)
        .map_err(|_| McpError::Refused("the server's answer is not JSON-RPC".into()))
}

fn rpc_result(answer: Value) -> Result<Value, McpError> {
    if let Some(error) = answer.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("JSON-RPC error");
        return Err(McpError::Rpc(message.to_owned()));
    }
    Ok(answer.get("result").cloned().unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_results_and_errors() {
        assert_eq!(
            rpc_result(json!({"jsonrpc": "2.0", "id": 1, "result": {"a": 1}})).unwrap(),
            json!({"a": 1})
        );
        assert!(matches!(
            rpc_result(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}})),
            Err(McpError::Rpc(m)) if m == "nope"
        ));
    }
}
