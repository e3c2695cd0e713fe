//! B5 and B6 (`09-quality.md`): the cost of one maintenance sweep tick, one
//! presence evaluator tick and one retention batch with 10 000 endpoints, over
//! an empty history and over 1 000 000 finished todos; and `claim_next`
//! latency over the same two histories.
//!
//! In process, through the library: a [`SqlStore`] on SQLite (a temp file)
//! or PostgreSQL (a fresh database), a [`ManualClock`] fixed at Monday
//! 2026-01-05 10:00 UTC, and a [`Doorbells`] whose [`SessionRegistry`] holds
//! one streaming session per endpoint (all 10 000 endpoints are hosted, the
//! worst case for the sweep's hosted-endpoint list). The ticks called are the
//! server's own: [`sweep_tick`] with the default [`SweepConfig`] (5 steps, at
//! most 100 rings per tick) and [`evaluator_tick`] with the server's limit
//! (10 000 candidates, as in `src/server/maintenance.rs`).
//!
//! The registry: 1 human, 100 agents, `B5_ENDPOINTS` endpoints (bulk SQL
//! insert, ids `ep_<32 hex>`), every one with the shift
//! `Mon-Fri 09:00-17:00` (so every endpoint is an evaluator candidate, and
//! inside its shift at the fixed clock). Per phase, the same live rows:
//! `B5_TICKS × 100` pending push-eligible todos, one per endpoint, created
//! 10 min before the clock (so each is due for its first re-ring), and
//! `B6_CLAIMS` pull-only pending todos on endpoint 0 for B6.
//!
//! Two databases per backend, side by side, with the same registry and live
//! rows: one with an **empty** history, one with the **full** history:
//! `B5_HISTORY` finished todos (95 % done, 5 % dead lettered; from
//! authenticated intake; ring counts 0–5) inserted with one `INSERT … SELECT`
//! over a generated series, spread over the last 29 days; half of them on
//! endpoint 0 (a busy endpoint: B6 claims there), the other half spread
//! evenly over all endpoints. PostgreSQL gets `VACUUM ANALYZE` after each load
//! (this server runs with autovacuum off; autovacuum would do the same);
//! SQLite gets no `ANALYZE`, like the product, which never runs it. Every
//! scenario alternates its ticks between the two databases (empty first on
//! even ticks, full first on odd ones): on a shared host, load from others
//! then hits both sides alike, and the full ÷ empty ratio stays honest.
//!
//! Scenarios, `B5_TICKS` ticks each per side, timed one by one (wall time):
//! 1. sweep, 100 due per tick: each tick selects, counts and rings 100 todos
//!    (the per-tick cap), the next tick the next 100;
//! 2. sweep, nothing due (every pending todo was just rung);
//! 3. evaluator, nothing due (10 000 shifted endpoints, all `in`, each
//!    settled once before, untimed, so none is due before 17:00);
//! 4. evaluator, `B5_TRANSITIONS` due per tick: before each tick (untimed)
//!    that many endpoints with waiting work get `presence_seen = 'out'`, so
//!    the tick claims each out→in transition and sends each a digest;
//! 5. B6: `B6_CLAIMS` × `claim_next` on endpoint 0 (each followed by an
//!    untimed `complete`);
//! 6. retention, one batch per tick: before it (untimed), each side gets
//!    `B5_TICKS` × the server's retention batch (`MaintenanceConfig`'s
//!    `batch`, 500) finished intake todos on endpoint 0, each with its own
//!    intake event, created 31–32 days before the clock (the default
//!    retention is 30 days; the history is younger, so none of it is due);
//!    each tick is one `unscoped_prune_terminal_todos` call of the server's
//!    retention pass (`retention_pass`'s loop, mirrored so each batch is timed
//!    alone, the cursor handed from batch to batch), deleting a full batch of
//!    todos and their events (a foreign key without an index once made each
//!    deleted intake event scan every todo; a read over the listings' index
//!    from the cursor to its end once planned as a scan and a sort of the
//!    whole table). Then, as a probe, the pass's last batch, nothing more
//!    due, which reads one index range per endpoint up to the cutoff, not the
//!    history (timed `min(B5_TICKS, 10)` times; it deletes nothing).
//!
//! Breakdowns (nothing due): the sweep's statements alone (the due-endpoints
//! read over the hosted list, then what a due tick adds: presence of the
//! first 100 endpoints with `unscoped_endpoints_by_ids` and
//! `unscoped_claim_due_rings` over them; and, as a probe, presence of every
//! hosted endpoint, which the sweep read before), 100 × `Doorbells::ring`
//! alone (the in-memory part of a due tick), the evaluator's candidate read
//! alone and, as a probe, the same read as the statement was before
//! 2026-12-05 (one `OR` over the due columns beside `ORDER BY e.id`), and on
//! SQLite a probe: one `IN` list of 10 000 ids with `$n` placeholders (as the
//! store writes them) and with anonymous `?`. At the end, the plans of those
//! statements and of retention's candidate read from the start of a pass
//! (EXPLAIN (ANALYZE, BUFFERS) on PostgreSQL, EXPLAIN QUERY PLAN on SQLite) go
//! into the report.
//!
//! Correctness, checked after each scenario: every due todo rang exactly once
//! (doorbells read from the session streams and ring counts in the database),
//! nothing rang when nothing was due, no presence changed when none was due,
//! every due transition was claimed once with one digest, B6 claimed each
//! of its todos exactly once, every retention batch deleted a full batch and
//! the pass's last one nothing, and afterwards every due todo and its intake
//! event are gone while the history, the live todos and their intake event are
//! all still there. Exits non-zero when a check fails.
//!
//! Environment: `B5_ENDPOINTS` (10 000), `B5_HISTORY` (1 000 000), `B5_TICKS`
//! (50; also the retention batches, so `B5_TICKS` × 500 todos past retention
//! per side), `B5_TRANSITIONS` (10), `B6_CLAIMS` (500), `B5_BACKENDS`
//! (`sqlite,postgres`), `B5_RESULTS` (also write the Markdown report there),
//! `B5_KEEP=1` (keep the databases for EXPLAIN and print where they are).
//! PostgreSQL: `SWITCHBOARD_BENCH_DATABASE_URL`, else
//! `SWITCHBOARD_TEST_DATABASE_URL`; a fresh database is created there and
//! dropped at the end. Without either, only SQLite runs.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::Value;
use sqlx::{AnyPool, AssertSqlSafe, Row};
use switchboard::bus::{InProcessBus, InstanceId};
use switchboard::clock::ManualClock;
use switchboard::delivery::Delivery;
use switchboard::delivery::presence::{EVALUATOR_PAGE, evaluator_tick};
use switchboard::delivery::sessions::{Hearer, SessionRegistry, StreamGuard};
use switchboard::delivery::sweep::{SweepConfig, sweep_tick};
use switchboard::delivery::{Doorbells, Trigger};
use switchboard::domain::Timestamp;
use switchboard::server::maintenance::MaintenanceConfig;
use switchboard::store::prelude::*;
use switchboard::store::sql::DatabaseLocation;
use switchboard::store::{
    AgentKind, ClaimOptions, Finish, NewEndpoint, Pruned, RetentionCursor, RingCandidate, SqlStore,
    StoreOptions,
};
use switchboard::testkit::{StorePeek, ThrowawayDatabase};
use tokio::sync::mpsc::Receiver;

/// Monday 2026-01-05 10:00:00 UTC: inside every endpoint's shift.
const NOW_MS: i64 = 1_767_607_200_000;
const SHIFT: &str = "Mon-Fri 09:00-17:00";
const AGENTS: i64 = 100;
/// `unscoped_presence_candidates` before 2026-12-05 (`presence.rs`), the
/// probe's baseline: the due rows as one `OR` beside `ORDER BY e.id`.
const CANDIDATES_AS_ONE_OR: &str = "SELECT e.id, e.agent_id, e.human_id, e.slug, \
       e.credential_prefix, e.scope_queues, e.scope_verbs, e.state, e.created_at, e.revoked_at, \
       e.expires_at, e.last_seen_at, e.last_contact_at, e.default_lease_ttl_seconds, e.last_note, \
       e.last_note_at, e.shift, e.presence_override, e.override_until, e.override_set_at, \
       e.override_by, e.presence_seen, e.presence_changed_at, e.presence_changed_by, \
       e.server_name, a.name AS agent_name, a.kind AS agent_kind, \
       a.expected_interval_seconds AS agent_expected_interval_seconds \
     FROM endpoints e JOIN agents a ON a.id = e.agent_id \
     WHERE e.state = 'active' AND (e.shift IS NOT NULL \
       OR e.presence_override IS NOT NULL OR e.presence_seen = 'out') \
       AND (e.presence_recheck_at IS NULL OR e.presence_recheck_at <= $3) \
       AND e.id > $1 \
     ORDER BY e.id LIMIT $2";

