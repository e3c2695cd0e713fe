//! One connection's hyper service: the router, with `ConnectInfo`, a
//! deadline on the request body (408 when it passes), and the request held
//! in flight until its response body is gone.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, Response, header};
use axum::response::IntoResponse;
use http_body::Frame;
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
