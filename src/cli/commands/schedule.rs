//! `schedule add | list | pause | resume | rm`: an endpoint's recurring todos.

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::cli::args::ClientArgs;
use crate::cli::output::{Table, emit, print_pairs, text, when};

#[derive(Debug, Args)]
pub struct ScheduleArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(subcommand)]
    pub command: ScheduleCommand,
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Add a schedule: a todo at each occurrence of a cron expression.
    Add {
        /// Endpoint slug or id.
        reference: String,
        /// The queue (may be omitted when the endpoint has one).
        #[arg(short, long)]
        queue: Option<String>,
        /// 5 fields: minute hour day-of-month month day-of-week, e.g. "0 9 * * mon-fri".
        #[arg(long, value_name = "EXPR")]
        cron: String,
        /// IANA time zone, e.g. Europe/Berlin.
        #[arg(long, value_name = "TZ", default_value = "UTC")]
        tz: String,
        /// The todos' kind (default `schedule`).
        #[arg(long)]
        kind: Option<String>,
        /// The todos' payload, a JSON value.
        #[arg(long, value_name = "JSON")]
        payload: Option<String>,
        /// Occurrences missed while no server ran: `one` todo for the latest, or `none`.
        #[arg(long, value_name = "one|none")]
        catch_up: Option<String>,
        /// The todos' title; {date}, {time} and {datetime} become the occurrence's local time.
        title: String,
    },
    /// An endpoint's schedules and their next occurrence.
    List { reference: String },
    /// Pause a schedule: no todo is made while paused.
    Pause { id: String },
    /// Resume a schedule from its next future occurrence.
    Resume { id: String },
    /// Delete a schedule (the todos it made stay).
    Rm { id: String },
}

pub(crate) async fn run(args: ScheduleArgs) -> anyhow::Result<()> {
    let client = args.client.connect()?;
    let json = args.client.json;
    match args.command {
        ScheduleCommand::Add {
            reference,
            queue,
            cron,
            tz,
            kind,
            payload,
            catch_up,
            title,
        } => {
            let mut body = Map::new();
            body.insert("cron".into(), json!(cron));
            body.insert("tz".into(), json!(tz));
            body.insert("title".into(), json!(title));
            if let Some(queue) = queue {
                body.insert("queue".into(), json!(queue));
            }
            if let Some(kind) = kind {
                body.insert("kind".into(), json!(kind));
            }
            if let Some(payload) = payload {
                let value: Value = serde_json::from_str(&payload)
                    .map_err(|e| anyhow::anyhow!("--payload is not JSON: {e}"))?;
                body.insert("payload".into(), value);
            }
            if let Some(catch_up) = catch_up {
                body.insert("catch_up".into(), json!(catch_up));
            }
            let response = client
                .post(
                    &["endpoints", &reference, "schedules"],
                    &Value::Object(body),
                )
                .await?;
            emit(json, &response, |s| {
                print_pairs(&[
                    ("schedule", text(s, "id")),
                    ("queue", text(s, "queue")),
                    ("cron", format!("{} ({})", text(s, "cron"), text(s, "tz"))),
                    ("next", when(s, "next_at", "never")),
                ]);
                Ok(())
            })
        }
        ScheduleCommand::List { reference } => {
            let response = client
                .get(&["endpoints", &reference, "schedules"], &[])
                .await?;
            emit(json, &response, |list| {
                print_schedules(list);
                Ok(())
            })
        }
        ScheduleCommand::Pause { id } => {
            let response = client.post_action(&["schedules", &id, "pause"]).await?;
            emit(json, &response, |s| {
                println!("Schedule {} is paused.", text(s, "id"));
                Ok(())
            })
        }
        ScheduleCommand::Resume { id } => {
            let response = client.post_action(&["schedules", &id, "resume"]).await?;
            emit(json, &response, |s| {
                println!(
                    "Schedule {} resumed; next at {}.",
                    text(s, "id"),
                    when(s, "next_at", "never")
                );
                Ok(())
            })
        }
        ScheduleCommand::Rm { id } => {
            let response = client.delete(&["schedules", &id]).await?;
            emit(json, &response, |_| {
                println!("Deleted schedule {id}.");
                Ok(())
            })
        }
    }
}

fn print_schedules(list: &Value) {
    let mut table = Table::new(&[
        "ID", "QUEUE", "CRON", "TZ", "TITLE", "CATCH-UP", "STATE", "NEXT",
    ]);
    for s in list["schedules"].as_array().into_iter().flatten() {
        let state = if s["paused"] == true {
            "paused"
        } else {
            "active"
        };
        table.row(vec![
            text(s, "id"),
            text(s, "queue"),
            text(s, "cron"),
            text(s, "tz"),
            text(s, "title"),
            text(s, "catch_up"),
            state.to_owned(),
            when(s, "next_at", "never"),
        ]);
    }
    table.print_or("No schedules.");
}
