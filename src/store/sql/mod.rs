//! [`SqlStore`]: the storage contract on SQLite or PostgreSQL.
//!
//! One implementation serves both dialects through sqlx's `Any` driver: the
//! statements are the same text (`$n` placeholders work on both), and the few
//! that differ come from [`Dialect`]. SQLite gets one writer connection and a
//! small reader pool (WAL, busy timeout, `BEGIN IMMEDIATE`), so clients never
//! see "database is locked", plus the agent loop's calls on a `rusqlite`
//! writer thread ([`sqlite`]); PostgreSQL gets one pool and row locks,
//! and the loop's transitions as one statement each ([`postgres`]); every
//! transition's SQL is written once, in [`statements`].

// The conditions a takeover and the sweeps share; `$1` is now. Macros so
// that every statement naming them (the takeover's one condition, SQLite's
// one-branch-per-index form of it, the reaper, the retry scheduler) is built
// from the same text, with `concat!`.
macro_rules! lapsed_lease {
    () => {
        "state = 'claimed' AND lease_expires_at <= $1"
    };
}
macro_rules! elapsed_retry {
    () => {
        "state = 'failed' AND next_retry_at <= $1"
    };
}
macro_rules! below_attempt_cap {
    () => {
        "attempt < max_attempts"
    };
}

mod activity;
mod admission;
mod agents;
mod deliveries;
mod endpoints;
mod hooks;
mod humans;
mod oauth;
mod paging;
mod postgres;
mod presence;
mod rings;
mod schedules;
mod sqlite;
pub mod statements;
mod stats;
mod sweeps;
mod todos;
mod tokens;
mod webhooks;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyPool, Transaction};

use super::auth_cache::AuthCache;
use super::circuit::Circuit;
use super::dialect::Dialect;
use super::error::WithContext;
use super::migrate;
use super::{StoreBase, StoreError, StoreResult};
use crate::clock::SharedClock;
use crate::domain::Timestamp;

/// Where the data lives, parsed from `--database`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseLocation {
    Sqlite(PathBuf),
    Postgres(String),
}

impl DatabaseLocation {
    /// Accepts `postgres://…` / `postgresql://…`, `sqlite://PATH`, `sqlite:PATH`
    /// or a plain file path.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err("the database location is empty".into());
        }
        if raw.starts_with("postgres://") || raw.starts_with("postgresql://") {
            return Ok(Self::Postgres(raw.to_owned()));
        }
        let path = raw
            .strip_prefix("sqlite://")
            .or_else(|| raw.strip_prefix("sqlite:"))
            .unwrap_or(raw);
        let path = path.split('?').next().unwrap_or(path);
        if path.is_empty() {
            return Err(format!("{raw:?} names no SQLite file"));
        }
        if raw.contains("://") && !raw.starts_with("sqlite://") {
            return Err(format!(
                "unsupported database URL {raw:?}: use a file path, sqlite://PATH or postgres://…"
            ));
        }
        if path.contains(['#', '%']) {
            return Err(format!(
                "the SQLite path {path:?} contains '#' or '%'; choose a simpler file name"
            ));
        }
        Ok(Self::Sqlite(PathBuf::from(path)))
    }

    /// A form safe to print: a PostgreSQL URL loses its password.
    pub fn redacted(&self) -> String {
        match self {
            Self::Sqlite(path) => path.display().to_string(),
            Self::Postgres(url) => redact_url_password(url),
        }
    }
}

/// The todo table's per-table vacuum settings only act when autovacuum runs;
/// without it a queue table slows ~3× within a minute (B1).
/// Readings of the PostgreSQL server's clock taken per measurement.
const CLOCK_SAMPLES: usize = 3;

