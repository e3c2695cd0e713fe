//! The MCP transport over raw HTTP against the server in process (`03-mcp.md`):
//! every status code, authentication order (and its 401 challenges), the
//! `Origin` check, unsupported protocol versions, sessions and streams,
//! scope, argument checking, foreign ids, claim result sizes, tool
//! annotations, and liveness stamping.

use crate::support::mcp;

use std::time::{Duration, Instant};

use mcp::{Answer, Server, initialize_body, next_event, raw_http, stream_ends};
use reqwest::Method;
use serde_json::{Value, json};

const UNAUTHENTICATED_REALM: &str = "Bearer realm=\"switchboard\"";
/// When a bearer token was presented and refused (RFC 6750 section 3.1).
const INVALID_TOKEN: &str = "Bearer realm=\"switchboard\", error=\"invalid_token\"";

/// The challenge of a 401 from `mcp_url`: `challenge` and where the MCP
/// URL's protected-resource metadata is (RFC 9728, `docs/oauth.md`).
fn challenge_of(challenge: &str, mcp_url: &str) -> String {
    let metadata = mcp_url.replacen("/mcp/", "/.well-known/oauth-protected-resource/mcp/", 1);
    format!("{challenge}, resource_metadata=\"{metadata}\"")
}

/// Sets an endpoint's expiry in the past, behind the server's back.
async fn expire(server: &Server, slug: &str) {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", server.db.display()))
        .await
        .unwrap();
    let done = sqlx::query("UPDATE endpoints SET expires_at = 1 WHERE slug = $1")
        .bind(slug)
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(done.rows_affected(), 1);
}

#[tokio::test]
async fn every_credential_failure_gets_the_same_401() {
    let server = Server::start(&[]);
    let good = server.vend(json!({"agent": "good"})).await;
    let revoked = server.vend(json!({"agent": "revoked"})).await;
    server.revoke(&revoked.slug).await;
    let expired = server
        .vend(json!({"agent": "expired", "expires_in": "30d"}))
        .await;
    let mcp = server.mcp(&good);
    // An expired endpoint's own credential, on its own path, once it works.
    let expired_mcp = server.mcp(&expired);
    expired_mcp.initialize().await;
    expire(&server, &expired.slug).await;

    // The body is the same in every case; the header adds
    // error="invalid_token" when a bearer token was presented.
    let cases: Vec<(&str, Option<String>, &mcp::Mcp, &str)> = vec![
        ("missing", None, &mcp, UNAUTHENTICATED_REALM),
        (
            "empty bearer",
            Some("Bearer ".into()),
            &mcp,
            UNAUTHENTICATED_REALM,
        ),
        (
            "no scheme",
            Some(good.token.clone()),
            &mcp,
            UNAUTHENTICATED_REALM,
        ),
        (
            "basic scheme",
            Some(format!("Basic {}", good.token)),
            &mcp,
            UNAUTHENTICATED_REALM,
        ),
        (
            "malformed",
            Some("Bearer not-a-credential".into()),
            &mcp,
            INVALID_TOKEN,
        ),
        (
            "unknown",
            Some("Bearer sbk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".into()),
            &mcp,
            INVALID_TOKEN,
        ),
        (
            "revoked",
            Some(revoked.authorization.clone()),
            &mcp,
            INVALID_TOKEN,
        ),
        (
            "expired",
            Some(expired.authorization.clone()),
            &expired_mcp,
            INVALID_TOKEN,
        ),
        (
            "human token",
            Some(format!("Bearer {}", server.admin_token)),
            &mcp,
            INVALID_TOKEN,
        ),
    ];
    let mut first_body: Option<Vec<u8>> = None;
    for (what, authorization, target, challenge) in cases {
        for method in [Method::POST, Method::GET, Method::DELETE] {
            let mut req = target
                .http
                .request(method.clone(), &target.url)
                .header("Content-Type", "application/json")
                .header("Mcp-Session-Id", "whatever");
            if let Some(a) = &authorization {
                req = req.header("Authorization", a);
            }
            if method == Method::POST {
                req = req.body(initialize_body(1).to_string());
            }
            let answer = Answer::read(req.send().await.unwrap()).await;
            answer.expect(401);
            assert_eq!(
                answer.header("www-authenticate"),
                Some(challenge_of(challenge, &target.url).as_str()),
                "{what} {method}"
            );
            match &first_body {
                None => first_body = Some(answer.body.clone()),
                Some(body) => assert_eq!(
                    &answer.body, body,
                    "{what} {method}: the body differs from the other 401s"
                ),
            }
        }
    }
    assert_eq!(
        serde_json::from_slice::<Value>(first_body.as_ref().unwrap()).unwrap()["error"]["code"],
        "unauthenticated"
    );

    // The scheme is case-insensitive; the good credential works.
    let lower = mcp.with_authorization(&format!("bEaReR {}", good.token));
    lower.post(None, &initialize_body(1)).await.expect(200);

    // Revoked and expired endpoints stay unseen: a 401 stamps nothing.
    let view = server.endpoint(&revoked.slug).await;
    assert_eq!(view["liveness"]["last_seen_at"], Value::Null);
}

