//! `switchboard quickstart`: from a running server to a woken agent in one
//! command (issue 45). On a server on this machine it signs in with the
//! first start's token (the file the server wrote beside its database) when
//! there is no login yet, vends an endpoint, starts the runner
//! (`switchboard work`) on it with the built-in example agent
//! (`switchboard example-agent`), and pushes a first todo once the runner
//! listens: its doorbell starts the agent, which claims and completes it.
//! It then keeps running, like `switchboard work`, until Ctrl-C.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::json;

use super::auth::{first_start_token, is_loopback};
use super::endpoint::agent_tools;
use crate::cli::DatabaseArgs;
use crate::cli::client::{ApiClient, display_url, parse_server_url};
use crate::cli::credentials::{self, Credentials, Secret};
use crate::cli::output::text;
use crate::cli::work::{Runner, runner};

/// The server when neither --url nor a saved login names one: `serve`'s default.
const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// How long it waits for a server that is still starting (and, on this
/// machine, for its first-start token file).
const SERVER_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Args)]
pub struct QuickstartArgs {
    /// The server (default: the saved login's, else http://127.0.0.1:8080).
    #[arg(long, env = "SWITCHBOARD_URL")]
    pub url: Option<String>,

    /// Human API token, sbh_… (default: the saved login's, else — for a
    /// server on this machine — the first-start token beside --database).
    #[arg(long, env = "SWITCHBOARD_TOKEN", hide_env_values = true)]
    pub token: Option<Secret>,

    /// The agent to vend the endpoint for (registered when new).
    #[arg(long, default_value = "demo")]
    pub agent: String,

    /// The first todo's title.
    #[arg(long, default_value = "Say hello")]
    pub title: String,

    /// Push no first todo (the agent still wakes on every later push).
    #[arg(long)]
    pub no_push: bool,

    #[command(flatten)]
    pub db: DatabaseArgs,
}

pub(crate) async fn run(args: QuickstartArgs) -> anyhow::Result<()> {
    let saved = credentials::load()?;
    let url_text = match (&args.url, &saved) {
        (Some(url), _) => url.clone(),
        (None, Some(saved)) => saved.url.clone(),
        (None, None) => DEFAULT_URL.to_owned(),
    };
    let url = parse_server_url(&url_text)?;
    let shown = display_url(&url);
    let client = sign_in(&args, &url, saved.as_ref()).await?;
    // Later commands reach this server without --url when the login is its.
    let url_flag = match credentials::load()? {
        Some(login) if login.url == shown => String::new(),
        _ => format!(" --url {shown}"),
    };

    // Vend.
    let vended = client
        .post(&["endpoints"], &json!({ "agent": args.agent }))
        .await
        .context("vending an endpoint")?
        .json()?;
    let slug = text(&vended, "slug");
    let mcp_url = text(&vended, "mcp_url");
    let token = text(&vended, "token");
    println!(
        "Vended endpoint {slug} for agent {} (a new one each run; retire it with \
         `switchboard endpoint revoke {slug} -y`).\n  MCP URL:    {mcp_url}\n  agent sees: {}",
        text(&vended, "agent"),
        agent_tools(&vended)
    );
    println!(
        "\nRunning the built-in example agent on its doorbells, as\n\n    \
         switchboard work {mcp_url} -- switchboard example-agent\n"
    );

    let me = std::env::current_exe().context("finding this program to run as the agent")?;
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let run = runner(
        Runner {
            url: reqwest::Url::parse(&mcp_url).context("the vended MCP URL")?,
            slug: slug.clone(),
            token,
            parallel: 1,
            grace: Duration::from_secs(30),
            grace_text: "30s".into(),
            json: false,
            command: vec![me.to_string_lossy().into_owned(), "example-agent".into()],
        },
        Some(ready_tx),
    );
    let first_push = async {
        // The runner is gone (a refused credential) when the sender is dropped.
        if ready_rx.await.is_err() {
            return;
        }
        if !args.no_push {
            match client
                .post(
                    &["endpoints", &slug, "todos"],
                    &json!({ "title": args.title }),
                )
                .await
                .and_then(|r| r.json())
            {
                Ok(todo) => println!(
                    "Pushed {} {:?}: its doorbell wakes the example agent.",
                    text(&todo, "id"),
                    args.title
                ),
                Err(e) => eprintln!("switchboard quickstart: could not push a first todo: {e:#}"),
            }
        }
        println!(
            "Push more from another terminal; each one rings the agent:\n\n    \
             switchboard todo push {slug} \"Review PR 12\"{}\n\n\
             Ctrl-C stops the runner (it clocks the endpoint out). To connect Claude Code or \
             Codex instead, `switchboard endpoint vend {}` prints their setups.",
            url_flag, args.agent
        );
    };
    let (ran, ()) = tokio::join!(run, first_push);
    ran
}

