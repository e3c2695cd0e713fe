//! B1 (`09-quality.md`): the claim_next → complete loop through the storage
//! layer, on SQLite and PostgreSQL, at concurrency 1, 4 and 16, against the
//! raw SQL floor driven directly on the same database in the same run.
//!
//! Paths measured (every one starts from the same preloaded state):
//!
//! - `store`: `SqlStore::claim_next` (default queue set) + `SqlStore::complete`.
//! - `floor (same SQL)`: the statements the store issues for the pending path
//!   of `claim_next` and for `complete`, with their attempt-record INSERT and
//!   UPDATE and their BEGIN/COMMIT, driven with a plain `PgPool` (one
//!   dedicated connection per task, like pgbench) or a plain one-connection
//!   `SqlitePool` (`BEGIN IMMEDIATE`).
//! - `floor (bare UPDATEs)`, PostgreSQL only: just the claim and complete
//!   UPDATEs, autocommit, no attempt history.
//! - `true floor` (`B1_PATHS` key `true`): the same queue
//!   semantics with nothing extra, on its own minimal table
//!   `floor_todos (id, endpoint_id, queue, state, created_at, owner,
//!   lease_expires_at, attempts, completed_at)` with the one best index
//!   `(endpoint_id, queue, created_at, id) WHERE state = 'pending'`; claim =
//!   `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1)
//!   RETURNING`, complete = one guarded `UPDATE`, autocommit, from the same
//!   sqlx client as the store, one dedicated connection per task. This is
//!   the floor the 80 % target is judged against. On SQLite the same table
//!   and statements (no row locks) run on the worker's own thread through
//!   one `rusqlite` connection behind a mutex: SQLite's own limit, with no
//!   async runtime and no thread hand-off.
//!
//! - `pgbench floor` (`B1_PATHS` key `pgbench`, PostgreSQL only; issue 47):
//!   `pgbench -n -M prepared -c C -j min(C,2) -T B1_SECONDS` running
//!   `bench/floor/claim_complete.pgbench` on the minimal table of
//!   `bench/floor/todos_reset.sql` (rebuilt with `B1_PG_PRELOAD` pending rows
//!   before every run, in a database of its own on the same cluster). The
//!   80 % targets are judged against it, on the whole run and on the last
//!   fifth; the store's own last fifth is held to 90 % of its first.
//!   Its CPU is not sampled (its backends come and go within the run).
//!
//! The floor paths that mirror the store (`same`, `pooled`, `cte`) run the
//! store's own statement texts (`switchboard::store::sql::statements`).
//!
//! Configuration (environment): `B1_SECONDS` (default 20), `B1_REPEATS`
//! (default 3), `B1_CONCURRENCY` (default `1,4,16`), `B1_PG_PRELOAD` and
//! `B1_SQLITE_PRELOAD` (pending todos loaded before every run, default
//! 400 000 and 1 500 000; `B1_SQLITE_FLOOR_PRELOAD`, default 4 000 000, for
//! SQLite's true floor, which runs several times faster), `B1_BACKENDS` (default `sqlite,postgres`),
//! `B1_PATHS` (default `pgbench,store`, interleaved per repeat; also `true`, `same`, `bare`; the diagnostic paths `pooled` and
//! `pooled-noping` drive the same SQL through a `PgPool` acquired per
//! transaction, with and without sqlx's ping on acquire; `cte` does the
//! store's work, attempt history included, as one statement per call),
//! `B1_ANALYZE=1` (analysis run, needs `pg_stat_statements` preloaded, which
//! `BENCH_PG_STAT_STATEMENTS=1 scripts/bench` does: per PostgreSQL run,
//! the top statements by total time with calls and rows, statements and
//! commits per loop, `pg_stat_user_tables` for the queue tables, and
//! `EXPLAIN (ANALYZE, BUFFERS)` of the path's claim before and after the
//! run; written to `B1_ANALYSIS` if set, else stderr),
//! `B1_VACUUM_EVERY=SECONDS` (diagnostic: `VACUUM todos` that often during
//! PostgreSQL runs, standing in for autovacuum), `B1_EXPLAIN=1`
//! (print EXPLAIN ANALYZE of the claim statement after each PostgreSQL store
//! run, to stderr), `B1_RESULTS` (also write the Markdown report there).
//! PostgreSQL: `SWITCHBOARD_BENCH_DATABASE_URL`, else
//! `SWITCHBOARD_TEST_DATABASE_URL`; a fresh database is created on that
//! server and dropped at the end. Without either, only SQLite runs.
//!
//! Exits non-zero when a run's correctness check fails (a todo claimed twice
//! or lost) or the preload ran dry.

#[path = "common/host.rs"]
mod host;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/pg_floor.rs"]
mod pg_floor;
#[path = "common/queue_loop.rs"]
mod queue_loop;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use host::{HostTicks, disk_bytes_written, process_ticks};
use pg_floor::{TRUE_FLOOR_CLAIM, TRUE_FLOOR_PRELOAD, TRUE_FLOOR_SCHEMA};
use queue_loop::{
    LEASE_MS, Registered, count, env_num, join_workers, median, now_ms, pg_pids, register,
};
use sqlx::any::AnyPoolOptions;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions, Postgres};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use sqlx::{AnyPool, AssertSqlSafe, Connection, Row};
use switchboard::clock::SystemClock;
use switchboard::store::Dialect;
use switchboard::store::prelude::*;
use switchboard::store::sql::DatabaseLocation;
use switchboard::store::sql::statements::{self, ClaimScope};
use switchboard::store::{Caller, ClaimOptions, Finish, SqlStore, StoreOptions};
use switchboard::testkit::{StorePeek, ThrowawayDatabase};

// ---------------------------------------------------------------------------
// The store's own statements (`src/store/sql/statements.rs`): the floor paths
// that mirror the store run exactly the store's text, never a copy of it.

/// `$1` now, `$2` owner, `$3` lease expiry, `$4` fence hash (NULL), `$5` endpoint.
fn pg_claim() -> &'static str {
    statements::claim_pending(Dialect::Postgres, ClaimScope::AnyQueue)
}

fn sqlite_claim() -> &'static str {
    statements::claim_pending(Dialect::Sqlite, ClaimScope::AnyQueue)
}

/// Diagnostic (`B1_PATHS=cte`): the claim and its attempt record as ONE
/// statement (a data-modifying CTE), so no BEGIN/COMMIT round trips; `$6`
/// the claimant.
fn pg_claim_cte() -> &'static str {
    statements::claim_pending_with_attempt(ClaimScope::AnyQueue)
}

/// Diagnostic: `complete` and closing its attempt as ONE statement.
fn pg_complete_cte() -> &'static str {
    statements::finish_with_attempt(statements::Ending::Complete)
}

const INSERT_ATTEMPT: &str = statements::OPEN_ATTEMPT;

/// `$1` result, `$2` now, `$3` id, `$4` endpoint, `$5` owner, `$6` fence hash.
fn complete() -> &'static str {
    statements::COMPLETE.as_str()
}

const CLOSE_ATTEMPT: &str = statements::CLOSE_ATTEMPT;

/// The true floor on SQLite: the same minimal table and index as
/// [`TRUE_FLOOR_SCHEMA`], preloaded like [`SQLITE_PRELOAD`].
const SQLITE_TRUE_FLOOR_PRELOAD: &str = "WITH RECURSIVE s(i) AS \
       (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?3) \
     INSERT INTO floor_todos (id, endpoint_id, queue, state, created_at) \
     SELECT printf('td_%032x', i), ?1, 'inbox', 'pending', ?2 + i FROM s";

/// [`TRUE_FLOOR_CLAIM`] without row locks (SQLite has one writer).
const SQLITE_TRUE_FLOOR_CLAIM: &str = "UPDATE floor_todos SET state = 'claimed', owner = ?1, \
       lease_expires_at = ?2, attempts = attempts + 1 \
     WHERE id = (SELECT id FROM floor_todos \
       WHERE endpoint_id = ?3 AND queue = ?4 AND state = 'pending' \
       ORDER BY created_at, id LIMIT 1) \
     RETURNING id";

const SQLITE_TRUE_FLOOR_COMPLETE: &str = "UPDATE floor_todos SET state = 'done', \
       completed_at = ?1, lease_expires_at = NULL WHERE id = ?2 AND state = 'claimed' AND owner = ?3";

// ---------------------------------------------------------------------------
// Configuration.

