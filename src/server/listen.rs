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
//! - a **connection cap**: at the cap the next connection waits in the
//!   listen backlog, and one idle kept-alive connection is closed to make
//!   room for it (`docs/decisions.md`, "Connection cap").
//!
//! One watchdog per connection enforces the header and idle timeouts from
//! what the connection's I/O and requests record in its [`Activity`]; hyper's
//! own header timer is off (it would also cut idle connections at the header
//! timeout). On shutdown the accept loop stops (new connections are
//! refused), every connection is told to finish its request in flight and
//! close, and one dripping a head is closed at once.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, Response, header};
use axum::response::IntoResponse;
use http_body::Frame;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tower_service::Service;

use crate::http::connections::{CloseReason, ConnectionStats};
use crate::http::error::ApiError;

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
        epoch: Instant::now(),
    });
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    tracing::debug!(max_connections = max, "accepting connections");
    loop {
        while connections.try_join_next().is_some() {}
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // At the cap: wait in the backlog, and ask one idle
                // connection to make room.
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

/// What a connection did last, for its watchdog.
struct Activity {
    shared: Arc<Shared>,
    /// Requests whose response has not been sent in full (a stream counts).
    in_flight: AtomicUsize,
    /// When a byte was last read or written (ms since `shared.epoch`).
    last_io: AtomicU64,
    /// When the first byte of a request head arrived with nothing in flight
    /// (ms + 1; 0 while no head is being read).
    head_started: AtomicU64,
    /// Wakes the watchdog when any of the above changes its deadline.
    changed: Notify,
}

impl Activity {
    fn new(shared: Arc<Shared>) -> Self {
        let now = shared.now_ms();
        Self {
            shared,
            in_flight: AtomicUsize::new(0),
            last_io: AtomicU64::new(now),
            head_started: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    fn on_read(&self) {
        let now = self.shared.now_ms();
        self.last_io.store(now, Ordering::Relaxed);
        if self.in_flight.load(Ordering::SeqCst) == 0
            && self
                .head_started
                .compare_exchange(0, now + 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.changed.notify_one();
        }
    }

    fn on_write(&self) {
        self.last_io.store(self.shared.now_ms(), Ordering::Relaxed);
    }

    fn begin_request(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.head_started.store(0, Ordering::SeqCst);
        self.changed.notify_one();
    }

    fn end_request(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.last_io.store(self.shared.now_ms(), Ordering::Relaxed);
        self.changed.notify_one();
    }

    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0 && self.head_started.load(Ordering::SeqCst) == 0
    }

    fn reading_head(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0 && self.head_started.load(Ordering::SeqCst) != 0
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
                // A head half sent now will not be answered.
                if activity.reading_head() {
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

/// Resolves when the connection must be closed now: a head took too long,
/// it stayed idle too long, or an idle slot is wanted at the cap. `None`:
/// shutting down with a head half sent.
async fn watchdog(activity: &Activity, stopping: bool) -> Option<CloseReason> {
    let shared = &activity.shared;
    let limits = &shared.limits;
    let mut pressure = shared.pressure.subscribe();
    loop {
        let now = shared.now_ms();
        let in_flight = activity.in_flight.load(Ordering::SeqCst);
        let head_started = activity.head_started.load(Ordering::SeqCst);
        let idle_until =
            activity.last_io.load(Ordering::Relaxed) + limits.idle_timeout.as_millis() as u64;
        let due = if in_flight > 0 {
            // Busy, but moving: a stream writes keep-alives, a body arrives.
            Some((idle_until, CloseReason::Stalled))
        } else if head_started != 0 {
            if stopping {
                return None;
            }
            Some((
                head_started - 1 + limits.header_read_timeout.as_millis() as u64,
                CloseReason::HeaderTimeout,
            ))
        } else {
            Some((idle_until, CloseReason::IdleTimeout))
        };
        let wait = match due {
            Some((at, reason)) if at <= now => return Some(reason),
            Some((at, _)) => Duration::from_millis(at - now),
            None => limits.idle_timeout,
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = activity.changed.notified() => {}
            changed = pressure.changed() => {
                if changed.is_err() {
                    // The server is gone; the connection task ends with it.
                    std::future::pending::<()>().await;
                }
                if activity.is_idle() && shared.take_eviction() {
                    return Some(CloseReason::EvictedAtCap);
                }
            }
        }
    }
}

/// The TCP stream, recording when bytes move.
struct Tracked {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.on_read();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.on_write();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.on_write();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// One connection's service: the router, with the peer address for
/// `ConnectInfo`, a deadline on the request body, and the request counted
/// in flight until its response has been sent in full.
#[derive(Clone)]
struct ConnectionService {
    app: Router,
    peer: SocketAddr,
    activity: Arc<Activity>,
}

impl hyper::service::Service<Request<Incoming>> for ConnectionService {
    type Response = Response<GuardedBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.activity.begin_request();
        let guard = InFlight(self.activity.clone());
        let timeout = self.activity.shared.limits.body_read_timeout;
        let stats = self.activity.shared.stats.clone();
        let timed_out = Arc::new(AtomicBool::new(false));
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(ConnectInfo(self.peer));
        let body = Body::new(DeadlineBody {
            inner: body,
            deadline: tokio::time::Instant::now() + timeout,
            sleep: None,
            timed_out: timed_out.clone(),
        });
        let mut app = self.app.clone();
        Box::pin(async move {
            let response = match app.call(Request::from_parts(parts, body)).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let response = if timed_out.load(Ordering::SeqCst) {
                stats.count_closed(CloseReason::BodyTimeout);
                body_timed_out(timeout)
            } else {
                response
            };
            Ok(response.map(|inner| GuardedBody {
                inner,
                _in_flight: guard,
            }))
        })
    }
}

/// 408 in the error envelope; the connection closes after it (the rest of
/// the body may still be on its way).
fn body_timed_out(timeout: Duration) -> Response<Body> {
    let mut response = ApiError::request_timeout(format!(
        "the request body did not arrive within {timeout:?}"
    ))
    .into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Ends a request's time in flight when its response body is dropped (sent
/// in full, or the connection went away).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end_request();
    }
}

/// A response body that holds its request in flight.
pub struct GuardedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl http_body::Body for GuardedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The request body, failing once its deadline passes.
struct DeadlineBody {
    inner: Incoming,
    deadline: tokio::time::Instant,
    /// Made on the first wait only: most bodies are already here.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    timed_out: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTimedOut;

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = self.deadline;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            self.timed_out.store(true, Ordering::SeqCst);
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
