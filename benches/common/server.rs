//! What the benchmarks that drive the real binary share: the server under
//! test (started on an OS-chosen port, its first-start admin token chosen
//! here through SWITCHBOARD_BOOTSTRAP_TOKEN) and the PostgreSQL settings a
//! results table records.
//! Included by each bench with `#[path = "common/server.rs"] mod server;`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sqlx::{AssertSqlSafe, Connection, Row};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

pub struct ServerProcess {
    child: Child,
    pub addr: String,
    /// The first-start `sbh_` token; empty for [`ServerProcess::start_another`].
    pub admin_token: String,
}

impl ServerProcess {
    /// The first server on an empty database, with the admin token chosen here.
    pub fn start(database: &str, dir: &Path) -> Result<Self> {
        Self::spawn(database, dir, true, &[])
    }

    /// [`ServerProcess::start`] with more `serve` arguments (e.g. a higher
    /// `--max-connections` for B4's 10 000 streams).
    pub fn start_with(database: &str, dir: &Path, args: &[&str]) -> Result<Self> {
        Self::spawn(database, dir, true, args)
    }

    /// Another server on a database some server already initialised (no
    /// token is printed; `admin_token` stays empty), e.g. a second cluster
    /// instance on the same PostgreSQL database.
    pub fn start_another(database: &str, dir: &Path) -> Result<Self> {
        Self::spawn(database, dir, false, &[])
    }

    fn spawn(database: &str, dir: &Path, first: bool, args: &[&str]) -> Result<Self> {
        // stderr is a pipe, so the server would write a minted token to a
        // file; choose it instead, as an orchestrator would.
        let chosen = switchboard::mint::new_human_token();
        let mut command = Command::new(BIN);
        if first {
            command.env("SWITCHBOARD_BOOTSTRAP_TOKEN", &chosen);
        }
        let mut child = command
            .current_dir(dir)
            .args(["serve", "--listen", "127.0.0.1:0", "--database", database])
            .args(["--mcp-rate", "1000000", "--api-write-rate", "1000000"])
            .args(["--api-read-rate", "1000000"])
            .args(args)
            .env_remove("SWITCHBOARD_DATABASE_URL")
            .env("SWITCHBOARD_LOG", "warn,switchboard::server=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {BIN}"))?;
        let stderr = child.stderr.take().context("server stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads stderr for the whole life of the server, so it never blocks on a full pipe.
        std::thread::spawn(move || {
            let token = first.then_some(chosen);
            let mut sent = false;
            let mut early = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    early.push(line.clone());
                    if let Some(addr) = serving_address(&line) {
                        let _ = tx.send(Ok((addr, token.clone())));
                        sent = true;
                    }
                } else if line.contains("ERROR") || line.contains("WARN") {
                    eprintln!("server: {line}");
                }
            }
            if !sent {
                let _ = tx.send(Err(early.join("\n")));
            }
        });
        let (addr, token) = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(found)) => found,
            Ok(Err(log)) => bail!("the server exited before serving:\n{log}"),
            Err(_) => {
                let _ = child.kill();
                bail!("the server did not report its address within 60 s");
            }
        };
        let admin_token = match token {
            Some(token) => token,
            None if !first => String::new(),
            None => bail!("no first-start token"),
        };
        Ok(Self {
            child,
            addr,
            admin_token,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then wait (SIGKILL after 15 s).
    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn serving_address(line: &str) -> Option<String> {
    if !line.contains("switchboard is serving") {
        return None;
    }
    let start = line.find("listen=")? + "listen=".len();
    let rest = &line[start..];
    let end = rest.find(' ').unwrap_or(rest.len());
    Some(rest[..end].to_owned())
}

/// `SHOW name` for each of `names`, as `name=value, …`.
pub async fn pg_settings(url: &str, names: &[&str]) -> Result<String> {
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let mut out = Vec::new();
    for name in names {
        let v: String = sqlx::query(AssertSqlSafe(format!("SHOW {name}")))
            .fetch_one(&mut conn)
            .await?
            .try_get(0)?;
        out.push(format!("{name}={v}"));
    }
    conn.close().await?;
    Ok(out.join(", "))
}
