//! The REST API's tenant isolation, authentication and conformance, against
//! the server in process (`06-registry.md`, `07-operator.md`, `09-quality.md`
//! Security): two humans, each with two endpoints, a todo and a webhook;
//! every route with a foreign id answers exactly like a missing one; every
//! authentication failure answers the same 401; the owner gets the success
//! status; body caps, unknown fields, content types, immutable scope, rate
//! limits, revoke/delete conflicts and keyset pagination.

use crate::support::api;

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use api::{Body, Resp, Server, Vended, create_token, make_human, push, vend};
use reqwest::Method;
use serde_json::{Value, json};

const REALM: &str = "Bearer realm=\"switchboard-api\"";

/// One human's side of the matrix.
struct Tenant {
    token: String,
    /// A spare API token of theirs (the other human probes its id).
    spare_token_id: String,
    /// Endpoint 0 has one queue and a webhook; endpoint 1 has two queues.
    endpoints: [Vended; 2],
    todo: String,
    webhook: String,
    /// A notify hook on endpoint 1.
    hook: String,
    /// A schedule on endpoint 1.
    schedule: String,
    /// A quarantined delivery to endpoint 0's webhook (which trusts
    /// only [`TRUSTED`]).
    delivery: String,
    agent: String,
}

/// The one login endpoint 0's webhook trusts.
const TRUSTED: &str = "trusted-only";

async fn tenant(server: &Server, token: &str, prefix: &str) -> Tenant {
    let first = vend(
        server,
        token,
        json!({ "agent": format!("{prefix}-one"), "kind": "task", "webhook": true }),
    )
    .await;
    let second = vend(
        server,
        token,
        json!({ "agent": format!("{prefix}-two"), "queues": ["inbox", "reviews"] }),
    )
    .await;
    let todo = push(server, token, &first.slug, "first").await;
    let webhook = server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/webhooks", second.slug),
            token,
            Body::Json(json!({ "queue": "reviews", "signed": true })),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let hook = server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/hooks", second.slug),
            token,
            Body::Json(json!({ "url": "https://hooks.example.invalid/notify" })),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let schedule = server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{}/schedules", second.slug),
            token,
            Body::Json(
                json!({ "queue": "reviews", "cron": "0 9 * * *", "tz": "UTC", "title": "daily" }),
            ),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, spare_token_id, _) = create_token(server, token, json!({ "label": "spare" })).await;
    // A stranger's delivery to endpoint 0's webhook waits in quarantine: a
    // delivery to release, discard, replay and show, and no todo.
    server
        .expect(
            200,
            Method::PUT,
            &format!(
                "/api/v1/webhooks/{}/senders",
                first.webhook_id.as_ref().expect("vended with a webhook")
            ),
            token,
            Body::Json(json!({ "trust": [TRUSTED] })),
        )
        .await;
    let ingest = first.ingest_url.as_ref().expect("vended with a webhook");
    let ingest = &ingest[ingest.find("/webhooks/w/").expect("an ingest path")..];
    let delivered = server
        .send(
            Method::POST,
            ingest,
            None,
            Body::Json(json!({ "sender": { "login": "stranger" }, "title": "let me in" })),
        )
        .await;
    assert_eq!(delivered.status, 202, "{}", delivered.text());
    let delivered = delivered.json();
    assert_eq!(delivered["delivery"]["decision"], "quarantined");
    let delivery = delivered["delivery"]["id"].as_str().unwrap().to_owned();
    Tenant {
        token: token.to_owned(),
        spare_token_id,
        agent: first.agent.clone(),
        endpoints: [first, second],
        todo,
        webhook,
        hook,
        schedule,
        delivery,
    }
}

/// Two humans on one server: `admin` (the first-start human) and `bea`
/// (made with the local admin path).
async fn two_tenants(dir: &std::path::Path) -> (Server, Tenant, Tenant) {
    let server = Server::in_process(dir, &api::HIGH_RATES);
    let bea = make_human(&server, "bea");
    let a = tenant(&server, &server.first_token.clone(), "alpha").await;
    let b = tenant(&server, &bea.token, "bravo").await;
    (server, a, b)
}

/// An OAuth connection id nobody has (`/endpoints/{ref}/oauth-clients/{id}`).
const NO_GRANT: &str = "og_00000000000070008000000000000000";

/// An id-taking route: given the id, the request to make.
type Route = fn(&str) -> (Method, String, Body);

fn endpoint_routes() -> Vec<Route> {
    vec![
        |r| (Method::GET, format!("/api/v1/endpoints/{r}"), Body::None),
        |r| {
            (
                Method::PATCH,
                format!("/api/v1/endpoints/{r}"),
                Body::Json(json!({ "default_lease_ttl_seconds": 120 })),
            )
        },
        |r| (Method::DELETE, format!("/api/v1/endpoints/{r}"), Body::None),
        |r| {
            (
                Method::POST,
                format!("/api/v1/endpoints/{r}/revoke"),
                Body::None,
            )
        },
        |r| {
            (
                Method::POST,
                format!("/api/v1/endpoints/{r}/todos"),
                Body::Json(json!({ "title": "sneaky", "queue": "inbox" })),
            )
        },
        |r| {
            (
                Method::POST,
                format!("/api/v1/endpoints/{r}/test-ring"),
                Body::Json(json!({ "wait_seconds": 1 })),
            )
        },
        |r| {
            (
                Method::GET,
                format!("/api/v1/endpoints/{r}/webhooks"),
                Body::None,
            )
        },
        |r| {
            (
                Method::POST,
                format!("/api/v1/endpoints/{r}/webhooks"),
                Body::Json(json!({ "queue": "inbox" })),
            )
        },
        |r| {
            (
                Method::GET,
                format!("/api/v1/endpoints/{r}/hooks"),
                Body::None,
            )
        },
        |r| {
            (
                Method::POST,
                format!("/api/v1/endpoints/{r}/hooks"),
                Body::Json(json!({ "url": "https://hooks.example.invalid/sneaky" })),
            )
        },
        |r| {
            (
                Method::GET,
                format!("/api/v1/endpoints/{r}/schedules"),
                Body::None,
            )
        },
        |r| {
            (
                Method::GET,
                format!("/api/v1/endpoints/{r}/oauth-clients"),
                Body::None,
            )
        },
        |r| {
            (
                Method::DELETE,
                format!("/api/v1/endpoints/{r}/oauth-clients/{NO_GRANT}"),
                Body::None,
            )
        },
        |r| {
            (
                Method::GET,
                format!("/api/v1/endpoints/{r}/admission"),
                Body::None,
            )
        },
        |r| {
            (
                Method::GET,
                format!("/api/v1/endpoints/{r}/activity?range=day"),
                Body::None,
            )
        },
        |r| {
            (
                Method::PUT,
                format!("/api/v1/endpoints/{r}/admission"),
                Body::Json(json!({ "paused": true })),
            )
        },
        |r| {
            (
                Method::PUT,
                format!("/api/v1/endpoints/{r}/queues/inbox/admission"),
                Body::Json(json!({ "max_in_flight": 1 })),
            )
        },
        |r| {
            (
                Method::POST,
                format!("/api/v1/endpoints/{r}/schedules"),
                Body::Json(
                    json!({ "queue": "inbox", "cron": "* * * * *", "tz": "UTC", "title": "sneaky" }),
                ),
            )
        },
        |r| {
            (
                Method::GET,
                format!("/api/v1/todos?endpoint={r}"),
                Body::None,
            )
        },
        |r| {
            (
                Method::POST,
                "/api/v1/todos/cancel".to_owned(),
                Body::Json(json!({ "endpoint": r })),
            )
        },
        |r| {
            (
                Method::POST,
                "/api/v1/todos/retry".to_owned(),
                Body::Json(json!({ "endpoint": r, "state": "cancelled" })),
            )
        },
        |r| {
            (
                Method::GET,
                format!("/api/v1/endpoints/{r}/presence"),
                Body::None,
            )
        },
        |r| {
            (
                Method::PUT,
                format!("/api/v1/endpoints/{r}/presence"),
                Body::Json(json!({ "presence": "out" })),
            )
        },
        |r| {
            (
                Method::DELETE,
                format!("/api/v1/endpoints/{r}/presence"),
                Body::None,
            )
        },
        |r| {
            (
                Method::PUT,
                format!("/api/v1/endpoints/{r}/shift"),
                Body::Json(json!({ "shift": null })),
            )
        },
    ]
}

