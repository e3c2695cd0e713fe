//! The serving loop: our own accept loop over hyper's HTTP/1 connections,
//! so that every connection is bounded (`axum::serve` bounds nothing):
//!
//! - a **header-read timeout**: from the first byte of a request head to
//!   its last (a client dripping a head is cut);
//! - a **body-read timeout**: from the head to the body's last byte (408,
//!   then the connection closes);
//! - an **idle timeout**: a connection that moves no byte either way is
//!   closed, kept alive with nothing in flight (`idle_timeout`) or with a
//!   request whose client stopped reading (`stalled`; a stream writes
//!   keep-alive comments, so an open stream is never stalled);
//! - a **connection cap**: at the cap the connection that arrives waits
//!   unanswered (later ones in the listen backlog), and one idle
//!   connection — kept alive after answering a request, or silent for a
//!   second since its accept — is closed to make room for it
//!   (`docs/decisions.md`, "Connection cap").
//!
//! A connection that sends nothing at all is cut at the header timeout,
//! counted from its accept (as nginx's `client_header_timeout`).
//!
//! One watchdog per connection enforces the header and idle timeouts from
//! what the connection's I/O and requests record in its [`Activity`]; hyper's
//! own header timer is off (it would also cut idle connections at the header
//! timeout). On shutdown the accept loop stops (new connections are
//! refused), every connection is told to finish its request in flight and
//! close, and one dripping a head is closed at once.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use crate::http::connections::ConnectionStats;

mod service;
mod watchdog;

use service::ConnectionService;
use watchdog::{Activity, Tracked, watchdog};

/// The bounds of every connection (`--header-read-timeout`,
/// `--body-read-timeout`, `--idle-timeout`, `--max-connections`).
#[derive(Debug, Clone)]
pub struct ServeLimits {
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub idle_timeout: Duration,
    /// Before [`ServeLimits::effective_max_connections`] caps it.
    pub max_connections: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(75),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// Open files kept for everything but client connections: the database
/// pool, the SQLite files, the bus, the listener, logs.
const FD_RESERVE: u64 = 128;

impl ServeLimits {
    /// `max_connections`, but never more than the open-file soft limit minus
    /// [`FD_RESERVE`]: at that limit `accept` fails and every client waits.
    /// The soft limit is raised first, as far as the hard limit allows, to
    /// fit `max_connections` (as Go and nginx's `worker_rlimit_nofile` do).
    pub fn effective_max_connections(&self) -> usize {
        let soft = raise_open_file_limit(self.max_connections as u64 + FD_RESERVE);
        let ceiling = soft.map(|s| s.saturating_sub(FD_RESERVE).max(16) as usize);
        match ceiling {
            Some(ceiling) if ceiling < self.max_connections => {
                tracing::warn!(
                    requested = self.max_connections,
                    open_file_limit = soft,
                    effective = ceiling,
                    "--max-connections is above the open-file limit minus a reserve; capped \
                     (raise `ulimit -n` / LimitNOFILE to allow more)"
                );
                ceiling
            }
            _ => self.max_connections.max(1),
        }
    }
}

/// Raises the open-file soft limit towards `wanted` (never above the hard
/// limit, never down); returns the soft limit now in force (`None`: unlimited
/// or unknown).
#[cfg(unix)]
fn raise_open_file_limit(wanted: u64) -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current?;
    let target = limit.maximum.map_or(wanted, |hard| wanted.min(hard));
    if target <= soft {
        return Some(soft);
    }
    let raised = Rlimit {
        current: Some(target),
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => Some(target),
        Err(e) => {
            tracing::debug!(error = %e, "cannot raise the open-file limit");
            Some(soft)
        }
    }
}

#[cfg(not(unix))]
fn raise_open_file_limit(_wanted: u64) -> Option<u64> {
    None
}

