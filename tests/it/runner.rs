//! `switchboard work` end to end (spec `07`, "the runner"): the real server
//! binary on a temp SQLite file, an endpoint vended through the API, and the
//! real runner binary whose command is `node tests/mcp-client/work-one.mjs`
//! (the official MCP SDK client: claim_next, complete, exit). The runner
//! logs with `--json`: one object per line on stderr, read here line by
//! line. Every wait is bounded; the only fixed waits are the short windows
//! in which nothing may happen.
//!
//! Needs `node` (20+) and `npm`, like `mcp::interop`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::mcp::listener::{client_dir, node_ready};
use crate::support::server::{BIN, Process};

/// How long anything that should happen may take.
const WITHIN: Duration = Duration::from_secs(30);
/// How long to watch when nothing should happen.
const QUIET: Duration = Duration::from_millis(1500);

/// The server binary on `dir/switchboard.db`, its first human's token, and
/// a way to stop it and start it again on the same port.
struct Srv {
    process: Process,
    dir: PathBuf,
    token: String,
    http: reqwest::Client,
}

fn serve(dir: &Path, listen: &str) -> Process {
    let mut command = Command::new(BIN);
    command
        .current_dir(dir)
        .args(["serve", "--listen", listen, "--database"])
        .arg(dir.join("switchboard.db"))
        .args(["--api-write-rate", "1000", "--api-read-rate", "1000"])
        .args(["--mcp-rate", "1000", "--shutdown-grace", "1s"])
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .env_remove("SWITCHBOARD_LOG_FORMAT")
        .env_remove("SWITCHBOARD_METRICS_TOKEN")
        .env_remove("SWITCHBOARD_ALLOWED_HOSTS")
        .env_remove("SWITCHBOARD_TRUSTED_PROXIES")
        .env_remove("SWITCHBOARD_BOOTSTRAP_TOKEN")
        .env_remove("SWITCHBOARD_BOOTSTRAP_TOKEN_FILE")
        .env_remove("RUST_LOG")
        .env("SWITCHBOARD_LOG", "info");
    Process::spawn(command)
}

impl Srv {
    fn start(dir: &Path) -> Srv {
        node_ready();
        let process = serve(dir, "127.0.0.1:0");
        let token = process.first_token().expect("the first start's token");
        Srv {
            process,
            dir: dir.to_owned(),
            token,
            http: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        self.process.url(path)
    }

    /// Kills the server, then starts it again on the same address and file.
    fn restart_after(&mut self, away: impl FnOnce()) {
        let addr = self.process.addr.clone();
        self.process.signal("KILL");
        self.process.wait_exit(WITHIN);
        away();
        self.process = serve(&self.dir, &addr);
    }

    async fn api(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, self.url(path))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("API request");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn ok(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let (status, value) = self.api(method.clone(), path, body).await;
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {value}"
        );
        value
    }

    /// Vends an endpoint: (slug, MCP URL, sbk_ token).
    async fn vend(&self) -> (String, String, String) {
        let v = self
            .ok(
                Method::POST,
                "/api/v1/endpoints",
                Some(json!({"agent": "runner-agent"})),
            )
            .await;
        let slug = v["slug"].as_str().unwrap().to_owned();
        (
            slug.clone(),
            self.url(&format!("/mcp/{slug}")),
            v["token"].as_str().unwrap().to_owned(),
        )
    }

    async fn push(&self, slug: &str, title: &str) -> String {
        let v = self
            .ok(
                Method::POST,
                &format!("/api/v1/endpoints/{slug}/todos"),
                Some(json!({"title": title})),
            )
            .await;
        v["id"].as_str().unwrap().to_owned()
    }

    async fn state(&self, todo: &str) -> String {
        let v = self
            .ok(Method::GET, &format!("/api/v1/todos/{todo}"), None)
            .await;
        v["state"].as_str().unwrap_or("?").to_owned()
    }

