//! B3 (`09-quality.md`): doorbell latency, from the start of a human's API
//! push to the moment the client reads the matching
//! `notifications/claude/channel` message on its session's GET stream, with
//! 1, 100 and 1 000 streaming sessions on one instance, on SQLite and on
//! PostgreSQL, against the real release binary.
//!
//! Every configuration starts from the same state: a fresh database and a
//! freshly started server (`CARGO_BIN_EXE_switchboard`, i.e.
//! `target/release/switchboard`, rate limits lifted, default maintenance and
//! presence periods). The bench vends one endpoint per session through the
//! API (`POST /api/v1/endpoints`, 100 endpoints per agent), so each push rings
//! exactly one known session; for every endpoint it opens one MCP session
//! (`initialize`, `notifications/initialized`) and its GET stream, and reads
//! every stream in its own task (raw HTTP/1.1 through reqwest, one connection
//! per stream; SSE parsed by hand: `data:` lines, a blank line ends an
//! event). Then it pushes `B3_PUSHES` todos one at a time, paced
//! (`B3_INTERVAL_MS` apart), round-robin over the endpoints (`POST /api/v1/endpoints/{slug}/todos` with the first-start
//! admin token), and for each one measures push start → the notification
//! whose `meta.todo_id` is the new todo's id, stamped when its chunk was read.
//!
//! Also measured: the push's own HTTP round trip, the CPU time per push of
//! the server process (from `/proc/<pid>/stat`), of the PostgreSQL backends
//! serving the database, and of this load generator, over the push phase
//! (which includes the server's keep-alive comments on every stream and its
//! background ticks); and the other load on the host.
//!
//! Correctness, checked at the end of every configuration: every push
//! produced exactly one notification, on the session of the endpoint it was
//! pushed to; none lost (waited for up to `B3_WAIT_MS` each, and again after
//! the last push), none twice, no notification for anything not pushed, no
//! other notification (digest), and no stream ended. Exits non-zero when a
//! check fails.
//!
//! **Cross-instance mode** (`cargo bench --bench b3_doorbell_latency --
//! --cluster`, or `B3_MODE=cluster`): two `serve` processes, A and B, on
//! one PostgreSQL database (the cluster bus, `docs/cluster.md`). A starts
//! first on the empty database and prints the admin token; B starts second.
//! The endpoints are vended on B and every session (`initialize`,
//! `notifications/initialized`, GET stream: the same code as above) lives
//! on B. Pushes alternate between B (same instance) and A (across
//! instances) in ABBA order, one round of two pushes per session in turn,
//! so both figures come from the same run under the same machine noise; A
//! hosts nothing, so its pushes reach B only through `NOTIFY` and B rings.
//! The same correctness checks apply (exactly one notification per push,
//! on B's right session). Reported: p50 / p90 / p99 / max per session count
//! and way, sample counts, the load average at the start and end of every
//! push phase, the PostgreSQL settings; the target is p99 ≤ 50 ms across
//! instances. Every configuration runs even when an earlier one failed;
//! the bench then exits non-zero.
//!
//! The database of the cross-instance mode is never the shared server: the
//! bench starts a throwaway cluster (`switchboard::testkit::PgCluster`, the
//! fault tests' too: `initdb --auth=trust -U postgres -E UTF8 --locale=C`
//! into a fresh temporary directory, run as the `postgres` user when the
//! bench runs as root, `pg_ctl start` on a free port of 127.0.0.1 with
//! default settings), a fresh database per
//! configuration, and stops and deletes the cluster at the end, also when
//! the bench fails (a Drop guard; not on SIGKILL). `SWITCHBOARD_BENCH_PG_BIN`
//! names the PostgreSQL binaries (default `/usr/lib/postgresql/15/bin`).
//! `B3_BACKENDS` and the database URLs are ignored in this mode; `B3_PUSHES`
//! defaults to 600 (300 per way).
//!
//! Environment: `B3_SESSIONS` (default `1,100,1000`), `B3_PUSHES` (500 per
//! configuration), `B3_SECONDS` (the most a push phase may take, default
//! 60), `B3_TOTAL_SECONDS` (every push phase ends by this long after the
//! start, default 900), `B3_MODE` (`cluster` for the cross-instance mode), `B3_INTERVAL_MS` (push i starts i × this after the first, default
//! 10, or at once when the previous one took longer), `B3_WAIT_MS` (how long to wait for one notification, 2 000),
//! `B3_BACKENDS` (`sqlite,postgres`), `B3_RESULTS` (also write the Markdown
//! report there). PostgreSQL: `SWITCHBOARD_BENCH_DATABASE_URL`, else
//! `SWITCHBOARD_TEST_DATABASE_URL`; a fresh database per configuration,
//! dropped after it. Without either, only SQLite runs.

