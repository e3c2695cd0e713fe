//! `webhook create | list | rotate | delete | deliveries | senders | rules |
//! rules-test | replay`.

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::cli::args::ClientArgs;
use crate::cli::output::{Table, clip, emit, print_next_page, print_pairs, text, when};

#[derive(Debug, Args)]
pub struct WebhookArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(subcommand)]
    pub command: WebhookCommand,
}

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Create a webhook that turns deliveries into todos; prints its URL once.
    Create(CreateArgs),
    /// An endpoint's webhooks.
    List { reference: String },
    /// Issue a new URL (and secret); the old ones stop working at once.
    Rotate { id: String },
    /// Delete a webhook; its URL stops working.
    Delete { id: String },
    /// A webhook's deliveries, newest first: every decision, refused ones too.
    Deliveries(DeliveriesArgs),
    /// Whom a webhook trusts: `everyone`, or logins (others are quarantined).
    Senders(SendersArgs),
    /// A webhook's routing rules; with --set FILE, replaces them.
    Rules(RulesArgs),
    /// Dry-runs the saved (or --file) rules on a stored delivery; stores nothing.
    RulesTest(RulesTestArgs),
    /// Re-runs stored deliveries (at most 1000, newest first) through the
    /// current senders and rules.
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    /// Webhook id (wh_…).
    pub id: String,
    /// A JSON file `{"rules": [{"if": "<jq>", "then": ACTION}…], "default"?,
    /// "on_error"?}` (`-` reads standard input).
    #[arg(long, value_name = "FILE")]
    pub set: Option<String>,
}

#[derive(Debug, Args)]
pub struct RulesTestArgs {
    /// Webhook id (wh_…).
    pub id: String,
    /// The stored delivery to evaluate (dl_…).
    #[arg(long)]
    pub delivery: String,
    /// Candidate rules (as for `rules --set`) instead of the saved ones.
    #[arg(long, value_name = "FILE")]
    pub file: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Webhook id (wh_…).
    pub id: String,
    /// Only this decision (dropped, quarantined…).
    #[arg(long)]
    pub decision: Option<String>,
    /// Only this forge event.
    #[arg(long)]
    pub event: Option<String>,
    /// Only this sender's login.
    #[arg(long)]
    pub sender: Option<String>,
    /// Fresh idempotency keys (a dropped delivery's key stays spent otherwise).
    #[arg(long)]
    pub new_key: bool,
}

#[derive(Debug, Args)]
pub struct DeliveriesArgs {
    /// Webhook id (wh_…).
    pub id: String,
    /// Only this decision: accepted, duplicate, dropped, quarantined,
    /// refused, released or discarded.
    #[arg(long)]
    pub decision: Option<String>,
    /// Only this forge event (issues, pull_request…).
    #[arg(long)]
    pub event: Option<String>,
    /// Only this sender's login.
    #[arg(long)]
    pub sender: Option<String>,
    /// At most this many (1–200, server default 50).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Continue after a previous page (its next_cursor).
    #[arg(long)]
    pub cursor: Option<String>,
}

#[derive(Debug, Args)]
pub struct SendersArgs {
    /// Webhook id (wh_…).
    pub id: String,
    /// `everyone`, or one or more logins to trust (case-insensitive).
    #[arg(required = true, value_name = "everyone | LOGIN…")]
    pub trust: Vec<String>,
    /// With logins: which identity must be trusted (default sender).
    #[arg(long = "match", value_name = "sender|author|both")]
    pub by: Option<String>,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Endpoint slug or id.
    pub reference: String,
    /// The queue its todos go to (may be omitted when the endpoint has one).
    #[arg(short = 'q', long)]
    pub queue: Option<String>,
    /// Require an HMAC-SHA256 signature (X-Hub-Signature-256); prints the secret once.
    #[arg(long)]
    pub signed: bool,
}

