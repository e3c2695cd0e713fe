//! B2 (`09-quality.md`): the claim_next → complete loop end to end over MCP,
//! against the real release binary, on SQLite and on PostgreSQL, with 1, 4
//! and 16 concurrent agent clients.
//!
//! Each agent client is lean (raw HTTP/1.1 keep-alive through reqwest, one
//! connection and one MCP session of its own, JSON-RPC written by hand): it
//! `initialize`s, then loops `tools/call claim_next` → `tools/call complete`
//! with the returned id until the run's time is up. Every run starts from the
//! same state: a fresh database, a freshly started server
//! (`CARGO_BIN_EXE_switchboard`, i.e. `target/release/switchboard`), one
//! vended endpoint and `B2_PRELOAD` pending todos inserted with SQL before the
//! clock starts.
//!
//! Measured per run: loops/s; p50 and p99 of every call's latency (and p99 of
//! each verb); the CPU time per loop of the server process (from
//! `/proc/<pid>/stat`), of the PostgreSQL backends serving the bench
//! database, and of this load generator; and the other load on the host.
//! After each run the correctness check: no todo claimed twice (client side:
//! distinct ids; database: no `attempts_total > 1`), none lost (done ==
//! loops, nothing left claimed, every preloaded row still there).
//!
//! Configuration (environment): `B2_SECONDS` (default 20), `B2_REPEATS`
//! (default 3), `B2_CONCURRENCY` (default `1,4,16`), `B2_BACKENDS` (default
//! `sqlite,postgres`), `B2_PRELOAD` (default 1 000 000), `B2_RESULTS` (also
//! write the Markdown report there), `B2_FLOOR_BESIDE` (default 1: after
//! every PostgreSQL run at c = 4, the true floor of `common/pg_floor.rs` runs
//! as long at the same concurrency on a fresh database, and the 50 % target
//! is checked against those floors; `0` turns it off; the floor beside is
//! the pgbench floor of `common/peers.rs` when pgbench is installed, and the
//! target then 60 % (issue 47), else the true floor and 50 %),
//! `B2_PGBOSS` (default 1 when `bench/pgboss` is installed: after every
//! PostgreSQL run at c = 4 and 16, pg-boss runs `fetch → complete` as long
//! at the same concurrency on a fresh database, and B2 is held to 2× it),
//! `B2_FLOOR_PRELOAD`
//! (the floor's pending rows, default 300 000 or 5 000 per second of a run, whichever is more), `B2_FLOOR_FROM` (without
//! floors beside: a B1 report from the same `scripts/bench` run, whose `true
//! floor` medians are then the reference). PostgreSQL:
//! `SWITCHBOARD_BENCH_DATABASE_URL`, else `SWITCHBOARD_TEST_DATABASE_URL`; a
//! fresh database is created on that server for every run and dropped after
//! it. Without either, only SQLite runs.
//!
//! `B2_LOOP` picks the agents' loop: `two-calls` (the default, above),
//! `chained` (`claim_next` once, then `complete` with `next` — one call a
//! todo, which claims the next), or `both`, each cell's two loops one after
//! the other in the same sitting; the report names the loop of every row.
//!
//! After the runs, what one todo costs an agent's context: the response
//! bytes of `claim_next` + `complete` for a todo with a 15 064-byte payload
//! (target: the payload + 2 KiB at most; `context_bytes`).
//!
//! Exits non-zero when a correctness check fails, the preload ran dry or
//! the bytes per todo miss their target.

#[path = "common/host.rs"]
mod host;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/pg_floor.rs"]
mod pg_floor;
#[path = "common/server.rs"]
mod server;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail, ensure};
use host::{HostTicks, process_ticks};
use serde_json::{Value, json};
use sqlx::{Connection, Row};
use switchboard::testkit::ThrowawayDatabase;

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

/// The embedded default's target over MCP at c = 4 on 2 cores (09-quality.md
/// B2, raised by issue 47 from 3 000).
const SQLITE_LOOPS_TARGET: f64 = 8_000.0;

/// Pending todos, oldest first by `(created_at, id)`; ids shaped like the
/// store's. `$1` endpoint, `$2` base time, `$3` count. (As in B1.)
const PG_PRELOAD: &str = "INSERT INTO todos (id, endpoint_id, queue, title, state, max_attempts, \
       created_at, updated_at) \
     SELECT 'td_' || lpad(to_hex(i), 32, '0'), $1, 'inbox', 'bench todo ' || i, 'pending', 5, \
       $2 + i, $2 + i \
     FROM generate_series(1::bigint, $3::bigint) AS s(i)";

const SQLITE_PRELOAD: &str = "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $3) \
     INSERT INTO todos (id, endpoint_id, queue, title, state, max_attempts, created_at, updated_at) \
     SELECT printf('td_%032x', i), $1, 'inbox', 'bench todo ' || i, 'pending', 5, $2 + i, $2 + i \
     FROM s";

// ---------------------------------------------------------------------------
// Configuration.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "SQLite",
            Self::Postgres => "PostgreSQL",
        }
    }
}

/// How an agent client loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Loop {
    /// `claim_next` → `complete`: two calls a todo (the loop the targets
    /// were set for).
    TwoCalls,
    /// `complete` with `next`: one call a todo, the completion and the
    /// next claim in one commit on PostgreSQL (`docs/mcp.md`).
    Chained,
}

