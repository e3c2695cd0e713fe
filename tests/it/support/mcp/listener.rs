//! SDK clients that listen for doorbells: `tests/mcp-client/scenario.mjs
//! listen`, run under Node while the test pushes work through the REST API.
//!
//! The Node process connects one or more official-SDK clients to an endpoint
//! (each with a `notifications/claude/channel` handler), prints `ready` once
//! every GET stream is answered, then one stdout line per channel event as it
//! arrives. Commands (tool calls, tools/list) go in on its stdin. Every wait
//! here is bounded; a wait that runs out panics with what did arrive.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::{Server, Vended};
use crate::support::npm::npm_ci_once;

/// How long the SDK clients may take to connect and open their streams.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one tool call may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(15);

pub fn client_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-client")
}

/// Node is there and the SDK installed (`npm ci` unless it is already;
/// `support::npm`); panics with what is missing otherwise.
pub fn node_ready() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        match Command::new("node").arg("--version").output() {
            Ok(out) if out.status.success() => {}
            _ => {
                return Err(
                    "`node` is not installed: the MCP SDK tests need Node.js 20+ and npm \
                     (apt-get install nodejs npm)"
                        .into(),
                );
            }
        }
        npm_ci_once(&client_dir(), "@modelcontextprotocol/sdk/package.json")
    });
    if let Err(e) = ready {
        panic!("{e}");
    }
}

/// One channel event one of the clients heard.
#[derive(Debug, Clone)]
pub struct Bell {
    /// Which SDK client (0-based, in connection order).
    pub client: usize,
    pub session: String,
    pub content: String,
    pub meta: Value,
    /// When the test process read it.
    pub at: Instant,
}

impl Bell {
    pub fn meta_str(&self, key: &str) -> Option<&str> {
        self.meta.get(key).and_then(Value::as_str)
    }

    pub fn todo_id(&self) -> Option<&str> {
        self.meta_str("todo_id")
    }

    pub fn is_digest(&self) -> bool {
        self.meta_str("kind") == Some("digest") && self.todo_id().is_none()
    }
}

/// A running `scenario.mjs listen`.
pub struct Listener {
    child: Child,
    stdin: Option<ChildStdin>,
    bells: UnboundedReceiver<Bell>,
    replies: UnboundedReceiver<Value>,
    stderr: Arc<Mutex<String>>,
    /// The clients' `Mcp-Session-Id`s, in connection order.
    pub sessions: Vec<String>,
    /// Every event heard so far.
    pub heard: Vec<Bell>,
    next_id: u64,
}

impl Listener {
    /// Starts `clients` SDK clients on `ep` and waits until every one has its
    /// GET stream answered.
    pub async fn start(ep: &Vended, clients: usize) -> Listener {
        Self::start_with(ep, clients, &[]).await
    }