    async fn presence(&self, slug: &str) -> Value {
        self.ok(
            Method::GET,
            &format!("/api/v1/endpoints/{slug}/presence"),
            None,
        )
        .await
    }

    /// Polls until every todo is `state`.
    async fn wait_states(&self, todos: &[String], state: &str, runner: &Runner) {
        let deadline = Instant::now() + WITHIN;
        loop {
            let mut states = Vec::new();
            for todo in todos {
                states.push(self.state(todo).await);
            }
            if states.iter().all(|s| s == state) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "todos {todos:?} are {states:?}, not all {state}; runner:\n{}",
                runner.text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `switchboard work URL --json -- COMMAND…` with its stderr read line by line.
struct Runner {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
    /// The file work-one.mjs appends a line to per run.
    work_log: PathBuf,
}

impl Runner {
    fn start(dir: &Path, url: &str, token: &str, command: &[&str], env: &[(&str, &str)]) -> Runner {
        Self::start_with(dir, url, token, &[], command, env)
    }

    /// With more runner `flags`.
    fn start_with(
        dir: &Path,
        url: &str,
        token: &str,
        flags: &[&str],
        command: &[&str],
        env: &[(&str, &str)],
    ) -> Runner {
        let work_log = dir.join("runs.jsonl");
        let mut cmd = Command::new(BIN);
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["work", url, "--json", "--grace", "20s"])
            .args(flags)
            .arg("--")
            .args(command)
            .env("SWITCHBOARD_TOKEN", token)
            .env("WORK_LOG", &work_log)
            .env_remove("SWITCHBOARD_DOORBELL")
            .env_remove("SWITCHBOARD_TODO_ID")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn switchboard work");
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            })
        };
        Runner {
            child,
            lines,
            reader: Some(reader),
            work_log,
        }
    }

    /// `node work-one.mjs`, the worker the tests run.
    fn work_one(dir: &Path, url: &str, token: &str, env: &[(&str, &str)]) -> Runner {
        let script = client_dir().join("work-one.mjs");
        Self::start(dir, url, token, &["node", script.to_str().unwrap()], env)
    }

    fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Every line that is a JSON object with `event` = `event`.
    fn events(&self, event: &str) -> Vec<Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == event)
            .collect()
    }

    fn runs(&self) -> Vec<Value> {
        self.events("run")
    }

    /// Waits until `count` lines of `event` were logged; returns them all.
    async fn wait_events(&self, event: &str, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + WITHIN;
        loop {
            let found = self.events(event);
            if found.len() >= count {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "{count} {event:?} line(s) expected; runner:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The lines work-one.mjs wrote, one per run.
    fn work_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.work_log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WITHIN;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the runner did not exit; stderr:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_push_runs_the_command_with_the_doorbell_and_the_todo_gets_done() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Srv::start(dir.path());
    let (slug, url, token) = srv.vend().await;
    let runner = Runner::work_one(dir.path(), &url, &token, &[]);
    runner.wait_events("connected", 1).await;

    let id = srv.push(&slug, "first").await;
    let runs = runner.wait_events("run", 1).await;
    srv.wait_states(std::slice::from_ref(&id), "done", &runner)
        .await;
    assert_eq!(runs[0]["todo_id"], id.as_str(), "{}", runner.text());
    assert_eq!(runs[0]["reason"], "doorbell");
    assert_eq!(runs[0]["exit_code"], 0);
    assert!(runs[0]["duration_ms"].is_u64());

    let work = runner.work_lines();
    assert_eq!(work.len(), 1, "{work:?}");
    assert_eq!(work[0]["endpoint"], slug.as_str());
    assert_eq!(work[0]["todo_id"], id.as_str());
    assert_eq!(work[0]["completed"], json!([id]));
    let doorbell: Value = serde_json::from_str(work[0]["doorbell"].as_str().unwrap()).unwrap();
    assert_eq!(doorbell["todo_id"], id.as_str());
    assert_eq!(doorbell["queue"], "inbox");

    // The runner's session is shown as such, and its ring was heard.
    let endpoint = srv
        .ok(Method::GET, &format!("/api/v1/endpoints/{slug}"), None)
        .await;
    let text = endpoint.to_string();
    assert!(text.contains("switchboard-work"), "{endpoint}");
    // Neither the token nor the doorbell's content is logged.
    assert!(!runner.text().contains(&token));
    assert!(!runner.text().contains("first"), "{}", runner.text());
}

#[tokio::test]
async fn doorbells_during_a_slow_run_coalesce_into_one_follow_up_run() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Srv::start(dir.path());
    let (slug, url, token) = srv.vend().await;
    // The first run claims one todo and takes its time; later runs drain.
    let marker = dir.path().join("slow-once");
    let runner = Runner::work_one(
        dir.path(),
        &url,
        &token,
        &[
            ("WORK_SLOW_ONCE", marker.to_str().unwrap()),
            ("WORK_SLEEP_MS", "3000"),
        ],
    );
    runner.wait_events("connected", 1).await;

    let first = srv.push(&slug, "one").await;
    srv.wait_states(std::slice::from_ref(&first), "claimed", &runner)
        .await;
    let mut todos = vec![first];
    for n in 2..=4 {
        todos.push(srv.push(&slug, &format!("todo {n}")).await);
    }
    srv.wait_states(&todos, "done", &runner).await;
    let runs = runner.wait_events("run", 2).await;
    // A follow-up that finds nothing left starts nothing: give it a moment.
    tokio::time::sleep(QUIET).await;
    let runs_after = runner.runs();
    assert_eq!(runs_after.len(), 2, "{}", runner.text());
    assert_eq!(runs[0]["reason"], "doorbell");
    assert_eq!(runs[0]["todo_id"], todos[0].as_str());
    assert_eq!(runs[1]["reason"], "follow-up", "{}", runner.text());
    assert_eq!(
        runs[1]["todo_id"],
        todos[3].as_str(),
        "the latest doorbell's"
    );
    let work = runner.work_lines();
    assert_eq!(work[1]["completed"], json!(todos[1..]));
}

#[tokio::test]
async fn with_parallel_2_two_doorbells_run_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Srv::start(dir.path());
    let (slug, url, token) = srv.vend().await;
    let script = client_dir().join("work-one.mjs");
    let runner = Runner::start_with(
        dir.path(),
        &url,
        &token,
        &["--parallel", "2"],
        &["node", script.to_str().unwrap()],
        // Long enough for the second run's node to start on a loaded host.
        &[("WORK_SLEEP_MS", "6000")],
    );
    runner.wait_events("connected", 1).await;
    let first = srv.push(&slug, "one").await;
    srv.wait_states(std::slice::from_ref(&first), "claimed", &runner)
        .await;
    let second = srv.push(&slug, "two").await;
    // Both claimed at once: the second run started while the first slept.
    let both = [first, second];
    srv.wait_states(&both, "claimed", &runner).await;
    srv.wait_states(&both, "done", &runner).await;
    let runs = runner.wait_events("run", 2).await;
    assert!(
        runs.iter().all(|r| r["reason"] == "doorbell"),
        "{}",
        runner.text()
    );
}