impl Loop {
    fn name(self) -> &'static str {
        match self {
            Self::TwoCalls => "claim_next → complete",
            Self::Chained => "complete with next",
        }
    }
}

/// What a PostgreSQL run is compared with, measured right after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Peer {
    Pgbench,
    TrueFloor,
    PgBoss,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Self::Pgbench => "pgbench floor",
            Self::TrueFloor => "true floor",
            Self::PgBoss => "pg-boss",
        }
    }
}

#[derive(Debug, Clone)]
struct Config {
    seconds: u64,
    repeats: usize,
    concurrency: Vec<usize>,
    backends: Vec<Backend>,
    /// The loops run in each cell, one after the other.
    loops: Vec<Loop>,
    preload: i64,
    pg_admin_url: Option<(String, &'static str)>,
    results: Option<String>,
    floor_from: Option<String>,
    /// PostgreSQL: the true floor measured after every run at c = 4.
    floor_beside: bool,
    floor_preload: i64,
    /// PostgreSQL: pg-boss measured after every run at c = 4 and 16.
    pgboss_beside: bool,
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
        let concurrency = std::env::var("B2_CONCURRENCY")
            .unwrap_or_else(|_| "1,4,16".into())
            .split(',')
            .map(|s| s.trim().parse::<usize>().context("B2_CONCURRENCY"))
            .collect::<Result<Vec<_>>>()?;
        ensure!(
            concurrency.iter().all(|&c| c > 0),
            "B2_CONCURRENCY must be positive"
        );
        let pg_admin_url = [
            "SWITCHBOARD_BENCH_DATABASE_URL",
            "SWITCHBOARD_TEST_DATABASE_URL",
        ]
        .into_iter()
        .find_map(|var| {
            std::env::var(var)
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| (v, var))
        });
        let mut backends = Vec::new();
        for name in std::env::var("B2_BACKENDS")
            .unwrap_or_else(|_| "sqlite,postgres".into())
            .split(',')
        {
            match name.trim() {
                "sqlite" => backends.push(Backend::Sqlite),
                "postgres" if pg_admin_url.is_some() => backends.push(Backend::Postgres),
                "postgres" => eprintln!(
                    "B2: PostgreSQL skipped: set SWITCHBOARD_BENCH_DATABASE_URL \
                     (or SWITCHBOARD_TEST_DATABASE_URL)"
                ),
                other => bail!("B2_BACKENDS: unknown backend {other:?}"),
            }
        }
        let loops = match std::env::var("B2_LOOP").as_deref() {
            Err(_) | Ok("two-calls") => vec![Loop::TwoCalls],
            Ok("chained") => vec![Loop::Chained],
            Ok("both") => vec![Loop::TwoCalls, Loop::Chained],
            Ok(other) => bail!("B2_LOOP: {other:?} is not two-calls, chained or both"),
        };
        Ok(Self {
            seconds: env_num("B2_SECONDS", 20)?,
            loops,
            repeats: env_num("B2_REPEATS", 3)?,
            concurrency,
            backends,
            preload: env_num("B2_PRELOAD", 1_000_000)?,
            pg_admin_url,
            results: std::env::var("B2_RESULTS").ok().filter(|v| !v.is_empty()),
            floor_from: std::env::var("B2_FLOOR_FROM")
                .ok()
                .filter(|v| !v.is_empty()),
            floor_beside: std::env::var("B2_FLOOR_BESIDE").map_or(true, |v| v != "0"),
            floor_preload: env_num(
                "B2_FLOOR_PRELOAD",
                300_000.max(5_000 * env_num("B2_SECONDS", 20_i64)?),
            )?,
            pgboss_beside: std::env::var("B2_PGBOSS").map_or(true, |v| v != "0")
                && peers::pgboss_installed(),
        })
    }
}

// ---------------------------------------------------------------------------
// CPU accounting from /proc (common/host.rs).

#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    server: u64,
    this: u64,
    host: u64,
    pg: HashMap<String, u64>,
}

async fn sample(server_pid: u32, pg: Option<&PgRun>) -> Result<Sample> {
    let mut pg_ticks = HashMap::new();
    if let Some(pg) = pg {
        for pid in pg.backend_pids().await? {
            if let Some(t) = process_ticks(&pid) {
                pg_ticks.insert(pid, t);
            }
        }
    }
    Ok(Sample {
        at: Instant::now(),
        server: process_ticks(&server_pid.to_string()).unwrap_or(0),
        this: process_ticks("self").unwrap_or(0),
        host: HostTicks::now().busy,
        pg: pg_ticks,
    })
}

use server::ServerProcess;

fn http_client() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1)
        .timeout(Duration::from_secs(30))
        .build()?)
}

struct Endpoint {
    id: String,
    mcp_url: String,
    authorization: String,
}

async fn vend(server: &ServerProcess) -> Result<Endpoint> {
    let http = http_client()?;
    let resp = http
        .post(format!("http://{}/api/v1/endpoints", server.addr))
        .bearer_auth(&server.admin_token)
        .json(&json!({"agent": "bench-agent"}))
        .send()
        .await?;
    ensure!(resp.status().as_u16() == 201, "vend: {}", resp.status());
    let v: Value = resp.json().await?;
    let token = v["token"].as_str().context("token")?;
    Ok(Endpoint {
        id: v["id"].as_str().context("id")?.to_owned(),
        mcp_url: v["mcp_url"].as_str().context("mcp_url")?.to_owned(),
        authorization: format!("Bearer {token}"),
    })
}

