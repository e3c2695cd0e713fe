//! `POST /webhooks/w/{token}`: one delivery in, at most one todo out.
//!
//! Cheap refusals come first, so an abusive sender costs as little as
//! possible: the per-IP rate limit, a declared oversized body, then a URL
//! that cannot be a token. Only then the database, the body, the signature.

use std::net::IpAddr;

use axum::Json;
use axum::body::{Body, HttpBody};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use serde::Serialize;

use super::IntakeState;
use super::{MAX_BODY_BYTES, derive, envelope, headers, key, payload, signature};
use crate::domain::ids::sha256_hex;
use crate::domain::intake::RUN_AT_HEADER;
use crate::domain::text::cut_to_bytes;
use crate::http::client_addr::ClientAddr;
use crate::http::error::{ApiError, ApiResult};
use crate::ops;
use crate::store::{Envelope, StoreError, TrustMode, Webhook, WebhookTarget};

/// The 202 answer: `{"delivery": {"id", "decision"}, "todo": {"id", "queue",
/// "created"} | null}` (no todo when the delivery is quarantined).
#[derive(Debug, Serialize)]
pub(super) struct Receipt {
    pub delivery: ReceiptDelivery,
    pub todo: Option<ReceiptTodo>,
}

#[derive(Debug, Serialize)]
pub(super) struct ReceiptDelivery {
    pub id: String,
    pub decision: &'static str,
}

#[derive(Debug, Serialize)]
pub(super) struct ReceiptTodo {
    pub id: String,
    pub queue: String,
    /// `false` when this was a redelivery of a live todo (nothing new, nothing rings).
    pub created: bool,
}

pub(super) async fn receive(
    State(state): State<IntakeState>,
    url_token: Result<Path<String>, PathRejection>,
    request: Request,
) -> ApiResult<(StatusCode, Json<Receipt>)> {
    // A segment that does not even decode was never issued either.
    let Path(url_token) = url_token.map_err(|_| ApiError::not_found())?;
    let (parts, body) = request.into_parts();
    // Refused before the webhook is known: not attributable, not recorded
    // (recording would cost the lookup the limiter exists to save).
    if let Err(wait) = state.limiter.check(&rate_key(&parts)) {
        return Err(ApiError::rate_limited(wait.as_secs_f64().ceil() as u64));
    }
    if declared_length(&parts.headers).is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(ApiError::payload_too_large(MAX_BODY_BYTES));
    }
    let target = find_target(&state, &url_token).await?;
    let webhook = &target.webhook;
    let kept = headers::sanitized(&parts.headers);
    let content_type = headers::text(&parts.headers, header::CONTENT_TYPE.as_str())
        .map(|ct| cut_to_bytes(&ct, headers::MAX_HEADER_VALUE_BYTES).to_owned());
    let claimed_mode = if target.signing_secret.is_some() {
        TrustMode::Signed
    } else {
        TrustMode::Token
    };
    // What a refused delivery keeps: who it came for, its size and kept
    // headers; nothing read from its unverified body.
    let unverified = |size: usize| Envelope {
        source: derive::GENERIC.to_owned(),
        trust_mode: claimed_mode.as_str().to_owned(),
        verified: false,
        content_type: content_type.clone(),
        size: size as i64,
        ..Envelope::default()
    };
    if !target.endpoint_active {
        let size = declared_length(&parts.headers).unwrap_or(0) as usize;
        record_refusal(&state, webhook, "endpoint_revoked", unverified(size), &kept).await;
        return Err(endpoint_revoked());
    }
    let body = match read_capped(body, MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(e) => {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                // More than the cap arrived; its exact size was never read.
                let env = unverified(MAX_BODY_BYTES + 1);
                record_refusal(&state, webhook, "too_large", env, &kept).await;
            }
            return Err(e);
        }
    };

    if let Some(secret) = &target.signing_secret
        && !signature::verify(secret, &parts.headers, &body)
    {
        let env = unverified(body.len());
        record_refusal(&state, webhook, "bad_signature", env, &kept).await;
        return Err(ApiError::bad_signature());
    }
    // A sender may delay its todo; a time it cannot parse is refused whole.
    if let Some(text) = headers::text(&parts.headers, RUN_AT_HEADER) {
        let now = state.delivery.store().clock().now();
        if let Err(e) = crate::domain::todo::resolve_run_at(Some(&text), None, now) {
            return Err(ApiError::invalid("X-Switchboard-Run-At", e.message));
        }
    }
    let trust_mode = claimed_mode;
    let json = payload::parse(&body);
    let labels = derive::derive(&parts.headers, json.as_ref());
    let envelope = envelope::read(
        &parts.headers,
        json.as_ref(),
        trust_mode.as_str(),
        true,
        content_type.clone(),
        body.len(),
    );
    let delivery_id = key::delivery_id(&parts.headers);
    let received = ops::intake::Received {
        webhook: webhook.clone(),
        trust_mode,
        envelope,
        headers: kept,
        content_type,
        idempotency_key: key::idempotency_key(&webhook.id, delivery_id.as_deref(), &body),
        body,
        title: labels.title,
        kind: labels.kind,
        source: labels.source,
        replay_of: None,
    };
    let decided = match ops::intake::decide(&state.delivery, received).await {
        Ok(decided) => decided,
        // Revoked between the lookup and the insert.
        Err(StoreError::EndpointRevoked) => {
            return Err(endpoint_revoked());
        }
        Err(e) => return Err(e.into()),
    };
    // Never the URL token, the secret, the signature or the body.
    tracing::info!(
        webhook_id = %webhook.id,
        delivery_id = %decided.record.id,
        decision = decided.record.decision.as_str(),
        todo_id = decided.todo.as_ref().map(|t| t.todo.id.as_str()),
        // As before delivery history: whether a todo was made (absent: none).
        created = decided.todo.as_ref().map(|t| t.created),
        trust_mode = trust_mode.as_str(),
        "webhook delivery"
    );
    Ok((
        StatusCode::ACCEPTED,
        Json(Receipt {
            delivery: ReceiptDelivery {
                id: decided.record.id,
                decision: decided.record.decision.as_str(),
            },
            todo: decided.todo.map(|created| ReceiptTodo {
                id: created.todo.id,
                queue: created.todo.queue,
                created: created.created,
            }),
        }),
    ))
}

