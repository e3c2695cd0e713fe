//! The real clients, set up exactly as vend prints it (`09-quality.md`,
//! "Beyond the SDKs"): Claude Code (`tests/claude-code`, pinned) with the
//! `.mcp.json` block and the `export` line, run unattended as
//! `claude -p … --allowedTools "mcp__<server name>"` (the flag `doctor` and
//! `docs/agents.md` print); Codex CLI (`tests/codex`, pinned) with the
//! `config.toml` block and the same `export`, run as `codex exec`. Each
//! works one whole loop (`claim_next`, then `complete`) with no approval
//! prompt, checked through the REST API.
//!
//! No hosted model: a scripted stand-in (`tests/clients/stand-in-model.mjs`)
//! answers on loopback, Claude Code through `ANTHROPIC_BASE_URL` and Codex
//! through a `model_providers` entry. Each client runs with a throwaway HOME,
//! an empty environment but for what the setup says, and a bounded time.
//!
//! Needs Node.js and npm (the clients are installed with `npm ci` on first
//! use). Where a client cannot be installed or run, the test prints why and
//! passes, unless `SWITCHBOARD_REQUIRE_CLIENTS` is set (`.ci/run` sets it).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mcp::Server;
use crate::support::npm::npm_ci_once;

/// Set: a client that cannot run fails its test instead of skipping it.
const REQUIRE_ENV: &str = "SWITCHBOARD_REQUIRE_CLIENTS";
/// How long one client run may take (both finish in seconds here).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);
/// What the tests ask the agent, as `doctor` prints it.
const PROMPT: &str = "Work the switchboard queue";
/// What the stand-in completes with (`stand-in-model.mjs`).
const STAND_IN_SUMMARY: &str = "Done by the stand-in model";

/// Text a client shows when it refuses a tool or asks for approval.
const REFUSALS: [&str; 5] = [
    "haven't granted",
    "requested permissions",
    "requires approval",
    "approval policy",
    "did not finish the todo",
];

fn tests_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

/// One pinned client, installed: its package folder and `bin` name.
struct Client {
    /// `tests/claude-code` or `tests/codex`.
    dir: PathBuf,
    /// The npm package (`@anthropic-ai/claude-code`).
    package: &'static str,
    /// The command a person types (`claude`).
    command: &'static str,
}

impl Client {
    fn claude_code() -> Client {
        Client {
            dir: tests_dir("claude-code"),
            package: "@anthropic-ai/claude-code",
            command: "claude",
        }
    }

    fn codex() -> Client {
        Client {
            dir: tests_dir("codex"),
            package: "@openai/codex",
            command: "codex",
        }
    }

