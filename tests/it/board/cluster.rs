//! The board across instances on one PostgreSQL database: a sign-in on one
//! instance is a session on every instance (it is an API token), revoking
//! it anywhere ends it everywhere, and a change made through another
//! instance reaches an open board stream without a reload.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::{Board, open_events};
use crate::support::postgres_store;
use crate::support::server::Process;

const FLAGS: [&str; 4] = ["--api-write-rate", "1000", "--api-read-rate", "1000"];

async fn api(
    node: &Process,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let mut request = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .request(method, node.url(&format!("/api/v1{path}")))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    assert!(status.is_success(), "{path}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_board_session_and_its_live_stream_span_instances() {
    let Some(ts) = postgres_store("board_cluster").await else {
        return;
    };
    let url = ts.postgres_url().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--database", url.as_str()];
    args.extend(FLAGS);
    let a = Process::start(dir.path(), &args);
    let admin = a.first_token().expect("the first start's token");
    let b = Process::start(dir.path(), &args);
    let vended = api(
        &b,
        &admin,
        Method::POST,
        "/endpoints",
        Some(json!({ "agent": "alpha" })),
    )
    .await;
    let slug = vended["slug"].as_str().unwrap().to_owned();

    // Signed in on A; the same cookie is a session on B.
    let mut on_a = Board::new(&a.addr);
    on_a.sign_in(&admin).await;
    let mut on_b = Board::new(&b.addr);
    on_b.cookie = on_a.cookie.clone();
    assert_eq!(on_b.get("/").await.status, 200);
    assert!(on_b.get("/").await.body.contains(&slug));

    // A stream on A hears a push and a presence change made through B.
    let mut events = open_events(&on_a).await;
    events
        .expect_changed("connected", Duration::from_secs(5))
        .await;
    api(
        &b,
        &admin,
        Method::POST,
        &format!("/endpoints/{slug}/todos"),
        Some(json!({ "title": "via B" })),
    )
    .await;
    events.expect_changed("todos", Duration::from_secs(8)).await;
    api(
        &b,
        &admin,
        Method::PUT,
        &format!("/endpoints/{slug}/presence"),
        Some(json!({ "presence": "out" })),
    )
    .await;
    events
        .expect_changed("presence", Duration::from_secs(8))
        .await;

    // Signing out on B ends the session on A too, stream and pages.
    let csrf = on_b.csrf().await;
    assert_eq!(
        on_b.post("/board/sign-out", &[("csrf", &csrf)])
            .await
            .status,
        303
    );
    events
        .expect_changed("signed-out", Duration::from_secs(8))
        .await;
    assert_eq!(on_a.get("/").await.status, 303);

    drop((a, b));
    ts.finish().await;
}