/// Records a refusal; a failure to record never changes the answer.
async fn record_refusal(
    state: &IntakeState,
    webhook: &Webhook,
    reason: &str,
    envelope: Envelope,
    kept: &serde_json::Value,
) {
    if let Err(e) =
        ops::intake::refused(&state.delivery, webhook, reason, envelope, kept.clone()).await
    {
        tracing::warn!(webhook_id = %webhook.id, error = %e, "a refused delivery was not recorded");
    }
}

/// The webhook a URL token names: 404 when none.
async fn find_target(state: &IntakeState, url_token: &str) -> ApiResult<WebhookTarget> {
    // Anything but 32 hex characters was never issued: no need to ask the
    // database. Tokens are looked up by their hash, so the lookup's timing
    // says nothing about the token itself.
    if url_token.len() != 32 || !url_token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::not_found());
    }
    state
        .store
        .unscoped_find_webhook(&sha256_hex(url_token))
        .await?
        .ok_or_else(ApiError::not_found)
}

fn endpoint_revoked() -> ApiError {
    ApiError::gone("the webhook's endpoint is revoked")
}

/// The client's bucket: its address as [`ClientAddr`] decides it (the peer,
/// or behind a trusted proxy the client it forwards for; never a forwarding
/// header an untrusted client wrote). An IPv6 client usually holds a whole
/// /64, so that is its bucket.
fn rate_key(parts: &Parts) -> String {
    let Some(ClientAddr(client)) = ClientAddr::of(parts) else {
        // Only a router served without connection info (an in-process test)
        // gets here; all its clients then share one bucket.
        return "unknown".to_owned();
    };
    match client {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Reads the whole body, refusing it as soon as it passes `max` bytes (a
/// chunked body declares no length up front).
async fn read_capped(body: Body, max: usize) -> ApiResult<Vec<u8>> {
    let mut body = std::pin::pin!(body);
    let mut bytes = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(|e| {
            tracing::debug!(error = %e, "webhook body could not be read");
            ApiError::invalid("body", "the request body could not be read")
        })?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > max {
                return Err(ApiError::payload_too_large(max));
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::ConnectInfo;
    use axum::http::Request as HttpRequest;
    use std::net::SocketAddr;

    fn parts_from(peer: Option<&str>) -> Parts {
        let mut request = HttpRequest::new(());
        if let Some(peer) = peer {
            let addr: SocketAddr = peer.parse().unwrap();
            request.extensions_mut().insert(ConnectInfo(addr));
        }
        request.into_parts().0
    }

    #[test]
    fn rate_buckets_are_per_ipv4_address_and_per_ipv6_64() {
        assert_eq!(
            rate_key(&parts_from(Some("203.0.113.9:5000"))),
            "203.0.113.9"
        );
        assert_eq!(
            rate_key(&parts_from(Some("[2001:db8:1:2:aaaa::1]:443"))),
            "2001:db8:1:2::/64"
        );
        assert_eq!(
            rate_key(&parts_from(Some("[2001:db8:1:2:bbbb::9]:1"))),
            rate_key(&parts_from(Some("[2001:db8:1:2:aaaa::1]:443")))
        );
        assert_eq!(
            rate_key(&parts_from(Some("[::ffff:192.0.2.1]:80"))),
            "192.0.2.1"
        );
        assert_eq!(rate_key(&parts_from(None)), "unknown");
    }

    #[tokio::test]
    async fn bodies_over_the_cap_are_refused_while_reading() {
        let ok = read_capped(Body::from(vec![1u8; 10]), 10).await.unwrap();
        assert_eq!(ok.len(), 10);
        let err = read_capped(Body::from(vec![1u8; 11]), 10)
            .await
            .unwrap_err();
        assert_eq!(err.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
}
