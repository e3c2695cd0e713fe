//! The first ten minutes (issue 45): `login` on this machine finds the first
//! start's token by itself, an unknown endpoint says what to do, and vend
//! names every tool the agent will see.

use std::process::Command;

use serde_json::{Value, json};

use super::{Client, Server, stderr};
use crate::support::server::BIN;

/// The server wrote its first token beside `./switchboard.db`; `login URL`
/// run from there, with no token and no terminal, reads it and says so.
/// From elsewhere it needs `--database`, and says so; a stale file is named.
#[test]
fn login_on_this_machine_reads_the_first_start_token_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let file = dir.path().join("switchboard.db.bootstrap-token");
    assert!(file.exists(), "the first start writes the file");

    let cli = Client::new(dir.path());
    let out = cli.ok(&["login", &server.url]);
    assert!(out.contains("as admin"), "{out}");
    assert!(
        out.contains(&format!(
            "read from {}",
            file.canonicalize().unwrap().display()
        )),
        "{out}"
    );
    assert!(!out.contains(&server.first_token), "never echoed: {out}");
    assert_eq!(cli.json(&["status"])["me"]["name"], "admin");

    // Elsewhere, without --database: nothing found, and the error says how.
    let elsewhere = tempfile::tempdir().unwrap();
    let other = Client::new(elsewhere.path());
    let out = other.run(&["login", &server.url]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--database"), "{}", stderr(&out));
    assert!(!other.credentials_file().exists());
    // With it, found.
    let database = dir.path().join("switchboard.db");
    let out = other.ok(&[
        "login",
        &server.url,
        "--database",
        database.to_str().unwrap(),
    ]);
    assert!(out.contains("as admin"), "{out}");
    // `localhost` is this machine too.
    let localhost = server.url.replace("127.0.0.1", "localhost");
    other.ok(&["logout"]);
    let out = other.ok(&[
        "login",
        &localhost,
        "--database",
        database.to_str().unwrap(),
    ]);
    assert!(out.contains("as admin"), "{out}");

    // A file another server wrote: the error names it, nothing is saved.
    let stale = tempfile::tempdir().unwrap();
    std::fs::write(
        stale.path().join("switchboard.db.bootstrap-token"),
        format!("sbh_{}\n", "Q".repeat(43)),
    )
    .unwrap();
    let third = Client::new(stale.path());
    let out = third.run(&["login", &server.url]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("did not accept the first-start token in"),
        "{}",
        stderr(&out)
    );
    assert!(!third.credentials_file().exists());
}

/// An unknown endpoint reference answers `not_found` naming it and pointing
/// at `switchboard endpoint list`, on the API and so on the CLI; it changes
/// nothing.
#[test]
fn an_unknown_endpoint_is_named_and_points_at_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    let expected = "not_found: no endpoint \"reviewer-k3x9\" among yours; \
                    `switchboard endpoint list` (GET /api/v1/endpoints) shows their slugs";
    for args in [
        &["todo", "push", "reviewer-k3x9", "Review PR 12"][..],
        &["endpoint", "show", "reviewer-k3x9"],
        &["endpoint", "clock-out", "reviewer-k3x9"],
        &["todo", "list", "--endpoint", "reviewer-k3x9"],
    ] {
        let out = cli.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(cli.json(&["todo", "list"])["todos"], json!([]));
    assert_eq!(cli.json(&["endpoint", "list"])["endpoints"], json!([]));
}

/// Vend's "agent sees" line is what the agent's `tools/list` answers: the
/// scope's verbs, the tools that come with them, and the self verbs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vend_names_every_tool_the_agent_sees() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    for verbs in [
        &[][..],
        &["claim_next", "complete"],
        &["list_todos", "heartbeat"],
    ] {
        let mut args = vec!["endpoint", "vend", "seer"];
        for verb in verbs {
            args.extend(["--verb", verb]);
        }
        let text = cli.ok(&args);
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("agent sees:"))
            .unwrap_or_else(|| panic!("no `agent sees` line:\n{text}"))
            .trim()
            .to_owned();
        let slug = text
            .lines()
            .find_map(|l| l.strip_prefix("Vended endpoint "))
            .and_then(|l| l.split_whitespace().next())
            .unwrap()
            .to_owned();
        let token = text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("sbk_"))
            .unwrap()
            .to_owned();
        let listed = tools_list(&format!("{}/mcp/{slug}", server.url), &token).await;
        let own = ["clock_in", "clock_out", "presence"];
        let scoped: Vec<&str> = listed
            .iter()
            .map(String::as_str)
            .filter(|t| !own.contains(t))
            .collect();
        assert_eq!(
            line,
            format!(
                "{} tools: {}; and the self verbs {}",
                listed.len(),
                scoped.join(", "),
                own.join(", ")
            ),
            "{verbs:?}"
        );
    }
    // The default scope: all 15, as the issue counted them.
    let all = cli.ok(&["endpoint", "vend", "seer"]);
    assert!(all.contains(" 15 tools: list_todos,"), "{all}");
}

/// `tools/list` of an endpoint, by name, over raw MCP.
async fn tools_list(url: &str, token: &str) -> Vec<String> {
    let http = reqwest::Client::new();
    let post = |session: Option<&str>, body: Value| {
        let mut request = http
            .post(url)
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(id) = session {
            request = request
                .header("mcp-session-id", id)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.send()
    };
    let init = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
    )
    .await
    .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    post(
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .unwrap();
    let listed: Value = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `example-agent` outside the runner says how to run it (usage, exit 2).
#[test]
fn the_example_agent_outside_the_runner_says_how_to_run_it() {
    let out = Command::new(BIN)
        .arg("example-agent")
        .env_remove("SWITCHBOARD_MCP_URL")
        .env_remove("SWITCHBOARD_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("switchboard work MCP_URL -- switchboard example-agent"),
        "{}",
        stderr(&out)
    );
}
