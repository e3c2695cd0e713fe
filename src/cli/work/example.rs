//! `switchboard example-agent`: the smallest agent there is, shipped with
//! the binary so that a first doorbell needs nothing else installed
//! (`switchboard quickstart` runs it under the runner). Started by
//! `switchboard work`, it reads `SWITCHBOARD_MCP_URL` and
//! `SWITCHBOARD_TOKEN`, opens an MCP session of its own, claims the
//! endpoint's todos one by one (`claim_next`, then `complete` with `next`,
//! which claims the next one in the same call), says what it got on
//! stdout, completes each with a small result, and ends its session when
//! nothing more is claimable. A real agent (Claude Code, Codex) does
//! the same through the same tools.

use clap::Args;
use serde_json::{Value, json};

use super::session::McpClient;
use crate::cli::UsageError;

/// `clientInfo.name` of the example agent's sessions.
const CLIENT_NAME: &str = "switchboard-example-agent";

/// It stops after this many todos in one run (the runner starts it again
/// while work waits).
const MAX_PER_RUN: usize = 100;

#[derive(Debug, Args)]
pub struct ExampleAgentArgs {
    /// What the agent puts in each todo's result (`{"said": …}`).
    #[arg(long, default_value = "hello from the example agent")]
    pub say: String,
}

fn from_env(name: &str) -> anyhow::Result<String> {
    match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => Ok(value.trim().to_owned()),
        _ => Err(UsageError(format!(
            "{name} is not set: the example agent runs under the runner, e.g. \
             `switchboard work MCP_URL -- switchboard example-agent` (or `switchboard quickstart`)"
        ))
        .into()),
    }
}

pub(crate) async fn run(args: ExampleAgentArgs) -> anyhow::Result<()> {
    let url = from_env("SWITCHBOARD_MCP_URL")?;
    let token = from_env("SWITCHBOARD_TOKEN")?;
    let client = McpClient::named(&url, &token, CLIENT_NAME)?;
    client
        .initialize()
        .await
        .map_err(|e| anyhow::anyhow!("example-agent: cannot open an MCP session: {e}"))?;
    let worked = work(&client, &args.say).await;
    // Its own session ends with it: no session is left behind.
    client.close().await;
    let done = worked?;
    if done == 0 {
        println!("example-agent: nothing to claim");
    }
    Ok(())
}

/// Claims and completes until nothing is claimable; how many it completed.
/// Every completion but the run's last claims the next todo too
/// (`complete` with `next`): one call a todo, as an agent should loop.
async fn work(client: &McpClient, say: &str) -> anyhow::Result<usize> {
    let call = async |name: &str, arguments: Value| {
        client
            .call_tool(name, arguments)
            .await
            .map_err(|e| anyhow::anyhow!("example-agent: {e}"))
    };
    let mut claimed = call("claim_next", json!({})).await?;
    let mut done = 0;
    while claimed["empty"] == Value::Bool(false) {
        let todo = &claimed["todo"];
        let id = todo["id"].as_str().unwrap_or_default().to_owned();
        println!(
            "example-agent: claimed {id} {:?} (queue {}); completing it",
            todo["title"].as_str().unwrap_or(""),
            todo["queue"].as_str().unwrap_or("?")
        );
        let mut complete = json!({
            "id": id,
            "result": {"said": say},
            "summary": say,
        });
        if let Some(lease) = claimed.get("lease_token").filter(|v| !v.is_null()) {
            complete["lease_token"] = lease.clone();
        }
        let last = done + 1 == MAX_PER_RUN;
        if !last {
            complete["next"] = json!({});
        }
        let mut answer = call("complete", complete).await?;
        println!("example-agent: completed {id}");
        done += 1;
        if last {
            break;
        }
        claimed = answer["next"].take();
    }
    Ok(done)
}
