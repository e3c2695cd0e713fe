//! `todo push | list | show | event | retry | release | cancel`, and the bulk
//! `todo retry --all` / `todo cancel --all` with the list's filters.

use std::io::Read;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::cli::UsageError;
use crate::cli::args::ClientArgs;
use crate::cli::client::{ApiClient, ApiResponse};
use crate::cli::output::{
    Table, clip, emit, flag, lookup, print_block, print_next_page, print_pairs, text, when,
    when_exact,
};
use crate::cli::prompt;

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
    /// Send a failed, dead-lettered or cancelled todo back to pending,
    /// attempts reset; or, with --all, every failed todo matching the filters.
    Retry(BulkArgs),
    /// Put a claimed todo back to pending.
    Release { id: String },
    /// Change a live todo's priority (higher is claimed first).
    Priority {
        id: String,
        #[arg(allow_hyphen_values = true)]
        priority: i64,
    },
    /// Cancel a pending, claimed or waiting todo (terminal; its holder's next
    /// call is refused); or, with --all, every such todo matching the filters.
    Cancel(BulkArgs),
}

/// One todo by id, or `--all` of those matching the filters.
#[derive(Debug, Args)]
pub struct BulkArgs {
    /// The todo's id.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub id: Option<String>,
    /// Every todo of yours matching the filters (in batches of 1 000).
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Do not ask for confirmation (required with --all when stdin is not a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,
}

/// The filters `todo list`, `todo retry --all` and `todo cancel --all` share.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Only this endpoint's (slug or id).
    #[arg(long)]
    pub endpoint: Option<String>,
    #[arg(short = 'q', long)]
    pub queue: Option<String>,
    /// pending, claimed, done, failed or cancelled.
    #[arg(long)]
    pub state: Option<String>,
    /// Only dead letters.
    #[arg(long)]
    pub dead_letter: bool,
    /// Only this kind (exactly).
    #[arg(long)]
    pub kind: Option<String>,
    /// Only this source (exactly).
    #[arg(long)]
    pub source: Option<String>,
    /// Title contains this text (literal, ASCII case-insensitive).
    #[arg(long, value_name = "TEXT")]
    pub search: Option<String>,
}

impl FilterArgs {
    fn is_empty(&self) -> bool {
        self.endpoint.is_none()
            && self.queue.is_none()
            && self.state.is_none()
            && !self.dead_letter
            && self.kind.is_none()
            && self.source.is_none()
            && self.search.is_none()
    }

    /// As query parameters of `GET /api/v1/todos`.
    fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        let optional = [
            ("endpoint", &self.endpoint),
            ("queue", &self.queue),
            ("state", &self.state),
            ("kind", &self.kind),
            ("source", &self.source),
            ("q", &self.search),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                query.push((key, value.clone()));
            }
        }
        if self.dead_letter {
            query.push(("dead_letter", "true".to_owned()));
        }
        query
    }

    /// As the body of a bulk retry or cancel.
    fn body(&self) -> Value {
        let mut body = serde_json::Map::new();
        for (key, value) in self.query() {
            let value = if key == "dead_letter" {
                Value::Bool(true)
            } else {
                Value::String(value)
            };
            body.insert(key.to_owned(), value);
        }
        Value::Object(body)
    }

    /// `queue inbox, kind deploy`, for the confirmation question.
    fn describe(&self) -> String {
        if self.is_empty() {
            return "all your todos".to_owned();
        }
        let parts: Vec<String> = self
            .query()
            .into_iter()
            .map(|(key, value)| match key {
                "dead_letter" => "dead letters".to_owned(),
                "q" => format!("title containing {value:?}"),
                _ => format!("{key} {value}"),
            })
            .collect();
        format!("your todos with {}", parts.join(", "))
    }
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
    /// Higher is claimed first (default 0; negative for later).
    #[arg(long, allow_hyphen_values = true)]
    pub priority: Option<i64>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
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
    // Ask before connecting: a refusal should not depend on the server.
    if let TodoCommand::Retry(bulk) | TodoCommand::Cancel(bulk) = &args.command {
        let action = match &args.command {
            TodoCommand::Retry(_) => BulkAction::Retry,
            _ => BulkAction::Cancel,
        };
        if bulk.id.is_some() && !bulk.filter.is_empty() {
            return Err(UsageError(
                "filters go with --all; to act on one todo give only its id".into(),
            )
            .into());
        }
        if bulk.all && !bulk.yes && !confirm_bulk(action, &bulk.filter)? {
            println!("Nothing was {}.", action.done());
            return Ok(());
        }
    }
    let client = args.client.connect()?;
    match args.command {
        TodoCommand::Push(push) => {
            let body = json!({
                "title": push.title,
                "queue": push.queue,
                "kind": push.kind,
                "payload": payload,
                "key": push.key,
                "priority": push.priority,
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
        TodoCommand::Retry(bulk) => match bulk.id {
            Some(id) => act(&client, json, &id, "retry").await,
            None => run_bulk(&client, json, BulkAction::Retry, &bulk.filter).await,
        },
        TodoCommand::Release { id } => act(&client, json, &id, "release").await,
        TodoCommand::Priority { id, priority } => {
            let response = client
                .patch(&["todos", &id], &json!({ "priority": priority }))
                .await?;
            emit(json, &response, |todo| {
                println!(
                    "{} now has priority {}.",
                    text(todo, "id"),
                    todo["priority"]
                );
                Ok(())
            })
        }
        TodoCommand::Cancel(bulk) => match bulk.id {
            Some(id) => act(&client, json, &id, "cancel").await,
            None => run_bulk(&client, json, BulkAction::Cancel, &bulk.filter).await,
        },
    }
}

#[derive(Debug, Clone, Copy)]
enum BulkAction {
    Retry,
    Cancel,
}

impl BulkAction {
    fn path(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Cancel => "cancel",
        }
    }

    fn done(self) -> &'static str {
        match self {
            Self::Retry => "retried",
            Self::Cancel => "cancelled",
        }
    }
}

