//! Presence end to end (`05-presence.md`): the server in process, official MCP
//! TypeScript SDK clients that call the self verbs and listen for
//! `notifications/claude/channel` (`tests/mcp-client/scenario.mjs listen`),
//! and the human's presence and shift controls over the REST API.
//!
//! Needs `node` (20+) and `npm`, like `mcp::interop`. One test waits for a
//! real shift start (minute resolution): it takes up to about 75 s.

use crate::support::mcp;

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcp::listener::{Bell, Listener, wait_sessions};
use mcp::{Server, Vended};
use reqwest::Method;
use serde_json::{Value, json};

/// Upper bound for a doorbell that should arrive.
const ARRIVES: Duration = Duration::from_secs(5);
/// How long to listen when nothing should arrive.
const SILENCE: Duration = Duration::from_millis(1500);

async fn setup(extra: &[&str], vend: Value) -> (Server, Vended) {
    let server = Server::start(extra);
    let ep = server.vend(vend).await;
    (server, ep)
}

async fn put(server: &Server, path: &str, body: Value) -> Value {
    server.api(Method::PUT, path, Some(body)).await
}

/// A digest: `kind = digest`, no `todo_id`, the reason and count given.
fn assert_digest(bell: &Bell, reason: &str, pending: usize) {
    assert_eq!(
        bell.meta,
        json!({
            "kind": "digest",
            "pending": pending.to_string(),
            "queues": "inbox",
            "reason": reason,
        }),
        "{bell:?}"
    );
    assert!(bell.todo_id().is_none(), "{bell:?}");
    let count = if pending == 1 {
        "1 todo".to_owned()
    } else {
        format!("{pending} todos")
    };
    assert!(bell.content.contains(&count), "{}", bell.content);
    assert!(bell.content.contains("claim_next"), "{}", bell.content);
    assert!(!bell.content.contains('\n'), "{}", bell.content);
}

/// The shape every self verb and the API return.
fn assert_presence_shape(v: &Value) {
    let keys: BTreeSet<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["presence", "source", "until", "shift", "pending"]),
        "{v}"
    );
    assert!(v["presence"] == "in" || v["presence"] == "out", "{v}");
    assert!(v["until"].is_null() || v["until"].is_string(), "{v}");
    assert!(v["shift"].is_null() || v["shift"].is_string(), "{v}");
    assert!(v["pending"].is_u64(), "{v}");
}

#[tokio::test]
async fn clocked_out_holds_doorbells_and_clock_in_sends_one_digest() {
    let (server, ep) = setup(&[], json!({"agent": "presence-agent"})).await;
    let mut listener = Listener::start(&ep, 1).await;
    wait_sessions(&server, &ep.slug, 1, 1).await;

    let out = listener.call_ok(0, "clock_out", json!({})).await;
    assert_presence_shape(&out);
    assert_eq!(out["presence"], "out", "{out}");
    assert_eq!(out["source"], "agent", "{out}");
    assert_eq!(out["until"], Value::Null, "no shift: out until clocked in");

    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(server.push(&ep.slug, &format!("held {n}")).await);
    }
    listener
        .assert_silent(SILENCE, "doorbells are held while clocked out")
        .await;
    let view = server.endpoint(&ep.slug).await;
    assert_eq!(view["presence"]["presence"], "out", "{view}");

    let back = listener.call_ok(0, "clock_in", json!({})).await;
    assert_presence_shape(&back);
    assert_eq!(back["presence"], "in", "{back}");
    assert_eq!(back["pending"], 3, "{back}");
    let digest = listener.one(ARRIVES, "the clock-in digest").await;
    assert_digest(&digest, "clock_in", 3);
    assert!(digest.content.contains("clocked in"), "{}", digest.content);
    for id in &ids {
        assert!(!digest.content.contains(id.as_str()), "{}", digest.content);
    }
    // Repeating the verb changes nothing and rings nothing.
    let again = listener.call_ok(0, "clock_in", json!({})).await;
    assert_eq!(again["presence"], "in", "{again}");
    listener
        .assert_silent(SILENCE, "one digest per transition")
        .await;

    // The digest marked what it counted (last_ringed_at), not the budget.
    for id in &ids {
        let todo = server.todo(id).await;
        assert_eq!(todo["ring_attempts"], 0, "{todo}");
        assert!(todo["last_ringed_at"].is_string(), "{todo}");
    }
    // Back in, a new todo rings as usual.
    let fresh = server.push(&ep.slug, "after the digest").await;
    let bell = listener.one(ARRIVES, "a doorbell once back in").await;
    assert_eq!(bell.todo_id(), Some(fresh.as_str()));
    listener.close().await;
}

