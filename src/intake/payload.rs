//! What the todo carries of a delivery's body (`docs/intake.md`, step 4). The intake
//! event always keeps the whole body; the payload is the agent's copy.

use serde_json::Value;

/// The body as JSON, when it is JSON.
pub fn parse(body: &[u8]) -> Option<Value> {
    serde_json::from_slice(body).ok()
}

pub use crate::domain::intake::{todo_payload, truncated_marker};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::todo::MAX_PAYLOAD_BYTES;
    use crate::intake::key::sha256_hex;
    use serde_json::json;

    #[test]
    fn json_bodies_are_the_payload() {
        let body = br#"{"a": [1, 2]}"#;
        assert_eq!(todo_payload(body, parse(body)), json!({"a": [1, 2]}));
        assert_eq!(todo_payload(b"7", parse(b"7")), json!(7));
    }

    #[test]
    fn other_bodies_travel_as_base64() {
        let body = b"a=1&b=\xff";
        assert_eq!(parse(body), None);
        assert_eq!(todo_payload(body, None), json!({"raw": "YT0xJmI9/w=="}));
        assert_eq!(todo_payload(b"", parse(b"")), json!({"raw": ""}));
    }

    #[test]
    fn oversized_payloads_become_a_marker() {
        let big = serde_json::to_vec(&json!({"blob": "x".repeat(MAX_PAYLOAD_BYTES)})).unwrap();
        let payload = todo_payload(&big, parse(&big));
        assert_eq!(payload["truncated"], true);
        assert_eq!(payload["bytes"], big.len());
        assert_eq!(payload["sha256"], sha256_hex(&big));
        // Base64 grows a body by a third: 200 KiB of non-JSON no longer fits.
        let binary = vec![0xffu8; 200 * 1024];
        assert_eq!(todo_payload(&binary, None)["truncated"], true);
    }

    #[test]
    fn a_payload_at_the_cap_is_kept() {
        // `"` + x… + `"` is exactly the cap.
        let text = format!("\"{}\"", "x".repeat(MAX_PAYLOAD_BYTES - 2));
        let payload = todo_payload(text.as_bytes(), parse(text.as_bytes()));
        assert!(payload.is_string());
    }
}