/// A bulk action changes many todos at once, so a person is asked; a script must say -y.
fn confirm_bulk(action: BulkAction, filter: &FilterArgs) -> anyhow::Result<bool> {
    if !prompt::stdin_is_terminal() {
        return Err(UsageError(format!(
            "todo {} --all needs -y (--yes) when stdin is not a terminal",
            action.path()
        ))
        .into());
    }
    let question = match action {
        BulkAction::Retry => format!(
            "Retry every {} of {}?",
            if filter.state.is_some() {
                "todo"
            } else {
                "failed todo"
            },
            filter.describe()
        ),
        BulkAction::Cancel => format!(
            "Cancel every pending, claimed or waiting todo of {}? Holders lose them at once.",
            filter.describe()
        ),
    };
    Ok(prompt::confirm(&question)?)
}

/// The most batches one command runs (a million todos); a filter that
/// keeps matching beyond that is reported, not chased forever.
const MAX_BATCHES: usize = 1000;

/// Calls the bulk route until nothing more matches, and prints the total.
async fn run_bulk(
    client: &ApiClient,
    json: bool,
    action: BulkAction,
    filter: &FilterArgs,
) -> anyhow::Result<()> {
    let body = filter.body();
    let mut ids: Vec<Value> = Vec::new();
    let mut more = true;
    let mut batches: Vec<ApiResponse> = Vec::new();
    while more && batches.len() < MAX_BATCHES {
        let response: ApiResponse = client.post(&["todos", action.path()], &body).await?;
        let batch = response.json()?;
        ids.extend(batch["ids"].as_array().cloned().unwrap_or_default());
        more = batch["more"].as_bool().unwrap_or(false);
        batches.push(response);
    }
    if json {
        // One batch is printed verbatim; several as their sum, in the same shape.
        match batches.as_slice() {
            [only] => println!("{}", only.verbatim()),
            _ => println!(
                "{}",
                json!({ "count": ids.len(), "more": more, "ids": ids })
            ),
        }
    } else {
        let count = ids.len();
        let noun = if count == 1 { "todo" } else { "todos" };
        println!("{} {count} {noun}.", capitalized(action.done()));
        if more {
            println!("More still match; run the command again.");
        }
    }
    Ok(())
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A human action on a todo (`retry`, `release`, `cancel`); answers with the todo.
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
    let mut query = list.filter.query();
    let optional = [
        ("limit", list.limit.map(|n| n.to_string())),
        ("cursor", list.cursor),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            query.push((key, value));
        }
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
        ("cancelled by", text(todo, "cancelled_by")),
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