#[derive(Debug, Clone)]
struct Config {
    seconds: u64,
    repeats: usize,
    concurrency: Vec<usize>,
    pg_preload: i64,
    sqlite_preload: i64,
    /// Rows in the SQLite true floor's own table (it runs several times faster).
    sqlite_floor_preload: i64,
    run_sqlite: bool,
    paths: Vec<Path>,
    pg_admin_url: Option<(String, &'static str)>,
    explain: bool,
    analyze: bool,
    analysis: Option<String>,
    vacuum_every: Option<Duration>,
    results: Option<String>,
}

impl Config {
    fn from_env() -> Result<Self> {
        let backends = std::env::var("B1_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".into());
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
        let concurrency = std::env::var("B1_CONCURRENCY")
            .unwrap_or_else(|_| "1,4,16".into())
            .split(',')
            .map(|s| s.trim().parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .context("B1_CONCURRENCY must be a comma-separated list of numbers")?;
        ensure!(
            !concurrency.is_empty() && concurrency.iter().all(|&c| (1..=64).contains(&c)),
            "B1_CONCURRENCY: each level must be 1..=64"
        );
        let paths = std::env::var("B1_PATHS")
            .unwrap_or_else(|_| "pgbench,store".into())
            .split(',')
            .map(|name| {
                let name = name.trim();
                Path::ALL
                    .into_iter()
                    .find(|p| p.key() == name)
                    .ok_or_else(|| {
                        anyhow!(
                            "B1_PATHS: unknown path {name:?}; expected some of {}",
                            Path::ALL.map(Path::key).join(", ")
                        )
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let cfg = Self {
            seconds: env_num("B1_SECONDS", 20)?,
            repeats: env_num("B1_REPEATS", 3)?,
            concurrency,
            pg_preload: env_num("B1_PG_PRELOAD", 400_000)?,
            sqlite_preload: env_num("B1_SQLITE_PRELOAD", 1_500_000)?,
            sqlite_floor_preload: env_num("B1_SQLITE_FLOOR_PRELOAD", 4_000_000)?,
            run_sqlite: backends.iter().any(|b| b == "sqlite"),
            paths,
            pg_admin_url: pg_url.filter(|_| backends.iter().any(|b| b == "postgres")),
            explain: std::env::var("B1_EXPLAIN").is_ok_and(|v| v == "1"),
            analyze: std::env::var("B1_ANALYZE").is_ok_and(|v| v == "1"),
            analysis: std::env::var("B1_ANALYSIS").ok().filter(|v| !v.is_empty()),
            vacuum_every: match env_num("B1_VACUUM_EVERY", 0.0_f64)? {
                s if s > 0.0 => Some(Duration::from_secs_f64(s)),
                _ => None,
            },
            results: std::env::var("B1_RESULTS").ok().filter(|v| !v.is_empty()),
        };
        ensure!(
            (1..=3600).contains(&cfg.seconds),
            "B1_SECONDS must be 1..=3600"
        );
        ensure!((1..=20).contains(&cfg.repeats), "B1_REPEATS must be 1..=20");
        ensure!(
            cfg.pg_preload > 0 && cfg.sqlite_preload > 0,
            "preloads must be positive"
        );
        Ok(cfg)
    }
}

// ---------------------------------------------------------------------------
// CPU and I/O accounting from /proc.

struct Sample {
    at: Instant,
    self_ticks: u64,
    host: HostTicks,
    /// Bytes written to the host's disks so far.
    disk_written: u64,
    /// pid → (ticks, is a background process rather than a backend of ours).
    pg: HashMap<String, (u64, bool)>,
}

async fn sample(pg: Option<&PgPool>) -> Result<Sample> {
    let mut pg_ticks = HashMap::new();
    if let Some(admin) = pg {
        for (pid, background) in pg_pids(admin).await? {
            if let Some(t) = process_ticks(&pid) {
                pg_ticks.insert(pid, (t, background));
            }
        }
    }
    Ok(Sample {
        at: Instant::now(),
        self_ticks: process_ticks("self").unwrap_or(0),
        host: HostTicks::now(),
        disk_written: disk_bytes_written(),
        pg: pg_ticks,
    })
}

// ---------------------------------------------------------------------------
// What one run measured.

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Path {
    /// pgbench on `bench/floor/` (see the header).
    Pgbench,
    /// The minimal table and statements (see the header).
    TrueFloor,
    Store,
    /// The store without its background vacuum of the queue table
    /// (`StoreOptions::queue_vacuum_claims = None`): the A/B of issue 47.
    StoreNoVacuum,
    /// The store without group commit of `complete` and of claims
    /// (`StoreOptions::group_commit = false`): the A/B of issue 47.
    StoreNoBatch,
    FloorSame,
    FloorBare,
    /// Diagnostic: same SQL through a default `PgPool`, acquire per transaction
    /// (sqlx pings the connection on every acquire).
    FloorPooled,
    /// Diagnostic: as `FloorPooled` with `test_before_acquire(false)`.
    FloorPooledNoPing,
    /// Diagnostic: the store's work with one statement per call (CTEs), autocommit.
    FloorCte,
}

impl Path {
    const ALL: [Path; 10] = [
        Self::Pgbench,
        Self::TrueFloor,
        Self::Store,
        Self::StoreNoVacuum,
        Self::StoreNoBatch,
        Self::FloorSame,
        Self::FloorBare,
        Self::FloorPooled,
        Self::FloorPooledNoPing,
        Self::FloorCte,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Pgbench => "pgbench floor (bench/floor)",
            Self::TrueFloor => "true floor (minimal table, best index)",
            Self::Store => "store (SqlStore)",
            Self::StoreNoVacuum => "store without its queue vacuum",
            Self::StoreNoBatch => "store without group commit",
            Self::FloorSame => "floor: same SQL",
            Self::FloorBare => "floor: bare UPDATEs",
            Self::FloorPooled => "diag: same SQL, pool acquire per tx",
            Self::FloorPooledNoPing => "diag: same SQL, pool acquire per tx, no ping",
            Self::FloorCte => "diag: same work, one statement per call (CTE)",
        }
    }

    /// The name `B1_PATHS` uses.
    fn key(self) -> &'static str {
        match self {
            Self::Pgbench => "pgbench",
            Self::TrueFloor => "true",
            Self::Store => "store",
            Self::StoreNoVacuum => "store-novac",
            Self::StoreNoBatch => "store-nobatch",
            Self::FloorSame => "same",
            Self::FloorBare => "bare",
            Self::FloorPooled => "pooled",
            Self::FloorPooledNoPing => "pooled-noping",
            Self::FloorCte => "cte",
        }
    }

    fn on_sqlite(self) -> bool {
        matches!(self, Self::TrueFloor | Self::Store | Self::FloorSame)
    }
}

#[derive(Debug, Clone)]
struct RunResult {
    loops: u64,
    secs: f64,
    /// This process's CPU (the bench, sqlx, and on SQLite the database engine).
    client_cpu: f64,
    /// CPU of the PostgreSQL processes (see [`pg_pids`]).
    pg_cpu: Option<f64>,
    /// The part of `pg_cpu` spent by background processes (WAL writer, checkpointer, …).
    pg_background_cpu: Option<f64>,
    /// Host CPU in cores that neither this process nor those PostgreSQL
    /// processes used: other people's work on a shared machine.
    other_cores: f64,
    /// Bytes the host wrote to its disks during the run (everyone's writes:
    /// on a quiet machine, the database's WAL and checkpoints).
    disk_written: u64,
    /// Host CPU in cores idle while waiting on the disk: a loop bound by its
    /// writes leaves its cores waiting here rather than busy.
    iowait_cores: f64,
    /// Loops/s in the first and the last fifth of the run.
    first_rate: f64,
    last_rate: f64,
    /// Diagnostic VACUUMs run during the run (`B1_VACUUM_EVERY`).
    vacuums: u32,
    /// The store's own background vacuums of the queue table.
    queue_vacuums: u64,
}

impl RunResult {
    fn rate(&self) -> f64 {
        self.loops as f64 / self.secs
    }
}

fn finish_sample(start: &Sample, end: &Sample, loops: u64, tck: f64) -> RunResult {
    let secs = end.at.duration_since(start.at).as_secs_f64();
    let client_cpu = end.self_ticks.saturating_sub(start.self_ticks) as f64 / tck;
    let pg_sum = |background_only: bool| {
        (!end.pg.is_empty()).then(|| {
            end.pg
                .iter()
                .filter(|(_, (_, bg))| *bg || !background_only)
                .map(|(pid, (t, _))| t.saturating_sub(start.pg.get(pid).map_or(0, |s| s.0)))
                .sum::<u64>() as f64
                / tck
        })
    };
    let pg_cpu = pg_sum(false);
    let pg_background_cpu = pg_sum(true);
    let host_busy = end.host.busy.saturating_sub(start.host.busy) as f64 / tck;
    let other = (host_busy - client_cpu - pg_cpu.unwrap_or(0.0)).max(0.0) / secs;
    let iowait = end.host.iowait.saturating_sub(start.host.iowait) as f64 / tck;
    RunResult {
        loops,
        secs,
        client_cpu,
        pg_cpu,
        pg_background_cpu,
        other_cores: other,
        disk_written: end.disk_written.saturating_sub(start.disk_written),
        iowait_cores: iowait / secs,
        first_rate: f64::NAN,
        last_rate: f64::NAN,
        vacuums: 0,
        queue_vacuums: 0,
    }
}

// ---------------------------------------------------------------------------
// The loops.

#[derive(Clone)]
struct Ctx {
    endpoint_id: String,
    owner: String,
    deadline: Instant,
    dry: Arc<AtomicBool>,
    /// Loops completed so far by all tasks, sampled once a second.
    progress: Arc<AtomicU64>,
}

impl Ctx {
    fn new(caller: &Caller, start: &Sample, seconds: u64, dry: &Arc<AtomicBool>) -> Self {
        Self {
            endpoint_id: caller.endpoint_id.clone(),
            owner: caller.owner(),
            deadline: start.at + Duration::from_secs(seconds),
            dry: dry.clone(),
            progress: Arc::new(AtomicU64::new(0)),
        }
    }

    fn go_on(&self) -> bool {
        Instant::now() < self.deadline && !self.dry.load(Ordering::Relaxed)
    }

    fn tick(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Samples the loop counter every second until the deadline.
    fn watch(&self) -> tokio::task::JoinHandle<Vec<u64>> {
        let progress = self.progress.clone();
        let deadline = self.deadline;
        tokio::spawn(async move {
            let mut seen = vec![0];
            let mut next = Instant::now() + Duration::from_secs(1);
            while next <= deadline {
                tokio::time::sleep_until(next.into()).await;
                seen.push(progress.load(Ordering::Relaxed));
                next += Duration::from_secs(1);
            }
            seen
        })
    }
}

/// Loops/s over the first and the last fifth of a run: how much the queue
/// table's dead rows slowed it down as it went.
fn drift(seen: &[u64]) -> (f64, f64) {
    let n = seen.len().saturating_sub(1);
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let w = (n / 5).max(1);
    (
        (seen[w] - seen[0]) as f64 / w as f64,
        (seen[n] - seen[n - w]) as f64 / w as f64,
    )
}

async fn store_worker(store: Arc<SqlStore>, caller: Caller, ctx: Ctx) -> Result<u64> {
    let mut loops = 0;
    while ctx.go_on() {
        let Some(claimed) = store
            .claim_next(&caller, None, ClaimOptions::default())
            .await?
        else {
            ctx.dry.store(true, Ordering::Relaxed);
            break;
        };
        store
            .complete(&caller, &claimed.todo.id, Finish::default())
            .await?;
        loops += 1;
        ctx.tick();
    }
    Ok(loops)
}

/// The store's pending-path claim transaction, statement for statement:
/// BEGIN, the claim UPDATE, the attempt INSERT, COMMIT. `None` when nothing is pending.
async fn pg_claim_tx(conn: &mut PgConnection, ctx: &Ctx) -> Result<Option<String>> {
    let now = now_ms();
    let mut tx = conn.begin().await?;
    let Some(row) = sqlx::query(pg_claim())
        .bind(now)
        .bind(&ctx.owner)
        .bind(now + LEASE_MS)
        .bind(None::<String>)
        .bind(&ctx.endpoint_id)
        .fetch_optional(&mut *tx)
        .await?
    else {
        tx.rollback().await?;
        return Ok(None);
    };
    let id: String = row.try_get("id")?;
    sqlx::query(INSERT_ATTEMPT)
        .bind(&id)
        .bind(row.try_get::<i64, _>("attempts_total")?)
        .bind(row.try_get::<i64, _>("attempt")?)
        .bind(None::<String>)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(id))
}

/// The store's `complete` transaction: BEGIN, the guarded UPDATE, closing the
/// attempt, COMMIT.
async fn pg_complete_tx(conn: &mut PgConnection, ctx: &Ctx, id: &str) -> Result<()> {
    let now = now_ms();
    let mut tx = conn.begin().await?;
    let done = sqlx::query(complete())
        .bind(None::<String>)
        .bind(now)
        .bind(id)
        .bind(&ctx.endpoint_id)
        .bind(&ctx.owner)
        .bind(None::<String>)
        .fetch_optional(&mut *tx)
        .await?;
    ensure!(done.is_some(), "floor: complete of {id} matched nothing");
    sqlx::query(CLOSE_ATTEMPT)
        .bind(now)
        .bind("completed")
        .bind("done")
        .bind(None::<String>)
        .bind(0_i64)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// The same statements on one dedicated connection per task (like pgbench).
async fn pg_same_worker(mut conn: PoolConnection<Postgres>, ctx: Ctx) -> Result<u64> {
    let mut loops = 0;
    while ctx.go_on() {
        let Some(id) = pg_claim_tx(&mut conn, &ctx).await? else {
            ctx.dry.store(true, Ordering::Relaxed);
            break;
        };
        pg_complete_tx(&mut conn, &ctx, &id).await?;
        loops += 1;
        ctx.tick();
    }
    Ok(loops)
}

/// Diagnostic: the same statements, but each transaction takes a connection
/// from the pool the way the store does (`acquire`, then BEGIN).
async fn pg_pooled_worker(pool: PgPool, ctx: Ctx) -> Result<u64> {
    let mut loops = 0;
    while ctx.go_on() {
        let Some(id) = pg_claim_tx(&mut *pool.acquire().await?, &ctx).await? else {
            ctx.dry.store(true, Ordering::Relaxed);
            break;
        };
        pg_complete_tx(&mut *pool.acquire().await?, &ctx, &id).await?;
        loops += 1;
        ctx.tick();
    }
    Ok(loops)
}

/// Diagnostic: the same work as the store, one statement per call, autocommit.
async fn pg_cte_worker(mut conn: PoolConnection<Postgres>, ctx: Ctx) -> Result<u64> {
    let conn: &mut PgConnection = &mut conn;
    let mut loops = 0;
    while ctx.go_on() {
        let now = now_ms();
        let Some(row) = sqlx::query(pg_claim_cte())
            .bind(now)
            .bind(&ctx.owner)
            .bind(now + LEASE_MS)
            .bind(None::<String>)
            .bind(&ctx.endpoint_id)
            .bind(None::<String>)
            .fetch_optional(&mut *conn)
            .await?
        else {
            ctx.dry.store(true, Ordering::Relaxed);
            break;
        };
        let id: String = row.try_get("id")?;
        let now = now_ms();
        let done = sqlx::query(pg_complete_cte())
            .bind(None::<String>)
            .bind(now)
            .bind(&id)
            .bind(&ctx.endpoint_id)
            .bind(&ctx.owner)
            .bind(None::<String>)
            .bind(None::<String>)
            .bind(0_i64)
            .fetch_optional(&mut *conn)
            .await?;
        ensure!(
            done.is_some(),
            "cte floor: complete of {id} matched nothing"
        );
        loops += 1;
        ctx.tick();
    }
    Ok(loops)
}

/// Just the two UPDATEs, autocommit, no attempt history.
async fn pg_bare_worker(mut conn: PoolConnection<Postgres>, ctx: Ctx) -> Result<u64> {
    let conn: &mut PgConnection = &mut conn;
    let mut loops = 0;
    while ctx.go_on() {
        let now = now_ms();
        let Some(row) = sqlx::query(pg_claim())
            .bind(now)
            .bind(&ctx.owner)
            .bind(now + LEASE_MS)
            .bind(None::<String>)
            .bind(&ctx.endpoint_id)
            .fetch_optional(&mut *conn)
            .await?
        else {
            ctx.dry.store(true, Ordering::Relaxed);
            break;
        };
        let id: String = row.try_get("id")?;
        let now = now_ms();
        let done = sqlx::query(complete())
            .bind(None::<String>)
            .bind(now)
            .bind(&id)
            .bind(&ctx.endpoint_id)
            .bind(&ctx.owner)
            .bind(None::<String>)
            .fetch_optional(&mut *conn)
            .await?;
        ensure!(
            done.is_some(),
            "bare floor: complete of {id} matched nothing"
        );
        loops += 1;
        ctx.tick();
    }
    Ok(loops)
}

/// The true floor: the minimal claim and complete, autocommit, one dedicated
/// connection per task.
async fn pg_true_floor_worker(mut conn: PoolConnection<Postgres>, ctx: Ctx) -> Result<u64> {
    let conn: &mut PgConnection = &mut conn;
    let mut loops = 0;
    while ctx.go_on() {
        if !pg_floor::claim_and_complete(conn, &ctx.owner, &ctx.endpoint_id).await? {
            ctx.dry.store(true, Ordering::Relaxed);
            break;
        }
        loops += 1;
        ctx.tick();
    }
    Ok(loops)
}

/// The store's SQLite statements on one shared connection, `BEGIN IMMEDIATE`.
async fn sqlite_same_worker(pool: SqlitePool, ctx: Ctx) -> Result<u64> {
    let mut loops = 0;
    while ctx.go_on() {
        let now = now_ms();
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        let Some(row) = sqlx::query(sqlite_claim())
            .bind(now)
            .bind(&ctx.owner)
            .bind(now + LEASE_MS)
            .bind(None::<String>)
            .bind(&ctx.endpoint_id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            tx.rollback().await?;
            ctx.dry.store(true, Ordering::Relaxed);
            break;
        };
        let id: String = row.try_get("id")?;
        sqlx::query(INSERT_ATTEMPT)
            .bind(&id)
            .bind(row.try_get::<i64, _>("attempts_total")?)
            .bind(row.try_get::<i64, _>("attempt")?)
            .bind(None::<String>)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;

        let now = now_ms();
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        let done = sqlx::query(complete())
            .bind(None::<String>)
            .bind(now)
            .bind(&id)
            .bind(&ctx.endpoint_id)
            .bind(&ctx.owner)
            .bind(None::<String>)
            .fetch_optional(&mut *tx)
            .await?;
        ensure!(done.is_some(), "floor: complete of {id} matched nothing");
        sqlx::query(CLOSE_ATTEMPT)
            .bind(now)
            .bind("completed")
            .bind("done")
            .bind(None::<String>)
            .bind(0_i64)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        loops += 1;
        ctx.tick();
    }
    Ok(loops)
}

// ---------------------------------------------------------------------------
// Setup and checks.

/// The true floor on SQLite, SQLite's own limit: the statements run on the
/// worker's own thread, one shared connection behind a mutex (SQLite has one
/// writer), autocommit, prepared once — no async runtime, no hand-off.
fn sqlite_true_floor_worker(
    conn: &std::sync::Mutex<rusqlite::Connection>,
    ctx: &Ctx,
) -> Result<u64> {
    let lock = || {
        conn.lock()
            .map_err(|_| anyhow!("the floor's connection is poisoned"))
    };
    let mut loops = 0;
    while ctx.go_on() {
        let claimed: Option<String> = {
            let conn = lock()?;
            let mut claim = conn.prepare_cached(SQLITE_TRUE_FLOOR_CLAIM)?;
            let mut found = claim.query(rusqlite::params![
                ctx.owner,
                now_ms() + LEASE_MS,
                ctx.endpoint_id,
                "inbox"
            ])?;
            match found.next()? {
                Some(row) => Some(row.get(0)?),
                None => None,
            }
        };
        let Some(id) = claimed else {
            ctx.dry.store(true, Ordering::Relaxed);
            break;
        };
        let done = lock()?
            .prepare_cached(SQLITE_TRUE_FLOOR_COMPLETE)?
            .execute(rusqlite::params![now_ms(), id, ctx.owner])?;
        ensure!(done == 1, "true floor: complete of {id} matched nothing");
        loops += 1;
        ctx.tick();
    }
    Ok(loops)
}

/// The true floor's check: no todo claimed twice, none lost.
async fn check_true_floor(pool: &AnyPool, preload: i64, loops: u64) -> Result<()> {
    let done = count(
        pool,
        "SELECT COUNT(*) FROM floor_todos WHERE state = 'done'",
    )
    .await?;
    let pending = count(
        pool,
        "SELECT COUNT(*) FROM floor_todos WHERE state = 'pending'",
    )
    .await?;
    let other = count(
        pool,
        "SELECT COUNT(*) FROM floor_todos WHERE state NOT IN ('done', 'pending')",
    )
    .await?;
    let twice = count(
        pool,
        "SELECT COUNT(*) FROM floor_todos WHERE state = 'done' AND attempts <> 1",
    )
    .await?;
    let touched_pending = count(
        pool,
        "SELECT COUNT(*) FROM floor_todos WHERE state = 'pending' AND attempts <> 0",
    )
    .await?;
    let mut problems = Vec::new();
    if done != loops as i64 {
        problems.push(format!(
            "{done} rows are done but the workers completed {loops}"
        ));
    }
    if done + pending != preload || other != 0 {
        problems.push(format!(
            "lost rows: {done} done + {pending} pending + {other} other != {preload} preloaded"
        ));
    }
    if twice != 0 {
        problems.push(format!("{twice} done rows were claimed more than once"));
    }
    if touched_pending != 0 {
        problems.push(format!("{touched_pending} pending rows show a claim"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        bail!(
            "true floor correctness check failed: {}",
            problems.join("; ")
        )
    }
}

/// No todo claimed twice, none lost, and the history the path writes.
async fn check(pool: &AnyPool, path: Path, preload: i64, loops: u64) -> Result<()> {
    if path == Path::TrueFloor {
        return check_true_floor(pool, preload, loops).await;
    }
    queue_loop::check_todos(pool, preload, loops, path != Path::FloorBare).await
}

// ---------------------------------------------------------------------------
// SQLite: a fresh file per run.

async fn sqlite_run(cfg: &Config, path: Path, conc: usize, tck: f64) -> Result<RunResult> {
    let dir = tempfile::Builder::new().prefix("sb-b1-").tempdir()?;
    let file = dir.path().join("bench.db");
    let store = Arc::new(
        SqlStore::connect(
            &DatabaseLocation::Sqlite(file.clone()),
            Arc::new(SystemClock),
            &StoreOptions::default(),
        )
        .await?,
    );
    store.migrate(None).await?;
    let reg = register(&store).await?;
    sqlx::query(AssertSqlSafe(queue_loop::SQLITE_PRELOAD.as_str()))
        .bind(&reg.caller.endpoint_id)
        .bind(now_ms() - cfg.sqlite_preload - 1000)
        .bind(cfg.sqlite_preload)
        .bind(1_i64)
        .execute(store.pool())
        .await?;
    sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(store.pool())
        .await?;

    let dry = Arc::new(AtomicBool::new(false));
    let limit = Duration::from_secs(cfg.seconds + 120);
    let mut set = tokio::task::JoinSet::new();
    let watch;
    let (start, loops) = match path {
        Path::Store => {
            let start = sample(None).await?;
            let ctx = Ctx::new(&reg.caller, &start, cfg.seconds, &dry);
            watch = Some(ctx.watch());
            let transactions_before = store.sqlite_writer_transactions().unwrap_or(0);
            for _ in 0..conc {
                set.spawn(store_worker(store.clone(), reg.caller.clone(), ctx.clone()));
            }
            let loops = join_workers(set, limit).await?;
            let transactions =
                store.sqlite_writer_transactions().unwrap_or(0) - transactions_before;
            // Two calls per loop (claim_next, complete) on the writer thread.
            eprintln!(
                "SQLite store c={conc}: {loops} loops, {transactions} writer transactions \
                 ({:.2} calls per transaction)",
                2.0 * loops as f64 / transactions.max(1) as f64
            );
            (start, loops)
        }
        Path::FloorSame => {
            let url = format!("sqlite://{}?mode=rwc", file.display());
            let options: SqliteConnectOptions = url.parse()?;
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .test_before_acquire(false)
                .after_connect(|conn, _meta| {
                    Box::pin(async move {
                        sqlx::raw_sql("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
                            .execute(conn)
                            .await?;
                        Ok(())
                    })
                })
                .connect_with(options)
                .await?;
            let start = sample(None).await?;
            let ctx = Ctx::new(&reg.caller, &start, cfg.seconds, &dry);
            watch = Some(ctx.watch());
            for _ in 0..conc {
                set.spawn(sqlite_same_worker(pool.clone(), ctx.clone()));
            }
            let loops = join_workers(set, limit).await;
            pool.close().await;
            (start, loops?)
        }
        Path::TrueFloor => {
            let conn = rusqlite::Connection::open(&file)?;
            conn.execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;",
            )?;
            conn.execute_batch(TRUE_FLOOR_SCHEMA)?;
            conn.execute(
                SQLITE_TRUE_FLOOR_PRELOAD,
                rusqlite::params![
                    reg.caller.endpoint_id,
                    now_ms() - cfg.sqlite_floor_preload - 1000,
                    cfg.sqlite_floor_preload
                ],
            )?;
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
            let conn = Arc::new(std::sync::Mutex::new(conn));
            let start = sample(None).await?;
            let ctx = Ctx::new(&reg.caller, &start, cfg.seconds, &dry);
            watch = Some(ctx.watch());
            for _ in 0..conc {
                let (conn, ctx) = (conn.clone(), ctx.clone());
                set.spawn_blocking(move || sqlite_true_floor_worker(&conn, &ctx));
            }
            (start, join_workers(set, limit).await?)
        }
        other => bail!("{} is PostgreSQL only", other.name()),
    };
    let end = sample(None).await?;
    let mut result = finish_sample(&start, &end, loops, tck);
    if let Some(watch) = watch {
        (result.first_rate, result.last_rate) = drift(&watch.await?);
    }
    ensure!(
        !dry.load(Ordering::Relaxed),
        "SQLite {} c={conc}: the preloaded todos ran out; raise B1_SQLITE_PRELOAD \
         (B1_SQLITE_FLOOR_PRELOAD for the true floor)",
        path.name(),
    );
    if path == Path::TrueFloor {
        check_true_floor(store.pool(), cfg.sqlite_floor_preload, loops).await?;
    } else {
        check(store.pool(), path, cfg.sqlite_preload, loops).await?;
    }
    store.close().await;
    drop(dir);
    Ok(result)
}

// ---------------------------------------------------------------------------
// PostgreSQL: one fresh database per bench, reset before every run.

struct Pg {
    database: ThrowawayDatabase,
    store: Arc<SqlStore>,
    reg: Registered,
    /// `B1_PATHS=store-novac`: a second store on the same database, its
    /// queue vacuum off.
    store_novac: Option<Arc<SqlStore>>,
    /// `B1_PATHS=store-nobatch`: the same, group commit off.
    store_nobatch: Option<Arc<SqlStore>>,
    /// The floor's own pool: a plain `PgPool`, one dedicated connection per task.
    floor: PgPool,
    /// Diagnostic pools sized like the store's: sqlx defaults, and without the ping.
    pooled: Option<PgPool>,
    pooled_noping: Option<PgPool>,
    /// For resets, checks and CPU accounting.
    admin: PgPool,
    any: AnyPool,
    /// The pgbench floor's own database (its table is named `todos` too).
    pgbench: Option<ThrowawayDatabase>,
}

fn redact(url: &str) -> String {
    DatabaseLocation::Postgres(url.to_owned()).redacted()
}

/// Diagnostic (`B1_VACUUM_EVERY`): what autovacuum would do for the queue
/// table if it were on, as a plain `VACUUM todos` every `every`.
async fn vacuum_loop(admin: PgPool, every: Duration, deadline: Instant) -> Result<u32> {
    let mut n = 0;
    loop {
        tokio::time::sleep(every).await;
        if Instant::now() + Duration::from_millis(500) >= deadline {
            return Ok(n);
        }
        sqlx::raw_sql("VACUUM todos").execute(&admin).await?;
        n += 1;
    }
}

impl Pg {
    async fn open(admin_url: &str, max_conc: usize, paths: &[Path]) -> Result<Self> {
        let database = ThrowawayDatabase::create(admin_url, "sb_bench").await?;
        let url = database.url.clone();
        let store = SqlStore::connect(
            &DatabaseLocation::Postgres(url.clone()),
            Arc::new(SystemClock),
            &StoreOptions::default(),
        )
        .await?;
        store.migrate(None).await?;
        sqlx::raw_sql(TRUE_FLOOR_SCHEMA)
            .execute(store.pool())
            .await?;
        let reg = register(&store).await?;
        let floor = PgPoolOptions::new()
            .max_connections(max_conc as u32 + 1)
            .connect(&url)
            .await?;
        let store_size = StoreOptions::default().max_connections;
        let pooled = match paths.contains(&Path::FloorPooled) {
            true => Some(
                PgPoolOptions::new()
                    .max_connections(store_size)
                    .connect(&url)
                    .await?,
            ),
            false => None,
        };
        let pooled_noping = match paths.contains(&Path::FloorPooledNoPing) {
            true => Some(
                PgPoolOptions::new()
                    .max_connections(store_size)
                    .test_before_acquire(false)
                    .connect(&url)
                    .await?,
            ),
            false => None,
        };
        let admin = PgPoolOptions::new()
            .max_connections(2)
            .connect(&url)
            .await?;
        let any = AnyPoolOptions::new()
            .max_connections(2)
            .connect(&url)
            .await?;
        let variant = |path: Path, options: StoreOptions| {
            let url = url.clone();
            async move {
                anyhow::Ok(match paths.contains(&path) {
                    true => Some(Arc::new(
                        SqlStore::connect(
                            &DatabaseLocation::Postgres(url),
                            Arc::new(SystemClock),
                            &options,
                        )
                        .await?,
                    )),
                    false => None,
                })
            }
        };
        let store_novac = variant(
            Path::StoreNoVacuum,
            StoreOptions {
                queue_vacuum_claims: None,
                ..StoreOptions::default()
            },
        )
        .await?;
        let store_nobatch = variant(
            Path::StoreNoBatch,
            StoreOptions {
                group_commit: false,
                ..StoreOptions::default()
            },
        )
        .await?;
        let pgbench = match paths.contains(&Path::Pgbench) {
            true => {
                ensure!(
                    peers::available("pgbench") && peers::available("psql"),
                    "B1_PATHS has pgbench: install PostgreSQL's client tools (pgbench, psql)"
                );
                Some(ThrowawayDatabase::create(admin_url, "sb_bench_pgbench").await?)
            }
            false => None,
        };
        Ok(Self {
            database,
            store: Arc::new(store),
            reg,
            store_novac,
            store_nobatch,
            floor,
            pooled,
            pooled_noping,
            admin,
            any,
            pgbench,
        })
    }

    /// Same starting state for every run: truncate, reload, vacuum, checkpoint.
    async fn reset(&self, path: Path, preload: i64) -> Result<()> {
        if path == Path::TrueFloor {
            sqlx::raw_sql("TRUNCATE floor_todos")
                .execute(&self.admin)
                .await?;
            sqlx::query(TRUE_FLOOR_PRELOAD)
                .bind(&self.reg.caller.endpoint_id)
                .bind(now_ms() - preload - 1000)
                .bind(preload)
                .execute(&self.admin)
                .await?;
            for sql in ["VACUUM ANALYZE floor_todos", "CHECKPOINT"] {
                sqlx::raw_sql(sql).execute(&self.admin).await?;
            }
            return Ok(());
        }
        sqlx::raw_sql("TRUNCATE todo_attempts, todos")
            .execute(&self.admin)
            .await?;
        sqlx::query(queue_loop::PG_PRELOAD)
            .bind(&self.reg.caller.endpoint_id)
            .bind(now_ms() - preload - 1000)
            .bind(preload)
            .bind(1_i64)
            .execute(&self.admin)
            .await?;
        // One statement each: VACUUM refuses to run in a multi-statement batch.
        // The emptied attempt table is NOT vacuumed: a vacuum of an empty
        // table records it as empty (reltuples = 0), and the first plans
        // cached on the pooled connections then seq-scan it for the rest of
        // the run — a state production never has (a fresh table is never
        // vacuumed while empty; autovacuum analyses it once it has rows).
        for sql in ["VACUUM ANALYZE todos", "CHECKPOINT"] {
            sqlx::raw_sql(sql).execute(&self.admin).await?;
        }
        Ok(())
    }

    /// EXPLAIN (ANALYZE, BUFFERS) of the path's claim, rolled back.
    async fn explain_claim(&self, path: Path) -> Result<String> {
        let mut conn = self.admin.acquire().await?;
        let mut tx = conn.begin().await?;
        let now = now_ms();
        let rows = if path == Path::TrueFloor {
            sqlx::query(AssertSqlSafe(format!(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {TRUE_FLOOR_CLAIM}"
            )))
            .bind(self.reg.caller.owner())
            .bind(now + LEASE_MS)
            .bind(&self.reg.caller.endpoint_id)
            .bind("inbox")
            .fetch_all(&mut *tx)
            .await?
        } else {
            sqlx::query(AssertSqlSafe(format!(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {}",
                pg_claim()
            )))
            .bind(now)
            .bind(self.reg.caller.owner())
            .bind(now + LEASE_MS)
            .bind(None::<String>)
            .bind(&self.reg.caller.endpoint_id)
            .fetch_all(&mut *tx)
            .await?
        };
        tx.rollback().await?;
        let mut out = String::new();
        for r in rows {
            out.push_str(&r.try_get::<String, _>(0)?);
            out.push('\n');
        }
        Ok(out)
    }

    /// The pgbench floor: its table rebuilt, then pgbench as long as the
    /// other paths. Only the host's disk writes are sampled around it.
    async fn run_pgbench(&self, cfg: &Config, conc: usize, tck: f64) -> Result<RunResult> {
        let url = &self.pgbench.as_ref().context("no pgbench database")?.url;
        peers::pgbench_reset(url, cfg.pg_preload).await?;
        let start = sample(None).await?;
        let peer = peers::pgbench_run(url, conc, cfg.seconds, cfg.pg_preload).await?;
        let end = sample(None).await?;
        let mut result = finish_sample(&start, &end, peer.loops, tck);
        result.secs = peer.secs;
        (result.first_rate, result.last_rate) = (peer.first_rate, peer.last_rate);
        result.client_cpu = f64::NAN;
        result.other_cores = f64::NAN;
        Ok(result)
    }

    async fn run(&self, cfg: &Config, path: Path, conc: usize, tck: f64) -> Result<RunResult> {
        if path == Path::Pgbench {
            return self.run_pgbench(cfg, conc, tck).await;
        }
        self.reset(path, cfg.pg_preload).await?;
        let explain_before = match cfg.analyze {
            true => Some(self.analysis_start(path).await?),
            false => None,
        };
        let dry = Arc::new(AtomicBool::new(false));
        let limit = Duration::from_secs(cfg.seconds + 120);
        let mut set = tokio::task::JoinSet::new();
        let caller = &self.reg.caller;
        let mut watch = None;
        let mut vacuum = None;
        let mut queue_vacuums = 0;
        let mut make_ctx = |start: &Sample| {
            let ctx = Ctx::new(caller, start, cfg.seconds, &dry);
            watch = Some(ctx.watch());
            if let Some(every) = cfg.vacuum_every {
                vacuum = Some(tokio::spawn(vacuum_loop(
                    self.admin.clone(),
                    every,
                    ctx.deadline,
                )));
            }
            ctx
        };
        let (start, loops) = match path {
            Path::Store | Path::StoreNoVacuum | Path::StoreNoBatch => {
                let store = match path {
                    Path::Store => &self.store,
                    Path::StoreNoVacuum => self.store_novac.as_ref().context("no store-novac")?,
                    _ => self.store_nobatch.as_ref().context("no store-nobatch")?,
                };
                let batches_before = store.finish_batches();
                let claim_batches_before = store.claim_batches();
                // Open the connections the run will use before the clock starts.
                store.open_hot_connections(conc).await?;
                let vacuums_before = store.queue_vacuums();
                let start = sample(Some(&self.admin)).await?;
                let ctx = make_ctx(&start);
                for _ in 0..conc {
                    set.spawn(store_worker(store.clone(), caller.clone(), ctx.clone()));
                }
                let loops = join_workers(set, limit).await?;
                queue_vacuums = store.queue_vacuums() - vacuums_before;
                let (batches, batched) = store.finish_batches();
                let (claim_batches, claims_batched) = store.claim_batches();
                eprintln!(
                    "{} c={conc}: {loops} loops, {} completes in {} group commits, \
                     {} claims in {}",
                    path.name(),
                    batched - batches_before.1,
                    batches - batches_before.0,
                    claims_batched - claim_batches_before.1,
                    claim_batches - claim_batches_before.0,
                );
                (start, loops)
            }
            Path::FloorPooled | Path::FloorPooledNoPing => {
                let pool = match path {
                    Path::FloorPooled => self.pooled.clone(),
                    _ => self.pooled_noping.clone(),
                }
                .context("diagnostic pool not opened")?;
                let mut warm = Vec::new();
                for _ in 0..conc {
                    warm.push(pool.acquire().await?);
                }
                drop(warm);
                let start = sample(Some(&self.admin)).await?;
                let ctx = make_ctx(&start);
                for _ in 0..conc {
                    set.spawn(pg_pooled_worker(pool.clone(), ctx.clone()));
                }
                (start, join_workers(set, limit).await?)
            }
            Path::Pgbench => unreachable!("run_pgbench"),
            Path::TrueFloor | Path::FloorSame | Path::FloorBare | Path::FloorCte => {
                let mut conns = Vec::new();
                for _ in 0..conc {
                    conns.push(self.floor.acquire().await?);
                }
                let start = sample(Some(&self.admin)).await?;
                let ctx = make_ctx(&start);
                for conn in conns {
                    match path {
                        Path::FloorSame => set.spawn(pg_same_worker(conn, ctx.clone())),
                        Path::FloorCte => set.spawn(pg_cte_worker(conn, ctx.clone())),
                        Path::TrueFloor => set.spawn(pg_true_floor_worker(conn, ctx.clone())),
                        _ => set.spawn(pg_bare_worker(conn, ctx.clone())),
                    };
                }
                (start, join_workers(set, limit).await?)
            }
        };
        let end = sample(Some(&self.admin)).await?;
        let mut result = finish_sample(&start, &end, loops, tck);
        if let Some(watch) = watch {
            (result.first_rate, result.last_rate) = drift(&watch.await?);
        }
        if let Some(vacuum) = vacuum {
            result.vacuums = vacuum.await??;
        }
        result.queue_vacuums = queue_vacuums;
        ensure!(
            !dry.load(Ordering::Relaxed),
            "PostgreSQL {} c={conc}: the {} preloaded todos ran out; raise B1_PG_PRELOAD",
            path.name(),
            cfg.pg_preload
        );
        check(&self.any, path, cfg.pg_preload, loops).await?;
        if let Some(before) = explain_before {
            self.analysis_end(cfg, path, conc, loops, &before).await?;
        }
        if cfg.explain && path == Path::Store {
            eprintln!(
                "EXPLAIN of the claim after {} loops (c={conc}):\n{}",
                loops,
                self.explain_claim(path).await?
            );
        }
        Ok(result)
    }

    /// Analysis run: resets the statement and table counters, returns the
    /// claim's plan before the run.
    async fn analysis_start(&self, path: Path) -> Result<String> {
        let explain = self.explain_claim(path).await?;
        sqlx::raw_sql(
            "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; \
             SELECT pg_stat_statements_reset(); SELECT pg_stat_reset();",
        )
        .execute(&self.admin)
        .await
        .context("B1_ANALYZE needs pg_stat_statements preloaded (BENCH_PG_STAT_STATEMENTS=1)")?;
        Ok(explain)
    }

    /// Analysis run: where the server's time went, as Markdown.
    async fn analysis_end(
        &self,
        cfg: &Config,
        path: Path,
        conc: usize,
        loops: u64,
        explain_before: &str,
    ) -> Result<()> {
        // Backends flush their statistics at most once a second.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let per = |v: f64| v / loops.max(1) as f64;
        let mut md = String::new();
        let _ = writeln!(md, "\n#### {} c={conc}: {loops} loops\n", path.name());
        let stmts = sqlx::query(
            "SELECT calls, total_exec_time, mean_exec_time, rows, \
               shared_blks_hit + shared_blks_read AS blks, \
               left(regexp_replace(query, '\\s+', ' ', 'g'), 120) AS q \
             FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             ORDER BY total_exec_time DESC LIMIT 10",
        )
        .fetch_all(&self.admin)
        .await?;
        let (all_calls,): (i64,) = sqlx::query_as(
            "SELECT COALESCE(SUM(calls), 0)::bigint FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .fetch_one(&self.admin)
        .await?;
        let (commits, rollbacks): (i64, i64) = sqlx::query_as(
            "SELECT xact_commit, xact_rollback FROM pg_stat_database \
             WHERE datname = current_database()",
        )
        .fetch_one(&self.admin)
        .await?;
        let _ = writeln!(
            md,
            "statements per loop: {:.2} (all calls {all_calls}); commits per loop: {:.2}; \
             rollbacks: {rollbacks}\n",
            per(all_calls as f64),
            per(commits as f64)
        );
        md.push_str(
            "| calls | total ms | mean ms | rows | buffers/call | statement |\n\
             |---:|---:|---:|---:|---:|---|\n",
        );
        for r in &stmts {
            let calls: i64 = r.try_get("calls")?;
            let _ = writeln!(
                md,
                "| {calls} | {:.0} | {:.3} | {} | {:.1} | `{}` |",
                r.try_get::<f64, _>("total_exec_time")?,
                r.try_get::<f64, _>("mean_exec_time")?,
                r.try_get::<i64, _>("rows")?,
                r.try_get::<i64, _>("blks")? as f64 / calls.max(1) as f64,
                r.try_get::<String, _>("q")?.replace('|', "\\|")
            );
        }
        let tables = sqlx::query(
            "SELECT relname::text AS t, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup, \
               seq_scan, COALESCE(idx_scan, 0) AS idx_scan, autovacuum_count, autoanalyze_count \
             FROM pg_stat_user_tables WHERE relname IN ('todos', 'todo_attempts', 'floor_todos') \
             ORDER BY relname",
        )
        .fetch_all(&self.admin)
        .await?;
        md.push_str(
            "\n| table | n_tup_ins | n_tup_upd | n_tup_hot_upd | n_dead_tup (end) | seq_scan \
             | idx_scan | autovacuums | autoanalyzes |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for r in &tables {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.try_get::<String, _>("t")?,
                r.try_get::<i64, _>("n_tup_ins")?,
                r.try_get::<i64, _>("n_tup_upd")?,
                r.try_get::<i64, _>("n_tup_hot_upd")?,
                r.try_get::<i64, _>("n_dead_tup")?,
                r.try_get::<i64, _>("seq_scan")?,
                r.try_get::<i64, _>("idx_scan")?,
                r.try_get::<i64, _>("autovacuum_count")?,
                r.try_get::<i64, _>("autoanalyze_count")?,
            );
        }
        let after = self.explain_claim(path).await?;
        let _ = writeln!(
            md,
            "\nEXPLAIN (ANALYZE, BUFFERS) of the claim before the run:\n\n```\n{}```\n\n\
             after the run:\n\n```\n{}```",
            explain_before, after
        );
        match &cfg.analysis {
            Some(file) => {
                use std::io::Write as _;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(file)?;
                f.write_all(md.as_bytes())?;
            }
            None => eprintln!("{md}"),
        }
        Ok(())
    }

    async fn settings(&self) -> Result<String> {
        let mut out = Vec::new();
        let version: String = sqlx::query("SHOW server_version")
            .fetch_one(&self.admin)
            .await?
            .try_get(0)?;
        out.push(format!("server_version={version}"));
        for name in [
            "shared_buffers",
            "synchronous_commit",
            "fsync",
            "max_connections",
            "autovacuum",
        ] {
            let v: String = sqlx::query(AssertSqlSafe(format!("SHOW {name}")))
                .fetch_one(&self.admin)
                .await?
                .try_get(0)?;
            out.push(format!("{name}={v}"));
        }
        Ok(out.join(", "))
    }

    async fn drop_database(self) {
        self.store.close().await;
        for store in [&self.store_novac, &self.store_nobatch]
            .into_iter()
            .flatten()
        {
            store.close().await;
        }
        self.floor.close().await;
        for pool in [&self.pooled, &self.pooled_noping].into_iter().flatten() {
            pool.close().await;
        }
        self.admin.close().await;
        self.any.close().await;
        let _ = self.database.drop_database().await;
        if let Some(db) = self.pgbench {
            let _ = db.drop_database().await;
        }
    }
}

// ---------------------------------------------------------------------------
// Reporting.

type Key = (Backend, usize, Path);

fn rate_median(results: &HashMap<Key, Vec<RunResult>>, key: Key) -> Option<f64> {
    results
        .get(&key)
        .map(|runs| median(&runs.iter().map(RunResult::rate).collect::<Vec<_>>()))
}

/// The median over a configuration's runs of its first (`first`) or last
/// fifth's rate.
fn fifth_median(results: &HashMap<Key, Vec<RunResult>>, key: Key, first: bool) -> f64 {
    results.get(&key).map_or(f64::NAN, |runs| {
        median(
            &runs
                .iter()
                .map(|r| if first { r.first_rate } else { r.last_rate })
                .collect::<Vec<_>>(),
        )
    })
}

fn report(cfg: &Config, results: &HashMap<Key, Vec<RunResult>>, header: &str) -> (String, bool) {
    let mut md = String::new();
    md.push_str(header);
    md.push_str(
        "\n| backend | path | concurrency | loops/s median | min – max | runs (loops/s) \
         | first → last fifth of a run (loops/s) | bench process CPU µs/loop \
         | PostgreSQL CPU µs/loop (of which background) | other load (cores) \
         | disk writes KiB/loop (host iowait, cores) |\n\
         |---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n",
    );
    let mut keys: Vec<Key> = results.keys().copied().collect();
    keys.sort();
    for key in &keys {
        let runs = &results[key];
        let rates: Vec<f64> = runs.iter().map(RunResult::rate).collect();
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let per_loop = |f: &dyn Fn(&RunResult) -> f64| {
            median(
                &runs
                    .iter()
                    .map(|r| f(r) / r.loops.max(1) as f64)
                    .collect::<Vec<_>>(),
            )
        };
        let client = per_loop(&|r| r.client_cpu * 1e6);
        let pg = if runs.iter().all(|r| r.pg_cpu.is_some()) {
            format!(
                "{:.0} ({:.0})",
                per_loop(&|r| r.pg_cpu.unwrap_or(0.0) * 1e6),
                per_loop(&|r| r.pg_background_cpu.unwrap_or(0.0) * 1e6)
            )
        } else {
            "—".into()
        };
        let other = median(&runs.iter().map(|r| r.other_cores).collect::<Vec<_>>());
        let first = median(&runs.iter().map(|r| r.first_rate).collect::<Vec<_>>());
        let last = median(&runs.iter().map(|r| r.last_rate).collect::<Vec<_>>());
        let disk = per_loop(&|r| r.disk_written as f64 / 1024.0);
        let iowait = median(&runs.iter().map(|r| r.iowait_cores).collect::<Vec<_>>());
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.0} – {:.0} | {} | {:.0} → {:.0} | {:.0} | {} | {:.2} \
             | {:.1} ({:.2}) |",
            key.0.name(),
            key.2.name(),
            key.1,
            median(&rates),
            min,
            max,
            rates
                .iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            first,
            last,
            client,
            pg,
            other,
            disk,
            iowait
        );
    }

    md.push_str(
        "\n### Targets (09-quality.md, B1)\n\n| target | concurrency | store median | \
         compared with | ratio | required | result |\n|---|---:|---:|---:|---:|---:|---|\n",
    );
    let mut all_pass = true;
    let verdict = |pass: bool| if pass { "PASS" } else { "FAIL" };
    for &conc in &cfg.concurrency {
        let store_key = (Backend::Postgres, conc, Path::Store);
        let store = rate_median(results, store_key);
        let pgbench_key = (Backend::Postgres, conc, Path::Pgbench);
        let pgbench = rate_median(results, pgbench_key);
        if let (Some(s), Some(f)) = (store, pgbench) {
            let ratio = s / f;
            all_pass &= ratio >= 0.8;
            let _ = writeln!(
                md,
                "| PostgreSQL store ≥ 80 % of the pgbench floor, whole run | {conc} | {s:.0} | \
                 {f:.0} | {:.0} % | ≥ 80 % | {} |",
                ratio * 100.0,
                verdict(ratio >= 0.8)
            );
            let (s_last, f_last) = (
                fifth_median(results, store_key, false),
                fifth_median(results, pgbench_key, false),
            );
            let ratio = s_last / f_last;
            all_pass &= ratio >= 0.8;
            let _ = writeln!(
                md,
                "| PostgreSQL store ≥ 80 % of the pgbench floor, last fifth | {conc} | \
                 {s_last:.0} | {f_last:.0} | {:.0} % | ≥ 80 % | {} |",
                ratio * 100.0,
                verdict(ratio >= 0.8)
            );
        }
        if store.is_some() {
            let (first, last) = (
                fifth_median(results, store_key, true),
                fifth_median(results, store_key, false),
            );
            let ratio = last / first;
            all_pass &= ratio >= 0.9;
            let _ = writeln!(
                md,
                "| PostgreSQL store: last fifth ≥ 90 % of its first | {conc} | {last:.0} | \
                 {first:.0} (first fifth) | {:.0} % | ≥ 90 % | {} |",
                ratio * 100.0,
                verdict(ratio >= 0.9)
            );
        }
        let novac_key = (Backend::Postgres, conc, Path::StoreNoVacuum);
        if let Some(n) = rate_median(results, novac_key) {
            let (first, last) = (
                fifth_median(results, novac_key, true),
                fifth_median(results, novac_key, false),
            );
            let _ = writeln!(
                md,
                "| (for information) store without its queue vacuum: last fifth ÷ first \
                 | {conc} | {last:.0} | {first:.0} (first fifth) | {:.0} % | — | — ({n:.0} \
                 loops/s whole run{}) |",
                last / first * 100.0,
                pgbench.map_or(String::new(), |f| format!(
                    ", {:.0} % of pgbench",
                    n / f * 100.0
                )),
            );
        }
        if let (Some(s), Some(n)) = (
            store,
            rate_median(results, (Backend::Postgres, conc, Path::StoreNoBatch)),
        ) {
            let _ = writeln!(
                md,
                "| (for information) store ÷ store without group commit | {conc} | {s:.0} | \
                 {n:.0} | {:.0} % | — | — |",
                s / n * 100.0
            );
        }
        if let Some(f) = pgbench {
            let (first, last) = (
                fifth_median(results, pgbench_key, true),
                fifth_median(results, pgbench_key, false),
            );
            let _ = writeln!(
                md,
                "| (for information) pgbench floor: last fifth ÷ first | {conc} | {last:.0} | \
                 {first:.0} (first fifth) | {:.0} % | — | — ({f:.0} loops/s whole run) |",
                last / first * 100.0,
            );
        }
        let floor = rate_median(results, (Backend::Postgres, conc, Path::TrueFloor));
        if let (Some(s), Some(f)) = (store, floor) {
            let ratio = s / f;
            // Judged against the Rust floor only when pgbench did not run.
            let judged = pgbench.is_none();
            if judged {
                all_pass &= ratio >= 0.8;
            }
            let _ = writeln!(
                md,
                "| {}PostgreSQL store ≥ 80 % of the true floor (minimal table, best index, sqlx) \
                 | {conc} | {s:.0} | {f:.0} | {:.0} % | {} | {} |",
                if judged { "" } else { "(for information) " },
                ratio * 100.0,
                if judged { "≥ 80 %" } else { "—" },
                if judged { verdict(ratio >= 0.8) } else { "—" }
            );
        }
        let same = rate_median(results, (Backend::Postgres, conc, Path::FloorSame));
        if let (Some(s), Some(f)) = (store, same) {
            let _ = writeln!(
                md,
                "| (for information) PostgreSQL store vs the store's own SQL replayed | {conc} | \
                 {s:.0} | {f:.0} | {:.0} % | — | — |",
                s / f * 100.0
            );
        }
        let bare = rate_median(results, (Backend::Postgres, conc, Path::FloorBare));
        if let (Some(s), Some(b)) = (store, bare) {
            let _ = writeln!(
                md,
                "| (for information) PostgreSQL store vs bare UPDATEs floor | {conc} | {s:.0} | \
                 {b:.0} | {:.0} % | — | — |",
                s / b * 100.0
            );
        }
    }
    for &conc in &cfg.concurrency {
        let store = rate_median(results, (Backend::Sqlite, conc, Path::Store));
        if let Some(s) = store {
            let pass = s >= 10_000.0;
            all_pass &= pass;
            let true_floor = rate_median(results, (Backend::Sqlite, conc, Path::TrueFloor));
            let same = rate_median(results, (Backend::Sqlite, conc, Path::FloorSame));
            let (f, ratio) = match (true_floor, same) {
                (Some(f), _) => (
                    format!("{f:.0} (true floor)"),
                    format!("{:.0} %", s / f * 100.0),
                ),
                (None, Some(f)) => (
                    format!("{f:.0} (same SQL)"),
                    format!("{:.0} %", s / f * 100.0),
                ),
                (None, None) => ("—".into(), "—".into()),
            };
            let _ = writeln!(
                md,
                "| SQLite store ≥ 10 000 loops/s | {conc} | {s:.0} | {f} | {ratio} | \
                 ≥ 10 000 loops/s | {} |",
                if pass { "PASS" } else { "FAIL" }
            );
        }
    }
    (md, all_pass)
}

// ---------------------------------------------------------------------------

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; everything else comes from the environment.
    match run().await {
        Ok(()) => {}
        Err(e) => {
            eprintln!("B1 FAILED: {e:#}");
            std::process::exit(1);
        }
    }
}

async fn run() -> Result<()> {
    let cfg = Config::from_env()?;
    let tck = host::clock_ticks_per_sec();
    let max_conc = cfg.concurrency.iter().copied().max().unwrap_or(1);

    let pg = match &cfg.pg_admin_url {
        Some((url, _)) => Some(Pg::open(url, max_conc, &cfg.paths).await?),
        None => None,
    };
    let outcome = measure(&cfg, pg.as_ref(), tck).await;
    if let Some(pg) = pg {
        pg.drop_database().await;
    }
    let (md, all_pass) = outcome?;
    println!("{md}");
    if let Some(file) = &cfg.results {
        std::fs::write(file, &md).with_context(|| format!("cannot write {file}"))?;
    }
    if !all_pass {
        eprintln!("B1: some targets were missed (see the table); correctness checks passed.");
    }
    Ok(())
}

async fn measure(cfg: &Config, pg: Option<&Pg>, tck: f64) -> Result<(String, bool)> {
    let mut header = String::new();
    let _ = writeln!(header, "### Parameters\n");
    let _ = writeln!(
        header,
        "- duration per run: {} s; repeats: {}; concurrency: {:?}",
        cfg.seconds, cfg.repeats, cfg.concurrency
    );
    if cfg.run_sqlite {
        let sqlite_version = sqlite_version().await?;
        let _ = writeln!(
            header,
            "- SQLite {sqlite_version}: a fresh temp file per run, {} pending todos preloaded; \
             journal_mode=WAL, synchronous=NORMAL, the page size of a file the store creates \
             (2 KiB; the floors run on the same file); store: its rusqlite writer thread (group \
             commit) for the loop; true floor: one rusqlite connection behind a mutex, \
             autocommit; same SQL: a one-connection SqlitePool, BEGIN IMMEDIATE",
            cfg.sqlite_preload
        );
    }
    match (pg, &cfg.pg_admin_url) {
        (Some(pg), Some((url, var))) => {
            let _ = writeln!(
                header,
                "- PostgreSQL ({var}={}): fresh database `{}`, migrated by the store; before \
                 every run TRUNCATE + reload of {} pending todos + VACUUM ANALYZE + CHECKPOINT; \
                 {}",
                redact(url),
                pg.database.name,
                cfg.pg_preload,
                pg.settings().await?
            );
            let _ = writeln!(
                header,
                "- store pool: {} connections (StoreOptions default); floor: plain PgPool, one \
                 dedicated connection per task",
                StoreOptions::default().max_connections
            );
            if pg.pgbench.is_some() {
                let _ = writeln!(
                    header,
                    "- pgbench floor: `pgbench -n -M prepared -c C -j min(C,2) -T {}` running \
                     `bench/floor/claim_complete.pgbench` in a database of its own on the same \
                     server, its table rebuilt by `bench/floor/todos_reset.sql` with {} pending \
                     rows before every run; its CPU is not sampled",
                    cfg.seconds, cfg.pg_preload
                );
            }
        }
        _ => {
            let _ = writeln!(
                header,
                "- PostgreSQL: NOT RUN (set SWITCHBOARD_BENCH_DATABASE_URL or \
                 SWITCHBOARD_TEST_DATABASE_URL)"
            );
            eprintln!(
                "B1: no PostgreSQL URL (SWITCHBOARD_BENCH_DATABASE_URL / \
                 SWITCHBOARD_TEST_DATABASE_URL): running SQLite only"
            );
        }
    }
    if let Some(every) = cfg.vacuum_every {
        let _ = writeln!(
            header,
            "- DIAGNOSTIC: a `VACUUM todos` every {every:?} during each PostgreSQL run \
             (B1_VACUUM_EVERY), standing in for autovacuum"
        );
    }
    let _ = writeln!(
        header,
        "- first → last fifth: loops/s over the first and the last fifth of each run (median \
         over repeats); a drop is the queue table's dead rows piling up between vacuums"
    );
    let _ = writeln!(
        header,
        "- CPU: bench process = /proc/self/stat utime+stime (includes SQLite itself); \
         PostgreSQL = utime+stime of the backends connected to the bench database plus the \
         background processes (WAL writer, checkpointer, …); other load = host busy CPU minus \
         both, in cores (someone else's work on this machine)"
    );
    let _ = writeln!(
        header,
        "- disk: bytes the host wrote to its whole disks during the run (/proc/diskstats, \
         everyone's writes: the WAL, checkpoints, and anything else running) per loop; host \
         iowait = cores idle while a task waited on I/O (/proc/stat). A loop bound by its \
         writes shows iowait and an idle core rather than CPU per loop"
    );

    let mut plan: Vec<(Backend, Path)> = Vec::new();
    if cfg.run_sqlite {
        for &path in cfg.paths.iter().filter(|p| p.on_sqlite()) {
            plan.push((Backend::Sqlite, path));
        }
    }
    if pg.is_some() {
        for &path in &cfg.paths {
            plan.push((Backend::Postgres, path));
        }
    }
    let total = plan.len() * cfg.concurrency.len() * cfg.repeats;
    let mut results: HashMap<Key, Vec<RunResult>> = HashMap::new();
    let mut n = 0;
    // Interleaved, so that drift on a shared machine hits every path alike.
    for repeat in 1..=cfg.repeats {
        for &conc in &cfg.concurrency {
            for &(backend, path) in &plan {
                n += 1;
                let res = match backend {
                    Backend::Sqlite => sqlite_run(cfg, path, conc, tck).await,
                    Backend::Postgres => match pg {
                        Some(pg) => pg.run(cfg, path, conc, tck).await,
                        None => unreachable!(),
                    },
                }
                .with_context(|| {
                    format!(
                        "{} {} c={conc} repeat {repeat}",
                        backend.name(),
                        path.name()
                    )
                })?;
                eprintln!(
                    "[{n}/{total}] {} {} c={conc} repeat {repeat}: {:.0} loops/s \
                     ({} loops in {:.1} s; first fifth {:.0}/s, last fifth {:.0}/s{}), \
                     bench CPU {:.0} µs/loop, PG CPU {}, other load {:.2} cores, disk {:.1} \
                     KiB/loop, iowait {:.2} cores — check OK",
                    backend.name(),
                    path.name(),
                    res.rate(),
                    res.loops,
                    res.secs,
                    res.first_rate,
                    res.last_rate,
                    match (res.vacuums, res.queue_vacuums) {
                        (0, 0) => String::new(),
                        (d, q) => format!("; {d} diagnostic VACUUMs, {q} by the store"),
                    },
                    res.client_cpu * 1e6 / res.loops.max(1) as f64,
                    res.pg_cpu
                        .map(|c| format!("{:.0} µs/loop", c * 1e6 / res.loops.max(1) as f64))
                        .unwrap_or_else(|| "—".into()),
                    res.other_cores,
                    res.disk_written as f64 / 1024.0 / res.loops.max(1) as f64,
                    res.iowait_cores
                );
                results.entry((backend, conc, path)).or_default().push(res);
            }
        }
    }
    Ok(report(cfg, &results, &header))
}

async fn sqlite_version() -> Result<String> {
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect("sqlite::memory:")
        .await?;
    let v: String = sqlx::query("SELECT sqlite_version()")
        .fetch_one(&pool)
        .await?
        .try_get(0)?;
    pool.close().await;
    Ok(v)
}