fn todo_routes() -> Vec<Route> {
    vec![
        |id| (Method::GET, format!("/api/v1/todos/{id}"), Body::None),
        |id| (Method::GET, format!("/api/v1/todos/{id}/event"), Body::None),
        |id| {
            (
                Method::PATCH,
                format!("/api/v1/todos/{id}"),
                Body::Json(json!({ "priority": 3 })),
            )
        },
        |id| {
            (
                Method::POST,
                format!("/api/v1/todos/{id}/retry"),
                Body::None,
            )
        },
        |id| {
            (
                Method::POST,
                format!("/api/v1/todos/{id}/release"),
                Body::None,
            )
        },
        |id| {
            (
                Method::POST,
                format!("/api/v1/todos/{id}/cancel"),
                Body::None,
            )
        },
        |id| (Method::DELETE, format!("/api/v1/todos/{id}"), Body::None),
    ]
}

fn webhook_routes() -> Vec<Route> {
    vec![
        |id| {
            (
                Method::POST,
                format!("/api/v1/webhooks/{id}/rotate"),
                Body::None,
            )
        },
        |id| (Method::DELETE, format!("/api/v1/webhooks/{id}"), Body::None),
        |id| {
            (
                Method::PUT,
                format!("/api/v1/webhooks/{id}/senders"),
                Body::Json(json!({ "trust": "everyone" })),
            )
        },
        |id| {
            (
                Method::GET,
                format!("/api/v1/webhooks/{id}/deliveries"),
                Body::None,
            )
        },
        |id| {
            (
                Method::GET,
                format!("/api/v1/webhooks/{id}/rules"),
                Body::None,
            )
        },
        |id| {
            (
                Method::PUT,
                format!("/api/v1/webhooks/{id}/rules"),
                Body::Json(json!({ "rules": [], "on_error": "skip" })),
            )
        },
        |id| {
            (
                Method::POST,
                format!("/api/v1/webhooks/{id}/rules/test"),
                Body::Json(json!({ "delivery_id": "dl_00000000000070008000000000000000" })),
            )
        },
        |id| {
            (
                Method::POST,
                format!("/api/v1/webhooks/{id}/deliveries/replay"),
                Body::Json(json!({ "decision": "dropped" })),
            )
        },
    ]
}

fn delivery_routes() -> Vec<Route> {
    vec![
        |id| (Method::GET, format!("/api/v1/deliveries/{id}"), Body::None),
        |id| {
            (
                Method::POST,
                format!("/api/v1/deliveries/{id}/release"),
                Body::None,
            )
        },
        |id| {
            (
                Method::POST,
                format!("/api/v1/deliveries/{id}/discard"),
                Body::None,
            )
        },
        |id| {
            (
                Method::POST,
                format!("/api/v1/deliveries/{id}/replay"),
                Body::Json(json!({ "new_key": true })),
            )
        },
    ]
}

fn hook_routes() -> Vec<Route> {
    vec![
        |id| (Method::DELETE, format!("/api/v1/hooks/{id}"), Body::None),
        |id| {
            (
                Method::POST,
                format!("/api/v1/hooks/{id}/enable"),
                Body::None,
            )
        },
        |id| (Method::POST, format!("/api/v1/hooks/{id}/test"), Body::None),
    ]
}

fn schedule_routes() -> Vec<Route> {
    vec![
        |id| {
            (
                Method::DELETE,
                format!("/api/v1/schedules/{id}"),
                Body::None,
            )
        },
        |id| {
            (
                Method::POST,
                format!("/api/v1/schedules/{id}/pause"),
                Body::None,
            )
        },
        |id| {
            (
                Method::POST,
                format!("/api/v1/schedules/{id}/resume"),
                Body::None,
            )
        },
    ]
}

fn token_routes() -> Vec<Route> {
    vec![|id| (Method::DELETE, format!("/api/v1/tokens/{id}"), Body::None)]
}

fn agent_routes() -> Vec<Route> {
    vec![
        |n| (Method::GET, format!("/api/v1/agents/{n}"), Body::None),
        |n| {
            (
                Method::PATCH,
                format!("/api/v1/agents/{n}"),
                Body::Json(json!({ "description": "mine now" })),
            )
        },
    ]
}

/// Percent-encoded bytes that are not UTF-8: an id that cannot even be
/// decoded is as missing as any other.
const UNDECODABLE: &str = "%FF%FE";

/// Every id-taking route with the other tenant's ids and with missing ids.
fn id_matrix(other: &Tenant) -> Vec<(Vec<Route>, Vec<String>, Vec<&'static str>)> {
    let e = &other.endpoints;
    vec![
        (
            endpoint_routes(),
            vec![
                e[0].slug.clone(),
                e[0].id.clone(),
                e[1].slug.clone(),
                e[1].id.clone(),
            ],
            vec![
                "nobody-zzzz",
                "ep_00000000000070008000000000000000",
                UNDECODABLE,
            ],
        ),
        (
            todo_routes(),
            vec![other.todo.clone()],
            vec!["td_00000000000070008000000000000000", "nope", UNDECODABLE],
        ),
        (
            webhook_routes(),
            vec![
                other.webhook.clone(),
                e[0].webhook_id.clone().expect("vended with a webhook"),
            ],
            vec!["wh_00000000000070008000000000000000", UNDECODABLE],
        ),
        (
            delivery_routes(),
            vec![other.delivery.clone()],
            vec!["dl_00000000000070008000000000000000", "nope", UNDECODABLE],
        ),
        (
            hook_routes(),
            vec![other.hook.clone()],
            vec!["hk_00000000000070008000000000000000", UNDECODABLE],
        ),
        (
            schedule_routes(),
            vec![other.schedule.clone()],
            vec!["sc_00000000000070008000000000000000", UNDECODABLE],
        ),
        (
            token_routes(),
            vec![other.spare_token_id.clone()],
            vec!["tok_00000000000070008000000000000000", UNDECODABLE],
        ),
        (
            agent_routes(),
            vec![other.agent.clone(), other.endpoints[1].agent.clone()],
            vec!["nobody", UNDECODABLE],
        ),
    ]
}