impl SqlStore {
    /// Reads the database server's clock a few times, each between two
    /// readings of the system clock: PostgreSQL only (SQLite shares this
    /// host's clock). The caller picks the tightest sample.
    pub async fn sample_database_clock(&self) -> StoreResult<Vec<crate::clock::ClockSample>> {
        use sqlx::Row;
        if self.dialect != Dialect::Postgres {
            return Ok(Vec::new());
        }
        let system = crate::clock::SystemClock;
        let mut samples = Vec::with_capacity(CLOCK_SAMPLES);
        for _ in 0..CLOCK_SAMPLES {
            let sent = crate::clock::Clock::now(&system).as_millis();
            let row = sqlx::query(
                "SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)",
            )
            .fetch_one(&self.reader)
            .await?;
            let answered = crate::clock::Clock::now(&system).as_millis();
            samples.push(crate::clock::ClockSample {
                sent_ms: sent,
                answered_ms: answered,
                reference_ms: row.try_get(0)?,
            });
        }
        Ok(samples)
    }
}

async fn warn_if_autovacuum_is_off(pool: &AnyPool) {
    use sqlx::Row;
    if let Ok(row) = sqlx::query("SHOW autovacuum").fetch_one(pool).await
        && row.try_get::<String, _>(0).is_ok_and(|v| v == "off")
    {
        tracing::warn!(
            "PostgreSQL autovacuum is off: the todo table will bloat and claims will slow down; \
             turn it on (the table carries its own tuned settings)"
        );
    }
}

/// The circuit's probe connects as `switchboard-probe`, so that an operator
/// (and a test) can tell it apart in `pg_stat_activity`; a name the URL
/// gives comes later and wins.
fn probe_url(url: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    if query.is_empty() {
        format!("{base}?application_name=switchboard-probe")
    } else {
        format!("{base}?application_name=switchboard-probe&{query}")
    }
}

fn redact_url_password(url: &str) -> String {
    // postgres://user:secret@host/db -> postgres://user:***@host/db
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.split_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// PostgreSQL connections, both pools together (SQLite always has one
    /// writer and a few readers).
    pub max_connections: u32,
    /// How long a call waits for a connection before answering `unavailable`.
    pub acquire_timeout: Duration,
    /// Run every transition on the generic transaction path only, never on
    /// PostgreSQL's one-statement forms or SQLite's writer thread. The
    /// conformance suite runs the transition cases both ways, so that the
    /// generic path — which otherwise runs only after a race or a refusal —
    /// keeps the same behaviour.
    pub generic_transitions_only: bool,
    /// PostgreSQL: vacuum the queue table in the background once this many
    /// claims have gone by (`postgres/vacuum.rs`; default 2 000). `None`
    /// only to measure without it.
    pub queue_vacuum_claims: Option<u64>,
    /// PostgreSQL: `complete`s that arrive while another runs, and claims
    /// of an endpoint that arrive while another of its claims runs, wait
    /// and run as one statement (`postgres/batch.rs`). Off only to measure
    /// without.
    pub group_commit: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 24,
            // Under the 1 s a request may take to say `unavailable` (`09`).
            acquire_timeout: Duration::from_millis(750),
            generic_transitions_only: false,
            queue_vacuum_claims: Some(postgres::vacuum::MIN_CLAIMS),
            group_commit: true,
        }
    }
}

/// Where the agent loop's transitions run first ([`SqlStore::specialised`]).
enum Specialised<'a> {
    Postgres,
    SqliteLane(&'a Arc<sqlite::lane::Lane>),
    None,
}

