//! B7 (`09-quality.md`, raised targets): wake latency, against the real
//! release binary on one instance (SQLite, the embedded default).
//!
//! - **Runner**: push (the start of a human's API push) → the runner's
//!   command started. One endpoint; `switchboard work <its MCP URL> --
//!   bash -c …` where the command connects to a loopback listener of this
//!   bench and writes `$SWITCHBOARD_TODO_ID` as its first act (bash's own
//!   `/dev/tcp`, no other process), stamped here when read. The bench then
//!   cancels the todo through the API and answers the command, which exits;
//!   the next push starts once the command's connection closed and the
//!   runner had `B7_SETTLE_MS` to reap it, so every push meets an idle
//!   runner (no coalescing).
//! - **Hook**: push → the notify hook's request received. One endpoint with
//!   one hook at a loopback receiver of this bench (axum), which stamps the
//!   request when its handler runs, checks the body's `todo_id`, and answers
//!   204. The server runs with `--allow-private-hooks` (loopback targets).
//! - **Burst**: `B7_BURST_ENDPOINTS` endpoints (1 000), each with a hook at
//!   the receiver, and `B7_BURST_TODOS` todos (10 000) pushed round-robin
//!   over them with 16 pushes in flight: deliveries per second (first push
//!   → last delivery) and the server's CPU per todo, side by side with the
//!   same burst on as many endpoints **without** hooks in the same run (the
//!   baseline: pushes that ring nobody), so the difference is what the
//!   deliveries cost.
//!
//! Correctness, checked at the end of each part: every push was heard
//! exactly once (runner: its id read once; hooks: one delivery per todo, for
//! the right endpoint, signed headers present), nothing lost, nothing for a
//! todo not pushed. Exits non-zero when a check fails.
//!
//! Environment: `B7_PUSHES` (500 per latency part), `B7_INTERVAL_MS` (pacing
//! of the hook pushes, default 10), `B7_SETTLE_MS` (default 20),
//! `B7_WAIT_MS` (how long to wait for one wake, 5 000), `B7_BURST_ENDPOINTS`
//! (1 000), `B7_BURST_TODOS` (10 000; 0 skips the burst), `B7_PARTS`
//! (`runner,hook,burst`), `B7_RESULTS` (also write the Markdown report there).

#[path = "common/host.rs"]
mod host;
#[path = "common/server.rs"]
mod server;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use host::{clock_ticks_per_sec, process_ticks};
use serde_json::{Value, json};
use server::ServerProcess;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::{Mutex, mpsc};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

#[derive(Debug, Clone)]
struct Config {
    pushes: usize,
    interval: Duration,
    settle: Duration,
    wait: Duration,
    burst_endpoints: usize,
    burst_todos: usize,
    parts: Vec<String>,
    results: Option<String>,
}

fn env_num<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| anyhow!("{name}={v:?} is not a number")),
        _ => Ok(default),
    }
}

impl Config {
    fn from_env() -> Result<Self> {
        Ok(Self {
            pushes: env_num("B7_PUSHES", 500)?,
            interval: Duration::from_millis(env_num("B7_INTERVAL_MS", 10)?),
            settle: Duration::from_millis(env_num("B7_SETTLE_MS", 20)?),
            wait: Duration::from_millis(env_num("B7_WAIT_MS", 5_000)?),
            burst_endpoints: env_num("B7_BURST_ENDPOINTS", 1_000)?,
            burst_todos: env_num("B7_BURST_TODOS", 10_000)?,
            parts: std::env::var("B7_PARTS")
                .unwrap_or_else(|_| "runner,hook,burst".into())
                .split(',')
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty())
                .collect(),
            results: std::env::var("B7_RESULTS").ok().filter(|p| !p.is_empty()),
        })
    }

    fn wants(&self, part: &str) -> bool {
        self.parts.iter().any(|p| p == part)
    }
}

// ---------------------------------------------------------------------------
// The API, as a human's client.

struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    fn new(addr: &str, token: &str, pool: usize) -> Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(pool)
                .timeout(Duration::from_secs(30))
                .build()?,
            base: format!("http://{addr}/api/v1"),
            token: token.to_owned(),
        })
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req
            .send()
            .await
            .with_context(|| format!("{method} {path}"))?;
        let status = resp.status();
        let text = resp.text().await?;
        ensure!(status.is_success(), "{method} {path}: {status} {text}");
        Ok(if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)?
        })
    }

    async fn vend(&self, agent: &str) -> Result<(String, String, String)> {
        let v = self
            .call(
                reqwest::Method::POST,
                "/endpoints",
                Some(json!({"agent": agent})),
            )
            .await?;
        let field = |k: &str| {
            v[k].as_str()
                .map(str::to_owned)
                .ok_or_else(|| anyhow!("vend: no {k}: {v}"))
        };
        Ok((field("slug")?, field("token")?, field("mcp_url")?))
    }

    async fn push(&self, slug: &str, title: &str) -> Result<String> {
        let v = self
            .call(
                reqwest::Method::POST,
                &format!("/endpoints/{slug}/todos"),
                Some(json!({"title": title})),
            )
            .await?;
        v["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("push: no id: {v}"))
    }

    async fn add_hook(&self, slug: &str, url: &str) -> Result<()> {
        self.call(
            reqwest::Method::POST,
            &format!("/endpoints/{slug}/hooks"),
            Some(json!({"url": url})),
        )
        .await
        .map(drop)
    }
}

// ---------------------------------------------------------------------------
// Figures.

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

/// One latency part's outcome: microseconds per wake, sorted.
struct Latencies {
    what: &'static str,
    goal_ms: f64,
    micros: Vec<u64>,
    server_cpu_us_per_push: f64,
}

impl Latencies {
    fn row(&self) -> String {
        let p99 = pct(&self.micros, 99.0);
        format!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | ≤ {:.0} ms: {} |",
            self.what,
            self.micros.len(),
            pct(&self.micros, 50.0),
            pct(&self.micros, 90.0),
            p99,
            pct(&self.micros, 100.0),
            self.server_cpu_us_per_push,
            self.goal_ms,
            if p99 <= self.goal_ms { "PASS" } else { "FAIL" }
        )
    }
}

fn cpu_us(pid: u32, before: u64, n: usize) -> f64 {
    let after = process_ticks(&pid.to_string()).unwrap_or(before);
    (after.saturating_sub(before)) as f64 / clock_ticks_per_sec() * 1e6 / n.max(1) as f64
}

// ---------------------------------------------------------------------------
// The runner part.

