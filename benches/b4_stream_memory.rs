//! B4 (`09-quality.md`): memory per idle streaming MCP session, at 10 000
//! open GET streams (target ≤ 64 KiB each).
//!
//! Against the real release binary on a fresh SQLite file (a session's
//! memory is the server's, whatever the database): vends `B4_ENDPOINTS`
//! endpoints (default 200), then opens `B4_PER_ENDPOINT` sessions on each
//! (default 50; the per-endpoint session cap another branch adds defaults to
//! 64), each with `initialize`, `notifications/initialized` and its GET
//! stream on a connection of its own, and keeps them all open and idle. The
//! server's resident memory (`VmRSS` in `/proc/<pid>/status`) is read after
//! vending and a warm-up (one session opened and ended per endpoint), and
//! again once every stream is open and the server has settled; the
//! difference divided by the sessions is the figure. `VmHWM` and the
//! server's thread count are recorded beside it.
//!
//! The open-files limit of this process is raised first when it is too low
//! (`prlimit`, needs root), so that the server, its child, inherits it: each
//! side of 10 000 streams needs 10 000 descriptors.
//!
//! Checks: every stream answered 200 and is still open at the end (none
//! ended early). Exits non-zero otherwise. `B4_RESULTS`: also write the
//! Markdown report there.

#[path = "common/server.rs"]
mod server;
#[path = "common/streams.rs"]
mod streams;

use std::fmt::Write as _;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use server::ServerProcess;
use streams::{
    end_session, for_all, open_files_limit, open_session, open_stream, stream_client, vend,
};

const SETUP_CONCURRENCY: usize = 16;

fn env_num(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .replace('_', "")
            .parse()
            .with_context(|| format!("{name}={v:?} is not a number")),
        _ => Ok(default),
    }
}

/// `VmRSS`, `VmHWM` (KiB) and `Threads` of a process.
fn status_of(pid: u32) -> Result<(u64, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("{name} in /proc/{pid}/status"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?, field("Threads:")?))
}

/// Raises this process's open-files limit (children inherit it) when it is
/// below `limit`; each side of a stream (this process, the server) holds one
/// descriptor per stream.
fn raise_nofile(limit: u64) -> Result<()> {
    if open_files_limit().is_some_and(|soft| soft >= limit) {
        return Ok(());
    }
    let status = Command::new("prlimit")
        .arg(format!("--pid={}", std::process::id()))
        .arg(format!("--nofile={limit}:{limit}"))
        .status()
        .context("running prlimit")?;
    ensure!(
        status.success(),
        "prlimit --nofile={limit} failed (root needed)"
    );
    Ok(())
}

/// Waits until the server's RSS stops moving (two reads 1 s apart within
/// 1 %), at most `limit`.
async fn settled_rss(pid: u32, limit: Duration) -> Result<(u64, u64, u64)> {
    let deadline = Instant::now() + limit;
    let mut last = status_of(pid)?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = status_of(pid)?;
        if now.0.abs_diff(last.0) * 100 <= last.0 || Instant::now() >= deadline {
            return Ok(now);
        }
        last = now;
    }
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("B4 FAILED: {e:#}");
        std::process::exit(1);
    }
}

