//! One connection's hyper service: the router, with `ConnectInfo`, a
//! deadline on the request body (408 when it passes), and the request held
//! in flight until its response body is gone.
//!
//! A response answered before its request body was read (a refusal: 401,
//! 403, 404, 415, 429, an outage's 503, the board's 303) keeps the
//! connection usable: the rest of the body is read and thrown away after
//! the answer, up to [`DRAIN_LIMIT`] bytes within the body's deadline (as
//! nginx discards it, and Go's server reads up to 256 KiB); a body declared
//! larger, a chunked one, or one the client waits to send
//! (`Expect: 100-continue`), gets `Connection: close` on the answer
//! instead, so that the client knows not to reuse the connection (issue 48).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, Response, header};
use axum::response::IntoResponse;
use http_body::{Body as _, Frame};
use hyper::body::Incoming;
use tower_service::Service;

use super::watchdog::Activity;
use crate::http::connections::CloseReason;
use crate::http::error::ApiError;

/// One connection's service: the router, with the peer address for
/// `ConnectInfo`, a deadline on the request body, and the request counted
/// in flight until its response has been sent in full.
#[derive(Clone)]
pub(super) struct ConnectionService {
    pub(super) app: Router,
    pub(super) peer: SocketAddr,
    pub(super) activity: Arc<Activity>,
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
        let leftover = Arc::new(Mutex::new(Leftover::default()));
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(ConnectInfo(self.peer));
        let expects_continue = parts
            .headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        let deadline = tokio::time::Instant::now() + timeout;
        let body = Body::new(DeadlineBody {
            finished: body.is_end_stream(),
            inner: Some(body),
            deadline,
            sleep: None,
            timed_out: timed_out.clone(),
            leftover: leftover.clone(),
        });
        let mut app = self.app.clone();
        let activity = self.activity.clone();
        Box::pin(async move {
            let response = match app.call(Request::from_parts(parts, body)).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let unread = {
                let mut slot = leftover.lock().unwrap_or_else(|p| p.into_inner());
                slot.answered = true;
                slot.unread.take()
            };
            let mut response = if timed_out.load(Ordering::SeqCst) {
                stats.count_closed(CloseReason::BodyTimeout);
                body_timed_out(timeout)
            } else {
                response
            };
            if let Some(unread) = unread {
                // Only a body of a declared length that fits is discarded
                // (the end of a chunked one is not told apart from silence).
                let too_long = unread
                    .size_hint()
                    .exact()
                    .is_none_or(|length| length > DRAIN_LIMIT);
                if expects_continue
                    || too_long
                    || response.headers().contains_key(header::CONNECTION)
                {
                    response
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                } else {
                    tokio::spawn(drain(unread, deadline, activity));
                }
            }
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
pub(super) struct GuardedBody {
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

/// The most of an unread request body read and thrown away after an early
/// answer, so that the connection stays usable (Go's server reads 256 KiB).
const DRAIN_LIMIT: u64 = 256 * 1024;

/// A request body its handler dropped before the end: the service reads
/// and discards it after the answer, or closes the connection.
#[derive(Default)]
struct Leftover {
    unread: Option<Incoming>,
    /// The response was decided: a body dropped later is only dropped.
    answered: bool,
}

/// Reads and discards the rest of a body the answer did not need, up to
/// [`DRAIN_LIMIT`] bytes and until its deadline; past either it is dropped,
/// and hyper closes the connection after the answer. Once it is all read,
/// the connection is idle again (its bytes were not a head).
async fn drain(mut body: Incoming, deadline: tokio::time::Instant, activity: Arc<Activity>) {
    let mut read: u64 = 0;
    let discard = std::future::poll_fn(|cx| {
        loop {
            match Pin::new(&mut body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    read += frame.data_ref().map_or(0, |d| d.len() as u64);
                    if read > DRAIN_LIMIT {
                        return Poll::Ready(false);
                    }
                    // Its declared length is in: hyper reads the next head
                    // now, and would close the channel only with it.
                    if body.is_end_stream() {
                        return Poll::Ready(true);
                    }
                }
                Poll::Ready(Some(Err(_))) => return Poll::Ready(false),
                Poll::Ready(None) => return Poll::Ready(true),
                Poll::Pending => return Poll::Pending,
            }
        }
    });
    if let Ok(true) = tokio::time::timeout_at(deadline, discard).await {
        activity.body_drained();
    }
}

/// The request body, failing once its deadline passes.
struct DeadlineBody {
    /// `None` once handed to the [`Leftover`] on drop.
    inner: Option<Incoming>,
    /// The body ended (or never had a byte): nothing is left to drain.
    finished: bool,
    deadline: tokio::time::Instant,
    /// Made on the first wait only: most bodies are already here.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    timed_out: Arc<AtomicBool>,
    leftover: Arc<Mutex<Leftover>>,
}

impl Drop for DeadlineBody {
    fn drop(&mut self) {
        if self.finished || self.timed_out.load(Ordering::SeqCst) {
            return;
        }
        let Some(inner) = self.inner.take() else {
            return;
        };
        if inner.is_end_stream() {
            return;
        }
        let mut slot = self.leftover.lock().unwrap_or_else(|p| p.into_inner());
        if !slot.answered {
            slot.unread = Some(inner);
        }
    }
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
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        if let Poll::Ready(frame) = Pin::new(&mut *inner).poll_frame(cx) {
            let ended = inner.is_end_stream();
            if frame.is_none() || ended {
                self.finished = true;
            }
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
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| http_body::SizeHint::with_exact(0), |b| b.size_hint())
    }
}
