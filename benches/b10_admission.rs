//! B10 (`09-quality.md`, "Raised targets"): the store's claim_next →
//! complete loop with priority and admission control on, beside the same
//! loop with them off, in one run, on SQLite and PostgreSQL. Target: on
//! ≥ 90 % of off at c = 4 on both backends.
//!
//! - **off**: no admission rows, every todo at priority 0 (the loop as it
//!   was before admission and priority);
//! - **on**: admission limits that never bind but are evaluated on every
//!   claim: the endpoint has `max_in_flight = 1000` and a window of 1 h
//!   with `max_claims_per_window = 10 000 000` (so every claim takes an
//!   in-flight slot and charges the window), its queue `inbox` has
//!   `max_in_flight = 1000`; the preloaded todos' priorities spread
//!   uniformly over 0..10 (`B10_PRIORITIES`).
//!
//! Both configurations run from the same preload (the same pending todos,
//! only their priorities differ), for the same time, in alternating pairs
//! (off, on; on, off; …) so drift on a shared machine hits both alike.
//! SQLite: a fresh temp file per run. PostgreSQL: one fresh database on the
//! server, reset before every run (TRUNCATE, reload, the admission rows,
//! VACUUM ANALYZE, CHECKPOINT), the store's own pool.
//!
//! Runs last a minute by default, as `09-quality.md` asks of compared runs.
//! Each starts right after a CHECKPOINT, and with priorities spread the
//! claims touch pages all over the table, so for its first ~15 s a run
//! writes a full-page image of nearly every page it touches (PostgreSQL
//! with priorities alone: ~7.5 KB of WAL a loop, then ~3 KB once the pages
//! are imaged, as without priorities). Twenty-second runs weighed that
//! burst three times as much as a minute does (a server checkpoints every
//! five minutes by default). The WAL column shows it per run.
//!
//! Figures: loops/s per run and their median per configuration, the ratio
//! of the medians (the target) and the median of the per-pair ratios (the
//! same comparison, less exposed to drift between pairs), CPU per loop of
//! the bench process (on SQLite: the database engine too) and of the
//! PostgreSQL server (backends of the bench database + background
//! processes).
//!
//! Correctness, after every run: every done todo was claimed once and has
//! one closed attempt, none lost or left claimed, done = the loops the
//! workers counted; with admission on, the window charged exactly one claim
//! per loop and no pending todo outranks a done one (claims took the
//! highest priority first).
//!
//! Liveness: the preload never runs dry and no limit binds, so an empty
//! answer from claim_next is spurious (the store gives one when a claim
//! lost the admission race, an in-flight slot or the window's last claim,
//! 9 times in a row). The workers count them and ask again; the report
//! lists them per run, with the transactions PostgreSQL rolled back per
//! 1 000 loops (each lost race is one).
//!
//! Configuration (environment): `B10_SECONDS` (per run, default 60:
//! the spec's shortest comparable run, see below),
//! `B10_PAIRS` (default 3), `B10_CONCURRENCY` (default 4),
//! `B10_BACKENDS` (default `sqlite,postgres`), `B10_PG_PRELOAD` (default
//! 300 000), `B10_SQLITE_PRELOAD` (default 1 500 000), `B10_PRIORITIES`
//! (default 10; 1 puts every todo at priority 0), `B10_LIMITS` (what "on"
//! sets: `none` or some of `endpoint-in-flight,window,queue-in-flight`,
//! default all three; fewer tell where the cost is), `B10_EXPLAIN=1` (after every PostgreSQL run, EXPLAIN
//! (ANALYZE, BUFFERS) of the store's fused claim, its custom and its generic plan,
//! `statements::claim_pending_with_attempt`, rolled back, to stderr),
//! `B10_RESULTS` (also write the Markdown report there). PostgreSQL:
//! `SWITCHBOARD_BENCH_DATABASE_URL`, else `SWITCHBOARD_TEST_DATABASE_URL`
//! (`scripts/bench` starts a throwaway cluster with default settings);
//! without either, only SQLite runs.
//!
//! Exits non-zero when a correctness check fails or a preload ran dry; a
//! missed target is reported in the table, not by the exit code.

