//! Credentials never reach the logs (`09-quality.md`, Security): a full
//! scenario against the real binary at `SWITCHBOARD_LOG=debug`, once with
//! text logs and once with `--log-format json`, then every secret the
//! scenario created (every `sbh_` and `sbk_` token, webhook URL tokens,
//! signing secrets) is searched for in everything the processes wrote on
//! stderr. The first-start token included: stderr is a pipe here, so the
//! server writes it to a 0600 file and logs only the file's path (a banner
//! is for a terminal only, `tests/it/bootstrap.rs`).

use crate::support::api;

use api::{Body, Server, create_token, find_token, make_human, push, vend};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    Text,
    Json,
}

/// What the scenario made that must stay secret, with a label for messages.
#[derive(Default)]
struct Secrets(Vec<(String, String)>);

impl Secrets {
    fn add(&mut self, label: &str, secret: &str) {
        assert!(secret.len() >= 16, "{label}: {secret:?} is no secret");
        self.0.push((label.to_owned(), secret.to_owned()));
    }
}

/// The secret part of an ingest URL `…/webhooks/w/{token}`.
fn url_token(ingest_url: &str) -> String {
    ingest_url
        .rsplit_once("/webhooks/w/")
        .expect("an ingest URL")
        .1
        .to_owned()
}

/// HMAC-SHA256 (RFC 2104), as a webhook sender computes it.
fn hmac_sha256_hex(key: &[u8], message: &[u8]) -> String {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

/// Everything a human and an agent would do, collecting the secrets.
async fn scenario(server: &Server, secrets: &mut Secrets) -> String {
    let admin = server.first_token.clone();
    let me = server
        .expect(200, Method::GET, "/api/v1/me", &admin, Body::None)
        .await;
    assert_eq!(me["name"], "admin");

    // Tokens: a second human's through the local admin path, more through the API.
    let bea = make_human(server, "bea");
    secrets.add("bea's admin-made token", &bea.token);
    let (labelled, _, _) = create_token(server, &admin, json!({ "label": "laptop" })).await;
    secrets.add("a labelled token", &labelled);
    let (expiring, _, _) = create_token(server, &admin, json!({ "expires_in": "30d" })).await;
    secrets.add("an expiring token", &expiring);
    let (doomed, doomed_id, _) = create_token(server, &bea.token, json!({})).await;
    secrets.add("a token revoked later", &doomed);
    server
        .expect(200, Method::GET, "/api/v1/tokens", &labelled, Body::None)
        .await;

    // Endpoints with webhooks, one signed.
    let plain = vend(
        server,
        &admin,
        json!({ "agent": "reviewer", "kind": "task", "webhook": true, "expires_in": "30d" }),
    )
    .await;
    secrets.add("a vended credential", &plain.credential);
    let plain_url = plain.ingest_url.clone().expect("vended with a webhook");
    secrets.add("a vend's webhook URL token", &url_token(&plain_url));
    let other = vend(
        server,
        &bea.token,
        json!({ "agent": "builder", "queues": ["builds", "inbox"] }),
    )
    .await;
    secrets.add("another vended credential", &other.credential);
    let signed = server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/webhooks", other.slug),
            &bea.token,
            Body::Json(json!({ "queue": "builds", "signed": true })),
        )
        .await;
    let signed_id = signed["id"].as_str().unwrap().to_owned();
    let signed_url = signed["ingest_url"].as_str().unwrap().to_owned();
    let secret = signed["signing_secret"].as_str().unwrap().to_owned();
    secrets.add("a signed webhook's URL token", &url_token(&signed_url));
    secrets.add("a signing secret", &secret);

    // Deliveries: token webhook, signed webhook (good and bad signatures).
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let body = br#"{"action":"opened","number":7}"#.to_vec();
    let signature = format!("sha256={}", hmac_sha256_hex(secret.as_bytes(), &body));
    for (url, signature) in [
        (&plain_url, None),
        (&signed_url, Some(signature.as_str())),
        (&signed_url, Some("sha256=00")),
        (&signed_url, None),
    ] {
        let mut req = http
            .post(url.as_str())
            .header("Content-Type", "application/json")
            .header("X-GitHub-Event", "pull_request")
            .body(body.clone());
        if let Some(signature) = signature {
            req = req.header("X-Hub-Signature-256", signature);
        }
        // Whatever the intake answers (only the logs matter here), short of a 5xx.
        let resp = req.send().await.expect("delivery");
        assert!(
            !resp.status().is_server_error(),
            "delivery: {}",
            resp.status()
        );
    }

    // The agent side: the credential on /mcp, and refused on /api.
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "secrecy-test", "version": "1" }
        }
    });
    for credential in [&plain.credential, &other.credential] {
        let resp = http
            .post(server.url(&format!("/mcp/{}", plain.slug)))
            .header("Authorization", format!("Bearer {credential}"))
            .header("Accept", "application/json, text/event-stream")
            .json(&initialize)
            .send()
            .await
            .expect("mcp request");
        assert!(!resp.status().is_server_error(), "mcp: {}", resp.status());
        let refused = server
            .call(Method::GET, "/api/v1/me", credential, Body::None)
            .await;
        assert_eq!(refused.status, 401);
    }
    // A human token on /mcp is refused too.
    http.post(server.url(&format!("/mcp/{}", plain.slug)))
        .header("Authorization", format!("Bearer {admin}"))
        .json(&initialize)
        .send()
        .await
        .expect("mcp request");

    // Todos, a rotation, revocations.
    let todo = push(server, &admin, &plain.slug, "review #7").await;
    server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/todos/{todo}/event"),
            &admin,
            Body::None,
        )
        .await;
    let rotated = server
        .expect(
            200,
            Method::POST,
            &format!("/api/v1/webhooks/{signed_id}/rotate"),
            &bea.token,
            Body::None,
        )
        .await;
    let rotated_url = rotated["ingest_url"].as_str().unwrap();
    secrets.add("a rotated URL token", &url_token(rotated_url));
    secrets.add(
        "a rotated signing secret",
        rotated["signing_secret"].as_str().unwrap(),
    );
    // The old URL is dead now; deliver to it anyway.
    http.post(signed_url.as_str())
        .header("Content-Type", "application/json")
        .body(body.clone())
        .send()
        .await
        .expect("delivery");
    let resp = server
        .call(
            Method::DELETE,
            &format!("/api/v1/tokens/{doomed_id}"),
            &bea.token,
            Body::None,
        )
        .await;
    assert_eq!(resp.status, 204);
    // The revoked token, and tokens that never existed, are refused.
    for auth in [
        format!("Bearer {doomed}"),
        format!("Bearer sbh_{}", "Q".repeat(43)),
        format!("Bearer {}", plain.credential),
    ] {
        let resp = server
            .send(Method::GET, "/api/v1/me", Some(&auth), Body::None)
            .await;
        assert_eq!(resp.status, 401);
    }
    server
        .expect(
            200,
            Method::POST,
            &format!("/api/v1/endpoints/{}/revoke", plain.slug),
            &admin,
            Body::None,
        )
        .await;
    // A revoked credential on /mcp.
    http.post(server.url(&format!("/mcp/{}", plain.slug)))
        .header("Authorization", format!("Bearer {}", plain.credential))
        .json(&initialize)
        .send()
        .await
        .expect("mcp request");
    bea.stderr
}

