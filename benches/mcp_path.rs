//! The MCP request path alone (issue 47): what the server spends per request
//! on HTTP, authentication, the session, JSON-RPC and a tool's dispatch,
//! without the store's work. B2 measures the whole loop, whose CPU is mostly
//! SQLite's and the kernel's; this isolates the rest, so a change to the
//! path is measured above the store's noise.
//!
//! Against the release binary (`CARGO_BIN_EXE_switchboard`) on a fresh
//! SQLite file, `MP_CONCURRENCY` lean agents (as B2's: one keep-alive
//! connection and one MCP session each, JSON-RPC by hand) send one kind of
//! request in a loop for `MP_SECONDS`, after a second of warm-up, for each
//! of `MP_VERBS`:
//!
//! - `ping`: JSON-RPC `ping` (transport, authentication from the cache,
//!   the liveness stamp at most once a second, the session, the envelope);
//! - `lease`: `tools/call get_default_lease` (the same, plus a tool's
//!   argument parsing, dispatch and result; it reads the authenticated
//!   endpoint, not the database).
//!
//! Prints per verb: requests/s and the server's CPU per request (from
//! `/proc/<pid>/stat`). Configuration: `MP_SECONDS` (default 10),
//! `MP_CONCURRENCY` (default 4), `MP_VERBS` (default `ping,lease`).

#[path = "common/host.rs"]
mod host;
#[path = "common/server.rs"]
mod server;
#[path = "common/streams.rs"]
mod streams;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use server::ServerProcess;
use streams::Endpoint;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// A lean agent, as B2's: one keep-alive connection and one MCP session.
struct Agent {
    http: reqwest::Client,
    endpoint: Endpoint,
    session: String,
    next_id: u64,
}

impl Agent {
    async fn connect(endpoint: &Endpoint) -> Result<Self> {
        let http = streams::http_client(1)?;
        let session = streams::open_session(&http, endpoint, "mcp-path").await?;
        Ok(Self {
            http,
            endpoint: endpoint.clone(),
            session,
            next_id: 1,
        })
    }

    /// One request of `verb`; fails unless it is answered with a result.
    async fn send(&mut self, verb: &str) -> Result<()> {
        self.next_id += 1;
        let id = self.next_id;
        let body = match verb {
            "ping" => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
            _ => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"get_default_lease","arguments":{{}}}}}}"#
            ),
        };
        let resp = self
            .http
            .post(&self.endpoint.mcp_url)
            .header("Authorization", &self.endpoint.authorization)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &self.session)
            .body(body)
            .send()
            .await?;
        let status = resp.status();
        let bytes = resp.bytes().await?;
        ensure!(status == 200, "{verb}: HTTP {status}");
        let v: Value = serde_json::from_slice(&bytes)?;
        ensure!(
            v.get("result").is_some() && v["result"].get("isError") != Some(&Value::Bool(true)),
            "{verb}: {v}"
        );
        Ok(())
    }
}

async fn measure(server: &ServerProcess, agents: Vec<Agent>, verb: &str, secs: u64) -> Result<()> {
    let tck = host::clock_ticks_per_sec();
    let pid = server.pid().to_string();
    let done = Arc::new(AtomicU64::new(0));
    let counting = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for mut agent in agents {
        let (done, counting, stop, verb) = (
            done.clone(),
            counting.clone(),
            stop.clone(),
            verb.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                agent.send(&verb).await?;
                if counting.load(Ordering::Relaxed) {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
            anyhow::Ok(())
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ticks0 = host::process_ticks(&pid).context("server ticks")?;
    let t0 = Instant::now();
    counting.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    counting.store(false, Ordering::Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    let ticks1 = host::process_ticks(&pid).context("server ticks")?;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await??;
    }
    let n = done.load(Ordering::Relaxed).max(1) as f64;
    let cpu = (ticks1 - ticks0) as f64 / tck;
    println!(
        "MCP path {verb} c={}: {:.0} requests/s, server {:.1} µs/request",
        env_or("MP_CONCURRENCY", 4usize),
        n / elapsed,
        cpu * 1e6 / n
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let secs = env_or("MP_SECONDS", 10u64);
    let conc = env_or("MP_CONCURRENCY", 4usize);
    let verbs = std::env::var("MP_VERBS").unwrap_or_else(|_| "ping,lease".into());
    let dir = tempfile::tempdir()?;
    let database = dir.path().join("mcp-path.db").display().to_string();
    let server = ServerProcess::start(&database, dir.path())?;
    let outcome = async {
        let http = streams::http_client(1)?;
        let endpoint = streams::vend(&http, &server.addr, &server.admin_token, "mcp-path").await?;
        for verb in verbs.split(',').map(str::trim) {
            let mut agents = Vec::new();
            for _ in 0..conc {
                agents.push(Agent::connect(&endpoint).await?);
            }
            measure(&server, agents, verb, secs).await?;
        }
        Ok(())
    }
    .await;
    server.stop();
    outcome
}
