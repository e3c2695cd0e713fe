//! `login`, `logout` and `status`.

use anyhow::{Context, bail};
use clap::Args;
use serde_json::json;

use std::path::PathBuf;

use reqwest::Url;

use crate::cli::args::ClientArgs;
use crate::cli::client::{ApiClient, ApiResponse, display_url, parse_server_url};
use crate::cli::credentials::{self, Credentials, Secret};
use crate::cli::output::{print_pairs, text};
use crate::cli::prompt;
use crate::cli::{DatabaseArgs, UsageError};
use crate::http::host_guard::is_loopback_host;
use crate::server::default_token_file;

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server, e.g. https://switchboard.example.com or http://127.0.0.1:8080.
    pub url: String,

    /// Read the token from standard input (one line, trimmed), e.g.
    /// `switchboard login URL --with-token < token-file`. Wins over
    /// SWITCHBOARD_TOKEN.
    #[arg(long)]
    pub with_token: bool,

    /// Human API token, sbh_… (else SWITCHBOARD_TOKEN, else a prompt). A flag
    /// shows in `ps` and shell history: prefer --with-token or the prompt.
    #[arg(long, env = "SWITCHBOARD_TOKEN", hide_env_values = true)]
    pub token: Option<Secret>,

    /// Print the API's answer to GET /api/v1/me verbatim.
    #[arg(long)]
    pub json: bool,

    /// With no token given and a loopback URL, the first-start token is read
    /// from the file the server wrote beside this database
    /// (<db>.bootstrap-token; ./switchboard.bootstrap-token for PostgreSQL).
    #[command(flatten)]
    pub db: DatabaseArgs,
}

#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// Print `{}` instead of a sentence.
    #[arg(long)]
    pub json: bool,
}

/// Whether `url` names this machine (`localhost`, 127.0.0.0/8, `::1`).
pub(crate) fn is_loopback(url: &Url) -> bool {
    url.host_str().is_some_and(is_loopback_host)
}

/// The first-start token a local server wrote beside `db` (mode 0600, only
/// its owner can read it), and where it was; `None` when there is no such
/// file (a server elsewhere, an older database, a file already deleted).
pub(crate) fn first_start_token(db: &DatabaseArgs) -> anyhow::Result<Option<(Secret, PathBuf)>> {
    let path = default_token_file(&db.location()?);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(e)
                .with_context(|| format!("reading the first-start token {}", path.display()));
        }
    };
    let shown = std::fs::canonicalize(&path).unwrap_or(path);
    match text.trim() {
        "" => Ok(None),
        token => Ok(Some((Secret::new(token), shown))),
    }
}

/// Checks the token against the server and saves the login only if it works.
pub(crate) async fn login(args: LoginArgs) -> anyhow::Result<()> {
    let url = parse_server_url(&args.url)?;
    let local = match (&args.token, args.with_token, is_loopback(&url)) {
        (None, false, true) => first_start_token(&args.db)?,
        _ => None,
    };
    let token = match args.token {
        _ if local.is_some() => local
            .as_ref()
            .map(|(token, _)| token.clone())
            .expect("some"),
        _ if args.with_token => {
            let line =
                prompt::read_stdin_line().context("reading the token from standard input")?;
            if line.is_empty() {
                return Err(UsageError(
                    "--with-token: standard input is empty; pipe the token in, e.g. \
                     `switchboard login URL --with-token < token-file`"
                        .into(),
                )
                .into());
            }
            Secret::new(line)
        }
        Some(token) => token,
        None if prompt::stdin_is_terminal() => {
            Secret::new(prompt::read_secret("API token (sbh_…): ").context("reading the token")?)
        }
        None => {
            return Err(UsageError(
                "no token: pass --with-token and the token on standard input, set \
                 SWITCHBOARD_TOKEN, or run in a terminal to be asked (for a server on this \
                 machine, run it where the server's database is, or name it with --database, \
                 to read the first-start token from beside it)"
                    .into(),
            )
            .into());
        }
    };
    check_token_shape(&token)?;
    let client = ApiClient::new(url.clone(), token.clone())?;
    let me = client
        .get(&["me"], &[])
        .await
        .with_context(|| match &local {
            Some((_, path)) => format!(
                "the server did not accept the first-start token in {} (another server's? \
             delete the file, or log in with --with-token)",
                path.display()
            ),
            None => "the server did not accept the token".to_owned(),
        })?;
    let path = credentials::save(&Credentials {
        url: display_url(&url),
        token,
    })?;
    if args.json {
        println!("{}", me.verbatim());
    } else {
        let me = me.json()?;
        println!(
            "Logged in to {} as {} ({}).\nCredentials saved to {}.",
            display_url(&url),
            text(&me, "name"),
            text(&me, "id"),
            path.display()
        );
        if let Some((_, file)) = &local {
            println!(
                "The token was the first start's, read from {}: delete that file once you \
                 have a token of your own (`switchboard token create`).",
                file.display()
            );
        }
    }
    Ok(())
}

