//! The `/metrics` route and the layer that counts every HTTP request by
//! route template and status.

use std::sync::Arc;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::{Metrics, SCRAPE_TIMEOUT, route_label};
use crate::delivery::Delivery;
use crate::store::Store;

/// The `/metrics` route's state.
#[derive(Clone)]
pub struct MetricsState {
    pub metrics: Arc<Metrics>,
    pub store: Arc<dyn Store>,
    pub delivery: Arc<Delivery>,
}

/// `/metrics`, with its state.
pub fn router(state: MetricsState) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(state)
}

/// `GET /metrics`: the whole registry in OpenMetrics text. With a scrape
/// token configured, only `Authorization: Bearer <token>` may read it.
async fn scrape(State(state): State<MetricsState>, headers: HeaderMap) -> Response {
    let metrics = &state.metrics;
    if !metrics.allows(headers.get(AUTHORIZATION).map(|v| v.as_bytes())) {
        return (
            StatusCode::UNAUTHORIZED,
            [(WWW_AUTHENTICATE, "Bearer realm=\"metrics\"")],
            "a scrape token is required\n",
        )
            .into_response();
    }
    let rendered = tokio::time::timeout(
        SCRAPE_TIMEOUT,
        metrics.render(&*state.store, state.delivery.doorbells(), |id| {
            state.delivery.hooks().hooked(id)
        }),
    )
    .await;
    match rendered {
        Ok(Ok(body)) => ([(CONTENT_TYPE, super::CONTENT_TYPE)], body).into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "metrics scrape could not read the database");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n").into_response()
        }
        Err(_) => {
            tracing::warn!(timeout = ?SCRAPE_TIMEOUT, "metrics scrape timed out");
            (StatusCode::SERVICE_UNAVAILABLE, "scrape timed out\n").into_response()
        }
    }
}

/// Middleware for the whole router: counts each answered request under its
/// route template (never the raw path) and status code, and observes how
/// long it took by route, method and status class.
pub async fn count_requests(
    State(metrics): State<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let started = std::time::Instant::now();
    let route = route_label(
        request
            .extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str),
    );
    let method = request.method().clone();
    let response = next.run(request).await;
    metrics.observe_request(
        route,
        &method,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}