#[derive(Debug, Clone)]
pub struct SqlStore {
    dialect: Dialect,
    /// All writes. On SQLite this pool has exactly one connection.
    writer: AnyPool,
    /// Plain reads. On PostgreSQL the same pool as `writer`.
    reader: AnyPool,
    clock: SharedClock,
    /// PostgreSQL only: remembers that the database is unreachable.
    circuit: Option<Arc<Circuit>>,
    /// What the circuit's probe connects to, and how long it waits.
    probe_target: Option<(String, Duration)>,
    /// Credential → endpoint, for the MCP surface's per-request lookup.
    auth_cache: Arc<AuthCache>,
    /// SQLite only: the agent loop's calls on a writer thread of their own.
    lane: Option<Arc<sqlite::lane::Lane>>,
    /// PostgreSQL: the queue's hot path's own pool and the connections
    /// parked from it (`postgres/hot.rs`).
    hot: Arc<postgres::hot::HotConnections>,
    /// [`StoreOptions::generic_transitions_only`].
    generic_only: bool,
    /// PostgreSQL: the queue table's vacuum as claims go by
    /// (`postgres/vacuum.rs`; [`StoreOptions::queue_vacuum_claims`]).
    vacuum: Option<Arc<postgres::vacuum::QueueVacuum>>,
    /// PostgreSQL: concurrent `complete`s, and concurrent `fail`s, each
    /// coalesced into one statement (`postgres/batch.rs`;
    /// [`StoreOptions::group_commit`]).
    finishes: Option<Arc<postgres::batch::Batcher<postgres::batch::FinishInput>>>,
    /// PostgreSQL: concurrent pending claims of one endpoint (and queue)
    /// coalesced into one statement (`postgres/claims.rs`).
    claims: Option<Arc<postgres::claims::ClaimBatches>>,
}

impl SqlStore {
    /// Opens the database (creating an SQLite file if needed). Does not migrate.
    pub async fn connect(
        location: &DatabaseLocation,
        clock: SharedClock,
        options: &StoreOptions,
    ) -> StoreResult<Self> {
        install_default_drivers();
        match location {
            DatabaseLocation::Sqlite(path) => Self::connect_sqlite(path, clock, options).await,
            DatabaseLocation::Postgres(url) => {
                // The hot path (`postgres/hot.rs`) has a share of the connections
                // in a pool of its own, with its own session settings.
                let hot_share = postgres::hot::pool_share(options.max_connections);
                let pool_of = |max: u32| {
                    AnyPoolOptions::new()
                        .max_connections(max)
                        .acquire_timeout(options.acquire_timeout)
                        // No ping on every checkout: it is a round trip per
                        // call (B1). A broken connection fails its call as
                        // `unavailable` and is replaced by the pool.
                        .test_before_acquire(false)
                };
                let unreachable = |e: sqlx::Error| {
                    StoreError::Unavailable(Box::new(WithContext {
                        context: format!("cannot connect to {}", redact_url_password(url)),
                        source: Box::new(e),
                    }))
                };
                let main_share = options.max_connections.saturating_sub(hot_share).max(1);
                let pool = pool_of(main_share)
                    .connect(url)
                    .await
                    .map_err(unreachable)?;
                let hot_pool = pool_of(hot_share)
                    .connect(&postgres::hot::session_url(url))
                    .await
                    .map_err(unreachable)?;
                warn_if_autovacuum_is_off(&pool).await;
                Ok(Self {
                    dialect: Dialect::Postgres,
                    writer: pool.clone(),
                    reader: pool,
                    clock,
                    circuit: Some(Circuit::new()),
                    probe_target: Some((probe_url(url), options.acquire_timeout)),
                    auth_cache: Arc::default(),
                    lane: None,
                    hot: Arc::new(postgres::hot::HotConnections::new(hot_pool)),
                    generic_only: options.generic_transitions_only,
                    vacuum: options
                        .queue_vacuum_claims
                        .map(|claims| Arc::new(postgres::vacuum::QueueVacuum::new(claims))),
                    finishes: options.group_commit.then(Arc::default),
                    claims: options.group_commit.then(Arc::default),
                })
            }
        }
    }