async fn request(server: &Server, token: &str, route: Route, id: &str) -> (String, Resp) {
    let (method, path, body) = route(id);
    let what = format!("{method} {path}");
    (what, server.call(method, &path, token, body).await)
}

/// A 404's body with the reference it repeats (an endpoint's routes name
/// the reference they were sent: `no endpoint "REF" among yours`) put back
/// to `REF`, so that bodies for different references compare.
fn unnamed(body: &[u8], id: &str) -> Vec<u8> {
    // A query string's value is decoded (lossily) before it is named.
    let decoded = String::from_utf8_lossy(&percent_decoded(id)).into_owned();
    let mut text = String::from_utf8_lossy(body).into_owned();
    for form in [id, decoded.as_str()] {
        text = text.replace(&format!("\\\"{form}\\\""), "\\\"REF\\\"");
    }
    text.into_bytes()
}

fn percent_decoded(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex: String = bytes.by_ref().take(2).map(char::from).collect();
            out.push(u8::from_str_radix(&hex, 16).expect("two hex digits"));
        } else {
            out.push(b);
        }
    }
    out
}

/// Probes every id-taking route of `prober` with `other`'s ids: each answers
/// 404 with a body byte-identical to the same route with a missing id (but
/// for the reference an endpoint's route repeats, the caller's own input).
async fn probe(server: &Server, prober: &Tenant, other: &Tenant) -> usize {
    let mut checked = 0;
    for (routes, foreign, missing) in id_matrix(other) {
        for route in routes {
            let (what, reference) = request(server, &prober.token, route, missing[0]).await;
            assert_eq!(reference.status, 404, "{what}: {}", reference.text());
            assert_eq!(reference.code(), "not_found", "{what}");
            if what.contains("/api/v1/endpoints/") {
                assert!(
                    reference.text().contains(&format!(
                        "no endpoint \\\"{}\\\" among yours; `switchboard endpoint list`",
                        missing[0]
                    )),
                    "{what}: an unknown endpoint is named: {}",
                    reference.text()
                );
            }
            let reference_body = unnamed(&reference.body, missing[0]);
            for id in missing
                .iter()
                .skip(1)
                .copied()
                .chain(foreign.iter().map(String::as_str))
            {
                let (what, resp) = request(server, &prober.token, route, id).await;
                assert_eq!(resp.status, 404, "{what}: {}", resp.text());
                assert_eq!(
                    String::from_utf8_lossy(&unnamed(&resp.body, id)),
                    String::from_utf8_lossy(&reference_body),
                    "{what}: a foreign id must answer byte for byte like a missing one"
                );
                assert_eq!(
                    resp.header("content-type"),
                    reference.header("content-type"),
                    "{what}"
                );
                checked += 1;
            }
        }
    }
    checked
}

/// After the probes, everything of `owner` is as it was.
async fn assert_untouched(server: &Server, owner: &Tenant) {
    let t = &owner.token;
    for e in &owner.endpoints {
        let v = server
            .expect(
                200,
                Method::GET,
                &format!("/api/v1/endpoints/{}", e.slug),
                t,
                Body::None,
            )
            .await;
        assert_eq!(v["state"], "active", "{}", e.slug);
        assert_eq!(v["default_lease_ttl_seconds"], Value::Null, "{}", e.slug);
        let presence = server
            .expect(
                200,
                Method::GET,
                &format!("/api/v1/endpoints/{}/presence", e.slug),
                t,
                Body::None,
            )
            .await;
        assert_eq!(presence["presence"], "in", "{}: {presence}", e.slug);
        assert_ne!(presence["source"], "operator", "{}: {presence}", e.slug);
        assert_eq!(presence["shift"], Value::Null, "{}: {presence}", e.slug);
    }
    for (e, expected) in owner.endpoints.iter().zip([0, 1]) {
        let hooks = server
            .expect(
                200,
                Method::GET,
                &format!("/api/v1/endpoints/{}/hooks", e.slug),
                t,
                Body::None,
            )
            .await;
        let hooks = hooks["hooks"].as_array().unwrap();
        assert_eq!(hooks.len(), expected, "{}: {hooks:?}", e.slug);
        if let Some(hook) = hooks.first() {
            assert_eq!(hook["id"], owner.hook.as_str());
            assert_eq!(hook["state"], "enabled");
        }
    }
    for (e, expected) in owner.endpoints.iter().zip([0, 1]) {
        let listed = server
            .expect(
                200,
                Method::GET,
                &format!("/api/v1/endpoints/{}/schedules", e.slug),
                t,
                Body::None,
            )
            .await;
        let schedules = listed["schedules"].as_array().unwrap();
        assert_eq!(schedules.len(), expected, "{}: {schedules:?}", e.slug);
        if let Some(schedule) = schedules.first() {
            assert_eq!(schedule["id"], owner.schedule.as_str());
            assert_eq!(schedule["paused"], false);
        }
    }
    let todo = server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/todos/{}", owner.todo),
            t,
            Body::None,
        )
        .await;
    assert_eq!(todo["state"], "pending");
    let listed = server
        .expect(200, Method::GET, "/api/v1/todos", t, Body::None)
        .await;
    let titles: Vec<&str> = listed["todos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["first"], "nobody pushed into these endpoints");
    for (e, hook) in [
        (&owner.endpoints[1], &owner.webhook),
        (
            &owner.endpoints[0],
            owner.endpoints[0].webhook_id.as_ref().unwrap(),
        ),
    ] {
        let hooks = server
            .expect(
                200,
                Method::GET,
                &format!("/api/v1/endpoints/{}/webhooks", e.slug),
                t,
                Body::None,
            )
            .await;
        let hooks = hooks["webhooks"].as_array().unwrap();
        assert_eq!(hooks.len(), 1, "no webhook added: {hooks:?}");
        assert_eq!(&hooks[0]["id"], hook);
        assert_eq!(hooks[0]["rotated_at"], Value::Null, "not rotated");
        let senders = if e.slug == owner.endpoints[0].slug {
            json!({ "trust": [TRUSTED], "match": "sender" })
        } else {
            json!({ "trust": "everyone" })
        };
        assert_eq!(hooks[0]["senders"], senders, "senders unchanged");
    }
    let delivery = server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/deliveries/{}", owner.delivery),
            t,
            Body::None,
        )
        .await;
    assert_eq!(
        delivery["decision"], "quarantined",
        "neither released nor discarded"
    );
    let tokens = server
        .expect(200, Method::GET, "/api/v1/tokens", t, Body::None)
        .await;
    let spare = tokens["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == owner.spare_token_id.as_str())
        .expect("the spare token is listed");
    assert_eq!(spare["revoked_at"], Value::Null);
    let agent = server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/agents/{}", owner.agent),
            t,
            Body::None,
        )
        .await;
    assert_eq!(agent["description"], Value::Null);
}

