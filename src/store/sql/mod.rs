//! [`SqlStore`]: the storage contract on SQLite or PostgreSQL.
//!
//! One implementation serves both dialects through sqlx's `Any` driver: the
//! statements are the same text (`$n` placeholders work on both), and the few
//! that differ come from [`Dialect`]. SQLite gets one writer connection and a
//! small reader pool (WAL, busy timeout, `BEGIN IMMEDIATE`), so clients never
//! see "database is locked"; PostgreSQL gets one pool and row locks.

mod agents;
mod humans;
mod listing;
mod paging;
mod presence;
mod registry;
mod rings;
mod stats;
pub use registry::validate_agent_name;
mod sweeps;
mod todos;
mod webhooks;

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{Any, AnyPool, Transaction};

use super::dialect::Dialect;
use super::error::WithContext;
use super::migrate;
use super::model::*;
use super::{Store, StoreError, StoreResult};
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
    /// PostgreSQL pool size (SQLite always has one writer and a few readers).
    pub max_connections: u32,
    /// How long a call waits for a connection before answering `unavailable`.
    pub acquire_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 24,
            acquire_timeout: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SqlStore {
    dialect: Dialect,
    /// All writes. On SQLite this pool has exactly one connection.
    writer: AnyPool,
    /// Plain reads. On PostgreSQL the same pool as `writer`.
    reader: AnyPool,
    clock: SharedClock,
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
                let pool = AnyPoolOptions::new()
                    .max_connections(options.max_connections)
                    .acquire_timeout(options.acquire_timeout)
                    // No ping on every checkout: it is a round trip per call
                    // (B1). A broken connection fails its call as
                    // `unavailable` and is replaced by the pool.
                    .test_before_acquire(false)
                    .connect(url)
                    .await
                    .map_err(|e| {
                        StoreError::Unavailable(Box::new(WithContext {
                            context: format!("cannot connect to {}", redact_url_password(url)),
                            source: Box::new(e),
                        }))
                    })?;
                warn_if_autovacuum_is_off(&pool).await;
                Ok(Self {
                    dialect: Dialect::Postgres,
                    writer: pool.clone(),
                    reader: pool,
                    clock,
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
        let pool = |max: u32| {
            AnyPoolOptions::new()
                .max_connections(max)
                .acquire_timeout(options.acquire_timeout)
                .test_before_acquire(false)
                .after_connect(|conn, _meta| {
                    Box::pin(async move {
                        // WAL lets readers run beside the writer; NORMAL is
                        // durable across process crashes in WAL mode.
                        sqlx::raw_sql("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
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
        let writer = pool(1).connect(&url).await.map_err(open_err)?;
        let reader = pool(4).connect(&url).await.map_err(open_err)?;
        Ok(Self {
            dialect: Dialect::Sqlite,
            writer,
            reader,
            clock,
        })
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
        migrate::current_version(&self.reader).await
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The write pool, for tests and benchmarks that inspect the database directly.
    pub fn pool(&self) -> &AnyPool {
        &self.writer
    }

    pub async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    async fn begin(&self) -> StoreResult<Transaction<'static, Any>> {
        Ok(self.writer.begin_with(self.dialect.begin_write()).await?)
    }
}

#[async_trait]
impl Store for SqlStore {
    fn backend(&self) -> Backend {
        self.dialect.backend()
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

    async fn create_human(&self, name: &str) -> StoreResult<Human> {
        self.insert_human(name).await
    }

    async fn create_agent(
        &self,
        human_id: &str,
        name: &str,
        kind: AgentKind,
    ) -> StoreResult<Agent> {
        self.insert_agent(NewAgent {
            human_id: human_id.to_owned(),
            name: name.to_owned(),
            kind,
            expected_interval_seconds: None,
            description: None,
        })
        .await
    }

    async fn create_endpoint(&self, new: NewEndpoint) -> StoreResult<Endpoint> {
        self.insert_endpoint(new).await
    }

    async fn unscoped_get_endpoint(&self, id: &str) -> StoreResult<Endpoint> {
        self.select_endpoint(id).await
    }

    async fn revoke_endpoint(&self, human_id: &str, endpoint_id: &str) -> StoreResult<Revoked> {
        self.revoke(human_id, endpoint_id).await
    }

    async fn unscoped_expire_endpoints(&self, limit: i64) -> StoreResult<Vec<Revoked>> {
        self.expire_endpoints(limit).await
    }

    async fn create_todo(&self, new: NewTodo) -> StoreResult<CreatedTodo> {
        self.insert_todo(new).await
    }

    async fn get_todo(&self, caller: &Caller, id: &str) -> StoreResult<Todo> {
        self.select_todo(caller, id).await
    }

    async fn list_attempts(
        &self,
        caller: &Caller,
        todo_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<Attempt>> {
        self.select_attempts(caller, todo_id, limit).await
    }

    async fn claim(&self, caller: &Caller, id: &str, opts: ClaimOptions) -> StoreResult<Claimed> {
        self.claim_by_id(caller, id, opts).await
    }

    async fn claim_next(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        opts: ClaimOptions,
    ) -> StoreResult<Option<Claimed>> {
        self.claim_oldest(caller, queue, opts).await
    }

    async fn heartbeat(
        &self,
        caller: &Caller,
        id: &str,
        opts: HeartbeatOptions,
    ) -> StoreResult<Todo> {
        self.extend_lease(caller, id, opts).await
    }

    async fn complete(&self, caller: &Caller, id: &str, finish: Finish) -> StoreResult<Todo> {
        self.finish_done(caller, id, finish).await
    }

    async fn fail(&self, caller: &Caller, id: &str, finish: Finish) -> StoreResult<Todo> {
        self.finish_failed(caller, id, finish).await
    }

    async fn release(&self, caller: &Caller, id: &str, opts: ReleaseOptions) -> StoreResult<Todo> {
        self.release_held(caller, id, opts).await
    }

    async fn human_retry(&self, human_id: &str, id: &str) -> StoreResult<Todo> {
        self.retry_for_human(human_id, id).await
    }

    async fn human_release(&self, human_id: &str, id: &str) -> StoreResult<Todo> {
        self.release_for_human(human_id, id).await
    }

    async fn count_humans(&self) -> StoreResult<i64> {
        self.count_all_humans().await
    }

    async fn get_human(&self, id: &str) -> StoreResult<Human> {
        self.select_human(id).await
    }

    async fn find_human_by_name(&self, name: &str) -> StoreResult<Human> {
        self.select_human_by_name(name).await
    }

    async fn create_api_token(&self, new: NewApiToken) -> StoreResult<ApiToken> {
        self.insert_api_token(new).await
    }

    async fn authenticate_api_token(
        &self,
        token_hash: &str,
    ) -> StoreResult<Option<(Human, ApiToken)>> {
        self.authenticate_token(token_hash).await
    }

    async fn list_api_tokens(
        &self,
        human_id: &str,
        page: &PageRequest,
    ) -> StoreResult<Page<ApiToken>> {
        self.select_api_tokens(human_id, page).await
    }

    async fn revoke_api_token(&self, human_id: &str, id: &str) -> StoreResult<ApiToken> {
        self.revoke_token(human_id, id).await
    }

    async fn register_agent(&self, new: NewAgent) -> StoreResult<Agent> {
        self.insert_agent(new).await
    }

    async fn list_agents(&self, human_id: &str, page: &PageRequest) -> StoreResult<Page<Agent>> {
        self.select_agents(human_id, page).await
    }

    async fn get_agent(&self, human_id: &str, name: &str) -> StoreResult<Agent> {
        self.select_agent(human_id, name).await
    }

    async fn update_agent(
        &self,
        human_id: &str,
        name: &str,
        patch: AgentPatch,
    ) -> StoreResult<Agent> {
        self.patch_agent(human_id, name, patch).await
    }

    async fn vend_endpoint(
        &self,
        human_id: &str,
        agent_name: &str,
        kind: AgentKind,
        new: NewEndpoint,
    ) -> StoreResult<(Agent, Endpoint, bool)> {
        self.vend(human_id, agent_name, kind, new).await
    }

    async fn list_endpoints(
        &self,
        human_id: &str,
        page: &PageRequest,
    ) -> StoreResult<Page<Endpoint>> {
        self.select_endpoints(human_id, page).await
    }

    async fn endpoints_of_agents(
        &self,
        human_id: &str,
        agent_ids: &[String],
    ) -> StoreResult<Vec<Endpoint>> {
        self.select_endpoints_of_agents(human_id, agent_ids).await
    }

    async fn get_endpoint(&self, human_id: &str, reference: &str) -> StoreResult<Endpoint> {
        self.select_endpoint_for(human_id, reference).await
    }

    async fn set_default_lease(
        &self,
        endpoint_id: &str,
        seconds: Option<i64>,
    ) -> StoreResult<Endpoint> {
        self.update_default_lease(endpoint_id, seconds).await
    }

    async fn delete_endpoint(&self, human_id: &str, endpoint_id: &str) -> StoreResult<()> {
        self.remove_endpoint(human_id, endpoint_id).await
    }

    async fn endpoint_activity(
        &self,
        endpoint_ids: &[String],
    ) -> StoreResult<std::collections::HashMap<String, EndpointActivity>> {
        self.select_activity(endpoint_ids).await
    }

    async fn human_list_todos(
        &self,
        human_id: &str,
        filter: &TodoFilter,
        page: &PageRequest,
    ) -> StoreResult<Page<Todo>> {
        self.select_todos_for_human(human_id, filter, page).await
    }

    async fn human_get_todo(&self, human_id: &str, id: &str) -> StoreResult<Todo> {
        self.select_todo_for_human(human_id, id).await
    }

    async fn human_list_attempts(
        &self,
        human_id: &str,
        todo_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<Attempt>> {
        self.select_attempts_for_human(human_id, todo_id, limit)
            .await
    }

    async fn human_get_intake_event(
        &self,
        human_id: &str,
        todo_id: &str,
    ) -> StoreResult<IntakeEvent> {
        self.select_event_for_human(human_id, todo_id).await
    }

    async fn list_todos(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        state: Option<crate::domain::todo::TodoState>,
        limit: i64,
    ) -> StoreResult<Vec<Todo>> {
        self.select_todos_for_caller(caller, queue, state, limit)
            .await
    }

    async fn authenticate_endpoint(&self, credential_hash: &str) -> StoreResult<Option<Endpoint>> {
        self.select_endpoint_by_credential(credential_hash).await
    }

    async fn stamp_endpoint_seen(
        &self,
        endpoint_id: &str,
        seen_at: Timestamp,
        last_contact: Option<Timestamp>,
    ) -> StoreResult<()> {
        self.update_endpoint_seen(endpoint_id, seen_at, last_contact)
            .await
    }

    async fn count_pending(&self, endpoint_id: &str) -> StoreResult<i64> {
        self.select_pending_count(endpoint_id).await
    }

    async fn create_webhook(
        &self,
        human_id: &str,
        endpoint_id: &str,
        queue: &str,
        token_hash: &str,
        signing_secret: Option<&str>,
    ) -> StoreResult<Webhook> {
        self.insert_webhook(human_id, endpoint_id, queue, token_hash, signing_secret)
            .await
    }

    async fn get_webhook(&self, human_id: &str, id: &str) -> StoreResult<Webhook> {
        self.select_webhook(human_id, id).await
    }

    async fn list_webhooks(&self, human_id: &str, endpoint_id: &str) -> StoreResult<Vec<Webhook>> {
        self.select_webhooks(human_id, endpoint_id).await
    }

    async fn rotate_webhook(
        &self,
        human_id: &str,
        id: &str,
        token_hash: &str,
        signing_secret: Option<&str>,
    ) -> StoreResult<Webhook> {
        self.replace_webhook_secrets(human_id, id, token_hash, signing_secret)
            .await
    }

    async fn delete_webhook(&self, human_id: &str, id: &str) -> StoreResult<()> {
        self.remove_webhook(human_id, id).await
    }

    async fn unscoped_find_webhook(&self, token_hash: &str) -> StoreResult<Option<WebhookTarget>> {
        self.select_webhook_by_token(token_hash).await
    }

    async fn set_presence_override(
        &self,
        endpoint_id: &str,
        override_: &crate::domain::presence::Override,
    ) -> StoreResult<Endpoint> {
        self.write_override(endpoint_id, override_).await
    }

    async fn clear_presence_override(
        &self,
        endpoint_id: &str,
        only_if_set_at: Option<Timestamp>,
    ) -> StoreResult<bool> {
        self.erase_override(endpoint_id, only_if_set_at).await
    }

    async fn set_shift(
        &self,
        endpoint_id: &str,
        shift: Option<&str>,
        override_dead_under_old_shift: &(dyn for<'e> Fn(&'e Endpoint) -> bool + Send + Sync),
    ) -> StoreResult<Endpoint> {
        self.write_shift(endpoint_id, shift, override_dead_under_old_shift)
            .await
    }

    async fn claim_presence_transition(
        &self,
        endpoint_id: &str,
        new: crate::domain::presence::Presence,
        by: &str,
    ) -> StoreResult<bool> {
        self.claim_transition(endpoint_id, new, by).await
    }

    async fn unscoped_presence_candidates(
        &self,
        after_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<Endpoint>> {
        self.select_presence_candidates(after_id, limit).await
    }

    async fn set_presence_recheck(&self, endpoint: &Endpoint, at: Timestamp) -> StoreResult<()> {
        self.write_presence_recheck(endpoint, at).await
    }

    async fn unscoped_endpoints_by_ids(&self, ids: &[String]) -> StoreResult<Vec<Endpoint>> {
        self.select_endpoints_by_ids(ids).await
    }

    async fn unscoped_digest_todos(&self, endpoint_id: &str) -> StoreResult<Vec<DigestTodo>> {
        self.select_digest_todos(endpoint_id).await
    }

    async fn unscoped_mark_rung(&self, ids: &[String], at: Timestamp) -> StoreResult<u64> {
        self.mark_todos_rung(ids, at).await
    }

    async fn unscoped_ringable_todo(&self, id: &str) -> StoreResult<Option<RingCandidate>> {
        self.select_ringable(id).await
    }

    async fn unscoped_endpoints_with_due_rings(
        &self,
        endpoint_ids: &[String],
        steps: &[Duration],
    ) -> StoreResult<Vec<String>> {
        self.select_endpoints_with_due_rings(endpoint_ids, steps)
            .await
    }

    async fn unscoped_claim_due_rings(
        &self,
        endpoint_ids: &[String],
        steps: &[Duration],
        limit: i64,
    ) -> StoreResult<Vec<RingCandidate>> {
        self.claim_due_rings(endpoint_ids, steps, limit).await
    }

    async fn unscoped_reap_lapsed_leases(&self, limit: i64) -> StoreResult<ReapReport> {
        self.reap_lapsed(limit).await
    }

    async fn unscoped_schedule_due_retries(&self, limit: i64) -> StoreResult<Vec<TodoRef>> {
        self.requeue_due_retries(limit).await
    }

    async fn unscoped_prune_terminal_todos(
        &self,
        older_than: Duration,
        limit: i64,
    ) -> StoreResult<u64> {
        self.prune_terminal(older_than, limit).await
    }

    async fn unscoped_queue_stats(&self) -> StoreResult<QueueStats> {
        self.select_queue_stats().await
    }

    async fn unscoped_liveness_inputs(&self, limit: i64) -> StoreResult<Vec<LivenessInputs>> {
        self.select_liveness_inputs(limit).await
    }
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
}
