//! `token list | create | revoke`: the caller's own API tokens, through the
//! API (the local `admin token create` makes tokens for anyone).

use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::cli::args::{ClientArgs, api_duration, lifetime};
use crate::cli::output::{Table, emit, print_next_page, print_pairs, text, when};

#[derive(Debug, Args)]
pub struct TokenArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Your API tokens (only their first characters), newest first.
    List(ListArgs),
    /// Create an API token for yourself; it is printed this once.
    Create(CreateArgs),
    /// Revoke one of your tokens (it may be the one in use).
    Revoke { id: String },
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
pub struct CreateArgs {
    /// A name to recognise the token by.
    #[arg(long)]
    pub label: Option<String>,
    /// Lifetime (30d, 12h, 90m) or the RFC 3339 time it ends; default: no expiry.
    #[arg(long, value_parser = lifetime)]
    pub expires_in: Option<Duration>,
}

pub(crate) async fn run(args: TokenArgs) -> anyhow::Result<()> {
    let client = args.client.connect()?;
    let json = args.client.json;
    match args.command {
        TokenCommand::List(list) => {
            let mut query = Vec::new();
            if let Some(limit) = list.limit {
                query.push(("limit", limit.to_string()));
            }
            if let Some(cursor) = list.cursor {
                query.push(("cursor", cursor));
            }
            let response = client.get(&["tokens"], &query).await?;
            emit(json, &response, |list| {
                print_tokens(list);
                Ok(())
            })
        }
        TokenCommand::Create(create) => {
            let body = json!({
                "label": create.label,
                "expires_in": create.expires_in.map(api_duration),
            });
            let response = client.post(&["tokens"], &body).await?;
            emit(json, &response, |token| {
                print_pairs(&[
                    ("token id", text(token, "id")),
                    ("label", text(token, "label")),
                    ("expires", when(token, "expires_at", "never")),
                ]);
                println!(
                    "\nThe token is shown this once; store it now:\n\n    {}\n",
                    text(token, "token")
                );
                Ok(())
            })
        }
        TokenCommand::Revoke { id } => {
            let response = client.delete(&["tokens", &id]).await?;
            emit(json, &response, |_| {
                println!("Revoked token {id}.");
                Ok(())
            })
        }
    }
}

fn print_tokens(list: &Value) {
    let mut table = Table::new(&[
        "ID",
        "PREFIX",
        "LABEL",
        "CREATED",
        "EXPIRES",
        "LAST USED",
        "REVOKED",
    ]);
    for t in list["tokens"].as_array().into_iter().flatten() {
        table.row(vec![
            text(t, "id"),
            format!("{}…", text(t, "prefix")),
            text(t, "label"),
            when(t, "created_at", "-"),
            when(t, "expires_at", "never"),
            when(t, "last_used_at", "never"),
            when(t, "revoked_at", "-"),
        ]);
    }
    table.print_or("No tokens.");
    print_next_page(list);
}
