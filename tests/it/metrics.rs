//! `GET /metrics` on the real binary: every family is exposed, a pushed todo
//! and its dropped doorbell are counted, requests are counted by route
//! template, no label carries an id, a token, a slug or a title, and the
//! optional scrape token guards the endpoint.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::server::{Process, serve_command};

const FAMILIES: [&str; 9] = [
    "switchboard_doorbells_rung",
    "switchboard_doorbells_dropped",
    "switchboard_sessions",
    "switchboard_todos",
    "switchboard_dead_letters",
    "switchboard_oldest_pending_age_seconds",
    "switchboard_endpoints",
    "switchboard_lease_expiries",
    "switchboard_http_requests",
];

/// A `switchboard serve` child on an OS-chosen port, with the first-start
/// token it printed on stderr.
struct Server {
    _process: Process,
    url: String,
    first_token: String,
}

impl Server {
    fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut command = serve_command(dir);
        command.args(args);
        for (key, value) in env {
            command.env(key, value);
        }
        let process = Process::spawn(command);
        Server {
            url: format!("http://{}", process.addr),
            first_token: process.first_token().expect("first start prints a token"),
            _process: process,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    async fn api(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = reqwest::Client::new()
            .request(method, self.url(path))
            .bearer_auth(&self.first_token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `GET /metrics`, with an `Authorization` header when given.
    async fn scrape(&self, authorization: Option<&str>) -> (u16, Option<String>, String) {
        let mut request = reqwest::Client::new().get(self.url("/metrics"));
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let response = request.send().await.expect("scrape");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        (status, content_type, response.text().await.unwrap())
    }
}

/// Every `(name, value)` label pair of every sample line.
fn label_pairs(exposition: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for line in exposition.lines().filter(|l| !l.starts_with('#')) {
        let Some(open) = line.find('{') else { continue };
        let close = line.rfind('}').expect("a closed label set");
        for pair in line[open + 1..close].split("\",") {
            let (name, value) = pair.split_once("=\"").expect("name=\"value\"");
            pairs.push((name.to_owned(), value.trim_end_matches('"').to_owned()));
        }
    }
    pairs
}

fn assert_families(exposition: &str) {
    for family in FAMILIES {
        assert!(
            exposition
                .lines()
                .any(|l| l.starts_with(&format!("# TYPE {family} "))),
            "{family} is missing:\n{exposition}"
        );
    }
}

#[tokio::test]
async fn scrape_exposes_every_family_and_counts_a_pushed_todo_without_leaking_ids() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[], &[]);

    let (status, content_type, first) = server.scrape(None).await;
    assert_eq!(status, 200, "open without a scrape token: {first}");
    assert!(
        content_type
            .as_deref()
            .is_some_and(|c| c.starts_with("application/openmetrics-text")),
        "{content_type:?}"
    );
    assert_families(&first);
    assert!(first.contains("switchboard_todos{state=\"pending\"} 0"));
    assert!(first.ends_with("# EOF\n"));

    let (status, vended) = server
        .api(
            reqwest::Method::POST,
            "/api/v1/endpoints",
            Some(json!({"agent": "metrics-probe"})),
        )
        .await;
    assert_eq!(status, 201, "{vended}");
    let slug = vended["slug"].as_str().unwrap().to_owned();
    let endpoint_id = vended["id"].as_str().unwrap().to_owned();
    let credential = vended["token"].as_str().unwrap().to_owned();
    assert!(credential.starts_with("sbk_"));

    let title = "Rotate the staging keys";
    let (status, pushed) = server
        .api(
            reqwest::Method::POST,
            &format!("/api/v1/endpoints/{slug}/todos"),
            Some(json!({"title": title})),
        )
        .await;
    assert_eq!(status, 201, "{pushed}");
    let todo_id = pushed["id"].as_str().unwrap().to_owned();
    assert!(todo_id.starts_with("td_"));
    let (status, _) = server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/endpoints/{endpoint_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    // Raw paths that match no route, carrying ids.
    let (status, _) = server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/nothing/{slug}/{todo_id}"),
            None,
        )
        .await;
    assert_eq!(status, 404);
    let missing = reqwest::get(server.url(&format!("/no/such/{endpoint_id}")))
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);

