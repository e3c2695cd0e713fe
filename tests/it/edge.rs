//! The edge of the whole router, over real HTTP: the `Host`/`Origin` guard
//! on every route of a loopback server (`--allowed-host` to add names),
//! client addresses behind `--trusted-proxy` (intake's per-IP buckets),
//! `X-Request-Id`, and the access log of the real binary in JSON.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::mcp::{Server, client, initialize_body};
use switchboard::http::ratelimit::Rate;

use crate::support::server::{BIN, InProcess, Process, serve_command};

/// A webhook URL of a fresh endpoint (queue `inbox`).
async fn webhook_url(server: &Server) -> String {
    let endpoint = server
        .api(
            Method::POST,
            "/api/v1/endpoints",
            Some(json!({"agent": "edge-hook", "queues": ["inbox"]})),
        )
        .await;
    let slug = endpoint["slug"].as_str().unwrap();
    let hook = server
        .api(
            Method::POST,
            &format!("/api/v1/endpoints/{slug}/webhooks"),
            Some(json!({"queue": "inbox"})),
        )
        .await;
    hook["ingest_url"].as_str().unwrap().to_owned()
}

/// One request with a chosen `Host` (and `Origin`); the status and body.
async fn with_host(
    method: Method,
    url: &str,
    host: &str,
    origin: Option<&str>,
    authorization: Option<&str>,
    body: Option<String>,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut request = client().request(method, url).header("Host", host);
    if let Some(origin) = origin {
        request = request.header("Origin", origin);
    }
    if let Some(authorization) = authorization {
        request = request.header("Authorization", authorization);
    }
    if let Some(body) = body {
        request = request
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::Null),
        headers,
    )
}

#[tokio::test]
async fn every_route_refuses_a_foreign_host_and_origin_on_loopback() {
    let server = Server::start(&["--allowed-host", "switchboard.test"]);
    let port = server.addr.rsplit_once(':').unwrap().1.to_owned();
    let ep = server.vend(json!({"agent": "edge"})).await;
    let hook = webhook_url(&server).await;
    let bearer = format!("Bearer {}", server.admin_token);
    let routes: Vec<(Method, String, Option<&str>, Option<String>)> = vec![
        (Method::GET, server.url("/metrics"), None, None),
        (Method::GET, server.url("/readyz"), None, None),
        (Method::GET, server.url("/healthz"), None, None),
        (
            Method::GET,
            server.url("/api/v1/me"),
            Some(bearer.as_str()),
            None,
        ),
        (Method::POST, hook.clone(), None, Some("{}".to_owned())),
        (
            Method::POST,
            ep.mcp_url.clone(),
            Some(ep.authorization.as_str()),
            Some(initialize_body(1).to_string()),
        ),
        (Method::GET, server.url("/no/such/route"), None, None),
    ];
    for (method, url, authorization, body) in &routes {
        for host in ["evil.example.com", "evil.example.com:80", "10.1.2.3"] {
            let (status, answer, headers) = with_host(
                method.clone(),
                url,
                host,
                None,
                *authorization,
                body.clone(),
            )
            .await;
            assert_eq!(status, 403, "{method} {url} Host {host}: {answer}");
            assert_eq!(answer["error"]["code"], "forbidden", "{answer}");
            assert_eq!(answer["error"]["field"], "host", "{answer}");
            assert_eq!(headers["x-content-type-options"], "nosniff");
            assert_eq!(headers["cache-control"], "no-store");
        }
        for host in [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
            "switchboard.test".to_owned(),
            format!("SwitchBoard.test:{port}"),
        ] {
            let (status, answer, _) = with_host(
                method.clone(),
                url,
                &host,
                None,
                *authorization,
                body.clone(),
            )
            .await;
            assert_ne!(status, 403, "{method} {url} Host {host}: {answer}");
            assert!(
                status < 500,
                "{method} {url} Host {host}: {status} {answer}"
            );
        }
        let good_host = format!("127.0.0.1:{port}");
        let (status, answer, _) = with_host(
            method.clone(),
            url,
            &good_host,
            Some("http://evil.example.com"),
            *authorization,
            body.clone(),
        )
        .await;
        assert_eq!(
            status, 403,
            "{method} {url} with a foreign Origin: {answer}"
        );
        assert_eq!(answer["error"]["field"], "origin", "{answer}");
        for origin in ["http://switchboard.test", "http://localhost:5173"] {
            let (status, answer, _) = with_host(
                method.clone(),
                url,
                &good_host,
                Some(origin),
                *authorization,
                body.clone(),
            )
            .await;
            assert_ne!(status, 403, "{method} {url} Origin {origin}: {answer}");
        }
    }
    // A refusal is counted like any answer, by route template.
    let refused = crate::support::metric(
        &client(),
        &server.url("/metrics"),
        r#"switchboard_http_requests_total{route="/readyz",status="403"}"#,
    )
    .await;
    assert_eq!(refused, 4.0);
}