#[tokio::test]
async fn a_foreign_id_answers_exactly_like_a_missing_one_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let (server, a, b) = two_tenants(dir.path()).await;
    let checked = probe(&server, &a, &b).await + probe(&server, &b, &a).await;
    assert!(checked >= 60, "checked {checked} foreign/missing pairs");
    assert_untouched(&server, &a).await;
    assert_untouched(&server, &b).await;
    // Bulk actions see only the caller's own todos: foreign ids are skipped
    // like missing ones, and "everything" is everything of theirs.
    for (me, other) in [(&a, &b), (&b, &a)] {
        for path in ["/api/v1/todos/cancel", "/api/v1/todos/retry"] {
            let by_ids = server
                .expect(
                    200,
                    Method::POST,
                    path,
                    &me.token,
                    Body::Json(
                        json!({ "ids": [other.todo, "td_00000000000070008000000000000000"] }),
                    ),
                )
                .await;
            assert_eq!(
                by_ids,
                json!({ "count": 0, "more": false, "ids": [] }),
                "{path}"
            );
        }
        let listed = server
            .expect(
                200,
                Method::GET,
                "/api/v1/todos?q=first&kind=operator&source=operator",
                &me.token,
                Body::None,
            )
            .await;
        let ids: Vec<&str> = listed["todos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            [me.todo.as_str()],
            "the filters stay in the caller's tenancy"
        );
    }
    let everything = server
        .expect(
            200,
            Method::POST,
            "/api/v1/todos/cancel",
            &b.token,
            Body::Json(json!({})),
        )
        .await;
    assert_eq!(everything["count"], 1, "{everything}");
    assert_eq!(everything["ids"], json!([b.todo]));
    assert_untouched(&server, &a).await;
    // Lists show only the caller's own.
    for (me, other) in [(&a, &b), (&b, &a)] {
        let mine = server
            .expect(200, Method::GET, "/api/v1/endpoints", &me.token, Body::None)
            .await;
        let slugs: BTreeSet<&str> = mine["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["slug"].as_str().unwrap())
            .collect();
        let expected: BTreeSet<&str> = me.endpoints.iter().map(|e| e.slug.as_str()).collect();
        assert_eq!(slugs, expected);
        let agents = server
            .expect(200, Method::GET, "/api/v1/agents", &me.token, Body::None)
            .await;
        assert_eq!(agents["agents"].as_array().unwrap().len(), 2);
        let todos = server
            .expect(200, Method::GET, "/api/v1/todos", &me.token, Body::None)
            .await;
        assert!(
            todos["todos"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["id"] != other.todo.as_str())
        );
    }
}

/// Every route of the API, with a body that would be accepted.
fn every_route(t: &Tenant) -> Vec<(Method, String, Body)> {
    let ep = &t.endpoints[0].slug;
    let mut routes = vec![
        (Method::GET, "/api/v1/me".to_owned(), Body::None),
        (Method::GET, "/api/v1/tokens".to_owned(), Body::None),
        (
            Method::POST,
            "/api/v1/tokens".to_owned(),
            Body::Json(json!({ "label": "x" })),
        ),
        (Method::GET, "/api/v1/agents".to_owned(), Body::None),
        (
            Method::POST,
            "/api/v1/agents".to_owned(),
            Body::Json(json!({ "name": "newcomer" })),
        ),
        (Method::GET, "/api/v1/endpoints".to_owned(), Body::None),
        (
            Method::POST,
            "/api/v1/endpoints".to_owned(),
            Body::Json(json!({ "agent": "newcomer" })),
        ),
        (Method::GET, "/api/v1/todos".to_owned(), Body::None),
        (
            Method::POST,
            "/api/v1/todos/retry".to_owned(),
            Body::Json(json!({ "ids": [t.todo] })),
        ),
        (
            Method::POST,
            "/api/v1/todos/cancel".to_owned(),
            Body::Json(json!({ "q": "nothing like it" })),
        ),
    ];
    for route in endpoint_routes() {
        routes.push(route(ep));
    }
    for route in todo_routes() {
        routes.push(route(&t.todo));
    }
    for route in webhook_routes() {
        routes.push(route(&t.webhook));
    }
    for route in hook_routes() {
        routes.push(route(&t.hook));
    }
    for route in schedule_routes() {
        routes.push(route(&t.schedule));
    }
    for route in delivery_routes() {
        routes.push(route(&t.delivery));
    }
    for route in token_routes() {
        routes.push(route(&t.spare_token_id));
    }
    for route in agent_routes() {
        routes.push(route(&t.agent));
    }
    routes
}

/// `/api/v1/todos?endpoint=x` → `GET /api/v1/todos`, `/api/v1/todos/td_1` →
/// `GET /api/v1/todos/{}`: the shape of a route, to compare with the document.
fn shape(method: &Method, path: &str, ids: &HashSet<&str>) -> String {
    let path = path.split('?').next().unwrap();
    let segments: Vec<&str> = path
        .split('/')
        .map(|s| if ids.contains(s) { "{}" } else { s })
        .collect();
    format!("{method} {}", segments.join("/"))
}

#[tokio::test]
async fn the_matrix_covers_every_route_of_the_openapi_document() {
    let dir = tempfile::tempdir().unwrap();
    let (server, a, _b) = two_tenants(dir.path()).await;
    let doc = server
        .send(Method::GET, "/api/v1/openapi.json", None, Body::None)
        .await;
    assert_eq!(doc.status, 200, "the document is public");
    let doc = doc.json();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "put", "post", "patch", "delete"].contains(&method.as_str()) {
                let braced: Vec<String> = path
                    .split('/')
                    .map(|s| {
                        if s.starts_with('{') {
                            "{}".to_owned()
                        } else {
                            s.to_owned()
                        }
                    })
                    .collect();
                documented.insert(format!("{} {}", method.to_uppercase(), braced.join("/")));
            }
        }
    }
    let ids: HashSet<&str> = [
        a.endpoints[0].slug.as_str(),
        a.todo.as_str(),
        a.webhook.as_str(),
        a.hook.as_str(),
        a.schedule.as_str(),
        a.delivery.as_str(),
        a.spare_token_id.as_str(),
        a.agent.as_str(),
        // The queue of `/endpoints/{ref}/queues/{queue}/admission`.
        "inbox",
        NO_GRANT,
    ]
    .into();
    let covered: BTreeSet<String> = every_route(&a)
        .iter()
        .map(|(m, p, _)| shape(m, p, &ids))
        .collect();
    assert_eq!(
        covered, documented,
        "a route was added or removed: cover it in every_route() (and, when it takes an id, \
         in id_matrix()) so that the isolation and 401 matrices stay complete"
    );
}

