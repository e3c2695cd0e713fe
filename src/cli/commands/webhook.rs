//! `webhook create | list | rotate | delete | deliveries | senders`.

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