#[path = "common/host.rs"]
mod host;
#[path = "common/queue_loop.rs"]
mod queue_loop;

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use queue_loop::{
    LEASE_MS, PG_PRELOAD, Registered, SQLITE_PRELOAD, check_todos, env_num, join_workers, median,
    now_ms, pg_pids, register,
};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AnyPool, AssertSqlSafe, Connection, Row};
use switchboard::clock::SystemClock;
use switchboard::domain::admission::Limits;
use switchboard::store::prelude::*;
use switchboard::store::sql::DatabaseLocation;
use switchboard::store::sql::statements::{self, ClaimScope};
use switchboard::store::{Caller, ClaimOptions, Finish, SqlStore, StoreOptions};
use switchboard::testkit::{StorePeek, ThrowawayDatabase};

struct Config {
    seconds: u64,
    pairs: usize,
    concurrency: usize,
    pg_preload: i64,
    sqlite_preload: i64,
    priorities: i64,
    run_sqlite: bool,
    pg_url: Option<(String, &'static str)>,
    explain: bool,
    limits: Vec<Limit>,
    results: Option<String>,
}

impl Config {
    fn from_env() -> Result<Self> {
        let backends = std::env::var("B10_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".into());
        let backends: Vec<String> = backends
            .split(',')
            .map(|s| s.trim().to_lowercase())
            .collect();
        let pg_url = [
            "SWITCHBOARD_BENCH_DATABASE_URL",
            "SWITCHBOARD_TEST_DATABASE_URL",
        ]
        .into_iter()
        .find_map(|name| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| (v, name))
        });
        let cfg = Self {
            seconds: env_num("B10_SECONDS", 60)?,
            pairs: env_num("B10_PAIRS", 3)?,
            concurrency: env_num("B10_CONCURRENCY", 4)?,
            pg_preload: env_num("B10_PG_PRELOAD", 300_000)?,
            sqlite_preload: env_num("B10_SQLITE_PRELOAD", 1_500_000)?,
            priorities: env_num("B10_PRIORITIES", 10)?,
            run_sqlite: backends.iter().any(|b| b == "sqlite"),
            pg_url: pg_url.filter(|_| backends.iter().any(|b| b == "postgres")),
            explain: std::env::var("B10_EXPLAIN").is_ok_and(|v| v == "1"),
            limits: Limit::parse(
                &std::env::var("B10_LIMITS")
                    .unwrap_or_else(|_| Limit::ALL.map(Limit::key).join(",")),
            )?,
            results: std::env::var("B10_RESULTS").ok().filter(|v| !v.is_empty()),
        };
        ensure!(
            (1..=3600).contains(&cfg.seconds),
            "B10_SECONDS must be 1..=3600"
        );
        ensure!((1..=20).contains(&cfg.pairs), "B10_PAIRS must be 1..=20");
        ensure!(
            (1..=64).contains(&cfg.concurrency),
            "B10_CONCURRENCY must be 1..=64"
        );
        ensure!(
            cfg.pg_preload > 0 && cfg.sqlite_preload > 0,
            "preloads must be positive"
        );
        ensure!(
            (1..=1_000_000).contains(&cfg.priorities),
            "B10_PRIORITIES must be 1..=1000000"
        );
        Ok(cfg)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    On,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Self::Off => "off (no admission rows, priority 0)",
            Self::On => "on (non-binding limits, priorities 0..n)",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
        }
    }
}

/// The limits the "on" configuration sets (`B10_LIMITS`, default all
/// three): evaluated on every claim (an in-flight slot taken, the window
/// charged), never binding. Fewer of them tell where the cost is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    /// The endpoint's `max_in_flight = 1000`.
    EndpointInFlight,
    /// The endpoint's 1 h window of 10 000 000 claims.
    Window,
    /// Queue `inbox`'s `max_in_flight = 1000`.
    QueueInFlight,
}

impl Limit {
    const ALL: [Limit; 3] = [Self::EndpointInFlight, Self::Window, Self::QueueInFlight];

    fn key(self) -> &'static str {
        match self {
            Self::EndpointInFlight => "endpoint-in-flight",
            Self::Window => "window",
            Self::QueueInFlight => "queue-in-flight",
        }
    }

    fn parse(list: &str) -> Result<Vec<Limit>> {
        if list.trim() == "none" {
            return Ok(Vec::new());
        }
        list.split(',')
            .map(|name| {
                let name = name.trim();
                Self::ALL
                    .into_iter()
                    .find(|l| l.key() == name)
                    .ok_or_else(|| {
                        anyhow!(
                            "B10_LIMITS: unknown limit {name:?}; expected none or some of {}",
                            Self::ALL.map(Limit::key).join(", ")
                        )
                    })
            })
            .collect()
    }
}

