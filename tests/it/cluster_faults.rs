//! Faults under several real `serve` processes, on a throwaway PostgreSQL
//! cluster of the test's own (`switchboard::testkit::PgCluster`) that the
//! test stops and starts: the database restarted under two instances, a todo
//! created while a bus listener was down, an instance killed while it held a
//! claim (`docs/cluster.md`, "When the bus is down").
//!
//! Each test makes its own cluster (initdb, a free port on 127.0.0.1) and
//! its own processes on port 0; every wait is bounded, and polls.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mcp::{Mcp, client};
use crate::support::server::Process;
use crate::support::sse::{Stream, todo_id};
use switchboard::testkit::PgCluster;

/// Generous rates, a 1 s bus keepalive, and `--maintenance-interval`.
fn flags(url: &str, maintenance_interval: &str) -> Vec<String> {
    [
        "--database",
        url,
        "--api-write-rate",
        "1000",
        "--api-read-rate",
        "1000",
        "--mcp-rate",
        "1000",
        "--maintenance-interval",
        maintenance_interval,
        "--bus-keepalive",
        "1s",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Instances on a throwaway cluster. Fields drop in order: the processes
/// before the database.
struct Faulty {
    nodes: Vec<Process>,
    admin: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
    pg: PgCluster,
}

/// `n` instances on a fresh throwaway cluster, every bus connected.
async fn faulty(test: &str, n: usize, maintenance_interval: &str) -> Option<Faulty> {
    faulty_as(test, &vec!["postgres"; n], maintenance_interval).await
}

/// As [`faulty`], instance `i` connecting as the role `roles[i]` (created as
/// a superuser unless it is `postgres`), so that a test can refuse one
/// instance's logins (`ALTER ROLE … NOLOGIN`) and not the others'.
async fn faulty_as(test: &str, roles: &[&str], maintenance_interval: &str) -> Option<Faulty> {
    let pg = tokio::task::block_in_place(|| crate::support::skips::throwaway_cluster(test))?;
    for role in roles.iter().filter(|r| **r != "postgres") {
        pg.sql(&format!("CREATE ROLE {role} LOGIN SUPERUSER")).await;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let start = |role: &str| {
        let args = flags(&pg.url_as(role), maintenance_interval);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Process::start(dir.path(), &args)
    };
    // One after the other: the first start migrates and prints the token.
    let mut nodes = vec![start(roles[0])];
    let admin = nodes[0]
        .first_token()
        .expect("the first instance prints the first human's token");
    for role in &roles[1..] {
        nodes.push(start(role));
    }
    let n = roles.len();
    let c = Faulty {
        nodes,
        admin,
        http: client(),
        _dir: dir,
        pg,
    };
    for node in 0..n {
        c.wait_bus_connected(node, Duration::from_secs(20)).await;
    }
    Some(c)
}

/// An answer: status, body (JSON or `Null`), and how long it took.
struct Got {
    status: u16,
    body: Value,
    took: Duration,
}

impl Faulty {
    async fn request(
        &self,
        node: usize,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Got {
        let started = Instant::now();
        let mut request = self
            .http
            .request(method, self.nodes[node].url(path))
            .bearer_auth(&self.admin);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        Got {
            status,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
            took: started.elapsed(),
        }
    }

    async fn get(&self, node: usize, path: &str) -> Got {
        self.request(node, reqwest::Method::GET, path, None).await
    }

    /// An API call that must succeed.
    async fn api(
        &self,
        node: usize,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let got = self
            .request(node, method, &format!("/api/v1{path}"), body)
            .await;
        assert!(
            (200..300).contains(&got.status),
            "{path}: {} {}",
            got.status,
            got.body
        );
        got.body
    }

    /// Vends an endpoint through `node`; returns (slug, token).
    async fn vend(&self, node: usize, agent: &str) -> (String, String) {
        let v = self
            .api(
                node,
                reqwest::Method::POST,
                "/endpoints",
                Some(json!({"agent": agent})),
            )
            .await;
        (
            v["slug"].as_str().unwrap().to_owned(),
            v["token"].as_str().unwrap().to_owned(),
        )
    }

    async fn push(&self, node: usize, slug: &str, title: &str) -> String {
        let v = self
            .api(
                node,
                reqwest::Method::POST,
                &format!("/endpoints/{slug}/todos"),
                Some(json!({"title": title})),
            )
            .await;
        v["id"].as_str().unwrap().to_owned()
    }

    fn mcp(&self, node: usize, slug: &str, token: &str) -> Mcp {
        Mcp {
            http: self.http.clone(),
            url: self.nodes[node].url(&format!("/mcp/{slug}")),
            authorization: format!("Bearer {token}"),
        }
    }

    /// A session on `node` with its notification stream open.
    async fn listen(&self, node: usize, slug: &str, token: &str) -> Stream {
        Stream::open(self.mcp(node, slug, token)).await
    }

    /// `/readyz`'s body when it answers 200 ready, else `None`.
    async fn ready(&self, node: usize) -> Option<Value> {
        let r = self
            .http
            .get(self.nodes[node].url("/readyz"))
            .send()
            .await
            .ok()?;
        if r.status() != 200 {
            return None;
        }
        let v: Value = r.json().await.ok()?;
        (v["status"] == "ready").then_some(v)
    }

    /// Polls `/readyz` until it answers ready; how long that took.
    async fn wait_ready(&self, node: usize, within: Duration) -> Duration {
        self.poll(node, within, "ready", |_| true).await
    }

    /// Polls `/readyz` until it says `"bus": "connected"`; how long that took.
    async fn wait_bus_connected(&self, node: usize, within: Duration) -> Duration {
        self.poll(node, within, "bus connected", |v| v["bus"] == "connected")
            .await
    }

    async fn poll(
        &self,
        node: usize,
        within: Duration,
        what: &str,
        want: impl Fn(&Value) -> bool,
    ) -> Duration {
        let started = Instant::now();
        loop {
            if let Some(v) = self.ready(node).await
                && want(&v)
            {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < within,
                "instance {node} not {what} within {within:?}:\n{}\nPostgreSQL log:\n{}",
                self.nodes[node].log_text(),
                self.pg.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// One sample of a `/metrics` family without labels. A scrape answers
    /// 503 while the database is unavailable (it reads the database): those
    /// are retried for up to 10 s.
    async fn metric(&self, node: usize, name: &str) -> f64 {
        let started = Instant::now();
        loop {
            let response = self
                .http
                .get(self.nodes[node].url("/metrics"))
                .send()
                .await
                .expect("GET /metrics");
            let status = response.status().as_u16();
            let text = response.text().await.unwrap();
            if status == 503 && started.elapsed() < Duration::from_secs(10) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            assert_eq!(status, 200, "GET /metrics: {text}");
            return text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|n| n.trim().parse::<f64>().ok())
                .unwrap_or_else(|| panic!("{name} in /metrics:\n{text}"));
        }
    }

    /// `application_name` of every session on the cluster (for failures).
    async fn sessions(&self) -> Vec<String> {
        use sqlx::Connection;
        let Ok(mut conn) = sqlx::PgConnection::connect(&self.pg.url()).await else {
            return vec!["(cannot connect)".into()];
        };
        sqlx::query_scalar(
            "SELECT application_name FROM pg_stat_activity WHERE application_name <> ''",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap_or_default()
    }

    /// How many of `node`'s log lines contain `needle`.
    fn log_count(&self, node: usize, needle: &str) -> usize {
        self.nodes[node]
            .log_lines()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    fn stop_postgres(&self) {
        tokio::task::block_in_place(|| self.pg.stop());
    }

    fn restart_postgres(&self) {
        tokio::task::block_in_place(|| self.pg.restart());
    }

    fn start_postgres(&self) {
        tokio::task::block_in_place(|| self.pg.start());
    }
}

/// A status a request may answer while its database is down: 503, never a 500.
fn assert_unavailable(what: &str, got: &Got) {
    assert_ne!(got.status, 500, "{what} answered 500: {}", got.body);
    assert_eq!(
        got.status, 503,
        "{what} while PostgreSQL is down: {}",
        got.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_postgres_restarts_both_instances_recover_without_a_restart() {
    let Some(c) = faulty("faults_pg_restart", 2, "2s").await else {
        return;
    };
    let (slug, token) = c.vend(0, "reviewer").await;
    let mut on_b = c.listen(1, &slug, &token).await;

    let stopped = Instant::now();
    c.stop_postgres();
    // At once: /readyz on both, one API read on A. Their pooled connections
    // died with the server: each request meets that at once.
    let read = format!("/api/v1/endpoints/{slug}");
    let (ready_a, ready_b, read_a) =
        tokio::join!(c.get(0, "/readyz"), c.get(1, "/readyz"), c.get(0, &read));
    assert_unavailable("A's /readyz", &ready_a);
    assert_unavailable("B's /readyz", &ready_b);
    assert_unavailable("GET /api/v1/endpoints/{slug} on A", &read_a);
    assert_eq!(ready_a.body["status"], "unavailable");
    assert_eq!(read_a.body["error"]["code"], "unavailable");
    eprintln!(
        "PostgreSQL just stopped: 503 from /readyz on A after {:?}, on B after {:?}, from the API read after {:?}",
        ready_a.took, ready_b.took, read_a.took
    );
    // Then the same requests again, now that the pools must connect anew
    // (refused): they may answer 503 at once or wait for a connection (up to
    // the pool's acquire timeout, past the restart at 2 s) and answer 200;
    // never a 500.
    let again = async { tokio::join!(c.get(0, "/readyz"), c.get(1, "/readyz"), c.get(0, &read)) };
    let restart = async {
        tokio::time::sleep(Duration::from_secs(2).saturating_sub(stopped.elapsed())).await;
        c.start_postgres();
        stopped.elapsed()
    };
    let ((ready_a, ready_b, read_a), down_for) = tokio::join!(again, restart);
    for (what, got) in [
        ("A's /readyz", &ready_a),
        ("B's /readyz", &ready_b),
        ("the API read on A", &read_a),
    ] {
        assert_ne!(got.status, 500, "{what} answered 500: {}", got.body);
        assert!(
            got.status == 503 || got.status == 200,
            "{what}: {} {}",
            got.status,
            got.body
        );
        eprintln!(
            "PostgreSQL down, pool reconnecting: {what} answered {} after {:?}",
            got.status, got.took
        );
    }

    // Neither process is restarted: each comes back by itself.
    let ready = (
        c.wait_ready(0, Duration::from_secs(30)).await,
        c.wait_ready(1, Duration::from_secs(30)).await,
    );
    // B's listener notices its dead connection (an error, or three silent
    // keepalives) and reconnects.
    let since_start = Instant::now();
    loop {
        let reconnects = c.metric(1, "switchboard_bus_reconnects_total").await;
        if reconnects >= 1.0 && c.metric(1, "switchboard_bus_connected").await == 1.0 {
            break;
        }
        assert!(
            since_start.elapsed() < Duration::from_secs(30),
            "B's listener never reconnected ({reconnects}); sessions on PostgreSQL: {:?}\n{}",
            c.sessions().await,
            c.nodes[1].log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reconnected = since_start.elapsed();
    c.wait_bus_connected(1, Duration::from_secs(5)).await;
    c.wait_bus_connected(0, Duration::from_secs(30)).await;
    eprintln!(
        "down for {down_for:?}; after the start: A ready in {:?}, B ready in {:?}, B's listener reconnected {reconnected:?} after that",
        ready.0, ready.1
    );

    // And the cluster rings again: a todo pushed through A rings B's
    // session (open since before the outage) exactly once.
    let pushed = Instant::now();
    let id = c.push(0, &slug, "after the restart").await;
    let bell = on_b
        .next(Duration::from_secs(5))
        .await
        .unwrap_or_else(|| panic!("no doorbell on B:\n{}", c.nodes[1].log_text()));
    assert_eq!(todo_id(&bell), Some(id.as_str()), "{bell}");
    eprintln!("rang on B {:?} after the push", pushed.elapsed());
    let more = on_b.drain(Duration::from_millis(1_500)).await;
    assert!(more.is_empty(), "rung once, not again: {more:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_todo_created_while_a_listener_was_down_is_rung_once_by_its_catch_up() {
    let Some(c) = faulty_as("faults_catch_up", &["postgres", "b"], "2s").await else {
        return;
    };
    let (slug, token) = c.vend(0, "reviewer").await;
    let mut on_b = c.listen(1, &slug, &token).await;

    // Restart PostgreSQL and create a todo through A as soon as A is ready
    // again, while B's listener is still reconnecting. Left alone, B
    // reconnects within milliseconds of the start (as fast as A), so the
    // window is made certain: B's role may not log in until the todo exists.
    // B cannot hear that todo's NOTIFY; only its catch-up can ring it.
    const RECONNECTED: &str = "bus listener reconnected";
    assert_eq!(c.log_count(1, RECONNECTED), 0);
    c.pg.sql("ALTER ROLE b NOLOGIN").await;
    let stopped = Instant::now();
    c.restart_postgres();
    let restarted = Instant::now();
    eprintln!("PostgreSQL down for {:?}", restarted - stopped);
    c.wait_ready(0, Duration::from_secs(30)).await;
    let id = c.push(0, &slug, "while B was not listening").await;
    let pushed = Instant::now();
    eprintln!(
        "pushed through A {:?} after PostgreSQL started",
        pushed - restarted
    );
    // Let A's publisher send (or drop) the NOTIFY before B may listen
    // again: it does so within milliseconds of the push.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        c.log_count(1, RECONNECTED),
        0,
        "B's listener is still down when the todo is created"
    );
    c.pg.sql("ALTER ROLE b LOGIN").await;
    let allowed = Instant::now();

    // B rings it once, from its catch-up, within one maintenance period of
    // its listener reconnecting.
    let (bell, reconnected) = tokio::join!(on_b.next(Duration::from_secs(20)), async {
        while c.log_count(1, RECONNECTED) == 0 {
            assert!(
                allowed.elapsed() < Duration::from_secs(20),
                "B never reconnected:\n{}",
                c.nodes[1].log_text()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        allowed.elapsed()
    });
    let rang = allowed.elapsed();
    let bell = bell.unwrap_or_else(|| panic!("no doorbell on B:\n{}", c.nodes[1].log_text()));
    assert_eq!(todo_id(&bell), Some(id.as_str()), "{bell}");
    eprintln!(
        "B's logins allowed again; its listener reconnected {reconnected:?} after that, the doorbell came {rang:?} after it"
    );
    assert!(
        rang <= reconnected + Duration::from_secs(2),
        "rung within one maintenance period (2 s) of B reconnecting: rang {rang:?}, reconnected {reconnected:?}"
    );
    // Its catch-up logs what it rang just after ringing.
    let catch_up = loop {
        let lines: Vec<String> = c.nodes[1]
            .log_lines()
            .into_iter()
            .filter(|l| l.contains("bus catch-up done"))
            .collect();
        if !lines.is_empty() || allowed.elapsed() > Duration::from_secs(20) {
            break lines;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        catch_up.last().is_some_and(|l| l.contains("rung=1")),
        "B's catch-up after the reconnect rang it: {catch_up:?}"
    );
    let more = on_b.drain(Duration::from_millis(2_500)).await;
    assert!(more.is_empty(), "rung once, not again: {more:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_held_by_a_killed_instance_is_requeued_by_another_and_claimed_there() {
    let Some(mut c) = faulty("faults_kill_9", 2, "1s").await else {
        return;
    };
    let (slug, token) = c.vend(0, "worker").await;
    let id = c.push(0, &slug, "held by A when it dies").await;
    let on_a = c.mcp(0, &slug, &token);
    let session_a = on_a.initialize().await;
    let claimed = on_a
        .call_ok(&session_a, "claim_next", json!({"lease_ttl_seconds": 2}))
        .await;
    let claimed_at = Instant::now();
    assert_eq!(claimed["todo"]["id"], id, "{claimed}");
    assert_eq!(claimed["attempt_seq"], 1, "{claimed}");

    c.nodes[0].signal("KILL");
    c.nodes[0].wait_exit(Duration::from_secs(10));

    let on_b = c.mcp(1, &slug, &token);
    let session_b = on_b.initialize().await;
    // The lease still holds: nothing to claim yet.
    let early = on_b.call_ok(&session_b, "claim_next", json!({})).await;
    if claimed_at.elapsed() < Duration::from_millis(1_500) {
        assert_eq!(early["empty"], true, "the lease still holds: {early}");
    }
    // After it lapses, B's reaper requeues it and B claims it.
    let again = loop {
        let next = on_b.call_ok(&session_b, "claim_next", json!({})).await;
        if next["empty"] == false {
            break next;
        }
        assert!(
            claimed_at.elapsed() < Duration::from_secs(15),
            "never requeued:\n{}",
            c.nodes[1].log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = claimed_at.elapsed();
    eprintln!("claimed again through B {took:?} after A's claim (lease 2 s, reaper every 1 s)");
    assert_eq!(again["todo"]["id"], id, "{again}");
    assert_eq!(again["attempt_seq"], 2, "the second attempt: {again}");
    assert!(
        took >= Duration::from_millis(1_900),
        "not before the lease lapsed: {took:?}"
    );
    let done = on_b
        .call_ok(&session_b, "complete", json!({"id": id}))
        .await;
    assert_eq!(done["state"], "done", "{done}");
    let view = c
        .api(1, reqwest::Method::GET, &format!("/todos/{id}"), None)
        .await;
    assert_eq!(view["state"], "done", "{view}");
    assert_eq!(view["attempts_total"], 2, "{view}");
}
