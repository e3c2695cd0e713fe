//! `delivery show | release | discard | replay`: one webhook delivery
//! (`webhook deliveries ID` lists them).

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::cli::args::ClientArgs;
use crate::cli::output::{emit, print_block, print_pairs, text, when_exact};

#[derive(Debug, Args)]
pub struct DeliveryArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(subcommand)]
    pub command: DeliveryCommand,
}

#[derive(Debug, Subcommand)]
pub enum DeliveryCommand {
    /// A delivery: its decision, verified envelope, kept headers and body.
    Show { id: String },
    /// Release a quarantined delivery: its todo is created now and rings.
    Release { id: String },
    /// Discard a quarantined delivery: no todo; it stays in the history.
    Discard { id: String },
    /// Run a stored delivery again through the webhook's current senders;
    /// the outcome is a new delivery.
    Replay {
        id: String,
        /// Use a fresh idempotency key (else a live todo of the original key
        /// makes the replay a duplicate).
        #[arg(long)]
        new_key: bool,
    },
}

pub(crate) async fn run(args: DeliveryArgs) -> anyhow::Result<()> {
    let client = args.client.connect()?;
    let json = args.client.json;
    match args.command {
        DeliveryCommand::Show { id } => {
            let response = client.get(&["deliveries", &id], &[]).await?;
            emit(json, &response, print_delivery)
        }
        DeliveryCommand::Release { id } => {
            let response = client.post_action(&["deliveries", &id, "release"]).await?;
            emit(json, &response, print_decided)
        }
        DeliveryCommand::Discard { id } => {
            let response = client.post_action(&["deliveries", &id, "discard"]).await?;
            emit(json, &response, |d| {
                println!("Delivery {} is {}.", text(d, "id"), text(d, "decision"));
                Ok(())
            })
        }
        DeliveryCommand::Replay { id, new_key } => {
            let response = client
                .post(
                    &["deliveries", &id, "replay"],
                    &json!({ "new_key": new_key }),
                )
                .await?;
            emit(json, &response, print_decided)
        }
    }
}

fn print_delivery(d: &Value) -> anyhow::Result<()> {
    print_pairs(&[
        ("id", text(d, "id")),
        ("webhook", text(d, "webhook_id")),
        ("received", when_exact(d, "received_at", "-")),
        ("decision", text(d, "decision")),
        ("reason", text(d, "reason")),
        ("title", text(d, "title")),
        ("todo", text(d, "todo_id")),
        ("replay of", text(d, "replay_of")),
        ("settled", when_exact(d, "settled_at", "-")),
    ]);
    print_block("envelope", &d["envelope"]);
    if let Some(headers) = d.get("headers") {
        print_block("headers", headers);
    }
    if let Some(body) = d["body"].as_str() {
        println!("body:\n{body}");
    } else if let Some(body) = d["body_base64"].as_str() {
        println!("body (base64):\n{body}");
    }
    Ok(())
}

/// A release or replay: the delivery it recorded and its todo, if any.
fn print_decided(d: &Value) -> anyhow::Result<()> {
    let todo = match d["todo"]["id"].as_str() {
        Some(id) if d["todo"]["created"] == true => format!("{id} (created)"),
        Some(id) => format!("{id} (already there)"),
        None => "none".to_owned(),
    };
    print_pairs(&[
        ("delivery", text(d, "delivery.id")),
        ("decision", text(d, "delivery.decision")),
        ("todo", todo),
    ]);
    Ok(())
}
