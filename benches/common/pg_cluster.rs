//! A throwaway PostgreSQL cluster for a benchmark: `initdb` into a fresh
//! temporary directory, `pg_ctl start` on a free port of 127.0.0.1 with the
//! socket in that directory and default settings otherwise; stopped
//! (`pg_ctl stop -m fast`, then `immediate`) and deleted when dropped, also
//! when the bench fails. Never the shared server on 5432 (which runs with
//! autovacuum off).
//!
//! The binaries come from `SWITCHBOARD_BENCH_PG_BIN` (default
//! `/usr/lib/postgresql/15/bin`). Run as root, every PostgreSQL command runs
//! as the `postgres` user (`runuser -u postgres --`) and the directory is
//! given to that user; otherwise they run as the current user.
//! Included with `#[path = "common/pg_cluster.rs"] mod pg_cluster;`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};

pub struct PgCluster {
    root: PathBuf,
    data: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
    pub port: u16,
    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub admin_url: String,
    running: bool,
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .is_some_and(|s| s.trim() == "0")
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl PgCluster {
    pub fn start() -> Result<Self> {
        let bin = PathBuf::from(
            std::env::var("SWITCHBOARD_BENCH_PG_BIN")
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "/usr/lib/postgresql/15/bin".into()),
        );
        ensure!(
            bin.join("initdb").exists(),
            "no initdb in {} (set SWITCHBOARD_BENCH_PG_BIN)",
            bin.display()
        );
        let root = tempfile::Builder::new()
            .prefix("sb-bench-pg-")
            .tempdir()?
            .keep();
        let as_postgres = is_root();
        let mut cluster = Self {
            data: root.join("data"),
            root,
            bin,
            as_postgres,
            port: 0,
            admin_url: String::new(),
            running: false,
        };
        // From here on, Drop cleans up whatever was made.
        if as_postgres {
            let status = Command::new("chown")
                .arg("postgres:postgres")
                .arg(&cluster.root)
                .status()?;
            ensure!(
                status.success(),
                "chown postgres {}",
                cluster.root.display()
            );
        }
        cluster.run(
            "initdb",
            &[
                "-D".as_ref(),
                cluster.data.as_os_str(),
                "--auth=trust".as_ref(),
                "-U".as_ref(),
                "postgres".as_ref(),
            ],
        )?;
        // A port can be taken between the check and the start: try a few.
        let mut last = None;
        for _ in 0..5 {
            let port = free_port()?;
            let options = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1",
                cluster.root.display()
            );
            let log = cluster.root.join("log");
            match cluster.run(
                "pg_ctl",
                &[
                    "-D".as_ref(),
                    cluster.data.as_os_str(),
                    "-o".as_ref(),
                    options.as_ref(),
                    "-l".as_ref(),
                    log.as_os_str(),
                    "-w".as_ref(),
                    "-t".as_ref(),
                    "60".as_ref(),
                    "start".as_ref(),
                ],
            ) {
                Ok(()) => {
                    cluster.running = true;
                    cluster.port = port;
                    cluster.admin_url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
                    return Ok(cluster);
                }
                Err(e) => {
                    let tail = std::fs::read_to_string(&log).unwrap_or_default();
                    last = Some(e.context(tail));
                }
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("pg_ctl start failed")))
    }

    pub fn dir(&self) -> &Path {
        &self.root
    }

    fn command(&self, tool: &str) -> Command {
        let path = self.bin.join(tool);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    fn run(&self, tool: &str, args: &[&std::ffi::OsStr]) -> Result<()> {
        let out = self
            .command(tool)
            .args(args)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {tool}"))?;
        if !out.status.success() {
            bail!(
                "{tool} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    fn stop(&mut self) {
        if !self.running {
            return;
        }
        for mode in ["fast", "immediate"] {
            let ok = self
                .run(
                    "pg_ctl",
                    &[
                        "-D".as_ref(),
                        self.data.as_os_str(),
                        "-m".as_ref(),
                        mode.as_ref(),
                        "-w".as_ref(),
                        "-t".as_ref(),
                        "30".as_ref(),
                        "stop".as_ref(),
                    ],
                )
                .is_ok();
            if ok {
                break;
            }
        }
        self.running = false;
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
