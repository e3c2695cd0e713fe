//! `switchboard serve`: wiring from configuration to a running server.
//!
//! config → (SQLite: server lock) → store → migrations → listener → router →
//! background loops; then serve (`listen`: bounded connections) until a
//! shutdown signal; then refuse new connections, end every notification
//! stream, let in-flight requests finish within a grace period, stop the
//! loops, and return.

pub mod bootstrap;
mod clock_sync;
mod health;
pub mod listen;
pub mod maintenance;
pub mod shutdown;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use bootstrap::{
    BootstrapConfig, BootstrapToken, DEFAULT_DATABASE, Reveal, default_token_file,
};
pub use health::{HealthState, NotReady};
pub use listen::ServeLimits;
pub use maintenance::MaintenanceConfig;

use crate::api::{ApiContext, ApiRates, ApiState};
use crate::board::{BoardContext, BoardState};
use crate::bus::pg::PgBusConfig;
use crate::bus::{Bus, InProcessBus, InstanceId, PgBus};
use crate::clock::{OffsetClock, SharedClock};
use crate::delivery::hooks::HookConfig;
use crate::delivery::sessions::SessionRegistry;
use crate::delivery::sweep::SweepConfig;
use crate::delivery::{Delivery, Doorbells};
use crate::http::cidr::Cidr;
use crate::http::client_addr::TrustedProxies;
use crate::http::connections::ConnectionStats;
use crate::http::host_guard::HostPolicy;
use crate::http::ratelimit::RateLimiter;
use crate::intake::IntakeState;
use crate::mcp::{McpConfig, McpContext, McpState};
use crate::metrics::Metrics;
use crate::metrics::http::MetricsState;
use crate::oauth::{OAuthContext, OAuthState};
use crate::ops::oauth::OAuthServer;
use crate::store::lock::ServerLock;
use crate::store::{DatabaseLocation, SqlStore, Store, StoreBase, StoreOptions};

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub database: DatabaseLocation,
    pub store: StoreOptions,
    pub maintenance: MaintenanceConfig,
    /// How long in-flight requests may run after a shutdown signal.
    pub shutdown_grace: Duration,
    /// The URL clients reach this server at; default `http://<listen address>`.
    pub public_url: Option<String>,
    pub api_rates: ApiRates,
    pub mcp: McpConfig,
    pub sweep: SweepConfig,
    /// When set, `GET /metrics` requires `Authorization: Bearer <token>`;
    /// when unset it is open (for a private network or loopback).
    pub metrics_token: Option<String>,
    /// The PostgreSQL bus's keepalive and reconnect backoff.
    pub bus: PgBusConfig,
    /// A session that makes no request this long after each of 3 doorbells
    /// in a row is deaf (`unanswered`).
    pub unanswered_after: Duration,
    /// `--allowed-host`: more names `Host`/`Origin` may carry (see
    /// `crate::http::host_guard`).
    pub allowed_hosts: Vec<String>,
    /// `--trusted-proxy`: peers whose forwarding headers name the client.
    pub trusted_proxies: Vec<Cidr>,
    /// How the first start hands over the first human's token.
    pub bootstrap: BootstrapConfig,
    /// Header, body and idle timeouts and the connection cap.
    pub limits: ServeLimits,
    /// How notify hooks are delivered (`--allow-private-hooks`).
    pub hooks: HookConfig,
    /// `--allow-private-client-metadata`: OAuth client metadata documents
    /// may be fetched from loopback and private addresses.
    pub allow_private_client_metadata: bool,
}

/// Every surface with its own state; only the server sees them all.
pub struct Surfaces {
    pub health: HealthState,
    pub api: ApiState,
    pub mcp: McpState,
    pub intake: IntakeState,
    pub metrics: MetricsState,
    pub oauth: OAuthState,
    pub edge: Edge,
    pub board: BoardState,
}

/// What the whole router's outer layers need: which `Host`/`Origin` names
/// are ours, and which peers are trusted proxies.
#[derive(Clone)]
pub struct Edge {
    pub hosts: Arc<HostPolicy>,
    pub proxies: Arc<TrustedProxies>,
}

