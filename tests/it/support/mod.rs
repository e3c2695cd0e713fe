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
/// `npm ci` for the Node helpers, one install at a time across test processes.
pub mod npm;
/// A throwaway PostgreSQL cluster a test may stop and start.
pub mod pg_cluster;
/// Every way the tests start a server: in process, or the real binary.
pub mod server;
/// An MCP notification stream read event by event.
pub mod sse;

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

    /// The URL of this test's own PostgreSQL database (`None` on SQLite),
    /// for servers started on it.
    pub fn postgres_url(&self) -> Option<String> {
        match &self.cleanup {
            Cleanup::Postgres {
                admin_url,
                database,
            } => Some(replace_database(admin_url, database)),
            Cleanup::Sqlite(_) => None,
        }
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

/// A fresh, migrated PostgreSQL database (a copy of the migrated template,
/// see [`migrated_template`]), or `None` (with a visible message) when
/// `SWITCHBOARD_TEST_DATABASE_URL` is not set.
pub async fn postgres_store(test_name: &str) -> Option<TestStore> {
    let admin_url = postgres_admin_url(test_name)?;
    let template = migrated_template(&admin_url).await;
    Some(open_postgres_copy(admin_url, Some(template)).await)
}

/// A fresh PostgreSQL database with no schema at all, or `None` (with a
/// visible message) when `SWITCHBOARD_TEST_DATABASE_URL` is not set.
pub async fn unmigrated_postgres_store(test_name: &str) -> Option<TestStore> {
    let admin_url = postgres_admin_url(test_name)?;
    Some(open_postgres_copy(admin_url, None).await)
}

fn postgres_admin_url(test_name: &str) -> Option<String> {
    let Ok(admin_url) = std::env::var(PG_ENV) else {
        assert!(
            std::env::var_os(REQUIRE_PG_ENV).is_none(),
            "{REQUIRE_PG_ENV} is set but {PG_ENV} is not: the PostgreSQL suite must run"
        );
        eprintln!("SKIPPED (PostgreSQL): {test_name}: set {PG_ENV} to run the PostgreSQL suite");
        return None;
    };
    Some(admin_url)
}

async fn admin_connection(admin_url: &str) -> PgConnection {
    PgConnection::connect(admin_url)
        .await
        .unwrap_or_else(|e| panic!("{PG_ENV} is set but PostgreSQL is unreachable: {e}"))
}

/// Runs `sql` on `admin`, retrying while PostgreSQL still counts a just-closed
/// session as connected to the source database ("being accessed by other users").
async fn execute_retrying_busy_source(admin: &mut PgConnection, sql: &str) {
    for attempt in 0.. {
        match sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut *admin)
            .await
        {
            Ok(_) => return,
            // 55006 object_in_use: a session on the source has not ended yet.
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some("55006") && attempt < 100 =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{sql}: {e}"),
        }
    }
}

/// The name of a database migrated to this binary's schema, created once per
/// schema: the name carries a hash of the migrations, so a template is never
/// stale, and it is built under another name and renamed when complete, under
/// an advisory lock, so concurrent test binaries neither race nor see a half
/// migrated template. Tests copy it (`CREATE DATABASE … TEMPLATE`) instead of
/// migrating; it is left in place for the next run.
pub async fn migrated_template(admin_url: &str) -> String {
    static TEMPLATE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    TEMPLATE
        .get_or_init(|| build_template(admin_url.to_owned()))
        .await
        .clone()
}

async fn build_template(admin_url: String) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for m in switchboard::store::migrate::migrations(switchboard::store::dialect::Dialect::Postgres)
    {
        (m.version, m.name, m.sql).hash(&mut hasher);
    }
    let template = format!("sb_tpl_{:016x}", hasher.finish());
    let mut admin = admin_connection(&admin_url).await;
    // One builder at a time across processes (the key is arbitrary but fixed).
    sqlx::query("SELECT pg_advisory_lock(7347201)")
        .execute(&mut admin)
        .await
        .expect("take the template lock");
    let exists = sqlx::query("SELECT 1 FROM pg_database WHERE datname = $1")
        .bind(&template)
        .fetch_optional(&mut admin)
        .await
        .expect("look for the template")
        .is_some();
    if !exists {
        let building = format!("{template}_building");
        execute_retrying_busy_source(
            &mut admin,
            &format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"),
        )
        .await;
        execute_retrying_busy_source(&mut admin, &format!("CREATE DATABASE {building}")).await;
        let store = SqlStore::connect(
            &DatabaseLocation::Postgres(replace_database(&admin_url, &building)),
            ManualClock::at_fixed_start(),
            &StoreOptions::default(),
        )
        .await
        .expect("open the template");
        store.migrate(None).await.expect("migrate the template");
        // CREATE DATABASE … TEMPLATE needs no other session on the template.
        store.close().await;
        execute_retrying_busy_source(
            &mut admin,
            &format!("ALTER DATABASE {building} RENAME TO {template}"),
        )
        .await;
    }
    sqlx::query("SELECT pg_advisory_unlock(7347201)")
        .execute(&mut admin)
        .await
        .expect("release the template lock");
    let _ = admin.close().await;
    template
}

/// Creates a fresh database (a copy of `template`, or empty) and opens it.
async fn open_postgres_copy(admin_url: String, template: Option<String>) -> TestStore {
    let database = format!(
        "sb_test_{}",
        random_token(9).to_lowercase().replace(['-', '_'], "x")
    );
    let mut admin = admin_connection(&admin_url).await;
    let create = match &template {
        Some(template) => format!("CREATE DATABASE {database} TEMPLATE {template}"),
        None => format!("CREATE DATABASE {database}"),
    };
    execute_retrying_busy_source(&mut admin, &create).await;
    let _ = admin.close().await;
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
    TestStore {
        store: Arc::new(store),
        clock,
        cleanup: Cleanup::Postgres {
            admin_url,
            database,
        },
    }
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