// ---------------------------------------------------------------------------
// The lean agent client.

struct Agent {
    http: reqwest::Client,
    url: String,
    authorization: String,
    session: String,
    next_id: u64,
}

impl Agent {
    async fn connect(ep: &Endpoint) -> Result<Self> {
        let http = http_client()?;
        let resp = http
            .post(&ep.mcp_url)
            .header("Authorization", &ep.authorization)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b2","version":"1"}}}"#,
            )
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
        let mut agent = Self {
            http,
            url: ep.mcp_url.clone(),
            authorization: ep.authorization.clone(),
            session,
            next_id: 1,
        };
        let status = agent
            .post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned())
            .await?
            .0;
        ensure!(status == 202, "notifications/initialized: {status}");
        Ok(agent)
    }

    async fn post(&mut self, body: String) -> Result<(u16, reqwest::Response)> {
        let resp = self
            .http
            .post(&self.url)
            .header("Authorization", &self.authorization)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &self.session)
            .body(body)
            .send()
            .await?;
        Ok((resp.status().as_u16(), resp))
    }

    /// One `tools/call`; the tool's `structuredContent`.
    async fn call(&mut self, name: &str, arguments: &str) -> Result<Value> {
        Ok(self.call_sized(name, arguments).await?.0)
    }

    /// [`Self::call`], and the size of the response body: what the call
    /// put into the agent's context.
    async fn call_sized(&mut self, name: &str, arguments: &str) -> Result<(Value, usize)> {
        self.next_id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#,
            self.next_id
        );
        let (status, resp) = self.post(body).await?;
        let bytes = resp.bytes().await?;
        ensure!(
            status == 200,
            "{name}: HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
        let mut v: Value = serde_json::from_slice(&bytes)?;
        let result = v
            .get_mut("result")
            .with_context(|| format!("{name}: {}", String::from_utf8_lossy(&bytes)))?;
        ensure!(
            result.get("isError") != Some(&Value::Bool(true)),
            "{name} failed: {result}"
        );
        Ok((result["structuredContent"].take(), bytes.len()))
    }
}

#[derive(Default)]
struct WorkerOut {
    loops: u64,
    ids: Vec<String>,
    claim_us: Vec<u32>,
    complete_us: Vec<u32>,
}

async fn worker(
    agent: Agent,
    kind: Loop,
    deadline: Instant,
    stop: Arc<AtomicBool>,
    dry: Arc<AtomicBool>,
) -> Result<WorkerOut> {
    match kind {
        Loop::TwoCalls => two_calls(agent, deadline, stop, dry).await,
        Loop::Chained => chained(agent, deadline, stop, dry).await,
    }
}

/// The id of the todo a `claim_next` answer claimed; `None` when empty.
fn claimed_id(claimed: &Value) -> Result<Option<String>> {
    if claimed["empty"] == Value::Bool(true) {
        return Ok(None);
    }
    let id = claimed["todo"]["id"]
        .as_str()
        .with_context(|| format!("claim_next: no todo id in {claimed}"))?;
    Ok(Some(id.to_owned()))
}

