//! What of a delivery's headers is read and what is kept on its intake event.

use axum::http::HeaderMap;
use serde_json::{Map, Value};

use crate::domain::text::cut_to_bytes;

/// Each kept header value is cut to this many bytes.
pub const MAX_HEADER_VALUE_BYTES: usize = 1024;

/// Headers that carry credentials or signatures, dropped by name.
const DROPPED: [&str; 9] = [
    "authorization",
    "cookie",
    "set-cookie",
    "proxy-authorization",
    "x-hub-signature",
    "x-hub-signature-256",
    "x-switchboard-signature",
    "x-gitea-signature",
    "x-gogs-signature",
];

/// Any header whose name contains one of these is dropped too: senders
/// invent their own (`X-Gitlab-Token`, `X-Webhook-Secret`, …), and a kept
/// secret would be readable by anyone who can read the todo's event.
const DROPPED_FRAGMENTS: [&str; 3] = ["token", "secret", "signature"];

/// The headers to store: a JSON object of lowercase name → value, without
/// credentials or signatures, each value cut to 1 KiB. A repeated header's
/// values are joined with `, ` (as HTTP allows).
pub fn sanitized(headers: &HeaderMap) -> Value {
    let mut kept = Map::new();
    for name in headers.keys() {
        // `HeaderName` is already lowercase.
        let name = name.as_str();
        if !is_kept(name) {
            continue;
        }
        let joined = headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect::<Vec<_>>()
            .join(", ");
        let value = cut_to_bytes(&joined, MAX_HEADER_VALUE_BYTES).to_owned();
        kept.insert(name.to_owned(), Value::String(value));
    }
    Value::Object(kept)
}

fn is_kept(name: &str) -> bool {
    !DROPPED.contains(&name) && !DROPPED_FRAGMENTS.iter().any(|f| name.contains(f))
}

/// A header's value as trimmed text (invalid UTF-8 replaced), `None` when
/// absent or blank.
pub fn text(headers: &HeaderMap, name: &str) -> Option<String> {
    let value = headers.get(name)?;
    let text = String::from_utf8_lossy(value.as_bytes());
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn map(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn drops_credentials_and_signatures_keeps_the_rest() {
        let headers = map(&[
            ("authorization", "Bearer sbh_x"),
            ("cookie", "a=b"),
            ("proxy-authorization", "Basic x"),
            ("x-hub-signature", "sha1=00"),
            ("x-hub-signature-256", "sha256=00"),
            ("x-switchboard-signature", "sha256=00"),
            ("x-gitea-signature", "00"),
            ("x-gogs-signature", "00"),
            ("x-gitlab-token", "glt"),
            ("x-webhook-secret", "s"),
            ("x-custom-signature-v2", "00"),
            ("content-type", "application/json"),
            ("x-github-event", "push"),
            ("x-github-delivery", "d-1"),
            ("user-agent", "GitHub-Hookshot/abc"),
        ]);
        let kept = sanitized(&headers);
        let names: Vec<&str> = kept
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            names,
            [
                "content-type",
                "user-agent",
                "x-github-delivery",
                "x-github-event"
            ]
        );
        assert_eq!(kept["x-github-event"], "push");
    }

    #[test]
    fn joins_repeated_values_and_caps_each_at_1_kib() {
        let long = "é".repeat(1000);
        let kept = sanitized(&map(&[("accept", "a"), ("accept", "b"), ("x-long", &long)]));
        assert_eq!(kept["accept"], "a, b");
        let cut = kept["x-long"].as_str().unwrap();
        assert!(cut.len() <= MAX_HEADER_VALUE_BYTES && cut.len() >= MAX_HEADER_VALUE_BYTES - 1);
    }

    #[test]
    fn text_is_trimmed_and_blank_is_absent() {
        let headers = map(&[("x-a", "  hi  "), ("x-b", "   ")]);
        assert_eq!(text(&headers, "x-a").as_deref(), Some("hi"));
        assert_eq!(text(&headers, "x-b"), None);
        assert_eq!(text(&headers, "x-c"), None);
    }
}