/// `Authorization` values that must all be refused alike.
async fn bad_credentials(server: &Server, a: &Tenant) -> Vec<(&'static str, Option<String>)> {
    // An expired token: 1 s of life, then wait for it to pass (the only sleep).
    let (expiring, _, expires_at) = create_token(
        server,
        &a.token,
        json!({ "label": "brief", "expires_in": "1s" }),
    )
    .await;
    let expires_at: jiff::Timestamp = expires_at.as_str().unwrap().parse().unwrap();
    let works = server
        .call(Method::GET, "/api/v1/me", &expiring, Body::None)
        .await;
    if jiff::Timestamp::now().as_millisecond() < expires_at.as_millisecond() - 50 {
        assert_eq!(works.status, 200, "before its expiry: {}", works.text());
    }
    // A revoked token, which worked before.
    let (revoked, revoked_id, _) = create_token(server, &a.token, json!({ "label": "gone" })).await;
    server
        .expect(200, Method::GET, "/api/v1/me", &revoked, Body::None)
        .await;
    let resp = server
        .call(
            Method::DELETE,
            &format!("/api/v1/tokens/{revoked_id}"),
            &a.token,
            Body::None,
        )
        .await;
    assert_eq!(resp.status, 204, "{}", resp.text());
    let left = expires_at.as_millisecond() - jiff::Timestamp::now().as_millisecond();
    if left > -100 {
        tokio::time::sleep(Duration::from_millis((left + 100) as u64)).await;
    }
    vec![
        ("no Authorization header", None),
        ("an empty header", Some(String::new())),
        ("Basic auth", Some("Basic YWRtaW46YWRtaW4=".to_owned())),
        ("Bearer without a token", Some("Bearer".to_owned())),
        ("a token without a scheme", Some(a.token.clone())),
        ("garbage", Some("Bearer not-a-token".to_owned())),
        (
            "an unknown sbh_ token",
            Some(format!("Bearer sbh_{}", "A".repeat(43))),
        ),
        (
            "an sbk_ endpoint credential",
            Some(format!("Bearer {}", a.endpoints[0].credential)),
        ),
        ("an expired sbh_ token", Some(format!("Bearer {expiring}"))),
        ("a revoked sbh_ token", Some(format!("Bearer {revoked}"))),
    ]
}