/// `complete` with `next` until the deadline: one call a todo. The todo
/// held at the deadline is completed alone and counted.
async fn chained(
    mut agent: Agent,
    deadline: Instant,
    stop: Arc<AtomicBool>,
    dry: Arc<AtomicBool>,
) -> Result<WorkerOut> {
    let mut out = WorkerOut::default();
    let t0 = Instant::now();
    let first = agent.call("claim_next", "{}").await?;
    out.claim_us.push(micros(t0.elapsed()));
    let mut held = claimed_id(&first)?;
    if held.is_none() {
        dry.store(true, Ordering::Relaxed);
    }
    while let Some(id) = held.take() {
        let last = Instant::now() >= deadline || stop.load(Ordering::Relaxed);
        let arguments = if last {
            format!(r#"{{"id":"{id}"}}"#)
        } else {
            format!(r#"{{"id":"{id}","next":{{}}}}"#)
        };
        let t1 = Instant::now();
        let mut done = agent.call("complete", &arguments).await?;
        out.complete_us.push(micros(t1.elapsed()));
        ensure!(done["state"] == "done", "complete of {id}: {done}");
        out.ids.push(id);
        out.loops += 1;
        if last {
            break;
        }
        held = claimed_id(&done["next"].take())?;
        if held.is_none() {
            dry.store(true, Ordering::Relaxed);
            stop.store(true, Ordering::Relaxed);
        }
    }
    Ok(out)
}

/// `claim_next` → `complete` until the deadline.
async fn two_calls(
    mut agent: Agent,
    deadline: Instant,
    stop: Arc<AtomicBool>,
    dry: Arc<AtomicBool>,
) -> Result<WorkerOut> {
    let mut out = WorkerOut::default();
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        let claimed = agent.call("claim_next", "{}").await?;
        let t1 = Instant::now();
        let Some(id) = claimed_id(&claimed)? else {
            dry.store(true, Ordering::Relaxed);
            stop.store(true, Ordering::Relaxed);
            break;
        };
        let done = agent
            .call("complete", &format!(r#"{{"id":"{id}"}}"#))
            .await?;
        let t2 = Instant::now();
        ensure!(done["state"] == "done", "complete of {id}: {done}");
        out.claim_us.push(micros(t1 - t0));
        out.complete_us.push(micros(t2 - t1));
        out.ids.push(id);
        out.loops += 1;
    }
    Ok(out)
}

fn micros(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}

// ---------------------------------------------------------------------------
// Databases.

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn redact(url: &str) -> String {
    switchboard::store::sql::DatabaseLocation::Postgres(url.to_owned()).redacted()
}

/// A fresh PostgreSQL database for one run.
struct PgRun {
    database: ThrowawayDatabase,
    url: String,
    conn: tokio::sync::Mutex<sqlx::PgConnection>,
}

impl PgRun {
    async fn create(admin_url: &str) -> Result<Self> {
        let database = ThrowawayDatabase::create(admin_url, "sb_bench_b2").await?;
        let url = database.url.clone();
        let conn = sqlx::PgConnection::connect(&url).await?;
        Ok(Self {
            database,
            url,
            conn: tokio::sync::Mutex::new(conn),
        })
    }

    /// Backends connected to this run's database, except our own.
    async fn backend_pids(&self) -> Result<Vec<String>> {
        let mut conn = self.conn.lock().await;
        let rows = sqlx::query(
            "SELECT pid::text FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_all(&mut *conn)
        .await?;
        Ok(rows
            .iter()
            .filter_map(|r| r.try_get::<String, _>(0).ok())
            .collect())
    }

    async fn drop_database(self) {
        let _ = self.conn.into_inner().close().await;
        let _ = self.database.drop_database().await;
    }
}

/// The counts the correctness check needs: (rows, done, claimed, claimed more than once).
const COUNTS: &str = "SELECT COUNT(*), \
       COALESCE(SUM(CASE WHEN state = 'done' THEN 1 ELSE 0 END), 0), \
       COALESCE(SUM(CASE WHEN state = 'claimed' THEN 1 ELSE 0 END), 0), \
       COALESCE(SUM(CASE WHEN attempts_total > 1 THEN 1 ELSE 0 END), 0) \
     FROM todos";

// ---------------------------------------------------------------------------
// One run.

#[derive(Debug, Clone)]
struct RunResult {
    loops: u64,
    elapsed: f64,
    p50_ms: f64,
    p99_ms: f64,
    claim_p99_ms: f64,
    complete_p99_ms: f64,
    server_cpu: f64,
    this_cpu: f64,
    pg_cpu: Option<f64>,
    other_cores: f64,
}

impl RunResult {
    fn rate(&self) -> f64 {
        self.loops as f64 / self.elapsed
    }
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

async fn run_once(
    cfg: &Config,
    backend: Backend,
    kind: Loop,
    conc: usize,
    tck: f64,
) -> Result<RunResult> {
    let dir = tempfile::tempdir()?;
    let pg = match backend {
        Backend::Postgres => {
            let (url, _) = cfg.pg_admin_url.as_ref().context("no PostgreSQL URL")?;
            Some(PgRun::create(url).await?)
        }
        Backend::Sqlite => None,
    };
    let database = match &pg {
        Some(pg) => pg.url.clone(),
        None => dir.path().join("b2.db").display().to_string(),
    };
    let outcome = async {
        let server = ServerProcess::start(&database, dir.path())?;
        let result = drive(
            cfg,
            (backend, kind),
            conc,
            tck,
            &server,
            pg.as_ref(),
            &database,
        )
        .await;
        server.stop();
        result
    }
    .await;
    if let Some(pg) = pg {
        pg.drop_database().await;
    }
    outcome
}

async fn preload(backend: Backend, database: &str, endpoint_id: &str, n: i64) -> Result<()> {
    let base = now_ms() - n - 60_000;
    match backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{database}")).await?;
            sqlx::query(SQLITE_PRELOAD)
                .bind(endpoint_id)
                .bind(base)
                .bind(n)
                .execute(&mut conn)
                .await?;
            // No ANALYZE: the server never runs it, and with the bundled
            // SQLite's STAT4 statistics every statement whose plan could
            // depend on a bound value is prepared again on every call
            // (the server clears them at start; docs/decisions.md).
            conn.close().await?;
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(database).await?;
            sqlx::query(PG_PRELOAD)
                .bind(endpoint_id)
                .bind(base)
                .bind(n)
                .execute(&mut conn)
                .await?;
            sqlx::raw_sql("VACUUM ANALYZE").execute(&mut conn).await?;
            // Needs the pg_checkpoint role or superuser; a run without it is still valid.
            let _ = sqlx::raw_sql("CHECKPOINT").execute(&mut conn).await;
            conn.close().await?;
        }
    }
    Ok(())
}

async fn counts(backend: Backend, database: &str) -> Result<[i64; 4]> {
    let get = |row: &dyn Fn(usize) -> Result<i64>| -> Result<[i64; 4]> {
        Ok([row(0)?, row(1)?, row(2)?, row(3)?])
    };
    match backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{database}")).await?;
            let row = sqlx::query(COUNTS).fetch_one(&mut conn).await?;
            let out = get(&|i| Ok(row.try_get::<i64, _>(i)?));
            conn.close().await?;
            out
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(database).await?;
            let row = sqlx::query(COUNTS).fetch_one(&mut conn).await?;
            let out = get(&|i| Ok(row.try_get::<i64, _>(i)?));
            conn.close().await?;
            out
        }
    }
}

async fn drive(
    cfg: &Config,
    (backend, kind): (Backend, Loop),
    conc: usize,
    tck: f64,
    server: &ServerProcess,
    pg: Option<&PgRun>,
    database: &str,
) -> Result<RunResult> {
    let ep = vend(server).await?;
    preload(backend, database, &ep.id, cfg.preload).await?;
    let mut agents = Vec::new();
    for _ in 0..conc {
        agents.push(Agent::connect(&ep).await?);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let dry = Arc::new(AtomicBool::new(false));
    let start = sample(server.pid(), pg).await?;
    let deadline = start.at + Duration::from_secs(cfg.seconds);
    let mut set = tokio::task::JoinSet::new();
    for agent in agents {
        set.spawn(worker(agent, kind, deadline, stop.clone(), dry.clone()));
    }
    let mut outs = Vec::new();
    while let Some(joined) = set.join_next().await {
        match joined? {
            Ok(out) => outs.push(out),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                while set.join_next().await.is_some() {}
                return Err(e);
            }
        }
    }
    let end = sample(server.pid(), pg).await?;
    ensure!(
        !dry.load(Ordering::Relaxed),
        "{} c={conc}: the {} preloaded todos ran out; raise B2_PRELOAD",
        backend.name(),
        cfg.preload
    );

    // Correctness: none claimed twice, none lost.
    let loops: u64 = outs.iter().map(|o| o.loops).sum();
    let mut seen = HashSet::new();
    for out in &outs {
        for id in &out.ids {
            ensure!(seen.insert(id.as_str()), "{id} was claimed twice");
        }
    }
    let [rows, done, claimed, reclaimed] = counts(backend, database).await?;
    ensure!(
        rows == cfg.preload,
        "{} rows where {} were loaded",
        rows,
        cfg.preload
    );
    ensure!(
        done == loops as i64,
        "{done} todos are done after {loops} loops"
    );
    ensure!(claimed == 0, "{claimed} todos were left claimed");
    ensure!(
        reclaimed == 0,
        "{reclaimed} todos were claimed more than once"
    );

    let elapsed = (end.at - start.at).as_secs_f64();
    let mut all: Vec<u32> = Vec::with_capacity(loops as usize * 2);
    let mut claims: Vec<u32> = Vec::with_capacity(loops as usize);
    let mut completes: Vec<u32> = Vec::with_capacity(loops as usize);
    for out in &outs {
        all.extend(&out.claim_us);
        all.extend(&out.complete_us);
        claims.extend(&out.claim_us);
        completes.extend(&out.complete_us);
    }
    all.sort_unstable();
    claims.sort_unstable();
    completes.sort_unstable();
    let secs = |ticks: u64| ticks as f64 / tck;
    let server_cpu = secs(end.server.saturating_sub(start.server));
    let this_cpu = secs(end.this.saturating_sub(start.this));
    let pg_cpu = pg.map(|_| {
        secs(
            end.pg
                .iter()
                .map(|(pid, t)| t.saturating_sub(start.pg.get(pid).copied().unwrap_or(0)))
                .sum(),
        )
    });
    let host = secs(end.host.saturating_sub(start.host));
    let other_cores =
        ((host - server_cpu - this_cpu - pg_cpu.unwrap_or(0.0)) / elapsed.max(1e-9)).max(0.0);
    Ok(RunResult {
        loops,
        elapsed,
        p50_ms: percentile(&all, 50.0),
        p99_ms: percentile(&all, 99.0),
        claim_p99_ms: percentile(&claims, 99.0),
        complete_p99_ms: percentile(&completes, 99.0),
        server_cpu,
        this_cpu,
        pg_cpu,
        other_cores,
    })
}

// ---------------------------------------------------------------------------
// Report.

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// `true floor` medians from a B1 report: (backend name, concurrency) → loops/s.
fn b1_floors(path: &str) -> HashMap<(String, usize), f64> {
    let mut floors = HashMap::new();
    let Ok(text) = std::fs::read_to_string(path) else {
        return floors;
    };
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // "", backend, path, concurrency, median, ...
        if cells.len() > 5
            && cells[2].starts_with("true floor")
            && let (Ok(c), Ok(m)) = (cells[3].parse::<usize>(), cells[4].parse::<f64>())
        {
            floors.insert((cells[1].to_owned(), c), m);
        }
    }
    floors
}

