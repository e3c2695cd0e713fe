//! Shared by the REST API's end-to-end tests: a server on a SQLite file in a
//! temp dir, either the real `switchboard serve` binary (its stderr collected
//! line by line, the first-start token read from its 0600 file) or, for tests
//! that only need HTTP, the server in process; an HTTP helper that keeps raw bodies for
//! byte-for-byte comparison, a second human made through the local admin
//! commands, and the store opened in-process for what only an agent can do
//! (claim, fail).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

pub use super::server::{BIN, find_token};
use super::server::{InProcess, Process, apply_flags, serve_command};

/// High limits so that the tests never meet the rate limiter by accident.
pub const HIGH_RATES: [&str; 4] = ["--api-read-rate", "1000", "--api-write-rate", "1000"];

/// A server on `dir/switchboard.db`: a `switchboard serve` child whose
/// stderr is collected line by line ([`Server::start`]), or the server in
/// process ([`Server::in_process`]).
pub struct Server {
    running: Running,
    pub addr: String,
    pub database: PathBuf,
    /// The `sbh_` token of the first human (`admin`): from the first start's
    /// token file, or the one made before the in-process server started.
    pub first_token: String,
    http: reqwest::Client,
}

enum Running {
    Process(Process),
    InProcess(InProcess),
}

impl Server {
    /// The server in process on `dir/switchboard.db`, with `args` as
    /// `switchboard serve` flags (those [`apply_flags`] maps).
    pub fn in_process(dir: &Path, args: &[&str]) -> Server {
        let database = dir.join("switchboard.db");
        let mut config = InProcess::config(&database);
        apply_flags(&mut config, args);
        let server = InProcess::start(config);
        Server {
            addr: server.addr.to_string(),
            database,
            first_token: server.admin_token.clone(),
            running: Running::InProcess(server),
            http: http_client(),
        }
    }

    /// `serve` on an OS-chosen loopback port with `database` in `dir`.
    pub fn start(dir: &Path, args: &[&str]) -> Server {
        Self::start_with_env(dir, args, &[("SWITCHBOARD_LOG", "info")])
    }

    pub fn start_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        let database = dir.join("switchboard.db");
        let mut command = serve_command(dir);
        command.arg("--database").arg(&database).args(args);
        for (k, v) in env {
            command.env(k, v);
        }
        let process = Process::spawn(command);
        let first_token = process
            .first_token()
            .expect("the first start writes an sbh_ token to its file");
        Server {
            addr: process.addr.clone(),
            running: Running::Process(process),
            database,
            first_token,
            http: http_client(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Whether the server logged the path of its first-start token file.
    pub fn token_file_logged(&self) -> bool {
        match &self.running {
            Running::Process(process) => process.bootstrap_token_file().is_some(),
            Running::InProcess(_) => false,
        }
    }

    /// Everything the server wrote on stderr so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        match &self.running {
            Running::Process(process) => process.log_lines(),
            Running::InProcess(_) => {
                panic!("an in-process server has no stderr: use Server::start")
            }
        }
    }

    /// SIGTERM, then wait for a clean exit (so that every log line is out).
    pub fn stop(&mut self) -> ExitStatus {
        match &mut self.running {
            Running::Process(process) => process.stop(),
            Running::InProcess(_) => {
                panic!("an in-process server has no process: use Server::start")
            }
        }
    }

    /// One request; `auth` is the whole `Authorization` value, if any.
    pub async fn send(&self, method: Method, path: &str, auth: Option<&str>, body: Body) -> Resp {
        let mut req = self.http.request(method, self.url(path));
        if let Some(auth) = auth {
            req = req.header("Authorization", auth);
        }
        req = match body {
            Body::None => req,
            Body::Json(v) => req
                .header("Content-Type", "application/json")
                .body(serde_json::to_vec(&v).unwrap()),
            Body::Raw {
                content_type,
                bytes,
            } => {
                let req = match content_type {
                    Some(ct) => req.header("Content-Type", ct),
                    None => req,
                };
                req.body(bytes)
            }
        };
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.expect("body").to_vec();
        Resp {
            status,
            headers,
            body,
        }
    }

    /// A request with `Authorization: Bearer {token}`.
    pub async fn call(&self, method: Method, path: &str, token: &str, body: Body) -> Resp {
        self.send(method, path, Some(&format!("Bearer {token}")), body)
            .await
    }

    /// A call that must answer `status`; returns the JSON body.
    pub async fn expect(
        &self,
        status: u16,
        method: Method,
        path: &str,
        token: &str,
        body: Body,
    ) -> Value {
        let what = format!("{method} {path}");
        let resp = self.call(method, path, token, body).await;
        assert_eq!(resp.status, status, "{what}: {}", resp.text());
        resp.json()
    }
}

fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}

pub enum Body {
    None,
    Json(Value),
    Raw {
        content_type: Option<&'static str>,
        bytes: Vec<u8>,
    },
}

pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        if self.body.is_empty() {
            return Value::Null;
        }
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The error envelope's `code`.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error envelope: {}", self.text()))
            .to_owned()
    }
}

/// A human made with the local admin path, and one API token of theirs.
pub struct MadeHuman {
    pub id: String,
    pub name: String,
    pub token: String,
    pub token_id: String,
    /// The admin commands' stderr (their logs).
    pub stderr: String,
}

/// Creates a human and a token beside the running server with the local
/// admin path, `switchboard admin human create` / `admin token create`.
pub fn make_human(server: &Server, name: &str) -> MadeHuman {
    let human = admin(&["human", "create", name], &server.database);
    let token = admin(
        &["token", "create", name, "--label", "made by the tests"],
        &server.database,
    );
    let human_json: Value = serde_json::from_str(&human.0).expect("admin human JSON");
    let token_json: Value = serde_json::from_str(&token.0).expect("admin token JSON");
    MadeHuman {
        id: human_json["id"].as_str().unwrap().to_owned(),
        name: name.to_owned(),
        token: token_json["token"].as_str().unwrap().to_owned(),
        token_id: token_json["id"].as_str().unwrap().to_owned(),
        stderr: format!("{}\n{}", human.1, token.1),
    }
}

/// Runs `switchboard admin ARGS --database DB --json`: (stdout, stderr).
fn admin(args: &[&str], database: &Path) -> (String, String) {
    let out = Command::new(BIN)
        .arg("admin")
        .args(args)
        .arg("--database")
        .arg(database)
        .arg("--json")
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .env("SWITCHBOARD_LOG", "debug")
        .output()
        .expect("run switchboard admin");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "admin {args:?}: {stderr}");
    (stdout.trim().to_owned(), stderr)
}

/// The server's SQLite file opened in-process (the server allows it: WAL and
/// a busy timeout serialise the writes).
pub async fn open_store(database: &Path) -> switchboard::store::SqlStore {
    use switchboard::store::{DatabaseLocation, SqlStore, StoreOptions};
    SqlStore::connect(
        &DatabaseLocation::Sqlite(database.to_owned()),
        Arc::new(switchboard::clock::SystemClock),
        &StoreOptions::default(),
    )
    .await
    .expect("open the server's database")
}

/// What an agent would do over MCP, done on the store: claim the oldest
/// pending todo of the endpoint, then optionally fail it.
pub async fn claim_next(database: &Path, endpoint_id: &str, then_fail: bool) -> String {
    use switchboard::store::prelude::*;
    use switchboard::store::{ClaimOptions, Finish};
    let store = open_store(database).await;
    let endpoint = store
        .unscoped_get_endpoint(endpoint_id)
        .await
        .expect("endpoint");
    let caller = endpoint.caller();
    let claimed = store
        .claim_next(&caller, None, ClaimOptions::default())
        .await
        .expect("claim_next")
        .expect("a claimable todo");
    if then_fail {
        store
            .fail(&caller, &claimed.todo.id, Finish::default())
            .await
            .expect("fail");
    }
    store.close().await;
    claimed.todo.id
}

/// One vended endpoint as its owner saw it.
#[derive(Debug, Clone)]
pub struct Vended {
    pub id: String,
    pub slug: String,
    pub agent: String,
    /// The `sbk_` credential.
    pub credential: String,
    pub webhook_id: Option<String>,
    pub ingest_url: Option<String>,
}

pub async fn vend(server: &Server, token: &str, body: Value) -> Vended {
    let v = server
        .expect(
            201,
            Method::POST,
            "/api/v1/endpoints",
            token,
            Body::Json(body),
        )
        .await;
    Vended {
        id: v["id"].as_str().unwrap().to_owned(),
        slug: v["slug"].as_str().unwrap().to_owned(),
        agent: v["agent"].as_str().unwrap().to_owned(),
        credential: v["token"].as_str().unwrap().to_owned(),
        webhook_id: v["webhook"]["id"].as_str().map(str::to_owned),
        ingest_url: v["webhook"]["ingest_url"].as_str().map(str::to_owned),
    }
}

/// Pushes a human-authored todo; returns its id.
pub async fn push(server: &Server, token: &str, endpoint: &str, title: &str) -> String {
    let v = server
        .expect(
            201,
            Method::POST,
            &format!("/api/v1/endpoints/{endpoint}/todos"),
            token,
            Body::Json(json!({ "title": title, "queue": "inbox" })),
        )
        .await;
    v["id"].as_str().unwrap().to_owned()
}

/// Creates an API token with POST /api/v1/tokens: (token, id, expires_at).
pub async fn create_token(server: &Server, token: &str, body: Value) -> (String, String, Value) {
    let v = server
        .expect(201, Method::POST, "/api/v1/tokens", token, Body::Json(body))
        .await;
    (
        v["token"].as_str().unwrap().to_owned(),
        v["id"].as_str().unwrap().to_owned(),
        v["expires_at"].clone(),
    )
}