#[tokio::test]
async fn a_credential_on_another_endpoints_path_is_403() {
    let server = Server::start(&[]);
    let a = server.vend(json!({"agent": "a"})).await;
    let b = server.vend(json!({"agent": "b"})).await;
    let on_b = server.mcp(&a).at(&b.mcp_url);
    let answer = on_b.post(None, &initialize_body(1)).await;
    answer.expect(403);
    assert_eq!(answer.json()["error"]["code"], "forbidden");
    assert!(answer.header("www-authenticate").is_none());
    let session = server.mcp(&a).initialize().await;
    on_b.delete(Some(&session)).await.expect(403);
    // B was never seen: a 403 on its path stamps nothing.
    let view = server.endpoint(&b.slug).await;
    assert_eq!(view["liveness"]["last_seen_at"], Value::Null, "{view}");
}

#[tokio::test]
async fn a_non_loopback_host_is_refused_with_403() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let path = format!("/mcp/{}", ep.slug);
    let body = initialize_body(1).to_string();
    let request = |host: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            ep.authorization,
            body.len()
        )
    };
    let port = server.addr.rsplit(':').next().unwrap();
    for host in [
        format!("evil.example:{port}"),
        "rebind.attacker.test".to_owned(),
        format!("10.1.2.3:{port}"),
    ] {
        let (status, text) = raw_http(&server.addr, &request(&host), None);
        assert_eq!(status, 403, "Host {host}: {text}");
        let lower = text.to_ascii_lowercase();
        assert!(lower.contains("x-content-type-options: nosniff"), "{text}");
        assert!(lower.contains("cache-control: no-store"), "{text}");
    }
    assert_eq!(
        server.endpoint(&ep.slug).await["liveness"]["last_seen_at"],
        Value::Null,
        "a refused request stamps nothing"
    );
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let (status, text) = raw_http(&server.addr, &request(&host), None);
        assert_eq!(status, 200, "Host {host}: {text}");
    }
}

#[tokio::test]
async fn sessions_are_bound_to_their_endpoint() {
    let server = Server::start(&[]);
    let a = server.vend(json!({"agent": "a"})).await;
    let b = server.vend(json!({"agent": "b"})).await;
    let (mcp_a, mcp_b) = (server.mcp(&a), server.mcp(&b));
    let session_a = mcp_a.initialize().await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});

    let unknown = "no-such-session-0123456789abcdef";
    mcp_a.post(Some(unknown), &list).await.expect(404);
    mcp_a.delete(Some(unknown)).await.expect(404);
    let get = mcp_a
        .request(Method::GET, Some(unknown))
        .send()
        .await
        .unwrap();
    Answer::read(get).await.expect(404);

    // Another endpoint's session id, with that other endpoint's own credential.
    let foreign = mcp_b.post(Some(&session_a), &list).await;
    foreign.expect(404);
    let unknown_answer = mcp_b.post(Some(unknown), &list).await;
    assert_eq!(
        foreign.body, unknown_answer.body,
        "a foreign session id answers like an unknown one"
    );
    mcp_b.delete(Some(&session_a)).await.expect(404);
    // Still alive for its own endpoint.
    mcp_a.post(Some(&session_a), &list).await.expect(200);
}

#[tokio::test]
async fn get_and_delete_without_a_session_id_are_400() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let get = mcp.request(Method::GET, None).send().await.unwrap();
    Answer::read(get).await.expect(400);
    mcp.delete(None).await.expect(400);
    // A POST other than initialize without a session id is refused too.
    mcp.post(
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await
    .expect(400);
}

#[tokio::test]
async fn other_methods_are_405_with_allow() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    for method in [Method::PUT, Method::PATCH] {
        let resp = mcp
            .request(method.clone(), None)
            .header("Content-Type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let answer = Answer::read(resp).await;
        answer.expect(405);
        let allow = answer.header("allow").expect("Allow header").to_owned();
        for m in ["GET", "POST", "DELETE"] {
            assert!(allow.contains(m), "{method}: Allow: {allow}");
        }
    }
}

#[tokio::test]
async fn post_without_a_json_content_type_is_415() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let body = initialize_body(1).to_string();
    for content_type in [None, Some("text/plain"), Some("application/jsonx")] {
        let mut req = mcp.request(Method::POST, None).body(body.clone());
        if let Some(ct) = content_type {
            req = req.header("Content-Type", ct);
        }
        Answer::read(req.send().await.unwrap()).await.expect(415);
    }
    let resp = mcp
        .request(Method::POST, None)
        .header("Content-Type", "Application/JSON; charset=utf-8")
        .body(body)
        .send()
        .await
        .unwrap();
    Answer::read(resp).await.expect(200);
}

#[tokio::test]
async fn bodies_over_one_mib_are_413_also_when_chunked() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    const MIB: usize = 1024 * 1024;

    // A JSON request of exactly 1 MiB is fine.
    let head = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let exact = format!("{head}{}", " ".repeat(MIB - head.len()));
    assert_eq!(exact.len(), MIB);
    mcp.post_raw(Some(&session), exact).await.expect(200);

    // One byte more, with a Content-Length.
    let over = format!("{head}{}", " ".repeat(MIB + 1 - head.len()));
    let answer = mcp.post_raw(Some(&session), over).await;
    answer.expect(413);
    assert_eq!(answer.json()["error"]["code"], "payload_too_large");

    // Chunked, with no Content-Length: 17 chunks of 64 KiB.
    let path = format!("/mcp/{}", ep.slug);
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nMcp-Session-Id: {session}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        server.addr, ep.authorization
    );
    let mut chunks = vec![head.as_bytes().to_vec()];
    chunks.extend((0..17).map(|_| vec![b' '; 64 * 1024]));
    let (status, text) = raw_http(&server.addr, &request, Some(chunks));
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("payload_too_large"), "{text}");

    // A small chunked request is fine.
    let (status, text) = raw_http(&server.addr, &request, Some(vec![head.as_bytes().to_vec()]));
    assert_eq!(status, 200, "{text}");
}