/// Runs the scenario on a fresh server and checks its stderr.
async fn check(format: Format) {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = api::HIGH_RATES.to_vec();
    if format == Format::Json {
        args.extend(["--log-format", "json"]);
    }
    let mut server = Server::start_with_env(dir.path(), &args, &[("SWITCHBOARD_LOG", "debug")]);
    let mut secrets = Secrets::default();
    let admin_stderr = scenario(&server, &mut secrets).await;
    assert!(server.stop().success(), "a clean exit");
    let lines = server.stderr_lines();
    let first = server.first_token.clone();

    assert!(
        server.token_file_logged(),
        "the first-start token file's path is logged"
    );
    for line in &lines {
        assert!(
            !line.contains(&first),
            "the first-start token appears on stderr ({format:?}): {line}"
        );
        if let Some(token) = find_token(line, "sbh_") {
            panic!("an sbh_ token ({token}) in a log line: {line}");
        }
        if let Some(token) = find_token(line, "sbk_") {
            panic!("an sbk_ credential ({token}) in a log line: {line}");
        }
        for (label, secret) in &secrets.0 {
            assert!(
                !line.contains(secret.as_str()),
                "{label} appears in a log line ({format:?}): {line}"
            );
        }
    }
    // The local admin commands' own logs keep the secrets out too.
    for (label, secret) in &secrets.0 {
        assert!(
            !admin_stderr.contains(secret.as_str()),
            "{label} appears in the admin commands' stderr: {admin_stderr}"
        );
    }

    // The run really logged, at debug, in the asked format.
    let log_lines: Vec<&String> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(_, l)| l)
        .collect();
    assert!(log_lines.len() >= 5, "{log_lines:?}");
    for line in &log_lines {
        assert!(
            is_log_line(line, format),
            "not a {format:?} log line: {line}"
        );
    }
    let debug = log_lines.iter().any(|l| match format {
        Format::Text => l.contains("DEBUG"),
        Format::Json => serde_json::from_str::<Value>(l).is_ok_and(|v| v["level"] == "DEBUG"),
    });
    assert!(debug, "SWITCHBOARD_LOG=debug shows debug lines");
}

/// A line the logger wrote: JSON objects in JSON mode; in text mode a
/// timestamp and a level first.
fn is_log_line(line: &str, format: Format) -> bool {
    match format {
        Format::Json => serde_json::from_str::<Value>(line).is_ok_and(|v| v.is_object()),
        Format::Text => {
            let mut words = line.split_whitespace();
            let stamp = words.next().unwrap_or("");
            let level = words.next().unwrap_or("");
            stamp.len() >= 20
                && stamp.as_bytes()[4] == b'-'
                && ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"].contains(&level)
        }
    }
}

#[tokio::test]
async fn no_secret_reaches_the_text_logs_at_debug() {
    check(Format::Text).await;
}

#[tokio::test]
async fn no_secret_reaches_the_json_logs_at_debug() {
    check(Format::Json).await;
}