async fn set_limits(store: &SqlStore, reg: &Registered, limits: &[Limit]) -> Result<()> {
    let ep = &reg.caller.endpoint_id;
    let endpoint = Limits {
        max_in_flight: limits.contains(&Limit::EndpointInFlight).then_some(1000),
        window: limits
            .contains(&Limit::Window)
            .then_some(Duration::from_secs(3600)),
        max_claims_per_window: limits.contains(&Limit::Window).then_some(10_000_000),
        ..Limits::default()
    };
    let queue = Limits {
        max_in_flight: limits.contains(&Limit::QueueInFlight).then_some(1000),
        ..Limits::default()
    };
    store
        .set_admission(&reg.human_id, ep, None, &endpoint)
        .await?;
    store
        .set_admission(&reg.human_id, ep, Some("inbox"), &queue)
        .await?;
    Ok(())
}

struct RunResult {
    loops: u64,
    secs: f64,
    client_cpu: f64,
    pg_cpu: Option<f64>,
    /// claim_next answers of "nothing to claim" while work was pending.
    empties: u64,
    /// PostgreSQL: transactions of the bench database rolled back during
    /// the run (a claim that lost an in-flight slot or the window's last
    /// claim to a concurrent claim is undone and read again).
    rollbacks: Option<i64>,
    /// PostgreSQL: WAL bytes and full-page images written during the run
    /// (the throwaway cluster's, so the bench's own).
    wal: Option<Wal>,
    /// The bench process's I/O calls and bytes (on SQLite, the database
    /// engine's page reads, WAL writes and checkpoints).
    io: host::ProcessIo,
}

/// The cluster's WAL counters (`pg_stat_wal`).
#[derive(Clone, Copy)]
struct Wal {
    bytes: i64,
    full_pages: i64,
}

impl RunResult {
    fn rate(&self) -> f64 {
        self.loops as f64 / self.secs
    }
}

/// CPU ticks of this process and of the PostgreSQL processes at one moment.
struct Sample {
    at: Instant,
    self_ticks: u64,
    pg: Vec<(String, u64)>,
    rollbacks: Option<i64>,
    wal: Option<Wal>,
    io: host::ProcessIo,
}

async fn sample(pg: Option<&PgPool>) -> Result<Sample> {
    let mut ticks = Vec::new();
    let mut rollbacks = None;
    let mut wal = None;
    if let Some(admin) = pg {
        let row = sqlx::query("SELECT CAST(wal_bytes AS BIGINT), wal_fpi FROM pg_stat_wal")
            .fetch_one(admin)
            .await?;
        wal = Some(Wal {
            bytes: row.try_get(0)?,
            full_pages: row.try_get(1)?,
        });
        // Backends report their counters at most once a second; a run's
        // count is exact to within that.
        rollbacks = Some(
            sqlx::query(
                "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()",
            )
            .fetch_one(admin)
            .await?
            .try_get::<i64, _>(0)?,
        );
        for (pid, _) in pg_pids(admin).await? {
            if let Some(t) = host::process_ticks(&pid) {
                ticks.push((pid, t));
            }
        }
    }
    Ok(Sample {
        at: Instant::now(),
        self_ticks: host::process_ticks("self").unwrap_or(0),
        pg: ticks,
        rollbacks,
        wal,
        io: host::ProcessIo::of("self"),
    })
}

fn result(start: &Sample, end: &Sample, loops: u64, tck: f64, pg: bool) -> RunResult {
    let pg_cpu = pg.then(|| {
        end.pg
            .iter()
            .map(|(pid, t)| {
                let before = start.pg.iter().find(|(p, _)| p == pid).map_or(0, |s| s.1);
                t.saturating_sub(before)
            })
            .sum::<u64>() as f64
            / tck
    });
    RunResult {
        loops,
        secs: end.at.duration_since(start.at).as_secs_f64(),
        client_cpu: end.self_ticks.saturating_sub(start.self_ticks) as f64 / tck,
        pg_cpu,
        empties: 0,
        rollbacks: None,
        wal: start.wal.zip(end.wal).map(|(a, b)| Wal {
            bytes: b.bytes - a.bytes,
            full_pages: b.full_pages - a.full_pages,
        }),
        io: start.io.until(&end.io),
    }
}