#[tokio::test]
async fn json_rpc_errors_have_their_codes() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let code = |a: &Answer| a.json()["error"]["code"].as_i64();

    // Malformed JSON: parse error, with or without a session.
    for s in [None, Some(session.as_str())] {
        let a = mcp.post_raw(s, "{\"jsonrpc\": \"2.0\", \"id\": 1,").await;
        a.assert_secure();
        assert_eq!(code(&a), Some(-32700), "{}", a.text());
        assert_eq!(a.json()["id"], Value::Null);
    }

    // Unknown method.
    let a = mcp.rpc(&session, 3, "resources/list", json!({})).await;
    a.expect(200);
    assert_eq!(code(&a), Some(-32601), "{}", a.text());
    assert_eq!(a.json()["id"], 3);

    // The Python SDK 2.x probe without a session: a JSON-RPC error at once.
    let started = Instant::now();
    let probe = json!({"jsonrpc": "2.0", "id": "d1", "method": "server/discover", "params": {}});
    let a = mcp.post(None, &probe).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    a.assert_secure();
    assert_eq!(code(&a), Some(-32601), "{}", a.text());
    assert_eq!(a.json()["id"], "d1");
    // The connection is still good for the fallback to initialize.
    mcp.post(None, &initialize_body(2)).await.expect(200);

    // tools/call without a name, and with an unknown tool.
    for params in [
        json!({"arguments": {}}),
        json!({"name": "no_such_tool", "arguments": {}}),
        json!({"name": "clock_in_elsewhere"}),
    ] {
        let a = mcp.rpc(&session, 4, "tools/call", params.clone()).await;
        a.expect(200);
        assert_eq!(code(&a), Some(-32602), "{params}: {}", a.text());
    }

    // Not JSON-RPC 2.0, and batches.
    for body in [
        json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
        json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
    ] {
        let a = mcp.post(Some(&session), &body).await;
        a.assert_secure();
        assert_eq!(code(&a), Some(-32600), "{body}: {}", a.text());
    }

    // Notifications and responses from the client get 202 and no body.
    let a = mcp
        .post(
            Some(&session),
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}),
        )
        .await;
    a.expect(202);
    assert!(a.body.is_empty());
    mcp.rpc(&session, 5, "ping", json!({})).await.expect(200);
}

#[tokio::test]
async fn protocol_versions_and_unknown_client_capabilities() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    for (asked, answered) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": asked,
                "capabilities": {"extensions": {"io.example/x": {}}, "sampling": {}, "elicitation": {}},
                "clientInfo": {"name": "t", "version": "1"}
            }
        });
        let a = mcp.post(None, &body).await;
        a.expect(200);
        let v = a.json();
        assert_eq!(v["result"]["protocolVersion"], answered, "{asked}");
        assert_eq!(v["result"]["serverInfo"]["name"], "switchboard");
        assert_eq!(
            v["result"]["capabilities"],
            json!({"tools": {"listChanged": true}, "prompts": {}, "experimental": {"claude/channel": {}}})
        );
    }
    // A later request may carry any supported version, not just the negotiated one.
    let session = mcp.initialize().await;
    for version in ["2025-03-26", "2025-11-25"] {
        let resp = mcp
            .request(Method::POST, Some(&session))
            .header("Content-Type", "application/json")
            .header("MCP-Protocol-Version", version)
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string())
            .send()
            .await
            .unwrap();
        Answer::read(resp).await.expect(200);
    }
}

#[tokio::test]
async fn the_rate_limit_answers_429_with_retry_after() {
    // 1 request/s, burst 2 (a later flag overrides the fast default).
    let server = Server::start(&["--mcp-rate", "1"]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let mut limited = None;
    for _ in 0..4 {
        let a = mcp.post(None, &initialize_body(1)).await;
        a.assert_secure();
        if a.status == 429 {
            limited = Some(a);
            break;
        }
        assert_eq!(a.status, 200, "{}", a.text());
    }
    let a = limited.expect("the burst of 2 is used up within 4 requests");
    let retry: u64 = a
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "Retry-After: {retry}");
    assert_eq!(a.json()["error"]["code"], "rate_limited");
    // Per endpoint: another endpoint is not limited.
    let other = server.vend(json!({"agent": "b"})).await;
    server
        .mcp(&other)
        .post(None, &initialize_body(1))
        .await
        .expect(200);
}

#[tokio::test]
async fn delete_ends_the_session_and_its_stream() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let mut stream = mcp.open_stream(&session).await;
    let a = mcp.delete(Some(&session)).await;
    a.expect(204);
    assert!(a.body.is_empty());
    stream_ends(&mut stream, Duration::from_secs(1))
        .await
        .expect("the stream ends with its session");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    mcp.post(Some(&session), &list).await.expect(404);
    mcp.delete(Some(&session)).await.expect(404);
}

