//! Shared test support: a fresh store per test on each backend, a manual
//! clock, and a small registry fixture.
//!
//! PostgreSQL tests read `SWITCHBOARD_TEST_DATABASE_URL` (any database on the
//! server; each test creates and drops its own). Without it they print a
//! visible skip message and pass; `.ci/run` sets it and refuses to skip.
#![allow(dead_code)]

/// The REST API's end-to-end helpers (requests that keep raw bodies, humans).
pub mod api;
/// The in-process doorbell hub and its streams.
pub mod delivery;
/// The MCP end-to-end helpers: a raw MCP client, the SDK listener.
pub mod mcp;
/// Every way the tests start a server: in process, or the real binary.
pub mod server;

use std::sync::Arc;

use sqlx::Connection;
use sqlx::postgres::PgConnection;
use switchboard::clock::ManualClock;
use switchboard::domain::ids::sha256_hex;
use switchboard::mint::random_token;
use switchboard::store::sql::DatabaseLocation;
use switchboard::store::*;

pub const PG_ENV: &str = "SWITCHBOARD_TEST_DATABASE_URL";
/// Set by `.ci/run`: a missing PostgreSQL URL is then a failure, not a skip.
pub const REQUIRE_PG_ENV: &str = "SWITCHBOARD_REQUIRE_POSTGRES";

pub struct TestStore {
    pub store: Arc<SqlStore>,
    pub clock: Arc<ManualClock>,
    cleanup: Cleanup,
}

enum Cleanup {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres { admin_url: String, database: String },
}

impl TestStore {
    pub fn clock_now(&self) -> switchboard::domain::Timestamp {
        use switchboard::clock::Clock;
        self.clock.now()
    }

    pub fn backend(&self) -> Backend {
        self.store.backend()
    }

    /// Closes the pools and drops the per-test PostgreSQL database.
    pub async fn finish(self) {
        self.store.close().await;
        if let Cleanup::Postgres {
            admin_url,
            database,
        } = &self.cleanup
            && let Ok(mut admin) = PgConnection::connect(admin_url).await
        {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {database} WITH (FORCE)"
            )))
            .execute(&mut admin)
            .await;
        }
    }
}

pub async fn sqlite_store() -> TestStore {
    let ts = unmigrated_sqlite_store().await;
    ts.store.migrate(None).await.expect("migrate sqlite");
    ts
}

/// A fresh SQLite database with no schema at all (for migration tests).
pub async fn unmigrated_sqlite_store() -> TestStore {
    let dir = tempfile::tempdir().expect("temp dir");
    let location = DatabaseLocation::Sqlite(dir.path().join("test.db"));
    let clock = ManualClock::at_fixed_start();
    let store = SqlStore::connect(&location, clock.clone(), &StoreOptions::default())
        .await
        .expect("open sqlite");
    TestStore {
        store: Arc::new(store),
        clock,
        cleanup: Cleanup::Sqlite(dir),
    }
}

/// A fresh PostgreSQL database, or `None` (with a visible message) when
/// `SWITCHBOARD_TEST_DATABASE_URL` is not set.
pub async fn postgres_store(test_name: &str) -> Option<TestStore> {
    let ts = unmigrated_postgres_store(test_name).await?;
    ts.store.migrate(None).await.expect("migrate postgres");
    Some(ts)
}

/// A fresh PostgreSQL database with no schema at all, or `None` (with a
/// visible message) when `SWITCHBOARD_TEST_DATABASE_URL` is not set.
pub async fn unmigrated_postgres_store(test_name: &str) -> Option<TestStore> {
    let Ok(admin_url) = std::env::var(PG_ENV) else {
        assert!(
            std::env::var_os(REQUIRE_PG_ENV).is_none(),
            "{REQUIRE_PG_ENV} is set but {PG_ENV} is not: the PostgreSQL suite must run"
        );
        eprintln!("SKIPPED (PostgreSQL): {test_name}: set {PG_ENV} to run the PostgreSQL suite");
        return None;
    };
    let database = format!(
        "sb_test_{}",
        random_token(9).to_lowercase().replace(['-', '_'], "x")
    );
    let mut admin = PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|e| panic!("{PG_ENV} is set but PostgreSQL is unreachable: {e}"));
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut admin)
        .await
        .expect("create test database");
    let url = replace_database(&admin_url, &database);
    let clock = ManualClock::at_fixed_start();
    let store = SqlStore::connect(
        &DatabaseLocation::Postgres(url),
        clock.clone(),
        &StoreOptions {
            max_connections: 24,
            ..StoreOptions::default()
        },
    )
    .await
    .expect("open postgres");
    Some(TestStore {
        store: Arc::new(store),
        clock,
        cleanup: Cleanup::Postgres {
            admin_url,
            database,
        },
    })
}

/// Another fresh, unmigrated database on the same backend as `like`, for
/// tests that need more than one store (it has its own clock).
pub async fn unmigrated_store_like(like: &TestStore, test_name: &str) -> TestStore {
    match like.backend() {
        Backend::Sqlite => unmigrated_sqlite_store().await,
        Backend::Postgres => unmigrated_postgres_store(test_name)
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
        Cleanup::Postgres {
            admin_url,
            database,
        } => DatabaseLocation::Postgres(replace_database(admin_url, database)),
    };
    SqlStore::connect(&location, ts.clock.clone(), &StoreOptions::default())
        .await
        .expect("open a second handle on the same database")
}

/// `postgres://u@h:5432/old?x` → `postgres://u@h:5432/new?x`.
pub fn replace_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{}", &base[..path_start], database);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// One human with one agent and one endpoint (queues `inbox`, `reviews`).
pub struct Fixture {
    pub human: Human,
    pub agent: Agent,
    pub endpoint: Endpoint,
    pub caller: Caller,
}

pub async fn fixture(store: &SqlStore, human_name: &str) -> Fixture {
    let human = store.create_human(human_name).await.expect("human");
    endpoint_for(store, human, "worker", &["inbox", "reviews"]).await
}

/// Registers `agent_name` for `human` and vends it an endpoint on `queues`.
pub async fn endpoint_for(
    store: &SqlStore,
    human: Human,
    agent_name: &str,
    queues: &[&str],
) -> Fixture {
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

pub async fn vend(store: &SqlStore, agent: &Agent, queues: &[&str]) -> Endpoint {
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
    }
}

/// As [`endpoint_for`], with the vend adjusted by `customize` (an expiry, a default lease).
pub async fn endpoint_with(
    store: &SqlStore,
    human: Human,
    agent_name: &str,
    queues: &[&str],
    customize: impl FnOnce(&mut NewEndpoint),
) -> Fixture {
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

#[test]
fn replaces_the_database_in_a_url() {
    assert_eq!(
        replace_database("postgres://root@127.0.0.1:5432/test", "x"),
        "postgres://root@127.0.0.1:5432/x"
    );
    assert_eq!(
        replace_database("postgres://root@127.0.0.1:5432/test?sslmode=disable", "x"),
        "postgres://root@127.0.0.1:5432/x?sslmode=disable"
    );
    assert_eq!(
        replace_database("postgres://root@h", "x"),
        "postgres://root@h/x"
    );
}
