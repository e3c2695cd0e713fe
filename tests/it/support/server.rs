//! Every way the integration tests get a server, in one place.
//!
//! - [`InProcess`]: `switchboard::server::serve_on` on a port-0 listener, in
//!   this process on a runtime thread of its own, for tests that only speak
//!   HTTP. The first human (`admin`) and its API token are made in the store
//!   before the server starts, so the server prints no banner and the test
//!   gets the token directly ([`InProcess::admin_token`]).
//! - [`Process`]: the real binary, `switchboard serve --listen 127.0.0.1:0`,
//!   its stderr captured line by line and the port read once from the
//!   "switchboard is serving" line (the kit's `ServeProcess`, shared with the
//!   benchmarks), for what needs a process: signals, the SQLite server lock,
//!   exit codes, the first-start token file, the logs.
//!
//! [`BIN`] is the binary itself, for the CLI runs that are not a server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use switchboard::domain::duration::parse_positive_duration;
use switchboard::http::ratelimit::Rate;
use switchboard::server::ServerConfig;
use switchboard::store::prelude::*;
use switchboard::store::{DatabaseLocation, SqlStore, StoreOptions, issue_api_token};
use switchboard::testkit::ServeProcess;

/// The `switchboard` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

/// How long a server may take to report its address (or answer, in process).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// `switchboard serve --listen 127.0.0.1:0` in `dir`, logging at `info`, with
/// none of the environment that would change what the tests see (a database
/// URL, a log format, a metrics token). Add arguments and environment, then
/// [`Process::spawn`] it.
pub fn serve_command(dir: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .current_dir(dir)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .env_remove("SWITCHBOARD_LOG_FORMAT")
        .env_remove("SWITCHBOARD_METRICS_TOKEN")
        .env_remove("SWITCHBOARD_ALLOWED_HOSTS")
        .env_remove("SWITCHBOARD_TRUSTED_PROXIES")
        .env_remove("SWITCHBOARD_BOOTSTRAP_TOKEN")
        .env_remove("SWITCHBOARD_BOOTSTRAP_TOKEN_FILE")
        .env_remove("RUST_LOG")
        .env("SWITCHBOARD_LOG", "info");
    command
}

/// A `switchboard serve` child process whose stderr is collected line by line:
/// the kit's [`ServeProcess`], whose errors are panics here. Dropping it kills
/// the process.
pub struct Process {
    inner: ServeProcess,
    /// `127.0.0.1:PORT`, from the "switchboard is serving" line.
    pub addr: String,
}

impl Process {
    /// [`serve_command`] in `dir` with `args`.
    pub fn start(dir: &Path, args: &[&str]) -> Process {
        let mut command = serve_command(dir);
        command.args(args);
        Process::spawn(command)
    }

    /// Spawns `command` (a `serve` on port 0) and waits for its address.
    pub fn spawn(command: Command) -> Process {
        let inner = ServeProcess::spawn(command, START_TIMEOUT).unwrap_or_else(|e| panic!("{e:#}"));
        Process {
            addr: inner.addr.clone(),
            inner,
        }
    }

    pub fn url(&self, path: &str) -> String {
        self.inner.url(path)
    }

    pub fn pid(&self) -> u32 {
        self.inner.pid()
    }

    /// Everything the server wrote on stderr so far.
    pub fn log_lines(&self) -> Vec<String> {
        self.inner.log_lines()
    }

    pub fn log_text(&self) -> String {
        self.inner.log_text()
    }

    /// The first start's `sbh_` token, from the 0600 file whose path the
    /// server logs before the "serving" line (stderr is a pipe here, so no
    /// banner), or else from a banner.
    pub fn first_token(&self) -> Option<String> {
        if let Some(path) = self.bootstrap_token_file() {
            let text = std::fs::read_to_string(&path).expect("read the bootstrap token file");
            return Some(text.trim().to_owned());
        }
        self.log_lines()
            .iter()
            .find_map(|line| find_token(line, "sbh_"))
    }

    /// The path of the first start's token file, as logged (`token_file=` in
    /// text logs, `"token_file":"…"` in JSON ones).
    pub fn bootstrap_token_file(&self) -> Option<PathBuf> {
        self.log_lines().iter().find_map(|line| {
            let (_, rest) = line
                .split_once("\"token_file\":\"")
                .or_else(|| line.split_once("token_file="))?;
            let end = rest.find(['"', ' ']).unwrap_or(rest.len());
            Some(PathBuf::from(&rest[..end]))
        })
    }

