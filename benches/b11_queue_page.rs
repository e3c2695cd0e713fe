//! B11 (issue 44): the board's queue page reads the same over a small
//! history and over 1 000 000 finished todos.
//!
//! In process, through the library, on SQLite (a temp file) and PostgreSQL
//! (a fresh database): the reads `/board/queues` makes for one endpoint —
//! `queue_summary` (its live counts), `unscoped_admission` (limits and
//! usage), `unscoped_dead_letters_by_queue` — and the chart's
//! `queue_activity` of each range (hour, day, week). The endpoint has two
//! queues, `B11_LIVE` pending todos, 10 in flight, 20 dead letters and a
//! full week of activity buckets (every minute of the last hour, quarter of
//! the last day and hour of the last week, in both queues, with latency
//! histograms): the most a chart ever reads.
//!
//! Two databases side by side hold the same; the second also gets
//! `B11_HISTORY` (1 000 000) finished todos of the endpoint (95 % done, 5 %
//! cancelled; one `INSERT … SELECT` over a generated series; `VACUUM
//! ANALYZE` on PostgreSQL). Each read is timed `B11_READS` times on each,
//! the two alternating. Goal: independent of the history (the ratio of
//! medians ≤ 1.5, as B6 asks of `claim_next`). Correctness, checked: the
//! counts read are the same on both, and each range reads every
//! bucket it should. (Dead letters are not history: the page counts them
//! from their own index, so its cost follows how many wait, as the
//! pending count's does.)
//!
//! Environment: `B11_HISTORY` (1 000 000), `B11_READS` (200), `B11_LIVE`
//! (1 000), `B11_BACKENDS` (`sqlite,postgres`), `B11_RESULTS` (also write
//! the Markdown table there). PostgreSQL: `SWITCHBOARD_BENCH_DATABASE_URL`,
//! else `SWITCHBOARD_TEST_DATABASE_URL`; without either, only SQLite runs.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail, ensure};
use sqlx::{AnyPool, AssertSqlSafe};
use switchboard::clock::ManualClock;
use switchboard::domain::Timestamp;
use switchboard::domain::activity::{Activity, ActivityRange, LatencyHistogram};
use switchboard::domain::ids::sha256_hex;
use switchboard::store::prelude::*;
use switchboard::store::sql::DatabaseLocation;
use switchboard::store::{
    AgentKind, Caller, ClaimOptions, Finish, NewEndpoint, NewTodo, QueueActivity, SUMMARY_TOP,
    SqlStore, StoreOptions,
};
use switchboard::testkit::{StorePeek, ThrowawayDatabase};

/// Monday 2026-01-05 10:00:00 UTC.
const NOW_MS: i64 = 1_767_607_200_000;
const GOAL_RATIO: f64 = 1.5;
const QUEUES: [&str; 2] = ["inbox", "ci"];

const PG_HISTORY: &str = "INSERT INTO todos (id, endpoint_id, queue, title, kind, source, \
       state, owner, attempt, max_attempts, attempts_total, created_at, updated_at, claimed_at, \
       completed_at) \
     SELECT 'td_h' || lpad(to_hex(s.i), 31, '0'), $1, \
       CASE WHEN s.i % 2 = 0 THEN 'inbox' ELSE 'ci' END, 'b11 finished ' || s.i, 'operator', \
       'operator', CASE WHEN s.i % 20 = 1 THEN 'cancelled' ELSE 'done' END, 'agent:b11', 1, 1, 1, \
       $2 - s.i * 2000, $2 - s.i * 2000 + 60000, $2 - s.i * 2000 + 1000, $2 - s.i * 2000 + 60000 \
     FROM generate_series(0::bigint, $3::bigint - 1) AS s(i)";

