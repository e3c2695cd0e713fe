//! A throwaway PostgreSQL cluster: its own data directory, its own port on
//! 127.0.0.1, stopped and started at will, deleted when dropped. The fault
//! tests (`faults`, `cluster_faults`) stop the database under running
//! servers; B3's cross-instance mode runs two servers on it. The shared
//! PostgreSQL (`SWITCHBOARD_TEST_DATABASE_URL`) is never touched.
//!
//! - `initdb` as the user `postgres` (PostgreSQL refuses to run as root: the
//!   temporary directory is chowned to it and every command runs through
//!   `runuser -u postgres --` when this process runs as root), trust
//!   authentication, superuser `postgres`, UTF-8 and the C locale whatever
//!   the environment's;
//! - `pg_ctl start` with `-c listen_addresses=127.0.0.1 -k <dir>` on a free
//!   port (another one if it was taken meanwhile, up to five), everything
//!   else at its default;
//! - [`PgCluster::stop`] is a fast shutdown (`-m fast`: sessions are
//!   terminated, as in a real restart), [`PgCluster::start`] brings it back
//!   on the same port and data;
//! - dropping it stops the server (`-m immediate`: throwaway data) and
//!   removes the directory, also when the caller fails (not on SIGKILL).
//!
//! [`PgCluster::start_new`] is the tests' door (a missing PostgreSQL 15 is a
//! visible skip, or a failure under `SWITCHBOARD_REQUIRE_POSTGRES`; anything
//! else that fails panics); [`PgCluster::launch`] the benchmarks' (errors
//! are returned). The methods block (they run `pg_ctl`): call them from a
//! multi-thread runtime (`block_in_place`, `spawn_blocking`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, ensure};

use super::REQUIRE_PG_ENV;

/// Where Debian and Ubuntu put the PostgreSQL 15 server binaries.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// How many free ports a first start tries.
const PORT_ATTEMPTS: usize = 5;

pub struct PgCluster {
    /// Owned by `postgres` when run as root: `data/`, `log`, and the Unix socket.
    dir: tempfile::TempDir,
    /// The PostgreSQL binaries (`initdb`, `pg_ctl`).
    bin: PathBuf,
    pub port: u16,
    running: AtomicBool,
    as_postgres: bool,
}

impl PgCluster {
    /// A new cluster from [`PG_BIN`], initialised and started; `None` (with
    /// a visible message) when PostgreSQL 15 is not installed and the
    /// PostgreSQL suite is not required. Panics on any other failure.
    pub fn start_new(test_name: &str) -> Option<PgCluster> {
        let initdb = Path::new(PG_BIN).join("initdb");
        if !initdb.exists() {
            assert!(
                std::env::var_os(REQUIRE_PG_ENV).is_none(),
                "{REQUIRE_PG_ENV} is set but {} is missing: the throwaway PostgreSQL tests must run",
                initdb.display()
            );
            eprintln!(
                "SKIPPED (throwaway PostgreSQL): {test_name}: {} is missing",
                initdb.display()
            );
            return None;
        }
        Some(
            PgCluster::launch(Path::new(PG_BIN))
                .unwrap_or_else(|e| panic!("a throwaway PostgreSQL cluster: {e:#}")),
        )
    }

    /// A new cluster from the binaries in `bin`, initialised and started.
    pub fn launch(bin: &Path) -> Result<PgCluster> {
        ensure!(
            bin.join("initdb").exists(),
            "no initdb in {}",
            bin.display()
        );
        let dir = tempfile::Builder::new()
            .prefix("sb-pg-")
            .tempdir()
            .context("a temporary directory for the cluster")?;
        let as_postgres = rustix::process::getuid().is_root();
        if as_postgres {
            let chown = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(dir.path())
                .output()
                .context("run chown")?;
            ensure!(chown.status.success(), "chown postgres: {chown:?}");
        }
        // From here on, Drop cleans up whatever was made.
        let mut cluster = PgCluster {
            dir,
            bin: bin.to_owned(),
            port: 0,
            running: AtomicBool::new(false),
            as_postgres,
        };
        let data = cluster.data();
        cluster.run(
            "initdb",
            &[
                "-D",
                data.to_str().context("a UTF-8 temporary directory")?,
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
        )?;
        // A port can be taken between the check and the start: try a few.
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            cluster.port = free_port()?;
            match cluster.try_start() {
                Ok(()) => return Ok(cluster),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow!("pg_ctl start failed")))
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        self.url_as("postgres")
    }

