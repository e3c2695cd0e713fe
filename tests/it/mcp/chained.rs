//! `complete` with `next` over HTTP: the completion's short row and the
//! next claim in one call (`docs/mcp.md`), its refusals, its scope, and the
//! official TypeScript SDK draining a queue with it.

use crate::support::mcp;

use mcp::Server;
use serde_json::{Value, json};

#[tokio::test]
async fn complete_with_next_answers_the_short_row_and_the_next_claim() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let first = server.push(&ep.slug, "first secret").await;
    let second = server.push(&ep.slug, "second secret").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let claimed = mcp.call_ok(&session, "claim_next", json!({})).await;
    assert_eq!(claimed["todo"]["id"], first.as_str());

    let result = mcp
        .call(
            &session,
            "complete",
            json!({"id": first, "result": {"ok": true}, "next": {"claimant": "loop"}}),
        )
        .await;
    assert_ne!(result["isError"], true, "{result}");
    let answer = &result["structuredContent"];
    assert_eq!(answer["id"], first.as_str());
    assert_eq!(answer["state"], "done");
    assert!(answer.get("title").is_none(), "a short row: {answer}");
    let next = &answer["next"];
    assert_eq!(next["empty"], false, "{answer}");
    assert_eq!(next["todo"]["id"], second.as_str());
    assert_eq!(next["todo"]["state"], "claimed");
    assert_eq!(next["todo"]["title"], "second secret");
    assert_eq!(next["attempt_seq"], 1);
    // The text carries the claim's summary: the payload is sent once.
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["id"], first.as_str());
    assert_eq!(text["next"]["todo"]["id"], second.as_str());
    assert!(text["next"]["todo"].get("payload").is_none(), "{text}");
    assert_eq!(server.todo(&first).await["state"], "done");
    assert_eq!(server.todo(&first).await["result"], json!({"ok": true}));
    let view = server.todo(&second).await;
    assert_eq!(view["state"], "claimed", "{view}");
    let detail = mcp
        .call_ok(&session, "get_todo", json!({"id": second}))
        .await;
    assert_eq!(detail["attempts"][0]["claimant"], "loop", "{detail}");

    // The last one: done, and `next` is claim_next's empty answer.
    let last = mcp
        .call_ok(&session, "complete", json!({"id": second, "next": {}}))
        .await;
    assert_eq!(last["state"], "done");
    assert_eq!(last["next"], json!({"empty": true}), "{last}");
    // Without `next`, complete answers the short row alone.
    let plain = server.push(&ep.slug, "third").await;
    mcp.call_ok(&session, "claim", json!({"id": plain})).await;
    let done = mcp
        .call_ok(&session, "complete", json!({"id": plain}))
        .await;
    assert!(done.get("next").is_none(), "{done}");
}

#[tokio::test]
async fn a_refused_next_names_its_argument_and_changes_nothing() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let held = server.push(&ep.slug, "held").await;
    let pending = server.push(&ep.slug, "pending").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    mcp.call_ok(&session, "claim", json!({"id": held})).await;

    for (next, expected) in [
        (
            json!(3),
            "next: must be an object of claim_next's arguments ({} for its defaults)",
        ),
        (
            json!(true),
            "next: must be an object of claim_next's arguments ({} for its defaults)",
        ),
        (json!({"queue": 3}), "next: queue: must be a string"),
        (
            json!({"lease_ttl_seconds": "soon"}),
            "next: lease_ttl_seconds: ",
        ),
        (
            json!({"bogus": 1}),
            "next: bogus: is not an argument of this tool",
        ),
    ] {
        let (code, message) = mcp
            .call_err(&session, "complete", json!({"id": held, "next": next}))
            .await;
        assert_eq!(code, "invalid_argument", "{next}");
        assert!(message.starts_with(expected), "{next}: {message}");
    }
    let (code, message) = mcp
        .call_err(
            &session,
            "complete",
            json!({"id": held, "next": {"queue": "elsewhere"}}),
        )
        .await;
    assert_eq!(code, "forbidden");
    assert_eq!(
        message,
        "queue \"elsewhere\" is not in this endpoint's scope"
    );
    let (code, _) = mcp
        .call_err(
            &session,
            "complete",
            json!({"id": held, "next": {"lease_ttl_seconds": 0}}),
        )
        .await;
    assert_eq!(code, "invalid_argument");
    assert_eq!(server.todo(&held).await["state"], "claimed");
    assert_eq!(server.todo(&pending).await["state"], "pending");
}

#[tokio::test]
async fn next_needs_claim_next_in_the_endpoints_scope() {
    let server = Server::start(&[]);
    let ep = server
        .vend(json!({"agent": "a", "verbs": ["claim", "complete"]}))
        .await;
    let held = server.push(&ep.slug, "held").await;
    let pending = server.push(&ep.slug, "pending").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    mcp.call_ok(&session, "claim", json!({"id": held})).await;
    let (code, message) = mcp
        .call_err(&session, "complete", json!({"id": held, "next": {}}))
        .await;
    assert_eq!(
        (code.as_str(), message.as_str()),
        (
            "forbidden",
            "next: claim_next is not in this endpoint's scope"
        )
    );
    assert_eq!(server.todo(&held).await["state"], "claimed");
    assert_eq!(server.todo(&pending).await["state"], "pending");
}

/// The example agent (`switchboard example-agent`, what `quickstart` runs)
/// loops with `complete` and `next`: one run drains a backlog.
#[tokio::test]
async fn the_example_agent_drains_a_backlog_with_next() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(server.push(&ep.slug, &format!("backlog {i}")).await);
    }
    let (url, token) = (ep.mcp_url.clone(), ep.token.clone());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["example-agent", "--say", "drained"])
            .env("SWITCHBOARD_MCP_URL", url)
            .env("SWITCHBOARD_TOKEN", token)
            .env("NO_PROXY", "*")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run the example agent")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let completed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("example-agent: completed "))
        .collect();
    assert_eq!(completed, ids, "{stdout}");
    for id in &ids {
        let view = server.todo(id).await;
        assert_eq!(view["state"], "done", "{view}");
        assert_eq!(view["result"], json!({"said": "drained"}));
    }
}