const SQLITE_HISTORY: &str = "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < $3) \
     INSERT INTO todos (id, endpoint_id, queue, title, kind, source, \
       state, owner, attempt, max_attempts, attempts_total, created_at, updated_at, claimed_at, \
       completed_at) \
     SELECT printf('td_h%031x', s.i), $1, \
       CASE WHEN s.i % 2 = 0 THEN 'inbox' ELSE 'ci' END, 'b11 finished ' || s.i, 'operator', \
       'operator', CASE WHEN s.i % 20 = 1 THEN 'cancelled' ELSE 'done' END, 'agent:b11', 1, 1, 1, \
       $2 - s.i * 2000, $2 - s.i * 2000 + 60000, $2 - s.i * 2000 + 1000, $2 - s.i * 2000 + 60000 \
     FROM s";

#[derive(Clone, Copy, PartialEq)]
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

fn env_num(name: &str, default: i64) -> Result<i64> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| anyhow!("{name}={v:?} is not a number")),
        _ => Ok(default),
    }
}

fn median(mut micros: Vec<u64>) -> f64 {
    micros.sort_unstable();
    let n = micros.len();
    if n % 2 == 1 {
        micros[n / 2] as f64 / 1000.0
    } else {
        (micros[n / 2 - 1] + micros[n / 2]) as f64 / 2000.0
    }
}

/// One read of the page, as a name and what it returned (a number checked
/// to be the same before and after the history).
type Read = (&'static str, u64);

/// Each of the page's reads once, with what it read.
async fn page_reads(store: &SqlStore, caller: &Caller, now: Timestamp) -> Result<Vec<(Read, u64)>> {
    let mut out = Vec::new();
    let started = Instant::now();
    let summary = store.queue_summary(caller, None, SUMMARY_TOP).await?;
    let pending: i64 = summary.queues.iter().map(|q| q.pending + q.claimed).sum();
    out.push((
        ("live counts (queue_summary)", pending as u64),
        elapsed(started),
    ));
    let started = Instant::now();
    let levels = store.unscoped_admission(&caller.endpoint_id).await?;
    out.push((("admission", levels.len() as u64), elapsed(started)));
    let started = Instant::now();
    let dead = store
        .unscoped_dead_letters_by_queue(&caller.endpoint_id)
        .await?;
    let dead: i64 = dead.iter().map(|(_, n)| n).sum();
    out.push((("dead letters per queue", dead as u64), elapsed(started)));
    for (name, range) in [
        ("chart, last hour", ActivityRange::Hour),
        ("chart, last day", ActivityRange::Day),
        ("chart, last week", ActivityRange::Week),
    ] {
        let started = Instant::now();
        let rows = store
            .queue_activity(
                std::slice::from_ref(&caller.endpoint_id),
                None,
                range,
                range.first_bucket(now),
            )
            .await?;
        out.push(((name, rows.len() as u64), elapsed(started)));
    }
    Ok(out)
}

fn elapsed(started: Instant) -> u64 {
    started.elapsed().as_micros() as u64
}

/// Medians (ms) of `reads` rounds of the page's reads on each side, the
/// sides alternating (the small history first on even rounds, the large one
/// on odd ones: load from elsewhere on a shared host then hits both alike),
/// and what each read.
async fn measure(
    sides: [(&SqlStore, &Caller); 2],
    now: Timestamp,
    reads: i64,
) -> Result<[Vec<(Read, f64)>; 2]> {
    let mut samples: [Vec<(Read, Vec<u64>)>; 2] = [Vec::new(), Vec::new()];
    for round in 0..reads {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let (store, caller) = sides[side];
            let taken = page_reads(store, caller, now).await?;
            for (i, (read, micros)) in taken.into_iter().enumerate() {
                if round == 0 {
                    samples[side].push((read, Vec::new()));
                }
                let seen = &mut samples[side][i];
                ensure!(
                    seen.0 == read,
                    "{} read {} then {}",
                    read.0,
                    seen.0.1,
                    read.1
                );
                seen.1.push(micros);
            }
        }
    }
    Ok(samples.map(|side| {
        side.into_iter()
            .map(|(read, micros)| (read, median(micros)))
            .collect()
    }))
}

