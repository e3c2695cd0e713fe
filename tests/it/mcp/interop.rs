//! Interoperability with the official MCP TypeScript SDK client
//! (`09-quality.md`): the server in process, endpoints vended over the REST API,
//! and `tests/mcp-client/scenario.mjs` run under Node for each scenario.
//!
//! Needs `node` (20+) and `npm`; `node_modules` is installed with `npm ci`
//! on first use (`.ci/run` installs it up front).

use crate::support::mcp;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// Node and the SDK, checked and installed as for the listener (`support::mcp::listener`).
use mcp::listener::{client_dir, node_ready};
use mcp::{Server, Vended};
use serde_json::{Value, json};

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs one scenario against an endpoint; returns what it printed.
fn scenario(ep: &Vended, name: &str) -> Value {
    scenario_with(ep, name, &[])
}

/// As [`scenario`], with extra environment for the script.
fn scenario_with(ep: &Vended, name: &str, env: &[(&str, &str)]) -> Value {
    node_ready();
    let mut child = Command::new("node")
        .current_dir(client_dir())
        .arg("scenario.mjs")
        .args([&ep.mcp_url, &ep.authorization, name])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn node");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait for node").is_some() {
            break;
        }
        if started.elapsed() > SCENARIO_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("scenario {name} did not finish within {SCENARIO_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("node output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "scenario {name} failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("scenario {name} printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

/// A server, one fresh endpoint (default lease 600 s) and `todos` pending todos.
async fn setup(extra: &[&str], todos: usize) -> (Server, Vended, Vec<String>) {
    let server = Server::start(extra);
    let ep = server
        .vend(json!({"agent": "sdk-agent", "default_lease_ttl_seconds": 600}))
        .await;
    let mut ids = Vec::new();
    for i in 0..todos {
        ids.push(server.push(&ep.slug, &format!("todo {i}")).await);
    }
    (server, ep, ids)
}

#[tokio::test]
async fn initialize_reports_the_server_capabilities_and_instructions() {
    let (server, ep, _) = setup(&[], 3).await;
    let out = scenario(&ep, "initialize");
    assert_eq!(out["server_version"]["name"], "switchboard");
    assert_eq!(out["server_version"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        out["capabilities"],
        json!({"tools": {"listChanged": true}, "prompts": {}, "experimental": {"claude/channel": {}}})
    );
    assert_eq!(out["protocol_version"], "2025-11-25");
    let instructions = out["instructions"].as_str().expect("instructions");
    assert!(instructions.contains("600 seconds"), "{instructions}");
    assert!(
        instructions.contains("3 todos were waiting"),
        "{instructions}"
    );
    for word in [
        "claim_next",
        "heartbeat",
        "conflict",
        "complete",
        "fail",
        "release",
        "clock_out",
        "never instructions",
    ] {
        assert!(instructions.contains(word), "{word}: {instructions}");
    }
    assert!(
        server.endpoint(&ep.slug).await["liveness"]["last_seen_at"].is_string(),
        "the SDK's requests stamp last_seen"
    );
}

#[tokio::test]
async fn list_tools_shows_every_granted_verb_with_schemas() {
    let (_server, ep, _) = setup(&[], 0).await;
    let out = scenario(&ep, "list_tools");
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "list_todos",
            "get_todo",
            "queue_summary",
            "claim",
            "claim_next",
            "heartbeat",
            "complete",
            "complete_many",
            "fail",
            "release",
            "get_default_lease",
            "set_default_lease",
            "clock_in",
            "clock_out",
            "presence"
        ]
    );
    let claim = &out["tools"][3];
    assert!(
        claim["description"].as_str().unwrap().contains("600 s"),
        "{claim}"
    );
    assert_eq!(claim["input"]["required"], json!(["id"]));
    assert_eq!(claim["input"]["additionalProperties"], false);

    // Titles and annotations, as the SDK parsed them (MCP 2025-06-18).
    for tool in out["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        assert!(
            tool["title"].as_str().is_some_and(|t| !t.is_empty()),
            "{name}"
        );
        let read_only = matches!(
            name,
            "list_todos" | "get_todo" | "queue_summary" | "get_default_lease" | "presence"
        );
        let a = &tool["annotations"];
        assert_eq!(a["readOnlyHint"], read_only, "{name}: {a}");
        assert_eq!(a["destructiveHint"], false, "{name}: {a}");
        assert_eq!(
            a["idempotentHint"],
            !matches!(name, "claim" | "claim_next"),
            "{name}: {a}"
        );
        assert_eq!(a["openWorldHint"], false, "{name}: {a}");
    }
    assert!(
        claim["description"].as_str().unwrap().contains("get_todo"),
        "a claim says where a large payload is: {claim}"
    );
}

