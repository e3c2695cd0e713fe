//! The board's queues page: per endpoint and queue, the live counts and the
//! admission state, and a pause toggle that goes through the admission
//! operation (CSRF-checked, another human's endpoint a 404).

use reqwest::Method;
use serde_json::json;

use super::Board;
use crate::support::api::{Body, HIGH_RATES, Server, make_human, vend};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_page_counts_each_queue_and_pauses_and_resumes_claims() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let ep = vend(
        &server,
        &admin,
        json!({"agent": "q", "queues": ["inbox", "ci"]}),
    )
    .await;
    for (title, queue) in [("a", "inbox"), ("b", "inbox"), ("c", "ci")] {
        server
            .expect(
                201,
                Method::POST,
                &format!("/api/v1/endpoints/{}/todos", ep.slug),
                &admin,
                Body::Json(json!({"title": title, "queue": queue})),
            )
            .await;
    }
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let page = board.get("/board/queues").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let row = |body: &str, queue: &str| {
        let at = body
            .find(&format!(r#"data-queue="{queue}""#))
            .unwrap_or_else(|| panic!("{queue} listed: {body}"));
        body[at..at + body[at..].find("</tr>").unwrap()].to_owned()
    };
    let inbox = row(&page.body, "inbox");
    assert!(inbox.contains(r#"<td class="n">2</td>"#), "{inbox}");
    let whole = row(&page.body, "");
    assert!(whole.contains(r#"<td class="n">3</td>"#), "{whole}");

    let csrf = board.csrf().await;
    let forged = board
        .post(
            &format!("/board/endpoints/{}/admission", ep.slug),
            &[("queue", "ci"), ("paused", "true")],
        )
        .await;
    assert_eq!(forged.status, 403);
    let paused = board
        .post(
            &format!("/board/endpoints/{}/admission", ep.slug),
            &[("queue", "ci"), ("paused", "true"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(paused.status, 303, "{}", paused.body);
    let admission = server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/endpoints/{}/admission", ep.slug),
            &admin,
            Body::None,
        )
        .await;
    assert_eq!(admission["levels"][0]["queue"], "ci");
    assert_eq!(admission["levels"][0]["held"], "paused");
    let page = board.get("/board/queues").await;
    let ci = row(&page.body, "ci");
    assert!(ci.contains("paused") && ci.contains("Resume"), "{ci}");

    let resumed = board
        .post(
            &format!("/board/endpoints/{}/admission", ep.slug),
            &[("queue", "ci"), ("paused", "false"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(resumed.status, 303);
    let admission = server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/endpoints/{}/admission", ep.slug),
            &admin,
            Body::None,
        )
        .await;
    assert_eq!(admission["levels"], json!([]), "open limits leave no row");

    // Another human sees none of it and cannot pause it.
    let bob = make_human(&server, "bob");
    let mut theirs = Board::new(&server.addr);
    theirs.sign_in(&bob.token).await;
    let page = theirs.get("/board/queues").await;
    assert!(!page.body.contains(&ep.slug));
    let csrf = theirs.csrf().await;
    let foreign = theirs
        .post(
            &format!("/board/endpoints/{}/admission", ep.slug),
            &[("paused", "true"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(foreign.status, 404);
}

/// The queue page in Chromium (`tests/board-browser/queues.mjs`): charts
/// that fill in by themselves while an agent works a queue over MCP, the
/// range picker, the push form, light and dark, phone width.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_page_charts_fill_in_live_in_chromium() {
    if !super::browser::browser_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut flags = HIGH_RATES.to_vec();
    flags.extend(["--activity-interval", "200ms"]);
    let server = Server::start(dir.path(), &flags);
    let admin = server.first_token.clone();
    let ep = vend(
        &server,
        &admin,
        json!({"agent": "charted", "queues": ["inbox", "ci"]}),
    )
    .await;
    let board_url = format!("http://{}", server.addr);
    let checks = super::browser::run_scenario(
        "queues.mjs",
        &[
            ("BOARD_URL", board_url.as_str()),
            ("TOKEN", &admin),
            ("SLUG", &ep.slug),
            ("CREDENTIAL", &ep.credential),
        ],
    )
    .await;
    for expected in [
        "sign-in",
        "empty",
        "live-charts",
        "ranges",
        "schemes",
        "push",
        "phone-width",
    ] {
        assert!(
            checks.iter().any(|c| c == expected),
            "{expected} did not run: {checks:?}"
        );
    }
}