/// Deliveries to an unknown webhook token from `127.0.0.1`, claiming to
/// forward for `forwarded_for`: the status of each.
async fn deliveries(server: &InProcess, forwarded_for: &str, n: usize) -> Vec<u16> {
    let mut statuses = Vec::new();
    for _ in 0..n {
        let response = client()
            .post(server.url("/webhooks/w/whk_not_a_real_token_0000000000"))
            .header("X-Forwarded-For", forwarded_for)
            .body("{}")
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    statuses
}

/// A server whose intake allows a burst of 2 per client and (practically)
/// never refills, trusting these proxies.
fn intake_server(dir: &std::path::Path, trusted: &[&str]) -> InProcess {
    let mut config = InProcess::config(&dir.join("switchboard.db"));
    config.api_rates.intake = Rate::new(0.0001, 2.0);
    config.trusted_proxies = trusted.iter().map(|c| c.parse().unwrap()).collect();
    InProcess::start(config)
}

#[tokio::test]
async fn forwarding_headers_count_only_from_a_trusted_proxy() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let untrusted = intake_server(a.path(), &[]);
    assert_eq!(deliveries(&untrusted, "198.51.100.1", 2).await, [404, 404]);
    assert_eq!(
        deliveries(&untrusted, "198.51.100.2", 1).await,
        [429],
        "a spoofed X-Forwarded-For from an untrusted peer is ignored: one bucket"
    );

    let trusted = intake_server(b.path(), &["127.0.0.1/32"]);
    assert_eq!(
        deliveries(&trusted, "198.51.100.1", 3).await,
        [404, 404, 429]
    );
    assert_eq!(
        deliveries(&trusted, "203.0.113.7, 198.51.100.2", 2).await,
        [404, 404],
        "another client behind the proxy has a bucket of its own"
    );
    assert_eq!(deliveries(&trusted, "198.51.100.2", 1).await, [429]);
}

#[tokio::test]
async fn a_sane_request_id_is_echoed_and_others_are_replaced() {
    let server = Server::start(&[]);
    let url = server.url("/healthz");
    let echoed = client()
        .get(&url)
        .header("X-Request-Id", "trace-42.a_b-c")
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "trace-42.a_b-c");
    for insane in ["has space", "quote\"d", &"x".repeat(65)] {
        let replaced = client()
            .get(&url)
            .header("X-Request-Id", insane)
            .send()
            .await
            .unwrap();
        let id = replaced.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_ne!(id, insane);
        assert_eq!(id.len(), 36, "a UUID: {id}");
    }
    let minted = client().get(&url).send().await.unwrap();
    let a = minted.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let again = client().get(&url).send().await.unwrap();
    assert_ne!(a, again.headers()["x-request-id"].to_str().unwrap());
}