/// `HH:MM` of a UTC second-of-day.
fn hhmm(second_of_day: u64) -> String {
    let minutes = (second_of_day % 86_400) / 60;
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

#[tokio::test]
async fn a_shift_start_sends_one_digest_for_what_waited() {
    let (server, ep) = setup(
        &["--presence-interval", "1s"],
        json!({"agent": "shift-agent"}),
    )
    .await;
    // The next whole UTC minute at least 15 s away; a two-hour window from
    // there (an overnight window when it crosses midnight).
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let start = (now.as_secs() + 15).div_ceil(60) * 60;
    let shift = format!("{}-{}", hhmm(start), hhmm(start + 2 * 3600));
    let set = put(
        &server,
        &format!("/api/v1/endpoints/{}/shift", ep.slug),
        json!({"shift": shift}),
    )
    .await;
    assert_presence_shape(&set);
    assert_eq!(set["presence"], "out", "before the window: {set}");
    assert_eq!(set["source"], "shift", "{set}");
    assert_eq!(set["shift"], shift.as_str(), "{set}");
    let opens = set["until"]
        .as_str()
        .expect("the window's start")
        .to_owned();

    let mut listener = Listener::start_with(&ep, 1, &[("SB_DEADLINE_MS", "150000")]).await;
    wait_sessions(&server, &ep.slug, 1, 1).await;
    let id = server.push(&ep.slug, "waits for the shift").await;
    listener
        .assert_silent(SILENCE, "outside the shift: held")
        .await;
    let seen = listener.call_ok(0, "presence", json!({})).await;
    assert_eq!(seen["presence"], "out", "{seen}");
    assert_eq!(seen["source"], "shift", "{seen}");
    assert_eq!(seen["until"], opens.as_str(), "{seen}");
    assert_eq!(seen["pending"], 1, "{seen}");

    // The window opens with nobody calling anything: the evaluator (1 s)
    // claims the transition and sends one digest.
    let left = Duration::from_secs(start)
        .saturating_sub(SystemTime::now().duration_since(UNIX_EPOCH).unwrap());
    let digest = listener
        .one(left + Duration::from_secs(10), "the shift-start digest")
        .await;
    let at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    assert!(
        at >= Duration::from_secs(start),
        "the digest came before the window opened ({at:?} < {start} s)"
    );
    assert_digest(&digest, "shift_start", 1);
    assert!(
        digest.content.contains("shift started"),
        "{}",
        digest.content
    );
    listener
        .assert_silent(SILENCE, "one digest per transition")
        .await;

    let presence = server
        .api(
            Method::GET,
            &format!("/api/v1/endpoints/{}/presence", ep.slug),
            None,
        )
        .await;
    assert_eq!(presence["presence"], "in", "{presence}");
    assert_eq!(presence["source"], "shift", "{presence}");
    assert_eq!(server.todo(&id).await["ring_attempts"], 0);
    listener.close().await;
}

#[tokio::test]
async fn an_operator_clocks_the_endpoint_out_and_in() {
    let (server, ep) = setup(&[], json!({"agent": "operated-agent"})).await;
    let path = format!("/api/v1/endpoints/{}/presence", ep.slug);
    let mut listener = Listener::start(&ep, 1).await;
    wait_sessions(&server, &ep.slug, 1, 1).await;

    // Out and back in with nothing waiting: no digest.
    let out = put(&server, &path, json!({"presence": "out"})).await;
    assert_presence_shape(&out);
    assert_eq!(out["presence"], "out", "{out}");
    assert_eq!(out["source"], "operator", "{out}");
    let back = put(&server, &path, json!({"presence": "in"})).await;
    assert_eq!(back["presence"], "in", "{back}");
    listener
        .assert_silent(SILENCE, "nothing waits, so no digest")
        .await;

    // Out again; a todo waits (held); in → one digest, reason operator.
    put(&server, &path, json!({"presence": "out"})).await;
    let shown = server.api(Method::GET, &path, None).await;
    assert_presence_shape(&shown);
    assert_eq!(shown["presence"], "out", "{shown}");
    assert_eq!(shown["source"], "operator", "{shown}");
    assert_eq!(shown["until"], Value::Null, "{shown}");
    // The agent sees the human's clock-out.
    let seen = listener.call_ok(0, "presence", json!({})).await;
    assert_eq!(seen["presence"], "out", "{seen}");
    assert_eq!(seen["source"], "operator", "{seen}");

    server.push(&ep.slug, "held for the operator").await;
    listener
        .assert_silent(SILENCE, "held while the operator has it out")
        .await;
    let back = put(&server, &path, json!({"presence": "in"})).await;
    assert_eq!(back["presence"], "in", "{back}");
    assert_eq!(back["pending"], 1, "{back}");
    let digest = listener.one(ARRIVES, "the operator's digest").await;
    assert_digest(&digest, "operator", 1);
    assert!(
        digest.content.contains("clocked in by operator"),
        "{}",
        digest.content
    );
    listener
        .assert_silent(SILENCE, "one digest per transition")
        .await;
    listener.close().await;
}

#[tokio::test]
async fn the_self_verbs_come_with_any_scope_and_work() {
    let (server, ep) = setup(
        &[],
        json!({"agent": "narrow-agent", "verbs": ["list_todos"]}),
    )
    .await;
    server.push(&ep.slug, "visible").await;
    let mut listener = Listener::start(&ep, 1).await;
    let names: Vec<String> = listener
        .tools(0)
        .await
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "list_todos",
            "get_todo",
            "queue_summary",
            "clock_in",
            "clock_out",
            "presence"
        ],
        "the self verbs are offered beside the granted one (and get_todo and queue_summary, \
         which it implies)"
    );

    let before = listener.call_ok(0, "presence", json!({})).await;
    assert_presence_shape(&before);
    assert_eq!(
        before,
        json!({"presence": "in", "source": "default", "until": null, "shift": null, "pending": 1})
    );
    let out = listener.call_ok(0, "clock_out", json!({})).await;
    assert_presence_shape(&out);
    assert_eq!(
        out,
        json!({"presence": "out", "source": "agent", "until": null, "shift": null, "pending": 1})
    );
    let back = listener.call_ok(0, "clock_in", json!({"for": "90m"})).await;
    assert_presence_shape(&back);
    assert_eq!(back["presence"], "in", "{back}");
    // An identifier of any kind is refused.
    let refused = listener
        .call(0, "presence", json!({"endpoint": "someone-else"}))
        .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["structuredContent"]["error"]["code"], "invalid_argument",
        "{refused}"
    );
    // The granted verb works; the ungranted ones stay out of reach.
    let listed = listener.call_ok(0, "list_todos", json!({})).await;
    assert_eq!(listed["todos"].as_array().unwrap().len(), 1, "{listed}");
    let scope = server.endpoint(&ep.slug).await;
    assert_eq!(
        scope["scope"]["verbs"],
        json!(["list_todos"]),
        "the self verbs are never stored in the scope: {scope}"
    );
    listener.close().await;
}

