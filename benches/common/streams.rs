//! What the benchmarks that hold streaming MCP sessions share (B3, B4):
//! vending endpoints through the API, opening a session (`initialize` +
//! `notifications/initialized`) and its GET stream, each on raw HTTP/1.1
//! through reqwest, and running setup jobs a few at a time.
//! Included with `#[path = "common/streams.rs"] mod streams;`.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};

/// A vended endpoint, as a client of its MCP URL needs it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub slug: String,
    pub mcp_url: String,
    /// `Bearer <sbk_…>`.
    pub authorization: String,
}

/// For setup requests: keep-alive, `idle` idle connections kept (one per
/// setup job in flight), 30 s per request.
pub fn http_client(idle: usize) -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(idle)
        .timeout(Duration::from_secs(30))
        .build()?)
}

/// Streams: no overall timeout (a stream lives for the whole run), never
/// pooled (one connection each).
pub fn stream_client() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(0)
        .connect_timeout(Duration::from_secs(10))
        .build()?)
}

/// `POST /api/v1/endpoints` for `agent` with the admin token.
pub async fn vend(
    http: &reqwest::Client,
    addr: &str,
    admin_token: &str,
    agent: &str,
) -> Result<Endpoint> {
    let resp = http
        .post(format!("http://{addr}/api/v1/endpoints"))
        .bearer_auth(admin_token)
        .json(&json!({"agent": agent}))
        .send()
        .await?;
    let status = resp.status().as_u16();
    let v: Value = resp.json().await?;
    ensure!(status == 201, "vend: HTTP {status}: {v}");
    let token = v["token"].as_str().context("token")?;
    Ok(Endpoint {
        slug: v["endpoint"]["slug"]
            .as_str()
            .or_else(|| v["slug"].as_str())
            .context("slug")?
            .to_owned(),
        mcp_url: v["mcp_url"]
            .as_str()
            .or_else(|| v["endpoint"]["mcp_url"].as_str())
            .context("mcp_url")?
            .to_owned(),
        authorization: format!("Bearer {token}"),
    })
}

/// `initialize` (as client `client_name`) + `notifications/initialized`;
/// the session id.
pub async fn open_session(
    http: &reqwest::Client,
    ep: &Endpoint,
    client_name: &str,
) -> Result<String> {
    // The client name goes in as JSON, so any name is safe to pass.
    let initialize = format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":{},"version":"1"}}}}}}"#,
        Value::from(client_name)
    );
    let resp = http
        .post(&ep.mcp_url)
        .header("Authorization", &ep.authorization)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(initialize)
        .send()
        .await?;
    ensure!(resp.status().is_success(), "initialize: {}", resp.status());
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .context("Mcp-Session-Id")?
        .to_owned();
    let _ = resp.bytes().await?;
    let resp = http
        .post(&ep.mcp_url)
        .header("Authorization", &ep.authorization)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &session)
        .body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .send()
        .await?;
    let status = resp.status().as_u16();
    let _ = resp.bytes().await?;
    ensure!(status == 202, "notifications/initialized: {status}");
    Ok(session)
}

/// `DELETE` of the session.
pub async fn end_session(http: &reqwest::Client, ep: &Endpoint, session: &str) -> Result<()> {
    let resp = http
        .delete(&ep.mcp_url)
        .header("Authorization", &ep.authorization)
        .header("Mcp-Session-Id", session)
        .send()
        .await?;
    ensure!(
        resp.status().is_success(),
        "DELETE session: {}",
        resp.status()
    );
    Ok(())
}

/// Opens the session's GET stream; returns once the server answered 200
/// (the stream is registered before the answer is sent).
pub async fn open_stream(
    streams: &reqwest::Client,
    ep: &Endpoint,
    session: &str,
) -> Result<reqwest::Response> {
    let resp = streams
        .get(&ep.mcp_url)
        .header("Authorization", &ep.authorization)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", session)
        .send()
        .await?;
    ensure!(
        resp.status().as_u16() == 200,
        "GET stream: {}",
        resp.status()
    );
    Ok(resp)
}

/// Runs `job(i)` for i in 0..n, `concurrency` at a time; results in index
/// order.
pub async fn for_all<T, F, Fut>(n: usize, concurrency: usize, job: F) -> Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<T>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let job = Arc::new(job);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..concurrency.min(n) {
        let (next, job) = (next.clone(), job.clone());
        set.spawn(async move {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                out.push((i, job(i).await?));
            }
            Ok::<_, anyhow::Error>(out)
        });
    }
    let mut all = Vec::with_capacity(n);
    while let Some(joined) = set.join_next().await {
        all.extend(joined??);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, t)| t).collect())
}

/// The soft limit on open files of this process, from /proc/self/limits.
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}