    /// `kill -NAME pid`.
    pub fn signal(&self, name: &str) {
        self.inner.signal(name).unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// Waits for the exit (killing the process and panicking after
    /// `timeout`), then for the last of its stderr.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        self.inner
            .wait_exit(timeout)
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// SIGTERM, then wait for a clean exit (so that every log line is out).
    pub fn stop(&mut self) -> ExitStatus {
        self.signal("TERM");
        self.wait_exit(Duration::from_secs(20))
    }
}

/// The first `prefix…` token (base64url characters) in `line`.
pub fn find_token(line: &str, prefix: &str) -> Option<String> {
    let start = line.find(prefix)?;
    let token: String = line[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    (token.len() > prefix.len()).then_some(token)
}

/// `switchboard::server::serve_on` in this process, on a runtime thread of
/// its own (so a test may block on std I/O meanwhile), on a SQLite file.
/// Dropping it shuts the server down and waits for it.
pub struct InProcess {
    pub addr: SocketAddr,
    /// The SQLite file the server runs on.
    pub database: PathBuf,
    /// The `sbh_` token of the first human, `admin` (what the first start
    /// would have printed).
    pub admin_token: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl InProcess {
    /// What `switchboard serve` runs with by default (its flags' defaults),
    /// on the SQLite file `database`, with a short shutdown grace.
    pub fn config(database: &Path) -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            database: DatabaseLocation::Sqlite(database.to_owned()),
            store: StoreOptions::default(),
            maintenance: Default::default(),
            shutdown_grace: Duration::from_millis(500),
            public_url: None,
            api_rates: Default::default(),
            mcp: Default::default(),
            sweep: Default::default(),
            metrics_token: None,
            bus: Default::default(),
            unanswered_after: switchboard::delivery::hub::DEFAULT_UNANSWERED_AFTER,
            allowed_hosts: Vec::new(),
            trusted_proxies: Vec::new(),
            bootstrap: switchboard::server::BootstrapConfig::default(),
            limits: Default::default(),
            hooks: Default::default(),
            allow_private_client_metadata: false,
        }
    }

    /// Makes the first human and its token, then serves `config` on
    /// `127.0.0.1:0` until dropped; returns once the server answers.
    pub fn start(config: ServerConfig) -> InProcess {
        let DatabaseLocation::Sqlite(database) = config.database.clone() else {
            panic!("the in-process server runs on a SQLite file");
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let (token_tx, token_rx) = std::sync::mpsc::channel::<Result<String, String>>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("server runtime");
            runtime.block_on(async move {
                match first_human(&config.database).await {
                    Ok(token) => {
                        let _ = token_tx.send(Ok(token));
                    }
                    Err(e) => {
                        let _ = token_tx.send(Err(format!("{e:#}")));
                        return;
                    }
                }
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                let shutdown = async move {
                    let _ = stopped.await;
                };
                if let Err(e) = switchboard::server::serve_on(listener, config, shutdown).await {
                    panic!("the in-process server failed: {e:#}");
                }
            });
        });
        let admin_token = match token_rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(token)) => token,
            Ok(Err(e)) => panic!("preparing the in-process server's database: {e}"),
            Err(_) => panic!("the in-process server did not prepare its database"),
        };
        let server = InProcess {
            addr,
            database,
            admin_token,
            stop: Some(stop),
            thread: Some(thread),
        };
        server.wait_until_answering();
        server
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Polls `GET /healthz` until it answers 200.
    fn wait_until_answering(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if healthz(self.addr) {
                return;
            }
            if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
                panic!("the in-process server stopped before answering");
            }
            assert!(
                Instant::now() < deadline,
                "the in-process server did not answer /healthz within {START_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic in the server thread fails the test, unless it already fails.
            if thread.join().is_err() && !std::thread::panicking() {
                panic!("the in-process server thread panicked");
            }
        }
    }
}

/// What the first start does on an empty database, done before the server
/// starts: migrate, create the human `admin` and an API token for it.
async fn first_human(location: &DatabaseLocation) -> anyhow::Result<String> {
    let store = SqlStore::connect(
        location,
        Arc::new(switchboard::clock::SystemClock),
        &StoreOptions::default(),
    )
    .await?;
    store.migrate(None).await?;
    let human = store.create_human("admin").await?;
    let (token, _) = issue_api_token(&store, &human.id, Some("first start".into()), None).await?;
    store.close().await;
    Ok(token)
}

/// One blocking `GET /healthz`: true on a 200.
fn healthz(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    response.starts_with(b"HTTP/1.1 200")
}

/// Applies `switchboard serve` flags (`--flag value` pairs) to `config` the way
/// `cli::serve` maps them: the flags the in-process tests use.
pub fn apply_flags(config: &mut ServerConfig, args: &[&str]) {
    for pair in args.chunks(2) {
        apply_flag(config, pair);
    }
}

/// One `[flag, value]` of [`apply_flags`].
pub fn apply_flag(config: &mut ServerConfig, pair: &[&str]) {
    let [flag, value] = pair else {
        panic!("a serve flag and its value: {pair:?}");
    };
    let rate = || -> f64 {
        value
            .parse()
            .unwrap_or_else(|e| panic!("{flag} {value}: {e}"))
    };
    let duration = |text: &str| {
        parse_positive_duration(text, "flag").unwrap_or_else(|e| panic!("{flag} {text}: {e:?}"))
    };
    match *flag {
        "--mcp-rate" => config.mcp.rate = Rate::new(rate(), rate() * 2.0),
        "--api-read-rate" => config.api_rates.read = Rate::new(rate(), rate() * 2.0),
        "--api-write-rate" => config.api_rates.write = Rate::new(rate(), rate() * 4.0),
        "--intake-rate" => config.api_rates.intake = Rate::new(rate(), rate() * 2.0),
        "--sse-keepalive" => config.mcp.keepalive = duration(value),
        "--session-idle" => config.mcp.idle_limit = duration(value),
        "--maintenance-interval" => config.maintenance.interval = duration(value),
        "--presence-interval" => config.maintenance.presence_interval = duration(value),
        "--activity-interval" => config.maintenance.activity_interval = duration(value),
        "--unanswered-after" => config.unanswered_after = duration(value),
        "--ring-steps" => {
            config.sweep.steps = value.split(',').map(|step| duration(step.trim())).collect();
        }
        "--allowed-host" => config.allowed_hosts.push((*value).to_owned()),
        "--trusted-proxy" => config.trusted_proxies.push(
            value
                .parse()
                .unwrap_or_else(|e| panic!("{flag} {value}: {e}")),
        ),
        other => panic!("support::server has no in-process mapping for {other}: add it here"),
    }
}
