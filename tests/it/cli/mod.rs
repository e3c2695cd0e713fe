//! The command-line client end to end: the real binary serving, and the real
//! binary as its client (`login`, `endpoint`, `todo`, `webhook`, `admin`…).
//! Every client run gets its own `SWITCHBOARD_CONFIG_DIR`, so no test reads
//! or writes the real home.

mod onboarding;
mod shift;
mod tls;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::server::{BIN, Process};

/// A `switchboard serve` child on an OS-chosen port, with the first-start
/// token it printed on stderr.
struct Server {
    _process: Process,
    url: String,
    first_token: String,
}

impl Server {
    fn start(dir: &Path, args: &[&str]) -> Server {
        let process = Process::start(
            dir,
            &[
                // The flows below write faster than a person would.
                &["--api-write-rate", "1000", "--api-read-rate", "1000"][..],
                args,
            ]
            .concat(),
        );
        Server {
            url: format!("http://{}", process.addr),
            first_token: process.first_token().expect("first start prints a token"),
            _process: process,
        }
    }
}

/// Runs the CLI in one working directory with one private config directory.
struct Client {
    dir: PathBuf,
    config_dir: PathBuf,
}

impl Client {
    fn new(dir: &Path) -> Client {
        Client {
            dir: dir.to_owned(),
            config_dir: dir.join("config"),
        }
    }

    fn credentials_file(&self) -> PathBuf {
        self.config_dir.join("credentials.json")
    }

