//! The command line. `serve`, `migrate`, `version`, `admin` and `shift` are local;
//! `login` saves a server and token, and the resource commands (`agent`,
//! `endpoint`, `todo`, `webhook`, `token`) call the REST API (`docs/cli.md`).

mod args;
mod client;
mod commands;
mod credentials;
mod output;
mod prompt;
mod work;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};

use commands::{
    admin, agent, auth, delivery, doctor, endpoint, hook, quickstart, schedule, shift, todo, token,
    webhook,
};

use crate::api::ApiRates;
use crate::bus::pg::PgBusConfig;
use crate::clock::{Clock, SystemClock};
use crate::delivery::sweep::SweepConfig;
use crate::domain::duration::parse_positive_duration;
use crate::http::cidr::Cidr;
use crate::http::ratelimit::Rate;
use crate::mcp::McpConfig;
use crate::server::{
    self, BootstrapConfig, BootstrapToken, MaintenanceConfig, Reveal, ServeLimits, ServerConfig,
};
use crate::store::migrate::latest_version;
use crate::store::{DatabaseLocation, SqlStore, StoreOptions};

#[derive(Debug, Parser)]
#[command(
    name = "switchboard",
    version,
    about = "A durable work queue for AI agents, reached over MCP.",
    long_about = "A durable work queue for AI agents, reached over MCP.\n\n\
        Every server flag has an environment fallback (SWITCHBOARD_*); no config file is \
        needed. Client commands use the login saved by `switchboard login`, or --url and --token."
)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(
        long,
        global = true,
        env = "SWITCHBOARD_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

// Parsed once per process: the size of `serve`'s flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (SQLite ./switchboard.db on 127.0.0.1:8080 unless told otherwise).
    Serve(Box<ServeArgs>),
    /// Apply schema migrations and exit.
    Migrate(MigrateArgs),
    /// Print the version and the schema version this binary expects.
    Version,
    /// Check an API token against a server and save both for later commands.
    Login(auth::LoginArgs),
    /// Forget the saved login.
    Logout(auth::LogoutArgs),
    /// Show the server in use, who you are there, and whether it is ready.
    Status(args::ClientArgs),
    /// Check the login, the server and (given REF) an endpoint's sessions and
    /// doorbells, and say what to do about what is wrong. Exit 1 if anything is.
    Doctor(doctor::DoctorArgs),
    /// Make humans and their tokens, directly in the database (no server needed).
    Admin(admin::AdminArgs),
    /// Register and inspect agents.
    Agent(agent::AgentArgs),
    /// Vend, inspect, edit, revoke and delete endpoints.
    Endpoint(endpoint::EndpointArgs),
    /// Push, list and act on todos.
    Todo(todo::TodoArgs),
    /// Intake webhooks that turn deliveries into todos.
    Webhook(webhook::WebhookArgs),
    /// One webhook delivery: show it, release or discard it from quarantine, replay it.
    Delivery(delivery::DeliveryArgs),
    /// Notify hooks: URLs that get a signed POST when an endpoint is rung.
    Hook(hook::HookArgs),
    /// Recurring todos: a todo at each occurrence of a cron expression.
    Schedule(schedule::ScheduleArgs),
    /// Your own API tokens.
    Token(token::TokenArgs),
    /// Check a weekly shift locally (no server): canonical form, presence, boundaries.
    Shift(shift::ShiftArgs),
    /// Run a headless agent command on every doorbell of an endpoint (a
    /// local runner): `switchboard work MCP_URL -- COMMAND [ARG…]`.
    Work(work::WorkArgs),
    /// On a running server: sign in (on this machine with the first start's
    /// token), vend an endpoint, and run the built-in example agent on its
    /// doorbells; a first todo wakes it. Runs until Ctrl-C.
    Quickstart(quickstart::QuickstartArgs),
    /// The built-in example agent `switchboard work` can run: claims the
    /// endpoint's todos over MCP and completes each (reads
    /// SWITCHBOARD_MCP_URL and SWITCHBOARD_TOKEN, as the runner sets them).
    ExampleAgent(work::example::ExampleAgentArgs),
    /// Print a shell completion script, e.g.
    /// `switchboard completions bash > ~/.local/share/bash-completion/completions/switchboard`.
    Completions(CompletionsArgs),
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    pub shell: clap_complete::Shell,
}