/// The JSON object of every stderr line: in `--log-format json` every line
/// is one (the first start's token goes to a file, not a banner).
fn json_lines(process: &Process) -> Vec<Value> {
    process
        .log_lines()
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

fn access_line(process: &Process, request_id: &str) -> Option<Value> {
    json_lines(process)
        .into_iter()
        .find(|v| v["target"] == "switchboard::access" && v["request_id"] == request_id)
}

#[tokio::test]
async fn the_access_log_names_route_templates_and_request_ids_never_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let process = Process::start(dir.path(), &["--log-format", "json"]);
    let token = process
        .first_token()
        .expect("the first start prints a token");
    let http = client();
    let endpoint: Value = http
        .post(process.url("/api/v1/endpoints"))
        .bearer_auth(&token)
        .json(&json!({"agent": "logged", "queues": ["inbox"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let slug = endpoint["slug"].as_str().unwrap();
    let hook: Value = http
        .post(process.url(&format!("/api/v1/endpoints/{slug}/webhooks")))
        .bearer_auth(&token)
        .json(&json!({"queue": "inbox"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ingest = hook["ingest_url"].as_str().unwrap().to_owned();
    let url_token = ingest.rsplit('/').next().unwrap().to_owned();

    let delivered = http
        .post(&ingest)
        .header("X-Request-Id", "edge-delivery-1")
        .header("Content-Type", "application/json")
        .body(r#"{"title": "logged delivery"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(delivered.status().as_u16(), 202);
    assert_eq!(delivered.headers()["x-request-id"], "edge-delivery-1");
    let missing = http
        .get(process.url("/no/such/thing"))
        .send()
        .await
        .unwrap();
    let minted = missing.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();

    let deadline = Instant::now() + Duration::from_secs(10);
    let (delivery, unmatched) = loop {
        if let (Some(a), Some(b)) = (
            access_line(&process, "edge-delivery-1"),
            access_line(&process, &minted),
        ) {
            break (a, b);
        }
        assert!(
            Instant::now() < deadline,
            "no access lines:\n{}",
            process.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(delivery["message"], "request", "{delivery}");
    assert_eq!(delivery["level"], "INFO");
    assert_eq!(delivery["method"], "POST");
    assert_eq!(delivery["route"], "/webhooks/w/{token}");
    assert_eq!(delivery["status"], 202);
    assert_eq!(delivery["client"], "127.0.0.1");
    assert!(
        delivery["duration_ms"].as_f64().is_some_and(|ms| ms >= 0.0),
        "{delivery}"
    );
    assert_eq!(
        delivery["span"]["request_id"], "edge-delivery-1",
        "{delivery}"
    );
    assert_eq!(unmatched["route"], "<unmatched>");
    assert_eq!(unmatched["status"], 404);

    let lines = json_lines(&process);
    let handled = lines
        .iter()
        .find(|v| v["message"] == "webhook delivery")
        .unwrap_or_else(|| panic!("no intake line:\n{}", process.log_text()));
    assert_eq!(
        handled["span"]["request_id"], "edge-delivery-1",
        "a handler's own line carries the request id: {handled}"
    );
    assert!(
        lines.iter().all(|v| v["message"].is_string()),
        "a top-level message everywhere"
    );
    let text = process.log_text();
    assert!(
        !text.contains(&url_token),
        "the webhook token is in the log:\n{text}"
    );
    assert!(
        !text.contains("/no/such/thing"),
        "a raw path is in the log:\n{text}"
    );
}

#[tokio::test]
async fn the_binary_reads_allowed_hosts_and_trusted_proxies_from_its_environment() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = serve_command(dir.path());
    command
        .env("SWITCHBOARD_ALLOWED_HOSTS", "a.test,.corp.example")
        .env("SWITCHBOARD_TRUSTED_PROXIES", "10.0.0.0/8,127.0.0.1");
    let process = Process::spawn(command);
    let url = process.url("/healthz");
    for (host, expected) in [("a.test", 200), ("x.corp.example:80", 200), ("b.test", 403)] {
        let (status, answer, _) = with_host(Method::GET, &url, host, None, None, None).await;
        assert_eq!(status, expected, "Host {host}: {answer}");
    }
    client()
        .get(&url)
        .header("X-Request-Id", "forwarded-1")
        .header("X-Forwarded-For", "192.0.2.44")
        .send()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let line = loop {
        if let Some(line) = process
            .log_lines()
            .into_iter()
            .find(|l| l.contains("request_id=forwarded-1") && l.contains("switchboard::access"))
        {
            break line;
        }
        assert!(Instant::now() < deadline, "{}", process.log_text());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(line.contains("client=192.0.2.44"), "{line}");
    assert!(line.contains("route=/healthz status=200"), "{line}");
}

#[test]
fn a_bad_allowed_host_stops_serve_before_the_database_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let out = serve_command(dir.path())
        .args(["--allowed-host", "http://a.test/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--allowed-host \"http://a.test/\""),
        "{stderr}"
    );
    assert!(
        !dir.path().join("switchboard.db").exists(),
        "nothing written"
    );
    let out = serve_command(dir.path())
        .args(["--trusted-proxy", "10.0.0.0/33"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error: {out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--trusted-proxy"));
}

/// `serve` on a pseudo-terminal (util-linux `script`) for a moment: what it wrote.
fn on_a_terminal(dir: &std::path::Path, no_color: Option<&str>) -> Option<String> {
    let script = ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())?;
    let mut command = std::process::Command::new(script);
    command
        .current_dir(dir)
        .args([
            "-qec",
            &format!("{BIN} serve --listen 127.0.0.1:0 --shutdown-grace 1s"),
            "/dev/null",
        ])
        .env_remove("SWITCHBOARD_LOG_FORMAT")
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .env("SWITCHBOARD_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    match no_color {
        Some(value) => command.env("NO_COLOR", value),
        None => command.env_remove("NO_COLOR"),
    };
    let mut child = command.stderr(std::process::Stdio::null()).spawn().ok()?;
    // Read until the server says it is serving (bounded), then SIGTERM it.
    let stdout = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let mut stdout = std::io::BufReader::new(stdout);
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut stdout, &mut line).is_ok_and(|n| n > 0) {
            text.push_str(&line);
            if line.contains("switchboard is serving") {
                let _ = tx.send(());
            }
            line.clear();
        }
        text
    });
    let served = rx.recv_timeout(Duration::from_secs(30)).is_ok();
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
    let text = reader.join().ok()?;
    assert!(served, "the server did not start on the terminal:\n{text}");
    Some(text)
}

#[test]
fn no_color_turns_colours_off_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let Some(coloured) = on_a_terminal(dir.path(), None) else {
        crate::support::skips::skipped(
            crate::support::skips::Kind::Terminal,
            "no_color_turns_colours_off_on_a_terminal",
            "no `script` to make a terminal",
        );
        return;
    };
    assert!(coloured.contains("switchboard is serving"), "{coloured}");
    assert!(
        coloured.contains("\u{1b}["),
        "colours on a terminal:\n{coloured}"
    );
    let dir = tempfile::tempdir().unwrap();
    let plain = on_a_terminal(dir.path(), Some("1")).unwrap();
    assert!(plain.contains("switchboard is serving"), "{plain}");
    assert!(!plain.contains("\u{1b}["), "NO_COLOR=1:\n{plain}");
}
