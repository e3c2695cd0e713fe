//! B9 (issue 43): webhook intake with 0, 8 and 32 routing rules, against
//! the real release binary on one instance (SQLite, the embedded default).
//!
//! One endpoint with a signed webhook; for each rule count, the webhook's
//! rules are replaced by that many conditions that never match (so every
//! rule runs, the worst case: the default queue takes the delivery), mixed
//! like real ones (event and action tests, a label lookup, a substring of
//! the comment body, a sender test). Each delivery is a GitHub-shaped signed
//! `issue_comment` of about 4 KiB with its own delivery id, so each makes a
//! todo.
//!
//! - **Latency**: `B9_DELIVERIES` deliveries one at a time; the round trip
//!   (POST → 202 read) per delivery. The rules' *added* latency is the
//!   figure minus the same percentile with 0 rules, from the same run.
//! - **Throughput**: `B9_DELIVERIES` deliveries with `B9_IN_FLIGHT` (8) in
//!   flight: deliveries per second.
//!
//! Goal (issue 43): 32 rules add ≤ 2 ms at p99. Correctness, checked: every
//! delivery answered 202 `accepted` (none dropped, quarantined or refused).
//!
//! - **History**: the delivery history's listing (`GET
//!   /api/v1/webhooks/{id}/deliveries`: the first page, a page of a rare
//!   decision, a page by sender), timed `HISTORY_READS` times each with the
//!   history the runs above left, then again after `B9_HISTORY` (1 000 000)
//!   more deliveries are written straight into the database file. Goal:
//!   independent of the history's size (the ratio ≤ 1.5, as B6 asks of
//!   `claim_next`).
//!
//! Environment: `B9_DELIVERIES` (1 000), `B9_IN_FLIGHT` (8), `B9_HISTORY`
//! (1 000 000), `B9_RESULTS` (also write the Markdown table there).

#[path = "common/server.rs"]
mod server;

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{Result, ensure};
use serde_json::{Value, json};
use server::ServerProcess;
use switchboard::intake::signature;

const RULE_COUNTS: [usize; 3] = [0, 8, 32];
/// Listing reads per query per history size.
const HISTORY_READS: usize = 200;
/// The history listing's goal: with the large history / with the small.
const GOAL_HISTORY_RATIO: f64 = 1.5;
const GOAL_ADDED_P99_MS: f64 = 2.0;

fn env_num(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => Ok(v.parse()?),
        _ => Ok(default),
    }
}

/// `n` conditions that never match a bench delivery, of the kinds real
/// rules are made of.
fn rules(n: usize) -> Value {
    let conditions = (0..n).map(|i| match i % 5 {
        0 => format!(".event == \"workflow_run_{i}\""),
        1 => format!(".event == \"pull_request\" and .action == \"review_requested_{i}\""),
        2 => format!(".labels | index(\"label-{i}\")"),
        3 => format!(".payload.comment.body // \"\" | contains(\"@bot-{i}\")"),
        _ => format!(".sender == \"robot-{i}\" or .author == \"robot-{i}\""),
    });
    json!({
        "rules": conditions.map(|c| json!({"if": c, "then": {"drop": true}})).collect::<Vec<_>>(),
    })
}

fn comment(n: usize) -> String {
    json!({
        "action": "created",
        "sender": {"login": "alice"},
        "issue": {"number": n, "title": "The parser fails on nested lists",
                  "user": {"login": "alice"}, "labels": [{"name": "bug"}, {"name": "parser"}]},
        "comment": {"body": "x".repeat(3500), "user": {"login": "alice"}},
        "repository": {"full_name": "octo/repo"},
    })
    .to_string()
}

#[derive(Clone)]
struct Bench {
    http: reqwest::Client,
    base: String,
    token: String,
    ingest: String,
    secret: String,
}

impl Bench {
    async fn api(&self, method: reqwest::Method, path: &str, body: Value) -> Result<Value> {
        let response = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        ensure!(status.is_success(), "{path}: {status} {body}");
        Ok(body)
    }

