//! `hook add | list | test | enable | rm`: an endpoint's notify hooks.

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::cli::args::ClientArgs;
use crate::cli::output::{Table, emit, print_pairs, text, when};

#[derive(Debug, Args)]
pub struct HookArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(subcommand)]
    pub command: HookCommand,
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Add a URL that gets a signed POST whenever the endpoint is rung;
    /// prints its signing secret once.
    Add {
        /// Endpoint slug or id.
        reference: String,
        /// An http(s) URL, without a user name or password.
        #[arg(value_name = "URL")]
        target: String,
    },
    /// An endpoint's hooks, their state and last deliveries.
    List { reference: String },
    /// Send a test delivery now and show how it went.
    Test { id: String },
    /// Enable a hook again (after it was disabled by failures).
    Enable { id: String },
    /// Delete a hook.
    Rm { id: String },
}

pub(crate) async fn run(args: HookArgs) -> anyhow::Result<()> {
    let client = args.client.connect()?;
    let json = args.client.json;
    match args.command {
        HookCommand::Add { reference, target } => {
            let response = client
                .post(
                    &["endpoints", &reference, "hooks"],
                    &json!({ "url": target }),
                )
                .await?;
            emit(json, &response, print_added)
        }
        HookCommand::List { reference } => {
            let response = client.get(&["endpoints", &reference, "hooks"], &[]).await?;
            emit(json, &response, |list| {
                print_hooks(list);
                Ok(())
            })
        }
        HookCommand::Test { id } => {
            let response = client.post_action(&["hooks", &id, "test"]).await?;
            emit(json, &response, |t| {
                print_pairs(&[
                    ("outcome", text(t, "outcome")),
                    ("status", text(t, "status")),
                    ("error", text(t, "error")),
                    ("duration", format!("{} ms", text(t, "duration_ms"))),
                ]);
                if t["outcome"] != "ok" {
                    anyhow::bail!("the test delivery was not received");
                }
                Ok(())
            })
        }
        HookCommand::Enable { id } => {
            let response = client.post_action(&["hooks", &id, "enable"]).await?;
            emit(json, &response, |h| {
                println!("Hook {} is {}.", text(h, "id"), text(h, "state"));
                Ok(())
            })
        }
        HookCommand::Rm { id } => {
            let response = client.delete(&["hooks", &id]).await?;
            emit(json, &response, |_| {
                println!("Deleted hook {id}.");
                Ok(())
            })
        }
    }
}

/// A hook just added: its secret exists only in this answer.
fn print_added(hook: &Value) -> anyhow::Result<()> {
    print_pairs(&[("hook", text(hook, "id")), ("url", text(hook, "url"))]);
    println!(
        "\nSigning secret (shown this once; store it now):\n\n    {}\n",
        text(hook, "secret")
    );
    println!(
        "Verify webhook-signature as Standard Webhooks: HMAC-SHA256 keyed with the base64-decoded \
         part after whsec_, over \"<webhook-id>.<webhook-timestamp>.<body>\"."
    );
    Ok(())
}

fn print_hooks(list: &Value) {
    let mut table = Table::new(&["ID", "URL", "STATE", "FAILURES", "LAST DELIVERY"]);
    for h in list["hooks"].as_array().into_iter().flatten() {
        let last = h["last_deliveries"]
            .as_array()
            .and_then(|d| d.first())
            .map(|d| {
                let result = match d["status"].as_i64() {
                    Some(status) => status.to_string(),
                    None => text(d, "error"),
                };
                format!(
                    "{} {} {} ({})",
                    when(d, "at", "-"),
                    text(d, "type"),
                    text(d, "outcome"),
                    result
                )
            })
            .unwrap_or_else(|| "never".into());
        table.row(vec![
            text(h, "id"),
            text(h, "url"),
            text(h, "state"),
            text(h, "consecutive_failures"),
            last,
        ]);
    }
    table.print_or("No hooks.");
}