/// What the server passes to `evaluator_tick` (src/server/maintenance.rs).
const EVALUATOR_LIMIT: i64 = EVALUATOR_PAGE;
const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 24 * 60 * MINUTE_MS;

// ---------------------------------------------------------------------------
// Bulk SQL. Endpoint i has id `ep_` + i in 32 hex digits, so every statement
// can name endpoints by number without a join.

const PG_ENDPOINTS: &str = "INSERT INTO endpoints (id, agent_id, human_id, slug, credential_hash, \
       credential_prefix, scope_queues, scope_verbs, created_at, shift) \
     SELECT 'ep_' || lpad(to_hex(s.i), 32, '0'), a.id, a.human_id, 'b5-' || s.i, 'b5hash' || s.i, \
       'sbe_b5', $1, $2, $3, $4 \
     FROM generate_series(0::bigint, $5::bigint - 1) AS s(i) \
     JOIN (SELECT id, human_id, ROW_NUMBER() OVER (ORDER BY id) - 1 AS k FROM agents) a \
       ON a.k = s.i % $6";

const SQLITE_ENDPOINTS: &str = "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < $5) \
     INSERT INTO endpoints (id, agent_id, human_id, slug, credential_hash, \
       credential_prefix, scope_queues, scope_verbs, created_at, shift) \
     SELECT printf('ep_%032x', s.i), a.id, a.human_id, 'b5-' || s.i, 'b5hash' || s.i, \
       'sbe_b5', $1, $2, $3, $4 \
     FROM s JOIN (SELECT id, human_id, ROW_NUMBER() OVER (ORDER BY id) - 1 AS k FROM agents) a \
       ON a.k = s.i % $6";

/// Pending push-eligible todos: todo i on endpoint i mod $1, created at $2 + i.
const PG_PENDING: &str = "INSERT INTO todos (id, endpoint_id, queue, title, kind, source, event_id, \
       state, max_attempts, created_at, updated_at) \
     SELECT 'td_p' || lpad(to_hex(s.i), 31, '0'), 'ep_' || lpad(to_hex(s.i % $1), 32, '0'), \
       'inbox', 'b5 pending ' || s.i, 'operator', 'operator', 'ev_b5', 'pending', 5, $2 + s.i, $2 + s.i \
     FROM generate_series(0::bigint, $3::bigint - 1) AS s(i)";

const SQLITE_PENDING: &str = "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < $3) \
     INSERT INTO todos (id, endpoint_id, queue, title, kind, source, event_id, \
       state, max_attempts, created_at, updated_at) \
     SELECT printf('td_p%031x', s.i), printf('ep_%032x', s.i % $1), \
       'inbox', 'b5 pending ' || s.i, 'operator', 'operator', 'ev_b5', 'pending', 5, $2 + s.i, $2 + s.i \
     FROM s";

/// Pull-only pending todos on endpoint 0 (B6 claims them): created at $1 + i.
const PG_CLAIMABLE: &str = "INSERT INTO todos (id, endpoint_id, queue, title, state, max_attempts, \
       created_at, updated_at) \
     SELECT 'td_c' || lpad(to_hex(s.i), 31, '0'), 'ep_' || lpad(to_hex(0), 32, '0'), 'inbox', \
       'b6 todo ' || s.i, 'pending', 5, $1 + s.i, $1 + s.i \
     FROM generate_series(0::bigint, $2::bigint - 1) AS s(i)";

const SQLITE_CLAIMABLE: &str = "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < $2) \
     INSERT INTO todos (id, endpoint_id, queue, title, state, max_attempts, created_at, updated_at) \
     SELECT printf('td_c%031x', s.i), printf('ep_%032x', 0), 'inbox', 'b6 todo ' || s.i, \
       'pending', 5, $1 + s.i, $1 + s.i \
     FROM s";

/// Finished history: row i on endpoint 0 when i is even, else on endpoint
/// (i / 2) mod $1; created at $2 + i × $3; 1 in 20 dead lettered.
const PG_HISTORY: &str = "INSERT INTO todos (id, endpoint_id, queue, title, kind, source, event_id, \
       state, owner, attempt, max_attempts, attempts_total, ring_attempts, last_ringed_at, \
       created_at, updated_at, claimed_at, completed_at) \
     SELECT 'td_h' || lpad(to_hex(s.i), 31, '0'), \
       'ep_' || lpad(to_hex(CASE WHEN s.i % 2 = 0 THEN 0 ELSE (s.i / 2) % $1 END), 32, '0'), \
       'inbox', 'b5 finished ' || s.i, 'operator', 'operator', 'ev_b5', \
       CASE WHEN s.i % 20 = 1 THEN 'failed' ELSE 'done' END, 'agent:b5', 1, 1, 1, s.i % 6, \
       CASE WHEN s.i % 6 = 0 THEN NULL ELSE $2 + s.i * $3 + 1000 END, \
       $2 + s.i * $3, $2 + s.i * $3 + 60000, $2 + s.i * $3 + 1000, $2 + s.i * $3 + 60000 \
     FROM generate_series(0::bigint, $4::bigint - 1) AS s(i)";

const SQLITE_HISTORY: &str = "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < $4) \
     INSERT INTO todos (id, endpoint_id, queue, title, kind, source, event_id, \
       state, owner, attempt, max_attempts, attempts_total, ring_attempts, last_ringed_at, \
       created_at, updated_at, claimed_at, completed_at) \
     SELECT printf('td_h%031x', s.i), \
       printf('ep_%032x', CASE WHEN s.i % 2 = 0 THEN 0 ELSE (s.i / 2) % $1 END), \
       'inbox', 'b5 finished ' || s.i, 'operator', 'operator', 'ev_b5', \
       CASE WHEN s.i % 20 = 1 THEN 'failed' ELSE 'done' END, 'agent:b5', 1, 1, 1, s.i % 6, \
       CASE WHEN s.i % 6 = 0 THEN NULL ELSE $2 + s.i * $3 + 1000 END, \
       $2 + s.i * $3, $2 + s.i * $3 + 60000, $2 + s.i * $3 + 1000, $2 + s.i * $3 + 60000 \
     FROM s";

/// Retention's due rows, one intake event each (`ev_o` + i): event i received
/// on endpoint 0 at $1 + i × $2, for $3 events.
const PG_OLD_EVENTS: &str = "INSERT INTO intake_events (id, endpoint_id, trust_mode, actor, \
       received_at, headers, body_size) \
     SELECT 'ev_o' || lpad(to_hex(s.i), 31, '0'), 'ep_' || lpad(to_hex(0), 32, '0'), 'token', \
       'webhook:b5', $1 + s.i * $2, '{}', 0 \
     FROM generate_series(0::bigint, $3::bigint - 1) AS s(i)";

const SQLITE_OLD_EVENTS: &str = "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < $3) \
     INSERT INTO intake_events (id, endpoint_id, trust_mode, actor, received_at, headers, \
       body_size) \
     SELECT printf('ev_o%031x', s.i), printf('ep_%032x', 0), 'token', 'webhook:b5', \
       $1 + s.i * $2, '{}', 0 \
     FROM s";

/// Retention's due todos (`td_o` + i), made by intake event i: on endpoint 0,
/// created when their event was received, finished a minute later; 1 in 20
/// dead lettered, as in the history.
const PG_OLD_TODOS: &str = "INSERT INTO todos (id, endpoint_id, queue, title, kind, source, event_id, \
       state, owner, attempt, max_attempts, attempts_total, ring_attempts, last_ringed_at, \
       created_at, updated_at, claimed_at, completed_at) \
     SELECT 'td_o' || lpad(to_hex(s.i), 31, '0'), 'ep_' || lpad(to_hex(0), 32, '0'), \
       'inbox', 'b5 old ' || s.i, 'operator', 'operator', 'ev_o' || lpad(to_hex(s.i), 31, '0'), \
       CASE WHEN s.i % 20 = 1 THEN 'failed' ELSE 'done' END, 'agent:b5', 1, 1, 1, 0, NULL, \
       $1 + s.i * $2, $1 + s.i * $2 + 60000, $1 + s.i * $2 + 1000, $1 + s.i * $2 + 60000 \
     FROM generate_series(0::bigint, $3::bigint - 1) AS s(i)";

const SQLITE_OLD_TODOS: &str = "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < $3) \
     INSERT INTO todos (id, endpoint_id, queue, title, kind, source, event_id, \
       state, owner, attempt, max_attempts, attempts_total, ring_attempts, last_ringed_at, \
       created_at, updated_at, claimed_at, completed_at) \
     SELECT printf('td_o%031x', s.i), printf('ep_%032x', 0), \
       'inbox', 'b5 old ' || s.i, 'operator', 'operator', printf('ev_o%031x', s.i), \
       CASE WHEN s.i % 20 = 1 THEN 'failed' ELSE 'done' END, 'agent:b5', 1, 1, 1, 0, NULL, \
       $1 + s.i * $2, $1 + s.i * $2 + 60000, $1 + s.i * $2 + 1000, $1 + s.i * $2 + 60000 \
     FROM s";

