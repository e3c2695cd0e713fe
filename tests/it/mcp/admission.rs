//! Admission and priority end to end (`02-queue.md`, "Priority, delay,
//! schedules and admission"): a human pauses or limits claims over the API,
//! the agent's `claim_next` answers empty with the reason, `claim(id)` is
//! refused naming it, nothing rings while paused, and resuming sends one
//! digest; pushes with a priority are claimed first.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::mcp::listener::Listener;
use crate::support::mcp::{self, Server};

async fn metric(server: &Server, series: &str) -> f64 {
    crate::support::metric_or_zero(&server.http, &server.url("/metrics"), series).await
}

async fn set_admission(server: &Server, slug: &str, queue: Option<&str>, body: Value) -> Value {
    let path = match queue {
        Some(q) => format!("/api/v1/endpoints/{slug}/queues/{q}/admission"),
        None => format!("/api/v1/endpoints/{slug}/admission"),
    };
    server.api(Method::PUT, &path, Some(body)).await
}

#[tokio::test]
async fn a_paused_endpoint_answers_empty_with_the_reason_and_resuming_lets_claims_through() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let id = server.push(&ep.slug, "waits").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;

    let set = set_admission(&server, &ep.slug, None, json!({"paused": true})).await;
    assert_eq!(set["levels"][0]["held"], "paused", "{set}");
    let held_before = metric(&server, r#"switchboard_claims_held_total{reason="paused"}"#).await;

    let empty = mcp.call_ok(&session, "claim_next", json!({})).await;
    assert_eq!(empty, json!({"empty": true, "held": "paused"}));
    let (code, message) = mcp.call_err(&session, "claim", json!({"id": id})).await;
    assert_eq!(code, "conflict");
    assert_eq!(message, "claims are held (paused)");
    assert_eq!(
        metric(&server, r#"switchboard_claims_held_total{reason="paused"}"#).await,
        held_before + 1.0
    );

    set_admission(&server, &ep.slug, None, json!({})).await;
    let claimed = mcp.call_ok(&session, "claim_next", json!({})).await;
    assert_eq!(claimed["todo"]["id"], id, "{claimed}");
}

#[tokio::test]
async fn a_spent_window_says_when_it_reopens_and_a_queue_limit_leaves_the_others_open() {
    let server = Server::start(&[]);
    let ep = server
        .vend(json!({"agent": "a", "queues": ["inbox", "ci"]}))
        .await;
    for title in ["one", "two"] {
        server
            .api(
                Method::POST,
                &format!("/api/v1/endpoints/{}/todos", ep.slug),
                Some(json!({"title": title, "queue": "ci"})),
            )
            .await;
    }
    let inbox = server
        .api(
            Method::POST,
            &format!("/api/v1/endpoints/{}/todos", ep.slug),
            Some(json!({"title": "inbox work", "queue": "inbox"})),
        )
        .await["id"]
        .clone();
    set_admission(
        &server,
        &ep.slug,
        Some("ci"),
        json!({"window": "1h", "max_claims_per_window": 1}),
    )
    .await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;

    let first = mcp
        .call_ok(&session, "claim_next", json!({"queue": "ci"}))
        .await;
    assert_eq!(first["todo"]["queue"], "ci");
    let spent = mcp
        .call_ok(&session, "claim_next", json!({"queue": "ci"}))
        .await;
    assert_eq!(spent["empty"], true);
    assert_eq!(spent["held"], "window_budget");
    let until = spent["until"].as_str().expect("a window reopens");
    assert!(until.ends_with('Z'), "{spent}");
    // The other queue is not held.
    let other = mcp.call_ok(&session, "claim_next", json!({})).await;
    assert_eq!(other["todo"]["id"], inbox);
    let shown = server
        .api(
            Method::GET,
            &format!("/api/v1/endpoints/{}/admission", ep.slug),
            None,
        )
        .await;
    let ci = &shown["levels"][0];
    assert_eq!(ci["queue"], "ci");
    assert_eq!(ci["window_claims"], 1);
    assert_eq!(ci["held"], "window_budget");
    assert_eq!(ci["until"], until);
}

#[tokio::test]
async fn nothing_rings_while_paused_and_resuming_sends_one_digest() {
    mcp::listener::node_ready();
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mut listener = Listener::start(&ep, 1).await;
    set_admission(&server, &ep.slug, None, json!({"paused": true})).await;
    for n in 0..3 {
        server.push(&ep.slug, &format!("held {n}")).await;
    }
    listener
        .assert_silent(Duration::from_millis(1500), "a paused endpoint's pushes")
        .await;

    set_admission(&server, &ep.slug, None, json!({})).await;
    let bell = listener
        .one(Duration::from_secs(10), "the resume digest")
        .await;
    assert!(bell.is_digest(), "{:?}", bell.meta);
    assert_eq!(bell.meta_str("reason"), Some("resumed"), "{:?}", bell.meta);
    listener
        .assert_silent(
            Duration::from_millis(500),
            "one digest, not a ring per todo",
        )
        .await;
    listener.close().await;
}

#[tokio::test]
async fn the_highest_priority_is_claimed_first_and_an_operator_can_change_it() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let push = |title: &'static str, priority: i64| {
        let server = &server;
        let slug = ep.slug.clone();
        async move {
            server
                .api(
                    Method::POST,
                    &format!("/api/v1/endpoints/{slug}/todos"),
                    Some(json!({"title": title, "priority": priority})),
                )
                .await["id"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let routine = push("routine", 0).await;
    let urgent = push("urgent", 10).await;
    let later = push("later", 0).await;
    let edited = server
        .api(
            Method::PATCH,
            &format!("/api/v1/todos/{later}"),
            Some(json!({"priority": 20})),
        )
        .await;
    assert_eq!(edited["priority"], 20);

    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let mut order = Vec::new();
    for _ in 0..3 {
        let claimed = mcp.call_ok(&session, "claim_next", json!({})).await;
        order.push(claimed["todo"]["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(order, [later, urgent, routine]);
}

#[tokio::test]
async fn a_delayed_push_is_neither_claimable_nor_rung_until_its_time_then_rings_once() {
    mcp::listener::node_ready();
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mut listener = Listener::start(&ep, 1).await;
    let pushed = server
        .api(
            Method::POST,
            &format!("/api/v1/endpoints/{}/todos", ep.slug),
            Some(json!({"title": "later", "delay": "2s"})),
        )
        .await;
    assert_eq!(pushed["state"], "delayed", "{pushed}");
    let id = pushed["id"].as_str().unwrap().to_owned();
    let shown = server.todo(&id).await;
    assert!(shown["run_at"].is_string(), "{shown}");
    let endpoint = server.endpoint(&ep.slug).await;
    assert_eq!(endpoint["todos"]["delayed"], 1, "{endpoint}");
    assert_eq!(endpoint["todos"]["pending"], 0, "{endpoint}");
    assert_eq!(endpoint["todos"]["oldest_pending_age_seconds"], Value::Null);

    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let empty = mcp.call_ok(&session, "claim_next", json!({})).await;
    assert_eq!(empty, json!({"empty": true}));
    listener
        .assert_silent(
            Duration::from_millis(1200),
            "a delayed todo before its time",
        )
        .await;

    let bell = listener
        .one(Duration::from_secs(10), "the ring when it comes due")
        .await;
    assert_eq!(bell.todo_id(), Some(id.as_str()), "{:?}", bell.meta);
    let claimed = mcp.call_ok(&session, "claim_next", json!({})).await;
    assert_eq!(claimed["todo"]["id"], id);
    listener
        .assert_silent(Duration::from_millis(500), "one ring")
        .await;
    listener.close().await;

    let refused = server
        .http
        .post(server.url(&format!("/api/v1/endpoints/{}/todos", ep.slug)))
        .bearer_auth(&server.admin_token)
        .json(&json!({"title": "x", "delay": "1h", "run_at": "2030-01-01T00:00:00Z"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"]["field"], "delay", "{refused}");
}

#[tokio::test]
async fn a_queue_resumed_under_a_paused_endpoint_sends_no_digest_until_the_endpoint_resumes() {
    mcp::listener::node_ready();
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mut listener = Listener::start(&ep, 1).await;
    set_admission(&server, &ep.slug, None, json!({"paused": true})).await;
    set_admission(&server, &ep.slug, Some("inbox"), json!({"paused": true})).await;
    server.push(&ep.slug, "held twice").await;

    set_admission(&server, &ep.slug, Some("inbox"), json!({})).await;
    listener
        .assert_silent(
            Duration::from_millis(1000),
            "a queue resumed while its endpoint is paused",
        )
        .await;
    set_admission(&server, &ep.slug, None, json!({})).await;
    let bell = listener
        .one(Duration::from_secs(10), "the endpoint's resume digest")
        .await;
    assert_eq!(bell.meta_str("reason"), Some("resumed"), "{:?}", bell.meta);
    listener.close().await;
}