/// A mistake in how a command was called that clap cannot see (a missing
/// confirmation, a missing token with no terminal to ask on): exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// 2 for a usage error, 1 for any other failure.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    if error.downcast_ref::<UsageError>().is_some() {
        2
    } else {
        1
    }
}

#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// A file path, sqlite://PATH, or postgres://USER@HOST:PORT/DB.
    #[arg(
        long,
        env = "SWITCHBOARD_DATABASE_URL",
        default_value = server::DEFAULT_DATABASE
    )]
    pub database: String,
}

impl DatabaseArgs {
    pub(crate) fn location(&self) -> anyhow::Result<DatabaseLocation> {
        DatabaseLocation::parse(&self.database).map_err(|e| anyhow::anyhow!("--database: {e}"))
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,

    /// Address and port to listen on.
    #[arg(long, env = "SWITCHBOARD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Period of the maintenance loop (lease reaper, retry scheduler, expiry).
    #[arg(long, env = "SWITCHBOARD_MAINTENANCE_INTERVAL", default_value = "30s")]
    pub maintenance_interval: String,

    /// Period of the presence evaluator (shift starts, override expiries).
    #[arg(long, env = "SWITCHBOARD_PRESENCE_INTERVAL", default_value = "30s")]
    pub presence_interval: String,

    /// Finished todos (done, dead letter) older than this are deleted.
    #[arg(long, env = "SWITCHBOARD_RETENTION", default_value = "30d")]
    pub retention: String,

    /// Period of the retention pass (it also runs once at start).
    #[arg(long, env = "SWITCHBOARD_RETENTION_INTERVAL", default_value = "1h")]
    pub retention_interval: String,

    /// How often this instance writes down its queues' activity for the
    /// board's charts (also once at shutdown).
    #[arg(long, env = "SWITCHBOARD_ACTIVITY_INTERVAL", default_value = "5s")]
    pub activity_interval: String,

    /// How long in-flight requests may finish after SIGINT/SIGTERM.
    #[arg(long, env = "SWITCHBOARD_SHUTDOWN_GRACE", default_value = "10s")]
    pub shutdown_grace: String,

    /// The URL clients reach this server at (MCP and webhook URLs are built
    /// from it); default http://<listen address>.
    #[arg(long, env = "SWITCHBOARD_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Human API reads per second per human (burst twice that).
    #[arg(long, env = "SWITCHBOARD_API_READ_RATE", default_value_t = 20.0)]
    pub api_read_rate: f64,

    /// Human API writes per second per human (burst four times that).
    #[arg(long, env = "SWITCHBOARD_API_WRITE_RATE", default_value_t = 5.0)]
    pub api_write_rate: f64,

    /// Webhook deliveries per second per client IP (burst twice that).
    #[arg(long, env = "SWITCHBOARD_INTAKE_RATE", default_value_t = 10.0)]
    pub intake_rate: f64,

    /// The re-ring schedule: ring k is due this long after the previous ring
    /// (or creation); one step per counted ring, then silence.
    #[arg(
        long,
        env = "SWITCHBOARD_RING_STEPS",
        default_value = "5m,20m,1h,6h,6h"
    )]
    pub ring_steps: String,

    /// Re-rings per maintenance tick at most.
    #[arg(long, env = "SWITCHBOARD_RING_PER_TICK", default_value_t = 100)]
    pub ring_per_tick: i64,

    /// MCP requests per second per endpoint (burst twice that).
    #[arg(long, env = "SWITCHBOARD_MCP_RATE", default_value_t = 20.0)]
    pub mcp_rate: f64,

    /// Keep-alive comment period on MCP notification streams.
    #[arg(long, env = "SWITCHBOARD_SSE_KEEPALIVE", default_value = "15s")]
    pub sse_keepalive: String,

    /// An MCP session with nothing in flight this long is closed.
    #[arg(long, env = "SWITCHBOARD_SESSION_IDLE", default_value = "30m")]
    pub session_idle: String,

    /// PostgreSQL connections per instance (a third of them, 16 at most,
    /// serve the agent loop's claim and complete).
    #[arg(long, env = "SWITCHBOARD_DB_MAX_CONNECTIONS", default_value_t = 24)]
    pub db_max_connections: u32,

    /// How long a request waits for a database connection before it answers
    /// 503 `unavailable`.
    #[arg(long, env = "SWITCHBOARD_DB_ACQUIRE_TIMEOUT", default_value = "750ms")]
    pub db_acquire_timeout: String,

    /// A request head must arrive in full this long after its first byte.
    #[arg(long, env = "SWITCHBOARD_HEADER_READ_TIMEOUT", default_value = "30s")]
    pub header_read_timeout: String,

    /// A request body must arrive in full this long after its head (else 408).
    #[arg(long, env = "SWITCHBOARD_BODY_READ_TIMEOUT", default_value = "30s")]
    pub body_read_timeout: String,

    /// A kept-alive connection with nothing in flight and no bytes either way
    /// this long is closed. Longer than --sse-keepalive.
    #[arg(long, env = "SWITCHBOARD_IDLE_TIMEOUT", default_value = "75s")]
    pub idle_timeout: String,

    /// Concurrent connections at most (never above the open-file limit minus
    /// a reserve); the next one waits and an idle one is closed for it.
    #[arg(long, env = "SWITCHBOARD_MAX_CONNECTIONS", default_value_t = server::listen::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,

    /// MCP sessions one endpoint may have open on this instance; one more
    /// closes one of the endpoint's sessions: one without a GET stream if
    /// any, the least recently active first.
    #[arg(long, env = "SWITCHBOARD_MAX_SESSIONS_PER_ENDPOINT", default_value_t = crate::delivery::sessions::DEFAULT_MAX_SESSIONS_PER_ENDPOINT)]
    pub max_sessions_per_endpoint: usize,

    /// Bearer token a scraper must present to read GET /metrics. Unset, the
    /// endpoint is open: keep it on a private network or loopback.
    #[arg(long, env = "SWITCHBOARD_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,

    /// A session that makes no request of any kind this long after each of 3
    /// doorbells in a row counts as deaf ("unanswered") until it makes one.
    #[arg(long, env = "SWITCHBOARD_UNANSWERED_AFTER", default_value = "2m")]
    pub unanswered_after: String,

    /// PostgreSQL only: how often the cluster bus listener probes its own
    /// connection (a silent connection is replaced after three periods).
    #[arg(long, env = "SWITCHBOARD_BUS_KEEPALIVE", default_value = "5s")]
    pub bus_keepalive: String,

    /// A host name (or `.domain` for every name under it) that requests may
    /// carry in Host and Origin, besides localhost/127.0.0.1/[::1] and the
    /// --public-url host. On loopback other names are refused (403); bound
    /// elsewhere, Host is checked only when this is given. Repeatable.
    #[arg(
        long = "allowed-host",
        value_name = "NAME",
        env = "SWITCHBOARD_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,

    /// A proxy address or CIDR block (10.0.0.0/8) whose Forwarded /
    /// X-Forwarded-For headers name the client (intake's per-IP rate limit,
    /// the access log). Other peers' forwarding headers are ignored. Repeatable.
    #[arg(
        long = "trusted-proxy",
        value_name = "CIDR",
        env = "SWITCHBOARD_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<Cidr>,
    /// First start only: write the first human's API token to this file
    /// (mode 0600) instead of showing it. Without it, the token is shown on
    /// stderr when that is a terminal and logs are text, and otherwise written
    /// beside the SQLite file (<db>.bootstrap-token), or for PostgreSQL to
    /// ./switchboard.bootstrap-token. SWITCHBOARD_BOOTSTRAP_TOKEN (environment
    /// only, never a flag: ps shows flags) supplies the token instead.
    #[arg(long, env = "SWITCHBOARD_BOOTSTRAP_TOKEN_FILE")]
    pub bootstrap_token_file: Option<std::path::PathBuf>,

    /// Let notify hooks reach loopback, private (RFC 1918, unique-local),
    /// link-local and carrier-grade NAT addresses. Off, such targets are
    /// refused when dialled (after DNS resolution) and recorded as refused.
    #[arg(long, env = "SWITCHBOARD_ALLOW_PRIVATE_HOOKS")]
    pub allow_private_hooks: bool,

    /// Let OAuth client metadata documents (an https client_id) be fetched
    /// from loopback, private and link-local addresses, and over http on
    /// loopback. Off, such addresses are refused when dialled. For tests
    /// and closed networks.
    #[arg(long, env = "SWITCHBOARD_ALLOW_PRIVATE_CLIENT_METADATA")]
    pub allow_private_client_metadata: bool,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,

    /// Stop at this schema version instead of the latest.
    #[arg(long)]
    pub to: Option<i64>,
}

