//! Nothing is written on refusal (`01`–`09`, principle 5): every write route
//! of the REST API and the webhook intake, given bodies it must refuse,
//! answers 4xx naming the right field, and the database is exactly as it was;
//! and so do an agent's write tools over MCP (a tool error naming the argument).
//!
//! The real binary serves SQLite and PostgreSQL; the database is read beside
//! it with a plain SQL connection and dumped whole — every row of every
//! table, each column quoted — before and after the refusals.

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::{Value, json};
use sqlx::{AnyPool, Row};

use crate::support::mcp::Mcp;
use crate::support::server::{Process, serve_command};
use crate::support::{TestStore, postgres_store};

/// Columns a refused request may still change by design, and why.
const MAY_CHANGE: &[(&str, &str)] = &[
    // Authenticating the refused request stamps its token's last use.
    ("api_tokens", "last_used_at"),
];

/// And for an agent's MCP call: every authenticated request stamps the
/// endpoint's server-side liveness (`06-registry.md`), refused or not.
const MCP_MAY_CHANGE: &[(&str, &str)] = &[
    ("api_tokens", "last_used_at"),
    ("endpoints", "last_seen_at"),
    ("endpoints", "last_contact_at"),
];

/// Flags that keep the background loops from writing during the walk, and
/// the rate limits out of the way.
const QUIET: &[&str] = &[
    "--api-read-rate",
    "10000",
    "--api-write-rate",
    "10000",
    "--intake-rate",
    "10000",
    "--maintenance-interval",
    "1h",
    "--presence-interval",
    "1h",
    "--retention-interval",
    "1h",
];

/// The whole database: table → its rows as text, sorted.
type Dump = BTreeMap<String, Vec<String>>;

async fn dump(url: &str, may_change: &[(&str, &str)]) -> Dump {
    sqlx::any::install_default_drivers();
    let pool = AnyPool::connect(url)
        .await
        .expect("connect beside the server");
    let postgres = url.starts_with("postgres");
    let tables_sql = if postgres {
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    } else {
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    };
    let columns_sql = if postgres {
        "SELECT column_name::text FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position"
    } else {
        "SELECT name FROM pragma_table_info($1) ORDER BY cid"
    };
    let tables: Vec<String> = sqlx::query(tables_sql)
        .fetch_all(&pool)
        .await
        .expect("list tables")
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect();
    assert!(tables.len() >= 8, "{tables:?}");
    let mut out = Dump::new();
    for table in tables {
        let columns: Vec<String> = sqlx::query(columns_sql)
            .bind(&table)
            .fetch_all(&pool)
            .await
            .expect("list columns")
            .iter()
            .map(|r| r.get::<String, _>(0))
            .filter(|c| !may_change.contains(&(table.as_str(), c.as_str())))
            .collect();
        let quoted: Vec<String> = columns
            .iter()
            .map(|c| {
                if postgres {
                    format!("quote_nullable(\"{c}\"::text)")
                } else {
                    format!("quote(\"{c}\")")
                }
            })
            .collect();
        let sql = format!("SELECT {} FROM \"{table}\"", quoted.join(" || '|' || "));
        let mut rows: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(&pool)
            .await
            .unwrap_or_else(|e| panic!("dump {table}: {e}"))
            .iter()
            .map(|r| r.get::<String, _>(0))
            .collect();
        rows.sort();
        out.insert(table, rows);
    }
    pool.close().await;
    out
}

/// What the walk needs to know about the state it made.
struct World {
    base: String,
    token: String,
    http: reqwest::Client,
    /// An active endpoint with the queues `inbox` and `ci`.
    slug: String,
    /// A revoked endpoint.
    revoked: String,
    /// A pending todo of `slug`.
    todo: String,
    /// `slug`'s MCP URL and credential.
    mcp_url: String,
    credential: String,
    /// A token webhook and a signed one on `slug`, and one on `revoked`.
    token_hook: String,
    signed_hook: String,
    revoked_hook: String,
    /// The token webhook's id.
    token_hook_id: String,
    /// An accepted delivery (not quarantined: nothing to release or
    /// discard) and a refused one (nothing to replay).
    accepted: String,
    refused: String,
}

impl World {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn ok(&self, method: Method, path: &str, body: Value) -> Value {
        let (status, body) = self.call(method, path, Some(body)).await;
        assert!((200..300).contains(&status), "{path}: {status} {body}");
        body
    }