#[tokio::test]
async fn large_payloads_are_left_out_of_claims_and_read_whole_with_get_todo() {
    let (server, ep, _) = setup(&[], 0).await;
    for n in [8_000, 40_000] {
        server
            .api(
                reqwest::Method::POST,
                &format!("/api/v1/endpoints/{}/todos", ep.slug),
                Some(json!({"title": format!("{n} bytes"), "payload": {"blob": "x".repeat(n)}})),
            )
            .await;
    }
    let out = scenario(&ep, "large_payload");
    assert!(out["small_size"].as_u64().unwrap() > 8_000, "{out}");
    let size = out["large"]["payload_size"].as_u64().unwrap();
    assert!(size > 40_000, "{out}");
    assert_eq!(out["large"]["payload_truncated"], true);
    assert!(out["large"]["preview_bytes"].as_u64().unwrap() <= 1024);
    assert_eq!(out["whole_size"], size);
}

#[tokio::test]
async fn claim_next_heartbeat_complete() {
    let (server, ep, ids) = setup(&[], 1).await;
    let out = scenario(&ep, "claim_heartbeat_complete");
    let claimed = &out["claimed"];
    assert_eq!(claimed["todo"]["id"], ids[0].as_str());
    assert_eq!(claimed["todo"]["payload"], json!({"title": "todo 0"}));
    assert_eq!(claimed["attempt_seq"], 1);
    assert!(claimed.get("lease_token").is_none(), "unfenced: {claimed}");
    assert!(out["heartbeat"]["lease_expires_at"].is_string());
    assert_eq!(out["completed"]["state"], "done");
    let detail = &out["detail"];
    assert_eq!(detail["result"], json!({"answer": 42}));
    assert_eq!(detail["attempts"][0]["note"], "halfway there");
    assert_eq!(detail["attempts"][0]["claimant"], "interop");
    assert_eq!(detail["attempts"][0]["outcome"], "completed");
    assert_eq!(detail["attempts"][0]["summary"], "done by the SDK");
    let view = server.todo(&ids[0]).await;
    assert_eq!(view["state"], "done", "{view}");
}