/// One agent: claim_next (the whole scope) → complete, until `deadline`.
/// An empty answer is counted in `empties` and the agent asks again: the
/// preload never runs dry (checked after the run) and no limit binds, so
/// every empty answer is a spurious one.
async fn worker(
    store: Arc<SqlStore>,
    caller: Caller,
    deadline: Instant,
    empties: Arc<AtomicU64>,
) -> Result<u64> {
    let mut loops = 0;
    while Instant::now() < deadline {
        let Some(claimed) = store
            .claim_next(&caller, None, ClaimOptions::default())
            .await?
        else {
            empties.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        store
            .complete(&caller, &claimed.todo.id, Finish::default())
            .await?;
        loops += 1;
    }
    Ok(loops)
}

/// `conc` workers for `seconds`, timed and charged.
async fn drive(
    store: &Arc<SqlStore>,
    caller: &Caller,
    cfg: &Config,
    pg: Option<&PgPool>,
    tck: f64,
) -> Result<RunResult> {
    let (claims_before, finishes_before) = (store.claim_batches(), store.finish_batches());
    let start = sample(pg).await?;
    let deadline = start.at + Duration::from_secs(cfg.seconds);
    let empties = Arc::new(AtomicU64::new(0));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..cfg.concurrency {
        set.spawn(worker(
            store.clone(),
            caller.clone(),
            deadline,
            empties.clone(),
        ));
    }
    let loops = join_workers(set, Duration::from_secs(cfg.seconds + 120)).await?;
    let end = sample(pg).await?;
    let (claims, finishes) = (store.claim_batches(), store.finish_batches());
    if pg.is_some() {
        // Group commit (PostgreSQL): how much of the loop ran in batches.
        eprintln!(
            "  {loops} loops: {} claims served by {} batch statements, {} completes by {}",
            claims.1 - claims_before.1,
            claims.0 - claims_before.0,
            finishes.1 - finishes_before.1,
            finishes.0 - finishes_before.0,
        );
    }
    let mut res = result(&start, &end, loops, tck, pg.is_some());
    res.empties = empties.load(Ordering::Relaxed);
    if let (Some(a), Some(b)) = (start.rollbacks, end.rollbacks) {
        res.rollbacks = Some(b - a);
    }
    Ok(res)
}

/// [`check_todos`], and what admission and priority add: with them on, the
/// endpoint's window was charged once per loop and no pending todo outranks
/// a done one; with them off, nothing was set.
async fn check(
    pool: &AnyPool,
    reg: &Registered,
    mode: Mode,
    limits: &[Limit],
    preload: i64,
    loops: u64,
) -> Result<()> {
    check_todos(pool, preload, loops, true).await?;
    ensure!(
        loops < preload as u64,
        "the {preload} preloaded todos ran out; raise the preload"
    );
    let admission_rows = queue_loop::count(pool, "SELECT COUNT(*) FROM admission").await?;
    match mode {
        Mode::Off => ensure!(admission_rows == 0, "off: {admission_rows} admission rows"),
        Mode::On if limits.contains(&Limit::Window) => {
            let charged: i64 = sqlx::query(
                "SELECT CAST(COALESCE(SUM(claims), 0) AS BIGINT) FROM admission_windows \
                 WHERE endpoint_id = $1 AND queue = ''",
            )
            .bind(&reg.caller.endpoint_id)
            .fetch_one(pool)
            .await?
            .try_get(0)?;
            ensure!(
                charged == loops as i64,
                "on: the window was charged {charged} claims for {loops} loops"
            );
        }
        Mode::On => {}
    }
    let outranked = queue_loop::count(
        pool,
        "SELECT COUNT(*) FROM todos WHERE state = 'pending' AND priority > \
         (SELECT MIN(priority) FROM todos WHERE state = 'done')",
    )
    .await?;
    ensure!(
        outranked == 0,
        "{outranked} pending todos outrank a done one (claim order broken)"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// SQLite: a fresh file per run.

async fn sqlite_run(cfg: &Config, mode: Mode, tck: f64) -> Result<RunResult> {
    let dir = tempfile::Builder::new().prefix("sb-b10-").tempdir()?;
    let store = Arc::new(
        SqlStore::connect(
            &DatabaseLocation::Sqlite(dir.path().join("bench.db")),
            Arc::new(SystemClock),
            &StoreOptions::default(),
        )
        .await?,
    );
    store.migrate(None).await?;
    let reg = register(&store).await?;
    sqlx::query(AssertSqlSafe(SQLITE_PRELOAD.as_str()))
        .bind(&reg.caller.endpoint_id)
        .bind(now_ms() - cfg.sqlite_preload - 1000)
        .bind(cfg.sqlite_preload)
        .bind(priorities(cfg, mode))
        .execute(store.pool())
        .await?;
    if mode == Mode::On {
        set_limits(&store, &reg, &cfg.limits).await?;
    }
    sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(store.pool())
        .await?;
    let res = drive(&store, &reg.caller, cfg, None, tck).await?;
    check(
        store.pool(),
        &reg,
        mode,
        &cfg.limits,
        cfg.sqlite_preload,
        res.loops,
    )
    .await?;
    store.close().await;
    drop(dir);
    Ok(res)
}

fn priorities(cfg: &Config, mode: Mode) -> i64 {
    match mode {
        Mode::Off => 1,
        Mode::On => cfg.priorities,
    }
}

// ---------------------------------------------------------------------------
// PostgreSQL: one fresh database, reset before every run.

struct Pg {
    database: ThrowawayDatabase,
    store: Arc<SqlStore>,
    reg: Registered,
    admin: PgPool,
}

impl Pg {
    async fn open(url: &str) -> Result<Self> {
        let database = ThrowawayDatabase::create(url, "sb_bench10").await?;
        let store = SqlStore::connect(
            &DatabaseLocation::Postgres(database.url.clone()),
            Arc::new(SystemClock),
            &StoreOptions::default(),
        )
        .await?;
        store.migrate(None).await?;
        let reg = register(&store).await?;
        let admin = PgPoolOptions::new()
            .max_connections(2)
            .connect(&database.url)
            .await?;
        Ok(Self {
            database,
            store: Arc::new(store),
            reg,
            admin,
        })
    }

    async fn reset(&self, cfg: &Config, mode: Mode) -> Result<()> {
        sqlx::raw_sql("TRUNCATE todo_attempts, todos; DELETE FROM admission")
            .execute(&self.admin)
            .await?;
        sqlx::query(PG_PRELOAD)
            .bind(&self.reg.caller.endpoint_id)
            .bind(now_ms() - cfg.pg_preload - 1000)
            .bind(cfg.pg_preload)
            .bind(priorities(cfg, mode))
            .execute(&self.admin)
            .await?;
        if mode == Mode::On {
            set_limits(&self.store, &self.reg, &cfg.limits).await?;
        }
        // As B1: the emptied attempt table is not vacuumed (see B1's reset).
        for sql in ["VACUUM ANALYZE todos", "ANALYZE admission", "CHECKPOINT"] {
            sqlx::raw_sql(sql).execute(&self.admin).await?;
        }
        Ok(())
    }

    async fn run(&self, cfg: &Config, mode: Mode, tck: f64) -> Result<RunResult> {
        self.reset(cfg, mode).await?;
        self.store.open_hot_connections(cfg.concurrency).await?;
        let res = drive(&self.store, &self.reg.caller, cfg, Some(&self.admin), tck).await?;
        check(
            self.store.pool(),
            &self.reg,
            mode,
            &cfg.limits,
            cfg.pg_preload,
            res.loops,
        )
        .await?;
        if cfg.explain {
            eprintln!(
                "EXPLAIN (ANALYZE, BUFFERS) of the fused claim after the {} run:\n{}",
                mode.short(),
                self.explain_claim().await?
            );
        }
        Ok(res)
    }

    /// The store's PostgreSQL claim (`claim_pending_with_attempt`), analysed
    /// and rolled back: planned for its parameters, and as the generic plan
    /// that the store's prepared statement may settle on after five runs.
    async fn explain_claim(&self) -> Result<String> {
        let custom = self.explain_claim_as("auto").await?;
        let generic = self.explain_claim_as("force_generic_plan").await?;
        Ok(format!(
            "-- custom plan:\n{custom}\n-- generic plan (force_generic_plan):\n{generic}"
        ))
    }

    async fn explain_claim_as(&self, plan_cache_mode: &str) -> Result<String> {
        let mut conn = self.admin.acquire().await?;
        let mut tx = conn.begin().await?;
        // The hot pool's session settings (`store/sql/postgres/hot.rs`), so
        // the plan shown is the one the store's claim runs.
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SET LOCAL plan_cache_mode = {plan_cache_mode}; SET LOCAL enable_seqscan = off; \
             SET LOCAL enable_bitmapscan = off; SET LOCAL jit = off"
        )))
        .execute(&mut *tx)
        .await?;
        let now = now_ms();
        let rows = sqlx::query(AssertSqlSafe(format!(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {}",
            statements::claim_pending_with_attempt(ClaimScope::AnyQueue)
        )))
        .bind(now)
        .bind(self.reg.caller.owner())
        .bind(now + LEASE_MS)
        .bind(None::<String>)
        .bind(&self.reg.caller.endpoint_id)
        .bind(None::<String>)
        .fetch_all(&mut *tx)
        .await?;
        tx.rollback().await?;
        let mut out = String::new();
        for r in rows {
            out.push_str(&r.try_get::<String, _>(0)?);
            out.push('\n');
        }
        Ok(out)
    }

    async fn settings(&self) -> Result<String> {
        switchboard::testkit::pg_settings(
            &self.database.url,
            &[
                "server_version",
                "shared_buffers",
                "synchronous_commit",
                "autovacuum",
            ],
        )
        .await
    }

    async fn drop_database(self) {
        self.store.close().await;
        self.admin.close().await;
        let _ = self.database.drop_database().await;
    }
}