/// Accepts connections on `listener` and serves `app` on each until
/// `shutdown` resolves; then stops accepting and returns the connections
/// still open, already told to finish.
pub async fn accept_until(
    listener: TcpListener,
    app: Router,
    limits: ServeLimits,
    stats: Arc<ConnectionStats>,
    shutdown: impl Future<Output = ()>,
) -> Draining {
    let max = limits.effective_max_connections();
    let slots = Arc::new(Semaphore::new(max));
    let shared = Arc::new(Shared {
        limits,
        stats,
        pressure: watch::channel(0).0,
        evictions_wanted: AtomicUsize::new(0),
        stop: watch::channel(false).0,
        stopping: AtomicBool::new(false),
        epoch: Instant::now(),
    });
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    tracing::debug!(max_connections = max, "accepting connections");
    loop {
        while connections.try_join_next().is_some() {}
        // Accept first, then take a slot: at the cap only a client that has
        // actually arrived makes an idle connection close for it (the
        // accepted socket is one descriptor over the cap, inside the
        // reserve kept below the open-file limit).
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and the like: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // At the cap: this client waits (unanswered, as in the
                // backlog), and one idle kept-alive connection is asked to
                // make room for it.
                shared.stats.waited_at_cap.inc();
                shared.evictions_wanted.fetch_add(1, Ordering::SeqCst);
                shared.pressure.send_modify(|n| *n += 1);
                let permit = tokio::select! {
                    permit = slots.clone().acquire_owned() => permit,
                    _ = &mut shutdown => break,
                };
                shared.evictions_wanted.store(0, Ordering::SeqCst);
                match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        connections.spawn(serve_connection(
            stream,
            peer,
            app.clone(),
            shared.clone(),
            permit,
        ));
    }
    // New connections are refused from here on.
    drop(listener);
    shared.stopping.store(true, Ordering::SeqCst);
    let _ = shared.stop.send(true);
    Draining { connections }
}

/// The connections still open after the shutdown signal.
pub struct Draining {
    connections: JoinSet<()>,
}

impl Draining {
    /// Waits for every connection to finish; false if `grace` passed first
    /// (the rest are then cut).
    pub async fn finish(mut self, grace: Duration) -> bool {
        let all = async { while self.connections.join_next().await.is_some() {} };
        let finished = tokio::time::timeout(grace, all).await.is_ok();
        if !finished {
            self.connections.abort_all();
        }
        finished
    }
}

/// What every connection task shares.
struct Shared {
    limits: ServeLimits,
    stats: Arc<ConnectionStats>,
    /// Bumped when a new connection waits at the cap.
    pressure: watch::Sender<u64>,
    /// How many idle connections should close to make room (each idle one
    /// that sees the pressure takes one).
    evictions_wanted: AtomicUsize,
    /// True once the server shuts down.
    stop: watch::Sender<bool>,
    /// `stop`'s value, for a connection's reads to look at without the
    /// channel's lock.
    stopping: AtomicBool,
    epoch: Instant,
}

impl Shared {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn take_eviction(&self) -> bool {
        self.evictions_wanted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    shared: Arc<Shared>,
    _slot: OwnedSemaphorePermit,
) {
    shared.stats.open.inc();
    let activity = Arc::new(Activity::new(shared.clone()));
    let io = TokioIo::new(Tracked {
        inner: stream,
        activity: activity.clone(),
    });
    let service = ConnectionService {
        app,
        peer,
        activity: activity.clone(),
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The watchdog times heads; hyper's own timer would cut idle
    // connections at the header timeout too.
    builder.keep_alive(true).header_read_timeout(None);
    let connection = builder.serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    let mut stop = shared.stop.subscribe();
    let mut stopping = *stop.borrow_and_update();
    if stopping {
        connection.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                break;
            }
            changed = stop.changed(), if !stopping => {
                let _ = changed;
                stopping = true;
                connection.as_mut().graceful_shutdown();
                // A head half sent now will not be answered, nor one not
                // begun on a connection that has sent nothing.
                if activity.reading_head() || activity.is_silent() {
                    break;
                }
            }
            reason = watchdog(&activity, stopping) => {
                if let Some(reason) = reason {
                    shared.stats.count_closed(reason);
                    tracing::debug!(%peer, reason = reason.as_str(), "connection closed");
                }
                break;
            }
        }
    }
    shared.stats.open.dec();
}