    async fn make(base: String, token: String) -> World {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let mut w = World {
            base,
            token,
            http,
            slug: String::new(),
            revoked: String::new(),
            todo: String::new(),
            mcp_url: String::new(),
            credential: String::new(),
            token_hook: String::new(),
            signed_hook: String::new(),
            revoked_hook: String::new(),
            token_hook_id: String::new(),
            accepted: String::new(),
            refused: String::new(),
        };
        w.ok(Method::POST, "/api/v1/agents", json!({"name": "solo"}))
            .await;
        let vended = w
            .ok(
                Method::POST,
                "/api/v1/endpoints",
                json!({"agent": "bot", "queues": ["inbox", "ci"]}),
            )
            .await;
        w.slug = vended["slug"].as_str().unwrap().to_owned();
        w.mcp_url = vended["mcp_url"].as_str().unwrap().to_owned();
        w.credential = vended["token"].as_str().unwrap().to_owned();
        let todo = w
            .ok(
                Method::POST,
                &format!("/api/v1/endpoints/{}/todos", w.slug),
                json!({"title": "a pending todo", "queue": "inbox"}),
            )
            .await;
        w.todo = todo["id"].as_str().unwrap().to_owned();
        let hooks = format!("/api/v1/endpoints/{}/webhooks", w.slug);
        let token_hook = w.ok(Method::POST, &hooks, json!({"queue": "inbox"})).await;
        let signed_hook = w
            .ok(Method::POST, &hooks, json!({"queue": "ci", "signed": true}))
            .await;
        let gone = w
            .ok(Method::POST, "/api/v1/endpoints", json!({"agent": "gone"}))
            .await;
        let revoked = gone["slug"].as_str().unwrap().to_owned();
        let revoked_hook = w
            .ok(
                Method::POST,
                &format!("/api/v1/endpoints/{revoked}/webhooks"),
                json!({}),
            )
            .await;
        w.ok(
            Method::POST,
            &format!("/api/v1/endpoints/{revoked}/revoke"),
            json!({}),
        )
        .await;
        w.token_hook = url_path(&token_hook);
        w.signed_hook = url_path(&signed_hook);
        w.revoked_hook = url_path(&revoked_hook);
        w.token_hook_id = token_hook["id"].as_str().unwrap().to_owned();
        w.revoked = revoked;
        let accepted = w
            .ok(Method::POST, &w.token_hook, json!({"title": "hi"}))
            .await;
        assert_eq!(accepted["delivery"]["decision"], "accepted", "{accepted}");
        w.accepted = accepted["delivery"]["id"].as_str().unwrap().to_owned();
        let (status, _) = w
            .call(
                Method::POST,
                &w.signed_hook,
                Some(json!({"unsigned": true})),
            )
            .await;
        assert_eq!(status, 401);
        let (_, listed) = w
            .call(
                Method::GET,
                &format!(
                    "/api/v1/webhooks/{}/deliveries?decision=refused",
                    signed_hook["id"].as_str().unwrap()
                ),
                None,
            )
            .await;
        w.refused = listed["deliveries"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("the refusal is recorded: {listed}"))
            .to_owned();
        w
    }
}

/// `/webhooks/w/…` of a created webhook.
fn url_path(hook: &Value) -> String {
    let url = hook["ingest_url"].as_str().expect("an ingest URL");
    let at = url.find("/webhooks/w/").expect("an ingest path");
    url[at..].to_owned()
}

/// One refusal: a request and what it must answer.
struct Case {
    method: Method,
    path: String,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    status: u16,
    /// The `field` the error names (`None`: the error has none).
    field: Option<&'static str>,
}

fn case(method: Method, path: &str, body: Value, status: u16, field: &'static str) -> Case {
    Case {
        method,
        path: path.to_owned(),
        content_type: Some("application/json"),
        body: serde_json::to_vec(&body).unwrap(),
        status,
        field: Some(field),
    }
}

fn raw(method: Method, path: &str, ct: Option<&'static str>, body: &[u8], status: u16) -> Case {
    Case {
        method,
        path: path.to_owned(),
        content_type: ct,
        body: body.to_vec(),
        status,
        field: None,
    }
}

fn with_field(mut c: Case, field: &'static str) -> Case {
    c.field = Some(field);
    c
}