/// A client for the server: the token given, else the saved login's, else
/// on this machine the first start's (then saved as the login, unless one
/// for another server is saved). Waits for a server that is still starting.
async fn sign_in(
    args: &QuickstartArgs,
    url: &reqwest::Url,
    saved: Option<&Credentials>,
) -> anyhow::Result<ApiClient> {
    let shown = display_url(url);
    wait_for(url).await?;
    if let Some(token) = &args.token {
        let client = ApiClient::new(url.clone(), token.clone())?;
        client
            .get(&["me"], &[])
            .await
            .context("the server did not accept the token")?;
        return Ok(client);
    }
    let saved_here = saved.filter(|s| s.url == shown);
    if let Some(saved) = saved_here {
        let client = ApiClient::new(url.clone(), saved.token.clone())?;
        match client.get(&["me"], &[]).await {
            Ok(_) => return Ok(client),
            // A login saved for an earlier database on this URL: the first
            // start's token of the new one may still do.
            Err(e) if !is_loopback(url) => {
                return Err(e).context(format!(
                    "the server did not accept the saved login's token: `switchboard login {shown}`"
                ));
            }
            Err(_) => {}
        }
    }
    let Some((token, path)) = is_loopback(url)
        .then(|| first_start_token(&args.db))
        .transpose()?
        .flatten()
    else {
        bail!(
            "not logged in to {shown}: run `switchboard login {shown}` first, or pass --token \
             (on this machine, run this where the server's database is, or name it with \
             --database, to use the first start's token)"
        );
    };
    let client = ApiClient::new(url.clone(), token.clone())?;
    let me = client.get(&["me"], &[]).await.with_context(|| {
        format!(
            "the server did not accept the first-start token in {} (another server's? \
             `switchboard login {shown}`)",
            path.display()
        )
    })?;
    let me = me.json()?;
    let saved_to = match saved {
        Some(other) if other.url != shown => None,
        _ => Some(credentials::save(&Credentials {
            url: shown.clone(),
            token,
        })?),
    };
    println!(
        "Signed in to {shown} as {} with the first-start token from {}{}.",
        text(&me, "name"),
        path.display(),
        match saved_to {
            Some(to) => format!(" (saved to {} for later commands)", to.display()),
            None => " (not saved: the saved login is for another server)".into(),
        }
    );
    Ok(client)
}

/// Waits until the server answers `/readyz` (it may still be starting).
async fn wait_for(url: &reqwest::Url) -> anyhow::Result<()> {
    let probe = ApiClient::new(url.clone(), Secret::new("sbh_none"))?;
    let deadline = Instant::now() + SERVER_WAIT;
    let mut said = false;
    loop {
        match probe.readiness().await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(e).context(format!(
                    "no server is ready at {}: start one with `switchboard serve` (or `cargo \
                     run --release -- serve`), or name it with --url",
                    display_url(url)
                ));
            }
            Err(_) => {}
        }
        if !said {
            eprintln!(
                "switchboard quickstart: waiting for the server at {} …",
                display_url(url)
            );
            said = true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