#[tokio::test]
async fn a_second_get_stream_replaces_the_first() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let mut first = mcp.open_stream(&session).await;
    let mut second = mcp.open_stream(&session).await;
    stream_ends(&mut first, Duration::from_secs(1))
        .await
        .expect("the first stream ends when the second opens");
    // The second is the live one: it carries the next notification.
    mcp.call_ok(
        &session,
        "set_default_lease",
        json!({"default_lease_ttl_seconds": 120}),
    )
    .await;
    let note = next_event(&mut second, Duration::from_secs(5), |v| {
        v["method"] == "notifications/tools/list_changed"
    })
    .await;
    assert!(note.is_some(), "list_changed on the replacing stream");
}

#[tokio::test]
async fn streams_carry_keep_alive_comments() {
    let server = Server::start(&["--sse-keepalive", "1s"]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let mut stream = mcp.open_stream(&session).await;
    let chunk = tokio::time::timeout(Duration::from_secs(3), stream.chunk())
        .await
        .expect("a keep-alive within 3 s")
        .unwrap()
        .expect("the stream is open");
    assert!(chunk.starts_with(b":"), "an SSE comment: {chunk:?}");
}

#[tokio::test]
async fn revoking_ends_open_streams_at_once_and_then_401() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let mut stream = mcp.open_stream(&session).await;
    let other = mcp.initialize().await;
    let mut other_stream = mcp.open_stream(&other).await;
    server.revoke(&ep.slug).await;
    let started = Instant::now();
    stream_ends(&mut stream, Duration::from_secs(1))
        .await
        .expect("the stream ends within 1 s of the revocation");
    stream_ends(&mut other_stream, Duration::from_secs(1))
        .await
        .expect("every session's stream ends");
    assert!(started.elapsed() < Duration::from_secs(1));
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let a = mcp.post(Some(&session), &list).await;
    a.expect(401);
    assert_eq!(
        a.header("www-authenticate"),
        Some(challenge_of(INVALID_TOKEN, &mcp.url).as_str())
    );
}

#[tokio::test]
async fn expiry_ends_open_streams_at_the_next_maintenance_tick() {
    let server = Server::start(&["--maintenance-interval", "1s"]);
    let ep = server
        .vend(json!({"agent": "a", "expires_in": "30d"}))
        .await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let mut stream = mcp.open_stream(&session).await;
    expire(&server, &ep.slug).await;
    // The maintenance pass runs every second here: allow a few.
    stream_ends(&mut stream, Duration::from_secs(5))
        .await
        .expect("the stream ends once the expiry is noticed");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    mcp.post(Some(&session), &list).await.expect(401);
}

#[tokio::test]
async fn scope_limits_the_tools_and_refuses_other_verbs_without_side_effects() {
    let server = Server::start(&[]);
    let ep = server
        .vend(json!({"agent": "a", "verbs": ["list_todos", "claim"]}))
        .await;
    let todo = server.push(&ep.slug, "scoped").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;

    let a = mcp.rpc(&session, 1, "tools/list", json!({})).await;
    a.expect(200);
    let mut names: Vec<String> = a.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    // The granted verbs, get_todo implied by list_todos, and the self verbs.
    assert_eq!(
        names,
        [
            "claim",
            "clock_in",
            "clock_out",
            "get_todo",
            "list_todos",
            "presence",
            "queue_summary"
        ]
    );

    let claimed = mcp.call_ok(&session, "claim", json!({"id": todo})).await;
    assert_eq!(claimed["state"], "claimed");
    for (verb, args) in [
        ("complete", json!({"id": todo})),
        ("release", json!({"id": todo})),
        ("claim_next", json!({})),
        (
            "set_default_lease",
            json!({"default_lease_ttl_seconds": 600}),
        ),
    ] {
        let (code, message) = mcp.call_err(&session, verb, args).await;
        assert_eq!(code, "forbidden", "{verb}");
        assert!(message.contains(verb), "{verb}: {message}");
    }
    let view = server.todo(&todo).await;
    assert_eq!(view["state"], "claimed", "{view}");
    let endpoint = server.endpoint(&ep.slug).await;
    assert_eq!(endpoint["default_lease_ttl_seconds"], Value::Null);
}

#[tokio::test]
async fn unknown_arguments_are_refused_by_name_without_side_effects() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let todo = server.push(&ep.slug, "keep me pending").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    for (verb, args, named) in [
        (
            "claim_next",
            json!({"endpoint": "someone-else"}),
            "endpoint",
        ),
        ("claim", json!({"id": todo, "slug": "x"}), "slug"),
        ("list_todos", json!({"human": "bob"}), "human"),
        (
            "get_default_lease",
            json!({"endpoint_id": "ep_x"}),
            "endpoint_id",
        ),
        (
            "set_default_lease",
            json!({"default_lease_ttl_seconds": 600, "endpoint": "x"}),
            "endpoint",
        ),
        // A self verb can never be pointed at another endpoint.
        ("clock_out", json!({"endpoint": "someone-else"}), "endpoint"),
        ("clock_in", json!({"for": "1h", "slug": "x"}), "slug"),
        ("presence", json!({"endpoint_id": "ep_x"}), "endpoint_id"),
    ] {
        let (code, message) = mcp.call_err(&session, verb, args).await;
        assert_eq!(code, "invalid_argument", "{verb}");
        assert!(message.starts_with(named), "{verb}: {message}");
    }
    assert_eq!(server.todo(&todo).await["state"], "pending");
    let view = server.endpoint(&ep.slug).await;
    assert_eq!(view["default_lease_ttl_seconds"], Value::Null);
    assert_eq!(
        view["presence"]["presence"], "in",
        "clock_out did nothing: {view}"
    );
}

