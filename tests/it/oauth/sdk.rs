//! The MCP TypeScript SDK's OAuth client provider end to end against the
//! real binary (`tests/mcp-client/oauth.mjs`): discovery from a 401, DCR,
//! authorization with PKCE through a signed-in board session, the token
//! endpoint, tool calls (claim_next, complete), refresh rotation; then the
//! human revokes the connection and its token stops working.

use std::process::Command;

use reqwest::Method;
use serde_json::{Value, json};

use super::{connections, mcp_status};
use crate::board::Board;
use crate::support::api::{Body, HIGH_RATES, Server, push, vend};
use crate::support::mcp::listener::{client_dir, node_ready};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdks_oauth_provider_connects_works_refreshes_and_is_revoked() {
    node_ready();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let ep = vend(&server, &admin, json!({"agent": "chat"})).await;
    let todo = push(&server, &admin, &ep.slug, "answer over OAuth").await;
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let cookie = board.cookie.clone().unwrap();

    let mcp_url = server.url(&format!("/mcp/{}", ep.slug));
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .current_dir(client_dir())
            .args(["oauth.mjs", &mcp_url, &cookie])
            .output()
            .expect("spawn node")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "oauth.mjs failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(result["todo"], todo.as_str());
    assert!(
        result["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "claim_next"),
        "{result}"
    );
    let done = server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/todos/{todo}"),
            &admin,
            Body::None,
        )
        .await;
    assert_eq!(done["state"], "done", "{done}");

    // Listed on the endpoint, with its last use; revoked, it stops at once.
    let listed = connections(&server, &admin, &ep.slug).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["client_id"], result["client_id"]);
    assert_eq!(listed[0]["client_name"], "SDK end-to-end");
    assert!(listed[0]["last_used_at"].is_string());
    let page = board.get(&format!("/board/endpoints/{}", ep.slug)).await;
    assert!(page.body.contains("SDK end-to-end"), "{}", page.body);
    let access = result["access_token"].as_str().unwrap();
    assert_eq!(mcp_status(&server, &ep.slug, access).await, 200);
    let id = listed[0]["id"].as_str().unwrap();
    // The CLI lists it too.
    let table = cli(&server, &admin, &["endpoint", "oauth-clients", &ep.slug]);
    for shown in ["SDK end-to-end", id, "no"] {
        assert!(table.contains(shown), "{shown}: {table}");
    }
    let csrf = crate::board::csrf_of(&page.body);
    let revoked = board
        .post(
            &format!("/board/endpoints/{}/oauth-clients/{id}/revoke", ep.slug),
            &[("csrf", csrf.as_str())],
        )
        .await;
    assert_eq!(revoked.status, 303, "{}", revoked.body);
    assert_eq!(mcp_status(&server, &ep.slug, access).await, 401);
    assert!(connections(&server, &admin, &ep.slug).await.is_empty());
    let table = cli(&server, &admin, &["endpoint", "oauth-clients", &ep.slug]);
    assert!(table.contains("No OAuth clients are connected."), "{table}");
    let refused = std::process::Command::new(crate::support::server::BIN)
        .args(["endpoint", "oauth-revoke", &ep.slug, id])
        .env("SWITCHBOARD_URL", server.url(""))
        .env("SWITCHBOARD_TOKEN", &admin)
        .output()
        .unwrap();
    assert!(!refused.status.success(), "revoked already");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("already revoked"),
        "{refused:?}"
    );
}

/// `switchboard ARGS` against the server as `token`: its stdout.
fn cli(server: &Server, token: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(crate::support::server::BIN)
        .args(args)
        .env("SWITCHBOARD_URL", server.url(""))
        .env("SWITCHBOARD_TOKEN", token)
        .output()
        .unwrap();
    assert!(out.status.success(), "switchboard {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
