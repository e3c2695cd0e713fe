//! Two real instances on one PostgreSQL database: a code issued through
//! one is redeemed through the other, and a connection revoked through one
//! stops working on the other at once (the bus empties its credential
//! cache), not after the cache's age bound.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::*;
use crate::board::Board;
use crate::support::postgres_store;
use crate::support::server::Process;

const FLAGS: [&str; 6] = [
    "--api-write-rate",
    "1000",
    "--api-read-rate",
    "1000",
    "--bus-keepalive",
    "1s",
];

/// Waits until `node`'s `/readyz` says its bus is connected.
async fn bus_connected(node: &Process) {
    let http = crate::support::mcp::client();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let ready: Value = http
            .get(node.url("/readyz"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap_or(Value::Null);
        if ready["bus"] == "connected" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the bus never connected: {ready}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_revoked_on_one_instance_is_refused_at_once_on_another() {
    let Some(ts) = postgres_store("oauth_cluster_revoke").await else {
        return;
    };
    let url = ts.postgres_url().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--database", url.as_str()];
    args.extend(FLAGS);
    let a = Process::start(dir.path(), &args);
    let admin = a.first_token().expect("the first start's token");
    let b = Process::start(dir.path(), &args);
    bus_connected(&a).await;
    bus_connected(&b).await;

    let http = crate::support::mcp::client();
    let vended: Value = http
        .post(a.url("/api/v1/endpoints"))
        .bearer_auth(&admin)
        .json(&serde_json::json!({"agent": "chat"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let slug = vended["slug"].as_str().unwrap().to_owned();
    let mut board = Board::new(&a.addr);
    board.sign_in(&admin).await;
    let client = register(&a, &[REDIRECT]).await;
    let resource = a.url(&format!("/mcp/{slug}"));
    let code = code_for(&board, &Authorize::new(&client, &resource)).await;
    // Redeemed through the other instance: the ledger is the database.
    let tokens = redeem(&b, &client, &code).await;
    let access = tokens["access_token"].as_str().unwrap();
    for _ in 0..3 {
        assert_eq!(mcp_status(&b, &slug, access).await, 200, "cached on B now");
    }

    let listed: Value = http
        .get(a.url(&format!("/api/v1/endpoints/{slug}/oauth-clients")))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = listed["oauth_clients"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let revoked_at = Instant::now();
    let status = http
        .delete(a.url(&format!("/api/v1/endpoints/{slug}/oauth-clients/{id}")))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 204);
    let refused_after = loop {
        match mcp_status(&b, &slug, access).await {
            401 => break revoked_at.elapsed(),
            200 => {}
            other => panic!("B answered {other}"),
        }
        assert!(
            revoked_at.elapsed() < Duration::from_secs(5),
            "B never refused the revoked token"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        refused_after < Duration::from_millis(1000),
        "B refused the revoked token only after {refused_after:?}: the bus did not empty its cache"
    );
    drop((a, b));
    ts.finish().await;
}