    /// Runs `switchboard ARGS` non-interactively (stdin is not a terminal).
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .current_dir(&self.dir)
            .args(args)
            .env("SWITCHBOARD_CONFIG_DIR", &self.config_dir)
            .env_remove("SWITCHBOARD_DATABASE_URL")
            .env_remove("SWITCHBOARD_URL")
            .env_remove("SWITCHBOARD_TOKEN")
            .stdin(Stdio::null())
            .output()
            .expect("run switchboard")
    }

    /// Runs a command that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "switchboard {args:?} failed ({:?}):\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs a command with `--json` that must succeed; returns the parsed body.
    fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let stdout = self.ok(&args);
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"))
    }

    fn login(&self, server: &Server) {
        self.ok(&["login", &server.url, "--token", &server.first_token]);
    }

    /// Runs `switchboard ARGS` with `input` on its standard input.
    fn run_with_stdin(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new(BIN)
            .current_dir(&self.dir)
            .args(args)
            .env("SWITCHBOARD_CONFIG_DIR", &self.config_dir)
            .env_remove("SWITCHBOARD_URL")
            .env_remove("SWITCHBOARD_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run switchboard");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn login_vend_push_list_revoke_and_the_todo_is_a_dead_letter() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    let login = cli.ok(&["login", &server.url, "--token", &server.first_token]);
    assert!(login.contains("as admin"), "{login}");

    let vended = cli.json(&["endpoint", "vend", "reviewer", "-q", "inbox"]);
    let token = vended["token"].as_str().unwrap().to_owned();
    let slug = vended["slug"].as_str().unwrap().to_owned();
    assert!(token.starts_with("sbk_"), "{vended}");
    // A stable server name, and a .mcp.json block without the secret.
    assert_eq!(vended["server_name"], "switchboard-reviewer");
    assert_eq!(
        vended["mcp_json"]["mcpServers"]["switchboard-reviewer"]["headers"]["Authorization"],
        "Bearer ${SWITCHBOARD_TOKEN_SWITCHBOARD_REVIEWER}"
    );
    assert!(!vended["mcp_json"].to_string().contains(&token));
    let client = &vended["client"];
    assert_eq!(
        client["claude_mcp_add"],
        format!(
            "claude mcp add --transport http --scope local switchboard-reviewer {} \
             --header \"Authorization: Bearer {token}\"",
            vended["mcp_url"].as_str().unwrap()
        )
    );
    assert_eq!(
        client["claude_launch"],
        "claude --dangerously-load-development-channels server:switchboard-reviewer"
    );
    assert!(
        client["codex_toml"]
            .as_str()
            .unwrap()
            .contains("bearer_token_env_var = \"SWITCHBOARD_TOKEN_SWITCHBOARD_REVIEWER\""),
        "{client}"
    );
    let prompt = switchboard::domain::client_setup::UNATTENDED_PROMPT;
    let unattended = format!("claude -p \"{prompt}\" --allowedTools \"mcp__switchboard-reviewer\"");
    assert_eq!(client["claude_unattended"], unattended.as_str());
    let work = format!(
        "switchboard work {} --token-env SWITCHBOARD_TOKEN_SWITCHBOARD_REVIEWER --",
        vended["mcp_url"].as_str().unwrap()
    );
    assert_eq!(client["work_claude"], format!("{work} {unattended}"));
    assert_eq!(
        client["work_codex"],
        format!("{work} codex exec --skip-git-repo-check \"{prompt}\"")
    );

    // The token is shown once: no list ever carries it.
    let list = cli.json(&["endpoint", "list"]);
    assert_eq!(list["endpoints"][0]["slug"], slug.as_str());
    assert!(!list.to_string().contains(&token));
    let table = cli.ok(&["endpoint", "list"]);
    assert!(table.starts_with("SLUG\t"), "{table}");
    assert!(table.contains(&slug), "{table}");
    assert!(!table.contains("sbk_"), "{table}");
    // stdout is a pipe: tab-separated, every row as many cells as the
    // header, and no padding around any cell.
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert_eq!(rows[0].len(), rows[1].len(), "{table}");
    assert!(rows[1].contains(&slug.as_str()), "{table}");
    assert!(
        rows.iter().flatten().all(|cell| cell.trim() == *cell),
        "{table:?}"
    );

    let pushed = cli.json(&[
        "todo",
        "push",
        &slug,
        "Review PR 12",
        "--payload",
        "{\"pr\":12}",
    ]);
    assert_eq!(pushed["created"], true, "{pushed}");
    let id = pushed["id"].as_str().unwrap().to_owned();
    let todos = cli.json(&["todo", "list", "--endpoint", &slug]);
    assert_eq!(todos["todos"][0]["id"], id.as_str(), "{todos}");
    assert_eq!(todos["todos"][0]["state"], "pending");
    let table = cli.ok(&["todo", "list"]);
    assert!(
        table.contains(&id) && table.contains("Review PR 12"),
        "{table}"
    );

    let revoked = cli.json(&["endpoint", "revoke", &slug, "-y"]);
    assert_eq!(revoked["state"], "revoked", "{revoked}");
    let again = cli.run(&["endpoint", "revoke", &slug, "-y"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("error: conflict:"),
        "{}",
        stderr(&again)
    );

    let todo = cli.json(&["todo", "show", &id]);
    assert_eq!(todo["dead_letter"], true, "{todo}");
    assert_eq!(todo["result"]["error"], "endpoint_revoked", "{todo}");
    assert_eq!(todo["payload"]["pr"], 12);
    let dead = cli.json(&["todo", "list", "--dead-letter"]);
    assert_eq!(dead["todos"][0]["id"], id.as_str());

    // A 204 prints `{}` under --json.
    assert_eq!(
        cli.ok(&["endpoint", "delete", &slug, "--json"]).trim(),
        "{}"
    );
}

#[test]
fn the_credentials_file_is_private_and_logout_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    let file = cli.credentials_file();
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let status = cli.ok(&["status"]);
    assert!(status.contains(&server.url), "{status}");
    assert!(status.contains("admin"), "{status}");
    assert!(status.contains("ready"), "{status}");
    assert!(!status.contains(&server.first_token), "{status}");

    let out = cli.ok(&["logout"]);
    assert!(out.contains("Logged out"), "{out}");
    assert!(!file.exists());
    // Without a login, client commands fail plainly.
    let out = cli.run(&["agent", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not logged in"), "{}", stderr(&out));
}

#[test]
fn login_with_token_reads_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    // One line, surrounding whitespace trimmed, as from `< token-file`.
    let out = cli.run_with_stdin(
        &["login", &server.url, "--with-token"],
        &format!("  {}  \n", server.first_token),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("as admin"), "{stdout}");
    assert!(!stdout.contains(&server.first_token), "{stdout}");
    assert!(cli.credentials_file().exists());
    let me = cli.json(&["status"]);
    assert_eq!(me["me"]["name"], "admin", "{me}");

    // Nothing on stdin: a usage error that says how, and nothing saved.
    let other = Client::new(&dir.path().join("other"));
    std::fs::create_dir_all(&other.dir).unwrap();
    let out = other.run_with_stdin(&["login", &server.url, "--with-token"], "");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--with-token"), "{}", stderr(&out));
    assert!(!other.credentials_file().exists());
}

#[test]
fn completions_for_every_shell() {
    let dir = tempfile::tempdir().unwrap();
    let cli = Client::new(dir.path());
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = cli.ok(&["completions", shell]);
        assert!(script.contains("switchboard"), "{shell}: {script}");
        assert!(script.contains("vend"), "{shell} completes subcommands");
    }
    let out = cli.run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_bad_token_at_login_exits_1_and_saves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    let bad = format!("sbh_{}", "A".repeat(43));
    let out = cli.run(&["login", &server.url, "--token", &bad]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("unauthenticated"), "{}", stderr(&out));
    assert!(!stderr(&out).contains(&bad), "never echo a token");
    assert!(!cli.credentials_file().exists());
}