    async fn connect_sqlite(
        path: &Path,
        clock: SharedClock,
        options: &StoreOptions,
    ) -> StoreResult<Self> {
        let absolute = std::path::absolute(path).map_err(|e| {
            StoreError::Unavailable(Box::new(WithContext {
                context: format!("cannot resolve {}", path.display()),
                source: Box::new(e),
            }))
        })?;
        let url = format!("sqlite://{}?mode=rwc", absolute.display());
        // A write waits for another connection's write lock (another
        // process, or this store's own writer thread) no longer than a call
        // waits for a connection: past it the call answers `unavailable`
        // (503 with Retry-After), not after sqlx's default of 5 s.
        let busy_ms = options.acquire_timeout.as_millis().max(1) as u64;
        let pool = move |max: u32| {
            AnyPoolOptions::new()
                .max_connections(max)
                .acquire_timeout(options.acquire_timeout)
                .test_before_acquire(false)
                .after_connect(move |conn, _meta| {
                    Box::pin(async move {
                        // WAL lets readers run beside the writer; NORMAL is
                        // durable across process crashes in WAL mode.
                        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                             PRAGMA busy_timeout = {busy_ms};"
                        )))
                        .execute(conn)
                        .await?;
                        Ok(())
                    })
                })
        };
        let open_err = |e: sqlx::Error| {
            StoreError::Unavailable(Box::new(WithContext {
                context: format!("cannot open {}", absolute.display()),
                source: Box::new(e),
            }))
        };
        // A commit by another connection (this store's sqlx pools, or a
        // tool writing the file beside the server) may have changed an
        // endpoint behind the credential cache's back.
        let auth_cache = Arc::<AuthCache>::default();
        let cache = auth_cache.clone();
        let lane = sqlite::lane::Lane::open(
            &absolute,
            options.acquire_timeout,
            Box::new(move || cache.invalidate()),
        )?;
        let writer = pool(1).connect(&url).await.map_err(open_err)?;
        let reader = pool(4).connect(&url).await.map_err(open_err)?;
        Ok(Self {
            dialect: Dialect::Sqlite,
            hot: Arc::new(postgres::hot::HotConnections::new(writer.clone())),
            writer,
            reader,
            clock,
            circuit: None,
            probe_target: None,
            auth_cache,
            lane: Some(Arc::new(lane)),
            generic_only: options.generic_transitions_only,
            // One writer, no row versions: nothing for a vacuum to remove.
            vacuum: None,
            finishes: None,
            claims: None,
        })
    }

    /// The specialisation the agent loop's transitions run on before the
    /// generic transaction path: PostgreSQL's one-statement forms, SQLite's
    /// writer thread, or none ([`StoreOptions::generic_transitions_only`]).
    fn specialised(&self) -> Specialised<'_> {
        match (&self.lane, self.dialect) {
            _ if self.generic_only => Specialised::None,
            (Some(lane), _) => Specialised::SqliteLane(lane),
            (None, Dialect::Postgres) => Specialised::Postgres,
            (None, Dialect::Sqlite) => Specialised::None,
        }
    }

    /// Applies pending migrations up to `target` (all when `None`).
    pub async fn migrate(&self, target: Option<i64>) -> StoreResult<Vec<i64>> {
        migrate::migrate(
            &self.writer,
            self.dialect,
            self.clock.now().as_millis(),
            target,
        )
        .await
    }

    pub async fn schema_version(&self) -> StoreResult<Option<i64>> {
        migrate::current_version(self.reader()?).await
    }

    /// Starts the circuit's probe (PostgreSQL only) until `stop`; without it
    /// the circuit stays closed and every call waits for the pool as before.
    pub fn start_circuit_probe(
        &self,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let (circuit, (url, timeout)) = (self.circuit.as_ref()?, self.probe_target.clone()?);
        Some(circuit.spawn_probe(
            vec![self.writer.clone(), self.hot.pool().clone()],
            url,
            timeout,
            stop,
        ))
    }

    /// Whether calls answer `unavailable` at once because the database is
    /// known to be unreachable.
    pub fn circuit_is_open(&self) -> bool {
        self.circuit.as_ref().is_some_and(|c| c.is_open())
    }

    /// The pool for plain reads, unless the circuit is open.
    fn reader(&self) -> StoreResult<&AnyPool> {
        self.check_circuit()?;
        Ok(&self.reader)
    }

    /// The pool for writes, unless the circuit is open.
    fn writer(&self) -> StoreResult<&AnyPool> {
        self.check_circuit()?;
        Ok(&self.writer)
    }

    /// PostgreSQL: a connection of the hot path's pool (`postgres/hot.rs`), whose
    /// sessions plan no sequential or bitmap scans; give it back with
    /// [`Self::put_hot_connection`] once its statement completed normally. For the queue's
    /// hot statements and for reads that must stay on index range scans
    /// (the sweep's due read, `rings.rs`). Unless the circuit is open.
    async fn hot_connection(&self) -> StoreResult<PoolConnection<Any>> {
        self.check_circuit()?;
        Ok(self.hot.take(self.circuit_changes()).await?)
    }

    /// Counts a claim from the pending index towards the queue table's next
    /// vacuum (PostgreSQL, `postgres/vacuum.rs`).
    fn count_claim(&self) {
        if let Some(vacuum) = &self.vacuum {
            vacuum.claimed(&self.writer);
        }
    }

    /// PostgreSQL's group commit of `complete`, `fail` and `release`
    /// (`postgres/batch.rs`): how many statements ran more than one of
    /// them, and how many they ran (for benchmarks and tests).
    pub fn finish_batches(&self) -> (u64, u64) {
        self.finishes.as_ref().map_or((0, 0), |c| c.counts())
    }

    /// `complete`s, `fail`s and `release`s waiting for the one running to
    /// finish (tests).
    pub fn finishes_waiting(&self) -> usize {
        self.finishes.as_ref().map_or(0, |c| c.waiting())
    }

    /// PostgreSQL's group commit of pending claims (`postgres/claims.rs`):
    /// how many statements ran more than one claim, and how many claims
    /// they ran (for benchmarks and tests).
    pub fn claim_batches(&self) -> (u64, u64) {
        self.claims.as_ref().map_or((0, 0), |c| c.batcher.counts())
    }

    /// Claims waiting for their endpoint's running claim to finish (tests).
    pub fn claims_waiting(&self) -> usize {
        self.claims.as_ref().map_or(0, |c| c.batcher.waiting())
    }

    /// PostgreSQL's group commit of `complete` with `next`
    /// (`postgres/chained.rs`): how many statements ran more than one, and
    /// how many they ran (for benchmarks and tests).
    pub fn chained_batches(&self) -> (u64, u64) {
        self.claims.as_ref().map_or((0, 0), |c| c.chained.counts())
    }

    /// `complete`s with `next` waiting for their endpoint's running one to
    /// finish (tests).
    pub fn chained_waiting(&self) -> usize {
        self.claims.as_ref().map_or(0, |c| c.chained.waiting())
    }

    /// How many background vacuums of the queue table this store ran
    /// (PostgreSQL; for benchmarks and tests).
    pub fn queue_vacuums(&self) -> u64 {
        self.vacuum.as_ref().map_or(0, |v| v.runs())
    }

    /// Gives back a connection from [`Self::hot_connection`] whose statement
    /// completed normally (a failed one is dropped instead).
    fn put_hot_connection(&self, conn: PoolConnection<Any>) {
        self.hot.put(conn, self.circuit_changes());
    }

    /// How many times the circuit has changed (0 without one).
    fn circuit_changes(&self) -> u64 {
        self.circuit.as_ref().map_or(0, |c| c.changes())
    }

    fn check_circuit(&self) -> StoreResult<()> {
        match &self.circuit {
            Some(circuit) => circuit.check(),
            None => Ok(()),
        }
    }

    pub async fn close(&self) {
        if let Some(lane) = &self.lane {
            lane.close().await;
        }
        self.hot.close().await;
        self.writer.close().await;
        self.reader.close().await;
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// An endpoint's (or its agent's) row changed through this store: no
    /// cached credential may be served as it was.
    fn endpoints_changed(&self) {
        self.auth_cache.invalidate();
    }

    async fn begin(&self) -> StoreResult<Transaction<'static, Any>> {
        Ok(self
            .writer()?
            .begin_with(self.dialect.begin_write())
            .await?)
    }
}