/// Composes the surfaces' routers, then the layers every route has (applied
/// after every route is in, so a surface merged here is covered too). From
/// the outside in: the access log (request id, client address), the request
/// metrics, the `Host`/`Origin` guard.
pub fn router(surfaces: Surfaces) -> Router {
    let metrics = surfaces.metrics.metrics.clone();
    let edge = surfaces.edge;
    health::router(surfaces.health)
        .merge(crate::api::router(surfaces.api))
        .merge(crate::mcp::router(surfaces.mcp))
        .merge(crate::intake::router(surfaces.intake))
        .merge(crate::metrics::http::router(surfaces.metrics))
        .merge(crate::board::router(surfaces.board))
        .merge(crate::oauth::router(surfaces.oauth))
        .layer(axum::middleware::from_fn_with_state(
            edge.hosts,
            crate::http::host_guard::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            crate::metrics::http::count_requests,
        ))
        .layer(axum::middleware::from_fn_with_state(
            edge.proxies,
            crate::http::access_log::access_log,
        ))
}

/// Binds `config.listen` and runs the server until `shutdown` resolves.
pub async fn serve(
    config: ServerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener = match TcpListener::bind(config.listen).await {
        Ok(listener) => listener,
        Err(e) => bail!("cannot listen on {}: {e}", config.listen),
    };
    serve_on(listener, config, shutdown).await
}

