//! `todo push | list | show | event | retry | release`.

use std::io::Read;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::cli::args::ClientArgs;
use crate::cli::client::ApiClient;
use crate::cli::output::{
    Table, clip, emit, flag, lookup, print_block, print_next_page, print_pairs, text, when,
    when_exact,
};

#[derive(Debug, Args)]
pub struct TodoArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(subcommand)]
    pub command: TodoCommand,
}

#[derive(Debug, Subcommand)]
pub enum TodoCommand {
    /// Put a todo on an endpoint's queue.
    Push(PushArgs),
    /// Your todos, newest first.
    List(ListArgs),
    /// A todo with its attempt history.
    Show { id: String },
    /// The intake event that created a todo (who, how, the whole body).
    Event { id: String },
    /// Send a failed or dead-lettered todo back to pending, attempts reset.
    Retry { id: String },
    /// Put a claimed todo back to pending.
    Release { id: String },
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// Endpoint slug or id.
    pub reference: String,
    /// One line, at most 200 bytes.
    pub title: String,
    /// The queue (may be omitted when the endpoint has one).
    #[arg(short = 'q', long)]
    pub queue: Option<String>,
    /// Free-form kind (default operator).
    #[arg(long)]
    pub kind: Option<String>,
    /// JSON payload: inline, @FILE, or - for stdin.
    #[arg(long, value_name = "JSON|@FILE|-")]
    pub payload: Option<String>,
    /// Idempotency key: a live todo with the same key is returned instead.
    #[arg(long)]
    pub key: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this endpoint's (slug or id).
    #[arg(long)]
    pub endpoint: Option<String>,
    #[arg(short = 'q', long)]
    pub queue: Option<String>,
    /// pending, claimed, done or failed.
    #[arg(long)]
    pub state: Option<String>,
    /// Only dead letters.
    #[arg(long)]
    pub dead_letter: bool,
    /// At most this many (1–200, server default 50).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Continue after a previous page (its next_cursor).
    #[arg(long)]
    pub cursor: Option<String>,
}

pub(crate) async fn run(args: TodoArgs) -> anyhow::Result<()> {
    let json = args.client.json;
    // Read the payload first: a bad one should fail before any request.
    let payload = match &args.command {
        TodoCommand::Push(push) => push.payload.as_deref().map(read_payload).transpose()?,
        _ => None,
    };
    let client = args.client.connect()?;
    match args.command {
        TodoCommand::Push(push) => {
            let body = json!({
                "title": push.title,
                "queue": push.queue,
                "kind": push.kind,
                "payload": payload,
                "key": push.key,
            });
            let response = client
                .post(&["endpoints", &push.reference, "todos"], &body)
                .await?;
            emit(json, &response, |todo| {
                if flag(todo, "created") {
                    println!(
                        "Pushed {} to {} queue {} ({}).",
                        text(todo, "id"),
                        text(todo, "endpoint"),
                        text(todo, "queue"),
                        text(todo, "state")
                    );
                } else {
                    println!(
                        "The key matched the live todo {} ({}); nothing was created.",
                        text(todo, "id"),
                        text(todo, "state")
                    );
                }
                Ok(())
            })
        }
        TodoCommand::List(list) => {
            let response = client.get(&["todos"], &list_query(list)).await?;
            emit(json, &response, |body| {
                print_todos(body);
                Ok(())
            })
        }
        TodoCommand::Show { id } => {
            let response = client.get(&["todos", &id], &[]).await?;
            emit(json, &response, print_todo)
        }
        TodoCommand::Event { id } => {
            let response = client.get(&["todos", &id, "event"], &[]).await?;
            emit(json, &response, print_event)
        }
        TodoCommand::Retry { id } => act(&client, json, &id, "retry").await,
        TodoCommand::Release { id } => act(&client, json, &id, "release").await,
    }
}

/// A human action on a todo (`retry`, `release`); answers with the todo.
async fn act(client: &ApiClient, json: bool, id: &str, action: &str) -> anyhow::Result<()> {
    let response = client.post_action(&["todos", id, action]).await?;
    emit(json, &response, |todo| {
        println!(
            "{} is {} (attempt {} of {}).",
            text(todo, "id"),
            text(todo, "state"),
            text(todo, "attempt"),
            text(todo, "max_attempts")
        );
        Ok(())
    })
}