    let (status, _, body) = server.scrape(None).await;
    assert_eq!(status, 200);
    assert_families(&body);
    for expected in [
        "switchboard_todos{state=\"pending\"} 1",
        "switchboard_todos{state=\"done\"} 0",
        "switchboard_dead_letters 0",
        // No session is attached, so the new todo's doorbell was dropped.
        "switchboard_doorbells_dropped_total{reason=\"no_session\"} 1",
        "switchboard_doorbells_rung_total{kind=\"todo\",trigger=\"created\"} 0",
        "switchboard_sessions{state=\"attached\"} 0",
        // Never connected yet.
        "switchboard_endpoints{condition=\"unknown\"} 1",
        "switchboard_lease_expiries_total 0",
        "switchboard_http_requests_total{route=\"/api/v1/endpoints\",status=\"201\"} 1",
        "switchboard_http_requests_total{route=\"/api/v1/endpoints/{reference}/todos\",status=\"201\"} 1",
        "switchboard_http_requests_total{route=\"/api/v1/endpoints/{reference}\",status=\"200\"} 1",
        "switchboard_http_requests_total{route=\"/metrics\",status=\"200\"} 1",
    ] {
        assert!(body.contains(expected), "{expected} is missing:\n{body}");
    }
    assert!(
        body.lines()
            .any(|l| l.starts_with("switchboard_oldest_pending_age_seconds ")),
        "{body}"
    );

    let pairs = label_pairs(&body);
    assert!(!pairs.is_empty());
    for (name, value) in &pairs {
        for secret in [
            "sbh_",
            "sbk_",
            "td_",
            "ep_",
            slug.as_str(),
            endpoint_id.as_str(),
            todo_id.as_str(),
            title,
        ] {
            assert!(
                !value.contains(secret),
                "label {name}={value:?} carries {secret:?}"
            );
        }
        if name == "route" {
            assert!(
                value == "unmatched" || value.starts_with('/'),
                "a route label is a template or unmatched: {value}"
            );
        }
    }
    assert!(
        pairs
            .iter()
            .any(|(name, value)| name == "route" && value == "unmatched"),
        "unmatched requests are counted as such:\n{body}"
    );
    for leak in [
        server.first_token.as_str(),
        credential.as_str(),
        slug.as_str(),
        endpoint_id.as_str(),
        todo_id.as_str(),
        title,
    ] {
        assert!(!body.contains(leak), "the exposition carries {leak:?}");
    }
}

#[tokio::test]
async fn a_scrape_token_guards_metrics_by_flag_or_environment() {
    let dir = tempfile::tempdir().unwrap();
    let by_flag = Server::start(dir.path(), &["--metrics-token", "scrape-me-42"], &[]);
    let dir2 = tempfile::tempdir().unwrap();
    let by_env = Server::start(
        dir2.path(),
        &[],
        &[("SWITCHBOARD_METRICS_TOKEN", "scrape-me-42")],
    );
    for server in [&by_flag, &by_env] {
        let (status, _, body) = server.scrape(None).await;
        assert_eq!(status, 401, "{body}");
        assert!(!body.contains("switchboard_"));
        for wrong in [
            "Bearer scrape-me-4",
            "Bearer scrape-me-42x",
            "scrape-me-42",
            "Basic scrape-me-42",
        ] {
            let (status, _, _) = server.scrape(Some(wrong)).await;
            assert_eq!(status, 401, "{wrong}");
        }
        // A human API token is not a scrape token.
        let human = format!("Bearer {}", server.first_token);
        assert_eq!(server.scrape(Some(&human)).await.0, 401);

        let (status, _, body) = server.scrape(Some("Bearer scrape-me-42")).await;
        assert_eq!(status, 200, "{body}");
        assert_families(&body);
        assert!(
            body.contains("switchboard_http_requests_total{route=\"/metrics\",status=\"401\"} 6"),
            "refused scrapes are counted:\n{body}"
        );
        assert!(!body.contains("scrape-me-42"));
    }
}

/// The value of the sample line `series` (name and labels, exactly).
fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.parse().expect("a sample value"))
}