#[test]
fn admin_commands_work_beside_a_running_server_and_their_token_works() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--database", "shared.db"]);
    let cli = Client::new(dir.path());
    let human = cli.json(&[
        "admin",
        "human",
        "create",
        "alice",
        "--database",
        "shared.db",
    ]);
    assert_eq!(human["name"], "alice");
    let issued = cli.json(&[
        "admin",
        "token",
        "create",
        "alice",
        "--label",
        "laptop",
        "--expires-in",
        "30d",
        "--database",
        "shared.db",
    ]);
    let token = issued["token"].as_str().unwrap();
    assert!(token.starts_with("sbh_"), "{issued}");
    assert_eq!(issued["label"], "laptop");

    // Flags alone work without a saved login.
    cli.json(&[
        "endpoint",
        "vend",
        "admins-bot",
        "--url",
        &server.url,
        "--token",
        &server.first_token,
    ]);
    cli.ok(&["login", &server.url, "--token", token]);
    let me = cli.json(&["status"]);
    assert_eq!(me["me"]["name"], "alice", "{me}");
    assert_eq!(me["readyz"]["status"], "ready", "{me}");
    // Alice sees none of admin's things, and can make her own.
    cli.json(&["endpoint", "vend", "alices-bot"]);
    let list = cli.json(&["agent", "list"]);
    let agents = list["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{list}");
    assert_eq!(agents[0]["name"], "alices-bot");
    // The same name twice is a plain failure, not a crash.
    let again = cli.run(&[
        "admin",
        "human",
        "create",
        "alice",
        "--database",
        "shared.db",
    ]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn agent_and_webhook_commands_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);

    let agent = cli.json(&[
        "agent",
        "register",
        "builder",
        "--kind",
        "task",
        "--interval",
        "10m",
    ]);
    assert_eq!(agent["expected_interval_seconds"], 600, "{agent}");
    let edited = cli.json(&[
        "agent",
        "edit",
        "builder",
        "--clear-interval",
        "--description",
        "CI",
    ]);
    assert_eq!(edited["expected_interval_seconds"], Value::Null, "{edited}");
    assert_eq!(edited["description"], "CI");
    let shown = cli.ok(&["agent", "show", "builder"]);
    assert!(shown.contains("task") && shown.contains("CI"), "{shown}");

    let vended = cli.json(&[
        "endpoint",
        "vend",
        "builder",
        "--lease-ttl",
        "10m",
        "--webhook",
    ]);
    assert!(vended["webhook"]["ingest_url"].is_string(), "{vended}");
    let slug = vended["slug"].as_str().unwrap();
    let edited = cli.json(&["endpoint", "edit", slug, "--lease-ttl", "default"]);
    assert_eq!(edited["default_lease_ttl_seconds"], Value::Null, "{edited}");

    let created = cli.json(&["webhook", "create", slug, "--signed"]);
    assert!(created["signing_secret"].is_string(), "{created}");
    let id = created["id"].as_str().unwrap();
    let listed = cli.json(&["webhook", "list", slug]);
    assert_eq!(listed["webhooks"].as_array().unwrap().len(), 2, "{listed}");
    let table = cli.ok(&["webhook", "list", slug]);
    assert!(table.contains(id), "{table}");
    assert!(
        !table.contains(created["ingest_url"].as_str().unwrap()),
        "a webhook URL is shown once"
    );
    let rotated = cli.json(&["webhook", "rotate", id]);
    assert_ne!(rotated["ingest_url"], created["ingest_url"]);
    assert_eq!(cli.ok(&["webhook", "delete", id, "--json"]).trim(), "{}");
}