/// A `switchboard work` child, killed on drop.
struct Runner(Child);

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn runner_part(
    config: &Config,
    server: &ServerProcess,
    api: &Api,
    dir: &std::path::Path,
) -> Result<Latencies> {
    let (slug, token, mcp_url) = api.vend("b7-runner").await?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    // The command's first act is to say which todo it was started for; it
    // then waits for the bench's word, so the todo is settled before it exits.
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port}; printf '%s\\n' \"${{SWITCHBOARD_TODO_ID:--}}\" >&3; \
         read -r _ <&3"
    );
    let _runner = Runner(
        Command::new(BIN)
            .args(["work", &mcp_url, "--", "bash", "-c", &script])
            .env("SWITCHBOARD_TOKEN", &token)
            .env("SWITCHBOARD_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // One line per run: kept out of the report, shown on failure.
            .stderr(std::fs::File::create(dir.join("runner.log"))?)
            .spawn()
            .context("starting switchboard work")?,
    );
    wait_for_runner(api, &slug).await?;

    let pid = server.pid();
    let before = process_ticks(&pid.to_string()).unwrap_or(0);
    let mut micros = Vec::with_capacity(config.pushes);
    let mut seen: HashMap<String, usize> = HashMap::new();
    for i in 0..config.pushes {
        let started = Instant::now();
        let id = api.push(&slug, &format!("wake {i}")).await?;
        let (mut conn, _) = tokio::time::timeout(config.wait, listener.accept())
            .await
            .map_err(|_| {
                anyhow!(
                    "push {i} ({id}): no command started within {:?}",
                    config.wait
                )
            })??;
        let mut line = String::new();
        let mut reader = BufReader::new(&mut conn);
        tokio::time::timeout(config.wait, reader.read_line(&mut line))
            .await
            .map_err(|_| anyhow!("push {i}: the command said nothing"))??;
        let at = Instant::now();
        let named = line.trim().to_owned();
        *seen.entry(named.clone()).or_default() += 1;
        ensure!(
            named == id,
            "push {i}: the command was started for {named:?}, not {id}"
        );
        micros.push((at - started).as_micros() as u64);
        api.call(reqwest::Method::POST, &format!("/todos/{id}/cancel"), None)
            .await?;
        conn.write_all(b"ok\n").await?;
        // Its connection closes when bash exits; then the runner reaps it.
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(
            config.wait,
            tokio::io::AsyncReadExt::read_to_end(&mut conn, &mut rest),
        )
        .await;
        tokio::time::sleep(config.settle).await;
    }
    let server_cpu = cpu_us(pid, before, config.pushes);
    // No run for anything else: a late extra run would connect now.
    if let Ok(Ok((mut extra, _))) =
        tokio::time::timeout(Duration::from_millis(500), listener.accept()).await
    {
        let mut line = String::new();
        let _ = BufReader::new(&mut extra).read_line(&mut line).await;
        bail!(
            "an extra run started after the last push (for {:?})",
            line.trim()
        );
    }
    ensure!(seen.values().all(|&n| n == 1), "a todo started two runs");
    micros.sort_unstable();
    Ok(Latencies {
        what: "push → runner's command started",
        goal_ms: 100.0,
        micros,
        server_cpu_us_per_push: server_cpu,
    })
}