fn endpoint_id(i: i64) -> String {
    format!("ep_{i:032x}")
}

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
    endpoints: i64,
    history: i64,
    ticks: usize,
    transitions: i64,
    claims: usize,
    backends: Vec<Backend>,
    pg_admin_url: Option<(String, &'static str)>,
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
        for name in std::env::var("B5_BACKENDS")
            .unwrap_or_else(|_| "sqlite,postgres".into())
            .split(',')
        {
            match name.trim() {
                "sqlite" => backends.push(Backend::Sqlite),
                "postgres" if pg_admin_url.is_some() => backends.push(Backend::Postgres),
                "postgres" => eprintln!(
                    "B5: PostgreSQL skipped: set SWITCHBOARD_BENCH_DATABASE_URL \
                     (or SWITCHBOARD_TEST_DATABASE_URL)"
                ),
                other => bail!("B5_BACKENDS: unknown backend {other:?}"),
            }
        }
        let cfg = Self {
            endpoints: env_num("B5_ENDPOINTS", 10_000)?,
            history: env_num("B5_HISTORY", 1_000_000)?,
            ticks: env_num("B5_TICKS", 50)?,
            transitions: env_num("B5_TRANSITIONS", 10)?,
            claims: env_num("B6_CLAIMS", 500)?,
            backends,
            pg_admin_url,
            results: std::env::var("B5_RESULTS").ok().filter(|v| !v.is_empty()),
        };
        ensure!(cfg.endpoints >= 1, "B5_ENDPOINTS must be at least 1");
        ensure!(cfg.ticks >= 1, "B5_TICKS must be at least 1");
        ensure!(
            cfg.transitions * cfg.ticks as i64 <= cfg.pending().min(cfg.endpoints),
            "B5_TRANSITIONS × B5_TICKS must not exceed the endpoints with waiting work"
        );
        Ok(cfg)
    }

    /// Due pending todos: enough for every "100 due" tick.
    fn pending(&self) -> i64 {
        self.ticks as i64 * SweepConfig::default().per_tick
    }

    /// Todos past retention: one full batch of the server's for every tick.
    fn retention_due(&self) -> i64 {
        self.ticks as i64 * MaintenanceConfig::default().batch
    }
}

// ---------------------------------------------------------------------------
// Statistics.

#[derive(Debug, Clone, Default)]
struct Series {
    /// Microseconds, one per tick (or call).
    samples: Vec<u64>,
}

impl Series {
    fn push(&mut self, d: Duration) {
        self.samples
            .push(d.as_micros().min(u64::MAX as u128) as u64);
    }

    fn sorted(&self) -> Vec<u64> {
        let mut s = self.samples.clone();
        s.sort_unstable();
        s
    }

    fn pct(&self, p: f64) -> f64 {
        let s = self.sorted();
        if s.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
        s[rank.clamp(1, s.len()) - 1] as f64 / 1000.0
    }

    fn median(&self) -> f64 {
        let s = self.sorted();
        let n = s.len();
        if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            s[n / 2] as f64 / 1000.0
        } else {
            (s[n / 2 - 1] + s[n / 2]) as f64 / 2000.0
        }
    }

    fn max(&self) -> f64 {
        self.samples.iter().copied().max().unwrap_or(0) as f64 / 1000.0
    }
}

/// One phase's measurements, by scenario name (report order).
#[derive(Debug, Default)]
struct PhaseResult {
    series: BTreeMap<usize, (String, String, Series)>,
}

impl PhaseResult {
    fn put(&mut self, order: usize, name: &str, work: String, series: Series) {
        self.series.insert(order, (name.to_owned(), work, series));
    }
}

// ---------------------------------------------------------------------------
// Databases.

fn redact(url: &str) -> String {
    DatabaseLocation::Postgres(url.to_owned()).redacted()
}

