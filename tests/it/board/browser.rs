//! The board in a real browser: Debian's Chromium driven by
//! `playwright-core` (`tests/board-browser/board.mjs`; no browser download)
//! against the real binary. Skipped when `/usr/bin/chromium` is missing,
//! unless `SWITCHBOARD_REQUIRE_BROWSER` is set (as `.ci/run` does).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::support::api::{Body, HIGH_RATES, Server, claim_next, make_human, open_store, vend};
use crate::support::npm::npm_ci_once;

const CHROMIUM: &str = "/usr/bin/chromium";
/// The whole browser scenario; it takes about 20 s on a quiet machine.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);

fn script_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/board-browser")
}

/// Where the screenshots go (test artifacts, never committed).
fn screenshots_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/board-screenshots")
}

/// Whether the browser tests can run; panics when they must and cannot.
pub(super) fn browser_ready() -> bool {
    let required = std::env::var_os("SWITCHBOARD_REQUIRE_BROWSER").is_some();
    if !Path::new(CHROMIUM).exists() {
        assert!(
            !required,
            "SWITCHBOARD_REQUIRE_BROWSER is set but {CHROMIUM} is missing (apt-get install chromium)"
        );
        crate::support::skips::skipped(
            crate::support::skips::Kind::Browser,
            "board::browser",
            &format!("{CHROMIUM} is missing; apt-get install chromium"),
        );
        return false;
    }
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| npm_ci_once(&script_dir(), "playwright-core/package.json"));
    if let Err(e) = ready {
        panic!("{e}");
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_works_in_chromium() {
    if !browser_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    let todo = server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/todos", alpha.slug),
            &admin,
            Body::Json(json!({
                "title": "Review <b>the</b> deploy",
                "payload": { "diff": "<script>alert(1)</script>", "lines": 42 },
            })),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let bob = make_human(&server, "bob");
    let unheard = fleet(&server, &admin, &alpha.id).await;

    let board_url = format!("http://{}", server.addr);
    let checks = run_scenario(
        "board.mjs",
        &[
            ("BOARD_URL", board_url.as_str()),
            ("TOKEN_A", &admin),
            ("TOKEN_B", &bob.token),
            ("SLUG_A", &alpha.slug),
            ("TODO_A", &todo),
            ("CREDENTIAL_A", &alpha.credential),
            ("BULK", "1"),
            ("SLUG_UNHEARD", &unheard),
        ],
    )
    .await;
    for expected in [
        "sign-in",
        "pages",
        "counts-add-up",
        "unheard",
        "no-wrap",
        "phone-width",
        "times-zoned",
        "vend-once",
        "push-delete",
        "shift-preview",
        "presence-toggle",
        "live-todo",
        "bulk-cancel",
        "csrf",
        "keyboard",
        "no-javascript",
        "isolation",
        "revoked-elsewhere",
        "sign-out",
    ] {
        assert!(
            checks.iter().any(|c| c == expected),
            "{expected} did not run: {checks:?}"
        );
    }

    // What the browser did, seen through the API: its sign-out revoked the
    // board's token, and the presence toggle left the endpoint in.
    let tokens = server
        .expect(200, Method::GET, "/api/v1/tokens", &admin, Body::None)
        .await;
    let board_tokens: Vec<_> = tokens["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["label"] == "board sign-in")
        .collect();
    assert!(!board_tokens.is_empty());
    assert!(
        board_tokens.iter().all(|t| t["revoked_at"].is_string()),
        "{board_tokens:?}"
    );
    for shot in [
        "overview", "endpoint", "todos", "todo", "agents", "tokens", "vend",
    ] {
        for scheme in ["light", "dark"] {
            let file = screenshots_dir().join(format!("{shot}-{scheme}.png"));
            assert!(file.exists(), "{file:?}");
        }
    }
}

/// Runs `tests/board-browser/<script>` in node with `env` (and `SHOTS`,
/// `CHROMIUM`), bounded by [`SCENARIO_TIMEOUT`]; fails unless it exits 0
/// with a JSON summary `{"ok": true, "checks": [...]}` as its last line.
/// Returns the checks it ran.
pub(super) async fn run_scenario(script: &str, env: &[(&str, &str)]) -> Vec<String> {
    let mut command = Command::new("node");
    command
        .arg(script_dir().join(script))
        .env("SHOTS", screenshots_dir())
        .env("CHROMIUM", CHROMIUM)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("run node");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > SCENARIO_TIMEOUT {
            let _ = child.kill();
            panic!("{script} took longer than {SCENARIO_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "{script} failed:\n{stdout}\n{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("a JSON summary");
    assert_eq!(summary["ok"], true);
    summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

/// A few more endpoints, so that the overview shows the conditions an
/// operator meets (and its screenshot, `docs/img/board-overview.png`, does):
/// alpha seen (idle), `builder` working on a claim, `nightly` off under an
/// override, `scout` never seen (unknown), `reviewer` silent for hours (stale),
/// `mailer` seen, with pending work and no session (unheard, not idle); a
/// failed todo of `builder` waits for its retry. Returns `mailer`'s slug.
async fn fleet(server: &Server, admin: &str, alpha_id: &str) -> String {
    use switchboard::store::prelude::*;
    let builder = vend(server, admin, json!({ "agent": "builder", "kind": "task" })).await;
    let nightly = vend(
        server,
        admin,
        json!({ "agent": "nightly", "kind": "heartbeat" }),
    )
    .await;
    vend(server, admin, json!({ "agent": "scout" })).await;
    let reviewer = vend(
        server,
        admin,
        json!({ "agent": "reviewer", "kind": "heartbeat" }),
    )
    .await;
    for title in [
        "Bump the lockfile",
        "Triage flaky test",
        "Rebase the branch",
    ] {
        server
            .expect(
                201,
                Method::POST,
                &format!("/api/v1/endpoints/{}/todos", builder.slug),
                admin,
                Body::Json(json!({ "title": title })),
            )
            .await;
    }
    claim_next(&server.database, &builder.id, true).await;
    claim_next(&server.database, &builder.id, false).await;
    // Delayed: counted on its own, not claimable for two hours.
    server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/todos", builder.slug),
            admin,
            Body::Json(json!({ "title": "Release notes", "delay": "2h" })),
        )
        .await;
    let mailer = vend(server, admin, json!({ "agent": "mailer" })).await;
    server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/todos", mailer.slug),
            admin,
            Body::Json(json!({ "title": "Send the weekly digest" })),
        )
        .await;
    server
        .expect(
            200,
            Method::PUT,
            &format!("/api/v1/endpoints/{}/presence", nightly.slug),
            admin,
            Body::Json(json!({ "presence": "out" })),
        )
        .await;
    server
        .expect(
            200,
            Method::PUT,
            &format!("/api/v1/endpoints/{}/shift", nightly.slug),
            admin,
            Body::Json(json!({ "shift": "TZ=Europe/Berlin Mon-Sun 22:00-06:00" })),
        )
        .await;
    let store = open_store(&server.database).await;
    let now = store.clock().now();
    for id in [
        alpha_id,
        builder.id.as_str(),
        nightly.id.as_str(),
        mailer.id.as_str(),
    ] {
        store
            .stamp_endpoint_seen(id, now, Some(now.add_secs(-2)))
            .await
            .unwrap();
    }
    // Not heard from for three hours: stale.
    let long_ago = now.add_secs(-3 * 3600);
    store
        .stamp_endpoint_seen(&reviewer.id, long_ago, Some(long_ago))
        .await
        .unwrap();
    store.close().await;
    mailer.slug
}
