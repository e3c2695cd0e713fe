//! The first start's secret, with the real binary: how the first human's
//! token reaches the operator without reaching a log collector.
//!
//! - stderr not a terminal (a pipe here) → a 0600 file beside the database,
//!   only its path logged;
//! - `--log-format json` → the same, and every stderr line is JSON;
//! - `SWITCHBOARD_BOOTSTRAP_TOKEN` → that token works, nothing is printed;
//! - a terminal with text logs → the banner (run under `script`, a pty).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::server::{Process, find_token, serve_command};

async fn me_status(server: &Process, token: &str) -> u16 {
    reqwest::Client::new()
        .get(server.url("/api/v1/me"))
        .bearer_auth(token)
        .send()
        .await
        .expect("request")
        .status()
        .as_u16()
}

fn assert_mode_0600(path: &Path) {
    let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", path.display());
}

/// A token of the minted shape, made here.
fn orchestrator_token() -> String {
    format!(
        "sbh_{}",
        "Zq3-_x".repeat(8).chars().take(43).collect::<String>()
    )
}

#[tokio::test]
async fn piped_stderr_writes_a_0600_file_beside_the_database_and_logs_only_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Process::start(dir.path(), &[]);
    let expected = dir.path().join("switchboard.db.bootstrap-token");
    let logged = server.bootstrap_token_file().expect("the path is logged");
    assert_eq!(logged, expected.canonicalize().unwrap());
    assert_mode_0600(&expected);
    let token = std::fs::read_to_string(&expected)
        .unwrap()
        .trim()
        .to_owned();
    assert!(token.starts_with("sbh_") && token.len() == 47, "{token}");
    assert_eq!(me_status(&server, &token).await, 200);

    let log = server.log_text();
    assert!(!log.contains(&token), "the token is on stderr:\n{log}");
    assert_eq!(find_token(&log, "sbh_"), None, "{log}");
    assert!(!log.contains("Board"), "no board is advertised:\n{log}");
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("bootstrap-token"))
        .collect();
    assert_eq!(names, vec!["switchboard.db.bootstrap-token"]);

    // A second start of a database with a human: no new token anywhere.
    assert!(server.stop().success());
    std::fs::remove_file(&expected).unwrap();
    let mut again = Process::start(dir.path(), &[]);
    assert_eq!(again.bootstrap_token_file(), None);
    assert!(!expected.exists());
    assert_eq!(me_status(&again, &token).await, 200);
    assert!(again.stop().success());
}

#[tokio::test]
async fn json_logs_stay_json_and_the_token_goes_to_the_named_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secrets").join("first-token");
    std::fs::create_dir(dir.path().join("secrets")).unwrap();
    let mut server = Process::start(
        dir.path(),
        &[
            "--log-format",
            "json",
            "--bootstrap-token-file",
            file.to_str().unwrap(),
        ],
    );
    assert_mode_0600(&file);
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert_eq!(me_status(&server, &token).await, 200);
    assert!(!dir.path().join("switchboard.db.bootstrap-token").exists());
    assert!(server.stop().success());

    let lines = server.log_lines();
    assert!(lines.len() > 2, "{lines:?}");
    for line in &lines {
        let parsed: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a stderr line is not JSON ({e}): {line}"));
        assert!(!line.contains(&token), "the token is logged: {line}");
        if let Some(path) = parsed["fields"]["token_file"].as_str() {
            assert_eq!(Path::new(path), file.canonicalize().unwrap());
        }
    }
    assert!(
        lines.iter().any(|l| l.contains("token_file")),
        "the path is logged"
    );
}

#[tokio::test]
async fn an_orchestrator_supplied_token_works_and_nothing_is_printed() {
    let dir = tempfile::tempdir().unwrap();
    let token = orchestrator_token();
    let mut command = serve_command(dir.path());
    command.env("SWITCHBOARD_BOOTSTRAP_TOKEN", &token);
    let mut server = Process::spawn(command);
    assert_eq!(me_status(&server, &token).await, 200);
    assert_eq!(server.bootstrap_token_file(), None);
    assert!(!dir.path().join("switchboard.db.bootstrap-token").exists());
    assert!(server.stop().success());
    let log = server.log_text();
    assert!(!log.contains(&token), "{log}");
    assert_eq!(find_token(&log, "sbh_"), None, "{log}");
    assert!(!log.contains("first start on an empty database"), "{log}");
}