pub(crate) async fn run(args: WebhookArgs) -> anyhow::Result<()> {
    let client = args.client.connect()?;
    let json = args.client.json;
    match args.command {
        WebhookCommand::Create(create) => {
            let body = json!({ "queue": create.queue, "signed": create.signed });
            let response = client
                .post(&["endpoints", &create.reference, "webhooks"], &body)
                .await?;
            emit(json, &response, print_issued)
        }
        WebhookCommand::List { reference } => {
            let response = client
                .get(&["endpoints", &reference, "webhooks"], &[])
                .await?;
            emit(json, &response, |list| {
                print_webhooks(list);
                Ok(())
            })
        }
        WebhookCommand::Rotate { id } => {
            let response = client.post_action(&["webhooks", &id, "rotate"]).await?;
            emit(json, &response, print_issued)
        }
        WebhookCommand::Delete { id } => {
            let response = client.delete(&["webhooks", &id]).await?;
            emit(json, &response, |_| {
                println!("Deleted webhook {id}.");
                Ok(())
            })
        }
        WebhookCommand::Deliveries(list) => {
            let query: Vec<(&str, String)> = [
                ("decision", list.decision),
                ("event", list.event),
                ("sender", list.sender),
                ("limit", list.limit.map(|n| n.to_string())),
                ("cursor", list.cursor),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
            let response = client
                .get(&["webhooks", &list.id, "deliveries"], &query)
                .await?;
            emit(json, &response, |list| {
                print_deliveries(list);
                Ok(())
            })
        }
        WebhookCommand::Senders(senders) => {
            let body = senders_body(senders.trust, senders.by)?;
            let response = client
                .put(&["webhooks", &senders.id, "senders"], &body)
                .await?;
            emit(json, &response, |w| {
                println!(
                    "Webhook {} trusts {}.",
                    text(w, "id"),
                    trusted(&w["senders"])
                );
                Ok(())
            })
        }
        WebhookCommand::Rules(rules) => {
            let response = match &rules.set {
                Some(file) => {
                    client
                        .put(&["webhooks", &rules.id, "rules"], &read_rules(file)?)
                        .await?
                }
                None => client.get(&["webhooks", &rules.id, "rules"], &[]).await?,
            };
            emit(json, &response, |r| {
                print_rules(r);
                Ok(())
            })
        }
        WebhookCommand::RulesTest(test) => {
            let mut body = match &test.file {
                Some(file) => read_rules(file)?,
                None => json!({}),
            };
            body["delivery_id"] = json!(test.delivery);
            let response = client
                .post(&["webhooks", &test.id, "rules", "test"], &body)
                .await?;
            emit(json, &response, |run| {
                print_dry_run(run);
                Ok(())
            })
        }
        WebhookCommand::Replay(replay) => {
            let body = json!({
                "decision": replay.decision,
                "event": replay.event,
                "sender": replay.sender,
                "new_key": replay.new_key,
            });
            let response = client
                .post(&["webhooks", &replay.id, "deliveries", "replay"], &body)
                .await?;
            emit(json, &response, |batch| {
                println!(
                    "Replayed {} deliveries ({} skipped: refused, never verified).",
                    text(batch, "replayed"),
                    text(batch, "skipped")
                );
                let mut table =
                    Table::new(&["NEW DELIVERY", "REPLAYS", "DECISION", "RULE", "TODO"]);
                for d in batch["deliveries"].as_array().into_iter().flatten() {
                    table.row(vec![
                        text(d, "delivery.id"),
                        text(d, "delivery.replay_of"),
                        text(d, "delivery.decision"),
                        text(d, "delivery.rule"),
                        text(d, "todo.id"),
                    ]);
                }
                table.print_or("Nothing matched.");
                Ok(())
            })
        }
    }
}

/// A rule set from a JSON file (`-`: standard input).
fn read_rules(file: &str) -> anyhow::Result<Value> {
    let text = if file == "-" {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("cannot read {file}: {e}"))?
    };
    let value: Value =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{file} is not JSON: {e}"))?;
    if !value.is_object() {
        anyhow::bail!(
            "{file} must hold an object: {{\"rules\": [...], \"default\"?, \"on_error\"?}}"
        );
    }
    Ok(value)
}

fn action(a: &Value) -> String {
    if let Some(q) = a["queue"].as_str() {
        format!("queue {q}")
    } else if a["drop"] == json!(true) {
        "drop".to_owned()
    } else if a["quarantine"] == json!(true) {
        "quarantine".to_owned()
    } else {
        "the webhook's queue".to_owned()
    }
}