#[tokio::test]
async fn foreign_todo_ids_answer_byte_for_byte_like_missing_ones() {
    let server = Server::start(&[]);
    let mine = server.vend(json!({"agent": "mine"})).await;
    let sibling = server.vend(json!({"agent": "sibling"})).await;
    let bob_token = server.second_human("bob");
    let bobs = server
        .vend_as(&bob_token, json!({"agent": "bobs-agent"}))
        .await;

    // Each foreign endpoint has a pending todo and one it holds itself.
    let mut foreign = Vec::new();
    for (ep, token) in [
        (&sibling, server.admin_token.clone()),
        (&bobs, bob_token.clone()),
    ] {
        let held = server.push_as(&token, &ep.slug, "held").await;
        let pending = server.push_as(&token, &ep.slug, "pending").await;
        let owner = server.mcp(ep);
        let s = owner.initialize().await;
        let c = owner.call_ok(&s, "claim", json!({"id": held})).await;
        assert_eq!(c["state"], "claimed");
        foreign.push((held, "claimed", token.clone()));
        foreign.push((pending, "pending", token));
    }
    let mcp = server.mcp(&mine);
    let session = mcp.initialize().await;
    let missing = "td_00000000000000000000000000000000";
    for verb in [
        "get_todo",
        "claim",
        "heartbeat",
        "complete",
        "fail",
        "release",
    ] {
        let expected = mcp.call_raw(&session, verb, json!({"id": missing})).await;
        expected.expect(200);
        let v = expected.json();
        assert_eq!(
            v["result"]["structuredContent"]["error"]["code"], "not_found",
            "{verb}: {v}"
        );
        for (id, _, _) in &foreign {
            let got = mcp.call_raw(&session, verb, json!({"id": id})).await;
            assert_eq!(got.status, expected.status);
            assert_eq!(
                got.text(),
                expected.text(),
                "{verb} on a foreign id must answer exactly like a missing one"
            );
        }
    }
    // Nothing changed for the owners.
    for (id, state, token) in &foreign {
        let view = server
            .api_as(
                token,
                Method::GET,
                &format!("/api/v1/todos/{id}"),
                None,
                200,
            )
            .await;
        assert_eq!(view["state"], *state, "{view}");
        assert_eq!(
            view["attempts_total"],
            i64::from(*state == "claimed"),
            "{view}"
        );
    }
}

/// The endpoint's `liveness.last_seen_at`, parsed to milliseconds.
async fn last_seen(server: &Server, slug: &str) -> Option<i64> {
    let view = server.endpoint(slug).await;
    view["liveness"]["last_seen_at"].as_str().map(|s| {
        s.parse::<jiff::Timestamp>()
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .as_millisecond()
    })
}

#[tokio::test]
async fn last_seen_is_stamped_by_authenticated_requests_only() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    assert_eq!(last_seen(&server, &ep.slug).await, None, "never seen");

    // Rejected requests stamp nothing.
    let bad = mcp.with_authorization("Bearer sbk_wrongwrongwrongwrongwrongwrongwrongwrong");
    bad.post(None, &initialize_body(1)).await.expect(401);
    let other = server.vend(json!({"agent": "other"})).await;
    server
        .mcp(&other)
        .at(&ep.mcp_url)
        .post(None, &initialize_body(1))
        .await
        .expect(403);
    assert_eq!(
        last_seen(&server, &ep.slug).await,
        None,
        "401/403 stamp nothing"
    );
    assert_eq!(last_seen(&server, &other.slug).await, None);

    // An authenticated POST stamps.
    let before = jiff::Timestamp::now().as_millisecond();
    let session = mcp.initialize().await;
    let after_post = last_seen(&server, &ep.slug).await.expect("stamped by POST");
    assert!(after_post >= before - 5, "{after_post} vs {before}");

    // Writes are coalesced to one per second: wait past that, then GET.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let _stream = mcp.open_stream(&session).await;
    let after_get = last_seen(&server, &ep.slug).await.unwrap();
    assert!(
        after_get >= after_post + 1000,
        "stamped by GET: {after_post} -> {after_get}"
    );

    // And an authenticated DELETE, another second on.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    mcp.delete(Some(&session)).await.expect(204);
    let after_delete = last_seen(&server, &ep.slug).await.unwrap();
    assert!(after_delete >= after_get + 1000, "stamped by DELETE");

    // An authenticated request the transport then refuses is still a sign of life.
    let fresh = server.vend(json!({"agent": "fresh"})).await;
    let resp = server
        .mcp(&fresh)
        .request(Method::POST, None)
        .header("Content-Type", "text/plain")
        .body("hello")
        .send()
        .await
        .unwrap();
    Answer::read(resp).await.expect(415);
    assert!(
        last_seen(&server, &fresh.slug).await.is_some(),
        "a valid credential on a refused request still stamps"
    );
}