    /// The same database as another role (see [`PgCluster::sql`]).
    pub fn url_as(&self, role: &str) -> String {
        format!("postgres://{role}@127.0.0.1:{}/postgres", self.port)
    }

    /// The cluster's directory (`data/`, `log`, the socket).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `sql` as `postgres` (e.g. `CREATE ROLE b LOGIN SUPERUSER`,
    /// `ALTER ROLE b NOLOGIN`); panics if it fails.
    pub async fn sql(&self, sql: &str) {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.url())
            .await
            .expect("connect to the throwaway cluster");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let _ = conn.close().await;
    }

    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    /// `pg_ctl start` on the same port and data; returns once it accepts
    /// connections. Panics if it does not start.
    pub fn start(&self) {
        assert!(!self.is_running(), "already running");
        self.try_start().unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// `pg_ctl stop -m fast`: every session is terminated, then the server
    /// exits; returns once it has. Panics if it does not stop.
    pub fn stop(&self) {
        assert!(self.is_running(), "not running");
        let out = self
            .stop_command("fast")
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert!(
            out.status.success(),
            "pg_ctl stop: {out:?}\nserver log:\n{}",
            self.log_text()
        );
        self.running.store(false, Ordering::SeqCst);
    }

    /// [`stop`](Self::stop), then [`start`](Self::start).
    pub fn restart(&self) {
        self.stop();
        self.start();
    }

    /// The server's own log (for a failure message).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn try_start(&self) -> Result<()> {
        let data = self.data();
        let log = self.dir.path().join("log");
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {}",
            self.port,
            self.dir.path().display()
        );
        let started = Instant::now();
        let out = self.try_run(
            "pg_ctl",
            &[
                "start",
                "-w",
                "-t",
                "60",
                "-D",
                data.to_str().context("a UTF-8 temporary directory")?,
                "-l",
                log.to_str().context("a UTF-8 temporary directory")?,
                "-o",
                &options,
            ],
        )?;
        ensure!(
            out.status.success(),
            "pg_ctl start on port {}: {out:?}\nserver log:\n{}",
            self.port,
            self.log_text()
        );
        self.running.store(true, Ordering::SeqCst);
        eprintln!(
            "throwaway PostgreSQL on port {} started in {:?}",
            self.port,
            started.elapsed()
        );
        Ok(())
    }

    fn stop_command(&self, mode: &str) -> Result<Output> {
        let data = self.data();
        self.try_run(
            "pg_ctl",
            &[
                "stop",
                "-w",
                "-t",
                "60",
                "-m",
                mode,
                "-D",
                &data.to_string_lossy(),
            ],
        )
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<()> {
        let out = self.try_run(program, args)?;
        ensure!(out.status.success(), "{program} {args:?}: {out:?}");
        Ok(())
    }

    fn try_run(&self, program: &str, args: &[&str]) -> Result<Output> {
        let program = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        command
            .args(args)
            // Nothing from the environment steers these tools elsewhere.
            .env_remove("PGDATA")
            .env_remove("PGPORT")
            .env_remove("PGHOST")
            .env("LC_ALL", "C")
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("run {}", program.display()))
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if self.is_running() {
            // Throwaway data: no need to wait for a checkpoint.
            let _ = self.stop_command("immediate");
        }
        // The TempDir removes the directory (root may remove postgres' files;
        // without root they are ours).
    }
}

/// A port nothing listens on now (the kernel's choice for port 0).
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