    /// As [`Self::start`], with extra environment (`SB_DEADLINE_MS`).
    pub async fn start_with(ep: &Vended, clients: usize, env: &[(&str, &str)]) -> Listener {
        node_ready();
        let mut child = Command::new("node")
            .current_dir(client_dir())
            .arg("scenario.mjs")
            .args([&ep.mcp_url, &ep.authorization, "listen"])
            .env("SB_CLIENTS", clients.to_string())
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn node");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let stderr_pipe = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        {
            let stderr = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                    let mut all = stderr.lock().unwrap();
                    all.push_str(&line);
                    all.push('\n');
                }
            });
        }
        let (bell_tx, bells) = unbounded_channel();
        let (reply_tx, mut replies) = unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    let _ = reply_tx.send(json!({"type": "garbage", "line": line}));
                    continue;
                };
                if v["type"] == "channel" {
                    let bell = Bell {
                        client: v["client"].as_u64().unwrap_or(u64::MAX) as usize,
                        session: v["session"].as_str().unwrap_or_default().to_owned(),
                        content: v["params"]["content"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        meta: v["params"]["meta"].clone(),
                        at: Instant::now(),
                    };
                    let _ = bell_tx.send(bell);
                } else {
                    let _ = reply_tx.send(v);
                }
            }
        });
        let ready = match tokio::time::timeout(READY_TIMEOUT, replies.recv()).await {
            Ok(Some(v)) if v["type"] == "ready" => v,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the SDK clients did not get ready ({other:?}); node stderr:\n{}",
                    stderr.lock().unwrap()
                );
            }
        };
        let sessions = ready["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect::<Vec<_>>();
        assert_eq!(sessions.len(), clients, "{ready}");
        Listener {
            child,
            stdin,
            bells,
            replies,
            stderr,
            sessions,
            heard: Vec::new(),
            next_id: 0,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for exactly `n` more events (at most `within`); panics with what
    /// arrived if fewer did.
    pub async fn expect(&mut self, n: usize, within: Duration, what: &str) -> Vec<Bell> {
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        while got.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.bells.recv()).await {
                Ok(Some(bell)) => {
                    self.heard.push(bell.clone());
                    got.push(bell);
                }
                Ok(None) => panic!(
                    "{what}: the listener died after {got:?}; node stderr:\n{}",
                    self.stderr()
                ),
                Err(_) => panic!(
                    "{what}: {} of {n} channel events within {within:?}: {got:#?}\nnode stderr:\n{}",
                    got.len(),
                    self.stderr()
                ),
            }
        }
        got
    }

    /// Waits for one more event.
    pub async fn one(&mut self, within: Duration, what: &str) -> Bell {
        self.expect(1, within, what).await.remove(0)
    }

    /// Everything that arrives within `within` (the negative checks: nothing
    /// should).
    pub async fn quiet(&mut self, within: Duration) -> Vec<Bell> {
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.bells.recv()).await {
                Ok(Some(bell)) => {
                    self.heard.push(bell.clone());
                    got.push(bell);
                }
                Ok(None) | Err(_) => return got,
            }
        }
    }

    /// Asserts that no channel event arrives within `within`.
    pub async fn assert_silent(&mut self, within: Duration, what: &str) {
        let got = self.quiet(within).await;
        assert!(
            got.is_empty(),
            "{what}: expected no channel event: {got:#?}"
        );
    }

    async fn command(&mut self, mut command: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        command["id"] = json!(id);
        let stdin = self.stdin.as_mut().expect("the listener is open");
        writeln!(stdin, "{command}").expect("write to node");
        stdin.flush().unwrap();
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.replies.recv()).await {
                Ok(Some(v)) if v["type"] == "reply" && v["id"] == id => {
                    if let Some(e) = v.get("error") {
                        panic!("{command}: {e}; node stderr:\n{}", self.stderr());
                    }
                    return v["result"].clone();
                }
                Ok(Some(_)) => {}
                _ => panic!(
                    "{command}: no reply within {REPLY_TIMEOUT:?}; node stderr:\n{}",
                    self.stderr()
                ),
            }
        }
    }

    /// `tools/call` through SDK client `client`; the whole CallToolResult.
    pub async fn call(&mut self, client: usize, tool: &str, args: Value) -> Value {
        self.command(json!({"op": "call", "client": client, "tool": tool, "args": args}))
            .await
    }

    /// A successful tool call's `structuredContent`.
    pub async fn call_ok(&mut self, client: usize, tool: &str, args: Value) -> Value {
        let result = self.call(client, tool, args).await;
        assert_ne!(result["isError"], true, "{tool} failed: {result}");
        result["structuredContent"].clone()
    }

    /// `tools/list` through SDK client `client`.
    pub async fn tools(&mut self, client: usize) -> Vec<Value> {
        self.command(json!({"op": "tools", "client": client}))
            .await
            .as_array()
            .expect("tools")
            .clone()
    }

    /// Closes the clients and waits for the process to end.
    pub async fn close(mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = writeln!(stdin, "{}", json!({"id": 0, "op": "close"}));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for node") {
                assert!(
                    status.success(),
                    "the listener failed ({status}):\n{}",
                    self.stderr()
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the listener did not exit:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Polls `GET /api/v1/endpoints/{slug}` until `sessions` shows `attached`
/// and `streaming` (at most 10 s).
pub async fn wait_sessions(server: &Server, slug: &str, attached: u64, streaming: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let sessions = server.endpoint(slug).await["sessions"].clone();
        if sessions["attached"] == attached && sessions["streaming"] == streaming {
            return sessions;
        }
        assert!(
            Instant::now() < deadline,
            "{slug}: expected {attached} attached / {streaming} streaming: {sessions}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
