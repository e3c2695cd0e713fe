//! `endpoint vend | list | show | edit | revoke | delete` and the presence
//! controls `presence | clock-in | clock-out | shift`.

use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::cli::UsageError;
use crate::cli::args::{ClientArgs, LeaseTtl, api_duration, lease_ttl, lifetime, seconds};
use crate::cli::output::{
    Table, emit, flag, joined, print_next_page, print_pairs, text, when, when_exact,
};
use crate::cli::prompt;
use crate::clock::Clock;

#[derive(Debug, Args)]
pub struct EndpointArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(subcommand)]
    pub command: EndpointCommand,
}

#[derive(Debug, Subcommand)]
pub enum EndpointCommand {
    /// Vend an endpoint for an agent: prints its one-time token and how to
    /// set up Claude Code and Codex with it.
    Vend(VendArgs),
    /// Your endpoints, newest first.
    List(ListArgs),
    /// One endpoint, by slug or id.
    Show { reference: String },
    /// Change an endpoint's default lease (scope is immutable: revoke and vend again).
    Edit(EditArgs),
    /// Revoke an endpoint now: its token stops working, its live todos become dead letters.
    Revoke(RevokeArgs),
    /// Delete a revoked endpoint and its history.
    Delete { reference: String },
    /// Whether the endpoint's doorbells ring now, why, and until when.
    Presence { reference: String },
    /// Clock the endpoint in (an operator override; it still ends at the next shift boundary).
    ClockIn(ClockArgs),
    /// Clock the endpoint out: doorbells are held, pulls still work.
    ClockOut(ClockArgs),
    /// Set the endpoint's weekly shift (try one first with `switchboard shift check`).
    Shift(ShiftArgs),
    /// The endpoint's admission limits and what is used of them.
    Admission { reference: String },
    /// Pause claims on the endpoint (or one queue): claim_next answers
    /// empty with `held: paused`, and nothing rings.
    Pause(LevelArgs),
    /// Resume claims paused with `pause`; what waited gets one digest.
    Resume(LevelArgs),
    /// Limit claims: at most N at once, and/or at most M per window.
    Limit(LimitArgs),
    /// The OAuth clients connected to the endpoint (claude.ai, Claude
    /// Desktop, ChatGPT connectors): who, whether their metadata was
    /// verified, when connected and last used.
    OauthClients { reference: String },
    /// Disconnect one OAuth client (its id from `oauth-clients`): its
    /// tokens stop working at once; it must be authorized again.
    OauthRevoke { reference: String, id: String },
    /// What the endpoint's queues did over the last hour, day or week:
    /// created, completed, failed, dead-lettered, and the time to claim and
    /// to complete (the board's queue charts, as numbers).
    Activity {
        reference: String,
        /// `hour` (per minute), `day` (per quarter hour) or `week` (per hour).
        #[arg(long, default_value = "hour")]
        range: String,
        /// One queue of the endpoint; all of them when left out.
        #[arg(long)]
        queue: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct LevelArgs {
    pub reference: String,
    /// One queue of the endpoint instead of all of them.
    #[arg(short = 'q', long)]
    pub queue: Option<String>,
}

#[derive(Debug, Args)]
pub struct LimitArgs {
    #[command(flatten)]
    pub level: LevelArgs,
    /// At most this many todos claimed at once (0 pauses).
    #[arg(long)]
    pub max_in_flight: Option<i64>,
    /// The window of --max-claims (1h, 24h, 15m).
    #[arg(long, requires = "max_claims")]
    pub window: Option<String>,
    /// At most this many claims per --window (0 pauses).
    #[arg(long, requires = "window")]
    pub max_claims: Option<i64>,
    /// Remove every limit of the level (a pause stays).
    #[arg(long, conflicts_with_all = ["max_in_flight", "window", "max_claims"])]
    pub clear: bool,
}

#[derive(Debug, Args)]
pub struct ClockArgs {
    pub reference: String,
    /// Until this RFC 3339 time or for this long (2h); default: until the next change.
    #[arg(long, value_parser = lifetime)]
    pub until: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct ShiftArgs {
    pub reference: String,
    /// e.g. "TZ=Europe/Berlin Mon-Fri 09:00-17:00".
    #[arg(required_unless_present = "clear", conflicts_with = "clear")]
    pub expr: Option<String>,
    /// Remove the shift.
    #[arg(long)]
    pub clear: bool,
}

#[derive(Debug, Args)]
pub struct VendArgs {
    /// The agent's name; registered with --kind if it does not exist yet.
    pub agent: String,
    /// A queue the endpoint may use (repeat for several; default inbox).
    #[arg(short = 'q', long = "queue", value_name = "QUEUE")]
    pub queues: Vec<String>,
    /// A verb the endpoint is granted (repeat for several; default all).
    #[arg(long = "verb", value_name = "VERB")]
    pub verbs: Vec<String>,
    /// Kind of a newly registered agent: heartbeat, session (default) or task.
    #[arg(long)]
    pub kind: Option<String>,
    /// Revoke it automatically after this long (30d) or at this RFC 3339 time.
    #[arg(long, value_parser = lifetime)]
    pub expires_in: Option<Duration>,
    /// Default lease of its claims: seconds or a duration (10m), 60s–24h.
    #[arg(long, value_parser = seconds)]
    pub lease_ttl: Option<i64>,
    /// Also create a webhook on its first queue and print its URL.
    #[arg(long)]
    pub webhook: bool,
    /// The name MCP clients know it by (default switchboard-AGENT): the
    /// .mcp.json key, `claude mcp add NAME`, the channels flag. At most 40
    /// characters.
    #[arg(long = "name", value_name = "NAME")]
    pub server_name: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// At most this many (1–200, server default 50).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Continue after a previous page (its next_cursor).
    #[arg(long)]
    pub cursor: Option<String>,
}

#[derive(Debug, Args)]
pub struct EditArgs {
    pub reference: String,
    /// Seconds, a duration (10m), or `default` for the server default.
    #[arg(long, value_parser = lease_ttl, value_name = "D|default")]
    pub lease_ttl: LeaseTtl,
}

#[derive(Debug, Args)]
pub struct RevokeArgs {
    pub reference: String,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,
}

pub(crate) async fn run(args: EndpointArgs) -> anyhow::Result<()> {
    let json = args.client.json;
    // Ask before connecting: a refusal should not depend on the server.
    if let EndpointCommand::Revoke(revoke) = &args.command
        && !revoke.yes
        && !confirm_revoke(&revoke.reference)?
    {
        println!("Not revoked.");
        return Ok(());
    }
    let client = args.client.connect()?;
    match args.command {
        EndpointCommand::Vend(vend) => {
            let response = client.post(&["endpoints"], &vend_body(&vend)).await?;
            emit(json, &response, print_vended)
        }
        EndpointCommand::List(list) => {
            let mut query = Vec::new();
            if let Some(limit) = list.limit {
                query.push(("limit", limit.to_string()));
            }
            if let Some(cursor) = list.cursor {
                query.push(("cursor", cursor));
            }
            let response = client.get(&["endpoints"], &query).await?;
            emit(json, &response, |body| {
                print_endpoints(body);
                Ok(())
            })
        }
        EndpointCommand::Show { reference } => {
            let response = client.get(&["endpoints", &reference], &[]).await?;
            if json {
                return emit(json, &response, print_endpoint);
            }
            // Hooks are hearers too: listed beside the sessions.
            let hooks = client
                .get(&["endpoints", &reference, "hooks"], &[])
                .await?
                .json()?;
            let mut endpoint = response.json()?;
            endpoint["hooks"] = hooks["hooks"].clone();
            print_endpoint(&endpoint)
        }
        EndpointCommand::Edit(edit) => {
            let ttl = match edit.lease_ttl {
                LeaseTtl::Seconds(secs) => json!(secs),
                LeaseTtl::Default => Value::Null,
            };
            let response = client
                .patch(
                    &["endpoints", &edit.reference],
                    &json!({ "default_lease_ttl_seconds": ttl }),
                )
                .await?;
            emit(json, &response, print_endpoint)
        }
        EndpointCommand::Revoke(revoke) => {
            let response = client
                .post_action(&["endpoints", &revoke.reference, "revoke"])
                .await?;
            emit(json, &response, |endpoint| {
                println!(
                    "Revoked {}: its token no longer works and its live todos are dead letters.",
                    text(endpoint, "slug")
                );
                Ok(())
            })
        }
        EndpointCommand::Delete { reference } => {
            let response = client.delete(&["endpoints", &reference]).await?;
            emit(json, &response, |_| {
                println!("Deleted {reference}.");
                Ok(())
            })
        }
        EndpointCommand::Presence { reference } => {
            let response = client
                .get(&["endpoints", &reference, "presence"], &[])
                .await?;
            emit(json, &response, print_presence)
        }
        EndpointCommand::ClockIn(clock) => set_presence(&client, json, "in", clock).await,
        EndpointCommand::ClockOut(clock) => set_presence(&client, json, "out", clock).await,
        EndpointCommand::Shift(shift) => {
            let response = client
                .put(
                    &["endpoints", &shift.reference, "shift"],
                    &json!({ "shift": if shift.clear { None } else { shift.expr.clone() } }),
                )
                .await?;
            emit(json, &response, print_presence)
        }
        EndpointCommand::Admission { reference } => {
            let response = client
                .get(&["endpoints", &reference, "admission"], &[])
                .await?;
            emit(json, &response, print_admission)
        }
        EndpointCommand::OauthClients { reference } => {
            let response = client
                .get(&["endpoints", &reference, "oauth-clients"], &[])
                .await?;
            emit(json, &response, |body| {
                print_oauth_clients(body);
                Ok(())
            })
        }
        EndpointCommand::OauthRevoke { reference, id } => {
            let response = client
                .delete(&["endpoints", &reference, "oauth-clients", &id])
                .await?;
            emit(json, &response, |_| {
                println!("Disconnected {id}: its tokens no longer work.");
                Ok(())
            })
        }
        EndpointCommand::Activity {
            reference,
            range,
            queue,
        } => {
            let mut query = vec![("range", range)];
            if let Some(queue) = queue {
                query.push(("queue", queue));
            }
            let response = client
                .get(&["endpoints", &reference, "activity"], &query)
                .await?;
            emit(json, &response, print_activity)
        }
        EndpointCommand::Pause(level) => {
            set_admission(&client, json, &level, |l| {
                l["paused"] = json!(true);
            })
            .await
        }
        EndpointCommand::Resume(level) => {
            set_admission(&client, json, &level, |l| {
                l["paused"] = json!(false);
            })
            .await
        }
        EndpointCommand::Limit(limit) => {
            let LimitArgs {
                level,
                max_in_flight,
                window,
                max_claims,
                clear,
            } = limit;
            set_admission(&client, json, &level, |l| {
                if clear {
                    l["max_in_flight"] = Value::Null;
                    l["window"] = Value::Null;
                    l["max_claims_per_window"] = Value::Null;
                }
                if let Some(n) = max_in_flight {
                    l["max_in_flight"] = json!(n);
                }
                if let (Some(w), Some(n)) = (&window, max_claims) {
                    l["window"] = json!(w);
                    l["max_claims_per_window"] = json!(n);
                }
            })
            .await
        }
    }
}

/// Reads a level's limits, changes them with `change`, and puts them back
/// whole (a PUT replaces the level: a pause keeps the limits, and a limit
/// keeps the pause).
async fn set_admission(
    client: &crate::cli::client::ApiClient,
    json: bool,
    level: &LevelArgs,
    change: impl FnOnce(&mut Value),
) -> anyhow::Result<()> {
    let current = client
        .get(&["endpoints", &level.reference, "admission"], &[])
        .await?
        .json()?;
    let found = current["levels"]
        .as_array()
        .and_then(|levels| {
            levels
                .iter()
                .find(|l| l["queue"].as_str() == level.queue.as_deref())
        })
        .cloned();
    let mut limits = json!({
        "paused": found.as_ref().is_some_and(|l| l["paused"] == json!(true)),
        "max_in_flight": found.as_ref().map_or(Value::Null, |l| l["max_in_flight"].clone()),
        "window": found.as_ref().map_or(Value::Null, |l| l["window"].clone()),
        "max_claims_per_window": found
            .as_ref()
            .map_or(Value::Null, |l| l["max_claims_per_window"].clone()),
    });
    change(&mut limits);
    let path: Vec<&str> = match &level.queue {
        Some(queue) => vec!["endpoints", &level.reference, "queues", queue, "admission"],
        None => vec!["endpoints", &level.reference, "admission"],
    };
    let response = client.put(&path, &limits).await?;
    emit(json, &response, print_admission)
}

/// The range's totals, then each interval with activity, newest first.
fn print_activity(body: &Value) -> anyhow::Result<()> {
    let ms = |v: &Value| {
        v.as_i64()
            .map_or_else(|| "-".to_owned(), crate::domain::activity::latency_label)
    };
    let line = |n: &Value| {
        format!(
            "{} created, {} completed, {} failed, {} dead-lettered; claim p50 {} p95 {}, complete p50 {} p95 {}",
            n["created"],
            n["completed"],
            n["failed"],
            n["dead_lettered"],
            ms(&n["claim_p50_ms"]),
            ms(&n["claim_p95_ms"]),
            ms(&n["complete_p50_ms"]),
            ms(&n["complete_p95_ms"]),
        )
    };
    let scope = match body["queue"].as_str() {
        Some(queue) => format!("{} / {queue}", text(body, "endpoint")),
        None => text(body, "endpoint").to_owned(),
    };
    println!(
        "{scope}, last {}: {}",
        text(body, "range"),
        line(&body["totals"])
    );
    let buckets = body["buckets"].as_array().cloned().unwrap_or_default();
    for bucket in buckets.iter().rev() {
        let busy = ["created", "completed", "failed", "dead_lettered"]
            .iter()
            .any(|k| bucket[*k].as_u64().unwrap_or(0) > 0);
        if busy {
            println!("  {}  {}", text(bucket, "at"), line(bucket));
        }
    }
    Ok(())
}

fn print_admission(body: &Value) -> anyhow::Result<()> {
    let levels = body["levels"].as_array().cloned().unwrap_or_default();
    if levels.is_empty() {
        println!("{}: no limits; claims flow.", text(body, "endpoint"));
        return Ok(());
    }
    for level in levels {
        let name = level["queue"].as_str().unwrap_or("(all queues)");
        let mut parts = Vec::new();
        if level["paused"] == json!(true) {
            parts.push("paused".to_owned());
        }
        if let Some(n) = level["max_in_flight"].as_i64() {
            parts.push(format!("in flight {}/{n}", level["in_flight"]));
        }
        if let (Some(w), Some(n)) = (
            level["window"].as_str(),
            level["max_claims_per_window"].as_i64(),
        ) {
            parts.push(format!("{}/{n} claims per {w}", level["window_claims"]));
        }
        let held = match (level["held"].as_str(), level["until"].as_str()) {
            (Some(reason), Some(until)) => format!(" — held ({reason}) until {until}"),
            (Some(reason), None) => format!(" — held ({reason})"),
            _ => String::new(),
        };
        println!("{name}: {}{held}", parts.join(", "));
    }
    Ok(())
}

/// `clock-in` / `clock-out`: an operator override, optionally with an end.
async fn set_presence(
    client: &crate::cli::client::ApiClient,
    json: bool,
    value: &str,
    clock: ClockArgs,
) -> anyhow::Result<()> {
    let until = clock.until.map(|d| {
        crate::clock::SystemClock
            .now()
            .saturating_add(d)
            .to_rfc3339()
    });
    let response = client
        .put(
            &["endpoints", &clock.reference, "presence"],
            &json!({ "presence": value, "until": until }),
        )
        .await?;
    emit(json, &response, print_presence)
}

fn print_presence(body: &Value) -> anyhow::Result<()> {
    let until = when(body, "until", "no end");
    println!(
        "{} ({}), until {}; shift: {}; {} pending",
        text(body, "presence"),
        text(body, "source"),
        until,
        body.get("shift").and_then(Value::as_str).unwrap_or("none"),
        body.get("pending").and_then(Value::as_i64).unwrap_or(0)
    );
    Ok(())
}

/// Revoking cannot be undone, so a person is asked; a script must say -y.
fn confirm_revoke(reference: &str) -> anyhow::Result<bool> {
    if !prompt::stdin_is_terminal() {
        return Err(
            UsageError("revoke needs -y (--yes) when stdin is not a terminal".into()).into(),
        );
    }
    Ok(prompt::confirm(&format!(
        "Revoke {reference}? Its token stops working at once and its live todos become dead letters."
    ))?)
}

fn vend_body(vend: &VendArgs) -> Value {
    let list = |items: &Vec<String>| (!items.is_empty()).then(|| items.clone());
    json!({
        "agent": vend.agent,
        "server_name": vend.server_name,
        "kind": vend.kind,
        "queues": list(&vend.queues),
        "verbs": list(&vend.verbs),
        "expires_in": vend.expires_in.map(api_duration),
        "default_lease_ttl_seconds": vend.lease_ttl,
        "webhook": vend.webhook.then_some(true),
    })
}

/// The MCP tools a session of the vended endpoint sees (`tools/list`): the
/// scope's verbs, the tools that come with them, and the self verbs every
/// session has.
pub(crate) fn agent_tools(vended: &Value) -> String {
    use crate::mcp::tools::ToolName;
    let verbs: Vec<String> = vended
        .pointer("/scope/verbs")
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let (scoped, own): (Vec<ToolName>, Vec<ToolName>) = ToolName::ALL
        .into_iter()
        .filter(|t| t.visible_with(&verbs))
        .partition(|t| !t.is_self_verb());
    let names = |tools: &[ToolName]| {
        tools
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{} tools: {}; and the self verbs {}",
        scoped.len() + own.len(),
        names(&scoped),
        names(&own)
    )
}

fn print_vended(vended: &Value) -> anyhow::Result<()> {
    let created = if flag(vended, "agent_created") {
        " (agent registered)"
    } else {
        ""
    };
    println!(
        "Vended endpoint {} for agent {}{created}.\n",
        text(vended, "slug"),
        text(vended, "agent")
    );
    print_pairs(&[
        ("MCP URL", text(vended, "mcp_url")),
        ("server name", text(vended, "server_name")),
        ("queues", joined(vended, "scope.queues")),
        ("verbs", joined(vended, "scope.verbs")),
        ("agent sees", agent_tools(vended)),
        ("expires", when_exact(vended, "expires_at", "never")),
    ]);
    let client = &vended["client"];
    println!(
        "\nToken (shown this once; store it now):\n\n    {}\n",
        text(vended, "token")
    );
    println!("Claude Code, for you only (kept out of the project's files):\n");
    println!("    {}\n", text(client, "claude_mcp_add"));
    println!(
        "  or in the project's .mcp.json (safe to commit: the token comes from the environment):\n"
    );
    for line in serde_json::to_string_pretty(&vended["mcp_json"])?.lines() {
        println!("    {line}");
    }
    println!("\n    {}\n", text(client, "export"));
    println!("  Start Claude Code so that it delivers doorbells (Claude Code 2.1.80 or later):\n");
    println!("    {}\n", text(client, "claude_launch"));
    println!("Codex, in ~/.codex/config.toml (with the export above):\n");
    for line in text(client, "codex_toml").lines() {
        println!("    {line}");
    }
    println!("\nUnattended (with the export above): one Claude Code pass over the queue,\n");
    println!("    {}\n", text(client, "claude_unattended"));
    println!("  or a run on every doorbell with `switchboard work`, for Claude Code or Codex:\n");
    println!("    {}\n", text(client, "work_claude"));
    println!("    {}", text(client, "work_codex"));
    if let Some(webhook) = vended.get("webhook") {
        println!(
            "\nWebhook URL for queue {} (shown this once):\n\n    {}",
            text(webhook, "queue"),
            text(webhook, "ingest_url")
        );
    }
    Ok(())
}

fn print_endpoints(list: &Value) {
    let mut table = Table::new(&[
        "SLUG",
        "AGENT",
        "STATE",
        "CONDITION",
        "QUEUES",
        "PENDING",
        "CLAIMED",
        "DEAD",
        "LAST SEEN",
    ]);
    for e in list["endpoints"].as_array().into_iter().flatten() {
        table.row(vec![
            text(e, "slug"),
            text(e, "agent"),
            text(e, "state"),
            text(e, "liveness.condition"),
            joined(e, "scope.queues"),
            text(e, "todos.pending"),
            text(e, "todos.claimed"),
            text(e, "todos.dead_letters"),
            when(e, "liveness.last_seen_at", "never"),
        ]);
    }
    table.print_or("No endpoints.");
    print_next_page(list);
}

fn print_oauth_clients(list: &Value) {
    let mut table = Table::new(&[
        "ID",
        "CLIENT",
        "VERIFIED",
        "CLIENT ID",
        "CONNECTED",
        "LAST USED",
    ]);
    for c in list["oauth_clients"].as_array().into_iter().flatten() {
        table.row(vec![
            text(c, "id"),
            text(c, "client_name"),
            if c["verified"] == true { "yes" } else { "no" }.to_owned(),
            text(c, "client_id"),
            when(c, "created_at", "-"),
            when(c, "last_used_at", "never"),
        ]);
    }
    table.print_or("No OAuth clients are connected.");
}

/// The endpoint's sessions on the instance that answered, one phrase each:
/// who they are (a runner is named so), streaming or not, deaf and why.
fn hearers(e: &Value) -> String {
    let rows = e["sessions"]["list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if rows.is_empty() {
        return "none on the instance that answered".to_owned();
    }
    rows.iter()
        .map(|row| {
            let client = match (row["client_name"].as_str(), row["client_version"].as_str()) {
                (Some(name), Some(version)) => format!("{name} {version}"),
                (Some(name), None) => name.to_owned(),
                _ => "unnamed client".to_owned(),
            };
            let mut traits = Vec::new();
            if row["hearer"] == "runner" {
                traits.push("runner".to_owned());
            }
            traits.push(
                if row["streaming"] == true {
                    "streaming"
                } else {
                    "no stream"
                }
                .to_owned(),
            );
            if let Some(reason) = row["deaf_reason"].as_str() {
                traits.push(format!("deaf: {reason}"));
            }
            format!(
                "{}… {client} ({})",
                text(row, "id_prefix"),
                traits.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The endpoint's notify hooks, when the caller read them: url and state
/// (an enabled hook is rung instead of the sessions).
fn hooks(e: &Value) -> String {
    let Some(hooks) = e["hooks"].as_array() else {
        return "-".to_owned();
    };
    if hooks.is_empty() {
        return "none".to_owned();
    }
    hooks
        .iter()
        .map(|h| {
            let failures = h["consecutive_failures"].as_i64().unwrap_or(0);
            let state = text(h, "state");
            if failures > 0 {
                format!(
                    "{} {} ({state}, {failures} failures in a row)",
                    text(h, "id"),
                    text(h, "url")
                )
            } else {
                format!("{} {} ({state})", text(h, "id"), text(h, "url"))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn print_endpoint(e: &Value) -> anyhow::Result<()> {
    let lease = match e["default_lease_ttl_seconds"].as_i64() {
        Some(secs) => format!("{secs}s"),
        None => format!(
            "{}s (server default)",
            text(e, "effective_lease_ttl_seconds")
        ),
    };
    let mut pairs = vec![
        ("slug", text(e, "slug")),
        ("id", text(e, "id")),
        (
            "agent",
            format!("{} ({})", text(e, "agent"), text(e, "agent_kind")),
        ),
        ("state", text(e, "state")),
        ("condition", text(e, "liveness.condition")),
        ("hearers", hearers(e)),
        ("MCP URL", text(e, "mcp_url")),
        // Only the first characters, to recognise a token; never the token.
        ("token", format!("{}…", text(e, "credential_prefix"))),
        ("queues", joined(e, "scope.queues")),
        ("verbs", joined(e, "scope.verbs")),
        ("lease", lease),
        ("last seen", when_exact(e, "liveness.last_seen_at", "never")),
        (
            "last contact",
            when_exact(e, "liveness.last_contact_at", "-"),
        ),
        ("stale after", when_exact(e, "liveness.stale_after", "-")),
        ("note", text(e, "liveness.note")),
        (
            "todos",
            format!(
                "{} pending, {} claimed, {} dead letters",
                text(e, "todos.pending"),
                text(e, "todos.claimed"),
                text(e, "todos.dead_letters")
            ),
        ),
        ("working on", text(e, "todos.working_on")),
        ("created", when_exact(e, "created_at", "-")),
        ("expires", when_exact(e, "expires_at", "never")),
    ];
    if e.get("hooks").is_some() {
        // Right after the sessions: both are the endpoint's hearers.
        pairs.insert(6, ("hooks", hooks(e)));
    }
    if e["revoked_at"].is_string() {
        pairs.push(("revoked", when_exact(e, "revoked_at", "-")));
    }
    print_pairs(&pairs);
    Ok(())
}