    /// The version `package.json` pins.
    fn pinned(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("package.json")).expect("package.json");
        let manifest: Value = serde_json::from_str(&text).expect("package.json is JSON");
        manifest["dependencies"][self.package]
            .as_str()
            .expect("the client is pinned")
            .to_owned()
    }

    /// `node_modules/.bin`, where the client's command is.
    fn bin_dir(&self) -> PathBuf {
        self.dir.join("node_modules/.bin")
    }

    /// Installs the client (`npm ci`, once) and checks that its command runs
    /// and is the pinned version. `Err` says why it cannot run here.
    fn ready(&self) -> Result<String, String> {
        match Command::new("node").arg("--version").output() {
            Ok(out) if out.status.success() => {}
            _ => return Err("`node` is not installed (the clients need Node.js and npm)".into()),
        }
        npm_ci_once(&self.dir, &format!("{}/package.json", self.package))?;
        let out = Command::new(self.bin_dir().join(self.command))
            .arg("--version")
            .env("PATH", self.path())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {} --version: {e}", self.command))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() {
            return Err(format!(
                "{} --version failed ({}): {}",
                self.command,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let pinned = self.pinned();
        if !version.contains(&pinned) {
            return Err(format!(
                "{} --version says {version:?}, the pin is {pinned}",
                self.command
            ));
        }
        Ok(version)
    }

    /// `PATH` for a run: the client's `bin` first, then the system's (Node).
    fn path(&self) -> String {
        let system = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
        format!("{}:{system}", self.bin_dir().display())
    }
}

/// The client's version, or `None` after printing why the test skips (or
/// panics, when [`REQUIRE_ENV`] is set).
fn ready_or_skip(client: &Client, test: &str) -> Option<String> {
    match client.ready() {
        Ok(version) => Some(version),
        Err(why) => {
            assert!(
                std::env::var_os(REQUIRE_ENV).is_none(),
                "{REQUIRE_ENV} is set but {} cannot run here: {why}",
                client.package
            );
            eprintln!(
                "SKIPPED (clients): {test}: {} cannot run here: {why}",
                client.package
            );
            None
        }
    }
}

/// The stand-in model on loopback; killed when dropped.
struct StandIn {
    child: Child,
    /// `http://127.0.0.1:PORT`
    url: String,
    log: PathBuf,
}

impl StandIn {
    fn start(server_name: &str, dir: &Path) -> StandIn {
        let log = dir.join("stand-in.log");
        let mut child = Command::new("node")
            .arg(tests_dir("clients").join("stand-in-model.mjs"))
            .arg(server_name)
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the stand-in model");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the stand-in model did not start");
        let url = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the stand-in model said {line:?}"))
            .to_owned();
        StandIn { child, url, log }
    }

    /// Every step it answered, in order: a tool's name or `text: …`.
    fn steps(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|entry| {
                let answer = entry.get("answer")?;
                Some(match &answer["tool"] {
                    Value::String(name) => name.clone(),
                    Value::Object(tool) => tool["name"].as_str().unwrap_or_default().to_owned(),
                    _ => format!("text: {}", answer["text"].as_str().unwrap_or_default()),
                })
            })
            .collect()
    }

    /// Everything the clients asked, for a failure message.
    fn requests(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(12).collect();
        tail.into_iter()
            .rev()
            .map(|line| line.chars().take(600).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a client run printed.
struct Run {
    success: bool,
    status: String,
    stdout: String,
    stderr: String,
}

impl Run {
    fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    fn describe(&self, stand_in: &StandIn) -> String {
        format!(
            "exit {}\n--- stdout\n{}\n--- stderr\n{}\n--- the stand-in's last requests\n{}",
            self.status,
            self.stdout,
            self.stderr,
            stand_in.requests()
        )
    }
}

/// Runs `script` with `sh` in `cwd`, in an environment of `env` only, its
/// own process group killed after [`CLIENT_TIMEOUT`].
fn run_script(script: &str, cwd: &Path, env: &[(&str, String)], scratch: &Path) -> Run {
    let path = scratch.join("run.sh");
    std::fs::write(&path, script).expect("write the script");
    let stdout_path = scratch.join("stdout");
    let stderr_path = scratch.join("stderr");
    let mut child = Command::new("sh")
        .arg(&path)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).unwrap())
        .stderr(File::create(&stderr_path).unwrap())
        .process_group(0)
        .spawn()
        .expect("spawn sh");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the client") {
            break status;
        }
        if started.elapsed() > CLIENT_TIMEOUT {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!(
                "the client did not finish within {CLIENT_TIMEOUT:?}:\n--- stdout\n{}\n--- stderr\n{}",
                std::fs::read_to_string(&stdout_path).unwrap_or_default(),
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Run {
        success: status.success(),
        status: status.to_string(),
        stdout: std::fs::read_to_string(&stdout_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
    }
}

/// A server, an endpoint vended through the API (the whole vend response)
/// and one todo pushed to it.
async fn vended_with_a_todo(agent: &str) -> (Server, Value, String) {
    let server = Server::start(&[]);
    let vend = server
        .api(
            reqwest::Method::POST,
            "/api/v1/endpoints",
            Some(json!({"agent": agent})),
        )
        .await;
    let slug = vend["slug"].as_str().expect("slug").to_owned();
    let todo = server.push(&slug, "a todo for a real client").await;
    (server, vend, todo)
}

fn text<'a>(vend: &'a Value, pointer: &str) -> &'a str {
    vend.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("vend has no {pointer}: {vend}"))
}