fn positive_count(value: usize, flag: &'static str) -> anyhow::Result<usize> {
    if value == 0 {
        anyhow::bail!("--{flag}: must be at least 1");
    }
    Ok(value)
}

fn duration_flag(value: &str, flag: &'static str) -> anyhow::Result<Duration> {
    parse_positive_duration(value, flag).map_err(|e| anyhow::anyhow!("--{e}"))
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(*args, cli.log_format).await,
        Command::Migrate(args) => migrate(args).await,
        Command::Version => {
            // Each dialect has its own migration list, with steps the other lacks.
            println!(
                "switchboard {} (schema version {} on SQLite, {} on PostgreSQL)",
                env!("CARGO_PKG_VERSION"),
                latest_version(crate::store::dialect::Dialect::Sqlite),
                latest_version(crate::store::dialect::Dialect::Postgres)
            );
            Ok(())
        }
        Command::Login(args) => auth::login(args).await,
        Command::Logout(args) => auth::logout(args),
        Command::Status(args) => auth::status(args).await,
        Command::Doctor(args) => doctor::run(args).await,
        Command::Admin(args) => admin::run(args).await,
        Command::Agent(args) => agent::run(args).await,
        Command::Endpoint(args) => endpoint::run(args).await,
        Command::Todo(args) => todo::run(args).await,
        Command::Webhook(args) => webhook::run(args).await,
        Command::Delivery(args) => delivery::run(args).await,
        Command::Hook(args) => hook::run(args).await,
        Command::Schedule(args) => schedule::run(args).await,
        Command::Token(args) => token::run(args).await,
        Command::Shift(args) => shift::run(args),
        Command::Work(args) => work::run(args).await,
        Command::Quickstart(args) => quickstart::run(args).await,
        Command::ExampleAgent(args) => work::example::run(args).await,
        Command::Completions(args) => {
            use clap::CommandFactory;
            clap_complete::generate(
                args.shell,
                &mut Cli::command(),
                "switchboard",
                &mut std::io::stdout(),
            );
            Ok(())
        }
    }
}