/// Catches the common mix-up before anything is sent.
fn check_token_shape(token: &Secret) -> anyhow::Result<()> {
    let token = token.expose();
    if token.starts_with("sbk_") {
        bail!(
            "that is an endpoint credential (sbk_…), which only works on /mcp; \
             log in with a human API token (sbh_…)"
        );
    }
    if !token.starts_with("sbh_") {
        bail!("a human API token starts with sbh_");
    }
    Ok(())
}

pub(crate) fn logout(args: LogoutArgs) -> anyhow::Result<()> {
    let removed = credentials::remove()?;
    if args.json {
        println!("{{}}");
    } else {
        match removed {
            Some(path) => println!("Logged out: removed {}.", path.display()),
            None => println!(
                "Not logged in (no {}).",
                credentials::file_path()?.display()
            ),
        }
    }
    Ok(())
}

/// Where the CLI points, who it is there, and whether the server is ready.
/// Fails (exit 1) unless both the token and the server are good.
pub(crate) async fn status(args: ClientArgs) -> anyhow::Result<()> {
    let client = args.connect()?;
    let ready = client.readiness().await;
    let me = client.get(&["me"], &[]).await;
    if args.json {
        let body = |r: &anyhow::Result<ApiResponse>| match r {
            Ok(r) => r.json().unwrap_or(serde_json::Value::Null),
            Err(e) => json!({ "error": format!("{e:#}") }),
        };
        println!(
            "{}",
            json!({ "url": client.base_url(), "me": body(&me), "readyz": body(&ready) })
        );
    } else {
        let describe =
            |r: &anyhow::Result<ApiResponse>, ok: &dyn Fn(&ApiResponse) -> String| match r {
                Ok(r) => ok(r),
                Err(e) => format!("error: {e:#}"),
            };
        print_pairs(&[
            ("url", client.base_url()),
            (
                "human",
                describe(&me, &|r| {
                    let me = r.json().unwrap_or_default();
                    format!("{} ({})", text(&me, "name"), text(&me, "id"))
                }),
            ),
            (
                "server",
                describe(&ready, &|r| text(&r.json().unwrap_or_default(), "status")),
            ),
        ]);
    }
    me?;
    ready?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_is_loopback() {
        let loopback = |u: &str| is_loopback(&parse_server_url(u).unwrap());
        assert!(loopback("http://127.0.0.1:8080"));
        assert!(loopback("http://127.1.2.3:8080"));
        assert!(loopback("http://localhost:8080"));
        assert!(loopback("http://LOCALHOST"));
        assert!(loopback("http://[::1]:8080"));
        assert!(!loopback("https://switchboard.example.com"));
        assert!(!loopback("http://10.0.0.1:8080"));
        assert!(!loopback("http://localhost.example.com"));
        assert!(!loopback("http://[::2]:8080"));
    }
}
