//! Shared by the MCP end-to-end tests (`mcp::transport`, `mcp::interop`,
//! `mcp::doorbells`, `mcp::presence`):
//! the server in process on a temp SQLite file (`support::server::InProcess`),
//! the human REST API to set things up, and a small raw MCP client (reqwest,
//! JSON-RPC by hand).
#![allow(dead_code)]

pub mod listener;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

pub use super::server::BIN;
use super::server::{InProcess, apply_flag};

/// Generous rates so only the test that wants a 429 sees one.
pub const FAST: [&str; 6] = [
    "--mcp-rate",
    "1000",
    "--api-write-rate",
    "1000",
    "--api-read-rate",
    "1000",
];

/// The server in process on a fresh SQLite file, with the first human's
/// admin token.
pub struct Server {
    _server: InProcess,
    pub addr: String,
    pub admin_token: String,
    pub db: PathBuf,
    pub http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Server {
    /// What `serve --listen 127.0.0.1:0` with [`FAST`] rates and `extra`
    /// flags would run (a rate flag in `extra` replaces the fast one), in
    /// process: `extra` takes the `serve` flags that [`apply_flag`] maps.
    pub fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("switchboard.db");
        let mut config = InProcess::config(&db);
        for pair in FAST
            .chunks(2)
            .filter(|pair| !extra.contains(&pair[0]))
            .chain(extra.chunks(2))
        {
            apply_flag(&mut config, pair);
        }
        let server = InProcess::start(config);
        Server {
            addr: server.addr.to_string(),
            admin_token: server.admin_token.clone(),
            db,
            http: client(),
            _server: server,
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// A human REST API call with `token`; panics unless the status is `expect`.
    pub async fn api_as(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        expect: u16,
    ) -> Value {
        let mut req = self
            .http
            .request(method.clone(), self.url(path))
            .bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("API request");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        assert_eq!(status, expect, "{method} {path}: {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    pub async fn api(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let expect = if method == reqwest::Method::POST {
            None
        } else {
            Some(200)
        };
        let mut req = self
            .http
            .request(method.clone(), self.url(path))
            .bearer_auth(&self.admin_token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("API request");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        match expect {
            Some(code) => assert_eq!(status, code, "{method} {path}: {text}"),
            None => assert!(
                (200..300).contains(&status),
                "{method} {path}: {status} {text}"
            ),
        }
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// Vends an endpoint for the admin human (`body` as for POST /api/v1/endpoints).
    pub async fn vend(&self, body: Value) -> Vended {
        self.vend_as(&self.admin_token.clone(), body).await
    }

    pub async fn vend_as(&self, token: &str, body: Value) -> Vended {
        let v = self
            .api_as(
                token,
                reqwest::Method::POST,
                "/api/v1/endpoints",
                Some(body),
                201,
            )
            .await;
        Vended::from_view(&v)
    }

    /// Pushes a todo; returns its id.
    pub async fn push(&self, slug: &str, title: &str) -> String {
        self.push_as(&self.admin_token.clone(), slug, title).await
    }

    pub async fn push_as(&self, token: &str, slug: &str, title: &str) -> String {
        let v = self
            .api_as(
                token,
                reqwest::Method::POST,
                &format!("/api/v1/endpoints/{slug}/todos"),
                Some(json!({"title": title, "payload": {"title": title}})),
                201,
            )
            .await;
        v["id"].as_str().expect("todo id").to_owned()
    }

    pub async fn endpoint(&self, slug: &str) -> Value {
        self.api(
            reqwest::Method::GET,
            &format!("/api/v1/endpoints/{slug}"),
            None,
        )
        .await
    }

    pub async fn todo(&self, id: &str) -> Value {
        self.api(reqwest::Method::GET, &format!("/api/v1/todos/{id}"), None)
            .await
    }

    pub async fn revoke(&self, slug: &str) {
        self.api(
            reqwest::Method::POST,
            &format!("/api/v1/endpoints/{slug}/revoke"),
            None,
        )
        .await;
    }

    /// A second human with an API token, made with `switchboard admin` on
    /// the server's own database file.
    pub fn second_human(&self, name: &str) -> String {
        let db = self.db.to_str().unwrap();
        let out = Command::new(BIN)
            .args(["admin", "human", "create", name, "--database", db, "--json"])
            .env_remove("SWITCHBOARD_DATABASE_URL")
            .output()
            .expect("run switchboard admin human create");
        assert!(out.status.success(), "admin human create: {out:?}");
        let out = Command::new(BIN)
            .args(["admin", "token", "create", name, "--database", db, "--json"])
            .env_remove("SWITCHBOARD_DATABASE_URL")
            .output()
            .expect("run switchboard admin token create");
        assert!(out.status.success(), "admin token create: {out:?}");
        let view: Value = serde_json::from_slice(&out.stdout).expect("token JSON");
        view["token"].as_str().expect("token").to_owned()
    }

    /// A raw MCP client for an endpoint.
    pub fn mcp(&self, vended: &Vended) -> Mcp {
        Mcp {
            http: self.http.clone(),
            url: vended.mcp_url.clone(),
            authorization: vended.authorization.clone(),
        }
    }
}

/// Loopback only: never through a proxy from the environment.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// What a vend returned, read the way Claude Code reads `.mcp.json`.
#[derive(Debug, Clone)]
pub struct Vended {
    pub id: String,
    pub slug: String,
    pub token: String,
    pub mcp_url: String,
    /// The `Authorization` header a client sends (`Bearer <token>`).
    pub authorization: String,
}

impl Vended {
    fn from_view(v: &Value) -> Vended {
        let servers = v["mcp_json"]["mcpServers"]
            .as_object()
            .expect("mcp_json.mcpServers");
        assert_eq!(servers.len(), 1, "one server per vend: {v}");
        let (key, server) = servers.iter().next().unwrap();
        assert_eq!(
            key,
            v["server_name"].as_str().unwrap(),
            "keyed by its server name"
        );
        assert_eq!(server["type"], "http", "Claude Code's http transport: {v}");
        let token = v["token"].as_str().unwrap().to_owned();
        // The block is safe to commit: the token comes from the environment.
        let env = v["client"]["token_env"].as_str().expect("client.token_env");
        assert_eq!(
            server["headers"]["Authorization"],
            format!("Bearer ${{{env}}}"),
            "{v}"
        );
        assert!(
            !v["mcp_json"].to_string().contains(&token),
            "no literal token"
        );
        assert_eq!(v["client"]["export"], format!("export {env}='{token}'"));
        let authorization = format!("Bearer {token}");
        let mcp_url = server["url"].as_str().unwrap().to_owned();
        assert_eq!(mcp_url, v["mcp_url"].as_str().unwrap());
        Vended {
            id: v["id"].as_str().unwrap().to_owned(),
            slug: v["slug"].as_str().unwrap().to_owned(),
            token,
            mcp_url,
            authorization,
        }
    }
}

/// One HTTP answer, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub async fn read(resp: reqwest::Response) -> Answer {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.expect("body").to_vec();
        Answer {
            status,
            headers,
            body,
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Every MCP response carries the security headers.
    pub fn assert_secure(&self) -> &Self {
        assert_eq!(
            self.header("x-content-type-options"),
            Some("nosniff"),
            "{}: {:?}",
            self.status,
            self.headers
        );
        assert_eq!(
            self.header("cache-control"),
            Some("no-store"),
            "{}: {:?}",
            self.status,
            self.headers
        );
        self
    }

    pub fn expect(&self, status: u16) -> &Self {
        assert_eq!(self.status, status, "{}", self.text());
        self.assert_secure()
    }
}

pub fn initialize_body(id: i64) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "1"}
        }
    })
}