/// A cell: backend, agents, loop.
type Key = (Backend, usize, Loop);

/// How a cell is named in the report: the backend, and the loop when it is
/// not the two-call one.
fn cell_name(key: &Key) -> String {
    match key.2 {
        Loop::TwoCalls => key.0.name().to_owned(),
        other => format!("{} ({})", key.0.name(), other.name()),
    }
}

/// A latency in ms, or a dash where the loop made no such call.
fn ms(v: f64) -> String {
    if v.is_nan() {
        "—".into()
    } else {
        format!("{v:.2}")
    }
}

fn report(
    cfg: &Config,
    results: &HashMap<Key, Vec<RunResult>>,
    beside: &HashMap<(Peer, usize), Vec<f64>>,
    header: &str,
) -> String {
    let mut md = String::new();
    md.push_str(header);
    md.push_str(
        "\n| backend | agents | loops/s median | min – max | runs (loops/s) | call p50 / p99 (ms) \
         | claim_next p99 (ms) | complete p99 (ms) | server CPU µs/loop \
         | PostgreSQL CPU µs/loop | load generator CPU µs/loop | other load (cores) |\n\
         |---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut keys: Vec<Key> = results.keys().copied().collect();
    keys.sort();
    for key in &keys {
        let runs = &results[key];
        let rates: Vec<f64> = runs.iter().map(RunResult::rate).collect();
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let med = |f: &dyn Fn(&RunResult) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        let per_loop = |f: &dyn Fn(&RunResult) -> f64| med(&|r| f(r) * 1e6 / r.loops.max(1) as f64);
        let pg = if runs.iter().all(|r| r.pg_cpu.is_some()) {
            format!("{:.0}", per_loop(&|r| r.pg_cpu.unwrap_or(0.0)))
        } else {
            "—".into()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.0} – {:.0} | {} | {:.2} / {:.2} | {} | {} | {:.0} | {} | {:.0} | {:.2} |",
            cell_name(key),
            key.1,
            median(&rates),
            min,
            max,
            rates
                .iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            med(&|r| r.p50_ms),
            med(&|r| r.p99_ms),
            ms(med(&|r| r.claim_p99_ms)),
            ms(med(&|r| r.complete_p99_ms)),
            per_loop(&|r| r.server_cpu),
            pg,
            per_loop(&|r| r.this_cpu),
            med(&|r| r.other_cores),
        );
    }

    md.push_str(
        "\n### Targets (09-quality.md, B2)\n\n| target | backend | agents | B2 median | \
         compared with | ratio | required | result |\n|---|---|---:|---:|---:|---:|---:|---|\n",
    );
    let floors = cfg.floor_from.as_deref().map(b1_floors).unwrap_or_default();
    for key in &keys {
        let runs = &results[key];
        let rate = median(&runs.iter().map(RunResult::rate).collect::<Vec<_>>());
        let p99 = median(&runs.iter().map(|r| r.p99_ms).collect::<Vec<_>>());
        let name = cell_name(key);
        if key.1 == 4 && key.0 == Backend::Sqlite {
            // 09-quality.md (raised by issue 47): over MCP, SQLite ≥ 8 000
            // loops/s at c = 4 (the share-of-the-floor target is PostgreSQL's).
            let _ = writeln!(
                md,
                "| loops/s ≥ 8 000 | {name} | 4 | {rate:.0} | — | — | ≥ 8 000 loops/s | {} |",
                if rate >= SQLITE_LOOPS_TARGET {
                    "PASS"
                } else {
                    "FAIL"
                }
            );
        } else if let Some((peer, floors_beside)) = [Peer::Pgbench, Peer::TrueFloor]
            .into_iter()
            .find_map(|p| beside.get(&(p, key.1)).map(|f| (p, f)))
            .filter(|_| key.1 == 4)
        {
            // The floor measured right after each of these runs: the fair
            // comparison on a host whose speed drifts. Issue 47 raised the
            // target to 60 % of the pgbench floor.
            let required = if peer == Peer::Pgbench { 0.6 } else { 0.5 };
            let floor = median(floors_beside);
            let ratio = rate / floor;
            let runs: Vec<String> = floors_beside.iter().map(|f| format!("{f:.0}")).collect();
            let _ = writeln!(
                md,
                "| loops/s ≥ {:.0} % of the {}, measured beside (runs: {}) | {name} | 4 | \
                 {rate:.0} | {floor:.0} | {:.0} % | ≥ {:.0} % | {} |",
                required * 100.0,
                peer.name(),
                runs.join(", "),
                ratio * 100.0,
                required * 100.0,
                if ratio >= required { "PASS" } else { "FAIL" }
            );
        } else if key.1 == 4 {
            match floors.get(&(name.to_owned(), 4)) {
                Some(floor) => {
                    let ratio = rate / floor;
                    let _ = writeln!(
                        md,
                        "| loops/s ≥ 50 % of the B1 true floor | {name} | 4 | {rate:.0} | \
                         {floor:.0} | {:.0} % | ≥ 50 % | {} |",
                        ratio * 100.0,
                        if ratio >= 0.5 { "PASS" } else { "FAIL" }
                    );
                }
                None => {
                    let _ = writeln!(
                        md,
                        "| loops/s ≥ 50 % of the B1 true floor | {name} | 4 | {rate:.0} | \
                         not measured in this run | — | ≥ 50 % | — |"
                    );
                }
            }
        }
        if let Some(boss) = beside.get(&(Peer::PgBoss, key.1))
            && key.0 == Backend::Postgres
        {
            let reference = median(boss);
            let ratio = rate / reference;
            let runs: Vec<String> = boss.iter().map(|f| format!("{f:.0}")).collect();
            let _ = writeln!(
                md,
                "| loops/s ≥ 2 × pg-boss, measured beside (runs: {}) | {name} | {} | {rate:.0} | \
                 {reference:.0} | {ratio:.2} × | ≥ 2 × | {} |",
                runs.join(", "),
                key.1,
                if ratio >= 2.0 { "PASS" } else { "FAIL" }
            );
        }
        let _ = writeln!(
            md,
            "| p99 per call < 25 ms | {name} | {} | {p99:.2} ms | — | — | < 25 ms | {} |",
            key.1,
            if p99 < 25.0 { "PASS" } else { "FAIL" }
        );
    }
    md
}