#[tokio::test]
async fn last_contact_is_stored_beside_last_seen() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let body = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {
            "name": "list_todos", "arguments": {},
            "_meta": {"last_contact": "2026-01-05T09:00:00Z"}
        }
    });
    mcp.post(Some(&session), &body).await.expect(200);
    let view = server.endpoint(&ep.slug).await;
    assert_eq!(
        view["liveness"]["last_contact_at"], "2026-01-05T09:00:00.000Z",
        "{view}"
    );
    assert!(view["liveness"]["last_seen_at"].is_string());
    assert_ne!(
        view["liveness"]["last_seen_at"], view["liveness"]["last_contact_at"],
        "the agent's claim never overwrites last_seen"
    );

    // Unix seconds work too.
    let body = json!({
        "jsonrpc": "2.0", "id": 3, "method": "ping",
        "params": {"_meta": {"last_contact": 1767603600}}
    });
    mcp.post(Some(&session), &body).await.expect(200);
    let view = server.endpoint(&ep.slug).await;
    assert_eq!(
        view["liveness"]["last_contact_at"],
        "2026-01-05T09:00:00.000Z"
    );
}

#[tokio::test]
async fn tool_results_carry_structured_content_and_the_same_json_as_text() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    server.push(&ep.slug, "one").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let result = mcp.call(&session, "claim_next", json!({})).await;
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    // A claim's text is a summary of the same JSON, without the payload
    // (sent once, in structuredContent): the row's main keys, its payload's
    // size, and a note saying where the rest is.
    let structured = &result["structuredContent"];
    let todo = &structured["todo"];
    assert_eq!(
        text,
        json!({
            "empty": false,
            "todo": {
                "id": todo["id"], "queue": todo["queue"], "title": todo["title"],
                "state": "claimed", "attempt": todo["attempt"],
                "max_attempts": todo["max_attempts"],
                "lease_expires_at": todo["lease_expires_at"],
                "payload_size": todo["payload"].to_string().len(),
                "note": text["todo"]["note"],
            },
            "attempt_seq": structured["attempt_seq"],
            "attempts_total": structured["attempts_total"],
            "prior_attempts_count": 0,
        })
    );
    assert!(
        text["todo"]["note"]
            .as_str()
            .unwrap()
            .contains("structuredContent")
    );
    // Every other result's text is the same JSON as structuredContent.
    let list = mcp.call(&session, "list_todos", json!({})).await;
    let text: Value = serde_json::from_str(list["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, list["structuredContent"]);
    let row = &result["structuredContent"]["todo"];
    for key in [
        "id",
        "queue",
        "title",
        "kind",
        "source",
        "state",
        "owner",
        "attempt",
        "max_attempts",
        "lease_expires_at",
        "next_retry_at",
        "dead_letter",
        "created_at",
        "payload",
    ] {
        assert!(row.get(key).is_some(), "{key} is always present: {row}");
    }
    // The one claimable todo is gone: empty, not an error.
    let next = mcp.call(&session, "claim_next", json!({})).await;
    assert_eq!(next["structuredContent"], json!({"empty": true}));
    assert!(next.get("isError").is_none_or(|e| e == false));
}

#[tokio::test]
async fn an_unsupported_protocol_version_is_a_json_rpc_400() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let supported = json!(["2025-11-25", "2025-06-18", "2025-03-26"]);
    let post = |session: Option<String>, version: &'static str, body: Value| {
        let mcp = mcp.clone();
        async move {
            let resp = mcp
                .request(Method::POST, session.as_deref())
                .header("Content-Type", "application/json")
                .header("MCP-Protocol-Version", version)
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            Answer::read(resp).await
        }
    };

    // The Python SDK 2.x opening: server/discover under 2026-07-28, no
    // session. Method not found, so it falls back to initialize.
    let probe = json!({"jsonrpc": "2.0", "id": "d1", "method": "server/discover", "params": {}});
    let a = post(None, "2026-07-28", probe).await;
    a.expect(400).assert_secure();
    let v = a.json();
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], "d1");
    assert_eq!(v["error"]["code"], -32601, "{v}");
    assert_eq!(v["error"]["data"]["supported"], supported);
    mcp.post(None, &initialize_body(2)).await.expect(200);

    // A method we know, or a version that is not newer: invalid request.
    let session = mcp.initialize().await;
    for (version, method) in [
        ("2026-07-28", "ping"),
        ("2026-07-28", "tools/list"),
        ("2024-11-05", "server/discover"),
        ("1999-01-01", "ping"),
        ("banana", "server/discover"),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 5, "method": method});
        let a = post(Some(session.clone()), version, body).await;
        a.expect(400).assert_secure();
        let v = a.json();
        assert_eq!(v["error"]["code"], -32600, "{version} {method}: {v}");
        assert_eq!(v["id"], 5);
        assert_eq!(v["error"]["data"]["supported"], supported);
        assert!(v.get("result").is_none());
    }
    // The session is unharmed.
    mcp.rpc(&session, 6, "ping", json!({})).await.expect(200);
}