/// Runs the server on an already bound listener (tests bind port 0 and read
/// the address back) until `shutdown` resolves. `config.listen` is ignored.
pub async fn serve_on(
    listener: TcpListener,
    config: ServerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // The system clock, aligned to PostgreSQL's when there is one.
    let aligned = OffsetClock::new();
    let clock: SharedClock = aligned.clone();
    let local = listener.local_addr()?;
    // Refuse a bad --allowed-host before anything is opened.
    let hosts = HostPolicy::new(
        local.ip().is_loopback(),
        &config.allowed_hosts,
        config.public_url.as_deref(),
    )?;

    // One server per SQLite file: take the lock before touching the database.
    let _lock = match &config.database {
        DatabaseLocation::Sqlite(path) => {
            let holder = format!(
                "pid {} listening on {} since {}",
                std::process::id(),
                local,
                clock.now()
            );
            Some(ServerLock::acquire(path, &holder)?)
        }
        DatabaseLocation::Postgres(_) => None,
    };

    let store = SqlStore::connect(&config.database, clock.clone(), &config.store)
        .await
        .with_context(|| format!("opening the database {}", config.database.redacted()))?;
    let applied = store
        .migrate(None)
        .await
        .context("applying schema migrations")?;
    if !applied.is_empty() {
        tracing::info!(?applied, "schema migrations applied");
    }
    clock_sync::align(&store, &aligned, None).await;
    let sql_store = Arc::new(store);
    let store: Arc<dyn Store> = sql_store.clone();

    let (stop_tx, stop_rx) = watch::channel(false);
    let instance = InstanceId(crate::mint::new_instance_id());
    // SQLite has one instance; PostgreSQL may have many, told by NOTIFY.
    let (bus, bus_stats, bus_loops): (Arc<dyn Bus>, _, _) = match &config.database {
        DatabaseLocation::Sqlite(_) => (
            Arc::new(InProcessBus::new(instance.clone())),
            None,
            Vec::new(),
        ),
        DatabaseLocation::Postgres(url) => {
            let (bus, loops) =
                PgBus::start(url, instance.clone(), config.bus.clone(), stop_rx.clone());
            let stats = bus.stats().clone();
            (bus, Some(stats), loops)
        }
    };
    let sessions = Arc::new(
        SessionRegistry::with_max_per_endpoint(config.mcp.max_sessions_per_endpoint)
            // Two keepalive periods: a stream that broke is reopened well within.
            .with_ghost_grace(config.mcp.keepalive * 2)
            .with_unanswered_after(config.unanswered_after),
    );
    let doorbells = Arc::new(Doorbells::new(sessions.clone()));
    let delivery = Arc::new(
        Delivery::new(store.clone(), doorbells.clone(), bus.clone())
            .with_hook_config(config.hooks.clone())
            // A catch-up rings what nobody rang within the first re-ring
            // step; the sweep rings anything older (due already).
            .with_catch_up_window(
                config
                    .sweep
                    .steps
                    .first()
                    .copied()
                    .unwrap_or(crate::delivery::sweep::DEFAULT_STEPS[0]),
            ),
    );
    if config.hooks.allow_private {
        tracing::warn!(
            "--allow-private-hooks: notify hooks may reach loopback, private and link-local addresses"
        );
    }
    // Endpoints with an enabled hook are hosted here too (the sweep, the ring claim).
    delivery.hooks().reload().await;
    let public_url = config
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{local}"));
    let mcp = Arc::new(
        McpContext::new(config.mcp.clone(), sessions.clone()).with_public_url(&public_url),
    );
    let oauth_server = Arc::new(OAuthServer::new(
        &public_url,
        config.allow_private_client_metadata,
    ));
    if config.allow_private_client_metadata {
        tracing::warn!(
            "--allow-private-client-metadata: OAuth client metadata may be fetched from loopback, \
             private and link-local addresses"
        );
    }
    let connection_stats = Arc::new(ConnectionStats::new());
    let mut metrics = Metrics::new(
        &doorbells,
        &instance,
        bus_stats.clone(),
        config.metrics_token.as_deref(),
    );
    metrics.register_delivery(
        delivery.counters(),
        crate::store::migrate::latest_version(sql_store.dialect()),
    );
    metrics.register_connections(&connection_stats);
    metrics.register_hooks(&delivery.hooks().deliveries);
    let metrics = Arc::new(metrics);
    if !metrics.is_protected() {
        tracing::info!("/metrics is open (no scrape token): keep it on a private network");
    }
    let loops = maintenance::spawn_loops(
        maintenance::Background {
            delivery: delivery.clone(),
            maintenance: config.maintenance.clone(),
            mcp: mcp.config.clone(),
            sweep: config.sweep.clone(),
            metrics: metrics.clone(),
        },
        stop_rx.clone(),
    );
    metrics.set_clock_offset_ms(aligned.offset_ms());
    let clock_loop = clock_sync::spawn(
        sql_store.clone(),
        aligned.clone(),
        metrics.clone(),
        stop_rx.clone(),
    );
    // PostgreSQL: answer `unavailable` at once while the database is down.
    let circuit_probe = sql_store.start_circuit_probe(stop_rx.clone());
    let bus_listener = tokio::spawn(crate::delivery::listener::run(
        delivery.clone(),
        bus.subscribe(),
        stop_rx,
    ));
    let loops: Vec<_> = loops
        .into_iter()
        .chain(bus_loops)
        .chain([bus_listener, clock_loop])
        .chain(circuit_probe)
        .collect();

    bootstrap::first_human(&*store, &config.database, &config.bootstrap, &public_url).await?;
    tracing::info!(
        listen = %local,
        database = %config.database.redacted(),
        backend = ?store.dialect(),
        %instance,
        "switchboard is serving"
    );
    let draining = Arc::new(AtomicBool::new(false));
    // Turns true when shutdown is requested: the board's live streams end
    // then, so that open browsers do not hold the drain for the grace.
    let (board_stop, board_stopped) = watch::channel(false);
    let board = BoardState {
        store: store.clone(),
        delivery: delivery.clone(),
        board: Arc::new(
            BoardContext::new(
                public_url.clone(),
                board_stopped,
                config.api_rates.write,
                config.api_rates.read,
            )
            .with_oauth(oauth_server.clone()),
        ),
    };
    let app = router(Surfaces {
        health: HealthState {
            store: store.clone(),
            instance: instance.clone(),
            bus: bus_stats,
            draining: draining.clone(),
        },
        api: ApiState {
            store: store.clone(),
            delivery: delivery.clone(),
            api: Arc::new(ApiContext::new(public_url, config.api_rates)),
        },
        mcp: McpState {
            store: store.clone(),
            delivery: delivery.clone(),
            mcp,
        },
        intake: IntakeState {
            store: store.clone(),
            delivery: delivery.clone(),
            limiter: Arc::new(RateLimiter::new(config.api_rates.intake)),
        },
        oauth: OAuthState {
            delivery: delivery.clone(),
            oauth: Arc::new(OAuthContext::new(oauth_server)),
        },
        metrics: MetricsState {
            metrics,
            store: store.clone(),
            delivery,
        },
        edge: Edge {
            hosts: Arc::new(hosts),
            proxies: Arc::new(TrustedProxies(config.trusted_proxies.clone())),
        },
        board,
    });
    // `listen` puts the peer address (`ConnectInfo`) on every request; the
    // client address is read from it (`crate::http::client_addr`).
    let open = listen::accept_until(
        listener,
        app,
        config.limits.clone(),
        connection_stats,
        shutdown,
    )
    .await;
    tracing::info!("shutdown requested; finishing in-flight requests");
    draining.store(true, Ordering::SeqCst);
    // Streams never end by themselves: end them now, cleanly, so that their
    // clients reconnect (elsewhere) and the drain is not held for the grace.
    sessions.shut_down();
    let _ = board_stop.send(true);
    if !open.finish(config.shutdown_grace).await {
        tracing::warn!(
            grace = ?config.shutdown_grace,
            "in-flight requests did not finish within the grace period; closing"
        );
    }

    let _ = stop_tx.send(true);
    for handle in loops {
        let _ = handle.await;
    }
    // Closing the pools checkpoints SQLite's WAL into the main file.
    sql_store.close().await;
    tracing::info!("switchboard stopped");
    Ok(())
}