#[tokio::test]
async fn clocked_out_it_starts_nothing_and_runs_on_the_digest_when_back_in() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Srv::start(dir.path());
    let (slug, url, token) = srv.vend().await;
    let presence_path = format!("/api/v1/endpoints/{slug}/presence");
    srv.ok(
        Method::PUT,
        &presence_path,
        Some(json!({"presence": "out", "until": null})),
    )
    .await;
    let runner = Runner::work_one(dir.path(), &url, &token, &[]);
    runner.wait_events("connected", 1).await;
    // An operator's out is never clocked back in by the runner.
    let presence = srv.presence(&slug).await;
    assert_eq!(
        (&presence["presence"], &presence["source"]),
        (&json!("out"), &json!("operator")),
        "{presence}"
    );

    let id = srv.push(&slug, "held").await;
    tokio::time::sleep(QUIET).await;
    assert!(runner.runs().is_empty(), "{}", runner.text());
    assert_eq!(srv.state(&id).await, "pending");

    // Back in: the digest starts a run.
    srv.ok(Method::DELETE, &presence_path, None).await;
    let runs = runner.wait_events("run", 1).await;
    srv.wait_states(std::slice::from_ref(&id), "done", &runner)
        .await;
    assert_eq!(runs[0]["reason"], "digest", "{}", runner.text());
    assert_eq!(runs[0]["todo_id"], Value::Null);
}