/// What only tests and benchmarks call, through the kit
/// (`testkit::StorePeek`): not the store's API. Compiled in every build (the
/// lane's and the hot path's counterparts are used only here), dead code
/// without the `testkit` feature.
#[cfg_attr(not(feature = "testkit"), allow(dead_code))]
impl SqlStore {
    /// PostgreSQL: opens up to `callers` of the hot path's connections now
    /// (no more than its share of the pool), so that as many agent loops
    /// starting at once do not each pay for a connect: for benchmarks, whose
    /// clock should not include it. SQLite: nothing to open.
    pub(crate) async fn testkit_open_hot_connections(&self, callers: usize) -> StoreResult<()> {
        if self.dialect == Dialect::Postgres {
            self.check_circuit()?;
            self.hot.open(callers, self.circuit_changes()).await?;
        }
        Ok(())
    }

    /// SQLite only: how many transactions the writer thread has run (each
    /// commits every call queued behind the previous one), for benchmarks.
    pub(crate) fn testkit_sqlite_writer_transactions(&self) -> Option<u64> {
        self.lane.as_ref().map(|lane| lane.batches())
    }

    /// The write pool, for tests and benchmarks that inspect the database directly.
    pub(crate) fn testkit_pool(&self) -> &AnyPool {
        &self.writer
    }
}

