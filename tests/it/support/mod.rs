//! Shared test support: a fresh store per test on each backend, a manual
//! clock, and a small registry fixture.
//!
//! PostgreSQL tests read `SWITCHBOARD_TEST_DATABASE_URL` (any database on the
//! server; each test creates and drops its own). Without it they print a
//! visible skip message and pass; `.ci/run` sets it and refuses to skip.
//!
//! What the benchmarks need too is the kit's (`switchboard::testkit`, the
//! `testkit` feature): throwaway databases and PostgreSQL clusters, the
//! server process starter, raw-SQL peeks (`StorePeek`).
#![allow(dead_code)]

/// The REST API's end-to-end helpers (requests that keep raw bodies, humans).
pub mod api;
/// The in-process doorbell hub and its streams.
pub mod delivery;
/// The MCP end-to-end helpers: a raw MCP client, the SDK listener.
pub mod mcp;
/// `npm ci` for the Node helpers, one install at a time across test processes.
pub mod npm;
/// A real `serve` with generous rates and its admin token (faults, abuse).
pub mod served;
/// Every way the tests start a server: in process, or the real binary.
pub mod server;
/// What a run skipped, summed up where plain `cargo test` shows it.
pub mod skips;
/// An MCP notification stream read event by event.
pub mod sse;

/// One series of a server's `/metrics` (e.g.
/// `switchboard_hook_deliveries_total{outcome="ok"}`), read now; panics
/// with the whole exposition when the series is missing.
pub async fn metric(http: &reqwest::Client, metrics_url: &str, series: &str) -> f64 {
    let text = exposition(http, metrics_url).await;
    sample(&text, series).unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"))
}

/// [`metric`] for a counter that appears at its first increment: 0 until
/// then.
pub async fn metric_or_zero(http: &reqwest::Client, metrics_url: &str, series: &str) -> f64 {
    sample(&exposition(http, metrics_url).await, series).unwrap_or(0.0)
}

/// The whole `/metrics` exposition at `metrics_url`, read now.
pub async fn exposition(http: &reqwest::Client, metrics_url: &str) -> String {
    http.get(metrics_url)
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("/metrics body")
}

/// The value of `series` (full name with labels) in an exposition.
pub fn sample(exposition: &str, series: &str) -> Option<f64> {
    let prefix = format!("{series} ");
    exposition.lines().find_map(|line| {
        let value = line.strip_prefix(&prefix)?.trim();
        Some(
            value
                .parse()
                .unwrap_or_else(|e| panic!("{series} {value}: {e}")),
        )
    })
}

use std::sync::Arc;

use switchboard::clock::ManualClock;
use switchboard::domain::ids::sha256_hex;
use switchboard::mint::random_token;
use switchboard::store::sql::DatabaseLocation;
use switchboard::store::*;
use switchboard::testkit::{PG_ENV, REQUIRE_PG_ENV, ThrowawayDatabase, migrated_template};

pub struct TestStore {
    pub store: Arc<SqlStore>,
    pub clock: Arc<ManualClock>,
    cleanup: Cleanup,
}

enum Cleanup {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres(ThrowawayDatabase),
}

impl TestStore {
    pub fn clock_now(&self) -> switchboard::domain::Timestamp {
        use switchboard::clock::Clock;
        self.clock.now()
    }

    pub fn dialect(&self) -> Dialect {
        self.store.dialect()
    }

    /// The URL of this test's own PostgreSQL database (`None` on SQLite),
    /// for servers started on it.
    pub fn postgres_url(&self) -> Option<String> {
        match &self.cleanup {
            Cleanup::Postgres(database) => Some(database.url.clone()),
            Cleanup::Sqlite(_) => None,
        }
    }

    /// Closes the pools and drops the per-test PostgreSQL database.
    pub async fn finish(self) {
        self.store.close().await;
        if let Cleanup::Postgres(database) = self.cleanup {
            let _ = database.drop_database().await;
        }
    }
}

pub async fn sqlite_store() -> TestStore {
    migrated_sqlite_store(StoreOptions::default()).await
}

/// Options whose transitions all run on the generic transaction path, never
/// on a backend's specialisation (`StoreOptions::generic_transitions_only`).
fn generic_transitions() -> StoreOptions {
    StoreOptions {
        generic_transitions_only: true,
        ..StoreOptions::default()
    }
}

/// [`sqlite_store`] on the generic transaction path only.
pub async fn generic_sqlite_store() -> TestStore {
    migrated_sqlite_store(generic_transitions()).await
}

async fn migrated_sqlite_store(options: StoreOptions) -> TestStore {
    let ts = sqlite_store_with(options).await;
    ts.store.migrate(None).await.expect("migrate sqlite");
    ts
}

/// A fresh SQLite database with no schema at all (for migration tests).
pub async fn unmigrated_sqlite_store() -> TestStore {
    sqlite_store_with(StoreOptions::default()).await
}