// ---------------------------------------------------------------------------

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; everything else comes from the environment.
    if let Err(e) = run().await {
        eprintln!("B2 FAILED: {e:#}");
        std::process::exit(1);
    }
}

async fn pg_settings(url: &str) -> Result<String> {
    switchboard::testkit::pg_settings(
        url,
        &[
            "server_version",
            "shared_buffers",
            "synchronous_commit",
            "fsync",
            "max_connections",
            "autovacuum",
        ],
    )
    .await
}

/// The size of the payload the context measurement pushes: a PR-sized
/// webhook (the figure `../shared/findings/2026-12-06-outside.md` measured).
const CONTEXT_PAYLOAD_BYTES: usize = 15_064;

/// What one todo costs an agent's context (`09-quality.md`, B2 amended): the
/// bytes of the HTTP response bodies of `claim_next` and `complete` for a
/// todo whose payload is [`CONTEXT_PAYLOAD_BYTES`] of JSON, on a fresh
/// SQLite server (the answers are the same on either backend). Target: at
/// most the payload + 2 KiB. A Markdown section; an error when it is missed.
async fn context_bytes() -> Result<String> {
    let dir = tempfile::tempdir()?;
    let database = dir.path().join("bytes.db").display().to_string();
    let server = ServerProcess::start(&database, dir.path())?;
    let measured = async {
        let ep = vend(&server).await?;
        // A JSON object whose text is exactly the payload's size.
        let filler = CONTEXT_PAYLOAD_BYTES - r#"{"diff":""}"#.len();
        let payload = json!({ "diff": "x".repeat(filler) });
        ensure!(payload.to_string().len() == CONTEXT_PAYLOAD_BYTES);
        // Three alike: one for each loop, and one for the chained loop to claim.
        for _ in 0..3 {
            let resp = http_client()?
                .post(format!(
                    "http://{}/api/v1/endpoints/{}/todos",
                    server.addr, ep.id
                ))
                .bearer_auth(&server.admin_token)
                .json(&json!({"title": "review the pull request", "payload": payload}))
                .send()
                .await?;
            ensure!(resp.status().as_u16() == 201, "push: {}", resp.status());
        }
        let mut agent = Agent::connect(&ep).await?;
        let (claimed, claim_bytes) = agent.call_sized("claim_next", "{}").await?;
        let id = claimed_id(&claimed)?.context("claim_next answered no todo")?;
        let (_, complete_bytes) = agent
            .call_sized("complete", &json!({ "id": id }).to_string())
            .await?;
        // The chained loop: per todo, one `complete` that claims the next.
        let (claimed, _) = agent.call_sized("claim_next", "{}").await?;
        let id = claimed_id(&claimed)?.context("claim_next answered no todo")?;
        let (next, chained_bytes) = agent
            .call_sized("complete", &json!({ "id": id, "next": {} }).to_string())
            .await?;
        ensure!(
            next["next"]["empty"] == false,
            "complete with next claimed nothing: {next}"
        );
        Ok((claim_bytes, complete_bytes, chained_bytes))
    }
    .await;
    server.stop();
    let (claim_bytes, complete_bytes, chained_bytes) = measured?;
    let chained_over = chained_bytes.saturating_sub(CONTEXT_PAYLOAD_BYTES);
    ensure!(
        chained_over <= 2048,
        "bytes per todo, complete with next: {chained_bytes} (+{chained_over}, target +2048)"
    );
    let total = claim_bytes + complete_bytes;
    let over = total.saturating_sub(CONTEXT_PAYLOAD_BYTES);
    let pass = over <= 2048;
    ensure!(
        pass,
        "bytes per todo: {total} for a {CONTEXT_PAYLOAD_BYTES}-byte payload (+{over}, target +2048)"
    );
    Ok(format!(
        "\n### Bytes returned to the agent per todo\n\n\
         | payload | claim_next | complete | total | over the payload | target | result |\n\
         |---:|---:|---:|---:|---:|---|---|\n\
         | {CONTEXT_PAYLOAD_BYTES} | {claim_bytes} | {complete_bytes} | {total} | {over} | \
         ≤ payload + 2 048 | PASS |\n\
         | {CONTEXT_PAYLOAD_BYTES} (complete with next: one call a todo) | — | {chained_bytes} | \
         {chained_bytes} | {chained_over} | ≤ payload + 2 048 | PASS |\n"
    ))
}