#[tokio::test]
async fn sigterm_lets_the_run_finish_clocks_out_and_exits_zero_and_a_restart_clocks_in() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Srv::start(dir.path());
    let (slug, url, token) = srv.vend().await;
    let mut runner = Runner::work_one(dir.path(), &url, &token, &[("WORK_SLEEP_MS", "2000")]);
    runner.wait_events("connected", 1).await;
    let id = srv.push(&slug, "slow").await;
    srv.wait_states(std::slice::from_ref(&id), "claimed", &runner)
        .await;

    runner.signal("TERM");
    let status = runner.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", runner.text());
    let runs = runner.runs();
    assert_eq!(runs.len(), 1, "{}", runner.text());
    assert_eq!(runs[0]["exit_code"], 0, "the run finished by itself");
    assert_eq!(srv.state(&id).await, "done");
    assert!(
        !runner.events("clocked_out").is_empty(),
        "{}",
        runner.text()
    );
    let presence = srv.presence(&slug).await;
    assert_eq!(
        (&presence["presence"], &presence["source"]),
        (&json!("out"), &json!("agent")),
        "{presence}"
    );

    // Out by its own stop: the next start clocks back in, and waiting work runs.
    let waiting = srv.push(&slug, "while stopped").await;
    let runner = Runner::work_one(dir.path(), &url, &token, &[]);
    runner.wait_events("clocked_in", 1).await;
    srv.wait_states(std::slice::from_ref(&waiting), "done", &runner)
        .await;
    assert_eq!(srv.presence(&slug).await["presence"], "in");
}

#[tokio::test]
async fn a_second_signal_kills_the_running_command() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Srv::start(dir.path());
    let (slug, url, token) = srv.vend().await;
    let mut runner = Runner::work_one(dir.path(), &url, &token, &[("WORK_SLEEP_MS", "60000")]);
    runner.wait_events("connected", 1).await;
    let id = srv.push(&slug, "forever").await;
    srv.wait_states(std::slice::from_ref(&id), "claimed", &runner)
        .await;
    runner.signal("INT");
    runner.wait_events("stopping", 1).await;
    runner.signal("INT");
    let status = runner.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", runner.text());
    let runs = runner.runs();
    assert_eq!(runs.len(), 1, "{}", runner.text());
    assert_eq!(runs[0]["signal"], 9, "{}", runner.text());
}

#[tokio::test]
async fn after_a_server_restart_the_runner_reconnects_and_runs_a_later_push() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Srv::start(dir.path());
    let (slug, url, token) = srv.vend().await;
    let runner = Runner::work_one(dir.path(), &url, &token, &[]);
    runner.wait_events("connected", 1).await;

    srv.restart_after(|| {});
    runner.wait_events("reconnected", 1).await;
    assert_eq!(runner.events("disconnected").len(), 1, "{}", runner.text());
    let id = srv.push(&slug, "after the restart").await;
    srv.wait_states(std::slice::from_ref(&id), "done", &runner)
        .await;
    let runs = runner.wait_events("run", 1).await;
    assert_eq!(runs[0]["exit_code"], 0);
}