/// A full week of activity in both queues: every bucket every range shows.
fn week_of_activity(endpoint_id: &str, now: Timestamp) -> Vec<QueueActivity> {
    let mut rows = Vec::new();
    for range in ActivityRange::ALL {
        let first = range.first_bucket(now);
        for i in 0..range.buckets() {
            for queue in QUEUES {
                let mut claim_latency = LatencyHistogram::default();
                let mut complete_latency = LatencyHistogram::default();
                for ms in [40, 900, 12_000, 95_000, 3_600_000] {
                    claim_latency.record(ms + i);
                    complete_latency.record(ms * 3 + i);
                }
                rows.push(QueueActivity {
                    endpoint_id: endpoint_id.to_owned(),
                    queue: queue.to_owned(),
                    range,
                    bucket_at: first.add_secs(i * range.span_seconds()),
                    activity: Activity {
                        created: 40,
                        completed: 35,
                        failed: 4,
                        dead_lettered: 1,
                        claim_latency,
                        complete_latency,
                    },
                });
            }
        }
    }
    rows
}

async fn setup(store: &SqlStore, live: i64, now: Timestamp) -> Result<Caller> {
    let human = store.create_human("b11").await?;
    let agent = store
        .create_agent(&human.id, "charted", AgentKind::Task)
        .await?;
    let credential = "sbk_b11_bench_credential_0000000000";
    let endpoint = store
        .create_endpoint(NewEndpoint {
            agent_id: agent.id.clone(),
            slug: "charted-b11".into(),
            credential_hash: sha256_hex(credential),
            credential_prefix: credential[..12].to_owned(),
            queues: QUEUES.iter().map(|q| (*q).to_owned()).collect(),
            verbs: vec![],
            expires_at: None,
            default_lease_ttl_seconds: None,
            server_name: None,
        })
        .await?;
    let caller = endpoint.caller();
    for i in 0..live {
        let queue = QUEUES[(i % 2) as usize];
        store
            .create_todo(NewTodo::new(&endpoint.id, queue, format!("live {i}")))
            .await?;
    }
    for _ in 0..10 {
        store
            .claim_next(&caller, None, ClaimOptions::default())
            .await?
            .context("a live todo to claim")?;
    }
    for i in 0..20 {
        let mut new = NewTodo::new(&endpoint.id, "inbox", format!("dead {i}"));
        new.max_attempts = Some(1);
        let todo = store.create_todo(new).await?.todo;
        store
            .claim(&caller, &todo.id, ClaimOptions::default())
            .await?;
        store.fail(&caller, &todo.id, Finish::default()).await?;
    }
    store
        .add_queue_activity(&week_of_activity(&endpoint.id, now))
        .await?;
    Ok(caller)
}

async fn load_history(backend: Backend, pool: &AnyPool, endpoint_id: &str, n: i64) -> Result<()> {
    let sql = match backend {
        Backend::Postgres => PG_HISTORY,
        Backend::Sqlite => SQLITE_HISTORY,
    };
    sqlx::query(AssertSqlSafe(sql))
        .bind(endpoint_id)
        .bind(NOW_MS - 120_000)
        .bind(n)
        .execute(pool)
        .await?;
    match backend {
        Backend::Postgres => {
            sqlx::raw_sql("VACUUM ANALYZE todos").execute(pool).await?;
        }
        Backend::Sqlite => {
            sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(pool)
                .await?;
        }
    }
    Ok(())
}

