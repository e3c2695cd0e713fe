//! The idempotency key of a delivery, so that a redelivery makes no second todo.

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use super::headers;
use crate::domain::todo::MAX_KEY_BYTES;

/// Where the sender's delivery id is looked for, in this order.
pub const DELIVERY_ID_HEADERS: [&str; 4] = [
    "x-github-delivery",
    "x-gitea-delivery",
    "idempotency-key",
    "x-request-id",
];

/// The sender's id of this delivery, from the first delivery header present.
pub fn delivery_id(headers: &HeaderMap) -> Option<String> {
    DELIVERY_ID_HEADERS
        .iter()
        .find_map(|name| headers::text(headers, name))
}

/// `<webhook id>:<delivery id>`, or `<webhook id>:<SHA-256 of the body>`
/// when the sender names no delivery. A delivery id too long for the key
/// limit is replaced by its SHA-256, so a long id still dedups instead of
/// being refused.
pub fn idempotency_key(webhook_id: &str, delivery_id: Option<&str>, body: &[u8]) -> String {
    match delivery_id {
        None => format!("{webhook_id}:{}", sha256_hex(body)),
        Some(id) if webhook_id.len() + 1 + id.len() <= MAX_KEY_BYTES => {
            format!("{webhook_id}:{id}")
        }
        Some(id) => format!("{webhook_id}:{}", sha256_hex(id.as_bytes())),
    }
}

/// Lowercase hex SHA-256 of bytes (the body need not be text).
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::domain::ids::lower_hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn delivery_headers_are_taken_in_order() {
        let mut headers = HeaderMap::new();
        assert_eq!(delivery_id(&headers), None);
        headers.insert("x-request-id", HeaderValue::from_static("req-4"));
        assert_eq!(delivery_id(&headers).as_deref(), Some("req-4"));
        headers.insert("idempotency-key", HeaderValue::from_static("idem-3"));
        assert_eq!(delivery_id(&headers).as_deref(), Some("idem-3"));
        headers.insert("x-gitea-delivery", HeaderValue::from_static("gitea-2"));
        assert_eq!(delivery_id(&headers).as_deref(), Some("gitea-2"));
        headers.insert("x-github-delivery", HeaderValue::from_static(" gh-1 "));
        assert_eq!(delivery_id(&headers).as_deref(), Some("gh-1"));
    }

    #[test]
    fn blank_delivery_headers_are_skipped() {
        let mut headers = HeaderMap::new();
        headers.insert("x-github-delivery", HeaderValue::from_static(""));
        headers.insert("x-request-id", HeaderValue::from_static("r"));
        assert_eq!(delivery_id(&headers).as_deref(), Some("r"));
    }

    #[test]
    fn keys_name_the_webhook_and_the_delivery_or_the_body() {
        assert_eq!(idempotency_key("wh_1", Some("d-1"), b"x"), "wh_1:d-1");
        assert_eq!(
            idempotency_key("wh_1", None, b"abc"),
            "wh_1:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(
            idempotency_key("wh_1", None, b"abc"),
            idempotency_key("wh_2", None, b"abc"),
            "keys of two webhooks never collide"
        );
    }

    #[test]
    fn long_delivery_ids_are_hashed_to_fit() {
        let webhook = format!("wh_{}", "0".repeat(32));
        let fits = "d".repeat(MAX_KEY_BYTES - webhook.len() - 1);
        assert_eq!(
            idempotency_key(&webhook, Some(&fits), b""),
            format!("{webhook}:{fits}")
        );
        let long = format!("{fits}x");
        let key = idempotency_key(&webhook, Some(&long), b"");
        assert!(key.len() <= MAX_KEY_BYTES);
        assert_eq!(key, format!("{webhook}:{}", sha256_hex(long.as_bytes())));
        assert_eq!(key, idempotency_key(&webhook, Some(&long), b"other body"));
    }
}