/// `--payload`: inline JSON, `@FILE`, or `-` for stdin; it must be JSON.
fn read_payload(arg: &str) -> anyhow::Result<Value> {
    let (source, raw) = if arg == "-" {
        let mut raw = String::new();
        std::io::stdin()
            .read_to_string(&mut raw)
            .context("reading the payload from stdin")?;
        ("stdin".to_owned(), raw)
    } else if let Some(path) = arg.strip_prefix('@') {
        let raw = std::fs::read_to_string(path)
            .with_context(|| format!("reading the payload file {path}"))?;
        (path.to_owned(), raw)
    } else {
        ("--payload".to_owned(), arg.to_owned())
    };
    serde_json::from_str(&raw).with_context(|| format!("the payload from {source} is not JSON"))
}

fn list_query(list: ListArgs) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    let optional = [
        ("endpoint", list.endpoint),
        ("queue", list.queue),
        ("state", list.state),
        ("limit", list.limit.map(|n| n.to_string())),
        ("cursor", list.cursor),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            query.push((key, value));
        }
    }
    if list.dead_letter {
        query.push(("dead_letter", "true".to_owned()));
    }
    query
}

fn print_todos(list: &Value) {
    let mut table = Table::new(&[
        "ID", "STATE", "DEAD", "QUEUE", "ATTEMPT", "CREATED", "TITLE",
    ]);
    for todo in list["todos"].as_array().into_iter().flatten() {
        table.row(vec![
            text(todo, "id"),
            text(todo, "state"),
            if flag(todo, "dead_letter") {
                "dead".into()
            } else {
                String::new()
            },
            text(todo, "queue"),
            format!("{}/{}", text(todo, "attempt"), text(todo, "max_attempts")),
            when(todo, "created_at", "-"),
            clip(&text(todo, "title"), 60),
        ]);
    }
    table.print_or("No todos.");
    print_next_page(list);
}

fn print_todo(todo: &Value) -> anyhow::Result<()> {
    print_pairs(&[
        ("id", text(todo, "id")),
        ("title", text(todo, "title")),
        ("endpoint", text(todo, "endpoint_id")),
        ("queue", text(todo, "queue")),
        ("kind", text(todo, "kind")),
        ("source", text(todo, "source")),
        ("state", text(todo, "state")),
        ("dead letter", text(todo, "dead_letter")),
        ("owner", text(todo, "owner")),
        (
            "attempt",
            format!(
                "{} of {} ({} in all)",
                text(todo, "attempt"),
                text(todo, "max_attempts"),
                text(todo, "attempts_total")
            ),
        ),
        ("lease expires", when_exact(todo, "lease_expires_at", "-")),
        ("next retry", when_exact(todo, "next_retry_at", "-")),
        ("key", text(todo, "idempotency_key")),
        ("note", text(todo, "note")),
        ("created", when_exact(todo, "created_at", "-")),
        ("updated", when_exact(todo, "updated_at", "-")),
        ("completed", when_exact(todo, "completed_at", "-")),
    ]);
    for key in ["payload", "result"] {
        if let Some(value) = lookup(todo, key).filter(|v| !v.is_null()) {
            print_block(key, value);
        }
    }
    let attempts = todo["attempts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if !attempts.is_empty() {
        println!("attempts (newest first):");
        let mut table = Table::new(&[
            "  #", "CLAIMANT", "CLAIMED", "ENDED", "OUTCOME", "DIED", "SUMMARY",
        ]);
        for a in attempts {
            table.row(vec![
                format!("  {}", text(a, "attempt")),
                text(a, "claimant"),
                when(a, "claimed_at", "-"),
                when(a, "ended_at", "-"),
                text(a, "outcome"),
                if flag(a, "died") {
                    "died".into()
                } else {
                    String::new()
                },
                clip(&text(a, "summary"), 50),
            ]);
        }
        println!("{}", table.render());
    }
    Ok(())
}

fn print_event(event: &Value) -> anyhow::Result<()> {
    print_pairs(&[
        ("id", text(event, "id")),
        ("todo", text(event, "todo_id")),
        ("trust", text(event, "trust_mode")),
        ("actor", text(event, "actor")),
        ("webhook", text(event, "webhook_id")),
        ("received", when_exact(event, "received_at", "-")),
        ("content type", text(event, "content_type")),
        ("size", format!("{} bytes", text(event, "body_size"))),
    ]);
    print_block("headers", &event["headers"]);
    match event["body"].as_str() {
        Some(body) => println!("body:\n{body}"),
        None => println!("body (base64):\n{}", text(event, "body_base64")),
    }
    Ok(())
}