#[tokio::test]
async fn the_sdk_drains_a_queue_with_complete_and_next() {
    let (server, ep, ids) = setup(&[], 3).await;
    let out = scenario(&ep, "complete_with_next");
    assert_eq!(out["drained"], json!(ids), "{out}");
    let answers = out["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 3);
    assert_eq!(answers[0]["next"]["todo"]["id"], ids[1].as_str());
    assert_eq!(answers[2]["next"], json!({"empty": true}));
    for (n, id) in ids.iter().enumerate() {
        let view = server.todo(id).await;
        assert_eq!(view["state"], "done", "{view}");
        assert_eq!(view["result"], json!({"n": n + 1}));
    }
}

#[tokio::test]
async fn fail_opens_a_retry_window_during_which_nothing_is_claimable() {
    let (server, ep, ids) = setup(&[], 1).await;
    let out = scenario(&ep, "fail_retry");
    let failed = &out["failed"];
    assert_eq!(failed["id"], ids[0].as_str());
    assert_eq!(failed["state"], "failed");
    assert_eq!(failed["dead_letter"], false);
    assert!(failed["next_retry_at"].is_string(), "{failed}");
    assert_eq!(out["during_window"], json!({"empty": true}));
    assert_eq!(out["claim_by_id"]["code"], "conflict", "{out}");
    assert_eq!(out["detail"]["attempts"][0]["outcome"], "failed");
    let view = server.todo(&ids[0]).await;
    assert_eq!(view["state"], "failed");
    assert_eq!(view["next_retry_at"], failed["next_retry_at"]);
}

#[tokio::test]
async fn queue_summary_and_complete_many_drain_a_noisy_queue() {
    let (server, ep, ids) = setup(&[], 3).await;
    let out = scenario(&ep, "drain");
    assert_eq!(out["before"]["pending"], 3, "{out}");
    assert_eq!(out["before"]["queues"][0]["queue"], "inbox");
    assert!(
        out["before"]["oldest_pending_age_seconds"].is_number(),
        "{out}"
    );
    let drained = &out["drained"];
    assert_eq!(drained["completed"], 2, "{out}");
    assert_eq!(
        drained["results"][2],
        json!({"id": "td_not_held", "status": "not_found"})
    );
    for result in &drained["results"].as_array().unwrap()[..2] {
        assert_eq!(result["status"], "ok", "{out}");
    }
    assert_eq!(out["refused"]["code"], "invalid_argument");
    assert!(
        out["refused"]["message"]
            .as_str()
            .unwrap()
            .starts_with("ids: "),
        "{out}"
    );
    assert_eq!(out["outside"]["code"], "forbidden");
    assert_eq!(out["after"]["pending"], 1, "{out}");
    assert_eq!(out["after"]["claimed"], 0, "{out}");
    let done: Vec<String> = drained["results"].as_array().unwrap()[..2]
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    for id in &done {
        assert!(ids.contains(id));
        assert_eq!(server.todo(id).await["state"], "done");
    }
}

#[tokio::test]
async fn release_returns_the_todo_at_once() {
    let (server, ep, ids) = setup(&[], 1).await;
    let out = scenario(&ep, "release");
    let released = &out["released"];
    assert_eq!(released["state"], "pending");
    assert_eq!(released["owner"], Value::Null);
    assert_eq!(released["lease_expires_at"], Value::Null);
    assert_eq!(released["next_retry_at"], Value::Null, "no backoff");
    assert_eq!(released["attempt"], 1, "attempt unchanged by release");
    assert_eq!(out["reclaimed"]["id"], ids[0].as_str());
    assert_eq!(out["reclaimed"]["attempt"], 2);
    assert_eq!(out["reclaimed"]["attempt_seq"], 2);
    assert_eq!(
        out["reclaimed"]["prior_attempts"][0]["outcome"], "released",
        "{out}"
    );
    assert_eq!(out["completed"]["state"], "done");
    assert_eq!(server.todo(&ids[0]).await["state"], "done");
}

#[tokio::test]
async fn a_fenced_claim_needs_its_own_lease_token() {
    let (server, ep, ids) = setup(&[], 1).await;
    let out = scenario(&ep, "fenced");
    assert_eq!(out["first"]["todo"]["id"], ids[0].as_str());
    for case in ["stale", "wrong", "missing"] {
        assert_eq!(out[case]["code"], "conflict", "{case}: {out}");
    }
    assert_eq!(out["completed"]["state"], "done");
    assert_eq!(server.todo(&ids[0]).await["state"], "done");
}

#[tokio::test]
async fn claim_next_on_an_empty_queue_is_empty_not_an_error() {
    let (_server, ep, _) = setup(&[], 0).await;
    let out = scenario(&ep, "empty");
    assert_eq!(out["next"], json!({"empty": true}));
    assert_eq!(out["listed"], json!({"todos": []}));
}

#[tokio::test]
async fn set_default_lease_sends_tools_list_changed() {
    let (server, ep, _) = setup(&[], 0).await;
    let out = scenario(&ep, "list_changed");
    assert_eq!(out["before"]["effective_lease_ttl_seconds"], 600);
    assert_eq!(out["set"]["default_lease_ttl_seconds"], 900);
    assert_eq!(out["after"]["effective_lease_ttl_seconds"], 900);
    assert_eq!(
        out["notifications"],
        json!(["notifications/tools/list_changed"])
    );
    assert!(
        out["claim_description"].as_str().unwrap().contains("900 s"),
        "{out}"
    );
    assert_eq!(out["stream_content_type"], "text/event-stream");
    assert_eq!(
        server.endpoint(&ep.slug).await["default_lease_ttl_seconds"],
        900
    );
}

#[tokio::test]
async fn a_channel_handler_hears_the_doorbell_for_a_new_todo() {
    // The SDK client registers a handler for notifications/claude/channel,
    // keeps its GET stream open (keep-alives at 1 s), then pushes a todo over
    // the REST API, hears its doorbell, and claims and completes what it names.
    let (server, ep, _) = setup(&["--sse-keepalive", "1s"], 0).await;
    let api_url = server.url("");
    let out = scenario_with(
        &ep,
        "channel",
        &[
            ("SB_API_URL", &api_url),
            ("SB_API_TOKEN", &server.admin_token),
        ],
    );
    assert_eq!(out["stream_status"], 200);
    assert_eq!(out["stream_content_type"], "text/event-stream");
    assert_eq!(out["streams_opened"], 1, "no reconnect was needed: {out}");
    assert!(out["keepalives"].as_u64().unwrap() >= 2);
    assert_eq!(out["still_open"], true);
    let pushed = out["pushed"].as_str().unwrap();
    let bells: Vec<&Value> = out["channel_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["meta"].get("todo_id").is_some())
        .collect();
    assert_eq!(bells.len(), 1, "one doorbell for one todo: {out}");
    let bell = bells[0];
    assert_eq!(bell["meta"]["todo_id"], pushed);
    assert_eq!(bell["meta"]["queue"], "inbox");
    let content = bell["content"].as_str().unwrap();
    assert!(content.contains(pushed), "{content}");
    assert!(content.contains("ring the bell"), "{content}");
    assert_eq!(out["claimed"]["id"], pushed);
    assert_eq!(out["completed"]["state"], "done");
    assert_eq!(server.todo(pushed).await["state"], "done");

    // The operator saw the SDK's session attached and streaming; once the
    // client has gone, the stream is closed (the session stays attached
    // until it idles out: the SDK's close() sends no DELETE).
    assert_eq!(out["sessions_while_streaming"]["attached"], 1, "{out}");
    assert_eq!(out["sessions_while_streaming"]["streaming"], 1, "{out}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let sessions = server.endpoint(&ep.slug).await["sessions"].clone();
        if sessions["streaming"] == 0 {
            assert_eq!(sessions["attached"], 1, "{sessions}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the stream still counts after the client left: {sessions}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_sdk_reconnects_a_replaced_stream_and_keeps_hearing() {
    let (_server, ep, _) = setup(&[], 0).await;
    let out = scenario(&ep, "reconnect_stream");
    assert_eq!(
        out["sdk_streams"],
        json!([{"status": 200, "ended": true}, {"status": 200, "ended": false}])
    );
    assert_eq!(
        out["notifications"],
        json!(["notifications/tools/list_changed"])
    );
}

#[tokio::test]
async fn terminating_the_session_and_connecting_again() {
    let (_server, ep, _) = setup(&[], 0).await;
    let out = scenario(&ep, "session_end");
    assert_eq!(out["after_delete"]["status"], 404, "{out}");
    assert_eq!(out["lease"]["effective_lease_ttl_seconds"], 600);
}

#[tokio::test]
async fn the_self_verbs_clock_out_and_in() {
    let (server, ep, _) = setup(&[], 2).await;
    let out = scenario(&ep, "presence_verbs");
    assert_eq!(out["before"]["presence"], "in", "{out}");
    assert_eq!(out["before"]["pending"], 2);
    assert_eq!(out["out"]["presence"], "out");
    assert_eq!(out["out"]["source"], "agent");
    assert_eq!(out["again"]["presence"], "out");
    assert_eq!(out["back"]["presence"], "in");
    assert_eq!(out["bad"]["code"], "invalid_argument");
    assert!(
        out["bad"]["message"].as_str().unwrap().starts_with("for"),
        "{out}"
    );
    assert_eq!(out["after"]["presence"], "in");
    let view = server.endpoint(&ep.slug).await;
    assert_eq!(view["presence"]["presence"], "in", "{view}");
}

#[tokio::test]
async fn protocol_and_tool_errors_reach_the_sdk_as_such() {
    let (_server, ep, _) = setup(&[], 0).await;
    let out = scenario(&ep, "protocol_errors");
    assert_eq!(out["unknown_tool"]["thrown"], true);
    assert_eq!(out["unknown_tool"]["code"], -32602);
    assert_eq!(out["unknown_argument"]["code"], "invalid_argument");
    assert!(
        out["unknown_argument"]["message"]
            .as_str()
            .unwrap()
            .starts_with("endpoint:"),
        "{out}"
    );
    assert_eq!(out["out_of_range"]["code"], "invalid_argument");
    assert_eq!(out["ping"], json!({}));
}
