//! Clients known by a Client ID Metadata Document: fetched (and cached)
//! when they ask for authorization, shown as verified, and refused when the
//! document redirects, is too large, names another client, or lives at a
//! private address the server may not dial.

use std::net::SocketAddr;

use axum::Router;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use serde_json::json;

use super::*;
use crate::support::api::{HIGH_RATES, Server, vend};

/// A metadata server on loopback: `/client.json` (good), `/redirect.json`,
/// `/big.json`, `/mismatch.json`.
async fn metadata_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let own = format!("http://{addr}/client.json");
    let app = Router::new()
        .route(
            "/client.json",
            get(move || {
                let own = own.clone();
                async move {
                    axum::Json(json!({
                        "client_id": own,
                        "client_name": "Doc client",
                        "redirect_uris": [REDIRECT],
                        "grant_types": ["authorization_code", "refresh_token"],
                        "token_endpoint_auth_method": "none",
                    }))
                }
            }),
        )
        .route(
            "/redirect.json",
            get(|| async { Redirect::temporary("/client.json") }),
        )
        .route(
            "/big.json",
            get(move || async move {
                axum::Json(json!({
                    "client_id": format!("http://{addr}/big.json"),
                    "redirect_uris": [REDIRECT],
                    "client_name": "x".repeat(6 * 1024),
                }))
                .into_response()
            }),
        )
        .route(
            "/mismatch.json",
            get(|| async {
                axum::Json(json!({
                    "client_id": "https://someone.else/client.json",
                    "redirect_uris": [REDIRECT],
                }))
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_document_client_is_fetched_verified_and_refused_when_unfit() {
    let docs = metadata_server().await;
    let dir = tempfile::tempdir().unwrap();
    let mut args = HIGH_RATES.to_vec();
    args.push("--allow-private-client-metadata");
    let server = Server::start(dir.path(), &args);
    let admin = server.first_token.clone();
    let ep = vend(&server, &admin, json!({"agent": "chat"})).await;
    let resource = server.url(&format!("/mcp/{}", ep.slug));
    let mut board = crate::board::Board::new(&server.addr);
    board.sign_in(&admin).await;

    let client = format!("http://{docs}/client.json");
    let request = Authorize::new(&client, &resource);
    let page = board.get(&request.path()).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Doc client"));
    assert!(page.body.contains("oauth-verified"), "{}", page.body);
    let code = code_for(&board, &request).await;
    let tokens = redeem(&server, &client, &code).await;
    assert_eq!(
        mcp_status(&server, &ep.slug, tokens["access_token"].as_str().unwrap()).await,
        200
    );
    let listed = connections(&server, &admin, &ep.slug).await;
    assert_eq!(listed[0]["verified"], true);
    assert_eq!(listed[0]["client_name"], "Doc client");

    for (path, why) in [
        ("/redirect.json", "redirects"),
        ("/big.json", "larger than 5120 bytes"),
        ("/mismatch.json", "not its own URL"),
        ("/missing.json", "answered 404"),
    ] {
        let client = format!("http://{docs}{path}");
        let page = board.get(&Authorize::new(&client, &resource).path()).await;
        assert_eq!(page.status, 400, "{path}: {}", page.body);
        assert!(page.body.contains(why), "{path}: {}", page.body);
        assert_eq!(page.location, None, "never redirected");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_document_at_a_private_address_is_never_fetched_by_default() {
    let docs = metadata_server().await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let ep = vend(&server, &admin, json!({"agent": "chat"})).await;
    let resource = server.url(&format!("/mcp/{}", ep.slug));
    let mut board = crate::board::Board::new(&server.addr);
    board.sign_in(&admin).await;
    let port = docs.port();
    for (client, why) in [
        (
            format!("http://127.0.0.1:{port}/client.json"),
            "must be https",
        ),
        (
            format!("https://127.0.0.1:{port}/client.json"),
            "is private",
        ),
        (
            format!("https://localhost:{port}/client.json"),
            "resolves only to private addresses",
        ),
        (format!("https://[::1]:{port}/client.json"), "is private"),
    ] {
        let page = board.get(&Authorize::new(&client, &resource).path()).await;
        assert_eq!(page.status, 400, "{client}: {}", page.body);
        assert!(page.body.contains(why), "{client}: {}", page.body);
    }
    // Nothing anonymous makes the server fetch anything: signed out, the
    // request goes to the sign-in page first.
    let anonymous = crate::board::Board::new(&server.addr);
    let page = anonymous
        .get(&Authorize::new(&format!("https://localhost:{port}/client.json"), &resource).path())
        .await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("/board/sign-in?next=%2Foauth%2Fauthorize"),
        "{}",
        page.body
    );
}
