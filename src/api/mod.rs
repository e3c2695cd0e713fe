//! The human REST API, `/api/v1` (`docs/api.md`).
//!
//! Handlers are thin: authenticate ([`extract::HumanAuth`]), validate, call
//! the store, and shape a view. Every error leaves in one envelope
//! ([`error::ApiError`]); the OpenAPI document ([`openapi`]) is generated
//! from the same handler annotations and types.

pub mod extract;
mod handlers;

pub mod openapi;
pub mod views;

use std::sync::Arc;

use axum::Router;
use axum::routing::{delete, get, post, put};

use crate::delivery::Delivery;
use crate::http::ratelimit::{Rate, RateLimiter};
use crate::store::Store;

/// Per-human request rates (`docs/api.md`: reads 20/s burst 40, writes 5/s burst 20).
#[derive(Debug, Clone, Copy)]
pub struct ApiRates {
    pub read: Rate,
    pub write: Rate,
    /// Per client IP on webhook intake (`docs/intake.md`: 10/s burst 20).
    pub intake: Rate,
}

impl Default for ApiRates {
    fn default() -> Self {
        Self {
            read: Rate::new(20.0, 40.0),
            write: Rate::new(5.0, 20.0),
            intake: Rate::new(10.0, 20.0),
        }
    }
}

/// What the API needs besides the store and delivery.
#[derive(Debug)]
pub struct ApiContext {
    /// The URL clients reach this server at, for MCP and webhook URLs.
    pub public_url: String,
    pub read_limiter: RateLimiter,
    pub write_limiter: RateLimiter,
}

impl ApiContext {
    pub fn new(public_url: String, rates: ApiRates) -> Self {
        Self {
            public_url: public_url.trim_end_matches('/').to_owned(),
            read_limiter: RateLimiter::new(rates.read),
            write_limiter: RateLimiter::new(rates.write),
        }
    }
}

/// The API's handlers' state: the store, the event path, and the API's own
/// context. Nothing of another surface.
#[derive(Clone)]
pub struct ApiState {
    pub store: Arc<dyn Store>,
    pub delivery: Arc<Delivery>,
    pub api: Arc<ApiContext>,
}

/// `/api/v1/…`, with its state.
pub fn router(state: ApiState) -> Router {
    routes().with_state(state)
}

fn routes() -> Router<ApiState> {
    use handlers::*;
    let v1 = Router::new()
        .route("/me", get(me::get_me))
        .route("/tokens", get(tokens::list).post(tokens::create))
        .route("/tokens/{id}", delete(tokens::revoke))
        .route("/agents", get(agents::list).post(agents::register))
        .route("/agents/{name}", get(agents::show).patch(agents::edit))
        .route("/endpoints", get(endpoints::list).post(endpoints::vend))
        .route(
            "/endpoints/{reference}",
            get(endpoints::show)
                .patch(endpoints::edit)
                .delete(endpoints::remove),
        )
        .route("/endpoints/{reference}/revoke", post(endpoints::revoke))
        .route(
            "/endpoints/{reference}/test-ring",
            post(endpoints::test_ring),
        )
        .route("/endpoints/{reference}/todos", post(todos::push))
        .route("/endpoints/{reference}/activity", get(activity::show))
        .route("/endpoints/{reference}/oauth-clients", get(oauth::list))
        .route(
            "/endpoints/{reference}/oauth-clients/{id}",
            delete(oauth::revoke),
        )
        .route(
            "/endpoints/{reference}/admission",
            get(admission::show).put(admission::set_endpoint),
        )
        .route(
            "/endpoints/{reference}/queues/{queue}/admission",
            put(admission::set_queue),
        )
        .route(
            "/endpoints/{reference}/presence",
            get(presence::show)
                .put(presence::set)
                .delete(presence::clear),
        )
        .route("/endpoints/{reference}/shift", put(presence::set_shift))
        .route(
            "/endpoints/{reference}/webhooks",
            get(webhooks::list).post(webhooks::create),
        )
        .route(
            "/endpoints/{reference}/hooks",
            get(hooks::list).post(hooks::add),
        )
        .route("/hooks/{id}", delete(hooks::remove))
        .route("/hooks/{id}/enable", post(hooks::enable))
        .route("/hooks/{id}/test", post(hooks::test))
        .route(
            "/endpoints/{reference}/schedules",
            get(schedules::list).post(schedules::add),
        )
        .route("/schedules/{id}", delete(schedules::remove))
        .route("/schedules/{id}/pause", post(schedules::pause))
        .route("/schedules/{id}/resume", post(schedules::resume))
        .route("/webhooks/{id}/rotate", post(webhooks::rotate))
        .route("/webhooks/{id}", delete(webhooks::remove))
        .route("/webhooks/{id}/senders", put(deliveries::set_senders))
        .route("/webhooks/{id}/deliveries", get(deliveries::list))
        .route("/webhooks/{id}/rules", get(rules::show).put(rules::set))
        .route("/webhooks/{id}/rules/test", post(rules::test))
        .route("/webhooks/{id}/deliveries/replay", post(rules::replay))
        .route("/deliveries/{id}", get(deliveries::show))
        .route("/deliveries/{id}/release", post(deliveries::release))
        .route("/deliveries/{id}/discard", post(deliveries::discard))
        .route("/deliveries/{id}/replay", post(deliveries::replay))
        .route("/todos", get(todos::list))
        .route(
            "/todos/retry",
            post(todos::bulk_retry).get(todos::show_reserved),
        )
        .route(
            "/todos/cancel",
            post(todos::bulk_cancel).get(todos::show_reserved),
        )
        .route(
            "/todos/{id}",
            get(todos::show).patch(todos::edit).delete(todos::remove),
        )
        .route("/todos/{id}/event", get(todos::event))
        .route("/todos/{id}/retry", post(todos::retry))
        .route("/todos/{id}/release", post(todos::release))
        .route("/todos/{id}/cancel", post(todos::cancel))
        .route("/openapi.json", get(openapi::serve))
        .fallback(handlers::not_found);
    Router::new().nest("/api/v1", v1)
}