#[tokio::test]
async fn an_origin_that_is_present_and_not_allowed_is_403() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let port = server.addr.rsplit_once(':').unwrap().1.to_owned();

    for origin in [
        "http://evil.example",
        "https://localhost.evil.example",
        "null",
        "http://10.0.0.1:8080",
    ] {
        for method in [Method::POST, Method::GET, Method::DELETE] {
            // Refused before the credential is even read.
            for authorization in [mcp.authorization.as_str(), "Bearer sbk_nope"] {
                let mut req = mcp
                    .with_authorization(authorization)
                    .request(method.clone(), Some(&session))
                    .header("Origin", origin)
                    .header("Content-Type", "application/json");
                if method == Method::POST {
                    req =
                        req.body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string());
                }
                let a = Answer::read(req.send().await.unwrap()).await;
                a.expect(403).assert_secure();
                assert_eq!(a.json()["error"]["code"], "forbidden", "{origin} {method}");
            }
        }
    }

    // Allowed: no Origin, the request's own origin, and (on loopback) any
    // loopback origin.
    let own = format!("http://{}", server.addr);
    let localhost = format!("http://localhost:{port}");
    for origin in [
        None,
        Some(own.as_str()),
        Some(localhost.as_str()),
        Some("http://localhost:6274"),
        Some("http://127.0.0.1:3000"),
        Some("http://[::1]:5173"),
    ] {
        let mut req = mcp
            .request(Method::POST, Some(&session))
            .header("Content-Type", "application/json")
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string());
        if let Some(origin) = origin {
            req = req.header("Origin", origin);
        }
        Answer::read(req.send().await.unwrap()).await.expect(200);
    }
}

#[tokio::test]
async fn list_todos_checks_queue_and_limit_like_claim_next() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    server.push(&ep.slug, "one").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;

    for queue in ["Bad Queue!", "", "elsewhere", &"q".repeat(65)] {
        let listed = mcp
            .call_err(&session, "list_todos", json!({"queue": queue}))
            .await;
        let claimed = mcp
            .call_err(&session, "claim_next", json!({"queue": queue}))
            .await;
        assert_eq!(listed, claimed, "{queue:?}");
    }
    let (code, message) = mcp
        .call_err(&session, "list_todos", json!({"queue": "elsewhere"}))
        .await;
    assert_eq!(code, "forbidden");
    assert_eq!(
        message,
        "queue \"elsewhere\" is not in this endpoint's scope"
    );
    let (code, message) = mcp
        .call_err(&session, "list_todos", json!({"queue": "Bad Queue!"}))
        .await;
    assert_eq!(code, "invalid_argument");
    assert!(message.starts_with("queue: "), "{message}");

    for limit in [0, -1, 201, 10_000] {
        let (code, message) = mcp
            .call_err(&session, "list_todos", json!({"limit": limit}))
            .await;
        assert_eq!(code, "invalid_argument");
        assert_eq!(message, "limit: must be between 1 and 200", "{limit}");
    }
    for limit in [1, 50, 200] {
        let list = mcp
            .call_ok(
                &session,
                "list_todos",
                json!({"limit": limit, "queue": "inbox"}),
            )
            .await;
        assert_eq!(list["todos"].as_array().unwrap().len(), 1, "{limit}");
    }
    // Nothing was claimed by the refused claim_next calls.
    let list = mcp.call_ok(&session, "list_todos", json!({})).await;
    assert_eq!(list["todos"][0]["state"], "pending");
}

/// Pushes a todo whose payload is `{"blob": "<n bytes>"}`.
async fn push_payload(server: &Server, slug: &str, title: &str, n: usize) -> (String, Value) {
    let payload = json!({"blob": "ü".repeat(n / 2)});
    let v = server
        .api(
            Method::POST,
            &format!("/api/v1/endpoints/{slug}/todos"),
            Some(json!({"title": title, "payload": payload})),
        )
        .await;
    (v["id"].as_str().unwrap().to_owned(), payload)
}

#[tokio::test]
async fn claim_results_carry_the_payload_once_and_large_ones_by_reference() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;

    // Just under the 16 KiB inline limit (of the payload's JSON text): inline,
    // once.
    for (name, n) in [("claim_next", 16_000), ("claim", 16_000)] {
        let (id, payload) = push_payload(&server, &ep.slug, "medium", n).await;
        let size = payload.to_string().len();
        assert!(size > 15_000 && size <= 16 * 1024, "{size}");
        let args = if name == "claim" {
            json!({"id": id})
        } else {
            json!({})
        };
        let answer = mcp.call_raw(&session, name, args).await;
        answer.expect(200);
        assert!(
            answer.body.len() * 4 <= size * 5 + 4 * 4096,
            "{name}: {} bytes for a {size}-byte payload",
            answer.body.len()
        );
        let result = answer.json()["result"].clone();
        let structured = &result["structuredContent"];
        let row = if name == "claim" {
            structured
        } else {
            &structured["todo"]
        };
        assert_eq!(row["payload"], payload, "{name}: the payload inline");
        assert!(row.get("payload_truncated").is_none());
        // The text is a summary without the payload.
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        let text_row = if name == "claim" {
            &text
        } else {
            &text["todo"]
        };
        assert!(text_row.get("payload").is_none());
        assert_eq!(text_row["payload_size"], size);
        assert_eq!(text_row["id"], row["id"]);
        mcp.call_ok(&session, "complete", json!({"id": row["id"]}))
            .await;
    }

    // 19 KB and 40 KB: over the limit, left out: size, preview, get_todo.
    for n in [19_000, 40_000] {
        let (id, payload) = push_payload(&server, &ep.slug, "large", n).await;
        let size = payload.to_string().len();
        let answer = mcp.call_raw(&session, "claim", json!({"id": id})).await;
        answer.expect(200);
        assert!(
            answer.body.len() * 4 <= size * 5 + 4 * 4096,
            "{} bytes for {size}",
            answer.body.len()
        );
        assert!(answer.body.len() < 8 * 1024, "{}", answer.body.len());
        let row = answer.json()["result"]["structuredContent"].clone();
        assert_eq!(row["payload"], Value::Null);
        assert_eq!(row["payload_truncated"], true);
        assert_eq!(row["payload_size"], size);
        let preview = row["payload_preview"].as_str().unwrap();
        assert!(
            preview.len() <= 1024 && preview.len() > 1000,
            "{}",
            preview.len()
        );
        assert!(payload.to_string().starts_with(preview));
        let whole = mcp.call_ok(&session, "get_todo", json!({"id": id})).await;
        assert_eq!(whole["payload"], payload, "get_todo returns it whole");
        mcp.call_ok(&session, "release", json!({"id": id})).await;
    }
}

