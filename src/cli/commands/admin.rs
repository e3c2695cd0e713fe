//! `admin …`: local commands that open the database directly, for making
//! humans and their first tokens without a server or an existing login.
//! They work beside a running server on the same SQLite file: they take no
//! server lock, and SQLite's WAL and busy timeout serialise the writes.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::api::views::{HumanView, NewTokenView, TokenView};
use crate::cli::DatabaseArgs;
use crate::cli::args::lifetime;
use crate::cli::output::{human_span, print_pairs};
use crate::clock::SystemClock;
use crate::store::issue_api_token;
use crate::store::prelude::*;
use crate::store::{Human, SqlStore, StoreError, StoreOptions};

#[derive(Debug, Args)]
pub struct AdminArgs {
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Humans (the tenants).
    #[command(subcommand)]
    Human(HumanCommand),
    /// Human API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Subcommand)]
pub enum HumanCommand {
    /// Create a human.
    Create(HumanCreateArgs),
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create an API token for a human; the token is printed this once.
    Create(TokenCreateArgs),
}

#[derive(Debug, Args)]
pub struct HumanCreateArgs {
    /// A unique name, one line of at most 128 characters.
    pub name: String,

    #[command(flatten)]
    pub db: DatabaseArgs,

    /// Print the new human as JSON (the shape of GET /api/v1/me).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TokenCreateArgs {
    /// The human's name (or id).
    pub human: String,

    /// A name to recognise the token by.
    #[arg(long)]
    pub label: Option<String>,

    /// Lifetime (30d, 12h, 90m) or the RFC 3339 time it ends; default: no expiry.
    #[arg(long, value_parser = lifetime)]
    pub expires_in: Option<Duration>,

    #[command(flatten)]
    pub db: DatabaseArgs,

    /// Print the new token as JSON (the shape of POST /api/v1/tokens).
    #[arg(long)]
    pub json: bool,
}

pub(crate) async fn run(args: AdminArgs) -> anyhow::Result<()> {
    match args.command {
        AdminCommand::Human(HumanCommand::Create(args)) => create_human(args).await,
        AdminCommand::Token(TokenCommand::Create(args)) => create_token(args).await,
    }
}

/// Opens the database and brings its schema up to date, as `migrate` does.
async fn open(db: &DatabaseArgs) -> anyhow::Result<SqlStore> {
    let location = db.location()?;
    let store = SqlStore::connect(&location, Arc::new(SystemClock), &StoreOptions::default())
        .await
        .with_context(|| format!("opening the database {}", location.redacted()))?;
    store.migrate(None).await.context("applying migrations")?;
    Ok(store)
}

async fn create_human(args: HumanCreateArgs) -> anyhow::Result<()> {
    let store = open(&args.db).await?;
    let created = store.create_human(&args.name).await;
    store.close().await;
    let human = created.context("creating the human")?;
    if args.json {
        println!("{}", serde_json::to_string(&HumanView::from(&human))?);
    } else {
        println!("Created human {:?} ({}).", human.name, human.id);
        println!(
            "Give them a token with: switchboard admin token create {:?}",
            human.name
        );
    }
    Ok(())
}

async fn create_token(args: TokenCreateArgs) -> anyhow::Result<()> {
    let store = open(&args.db).await?;
    let issued = async {
        let human = find_human(&store, &args.human).await?;
        let expires_at = args
            .expires_in
            .map(|d| store.clock().now().saturating_add(d));
        let (token, record) = issue_api_token(&store, &human.id, args.label.clone(), expires_at)
            .await
            .context("creating the token")?;
        anyhow::Ok((human, token, record))
    }
    .await;
    store.close().await;
    let (human, token, record) = issued?;
    if args.json {
        let view = NewTokenView {
            token,
            record: TokenView::from(&record),
        };
        println!("{}", serde_json::to_string(&view)?);
    } else {
        print_pairs(&[
            ("human", format!("{} ({})", human.name, human.id)),
            ("token id", record.id.clone()),
            ("label", record.label.clone().unwrap_or_else(|| "-".into())),
            (
                "expires",
                match args.expires_in {
                    Some(d) => format!("in {}", human_span(d.as_secs())),
                    None => "never".into(),
                },
            ),
        ]);
        println!("\nThe token is shown this once; store it now:\n\n    {token}\n");
        println!("Sign in with: switchboard login URL   (paste the token at the prompt)");
    }
    Ok(())
}

/// A human by name, or by id (`hu_…`) when no name matches.
async fn find_human(store: &SqlStore, reference: &str) -> anyhow::Result<Human> {
    match store.find_human_by_name(reference).await {
        Ok(human) => Ok(human),
        Err(StoreError::NotFound) => match store.get_human(reference).await {
            Ok(human) => Ok(human),
            Err(StoreError::NotFound) => anyhow::bail!("no human named {reference:?}"),
            Err(e) => Err(e.into()),
        },
        Err(e) => Err(e.into()),
    }
}