/// A raw MCP client: POST/GET/DELETE with the endpoint's bearer header.
#[derive(Clone)]
pub struct Mcp {
    pub http: reqwest::Client,
    pub url: String,
    pub authorization: String,
}

impl Mcp {
    pub fn with_authorization(&self, authorization: &str) -> Mcp {
        Mcp {
            authorization: authorization.to_owned(),
            ..self.clone()
        }
    }

    pub fn at(&self, url: &str) -> Mcp {
        Mcp {
            url: url.to_owned(),
            ..self.clone()
        }
    }

    pub fn request(
        &self,
        method: reqwest::Method,
        session: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut req = self
            .http
            .request(method, &self.url)
            .header("Authorization", &self.authorization)
            .header("Accept", "application/json, text/event-stream");
        if let Some(id) = session {
            req = req.header("Mcp-Session-Id", id);
        }
        req
    }

    pub async fn post_raw(&self, session: Option<&str>, body: impl Into<reqwest::Body>) -> Answer {
        let resp = self
            .request(reqwest::Method::POST, session)
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .expect("POST");
        Answer::read(resp).await
    }

    pub async fn post(&self, session: Option<&str>, body: &Value) -> Answer {
        self.post_raw(session, body.to_string()).await
    }

    /// `initialize` + `notifications/initialized`; returns the session id.
    pub async fn initialize(&self) -> String {
        let answer = self.post(None, &initialize_body(0)).await;
        answer.expect(200);
        let session = answer
            .header("mcp-session-id")
            .expect("Mcp-Session-Id on initialize")
            .to_owned();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(Some(&session), &note).await.expect(202);
        session
    }

    /// A JSON-RPC request on a session; the whole answer.
    pub async fn rpc(&self, session: &str, id: i64, method: &str, params: Value) -> Answer {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.post(Some(session), &body).await
    }