async fn count(pool: &AnyPool, sql: &str) -> Result<i64> {
    Ok(sqlx::query(AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await?
        .try_get::<i64, _>(0)?)
}

/// Statistics after a bulk load: PostgreSQL as autovacuum would leave it;
/// SQLite as the product leaves it (no ANALYZE), with the WAL folded in.
async fn settle_tables(backend: Backend, pool: &AnyPool) -> Result<()> {
    match backend {
        Backend::Postgres => {
            sqlx::raw_sql("VACUUM ANALYZE todos").execute(pool).await?;
            sqlx::raw_sql("VACUUM ANALYZE endpoints")
                .execute(pool)
                .await?;
            let _ = sqlx::raw_sql("CHECKPOINT").execute(pool).await;
        }
        Backend::Sqlite => {
            sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(pool)
                .await?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Setup.

async fn setup_registry(cfg: &Config, backend: Backend, store: &SqlStore) -> Result<()> {
    let pool = store.pool();
    let human = store.create_human("b5-human").await?;
    let mut template_agent = None;
    for i in 0..AGENTS {
        let agent = store
            .create_agent(&human.id, &format!("b5-agent-{i:03}"), AgentKind::Session)
            .await?;
        template_agent.get_or_insert(agent.id);
    }
    // One endpoint through the store, for the exact scope text it writes.
    let template = store
        .create_endpoint(NewEndpoint {
            agent_id: template_agent.context("no agent")?,
            slug: "b5-template".into(),
            credential_hash: "b5-template-hash".into(),
            credential_prefix: "sbe_b5".into(),
            queues: vec!["inbox".into()],
            verbs: vec![],
            expires_at: None,
            default_lease_ttl_seconds: None,
            server_name: None,
        })
        .await?;
    let row = sqlx::query("SELECT scope_queues, scope_verbs FROM endpoints WHERE id = $1")
        .bind(&template.id)
        .fetch_one(pool)
        .await?;
    let (queues, verbs): (String, String) = (row.try_get(0)?, row.try_get(1)?);
    sqlx::query("DELETE FROM endpoints WHERE id = $1")
        .bind(&template.id)
        .execute(pool)
        .await?;
    let sql = match backend {
        Backend::Postgres => PG_ENDPOINTS,
        Backend::Sqlite => SQLITE_ENDPOINTS,
    };
    sqlx::query(sql)
        .bind(queues)
        .bind(verbs)
        .bind(NOW_MS - 30 * DAY_MS)
        .bind(SHIFT)
        .bind(cfg.endpoints)
        .bind(AGENTS)
        .execute(pool)
        .await?;
    ensure!(
        count(pool, "SELECT COUNT(*) FROM endpoints").await? == cfg.endpoints,
        "endpoint bulk insert"
    );
    // The one intake event every push-eligible todo points at.
    sqlx::query(
        "INSERT INTO intake_events (id, endpoint_id, trust_mode, actor, received_at, headers, \
           body_size) VALUES ('ev_b5', $1, 'operator', 'human:b5', $2, '{}', 0)",
    )
    .bind(endpoint_id(0))
    .bind(NOW_MS - 30 * DAY_MS)
    .execute(pool)
    .await?;
    Ok(())
}

async fn load_live_rows(cfg: &Config, backend: Backend, pool: &AnyPool) -> Result<()> {
    let (pending, claimable) = match backend {
        Backend::Postgres => (PG_PENDING, PG_CLAIMABLE),
        Backend::Sqlite => (SQLITE_PENDING, SQLITE_CLAIMABLE),
    };
    sqlx::query(pending)
        .bind(cfg.endpoints)
        .bind(NOW_MS - 10 * MINUTE_MS)
        .bind(cfg.pending())
        .execute(pool)
        .await?;
    sqlx::query(claimable)
        .bind(NOW_MS - 60 * MINUTE_MS)
        .bind(cfg.claims as i64)
        .execute(pool)
        .await?;
    Ok(())
}

async fn load_history(cfg: &Config, backend: Backend, pool: &AnyPool) -> Result<Duration> {
    let started = Instant::now();
    let span = 29 * DAY_MS;
    let step = (span / cfg.history.max(1)).max(1);
    let sql = match backend {
        Backend::Postgres => PG_HISTORY,
        Backend::Sqlite => SQLITE_HISTORY,
    };
    sqlx::query(sql)
        .bind(cfg.endpoints)
        .bind(NOW_MS - 30 * DAY_MS)
        .bind(step)
        .bind(cfg.history)
        .execute(pool)
        .await?;
    Ok(started.elapsed())
}

/// Retention's due rows: `cfg.retention_due()` finished intake todos, each
/// with its own intake event (retention deletes both), created over the day
/// from 32 to 31 days before the clock and finished a minute after, so all are
/// past the 30-day cutoff while the history (created from the cutoff on) is
/// not.
///
/// All on endpoint 0, one endpoint's backlog: retention reads each
/// endpoint's range of the listings' index (endpoint, created_at, id) up to
/// the cutoff, so every batch reads just the todos it deletes on both sides,
/// and the timed difference between the sides is what the history costs it.
async fn load_retention_due(cfg: &Config, backend: Backend, pool: &AnyPool) -> Result<Duration> {
    let started = Instant::now();
    let n = cfg.retention_due();
    let first = NOW_MS - 32 * DAY_MS;
    let step = (DAY_MS / n.max(1)).max(1);
    let (events, todos) = match backend {
        Backend::Postgres => (PG_OLD_EVENTS, PG_OLD_TODOS),
        Backend::Sqlite => (SQLITE_OLD_EVENTS, SQLITE_OLD_TODOS),
    };
    let mut tx = pool.begin().await?;
    for (what, sql) in [("intake events", events), ("todos", todos)] {
        let inserted = sqlx::query(sql)
            .bind(first)
            .bind(step)
            .bind(n)
            .execute(&mut *tx)
            .await
            .with_context(|| format!("inserting retention's due {what}"))?
            .rows_affected();
        ensure!(
            inserted == n as u64,
            "retention's due {what}: {inserted} inserted, {n} expected"
        );
    }
    tx.commit().await?;
    Ok(started.elapsed())
}

// ---------------------------------------------------------------------------
// Sessions.

struct Hosted {
    doorbells: Arc<Doorbells>,
    streams: Vec<(StreamGuard, Receiver<Value>)>,
}

impl Hosted {
    /// The event path the server's loops run with, over `store`.
    fn delivery(&self, store: &Arc<SqlStore>) -> Delivery {
        let bus = Arc::new(InProcessBus::new(InstanceId("b5".into())));
        Delivery::new(store.clone(), self.doorbells.clone(), bus)
    }

    fn new(endpoints: i64) -> Self {
        let registry = Arc::new(SessionRegistry::new());
        let mut streams = Vec::with_capacity(endpoints as usize);
        for i in 0..endpoints {
            let session = registry.create(&endpoint_id(i), &format!("b5-{i}"), Hearer::default());
            streams.push(registry.open_stream(&session));
        }
        Self {
            doorbells: Arc::new(Doorbells::new(registry)),
            streams,
        }
    }

    /// Reads what every stream received: (todo doorbells by todo id, digests).
    fn drain(&mut self, todos: &mut Vec<String>) -> usize {
        let mut digests = 0;
        for (_, rx) in &mut self.streams {
            while let Ok(message) = rx.try_recv() {
                let meta = &message["params"]["meta"];
                if let Some(id) = meta["todo_id"].as_str() {
                    todos.push(id.to_owned());
                } else if meta["kind"] == "digest" {
                    digests += 1;
                }
            }
        }
        digests
    }
}

// ---------------------------------------------------------------------------
// The two sides: the same registry and live rows, one over an empty history
// and one over the full history. Every scenario alternates ticks between
// them (empty first on even ticks, full first on odd ones), so that a busy
// neighbour on this shared host slows both alike and the ratio stays honest.

struct Side {
    store: Arc<SqlStore>,
    hosted: Hosted,
    result: PhaseResult,
    plans: Vec<String>,
    tag: String,
}

fn order(t: usize) -> [usize; 2] {
    if t.is_multiple_of(2) { [0, 1] } else { [1, 0] }
}

fn put(sides: &mut [Side; 2], order: usize, name: &str, work: &str, series: [Series; 2]) {
    for (side, s) in sides.iter_mut().zip(series) {
        side.result.put(order, name, work.to_owned(), s);
    }
}

fn medians(series: &[Series; 2]) -> String {
    format!(
        "empty {:.2} ms, full {:.2} ms",
        series[0].median(),
        series[1].median()
    )
}

async fn scenarios(
    cfg: &Config,
    backend: Backend,
    sides: &mut [Side; 2],
    notes: &mut Vec<String>,
) -> Result<()> {
    let sweep = SweepConfig::default();
    let name = backend.name();

    // 1. Sweep, 100 due per tick (the cap): the next 100 each tick.
    let mut series: [Series; 2] = Default::default();
    let mut rung: [Vec<String>; 2] = Default::default();
    for t in 0..cfg.ticks {
        for k in order(t) {
            let side = &mut sides[k];
            let t0 = Instant::now();
            let n = sweep_tick(&side.hosted.delivery(&side.store), &sweep).await;
            series[k].push(t0.elapsed());
            ensure!(
                n as i64 == sweep.per_tick,
                "{}: a sweep tick rang {n}, expected the cap {}",
                side.tag,
                sweep.per_tick
            );
            side.hosted.drain(&mut rung[k]);
        }
    }
    for (side, rung) in sides.iter().zip(&rung) {
        let distinct: HashSet<&String> = rung.iter().collect();
        ensure!(
            rung.len() as i64 == cfg.pending() && distinct.len() == rung.len(),
            "{}: {} doorbells read ({} distinct) for {} due",
            side.tag,
            rung.len(),
            distinct.len(),
            cfg.pending()
        );
        let once = count(
            side.store.pool(),
            "SELECT COUNT(*) FROM todos WHERE state = 'pending' AND event_id IS NOT NULL \
               AND ring_attempts = 1",
        )
        .await?;
        ensure!(
            once == cfg.pending(),
            "{}: {once} todos counted one ring, {} due",
            side.tag,
            cfg.pending()
        );
    }
    eprintln!("B5 {name}: sweep, 100 due: {}", medians(&series));
    let work = format!("{} due → {} rung", sweep.per_tick, sweep.per_tick);
    put(sides, 10, "sweep", &work, series);

    // 2. Sweep, nothing due (every pending todo was just rung).
    let mut series: [Series; 2] = Default::default();
    for t in 0..cfg.ticks {
        for k in order(t) {
            let side = &sides[k];
            let t0 = Instant::now();
            let n = sweep_tick(&side.hosted.delivery(&side.store), &sweep).await;
            series[k].push(t0.elapsed());
            ensure!(
                n == 0,
                "{}: a sweep tick with nothing due rang {n}",
                side.tag
            );
        }
    }
    for side in sides.iter_mut() {
        let mut late = Vec::new();
        side.hosted.drain(&mut late);
        ensure!(
            late.is_empty(),
            "{}: {} doorbells with nothing due",
            side.tag,
            late.len()
        );
    }
    eprintln!("B5 {name}: sweep, nothing due: {}", medians(&series));
    put(sides, 20, "sweep", "nothing due", series);

    // The sweep's statements alone (nothing due, so nothing changes): the
    // due-endpoints read over every hosted endpoint (all a tick with nothing
    // due runs), then what a due tick adds: presence of the first
    // `per_tick` endpoints and the ring statement over them; and, for
    // comparison, presence of every hosted endpoint (what the sweep read
    // before it read presence only for the endpoints first in line).
    let mut due_read: [Series; 2] = Default::default();
    let mut read: [Series; 2] = Default::default();
    let mut ring: [Series; 2] = Default::default();
    let mut read_all: [Series; 2] = Default::default();
    let first = usize::try_from(sweep.per_tick)?;
    for t in 0..cfg.ticks {
        for k in order(t) {
            let side = &sides[k];
            let ids = side.hosted.doorbells.hosted_endpoints();
            let t0 = Instant::now();
            let due = side
                .store
                .unscoped_endpoints_with_due_rings(&ids, &sweep.steps, sweep.per_tick)
                .await?;
            due_read[k].push(t0.elapsed());
            ensure!(due.is_empty(), "{}: endpoints due when none were", side.tag);
            let some = &ids[..first.min(ids.len())];
            let t0 = Instant::now();
            let endpoints = side.store.unscoped_endpoints_by_ids(some).await?;
            read[k].push(t0.elapsed());
            ensure!(
                endpoints.len() == some.len(),
                "{}: endpoints_by_ids",
                side.tag
            );
            let t0 = Instant::now();
            let due = side
                .store
                .unscoped_claim_due_rings(some, &sweep.steps, sweep.per_tick)
                .await?;
            ring[k].push(t0.elapsed());
            ensure!(due.is_empty(), "{}: rings due when none were", side.tag);
            let t0 = Instant::now();
            let endpoints = side.store.unscoped_endpoints_by_ids(&ids).await?;
            read_all[k].push(t0.elapsed());
            ensure!(
                endpoints.len() == ids.len(),
                "{}: endpoints_by_ids",
                side.tag
            );
        }
    }
    put(
        sides,
        30,
        &format!(
            "· of which: which hosted endpoints have a ring due ({} hosted, the first {})",
            cfg.endpoints, sweep.per_tick
        ),
        "nothing due",
        due_read,
    );
    put(
        sides,
        31,
        &format!("· of which: read presence of {} endpoints", sweep.per_tick),
        "nothing due",
        read,
    );
    put(
        sides,
        40,
        &format!(
            "· of which: the ring statement ({} endpoints)",
            sweep.per_tick
        ),
        "nothing due",
        ring,
    );
    put(
        sides,
        45,
        &format!(
            "· probe: read presence of all {} hosted endpoints (the sweep before this change)",
            cfg.endpoints
        ),
        "nothing due",
        read_all,
    );
    // The in-memory part of a due tick: 100 rings, each finding its
    // endpoint's sessions among all those registered here.
    let mut rings: [Series; 2] = Default::default();
    for t in 0..cfg.ticks {
        for k in order(t) {
            let side = &mut sides[k];
            let candidates: Vec<RingCandidate> = (0..sweep.per_tick)
                .map(|i| RingCandidate {
                    id: format!("td_r{t:015x}{i:016x}"),
                    endpoint_id: endpoint_id((t as i64 * sweep.per_tick + i) % cfg.endpoints),
                    queue: "inbox".into(),
                    title: "b5 ring".into(),
                    kind: Some("operator".into()),
                    source: Some("operator".into()),
                    ring_attempts: 1,
                    created_at: Timestamp::from_millis(NOW_MS),
                    last_ringed_at: Some(Timestamp::from_millis(NOW_MS)),
                })
                .collect();
            let t0 = Instant::now();
            for c in &candidates {
                side.hosted.doorbells.ring(c, Trigger::Sweep);
            }
            rings[k].push(t0.elapsed());
            let mut bells = Vec::new();
            side.hosted.drain(&mut bells);
            ensure!(
                bells.len() as i64 == sweep.per_tick,
                "{}: {} of {} rings delivered",
                side.tag,
                bells.len(),
                sweep.per_tick
            );
        }
    }
    put(
        sides,
        50,
        &format!(
            "· of which: {} × `Doorbells::ring` ({} sessions registered)",
            sweep.per_tick, cfg.endpoints
        ),
        "—",
        rings,
    );
    if backend == Backend::Sqlite {
        // Where the SQLite time goes: the same 10 000-id IN list with `$n`
        // placeholders (as the store writes them) and with anonymous `?`.
        let mut dollar: [Series; 2] = Default::default();
        let mut anonymous: [Series; 2] = Default::default();
        let rounds = cfg.ticks.min(10);
        for t in 0..rounds {
            for k in order(t) {
                let pool = sides[k].store.pool();
                dollar[k].push(probe_in_list(pool, cfg.endpoints, true).await?);
                anonymous[k].push(probe_in_list(pool, cfg.endpoints, false).await?);
            }
        }
        let n = cfg.endpoints;
        put(
            sides,
            60,
            &format!("· probe: `SELECT COUNT(*) FROM endpoints WHERE id IN` {n} × `$n`"),
            "—",
            dollar,
        );
        put(
            sides,
            70,
            &format!("· probe: the same with {n} × `?`"),
            "—",
            anonymous,
        );
    }

    // 3. Evaluator, nothing due. The endpoints were inserted without ever
    // being settled, so one untimed tick settles them all first (each then
    // records when it is next due: 17:00, when the shift ends).
    let mut series: [Series; 2] = Default::default();
    let candidates = cfg.endpoints;
    for side in sides.iter() {
        let n = evaluator_tick(&side.hosted.delivery(&side.store), EVALUATOR_LIMIT).await;
        ensure!(
            n as i64 == candidates,
            "{}: the first tick settled {n} endpoints",
            side.tag
        );
    }
    for t in 0..cfg.ticks {
        for k in order(t) {
            let side = &sides[k];
            let t0 = Instant::now();
            let n = evaluator_tick(&side.hosted.delivery(&side.store), EVALUATOR_LIMIT).await;
            series[k].push(t0.elapsed());
            ensure!(n == 0, "{}: the evaluator saw {n} candidates", side.tag);
        }
    }
    for side in sides.iter_mut() {
        let changed = count(
            side.store.pool(),
            "SELECT COUNT(*) FROM endpoints WHERE presence_changed_at IS NOT NULL",
        )
        .await?;
        ensure!(
            changed == 0,
            "{}: {changed} presence changes with none due",
            side.tag
        );
        let mut bells = Vec::new();
        let digests = side.hosted.drain(&mut bells);
        ensure!(
            digests == 0 && bells.is_empty(),
            "{}: doorbells from an idle evaluator",
            side.tag
        );
    }
    eprintln!("B5 {name}: evaluator, nothing due: {}", medians(&series));
    let work = format!("{candidates} shifted endpoints, nothing due");
    put(sides, 80, "evaluator", &work, series);

    let mut read: [Series; 2] = Default::default();
    for t in 0..cfg.ticks {
        for k in order(t) {
            let side = &sides[k];
            let t0 = Instant::now();
            let c = side
                .store
                .unscoped_presence_candidates(None, EVALUATOR_LIMIT)
                .await?;
            read[k].push(t0.elapsed());
            ensure!(c.is_empty(), "{}: candidates", side.tag);
        }
    }
    put(
        sides,
        90,
        "· of which: read the candidates",
        "nothing due",
        read,
    );
    // The baseline in the same run: the candidates' statement before
    // 2026-12-05, one `OR` beside `ORDER BY e.id`, prepared and run on the
    // store's pool as the store ran it.
    let mut before: [Series; 2] = Default::default();
    for t in 0..cfg.ticks {
        for k in order(t) {
            let side = &sides[k];
            let t0 = Instant::now();
            let rows = sqlx::query(CANDIDATES_AS_ONE_OR)
                .bind("")
                .bind(EVALUATOR_LIMIT)
                .bind(NOW_MS)
                .fetch_all(side.store.pool())
                .await?;
            before[k].push(t0.elapsed());
            ensure!(rows.is_empty(), "{}: candidates (one OR)", side.tag);
        }
    }
    put(
        sides,
        95,
        "· probe: the candidates as one `OR` (the statement before this change)",
        "nothing due",
        before,
    );

    // 4. Evaluator, `transitions` out→in due per tick, each with waiting work.
    let mut series: [Series; 2] = Default::default();
    let mut digests = [0usize; 2];
    for t in 0..cfg.ticks {
        let first = t as i64 * cfg.transitions;
        let list = (first..first + cfg.transitions)
            .map(|i| format!("'{}'", endpoint_id(i)))
            .collect::<Vec<_>>()
            .join(",");
        // As an input write would: the row becomes due for the evaluator.
        let sql = format!(
            "UPDATE endpoints SET presence_seen = 'out', presence_recheck_at = NULL \
             WHERE id IN ({list})"
        );
        for k in order(t) {
            let side = &mut sides[k];
            sqlx::raw_sql(AssertSqlSafe(sql.clone()))
                .execute(side.store.pool())
                .await?;
            let t0 = Instant::now();
            evaluator_tick(&side.hosted.delivery(&side.store), EVALUATOR_LIMIT).await;
            series[k].push(t0.elapsed());
            let mut bells = Vec::new();
            digests[k] += side.hosted.drain(&mut bells);
            ensure!(
                bells.is_empty(),
                "{}: todo doorbells from the evaluator",
                side.tag
            );
        }
    }
    let due = cfg.transitions * cfg.ticks as i64;
    for (side, digests) in sides.iter().zip(digests) {
        let claimed = count(
            side.store.pool(),
            "SELECT COUNT(*) FROM endpoints WHERE presence_changed_by = 'shift' \
               AND presence_seen = 'in'",
        )
        .await?;
        ensure!(
            claimed == due && digests as i64 == due,
            "{}: {claimed} transitions claimed and {digests} digests for {due} due",
            side.tag
        );
    }
    eprintln!(
        "B5 {name}: evaluator, {} transitions: {}",
        cfg.transitions,
        medians(&series)
    );
    let work = format!(
        "{candidates} shifted endpoints, {} out→in due (claim + digest each)",
        cfg.transitions
    );
    put(sides, 100, "evaluator", &work, series);

    // 5. B6: claim_next on endpoint 0 (the busy one), then an untimed complete.
    let mut series: [Series; 2] = Default::default();
    let mut seen: [HashSet<String>; 2] = Default::default();
    let mut callers = Vec::new();
    for side in sides.iter() {
        callers.push(
            side.store
                .unscoped_get_endpoint(&endpoint_id(0))
                .await?
                .caller(),
        );
    }
    for t in 0..cfg.claims {
        for k in order(t) {
            let side = &sides[k];
            let caller = &callers[k];
            let t0 = Instant::now();
            let claimed = side
                .store
                .claim_next(caller, None, ClaimOptions::default())
                .await?
                .context("claim_next found nothing")?;
            series[k].push(t0.elapsed());
            let id = claimed.todo.id;
            ensure!(id.starts_with("td_c"), "{}: claim_next took {id}", side.tag);
            ensure!(
                seen[k].insert(id.clone()),
                "{}: {id} claimed twice",
                side.tag
            );
            side.store.complete(caller, &id, Finish::default()).await?;
        }
    }
    for (side, seen) in sides.iter().zip(&seen) {
        ensure!(seen.len() == cfg.claims, "{}: claims lost", side.tag);
    }
    eprintln!("B5 {name}: B6 claim_next: {}", medians(&series));
    put(sides, 110, "B6 claim_next", "endpoint 0", series);

    retention(cfg, backend, sides, notes).await?;

    for side in sides.iter_mut() {
        side.plans = explain(backend, side.store.pool(), cfg).await?;
    }
    Ok(())
}

/// Scenario 6, retention, one batch per tick: each deletes a full batch of
/// the server's (`MaintenanceConfig::default().batch` todos past retention,
/// each with its intake event); then the pass's last batch, which finds
/// nothing more due.
///
/// The calls are those of `maintenance::retention_pass`, whose loop is
/// mirrored here rather than called: it runs a whole pass in one call, and
/// each batch is timed alone. As there, every batch starts at the cursor the
/// previous one handed back, from `RetentionCursor::start()`.
async fn retention(
    cfg: &Config,
    backend: Backend,
    sides: &mut [Side; 2],
    notes: &mut Vec<String>,
) -> Result<()> {
    let maintenance = MaintenanceConfig::default();
    let name = backend.name();
    let due = cfg.retention_due();
    // Everything retention must leave: the history, the live todos and the
    // intake event they point at.
    let mut kept = [RetentionSurvivors::default(); 2];
    for ((kept, side), history) in kept.iter_mut().zip(sides.iter()).zip([0, cfg.history]) {
        *kept = RetentionSurvivors::count(side.store.pool())
            .await
            .with_context(|| format!("{}: counting rows before retention", side.tag))?;
        ensure!(
            kept.history == history,
            "{}: {} history todos before retention, {history} loaded",
            side.tag,
            kept.history
        );
    }
    let mut load_times = Vec::new();
    for side in sides.iter() {
        let took = load_retention_due(cfg, backend, side.store.pool())
            .await
            .with_context(|| side.tag.clone())?;
        settle_tables(backend, side.store.pool()).await?;
        load_times.push(format!("{:.1} s", took.as_secs_f64()));
    }
    notes.push(format!(
        "retention's due rows, per side: {due} finished intake todos and their {due} intake \
         events on endpoint 0, 31–32 days old: {} insert (empty / full)",
        load_times.join(" / ")
    ));

    let mut series: [Series; 2] = Default::default();
    let mut cursors = [RetentionCursor::start(), RetentionCursor::start()];
    let mut deleted = [0u64; 2];
    for t in 0..cfg.ticks {
        for k in order(t) {
            let side = &sides[k];
            let (took, pruned) = retention_batch(side, &maintenance, &cursors[k])
                .await
                .with_context(|| format!("{}: retention batch {t}", side.tag))?;
            series[k].push(took);
            ensure!(
                pruned.deleted as i64 == maintenance.batch,
                "{}: retention batch {t} deleted {}, not a full batch of {}",
                side.tag,
                pruned.deleted,
                maintenance.batch
            );
            deleted[k] += pruned.deleted;
            // A full batch hands the pass on to the next from its cursor.
            cursors[k] = pruned.resume_after.with_context(|| {
                format!("{}: a full retention batch without a cursor", side.tag)
            })?;
        }
    }
    eprintln!("B5 {name}: retention, one batch: {}", medians(&series));
    let work = format!(
        "one batch: {} past retention → {} deleted, each with its intake event",
        maintenance.batch, maintenance.batch
    );
    put(sides, 120, "retention", &work, series);

    // The pass's last batch: nothing more is due; it reads each remaining
    // endpoint's range up to the cutoff (one index probe each, with all
    // 10 000 endpoints after the cursor's), never the history created since.
    // Its cost follows the endpoints: over a history each probe lands on a
    // leaf page of its own, over an empty one they all share a few, so the
    // full ÷ empty ratio says nothing here and the row is a probe (compare
    // its full-history figure across history sizes instead). Once a pass;
    // it deletes nothing, so it can be repeated.
    let mut last: [Series; 2] = Default::default();
    for t in 0..cfg.ticks.min(10) {
        for k in order(t) {
            let side = &sides[k];
            let (took, pruned) = retention_batch(side, &maintenance, &cursors[k])
                .await
                .with_context(|| format!("{}: the retention pass's last batch", side.tag))?;
            last[k].push(took);
            ensure!(
                pruned.deleted == 0 && pruned.resume_after.is_none(),
                "{}: the retention pass's last batch deleted {} with nothing due",
                side.tag,
                pruned.deleted
            );
        }
    }
    put(
        sides,
        121,
        "· probe: retention's last batch of a pass, nothing more due (one index probe per endpoint)",
        "nothing due",
        last,
    );

    for ((side, kept), deleted) in sides.iter().zip(kept).zip(deleted) {
        let pool = side.store.pool();
        let todos_left = count(
            pool,
            "SELECT COUNT(*) FROM todos WHERE substr(id, 1, 4) = 'td_o'",
        )
        .await?;
        let events_left = count(
            pool,
            "SELECT COUNT(*) FROM intake_events WHERE substr(id, 1, 4) = 'ev_o'",
        )
        .await?;
        ensure!(
            deleted as i64 == due && todos_left == 0 && events_left == 0,
            "{}: retention deleted {deleted} of {due} due todos; {todos_left} of them and \
             {events_left} of their intake events are left",
            side.tag
        );
        let after = RetentionSurvivors::count(pool).await?;
        ensure!(
            after == kept,
            "{}: retention deleted what was not due: {kept:?} before, {after:?} after",
            side.tag
        );
    }
    Ok(())
}

/// One batch of the server's retention pass on `side` from `cursor`, timed.
async fn retention_batch(
    side: &Side,
    maintenance: &MaintenanceConfig,
    cursor: &RetentionCursor,
) -> Result<(Duration, Pruned)> {
    let t0 = Instant::now();
    let pruned = side
        .store
        .unscoped_prune_terminal_todos(maintenance.retention, maintenance.batch, cursor)
        .await?;
    Ok((t0.elapsed(), pruned))
}

/// What retention must leave, counted before its due rows are loaded and
/// again after the pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RetentionSurvivors {
    todos: i64,
    /// The finished history, created from the cutoff on (`td_h…`).
    history: i64,
    /// Pending and claimed todos.
    live: i64,
    /// The history's and the live todos' one intake event (`ev_b5`).
    intake_events: i64,
}

impl RetentionSurvivors {
    async fn count(pool: &AnyPool) -> Result<Self> {
        Ok(Self {
            todos: count(pool, "SELECT COUNT(*) FROM todos").await?,
            history: count(
                pool,
                "SELECT COUNT(*) FROM todos WHERE substr(id, 1, 4) = 'td_h'",
            )
            .await?,
            live: count(
                pool,
                "SELECT COUNT(*) FROM todos WHERE state IN ('pending', 'claimed')",
            )
            .await?,
            intake_events: count(pool, "SELECT COUNT(*) FROM intake_events").await?,
        })
    }
}

/// One `SELECT COUNT(*) … IN (…)` over `n` ids with `$n` or `?` placeholders.
async fn probe_in_list(pool: &AnyPool, n: i64, dollar: bool) -> Result<Duration> {
    let list = (1..=n)
        .map(|i| if dollar { format!("${i}") } else { "?".into() })
        .collect::<Vec<_>>()
        .join(",");
    let sql = format!("SELECT COUNT(*) FROM endpoints WHERE id IN ({list})");
    let mut q = sqlx::query(AssertSqlSafe(sql));
    for i in 0..n {
        q = q.bind(endpoint_id(i));
    }
    let t0 = Instant::now();
    let found: i64 = q.fetch_one(pool).await?.try_get(0)?;
    let took = t0.elapsed();
    ensure!(found == n, "probe found {found}");
    Ok(took)
}

// ---------------------------------------------------------------------------
// Plans: the statements the ticks, claim_next and retention run, with literal
// values (copies of the text in src/store/sql/rings.rs, presence.rs, todos.rs
// and sweeps.rs).

/// The `FROM` item of the store's pending-todo reads (`Dialect::pending_todos_by_endpoint`).
fn pending_todos(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "todos INDEXED BY todos_pending_by_endpoint",
        Backend::Postgres => "todos",
    }
}

/// `due_by_clock` (`rings.rs`): one range of the ring clock per ring count,
/// each read in clock order and cut at what the tick asks for (its first
/// round: 100 todos). The same text on both backends.
fn ring_select() -> String {
    let steps = SweepConfig::default().steps;
    let ranges = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            format!(
                "SELECT * FROM (SELECT endpoint_id, COALESCE(last_ringed_at, created_at) AS clock, \
                 id FROM todos WHERE state = 'pending' AND event_id IS NOT NULL \
                 AND ring_attempts < {} AND ring_attempts = {i} \
                 AND COALESCE(last_ringed_at, created_at) <= {} \
                 ORDER BY clock, id LIMIT 100) AS due_{i}",
                steps.len(),
                NOW_MS - s.as_millis() as i64
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    format!("{ranges} ORDER BY clock, id LIMIT 100")
}

/// `prune_candidates_sql` (`sweeps.rs`) as the first batch of a pass runs it:
/// the server's cutoff and batch, the cursor at `RetentionCursor::start()`.
/// PostgreSQL runs it with [`RETENTION_PLAN`]'s settings, as the store does.
fn retention_select(backend: Backend) -> String {
    let maintenance = MaintenanceConfig::default();
    let cutoff = NOW_MS - maintenance.retention.as_millis() as i64;
    let start = RetentionCursor::start();
    let due = format!(
        "created_at < {cutoff} \
         AND (state IN ('done', 'cancelled') OR (state = 'failed' AND next_retry_at IS NULL)) \
         AND completed_at < {cutoff} AND (endpoint_id, created_at, id) > ('{}', {}, '{}')",
        start.endpoint_id,
        start.created_at.as_millis(),
        start.id,
    );
    let limit = maintenance.batch;
    match backend {
        Backend::Postgres => format!(
            "SELECT t.id, t.endpoint_id, t.created_at, t.event_id FROM endpoints e \
             CROSS JOIN LATERAL (SELECT id, endpoint_id, created_at, event_id FROM todos \
               WHERE endpoint_id = e.id AND {due} \
               ORDER BY created_at, id LIMIT {limit} FOR UPDATE SKIP LOCKED) t \
             WHERE e.id >= '{}' ORDER BY e.id LIMIT {limit}",
            start.endpoint_id
        ),
        Backend::Sqlite => format!(
            "SELECT id, endpoint_id, created_at, event_id \
             FROM todos INDEXED BY todos_by_endpoint_created \
             WHERE endpoint_id IN (SELECT id FROM endpoints WHERE id >= '{}') AND {due} \
             ORDER BY endpoint_id, created_at, id LIMIT {limit}",
            start.endpoint_id
        ),
    }
}

/// The session settings the store's retention batch runs with on PostgreSQL
/// (a copy of `RETENTION_PLAN` in `sweeps.rs`).
const RETENTION_PLAN: &str = "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off";

async fn explain(backend: Backend, pool: &AnyPool, cfg: &Config) -> Result<Vec<String>> {
    let ep0 = endpoint_id(0);
    let ids = (0..cfg.endpoints)
        .map(|i| format!("'{}'", endpoint_id(i)))
        .collect::<Vec<_>>()
        .join(",");
    let statements = [
        (
            "sweep: which rings are due, longest-waiting first",
            ring_select(),
        ),
        (
            "sweep: the hosted endpoints",
            format!(
                "SELECT e.id, a.name FROM endpoints e JOIN agents a ON a.id = e.agent_id \
                 WHERE e.id IN ({ids})"
            ),
        ),
        (
            "evaluator: the candidates",
            format!(
                "SELECT e.id, a.name FROM endpoints e JOIN agents a ON a.id = e.agent_id \
                 WHERE e.id IN (SELECT id FROM endpoints WHERE state = 'active' \
                 AND presence_recheck_at IS NULL AND id > '' \
                 UNION ALL SELECT id FROM endpoints WHERE state = 'active' \
                 AND presence_recheck_at <= {NOW_MS} AND id > '') \
                 AND (e.shift IS NOT NULL OR e.presence_override IS NOT NULL \
                 OR e.presence_seen = 'out') \
                 ORDER BY e.id LIMIT {EVALUATOR_LIMIT}"
            ),
        ),
        (
            "evaluator: a digest's todos",
            format!(
                "SELECT id, queue, created_at FROM {} WHERE endpoint_id = '{ep0}' \
                 AND state = 'pending' AND event_id IS NOT NULL ORDER BY created_at, id",
                pending_todos(backend)
            ),
        ),
        (
            "B6: claim_next's selection",
            format!(
                "SELECT id FROM todos WHERE endpoint_id = '{ep0}' AND state = 'pending' \
                 ORDER BY created_at, id LIMIT 1{}",
                match backend {
                    Backend::Postgres => " FOR UPDATE SKIP LOCKED",
                    Backend::Sqlite => "",
                }
            ),
        ),
    ];
    // Each with the session settings the store runs it with (PostgreSQL).
    let statements = statements
        .into_iter()
        .map(|(what, sql)| (what, sql, None))
        .chain([(
            "retention: a batch's candidates, from the start of a pass (nothing due by now)",
            retention_select(backend),
            Some(RETENTION_PLAN),
        )]);
    let mut out = Vec::new();
    for (what, sql, settings) in statements {
        out.push(format!("{what}:"));
        match backend {
            Backend::Postgres => {
                let mut tx = pool.begin().await?;
                if let Some(settings) = settings {
                    sqlx::raw_sql(settings).execute(&mut *tx).await?;
                }
                let rows = sqlx::query(AssertSqlSafe(format!("EXPLAIN (ANALYZE, BUFFERS) {sql}")))
                    .fetch_all(&mut *tx)
                    .await?;
                tx.rollback().await?;
                let mut first_buffers = true;
                for row in rows {
                    let line: String = row.try_get(0)?;
                    let keep = line.contains("Scan")
                        || line.contains("Heap Blocks")
                        || line.contains("Planning Time")
                        || line.contains("Execution Time")
                        || (first_buffers && line.contains("Buffers:"));
                    if line.contains("Buffers:") {
                        first_buffers = false;
                    }
                    if keep {
                        out.push(format!("  {}", shorten(&line)));
                    }
                }
            }
            Backend::Sqlite => {
                let rows = sqlx::query(AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
                    .fetch_all(pool)
                    .await?;
                for row in rows {
                    let detail: String = row.try_get(3)?;
                    out.push(format!("  {}", shorten(&detail)));
                }
            }
        }
    }
    Ok(out)
}

fn shorten(line: &str) -> String {
    let line = line.trim_end();
    match line.char_indices().nth(150) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_owned(),
    }
}

// ---------------------------------------------------------------------------
// One backend: two databases (empty history, full history), then the
// scenarios over both.

struct BackendResult {
    backend: Backend,
    empty: PhaseResult,
    full: PhaseResult,
    plans: [Vec<String>; 2],
    notes: Vec<String>,
}

async fn run_backend(cfg: &Config, backend: Backend) -> Result<BackendResult> {
    let dir = tempfile::Builder::new().prefix("sb-b5-").tempdir()?;
    let mut pgs = Vec::new();
    let mut locations = Vec::new();
    for label in ["empty", "full"] {
        match backend {
            Backend::Postgres => {
                let (url, _) = cfg.pg_admin_url.as_ref().context("no PostgreSQL URL")?;
                let pg = ThrowawayDatabase::create(url, "sb_bench_b5").await?;
                locations.push(DatabaseLocation::Postgres(pg.url.clone()));
                pgs.push(pg);
            }
            Backend::Sqlite => {
                locations.push(DatabaseLocation::Sqlite(
                    dir.path().join(format!("b5-{label}.db")),
                ));
            }
        }
    }
    let keep = std::env::var("B5_KEEP").is_ok_and(|v| v == "1");
    let outcome = run_sides(cfg, backend, &locations).await;
    if keep {
        // For investigation (EXPLAIN by hand): leave the databases behind.
        for pg in &pgs {
            eprintln!("B5: kept PostgreSQL database {}", pg.name);
        }
        if pgs.is_empty() {
            eprintln!("B5: kept {}", dir.keep().display());
        }
        return outcome;
    }
    for pg in pgs {
        let _ = pg.drop_database().await;
    }
    outcome
}

async fn run_sides(
    cfg: &Config,
    backend: Backend,
    locations: &[DatabaseLocation],
) -> Result<BackendResult> {
    let name = backend.name();
    let clock = ManualClock::new(Timestamp::from_millis(NOW_MS));
    let mut stores = Vec::new();
    for location in locations {
        let store =
            Arc::new(SqlStore::connect(location, clock.clone(), &StoreOptions::default()).await?);
        store.migrate(None).await?;
        setup_registry(cfg, backend, &store).await?;
        stores.push(store);
    }
    let mut notes = Vec::new();
    eprintln!("B5 {name}: loading {} finished todos", cfg.history);
    let full_pool = stores[1].pool();
    let load_time = load_history(cfg, backend, full_pool).await?;
    let finished = count(
        full_pool,
        "SELECT COUNT(*) FROM todos WHERE state <> 'pending'",
    )
    .await?;
    ensure!(finished == cfg.history, "history load: {finished} rows");
    let t0 = Instant::now();
    settle_tables(backend, full_pool).await?;
    notes.push(format!(
        "{} finished todos: {:.1} s insert + {:.1} s {}",
        cfg.history,
        load_time.as_secs_f64(),
        t0.elapsed().as_secs_f64(),
        match backend {
            Backend::Postgres => "VACUUM ANALYZE + CHECKPOINT",
            Backend::Sqlite => "WAL checkpoint",
        }
    ));
    for store in &stores {
        load_live_rows(cfg, backend, store.pool()).await?;
        settle_tables(backend, store.pool()).await?;
    }
    let mut sides = [0, 1].map(|k| Side {
        store: stores[k].clone(),
        hosted: Hosted::new(cfg.endpoints),
        result: PhaseResult::default(),
        plans: Vec::new(),
        tag: format!("B5 {name} {}", ["empty", "full"][k]),
    });
    let outcome = scenarios(cfg, backend, &mut sides, &mut notes).await;
    for store in &stores {
        store.close().await;
    }
    outcome?;
    let [empty, full] = sides;
    Ok(BackendResult {
        backend,
        empty: empty.result,
        full: full.result,
        plans: [empty.plans, full.plans],
        notes,
    })
}

// ---------------------------------------------------------------------------
// Report.

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

fn report(cfg: &Config, results: &[BackendResult], header: &str) -> String {
    let mut md = String::new();
    md.push_str(header);
    md.push_str(
        "\n| backend | tick | due work per tick | history | median (ms) | p99 (ms) | max (ms) \
         | full ÷ empty (median) |\n|---|---|---|---|---:|---:|---:|---:|\n",
    );
    for r in results {
        for (order, (name, work, empty)) in &r.empty.series {
            let Some((_, _, full)) = r.full.series.get(order) else {
                continue;
            };
            if name.starts_with("B6") {
                continue;
            }
            for (label, s) in [("empty", empty), (history_label(cfg), full)] {
                let ratio = if label == "empty" {
                    String::new()
                } else {
                    format!("{:.2}", full.median() / empty.median())
                };
                let _ = writeln!(
                    md,
                    "| {} | {name} | {work} | {label} | {:.2} | {:.2} | {:.2} | {ratio} |",
                    r.backend.name(),
                    s.median(),
                    s.pct(99.0),
                    s.max(),
                );
            }
        }
    }

    md.push_str(
        "\n### B6: `claim_next` latency, empty history vs full\n\n| backend | history \
         | claims | median (ms) | p99 (ms) | max (ms) | full ÷ empty (median) |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        for (order, (name, _, empty)) in &r.empty.series {
            if !name.starts_with("B6") {
                continue;
            }
            let Some((_, _, full)) = r.full.series.get(order) else {
                continue;
            };
            for (label, s) in [("empty", empty), (history_label(cfg), full)] {
                let ratio = if label == "empty" {
                    String::new()
                } else {
                    format!("{:.2}", full.median() / empty.median())
                };
                let _ = writeln!(
                    md,
                    "| {} | {label} | {} | {:.3} | {:.3} | {:.3} | {ratio} |",
                    r.backend.name(),
                    s.samples.len(),
                    s.median(),
                    s.pct(99.0),
                    s.max(),
                );
            }
        }
    }

    md.push_str(
        "\n### Targets (09-quality.md, B5 and B6)\n\n| target | backend | measured | required \
         | result |\n|---|---|---|---|---|\n",
    );
    for r in results {
        let name = r.backend.name();
        for (order, (tick, work, empty)) in &r.empty.series {
            if tick.starts_with('·') {
                continue;
            }
            let Some((_, _, full)) = r.full.series.get(order) else {
                continue;
            };
            if tick.starts_with("B6") {
                let ratio = full.median() / empty.median();
                let _ = writeln!(
                    md,
                    "| B6 claim_next full ÷ empty ≤ 1.5 | {name} | {ratio:.2} ({:.3} / {:.3} ms) \
                     | ≤ 1.5 | {} |",
                    full.median(),
                    empty.median(),
                    verdict(ratio <= 1.5)
                );
                continue;
            }
            let worst = empty.pct(99.0).max(full.pct(99.0));
            let _ = writeln!(
                md,
                "| B5 {tick} tick ≤ 50 ms ({work}) | {name} | p99 {worst:.2} ms (median {:.2} \
                 / {:.2} ms) | ≤ 50 ms | {} |",
                empty.median(),
                full.median(),
                verdict(worst <= 50.0)
            );
            let ratio = full.median() / empty.median();
            let _ = writeln!(
                md,
                "| B5 {tick} ({work}) independent of history | {name} | full ÷ empty = \
                 {ratio:.2} | ~1 (≤ 1.5) | {} |",
                verdict(ratio <= 1.5)
            );
        }
    }
    md.push_str("\n### Loads\n\n");
    for r in results {
        for note in &r.notes {
            let _ = writeln!(md, "- {}: {note}", r.backend.name());
        }
    }
    md.push_str(
        "\n### Plans (taken after the scenarios; PostgreSQL: EXPLAIN (ANALYZE, BUFFERS), \
         scan nodes only; SQLite: EXPLAIN QUERY PLAN)\n",
    );
    for r in results {
        for (label, plans) in [("empty", &r.plans[0]), (history_label(cfg), &r.plans[1])] {
            let _ = writeln!(md, "\n{} — {label}:\n\n```", r.backend.name());
            for line in plans {
                let _ = writeln!(md, "{line}");
            }
            md.push_str("```\n");
        }
    }
    md
}

fn history_label(cfg: &Config) -> &'static str {
    if cfg.history >= 1_000_000 {
        "1 000 000 finished"
    } else {
        "full"
    }
}

// ---------------------------------------------------------------------------

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("B5 FAILED: {e:#}");
        std::process::exit(1);
    }
}

