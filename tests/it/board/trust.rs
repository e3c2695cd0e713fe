//! The board an operator trusts (issue 44, item 6), over plain HTTP: the
//! counts add up (a retrying failure is counted) and follow the todos
//! page's filter, work nobody hears is never a calm `idle`, failed rows say
//! when they retry and dead letters why they died, times carry their zone,
//! the attempt timeline speaks in words, a create form is submitted once,
//! and a todo is pushed and deleted from the board. `browser.rs` checks
//! what only a browser shows (layout, wrapping, 390 px).

use reqwest::Method;
use serde_json::{Value, json};

use super::{Board, nonce_of};
use crate::support::api::{Body, HIGH_RATES, Server, claim_next, open_store, vend};

async fn push(server: &Server, token: &str, slug: &str, title: &str) -> String {
    server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{slug}/todos"),
            token,
            Body::Json(json!({ "title": title })),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn todo_json(server: &Server, token: &str, id: &str) -> Value {
    server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/todos/{id}"),
            token,
            Body::None,
        )
        .await
}

/// The endpoint's todos, as the API lists them.
async fn listed(server: &Server, token: &str, slug: &str) -> Vec<Value> {
    server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/todos?endpoint={slug}"),
            token,
            Body::None,
        )
        .await["todos"]
        .as_array()
        .unwrap()
        .clone()
}