async fn sqlite_store_with(options: StoreOptions) -> TestStore {
    let dir = tempfile::tempdir().expect("temp dir");
    let location = DatabaseLocation::Sqlite(dir.path().join("test.db"));
    let clock = ManualClock::at_fixed_start();
    let store = SqlStore::connect(&location, clock.clone(), &options)
        .await
        .expect("open sqlite");
    TestStore {
        store: Arc::new(store),
        clock,
        cleanup: Cleanup::Sqlite(dir),
    }
}

/// A fresh, migrated PostgreSQL database (a copy of the migrated template,
/// see [`migrated_template`]), or `None` (with a visible message) when
/// `SWITCHBOARD_TEST_DATABASE_URL` is not set.
pub async fn postgres_store(test_name: &str) -> Option<TestStore> {
    let admin_url = postgres_admin_url(test_name)?;
    let template = migrated_template(&admin_url)
        .await
        .unwrap_or_else(|e| panic!("the migrated template on {PG_ENV}: {e:#}"));
    Some(open_postgres_copy(&admin_url, Some(&template), StoreOptions::default()).await)
}

/// [`postgres_store`] on the generic transaction path only.
pub async fn generic_postgres_store(test_name: &str) -> Option<TestStore> {
    let admin_url = postgres_admin_url(test_name)?;
    let template = migrated_template(&admin_url)
        .await
        .unwrap_or_else(|e| panic!("the migrated template on {PG_ENV}: {e:#}"));
    Some(open_postgres_copy(&admin_url, Some(&template), generic_transitions()).await)
}

/// A fresh PostgreSQL database with no schema at all, or `None` (with a
/// visible message) when `SWITCHBOARD_TEST_DATABASE_URL` is not set.
pub async fn unmigrated_postgres_store(test_name: &str) -> Option<TestStore> {
    let admin_url = postgres_admin_url(test_name)?;
    Some(open_postgres_copy(&admin_url, None, StoreOptions::default()).await)
}

fn postgres_admin_url(test_name: &str) -> Option<String> {
    let Ok(admin_url) = std::env::var(PG_ENV) else {
        assert!(
            std::env::var_os(REQUIRE_PG_ENV).is_none(),
            "{REQUIRE_PG_ENV} is set but {PG_ENV} is not: the PostgreSQL suite must run"
        );
        skips::skipped(
            skips::Kind::PostgreSql,
            test_name,
            &format!("set {PG_ENV} to run the PostgreSQL suite"),
        );
        return None;
    };
    Some(admin_url)
}

/// Creates a fresh database (a copy of `template`, or empty) and opens it.
async fn open_postgres_copy(
    admin_url: &str,
    template: Option<&str>,
    options: StoreOptions,
) -> TestStore {
    let database = ThrowawayDatabase::create_from(admin_url, "sb_test", template)
        .await
        .unwrap_or_else(|e| panic!("{PG_ENV} is set but no test database was made: {e:#}"));
    let clock = ManualClock::at_fixed_start();
    let store = SqlStore::connect(
        &DatabaseLocation::Postgres(database.url.clone()),
        clock.clone(),
        &StoreOptions {
            max_connections: 24,
            ..options
        },
    )
    .await
    .expect("open postgres");
    TestStore {
        store: Arc::new(store),
        clock,
        cleanup: Cleanup::Postgres(database),
    }
}

/// Another fresh, unmigrated database on the same backend as `like`, for
/// tests that need more than one store (it has its own clock).
pub async fn unmigrated_store_like(like: &TestStore, test_name: &str) -> TestStore {
    match like.dialect() {
        Dialect::Sqlite => unmigrated_sqlite_store().await,
        Dialect::Postgres => unmigrated_postgres_store(test_name)
            .await
            .expect("a PostgreSQL test store exists, so the URL is set"),
    }
}

/// A second handle on the same database as `ts` (its own pools, the same
/// clock): what another instance of the server would hold. Close it before
/// `ts.finish()`.
pub async fn second_handle(ts: &TestStore) -> SqlStore {
    let location = match &ts.cleanup {
        Cleanup::Sqlite(dir) => DatabaseLocation::Sqlite(dir.path().join("test.db")),
        Cleanup::Postgres(database) => DatabaseLocation::Postgres(database.url.clone()),
    };
    SqlStore::connect(&location, ts.clock.clone(), &StoreOptions::default())
        .await
        .expect("open a second handle on the same database")
}

/// What the helpers accept as a store: `&dyn Store` (a conformance case),
/// `&SqlStore` or `&Arc<SqlStore>` (a test holding the concrete store).
pub trait StoreHandle: Sync {
    fn as_store(&self) -> &dyn Store;
}

impl StoreHandle for dyn Store {
    fn as_store(&self) -> &dyn Store {
        self
    }
}