async fn run() -> Result<()> {
    let cfg = Config::from_env()?;
    ensure!(!cfg.backends.is_empty(), "B2: no backend to run");
    let tck = host::clock_ticks_per_sec();

    let mut header = String::new();
    let _ = writeln!(header, "### Parameters\n");
    let _ = writeln!(
        header,
        "- duration per run: {} s; repeats: {}; agent clients: {:?}; {} pending todos \
         preloaded with SQL before every run",
        cfg.seconds, cfg.repeats, cfg.concurrency, cfg.preload
    );
    let _ = writeln!(
        header,
        "- server: `{BIN}` (release build), a fresh process and a fresh database per run, \
         rate limits lifted (`--mcp-rate 1000000`), logging at warn"
    );
    let _ = writeln!(
        header,
        "- agents: one HTTP/1.1 keep-alive connection and one MCP session each (reqwest, \
         JSON-RPC by hand), looping `tools/call claim_next` → `tools/call complete`{}; \
         latency is per call, measured by the client",
        if cfg.loops.contains(&Loop::Chained) {
            " and (rows \"complete with next\") `claim_next` once, then `tools/call complete` \
             with `next: {}` — one call a todo, which completes it and claims the next"
        } else {
            ""
        }
    );
    if cfg.backends.contains(&Backend::Sqlite) {
        let _ = writeln!(
            header,
            "- SQLite: a temp file per run, the server's defaults (WAL, synchronous=NORMAL, \
             2 KiB pages, the writer lane)"
        );
    }
    if let (true, Some((url, var))) = (cfg.backends.contains(&Backend::Postgres), &cfg.pg_admin_url)
    {
        let settings = pg_settings(url)
            .await
            .unwrap_or_else(|e| format!("unavailable ({e})"));
        let _ = writeln!(
            header,
            "- PostgreSQL ({var}={}): a fresh database per run, VACUUM ANALYZE + CHECKPOINT \
             after the preload; {settings}",
            redact(url)
        );
    }
    let _ = writeln!(
        header,
        "- CPU per loop from /proc/<pid>/stat: the server process; the PostgreSQL backends \
         connected to the run's database; this load generator. Other load = host busy time \
         minus those, in cores."
    );

    let mut results: HashMap<Key, Vec<RunResult>> = HashMap::new();
    let mut beside: HashMap<(Peer, usize), Vec<f64>> = HashMap::new();
    for &backend in &cfg.backends {
        for &conc in &cfg.concurrency {
            for rep in 0..cfg.repeats {
                for &kind in &cfg.loops {
                    let key = (backend, conc, kind);
                    let r = run_once(&cfg, backend, kind, conc, tck)
                        .await
                        .with_context(|| format!("{} c={conc} run {}", cell_name(&key), rep + 1))?;
                    eprintln!(
                        "B2 {} c={conc} run {}: {:.0} loops/s, p50 {:.2} ms, p99 {:.2} ms, \
                         server {:.0} µs/loop",
                        cell_name(&key),
                        rep + 1,
                        r.rate(),
                        r.p50_ms,
                        r.p99_ms,
                        r.server_cpu * 1e6 / r.loops.max(1) as f64
                    );
                    results.entry(key).or_default().push(r);
                }
                if backend == Backend::Postgres && conc == 4 && cfg.floor_beside {
                    let (url, _) = cfg.pg_admin_url.as_ref().context("no PostgreSQL URL")?;
                    let (peer, floor) = if peers::available("pgbench") {
                        let db = ThrowawayDatabase::create(url, "sb_bench_pgbench").await?;
                        let run = async {
                            peers::pgbench_reset(&db.url, cfg.floor_preload).await?;
                            peers::pgbench_run(&db.url, conc, cfg.seconds, cfg.floor_preload).await
                        }
                        .await;
                        let _ = db.drop_database().await;
                        (Peer::Pgbench, run?.rate())
                    } else {
                        let floor = pg_floor::measure(url, conc, cfg.seconds, cfg.floor_preload)
                            .await
                            .with_context(|| format!("true floor beside run {}", rep + 1))?;
                        (Peer::TrueFloor, floor)
                    };
                    eprintln!(
                        "B2 PostgreSQL {} c={conc} beside run {}: {floor:.0} loops/s",
                        peer.name(),
                        rep + 1
                    );
                    beside.entry((peer, conc)).or_default().push(floor);
                }
                if backend == Backend::Postgres && matches!(conc, 4 | 16) && cfg.pgboss_beside {
                    let (url, _) = cfg.pg_admin_url.as_ref().context("no PostgreSQL URL")?;
                    let db = ThrowawayDatabase::create(url, "sb_bench_pgboss").await?;
                    let run =
                        peers::pgboss_run(&db.url, conc, cfg.seconds, 2_500 * cfg.seconds as i64)
                            .await
                            .with_context(|| format!("pg-boss c={conc} beside run {}", rep + 1));
                    let _ = db.drop_database().await;
                    let run = run?;
                    eprintln!(
                        "B2 pg-boss c={conc} beside run {}: {:.0} loops/s (first fifth {:.0}, \
                         last fifth {:.0})",
                        rep + 1,
                        run.rate(),
                        run.first_rate,
                        run.last_rate
                    );
                    beside
                        .entry((Peer::PgBoss, conc))
                        .or_default()
                        .push(run.rate());
                }
            }
        }
    }
    let mut md = report(&cfg, &results, &beside, &header);
    md.push_str(&context_bytes().await.context("bytes per todo")?);
    println!("{md}");
    if let Some(file) = &cfg.results {
        std::fs::write(file, &md).with_context(|| format!("cannot write {file}"))?;
    }
    Ok(())
}
