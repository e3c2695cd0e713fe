//! The real binary: `serve` on the zero-config default, health and readiness,
//! the SQLite server lock, graceful shutdown, `migrate` and `version`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::server::{BIN, Process as Server};
use switchboard::testkit::{PG_ENV, REQUIRE_PG_ENV, ThrowawayDatabase};

async fn get(url: &str) -> (u16, serde_json::Value) {
    let resp = reqwest::get(url).await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(serde_json::Value::Null))
}

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .output()
        .expect("run switchboard")
}

#[tokio::test]
async fn zero_config_serve_is_healthy_and_ready_on_the_default_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    assert_eq!(get(&server.url("/healthz")).await.0, 200);
    let (status, body) = get(&server.url("/readyz")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ready");
    assert!(
        dir.path().join("switchboard.db").exists(),
        "the default database file is ./switchboard.db"
    );
    server.signal("TERM");
    assert!(server.wait_exit(Duration::from_secs(15)).success());
}

#[tokio::test]
async fn a_second_server_on_the_same_sqlite_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let first = Server::start(dir.path(), &["--database", "shared.db"]);
    let out = run(
        dir.path(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database",
            "shared.db",
        ],
    );
    assert!(!out.status.success(), "the second server must not start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("shared.db"), "names the file: {stderr}");
    assert!(
        stderr.contains(&format!("pid {}", first.pid())),
        "names the holder: {stderr}"
    );
    // The first is unaffected.
    assert_eq!(get(&first.url("/readyz")).await.0, 200);
}

#[tokio::test]
async fn sigint_and_sigterm_shut_down_gracefully_with_exit_code_zero() {
    for signal in ["INT", "TERM"] {
        let dir = tempfile::tempdir().unwrap();
        let mut server = Server::start(dir.path(), &[]);
        assert_eq!(get(&server.url("/healthz")).await.0, 200);
        server.signal(signal);
        let status = server.wait_exit(Duration::from_secs(15));
        assert_eq!(status.code(), Some(0), "SIG{signal}: {}", server.log_text());
        assert!(server.log_text().contains("switchboard stopped"));
        // The lock is released: a new server can take the same file at once.
        let mut again = Server::start(dir.path(), &[]);
        again.signal("TERM");
        assert!(again.wait_exit(Duration::from_secs(15)).success());
    }
}

#[tokio::test]
async fn readyz_reports_503_when_the_schema_is_not_current() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--database", "s.db"]);
    assert_eq!(get(&server.url("/readyz")).await.0, 200);
    // Someone rolls the ledger back behind the server's back.
    let db = dir.path().join("s.db");
    let mut conn = sqlite_conn(&db).await;
    sqlx::query("DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)")
        .execute(&mut conn)
        .await
        .unwrap();
    let (status, body) = get(&server.url("/readyz")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["reason"], "schema_not_current");
    // Liveness is unaffected.
    assert_eq!(get(&server.url("/healthz")).await.0, 200);
}

async fn sqlite_conn(path: &Path) -> sqlx::SqliteConnection {
    use sqlx::Connection;
    sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap()
}

#[test]
fn migrate_creates_the_schema_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let first = run(dir.path(), &["migrate", "--database", "m.db"]);
    assert!(first.status.success(), "{first:?}");
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.contains("applied migration(s) 1, 2, 3"), "{stdout}");
    let second = run(dir.path(), &["migrate", "--database", "m.db"]);
    assert!(second.status.success());
    assert!(String::from_utf8_lossy(&second.stdout).contains(&format!(
        "already at version {}",
        switchboard::store::migrate::latest_version(switchboard::store::dialect::Dialect::Sqlite)
    )));
}

#[test]
fn version_prints_the_binary_and_schema_versions() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["version"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with(&format!("switchboard {}", env!("CARGO_PKG_VERSION"))));
    assert!(stdout.contains("schema version"));
}

#[test]
fn bad_configuration_exits_1_and_usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad_db = run(dir.path(), &["serve", "--database", "mysql://nope"]);
    assert_eq!(bad_db.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad_db.stderr).contains("--database"));
    let bad_interval = run(
        dir.path(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--maintenance-interval",
            "soon",
        ],
    );
    assert_eq!(bad_interval.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad_interval.stderr).contains("maintenance-interval"));
    let usage = run(dir.path(), &["serve", "--no-such-flag"]);
    assert_eq!(usage.status.code(), Some(2));
}

#[tokio::test]
async fn serves_on_postgresql_when_configured() {
    let Ok(admin_url) = std::env::var(PG_ENV) else {
        assert!(std::env::var_os(REQUIRE_PG_ENV).is_none());
        crate::support::skips::skipped(
            crate::support::skips::Kind::PostgreSql,
            "serves_on_postgresql_when_configured",
            &format!("set {PG_ENV}"),
        );
        return;
    };
    let database = ThrowawayDatabase::create(&admin_url, "sb_bin")
        .await
        .unwrap();
    let url = database.url.clone();
    let dir = tempfile::tempdir().unwrap();
    {
        let mut server = Server::start(dir.path(), &["--database", &url]);
        let (status, body) = get(&server.url("/readyz")).await;
        assert_eq!(status, 200, "{body}");
        assert!(server.log_text().contains("backend=Postgres"));
        server.signal("TERM");
        assert!(server.wait_exit(Duration::from_secs(15)).success());
    }
    database.drop_database().await.unwrap();
}
