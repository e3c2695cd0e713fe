//! First start on an empty database: create the first human and hand its
//! one-time API token to the operator without sending it to a log collector.
//!
//! - An orchestrator may supply the token (`SWITCHBOARD_BOOTSTRAP_TOKEN`):
//!   only its hash is stored and nothing about it is printed.
//! - It is written to a file only its owner can read (beside the SQLite
//!   file by default), where `switchboard login` on this machine finds it
//!   by itself (`cli::commands::auth`).
//! - On a terminal with text logs, a banner on stderr also shows it (never
//!   through the logger, whose output may be kept); otherwise (stderr piped,
//!   or JSON logs) only the file's path is logged.

use std::fmt;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::domain::ids::check_human_token_shape;
use crate::http::host_guard::is_loopback_host;
use crate::mint::new_human_token;
use crate::store::{DatabaseLocation, Store, StoreError, Taken, store_api_token};

pub(super) const FIRST_HUMAN: &str = "admin";

/// `serve`'s database when none is named: `./switchboard.db`.
pub const DEFAULT_DATABASE: &str = "switchboard.db";

/// Beside the SQLite file, or in the working directory for PostgreSQL.
const TOKEN_FILE_SUFFIX: &str = ".bootstrap-token";
const POSTGRES_TOKEN_FILE: &str = "switchboard.bootstrap-token";

/// A first human's token supplied from outside, checked to have the shape
/// of a minted one. Its `Debug` never shows it.
#[derive(Clone)]
pub struct BootstrapToken(String);

impl BootstrapToken {
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        check_human_token_shape(text)?;
        Ok(Self(text.to_owned()))
    }
}

impl fmt::Debug for BootstrapToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BootstrapToken(…)")
    }
}

/// How the first start hands over the first human's token.
#[derive(Debug, Clone, Default)]
pub struct BootstrapConfig {
    /// Supplied by an orchestrator: stored (hashed), never printed.
    pub token: Option<BootstrapToken>,
    pub reveal: Reveal,
}

/// Where a minted first token goes.
#[derive(Debug, Clone, Default)]
pub enum Reveal {
    /// A banner on stderr (only for a person at a terminal, with text logs),
    /// and the file in the default place.
    Banner,
    /// A file of mode 0600 in the default place ([`default_token_file`]).
    #[default]
    File,
    /// A file of mode 0600 at this path (`--bootstrap-token-file`).
    FileAt(PathBuf),
}

/// `<db>.bootstrap-token` beside a SQLite file; for PostgreSQL,
/// `switchboard.bootstrap-token` in the working directory.
pub fn default_token_file(database: &DatabaseLocation) -> PathBuf {
    match database {
        DatabaseLocation::Sqlite(path) => {
            let mut name = path.as_os_str().to_owned();
            name.push(TOKEN_FILE_SUFFIX);
            PathBuf::from(name)
        }
        DatabaseLocation::Postgres(_) => PathBuf::from(POSTGRES_TOKEN_FILE),
    }
}