/// An orchestrator's first human token: read from the environment only.
const BOOTSTRAP_TOKEN_ENV: &str = "SWITCHBOARD_BOOTSTRAP_TOKEN";

/// How the first start hands over a minted token: a banner only for a person
/// at a terminal reading text logs; a 0600 file otherwise.
fn bootstrap_config(args: &ServeArgs, log_format: LogFormat) -> anyhow::Result<BootstrapConfig> {
    let token = match std::env::var(BOOTSTRAP_TOKEN_ENV) {
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => {
            anyhow::bail!("{BOOTSTRAP_TOKEN_ENV} is not valid UTF-8")
        }
        // Empty is unset, as an orchestrator's template leaves it.
        Ok(text) if text.trim().is_empty() => None,
        Ok(text) => Some(
            BootstrapToken::parse(&text)
                .map_err(|e| anyhow::anyhow!("{BOOTSTRAP_TOKEN_ENV} {e}"))?,
        ),
    };
    let on_terminal = std::io::stderr().is_terminal() && matches!(log_format, LogFormat::Text);
    let reveal = match (&args.bootstrap_token_file, on_terminal) {
        (Some(path), _) => Reveal::FileAt(path.clone()),
        (None, true) => Reveal::Banner,
        (None, false) => Reveal::File,
    };
    Ok(BootstrapConfig { token, reveal })
}