/// Waits until the endpoint shows a streaming runner session.
async fn wait_for_runner(api: &Api, slug: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let e = api
            .call(reqwest::Method::GET, &format!("/endpoints/{slug}"), None)
            .await?;
        let runner_streams = e["sessions"]["list"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["hearer"] == "runner" && s["streaming"] == true);
        if runner_streams {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "the runner never connected: {e}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------
// The hook receiver.

/// One hook request as received.
#[derive(Debug)]
struct Delivery {
    at: Instant,
    endpoint_path: String,
    body: Value,
    signed: bool,
}

async fn receiver() -> Result<(String, mpsc::UnboundedReceiver<Delivery>)> {
    use axum::extract::{Path, State};
    use axum::http::{HeaderMap, StatusCode};
    let (tx, rx) = mpsc::unbounded_channel::<Delivery>();
    let app = axum::Router::new()
        .route(
            "/hook/{slug}",
            axum::routing::post(
                |State(tx): State<mpsc::UnboundedSender<Delivery>>,
                 Path(slug): Path<String>,
                 headers: HeaderMap,
                 body: axum::body::Bytes| async move {
                    let at = Instant::now();
                    let signed = ["webhook-id", "webhook-timestamp", "webhook-signature"]
                        .iter()
                        .all(|h| headers.contains_key(*h));
                    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let _ = tx.send(Delivery {
                        at,
                        endpoint_path: slug,
                        body,
                        signed,
                    });
                    StatusCode::NO_CONTENT
                },
            ),
        )
        .with_state(tx);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://{addr}"), rx))
}

async fn hook_part(config: &Config, server: &ServerProcess, api: &Api) -> Result<Latencies> {
    let (base, mut deliveries) = receiver().await?;
    let (slug, _, _) = api.vend("b7-hook").await?;
    api.add_hook(&slug, &format!("{base}/hook/{slug}")).await?;
    let pid = server.pid();
    let before = process_ticks(&pid.to_string()).unwrap_or(0);
    let mut micros = Vec::with_capacity(config.pushes);
    for i in 0..config.pushes {
        let started = Instant::now();
        let id = api.push(&slug, &format!("hook {i}")).await?;
        let delivery = loop {
            let d = tokio::time::timeout(config.wait, deliveries.recv())
                .await
                .map_err(|_| anyhow!("push {i} ({id}): no hook request within {:?}", config.wait))?
                .ok_or_else(|| anyhow!("the receiver stopped"))?;
            if d.body["type"] == "test" {
                continue;
            }
            break d;
        };
        ensure!(delivery.signed, "push {i}: an unsigned delivery");
        ensure!(
            delivery.body["todo_id"] == id.as_str() && delivery.endpoint_path == slug,
            "push {i}: a delivery for {} at {}, not {id}",
            delivery.body,
            delivery.endpoint_path
        );
        micros.push((delivery.at - started).as_micros() as u64);
        tokio::time::sleep(config.interval).await;
    }
    let server_cpu = cpu_us(pid, before, config.pushes);
    if let Ok(Some(extra)) =
        tokio::time::timeout(Duration::from_millis(500), deliveries.recv()).await
    {
        bail!("a delivery after the last push: {:?}", extra.body);
    }
    micros.sort_unstable();
    Ok(Latencies {
        what: "push → hook request received",
        goal_ms: 50.0,
        micros,
        server_cpu_us_per_push: server_cpu,
    })
}

// ---------------------------------------------------------------------------
// The burst.

struct Burst {
    hooks: bool,
    todos: usize,
    seconds: f64,
    server_cpu_us_per_todo: f64,
}

/// Vends `n` endpoints (100 per agent, 8 at a time), with a hook each when `base` is given.
async fn vend_many(
    api: &Arc<Api>,
    prefix: &str,
    n: usize,
    base: Option<&str>,
) -> Result<Vec<String>> {
    let slugs = Arc::new(Mutex::new(vec![String::new(); n]));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (api, slugs, next) = (api.clone(), slugs.clone(), next.clone());
        let (prefix, base) = (prefix.to_owned(), base.map(str::to_owned));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, anyhow::Error>(());
                }
                let (slug, _, _) = api.vend(&format!("{prefix}-{}", i / 100)).await?;
                if let Some(base) = &base {
                    api.add_hook(&slug, &format!("{base}/hook/{slug}")).await?;
                }
                slugs.lock().await[i] = slug;
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(Arc::try_unwrap(slugs)
        .map_err(|_| anyhow!("still shared"))?
        .into_inner())
}

async fn burst(
    config: &Config,
    server: &ServerProcess,
    api: &Arc<Api>,
    hooks: bool,
) -> Result<Burst> {
    let (base, mut deliveries) = receiver().await?;
    let prefix = if hooks {
        "b7-burst-hooked"
    } else {
        "b7-burst-bare"
    };
    let slugs = Arc::new(
        vend_many(
            api,
            prefix,
            config.burst_endpoints,
            hooks.then_some(base.as_str()),
        )
        .await?,
    );
    let n = config.burst_todos;
    let pid = server.pid();
    let before = process_ticks(&pid.to_string()).unwrap_or(0);
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let pushed = Arc::new(Mutex::new(HashMap::<String, String>::new()));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (api, slugs, next, pushed) = (api.clone(), slugs.clone(), next.clone(), pushed.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, anyhow::Error>(());
                }
                let slug = &slugs[i % slugs.len()];
                let id = api.push(slug, &format!("burst {i}")).await?;
                pushed.lock().await.insert(id, slug.clone());
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    let mut last = Instant::now();
    if hooks {
        let mut heard: HashMap<String, usize> = HashMap::new();
        let deadline = Instant::now() + Duration::from_secs(300);
        while heard.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            let d = tokio::time::timeout(left, deliveries.recv())
                .await
                .map_err(|_| anyhow!("burst: {} of {n} deliveries within 300 s", heard.len()))?
                .ok_or_else(|| anyhow!("the receiver stopped"))?;
            let id = d.body["todo_id"].as_str().unwrap_or("").to_owned();
            let pushed = pushed.lock().await;
            ensure!(
                pushed.get(&id) == Some(&d.endpoint_path),
                "burst: a delivery for a todo not pushed there: {} at {}",
                d.body,
                d.endpoint_path
            );
            *heard.entry(id).or_default() += 1;
            last = d.at;
        }
        ensure!(
            heard.values().all(|&c| c == 1),
            "burst: a todo delivered twice"
        );
        if let Ok(Some(extra)) =
            tokio::time::timeout(Duration::from_millis(500), deliveries.recv()).await
        {
            bail!("burst: an extra delivery: {:?}", extra.body);
        }
    }
    Ok(Burst {
        hooks,
        todos: n,
        seconds: (last - started).as_secs_f64(),
        server_cpu_us_per_todo: cpu_us(pid, before, n),
    })
}