#[tokio::test]
async fn throughput_latency_build_and_process_families_move_with_their_events() {
    use crate::support::mcp::{Server as McpServer, client};

    let server = McpServer::start(&[]);
    let scrape = || async {
        let response = client().get(server.url("/metrics")).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response.text().await.unwrap()
    };
    let before = scrape().await;
    let build = format!(
        "switchboard_build_info{{version=\"{}\",schema=\"",
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        before
            .lines()
            .any(|l| l.starts_with(&build) && l.ends_with("\"} 1")),
        "{before}"
    );
    for outcome in ["completed", "failed", "dead_letter", "released", "expired"] {
        let series = format!("switchboard_attempts_finished_total{{outcome=\"{outcome}\"}}");
        assert_eq!(sample(&before, &series), Some(0.0), "{series}:\n{before}");
    }
    for mode in ["operator", "token", "signed"] {
        let series = format!("switchboard_todos_created_total{{trust_mode=\"{mode}\"}}");
        assert_eq!(sample(&before, &series), Some(0.0), "{series}");
    }
    assert_eq!(
        sample(&before, "switchboard_doorbell_write_seconds_count"),
        Some(0.0)
    );
    for (series, at_least) in [
        ("process_cpu_seconds_total", 0.0),
        ("process_resident_memory_bytes", 1.0),
        ("process_open_fds", 1.0),
        ("process_max_fds", 1.0),
        ("process_start_time_seconds", 1.0e9),
    ] {
        let value = sample(&before, series).unwrap_or_else(|| panic!("{series}:\n{before}"));
        assert!(value >= at_least, "{series} {value}");
    }
    assert!(
        before.ends_with("# EOF\n"),
        "process_* come before the end marker"
    );

    // An attached session hears every push (held until its stream opens).
    let ep = server.vend(json!({"agent": "counted"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    for title in ["complete me", "fail me", "release me"] {
        server.push(&ep.slug, title).await;
    }
    for verb in ["complete", "fail", "release"] {
        let claimed = mcp.call_ok(&session, "claim_next", json!({})).await;
        let id = claimed["todo"]["id"]
            .as_str()
            .expect("a claimed todo")
            .to_owned();
        mcp.call_ok(&session, verb, json!({"id": id})).await;
    }
    let hooked = server
        .api(
            reqwest::Method::POST,
            "/api/v1/endpoints",
            Some(json!({"agent": "hooked", "queues": ["inbox"]})),
        )
        .await;
    let hook = server
        .api(
            reqwest::Method::POST,
            &format!(
                "/api/v1/endpoints/{}/webhooks",
                hooked["slug"].as_str().unwrap()
            ),
            Some(json!({"queue": "inbox"})),
        )
        .await;
    let delivered = client()
        .post(hook["ingest_url"].as_str().unwrap())
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(delivered.status().as_u16(), 202);

    let after = scrape().await;
    for (series, expected) in [
        (
            "switchboard_attempts_finished_total{outcome=\"completed\"}",
            1.0,
        ),
        (
            "switchboard_attempts_finished_total{outcome=\"failed\"}",
            1.0,
        ),
        (
            "switchboard_attempts_finished_total{outcome=\"released\"}",
            1.0,
        ),
        (
            "switchboard_attempts_finished_total{outcome=\"dead_letter\"}",
            0.0,
        ),
        (
            "switchboard_todos_created_total{trust_mode=\"operator\"}",
            3.0,
        ),
        ("switchboard_todos_created_total{trust_mode=\"token\"}", 1.0),
        ("switchboard_doorbell_write_seconds_count", 3.0),
        (
            "switchboard_http_request_duration_seconds_count{route=\"/api/v1/endpoints/{reference}/todos\",method=\"POST\",status=\"2xx\"}",
            3.0,
        ),
        (
            "switchboard_http_request_duration_seconds_count{route=\"/mcp/{slug}\",method=\"POST\",status=\"2xx\"}",
            8.0,
        ),
    ] {
        assert_eq!(sample(&after, series), Some(expected), "{series}:\n{after}");
    }
    assert!(
        after.contains(
            "switchboard_http_request_duration_seconds_bucket{le=\"10.0\",route=\"/metrics\",method=\"GET\",status=\"2xx\"} 1"
        ),
        "{after}"
    );
}
