//! PostgreSQL's true floor (issue 14): the minimal table and the two
//! statements a claim → complete loop needs, nothing else. B1 measures it
//! beside the store; B2 measures it between its own PostgreSQL runs at the
//! same concurrency, so "≥ 50 % of the floor" compares figures taken
//! minutes, not a whole benchmark, apart on a shared host.
//! Included with `#[path = "common/pg_floor.rs"] mod pg_floor;`.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Result, ensure};
use sqlx::postgres::{PgConnection, PgPoolOptions};
use sqlx::{Connection, Row};
use switchboard::testkit::ThrowawayDatabase;

/// The true floor's table: the columns a claim and a complete need, nothing
/// else, and the one index the claim needs.
pub const TRUE_FLOOR_SCHEMA: &str = "CREATE TABLE floor_todos (\
       id TEXT PRIMARY KEY, endpoint_id TEXT NOT NULL, queue TEXT NOT NULL, \
       state TEXT NOT NULL, created_at BIGINT NOT NULL, owner TEXT, \
       lease_expires_at BIGINT, attempts INT NOT NULL DEFAULT 0, completed_at BIGINT); \
     CREATE INDEX floor_todos_pending ON floor_todos (endpoint_id, queue, created_at, id) \
       WHERE state = 'pending';";

/// `$1` owner, `$2` lease expiry, `$3` endpoint, `$4` queue.
pub const TRUE_FLOOR_CLAIM: &str = "UPDATE floor_todos SET state = 'claimed', owner = $1, \
       lease_expires_at = $2, attempts = attempts + 1 \
     WHERE id = (SELECT id FROM floor_todos \
       WHERE endpoint_id = $3 AND queue = $4 AND state = 'pending' \
       ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) \
     RETURNING id";

/// `$1` now, `$2` id, `$3` owner.
pub const TRUE_FLOOR_COMPLETE: &str = "UPDATE floor_todos SET state = 'done', completed_at = $1, \
       lease_expires_at = NULL WHERE id = $2 AND state = 'claimed' AND owner = $3";

/// `$1` endpoint, `$2` base time, `$3` count (ids shaped like the store's).
pub const TRUE_FLOOR_PRELOAD: &str = "INSERT INTO floor_todos (id, endpoint_id, queue, state, created_at) \
     SELECT 'td_' || lpad(to_hex(i), 32, '0'), $1, 'inbox', 'pending', $2 + i \
     FROM generate_series(1::bigint, $3::bigint) AS s(i)";

const ENDPOINT: &str = "ep_floor";
const LEASE_MS: i64 = 300_000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One loop of the floor on `conn`: claim the oldest pending todo of
/// `endpoint`, then complete it. `false` when nothing was pending.
pub async fn claim_and_complete(
    conn: &mut PgConnection,
    owner: &str,
    endpoint: &str,
) -> Result<bool> {
    let Some(row) = sqlx::query(TRUE_FLOOR_CLAIM)
        .bind(owner)
        .bind(now_ms() + LEASE_MS)
        .bind(endpoint)
        .bind("inbox")
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(false);
    };
    let id: String = row.try_get(0)?;
    let done = sqlx::query(TRUE_FLOOR_COMPLETE)
        .bind(now_ms())
        .bind(&id)
        .bind(owner)
        .execute(&mut *conn)
        .await?;
    ensure!(
        done.rows_affected() == 1,
        "true floor: complete of {id} matched nothing"
    );
    Ok(true)
}

/// One measurement of the floor: `concurrency` connections, each looping
/// claim → complete for `seconds`, on a fresh database of the server at
/// `admin_url` (created, loaded with `preload` pending rows, vacuumed,
/// analyzed and checkpointed, dropped afterwards). Returns loops per second,
/// after checking that every loop completed a distinct todo.
pub async fn measure(
    admin_url: &str,
    concurrency: usize,
    seconds: u64,
    preload: i64,
) -> Result<f64> {
    let database = ThrowawayDatabase::create(admin_url, "sb_bench_floor").await?;
    let outcome = measure_in(&database.url, concurrency, seconds, preload).await;
    let _ = database.drop_database().await;
    outcome
}

async fn measure_in(url: &str, concurrency: usize, seconds: u64, preload: i64) -> Result<f64> {
    let mut setup = PgConnection::connect(url).await?;
    sqlx::raw_sql(TRUE_FLOOR_SCHEMA).execute(&mut setup).await?;
    sqlx::query(TRUE_FLOOR_PRELOAD)
        .bind(ENDPOINT)
        .bind(now_ms() - preload)
        .bind(preload)
        .execute(&mut setup)
        .await?;
    for sql in ["VACUUM ANALYZE floor_todos", "CHECKPOINT"] {
        sqlx::raw_sql(sql).execute(&mut setup).await?;
    }

    let pool = PgPoolOptions::new()
        .max_connections(concurrency as u32)
        .connect(url)
        .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let dry = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::with_capacity(concurrency);
    for n in 0..concurrency {
        let conn = pool.acquire().await?;
        let (stop, dry, total) = (stop.clone(), dry.clone(), total.clone());
        workers.push(tokio::spawn(async move {
            let mut conn = conn;
            let owner = format!("floor-{n}");
            while !stop.load(Ordering::Relaxed) {
                if !claim_and_complete(&mut conn, &owner, ENDPOINT).await? {
                    dry.store(true, Ordering::Relaxed);
                    break;
                }
                total.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let loops = total.load(Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    for worker in workers {
        worker.await??;
    }
    ensure!(
        !dry.load(Ordering::Relaxed),
        "floor: the {preload} preloaded todos ran out; raise the preload"
    );
    let row = sqlx::query(
        "SELECT COUNT(*) FILTER (WHERE state = 'done'), \
                COUNT(*) FILTER (WHERE state NOT IN ('done', 'pending')), \
                COUNT(*) FILTER (WHERE state = 'done' AND attempts <> 1) \
         FROM floor_todos",
    )
    .fetch_one(&mut setup)
    .await?;
    let (done, stuck, twice): (i64, i64, i64) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
    let all = total.load(Ordering::Relaxed) as i64;
    ensure!(
        done == all && stuck == 0 && twice == 0,
        "floor: {all} loops but {done} done, {stuck} left claimed, {twice} claimed twice"
    );
    pool.close().await;
    let _ = setup.close().await;
    Ok(loops as f64 / elapsed)
}