#[tokio::test]
async fn every_authentication_failure_is_the_same_401_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let (server, a, _b) = two_tenants(dir.path()).await;
    let credentials = bad_credentials(&server, &a).await;
    let mut reference: Option<Vec<u8>> = None;
    let mut checked = 0;
    for (label, auth) in &credentials {
        for (method, path, body) in every_route(&a) {
            let what = format!("{method} {path} with {label}");
            let resp = server.send(method, &path, auth.as_deref(), body).await;
            assert_eq!(resp.status, 401, "{what}: {}", resp.text());
            assert_eq!(resp.header("www-authenticate"), Some(REALM), "{what}");
            assert_eq!(resp.code(), "unauthenticated", "{what}");
            match &reference {
                None => reference = Some(resp.body.clone()),
                Some(body) => assert_eq!(
                    &resp.body, body,
                    "{what}: every authentication failure answers byte for byte alike"
                ),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, credentials.len() * every_route(&a).len());
    // Nothing was done by all those requests.
    let tokens = server
        .expect(200, Method::GET, "/api/v1/tokens", &a.token, Body::None)
        .await;
    let live = tokens["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["revoked_at"].is_null())
        .count();
    // The first-start token, the spare and the expired one (expired, not revoked).
    assert_eq!(live, 3, "{tokens}");
    assert_untouched(&server, &a).await;
}

#[tokio::test]
async fn the_owner_gets_the_success_status_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let (server, a, _b) = two_tenants(dir.path()).await;
    let t = &a.token;
    let [first, second] = &a.endpoints;
    let ok = |status: u16, method: Method, path: String, body: Body| {
        let server = &server;
        async move { server.expect(status, method, &path, t, body).await }
    };
    let me = ok(200, Method::GET, "/api/v1/me".into(), Body::None).await;
    assert_eq!(me["name"], "admin");
    ok(200, Method::GET, "/api/v1/tokens".into(), Body::None).await;
    let (_, new_token, _) = create_token(&server, t, json!({ "label": "another" })).await;
    ok(
        204,
        Method::DELETE,
        format!("/api/v1/tokens/{new_token}"),
        Body::None,
    )
    .await;
    ok(
        204,
        Method::DELETE,
        format!("/api/v1/tokens/{}", a.spare_token_id),
        Body::None,
    )
    .await;
    ok(200, Method::GET, "/api/v1/agents".into(), Body::None).await;
    let agent = ok(
        201,
        Method::POST,
        "/api/v1/agents".into(),
        Body::Json(json!({ "name": "alpha-three", "kind": "heartbeat" })),
    )
    .await;
    assert_eq!(agent["condition"], "unknown", "no endpoint yet");
    let agent = ok(
        200,
        Method::GET,
        format!("/api/v1/agents/{}", a.agent),
        Body::None,
    )
    .await;
    assert_eq!(agent["endpoints"], 1);
    let agent = ok(
        200,
        Method::PATCH,
        format!("/api/v1/agents/{}", a.agent),
        Body::Json(json!({ "description": "reviews code", "expected_interval_seconds": 600 })),
    )
    .await;
    assert_eq!(agent["description"], "reviews code");
    ok(200, Method::GET, "/api/v1/endpoints".into(), Body::None).await;
    ok(
        201,
        Method::POST,
        "/api/v1/endpoints".into(),
        Body::Json(json!({ "agent": "alpha-three" })),
    )
    .await;
    for reference in [&first.slug, &first.id] {
        let e = ok(
            200,
            Method::GET,
            format!("/api/v1/endpoints/{reference}"),
            Body::None,
        )
        .await;
        assert_eq!(e["slug"], first.slug.as_str());
        assert_eq!(e["liveness"]["condition"], "unknown", "never seen");
    }
    let e = ok(
        200,
        Method::PATCH,
        format!("/api/v1/endpoints/{}", first.slug),
        Body::Json(json!({ "default_lease_ttl_seconds": 120 })),
    )
    .await;
    assert_eq!(e["effective_lease_ttl_seconds"], 120);
    let pushed = ok(
        201,
        Method::POST,
        format!("/api/v1/endpoints/{}/todos", first.slug),
        Body::Json(json!({ "title": "second", "key": "k-1", "payload": [1, 2] })),
    )
    .await;
    assert_eq!(pushed["created"], true);
    let again = ok(
        200,
        Method::POST,
        format!("/api/v1/endpoints/{}/todos", first.slug),
        Body::Json(json!({ "title": "second", "key": "k-1" })),
    )
    .await;
    assert_eq!(again["created"], false, "the key matched a live todo");
    assert_eq!(again["id"], pushed["id"]);
    ok(
        200,
        Method::GET,
        format!("/api/v1/endpoints/{}/webhooks", second.slug),
        Body::None,
    )
    .await;
    let connected = ok(
        200,
        Method::GET,
        format!("/api/v1/endpoints/{}/oauth-clients", first.slug),
        Body::None,
    )
    .await;
    assert_eq!(connected["oauth_clients"], json!([]));
    // Revoking a connection is 204 (tests/it/oauth/refusals.rs); one the
    // endpoint never had is 404.
    ok(
        404,
        Method::DELETE,
        format!("/api/v1/endpoints/{}/oauth-clients/{NO_GRANT}", first.slug),
        Body::None,
    )
    .await;
    let hook = ok(
        201,
        Method::POST,
        format!("/api/v1/endpoints/{}/webhooks", first.slug),
        Body::Json(json!({})),
    )
    .await;
    assert!(
        hook["ingest_url"]
            .as_str()
            .unwrap()
            .contains("/webhooks/w/")
    );
    let rotated = ok(
        200,
        Method::POST,
        format!("/api/v1/webhooks/{}/rotate", a.webhook),
        Body::None,
    )
    .await;
    assert!(
        rotated["signing_secret"].is_string(),
        "a signed webhook gets a new secret"
    );
    ok(
        204,
        Method::DELETE,
        format!("/api/v1/webhooks/{}", a.webhook),
        Body::None,
    )
    .await;
    ok(200, Method::GET, "/api/v1/todos".into(), Body::None).await;
    ok(
        200,
        Method::GET,
        format!(
            "/api/v1/todos?endpoint={}&queue=inbox&state=pending&dead_letter=false",
            first.slug
        ),
        Body::None,
    )
    .await;
    let todo = ok(
        200,
        Method::GET,
        format!("/api/v1/todos/{}", a.todo),
        Body::None,
    )
    .await;
    assert_eq!(todo["attempts"], json!([]));
    let event = ok(
        200,
        Method::GET,
        format!("/api/v1/todos/{}/event", a.todo),
        Body::None,
    )
    .await;
    assert_eq!(event["trust_mode"], "operator");
    // Release needs a claim and retry a failure: an agent's doing (MCP),
    // done here on the store.
    let claimed = api::claim_next(&server.database, &first.id, false).await;
    assert_eq!(claimed, a.todo, "the oldest pending todo");
    let released = ok(
        200,
        Method::POST,
        format!("/api/v1/todos/{}/release", a.todo),
        Body::None,
    )
    .await;
    assert_eq!(released["state"], "pending");
    let failed = api::claim_next(&server.database, &first.id, true).await;
    assert_eq!(failed, a.todo);
    let retried = ok(
        200,
        Method::POST,
        format!("/api/v1/todos/{}/retry", a.todo),
        Body::None,
    )
    .await;
    assert_eq!(retried["state"], "pending");
    assert_eq!(retried["attempt"], 0);
    let listed = ok(
        200,
        Method::GET,
        format!("/api/v1/todos?kind=operator&source=operator&q={}", "FIR"),
        Body::None,
    )
    .await;
    assert_eq!(listed["todos"][0]["id"], a.todo.as_str());
    let cancelled = ok(
        200,
        Method::POST,
        format!("/api/v1/todos/{}/cancel", a.todo),
        Body::None,
    )
    .await;
    assert_eq!(cancelled["state"], "cancelled");
    let again = server
        .call(
            Method::POST,
            &format!("/api/v1/todos/{}/cancel", a.todo),
            t,
            Body::None,
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.text());
    assert_eq!(again.code(), "conflict");
    assert!(again.text().contains("cancelled"), "{}", again.text());
    let retried = ok(
        200,
        Method::POST,
        "/api/v1/todos/retry".into(),
        Body::Json(json!({ "state": "cancelled" })),
    )
    .await;
    assert_eq!(
        retried,
        json!({ "count": 1, "more": false, "ids": [a.todo] })
    );
    let cancelled = ok(
        200,
        Method::POST,
        "/api/v1/todos/cancel".into(),
        Body::Json(json!({ "ids": [a.todo] })),
    )
    .await;
    assert_eq!(cancelled["count"], 1);
    // Deleted for good: gone from the listing, and a second delete is 404.
    ok(
        204,
        Method::DELETE,
        format!("/api/v1/todos/{}", a.todo),
        Body::None,
    )
    .await;
    let gone = server
        .call(
            Method::GET,
            &format!("/api/v1/todos/{}", a.todo),
            t,
            Body::None,
        )
        .await;
    assert_eq!(gone.status, 404, "{}", gone.text());
    let presence = ok(
        200,
        Method::GET,
        format!("/api/v1/endpoints/{}/presence", first.slug),
        Body::None,
    )
    .await;
    assert_eq!(presence["presence"], "in");
    let presence = ok(
        200,
        Method::PUT,
        format!("/api/v1/endpoints/{}/presence", first.slug),
        Body::Json(json!({ "presence": "out" })),
    )
    .await;
    assert_eq!(presence["presence"], "out");
    assert_eq!(presence["source"], "operator");
    ok(
        200,
        Method::PUT,
        format!("/api/v1/endpoints/{}/shift", first.slug),
        Body::Json(json!({ "shift": null })),
    )
    .await;
    let presence = ok(
        200,
        Method::DELETE,
        format!("/api/v1/endpoints/{}/presence", first.slug),
        Body::None,
    )
    .await;
    assert_eq!(presence["presence"], "in", "the override is gone");
    // Deliveries: endpoint 0's webhook holds the fixture's quarantined one.
    let first_hook = first.webhook_id.as_ref().unwrap();
    let listed = ok(
        200,
        Method::GET,
        format!("/api/v1/webhooks/{first_hook}/deliveries?decision=quarantined"),
        Body::None,
    )
    .await;
    assert_eq!(listed["deliveries"][0]["id"], a.delivery.as_str());
    let shown = ok(
        200,
        Method::GET,
        format!("/api/v1/deliveries/{}", a.delivery),
        Body::None,
    )
    .await;
    assert_eq!(shown["envelope"]["sender"], "stranger");
    let replayed = ok(
        201,
        Method::POST,
        format!("/api/v1/deliveries/{}/replay", a.delivery),
        Body::Json(json!({ "new_key": true })),
    )
    .await;
    assert_eq!(
        replayed["delivery"]["decision"], "quarantined",
        "still a stranger"
    );
    assert_eq!(replayed["delivery"]["replay_of"], a.delivery.as_str());
    let discarded = ok(
        200,
        Method::POST,
        format!(
            "/api/v1/deliveries/{}/discard",
            replayed["delivery"]["id"].as_str().unwrap()
        ),
        Body::None,
    )
    .await;
    assert_eq!(discarded["decision"], "discarded");
    let released = ok(
        200,
        Method::POST,
        format!("/api/v1/deliveries/{}/release", a.delivery),
        Body::None,
    )
    .await;
    assert_eq!(released["delivery"]["decision"], "released");
    assert_eq!(released["todo"]["created"], true);
    let trusting = ok(
        200,
        Method::PUT,
        format!("/api/v1/webhooks/{first_hook}/senders"),
        Body::Json(json!({ "trust": "everyone" })),
    )
    .await;
    assert_eq!(trusting["senders"], json!({ "trust": "everyone" }));
    let no_rules = ok(
        200,
        Method::GET,
        format!("/api/v1/webhooks/{first_hook}/rules"),
        Body::None,
    )
    .await;
    assert_eq!(no_rules["rules"], json!([]));
    let rules = ok(
        200,
        Method::PUT,
        format!("/api/v1/webhooks/{first_hook}/rules"),
        Body::Json(
            json!({ "rules": [{ "if": ".event == \"issues\"", "then": { "drop": true } }] }),
        ),
    )
    .await;
    assert_eq!(rules["on_error"], "quarantine");
    let dry = ok(
        200,
        Method::POST,
        format!("/api/v1/webhooks/{first_hook}/rules/test"),
        Body::Json(json!({ "delivery_id": a.delivery })),
    )
    .await;
    assert!(dry["trace"].is_array(), "{dry}");
    let batch = ok(
        200,
        Method::POST,
        format!("/api/v1/webhooks/{first_hook}/deliveries/replay"),
        Body::Json(json!({ "decision": "released" })),
    )
    .await;
    assert_eq!(batch["replayed"], 1, "{batch}");
    let revoked = ok(
        200,
        Method::POST,
        format!("/api/v1/endpoints/{}/revoke", second.slug),
        Body::None,
    )
    .await;
    assert_eq!(revoked["state"], "revoked");
    assert_eq!(revoked["liveness"]["condition"], "revoked");
    ok(
        204,
        Method::DELETE,
        format!("/api/v1/endpoints/{}", second.id),
        Body::None,
    )
    .await;
}

const BODY_ROUTES: [(&str, &str); 17] = [
    ("POST", "/api/v1/todos/retry"),
    ("POST", "/api/v1/todos/cancel"),
    ("POST", "/api/v1/tokens"),
    ("POST", "/api/v1/agents"),
    ("PATCH", "/api/v1/agents/{agent}"),
    ("POST", "/api/v1/endpoints"),
    ("PATCH", "/api/v1/endpoints/{endpoint}"),
    ("POST", "/api/v1/endpoints/{endpoint}/todos"),
    ("POST", "/api/v1/endpoints/{endpoint}/webhooks"),
    ("POST", "/api/v1/endpoints/{endpoint}/hooks"),
    ("PUT", "/api/v1/endpoints/{endpoint}/presence"),
    ("PUT", "/api/v1/endpoints/{endpoint}/shift"),
    ("PUT", "/api/v1/webhooks/{webhook}/senders"),
    ("PUT", "/api/v1/webhooks/{webhook}/rules"),
    ("POST", "/api/v1/webhooks/{webhook}/rules/test"),
    ("POST", "/api/v1/webhooks/{webhook}/deliveries/replay"),
    // Its body is optional; when there is one, it is read like the others.
    ("POST", "/api/v1/deliveries/{delivery}/replay"),
];

fn body_route(t: &Tenant, (method, path): (&str, &str)) -> (Method, String) {
    (
        method.parse().unwrap(),
        path.replace("{agent}", &t.agent)
            .replace("{endpoint}", &t.endpoints[0].slug)
            .replace("{webhook}", &t.webhook)
            .replace("{delivery}", &t.delivery),
    )
}

fn envelope(resp: &Resp, status: u16, code: &str, what: &str) -> Value {
    assert_eq!(resp.status, status, "{what}: {}", resp.text());
    assert_eq!(
        resp.header("content-type"),
        Some("application/json"),
        "{what}"
    );
    let v = resp.json();
    assert_eq!(v["error"]["code"], code, "{what}: {v}");
    assert!(v["error"]["message"].is_string(), "{what}: {v}");
    v
}

#[tokio::test]
async fn bodies_are_capped_strict_json_with_immutable_scope() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &api::HIGH_RATES);
    let a = tenant(&server, &server.first_token.clone(), "alpha").await;
    let auth = format!("Bearer {}", a.token);
    // A JSON document of exactly `size` bytes.
    let sized = |size: usize| {
        let head = br#"{"description":""#;
        let tail = br#""}"#;
        let mut bytes = head.to_vec();
        bytes.resize(size - tail.len(), b'x');
        bytes.extend_from_slice(tail);
        bytes
    };
    for route in BODY_ROUTES {
        let (method, path) = body_route(&a, route);
        let what = format!("{method} {path}");
        // 64 KiB is the limit: one byte more is 413 in the envelope.
        for size in [64 * 1024 + 1, 200 * 1024] {
            let resp = server
                .send(
                    method.clone(),
                    &path,
                    Some(&auth),
                    Body::Raw {
                        content_type: Some("application/json"),
                        bytes: sized(size),
                    },
                )
                .await;
            envelope(
                &resp,
                413,
                "payload_too_large",
                &format!("{what}, {size} bytes"),
            );
        }
        let at_limit = server
            .send(
                method.clone(),
                &path,
                Some(&auth),
                Body::Raw {
                    content_type: Some("application/json"),
                    bytes: sized(64 * 1024),
                },
            )
            .await;
        assert_ne!(at_limit.status, 413, "{what}: 64 KiB itself is allowed");
        // Unknown fields are refused, by name.
        let resp = server
            .send(
                method.clone(),
                &path,
                Some(&auth),
                Body::Json(json!({ "surprise_field": 1 })),
            )
            .await;
        let v = envelope(&resp, 400, "invalid_argument", &what);
        assert_eq!(v["error"]["field"], "surprise_field", "{what}: {v}");
        // JSON only, by Content-Type.
        for content_type in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            None,
        ] {
            let resp = server
                .send(
                    method.clone(),
                    &path,
                    Some(&auth),
                    Body::Raw {
                        content_type,
                        bytes: b"{}".to_vec(),
                    },
                )
                .await;
            let v = envelope(
                &resp,
                400,
                "invalid_argument",
                &format!("{what} as {content_type:?}"),
            );
            assert_eq!(v["error"]["field"], "body");
        }
        let resp = server
            .send(
                method.clone(),
                &path,
                Some(&auth),
                Body::Raw {
                    content_type: Some("application/json; charset=utf-8"),
                    bytes: b"{not json".to_vec(),
                },
            )
            .await;
        envelope(
            &resp,
            400,
            "invalid_argument",
            &format!("{what}, malformed"),
        );
        // A body is a JSON object, not anything serde could fill a struct from.
        for body in ["[null, null]", "[]", "null", "\"x\"", "7", ""] {
            if body.is_empty() && path.ends_with("/replay") {
                continue; // no body at all is replay's default
            }
            let resp = server
                .send(
                    method.clone(),
                    &path,
                    Some(&auth),
                    Body::Raw {
                        content_type: Some("application/json"),
                        bytes: body.as_bytes().to_vec(),
                    },
                )
                .await;
            let v = envelope(
                &resp,
                400,
                "invalid_argument",
                &format!("{what} with {body}"),
            );
            assert_eq!(v["error"]["field"], "body", "{what} with {body}: {v}");
        }
    }
    // A type error names its field.
    let resp = server
        .send(
            Method::PATCH,
            &format!("/api/v1/endpoints/{}", a.endpoints[0].slug),
            Some(&auth),
            Body::Json(json!({ "default_lease_ttl_seconds": "soon" })),
        )
        .await;
    let v = envelope(&resp, 400, "invalid_argument", "type error");
    assert_eq!(v["error"]["field"], "default_lease_ttl_seconds");
    // Values out of range name the request's own field.
    let agent_path = format!("/api/v1/agents/{}", a.agent);
    for (method, path, body, field) in [
        (
            Method::POST,
            "/api/v1/agents",
            json!({ "name": "Upper" }),
            "name",
        ),
        (
            Method::POST,
            "/api/v1/agents",
            json!({ "name": "a1", "expected_interval_seconds": 0 }),
            "expected_interval_seconds",
        ),
        (
            Method::PATCH,
            agent_path.as_str(),
            json!({ "expected_interval_seconds": 31 * 86_400 }),
            "expected_interval_seconds",
        ),
        (
            Method::PATCH,
            agent_path.as_str(),
            json!({ "kind": "robot" }),
            "kind",
        ),
        (
            Method::POST,
            "/api/v1/endpoints",
            json!({ "agent": "Nope" }),
            "agent",
        ),
        (
            Method::POST,
            "/api/v1/endpoints",
            json!({ "agent": "a2", "queues": ["Bad Queue"] }),
            "queues",
        ),
        (
            Method::POST,
            "/api/v1/endpoints",
            json!({ "agent": "a2", "verbs": ["fly"] }),
            "verbs",
        ),
        (
            Method::POST,
            "/api/v1/endpoints",
            json!({ "agent": "a2", "default_lease_ttl_seconds": 5 }),
            "default_lease_ttl_seconds",
        ),
        (
            Method::POST,
            "/api/v1/endpoints",
            json!({ "agent": "a2", "expires_in": "soon" }),
            "expires_in",
        ),
        (
            Method::POST,
            "/api/v1/tokens",
            json!({ "expires_in": "0s" }),
            "expires_in",
        ),
        (
            Method::POST,
            "/api/v1/tokens",
            json!({ "label": "two\nlines" }),
            "label",
        ),
    ] {
        let what = format!("{method} {path} {body}");
        let resp = server
            .send(method, path, Some(&auth), Body::Json(body))
            .await;
        let v = envelope(&resp, 400, "invalid_argument", &what);
        assert_eq!(v["error"]["field"], field, "{what}: {v}");
    }
    // Scope is immutable: any scope field in an edit is refused by name.
    for field in ["queues", "verbs"] {
        let resp = server
            .send(
                Method::PATCH,
                &format!("/api/v1/endpoints/{}", a.endpoints[0].slug),
                Some(&auth),
                Body::Json(json!({ field: ["inbox", "extra"], "default_lease_ttl_seconds": 600 })),
            )
            .await;
        let v = envelope(&resp, 400, "invalid_argument", field);
        assert_eq!(v["error"]["field"], field, "{v}");
    }
    let e = server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/endpoints/{}", a.endpoints[0].slug),
            &a.token,
            Body::None,
        )
        .await;
    assert_eq!(e["scope"]["queues"], json!(["inbox"]), "scope unchanged");
    assert_eq!(
        e["default_lease_ttl_seconds"],
        Value::Null,
        "nothing applied"
    );
    // Query strings are strict too.
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=many", "limit"),
        ("cursor=forged", "cursor"),
        ("state=sleeping", "state"),
        ("dead_letter=maybe", "dead_letter"),
        ("colour=blue", "colour"),
    ] {
        let resp = server
            .send(
                Method::GET,
                &format!("/api/v1/todos?{query}"),
                Some(&auth),
                Body::None,
            )
            .await;
        let v = envelope(&resp, 400, "invalid_argument", query);
        assert_eq!(v["error"]["field"], field, "{query}: {v}");
    }
}