/// `webhook senders` quarantines a stranger's delivery; `webhook deliveries`
/// lists it; `delivery show | replay | discard | release` act on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn senders_quarantine_and_the_delivery_commands() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    let vended = cli.json(&["endpoint", "vend", "triage", "--webhook"]);
    let hook = vended["webhook"]["id"].as_str().unwrap().to_owned();
    let url = vended["webhook"]["ingest_url"].as_str().unwrap().to_owned();
    let ingest = format!(
        "{}{}",
        server.url,
        &url[url.find("/webhooks/w/").unwrap()..]
    );

    let trusted = cli.json(&[
        "webhook", "senders", &hook, "Alice", "bob", "--match", "author",
    ]);
    assert_eq!(
        trusted["senders"],
        serde_json::json!({"trust": ["alice", "bob"], "match": "author"})
    );
    let shown = cli.ok(&["webhook", "senders", &hook, "alice"]);
    assert!(shown.contains("trusts alice (by sender)"), "{shown}");
    let refused = cli.run(&["webhook", "senders", &hook, "everyone", "alice"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("everyone"),
        "{}",
        stderr(&refused)
    );

    let sent: Value = reqwest::Client::new()
        .post(&ingest)
        .json(&serde_json::json!({"title": "from a stranger", "sender": {"login": "mallory"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sent["delivery"]["decision"], "quarantined", "{sent}");
    let id = sent["delivery"]["id"].as_str().unwrap().to_owned();

    let listed = cli.json(&["webhook", "deliveries", &hook, "--decision", "quarantined"]);
    assert_eq!(listed["deliveries"][0]["id"], id.as_str(), "{listed}");
    let table = cli.ok(&["webhook", "deliveries", &hook]);
    assert!(
        table.contains(&id) && table.contains("quarantined") && table.contains("mallory"),
        "{table}"
    );
    let none = cli.ok(&["webhook", "deliveries", &hook, "--decision", "accepted"]);
    assert!(none.contains("No deliveries."), "{none}");
    let shown = cli.ok(&["delivery", "show", &id]);
    assert!(
        shown.contains("from a stranger") && shown.contains("\"sender\": \"mallory\""),
        "{shown}"
    );

    // Replayed with a new key: still a stranger, so quarantined again; discarded.
    let replayed = cli.json(&["delivery", "replay", &id, "--new-key"]);
    assert_eq!(
        replayed["delivery"]["decision"], "quarantined",
        "{replayed}"
    );
    assert_eq!(replayed["delivery"]["replay_of"], id.as_str());
    let again = replayed["delivery"]["id"].as_str().unwrap();
    let discarded = cli.ok(&["delivery", "discard", again]);
    assert!(discarded.contains("is discarded"), "{discarded}");

    let released = cli.ok(&["delivery", "release", &id]);
    assert!(
        released.contains("released") && released.contains("(created)"),
        "{released}"
    );
    let twice = cli.run(&["delivery", "release", &id]);
    assert_eq!(twice.status.code(), Some(1), "{}", stderr(&twice));
    let everyone = cli.ok(&["webhook", "senders", &hook, "everyone"]);
    assert!(everyone.contains("trusts everyone"), "{everyone}");
}

#[test]
fn hook_commands_add_list_test_enable_and_remove() {
    let dir = tempfile::tempdir().unwrap();
    // Without --allow-private-hooks: a loopback target is refused.
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    let vended = cli.json(&["endpoint", "vend", "notified"]);
    let slug = vended["slug"].as_str().unwrap();

    let added = cli.json(&["hook", "add", slug, "http://127.0.0.1:9/hook"]);
    let id = added["id"].as_str().unwrap();
    let secret = added["secret"].as_str().unwrap();
    assert!(
        id.starts_with("hk_") && secret.starts_with("whsec_"),
        "{added}"
    );
    let listed = cli.json(&["hook", "list", slug]);
    assert_eq!(listed["hooks"][0]["id"], id, "{listed}");
    assert!(
        !listed.to_string().contains(&secret[6..]),
        "the secret is shown once"
    );
    let table = cli.ok(&["hook", "list", slug]);
    assert!(table.contains(id) && table.contains("enabled"), "{table}");
    // `endpoint show` lists the hearers: no session yet, the hook.
    let shown = cli.ok(&["endpoint", "show", slug]);
    assert!(
        shown.contains("none on the instance that answered")
            && shown.contains(&format!("{id} http://127.0.0.1:9/hook (enabled)")),
        "{shown}"
    );

    // A test that is not received fails the command, and says why.
    let tested = cli.run(&["hook", "test", id]);
    assert_eq!(tested.status.code(), Some(1));
    let out = String::from_utf8_lossy(&tested.stdout);
    assert!(out.contains("refused"), "{out}");
    let table = cli.ok(&["hook", "list", slug]);
    assert!(table.contains("test refused"), "{table}");

    let enabled = cli.json(&["hook", "enable", id]);
    assert_eq!(enabled["state"], "enabled");
    let bad = cli.run(&["hook", "add", slug, "ftp://example.com/x"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("url"), "{}", stderr(&bad));
    assert_eq!(cli.ok(&["hook", "rm", id, "--json"]).trim(), "{}");
    let table = cli.ok(&["hook", "list", slug]);
    assert!(table.contains("No hooks."), "{table}");
}

#[test]
fn schedule_commands_add_list_pause_resume_and_remove() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    let vended = cli.json(&["endpoint", "vend", "scheduled"]);
    let slug = vended["slug"].as_str().unwrap();

    let added = cli.json(&[
        "schedule",
        "add",
        slug,
        "-q",
        "inbox",
        "--cron",
        "0 9 * * mon-fri",
        "--tz",
        "Europe/Berlin",
        "--catch-up",
        "none",
        "--payload",
        r#"{"n": 1}"#,
        "standup {date}",
    ]);
    let id = added["id"].as_str().unwrap();
    assert!(id.starts_with("sc_"), "{added}");
    assert_eq!(added["catch_up"], "none");
    assert_eq!(added["payload"]["n"], 1);
    assert!(added["next_at"].is_string(), "{added}");
    let table = cli.ok(&["schedule", "list", slug]);
    assert!(
        table.contains(id) && table.contains("Europe/Berlin") && table.contains("active"),
        "{table}"
    );
    let paused = cli.json(&["schedule", "pause", id]);
    assert_eq!(paused["paused"], true);
    assert!(cli.ok(&["schedule", "list", slug]).contains("paused"));
    let resumed = cli.json(&["schedule", "resume", id]);
    assert_eq!(resumed["paused"], false);
    let bad = cli.run(&["schedule", "add", slug, "--cron", "61 * * * *", "x"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("minute"), "{}", stderr(&bad));
    assert_eq!(cli.ok(&["schedule", "rm", id, "--json"]).trim(), "{}");
    let table = cli.ok(&["schedule", "list", slug]);
    assert!(table.contains("No schedules."), "{table}");
}

#[test]
fn endpoint_activity_prints_the_range_and_its_busy_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--activity-interval", "100ms"]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    let vended = cli.json(&["endpoint", "vend", "charted", "-q", "inbox", "-q", "ci"]);
    let slug = vended["slug"].as_str().unwrap();
    cli.ok(&["todo", "push", slug, "-q", "ci", "first"]);
    // Written down within a flush; read until it is (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let view = loop {
        let view = cli.json(&[
            "endpoint", "activity", slug, "--range", "day", "--queue", "ci",
        ]);
        if view["totals"]["created"] == 1 {
            break view;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never counted: {view}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(view["bucket_seconds"], 900);
    let text = cli.ok(&["endpoint", "activity", slug, "--queue", "ci"]);
    assert!(
        text.starts_with(&format!("{slug} / ci, last hour: 1 created, 0 completed")),
        "{text}"
    );
    assert_eq!(
        text.lines().count(),
        2,
        "the total and the one busy minute: {text}"
    );
    let bad = cli.run(&["endpoint", "activity", slug, "--range", "month"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("range"), "{}", stderr(&bad));
}

#[test]
fn a_saved_token_is_only_sent_to_its_own_server() {
    let dir = tempfile::tempdir().unwrap();
    let cli = Client::new(dir.path());
    std::fs::create_dir_all(&cli.config_dir).unwrap();
    std::fs::write(
        cli.credentials_file(),
        r#"{"url":"http://127.0.0.1:9","token":"sbh_saved"}"#,
    )
    .unwrap();
    let out = cli.run(&["agent", "list", "--url", "http://127.0.0.1:8"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("the saved login is for http://127.0.0.1:9"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cli = Client::new(dir.path());
    for args in [
        &["endpoint", "frobnicate"][..],
        &["todo", "list", "--limit", "many"],
        &["endpoint", "vend", "a", "--lease-ttl", "soon"],
        &["agent", "edit", "a"],
        // Revoking is not undoable: without a terminal to ask on, -y is required.
        &["endpoint", "revoke", "a-1234"],
        // No token and no terminal to prompt on.
        &["login", "http://127.0.0.1:9"],
    ] {
        let out = cli.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn vend_prints_setups_that_work_when_pasted_and_refuses_names_claude_cannot_take() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);

    let text = cli.ok(&["endpoint", "vend", "coder", "--name", "coder-main"]);
    for line in [
        "claude mcp add --transport http --scope local coder-main http://",
        "\"Authorization\": \"Bearer ${SWITCHBOARD_TOKEN_CODER_MAIN}\"",
        "export SWITCHBOARD_TOKEN_CODER_MAIN='sbk_",
        "claude --dangerously-load-development-channels server:coder-main",
        "[mcp_servers.coder-main]",
        "bearer_token_env_var = \"SWITCHBOARD_TOKEN_CODER_MAIN\"",
        "claude -p \"Work the switchboard queue",
        "--allowedTools \"mcp__coder-main\"",
        "--token-env SWITCHBOARD_TOKEN_CODER_MAIN -- claude -p \"",
        "--token-env SWITCHBOARD_TOKEN_CODER_MAIN -- codex exec --skip-git-repo-check \"",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    // The name is kept: the endpoint shows it later too.
    let list = cli.json(&["endpoint", "list"]);
    assert_eq!(list["endpoints"][0]["server_name"], "coder-main");

    // switchboard-<29 characters> is 41: one more than Claude's tool names allow.
    let long_agent = "a".repeat(29);
    let out = cli.run(&["endpoint", "vend", &long_agent]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("field: agent") && err.contains("at most 40"),
        "{err}"
    );
    let out = cli.run(&["endpoint", "vend", "ok", "--name", &"n".repeat(41)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("field: server_name"),
        "{}",
        stderr(&out)
    );
    // Refused means unchanged: neither agent exists.
    let agents = cli.json(&["agent", "list"]);
    let names: Vec<&str> = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["coder"], "{agents}");
}

#[test]
fn doctor_reports_a_healthy_setup_and_an_endpoint_nobody_listens_on() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());

    // Not logged in: a problem, with what to do.
    let out = cli.run(&["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(report.contains("switchboard login"), "{report}");

    cli.login(&server);
    let healthy = cli.ok(&["doctor"]);
    assert!(healthy.contains("ready (version"), "{healthy}");

    let vended = cli.json(&["endpoint", "vend", "reviewer"]);
    let slug = vended["slug"].as_str().unwrap();
    let out = cli.run(&["doctor", slug, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no session is attached: a problem"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["healthy"], false);
    let sessions = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "sessions")
        .expect("a sessions finding");
    assert_eq!(sessions["level"], "problem");
    assert!(
        sessions["fix"]
            .as_str()
            .unwrap()
            .contains("--dangerously-load-development-channels server:switchboard-reviewer"),
        "{sessions}"
    );
}

/// A session that reads its stream but never calls (what a Claude Code
/// started without the channels flag looks like) becomes deaf, `doctor` says
/// so and how to fix it, and its next request clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_never_answers_its_doorbells_is_deaf_until_it_calls() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        &["--unanswered-after", "1s", "--mcp-rate", "1000"],
    );
    let cli = Client::new(dir.path());
    cli.login(&server);
    let vended = cli.json(&["endpoint", "vend", "reviewer"]);
    let slug = vended["slug"].as_str().unwrap().to_owned();
    let mcp = crate::support::mcp::Mcp {
        http: crate::support::mcp::client(),
        url: vended["mcp_url"].as_str().unwrap().to_owned(),
        authorization: format!("Bearer {}", vended["token"].as_str().unwrap()),
    };
    let session = mcp.initialize().await;
    let mut stream = mcp.open_stream(&session).await;
    for n in 0..3 {
        cli.ok(&["todo", "push", &slug, &format!("unheard {n}")]);
        let bell = crate::support::mcp::next_event(&mut stream, Duration::from_secs(5), |v| {
            v["method"] == "notifications/claude/channel"
        })
        .await;
        assert!(bell.is_some(), "doorbell {n} was written");
    }
    // Every window passes with no request from the session.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let row = loop {
        let endpoint = cli.json(&["endpoint", "show", &slug]);
        let row = endpoint["sessions"]["list"][0].clone();
        if row["deaf_reason"] == "unanswered" {
            assert_eq!(endpoint["liveness"]["condition"], "deaf", "{endpoint}");
            break row;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never deaf: {endpoint}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(row["unanswered_doorbells"], 3, "{row}");

    let out = cli.run(&["doctor", &slug]);
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        report.contains("was rung 3 times with no request since"),
        "{report}"
    );
    // A client that is not Claude Code is pointed at what can wake it.
    assert!(
        report.contains("raw-test does not act on doorbells")
            && report.contains("switchboard work")
            && report.contains("switchboard hook add"),
        "{report}"
    );

    // Any request answers them all.
    mcp.rpc(&session, 9, "ping", serde_json::json!({}))
        .await
        .expect(200);
    let endpoint = cli.json(&["endpoint", "show", &slug]);
    assert_eq!(
        endpoint["sessions"]["list"][0]["deaf_reason"],
        Value::Null,
        "{endpoint}"
    );
    assert_eq!(endpoint["sessions"]["deaf"], 0);
    cli.ok(&["doctor", &slug]);
}

/// Runs `switchboard ARGS` on a pseudo-terminal (`script`), typing `answer`.
fn run_on_a_terminal(cli: &Client, args: &[&str], answer: &str) -> String {
    use std::io::Write;
    let command = std::iter::once(BIN)
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(&cli.dir)
        .env("SWITCHBOARD_CONFIG_DIR", &cli.config_dir)
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .env_remove("SWITCHBOARD_URL")
        .env_remove("SWITCHBOARD_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run script");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn cancel_and_retry_one_or_all_with_filters_and_a_confirmation() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    let slug = cli.json(&["endpoint", "vend", "deployer", "-q", "inbox"])["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    let push = |title: &str, kind: &str| {
        cli.json(&["todo", "push", &slug, title, "--kind", kind])["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let one = push("Deploy web 100%", "deploy");
    let two = push("Deploy api", "deploy");
    let three = push("Review docs", "review");

    // One by id.
    let cancelled = cli.json(&["todo", "cancel", &one]);
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    let again = cli.run(&["todo", "cancel", &one]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("conflict"), "{}", stderr(&again));
    let shown = cli.ok(&["todo", "show", &one]);
    assert!(shown.contains("cancelled by"), "{shown}");
    assert!(cli.ok(&["todo", "retry", &one]).contains("is pending"));

    // The list's new filters.
    let by_search = cli.json(&["todo", "list", "--search", "100%"]);
    assert_eq!(by_search["todos"].as_array().unwrap().len(), 1);
    assert_eq!(by_search["todos"][0]["id"], one.as_str());
    let by_kind = cli.json(&["todo", "list", "--kind", "deploy", "--source", "operator"]);
    assert_eq!(by_kind["todos"].as_array().unwrap().len(), 2);

    // --all without a terminal needs -y; filters need --all; nothing changed.
    for args in [
        &["todo", "cancel", "--all", "--kind", "deploy"][..],
        &["todo", "retry", "--all"],
        &["todo", "cancel", &three, "--kind", "deploy"],
        &["todo", "cancel"],
        &["todo", "cancel", &three, "--all", "-y"],
    ] {
        let out = cli.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    let refused = cli.run(&["todo", "cancel", "--all"]);
    assert!(
        stderr(&refused).contains("needs -y (--yes) when stdin is not a terminal"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        cli.json(&["todo", "list", "--state", "pending"])["todos"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // On a terminal: "n" changes nothing, "y" acts and prints the count.
    let declined = run_on_a_terminal(
        &cli,
        &["todo", "cancel", "--all", "--kind", "deploy"],
        "n\n",
    );
    assert!(
        declined.contains(
            "Cancel every pending, claimed or waiting todo of your todos with kind deploy?"
        ),
        "{declined}"
    );
    assert!(declined.contains("Nothing was cancelled."), "{declined}");
    assert_eq!(cli.json(&["todo", "show", &two])["state"], "pending");
    let accepted = run_on_a_terminal(
        &cli,
        &["todo", "cancel", "--all", "--kind", "deploy"],
        "y\n",
    );
    assert!(accepted.contains("Cancelled 2 todos."), "{accepted}");
    assert_eq!(cli.json(&["todo", "show", &three])["state"], "pending");

    // -y for scripts, --json with the total.
    let retried = cli.json(&["todo", "retry", "--all", "--state", "cancelled", "-y"]);
    assert_eq!(retried["count"], 2, "{retried}");
    assert_eq!(retried["more"], false);
    let all = cli.ok(&["todo", "cancel", "--all", "-y"]);
    assert!(all.contains("Cancelled 3 todos."), "{all}");
    let none = cli.ok(&["todo", "retry", "--all", "-y"]);
    assert!(none.contains("Retried 0 todos."), "nothing failed: {none}");
    let bad = cli.run(&["todo", "retry", "--all", "--state", "pending", "-y"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("state"), "{}", stderr(&bad));
}

#[test]
fn all_runs_batch_after_batch_until_nothing_more_matches() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    let endpoint = cli.json(&["endpoint", "vend", "bulk", "-q", "inbox"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // More than one batch (1 000), written straight into the server's database.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use switchboard::store::NewTodo;
        use switchboard::store::prelude::*;
        let store = crate::support::api::open_store(&dir.path().join("switchboard.db")).await;
        for n in 0..1_001 {
            store
                .create_todo(NewTodo::new(&endpoint, "inbox", format!("todo {n}")))
                .await
                .unwrap();
        }
    });
    let cancelled = cli.ok(&["todo", "cancel", "--all", "-y"]);
    assert!(cancelled.contains("Cancelled 1001 todos."), "{cancelled}");
    let retried = cli.json(&["todo", "retry", "--all", "--state", "cancelled", "-y"]);
    assert_eq!(retried["count"], 1_001);
    assert_eq!(retried["more"], false);
    assert_eq!(retried["ids"].as_array().unwrap().len(), 1_001);
}

#[test]
fn a_todo_is_deleted_for_good_after_a_confirmation() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    let slug = cli.json(&["endpoint", "vend", "janitor", "-q", "inbox"])["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = cli.json(&["todo", "push", &slug, "Sweep the floor"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A script must say -y; a person is asked, and "n" keeps it.
    let refused = cli.run(&["todo", "delete", &id]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("needs -y"),
        "{}",
        stderr(&refused)
    );
    let declined = run_on_a_terminal(&cli, &["todo", "delete", &id], "n\n");
    assert!(declined.contains("Nothing was deleted."), "{declined}");
    assert_eq!(cli.json(&["todo", "show", &id])["state"], "pending");
    let deleted = cli.ok(&["todo", "delete", &id, "-y"]);
    assert!(deleted.contains(&format!("Deleted {id}.")), "{deleted}");
    let gone = cli.run(&["todo", "show", &id]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(stderr(&gone).contains("not_found"), "{}", stderr(&gone));
}

/// `webhook rules` shows and sets (from a file) the routing rules, naming a
/// bad field; `webhook rules-test` dry-runs; `webhook replay` re-runs a batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_rules_commands() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let cli = Client::new(dir.path());
    cli.login(&server);
    let vended = cli.json(&["endpoint", "vend", "router", "--webhook"]);
    let hook = vended["webhook"]["id"].as_str().unwrap().to_owned();
    let url = vended["webhook"]["ingest_url"].as_str().unwrap().to_owned();
    let ingest = format!(
        "{}{}",
        server.url,
        &url[url.find("/webhooks/w/").unwrap()..]
    );

    let none = cli.ok(&["webhook", "rules", &hook]);
    assert!(none.contains("No rules."), "{none}");
    let file = dir.path().join("rules.json");
    std::fs::write(
        &file,
        r#"{"rules": [{"if": ".payload.title | startswith(\"noise\")", "then": {"drop": true}}]}"#,
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let set = cli.json(&["webhook", "rules", &hook, "--set", file]);
    assert_eq!(set["rules"][0]["then"]["drop"], true, "{set}");
    let table = cli.ok(&["webhook", "rules", &hook]);
    assert!(
        table.contains("rules[0]") && table.contains("drop"),
        "{table}"
    );

    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"rules": [{"if": "true", "then": {"drop": true}}, {"if": "env", "then": {"drop": true}}]}"#,
    )
    .unwrap();
    let refused = cli.run(&["webhook", "rules", &hook, "--set", bad.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("rules[1].if"),
        "{}",
        stderr(&refused)
    );

    let sent: Value = reqwest::Client::new()
        .post(&ingest)
        .json(&serde_json::json!({"title": "noise from CI"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sent["delivery"]["decision"], "dropped", "{sent}");
    let id = sent["delivery"]["id"].as_str().unwrap().to_owned();

    let dry = cli.ok(&["webhook", "rules-test", &hook, "--delivery", &id]);
    assert!(
        dry.contains("matched") && dry.contains("Decision: dropped by rules[0]"),
        "{dry}"
    );
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, r#"{"rules": []}"#).unwrap();
    let candidate = cli.json(&[
        "webhook",
        "rules-test",
        &hook,
        "--delivery",
        &id,
        "--file",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(candidate["decision"], "accepted", "{candidate}");

    cli.json(&["webhook", "rules", &hook, "--set", empty.to_str().unwrap()]);
    let replayed = cli.ok(&[
        "webhook",
        "replay",
        &hook,
        "--decision",
        "dropped",
        "--new-key",
    ]);
    assert!(replayed.contains("Replayed 1 deliveries"), "{replayed}");
    assert!(replayed.contains("accepted"), "{replayed}");
}
