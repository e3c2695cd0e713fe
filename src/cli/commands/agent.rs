//! `agent list | show | register | edit`.

use clap::{ArgGroup, Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::cli::args::{ClientArgs, seconds};
use crate::cli::output::{Table, emit, print_next_page, print_pairs, text, when, when_exact};

#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(subcommand)]
    pub command: AgentCommand,
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Your agents, newest first, with liveness.
    List(ListArgs),
    /// One agent.
    Show { name: String },
    /// Register an agent (grants nothing; vend an endpoint for that).
    Register(RegisterArgs),
    /// Change an agent's kind, expected interval or description.
    Edit(EditArgs),
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
pub struct RegisterArgs {
    /// Lowercase letters, digits and dashes.
    pub name: String,
    /// heartbeat, session (default) or task.
    #[arg(long)]
    pub kind: Option<String>,
    /// Expected interval between contacts: seconds or a duration (30m).
    #[arg(long, value_parser = seconds)]
    pub interval: Option<i64>,
    #[arg(long)]
    pub description: Option<String>,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("change").required(true).multiple(true)))]
pub struct EditArgs {
    pub name: String,
    /// heartbeat, session or task.
    #[arg(long, group = "change")]
    pub kind: Option<String>,
    /// Expected interval: seconds or a duration (30m).
    #[arg(long, value_parser = seconds, group = "change", conflicts_with = "clear_interval")]
    pub interval: Option<i64>,
    /// Return to the kind's default interval.
    #[arg(long, group = "change")]
    pub clear_interval: bool,
    #[arg(long, group = "change", conflicts_with = "clear_description")]
    pub description: Option<String>,
    #[arg(long, group = "change")]
    pub clear_description: bool,
}

pub(crate) async fn run(args: AgentArgs) -> anyhow::Result<()> {
    let client = args.client.connect()?;
    let json = args.client.json;
    match args.command {
        AgentCommand::List(list) => {
            let mut query = Vec::new();
            if let Some(limit) = list.limit {
                query.push(("limit", limit.to_string()));
            }
            if let Some(cursor) = list.cursor {
                query.push(("cursor", cursor));
            }
            let response = client.get(&["agents"], &query).await?;
            emit(json, &response, |body| {
                print_agents(body);
                Ok(())
            })
        }
        AgentCommand::Show { name } => {
            let response = client.get(&["agents", &name], &[]).await?;
            emit(json, &response, print_agent)
        }
        AgentCommand::Register(new) => {
            let body = json!({
                "name": new.name,
                "kind": new.kind,
                "expected_interval_seconds": new.interval,
                "description": new.description,
            });
            let response = client.post(&["agents"], &body).await?;
            emit(json, &response, |agent| {
                println!("Registered agent {}.", text(agent, "name"));
                print_agent(agent)
            })
        }
        AgentCommand::Edit(edit) => {
            let response = client
                .patch(&["agents", &edit.name], &edit_body(&edit))
                .await?;
            emit(json, &response, print_agent)
        }
    }
}

/// Only the fields asked for: absent leaves a field alone, null clears it.
fn edit_body(edit: &EditArgs) -> Value {
    let mut body = Map::new();
    if let Some(kind) = &edit.kind {
        body.insert("kind".into(), json!(kind));
    }
    if let Some(interval) = edit.interval {
        body.insert("expected_interval_seconds".into(), json!(interval));
    } else if edit.clear_interval {
        body.insert("expected_interval_seconds".into(), Value::Null);
    }
    if let Some(description) = &edit.description {
        body.insert("description".into(), json!(description));
    } else if edit.clear_description {
        body.insert("description".into(), Value::Null);
    }
    Value::Object(body)
}

fn print_agents(list: &Value) {
    let mut table = Table::new(&[
        "NAME",
        "KIND",
        "CONDITION",
        "ENDPOINTS",
        "LAST SEEN",
        "DESCRIPTION",
    ]);
    for agent in list["agents"].as_array().into_iter().flatten() {
        table.row(vec![
            text(agent, "name"),
            text(agent, "kind"),
            text(agent, "condition"),
            format!(
                "{}/{}",
                text(agent, "active_endpoints"),
                text(agent, "endpoints")
            ),
            when(agent, "last_seen_at", "never"),
            crate::cli::output::clip(&text(agent, "description"), 40),
        ]);
    }
    table.print_or("No agents.");
    print_next_page(list);
}

fn print_agent(agent: &Value) -> anyhow::Result<()> {
    let interval = match agent["expected_interval_seconds"].as_i64() {
        Some(secs) => format!("{secs}s"),
        None => "the kind's default".into(),
    };
    print_pairs(&[
        ("name", text(agent, "name")),
        ("id", text(agent, "id")),
        ("kind", text(agent, "kind")),
        ("interval", interval),
        ("description", text(agent, "description")),
        ("condition", text(agent, "condition")),
        ("last seen", when_exact(agent, "last_seen_at", "never")),
        ("last contact", when_exact(agent, "last_contact_at", "-")),
        ("stale after", when_exact(agent, "stale_after", "-")),
        (
            "endpoints",
            format!(
                "{} ({} active)",
                text(agent, "endpoints"),
                text(agent, "active_endpoints")
            ),
        ),
        ("created", when_exact(agent, "created_at", "-")),
    ]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_sends_only_what_was_asked_and_null_to_clear() {
        let edit = EditArgs {
            name: "a".into(),
            kind: None,
            interval: None,
            clear_interval: true,
            description: Some("d".into()),
            clear_description: false,
        };
        assert_eq!(
            edit_body(&edit),
            json!({"expected_interval_seconds": null, "description": "d"})
        );
    }
}