#[tokio::test]
async fn writes_beyond_the_rate_get_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &["--api-write-rate", "1"]);
    let t = server.first_token.clone();
    let mut accepted = 0;
    let refused = loop {
        let resp = server
            .call(
                Method::POST,
                "/api/v1/agents",
                &t,
                Body::Json(json!({ "name": format!("agent-{accepted}") })),
            )
            .await;
        if resp.status == 429 {
            break resp;
        }
        assert_eq!(resp.status, 201, "{}", resp.text());
        accepted += 1;
        assert!(accepted < 50, "no 429 after {accepted} writes at 1/s");
    };
    assert!(accepted >= 1, "the burst lets the first writes through");
    envelope(&refused, 429, "rate_limited", "over the write rate");
    let retry_after: u64 = refused
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("whole seconds");
    assert!(
        (1..=60).contains(&retry_after),
        "Retry-After: {retry_after}"
    );
    // Reads have their own bucket.
    server
        .expect(200, Method::GET, "/api/v1/me", &t, Body::None)
        .await;
}

#[tokio::test]
async fn revoke_twice_is_409_revoked_and_an_active_endpoint_cannot_be_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &api::HIGH_RATES);
    let t = server.first_token.clone();
    let e = vend(&server, &t, json!({ "agent": "doomed" })).await;
    let path = format!("/api/v1/endpoints/{}", e.slug);
    let resp = server.call(Method::DELETE, &path, &t, Body::None).await;
    envelope(&resp, 409, "conflict", "deleting an active endpoint");
    let v = server
        .expect(200, Method::POST, &format!("{path}/revoke"), &t, Body::None)
        .await;
    assert_eq!(v["state"], "revoked");
    assert!(v["revoked_at"].is_string());
    let again = server
        .call(Method::POST, &format!("{path}/revoke"), &t, Body::None)
        .await;
    let v = envelope(&again, 409, "conflict", "revoking twice");
    assert_eq!(v["error"]["state"], "revoked", "{v}");
    // Other changes to a revoked endpoint are the same conflict.
    for (method, suffix, body) in [
        (
            Method::PATCH,
            "",
            json!({ "default_lease_ttl_seconds": 120 }),
        ),
        (Method::POST, "/todos", json!({ "title": "too late" })),
        (Method::POST, "/webhooks", json!({})),
        (Method::PUT, "/presence", json!({ "presence": "out" })),
        (Method::PUT, "/shift", json!({ "shift": null })),
    ] {
        let resp = server
            .call(
                method.clone(),
                &format!("{path}{suffix}"),
                &t,
                Body::Json(body),
            )
            .await;
        let v = envelope(&resp, 409, "conflict", &format!("{method} {suffix}"));
        assert_eq!(v["error"]["state"], "revoked", "{method} {suffix}: {v}");
    }
    let deleted = server.call(Method::DELETE, &path, &t, Body::None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.text());
    assert!(deleted.body.is_empty());
    let gone = server.call(Method::GET, &path, &t, Body::None).await;
    envelope(&gone, 404, "not_found", "after delete");
}