// ---------------------------------------------------------------------------

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("B10 FAILED: {e:#}");
        std::process::exit(1);
    }
}

async fn run() -> Result<()> {
    let cfg = Config::from_env()?;
    let pg = match &cfg.pg_url {
        Some((url, _)) => Some(Pg::open(url).await?),
        None => None,
    };
    let outcome = measure(&cfg, pg.as_ref()).await;
    if let Some(pg) = pg {
        pg.drop_database().await;
    }
    let (md, all_pass) = outcome?;
    println!("{md}");
    if let Some(file) = &cfg.results {
        std::fs::write(file, &md).with_context(|| format!("cannot write {file}"))?;
    }
    if !all_pass {
        eprintln!("B10: a target was missed (see the table); correctness checks passed.");
    }
    Ok(())
}

/// Per backend, per pair: (off, on).
type Pairs = Vec<(RunResult, RunResult)>;

async fn measure(cfg: &Config, pg: Option<&Pg>) -> Result<(String, bool)> {
    let tck = host::clock_ticks_per_sec();
    let mut md = String::new();
    let _ = writeln!(md, "### Parameters\n");
    let _ = writeln!(
        md,
        "- {} pairs of runs per backend, {} s each, concurrency {}; the order alternates \
         (off, on; on, off; …); both configurations start from the same preload",
        cfg.pairs, cfg.seconds, cfg.concurrency
    );
    let _ = writeln!(
        md,
        "- off: no admission rows, every todo at priority 0; on: {} (never binding, evaluated \
         on every claim: a slot taken, the window charged), priorities spread over 0..{}",
        if cfg.limits.is_empty() {
            "no admission limits (B10_LIMITS=none)".to_owned()
        } else {
            cfg.limits
                .iter()
                .map(|l| match l {
                    Limit::EndpointInFlight => "endpoint max_in_flight = 1000",
                    Limit::Window => "endpoint window of 1 h, max_claims_per_window = 10 000 000",
                    Limit::QueueInFlight => "queue `inbox` max_in_flight = 1000",
                })
                .collect::<Vec<_>>()
                .join(", ")
        },
        cfg.priorities
    );
    let mut backends = Vec::new();
    if cfg.run_sqlite {
        backends.push(Backend::Sqlite);
        let _ = writeln!(
            md,
            "- SQLite: a fresh temp file per run, {} pending todos preloaded; the store's \
             defaults (WAL, synchronous=NORMAL, its writer thread)",
            cfg.sqlite_preload
        );
    }
    match (pg, &cfg.pg_url) {
        (Some(pg), Some((url, var))) => {
            backends.push(Backend::Postgres);
            let _ = writeln!(
                md,
                "- PostgreSQL ({var}={}): fresh database, before every run TRUNCATE + reload \
                 of {} pending todos + the admission rows + VACUUM ANALYZE todos + ANALYZE \
                 admission + CHECKPOINT; the store's pool ({} connections); {}",
                DatabaseLocation::Postgres(url.clone()).redacted(),
                cfg.pg_preload,
                StoreOptions::default().max_connections,
                pg.settings().await?
            );
        }
        _ => {
            let _ = writeln!(md, "- PostgreSQL: NOT RUN (no database URL)");
            eprintln!("B10: no PostgreSQL URL: running SQLite only");
        }
    }
    let _ = writeln!(
        md,
        "- CPU: bench process = /proc/self/stat (on SQLite the engine too); PostgreSQL = \
         the backends of the bench database + the background processes"
    );

    let mut all: Vec<(Backend, Pairs)> = Vec::new();
    let total = backends.len() * cfg.pairs * 2;
    let mut n = 0;
    for &backend in &backends {
        let mut pairs = Vec::new();
        for pair in 0..cfg.pairs {
            let order = if pair % 2 == 0 {
                [Mode::Off, Mode::On]
            } else {
                [Mode::On, Mode::Off]
            };
            let mut off = None;
            let mut on = None;
            for mode in order {
                n += 1;
                let res = match backend {
                    Backend::Sqlite => sqlite_run(cfg, mode, tck).await,
                    Backend::Postgres => match pg {
                        Some(pg) => pg.run(cfg, mode, tck).await,
                        None => Err(anyhow!("no PostgreSQL")),
                    },
                }
                .with_context(|| {
                    format!("{} {} pair {}", backend.name(), mode.short(), pair + 1)
                })?;
                eprintln!(
                    "[{n}/{total}] {} {} pair {}: {:.0} loops/s ({} loops in {:.1} s), bench CPU \
                     {:.0} µs/loop, PG CPU {}, WAL {}, {} empty answers, {} rollbacks, I/O {} — check OK",
                    backend.name(),
                    mode.short(),
                    pair + 1,
                    res.rate(),
                    res.loops,
                    res.secs,
                    res.client_cpu * 1e6 / res.loops.max(1) as f64,
                    res.pg_cpu
                        .map(|c| format!("{:.0} µs/loop", c * 1e6 / res.loops.max(1) as f64))
                        .unwrap_or_else(|| "—".into()),
                    res.wal.map_or("—".into(), |w| wal_per_loop(w, res.loops)),
                    res.empties,
                    res.rollbacks.map_or("—".into(), |r| r.to_string()),
                    io_per_loop(&res.io, res.loops),
                );
                match mode {
                    Mode::Off => off = Some(res),
                    Mode::On => on = Some(res),
                }
            }
            pairs.push((off.expect("ran"), on.expect("ran")));
        }
        all.push((backend, pairs));
    }
    Ok(report(cfg, md, &all))
}

