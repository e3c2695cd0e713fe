//! A throwaway PostgreSQL 15 cluster for one test: its own data directory,
//! its own port on 127.0.0.1, stopped and started at will. The fault tests
//! (`cluster_faults`) stop the database under running servers; the shared
//! PostgreSQL (`SWITCHBOARD_TEST_DATABASE_URL`) is never touched.
//!
//! - `initdb` as the user `postgres` (PostgreSQL refuses to run as root: the
//!   temporary directory is chowned to it and every command runs through
//!   `runuser -u postgres --` when the tests run as root), trust
//!   authentication, superuser `postgres`;
//! - `pg_ctl start` with `-c listen_addresses=127.0.0.1 -k <dir>` on a free
//!   port, everything else at its default;
//! - [`PgCluster::stop`] is a fast shutdown (`-m fast`: sessions are
//!   terminated, as in a real restart), [`PgCluster::start`] brings it back
//!   on the same port and data;
//! - dropping it stops the server and removes the directory.
//!
//! Without the PostgreSQL 15 binaries a test prints `SKIPPED (throwaway
//! PostgreSQL): …` and passes, unless `SWITCHBOARD_REQUIRE_POSTGRES` is set.
//!
//! The methods block (they run `pg_ctl`): call them from a multi-thread
//! runtime, as the tests do.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::REQUIRE_PG_ENV;

/// Where Debian and Ubuntu put the PostgreSQL 15 server binaries.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

pub struct PgCluster {
    /// Owned by `postgres`: `data/`, `log`, and the Unix socket.
    dir: tempfile::TempDir,
    pub port: u16,
    running: AtomicBool,
    as_postgres: bool,
}

impl PgCluster {
    /// A new cluster, initialised and started; `None` (with a visible
    /// message) when PostgreSQL 15 is not installed and the PostgreSQL suite
    /// is not required.
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
        let dir = tempfile::Builder::new()
            .prefix("sb-pg-")
            .tempdir()
            .expect("temp dir");
        let as_postgres = is_root();
        if as_postgres {
            let chown = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(dir.path())
                .output()
                .expect("run chown");
            assert!(chown.status.success(), "chown postgres: {chown:?}");
        }
        let cluster = PgCluster {
            dir,
            port: free_port(),
            running: AtomicBool::new(false),
            as_postgres,
        };
        let data = cluster.data();
        cluster.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
        );
        cluster.start();
        Some(cluster)
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        self.url_as("postgres")
    }

    /// The same database as another role (see [`PgCluster::sql`]).
    pub fn url_as(&self, role: &str) -> String {
        format!("postgres://{role}@127.0.0.1:{}/postgres", self.port)
    }

    /// Runs `sql` as `postgres` (e.g. `CREATE ROLE b LOGIN SUPERUSER`,
    /// `ALTER ROLE b NOLOGIN`).
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
    /// connections.
    pub fn start(&self) {
        assert!(!self.is_running(), "already running");
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
                data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &options,
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start: {out:?}\nserver log:\n{}",
            self.log_text()
        );
        self.running.store(true, Ordering::SeqCst);
        eprintln!(
            "throwaway PostgreSQL on port {} started in {:?}",
            self.port,
            started.elapsed()
        );
    }

    /// `pg_ctl stop -m fast`: every session is terminated, then the server
    /// exits; returns once it has.
    pub fn stop(&self) {
        assert!(self.is_running(), "not running");
        let out = self.stop_command("fast");
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

    fn stop_command(&self, mode: &str) -> Output {
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
                data.to_str().unwrap(),
            ],
        )
    }

    fn run(&self, program: &str, args: &[&str]) {
        let out = self.try_run(program, args);
        assert!(out.status.success(), "{program} {args:?}: {out:?}");
    }

    fn try_run(&self, program: &str, args: &[&str]) -> Output {
        let program = Path::new(PG_BIN).join(program);
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
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", program.display()))
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

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// A port nothing listens on now (the kernel's choice for port 0).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().unwrap().port()
}