    /// One signed delivery; its round trip in microseconds.
    async fn deliver(&self, id: &str, n: usize) -> Result<u64> {
        let body = comment(n);
        let sig = signature::sign(&self.secret, body.as_bytes());
        let started = Instant::now();
        let response = self
            .http
            .post(&self.ingest)
            .header("content-type", "application/json")
            .header("x-github-event", "issue_comment")
            .header("x-github-delivery", id)
            .header("x-hub-signature-256", sig)
            .body(body)
            .send()
            .await?;
        let status = response.status().as_u16();
        let answer: Value = response.json().await?;
        let took = started.elapsed().as_micros() as u64;
        ensure!(
            status == 202 && answer["delivery"]["decision"] == "accepted",
            "delivery {id}: {status} {answer}"
        );
        Ok(took)
    }
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

#[tokio::main]
async fn main() -> Result<()> {
    let deliveries = env_num("B9_DELIVERIES", 1000)?;
    let in_flight = env_num("B9_IN_FLIGHT", 8)?.max(1);
    let dir = tempfile::tempdir()?;
    let server = ServerProcess::start_with("b9.db", dir.path(), &["--intake-rate", "1000000"])?;
    let mut bench = Bench {
        http: reqwest::Client::new(),
        base: format!("http://{}", server.addr),
        token: server.admin_token.clone(),
        ingest: String::new(),
        secret: String::new(),
    };
    let endpoint = bench
        .api(
            reqwest::Method::POST,
            "/api/v1/endpoints",
            json!({"agent": "b9", "queues": ["inbox"]}),
        )
        .await?;
    let slug = endpoint["slug"].as_str().unwrap_or_default().to_owned();
    let webhook = bench
        .api(
            reqwest::Method::POST,
            &format!("/api/v1/endpoints/{slug}/webhooks"),
            json!({"queue": "inbox", "signed": true}),
        )
        .await?;
    let hook_id = webhook["id"].as_str().unwrap_or_default().to_owned();
    let url = webhook["ingest_url"].as_str().unwrap_or_default();
    bench.ingest = format!(
        "{}{}",
        bench.base,
        &url[url.find("/webhooks/w/").unwrap_or(0)..]
    );
    bench.secret = webhook["signing_secret"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    let mut rows = Vec::new();
    let mut next = 0usize;
    for count in RULE_COUNTS {
        bench
            .api(
                reqwest::Method::PUT,
                &format!("/api/v1/webhooks/{hook_id}/rules"),
                rules(count),
            )
            .await?;
        // Warm-up: the rule set compiles once, connections open.
        for _ in 0..50 {
            next += 1;
            bench.deliver(&format!("warm-{next}"), next).await?;
        }
        let mut micros = Vec::with_capacity(deliveries);
        for _ in 0..deliveries {
            next += 1;
            micros.push(bench.deliver(&format!("lat-{next}"), next).await?);
        }
        micros.sort_unstable();

        let started = Instant::now();
        let mut lanes = tokio::task::JoinSet::new();
        for lane in 0..in_flight {
            let bench = bench.clone();
            let first = next + lane * deliveries;
            lanes.spawn(async move {
                let mut i = lane;
                while i < deliveries {
                    bench.deliver(&format!("tp-{first}-{i}"), first + i).await?;
                    i += in_flight;
                }
                Ok::<_, anyhow::Error>(())
            });
        }
        while let Some(lane) = lanes.join_next().await {
            lane??;
        }
        next += in_flight * deliveries;
        let per_second = deliveries as f64 / started.elapsed().as_secs_f64();
        eprintln!(
            "b9: {count} rules: p50 {:.2} ms, p99 {:.2} ms, {per_second:.0} deliveries/s",
            pct(&micros, 50.0),
            pct(&micros, 99.0)
        );
        rows.push((count, micros, per_second));
    }

    // The history listing, before and after a large history.
    let queries = [
        ("first page", String::new()),
        (
            "decision=quarantined (none)",
            "&decision=quarantined".to_owned(),
        ),
        ("sender=nobody (none)", "&sender=nobody".to_owned()),
    ];
    let small = listing_medians(&bench, &hook_id, &queries).await?;
    let history = env_num("B9_HISTORY", 1_000_000)?;
    let hook = hook_id.clone();
    let db = dir.path().join("b9.db");
    tokio::task::spawn_blocking(move || fill_history(&db, &hook, history)).await??;
    let large = listing_medians(&bench, &hook_id, &queries).await?;
    server.stop();

    let (base_p50, base_p99) = (pct(&rows[0].1, 50.0), pct(&rows[0].1, 99.0));
    let mut table = String::new();
    writeln!(
        table,
        "| rules | deliveries | p50 ms | p99 ms | added p50 ms | added p99 ms | deliveries/s ({in_flight} in flight) | goal |"
    )?;
    writeln!(table, "|---|---|---|---|---|---|---|---|")?;
    for (count, micros, per_second) in &rows {
        let (p50, p99) = (pct(micros, 50.0), pct(micros, 99.0));
        let added = p99 - base_p99;
        let goal = if *count == 32 {
            format!(
                "≤ {GOAL_ADDED_P99_MS:.0} ms added p99: {}",
                if added <= GOAL_ADDED_P99_MS {
                    "PASS"
                } else {
                    "FAIL"
                }
            )
        } else {
            "-".to_owned()
        };
        writeln!(
            table,
            "| {count} | {} | {p50:.2} | {p99:.2} | {:.2} | {added:.2} | {per_second:.0} | {goal} |",
            micros.len(),
            p50 - base_p50,
        )?;
    }
    writeln!(table)?;
    writeln!(
        table,
        "| history listing ({HISTORY_READS} reads each) | median ms, {} deliveries | median ms, +{history} | ratio | goal |",
        RULE_COUNTS.len() * (50 + 2 * deliveries)
    )?;
    writeln!(table, "|---|---|---|---|---|")?;
    for ((name, _), (before, after)) in queries.iter().zip(small.iter().zip(&large)) {
        let ratio = after / before;
        writeln!(
            table,
            "| {name} | {before:.2} | {after:.2} | {ratio:.2} | ≤ {GOAL_HISTORY_RATIO}: {} |",
            if ratio <= GOAL_HISTORY_RATIO {
                "PASS"
            } else {
                "FAIL"
            }
        )?;
    }
    print!("{table}");
    if let Ok(path) = std::env::var("B9_RESULTS")
        && !path.is_empty()
    {
        std::fs::write(path, &table)?;
    }
    Ok(())
}

/// The median latency (ms) of each listing query, `HISTORY_READS` reads.
async fn listing_medians(
    bench: &Bench,
    hook_id: &str,
    queries: &[(&str, String)],
) -> Result<Vec<f64>> {
    let mut medians = Vec::new();
    for (_, filter) in queries {
        let path = format!("/api/v1/webhooks/{hook_id}/deliveries?limit=50{filter}");
        let mut micros = Vec::with_capacity(HISTORY_READS);
        for _ in 0..HISTORY_READS {
            let started = Instant::now();
            let response = bench
                .http
                .get(format!("{}{path}", bench.base))
                .bearer_auth(&bench.token)
                .send()
                .await?;
            ensure!(
                response.status().is_success(),
                "{path}: {}",
                response.status()
            );
            let page: Value = response.json().await?;
            micros.push(started.elapsed().as_micros() as u64);
            ensure!(page["deliveries"].is_array(), "{path}: {page}");
        }
        micros.sort_unstable();
        medians.push(pct(&micros, 50.0));
    }
    Ok(medians)
}

/// Writes `n` accepted deliveries of the webhook straight into the database
/// file, older than every real one (the listing reads newest first), from
/// one transaction beside the running server.
fn fill_history(db: &std::path::Path, webhook_id: &str, n: usize) -> Result<()> {
    let conn = rusqlite::Connection::open(db)?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    let (human, endpoint): (String, String) = conn.query_row(
        "SELECT human_id, endpoint_id FROM webhooks WHERE id = ?1",
        [webhook_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let oldest: i64 = conn.query_row(
        "SELECT COALESCE(MIN(received_at), 0) FROM deliveries",
        [],
        |r| r.get(0),
    )?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    {
        let mut insert = conn.prepare(
            "INSERT INTO deliveries (id, webhook_id, human_id, endpoint_id, received_at, decision, \
               event, sender, envelope, body_size) \
             VALUES (?1, ?2, ?3, ?4, ?5, 'accepted', 'issue_comment', 'alice', '{}', 4096)",
        )?;
        for i in 0..n {
            insert.execute(rusqlite::params![
                format!("dl_hist{i:012}"),
                webhook_id,
                human,
                endpoint,
                oldest - 1 - i as i64,
            ])?;
        }
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}
