//! The board over plain HTTP: sign-in and its cookie, CSRF on every form,
//! revocation taking effect at once, tenant isolation, escaping, the shift
//! preview, static files, and the live stream (its events, and its end on
//! shutdown). No browser: `browser.rs` has that.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use super::{Board, open_events};
use crate::support::api::{Body, HIGH_RATES, Server, make_human, vend};

async fn push(server: &Server, token: &str, slug: &str, body: Value) -> String {
    let v = server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{slug}/todos"),
            token,
            Body::Json(body),
        )
        .await;
    v["id"].as_str().unwrap().to_owned()
}

async fn presence(server: &Server, token: &str, slug: &str) -> Value {
    server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/endpoints/{slug}/presence"),
            token,
            Body::None,
        )
        .await
}

async fn endpoint_json(server: &Server, token: &str, slug: &str) -> Value {
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

async fn tokens(server: &Server, token: &str) -> Vec<Value> {
    server
        .expect(200, Method::GET, "/api/v1/tokens", token, Body::None)
        .await["tokens"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_mints_a_board_token_in_an_http_only_cookie() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let mut board = Board::new(&server.addr);

    // Not signed in: every page redirects to the sign-in form.
    for path in ["/", "/board/todos", "/board/tokens", "/board/vend"] {
        let page = board.get(path).await;
        assert_eq!(page.status, 303, "{path}");
        assert_eq!(page.location.as_deref(), Some("/board/sign-in"), "{path}");
    }
    let form = board.get("/board/sign-in").await;
    assert_eq!(form.status, 200);
    assert!(form.body.contains(r#"name="token""#));

    // A wrong token: 401, the field named, and nothing written.
    let before = tokens(&server, &admin).await.len();
    for wrong in ["", "sbk_not-a-human-token", "sbh_not-live"] {
        let page = board.try_sign_in(wrong).await;
        assert_eq!(page.status, 401, "{wrong:?}");
        assert!(page.body.contains("token:"), "{}", page.body);
        assert!(
            !page
                .set_cookie
                .as_deref()
                .is_some_and(|c| c.starts_with("sb_board=")),
            "no session: {:?}",
            page.set_cookie
        );
    }
    assert_eq!(tokens(&server, &admin).await.len(), before);

    let signed = board.sign_in(&admin).await;
    assert_eq!(signed.location.as_deref(), Some("/"));
    let set = signed.set_cookie.unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(set.contains(attribute), "{set}");
    }
    // Plain http: not Secure (the browser would drop it).
    assert!(!set.contains("Secure"), "{set}");
    let cookie = board.cookie.clone().unwrap();
    assert!(
        cookie.starts_with("sbh_") && cookie != admin,
        "a new token, not the typed one"
    );

    // The new token is listed as the board's, expiring in 12 h.
    let listed = tokens(&server, &admin).await;
    let mine: Vec<&Value> = listed
        .iter()
        .filter(|t| t["label"] == "board sign-in")
        .collect();
    assert_eq!(mine.len(), 1, "{listed:?}");
    assert!(cookie.starts_with(mine[0]["prefix"].as_str().unwrap()));
    assert!(mine[0]["expires_at"].is_string());

    let overview = board.get("/").await;
    assert_eq!(overview.status, 200);
    assert!(overview.body.contains("admin"));
    // Never cached, never framed, nothing from another origin.
    assert_eq!(overview.cache_control.as_deref(), Some("no-store"));
    let csp = overview.csp.unwrap();
    assert!(
        csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );

    // Unknown board paths are the board's 404 page; `/board` is the overview.
    let missing = board.get("/board/no-such-page").await;
    assert_eq!(missing.status, 404);
    assert!(missing.body.contains("Not found"));
    assert_eq!(board.get("/board").await.location.as_deref(), Some("/"));

    // Revoking the board's token through the API signs the browser out at once.
    let id = mine[0]["id"].as_str().unwrap();
    server
        .call(
            Method::DELETE,
            &format!("/api/v1/tokens/{id}"),
            &admin,
            Body::None,
        )
        .await;
    let page = board.get("/").await;
    assert_eq!(page.status, 303);
    assert_eq!(page.location.as_deref(), Some("/board/sign-in"));
    // An htmx refresh is told to take the whole page there.
    let refresh = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(server.url("/"))
        .header("cookie", format!("sb_board={cookie}"))
        .header("hx-request", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(refresh.status(), 401);
    assert_eq!(refresh.headers()["hx-redirect"], "/board/sign-in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_form_needs_the_csrf_token_and_sign_out_revokes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let csrf = board.csrf().await;
    assert_eq!(csrf.len(), 64);

    let presence_path = format!("/board/endpoints/{}/presence", alpha.slug);
    let forms: Vec<(String, Vec<(&str, &str)>)> = vec![
        (presence_path.clone(), vec![("presence", "out")]),
        (
            format!("/board/endpoints/{}/shift", alpha.slug),
            vec![("shift", "Mon 09:00-10:00")],
        ),
        (
            format!("/board/endpoints/{}/revoke", alpha.slug),
            vec![("confirm", alpha.slug.as_str())],
        ),
        (
            format!("/board/endpoints/{}/lease", alpha.slug),
            vec![("default_lease_ttl_seconds", "900")],
        ),
        ("/board/tokens".into(), vec![("label", "x")]),
        ("/board/agents".into(), vec![("name", "beta")]),
        ("/board/vend".into(), vec![("agent", "gamma")]),
        ("/board/sign-out".into(), vec![]),
    ];
    let wrong = "0".repeat(64);
    for (path, fields) in &forms {
        let missing = board.post(path, fields).await;
        assert_eq!(missing.status, 403, "{path} without csrf: {}", missing.body);
        assert!(missing.body.contains("csrf"), "{}", missing.body);
        let mut with_wrong = fields.clone();
        with_wrong.push(("csrf", &wrong));
        assert_eq!(board.post(path, &with_wrong).await.status, 403, "{path}");
    }
    // Nothing was written by any of them.
    let p = presence(&server, &admin, &alpha.slug).await;
    assert_eq!(
        (p["presence"].as_str(), p["shift"].as_str()),
        (Some("in"), None)
    );
    let agents = server
        .expect(200, Method::GET, "/api/v1/agents", &admin, Body::None)
        .await;
    assert_eq!(agents["agents"].as_array().unwrap().len(), 1);
    assert_eq!(
        tokens(&server, &admin).await.len(),
        2,
        "first start + board"
    );

    // With the token, the same form works.
    let ok = board
        .post(
            &presence_path,
            &[("presence", "out"), ("for", "1h"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(ok.status, 303, "{}", ok.body);
    assert!(
        ok.location
            .unwrap()
            .starts_with(&format!("/board/endpoints/{}?notice=", alpha.slug))
    );
    let p = presence(&server, &admin, &alpha.slug).await;
    assert_eq!(
        (p["presence"].as_str(), p["source"].as_str()),
        (Some("out"), Some("operator"))
    );
    assert!(p["until"].is_string());

    // A bad field is named, and changes nothing.
    let bad = board
        .post(
            &presence_path,
            &[("presence", "in"), ("for", "soon"), ("csrf", &csrf)],
        )
        .await;
    assert!(
        bad.location.unwrap().contains("error=for"),
        "the field is named"
    );
    assert_eq!(
        presence(&server, &admin, &alpha.slug).await["presence"],
        "out"
    );

    // The until picker: a wall-clock time in the endpoint's zone (UTC without a shift).
    let picked = board
        .post(
            &presence_path,
            &[
                ("presence", "out"),
                ("until", "2099-01-01T09:00"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert!(picked.location.unwrap().contains("notice="));
    let p = presence(&server, &admin, &alpha.slug).await;
    assert_eq!(p["until"], "2099-01-01T09:00:00.000Z", "{p}");
    let nonsense = board
        .post(
            &presence_path,
            &[("presence", "in"), ("until", "tomorrow"), ("csrf", &csrf)],
        )
        .await;
    assert!(nonsense.location.unwrap().contains("error=until"));
    assert_eq!(
        presence(&server, &admin, &alpha.slug).await["presence"],
        "out"
    );

    // The default lease: bounds checked by the domain, the field named.
    let lease_path = format!("/board/endpoints/{}/lease", alpha.slug);
    let lease = |value: &'static str| {
        let board = &board;
        let (path, csrf) = (lease_path.clone(), csrf.clone());
        async move {
            board
                .post(
                    &path,
                    &[("default_lease_ttl_seconds", value), ("csrf", &csrf)],
                )
                .await
                .location
                .unwrap()
        }
    };
    assert!(lease("900").await.contains("notice="));
    assert_eq!(
        endpoint_json(&server, &admin, &alpha.slug).await["default_lease_ttl_seconds"],
        900
    );
    assert!(
        lease("30")
            .await
            .contains("error=default_lease_ttl_seconds")
    );
    assert!(
        lease("soon")
            .await
            .contains("error=default_lease_ttl_seconds")
    );
    assert_eq!(
        endpoint_json(&server, &admin, &alpha.slug).await["default_lease_ttl_seconds"],
        900,
        "nothing written"
    );
    assert!(lease("").await.contains("notice="));
    assert!(
        endpoint_json(&server, &admin, &alpha.slug).await["default_lease_ttl_seconds"].is_null(),
        "empty returns to the server's default"
    );

    // An invalid shift is refused with the grammar's message; nothing stored.
    let shift = board
        .post(
            &format!("/board/endpoints/{}/shift", alpha.slug),
            &[("shift", "Mon 25:00-26:00"), ("csrf", &csrf)],
        )
        .await;
    assert!(shift.location.unwrap().contains("error=shift"));
    assert!(presence(&server, &admin, &alpha.slug).await["shift"].is_null());

    // Sign-out revokes the board's token and clears the cookie.
    let out = board.post("/board/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, 303);
    assert!(out.set_cookie.unwrap().contains("Max-Age=0"));
    let listed = tokens(&server, &admin).await;
    let board_token = listed
        .iter()
        .find(|t| t["label"] == "board sign-in")
        .unwrap();
    assert!(board_token["revoked_at"].is_string(), "{board_token}");
    assert_eq!(board.get("/").await.status, 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_sees_and_touches_nothing_of_another() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    let todo = push(
        &server,
        &admin,
        &alpha.slug,
        json!({ "title": "admin's secret plan" }),
    )
    .await;
    let bob = make_human(&server, "bob");
    let mut board = Board::new(&server.addr);
    board.sign_in(&bob.token).await;
    let csrf = board.csrf().await;

    for path in ["/", "/board/todos", "/board/agents", "/board/tokens"] {
        let page = board.get(path).await;
        assert_eq!(page.status, 200, "{path}");
        for leak in [alpha.slug.as_str(), todo.as_str(), "secret plan", "alpha"] {
            assert!(!page.body.contains(leak), "{path} shows {leak:?}");
        }
    }
    // A foreign endpoint or todo answers exactly like a missing one.
    for path in [
        format!("/board/endpoints/{}", alpha.slug),
        format!("/board/endpoints/{}", alpha.id),
        format!("/board/todos/{todo}"),
        "/board/endpoints/no-such-endpoint".to_owned(),
    ] {
        let page = board.get(&path).await;
        assert_eq!(page.status, 404, "{path}");
        assert!(!page.body.contains("secret plan"));
    }
    let filtered = board
        .get(&format!("/board/todos?endpoint={}", alpha.slug))
        .await;
    assert!(
        !filtered.body.contains(&todo),
        "a foreign endpoint filter shows nothing"
    );
    for (path, fields) in [
        (
            format!("/board/endpoints/{}/presence", alpha.slug),
            vec![("presence", "out"), ("csrf", csrf.as_str())],
        ),
        (
            format!("/board/endpoints/{}/revoke", alpha.slug),
            vec![("confirm", alpha.slug.as_str()), ("csrf", csrf.as_str())],
        ),
        (
            format!("/board/todos/{todo}/retry"),
            vec![("csrf", csrf.as_str())],
        ),
    ] {
        assert_eq!(board.post(&path, &fields).await.status, 404, "{path}");
    }
    let p = presence(&server, &admin, &alpha.slug).await;
    assert_eq!(p["presence"], "in");
    let shown = server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/endpoints/{}", alpha.slug),
            &admin,
            Body::None,
        )
        .await;
    assert_eq!(shown["state"], "active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn titles_and_payloads_are_escaped_and_the_shift_preview_uses_the_grammar() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    let todo = push(
        &server,
        &admin,
        &alpha.slug,
        json!({
            "title": "<script>alert('title')</script>",
            "payload": { "html": "<img src=x onerror=alert(1)>" },
        }),
    )
    .await;
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    for path in [
        "/".to_owned(),
        "/board/todos".to_owned(),
        format!("/board/endpoints/{}", alpha.slug),
        format!("/board/todos/{todo}"),
    ] {
        let page = board.get(&path).await;
        assert_eq!(page.status, 200, "{path}");
        assert!(!page.body.contains("<script>alert"), "{path}");
        assert!(!page.body.contains("<img src=x"), "{path}");
    }
    let detail = board.get(&format!("/board/todos/{todo}")).await;
    assert!(
        detail.body.contains("&#60;script&#62;alert("),
        "{}",
        detail.body
    );
    // The payload is JSON-pretty-printed, then HTML-escaped.
    assert!(
        detail.body.contains("&#60;img src=x onerror=alert(1)&#62;"),
        "{}",
        detail.body
    );

    let valid = board
        .get("/board/shift-preview?shift=TZ%3DEurope%2FBerlin%20Mon-Fri%2009%3A00-17%3A00")
        .await;
    assert_eq!(valid.status, 200);
    assert!(
        valid.body.contains(r#"data-valid="true""#),
        "{}",
        valid.body
    );
    assert!(valid.body.contains("TZ=Europe/Berlin Mon-Fri 09:00-17:00"));
    assert_eq!(valid.body.matches("<li>").count(), 4, "{}", valid.body);
    let invalid = board
        .get("/board/shift-preview?shift=Mon%2025%3A00-26%3A00")
        .await;
    assert!(
        invalid.body.contains(r#"data-valid="false""#),
        "{}",
        invalid.body
    );
    assert!(
        invalid.body.contains("shift: "),
        "the field is named: {}",
        invalid.body
    );
    let empty = board.get("/board/shift-preview?shift=").await;
    assert!(empty.body.contains("No shift"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_files_are_embedded_and_cached_for_a_year() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    for (file, kind) in [
        ("htmx-2.0.11.min.js", "text/javascript"),
        ("htmx-ext-sse-2.2.4.min.js", "text/javascript"),
        ("board-1.css", "text/css"),
        ("board-1.js", "text/javascript"),
    ] {
        let resp = http
            .get(server.url(&format!("/board/static/{file}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{file}");
        let header = |n: &str| resp.headers()[n].to_str().unwrap().to_owned();
        assert!(header("content-type").starts_with(kind), "{file}");
        assert!(
            header("cache-control").contains("max-age=31536000"),
            "{file}"
        );
        assert!(!resp.bytes().await.unwrap().is_empty());
    }
    let missing = http
        .get(server.url("/board/static/nope.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_stream_says_what_changed_and_ends_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    // Without a session, no stream.
    let anonymous = Board::new(&server.addr).get("/board/events").await;
    assert_eq!(anonymous.status, 303);

    let mut events = open_events(&board).await;
    events
        .expect_changed("connected", Duration::from_secs(5))
        .await;
    // An API push publishes nothing on the bus: the stream's poll finds it.
    push(&server, &admin, &alpha.slug, json!({ "title": "live" })).await;
    events.expect_changed("todos", Duration::from_secs(8)).await;
    // A presence write (through the API) is a presence change.
    server
        .expect(
            200,
            Method::PUT,
            &format!("/api/v1/endpoints/{}/presence", alpha.slug),
            &admin,
            Body::Json(json!({ "presence": "out" })),
        )
        .await;
    events
        .expect_changed("presence", Duration::from_secs(8))
        .await;

    // A bob stream hears nothing of admin's changes.
    let bob = make_human(&server, "bob");
    let mut bob_board = Board::new(&server.addr);
    bob_board.sign_in(&bob.token).await;
    let mut bob_events = open_events(&bob_board).await;
    bob_events
        .expect_changed("connected", Duration::from_secs(5))
        .await;
    push(
        &server,
        &admin,
        &alpha.slug,
        json!({ "title": "not bob's" }),
    )
    .await;
    events.expect_changed("todos", Duration::from_secs(8)).await;
    let heard = bob_events.next(Duration::from_secs(3)).await;
    assert!(heard.is_none(), "bob heard {heard:?}");

    // Revoking bob's board token ends his stream, after a last refresh.
    let bob_tokens = tokens(&server, &bob.token).await;
    let bob_board_token = bob_tokens
        .iter()
        .find(|t| t["label"] == "board sign-in")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    server
        .call(
            Method::DELETE,
            &format!("/api/v1/tokens/{bob_board_token}"),
            &bob.token,
            Body::None,
        )
        .await;
    bob_events
        .expect_changed("signed-out", Duration::from_secs(8))
        .await;
    assert!(bob_events.next(Duration::from_secs(3)).await.is_none());

    // Shutdown ends the streams: the server exits well within its grace.
    let started = Instant::now();
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert!(events.next(Duration::from_secs(2)).await.is_none());
}

async fn state_of(server: &Server, token: &str, id: &str) -> String {
    server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/todos/{id}"),
            token,
            Body::None,
        )
        .await["state"]
        .as_str()
        .unwrap_or_else(|| panic!("a state"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_and_single_actions_act_on_the_selection_or_the_filter() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    let beta = vend(&server, &admin, json!({ "agent": "beta" })).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(
            push(
                &server,
                &admin,
                &alpha.slug,
                json!({ "title": format!("a{n}") }),
            )
            .await,
        );
    }
    let other = push(
        &server,
        &admin,
        &beta.slug,
        json!({ "title": "b0", "kind": "deploy" }),
    )
    .await;
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let csrf = board.csrf().await;

    // One todo's own Cancel.
    let page = board.get(&format!("/board/todos/{}", ids[0])).await;
    assert!(page.body.contains(r#"id="todo-cancel""#));
    let done = board
        .post(
            &format!("/board/todos/{}/cancel", ids[0]),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(done.status, 303);
    assert_eq!(state_of(&server, &admin, &ids[0]).await, "cancelled");

    // The ticked ones.
    let ticked = board
        .post(
            "/board/todos/bulk",
            &[
                ("csrf", &csrf),
                ("bulk", "cancel:selected"),
                ("ids", &ids[1]),
            ],
        )
        .await;
    assert!(
        ticked.location.unwrap().contains("notice=cancelled+1+todo"),
        "one cancelled"
    );
    assert_eq!(state_of(&server, &admin, &ids[1]).await, "cancelled");
    assert_eq!(state_of(&server, &admin, &ids[2]).await, "pending");

    // "All matching" needs a filter, and acts only on what it matches.
    let unfiltered = board
        .post(
            "/board/todos/bulk",
            &[("csrf", &csrf), ("bulk", "cancel:matching")],
        )
        .await;
    assert!(unfiltered.location.unwrap().contains("error=filter"));
    assert_eq!(state_of(&server, &admin, &ids[2]).await, "pending");
    // The first POST only asks, with the count it will touch; nothing changes.
    let matching = [
        ("csrf", csrf.as_str()),
        ("bulk", "cancel:matching"),
        ("endpoint", alpha.slug.as_str()),
        ("state", "pending"),
    ];
    let asked = board.post("/board/todos/bulk", &matching).await;
    assert_eq!(asked.status, 200, "a confirmation page: {}", asked.body);
    assert!(
        asked
            .body
            .contains(r#"<span id="bulk-confirm-count">1</span>"#),
        "{}",
        asked.body
    );
    assert!(asked.body.contains(r#"name="confirm" value="1""#));
    assert_eq!(state_of(&server, &admin, &ids[2]).await, "pending");
    // A count that no longer holds asks again, with the new count.
    let mut stale = matching.to_vec();
    stale.push(("confirm", "5"));
    let again = board.post("/board/todos/bulk", &stale).await;
    assert_eq!(again.status, 200);
    assert!(again.body.contains("changed from 5 to 1"), "{}", again.body);
    assert_eq!(state_of(&server, &admin, &ids[2]).await, "pending");
    // The second POST carries the count it was shown, and acts.
    let mut confirmed = matching.to_vec();
    confirmed.push(("confirm", "1"));
    let filtered = board.post("/board/todos/bulk", &confirmed).await;
    let location = filtered.location.unwrap();
    assert!(location.contains("notice=cancelled+1+todo"), "{location}");
    assert!(
        location.starts_with(&format!(
            "/board/todos?state=pending&endpoint={}",
            alpha.slug
        )),
        "{location}"
    );
    assert_eq!(state_of(&server, &admin, &ids[2]).await, "cancelled");
    assert_eq!(
        state_of(&server, &admin, &other).await,
        "pending",
        "beta's is untouched"
    );

    // Retry everything cancelled of alpha: confirmed for 3, all three pending again.
    let retry_all = [
        ("csrf", csrf.as_str()),
        ("bulk", "retry:matching"),
        ("endpoint", alpha.slug.as_str()),
        ("state", "cancelled"),
    ];
    let asked = board.post("/board/todos/bulk", &retry_all).await;
    assert!(
        asked
            .body
            .contains(r#"<span id="bulk-confirm-count">3</span>"#),
        "{}",
        asked.body
    );
    let mut confirmed = retry_all.to_vec();
    confirmed.push(("confirm", "3"));
    board.post("/board/todos/bulk", &confirmed).await;
    for id in &ids {
        assert_eq!(state_of(&server, &admin, id).await, "pending");
    }

    // The kind and title filters narrow the table.
    let by_kind = board.get("/board/todos?kind=deploy").await;
    assert!(by_kind.body.contains(&other) && !by_kind.body.contains(&ids[0]));
    let by_title = board.get("/board/todos?q=A1").await;
    assert!(by_title.body.contains(&ids[1]) && !by_title.body.contains(&ids[2]));
    let bad = board.get("/board/todos?state=lost").await;
    assert!(
        bad.body.contains("state: unknown state"),
        "the field is named"
    );

    // Another human's ids change nothing.
    let bob = make_human(&server, "bob");
    let mut bob_board = Board::new(&server.addr);
    bob_board.sign_in(&bob.token).await;
    let bob_csrf = bob_board.csrf().await;
    let foreign = bob_board
        .post(
            "/board/todos/bulk",
            &[
                ("csrf", &bob_csrf),
                ("bulk", "cancel:selected"),
                ("ids", &ids[0]),
            ],
        )
        .await;
    assert!(foreign.location.unwrap().contains("cancelled+0+todo"));
    assert_eq!(state_of(&server, &admin, &ids[0]).await, "pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_registered_and_edited_through_forms() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let csrf = board.csrf().await;
    let agent = |name: &'static str| {
        let server = &server;
        let admin = admin.clone();
        async move {
            server
                .expect(
                    200,
                    Method::GET,
                    &format!("/api/v1/agents/{name}"),
                    &admin,
                    Body::None,
                )
                .await
        }
    };

    let bad = board
        .post("/board/agents", &[("csrf", &csrf), ("name", "Not A Name")])
        .await;
    assert!(bad.location.unwrap().contains("error=name"));
    let made = board
        .post(
            "/board/agents",
            &[
                ("csrf", &csrf),
                ("name", "reviewer"),
                ("kind", "heartbeat"),
                ("description", "reads PRs"),
            ],
        )
        .await;
    assert!(made.location.unwrap().contains("notice=agent+reviewer"));
    let a = agent("reviewer").await;
    assert_eq!(
        (a["kind"].as_str(), a["description"].as_str()),
        (Some("heartbeat"), Some("reads PRs"))
    );
    assert!(board.get("/board/agents").await.body.contains("reads PRs"));

    let edit = "/board/agents/reviewer";
    let saved = board
        .post(
            edit,
            &[
                ("csrf", &csrf),
                ("kind", "task"),
                ("expected_interval_seconds", "600"),
                ("description", ""),
            ],
        )
        .await;
    assert!(saved.location.unwrap().contains("notice="));
    let a = agent("reviewer").await;
    assert_eq!(a["kind"], "task");
    assert_eq!(a["expected_interval_seconds"], 600);
    assert!(a["description"].is_null(), "an empty description clears it");

    for (value, _) in [("soon", ()), ("0", ())] {
        let refused = board
            .post(
                edit,
                &[
                    ("csrf", &csrf),
                    ("kind", "task"),
                    ("expected_interval_seconds", value),
                ],
            )
            .await;
        let location = refused.location.unwrap();
        assert!(
            location.contains("error=expected_interval_seconds"),
            "{value}: {location}"
        );
    }
    assert_eq!(
        agent("reviewer").await["expected_interval_seconds"],
        600,
        "nothing written"
    );
    assert_eq!(
        board.post(edit, &[("kind", "task")]).await.status,
        403,
        "no csrf"
    );

    // Another human's agent is not found.
    let bob = make_human(&server, "bob");
    let mut bob_board = Board::new(&server.addr);
    bob_board.sign_in(&bob.token).await;
    let bob_csrf = bob_board.csrf().await;
    let foreign = bob_board
        .post(edit, &[("csrf", &bob_csrf), ("kind", "session")])
        .await;
    assert_eq!(foreign.status, 404);
    assert_eq!(agent("reviewer").await["kind"], "task");
}

/// The first `<pre … id="{id}">…</pre>` of a page.
fn pre_text(html: &str, id: &str) -> String {
    let marker = format!(r#"id="{id}">"#);
    let start = html.find(&marker).unwrap_or_else(|| panic!("no #{id}")) + marker.len();
    let end = start + html[start..].find("</pre>").unwrap();
    html[start..end].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_made_rotated_and_deleted_with_their_url_shown_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let csrf = board.csrf().await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let deliver = |url: String| {
        let http = http.clone();
        async move {
            http.post(url)
                .header("content-type", "application/json")
                .body(r#"{"title":"from the webhook"}"#)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };

    let made = board
        .post(
            &format!("/board/endpoints/{}/webhooks", alpha.slug),
            &[("csrf", &csrf), ("queue", "inbox")],
        )
        .await;
    assert_eq!(made.status, 200, "the reveal is the answer itself");
    let url = pre_text(&made.body, "webhook-url");
    assert!(
        url.starts_with(&format!("http://{}/webhooks/w/", server.addr)),
        "{url}"
    );
    assert_eq!(deliver(url.clone()).await, 202);
    // Shown once: the endpoint page lists the webhook, never its URL.
    let page = board.get(&format!("/board/endpoints/{}", alpha.slug)).await;
    assert!(page.body.contains("data-webhook=") && !page.body.contains(&url));
    let id_start = page.body.find(r#"data-webhook=""#).unwrap() + r#"data-webhook=""#.len();
    let id = page.body[id_start..].split('"').next().unwrap().to_owned();

    // Another human can neither rotate nor delete it.
    let bob = make_human(&server, "bob");
    let mut bob_board = Board::new(&server.addr);
    bob_board.sign_in(&bob.token).await;
    let bob_csrf = bob_board.csrf().await;
    for action in ["rotate", "delete"] {
        let foreign = bob_board
            .post(
                &format!("/board/webhooks/{id}/{action}"),
                &[("csrf", &bob_csrf)],
            )
            .await;
        assert_eq!(foreign.status, 404, "{action}");
    }
    assert_eq!(deliver(url.clone()).await, 202, "still working");

    let rotated = board
        .post(&format!("/board/webhooks/{id}/rotate"), &[("csrf", &csrf)])
        .await;
    assert_eq!(rotated.status, 200);
    let new_url = pre_text(&rotated.body, "webhook-url");
    assert_ne!(new_url, url);
    assert_eq!(deliver(url).await, 404, "the old URL stops at once");
    assert_eq!(deliver(new_url.clone()).await, 202);

    let deleted = board
        .post(&format!("/board/webhooks/{id}/delete"), &[("csrf", &csrf)])
        .await;
    assert_eq!(deleted.status, 303);
    assert_eq!(deliver(new_url).await, 404);

    // A signed one reveals its secret too.
    let signed = board
        .post(
            &format!("/board/endpoints/{}/webhooks", alpha.slug),
            &[("csrf", &csrf), ("queue", "inbox"), ("signed", "1")],
        )
        .await;
    assert!(!pre_text(&signed.body, "webhook-secret").is_empty());
}

/// Form posts spend the human's write budget (`--api-write-rate`): past it,
/// 429 with `Retry-After`, and a refused post writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn form_posts_past_the_write_rate_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(
        dir.path(),
        &["--api-read-rate", "1000", "--api-write-rate", "0.5"],
    );
    let admin = server.first_token.clone();
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let csrf = board.csrf().await;

    let mut accepted = Vec::new();
    let mut refused = 0;
    for n in 0..12 {
        let name = format!("agent-{n}");
        let page = board
            .post("/board/agents", &[("csrf", &csrf), ("name", &name)])
            .await;
        match page.status {
            303 => accepted.push(name),
            429 => {
                refused += 1;
                let wait: u64 = page
                    .retry_after
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .expect("a 429 says when to retry");
                assert!((1..=2).contains(&wait), "Retry-After {wait}");
                assert!(page.body.contains("Too many"), "{}", page.body);
            }
            other => panic!("{name}: {other} {}", page.body),
        }
    }
    // Burst 2 (4 x 0.5/s): the rest of the dozen within a second or two is refused.
    assert!(
        refused >= 8,
        "{refused} refused, {} accepted",
        accepted.len()
    );
    let listed = server
        .expect(200, Method::GET, "/api/v1/agents", &admin, Body::None)
        .await;
    let names: Vec<&str> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .filter(|n| n.starts_with("agent-"))
        .collect();
    let mut expected: Vec<&str> = accepted.iter().map(String::as_str).collect();
    let mut names = names;
    names.sort_unstable();
    expected.sort_unstable();
    assert_eq!(names, expected, "exactly the accepted posts were written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vend_reveal_shows_the_unattended_lines() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let csrf = board.csrf().await;
    let nonce = super::nonce_of(&board.get("/board/vend").await.body);
    let reveal = board
        .post(
            "/board/vend",
            &[("agent", "runner"), ("csrf", &csrf), ("nonce", &nonce)],
        )
        .await;
    assert_eq!(reveal.status, 200, "{}", reveal.body);
    for (id, start) in [
        ("snippet-unattended", "claude -p "),
        ("snippet-work-claude", "switchboard work http://"),
        ("snippet-work-codex", "switchboard work http://"),
    ] {
        let marker = format!(r#"id="{id}">"#);
        let at = reveal.body.find(&marker).unwrap_or_else(|| panic!("{id}")) + marker.len();
        assert!(
            reveal.body[at..].starts_with(start),
            "{id}: {}",
            &reveal.body[at..at + 80]
        );
    }
    assert!(
        reveal
            .body
            .contains("--allowedTools &#34;mcp__switchboard-runner&#34;")
            || reveal
                .body
                .contains("--allowedTools &quot;mcp__switchboard-runner&quot;"),
        "{}",
        reveal.body
    );
    assert!(reveal.body.contains("-- codex exec "));
}

/// The overview's totals add up: every card is counted, a revoked one as
/// revoked (it said "1 endpoints" above 2 cards).
#[tokio::test]
async fn the_overview_totals_count_every_card() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let kept = vend(&server, &admin, json!({"agent": "kept"})).await;
    let gone = vend(&server, &admin, json!({"agent": "gone"})).await;
    server
        .expect(
            200,
            Method::POST,
            &format!("/api/v1/endpoints/{}/revoke", gone.slug),
            &admin,
            Body::None,
        )
        .await;
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let page = board.get("/").await;
    assert_eq!(page.status, 200);
    let totals =
        &page.body[page.body.find("Totals").unwrap()..page.body.find("</section>").unwrap()];
    assert!(
        totals.contains(r#"id="total-endpoints">2</span> endpoints"#)
            && totals.contains(r#"data-total="revoked">1</span> revoked"#),
        "{totals}"
    );
    assert!(page.body.contains(&kept.slug) && page.body.contains(&gone.slug));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_page_lists_its_schedules_with_the_next_occurrence() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let page = board.get(&format!("/board/endpoints/{}", alpha.slug)).await;
    assert!(page.body.contains("switchboard schedule add"), "none yet");
    let s = server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/schedules", alpha.slug),
            &admin,
            Body::Json(json!({ "cron": "0 9 * * mon-fri", "tz": "Europe/Berlin", "title": "<b>standup</b> {date}" })),
        )
        .await;
    let id = s["id"].as_str().unwrap();
    let page = board.get(&format!("/board/endpoints/{}", alpha.slug)).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(&format!(r#"data-schedule="{id}""#)),
        "{}",
        page.body
    );
    assert!(page.body.contains("<code>0 9 * * mon-fri</code>"));
    assert!(
        page.body.contains("&#60;b&#62;standup&#60;/b&#62; {date}")
            && !page.body.contains("<b>standup"),
        "escaped"
    );
    assert!(
        page.body.contains("09:00"),
        "the next occurrence in the schedule's zone"
    );
    server
        .expect(
            200,
            Method::POST,
            &format!("/api/v1/schedules/{id}/pause"),
            &admin,
            Body::None,
        )
        .await;
    let page = board.get(&format!("/board/endpoints/{}", alpha.slug)).await;
    assert!(page.body.contains("<strong>paused</strong>"));
}