async fn serve(args: ServeArgs, log_format: LogFormat) -> anyhow::Result<()> {
    let bootstrap = bootstrap_config(&args, log_format)?;
    let shutdown = server::shutdown::install().context("installing signal handlers")?;
    let config = ServerConfig {
        listen: args.listen,
        database: args.db.location()?,
        store: StoreOptions {
            max_connections: args.db_max_connections.max(2),
            acquire_timeout: duration_flag(&args.db_acquire_timeout, "db-acquire-timeout")?,
            ..StoreOptions::default()
        },
        maintenance: MaintenanceConfig {
            interval: duration_flag(&args.maintenance_interval, "maintenance-interval")?,
            presence_interval: duration_flag(&args.presence_interval, "presence-interval")?,
            retention: duration_flag(&args.retention, "retention")?,
            retention_interval: duration_flag(&args.retention_interval, "retention-interval")?,
            activity_interval: duration_flag(&args.activity_interval, "activity-interval")?,
            ..MaintenanceConfig::default()
        },
        shutdown_grace: duration_flag(&args.shutdown_grace, "shutdown-grace")?,
        public_url: args.public_url.clone(),
        api_rates: ApiRates {
            read: Rate::new(args.api_read_rate, args.api_read_rate * 2.0),
            write: Rate::new(args.api_write_rate, args.api_write_rate * 4.0),
            intake: Rate::new(args.intake_rate, args.intake_rate * 2.0),
        },
        sweep: SweepConfig {
            steps: args
                .ring_steps
                .split(',')
                .map(|step| duration_flag(step.trim(), "ring-steps"))
                .collect::<anyhow::Result<Vec<_>>>()?,
            per_tick: args.ring_per_tick.max(1),
        },
        mcp: McpConfig {
            rate: Rate::new(args.mcp_rate, args.mcp_rate * 2.0),
            keepalive: duration_flag(&args.sse_keepalive, "sse-keepalive")?,
            idle_limit: duration_flag(&args.session_idle, "session-idle")?,
            max_sessions_per_endpoint: positive_count(
                args.max_sessions_per_endpoint,
                "max-sessions-per-endpoint",
            )?,
            ..McpConfig::default()
        },
        metrics_token: args.metrics_token.clone(),
        unanswered_after: duration_flag(&args.unanswered_after, "unanswered-after")?,
        bus: PgBusConfig {
            keepalive: duration_flag(&args.bus_keepalive, "bus-keepalive")?,
            ..PgBusConfig::default()
        },
        allowed_hosts: args.allowed_hosts.clone(),
        trusted_proxies: args.trusted_proxies.clone(),
        bootstrap,
        limits: ServeLimits {
            header_read_timeout: duration_flag(&args.header_read_timeout, "header-read-timeout")?,
            body_read_timeout: duration_flag(&args.body_read_timeout, "body-read-timeout")?,
            idle_timeout: duration_flag(&args.idle_timeout, "idle-timeout")?,
            max_connections: positive_count(args.max_connections, "max-connections")?,
        },
        hooks: crate::delivery::hooks::HookConfig {
            allow_private: args.allow_private_hooks,
            ..Default::default()
        },
        allow_private_client_metadata: args.allow_private_client_metadata,
    };
    if config.limits.idle_timeout <= config.mcp.keepalive {
        anyhow::bail!(
            "--idle-timeout ({:?}) must be longer than --sse-keepalive ({:?})",
            config.limits.idle_timeout,
            config.mcp.keepalive
        );
    }
    server::serve(config, shutdown).await
}

async fn migrate(args: MigrateArgs) -> anyhow::Result<()> {
    let location = args.db.location()?;
    let clock = std::sync::Arc::new(SystemClock);
    let store = SqlStore::connect(&location, clock.clone(), &StoreOptions::default())
        .await
        .with_context(|| format!("opening the database {}", location.redacted()))?;
    let applied = store
        .migrate(args.to)
        .await
        .context("applying migrations")?;
    let version = store.schema_version().await?.unwrap_or(0);
    store.close().await;
    if applied.is_empty() {
        println!(
            "{}: schema already at version {version}",
            location.redacted()
        );
    } else {
        let list: Vec<String> = applied.iter().map(i64::to_string).collect();
        println!(
            "{}: applied migration(s) {}; schema now at version {version} ({})",
            location.redacted(),
            list.join(", "),
            clock.now()
        );
    }
    Ok(())
}