/// The bench process's reads and writes a loop: calls, and KiB.
fn io_per_loop(io: &host::ProcessIo, loops: u64) -> String {
    let loops = loops.max(1) as f64;
    format!(
        "{:.2} reads ({:.1} KiB), {:.2} writes ({:.1} KiB) a loop",
        io.read_calls as f64 / loops,
        io.read_bytes as f64 / 1024.0 / loops,
        io.write_calls as f64 / loops,
        io.written_bytes as f64 / 1024.0 / loops,
    )
}

/// WAL bytes per loop and full-page images per 1 000 loops.
fn wal_per_loop(wal: Wal, loops: u64) -> String {
    let loops = loops.max(1) as f64;
    format!(
        "{:.0} B/loop ({:.0})",
        wal.bytes as f64 / loops,
        wal.full_pages as f64 * 1000.0 / loops
    )
}

/// [`wal_per_loop`] of the median run by WAL bytes per loop.
fn median_wal(runs: &[&RunResult]) -> String {
    let mut per_loop: Vec<(f64, Wal, u64)> = runs
        .iter()
        .filter_map(|r| {
            r.wal
                .map(|w| (w.bytes as f64 / r.loops.max(1) as f64, w, r.loops))
        })
        .collect();
    if per_loop.is_empty() {
        return "—".into();
    }
    per_loop.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (_, wal, loops) = per_loop[per_loop.len() / 2];
    wal_per_loop(wal, loops)
}