fn print_rules(r: &Value) {
    let mut table = Table::new(&["RULE", "IF", "THEN"]);
    for (i, rule) in r["rules"].as_array().into_iter().flatten().enumerate() {
        table.row(vec![
            format!("rules[{i}]"),
            clip(&text(rule, "if"), 70),
            action(&rule["then"]),
        ]);
    }
    table.print_or("No rules.");
    println!("default: {}", action(&r["default"]));
    println!("on error: {}", text(r, "on_error"));
}

fn print_dry_run(run: &Value) {
    let mut table = Table::new(&["RULE", "OUTCOME", "ERROR"]);
    for step in run["trace"].as_array().into_iter().flatten() {
        table.row(vec![
            text(step, "rule"),
            text(step, "outcome"),
            step["error"].as_str().unwrap_or("").to_owned(),
        ]);
    }
    table.print_or("No rule ran.");
    let decided = match run["rule"].as_str() {
        Some(rule) => format!(" by {rule}"),
        None => format!(" ({})", text(run, "by")),
    };
    match run["queue"].as_str() {
        Some(queue) => println!(
            "Decision: {} on queue {queue}{decided}.",
            text(run, "decision")
        ),
        None => println!("Decision: {}{decided}.", text(run, "decision")),
    }
}

/// `everyone` alone, or logins (with an optional --match).
fn senders_body(trust: Vec<String>, by: Option<String>) -> anyhow::Result<Value> {
    if trust.iter().any(|t| t == "everyone") {
        if trust.len() > 1 || by.is_some() {
            anyhow::bail!("`everyone` stands alone: give it, or logins (with --match)");
        }
        return Ok(json!({ "trust": "everyone" }));
    }
    Ok(match by {
        Some(by) => json!({ "trust": trust, "match": by }),
        None => json!({ "trust": trust }),
    })
}

/// `everyone`, or `alice, bob (by sender)`.
fn trusted(senders: &Value) -> String {
    match &senders["trust"] {
        Value::Array(logins) => {
            let logins: Vec<&str> = logins.iter().filter_map(Value::as_str).collect();
            format!("{} (by {})", logins.join(", "), text(senders, "match"))
        }
        other => other.as_str().unwrap_or("-").to_owned(),
    }
}

fn print_deliveries(list: &Value) {
    let mut table = Table::new(&[
        "ID", "RECEIVED", "DECISION", "EVENT", "SENDER", "TODO", "TITLE",
    ]);
    for d in list["deliveries"].as_array().into_iter().flatten() {
        let decision = match d["reason"].as_str() {
            Some(reason) => format!("{} ({reason})", text(d, "decision")),
            None => text(d, "decision"),
        };
        let event = match d["envelope"]["action"].as_str() {
            Some(action) => format!("{}.{action}", text(d, "envelope.event")),
            None => text(d, "envelope.event"),
        };
        table.row(vec![
            text(d, "id"),
            when(d, "received_at", "-"),
            decision,
            event,
            text(d, "envelope.sender"),
            text(d, "todo_id"),
            clip(&text(d, "title"), 50),
        ]);
    }
    table.print_or("No deliveries.");
    print_next_page(list);
}

/// A created or rotated webhook: its URL and secret exist only in this answer.
fn print_issued(webhook: &Value) -> anyhow::Result<()> {
    print_pairs(&[
        ("webhook", text(webhook, "id")),
        ("queue", text(webhook, "queue")),
        ("signed", text(webhook, "signed")),
    ]);
    println!(
        "\nIngest URL (shown this once; store it now):\n\n    {}\n",
        text(webhook, "ingest_url")
    );
    if let Some(secret) = webhook["signing_secret"].as_str() {
        println!("Signing secret (shown this once):\n\n    {secret}\n");
    }
    Ok(())
}

fn print_webhooks(list: &Value) {
    let mut table = Table::new(&["ID", "QUEUE", "SIGNED", "TRUSTS", "CREATED", "ROTATED"]);
    for w in list["webhooks"].as_array().into_iter().flatten() {
        table.row(vec![
            text(w, "id"),
            text(w, "queue"),
            text(w, "signed"),
            trusted(&w["senders"]),
            when(w, "created_at", "-"),
            when(w, "rotated_at", "never"),
        ]);
    }
    table.print_or("No webhooks.");
}