#[path = "common/host.rs"]
mod host;
#[path = "common/server.rs"]
mod server;
#[path = "common/streams.rs"]
mod streams;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use host::{HostTicks, process_ticks};
use serde_json::Value;
use sqlx::{Connection, Row};
use switchboard::testkit::pg_cluster::PG_BIN;
use switchboard::testkit::{PgCluster, ThrowawayDatabase};
use tokio::sync::mpsc;

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");
/// Endpoints per agent when vending.
const PER_AGENT: usize = 100;
/// Setup requests in flight at once (vending, opening sessions).
const SETUP_CONCURRENCY: usize = 8;

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

#[derive(Debug, Clone)]
struct Config {
    sessions: Vec<usize>,
    pushes: usize,
    seconds: u64,
    interval: Duration,
    wait: Duration,
    backends: Vec<Backend>,
    pg_admin_url: Option<(String, &'static str)>,
    results: Option<String>,
    /// The cross-instance mode (`--cluster` or `B3_MODE=cluster`).
    cluster: bool,
    /// Every push phase ends by then (`B3_TOTAL_SECONDS` after the start).
    ends: Instant,
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
        let cluster = std::env::args().skip(1).any(|a| a == "--cluster")
            || std::env::var("B3_MODE").is_ok_and(|m| m.trim() == "cluster");
        let sessions = std::env::var("B3_SESSIONS")
            .unwrap_or_else(|_| "1,100,1000".into())
            .split(',')
            .map(|s| s.trim().parse::<usize>().context("B3_SESSIONS"))
            .collect::<Result<Vec<_>>>()?;
        ensure!(
            sessions.iter().all(|&c| c > 0),
            "B3_SESSIONS must be positive"
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
        for name in std::env::var("B3_BACKENDS")
            .unwrap_or_else(|_| "sqlite,postgres".into())
            .split(',')
        {
            match name.trim() {
                "sqlite" => backends.push(Backend::Sqlite),
                "postgres" if pg_admin_url.is_some() => backends.push(Backend::Postgres),
                "postgres" if cluster => {}
                "postgres" => eprintln!(
                    "B3: PostgreSQL skipped: set SWITCHBOARD_BENCH_DATABASE_URL \
                     (or SWITCHBOARD_TEST_DATABASE_URL)"
                ),
                other => bail!("B3_BACKENDS: unknown backend {other:?}"),
            }
        }
        Ok(Self {
            sessions,
            pushes: env_num("B3_PUSHES", if cluster { 600 } else { 500 })?,
            seconds: env_num("B3_SECONDS", 60)?,
            interval: Duration::from_millis(env_num("B3_INTERVAL_MS", 10)?),
            wait: Duration::from_millis(env_num("B3_WAIT_MS", 2_000)?),
            backends,
            pg_admin_url,
            results: std::env::var("B3_RESULTS").ok().filter(|v| !v.is_empty()),
            cluster,
            ends: Instant::now() + Duration::from_secs(env_num("B3_TOTAL_SECONDS", 900)?),
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

/// `server_pids`: the server processes whose CPU counts as the server's.
async fn sample(server_pids: &[u32], pg: Option<&PgRun>) -> Result<Sample> {
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
        server: server_pids
            .iter()
            .map(|pid| process_ticks(&pid.to_string()).unwrap_or(0))
            .sum(),
        this: process_ticks("self").unwrap_or(0),
        host: HostTicks::now().busy,
        pg: pg_ticks,
    })
}

use server::ServerProcess;
use streams::{
    Endpoint, for_all, http_client, open_files_limit, open_session, open_stream, stream_client,
    vend,
};

/// `n` endpoints vended on the server at `addr`, `SETUP_CONCURRENCY` vends
/// at a time; index order kept.
async fn vend_all(addr: &str, admin_token: &str, n: usize) -> Result<Vec<Endpoint>> {
    let http = http_client(SETUP_CONCURRENCY)?;
    let (addr, token) = (addr.to_owned(), admin_token.to_owned());
    for_all(n, SETUP_CONCURRENCY, move |i| {
        let (http, addr, token) = (http.clone(), addr.clone(), token.clone());
        async move {
            let agent = format!("b3-agent-{}", i / PER_AGENT);
            vend(&http, &addr, &token, &agent).await
        }
    })
    .await
}

// ---------------------------------------------------------------------------
// Sessions and their streams.

/// What a stream reader saw.
#[derive(Debug)]
enum Received {
    /// A todo doorbell: the session's index, the todo id, when it was read.
    Todo {
        session: usize,
        todo_id: String,
        at: Instant,
    },
    /// Any other message (a digest, a list-changed notice).
    Other { session: usize, what: String },
    /// The stream ended (or failed).
    Closed { session: usize, why: String },
}

/// Reads one stream until it ends: SSE by hand (`data:` lines joined, a
/// blank line dispatches; `event:`, `id:` and comments ignored).
async fn read_stream(
    session: usize,
    mut resp: reqwest::Response,
    tx: mpsc::UnboundedSender<Received>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut data = String::new();
    let why = loop {
        let chunk = match resp.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break "end of stream".to_owned(),
            Err(e) => break format!("read error: {e}"),
        };
        let at = Instant::now();
        buf.extend_from_slice(&chunk);
        while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
            let line_bytes: Vec<u8> = buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line_bytes);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !data.is_empty() {
                    let _ = tx.send(classify(session, &data, at));
                    data.clear();
                }
            } else if let Some(d) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
        }
    };
    let _ = tx.send(Received::Closed { session, why });
}

