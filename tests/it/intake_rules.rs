//! Routing rules per webhook (`08-intake.md`, "Routing rules", "Replay",
//! amended) through the real binary: drop, fail closed or skip, the dry
//! run, replay after a rule change, hostile conditions. Tenancy (another
//! human's webhook answers like a missing one on all four routes) is the
//! API security matrix's (`api::security`, `webhook_routes`).

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use switchboard::intake::signature;

use crate::intake::{Delivered, Hook, Server};

/// A GitHub-shaped signed delivery of `event`.
async fn github(server: &Server, hook: &Hook, event: &str, body: &Value, id: &str) -> Delivered {
    let body = body.to_string();
    let sig = signature::sign(hook.secret.as_deref().unwrap(), body.as_bytes());
    server
        .deliver(
            &hook.url,
            &[
                ("content-type", "application/json"),
                ("x-github-event", event),
                ("x-github-delivery", id),
                ("x-hub-signature-256", &sig),
            ],
            body,
        )
        .await
}

fn workflow_run(n: u64) -> Value {
    json!({
        "action": "completed",
        "sender": {"login": "github-actions"},
        "workflow_run": {"id": n, "name": "CI", "conclusion": "success"},
        "repository": {"full_name": "octo/repo"},
    })
}

fn comment(body: &str) -> Value {
    json!({
        "action": "created",
        "sender": {"login": "alice"},
        "issue": {"number": 3, "title": "Parser fails", "user": {"login": "alice"}, "labels": []},
        "comment": {"body": body, "user": {"login": "alice"}},
        "repository": {"full_name": "octo/repo"},
    })
}

async fn put_rules(server: &Server, hook: &Hook, rules: Value) -> Value {
    server
        .api(
            Method::PUT,
            &format!("/api/v1/webhooks/{}/rules", hook.id),
            Some(rules),
        )
        .await
}