#[tokio::test]
async fn a_crash_looping_command_backs_off_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Srv::start(dir.path());
    let (slug, url, token) = srv.vend().await;
    let mut runner = Runner::start(dir.path(), &url, &token, &["sh", "-c", "exit 1"], &[]);
    runner.wait_events("connected", 1).await;
    srv.push(&slug, "never done").await;

    let backoff = runner.wait_events("backoff", 1).await;
    assert!(
        backoff[0]["message"].as_str().unwrap().contains("5s"),
        "{}",
        runner.text()
    );
    assert_eq!(runner.runs().len(), 3, "{}", runner.text());
    assert!(runner.runs().iter().all(|r| r["exit_code"] == 1));
    // The first backoff is 5 s: nothing runs meanwhile.
    tokio::time::sleep(QUIET).await;
    assert_eq!(runner.runs().len(), 3, "{}", runner.text());

    runner.signal("TERM");
    assert_eq!(runner.wait_exit().code(), Some(0), "{}", runner.text());
}

#[tokio::test]
async fn a_command_that_exits_0_without_draining_backs_off_too() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Srv::start(dir.path());
    let (slug, url, token) = srv.vend().await;
    let mut runner = Runner::start(dir.path(), &url, &token, &["true"], &[]);
    runner.wait_events("connected", 1).await;
    srv.push(&slug, "nobody claims me").await;

    runner.wait_events("backoff", 1).await;
    let runs = runner.runs();
    assert!(
        runs.iter().all(|r| r["exit_code"] == 0),
        "{}",
        runner.text()
    );
    // The doorbell's run, then three follow-ups that each left the todo waiting.
    assert_eq!(runs.len(), 4, "{}", runner.text());
    assert_eq!(runner.events("no_progress").len(), 3, "{}", runner.text());
    tokio::time::sleep(QUIET).await;
    assert_eq!(runner.runs().len(), 4, "{}", runner.text());
    runner.signal("TERM");
    assert_eq!(runner.wait_exit().code(), Some(0), "{}", runner.text());
}

#[tokio::test]
async fn a_refused_token_exits_1_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Srv::start(dir.path());
    let (_, url, _) = srv.vend().await;
    let mut runner = Runner::start(dir.path(), &url, "sbk_not_a_real_token", &["true"], &[]);
    assert_eq!(runner.wait_exit().code(), Some(1), "{}", runner.text());
    assert!(runner.text().contains("401"), "{}", runner.text());
    assert!(runner.runs().is_empty());
    assert!(!runner.text().contains("sbk_not_a_real_token"));
}

#[tokio::test]
async fn a_runner_started_before_its_server_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Srv::start(dir.path());
    let (slug, url, token) = srv.vend().await;
    let mut runner = None;
    srv.restart_after(|| {
        let started = Runner::work_one(dir.path(), &url, &token, &[]);
        let deadline = Instant::now() + WITHIN;
        while started.events("disconnected").is_empty() {
            assert!(Instant::now() < deadline, "{}", started.text());
            std::thread::sleep(Duration::from_millis(25));
        }
        runner = Some(started);
    });
    let runner = runner.unwrap();
    runner.wait_events("connected", 1).await;
    assert_eq!(runner.events("disconnected").len(), 1, "{}", runner.text());
    let id = srv.push(&slug, "once it is up").await;
    srv.wait_states(std::slice::from_ref(&id), "done", &runner)
        .await;
}

#[test]
fn a_missing_token_is_a_usage_error_naming_the_variable() {
    let out = Command::new(BIN)
        .args([
            "work",
            "http://127.0.0.1:9/mcp/abc",
            "--token-env",
            "NO_SUCH_TOKEN_VAR",
            "--",
            "true",
        ])
        .env_remove("NO_SUCH_TOKEN_VAR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NO_SUCH_TOKEN_VAR"), "{stderr}");
}
