//! The real clients, set up exactly as vend prints it (`09-quality.md`,
//! "Beyond the SDKs"): Claude Code (`tests/claude-code`, pinned) with the
//! `.mcp.json` block and the `export` line, run unattended with vend's
//! printed `client.claude_unattended` line (`claude -p "…" --allowedTools
//! "mcp__<server name>"`, the flag `doctor` and `docs/agents.md` print);
//! Codex CLI (`tests/codex`, pinned) with the `config.toml` block and the
//! same `export`, run as `codex exec`. Each works one whole loop
//! (`claim_next`, then `complete`) with no approval prompt, checked through
//! the REST API.
//!
//! The runner drives each client ("Beyond the SDKs (amended)"): vend's
//! printed `client.work_claude` / `client.work_codex` line, pasted after the
//! `export` line (the `switchboard` under test first on PATH), with the
//! client's pasted config; a todo pushed once the runner hears is done by
//! one run the doorbell started, and SIGTERM stops the runner (exit 0) with
//! the endpoint clocked out.
//!
//! No hosted model: a scripted stand-in (`tests/clients/stand-in-model.mjs`)
//! answers on loopback, Claude Code through `ANTHROPIC_BASE_URL` and Codex
//! through a `model_providers` entry. Each client runs with a throwaway HOME,
//! an empty environment but for what the setup says, through `bash -c`, and
//! a bounded time.
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
            crate::support::skips::skipped(
                crate::support::skips::Kind::Clients,
                test,
                &format!("{} cannot run here: {why}", client.package),
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

    /// The last requests the clients made and what the stand-in answered,
    /// one line each (the newest conversation turn of a request), for a
    /// failure message.
    fn requests(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|entry| {
                let seq = &entry["seq"];
                if let Some(answer) = entry.get("answer") {
                    format!("#{seq}   -> {answer}")
                } else if let Some(error) = entry.get("error") {
                    format!("#{seq}   !! {error}")
                } else {
                    let body = &entry["body"];
                    let last = body["messages"]
                        .as_array()
                        .or_else(|| body["input"].as_array())
                        .and_then(|turns| turns.last())
                        .map(Value::to_string)
                        .unwrap_or_default();
                    format!(
                        "#{seq} {} {}: {}",
                        entry["method"].as_str().unwrap_or("?"),
                        entry["url"].as_str().unwrap_or("?"),
                        last.chars().take(400).collect::<String>()
                    )
                }
            })
            .collect();
        lines[lines.len().saturating_sub(24)..].join("\n")
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

/// Runs `script` with `bash -c` in `cwd`, in an environment of `env` only,
/// its own process group killed after [`CLIENT_TIMEOUT`].
fn run_script(script: &str, cwd: &Path, env: &[(&str, String)], scratch: &Path) -> Run {
    let stdout_path = scratch.join("stdout");
    let stderr_path = scratch.join("stderr");
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script)
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

/// The todo is done with the stand-in's result and summary; `describe`
/// says what the client did, for a failure.
async fn assert_done_by_the_stand_in(server: &Server, id: &str, describe: &str) {
    let todo = server.todo(id).await;
    assert_eq!(todo["state"], "done", "{todo}\n{describe}");
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

/// `output` shows none of [`REFUSALS`].
fn assert_no_refusal_in(output: &str, describe: &str) {
    let all = output.to_lowercase();
    for refusal in REFUSALS {
        assert!(
            !all.contains(&refusal.to_lowercase()),
            "the client showed {refusal:?}:\n{describe}"
        );
    }
}

fn assert_no_refusal(run: &Run, stand_in: &StandIn) {
    assert_no_refusal_in(&run.all(), &run.describe(stand_in));
}

/// `~/.codex/config.toml`: the stand-in as the model provider, then the
/// block exactly as vend printed it.
fn codex_config(stand_in: &StandIn, vend: &Value) -> String {
    format!(
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
        text(vend, "/client/codex_toml")
    )
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
    // unattended line vend prints (with the flag `doctor` and
    // docs/agents.md print), or, for the control, that line without it.
    let printed = text(vend, "/client/claude_unattended");
    let flag = format!(" --allowedTools \"mcp__{server_name}\"");
    let command = if permission_flag {
        printed
    } else {
        printed
            .strip_suffix(&flag)
            .unwrap_or_else(|| panic!("the printed line ends with {flag:?}: {printed}"))
    };
    let script = format!("{}\n{command}\n", text(vend, "/client/export"));
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
    assert_done_by_the_stand_in(&server, &todo, &run.describe(stand_in)).await;
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
    let config = codex_config(&stand_in, &vend);
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
    assert_done_by_the_stand_in(&server, &todo, &run.describe(&stand_in)).await;
    assert_eq!(
        stand_in.steps(),
        ["claim_next", "complete", "text: done"],
        "{}",
        run.describe(&stand_in)
    );
}

// ---------------------------------------------------------------------------
// The runner drives each client: vend's `work_claude` / `work_codex` line,
// pasted after the `export` line, with the client's pasted config.

/// How long the runner may take to connect, to finish a run, to stop.
const RUNNER_WITHIN: Duration = CLIENT_TIMEOUT;

/// The prefix of the runner's text log lines.
const RUNNER_LOG: &str = "switchboard work: ";

/// The pids whose parent is `parent` (from `/proc/*/stat`).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // `pid (comm) state ppid …`: the comm may hold anything.
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// `pid` and everything it started, parents first.
fn family(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        let kids = children_of(all[i]);
        all.extend(kids);
        i += 1;
    }
    all
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{name}"), "--", &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// The pasted lines run by `bash -c`: the shell, and through it the runner
/// and the runs it starts (each in a process group of its own). Everything
/// it started is killed when dropped.
struct Pasted {
    shell: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Pasted {
    fn start(script: &str, cwd: &Path, env: &[(&str, String)], scratch: &Path) -> Pasted {
        let stdout = scratch.join("runner.stdout");
        let stderr = scratch.join("runner.stderr");
        let shell = Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(cwd)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(File::create(&stdout).unwrap())
            .stderr(File::create(&stderr).unwrap())
            .process_group(0)
            .spawn()
            .expect("spawn bash");
        Pasted {
            shell,
            stdout,
            stderr,
        }
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The runner's own log lines (the runs' output shares its stderr).
    fn log(&self) -> Vec<String> {
        self.stderr()
            .lines()
            .filter(|line| line.starts_with(RUNNER_LOG))
            .map(str::to_owned)
            .collect()
    }

    /// The runner's run lines (`run todo=… reason=… exit=… duration=…`).
    fn run_lines(&self) -> Vec<String> {
        self.log()
            .into_iter()
            .filter(|line| line[RUNNER_LOG.len()..].starts_with("run "))
            .collect()
    }

    fn describe(&self, stand_in: &StandIn) -> String {
        format!(
            "--- runner stdout\n{}\n--- runner stderr\n{}\n--- the stand-in's last requests\n{}",
            self.stdout(),
            self.stderr(),
            stand_in.requests()
        )
    }

    /// The runner's pid: the shell itself when it ran the last line with
    /// `exec`, else the shell's child.
    fn runner_pid(&self) -> Option<u32> {
        let shell = self.shell.id();
        if comm(shell) == "switchboard" {
            return Some(shell);
        }
        children_of(shell)
            .into_iter()
            .find(|pid| comm(*pid) == "switchboard")
    }

    /// Panics (with what the runner said) once the shell has exited.
    fn assert_running(&mut self, stand_in: &StandIn) {
        if let Some(status) = self.shell.try_wait().expect("wait for bash") {
            panic!(
                "the runner exited ({status}) early\n{}",
                self.describe(stand_in)
            );
        }
    }

    /// Waits for the shell (so the runner) to exit.
    fn wait(&mut self, within: Duration, stand_in: &StandIn) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.shell.try_wait().expect("wait for bash") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the runner did not exit within {within:?}\n{}",
                self.describe(stand_in)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Pasted {
    fn drop(&mut self) {
        if self.shell.try_wait().ok().flatten().is_none() {
            for pid in family(self.shell.id()) {
                signal(pid, "KILL");
            }
            let _ = self.shell.wait();
        }
    }
}

/// A client's pasted setup in a scratch folder: HOME, the project (the
/// runner's and the runs' working directory), the stand-in.
struct Setup {
    home: PathBuf,
    project: PathBuf,
    stand_in: StandIn,
    scratch: tempfile::TempDir,
}

impl Setup {
    fn new(server_name: &str) -> Setup {
        let scratch = tempfile::tempdir().expect("temp dir");
        let home = scratch.path().join("home");
        let project = scratch.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        let stand_in = StandIn::start(server_name, scratch.path());
        Setup {
            home,
            project,
            stand_in,
            scratch,
        }
    }
}

/// `PATH` for the pasted runner line: the directory of the `switchboard`
/// binary under test first (so the printed `switchboard work …` is it),
/// then the client's `bin`, then the system's.
fn runner_path(client: &Client) -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_switchboard"));
    format!(
        "{}:{}",
        bin.parent().expect("the binary's directory").display(),
        client.path()
    )
}

/// The runner drives the client: vend's `export` line then its printed
/// `pointer` line (`/client/work_claude`, `/client/work_codex`) run by
/// `bash -c` in the project; a todo pushed once the runner hears; the todo
/// done by the stand-in in one run the doorbell started, exit 0; SIGTERM:
/// the runner exits 0 and the endpoint is clocked out. `env` is the
/// client's (HOME and PATH are set here). The stand-in's steps, for the
/// caller to check.
async fn the_runner_drives(
    client: &Client,
    server: &Server,
    vend: &Value,
    setup: &Setup,
    pointer: &str,
    env: &[(&str, String)],
) -> Vec<String> {
    let slug = text(vend, "/slug");
    let line = text(vend, pointer);
    let work = format!(
        "switchboard work {} --token-env {} -- ",
        text(vend, "/mcp_url"),
        text(vend, "/client/token_env")
    );
    assert!(line.starts_with(&work), "{pointer} is {line:?}");
    let script = format!("{}\n{line}\n", text(vend, "/client/export"));
    let mut all_env = vec![
        ("PATH", runner_path(client)),
        ("HOME", setup.home.display().to_string()),
    ];
    all_env.extend(env.iter().cloned());
    let stand_in = &setup.stand_in;
    let mut pasted = Pasted::start(&script, &setup.project, &all_env, setup.scratch.path());

    // Connected: a runner row streaming, and the runner's start check done
    // (it logs "connected" after it, so the push below rings, not finds).
    let deadline = Instant::now() + RUNNER_WITHIN;
    loop {
        pasted.assert_running(stand_in);
        let sessions = server.endpoint(slug).await["sessions"].clone();
        let streaming = sessions["list"].as_array().is_some_and(|rows| {
            rows.iter()
                .any(|row| row["hearer"] == "runner" && row["streaming"] == true)
        });
        let connected = pasted
            .log()
            .iter()
            .any(|l| l.ends_with("connected; listening for doorbells"));
        if streaming && connected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the runner did not connect within {RUNNER_WITHIN:?}: {sessions}\n{}",
            pasted.describe(stand_in)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        pasted.run_lines().is_empty(),
        "a run before any todo:\n{}",
        pasted.describe(stand_in)
    );

    let todo = server.push(slug, "a todo for the runner").await;
    // Done, and its run logged (the line comes when the client exits).
    let deadline = Instant::now() + RUNNER_WITHIN;
    let ours = format!("run todo={todo} ");
    let runs = loop {
        let state = server.todo(&todo).await["state"].clone();
        let runs: Vec<String> = pasted
            .run_lines()
            .into_iter()
            .filter(|l| l.contains(&ours))
            .collect();
        if state == "done" && !runs.is_empty() {
            break runs;
        }
        assert!(
            Instant::now() < deadline,
            "todo {todo} is {state} and run lines are {runs:?} after {RUNNER_WITHIN:?}\n{}",
            pasted.describe(stand_in)
        );
        pasted.assert_running(stand_in);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let describe = pasted.describe(stand_in);
    assert_done_by_the_stand_in(server, &todo, &describe).await;
    assert_eq!(runs.len(), 1, "one run for the todo:\n{describe}");
    let fields: Vec<&str> = runs[0][RUNNER_LOG.len()..].split(' ').collect();
    assert!(
        fields.contains(&"reason=doorbell"),
        "the doorbell started it:\n{describe}"
    );
    assert!(fields.contains(&"exit=0"), "it exited 0:\n{describe}");
    assert_no_refusal_in(
        &format!("{}\n{}", pasted.stdout(), pasted.stderr()),
        &describe,
    );
    assert!(
        pasted.stdout().lines().any(|l| l.trim() == "done"),
        "the client printed the stand-in's last word:\n{describe}"
    );

    // SIGTERM to the runner (not the shell): it clocks out and exits 0,
    // and so does the shell, whose last command it is.
    let runner = pasted
        .runner_pid()
        .unwrap_or_else(|| panic!("no switchboard process under the shell\n{describe}"));
    signal(runner, "TERM");
    let status = pasted.wait(RUNNER_WITHIN, stand_in);
    let describe = pasted.describe(stand_in);
    assert_eq!(status.code(), Some(0), "{status}\n{describe}");
    let log = pasted.log();
    assert!(
        log.iter().any(|l| l.ends_with("clocked the endpoint out")),
        "{describe}"
    );
    // (Not necessarily the last line: the stream the stop closes may be
    // reported as lost after it.)
    assert!(
        log.iter().any(|l| l == "switchboard work: stopped"),
        "{describe}"
    );
    let presence = server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/endpoints/{slug}/presence"),
            None,
        )
        .await;
    assert_eq!(presence["presence"], "out", "{presence}\n{describe}");
    // Every run (a follow-up finds nothing left: the model says "done").
    for run in pasted.run_lines() {
        assert!(run.contains(" exit=0 "), "{run}\n{describe}");
    }
    stand_in.steps()
}

#[tokio::test]
async fn the_runner_drives_claude_code_with_the_printed_work_claude_line() {
    let client = Client::claude_code();
    let test = "clients::the_runner_drives_claude_code_with_the_printed_work_claude_line";
    let Some(version) = ready_or_skip(&client, test) else {
        return;
    };
    eprintln!("Claude Code: {version}");
    let server = Server::start(&[]);
    let vend = server
        .api(
            reqwest::Method::POST,
            "/api/v1/endpoints",
            Some(json!({"agent": "claude-runner"})),
        )
        .await;
    let server_name = text(&vend, "/server_name").to_owned();
    let setup = Setup::new(&server_name);
    std::fs::write(
        setup.project.join(".mcp.json"),
        serde_json::to_string_pretty(&vend["mcp_json"]).unwrap(),
    )
    .unwrap();
    let env = [
        ("ANTHROPIC_BASE_URL", setup.stand_in.url.clone()),
        ("ANTHROPIC_API_KEY", "dummy".to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
    ];
    let steps =
        the_runner_drives(&client, &server, &vend, &setup, "/client/work_claude", &env).await;
    let steps: Vec<String> = steps
        .into_iter()
        .filter(|s| s != "ToolSearch" && !s.starts_with("text: Switchboard queue"))
        .collect();
    assert_eq!(
        steps[..3.min(steps.len())],
        [
            format!("mcp__{server_name}__claim_next"),
            format!("mcp__{server_name}__complete"),
            "text: done".to_owned(),
        ],
        "{}",
        setup.stand_in.requests()
    );
}

#[tokio::test]
async fn the_runner_drives_codex_with_the_printed_work_codex_line() {
    let client = Client::codex();
    let test = "clients::the_runner_drives_codex_with_the_printed_work_codex_line";
    let Some(version) = ready_or_skip(&client, test) else {
        return;
    };
    eprintln!("Codex CLI: {version}");
    let server = Server::start(&[]);
    let vend = server
        .api(
            reqwest::Method::POST,
            "/api/v1/endpoints",
            Some(json!({"agent": "codex-runner"})),
        )
        .await;
    let server_name = text(&vend, "/server_name").to_owned();
    let setup = Setup::new(&server_name);
    std::fs::create_dir_all(setup.home.join(".codex")).unwrap();
    std::fs::write(
        setup.home.join(".codex/config.toml"),
        codex_config(&setup.stand_in, &vend),
    )
    .unwrap();
    // The project is not a git repository: the printed line must work
    // wherever the runner is started.
    let env = [("STAND_IN_API_KEY", "dummy".to_owned())];
    let steps =
        the_runner_drives(&client, &server, &vend, &setup, "/client/work_codex", &env).await;
    assert_eq!(
        steps[..3.min(steps.len())],
        ["claim_next", "complete", "text: done"],
        "{}",
        setup.stand_in.requests()
    );
}