fn classify(session: usize, data: &str, at: Instant) -> Received {
    let Ok(v) = serde_json::from_str::<Value>(data) else {
        return Received::Other {
            session,
            what: format!("unparsable: {data}"),
        };
    };
    if v["method"] == "notifications/claude/channel"
        && let Some(id) = v["params"]["meta"]["todo_id"].as_str()
    {
        return Received::Todo {
            session,
            todo_id: id.to_owned(),
            at,
        };
    }
    Received::Other {
        session,
        what: format!(
            "{} {}",
            v["method"].as_str().unwrap_or("?"),
            v["params"]["meta"]["kind"].as_str().unwrap_or("")
        ),
    }
}

/// One session and one open stream per endpoint, `SETUP_CONCURRENCY` at a
/// time; then each stream read by its own task.
async fn open_all(
    endpoints: &[Endpoint],
    tx: &mpsc::UnboundedSender<Received>,
    readers: &mut tokio::task::JoinSet<()>,
) -> Result<()> {
    let http = http_client(SETUP_CONCURRENCY)?;
    let streams = stream_client()?;
    let endpoints = Arc::new(endpoints.to_vec());
    let opened = for_all(endpoints.len(), SETUP_CONCURRENCY, move |i| {
        let (http, streams, endpoints) = (http.clone(), streams.clone(), endpoints.clone());
        async move {
            let session = open_session(&http, &endpoints[i], "b3").await?;
            open_stream(&streams, &endpoints[i], &session).await
        }
    })
    .await?;
    for (i, resp) in opened.into_iter().enumerate() {
        readers.spawn(read_stream(i, resp, tx.clone()));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Databases (as in B2).

fn redact(url: &str) -> String {
    switchboard::store::sql::DatabaseLocation::Postgres(url.to_owned()).redacted()
}

/// A fresh PostgreSQL database for one configuration.
struct PgRun {
    database: ThrowawayDatabase,
    url: String,
    conn: tokio::sync::Mutex<sqlx::PgConnection>,
}

impl PgRun {
    async fn create(admin_url: &str) -> Result<Self> {
        let database = ThrowawayDatabase::create(admin_url, "sb_bench_b3").await?;
        let url = database.url.clone();
        let conn = sqlx::PgConnection::connect(&url).await?;
        Ok(Self {
            database,
            url,
            conn: tokio::sync::Mutex::new(conn),
        })
    }

    /// Backends connected to this database, except our own.
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

// ---------------------------------------------------------------------------
// One configuration.

/// Latencies of the pushes that went one way (to one instance), µs, sorted.
#[derive(Debug, Clone, Default)]
struct WayResult {
    /// Push start → notification read.
    latency_us: Vec<u64>,
    /// Push HTTP round trip.
    http_us: Vec<u64>,
    /// Notification read − push answer read (negative: the doorbell came first).
    gap_us: Vec<i64>,
}

#[derive(Debug, Clone)]
struct RunResult {
    sessions: usize,
    pushes: usize,
    /// One per way pushes went, in the order of `drive`'s `ways`.
    ways: Vec<WayResult>,
    /// Correctness counts (all zero, or the run failed): lost, twice, wrong session.
    faults: [usize; 3],
    setup_secs: f64,
    elapsed: f64,
    /// CPU of the server processes (both instances in the cluster mode).
    server_cpu: f64,
    this_cpu: f64,
    pg_cpu: Option<f64>,
    other_cores: f64,
    /// /proc/loadavg (1, 5, 15 min) at the start and the end of the push phase.
    load: (String, String),
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// One instance: sessions and pushes on the same server.
async fn run_once(cfg: &Config, backend: Backend, n: usize, tck: f64) -> Result<RunResult> {
    let dir = tempfile::Builder::new().prefix("sb-b3-").tempdir()?;
    let pg = match backend {
        Backend::Postgres => {
            let (url, _) = cfg.pg_admin_url.as_ref().context("no PostgreSQL URL")?;
            Some(PgRun::create(url).await?)
        }
        Backend::Sqlite => None,
    };
    let database = match &pg {
        Some(pg) => pg.url.clone(),
        None => dir.path().join("b3.db").display().to_string(),
    };
    let outcome = async {
        let server = ServerProcess::start(&database, dir.path())?;
        let result = drive(
            cfg,
            n,
            tck,
            &server,
            &[&server],
            &server.admin_token,
            pg.as_ref(),
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

/// Two instances on one fresh database of the throwaway cluster: A starts
/// first (and prints the admin token), then B; every session streams on B;
/// pushes alternate between B (same instance, way 0) and A (across, way 1).
async fn run_cluster(cfg: &Config, admin_url: &str, n: usize, tck: f64) -> Result<RunResult> {
    let dir_a = tempfile::Builder::new().prefix("sb-b3-a-").tempdir()?;
    let dir_b = tempfile::Builder::new().prefix("sb-b3-b-").tempdir()?;
    let pg = PgRun::create(admin_url).await?;
    let outcome = async {
        let a = ServerProcess::start(&pg.url, dir_a.path())?;
        let b = match ServerProcess::start_another(&pg.url, dir_b.path()) {
            Ok(b) => b,
            Err(e) => {
                a.stop();
                return Err(e);
            }
        };
        let result = drive(cfg, n, tck, &b, &[&b, &a], &a.admin_token, Some(&pg)).await;
        b.stop();
        a.stop();
        result
    }
    .await;
    pg.drop_database().await;
    outcome
}

/// Which way push `i` goes and which session it rings: pushes go round by
/// round, one per way in each round (ABBA order for two ways, so neither
/// always goes first), and every push of round `r` rings session `r % n`.
fn plan(i: usize, ways: usize, n: usize) -> (usize, usize) {
    let (round, pos) = (i / ways, i % ways);
    let way = if ways == 2 && round % 2 == 1 {
        1 - pos
    } else {
        pos
    };
    (way, round % n)
}

/// Vends `n` endpoints and opens their sessions and streams on `host`, then
/// pushes `cfg.pushes` todos through the API of the servers in `ways` (push
/// `i` as [`plan`] says) and times each to its notification on `host`;
/// checks that every push rang exactly once, on the right session.
async fn drive(
    cfg: &Config,
    n: usize,
    tck: f64,
    host: &ServerProcess,
    ways: &[&ServerProcess],
    admin_token: &str,
    pg: Option<&PgRun>,
) -> Result<RunResult> {
    let pids: Vec<u32> = ways.iter().map(|s| s.pid()).collect();
    let setup_started = Instant::now();
    let endpoints = vend_all(&host.addr, admin_token, n).await?;
    // The sessions must live on `host`: its MCP URLs must point at it.
    let prefix = format!("http://{}/", host.addr);
    ensure!(
        endpoints.iter().all(|e| e.mcp_url.starts_with(&prefix)),
        "vended MCP URLs do not point at {prefix}: {}",
        endpoints[0].mcp_url
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut readers = tokio::task::JoinSet::new();
    let opened = open_all(&endpoints, &tx, &mut readers).await;
    drop(tx);
    if let Err(e) = opened {
        readers.abort_all();
        return Err(e);
    }
    let setup_secs = setup_started.elapsed().as_secs_f64();
    // Whatever arrived while the streams opened (nothing is expected).
    let mut early = Vec::new();
    while let Ok(r) = rx.try_recv() {
        early.push(r);
    }

    let http = http_client(SETUP_CONCURRENCY)?;
    let mut results = vec![WayResult::default(); ways.len()];
    // todo id → (expected session); and everything read, by todo id.
    let mut pushed: HashMap<String, usize> = HashMap::with_capacity(cfg.pushes);
    let mut seen: HashMap<String, Vec<(usize, Instant)>> = HashMap::new();
    let mut others: Vec<String> = Vec::new();
    let mut closed: Vec<String> = Vec::new();
    let mut lost = 0usize;
    let mut absorb = |r: Received,
                      seen: &mut HashMap<String, Vec<(usize, Instant)>>,
                      others: &mut Vec<String>| match r {
        Received::Todo {
            session,
            todo_id,
            at,
        } => seen.entry(todo_id).or_default().push((session, at)),
        Received::Other { session, what } => others.push(format!("session {session}: {what}")),
        Received::Closed { session, why } => closed.push(format!("session {session}: {why}")),
    };
    for r in early {
        absorb(r, &mut seen, &mut others);
    }

    let load_start = loadavg();
    let start = sample(&pids, pg).await?;
    let deadline = (start.at + Duration::from_secs(cfg.seconds)).min(cfg.ends);
    for i in 0..cfg.pushes {
        if Instant::now() >= deadline {
            eprintln!("B3: push phase reached its time limit after {i} pushes");
            break;
        }
        // Paced: push i starts at i × interval (or at once when behind).
        tokio::time::sleep_until((start.at + cfg.interval * i as u32).into()).await;
        let (way, target) = plan(i, ways.len(), n);
        let ep = &endpoints[target];
        let url = format!(
            "http://{}/api/v1/endpoints/{}/todos",
            ways[way].addr, ep.slug
        );
        let body = format!(r#"{{"title":"b3 push {i}"}}"#);
        let t0 = Instant::now();
        let resp = http
            .post(&url)
            .bearer_auth(admin_token)
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await?;
        let t1 = Instant::now();
        ensure!(
            status == 201,
            "push {i}: HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
        let v: Value = serde_json::from_slice(&bytes)?;
        let id = v["todo"]["id"]
            .as_str()
            .or_else(|| v["id"].as_str())
            .with_context(|| format!("push {i}: no todo id in {v}"))?
            .to_owned();
        let r = &mut results[way];
        r.http_us.push(micros(t1 - t0));
        pushed.insert(id.clone(), target);
        // The notification may well have been read before the answer.
        while let Ok(m) = rx.try_recv() {
            absorb(m, &mut seen, &mut others);
        }
        let wait_until = t1 + cfg.wait;
        while !seen.contains_key(&id) {
            let left = wait_until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match tokio::time::timeout(left, rx.recv()).await {
                Ok(Some(m)) => absorb(m, &mut seen, &mut others),
                Ok(None) | Err(_) => break,
            }
        }
        match seen.get(&id).and_then(|v| v.first()) {
            Some((_, at)) => {
                r.latency_us.push(micros(at.saturating_duration_since(t0)));
                r.gap_us.push(if *at >= t1 {
                    micros(*at - t1) as i64
                } else {
                    -(micros(t1 - *at) as i64)
                });
            }
            None => lost += 1,
        }
    }
    let end = sample(&pids, pg).await?;
    let load_end = loadavg();
    // Late or duplicate notifications: give them a moment, then look.
    let settle_until = Instant::now() + Duration::from_millis(500);
    loop {
        let left = settle_until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(r)) => absorb(r, &mut seen, &mut others),
            Ok(None) | Err(_) => break,
        }
    }
    readers.abort_all();
    while readers.join_next().await.is_some() {}

    let done = pushed.len();
    let faults = check(&pushed, &seen, &others, &closed, lost)?;

    for r in &mut results {
        r.latency_us.sort_unstable();
        r.http_us.sort_unstable();
        r.gap_us.sort_unstable();
    }
    let elapsed = (end.at - start.at).as_secs_f64();
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
        sessions: n,
        pushes: done,
        ways: results,
        faults,
        setup_secs,
        elapsed,
        server_cpu,
        this_cpu,
        pg_cpu,
        other_cores,
        load: (load_start, load_end),
    })
}

/// Correctness: exactly one notification per push, on the right session;
/// nothing else on any stream, and no stream ended. The fault counts (lost,
/// twice, wrong session), or an error describing the first problem.
fn check(
    pushed: &HashMap<String, usize>,
    seen: &HashMap<String, Vec<(usize, Instant)>>,
    others: &[String],
    closed: &[String],
    lost: usize,
) -> Result<[usize; 3]> {
    let mut problems = Vec::new();
    let (mut lost_at_end, mut twice, mut wrong) = (0usize, 0usize, 0usize);
    for (id, &target) in pushed {
        match seen.get(id).map(Vec::as_slice) {
            None | Some([]) => {
                lost_at_end += 1;
                problems.push(format!("{id}: no notification (lost)"));
            }
            Some([(session, _)]) if *session == target => {}
            Some([(session, _)]) => {
                wrong += 1;
                problems.push(format!(
                    "{id}: rang session {session}, pushed to session {target}"
                ));
            }
            Some(many) => {
                twice += 1;
                problems.push(format!("{id}: {} notifications", many.len()));
            }
        }
    }
    for id in seen.keys() {
        if !pushed.contains_key(id) {
            problems.push(format!("{id}: a notification for a todo never pushed"));
        }
    }
    problems.extend(others.iter().map(|o| format!("unexpected message: {o}")));
    problems.extend(closed.iter().map(|c| format!("a stream ended: {c}")));
    ensure!(
        problems.is_empty() && lost == 0,
        "{} problem(s) ({lost} not in time, {lost_at_end} lost, {twice} rang more than once, \
         {wrong} on the wrong session), first: {}",
        problems.len(),
        problems.first().map(String::as_str).unwrap_or("")
    );
    Ok([lost_at_end, twice, wrong])
}

// ---------------------------------------------------------------------------
// Report.

fn report(results: &[(Backend, RunResult)], header: &str) -> String {
    let mut md = String::new();
    md.push_str(header);
    md.push_str(
        "\n| backend | streaming sessions (endpoints) | pushes | doorbell latency median / p99 / max \
         (ms) | push HTTP median / p99 (ms) | doorbell − HTTP answer median (ms) | server CPU µs/push | PostgreSQL CPU µs/push \
         | load generator CPU µs/push | push phase (s) | setup (s) | other load (cores) | \
         lost / twice / wrong session |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for (backend, r) in results {
        let per = |cpu: f64| cpu * 1e6 / r.pushes.max(1) as f64;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} / {:.2} / {:.2} | {:.2} / {:.2} | {:+.2} | {:.0} | {} | {:.0} \
             | {:.1} | {:.1} | {:.2} | {} / {} / {} |",
            backend.name(),
            r.sessions,
            r.pushes,
            pct(&r.ways[0].latency_us, 50.0),
            pct(&r.ways[0].latency_us, 99.0),
            pct(&r.ways[0].latency_us, 100.0),
            pct(&r.ways[0].http_us, 50.0),
            pct(&r.ways[0].http_us, 99.0),
            r.ways[0]
                .gap_us
                .get(r.ways[0].gap_us.len() / 2)
                .map_or(f64::NAN, |g| *g as f64 / 1000.0),
            per(r.server_cpu),
            r.pg_cpu
                .map(|c| format!("{:.0}", per(c)))
                .unwrap_or_else(|| "—".into()),
            per(r.this_cpu),
            r.elapsed,
            r.setup_secs,
            r.other_cores,
            r.faults[0],
            r.faults[1],
            r.faults[2],
        );
    }
    md.push_str(
        "\n### Targets (09-quality.md, B3)\n\n| target | backend | sessions | measured | required \
         | result |\n|---|---|---:|---:|---:|---|\n",
    );
    for (backend, r) in results {
        let p99 = pct(&r.ways[0].latency_us, 99.0);
        let _ = writeln!(
            md,
            "| doorbell p99 ≤ 10 ms, one instance | {} | {} | {p99:.2} ms | ≤ 10 ms | {} |",
            backend.name(),
            r.sessions,
            if p99 <= 10.0 { "PASS" } else { "FAIL" }
        );
    }
    md.push_str(
        "| doorbell p99 ≤ 50 ms, across two instances | PostgreSQL | — | see the \
         cross-instance mode (`--cluster`) | ≤ 50 ms | — |\n",
    );
    md
}

// ---------------------------------------------------------------------------

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; everything else comes from the environment.
    if let Err(e) = run().await {
        eprintln!("B3 FAILED: {e:#}");
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
        ],
    )
    .await
}

async fn run() -> Result<()> {
    let cfg = Config::from_env()?;
    if !cfg.cluster {
        ensure!(!cfg.backends.is_empty(), "B3: no backend to run");
    }
    let most = cfg.sessions.iter().copied().max().unwrap_or(0) as u64;
    if let Some(limit) = open_files_limit() {
        ensure!(
            limit >= most + 64,
            "B3: {most} streams need more open files than this process may have ({limit}); \
             raise `ulimit -n`"
        );
    }
    let tck = host::clock_ticks_per_sec();
    if cfg.cluster {
        return cluster_mode(&cfg, tck).await;
    }

    let mut header = String::new();
    let _ = writeln!(header, "### Parameters\n");
    let _ = writeln!(
        header,
        "- streaming sessions: {:?}, one per endpoint ({PER_AGENT} endpoints per agent); \
         {} pushes per configuration, one at a time, one every {} ms at most, round-robin \
         over the endpoints (at most {} s)",
        cfg.sessions,
        cfg.pushes,
        cfg.interval.as_millis(),
        cfg.seconds
    );
    let _ = writeln!(
        header,
        "- server: `{BIN}` (release build), a fresh process and database per configuration, \
         rate limits lifted, default maintenance/presence periods (30 s) and SSE keep-alive \
         (15 s), logging at warn"
    );
    let _ = writeln!(
        header,
        "- client: this process (tokio, 2 worker threads); pushes over one keep-alive \
         connection with the admin token; each stream on its own HTTP/1.1 connection, read \
         by its own task, SSE parsed by hand; latency = push start → the chunk holding the \
         notification with that `meta.todo_id` was read"
    );
    let _ = writeln!(
        header,
        "- CPU per push over the push phase, from /proc/<pid>/stat: the server (including \
         keep-alives and background ticks), the PostgreSQL backends of the database, this \
         load generator; other load = host busy time minus those, in cores"
    );
    if let (true, Some((url, var))) = (cfg.backends.contains(&Backend::Postgres), &cfg.pg_admin_url)
    {
        let settings = pg_settings(url)
            .await
            .unwrap_or_else(|e| format!("unavailable ({e})"));
        let _ = writeln!(
            header,
            "- PostgreSQL ({var}={}): a fresh database per configuration; {settings}",
            redact(url)
        );
    }

    let mut results = Vec::new();
    for &backend in &cfg.backends {
        for &n in &cfg.sessions {
            if Instant::now() >= cfg.ends {
                eprintln!(
                    "B3: B3_TOTAL_SECONDS reached; {} {n} not run",
                    backend.name()
                );
                continue;
            }
            let r = run_once(&cfg, backend, n, tck)
                .await
                .with_context(|| format!("{} with {n} sessions", backend.name()))?;
            eprintln!(
                "B3 {} {n} sessions: {} pushes, latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; \
                 server {:.0} µs/push; setup {:.1} s",
                backend.name(),
                r.pushes,
                pct(&r.ways[0].latency_us, 50.0),
                pct(&r.ways[0].latency_us, 99.0),
                pct(&r.ways[0].latency_us, 100.0),
                r.server_cpu * 1e6 / r.pushes.max(1) as f64,
                r.setup_secs
            );
            results.push((backend, r));
        }
    }
    let md = report(&results, &header);
    println!("{md}");
    if let Some(file) = &cfg.results {
        std::fs::write(file, &md).with_context(|| format!("cannot write {file}"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The cross-instance mode.

const PG_SETTINGS: &[&str] = &[
    "server_version",
    "shared_buffers",
    "synchronous_commit",
    "fsync",
    "wal_sync_method",
    "full_page_writes",
    "autovacuum",
    "max_connections",
    "checkpoint_timeout",
    "max_wal_size",
    "work_mem",
];

/// Two instances on one database of a throwaway cluster, for each session
/// count; records the same-instance and the cross-instance latencies side by
/// side. Every cell runs even when an earlier one failed; fails at the end
/// if any did.
async fn cluster_mode(cfg: &Config, tck: f64) -> Result<()> {
    let started = chrono_now();
    let load_before = loadavg();
    let bin = std::env::var("SWITCHBOARD_BENCH_PG_BIN")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| PG_BIN.into());
    let cluster = tokio::task::spawn_blocking(move || PgCluster::launch(Path::new(&bin)))
        .await?
        .context("starting the throwaway PostgreSQL cluster (SWITCHBOARD_BENCH_PG_BIN)")?;
    eprintln!(
        "B3 cluster: throwaway PostgreSQL on 127.0.0.1:{} in {}",
        cluster.port,
        cluster.dir().display()
    );
    let settings = switchboard::testkit::pg_settings(&cluster.url(), PG_SETTINGS)
        .await
        .unwrap_or_else(|e| format!("unavailable ({e})"));
    let mut cells: Vec<(usize, Result<RunResult, String>)> = Vec::new();
    for &n in &cfg.sessions {
        if Instant::now() >= cfg.ends {
            cells.push((n, Err("not run: B3_TOTAL_SECONDS reached".into())));
            continue;
        }
        let outcome = run_cluster(cfg, &cluster.url(), n, tck).await;
        match outcome {
            Ok(r) => {
                for (way, label) in r.ways.iter().zip(WAYS) {
                    eprintln!(
                        "B3 cluster {n} sessions on B, push on {label}: {} samples, \
                         p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                        way.latency_us.len(),
                        pct(&way.latency_us, 50.0),
                        pct(&way.latency_us, 90.0),
                        pct(&way.latency_us, 99.0),
                        pct(&way.latency_us, 100.0),
                    );
                }
                cells.push((n, Ok(r)));
            }
            Err(e) => {
                eprintln!("B3 cluster {n} sessions: FAILED: {e:#}");
                cells.push((n, Err(format!("{e:#}"))));
            }
        }
    }
    drop(cluster);
    let md = report_cluster(cfg, &cells, &settings, &started, &load_before);
    println!("{md}");
    if let Some(file) = &cfg.results {
        std::fs::write(file, &md).with_context(|| format!("cannot write {file}"))?;
    }
    let failed = cells.iter().filter(|(_, r)| r.is_err()).count();
    ensure!(
        failed == 0,
        "{failed} configuration(s) failed (see the table)"
    );
    Ok(())
}

/// The ways of the cluster mode, in `run_cluster`'s order.
const WAYS: [&str; 2] = ["B (same instance)", "A (across instances)"];

fn chrono_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M:%S UTC"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|| "?".into())
}

fn report_cluster(
    cfg: &Config,
    cells: &[(usize, Result<RunResult, String>)],
    settings: &str,
    started: &str,
    load_before: &str,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## B3 across instances — {started}\n\n\
         Run with `cargo bench --bench b3_doorbell_latency -- --cluster` (see the \
         header of `benches/b3_doorbell_latency.rs` for its environment). Recorded by \
         hand from the bench's output (`B3_RESULTS`); `scripts/bench` runs the \
         single-instance mode only.\n"
    );
    let _ = writeln!(md, "### Parameters\n");
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(
        md,
        "- finished: {}; commit {commit}; {cores} cores, shared with other work; load \
         average (1/5/15 min) before: {load_before}; after: {} (per configuration below)",
        chrono_now(),
        loadavg()
    );
    let _ = writeln!(
        md,
        "- two `switchboard serve` processes, A then B (`{BIN}`, rate limits lifted, \
         logging at warn), on one fresh database per configuration of a throwaway \
         PostgreSQL cluster (initdb, default settings, 127.0.0.1, stopped and deleted at \
         the end): {settings}"
    );
    let _ = writeln!(
        md,
        "- streaming sessions {:?}, all on B, one per endpoint (vended on B); {} pushes per \
         configuration through the REST API with A's first-start admin token, one at a \
         time, paced {} ms apart at most, alternating B, A, A, B, B, A, … (both pushes \
         of a round ring the same session; round r rings session r mod n), so the same \
         machine noise hits both columns; each push waits for its doorbell (at most {} \
         ms) before the next; at most {} s per push phase, {} s in all",
        cfg.sessions,
        cfg.pushes,
        cfg.interval.as_millis(),
        cfg.wait.as_millis(),
        cfg.seconds,
        env_num("B3_TOTAL_SECONDS", 900u64).unwrap_or(900)
    );
    let _ = writeln!(
        md,
        "- latency = push start → the chunk holding the `notifications/claude/channel` \
         message with that `meta.todo_id` was read on B's stream. Push on B: B rings at \
         once. Push on A: A hosts no session, so the ring travels A → `NOTIFY \
         switchboard_bus` → B's listener → B's claim (one guarded UPDATE) → B's stream"
    );
    let _ = writeln!(
        md,
        "- correctness checked per configuration: every push rang exactly once, on the \
         session of its endpoint; none lost, none twice, nothing else on any stream, no \
         stream ended\n"
    );
    md.push_str(
        "| sessions on B | push on | samples | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | \
         push HTTP p50 / p99 (ms) | doorbell − HTTP answer median (ms) |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (n, cell) in cells {
        match cell {
            Ok(r) => {
                for (way, label) in r.ways.iter().zip(WAYS) {
                    let _ = writeln!(
                        md,
                        "| {n} | {label} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} / {:.2} \
                         | {:+.2} |",
                        way.latency_us.len(),
                        pct(&way.latency_us, 50.0),
                        pct(&way.latency_us, 90.0),
                        pct(&way.latency_us, 99.0),
                        pct(&way.latency_us, 100.0),
                        pct(&way.http_us, 50.0),
                        pct(&way.http_us, 99.0),
                        way.gap_us
                            .get(way.gap_us.len() / 2)
                            .map_or(f64::NAN, |g| *g as f64 / 1000.0),
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(md, "| {n} | — | — | FAILED: {} |||||", e.replace('|', "/"));
            }
        }
    }
    md.push_str(
        "\n| sessions on B | pushes | lost / twice / wrong session | load average at start → \
         end of the push phase | other load (cores) | servers A+B CPU µs/push | PostgreSQL \
         CPU µs/push | push phase (s) | setup (s) |\n\
         |---:|---:|---|---|---:|---:|---:|---:|---:|\n",
    );
    for (n, cell) in cells {
        if let Ok(r) = cell {
            let per = |cpu: f64| cpu * 1e6 / r.pushes.max(1) as f64;
            let _ = writeln!(
                md,
                "| {n} | {} | {} / {} / {} | {} → {} | {:.2} | {:.0} | {} | {:.1} | {:.1} |",
                r.pushes,
                r.faults[0],
                r.faults[1],
                r.faults[2],
                r.load.0,
                r.load.1,
                r.other_cores,
                per(r.server_cpu),
                r.pg_cpu
                    .map(|c| format!("{:.0}", per(c)))
                    .unwrap_or_else(|| "—".into()),
                r.elapsed,
                r.setup_secs,
            );
        }
    }
    md.push_str(
        "\n### Targets (09-quality.md, B3)\n\n| target | sessions | measured p99 | required | \
         result |\n|---|---:|---:|---:|---|\n",
    );
    for (n, cell) in cells {
        match cell {
            Ok(r) => {
                let p99 = pct(&r.ways[1].latency_us, 99.0);
                let _ = writeln!(
                    md,
                    "| doorbell p99 ≤ 50 ms, across two instances | {n} | {p99:.2} ms | ≤ 50 ms \
                     | {} |",
                    if p99 <= 50.0 { "PASS" } else { "FAIL" }
                );
            }
            Err(_) => {
                let _ = writeln!(
                    md,
                    "| doorbell p99 ≤ 50 ms, across two instances | {n} | — | ≤ 50 ms | FAILED |"
                );
            }
        }
    }
    md
}