async fn send(server: &Server, method: Method, path: &str, body: Value) -> (u16, Value) {
    let response = server
        .http
        .request(method, server.url(path))
        .bearer_auth(&server.admin_token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn deliveries(server: &Server, hook: &Hook) -> Vec<Value> {
    let list = server
        .get(&format!("/api/v1/webhooks/{}/deliveries", hook.id))
        .await;
    list["deliveries"].as_array().unwrap().clone()
}

/// The delivery as its human reads it: the rule and the reason are not in
/// the sender's receipt (they would tell a sender the operator's rules).
async fn recorded(server: &Server, d: &Delivered) -> Value {
    let id = d.body["delivery"]["id"].as_str().expect("a delivery id");
    server.get(&format!("/api/v1/deliveries/{id}")).await
}

fn decision(d: &Delivered) -> &str {
    d.body["delivery"]["decision"].as_str().unwrap_or("?")
}

#[tokio::test]
async fn a_drop_rule_records_makes_no_todo_and_a_redelivery_stays_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let hook = server.endpoint_with_webhook("ci-noise", true).await;
    let saved = put_rules(
        &server,
        &hook,
        json!({"rules": [
            {"if": ".event == \"workflow_run\" or .event == \"check_suite\"", "then": {"drop": true}},
        ]}),
    )
    .await;
    assert_eq!(saved["rules"][0]["then"], json!({"drop": true}));
    assert_eq!(saved["default"], Value::Null);
    assert_eq!(saved["on_error"], "quarantine");

    let noise = github(&server, &hook, "workflow_run", &workflow_run(1), "w-1").await;
    assert_eq!(noise.status, 202, "{noise:?}");
    assert_eq!(decision(&noise), "dropped", "{noise:?}");
    assert_eq!(recorded(&server, &noise).await["rule"], "rules[0]");
    assert!(noise.body["todo"].is_null());
    assert!(server.todos(&hook).await.is_empty(), "no todo, so no ring");

    // The rule changes; the redelivery's key was spent by the drop.
    put_rules(&server, &hook, json!({"rules": []})).await;
    let again = github(&server, &hook, "workflow_run", &workflow_run(1), "w-1").await;
    assert_eq!(decision(&again), "dropped", "{again:?}");
    assert!(
        recorded(&server, &again).await["reason"]
            .as_str()
            .unwrap()
            .contains(noise.body["delivery"]["id"].as_str().unwrap()),
        "{again:?}"
    );
    assert!(server.todos(&hook).await.is_empty());

    // Real work still comes through.
    let work = github(&server, &hook, "issue_comment", &comment("hi"), "c-1").await;
    assert_eq!(decision(&work), "accepted", "{work:?}");
    assert_eq!(server.todos(&hook).await.len(), 1);

    let dropped = crate::support::metric(
        &server.http,
        &server.url("/metrics"),
        r#"switchboard_intake_deliveries_total{decision="dropped"}"#,
    )
    .await;
    assert_eq!(dropped, 2.0);
}

#[tokio::test]
async fn rules_route_to_a_queue_of_the_scope_fail_closed_or_skip() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let endpoint = server
        .post(
            "/api/v1/endpoints",
            json!({"agent": "router", "queues": ["inbox", "mentions"]}),
        )
        .await;
    let slug = endpoint["slug"].as_str().unwrap().to_owned();
    let webhook = server
        .post(
            &format!("/api/v1/endpoints/{slug}/webhooks"),
            json!({"queue": "inbox", "signed": true}),
        )
        .await;
    let hook = Hook {
        endpoint_slug: slug,
        endpoint_id: endpoint["id"].as_str().unwrap().to_owned(),
        id: webhook["id"].as_str().unwrap().to_owned(),
        url: webhook["ingest_url"].as_str().unwrap().to_owned(),
        secret: webhook["signing_secret"].as_str().map(str::to_owned),
    };
    let mention = json!({"if": ".payload.comment.body // \"\" | contains(\"@router\")",
                         "then": {"queue": "mentions"}});
    let failing = json!({"if": ".payload.comment.body | error", "then": {"drop": true}});

    // A queue outside the endpoint's scope is refused, naming the field;
    // the saved rules are unchanged.
    put_rules(&server, &hook, json!({"rules": [mention]})).await;
    let (status, refused) = send(
        &server,
        Method::PUT,
        &format!("/api/v1/webhooks/{}/rules", hook.id),
        json!({"rules": [mention, {"if": "true", "then": {"queue": "elsewhere"}}]}),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["field"], "rules[1].then.queue");
    let (status, refused) = send(
        &server,
        Method::PUT,
        &format!("/api/v1/webhooks/{}/rules", hook.id),
        json!({"rules": [mention, {"if": "input", "then": {"drop": true}}]}),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["field"], "rules[1].if");
    let kept = server
        .get(&format!("/api/v1/webhooks/{}/rules", hook.id))
        .await;
    assert_eq!(kept["rules"].as_array().unwrap().len(), 1, "{kept}");

    let routed = github(
        &server,
        &hook,
        "issue_comment",
        &comment("ping @router"),
        "m-1",
    )
    .await;
    assert_eq!(decision(&routed), "accepted");
    assert_eq!(routed.body["todo"]["queue"], "mentions", "{routed:?}");

    // A rule that errors fails closed by default: quarantined, the rule named.
    put_rules(&server, &hook, json!({"rules": [failing, mention]})).await;
    let closed = github(
        &server,
        &hook,
        "issue_comment",
        &comment("ping @router"),
        "m-2",
    )
    .await;
    assert_eq!(decision(&closed), "quarantined", "{closed:?}");
    assert_eq!(recorded(&server, &closed).await["rule"], "rules[0] (error)");
    assert!(
        recorded(&server, &closed).await["reason"]
            .as_str()
            .unwrap()
            .starts_with("rule error"),
        "{closed:?}"
    );
    // With `skip`, the next rule decides.
    put_rules(
        &server,
        &hook,
        json!({"rules": [failing, mention], "on_error": "skip", "default": {"drop": true}}),
    )
    .await;
    let skipped = github(
        &server,
        &hook,
        "issue_comment",
        &comment("ping @router"),
        "m-3",
    )
    .await;
    assert_eq!(skipped.body["todo"]["queue"], "mentions", "{skipped:?}");
    assert_eq!(recorded(&server, &skipped).await["rule"], "rules[1]");
    let defaulted = github(
        &server,
        &hook,
        "issue_comment",
        &comment("no mention"),
        "m-4",
    )
    .await;
    assert_eq!(
        decision(&defaulted),
        "dropped",
        "the default: {defaulted:?}"
    );
    assert!(recorded(&server, &defaulted).await["rule"].is_null());
}