#[test]
fn a_malformed_bootstrap_token_refuses_to_start_and_writes_nothing() {
    for bad in [
        "sbh_short".to_owned(),
        format!("sbk_{}", "a".repeat(43)),
        format!("sbh_{}!", "a".repeat(42)),
        format!(" sbh_{} x", "a".repeat(43)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = serve_command(dir.path())
            .env("SWITCHBOARD_BOOTSTRAP_TOKEN", &bad)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad:?}: {stderr}");
        assert!(stderr.contains("SWITCHBOARD_BOOTSTRAP_TOKEN"), "{stderr}");
        assert!(!stderr.contains(&bad), "the value is echoed: {stderr}");
        assert!(
            !dir.path().join("switchboard.db").exists(),
            "{bad:?}: nothing is created"
        );
    }
}

/// Runs `switchboard serve ARGS` in `dir` under `script` (util-linux), which
/// gives it a pseudo-terminal, until it is serving; returns what it showed.
fn serve_on_a_terminal(dir: &Path, args: &[&str]) -> String {
    let mut serve = serve_command(dir);
    serve.args(args);
    let program = serve.get_program().to_string_lossy().into_owned();
    let args: Vec<String> = serve
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut child = Command::new("script")
        .current_dir(dir)
        .args([
            "-qfec",
            // `exec`: the server is `script`'s own child, found by its pid below.
            &format!("exec {program} {}", args.join(" ")),
            "/dev/null",
        ])
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .env_remove("SWITCHBOARD_LOG_FORMAT")
        .env_remove("SWITCHBOARD_BOOTSTRAP_TOKEN")
        .env_remove("SWITCHBOARD_BOOTSTRAP_TOKEN_FILE")
        .env("SWITCHBOARD_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run script (util-linux)");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut stdout = stdout;
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while Instant::now() < deadline && !String::from_utf8_lossy(&seen).contains("is serving") {
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.extend(chunk);
        }
    }
    // The server is `script`'s child (`exec`). Stop it by its pid: closing the
    // terminal would hang it up only where SIGHUP is not ignored (under
    // `nohup`, it is, and the server outlived the test).
    for server in children_of(child.id()) {
        let _ = rustix::process::kill_process(server, rustix::process::Signal::TERM);
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(text.contains("is serving"), "{text}");
    text
}

/// The processes whose parent is `parent` (Linux's `/proc`).
fn children_of(parent: u32) -> Vec<rustix::process::Pid> {
    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .filter_map(rustix::process::Pid::from_raw)
        .collect()
}

/// On a terminal with text logs, a person sees the banner: the token, the
/// file it is also in (where `login` on this machine finds it), a `login`
/// that needs no terminal and one for before the install (never the token
/// on a command line), the board.
#[test]
fn a_terminal_gets_the_banner_without_a_token_on_a_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = serve_on_a_terminal(dir.path(), &[]);
    let token = find_token(&text, "sbh_").expect("the banner shows the token");
    let file = dir.path().join("switchboard.db.bootstrap-token");
    assert_mode_0600(&file);
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
    // `script` writes the terminal's CR LF line ends.
    let text = text.replace("\r\n", "\n");
    assert!(
        text.contains(&format!(
            "It is also in {} (mode 0600)",
            file.canonicalize().unwrap().display()
        )),
        "{text}"
    );
    // Run where the server runs, the short form finds the file itself.
    assert!(
        text.contains("Sign in:  switchboard login http://127.0.0.1:"),
        "{text}"
    );
    assert!(text.contains("cargo run --release -- login"), "{text}");
    assert!(!text.contains(&format!("--token {token}")), "{text}");
    assert!(!text.contains("--token sbh_"), "{text}");
    assert!(
        text.contains("Board:    http://127.0.0.1:"),
        "the board is advertised:\n{text}"
    );
}

/// JSON logs on a terminal are still for a collector: the token goes to the
/// file, and every line on the terminal is JSON.
#[test]
fn json_logs_on_a_terminal_still_write_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = serve_on_a_terminal(dir.path(), &["--log-format", "json"]);
    assert_eq!(find_token(&text, "sbh_"), None, "{text}");
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let parsed: Result<serde_json::Value, _> = serde_json::from_str(line);
        assert!(parsed.is_ok(), "not JSON on the terminal: {line:?}");
    }
    let file = dir.path().join("switchboard.db.bootstrap-token");
    assert_mode_0600(&file);
    assert!(std::fs::read_to_string(&file).unwrap().starts_with("sbh_"));
}