/// The payload reaches the agent once per todo: the claim carries it, and
/// `heartbeat`, `complete`, `fail` and `release` answer a short row without
/// it (issue 47: bytes to the agent for claim_next + complete of a 15 KB
/// payload at most the payload + 2 KiB).
#[tokio::test]
async fn the_finishing_verbs_answer_a_short_row_so_the_payload_comes_once() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let (_, payload) = push_payload(&server, &ep.slug, "a webhook's worth", 15_000).await;
    let size = payload.to_string().len();
    let claim = mcp.call_raw(&session, "claim_next", json!({})).await;
    claim.expect(200);
    let id = claim.json()["result"]["structuredContent"]["todo"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut total = claim.body.len();
    for (verb, args) in [
        ("heartbeat", json!({"id": id, "note": "halfway"})),
        ("complete", json!({"id": id, "result": {"ok": true}})),
    ] {
        let answer = mcp.call_raw(&session, verb, args).await;
        answer.expect(200);
        total += if verb == "complete" {
            answer.body.len()
        } else {
            0
        };
        assert!(
            answer.body.len() < 1024,
            "{verb}: {} bytes",
            answer.body.len()
        );
        let row = answer.json()["result"]["structuredContent"].clone();
        let keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "attempt",
                "dead_letter",
                "id",
                "lease_expires_at",
                "max_attempts",
                "next_retry_at",
                "queue",
                "state"
            ],
            "{verb}"
        );
    }
    assert!(
        total <= size + 2048,
        "claim_next + complete: {total} bytes for a {size}-byte payload"
    );

    // fail and release answer the same short row.
    for (verb, state) in [("fail", "failed"), ("release", "pending")] {
        let (id, _) = push_payload(&server, &ep.slug, verb, 15_000).await;
        mcp.call_ok(&session, "claim", json!({"id": id})).await;
        let row = mcp.call_ok(&session, verb, json!({"id": id})).await;
        assert_eq!(row["state"], state, "{verb}: {row}");
        assert!(
            row.get("payload").is_none() && row.get("title").is_none(),
            "{verb}: {row}"
        );
    }
}

#[tokio::test]
async fn tools_list_carries_titles_and_annotations() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let a = mcp.rpc(&session, 1, "tools/list", json!({})).await;
    a.expect(200);
    let tools = a.json()["result"]["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 15);
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        assert!(
            tool["title"].as_str().is_some_and(|t| !t.is_empty()),
            "{name}"
        );
        let hints = &tool["annotations"];
        let read_only = matches!(
            name,
            "list_todos" | "get_todo" | "queue_summary" | "get_default_lease" | "presence"
        );
        assert_eq!(hints["readOnlyHint"], read_only, "{name}");
        assert_eq!(hints["destructiveHint"], false, "{name}");
        assert_eq!(
            hints["idempotentHint"],
            !matches!(name, "claim" | "claim_next"),
            "{name}"
        );
        assert_eq!(hints["openWorldHint"], false, "{name}");
    }
}

#[tokio::test]
async fn a_long_history_keeps_claim_results_within_budget() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let id = server.push(&ep.slug, "busy").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let summary = "s".repeat(2048);
    for _ in 0..4 {
        mcp.call_ok(
            &session,
            "claim",
            json!({"id": id, "claimant": "c".repeat(128)}),
        )
        .await;
        mcp.call_ok(
            &session,
            "heartbeat",
            json!({"id": id, "note": "n".repeat(512)}),
        )
        .await;
        mcp.call_ok(&session, "release", json!({"id": id, "summary": summary}))
            .await;
    }
    let answer = mcp.call_raw(&session, "claim_next", json!({})).await;
    answer.expect(200);
    let v = answer.json();
    let claimed = &v["result"]["structuredContent"];
    let payload = claimed["todo"]["payload"].to_string().len();
    assert!(
        answer.body.len() <= payload + payload / 4 + 4096,
        "{} bytes",
        answer.body.len()
    );
    let prior = claimed["prior_attempts"].as_array().unwrap();
    assert_eq!(prior.len(), 4, "{claimed}");
    for attempt in prior {
        assert_eq!(attempt["summary_truncated"], true, "{attempt}");
        assert!(attempt["summary"].as_str().unwrap_or("").len() < 2048);
    }
    // get_todo has the history whole.
    let detail = mcp.call_ok(&session, "get_todo", json!({"id": id})).await;
    let whole = detail["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["summary"] == summary.as_str())
        .count();
    assert_eq!(whole, 4, "{detail}");
}