async fn pg_settings(url: &str) -> Result<String> {
    switchboard::testkit::pg_settings(
        url,
        &[
            "server_version",
            "shared_buffers",
            "work_mem",
            "synchronous_commit",
            "autovacuum",
        ],
    )
    .await
}

async fn run() -> Result<()> {
    let cfg = Config::from_env()?;
    ensure!(!cfg.backends.is_empty(), "B5: no backend to run");
    let mut header = String::new();
    let _ = writeln!(header, "### Parameters\n");
    let _ = writeln!(
        header,
        "- in process (library API), clock fixed at Monday 2026-01-05 10:00 UTC; {} endpoints \
         (1 human, {AGENTS} agents), each with the shift `{SHIFT}` and one streaming session \
         in the tick's `SessionRegistry` (all hosted)",
        cfg.endpoints
    );
    let _ = writeln!(
        header,
        "- live rows, the same in both phases: {} pending push-eligible todos (one per \
         endpoint, each due for its first re-ring) and {} pull-only pending todos on \
         endpoint 0 for B6",
        cfg.pending(),
        cfg.claims
    );
    let _ = writeln!(
        header,
        "- history: empty, then {} finished todos (95 % done, 5 % dead lettered, from \
         authenticated intake, over 29 days; half on endpoint 0, half spread evenly), one \
         `INSERT … SELECT` over a generated series",
        cfg.history
    );
    let _ = writeln!(
        header,
        "- two databases side by side, identical but for the history (empty / full); every \
         scenario alternates its ticks between them (empty first on even ticks, full first on \
         odd ones), so load from other users of this host hits both alike"
    );
    let _ = writeln!(
        header,
        "- {} ticks per scenario, each timed alone (wall clock, including the doorbells \
         written to the session streams); the sweep with the default config (steps \
         5m,20m,1h,6h,6h; at most 100 rings per tick), the evaluator with the server's limit \
         ({EVALUATOR_LIMIT}); {} out→in transitions per tick in the evaluator's due case; \
         B6: {} `claim_next` calls on endpoint 0, each followed by an untimed `complete`",
        cfg.ticks, cfg.transitions, cfg.claims
    );
    let maintenance = MaintenanceConfig::default();
    let _ = writeln!(
        header,
        "- retention: before it, untimed, {} finished intake todos on endpoint 0 on each side, \
         each with its own intake event, created 31–32 days before the clock (retention {} \
         days; the history is younger and stays); each tick one batch of the server's \
         retention pass (`unscoped_prune_terminal_todos`, batch {}, the cursor handed on), \
         deleting {} todos and their events; then the pass's last batch, nothing more due, \
         {} times",
        cfg.retention_due(),
        maintenance.retention.as_secs() / 86_400,
        maintenance.batch,
        maintenance.batch,
        cfg.ticks.min(10)
    );
    if cfg.backends.contains(&Backend::Sqlite) {
        let _ = writeln!(
            header,
            "- SQLite: a temp file, the store's settings (WAL, synchronous=NORMAL, one writer \
             connection, 4 readers); no ANALYZE (the product never runs it)"
        );
    }
    if let (true, Some((url, var))) = (cfg.backends.contains(&Backend::Postgres), &cfg.pg_admin_url)
    {
        let settings = pg_settings(url)
            .await
            .unwrap_or_else(|e| format!("unavailable ({e})"));
        let _ = writeln!(
            header,
            "- PostgreSQL ({var}={}): a fresh database, the store's pool (24 connections); \
             VACUUM ANALYZE + CHECKPOINT after each load; {settings}",
            redact(url)
        );
    }

    let mut results = Vec::new();
    for &backend in &cfg.backends {
        let started = Instant::now();
        let r = run_backend(&cfg, backend)
            .await
            .with_context(|| backend.name())?;
        eprintln!(
            "B5 {}: done in {:.0} s",
            backend.name(),
            started.elapsed().as_secs_f64()
        );
        results.push(r);
    }
    let md = report(&cfg, &results, &header);
    println!("{md}");
    if let Some(file) = &cfg.results {
        std::fs::write(file, &md).with_context(|| format!("cannot write {file}"))?;
    }
    Ok(())
}