// ---------------------------------------------------------------------------

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let config = Config::from_env()?;
    let dir = tempfile::tempdir()?;
    let database = dir.path().join("b7.db");
    let server = ServerProcess::start_with(
        database.to_str().unwrap(),
        dir.path(),
        &["--allow-private-hooks", "--max-connections", "4096"],
    )?;
    let api = Arc::new(Api::new(&server.addr, &server.admin_token, 32)?);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut report = String::new();
    writeln!(
        report,
        "B7 wake latency — one instance, SQLite (the embedded default), release binary, {cores} cores, \
         {} pushes per latency part\n",
        config.pushes
    )?;
    writeln!(
        report,
        "| wake | samples | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | server CPU µs/push | goal |\n|---|---:|---:|---:|---:|---:|---:|---|"
    )?;
    let mut failed = Vec::new();
    for part in ["runner", "hook"] {
        if !config.wants(part) {
            continue;
        }
        let outcome = if part == "runner" {
            runner_part(&config, &server, &api, dir.path())
                .await
                .inspect_err(|_| {
                    let log =
                        std::fs::read_to_string(dir.path().join("runner.log")).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(20).collect();
                    eprintln!(
                        "the runner's last lines (newest first):\n{}",
                        tail.join("\n")
                    );
                })
        } else {
            hook_part(&config, &server, &api).await
        };
        match outcome {
            Ok(lat) => {
                if pct(&lat.micros, 99.0) > lat.goal_ms {
                    failed.push(format!("{part}: p99 over the goal"));
                }
                writeln!(report, "{}", lat.row())?;
            }
            Err(e) => {
                writeln!(report, "| {part} | — | — | — | — | — | — | ERROR: {e:#} |")?;
                failed.push(format!("{part}: {e:#}"));
            }
        }
    }
    if config.wants("burst") && config.burst_todos > 0 {
        writeln!(
            report,
            "\nBurst: {} endpoints, {} todos pushed round-robin, 16 pushes in flight; the baseline \
             is the same burst on endpoints without hooks (pushes that ring nobody)\n",
            config.burst_endpoints, config.burst_todos
        )?;
        writeln!(
            report,
            "| burst | todos | first push → last delivery (s) | deliveries/s | server CPU µs/todo |\n|---|---:|---:|---:|---:|"
        )?;
        let mut cpu = Vec::new();
        for hooks in [false, true] {
            match burst(&config, &server, &api, hooks).await {
                Ok(b) => {
                    cpu.push(b.server_cpu_us_per_todo);
                    writeln!(
                        report,
                        "| {} | {} | {:.2} | {} | {:.0} |",
                        if b.hooks {
                            "with a hook per endpoint"
                        } else {
                            "baseline: no hooks (pushes only)"
                        },
                        b.todos,
                        b.seconds,
                        if b.hooks {
                            format!("{:.0}", b.todos as f64 / b.seconds)
                        } else {
                            "—".into()
                        },
                        b.server_cpu_us_per_todo
                    )?;
                }
                Err(e) => {
                    writeln!(
                        report,
                        "| {} | ERROR: {e:#} | | | |",
                        if hooks { "hooks" } else { "baseline" }
                    )?;
                    failed.push(format!("burst: {e:#}"));
                }
            }
        }
        if let [bare, hooked] = cpu[..] {
            writeln!(
                report,
                "\nServer CPU per hook delivery (with − baseline): {:.0} µs",
                hooked - bare
            )?;
        }
    }
    server.stop();
    print!("{report}");
    if let Some(path) = &config.results {
        std::fs::write(path, &report)?;
    }
    if !failed.is_empty() {
        bail!("B7 failed: {}", failed.join("; "));
    }
    Ok(())
}