impl StoreHandle for SqlStore {
    fn as_store(&self) -> &dyn Store {
        self
    }
}

impl StoreHandle for Arc<SqlStore> {
    fn as_store(&self) -> &dyn Store {
        &**self
    }
}

/// One human with one agent and one endpoint (queues `inbox`, `reviews`).
pub struct Fixture {
    pub human: Human,
    pub agent: Agent,
    pub endpoint: Endpoint,
    pub caller: Caller,
}

pub async fn fixture(store: &(impl StoreHandle + ?Sized), human_name: &str) -> Fixture {
    let store = store.as_store();
    let human = store.create_human(human_name).await.expect("human");
    endpoint_for(store, human, "worker", &["inbox", "reviews"]).await
}

/// Registers `agent_name` for `human` and vends it an endpoint on `queues`.
pub async fn endpoint_for(
    store: &(impl StoreHandle + ?Sized),
    human: Human,
    agent_name: &str,
    queues: &[&str],
) -> Fixture {
    let store = store.as_store();
    let agent = store
        .create_agent(&human.id, agent_name, AgentKind::Task)
        .await
        .expect("agent");
    let endpoint = vend(store, &agent, queues).await;
    let caller = endpoint.caller();
    Fixture {
        human,
        agent,
        endpoint,
        caller,
    }
}

pub async fn vend(store: &(impl StoreHandle + ?Sized), agent: &Agent, queues: &[&str]) -> Endpoint {
    let store = store.as_store();
    store
        .create_endpoint(new_endpoint(agent, queues))
        .await
        .expect("endpoint")
}

/// What [`vend`] writes: a fresh credential, all verbs, no expiry, no default lease.
pub fn new_endpoint(agent: &Agent, queues: &[&str]) -> NewEndpoint {
    let credential = format!("sbk_{}", random_token(32));
    NewEndpoint {
        agent_id: agent.id.clone(),
        slug: format!("{}-{}", agent.name, random_token(3).to_lowercase()),
        credential_hash: sha256_hex(&credential),
        credential_prefix: credential[..12].to_owned(),
        queues: queues.iter().map(|q| (*q).to_owned()).collect(),
        verbs: vec![],
        expires_at: None,
        default_lease_ttl_seconds: None,
        server_name: None,
    }
}

/// As [`endpoint_for`], with the vend adjusted by `customize` (an expiry, a default lease).
pub async fn endpoint_with(
    store: &(impl StoreHandle + ?Sized),
    human: Human,
    agent_name: &str,
    queues: &[&str],
    customize: impl FnOnce(&mut NewEndpoint),
) -> Fixture {
    let store = store.as_store();
    let agent = store
        .create_agent(&human.id, agent_name, AgentKind::Task)
        .await
        .expect("agent");
    let mut new = new_endpoint(&agent, queues);
    customize(&mut new);
    let endpoint = store.create_endpoint(new).await.expect("endpoint");
    let caller = endpoint.caller();
    Fixture {
        human,
        agent,
        endpoint,
        caller,
    }
}

/// Generates one test per backend from an `async fn(TestStore)`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let ts = $crate::support::sqlite_store().await;
                    super::$name(&ts).await;
                    ts.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(ts) = $crate::support::postgres_store(stringify!($name)).await else {
                        return;
                    };
                    super::$name(&ts).await;
                    ts.finish().await;
                }
            )*
        }
    };
}

/// [`exercise_on_both_backends!`], and each case once more per backend on
/// the generic transaction path only (`sqlite_generic::`,
/// `postgres_generic::`): the transition cases, whose generic path otherwise
/// runs only after a race or a refusal.
#[macro_export]
macro_rules! exercise_on_every_path {
    ($($name:ident),* $(,)?) => {
        $crate::exercise_on_both_backends!($($name),*);
        mod sqlite_generic {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let ts = $crate::support::generic_sqlite_store().await;
                    super::$name(&*ts.store, &ts).await;
                    ts.finish().await;
                }
            )*
        }
        mod postgres_generic {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(ts) = $crate::support::generic_postgres_store(stringify!($name)).await
                    else {
                        return;
                    };
                    super::$name(&*ts.store, &ts).await;
                    ts.finish().await;
                }
            )*
        }
    };
}

/// Generates one test per backend from an `async fn(&dyn Store, &TestStore)`
/// (the shape of River's driver tests): the case talks to the contract; the
/// `TestStore` gives it the clock and, where a case needs raw SQL, the
/// concrete store.
#[macro_export]
macro_rules! exercise_on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let ts = $crate::support::sqlite_store().await;
                    super::$name(&*ts.store, &ts).await;
                    ts.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(ts) = $crate::support::postgres_store(stringify!($name)).await else {
                        return;
                    };
                    super::$name(&*ts.store, &ts).await;
                    ts.finish().await;
                }
            )*
        }
    };
}