/// The text between `id="{id}">` and the next `<`.
fn text_of(html: &str, id: &str) -> String {
    let marker = format!(r#"id="{id}">"#);
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no #{id} in {html}"))
        + marker.len();
    html[start..start + html[start..].find('<').unwrap()].to_owned()
}

/// A todo that dies on its first failure, failed with `summary`: a dead letter.
async fn dead_letter(server: &Server, endpoint_id: &str, summary: &str) -> String {
    use switchboard::store::prelude::*;
    use switchboard::store::{ClaimOptions, Finish, NewTodo};
    let store = open_store(&server.database).await;
    let mut new = NewTodo::new(endpoint_id, "inbox", "doomed");
    new.max_attempts = Some(1);
    store.create_todo(new).await.unwrap();
    let endpoint = store.unscoped_get_endpoint(endpoint_id).await.unwrap();
    let caller = endpoint.caller();
    let claimed = store
        .claim_next(&caller, None, ClaimOptions::default())
        .await
        .unwrap()
        .expect("the doomed todo");
    let failed = store
        .fail(
            &caller,
            &claimed.todo.id,
            Finish {
                summary: Some(summary.to_owned()),
                ..Finish::default()
            },
        )
        .await
        .unwrap();
    assert!(failed.dead_letter, "one attempt, failed: dead");
    store.close().await;
    claimed.todo.id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_count_adds_up_and_follows_the_filter() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    let beta = vend(&server, &admin, json!({ "agent": "beta" })).await;
    // alpha: one dead letter, one failed waiting for its retry, one claimed, one pending.
    let dead = dead_letter(&server, &alpha.id, "exit 2: the build broke").await;
    let retrying = push(&server, &admin, &alpha.slug, "flaky").await;
    push(&server, &admin, &alpha.slug, "held by the agent").await;
    push(&server, &admin, &alpha.slug, "waiting").await;
    assert_eq!(
        claim_next(&server.database, &alpha.id, true).await,
        retrying
    );
    claim_next(&server.database, &alpha.id, false).await;
    // beta: two pending, and one delayed for an hour.
    push(&server, &admin, &beta.slug, "b1").await;
    push(&server, &admin, &beta.slug, "b2").await;
    server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/todos", beta.slug),
            &admin,
            Body::Json(json!({ "title": "later", "delay": "1h" })),
        )
        .await;

    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let overview = board.get("/").await.body;
    for (id, n) in [
        ("total-endpoints", "2"),
        ("total-pending", "3"),
        ("total-retrying", "1"),
        ("total-delayed", "1"),
        ("total-claimed", "1"),
        ("total-dead", "1"),
    ] {
        assert_eq!(text_of(&overview, id), n, "{id}");
    }
    let card = &overview[overview
        .find(&format!(r#"data-slug="{}""#, alpha.slug))
        .unwrap()..];
    let card = &card[..card.find("</article>").unwrap()];
    assert!(
        card.contains(r#"data-count="retrying">1 retrying"#),
        "{card}"
    );
    assert!(
        card.contains("data-oldest=") && card.contains("pending, created"),
        "{card}"
    );

    // The todos page: counts of every endpoint, labelled so.
    let all = board.get("/board/todos").await.body;
    assert_eq!(text_of(&all, "count-pending"), "3");
    assert_eq!(text_of(&all, "count-retrying"), "1");
    assert_eq!(text_of(&all, "count-delayed"), "1");
    assert!(all.contains(r#"data-scope="all 2 endpoints""#), "{all}");
    assert!(all.contains(r#"id="oldest-pending""#));
    // Filtered by endpoint, the counts follow; the other filters are named.
    let only_alpha = board
        .get(&format!("/board/todos?endpoint={}", alpha.slug))
        .await
        .body;
    assert_eq!(text_of(&only_alpha, "count-pending"), "1");
    assert_eq!(text_of(&only_alpha, "count-claimed"), "1");
    assert_eq!(text_of(&only_alpha, "count-delayed"), "0");
    assert!(only_alpha.contains(&format!(r#"data-scope="endpoint {}""#, alpha.slug)));
    let by_queue = board.get("/board/todos?queue=inbox&kind=x").await.body;
    assert!(
        by_queue.contains("(not narrowed by queue, kind)"),
        "{by_queue}"
    );

    // A failed row says when it retries, a dead letter why it died.
    let row = |html: &str, id: &str| {
        let at = html.find(&format!(r#"<tr data-id="{id}""#)).unwrap();
        html[at..at + html[at..].find("</tr>").unwrap()].to_owned()
    };
    let failed_row = row(&only_alpha, &retrying);
    assert!(
        failed_row.contains(r#"<span class="retry">retry <time"#) && failed_row.contains(" UTC\""),
        "{failed_row}"
    );
    let dead_row = row(&only_alpha, &dead);
    assert!(
        dead_row.contains(r#"class="reason clip" title="failed: exit 2: the build broke""#),
        "{dead_row}"
    );

    // The todo page: its retry time with the zone, the timeline in words.
    let page = board.get(&format!("/board/todos/{retrying}")).await.body;
    let next = &page[page.find(r#"id="next-retry""#).unwrap()..];
    assert!(
        next[..next.find("</dd>").unwrap()].contains(" UTC)"),
        "{next}"
    );
    let timeline = &page[page.find(r#"class="timeline""#).unwrap()..];
    let timeline = &timeline[..timeline.find("</ol>").unwrap()];
    assert!(
        timeline.contains("failed</span> → retry scheduled"),
        "{timeline}"
    );
    assert!(!timeline.contains("retry_scheduled"), "{timeline}");
    assert!(!timeline.contains("— ·"), "{timeline}");
    let dead_page = board.get(&format!("/board/todos/{dead}")).await.body;
    assert_eq!(
        text_of(&dead_page, "dead-reason"),
        "failed: exit 2: the build broke"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_work_nobody_hears_is_never_idle() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    {
        use switchboard::store::prelude::*;
        let store = open_store(&server.database).await;
        let now = store.clock().now();
        store
            .stamp_endpoint_seen(&alpha.id, now, None)
            .await
            .unwrap();
        store.close().await;
    }
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let chip = |html: &str| {
        let at = html.find("data-condition=\"").unwrap() + "data-condition=\"".len();
        html[at..at + html[at..].find('"').unwrap()].to_owned()
    };
    // Seen, nothing waiting, no session: idle is the truth.
    assert_eq!(chip(&board.get("/").await.body), "idle");
    push(&server, &admin, &alpha.slug, "nobody will hear this").await;
    let overview = board.get("/").await.body;
    assert_eq!(chip(&overview), "unheard", "{overview}");
    assert!(overview.contains(">unheard (1 pending)</span>"));
    let total = |name: &str| {
        let marker = format!(r#"data-total="{name}">"#);
        let at = overview.find(&marker).unwrap() + marker.len();
        overview[at..at + overview[at..].find('<').unwrap()].to_owned()
    };
    assert_eq!(
        (total("idle"), total("attention")),
        ("0".into(), "1".into())
    );
    let page = board
        .get(&format!("/board/endpoints/{}", alpha.slug))
        .await
        .body;
    assert!(
        page.contains(r#"id="chip-hint""#),
        "the endpoint page says why"
    );
    // The API keeps the spec's condition table: idle, with the raw counts beside it.
    let api = server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/endpoints/{}", alpha.slug),
            &admin,
            Body::None,
        )
        .await;
    assert_eq!(api["liveness"]["condition"], "idle", "{api}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_todo_is_pushed_once_and_deleted_from_the_board() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(
        &server,
        &admin,
        json!({ "agent": "alpha", "queues": ["inbox", "ci"] }),
    )
    .await;
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let csrf = board.csrf().await;
    let path = format!("/board/endpoints/{}", alpha.slug);
    let push_path = format!("{path}/todos");
    let nonce = nonce_of(&board.get(&path).await.body);
    // A payload that is not JSON is refused before the form's token is spent.
    let bad = board
        .post(
            &push_path,
            &[
                ("csrf", &csrf),
                ("nonce", &nonce),
                ("queue", "ci"),
                ("title", "Deploy"),
                ("payload", "{not json"),
            ],
        )
        .await;
    assert!(bad.location.unwrap().contains("error=payload"));
    assert!(listed(&server, &admin, &alpha.slug).await.is_empty());
    let form = [
        ("csrf", csrf.as_str()),
        ("nonce", nonce.as_str()),
        ("queue", "ci"),
        ("title", "Deploy the site"),
        ("payload", r#"{"ref": "v1.2"}"#),
    ];
    let pushed = board.post(&push_path, &form).await;
    assert_eq!(pushed.status, 303);
    assert!(
        pushed.location.unwrap().contains("notice=pushed+td_"),
        "pushed"
    );
    let todos = listed(&server, &admin, &alpha.slug).await;
    assert_eq!(todos.len(), 1);
    let id = todos[0]["id"].as_str().unwrap().to_owned();
    let todo = todo_json(&server, &admin, &id).await;
    assert_eq!(
        (&todo["queue"], &todo["payload"], &todo["kind"]),
        (&json!("ci"), &json!({"ref": "v1.2"}), &json!("operator"))
    );
    // The same form again (a second click): the first todo, nothing new.
    let again = board.post(&push_path, &form).await;
    let location = again.location.unwrap();
    assert!(
        location.contains("already+submitted") && location.contains(&id),
        "{location}"
    );
    assert_eq!(
        listed(&server, &admin, &alpha.slug).await.len(),
        1,
        "no duplicate todo"
    );
    // A form without its token is refused.
    let tokenless = board
        .post(&push_path, &[("csrf", &csrf), ("title", "x")])
        .await;
    assert!(tokenless.location.unwrap().contains("error=nonce"));
    assert_eq!(listed(&server, &admin, &alpha.slug).await.len(), 1);

    // Delete: the box must be ticked; then it is gone, attempts and all.
    let todo_path = format!("/board/todos/{id}");
    assert!(
        board
            .get(&todo_path)
            .await
            .body
            .contains(r#"id="todo-delete""#)
    );
    let unticked = board
        .post(&format!("{todo_path}/delete"), &[("csrf", &csrf)])
        .await;
    assert!(unticked.location.unwrap().contains("error=confirm"));
    assert_eq!(listed(&server, &admin, &alpha.slug).await.len(), 1);
    let deleted = board
        .post(
            &format!("{todo_path}/delete"),
            &[("csrf", &csrf), ("confirm", "yes")],
        )
        .await;
    let location = deleted.location.unwrap();
    assert!(
        location.starts_with("/board/todos?notice=deleted"),
        "{location}"
    );
    let gone = server
        .call(
            Method::GET,
            &format!("/api/v1/todos/{id}"),
            &admin,
            Body::None,
        )
        .await;
    assert_eq!(gone.status, 404);

    // A claimed todo is not deleted: cancel or release it first.
    let held = server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/todos", alpha.slug),
            &admin,
            Body::Json(json!({ "title": "held", "queue": "inbox" })),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(claim_next(&server.database, &alpha.id, false).await, held);
    let page = board.get(&format!("/board/todos/{held}")).await.body;
    assert!(!page.contains(r#"id="todo-delete""#));
    let refused = board
        .post(
            &format!("/board/todos/{held}/delete"),
            &[("csrf", &csrf), ("confirm", "yes")],
        )
        .await;
    let location = refused.location.unwrap();
    assert!(
        location.contains("error=") && location.contains("claimed"),
        "{location}"
    );
    assert_eq!(todo_json(&server, &admin, &held).await["state"], "claimed");
    // The same through the API: 409, and 204 once released.
    let conflict = server
        .call(
            Method::DELETE,
            &format!("/api/v1/todos/{held}"),
            &admin,
            Body::None,
        )
        .await;
    assert_eq!(conflict.status, 409, "{}", conflict.text());
    server
        .expect(
            200,
            Method::POST,
            &format!("/api/v1/todos/{held}/release"),
            &admin,
            Body::None,
        )
        .await;
    server
        .expect(
            204,
            Method::DELETE,
            &format!("/api/v1/todos/{held}"),
            &admin,
            Body::None,
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_click_on_vend_vends_nothing_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let csrf = board.csrf().await;
    let nonce = nonce_of(&board.get("/board/vend").await.body);
    let form = [
        ("csrf", csrf.as_str()),
        ("nonce", nonce.as_str()),
        ("agent", "twice"),
    ];
    let first = board.post("/board/vend", &form).await;
    assert_eq!(first.status, 200);
    assert!(first.body.contains(r#"id="snippet-token">sbk_"#));
    let second = board.post("/board/vend", &form).await;
    assert_eq!(second.status, 200);
    assert!(second.body.contains("already submitted"), "{}", second.body);
    assert!(
        !second.body.contains("sbk_"),
        "no credential the second time"
    );
    assert!(second.body.contains(r#"id="vend-already""#));
    // A fresh form on the answer vends anew.
    assert_ne!(nonce_of(&second.body), nonce);
    let endpoints = server
        .expect(200, Method::GET, "/api/v1/endpoints", &admin, Body::None)
        .await;
    let of_twice = endpoints["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["agent"] == "twice")
        .count();
    assert_eq!(of_twice, 1, "one endpoint, not two");
}
