//! `webhook create | list | rotate | delete`.

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::cli::args::ClientArgs;
use crate::cli::output::{Table, emit, print_pairs, text, when};

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
    }
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
    let mut table = Table::new(&["ID", "QUEUE", "SIGNED", "CREATED", "ROTATED"]);
    for w in list["webhooks"].as_array().into_iter().flatten() {
        table.row(vec![
            text(w, "id"),
            text(w, "queue"),
            text(w, "signed"),
            when(w, "created_at", "-"),
            when(w, "rotated_at", "never"),
        ]);
    }
    table.print_or("No webhooks.");
}