pub(super) async fn first_human(
    store: &dyn Store,
    database: &DatabaseLocation,
    config: &BootstrapConfig,
    public_url: &str,
) -> anyhow::Result<()> {
    if store.count_humans().await? > 0 {
        if config.token.is_some() {
            tracing::info!(
                "SWITCHBOARD_BOOTSTRAP_TOKEN is ignored: the database already has a human"
            );
        }
        return Ok(());
    }
    let (token, supplied) = match &config.token {
        Some(t) => (t.0.clone(), true),
        None => (new_human_token(), false),
    };
    // The file is written before anything is stored, so that a directory we
    // cannot write to fails the start instead of losing the only token; it
    // gets its final name once the human exists (a concurrent first start of
    // another instance in the same directory cannot clobber it).
    let pending = match (&config.reveal, supplied) {
        (_, true) => None,
        (Reveal::File | Reveal::Banner, false) => {
            Some(PendingFile::write(default_token_file(database), &token)?)
        }
        (Reveal::FileAt(path), false) => Some(PendingFile::write(path.clone(), &token)?),
    };
    let human = match store.create_human(FIRST_HUMAN).await {
        Ok(human) => human,
        // Another instance bootstrapped at the same moment: it hands its token over.
        Err(StoreError::Taken(Taken::HumanName(_))) => {
            if let Some(pending) = pending {
                pending.discard();
            }
            return Ok(());
        }
        Err(e) => return Err(e).context("creating the first human"),
    };
    store_api_token(
        store,
        &human.id,
        token.clone(),
        Some("first start".into()),
        None,
    )
    .await
    .context("creating the first API token")?;
    if supplied {
        tracing::info!(
            human = FIRST_HUMAN,
            "first start: created the first human with the token from SWITCHBOARD_BOOTSTRAP_TOKEN"
        );
        return Ok(());
    }
    let Some(pending) = pending else {
        return Ok(());
    };
    let path = pending.commit()?;
    let login = login_command(public_url, &path);
    if matches!(config.reveal, Reveal::Banner) {
        eprintln!(
            "\n  Switchboard: first start on an empty database.\n  \
             Created the human {FIRST_HUMAN:?}. Its API token (the board asks for it):\n\n    \
             {token}\n\n  \
             It is also in {} (mode 0600), where the CLI on this machine finds it.\n  \
             Sign in:  {login}\n            \
             (before `cargo install --locked --path .`: cargo run --release -- login …)\n  \
             Board:    {public_url}/\n",
            path.display()
        );
    } else {
        tracing::warn!(
            human = FIRST_HUMAN,
            token_file = %path.display(),
            "first start: the first human's API token was written to token_file (mode 0600); \
             on this machine `{login}` reads it (before `cargo install --locked --path .`: \
             `cargo run --release -- login …`); elsewhere `switchboard login {public_url} \
             --with-token < FILE`; delete it once you have a token of your own"
        );
    }
    Ok(())
}

/// The `login` line that works on this machine without a terminal: the
/// short form where `login` looks by default (beside `./switchboard.db`,
/// run from the server's directory), else the file on standard input.
fn login_command(public_url: &str, path: &Path) -> String {
    let default = default_token_file(&DatabaseLocation::Sqlite(PathBuf::from(DEFAULT_DATABASE)));
    let here = std::env::current_dir().map(|d| d.join(&default));
    // `login` reads the file only for a URL on this machine.
    let loopback = reqwest::Url::parse(public_url)
        .ok()
        .is_some_and(|u| u.host_str().is_some_and(is_loopback_host));
    match here.and_then(std::fs::canonicalize) {
        Ok(here) if loopback && here == path => format!("switchboard login {public_url}"),
        _ => format!(
            "switchboard login {public_url} --with-token < {}",
            path.display()
        ),
    }
}

/// A token file written under a temporary name, renamed into place once the
/// human it belongs to exists.
struct PendingFile {
    temporary: PathBuf,
    path: PathBuf,
}

impl PendingFile {
    fn write(path: PathBuf, token: &str) -> anyhow::Result<Self> {
        let temporary = temporary_name(&path);
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| {
                file.write_all(format!("{token}\n").as_bytes())?;
                file.sync_all()
            });
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(e).with_context(|| {
                format!(
                    "writing the first human's token to {} (choose another place with \
                     --bootstrap-token-file, or supply one with SWITCHBOARD_BOOTSTRAP_TOKEN)",
                    path.display()
                )
            });
        }
        Ok(Self { temporary, path })
    }

    fn commit(self) -> anyhow::Result<PathBuf> {
        std::fs::rename(&self.temporary, &self.path).with_context(|| {
            format!(
                "moving the first human's token from {} to {}",
                self.temporary.display(),
                self.path.display()
            )
        })?;
        // Logged absolute, so that it can be found whatever the working directory.
        Ok(std::fs::canonicalize(&self.path).unwrap_or(self.path))
    }

    fn discard(self) {
        let _ = std::fs::remove_file(&self.temporary);
    }
}

fn temporary_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files_sit_beside_sqlite_or_in_the_working_directory() {
        assert_eq!(
            default_token_file(&DatabaseLocation::Sqlite("/data/switchboard.db".into())),
            PathBuf::from("/data/switchboard.db.bootstrap-token")
        );
        assert_eq!(
            default_token_file(&DatabaseLocation::Postgres("postgres://h/db".into())),
            PathBuf::from("switchboard.bootstrap-token")
        );
    }

    #[test]
    fn supplied_tokens_never_show_in_debug() {
        let text = format!("sbh_{}", "x".repeat(43));
        let token = BootstrapToken::parse(&text).unwrap();
        assert!(!format!("{token:?}").contains(&text));
        assert!(BootstrapToken::parse("sbh_short").is_err());
    }
}
