//! Operator actions over the REST API against a real server (`07-operator.md`):
//! a human cancels a todo an agent holds over MCP, and the agent's next call
//! is a `conflict`; bulk bodies are validated by field before anything is
//! written. Tenancy of the new routes is in `security.rs`'s matrices.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::mcp::Server;

#[tokio::test]
async fn a_cancel_takes_the_todo_from_its_holder_and_is_recorded() {
    let server = Server::start(&[]);
    let vended = server.vend(json!({"agent": "worker"})).await;
    let todo = server.push(&vended.slug, "mis-pushed").await;
    let mcp = server.mcp(&vended);
    let session = mcp.initialize().await;
    let claimed = mcp
        .call_ok(&session, "claim", json!({"id": todo, "claimant": "w1"}))
        .await;
    assert_eq!(claimed["state"], "claimed");

    let cancelled = server
        .api(Method::POST, &format!("/api/v1/todos/{todo}/cancel"), None)
        .await;
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert!(
        cancelled["cancelled_by"]
            .as_str()
            .unwrap()
            .starts_with("human:")
    );
    assert_eq!(cancelled["lease_expires_at"], Value::Null);

    // The holder learns it is no longer theirs, as for any lost lease.
    for verb in ["heartbeat", "complete", "fail", "release"] {
        let (code, message) = mcp.call_err(&session, verb, json!({"id": todo})).await;
        assert_eq!(code, "conflict", "{verb}");
        assert!(message.contains("cancelled"), "{verb}: {message}");
    }
    let (code, _) = mcp.call_err(&session, "claim", json!({"id": todo})).await;
    assert_eq!(code, "conflict");

    let detail = server.todo(&todo).await;
    assert_eq!(detail["state"], "cancelled");
    let attempt = &detail["attempts"][0];
    assert_eq!(attempt["outcome"], "cancelled", "{detail}");
    assert_eq!(attempt["disposition"], "cancelled");
    assert_eq!(attempt["claimant"], "w1");
    assert_eq!(attempt["summary"], "cancelled by human admin");

    // A second cancel names the state; a retry brings it back.
    let again = server
        .api_as(
            &server.admin_token,
            Method::POST,
            &format!("/api/v1/todos/{todo}/cancel"),
            None,
            409,
        )
        .await;
    assert_eq!(again["error"]["code"], "conflict");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{again}"
    );
    let listed = server
        .api(Method::GET, "/api/v1/todos?state=cancelled", None)
        .await;
    assert_eq!(listed["todos"].as_array().unwrap().len(), 1);
    let retried = server
        .api(Method::POST, &format!("/api/v1/todos/{todo}/retry"), None)
        .await;
    assert_eq!(retried["state"], "pending");
    assert_eq!(retried["cancelled_by"], Value::Null);
}

#[tokio::test]
async fn bulk_bodies_and_filters_are_checked_by_field_before_anything_is_written() {
    let server = Server::start(&[]);
    let vended = server.vend(json!({"agent": "worker"})).await;
    let todo = server.push(&vended.slug, "stays pending").await;
    let token = server.admin_token.clone();
    let too_many: Vec<String> = (0..1001).map(|i| format!("td_{i}")).collect();
    let cases = [
        ("/api/v1/todos/cancel", json!({"ids": too_many}), "ids"),
        ("/api/v1/todos/retry", json!({"ids": too_many}), "ids"),
        ("/api/v1/todos/cancel", json!({"ids": []}), "ids"),
        (
            "/api/v1/todos/cancel",
            json!({"ids": [todo], "queue": "inbox"}),
            "ids",
        ),
        ("/api/v1/todos/cancel", json!({"state": "dead"}), "state"),
        ("/api/v1/todos/cancel", json!({"state": "done"}), "state"),
        ("/api/v1/todos/retry", json!({"state": "pending"}), "state"),
        ("/api/v1/todos/cancel", json!({"q": ""}), "q"),
        (
            "/api/v1/todos/cancel",
            json!({"dead_letter": "yes"}),
            "dead_letter",
        ),
    ];
    for (path, body, field) in cases {
        let v = server
            .api_as(&token, Method::POST, path, Some(body.clone()), 400)
            .await;
        assert_eq!(v["error"]["code"], "invalid_argument", "{path} {body}: {v}");
        assert_eq!(v["error"]["field"], field, "{path} {body}: {v}");
    }
    let v = server
        .api_as(&token, Method::GET, "/api/v1/todos?q=", None, 400)
        .await;
    assert_eq!(v["error"]["field"], "q");
    let v = server
        .api_as(
            &token,
            Method::POST,
            "/api/v1/todos/cancel",
            Some(json!({"endpoint": "nobody-zzzz"})),
            404,
        )
        .await;
    assert_eq!(v["error"]["code"], "not_found");
    assert_eq!(
        server.todo(&todo).await["state"],
        "pending",
        "nothing written"
    );

    // The bulk paths are not todo ids: GET answers like a missing todo.
    let missing = server
        .api_as(&token, Method::GET, "/api/v1/todos/td_missing", None, 404)
        .await;
    for path in ["/api/v1/todos/retry", "/api/v1/todos/cancel"] {
        let got = server.api_as(&token, Method::GET, path, None, 404).await;
        assert_eq!(got, missing, "{path}");
    }

    // A filter that matches: the count, and nothing beyond it.
    let other = server.push(&vended.slug, "Deploy 100% now").await;
    let done = server
        .api(
            Method::POST,
            "/api/v1/todos/cancel",
            Some(json!({"endpoint": vended.slug, "q": "100%"})),
        )
        .await;
    assert_eq!(done, json!({"count": 1, "more": false, "ids": [other]}));
    assert_eq!(server.todo(&todo).await["state"], "pending");
}
