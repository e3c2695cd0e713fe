//! The consequences of a write are decided once, in `src/ops/`: whichever
//! surface made the change (the REST API or the board), the same people
//! are told and the same counters move. Each test makes the change through
//! both surfaces and asserts the consequence after each.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::board::Board;
use crate::support::mcp::{Server, next_event};

const WITHIN: Duration = Duration::from_secs(5);

fn is_doorbell_for(v: &Value, todo: &str) -> bool {
    v["method"] == "notifications/claude/channel" && v["params"]["meta"]["todo_id"] == todo
}

fn is_tools_changed(v: &Value) -> bool {
    v["method"] == "notifications/tools/list_changed"
}

async fn signed_in_board(server: &Server) -> (Board, String) {
    let mut board = Board::new(&server.addr);
    board.sign_in(&server.admin_token).await;
    let csrf = board.csrf().await;
    (board, csrf)
}

/// A sample of the `/metrics` exposition, e.g.
/// `switchboard_todo_actions_total{action="retry"}`.
async fn sample(server: &Server, series: &str) -> f64 {
    crate::support::metric(&server.http, &server.url("/metrics"), series).await
}

/// Three todos, one per surface: the hub shields one todo from ringing
/// twice for one trigger within 5 s (a bus echo), so each retry here is of
/// a todo of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_retry_rings_at_once_from_the_api_the_board_and_in_bulk() {
    let server = Server::start(&[]);
    let vended = server.vend(json!({"agent": "worker"})).await;
    let mcp = server.mcp(&vended);
    let session = mcp.initialize().await;
    let mut stream = mcp.open_stream(&session).await;
    let mut todos = Vec::new();
    for title in ["via the API", "via the board", "in bulk"] {
        let todo = server.push(&vended.slug, title).await;
        assert!(
            next_event(&mut stream, WITHIN, |v| is_doorbell_for(v, &todo))
                .await
                .is_some(),
            "the push rings"
        );
        server
            .api(Method::POST, &format!("/api/v1/todos/{todo}/cancel"), None)
            .await;
        todos.push(todo);
    }
    let (board, csrf) = signed_in_board(&server).await;

    let retried = server
        .api(
            Method::POST,
            &format!("/api/v1/todos/{}/retry", todos[0]),
            None,
        )
        .await;
    assert_eq!(retried["state"], "pending", "{retried}");
    assert!(
        next_event(&mut stream, WITHIN, |v| is_doorbell_for(v, &todos[0]))
            .await
            .is_some(),
        "a retry through the API rings at once"
    );

    let page = board
        .post(
            &format!("/board/todos/{}/retry", todos[1]),
            &[("csrf", &csrf)],
        )
        .await;
    assert!(
        page.location.as_deref().unwrap_or("").contains("notice="),
        "{:?}",
        page.location
    );
    assert!(
        next_event(&mut stream, WITHIN, |v| is_doorbell_for(v, &todos[1]))
            .await
            .is_some(),
        "a retry on the board rings at once"
    );

    let bulk = server
        .api(
            Method::POST,
            "/api/v1/todos/retry",
            Some(json!({"ids": [todos[2]]})),
        )
        .await;
    assert_eq!(bulk["ids"], json!([todos[2]]), "{bulk}");
    assert!(
        next_event(&mut stream, WITHIN, |v| is_doorbell_for(v, &todos[2]))
            .await
            .is_some(),
        "a bulk retry rings the todos it retried"
    );
    for (action, n) in [("retry", 3.0), ("cancel", 3.0)] {
        let series = format!(r#"switchboard_todo_actions_total{{action="{action}"}}"#);
        assert_eq!(sample(&server, &series).await, n, "{action}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_counts_alike_from_the_api_and_the_board() {
    let server = Server::start(&[]);
    let vended = server.vend(json!({"agent": "worker"})).await;
    let mcp = server.mcp(&vended);
    let session = mcp.initialize().await;
    let (board, csrf) = signed_in_board(&server).await;
    let released = r#"switchboard_attempts_finished_total{outcome="released"}"#;
    let by_human = r#"switchboard_todo_actions_total{action="release"}"#;
    assert_eq!(sample(&server, released).await, 0.0);

    let todo = server.push(&vended.slug, "held too long").await;
    mcp.call_ok(&session, "claim", json!({"id": todo})).await;
    server
        .api(Method::POST, &format!("/api/v1/todos/{todo}/release"), None)
        .await;
    assert_eq!(sample(&server, released).await, 1.0, "the API's release");
    assert_eq!(sample(&server, by_human).await, 1.0);

    mcp.call_ok(&session, "claim", json!({"id": todo})).await;
    let page = board
        .post(&format!("/board/todos/{todo}/release"), &[("csrf", &csrf)])
        .await;
    assert_eq!(page.status, 303);
    assert!(
        page.location.as_deref().unwrap_or("").contains("notice="),
        "{:?}",
        page.location
    );
    assert_eq!(sample(&server, released).await, 2.0, "the board's release");
    assert_eq!(sample(&server, by_human).await, 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_lease_change_from_the_api_or_the_board_tells_the_sessions() {
    let server = Server::start(&[]);
    let vended = server.vend(json!({"agent": "worker"})).await;
    let mcp = server.mcp(&vended);
    let session = mcp.initialize().await;
    let mut stream = mcp.open_stream(&session).await;
    let (board, csrf) = signed_in_board(&server).await;

    server
        .api(
            Method::PATCH,
            &format!("/api/v1/endpoints/{}", vended.slug),
            Some(json!({"default_lease_ttl_seconds": 120})),
        )
        .await;
    assert!(
        next_event(&mut stream, WITHIN, is_tools_changed)
            .await
            .is_some(),
        "a change through the API tells the session"
    );

    let page = board
        .post(
            &format!("/board/endpoints/{}/lease", vended.slug),
            &[("csrf", &csrf), ("default_lease_ttl_seconds", "900")],
        )
        .await;
    assert_eq!(page.status, 303);
    assert!(
        next_event(&mut stream, WITHIN, is_tools_changed)
            .await
            .is_some(),
        "a change on the board tells the session"
    );
    // The session reads the new lease at once (no cached endpoint row).
    let list = mcp
        .rpc(&session, 9, "tools/list", json!({}))
        .await
        .json()
        .to_string();
    assert!(list.contains("900"), "tools/list quotes the new lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_reads_the_same_on_the_api_mcp_and_the_board() {
    let server = Server::start(&[]);
    let vended = server.vend(json!({"agent": "worker"})).await;
    let mcp = server.mcp(&vended);
    let session = mcp.initialize().await;
    let (board, csrf) = signed_in_board(&server).await;
    let todo = server.push(&vended.slug, "done soon").await;
    mcp.call_ok(&session, "claim", json!({"id": todo})).await;
    mcp.call_ok(&session, "complete", json!({"id": todo})).await;

    // Releasing a done todo: a conflict, with one text everywhere.
    let api = server
        .api_as(
            &server.admin_token,
            Method::POST,
            &format!("/api/v1/todos/{todo}/release"),
            None,
            409,
        )
        .await;
    let message = api["error"]["message"].as_str().unwrap().to_owned();
    assert_eq!(api["error"]["code"], "conflict");
    let (code, text) = mcp.call_err(&session, "release", json!({"id": todo})).await;
    assert_eq!(code, "conflict");
    let page = board
        .post(&format!("/board/todos/{todo}/release"), &[("csrf", &csrf)])
        .await;
    let location = page.location.unwrap_or_default();
    let shown: String = url_decoded(location.split("error=").nth(1).unwrap_or(""));
    assert!(message.contains("done"), "{message}");
    assert_eq!(text, message, "MCP gives the API's text");
    assert_eq!(shown, message, "the board shows the API's text");

    // A missing todo: `not found` on every surface.
    let missing = "td_00000000000000000000000000";
    let api = server
        .api_as(
            &server.admin_token,
            Method::POST,
            &format!("/api/v1/todos/{missing}/retry"),
            None,
            404,
        )
        .await;
    assert_eq!(api["error"]["message"], "not found");
    let (code, text) = mcp
        .call_err(&session, "get_todo", json!({"id": missing}))
        .await;
    assert_eq!((code.as_str(), text.as_str()), ("not_found", "not found"));
}

fn url_decoded(text: &str) -> String {
    let text = text.split('&').next().unwrap_or("");
    serde_urlencoded::from_str::<Vec<(String, String)>>(&format!("e={text}"))
        .ok()
        .and_then(|pairs| pairs.into_iter().next())
        .map(|(_, v)| v)
        .unwrap_or_default()
}
