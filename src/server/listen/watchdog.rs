//! One connection's watchdog: what its I/O and requests last did
//! ([`Activity`], recorded by the [`Tracked`] stream and the service), and
//! when that means the connection must close ([`watchdog`]).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::Shared;
use crate::http::connections::CloseReason;

/// What a connection did last, for its watchdog.
pub(super) struct Activity {
    pub(super) shared: Arc<Shared>,
    /// Requests whose response has not been sent in full (a stream counts).
    in_flight: AtomicUsize,
    /// When a byte was last read or written (ms since `shared.epoch`).
    last_io: AtomicU64,
    /// When the first byte of a request head arrived with nothing in flight
    /// (ms + 1; 0 while no head is being read).
    head_started: AtomicU64,
    /// Requests begun: a connection that has begun none and is reading no
    /// head has sent nothing at all ([`Activity::is_silent`]).
    begun: AtomicU64,
    /// When the connection was accepted (ms since `shared.epoch`).
    accepted: u64,
    /// Wakes the watchdog when what changed needs it at once: eviction
    /// wanted of a connection that fell idle, a head begun while stopping,
    /// a refused body drained. Nothing else does: the connection's task
    /// polls the watchdog beside hyper, so a wake-up per request was a
    /// re-poll of the whole connection and a new timer (issue 47). A
    /// deadline that moves later needs no wake-up (the watchdog looks again
    /// when the earlier one passes), and one that moves earlier (a head
    /// begun, a request begun or answered) is at least the shorter of the
    /// header and idle timeouts away: the watchdog never sleeps longer
    /// ([`watchdog`]).
    changed: Notify,
}

impl Activity {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        let now = shared.now_ms();
        Self {
            shared,
            in_flight: AtomicUsize::new(0),
            last_io: AtomicU64::new(now),
            head_started: AtomicU64::new(0),
            begun: AtomicU64::new(0),
            accepted: now,
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
            && self.shared.stopping.load(Ordering::SeqCst)
        {
            // Shutting down: a head begun now is not answered, at once.
            self.changed.notify_one();
        }
    }

    fn on_write(&self) {
        self.last_io.store(self.shared.now_ms(), Ordering::Relaxed);
    }

    /// No wake-up: the deadline is now the idle timeout's ([`Activity::changed`]).
    pub(super) fn begin_request(&self) {
        self.begun.fetch_add(1, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.head_started.store(0, Ordering::SeqCst);
    }

    /// No wake-up for the deadline ([`Activity::changed`]); the watchdog is
    /// woken only when idle connections are wanted at the cap, as this one
    /// may now be. (Either
    /// this load sees the accept loop's want, or the watchdog's look after
    /// the pressure it then sends sees nothing in flight: both SeqCst.)
    pub(super) fn end_request(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.last_io.store(self.shared.now_ms(), Ordering::Relaxed);
        if self.shared.evictions_wanted.load(Ordering::SeqCst) > 0 {
            self.changed.notify_one();
        }
    }

    /// The rest of a refused request's body was read after its answer:
    /// those bytes started no head, and the connection is idle again
    /// (kept alive, evictable, under the idle timeout).
    pub(super) fn body_drained(&self) {
        if self.in_flight.load(Ordering::SeqCst) == 0 {
            self.head_started.store(0, Ordering::SeqCst);
            self.last_io.store(self.shared.now_ms(), Ordering::Relaxed);
            self.changed.notify_one();
        }
    }

    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0 && self.head_started.load(Ordering::SeqCst) == 0
    }

    /// Accepted, and not one byte of a request since: neither reading a
    /// head nor kept alive after one.
    pub(super) fn is_silent(&self) -> bool {
        self.is_idle() && self.begun.load(Ordering::SeqCst) == 0
    }

    /// The kind of connection closed to make room at the cap: idle between
    /// requests after answering at least one, or silent for
    /// [`SILENT_GRACE`] since it was accepted (issue 48: silent sockets
    /// held the cap until the idle timeout). One accepted a moment ago is
    /// spared: its first bytes are likely on their way.
    fn is_evictable(&self, now: u64) -> bool {
        if !self.is_idle() {
            return false;
        }
        !self.is_silent() || now >= self.silent_grace_ends()
    }

    fn silent_grace_ends(&self) -> u64 {
        let grace = SILENT_GRACE.min(self.shared.limits.header_read_timeout);
        self.accepted + grace.as_millis() as u64
    }

    pub(super) fn reading_head(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0 && self.head_started.load(Ordering::SeqCst) != 0
    }
}

/// How long a connection that has sent nothing is spared from eviction at
/// the cap (at most the header timeout).
const SILENT_GRACE: Duration = Duration::from_secs(1);

/// Resolves when the connection must be closed now: a head took too long
/// (or, on a connection that has sent nothing, did not start within the
/// header timeout of the accept), it stayed idle too long, or an idle slot
/// is wanted at the cap. `None`: shutting down with a head half sent.
pub(super) async fn watchdog(activity: &Activity, stopping: bool) -> Option<CloseReason> {
    let shared = &activity.shared;
    let limits = &shared.limits;
    let mut pressure = shared.pressure.subscribe();
    loop {
        let now = shared.now_ms();
        let in_flight = activity.in_flight.load(Ordering::SeqCst);
        let head_started = activity.head_started.load(Ordering::SeqCst);
        let idle_until =
            activity.last_io.load(Ordering::Relaxed) + limits.idle_timeout.as_millis() as u64;
        let wanted = shared.evictions_wanted.load(Ordering::SeqCst) > 0;
        if wanted && activity.is_evictable(now) && shared.take_eviction() {
            return Some(CloseReason::EvictedAtCap);
        }
        let due = if activity.is_silent() {
            // As nginx's `client_header_timeout` and Caddy's
            // `read_header`: the head is due from the accept.
            Some((
                activity.accepted + limits.header_read_timeout.as_millis() as u64,
                CloseReason::HeaderTimeout,
            ))
        } else if in_flight > 0 {
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
        let mut wait = match due {
            Some((at, reason)) if at <= now => return Some(reason),
            Some((at, _)) => Duration::from_millis(at - now),
            None => limits.idle_timeout,
        };
        // What the connection does while this sleeps does not wake it
        // ([`Activity::changed`]), and may move its deadline earlier (a
        // head begun: the header timeout from then; a request begun or
        // answered: the idle timeout from then). Either is at least the
        // shorter timeout from now, so waking by then times it exactly.
        // (At least a millisecond: the deadlines are in whole ones.)
        let shorter = limits.header_read_timeout.min(limits.idle_timeout);
        wait = wait.min(shorter.max(Duration::from_millis(1)));
        if wanted && activity.is_silent() {
            // Room is wanted: look again once this silent one is evictable.
            let grace_ends = activity.silent_grace_ends();
            wait = wait.min(Duration::from_millis(grace_ends.saturating_sub(now)));
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = activity.changed.notified() => {}
            changed = pressure.changed() => {
                if changed.is_err() {
                    // The server is gone; the connection task ends with it.
                    std::future::pending::<()>().await;
                }
                if activity.is_evictable(shared.now_ms()) && shared.take_eviction() {
                    return Some(CloseReason::EvictedAtCap);
                }
            }
        }
    }
}

/// The TCP stream, recording when bytes move.
pub(super) struct Tracked {
    pub(super) inner: TcpStream,
    pub(super) activity: Arc<Activity>,
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
