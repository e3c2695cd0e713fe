//! The outside references B1 and B2 are judged against (issue 47,
//! `09-quality.md` B1/B2 amended), run as their own programs on the same
//! PostgreSQL cluster as the store, in the same run:
//!
//! - the **pgbench floor**: `pgbench -n -M prepared -c C -j min(C,2) -T D`
//!   running `bench/floor/claim_complete.pgbench` (claim, then complete, two
//!   autocommit statements, prepared) on the minimal table of
//!   `bench/floor/todos_reset.sql`, which is rebuilt (with its pending rows)
//!   in a database of its own before every run;
//! - **pg-boss** (npm, pinned in `bench/pgboss/package.json`):
//!   `bench/pgboss/loop.mjs`, C workers looping `fetch → complete`.
//!
//! Both report their first and last fifth like B1's own paths. Included with
//! `#[path = "common/peers.rs"] mod peers;`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result, bail, ensure};
use sqlx::Row;
use sqlx::postgres::PgPoolOptions;

/// One run of an outside program.
#[derive(Debug, Clone)]
pub struct PeerRun {
    pub loops: u64,
    pub secs: f64,
    /// Loops/s over the first and the last fifth of the run.
    pub first_rate: f64,
    pub last_rate: f64,
}

impl PeerRun {
    pub fn rate(&self) -> f64 {
        self.loops as f64 / self.secs
    }
}

/// The repository's root (benches run from it under `cargo bench`, but the
/// binary may be started from anywhere).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn floor_file(name: &str) -> PathBuf {
    repo().join("bench/floor").join(name)
}

/// Whether `program --version` runs.
pub fn available(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether pg-boss is installed (`npm ci --prefix bench/pgboss`) and node runs.
pub fn pgboss_installed() -> bool {
    repo().join("bench/pgboss/node_modules/pg-boss").is_dir() && available("node")
}

/// Loops/s over the first and the last fifth of per-second rates.
pub fn fifths(per_second: &[f64]) -> (f64, f64) {
    let n = per_second.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let w = (n / 5).max(1);
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    (mean(&per_second[..w]), mean(&per_second[n - w..]))
}

/// Rebuilds the floor's table with `rows` pending rows (`todos_reset.sql`:
/// drop, create, load, index, VACUUM ANALYZE, CHECKPOINT).
pub async fn pgbench_reset(url: &str, rows: i64) -> Result<()> {
    let out = tokio::process::Command::new("psql")
        .arg(url)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-v"])
        .arg(format!("rows={rows}"))
        .arg("-f")
        .arg(floor_file("todos_reset.sql"))
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run psql (the pgbench floor needs PostgreSQL's client tools)")?;
    ensure!(
        out.status.success(),
        "psql -f bench/floor/todos_reset.sql failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// One pgbench floor run on the database at `url`, whose table
/// [`pgbench_reset`] rebuilt with `rows` pending rows:
/// `pgbench -n -M prepared -c C -j min(C,2) -T seconds`, progress every
/// second. Checks afterwards that every row is done or pending, that the
/// done rows are as many as pgbench's transactions and each was claimed
/// once.
pub async fn pgbench_run(
    url: &str,
    concurrency: usize,
    seconds: u64,
    rows: i64,
) -> Result<PeerRun> {
    let out = tokio::process::Command::new("pgbench")
        .args(["-n", "-M", "prepared", "-P", "1"])
        .arg("-c")
        .arg(concurrency.to_string())
        .arg("-j")
        .arg(concurrency.min(2).to_string())
        .arg("-T")
        .arg(seconds.to_string())
        .arg("-f")
        .arg(floor_file("claim_complete.pgbench"))
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run pgbench (PostgreSQL's client tools)")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success(),
        "pgbench failed (did the {rows} rows run out? raise the preload): {stderr}"
    );
    let field = |prefix: &str| -> Option<f64> {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    let loops = field("number of transactions actually processed: ")
        .context("pgbench printed no transaction count")? as u64;
    let tps = field("tps = ").context("pgbench printed no tps")?;
    // "progress: 3.0 s, 1234.5 tps, lat …" once a second, on stderr.
    let per_second: Vec<f64> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("progress: "))
        .filter_map(|l| l.split(", ").nth(1))
        .filter_map(|t| t.strip_suffix(" tps"))
        .filter_map(|t| t.parse().ok())
        .collect();
    let (first_rate, last_rate) = fifths(&per_second);
    pgbench_check(url, rows, loops).await?;
    Ok(PeerRun {
        loops,
        secs: loops as f64 / tps.max(f64::MIN_POSITIVE),
        first_rate,
        last_rate,
    })
}

async fn pgbench_check(url: &str, rows: i64, loops: u64) -> Result<()> {
    let pool = PgPoolOptions::new().max_connections(1).connect(url).await?;
    let row = sqlx::query(
        "SELECT count(*) FILTER (WHERE state = 'done') AS done, \
           count(*) FILTER (WHERE state = 'pending') AS pending, \
           count(*) FILTER (WHERE state NOT IN ('done', 'pending')) AS other, \
           count(*) FILTER (WHERE state = 'done' AND attempt <> 1) AS twice, \
           count(*) FILTER (WHERE state = 'pending' AND attempt <> 0) AS touched \
         FROM todos",
    )
    .fetch_one(&pool)
    .await?;
    pool.close().await;
    let get = |c: &str| row.try_get::<i64, _>(c);
    let (done, pending, other, twice, touched) = (
        get("done")?,
        get("pending")?,
        get("other")?,
        get("twice")?,
        get("touched")?,
    );
    let mut problems = Vec::new();
    if done != loops as i64 {
        problems.push(format!(
            "{done} rows are done but pgbench ran {loops} loops"
        ));
    }
    if done + pending + other != rows || other != 0 {
        problems.push(format!(
            "{done} done + {pending} pending + {other} other != {rows} preloaded"
        ));
    }
    if twice + touched != 0 {
        problems.push(format!(
            "{twice} done rows claimed more than once, {touched} pending rows claimed"
        ));
    }
    if !problems.is_empty() {
        bail!("pgbench floor check failed: {}", problems.join("; "));
    }
    Ok(())
}

/// One pg-boss run (`bench/pgboss/loop.mjs`) against the database at `url`;
/// the script checks itself (no job completed twice, none lost).
pub async fn pgboss_run(
    url: &str,
    concurrency: usize,
    seconds: u64,
    preload: i64,
) -> Result<PeerRun> {
    let script: &Path = &repo().join("bench/pgboss/loop.mjs");
    let out = tokio::process::Command::new("node")
        .arg(script)
        .env("PGBOSS_URL", url)
        .env("PGBOSS_CONCURRENCY", concurrency.to_string())
        .env("PGBOSS_SECONDS", seconds.to_string())
        .env("PGBOSS_PRELOAD", preload.to_string())
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run node for pg-boss")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    let Some(line) = line else {
        bail!(
            "pg-boss printed no result: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let v: serde_json::Value = serde_json::from_str(line).context("pg-boss result")?;
    ensure!(
        out.status.success() && v["ok"] == true,
        "pg-boss run failed: {}",
        v["problems"]
    );
    let num = |k: &str| {
        v[k].as_f64()
            .with_context(|| format!("pg-boss result has no {k}"))
    };
    Ok(PeerRun {
        loops: num("loops")? as u64,
        secs: num("seconds")?,
        first_rate: num("first")?,
        last_rate: num("last")?,
    })
}
