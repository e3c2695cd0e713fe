//! The conformance checklist of issue 46, each a refusal, through the real
//! binary: discovery, PKCE (missing, wrong, plain), code replay, redirect
//! mismatch, `resource` (another human's endpoint, a foreign URL), refresh
//! reuse (the family dies), a token after its endpoint is revoked, and
//! tenancy on the consent form.

use reqwest::Method;
use serde_json::Value;

use super::*;
use crate::board::Board;
use crate::support::api::{Body, HIGH_RATES, Server, make_human, vend};

fn start() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &HIGH_RATES);
    (dir, server)
}

async fn signed_in(server: &Server, token: &str) -> Board {
    let mut board = Board::new(&server.addr);
    board.sign_in(token).await;
    board
}

fn mcp_url(server: &Server, slug: &str) -> String {
    server.url(&format!("/mcp/{slug}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_leads_to_the_metadata_and_the_metadata_to_this_server() {
    let (_dir, server) = start();
    let admin = server.first_token.clone();
    let ep = vend(&server, &admin, serde_json::json!({"agent": "chat"})).await;
    let http = crate::support::mcp::client();
    let refused = http
        .post(mcp_url(&server, &ep.slug))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"].to_str().unwrap();
    let metadata_url = server.url(&format!(
        "/.well-known/oauth-protected-resource/mcp/{}",
        ep.slug
    ));
    assert_eq!(
        challenge,
        format!("Bearer realm=\"switchboard\", resource_metadata=\"{metadata_url}\"")
    );
    let prm: Value = http
        .get(&metadata_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(prm["resource"], mcp_url(&server, &ep.slug));
    let issuer = server.url("");
    assert_eq!(prm["authorization_servers"], serde_json::json!([issuer]));
    let asm: Value = http
        .get(server.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(asm["issuer"], issuer);
    assert_eq!(
        asm["code_challenge_methods_supported"],
        serde_json::json!(["S256"])
    );
    assert_eq!(
        asm["token_endpoint_auth_methods_supported"],
        serde_json::json!(["none"])
    );
    assert_eq!(
        asm["grant_types_supported"],
        serde_json::json!(["authorization_code", "refresh_token"])
    );
    assert_eq!(asm["client_id_metadata_document_supported"], true);
    assert_eq!(asm["registration_endpoint"], server.url("/oauth/register"));
    // The static credential works as it always did.
    assert_eq!(mcp_status(&server, &ep.slug, &ep.credential).await, 200);
}

async fn endpoint_of(server: &Server, token: &str, slug: &str) -> Value {
    server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/endpoints/{slug}"),
            token,
            Body::None,
        )
        .await
}

/// Revokes the endpoint's first OAuth connection through the API.
async fn revoke_first_connection(server: &Server, admin: &str, slug: &str) {
    let id = connections(server, admin, slug).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    server
        .expect(
            204,
            Method::DELETE,
            &format!("/api/v1/endpoints/{slug}/oauth-clients/{id}"),
            admin,
            Body::None,
        )
        .await;
}

/// A `refresh_token` grant's fields.
fn refresh_fields(client: &str, token: &str) -> Vec<(String, String)> {
    vec![
        ("grant_type".to_owned(), "refresh_token".to_owned()),
        ("client_id".to_owned(), client.to_owned()),
        ("refresh_token".to_owned(), token.to_owned()),
    ]
}

fn as_refs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_step_refuses_what_oauth_2_1_refuses() {
    let (_dir, server) = start();
    let admin = server.first_token.clone();
    let ep = vend(&server, &admin, serde_json::json!({"agent": "chat"})).await;
    let resource = mcp_url(&server, &ep.slug);
    let board = signed_in(&server, &admin).await;
    let client = register(&server, &[REDIRECT, "http://127.0.0.1/cb"]).await;

    // Registration: a bad redirect URI is named.
    let bad = crate::support::mcp::client()
        .post(server.url("/oauth/register"))
        .json(&serde_json::json!({"redirect_uris": ["http://evil.example/cb"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let bad: Value = bad.json().await.unwrap();
    assert_eq!(bad["error"], "invalid_redirect_uri", "{bad}");

    // Plain PKCE, and no PKCE at all: back to the client, with state and iss.
    for (method, challenge) in [("plain", VERIFIER.to_owned()), ("S256", String::new())] {
        let request = Authorize {
            method,
            challenge,
            ..Authorize::new(&client, &resource)
        };
        let page = board.get(&request.path()).await;
        assert_eq!(page.status, 303, "{method}: {}", page.body);
        let location = page.location.unwrap();
        assert!(location.starts_with(REDIRECT), "{location}");
        assert_eq!(
            param(&location, "error").as_deref(),
            Some("invalid_request")
        );
        assert_eq!(param(&location, "state").as_deref(), Some("st4te"));
        assert_eq!(param(&location, "iss"), Some(server.url("")));
        assert_eq!(param(&location, "code"), None);
    }

    // A redirect URI not registered: told to the human, never redirected.
    let request = Authorize {
        redirect_uri: "https://client.example/other",
        ..Authorize::new(&client, &resource)
    };
    let page = board.get(&request.path()).await;
    assert_eq!(page.status, 400);
    assert!(page.body.contains("redirect_uri"), "{}", page.body);
    assert_eq!(page.location, None);
    // A loopback one matches on any port.
    let request = Authorize {
        redirect_uri: "http://127.0.0.1:53124/cb",
        ..Authorize::new(&client, &resource)
    };
    assert_eq!(board.get(&request.path()).await.status, 200);

    // An unknown client: told to the human.
    let page = board
        .get(&Authorize::new("oc_nobody", &resource).path())
        .await;
    assert_eq!(page.status, 400);
    assert!(page.body.contains("client_id"), "{}", page.body);

    // A resource that is not an MCP URL of this server.
    let page = board
        .get(&Authorize::new(&client, "https://elsewhere.example/mcp/x").path())
        .await;
    assert_eq!(page.status, 303);
    assert_eq!(
        param(&page.location.unwrap(), "error").as_deref(),
        Some("invalid_target")
    );

    // The consent page shows the client, unverified, and the endpoint.
    let request = Authorize::new(&client, &resource);
    let page = board.get(&request.path()).await;
    assert_eq!(page.status, 200, "{}", page.body);
    for shown in [
        "Test client",
        "client.example",
        "oauth-unverified",
        &ep.slug,
    ] {
        assert!(page.body.contains(shown), "{shown}: {}", page.body);
    }
    let csp = page.csp.clone().unwrap();
    assert!(
        csp.ends_with("form-action 'self' https://client.example"),
        "{csp}"
    );
    // Deny: access_denied, and nothing issued.
    let denied = answer(&board, &page, "deny", None).await;
    assert_eq!(denied.status, 303);
    assert_eq!(
        param(&denied.location.unwrap(), "error").as_deref(),
        Some("access_denied")
    );
    // A forged answer (no CSRF token) is refused.
    let forged = board
        .post(
            "/oauth/authorize",
            &[("client_id", client.as_str()), ("decision", "allow")],
        )
        .await;
    assert_eq!(forged.status, 403);

    // The token endpoint: missing verifier, then wrong verifier; the code
    // is spent by the first try whatever was wrong, so a replay fails too.
    let code = code_for(&board, &request).await;
    let (status, body) = token(
        &server,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client),
            ("code", &code),
            ("redirect_uri", REDIRECT),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request"))
    );
    let (status, body) = token(
        &server,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", &"x".repeat(43)),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let (status, body) = token(
        &server,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "a code is tried once"
    );

    // A redirect mismatch at the token endpoint.
    let code = code_for(&board, &request).await;
    let (status, body) = token(
        &server,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client),
            ("code", &code),
            ("redirect_uri", "http://127.0.0.1/cb"),
            ("code_verifier", VERIFIER),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );

    // Another client redeeming the code.
    let other = register(&server, &[REDIRECT]).await;
    let code = code_for(&board, &request).await;
    let (status, body) = token(
        &server,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &other),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );

    // Grant types and clients the endpoint does not know.
    let (status, body) = token(
        &server,
        &[("grant_type", "client_credentials"), ("client_id", &client)],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("unsupported_grant_type"))
    );
    let (status, body) = token(
        &server,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", "oc_nobody"),
            ("refresh_token", "sbr_x"),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_client"))
    );

    // The real thing: a code, tokens, an MCP session as the endpoint.
    let code = code_for(&board, &request).await;
    let first = redeem(&server, &client, &code).await;
    assert_eq!(first["token_type"], "Bearer");
    assert!(first["expires_in"].as_i64().unwrap() > 3_500);
    let access = first["access_token"].as_str().unwrap();
    assert!(access.starts_with("sbo_"));
    let before = endpoint_of(&server, &admin, &ep.slug).await;
    assert!(before["liveness"]["last_seen_at"].is_null(), "{before}");
    assert_eq!(mcp_status(&server, &ep.slug, access).await, 200);
    // A sign of life, stamped as for the endpoint's own credential.
    let after = endpoint_of(&server, &admin, &ep.slug).await;
    assert!(after["liveness"]["last_seen_at"].is_string(), "{after}");
    // Another endpoint's MCP URL: the credential is not its.
    let other_ep = vend(&server, &admin, serde_json::json!({"agent": "other"})).await;
    assert_eq!(mcp_status(&server, &other_ep.slug, access).await, 403);
    let listed = connections(&server, &admin, &ep.slug).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["client_id"], client.as_str());
    assert_eq!(listed[0]["verified"], false);

    // Refresh rotates; reusing the spent token kills the family.
    let refresh = |token: &str| refresh_fields(&client, token);
    let spent = first["refresh_token"].as_str().unwrap().to_owned();
    let (status, second) = token(&server, &as_refs(&refresh(&spent))).await;
    assert_eq!(status, 200, "{second}");
    let newest_refresh = second["refresh_token"].as_str().unwrap().to_owned();
    let newest_access = second["access_token"].as_str().unwrap().to_owned();
    assert_ne!(newest_refresh, spent);
    assert_eq!(mcp_status(&server, &ep.slug, &newest_access).await, 200);
    let (status, body) = token(&server, &as_refs(&refresh(&spent))).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let (status, body) = token(&server, &as_refs(&refresh(&newest_refresh))).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "the new refresh token died with the family"
    );
    assert_eq!(mcp_status(&server, &ep.slug, &newest_access).await, 401);
    assert!(connections(&server, &admin, &ep.slug).await.is_empty());

    // Revoked on the API: the connection's tokens stop at once.
    let code = code_for(&board, &request).await;
    let third = redeem(&server, &client, &code).await;
    let access = third["access_token"].as_str().unwrap().to_owned();
    assert_eq!(mcp_status(&server, &ep.slug, &access).await, 200);
    revoke_first_connection(&server, &admin, &ep.slug).await;
    assert_eq!(mcp_status(&server, &ep.slug, &access).await, 401);

    // A token never outlives its endpoint.
    let code = code_for(&board, &request).await;
    let fourth = redeem(&server, &client, &code).await;
    let access = fourth["access_token"].as_str().unwrap().to_owned();
    assert_eq!(mcp_status(&server, &ep.slug, &access).await, 200);
    server
        .expect(
            200,
            Method::POST,
            &format!("/api/v1/endpoints/{}/revoke", ep.slug),
            &admin,
            Body::None,
        )
        .await;
    assert_eq!(mcp_status(&server, &ep.slug, &access).await, 401);
    let (status, body) = token(
        &server,
        &as_refs(&refresh(fourth["refresh_token"].as_str().unwrap())),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    // And no new authorization names a revoked endpoint.
    let page = board.get(&request.path()).await;
    assert_eq!(page.status, 303);
    assert_eq!(
        param(&page.location.unwrap(), "error").as_deref(),
        Some("invalid_target")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_consents_only_for_their_own_endpoints() {
    let (_dir, server) = start();
    let admin = server.first_token.clone();
    let bob = make_human(&server, "bob");
    let bobs = vend(&server, &bob.token, serde_json::json!({"agent": "bobs"})).await;
    let mine = vend(&server, &admin, serde_json::json!({"agent": "mine"})).await;
    let board = signed_in(&server, &admin).await;
    let client = register(&server, &[REDIRECT]).await;

    // Bob's MCP URL as the resource: refused exactly like a missing one.
    for slug in [bobs.slug.as_str(), "nobody-1234"] {
        let page = board
            .get(&Authorize::new(&client, &mcp_url(&server, slug)).path())
            .await;
        assert_eq!(page.status, 303, "{slug}");
        let location = page.location.unwrap();
        assert_eq!(param(&location, "error").as_deref(), Some("invalid_target"));
        assert_eq!(param(&location, "code"), None);
    }

    // Without a resource the page offers the human's own endpoints only,
    // and a forged choice of Bob's is not found.
    let request = Authorize {
        resource: None,
        ..Authorize::new(&client, "")
    };
    let page = board.get(&request.path()).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(&mine.slug));
    assert!(!page.body.contains(&bobs.slug));
    let forged = answer(&board, &page, "allow", Some(&bobs.slug)).await;
    assert_eq!(forged.status, 404, "{}", forged.body);

    // Choosing their own works, and the token is that endpoint's.
    let done = answer(&board, &page, "allow", Some(&mine.slug)).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let code = param(&done.location.unwrap(), "code").unwrap();
    let tokens = redeem(&server, &client, &code).await;
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(mcp_status(&server, &mine.slug, access).await, 200);
    assert_eq!(mcp_status(&server, &bobs.slug, access).await, 403);
    // Bob sees nothing of it, nor can he revoke it.
    let listed = connections(&server, &admin, &mine.slug).await;
    let id = listed[0]["id"].as_str().unwrap();
    server
        .expect(
            404,
            Method::GET,
            &format!("/api/v1/endpoints/{}/oauth-clients", mine.slug),
            &bob.token,
            Body::None,
        )
        .await;
    server
        .expect(
            404,
            Method::DELETE,
            &format!("/api/v1/endpoints/{}/oauth-clients/{id}", bobs.slug),
            &bob.token,
            Body::None,
        )
        .await;
    assert_eq!(mcp_status(&server, &mine.slug, access).await, 200);

    // Vending a new endpoint from the consent page.
    let page = board.get(&request.path()).await;
    let fields: Vec<(&str, String)> = [
        "csrf",
        "client_id",
        "redirect_uri",
        "code_challenge",
        "state",
        "resource",
    ]
    .into_iter()
    .map(|n| (n, crate::board::field_of(&page.body, n)))
    .collect();
    let mut form: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    form.extend([
        ("decision", "allow"),
        ("endpoint", "new"),
        ("new_agent", "chat-app"),
        ("new_queues", "inbox, chat"),
        ("new_verbs", "claim_next"),
        ("new_verbs", "complete"),
    ]);
    let done = board.post("/oauth/authorize", &form).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let code = param(&done.location.unwrap(), "code").unwrap();
    let tokens = redeem(&server, &client, &code).await;
    let listed = server
        .expect(200, Method::GET, "/api/v1/endpoints", &admin, Body::None)
        .await;
    let new = listed["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["agent"] == "chat-app")
        .expect("vended")
        .clone();
    let slug = new["slug"].as_str().unwrap();
    assert_eq!(
        mcp_status(&server, slug, tokens["access_token"].as_str().unwrap()).await,
        200
    );
}

/// `switchboard_oauth_events_total{event}` counts what the authorization
/// server did, one by one (`docs/metrics.md`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_server_counts_what_it_did() {
    let (_dir, server) = start();
    let admin = server.first_token.clone();
    let ep = vend(&server, &admin, serde_json::json!({"agent": "chat"})).await;
    let board = signed_in(&server, &admin).await;
    let events = || async {
        let text =
            crate::support::exposition(&crate::support::mcp::client(), &server.url("/metrics"))
                .await;
        let count = |event: &str| {
            let series = format!(r#"switchboard_oauth_events_total{{event="{event}"}}"#);
            crate::support::sample(&text, &series).unwrap_or_else(|| panic!("{series} in /metrics"))
                as u64
        };
        [
            "client_registered",
            "code_issued",
            "tokens_issued",
            "tokens_refreshed",
            "refresh_reused",
            "connection_revoked",
            "token_refused",
        ]
        .map(count)
    };
    assert_eq!(events().await, [0; 7], "every series starts at 0");

    let client = register(&server, &[REDIRECT]).await;
    let request = Authorize::new(&client, &mcp_url(&server, &ep.slug));
    let first = redeem(&server, &client, &code_for(&board, &request).await).await;
    let refresh = |token: &str| refresh_fields(&client, token);
    let spent = first["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(token(&server, &as_refs(&refresh(&spent))).await.0, 200);
    assert_eq!(events().await, [1, 1, 1, 1, 0, 0, 0]);

    assert_eq!(token(&server, &as_refs(&refresh(&spent))).await.0, 400);
    let bogus = [
        ("grant_type", "authorization_code"),
        ("client_id", client.as_str()),
        ("code", "sbc_nothing"),
        ("redirect_uri", REDIRECT),
        ("code_verifier", VERIFIER),
    ];
    assert_eq!(token(&server, &bogus).await.0, 400);
    assert_eq!(events().await, [1, 1, 1, 1, 1, 0, 2]);

    redeem(&server, &client, &code_for(&board, &request).await).await;
    revoke_first_connection(&server, &admin, &ep.slug).await;
    assert_eq!(events().await, [1, 2, 2, 1, 1, 1, 2]);
}