#[tokio::test]
async fn while_out_claim_next_still_pulls_the_work() {
    let (server, ep) = setup(&[], json!({"agent": "pulling-agent"})).await;
    let mut listener = Listener::start(&ep, 1).await;
    wait_sessions(&server, &ep.slug, 1, 1).await;
    let out = listener.call_ok(0, "clock_out", json!({})).await;
    assert_eq!(out["presence"], "out", "{out}");

    let id = server.push(&ep.slug, "pull me").await;
    listener.assert_silent(SILENCE, "held while out").await;
    let listed = listener.call_ok(0, "list_todos", json!({})).await;
    assert_eq!(listed["todos"][0]["id"], id.as_str(), "{listed}");
    let claimed = listener.call_ok(0, "claim_next", json!({})).await;
    assert_eq!(claimed["empty"], false, "{claimed}");
    assert_eq!(claimed["todo"]["id"], id.as_str(), "{claimed}");
    assert_eq!(claimed["todo"]["state"], "claimed", "{claimed}");
    let done = listener
        .call_ok(
            0,
            "complete",
            json!({"id": id, "summary": "done while out"}),
        )
        .await;
    assert_eq!(done["state"], "done", "{done}");
    let still = listener.call_ok(0, "presence", json!({})).await;
    assert_eq!(
        still["presence"], "out",
        "pulling does not clock in: {still}"
    );
    assert_eq!(still["pending"], 0, "{still}");

    // Nothing waits any more: clocking in sends no digest.
    listener.call_ok(0, "clock_in", json!({})).await;
    listener
        .assert_silent(SILENCE, "no digest when nothing waits")
        .await;
    assert_eq!(server.todo(&id).await["state"], "done");
    listener.close().await;
}
