//! The board (`docs/board.md`): server-rendered HTML at `/`
//! for the humans who run a fleet of agents.
//!
//! Pages are askama templates (`templates/board/`); htmx and its SSE
//! extension are vendored in [`assets`] and only refresh live regions, so
//! every page reads and every form posts without JavaScript. A signed-in
//! human holds a board token of their own in a cookie ([`auth`]); every POST
//! carries a CSRF token derived from it ([`form`]). One SSE stream per
//! signed-in page ([`live`]) says when something of the human's changed.
//!
//! The board is a surface beside `api` and `mcp`: it calls the store and the
//! event path directly, never another surface.

mod assets;
mod auth;
mod charts;
mod error;
mod form;
pub mod live;
mod pages;
mod render;
mod view;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use tokio::sync::watch;

use crate::delivery::Delivery;
use crate::http::ratelimit::{Rate, RateLimiter};
use crate::ops::oauth::OAuthServer;
use crate::store::Store;

/// What the board needs besides the store and the event path.
#[derive(Debug)]
pub struct BoardContext {
    /// The URL humans and agents reach this server at (MCP URLs, `Secure`).
    pub public_url: String,
    /// How long a board sign-in lasts (the cookie's token expires then).
    pub session_lifetime: Duration,
    /// How often the live stream re-reads the human's fleet for changes
    /// nothing announced (an API push, a claim, a heartbeat).
    pub poll_every: Duration,
    /// A `changed` event at least this often, for `last seen` and
    /// conditions that drift with time alone.
    pub tick_every: Duration,
    /// Turns true when the server shuts down: live streams end.
    pub shutdown: watch::Receiver<bool>,
    /// Form posts per human: the same budget as the API's writes, since a
    /// form post is one (`--api-write-rate`).
    pub writes: RateLimiter,
    /// Page reads (and live streams opened) per human: the same budget as
    /// the API's reads (`--api-read-rate`).
    pub reads: RateLimiter,
    /// Sign-in attempts per client address ([`SIGN_IN_RATE`]).
    pub sign_ins: RateLimiter,
    /// The live streams open on this instance, per human.
    pub live: Arc<live::LiveHub>,
    /// The OAuth authorization server the consent page answers for.
    pub oauth: Arc<OAuthServer>,
}

/// Sign-in attempts per client address: 10 at once, then one every 6 s
/// (what a human typing needs; a script guessing or minting sessions is
/// held to 10 a minute).
pub const SIGN_IN_RATE: Rate = Rate::new(1.0 / 6.0, 10.0);

impl BoardContext {
    pub fn new(
        public_url: String,
        shutdown: watch::Receiver<bool>,
        writes: Rate,
        reads: Rate,
    ) -> Self {
        Self {
            public_url: public_url.trim_end_matches('/').to_owned(),
            session_lifetime: Duration::from_secs(12 * 3600),
            poll_every: Duration::from_secs(2),
            tick_every: Duration::from_secs(15),
            shutdown,
            writes: RateLimiter::new(writes),
            reads: RateLimiter::new(reads),
            sign_ins: RateLimiter::new(SIGN_IN_RATE),
            live: Arc::default(),
            oauth: Arc::new(OAuthServer::new(&public_url, false)),
        }
    }

    /// The authorization server the consent page answers for (the one the
    /// OAuth routes share).
    pub fn with_oauth(mut self, oauth: Arc<OAuthServer>) -> Self {
        self.oauth = oauth;
        self
    }

    /// Cookies are `Secure` when humans reach the board over https.
    fn secure_cookies(&self) -> bool {
        self.public_url.starts_with("https://")
    }
}

/// The board's handlers' state.
#[derive(Clone)]
pub struct BoardState {
    pub store: Arc<dyn Store>,
    pub delivery: Arc<Delivery>,
    pub board: Arc<BoardContext>,
}

/// `/` and `/board/…`, with their state.
pub fn router(state: BoardState) -> Router {
    use pages::*;
    Router::new()
        .route("/", get(overview::page))
        .route(
            "/board",
            get(|| async { axum::response::Redirect::permanent("/") }),
        )
        .route(
            "/board/",
            get(|| async { axum::response::Redirect::permanent("/") }),
        )
        .route("/board/static/{file}", get(assets::serve))
        .route(
            "/board/sign-in",
            get(pages::sign_in::sign_in_page).post(pages::sign_in::sign_in),
        )
        .route("/board/sign-out", post(pages::sign_in::sign_out))
        .route("/board/events", get(live::events))
        .route("/board/endpoints/{slug}", get(endpoint::page))
        .route(
            "/board/endpoints/{slug}/presence",
            post(endpoint::set_presence),
        )
        .route("/board/endpoints/{slug}/shift", post(endpoint::set_shift))
        .route("/board/endpoints/{slug}/lease", post(endpoint::set_lease))
        .route("/board/endpoints/{slug}/todos", post(endpoint::push))
        .route(
            "/board/endpoints/{slug}/webhooks",
            post(endpoint::create_webhook),
        )
        .route(
            "/board/webhooks/{id}/rotate",
            post(endpoint::rotate_webhook),
        )
        .route(
            "/board/webhooks/{id}/delete",
            post(endpoint::delete_webhook),
        )
        .route("/board/hooks/{id}/enable", post(endpoint::enable_hook))
        .route(
            "/board/endpoints/{slug}/oauth-clients/{id}/revoke",
            post(endpoint::revoke_oauth_client),
        )
        .route("/board/webhooks/{id}", get(pages::intake::page))
        .route("/board/queues", get(pages::queues::page))
        .route(
            "/board/endpoints/{slug}/admission",
            post(pages::queues::set_paused),
        )
        .route(
            "/board/deliveries/{id}/release",
            post(endpoint::release_delivery),
        )
        .route(
            "/board/deliveries/{id}/discard",
            post(endpoint::discard_delivery),
        )
        .route("/board/endpoints/{slug}/revoke", post(endpoint::revoke))
        .route("/board/endpoints/{slug}/delete", post(endpoint::delete))
        .route("/board/shift-preview", get(endpoint::shift_preview))
        .route("/board/todos", get(todos::page))
        .route("/board/todos/{id}", get(todos::detail))
        .route("/board/todos/{id}/retry", post(todos::retry))
        .route("/board/todos/{id}/release", post(todos::release))
        .route("/board/todos/{id}/cancel", post(todos::cancel))
        .route("/board/todos/{id}/delete", post(todos::delete))
        .route("/board/todos/bulk", post(todos::bulk))
        .route("/board/vend", get(vend::page).post(vend::vend))
        .route("/board/agents", get(agents::page).post(agents::create))
        .route("/board/agents/{name}", post(agents::edit))
        .route("/board/tokens", get(tokens::page).post(tokens::create))
        .route("/board/tokens/{id}/revoke", post(tokens::revoke))
        .route(
            "/oauth/authorize",
            get(pages::consent::authorize).post(pages::consent::answer),
        )
        .route("/board/{*rest}", get(not_found).post(not_found))
        .with_state(state)
}

/// Any other `/board/…` path: the board's own 404 page.
async fn not_found() -> error::BoardError {
    error::BoardError::NotFound
}
