//! Notify hooks end to end (`docs/doorbells.md`, "Notify hooks"): the real
//! binary POSTs to a receiver in this test, which verifies every Standard
//! Webhooks signature itself (HMAC-SHA256 keyed with the decoded `whsec_`
//! secret over `id.timestamp.body`). Presence holds a hook, a return sends
//! one digest, failures retry and then disable, redirects are not followed,
//! private targets are refused without `--allow-private-hooks`, and two
//! instances on PostgreSQL deliver each ring once.
//!
//! Every wait is a bounded poll. A check that something did *not* happen
//! waits a bounded window longer than the loop that would have done it.

use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{any, post};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::support::mcp::client;
use crate::support::postgres_store;
use crate::support::server::Process;

/// Generous rates, a fast maintenance loop.
const FLAGS: [&str; 6] = [
    "--api-write-rate",
    "1000",
    "--api-read-rate",
    "1000",
    "--maintenance-interval",
    "1s",
];

/// One POST the receiver got.
#[derive(Debug, Clone)]
struct Post {
    headers: HeaderMap,
    body: Vec<u8>,
}

/// A loopback HTTP receiver: records every POST to `/hook` and answers it
/// with `status` (a 302 to `/elsewhere` when that is 302); counts any
/// request to `/elsewhere`.
#[derive(Clone)]
struct Receiver {
    base: String,
    posts: Arc<Mutex<Vec<Post>>>,
    status: Arc<AtomicU16>,
    elsewhere: Arc<AtomicUsize>,
}

async fn on_hook(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    r.posts.lock().unwrap().push(Post {
        headers,
        body: body.to_vec(),
    });
    let status = StatusCode::from_u16(r.status.load(Ordering::SeqCst)).unwrap();
    if status == StatusCode::FOUND {
        return (status, [(header::LOCATION, "/elsewhere")]).into_response();
    }
    status.into_response()
}

async fn on_elsewhere(State(r): State<Receiver>) -> StatusCode {
    r.elsewhere.fetch_add(1, Ordering::SeqCst);
    StatusCode::OK
}

async fn receiver() -> Receiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let r = Receiver {
        base: format!("http://127.0.0.1:{port}"),
        posts: Arc::default(),
        status: Arc::new(AtomicU16::new(200)),
        elsewhere: Arc::default(),
    };
    let app = Router::new()
        .route("/hook", post(on_hook))
        .route("/elsewhere", any(on_elsewhere))
        .with_state(r.clone());
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    r
}

impl Receiver {
    fn url(&self) -> String {
        format!("{}/hook", self.base)
    }

    fn port(&self) -> u16 {
        self.base.rsplit(':').next().unwrap().parse().unwrap()
    }

    fn posts(&self) -> Vec<Post> {
        self.posts.lock().unwrap().clone()
    }

    /// Every POST so far, each verified against `secret`, as its JSON body
    /// and its `webhook-id`.
    fn verified(&self, secret: &str) -> Vec<(Value, String)> {
        self.posts().iter().map(|p| verify(secret, p)).collect()
    }

