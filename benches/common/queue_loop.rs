//! What the store-loop benchmarks (B1, B10) share: their configuration
//! helpers, the preload of pending todos, the bench endpoint, the workers'
//! join, the PostgreSQL processes whose CPU a run charges, and the
//! correctness check at the end of a run (no todo claimed twice, none lost).
//! Included with `#[path = "common/queue_loop.rs"] mod queue_loop;`.
#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use sqlx::postgres::PgPool;
use sqlx::{AnyPool, Row};
use switchboard::domain::ids::sha256_hex;
use switchboard::mint::random_token;
use switchboard::store::prelude::*;
use switchboard::store::sql::statements;
use switchboard::store::{AgentKind, Caller, NewEndpoint, SqlStore};

/// Pending todos, `$3` of them, oldest first by `(created_at, id)`; ids
/// shaped like the store's (`td_` + 32 hex digits). `$1` endpoint, `$2` base
/// time, `$4` how many priorities they spread over (a fixed scramble of the
/// row number modulo `$4`: 1 puts every todo at priority 0).
pub const PG_PRELOAD: &str = "INSERT INTO todos (id, endpoint_id, queue, title, state, max_attempts, \
       priority, created_at, updated_at) \
     SELECT 'td_' || lpad(to_hex(i), 32, '0'), $1, 'inbox', 'bench todo ' || i, 'pending', 5, \
       (i * 2654435761) % $4, $2 + i, $2 + i \
     FROM generate_series(1::bigint, $3::bigint) AS s(i)";

/// [`PG_PRELOAD`] for SQLite, each todo's rowid in its priority's band as
/// the store places it (`statements::sqlite_priority_band`): the rows lie
/// where the store's own inserts would have put them.
pub static SQLITE_PRELOAD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $3), \
           r(i, p) AS (SELECT i, (i * 2654435761) % $4 FROM s) \
         INSERT INTO todos (rowid, id, endpoint_id, queue, title, state, max_attempts, priority, \
           created_at, updated_at) \
         SELECT {band} + i, printf('td_%032x', i), $1, 'inbox', 'bench todo ' || i, 'pending', 5, \
           p, $2 + i, $2 + i \
         FROM r",
        band = statements::sqlite_priority_band("p"),
    )
});

pub const LEASE_MS: i64 = 300_000;

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A number from the environment (`_` allowed as a digit separator), or `default`.
pub fn env_num<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .replace('_', "")
            .parse()
            .map_err(|_| anyhow!("{name}={v:?} is not a number")),
        _ => Ok(default),
    }
}

pub fn median(v: &[f64]) -> f64 {
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

/// The bench's endpoint (scope `inbox`, `reviews`) and its human.
pub struct Registered {
    pub human_id: String,
    pub caller: Caller,
}

pub async fn register(store: &SqlStore) -> Result<Registered> {
    let human = store.create_human("bench").await?;
    let agent = store
        .create_agent(&human.id, "worker", AgentKind::Task)
        .await?;
    let credential = format!("sbk_{}", random_token(32));
    let endpoint = store
        .create_endpoint(NewEndpoint {
            agent_id: agent.id.clone(),
            slug: format!("worker-{}", random_token(3).to_lowercase()),
            credential_hash: sha256_hex(&credential),
            credential_prefix: credential[..12].to_owned(),
            queues: vec!["inbox".into(), "reviews".into()],
            verbs: vec![],
            expires_at: None,
            default_lease_ttl_seconds: None,
            server_name: None,
        })
        .await?;
    Ok(Registered {
        human_id: human.id,
        caller: endpoint.caller(),
    })
}

/// The sum of the workers' loops, or the first worker's error; an error
/// too when they have not all stopped within `limit`.
pub async fn join_workers(set: tokio::task::JoinSet<Result<u64>>, limit: Duration) -> Result<u64> {
    let all = async move {
        let mut set = set;
        let mut total = 0;
        while let Some(res) = set.join_next().await {
            total += res.context("a worker panicked")??;
        }
        Ok::<u64, anyhow::Error>(total)
    };
    tokio::time::timeout(limit, all)
        .await
        .map_err(|_| anyhow!("the run did not stop within {limit:?}"))?
}

/// The server processes that do a benchmark's work: every backend
/// connected to the bench database, plus the shared background processes
/// (WAL writer, checkpointer, background writer), which have no database:
/// (pid, is a background process).
pub async fn pg_pids(admin: &PgPool) -> Result<Vec<(String, bool)>> {
    let rows = sqlx::query(
        "SELECT pid, datname IS NULL FROM pg_stat_activity \
         WHERE (datname = current_database() OR datname IS NULL) AND pid <> pg_backend_pid()",
    )
    .fetch_all(admin)
    .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<i32, _>(0).to_string(), r.get::<bool, _>(1)))
        .collect())
}

pub async fn count(pool: &AnyPool, sql: &'static str) -> Result<i64> {
    Ok(sqlx::query(sql)
        .fetch_one(pool)
        .await?
        .try_get::<i64, _>(0)?)
}

/// The store's tables after a run over `preload` pending todos in which the
/// workers completed `loops`: every done todo was claimed exactly once,
/// none is lost or left claimed, no pending todo shows a claim, and (with
/// `history`) each done todo has exactly one closed `completed` attempt.
pub async fn check_todos(pool: &AnyPool, preload: i64, loops: u64, history: bool) -> Result<()> {
    let done = count(pool, "SELECT COUNT(*) FROM todos WHERE state = 'done'").await?;
    let pending = count(pool, "SELECT COUNT(*) FROM todos WHERE state = 'pending'").await?;
    let other = count(
        pool,
        "SELECT COUNT(*) FROM todos WHERE state NOT IN ('done', 'pending')",
    )
    .await?;
    let twice = count(
        pool,
        "SELECT COUNT(*) FROM todos WHERE state = 'done' AND (attempts_total <> 1 OR attempt <> 1)",
    )
    .await?;
    let untouched_pending = count(
        pool,
        "SELECT COUNT(*) FROM todos WHERE state = 'pending' AND attempts_total <> 0",
    )
    .await?;
    let attempts = count(pool, "SELECT COUNT(*) FROM todo_attempts").await?;
    let good_attempts = count(
        pool,
        "SELECT COUNT(*) FROM todo_attempts a JOIN todos t ON t.id = a.todo_id \
         WHERE t.state = 'done' AND a.seq = 1 AND a.attempt = 1 AND a.ended_at IS NOT NULL \
           AND a.outcome = 'completed' AND a.disposition = 'done'",
    )
    .await?;
    let mut problems = Vec::new();
    if done != loops as i64 {
        problems.push(format!(
            "{done} todos are done but the workers completed {loops}"
        ));
    }
    if done + pending != preload || other != 0 {
        problems.push(format!(
            "lost todos: {done} done + {pending} pending + {other} other != {preload} preloaded"
        ));
    }
    if twice != 0 {
        problems.push(format!("{twice} done todos were claimed more than once"));
    }
    if untouched_pending != 0 {
        problems.push(format!("{untouched_pending} pending todos show a claim"));
    }
    let expected_attempts = if history { done } else { 0 };
    if attempts != expected_attempts || good_attempts != expected_attempts {
        problems.push(format!(
            "attempt history: {attempts} records, {good_attempts} well-formed, \
             expected exactly one closed 'completed' record per done todo ({expected_attempts})"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        bail!("correctness check failed: {}", problems.join("; "))
    }
}
