//! The server under test for the benchmarks that drive the real binary:
//! `switchboard serve` on an OS-chosen port (the kit's `ServeProcess`, the
//! same starter as the integration tests'), rate limits lifted, its
//! first-start admin token chosen here through SWITCHBOARD_BOOTSTRAP_TOKEN.
//! Included by each bench with `#[path = "common/server.rs"] mod server;`.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;
use switchboard::testkit::ServeProcess;

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

pub struct ServerProcess {
    process: ServeProcess,
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
        command
            .current_dir(dir)
            .args(["serve", "--listen", "127.0.0.1:0", "--database", database])
            .args(["--mcp-rate", "1000000", "--api-write-rate", "1000000"])
            .args(["--api-read-rate", "1000000"])
            .args(args)
            .env_remove("SWITCHBOARD_DATABASE_URL")
            .env("SWITCHBOARD_LOG", "warn,switchboard::server=info")
            .stdin(Stdio::null());
        let process = ServeProcess::spawn_echoing_problems(command, Duration::from_secs(60))?;
        Ok(Self {
            addr: process.addr.clone(),
            process,
            admin_token: if first { chosen } else { String::new() },
        })
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGTERM, then wait (SIGKILL after 15 s).
    pub fn stop(mut self) {
        let _ = self.process.signal("TERM");
        let _ = self.process.wait_exit(Duration::from_secs(15));
    }
}
