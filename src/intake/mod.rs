//! Webhook intake (`docs/intake.md`): `POST /webhooks/w/{token}` turns one
//! delivery into one todo, with its intake event in the same transaction.
//!
//! [`receive`] is the handler; the pure parts it is made of live beside it:
//! [`signature`] (HMAC check), [`headers`] (what of the request is kept),
//! [`key`] (redelivery dedup), [`derive`] (title, kind, source) and
//! [`payload`] (what the todo carries).

pub mod derive;
pub mod envelope;
pub mod headers;
pub mod key;
pub mod payload;
mod receive;
pub mod signature;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::post;

use std::sync::Arc;

use crate::delivery::Delivery;
use crate::http::ratelimit::RateLimiter;
use crate::store::Store;

/// The largest delivery accepted (`docs/intake.md`: 5 MiB); more is 413.
pub const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;

/// Intake's handler state.
#[derive(Clone)]
pub struct IntakeState {
    pub store: Arc<dyn Store>,
    pub delivery: Arc<Delivery>,
    /// Per client IP (`docs/intake.md`: 10/s, burst 20).
    pub limiter: Arc<RateLimiter>,
}

/// `/webhooks/w/{token}`, with its state.
pub fn router(state: IntakeState) -> Router {
    Router::new()
        .route(
            "/webhooks/w/{token}",
            // The handler enforces the cap itself while reading; raising axum's
            // 2 MiB default keeps any body extractor added later in line with it.
            post(receive::receive).layer(DefaultBodyLimit::max(MAX_BODY_BYTES)),
        )
        .with_state(state)
}