async fn run_backend(
    backend: Backend,
    locations: [DatabaseLocation; 2],
    history: i64,
    reads: i64,
    live: i64,
    table: &mut String,
) -> Result<bool> {
    let now = Timestamp::from_millis(NOW_MS);
    let mut stores = Vec::new();
    let mut callers = Vec::new();
    for location in &locations {
        let clock = ManualClock::new(now);
        let store = Arc::new(SqlStore::connect(location, clock, &StoreOptions::default()).await?);
        store.migrate(None).await?;
        callers.push(setup(&store, live, now).await?);
        stores.push(store);
    }
    eprintln!("B11 {}: loading {history} finished todos", backend.name());
    let started = Instant::now();
    load_history(backend, stores[1].pool(), &callers[1].endpoint_id, history).await?;
    eprintln!(
        "B11 {}: loaded in {:.1} s",
        backend.name(),
        started.elapsed().as_secs_f64()
    );
    let [small, large] = measure(
        [(&stores[0], &callers[0]), (&stores[1], &callers[1])],
        now,
        reads,
    )
    .await?;
    for store in &stores {
        store.close().await;
    }
    let mut pass = true;
    for ((read, before), (read_after, after)) in small.iter().zip(&large) {
        ensure!(
            read == read_after,
            "{}: read {} over the small history and {} over the large one",
            read.0,
            read.1,
            read_after.1
        );
        let ratio = after / before;
        let ok = ratio <= GOAL_RATIO;
        pass &= ok;
        writeln!(
            table,
            "| {} | {} | {} | {before:.3} | {after:.3} | {ratio:.2} | ≤ {GOAL_RATIO}: {} |",
            backend.name(),
            read.0,
            read.1,
            if ok { "PASS" } else { "FAIL" }
        )?;
    }
    Ok(pass)
}

#[tokio::main]
async fn main() -> Result<()> {
    let history = env_num("B11_HISTORY", 1_000_000)?;
    let reads = env_num("B11_READS", 200)?;
    let live = env_num("B11_LIVE", 1_000)?;
    ensure!(reads >= 1 && live >= 10, "B11_READS ≥ 1 and B11_LIVE ≥ 10");
    let pg_url = [
        "SWITCHBOARD_BENCH_DATABASE_URL",
        "SWITCHBOARD_TEST_DATABASE_URL",
    ]
    .into_iter()
    .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()));
    let mut backends = Vec::new();
    for name in std::env::var("B11_BACKENDS")
        .unwrap_or_else(|_| "sqlite,postgres".into())
        .split(',')
    {
        match name.trim() {
            "sqlite" => backends.push(Backend::Sqlite),
            "postgres" if pg_url.is_some() => backends.push(Backend::Postgres),
            "postgres" => eprintln!(
                "B11: PostgreSQL skipped: set SWITCHBOARD_BENCH_DATABASE_URL \
                 (or SWITCHBOARD_TEST_DATABASE_URL)"
            ),
            other => bail!("B11_BACKENDS: unknown backend {other:?}"),
        }
    }
    let mut table = String::new();
    writeln!(
        table,
        "| backend | read ({reads} each) | rows or count read | median ms, live rows only | median ms, +{history} finished | ratio | goal |"
    )?;
    writeln!(table, "|---|---|---|---|---|---|---|")?;
    let dir = tempfile::Builder::new().prefix("sb-b11-").tempdir()?;
    let mut pass = true;
    for backend in backends {
        match backend {
            Backend::Sqlite => {
                let locations = ["small", "large"].map(|side| {
                    DatabaseLocation::Sqlite(dir.path().join(format!("b11-{side}.db")))
                });
                pass &= run_backend(backend, locations, history, reads, live, &mut table).await?;
            }
            Backend::Postgres => {
                let url = pg_url.as_deref().context("no PostgreSQL URL")?;
                let small = ThrowawayDatabase::create(url, "sb_bench_b11").await?;
                let large = ThrowawayDatabase::create(url, "sb_bench_b11").await?;
                let locations = [
                    DatabaseLocation::Postgres(small.url.clone()),
                    DatabaseLocation::Postgres(large.url.clone()),
                ];
                let outcome =
                    run_backend(backend, locations, history, reads, live, &mut table).await;
                let _ = small.drop_database().await;
                let _ = large.drop_database().await;
                pass &= outcome?;
            }
        }
    }
    print!("{table}");
    if let Ok(path) = std::env::var("B11_RESULTS")
        && !path.is_empty()
    {
        std::fs::write(path, &table)?;
    }
    eprintln!("B11: {}", if pass { "PASS" } else { "FAIL" });
    Ok(())
}