#[async_trait]
impl StoreBase for SqlStore {
    fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn clock(&self) -> &SharedClock {
        &self.clock
    }

    async fn readiness(&self) -> StoreResult<()> {
        let expected = migrate::latest_version(self.dialect);
        match self.schema_version().await? {
            Some(v) if v == expected => Ok(()),
            Some(found) => Err(StoreError::SchemaMismatch { found, expected }),
            None => Err(StoreError::SchemaMismatch { found: 0, expected }),
        }
    }

    fn forget_credentials(&self) {
        self.auth_cache.invalidate();
    }
}

/// What SQLite's planner does with `sql` on the product's schema, one line
/// per step: the plan checks of the modules' tests.
#[cfg(test)]
fn sqlite_plan(sql: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    for migration in crate::store::migrate::SQLITE_MIGRATIONS {
        conn.execute_batch(migration.sql).unwrap();
    }
    let mut stmt = conn
        .prepare(&format!(
            "EXPLAIN QUERY PLAN {}",
            sqlite::lane::numbered(sql)
        ))
        .unwrap();
    let mut rows = stmt.raw_query();
    let mut plan = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        plan.push(row.get::<_, String>(3).unwrap());
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_database_locations() {
        assert_eq!(
            DatabaseLocation::parse("switchboard.db").unwrap(),
            DatabaseLocation::Sqlite("switchboard.db".into())
        );
        assert_eq!(
            DatabaseLocation::parse("sqlite:///var/lib/sb.db?mode=rwc").unwrap(),
            DatabaseLocation::Sqlite("/var/lib/sb.db".into())
        );
        assert_eq!(
            DatabaseLocation::parse("sqlite:data.db").unwrap(),
            DatabaseLocation::Sqlite("data.db".into())
        );
        assert!(matches!(
            DatabaseLocation::parse("postgres://u:p@127.0.0.1/test").unwrap(),
            DatabaseLocation::Postgres(_)
        ));
        assert!(DatabaseLocation::parse("mysql://x").is_err());
        assert!(DatabaseLocation::parse("").is_err());
    }

    #[test]
    fn redacts_passwords() {
        let loc = DatabaseLocation::parse("postgres://root:hunter2@127.0.0.1:5432/test").unwrap();
        assert_eq!(loc.redacted(), "postgres://root:***@127.0.0.1:5432/test");
        assert!(!loc.redacted().contains("hunter2"));
    }

    #[test]
    fn the_probe_names_itself_unless_the_url_does() {
        assert_eq!(
            probe_url("postgres://u@h/db"),
            "postgres://u@h/db?application_name=switchboard-probe"
        );
        assert_eq!(
            probe_url("postgres://u@h/db?sslmode=disable"),
            "postgres://u@h/db?application_name=switchboard-probe&sslmode=disable"
        );
    }
}
