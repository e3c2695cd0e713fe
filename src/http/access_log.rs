//! One access-log line per request, its request id, and its client address.
//!
//! The line names the route template (`/webhooks/w/{token}`), never the raw
//! path: a webhook URL is a credential. Every log line written while the
//! request is handled carries its `request_id` (a tracing span), and the
//! response echoes it in `X-Request-Id`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use super::client_addr::{ClientAddr, TrustedProxies};

pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// What the access log calls a request that matched no route.
pub const UNMATCHED_ROUTE: &str = "<unmatched>";

/// The log target of the access lines, so they can be filtered on their own
/// (`SWITCHBOARD_LOG=info,switchboard::access=warn`).
pub const TARGET: &str = "switchboard::access";

/// A request's id: the client's `X-Request-Id` when it is a sane token, else
/// a fresh UUIDv7. Kept in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

impl RequestId {
    /// The client's id if it is 1–64 characters of `[A-Za-z0-9._-]`
    /// (anything else could forge log lines or carry a secret), else a new one.
    pub fn accept_or_mint(given: Option<&HeaderValue>) -> Self {
        match given.and_then(|v| v.to_str().ok()) {
            Some(id) if is_sane(id) => Self(id.to_owned()),
            _ => Self(crate::mint::new_request_id()),
        }
    }
}

fn is_sane(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The route template a request matched, if it matched one: not axum's
/// internal catch-all of a nested fallback, which is no route of ours.
pub fn matched_template(matched: Option<&str>) -> Option<&str> {
    matched.filter(|template| !template.contains("__private__axum"))
}

/// The route template of a request, or [`UNMATCHED_ROUTE`].
pub fn route_template(matched: Option<&MatchedPath>) -> &str {
    matched_template(matched.map(MatchedPath::as_str)).unwrap_or(UNMATCHED_ROUTE)
}

/// Middleware for the whole router (the outermost layer): decides the
/// request id and the client address, handles the request inside a span
/// carrying the id, echoes the id, and logs one line at `info`.
pub async fn access_log(
    State(proxies): State<Arc<TrustedProxies>>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let request_id = RequestId::accept_or_mint(request.headers().get(REQUEST_ID_HEADER));
    let peer = request
        .extensions()
        .get::<ConnectInfo<std::net::SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip());
    let client = peer.map(|peer| proxies.resolve(peer, request.headers()));
    if let Some(client) = client {
        request.extensions_mut().insert(client);
    }
    request.extensions_mut().insert(request_id.clone());
    // Kept for the line without copying text (a standard method and the
    // matched path are shared), and formatted by the line only: where
    // `switchboard::access` is filtered out, a request pays nothing for
    // it (issue 47).
    let method = request.method().clone();
    let matched = request.extensions().get::<MatchedPath>().cloned();

    let span = tracing::info_span!("request", request_id = %request_id.0);
    let mut response = next.run(request).instrument(span.clone()).await;

    if let Ok(value) = HeaderValue::from_str(&request_id.0) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    span.in_scope(|| {
        tracing::info!(
            target: TARGET,
            method = %method,
            route = %route_template(matched.as_ref()),
            status = response.status().as_u16(),
            duration_ms = (started.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0,
            request_id = %request_id.0,
            client = %ShownClient(client),
            "request"
        );
    });
    response
}

/// A request's client address as the access line shows it.
struct ShownClient(Option<ClientAddr>);

impl std::fmt::Display for ShownClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(client) => client.fmt(f),
            None => f.write_str("unknown"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sane_request_ids_are_kept_and_others_replaced() {
        for kept in [
            "abc",
            "req-1.2_3",
            &"a".repeat(64),
            "0193b2c4-7d1e-7000-8000-000000000000",
        ] {
            let given = HeaderValue::from_str(kept).unwrap();
            assert_eq!(RequestId::accept_or_mint(Some(&given)).0, kept);
        }
        for replaced in [
            "",
            "has space",
            "new\tline",
            &"a".repeat(65),
            "ünïcode",
            "a/b",
            "x=\"y\"",
        ] {
            let given = HeaderValue::from_bytes(replaced.as_bytes()).ok();
            let id = RequestId::accept_or_mint(given.as_ref()).0;
            assert_ne!(id, replaced);
            assert!(is_sane(&id), "{id}");
        }
        let minted = RequestId::accept_or_mint(None).0;
        assert_eq!(minted.len(), 36, "{minted}");
        assert_ne!(minted, RequestId::accept_or_mint(None).0);
    }
}