    async fn wait_posts(&self, n: usize, within: Duration) -> Vec<Post> {
        let deadline = Instant::now() + within;
        loop {
            let posts = self.posts();
            if posts.len() >= n {
                return posts;
            }
            assert!(
                Instant::now() < deadline,
                "{n} POSTs expected, {} arrived: {posts:?}",
                posts.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Verifies a delivery the way a Standard Webhooks receiver does; returns
/// its body and its `webhook-id`.
fn verify(secret: &str, post: &Post) -> (Value, String) {
    let header = |name: &str| {
        post.headers
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing: {:?}", post.headers))
            .to_str()
            .unwrap()
            .to_owned()
    };
    let (id, timestamp, signatures) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    assert_eq!(header("content-type"), "application/json");
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
        .expect("base64 after whsec_");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(&post.body);
    let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    assert!(
        signatures.split(' ').any(|s| s == expected),
        "signature {signatures} is not {expected}"
    );
    let sent_at: i64 = timestamp.parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (now - sent_at).abs() < 300,
        "timestamp {sent_at} vs now {now}"
    );
    let body: Value = serde_json::from_slice(&post.body).unwrap();
    (body, id)
}

/// One server's REST API as its first human.
struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    fn of(node: &Process, token: &str) -> Api {
        Api {
            http: client(),
            base: node.url("/api/v1"),
            token: token.to_owned(),
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("API request");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn ok(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let (status, value) = self.call(method, path, body).await;
        assert!((200..300).contains(&status), "{path}: {status} {value}");
        value
    }

    async fn vend(&self, agent: &str) -> String {
        let v = self
            .ok(Method::POST, "/endpoints", Some(json!({"agent": agent})))
            .await;
        v["slug"].as_str().unwrap().to_owned()
    }

    async fn push(&self, slug: &str, title: &str) -> String {
        let v = self
            .ok(
                Method::POST,
                &format!("/endpoints/{slug}/todos"),
                Some(json!({"title": title})),
            )
            .await;
        v["id"].as_str().unwrap().to_owned()
    }

    /// Adds a hook; returns (id, secret).
    async fn add_hook(&self, slug: &str, url: &str) -> (String, String) {
        let (status, v) = self
            .call(
                Method::POST,
                &format!("/endpoints/{slug}/hooks"),
                Some(json!({"url": url})),
            )
            .await;
        assert_eq!(status, 201, "{v}");
        (
            v["id"].as_str().unwrap().to_owned(),
            v["secret"].as_str().unwrap().to_owned(),
        )
    }

    async fn hooks(&self, slug: &str) -> Vec<Value> {
        let v = self
            .ok(Method::GET, &format!("/endpoints/{slug}/hooks"), None)
            .await;
        v["hooks"].as_array().unwrap().clone()
    }

    /// Polls the endpoint's one hook until `done` holds.
    async fn wait_hook(
        &self,
        slug: &str,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let hooks = self.hooks(slug).await;
            if let Some(hook) = hooks.first()
                && done(hook)
            {
                return hook.clone();
            }
            assert!(Instant::now() < deadline, "hook never got there: {hooks:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn metric(&self, node: &Process, series: &str) -> f64 {
        crate::support::metric(&self.http, &node.url("/metrics"), series).await
    }
}

fn start(dir: &std::path::Path, extra: &[&str]) -> (Process, String) {
    let mut args: Vec<&str> = FLAGS.to_vec();
    args.extend(extra);
    let node = Process::start(dir, &args);
    let token = node.first_token().expect("the first start's token");
    (node, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_posts_one_signed_delivery_and_the_sweep_rerings_it() {
    let dir = tempfile::tempdir().unwrap();
    let (node, token) = start(dir.path(), &["--allow-private-hooks", "--ring-steps", "1s"]);
    let api = Api::of(&node, &token);
    let rx = receiver().await;
    let slug = api.vend("hooked").await;
    let (hook_id, secret) = api.add_hook(&slug, &rx.url()).await;
    assert!(hook_id.starts_with("hk_"));
    assert!(secret.starts_with("whsec_"), "{secret}");
    // The secret is shown once: not in the listing.
    let listed = api.hooks(&slug).await;
    assert_eq!(listed.len(), 1);
    assert!(!listed[0].to_string().contains(&secret[6..]), "{listed:?}");
    assert!(listed[0].get("secret").is_none());
    assert_eq!(listed[0]["state"], "enabled");

    let todo = api.push(&slug, "Secret title, never sent").await;
    rx.wait_posts(2, Duration::from_secs(20)).await;
    let delivered = rx.verified(&secret);
    let (ready, ready_id) = &delivered[0];
    assert_eq!(
        *ready,
        json!({"type": "todo.ready", "endpoint": slug, "todo_id": todo, "queue": "inbox",
               "kind": "operator"})
    );
    let (rering, rering_id) = &delivered[1];
    assert_eq!(
        *rering,
        json!({"type": "todo.rering", "endpoint": slug, "todo_id": todo, "queue": "inbox",
               "kind": "operator"})
    );
    assert_ne!(ready_id, rering_id, "one webhook-id per delivery");
    for post in rx.posts() {
        let body = String::from_utf8(post.body).unwrap();
        assert!(!body.contains("Secret title"), "{body}");
    }
    // The budget is one step: nothing more (three sweep periods).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(rx.posts().len(), 2);
    let hook = api
        .wait_hook(&slug, Duration::from_secs(10), |h| {
            h["last_deliveries"].as_array().unwrap().len() == 2
        })
        .await;
    let last = &hook["last_deliveries"][0];
    assert_eq!(last["outcome"], "ok");
    assert_eq!(last["status"], 200);
    assert_eq!(last["type"], "todo.rering");
    assert_eq!(last["todo_id"], todo.as_str());
    assert_eq!(
        api.metric(&node, "switchboard_hook_deliveries_total{outcome=\"ok\"}")
            .await,
        2.0
    );
    assert_eq!(
        api.metric(
            &node,
            "switchboard_doorbells_rung_total{kind=\"todo\",trigger=\"created\"}"
        )
        .await,
        1.0
    );
    // Both rings were heard (a 2xx), and counted so.
    assert_eq!(
        api.metric(
            &node,
            "switchboard_rings_answered_total{hearer=\"hook\",answer=\"acknowledged\"}"
        )
        .await,
        2.0
    );

    // `doctor --ring`: a hooked endpoint's test doorbell goes to the hook.
    let ring = api
        .ok(
            Method::POST,
            &format!("/endpoints/{slug}/test-ring"),
            Some(json!({"wait_seconds": 5})),
        )
        .await;
    assert_eq!(
        (
            &ring["outcome"],
            &ring["hearer"],
            &ring["hearer_id"],
            &ring["answered"]
        ),
        (
            &json!("rung"),
            &json!("hook"),
            &json!(hook_id),
            &json!(true)
        ),
        "{ring}"
    );
    let (test, _) = rx.verified(&secret).pop().unwrap();
    assert_eq!(test, json!({"type": "test", "endpoint": slug}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_holds_a_hook_and_the_return_sends_one_digest() {
    let dir = tempfile::tempdir().unwrap();
    let (node, token) = start(dir.path(), &["--allow-private-hooks"]);
    let api = Api::of(&node, &token);
    let rx = receiver().await;
    let slug = api.vend("sleepy").await;
    let (_, secret) = api.add_hook(&slug, &rx.url()).await;
    api.ok(
        Method::PUT,
        &format!("/endpoints/{slug}/presence"),
        Some(json!({"presence": "out", "until": null})),
    )
    .await;
    api.push(&slug, "one").await;
    api.push(&slug, "two").await;
    api.ok(Method::DELETE, &format!("/endpoints/{slug}/presence"), None)
        .await;
    rx.wait_posts(1, Duration::from_secs(20)).await;
    // Nothing rang while out: the one delivery is the digest.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let delivered = rx.verified(&secret);
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(
        delivered[0].0,
        json!({"type": "digest", "endpoint": slug, "pending": 2, "reason": "operator"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_deliveries_retry_then_disable_the_hook_until_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let (node, token) = start(dir.path(), &["--allow-private-hooks"]);
    let api = Api::of(&node, &token);
    let rx = receiver().await;
    rx.status.store(500, Ordering::SeqCst);
    let slug = api.vend("flaky").await;
    let (hook_id, secret) = api.add_hook(&slug, &rx.url()).await;
    for n in 0..20 {
        api.push(&slug, &format!("todo {n}")).await;
    }
    let hook = api
        .wait_hook(&slug, Duration::from_secs(60), |h| h["state"] == "disabled")
        .await;
    assert_eq!(hook["consecutive_failures"], 20, "{hook}");
    assert!(hook["disabled_reason"].as_str().is_some(), "{hook}");
    // Three tries each, the same webhook-id on every try of one delivery.
    let delivered = rx.verified(&secret);
    assert_eq!(delivered.len(), 60);
    let mut ids: Vec<&String> = delivered.iter().map(|(_, id)| id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 20);
    let disabled_logs = node
        .log_lines()
        .iter()
        .filter(|l| l.contains("it is disabled until"))
        .count();
    assert_eq!(disabled_logs, 1, "{}", node.log_text());
    assert_eq!(
        api.metric(
            &node,
            "switchboard_hook_deliveries_total{outcome=\"failed\"}"
        )
        .await,
        20.0
    );
    // Disabled: a push delivers nothing (past the whole retry schedule).
    api.push(&slug, "unheard").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(rx.posts().len(), 60);

    let enabled = api
        .ok(Method::POST, &format!("/hooks/{hook_id}/enable"), None)
        .await;
    assert_eq!(enabled["state"], "enabled");
    assert_eq!(enabled["consecutive_failures"], 0);
    rx.status.store(204, Ordering::SeqCst);
    let tested = api
        .ok(Method::POST, &format!("/hooks/{hook_id}/test"), None)
        .await;
    assert_eq!(tested["outcome"], "ok", "{tested}");
    assert_eq!(tested["status"], 204);
    let (test, _) = verify(&secret, rx.posts().last().unwrap());
    assert_eq!(test, json!({"type": "test", "endpoint": slug}));
    // Enabled again, it hears the next push.
    let todo = api.push(&slug, "heard").await;
    let posts = rx.wait_posts(62, Duration::from_secs(20)).await;
    let (ready, _) = verify(&secret, &posts[61]);
    assert_eq!(ready["todo_id"], todo.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let (node, token) = start(dir.path(), &["--allow-private-hooks"]);
    let api = Api::of(&node, &token);
    let rx = receiver().await;
    rx.status.store(302, Ordering::SeqCst);
    let slug = api.vend("moved").await;
    let (hook_id, _) = api.add_hook(&slug, &rx.url()).await;
    let tested = api
        .ok(Method::POST, &format!("/hooks/{hook_id}/test"), None)
        .await;
    assert_eq!(tested["outcome"], "failed", "{tested}");
    assert_eq!(tested["status"], 302);
    assert_eq!(rx.posts().len(), 1);
    assert_eq!(rx.elsewhere.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_targets_are_refused_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let (node, token) = start(dir.path(), &[]);
    let api = Api::of(&node, &token);
    let rx = receiver().await;
    let slug = api.vend("inside").await;
    // An IP literal (checked before sending) and a name that resolves to
    // loopback (checked when dialled).
    let (literal, _) = api.add_hook(&slug, &rx.url()).await;
    let named_url = format!("http://localhost:{}/hook", rx.port());
    let (named, _) = api.add_hook(&slug, &named_url).await;
    for id in [&literal, &named] {
        let tested = api
            .ok(Method::POST, &format!("/hooks/{id}/test"), None)
            .await;
        assert_eq!(tested["outcome"], "refused", "{tested}");
        assert!(
            tested["error"]
                .as_str()
                .unwrap()
                .contains("--allow-private-hooks"),
            "{tested}"
        );
    }
    // A ring is refused too: recorded, one try, nothing received.
    api.push(&slug, "ring").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let hooks = api.hooks(&slug).await;
        let refused_rings = hooks
            .iter()
            .flat_map(|h| h["last_deliveries"].as_array().unwrap().clone())
            .filter(|d| d["type"] == "todo.ready" && d["outcome"] == "refused")
            .count();
        if refused_rings == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{hooks:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(rx.posts().is_empty());
    assert_eq!(
        api.metric(
            &node,
            "switchboard_hook_deliveries_total{outcome=\"refused\"}"
        )
        .await,
        3.0
    );
    // Bad URLs are refused when added, naming the field, and change nothing.
    for bad in [
        "ftp://example.com/x",
        "https://user:pw@example.com/x",
        "not a url",
    ] {
        let (status, v) = api
            .call(
                Method::POST,
                &format!("/endpoints/{slug}/hooks"),
                Some(json!({"url": bad})),
            )
            .await;
        assert_eq!(status, 400, "{bad}: {v}");
        assert_eq!(v["error"]["field"], "url", "{v}");
    }
    assert_eq!(api.hooks(&slug).await.len(), 2);
}

/// Waits until a node's `/readyz` says its bus is connected.
async fn wait_bus_connected(http: &reqwest::Client, node: &Process) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = http.get(node.url("/readyz")).send().await
            && let Ok(v) = r.json::<Value>().await
            && v["bus"] == "connected"
        {
            return;
        }
        assert!(Instant::now() < deadline, "bus never connected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_deliver_each_ring_and_each_digest_once() {
    let Some(ts) = postgres_store("hooks_cluster_once").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL database");
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = FLAGS.to_vec();
    args.extend([
        "--database",
        url.as_str(),
        "--allow-private-hooks",
        "--ring-steps",
        "1s,1s",
        "--bus-keepalive",
        "1s",
    ]);
    let a = Process::start(dir.path(), &args);
    let token = a.first_token().expect("the first start's token");
    let b = Process::start(dir.path(), &args);
    let http = client();
    wait_bus_connected(&http, &a).await;
    wait_bus_connected(&http, &b).await;
    let (api_a, api_b) = (Api::of(&a, &token), Api::of(&b, &token));
    let rx = receiver().await;
    // An endpoint with a hook and no session anywhere: hosted on both.
    let slug = api_a.vend("clustered").await;
    let (_, secret) = api_a.add_hook(&slug, &rx.url()).await;
    let mut todos = Vec::new();
    for n in 0..6 {
        let api = if n % 2 == 0 { &api_a } else { &api_b };
        todos.push(api.push(&slug, &format!("todo {n}")).await);
    }
    // Each todo: one ready and two re-rings (the budget), from one instance.
    rx.wait_posts(todos.len() * 3, Duration::from_secs(60))
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let delivered = rx.verified(&secret);
    assert_eq!(delivered.len(), todos.len() * 3, "{delivered:?}");
    for todo in &todos {
        let of = |kind: &str| {
            delivered
                .iter()
                .filter(|(b, _)| b["todo_id"] == todo.as_str() && b["type"] == kind)
                .count()
        };
        assert_eq!(of("todo.ready"), 1, "{todo}: {delivered:?}");
        assert_eq!(of("todo.rering"), 2, "{todo}: {delivered:?}");
    }

    // A return: exactly one digest in the cluster.
    api_a
        .ok(
            Method::PUT,
            &format!("/endpoints/{slug}/presence"),
            Some(json!({"presence": "out", "until": null})),
        )
        .await;
    api_a.push(&slug, "held").await;
    api_b
        .ok(Method::DELETE, &format!("/endpoints/{slug}/presence"), None)
        .await;
    let digests = |rx: &Receiver| {
        rx.verified(&secret)
            .into_iter()
            .filter(|(b, _)| b["type"] == "digest")
            .map(|(b, _)| b)
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while digests(&rx).is_empty() {
        assert!(Instant::now() < deadline, "no digest");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = digests(&rx);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["reason"], "operator");
    // Every pending todo waited: the six rung before and the held one.
    assert_eq!(got[0]["pending"], 7);
    drop((a, b));
    ts.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_shows_hooks_and_enables_a_disabled_one() {
    use crate::board::Board;
    use crate::support::api::{Body, HIGH_RATES, Server, make_human, push, vend};

    let dir = tempfile::tempdir().unwrap();
    // In process, private targets are not allowed: every ring to the
    // loopback receiver is refused, a final failure each (no retries).
    let server = Server::in_process(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let alpha = vend(&server, &admin, json!({ "agent": "alpha" })).await;
    let rx = receiver().await;
    let made = server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/hooks", alpha.slug),
            &admin,
            Body::Json(json!({ "url": rx.url() })),
        )
        .await;
    let hook_id = made["id"].as_str().unwrap().to_owned();
    let secret = made["secret"].as_str().unwrap().to_owned();
    for n in 0..20 {
        push(&server, &admin, &alpha.slug, &format!("todo {n}")).await;
    }
    let mut board = Board::new(&server.addr);
    board.sign_in(&admin).await;
    let path = format!("/board/endpoints/{}", alpha.slug);
    let deadline = Instant::now() + Duration::from_secs(30);
    let page = loop {
        let page = board.get(&path).await;
        if page.body.contains("<strong>disabled</strong>") {
            break page;
        }
        assert!(Instant::now() < deadline, "never disabled: {}", page.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(page.body.contains(&format!(r#"data-hook="{hook_id}""#)));
    assert!(page.body.contains(&rx.url()));
    assert!(
        page.body.contains("refused"),
        "the last deliveries are shown"
    );
    assert!(!page.body.contains(&secret[6..]), "never the secret");
    assert!(
        page.body
            .contains(&format!("/board/hooks/{hook_id}/enable"))
    );
    assert!(rx.posts().is_empty());

    // Another human cannot enable it.
    let bob = make_human(&server, "bob");
    let mut bob_board = Board::new(&server.addr);
    bob_board.sign_in(&bob.token).await;
    let bob_csrf = bob_board.csrf().await;
    let foreign = bob_board
        .post(
            &format!("/board/hooks/{hook_id}/enable"),
            &[("csrf", &bob_csrf)],
        )
        .await;
    assert_eq!(foreign.status, 404);
    // Without the CSRF token, nothing.
    let forged = board
        .post(&format!("/board/hooks/{hook_id}/enable"), &[])
        .await;
    assert_eq!(forged.status, 403);

    let csrf = board.csrf().await;
    let enabled = board
        .post(
            &format!("/board/hooks/{hook_id}/enable"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(enabled.status, 303);
    let page = board.get(&path).await;
    assert!(
        !page.body.contains("<strong>disabled</strong>"),
        "{}",
        page.body
    );
    let hooks = server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/endpoints/{}/hooks", alpha.slug),
            &admin,
            Body::None,
        )
        .await;
    assert_eq!(hooks["hooks"][0]["state"], "enabled");
    assert_eq!(hooks["hooks"][0]["consecutive_failures"], 0);
}