fn cases(w: &World) -> Vec<Case> {
    use Method as M;
    let ep = format!("/api/v1/endpoints/{}", w.slug);
    let gone = format!("/api/v1/endpoints/{}", w.revoked);
    let todos = format!("{ep}/todos");
    let presence = format!("{ep}/presence");
    let shift = format!("{ep}/shift");
    let hooks = format!("{ep}/webhooks");
    let notify = format!("{ep}/hooks");
    let schedules = format!("{ep}/schedules");
    let sched = |extra: Value| {
        let mut body =
            json!({"queue": "inbox", "cron": "0 9 * * *", "tz": "UTC", "title": "daily"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let senders = format!("/api/v1/webhooks/{}/senders", w.token_hook_id);
    let accepted = format!("/api/v1/deliveries/{}", w.accepted);
    let refused = format!("/api/v1/deliveries/{}", w.refused);
    let rules = format!("/api/v1/webhooks/{}/rules", w.token_hook_id);
    let replay_batch = format!("/api/v1/webhooks/{}/deliveries/replay", w.token_hook_id);
    let json = Some("application/json");
    let many_queues: Vec<String> = (0..5000).map(|i| format!("q{i}")).collect();
    let mut all = vec![
        // The body itself, on every kind of write route.
        with_field(raw(M::POST, "/api/v1/agents", json, b"{nope", 400), "body"),
        with_field(
            raw(M::POST, "/api/v1/endpoints", json, b"{\"agent\":", 400),
            "body",
        ),
        with_field(raw(M::POST, &todos, json, b"[1,2]", 400), "body"),
        with_field(
            raw(
                M::POST,
                &todos,
                Some("text/plain"),
                b"{\"title\":\"x\"}",
                400,
            ),
            "body",
        ),
        with_field(
            raw(M::PUT, &presence, json, b"{\"presence\":\"out\"} x", 400),
            "body",
        ),
        with_field(raw(M::POST, "/api/v1/tokens", json, b"", 400), "body"),
        // Tokens.
        case(
            M::POST,
            "/api/v1/tokens",
            json!({"expires_in": "0s"}),
            400,
            "expires_in",
        ),
        case(
            M::POST,
            "/api/v1/tokens",
            json!({"expires_in": "soon"}),
            400,
            "expires_in",
        ),
        case(M::POST, "/api/v1/tokens", json!({"label": 5}), 400, "label"),
        case(
            M::POST,
            "/api/v1/tokens",
            json!({"scope": "all"}),
            400,
            "scope",
        ),
        raw(M::DELETE, "/api/v1/tokens/tok_missing", None, b"", 404),
        // Agents.
        case(M::POST, "/api/v1/agents", json!({}), 400, "name"),
        case(
            M::POST,
            "/api/v1/agents",
            json!({"name": "Bad Name"}),
            400,
            "name",
        ),
        case(
            M::POST,
            "/api/v1/agents",
            json!({"name": "a1", "kind": "zzz"}),
            400,
            "kind",
        ),
        case(
            M::POST,
            "/api/v1/agents",
            json!({"name": "a2", "expected_interval_seconds": 0}),
            400,
            "expected_interval_seconds",
        ),
        case(
            M::POST,
            "/api/v1/agents",
            json!({"name": "a3", "description": "x".repeat(501)}),
            400,
            "description",
        ),
        raw(M::POST, "/api/v1/agents", json, b"{\"name\":\"solo\"}", 409),
        case(
            M::PATCH,
            "/api/v1/agents/solo",
            json!({"kind": "zzz"}),
            400,
            "kind",
        ),
        // A good field beside a bad one changes nothing either.
        case(
            M::PATCH,
            "/api/v1/agents/solo",
            json!({"kind": "task", "expected_interval_seconds": 0}),
            400,
            "expected_interval_seconds",
        ),
        case(
            M::PATCH,
            "/api/v1/agents/solo",
            json!({"description": "ok", "name": "renamed"}),
            400,
            "name",
        ),
        // Vend: the agent it would create is not created either.
        case(M::POST, "/api/v1/endpoints", json!({}), 400, "agent"),
        case(
            M::POST,
            "/api/v1/endpoints",
            json!({"agent": "v1", "queues": []}),
            400,
            "queues",
        ),
        case(
            M::POST,
            "/api/v1/endpoints",
            json!({"agent": "v2", "queues": many_queues}),
            400,
            "queues",
        ),
        case(
            M::POST,
            "/api/v1/endpoints",
            json!({"agent": "v3", "queues": ["Not A Queue"]}),
            400,
            "queues",
        ),
        case(
            M::POST,
            "/api/v1/endpoints",
            json!({"agent": "v4", "verbs": ["rm"]}),
            400,
            "verbs",
        ),
        case(
            M::POST,
            "/api/v1/endpoints",
            json!({"agent": "v5", "default_lease_ttl_seconds": 59}),
            400,
            "default_lease_ttl_seconds",
        ),
        case(
            M::POST,
            "/api/v1/endpoints",
            json!({"agent": "v6", "expires_in": "forever"}),
            400,
            "expires_in",
        ),
        case(
            M::POST,
            "/api/v1/endpoints",
            json!({"agent": "v7", "kind": "x"}),
            400,
            "kind",
        ),
        case(
            M::POST,
            "/api/v1/endpoints",
            json!({"agent": "v8", "server_name": "Bad!"}),
            400,
            "server_name",
        ),
        case(
            M::POST,
            "/api/v1/endpoints",
            json!({"agent": "v9", "webhook": "yes"}),
            400,
            "webhook",
        ),
        case(
            M::POST,
            "/api/v1/endpoints",
            json!({"agent": "bot", "verbs": ["rm"]}),
            400,
            "verbs",
        ),
        // Editing, revoking and deleting endpoints.
        case(
            M::PATCH,
            &ep,
            json!({"default_lease_ttl_seconds": 59}),
            400,
            "default_lease_ttl_seconds",
        ),
        case(M::PATCH, &ep, json!({"queues": ["x"]}), 400, "queues"),
        raw(
            M::PATCH,
            &gone,
            json,
            b"{\"default_lease_ttl_seconds\":120}",
            409,
        ),
        raw(M::POST, &format!("{gone}/revoke"), None, b"", 409),
        // A test ring: its wait is bounded, and a revoked endpoint has no hearer.
        case(
            M::POST,
            &format!("{ep}/test-ring"),
            json!({"wait_seconds": 121}),
            400,
            "wait_seconds",
        ),
        raw(
            M::POST,
            &format!("{gone}/test-ring"),
            json,
            b"{\"wait_seconds\":1}",
            409,
        ),
        raw(M::DELETE, &ep, None, b"", 409),
        raw(
            M::POST,
            "/api/v1/endpoints/nobody-0000/revoke",
            None,
            b"",
            404,
        ),
        // Todos.
        case(M::POST, &todos, json!({}), 400, "title"),
        case(
            M::POST,
            &todos,
            json!({"title": "", "queue": "inbox"}),
            400,
            "title",
        ),
        case(
            M::POST,
            &todos,
            json!({"title": "x\u{0}y", "queue": "inbox"}),
            400,
            "title",
        ),
        case(
            M::POST,
            &todos,
            json!({"title": "x".repeat(2000), "queue": "inbox"}),
            400,
            "title",
        ),
        case(M::POST, &todos, json!({"title": "x"}), 400, "queue"),
        case(
            M::POST,
            &todos,
            json!({"title": "x", "queue": "nope"}),
            400,
            "queue",
        ),
        case(
            M::POST,
            &todos,
            json!({"title": "x", "queue": "inbox", "kind": ""}),
            400,
            "kind",
        ),
        case(
            M::POST,
            &todos,
            json!({"title": "x", "queue": "inbox", "key": 7}),
            400,
            "key",
        ),
        case(
            M::POST,
            &todos,
            json!({"title": "x", "queue": "inbox", "max_attempts": 2}),
            400,
            "max_attempts",
        ),
        raw(
            M::POST,
            &format!("{gone}/todos"),
            json,
            b"{\"title\":\"late\"}",
            409,
        ),
        raw(
            M::POST,
            &format!("/api/v1/todos/{}/retry", w.todo),
            None,
            b"",
            409,
        ),
        raw(
            M::POST,
            &format!("/api/v1/todos/{}/release", w.todo),
            None,
            b"",
            409,
        ),
        raw(M::POST, "/api/v1/todos/td_missing/retry", None, b"", 404),
        raw(M::POST, "/api/v1/todos/td_missing/cancel", None, b"", 404),
        raw(M::DELETE, "/api/v1/todos/td_missing", None, b"", 404),
        // Bulk actions: a bad body changes nothing, whatever it would match.
        case(
            M::POST,
            "/api/v1/todos/cancel",
            json!({"ids": []}),
            400,
            "ids",
        ),
        case(
            M::POST,
            "/api/v1/todos/cancel",
            json!({"ids": [w.todo.clone()], "queue": "inbox"}),
            400,
            "ids",
        ),
        case(
            M::POST,
            "/api/v1/todos/cancel",
            json!({"state": "sideways"}),
            400,
            "state",
        ),
        case(
            M::POST,
            "/api/v1/todos/cancel",
            json!({"every": true}),
            400,
            "every",
        ),
        case(
            M::POST,
            "/api/v1/todos/retry",
            json!({"ids": vec![w.todo.clone(); 1001]}),
            400,
            "ids",
        ),
        case(
            M::POST,
            "/api/v1/todos/retry",
            json!({"dead_letter": "yes"}),
            400,
            "dead_letter",
        ),
        // Presence and shifts.
        case(M::PUT, &presence, json!({}), 400, "presence"),
        case(
            M::PUT,
            &presence,
            json!({"presence": "maybe"}),
            400,
            "presence",
        ),
        case(
            M::PUT,
            &presence,
            json!({"presence": "out", "until": "yesterday"}),
            400,
            "until",
        ),
        case(
            M::PUT,
            &presence,
            json!({"presence": "out", "until": "2020-01-01T00:00:00Z"}),
            400,
            "until",
        ),
        case(
            M::PUT,
            &presence,
            json!({"presence": "in", "why": "x"}),
            400,
            "why",
        ),
        raw(
            M::PUT,
            &format!("{gone}/presence"),
            json,
            b"{\"presence\":\"in\"}",
            409,
        ),
        raw(M::DELETE, &format!("{gone}/presence"), None, b"", 409),
        case(M::PUT, &shift, json!({"shift": "garbage"}), 400, "shift"),
        case(M::PUT, &shift, json!({"shift": 5}), 400, "shift"),
        case(
            M::PUT,
            &shift,
            json!({"shfit": "mon-fri 09:00-17:00"}),
            400,
            "shfit",
        ),
        // Webhooks.
        case(M::POST, &hooks, json!({"queue": "nope"}), 400, "queue"),
        case(M::POST, &hooks, json!({"signed": "yes"}), 400, "signed"),
        case(M::POST, &hooks, json!({"secret": "mine"}), 400, "secret"),
        raw(M::POST, &format!("{gone}/webhooks"), json, b"{}", 409),
        raw(
            M::POST,
            "/api/v1/webhooks/wh_missing/rotate",
            None,
            b"",
            404,
        ),
        raw(M::DELETE, "/api/v1/webhooks/wh_missing", None, b"", 404),
        // Trusted senders.
        case(M::PUT, &senders, json!({"trust": "nobody"}), 400, "trust"),
        case(M::PUT, &senders, json!({"trust": []}), 400, "trust"),
        case(M::PUT, &senders, json!({"trust": ["a b"]}), 400, "trust"),
        case(M::PUT, &senders, json!({"trust": [7]}), 400, "trust"),
        case(M::PUT, &senders, json!({}), 400, "trust"),
        case(
            M::PUT,
            &senders,
            json!({"trust": ["alice"], "match": "anyone"}),
            400,
            "match",
        ),
        case(
            M::PUT,
            &senders,
            json!({"trust": "everyone", "match": "sender"}),
            400,
            "match",
        ),
        case(
            M::PUT,
            &senders,
            json!({"trust": ["alice"], "matc": "sender"}),
            400,
            "matc",
        ),
        raw(
            M::PUT,
            "/api/v1/webhooks/wh_missing/senders",
            json,
            b"{\"trust\":\"everyone\"}",
            404,
        ),
        // Routing rules: validated whole, the field named; nothing changes.
        case(
            M::PUT,
            &rules,
            json!({"rules": [{"if": ".a ==", "then": {"drop": true}}]}),
            400,
            "rules[0].if",
        ),
        case(
            M::PUT,
            &rules,
            json!({"rules": [{"if": "true", "then": {"drop": true}}, {"if": "env", "then": {"drop": true}}]}),
            400,
            "rules[1].if",
        ),
        case(
            M::PUT,
            &rules,
            json!({"rules": [{"if": "def f: f; f", "then": {"drop": true}}]}),
            400,
            "rules[0].if",
        ),
        case(
            M::PUT,
            &rules,
            json!({"rules": [{"if": "true", "then": {"queue": "elsewhere"}}]}),
            400,
            "rules[0].then.queue",
        ),
        case(
            M::PUT,
            &rules,
            json!({"rules": [{"if": "true", "then": {"drop": false}}]}),
            400,
            "rules[0].then",
        ),
        case(
            M::PUT,
            &rules,
            json!({"rules": [], "on_error": "ignore"}),
            400,
            "on_error",
        ),
        case(
            M::PUT,
            &rules,
            json!({"default": {"queue": "nope"}}),
            400,
            "default.queue",
        ),
        case(M::PUT, &rules, json!({"rulez": []}), 400, "rulez"),
        raw(
            M::PUT,
            "/api/v1/webhooks/wh_missing/rules",
            json,
            b"{\"rules\":[]}",
            404,
        ),
        case(
            M::POST,
            &format!("{rules}/test"),
            json!({}),
            400,
            "delivery_id",
        ),
        case(
            M::POST,
            &format!("{rules}/test"),
            json!({"delivery_id": w.accepted, "rules": [{"if": "now", "then": {"drop": true}}]}),
            400,
            "rules[0].if",
        ),
        // The refused delivery is the signed webhook's: another webhook's
        // delivery is as missing as any.
        raw(
            M::POST,
            &format!("{rules}/test"),
            json,
            format!("{{\"delivery_id\":\"{}\"}}", w.refused).as_bytes(),
            404,
        ),
        raw(
            M::POST,
            &format!("{rules}/test"),
            json,
            b"{\"delivery_id\":\"dl_missing\"}",
            404,
        ),
        case(
            M::POST,
            &replay_batch,
            json!({"decision": "nope"}),
            400,
            "decision",
        ),
        case(
            M::POST,
            &replay_batch,
            json!({"new_key": "yes"}),
            400,
            "new_key",
        ),
        raw(
            M::POST,
            "/api/v1/webhooks/wh_missing/deliveries/replay",
            None,
            b"",
            404,
        ),
        // Deliveries: only a quarantined one is released or discarded; a
        // refused one has nothing to replay.
        raw(M::POST, &format!("{accepted}/release"), None, b"", 409),
        raw(M::POST, &format!("{accepted}/discard"), None, b"", 409),
        raw(M::POST, &format!("{refused}/replay"), None, b"", 409),
        case(
            M::POST,
            &format!("{accepted}/replay"),
            json!({"new_key": "yes"}),
            400,
            "new_key",
        ),
        case(
            M::POST,
            &format!("{accepted}/replay"),
            json!({"new_kye": true}),
            400,
            "new_kye",
        ),
        with_field(
            raw(M::POST, &format!("{accepted}/replay"), json, b"[true]", 400),
            "body",
        ),
        raw(
            M::POST,
            "/api/v1/deliveries/dl_missing/release",
            None,
            b"",
            404,
        ),
        raw(
            M::POST,
            "/api/v1/deliveries/dl_missing/discard",
            None,
            b"",
            404,
        ),
        raw(
            M::POST,
            "/api/v1/deliveries/dl_missing/replay",
            None,
            b"",
            404,
        ),
        // Notify hooks.
        case(
            M::POST,
            &notify,
            json!({"url": "ftp://example.com/x"}),
            400,
            "url",
        ),
        case(
            M::POST,
            &notify,
            json!({"url": "https://user:pw@example.com/x"}),
            400,
            "url",
        ),
        case(M::POST, &notify, json!({"url": "not a url"}), 400, "url"),
        case(M::POST, &notify, json!({"url": 5}), 400, "url"),
        case(
            M::POST,
            &notify,
            json!({"url": "https://example.com/x", "secret": "mine"}),
            400,
            "secret",
        ),
        raw(
            M::POST,
            &format!("{gone}/hooks"),
            json,
            b"{\"url\":\"https://example.com/x\"}",
            409,
        ),
        raw(M::DELETE, "/api/v1/hooks/hk_missing", None, b"", 404),
        // OAuth connections: one the endpoint never had.
        raw(
            M::DELETE,
            &format!("{ep}/oauth-clients/og_missing"),
            None,
            b"",
            404,
        ),
        raw(M::POST, "/api/v1/hooks/hk_missing/enable", None, b"", 404),
        raw(M::POST, "/api/v1/hooks/hk_missing/test", None, b"", 404),
        // Schedules.
        case(
            M::POST,
            &schedules,
            sched(json!({"queue": "nope"})),
            400,
            "queue",
        ),
        case(
            M::POST,
            &schedules,
            json!({"cron": "* * * * *", "tz": "UTC", "title": "x"}),
            400,
            "queue",
        ),
        case(
            M::POST,
            &schedules,
            sched(json!({"cron": "61 * * * *"})),
            400,
            "cron",
        ),
        case(
            M::POST,
            &schedules,
            sched(json!({"cron": "* * *"})),
            400,
            "cron",
        ),
        case(
            M::POST,
            &schedules,
            sched(json!({"cron": "0 0 30 2 *"})),
            400,
            "cron",
        ),
        case(
            M::POST,
            &schedules,
            sched(json!({"tz": "Mars/Olympus"})),
            400,
            "tz",
        ),
        case(
            M::POST,
            &schedules,
            sched(json!({"title": " "})),
            400,
            "title",
        ),
        case(
            M::POST,
            &schedules,
            sched(json!({"title": "x".repeat(201)})),
            400,
            "title",
        ),
        case(
            M::POST,
            &schedules,
            sched(json!({"kind": "has space"})),
            400,
            "kind",
        ),
        case(
            M::POST,
            &schedules,
            sched(json!({"catch_up": "all"})),
            400,
            "catch_up",
        ),
        case(
            M::POST,
            &schedules,
            sched(json!({"every": "1h"})),
            400,
            "every",
        ),
        raw(
            M::POST,
            &format!("{gone}/schedules"),
            json,
            b"{\"queue\":\"inbox\",\"cron\":\"* * * * *\",\"tz\":\"UTC\",\"title\":\"x\"}",
            409,
        ),
        raw(M::DELETE, "/api/v1/schedules/sc_missing", None, b"", 404),
        raw(
            M::POST,
            "/api/v1/schedules/sc_missing/pause",
            None,
            b"",
            404,
        ),
        raw(
            M::POST,
            "/api/v1/schedules/sc_missing/resume",
            None,
            b"",
            404,
        ),
        // Admission and priority.
        case(
            M::PUT,
            &format!("{ep}/admission"),
            json!({"max_in_flight": -1}),
            400,
            "max_in_flight",
        ),
        case(
            M::PUT,
            &format!("{ep}/admission"),
            json!({"max_claims_per_window": 5}),
            400,
            "window",
        ),
        case(
            M::PUT,
            &format!("{ep}/admission"),
            json!({"window": "soon", "max_claims_per_window": 5}),
            400,
            "window",
        ),
        case(
            M::PUT,
            &format!("{ep}/queues/nope/admission"),
            json!({"paused": true}),
            400,
            "queue",
        ),
        raw(
            M::PUT,
            &format!("{gone}/admission"),
            json,
            b"{\"paused\":true}",
            409,
        ),
        case(
            M::PATCH,
            &format!("/api/v1/todos/{}", w.todo),
            json!({"priority": 2_000_000}),
            400,
            "priority",
        ),
        case(
            M::POST,
            &todos,
            json!({"title": "x", "queue": "inbox", "priority": -2_000_000}),
            400,
            "priority",
        ),
        case(
            M::POST,
            &todos,
            json!({"title": "x", "queue": "inbox", "delay": "soon"}),
            400,
            "delay",
        ),
        case(
            M::POST,
            &todos,
            json!({"title": "x", "queue": "inbox", "run_at": "tomorrow"}),
            400,
            "run_at",
        ),
        // Intake: a bad signature, an unknown URL, a revoked endpoint, too big.
        raw(
            M::POST,
            &w.signed_hook,
            json,
            b"{\"action\":\"opened\"}",
            401,
        ),
        raw(
            M::POST,
            "/webhooks/w/0123456789abcdef0123456789abcdef",
            json,
            b"{}",
            404,
        ),
        raw(M::POST, &w.revoked_hook, json, b"{}", 410),
    ];
    all.shrink_to_fit();
    all
}

/// The write routes outside the OpenAPI document (intake, `src/intake/`);
/// every write route of the document is read from `/api/v1/openapi.json`, so a
/// new route is walked or this test fails.
const UNDOCUMENTED_WRITE_ROUTES: &[(&str, &str)] = &[("POST", "/webhooks/w/{token}")];

/// Every write route (method, path template): the document's POST, PUT,
/// PATCH and DELETE operations, and the intake routes.
async fn write_routes(w: &World) -> Vec<(String, String)> {
    let (status, doc) = w.call(Method::GET, "/api/v1/openapi.json", None).await;
    assert_eq!(status, 200, "the OpenAPI document: {doc}");
    let mut routes: Vec<(String, String)> = UNDOCUMENTED_WRITE_ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in ["post", "put", "patch", "delete"] {
            if item.get(method).is_some() {
                routes.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    assert!(
        routes.len() > 15,
        "the document lists the write routes: {routes:?}"
    );
    routes
}

/// Whether a concrete path matches a template (`{x}` is one segment).
fn matches(template: &str, path: &str) -> bool {
    let t: Vec<&str> = template.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    t.len() == p.len() && t.iter().zip(&p).all(|(t, p)| t.starts_with('{') || t == p)
}

async fn walk(server: &Process, database_url: &str) {
    let token = server.first_token().expect("the first start's token");
    let w = World::make(format!("http://{}", server.addr), token).await;
    let cases = cases(&w);
    for (method, template) in write_routes(&w).await {
        assert!(
            cases
                .iter()
                .any(|c| c.method.as_str() == method && matches(&template, &c.path)),
            "no refusal walks {method} {template}"
        );
    }
    let before = dump(database_url, MAY_CHANGE).await;
    let mut failures = Vec::new();
    for c in &cases {
        let mut req = w
            .http
            .request(c.method.clone(), format!("{}{}", w.base, c.path))
            .bearer_auth(&w.token)
            .body(c.body.clone());
        if let Some(ct) = c.content_type {
            req = req.header("Content-Type", ct);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        let field = body["error"]["field"].as_str();
        let shown = String::from_utf8_lossy(&c.body[..c.body.len().min(80)]).into_owned();
        if status != c.status || (c.field.is_some() && field != c.field) {
            failures.push(format!(
                "{} {} {shown}: want {} field {:?}, got {status} {body}",
                c.method, c.path, c.status, c.field
            ));
        }
        if body["error"]["code"].as_str().is_none() {
            failures.push(format!(
                "{} {}: no error envelope: {body}",
                c.method, c.path
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let mut after = dump(database_url, MAY_CHANGE).await;
    refusals_recorded(database_url, &before, &mut after).await;
    assert_same(&before, &after);
    mcp_walk(&w, database_url).await;
}

/// The one write a refusal makes by design (`08-intake.md`, "Delivery
/// history"): a refused webhook delivery is recorded. The walk's bad
/// signature (401) and revoked endpoint (410) add exactly one `refused` row
/// each to `deliveries`, without a body; they are checked here and taken out
/// of `after`, so that everything else must be as it was.
async fn refusals_recorded(url: &str, before: &Dump, after: &mut Dump) {
    let new: Vec<String> = after["deliveries"]
        .iter()
        .filter(|r| !before["deliveries"].contains(r))
        .cloned()
        .collect();
    let pool = AnyPool::connect(url)
        .await
        .expect("connect beside the server");
    let mut recorded: Vec<(String, String, String, i64)> = Vec::new();
    for row in sqlx::query(
        "SELECT id, decision, reason, CAST(CASE WHEN body IS NULL THEN 1 ELSE 0 END AS BIGINT) \
         FROM deliveries",
    )
    .fetch_all(&pool)
    .await
    .expect("read deliveries")
    {
        let id: String = row.get(0);
        if new.iter().any(|r| r.starts_with(&format!("'{id}'|"))) {
            recorded.push((id, row.get(1), row.get(2), row.get::<i64, _>(3)));
        }
    }
    pool.close().await;
    let mut seen: Vec<(&str, &str, i64)> = recorded
        .iter()
        .map(|(_, d, r, b)| (d.as_str(), r.as_str(), *b))
        .collect();
    seen.sort();
    assert_eq!(
        (seen, new.len()),
        (
            vec![
                ("refused", "bad_signature", 1),
                ("refused", "endpoint_revoked", 1)
            ],
            2
        ),
        "the refused deliveries, recorded without a body, and nothing else: {new:?}"
    );
    after
        .get_mut("deliveries")
        .unwrap()
        .retain(|r| !new.contains(r));
}

fn assert_same(before: &Dump, after: &Dump) {
    for (table, rows) in before {
        let now = &after[table];
        let gone: Vec<&String> = rows.iter().filter(|r| !now.contains(r)).collect();
        let new: Vec<&String> = now.iter().filter(|r| !rows.contains(r)).collect();
        assert!(
            gone.is_empty() && new.is_empty(),
            "refused requests changed {table}:\n  before: {gone:?}\n  after:  {new:?}"
        );
    }
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
}

/// The agent's write tools over MCP, refused for their arguments or their
/// state: a tool error naming the argument, and the database unchanged.
async fn mcp_walk(w: &World, database_url: &str) {
    let mcp = Mcp {
        http: w.http.clone(),
        url: w.mcp_url.clone(),
        authorization: format!("Bearer {}", w.credential),
    };
    let session = mcp.initialize().await;
    let todo = w.todo.as_str();
    let invalid = "invalid_argument";
    let cases: Vec<(&str, Value, &str, Option<&str>)> = vec![
        // Outside the endpoint's scope: refused as forbidden (`03-mcp.md`).
        ("claim_next", json!({"queue": "nope"}), "forbidden", None),
        (
            "claim_next",
            json!({"lease_ttl_seconds": 0}),
            invalid,
            Some("lease_ttl_seconds"),
        ),
        (
            "claim_next",
            json!({"surprise": 1}),
            invalid,
            Some("surprise"),
        ),
        ("claim", json!({}), invalid, Some("id")),
        (
            "claim",
            json!({"id": todo, "lease_ttl_seconds": "long"}),
            invalid,
            Some("lease_ttl_seconds"),
        ),
        ("claim", json!({"id": "td_missing"}), "not_found", None),
        ("heartbeat", json!({"id": todo}), "conflict", None),
        ("complete", json!({"id": todo}), "conflict", None),
        (
            "complete",
            json!({"id": todo, "summary": 5}),
            invalid,
            Some("summary"),
        ),
        (
            "fail",
            json!({"id": todo, "bogus": 1}),
            invalid,
            Some("bogus"),
        ),
        ("release", json!({"id": todo}), "conflict", None),
        (
            "set_default_lease",
            json!({"default_lease_ttl_seconds": 59}),
            invalid,
            Some("default_lease_ttl_seconds"),
        ),
        (
            "set_default_lease",
            json!({}),
            invalid,
            Some("default_lease_ttl_seconds"),
        ),
        ("clock_in", json!({"for": "9h"}), invalid, Some("for")),
        (
            "clock_out",
            json!({"until": "soon"}),
            invalid,
            Some("until"),
        ),
    ];
    let before = dump(database_url, MCP_MAY_CHANGE).await;
    let mut failures = Vec::new();
    for (tool, args, code, field) in &cases {
        let result = mcp.call(&session, tool, args.clone()).await;
        let error = &result["structuredContent"]["error"];
        let message = error["message"].as_str().unwrap_or("");
        let named = field.is_none_or(|f| message.starts_with(&format!("{f}:")));
        if result["isError"] != true || error["code"] != *code || !named {
            failures.push(format!(
                "{tool} {args}: want {code} {field:?}, got {result}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_same(&before, &dump(database_url, MCP_MAY_CHANGE).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_route_refuses_bad_input_and_writes_nothing_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("switchboard.db");
    let mut command = serve_command(dir.path());
    command.arg("--database").arg(&database).args(QUIET);
    let mut server = Process::spawn(command);
    walk(&server, &format!("sqlite://{}", database.display())).await;
    assert!(server.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_route_refuses_bad_input_and_writes_nothing_on_postgres() {
    let Some(ts): Option<TestStore> = postgres_store("refusals_postgres").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL database");
    let dir = tempfile::tempdir().unwrap();
    let mut command = serve_command(dir.path());
    command.args(["--database", url.as_str()]).args(QUIET);
    let mut server = Process::spawn(command);
    walk(&server, &url).await;
    assert!(server.stop().success());
    ts.finish().await;
}