#[tokio::test]
async fn a_dry_run_stores_nothing_and_replay_follows_the_rule_change() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let hook = server.endpoint_with_webhook("replayer", true).await;
    put_rules(
        &server,
        &hook,
        json!({"rules": [
            {"if": ".event == \"workflow_run\"", "then": {"drop": true}},
            {"if": ".payload.comment.body | contains(\"secret\")", "then": {"quarantine": true}},
        ]}),
    )
    .await;
    let mut dropped = Vec::new();
    for n in 0..3 {
        let d = github(
            &server,
            &hook,
            "workflow_run",
            &workflow_run(n),
            &format!("w-{n}"),
        )
        .await;
        assert_eq!(decision(&d), "dropped");
        dropped.push(d.body["delivery"]["id"].as_str().unwrap().to_owned());
    }
    let held = github(&server, &hook, "issue_comment", &comment("a secret"), "s-1").await;
    assert_eq!(decision(&held), "quarantined");
    assert_eq!(recorded(&server, &held).await["rule"], "rules[1]");
    let held_id = held.body["delivery"]["id"].as_str().unwrap().to_owned();
    let before = deliveries(&server, &hook).await;

    // Dry runs: the saved rules, then candidates; nothing is stored.
    let test = format!("/api/v1/webhooks/{}/rules/test", hook.id);
    let saved = server.post(&test, json!({"delivery_id": dropped[0]})).await;
    assert_eq!(saved["decision"], "dropped", "{saved}");
    assert_eq!(saved["rule"], "rules[0]");
    assert_eq!(
        saved["trace"],
        json!([{"rule": "rules[0]", "outcome": "matched"}])
    );
    let candidate = server
        .post(
            &test,
            json!({"delivery_id": held_id, "rules": [
                {"if": ".event == \"workflow_run\"", "then": {"drop": true}},
                {"if": ".payload.nope | ltrimstr(1) | error", "then": {"drop": true}},
            ], "on_error": "skip"}),
        )
        .await;
    assert_eq!(candidate["decision"], "accepted", "{candidate}");
    assert_eq!(candidate["queue"], "inbox");
    assert_eq!(candidate["by"], "default");
    assert_eq!(candidate["trace"][0]["outcome"], "not_matched");
    assert_eq!(candidate["trace"][1]["outcome"], "error");
    assert!(candidate["trace"][1]["error"].is_string());
    assert_eq!(
        deliveries(&server, &hook).await,
        before,
        "a dry run stores nothing"
    );
    assert!(server.todos(&hook).await.is_empty());

    // The rules change: the quarantined one replays into a todo (its key
    // was not spent); a dropped one needs a new key.
    put_rules(&server, &hook, json!({"rules": []})).await;
    let replayed = server
        .post(&format!("/api/v1/deliveries/{held_id}/replay"), json!({}))
        .await;
    assert_eq!(replayed["delivery"]["decision"], "accepted", "{replayed}");
    let same_key = server
        .post(
            &format!("/api/v1/deliveries/{}/replay", dropped[0]),
            json!({}),
        )
        .await;
    assert_eq!(same_key["delivery"]["decision"], "dropped", "{same_key}");

    // A batch: every dropped delivery (the three and the replay just
    // recorded), with new keys.
    let batch = server
        .post(
            &format!("/api/v1/webhooks/{}/deliveries/replay", hook.id),
            json!({"decision": "dropped", "event": "workflow_run", "new_key": true}),
        )
        .await;
    assert_eq!(batch["replayed"], 4, "{batch}");
    assert_eq!(batch["skipped"], 0);
    for d in batch["deliveries"].as_array().unwrap() {
        assert_eq!(d["delivery"]["decision"], "accepted", "{d}");
        assert_eq!(d["todo"]["created"], true);
    }
    assert_eq!(server.todos(&hook).await.len(), 5);
}

/// Hostile conditions: a definition is refused at save; runaway generators
/// and huge outputs are cut by the budget, and the delivery is answered
/// well within the intake's limits, quarantined (fail closed).
#[tokio::test]
async fn hostile_conditions_are_cut_and_the_delivery_is_answered_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let hook = server.endpoint_with_webhook("hostile", true).await;
    for refused in [
        "def f: f; f",
        "def f: 1 + f; f",
        "$ENV.HOME",
        "env",
        "now > 0",
        "halt",
    ] {
        let (status, body) = send(
            &server,
            Method::PUT,
            &format!("/api/v1/webhooks/{}/rules", hook.id),
            json!({"rules": [{"if": refused, "then": {"drop": true}}]}),
        )
        .await;
        assert_eq!(status, 400, "{refused}: {body}");
        assert_eq!(body["error"]["field"], "rules[0].if", "{refused}");
    }
    for (n, hostile) in [
        "[range(1e8)] | length > 0",
        "last(range(1e12)) > 0",
        "[repeat(1)] | length > 0",
        "until(false; .) | true",
        "[0 | recurse(. + 1)] | length > 0",
    ]
    .into_iter()
    .enumerate()
    {
        put_rules(
            &server,
            &hook,
            json!({"rules": [{"if": hostile, "then": {"drop": true}}]}),
        )
        .await;
        let started = Instant::now();
        let cut = github(
            &server,
            &hook,
            "issue_comment",
            &comment("x"),
            &format!("h-{n}"),
        )
        .await;
        let took = started.elapsed();
        assert_eq!(cut.status, 202, "{hostile}: {cut:?}");
        assert_eq!(decision(&cut), "quarantined", "{hostile}: {cut:?}");
        assert!(
            recorded(&server, &cut).await["reason"]
                .as_str()
                .unwrap()
                .contains("budget"),
            "{hostile}: {cut:?}"
        );
        assert!(took < Duration::from_secs(5), "{hostile} took {took:?}");
    }
    assert!(server.todos(&hook).await.is_empty());
}