fn report(cfg: &Config, mut md: String, all: &[(Backend, Pairs)]) -> (String, bool) {
    md.push_str(
        "\n| backend | configuration | concurrency | loops/s median | runs (loops/s, by pair) \
         | bench CPU µs/loop | PostgreSQL CPU µs/loop | empty answers (by pair) \
         | PostgreSQL rollbacks per 1 000 loops | PostgreSQL WAL per loop (full-page images \
         per 1 000 loops) |\n|---|---|---:|---:|---|---:|---:|---|---:|---:|\n",
    );
    let per_loop = |runs: &[&RunResult], f: &dyn Fn(&RunResult) -> Option<f64>| {
        let v: Option<Vec<f64>> = runs
            .iter()
            .map(|r| f(r).map(|x| x * 1e6 / r.loops.max(1) as f64))
            .collect();
        v.map_or("—".into(), |v| format!("{:.0}", median(&v)))
    };
    let mut targets = String::new();
    let mut answers = String::new();
    let mut all_pass = true;
    for (backend, pairs) in all {
        let mut medians = [0.0; 2];
        let mut empties = [0_u64; 2];
        for (i, mode) in [Mode::Off, Mode::On].into_iter().enumerate() {
            let runs: Vec<&RunResult> = pairs
                .iter()
                .map(|(off, on)| if mode == Mode::Off { off } else { on })
                .collect();
            let rates: Vec<f64> = runs.iter().map(|r| r.rate()).collect();
            medians[i] = median(&rates);
            let rollbacks: Option<Vec<f64>> = runs
                .iter()
                .map(|r| {
                    r.rollbacks
                        .map(|n| n as f64 * 1000.0 / r.loops.max(1) as f64)
                })
                .collect();
            empties[i] = runs.iter().map(|r| r.empties).sum();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} |",
                backend.name(),
                mode.name(),
                cfg.concurrency,
                medians[i],
                rates
                    .iter()
                    .map(|r| format!("{r:.0}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                per_loop(&runs, &|r| Some(r.client_cpu)),
                per_loop(&runs, &|r| r.pg_cpu),
                runs.iter()
                    .map(|r| r.empties.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                rollbacks.map_or("—".into(), |v| format!("{:.1}", median(&v))),
                median_wal(&runs),
            );
        }
        let ratio = medians[1] / medians[0];
        let pair_ratios: Vec<f64> = pairs
            .iter()
            .map(|(off, on)| on.rate() / off.rate())
            .collect();
        let pass = ratio >= 0.9;
        all_pass &= pass;
        let _ = writeln!(
            targets,
            "| {} | {} | {:.0} | {:.0} | {:.0} % | {} | ≥ 90 % | {} |",
            backend.name(),
            cfg.concurrency,
            medians[1],
            medians[0],
            ratio * 100.0,
            pair_ratios
                .iter()
                .map(|r| format!("{:.0} %", r * 100.0))
                .collect::<Vec<_>>()
                .join(", "),
            if pass { "PASS" } else { "FAIL" }
        );
        let live = empties == [0, 0];
        all_pass &= live;
        let _ = writeln!(
            answers,
            "| {} | {} | {} | {} | 0 | {} |",
            backend.name(),
            cfg.concurrency,
            empties[0],
            empties[1],
            if live { "PASS" } else { "FAIL" }
        );
    }
    md.push_str(
        "\n### Target (09-quality.md, B10)\n\n| backend | concurrency | on (median) | off \
         (median) | on / off | per pair | required | result |\n\
         |---|---:|---:|---:|---:|---|---:|---|\n",
    );
    md.push_str(&targets);
    md.push_str(
        "\n### No empty answer while work is pending\n\nEvery run ends with most of its \
         preload pending and no limit binding, so claim_next must never answer \"nothing to \
         claim\" (the store answers so when a claim lost the admission race 9 times in a \
         row; the workers count it and ask again).\n\n\
         | backend | concurrency | empty answers, off | empty answers, on | required | result \
         |\n|---|---:|---:|---:|---:|---|\n",
    );
    md.push_str(&answers);
    (md, all_pass)
}