    /// `tools/call`; the whole answer (compare bytes with it).
    pub async fn call_raw(&self, session: &str, name: &str, arguments: Value) -> Answer {
        self.rpc(
            session,
            7,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .await
    }

    /// `tools/call` expected to succeed at the protocol level; returns `result`.
    pub async fn call(&self, session: &str, name: &str, arguments: Value) -> Value {
        let answer = self.call_raw(session, name, arguments).await;
        answer.expect(200);
        let v = answer.json();
        assert!(v.get("error").is_none(), "protocol error: {v}");
        v["result"].clone()
    }

    /// A successful tool result's `structuredContent`.
    pub async fn call_ok(&self, session: &str, name: &str, arguments: Value) -> Value {
        let result = self.call(session, name, arguments).await;
        assert_ne!(result["isError"], true, "{name} failed: {result}");
        result["structuredContent"].clone()
    }

    /// A tool error's `(code, message)`.
    pub async fn call_err(&self, session: &str, name: &str, arguments: Value) -> (String, String) {
        let result = self.call(session, name, arguments).await;
        assert_eq!(result["isError"], true, "{name} should fail: {result}");
        let e = &result["structuredContent"]["error"];
        let (code, message) = (
            e["code"].as_str().unwrap().to_owned(),
            e["message"].as_str().unwrap().to_owned(),
        );
        assert_eq!(result["content"][0]["text"], format!("{code}: {message}"));
        (code, message)
    }

    /// Opens the session's GET notification stream.
    pub async fn open_stream(&self, session: &str) -> reqwest::Response {
        let resp = self
            .http
            .get(&self.url)
            .header("Authorization", &self.authorization)
            .header("Accept", "text/event-stream")
            .header("Mcp-Session-Id", session)
            .timeout(Duration::from_secs(600))
            .send()
            .await
            .expect("GET");
        assert_eq!(resp.status().as_u16(), 200, "GET stream");
        assert_eq!(
            resp.headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("text/event-stream")
        );
        resp
    }

    pub async fn delete(&self, session: Option<&str>) -> Answer {
        let resp = self
            .request(reqwest::Method::DELETE, session)
            .send()
            .await
            .expect("DELETE");
        Answer::read(resp).await
    }
}

/// Reads a stream until it ends; `Err` with what arrived if it does not end
/// within `within`.
pub async fn stream_ends(resp: &mut reqwest::Response, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    let mut seen = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, resp.chunk()).await {
            Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(Ok(None)) | Ok(Err(_)) => return Ok(()),
            Err(_) => return Err(seen),
        }
    }
}

/// Reads SSE `data:` payloads from a stream until one satisfies `want`, or
/// `within` passes.
pub async fn next_event(
    resp: &mut reqwest::Response,
    within: Duration,
    want: impl Fn(&Value) -> bool,
) -> Option<Value> {
    let deadline = Instant::now() + within;
    let mut buffered = String::new();
    loop {
        while let Some(end) = buffered.find("\n\n") {
            let event: String = buffered.drain(..end + 2).collect();
            for line in event.lines() {
                if let Some(data) = line.strip_prefix("data:")
                    && let Ok(v) = serde_json::from_str::<Value>(data.trim_start())
                    && want(&v)
                {
                    return Some(v);
                }
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, resp.chunk()).await {
            Ok(Ok(Some(chunk))) => buffered.push_str(&String::from_utf8_lossy(&chunk)),
            _ => return None,
        }
    }
}

/// A raw HTTP/1.1 exchange over a plain socket (for what reqwest will not
/// send: a chosen `Host`, a chunked body). Returns the status and the whole
/// response text. `body_chunks` are sent with chunked transfer encoding.
pub fn raw_http(addr: &str, head: &str, body_chunks: Option<Vec<Vec<u8>>>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let head = head.to_owned();
    // Write from another thread: the server may answer (413) before it has
    // read everything, and reading must not wait for the writes.
    let writing = std::thread::spawn(move || {
        let mut out = head.into_bytes();
        match body_chunks {
            None => {
                let _ = writer.write_all(&out);
            }
            Some(chunks) => {
                let _ = writer.write_all(&out);
                for chunk in chunks {
                    out = format!("{:x}\r\n", chunk.len()).into_bytes();
                    out.extend_from_slice(&chunk);
                    out.extend_from_slice(b"\r\n");
                    if writer.write_all(&out).is_err() {
                        return;
                    }
                }
                let _ = writer.write_all(b"0\r\n\r\n");
            }
        }
        let _ = writer.flush();
    });
    let mut response = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                response.extend_from_slice(&buf[..n]);
                if complete_response(&response) {
                    break;
                }
            }
            Err(e) => {
                assert!(!response.is_empty(), "no response: {e}");
                break;
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = writing.join();
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    (status, text)
}

/// Whether `response` holds a whole response with a Content-Length body.
fn complete_response(response: &[u8]) -> bool {
    let text = String::from_utf8_lossy(response);
    let Some(end) = text.find("\r\n\r\n") else {
        return false;
    };
    let length = text[..end].lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())?
    });
    match length {
        Some(n) => response.len() >= end + 4 + n,
        None => false,
    }
}
