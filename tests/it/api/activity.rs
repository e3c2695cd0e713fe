//! `GET /api/v1/endpoints/{ref}/activity` (`docs/api.md`): the numbers the
//! board's queue charts draw, from what the operations counted and an
//! instance wrote down; bad ranges and queues refused by field. Tenancy is
//! in `security.rs`'s matrices.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::mcp::Server;

/// Reads the activity until `done` holds (the server writes it down every
/// 100 ms here), at most 10 s.
async fn activity_until(server: &Server, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let view = server.api(Method::GET, path, None).await;
        if done(&view) {
            return view;
        }
        assert!(Instant::now() < deadline, "{path} never got there: {view}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_activity_counts_what_an_agent_did_per_interval() {
    let server = Server::start(&["--activity-interval", "100ms"]);
    let vended = server
        .vend(json!({"agent": "charted", "queues": ["inbox", "ci"]}))
        .await;
    let ep = format!("/api/v1/endpoints/{}", vended.slug);
    for (title, queue) in [("a", "inbox"), ("b", "inbox"), ("c", "ci")] {
        server
            .api(
                Method::POST,
                &format!("{ep}/todos"),
                Some(json!({"title": title, "queue": queue})),
            )
            .await;
    }
    let mcp = server.mcp(&vended);
    let session = mcp.initialize().await;
    let claimed = mcp
        .call_ok(&session, "claim_next", json!({"queue": "inbox"}))
        .await;
    let id = claimed["todo"]["id"].as_str().unwrap().to_owned();
    mcp.call_ok(&session, "complete", json!({"id": id})).await;

    let inbox = activity_until(&server, &format!("{ep}/activity?queue=inbox"), |v| {
        v["totals"]["completed"] == 1
    })
    .await;
    assert_eq!(inbox["range"], "hour");
    assert_eq!(inbox["bucket_seconds"], 60);
    assert_eq!(inbox["queue"], "inbox");
    assert_eq!(inbox["buckets"].as_array().unwrap().len(), 60);
    let totals = &inbox["totals"];
    assert_eq!(totals["created"], 2, "{inbox}");
    assert_eq!(totals["failed"], 0);
    assert!(totals["claim_p50_ms"].as_i64().unwrap() >= 1, "{totals}");
    assert!(totals["complete_p95_ms"].as_i64().unwrap() >= 1, "{totals}");
    let busy: Vec<&Value> = inbox["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["created"].as_u64().unwrap() > 0)
        .collect();
    assert!(!busy.is_empty() && busy.len() <= 2, "{inbox}");

    let week = activity_until(&server, &format!("{ep}/activity?range=week"), |v| {
        v["totals"]["created"] == 3
    })
    .await;
    assert_eq!(week["queue"], Value::Null);
    assert_eq!(week["bucket_seconds"], 3_600);
    assert_eq!(week["buckets"].as_array().unwrap().len(), 168);

    for (query, field) in [
        ("range=month", "range"),
        ("queue=nope", "queue"),
        ("since=1", "since"),
    ] {
        let refused = server
            .http
            .get(server.url(&format!("{ep}/activity?{query}")))
            .bearer_auth(&server.admin_token)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status().as_u16(), 400, "{query}");
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["field"], field, "{query}: {body}");
    }
}