/// The todo is done with the stand-in's result and summary.
async fn assert_done_by_the_stand_in(server: &Server, id: &str, run: &Run, stand_in: &StandIn) {
    let todo = server.todo(id).await;
    assert_eq!(todo["state"], "done", "{todo}\n{}", run.describe(stand_in));
    assert_eq!(
        todo["result"],
        json!({"worked_by": "stand-in-model", "outcome": "ok"}),
        "{todo}"
    );
    let attempts = todo["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1, "one claim, one completion: {todo}");
    assert_eq!(attempts[0]["outcome"], "completed", "{todo}");
    assert_eq!(attempts[0]["summary"], STAND_IN_SUMMARY, "{todo}");
}

fn assert_no_refusal(run: &Run, stand_in: &StandIn) {
    let all = run.all().to_lowercase();
    for refusal in REFUSALS {
        assert!(
            !all.contains(&refusal.to_lowercase()),
            "the client showed {refusal:?}:\n{}",
            run.describe(stand_in)
        );
    }
}

/// Claude Code's run of the pasted setup: `.mcp.json` in the project, the
/// `export` line, and `claude -p`, with the permission flag or without.
struct ClaudeRun {
    run: Run,
    stand_in: StandIn,
    server_name: String,
    _scratch: tempfile::TempDir,
}

fn run_claude_code(client: &Client, vend: &Value, permission_flag: bool) -> ClaudeRun {
    let server_name = text(vend, "/server_name").to_owned();
    assert_eq!(text(vend, "/client/server_name"), server_name);
    let scratch = tempfile::tempdir().expect("temp dir");
    let home = scratch.path().join("home");
    let project = scratch.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    // The block as vend printed it: the whole `mcp_json`, as the file.
    std::fs::write(
        project.join(".mcp.json"),
        serde_json::to_string_pretty(&vend["mcp_json"]).unwrap(),
    )
    .unwrap();
    let stand_in = StandIn::start(&server_name, scratch.path());
    // What a person pastes into the shell: the export line, then the
    // command with the permission flag `doctor` and docs/agents.md print.
    let flag = if permission_flag {
        format!(" --allowedTools \"mcp__{server_name}\"")
    } else {
        String::new()
    };
    let script = format!(
        "{}\nclaude -p \"{PROMPT}\"{flag}\n",
        text(vend, "/client/export")
    );
    let env = [
        ("PATH", client.path()),
        ("HOME", home.display().to_string()),
        ("ANTHROPIC_BASE_URL", stand_in.url.clone()),
        ("ANTHROPIC_API_KEY", "dummy".to_owned()),
        // Nothing beyond loopback: no telemetry, no update check.
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
    ];
    let run = run_script(&script, &project, &env, scratch.path());
    ClaudeRun {
        run,
        stand_in,
        server_name,
        _scratch: scratch,
    }
}

#[tokio::test]
async fn claude_code_works_a_todo_with_the_pasted_mcp_json_and_the_printed_permission_flag() {
    let client = Client::claude_code();
    let test = "clients::claude_code_works_a_todo_with_the_pasted_mcp_json";
    let Some(version) = ready_or_skip(&client, test) else {
        return;
    };
    eprintln!("Claude Code: {version}");
    let (server, vend, todo) = vended_with_a_todo("claude-agent").await;
    // Bound whole: its scratch folder (HOME, the stand-in's log) lives on.
    let claude = run_claude_code(&client, &vend, true);
    let (run, stand_in, server_name) = (&claude.run, &claude.stand_in, &claude.server_name);
    assert!(run.success, "{}", run.describe(stand_in));
    assert_no_refusal(run, stand_in);
    assert_eq!(run.stdout.trim(), "done", "{}", run.describe(stand_in));
    assert_done_by_the_stand_in(&server, &todo, run, stand_in).await;
    // The tools were Claude Code's names for the vended server's tools
    // (loaded through its ToolSearch first, when it defers MCP tools).
    let steps: Vec<String> = stand_in
        .steps()
        .into_iter()
        .filter(|s| s != "ToolSearch" && !s.starts_with("text: Switchboard queue"))
        .collect();
    assert_eq!(
        steps,
        [
            format!("mcp__{server_name}__claim_next"),
            format!("mcp__{server_name}__complete"),
            "text: done".to_owned(),
        ],
        "{}",
        run.describe(stand_in)
    );
}

/// The control: without the printed flag, `claude -p` cannot ask and
/// refuses the tool, and the refusal is what [`REFUSALS`] looks for.
#[tokio::test]
async fn claude_code_without_the_permission_flag_refuses_the_tools() {
    let client = Client::claude_code();
    let test = "clients::claude_code_without_the_permission_flag_refuses_the_tools";
    if ready_or_skip(&client, test).is_none() {
        return;
    }
    let (server, vend, todo) = vended_with_a_todo("claude-unflagged").await;
    let claude = run_claude_code(&client, &vend, false);
    let (run, stand_in) = (&claude.run, &claude.stand_in);
    assert!(
        run.stdout.contains("haven't granted"),
        "{}",
        run.describe(stand_in)
    );
    assert_eq!(server.todo(&todo).await["state"], "pending");
}

#[tokio::test]
async fn codex_works_a_todo_with_the_pasted_config_toml_and_no_approval_prompt() {
    let client = Client::codex();
    let test = "clients::codex_works_a_todo_with_the_pasted_config_toml";
    let Some(version) = ready_or_skip(&client, test) else {
        return;
    };
    eprintln!("Codex CLI: {version}");
    let (server, vend, todo) = vended_with_a_todo("codex-agent").await;
    let server_name = text(&vend, "/server_name").to_owned();
    let scratch = tempfile::tempdir().expect("temp dir");
    let home = scratch.path().join("home");
    let project = scratch.path().join("project");
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let stand_in = StandIn::start(&server_name, scratch.path());
    // ~/.codex/config.toml: the stand-in as the model provider, then the
    // block exactly as vend printed it.
    let config = format!(
        "model = \"stand-in\"\n\
         model_provider = \"stand-in\"\n\
         \n\
         [model_providers.stand-in]\n\
         name = \"stand-in model\"\n\
         base_url = \"{}/v1\"\n\
         wire_api = \"responses\"\n\
         env_key = \"STAND_IN_API_KEY\"\n\
         \n\
         [analytics]\n\
         enabled = false\n\
         \n\
         {}",
        stand_in.url,
        text(&vend, "/client/codex_toml")
    );
    std::fs::write(home.join(".codex/config.toml"), config).unwrap();
    // The export line, then `codex exec` (the project is no git repository).
    let script = format!(
        "{}\ncodex exec --skip-git-repo-check \"{PROMPT}\"\n",
        text(&vend, "/client/export")
    );
    let env = [
        ("PATH", client.path()),
        ("HOME", home.display().to_string()),
        ("STAND_IN_API_KEY", "dummy".to_owned()),
    ];
    let run = run_script(&script, &project, &env, scratch.path());
    assert!(run.success, "{}", run.describe(&stand_in));
    // What 0.169.0 said before complete was annotated non-destructive: "MCP
    // tool call requires approval, but approval policy is never".
    assert_no_refusal(&run, &stand_in);
    assert!(
        run.stderr
            .contains(&format!("mcp: {server_name}/complete (completed)")),
        "{}",
        run.describe(&stand_in)
    );
    assert_eq!(run.stdout.trim(), "done", "{}", run.describe(&stand_in));
    assert_done_by_the_stand_in(&server, &todo, &run, &stand_in).await;
    assert_eq!(
        stand_in.steps(),
        ["claim_next", "complete", "text: done"],
        "{}",
        run.describe(&stand_in)
    );
}