async fn run() -> Result<()> {
    let endpoints_n = env_num("B4_ENDPOINTS", 200)?;
    let per_endpoint = env_num("B4_PER_ENDPOINT", 50)?;
    ensure!(
        endpoints_n >= 1 && per_endpoint >= 1,
        "B4 sizes must be positive"
    );
    let sessions = endpoints_n * per_endpoint;
    raise_nofile(sessions as u64 + 2048)?;

    let dir = tempfile::Builder::new().prefix("sb-b4-").tempdir()?;
    let db = dir.path().join("b4.db");
    // Every stream is a connection: the server's default cap (4 096) would
    // make the later streams wait for, and close, earlier ones.
    let cap = (sessions + 1024).to_string();
    let server = ServerProcess::start_with(
        &db.display().to_string(),
        dir.path(),
        &["--max-connections", &cap],
    )?;
    let pid = server.pid();
    let addr = server.addr.clone();
    let admin = server.admin_token.clone();
    let started = Instant::now();

    let http = streams::http_client(SETUP_CONCURRENCY)?;
    let endpoints = {
        let (http, addr, admin) = (http.clone(), addr.clone(), admin.clone());
        for_all(endpoints_n, SETUP_CONCURRENCY, move |i| {
            let (http, addr, admin) = (http.clone(), addr.clone(), admin.clone());
            async move { vend(&http, &addr, &admin, &format!("b4-agent-{}", i / 100)).await }
        })
        .await?
    };
    let endpoints = Arc::new(endpoints);
    // Warm-up: one session per endpoint opened and ended, so caches and
    // pools the first session of an endpoint fills count as "before".
    {
        let (http, endpoints) = (http.clone(), endpoints.clone());
        for_all(endpoints_n, SETUP_CONCURRENCY, move |i| {
            let (http, endpoints) = (http.clone(), endpoints.clone());
            async move {
                let session = open_session(&http, &endpoints[i], "b4").await?;
                end_session(&http, &endpoints[i], &session).await
            }
        })
        .await?;
    }
    let before = settled_rss(pid, Duration::from_secs(10)).await?;

    let streams = stream_client()?;
    let open_started = Instant::now();
    let responses = {
        let (http, streams, endpoints) = (http.clone(), streams.clone(), endpoints.clone());
        for_all(sessions, SETUP_CONCURRENCY, move |i| {
            let (http, streams, endpoints) = (http.clone(), streams.clone(), endpoints.clone());
            async move {
                let ep = &endpoints[i % endpoints_n];
                let session = open_session(&http, ep, "b4").await?;
                open_stream(&streams, ep, &session).await
            }
        })
        .await?
    };
    let open_secs = open_started.elapsed().as_secs_f64();
    drop(http); // its idle keep-alive connections are not sessions
    let after = settled_rss(pid, Duration::from_secs(20)).await?;

    // Every stream is still open: a read of each must not see its end.
    let mut ended = 0;
    let mut responses = responses;
    for resp in &mut responses {
        if let Ok(Ok(None)) = tokio::time::timeout(Duration::from_millis(1), resp.chunk()).await {
            ended += 1;
        }
    }
    let per_session_kib = (after.0 as f64 - before.0 as f64) / sessions as f64;
    let pass = per_session_kib <= 64.0;

    let mut md = String::new();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let _ = writeln!(
        md,
        "### Parameters\n\n- {sessions} idle streaming sessions ({endpoints_n} endpoints × \
         {per_endpoint}), each `initialize` + `notifications/initialized` + GET stream on its \
         own connection; release binary on a fresh SQLite file; opened {SETUP_CONCURRENCY} at a \
         time in {open_secs:.1} s; load average at the end: {}\n- server RSS read from \
         `/proc/<pid>/status` after vending and a warm-up (one session opened and ended per \
         endpoint), and once the RSS settled with every stream open\n",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let _ = writeln!(
        md,
        "| sessions | RSS before (KiB) | RSS after (KiB) | VmHWM after (KiB) | threads \
         before → after | KiB per session | required | result |\n\
         |---:|---:|---:|---:|---|---:|---:|---|\n\
         | {sessions} | {} | {} | {} | {} → {} | {per_session_kib:.1} | ≤ 64 | {} |",
        before.0,
        after.0,
        after.1,
        before.2,
        after.2,
        if pass { "PASS" } else { "FAIL" }
    );
    println!("{md}");
    if let Ok(file) = std::env::var("B4_RESULTS")
        && !file.is_empty()
    {
        std::fs::write(&file, &md).with_context(|| format!("cannot write {file}"))?;
    }
    eprintln!(
        "B4: {sessions} streams, {per_session_kib:.1} KiB per session, {ended} ended early, \
         {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
    drop(responses);
    server.stop();
    if ended > 0 {
        bail!("{ended} of {sessions} streams ended before the measurement was done");
    }
    Ok(())
}