#[tokio::test]
async fn todo_pages_are_newest_first_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::in_process(dir.path(), &api::HIGH_RATES);
    let t = server.first_token.clone();
    let e = vend(&server, &t, json!({ "agent": "pager" })).await;
    let other = vend(&server, &t, json!({ "agent": "bystander" })).await;
    let mut pushed = Vec::new();
    for i in 0..7 {
        pushed.push(push(&server, &t, &e.slug, &format!("todo {i}")).await);
        // Another endpoint's todos in between must not show in the filter.
        push(&server, &t, &other.slug, &format!("noise {i}")).await;
    }
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/api/v1/todos?endpoint={}&limit=3", e.slug);
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let page = server.expect(200, Method::GET, &path, &t, Body::None).await;
        let todos = page["todos"].as_array().unwrap();
        sizes.push(todos.len());
        seen.extend(todos.iter().map(|t| t["id"].as_str().unwrap().to_owned()));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(sizes.len() < 10, "pagination does not end");
    }
    assert_eq!(sizes, [3, 3, 1]);
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 7, "no duplicates: {seen:?}");
    pushed.reverse();
    assert_eq!(seen, pushed, "newest first");
    // The default page holds all 14; the whole list is newest first too.
    let all = server
        .expect(200, Method::GET, "/api/v1/todos", &t, Body::None)
        .await;
    assert_eq!(all["todos"].as_array().unwrap().len(), 14);
    assert_eq!(all["next_cursor"], Value::Null);
}
