//! Notify hooks (`docs/doorbells.md`, "Notify hooks"): the body a hook is
//! POSTed, its Standard Webhooks signature, and which addresses a hook may
//! not reach. Pure: the caller supplies ids, instants and addresses.

use std::net::{IpAddr, Ipv4Addr};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

/// Final failures in a row after which a hook is disabled.
pub const DISABLE_AFTER: i64 = 20;

/// Tries per delivery (the first and two retries).
pub const TRIES: u32 = 3;

/// Deliveries kept per hook in its log.
pub const KEPT_DELIVERIES: i64 = 50;

/// The longest hook URL accepted.
pub const MAX_URL_LEN: usize = 2048;

/// The prefix of a hook's signing secret (Standard Webhooks' own).
pub const SECRET_PREFIX: &str = "whsec_";

/// What a delivery is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    /// A todo became ready (created, or pending again after a retry).
    TodoReady,
    /// The re-ring sweep rang a todo again.
    TodoRering,
    /// The endpoint came back in with work waiting.
    Digest,
    /// A human's test.
    Test,
}

impl HookEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TodoReady => "todo.ready",
            Self::TodoRering => "todo.rering",
            Self::Digest => "digest",
            Self::Test => "test",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::TodoReady, Self::TodoRering, Self::Digest, Self::Test]
            .into_iter()
            .find(|e| e.as_str() == text)
    }
}

/// The JSON body of a delivery: ids, counts and names only — never a
/// title, a payload or a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookBody {
    #[serde(rename = "type")]
    pub event: &'static str,
    /// The endpoint's slug.
    pub endpoint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub todo_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A digest's count of waiting todos.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<i64>,
    /// A digest's reason (`clock_in`, `operator`, `shift_start`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

impl HookBody {
    pub fn new(event: HookEvent, endpoint: &str) -> Self {
        Self {
            event: event.as_str(),
            endpoint: endpoint.to_owned(),
            todo_id: None,
            queue: None,
            kind: None,
            pending: None,
            reason: None,
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a hook body always serializes")
    }
}

/// The HMAC key of a secret: a `whsec_` secret is keyed with its base64
/// part decoded (as every Standard Webhooks library does); anything else
/// with its bytes as they are.
pub fn signing_key(secret: &str) -> Vec<u8> {
    secret
        .strip_prefix(SECRET_PREFIX)
        .and_then(|b64| STANDARD.decode(b64).ok())
        .unwrap_or_else(|| secret.as_bytes().to_vec())
}

/// The `webhook-signature` header: `v1,` + base64 of HMAC-SHA256 over
/// `"<id>.<timestamp>.<body>"`.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(&signing_key(secret)).expect("any key length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// Whether a hook may not reach this address unless private targets are
/// allowed: loopback, private (RFC 1918), link-local, unspecified,
/// carrier-grade NAT (100.64/10), broadcast, unique-local IPv6 (fc00::/7),
/// and IPv4 wrapped in IPv6 judged as IPv4.
pub fn is_private_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private_v4(v4);
            }
            let seg = v6.segments();
            let embedded = |hi: u16, lo: u16| {
                Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)
            };
            // Addresses that carry an IPv4 one a gateway may dial: NAT64
            // (64:ff9b::/96), 6to4 (2002::/16) and the deprecated
            // IPv4-compatible form (::a.b.c.d).
            if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || seg[..6] == [0; 6] {
                return is_private_v4(embedded(seg[6], seg[7]));
            }
            if seg[0] == 0x2002 {
                return is_private_v4(embedded(seg[1], seg[2]));
            }
            let first = seg[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || (first & 0xffc0) == 0xfec0 // site-local (deprecated)
        }
    }
}

fn is_private_v4(v4: Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || a == 0 // "this network"
        || a >= 240 // reserved
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || (a == 192 && b == 0 && v4.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_match_the_standard_webhooks_test_vector() {
        // The vector the Standard Webhooks reference libraries test with.
        assert_eq!(
            sign(
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#,
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_secret_without_the_prefix_is_keyed_as_it_is() {
        assert_eq!(signing_key("plain"), b"plain".to_vec());
        assert_eq!(signing_key("whsec_AAEC"), vec![0, 1, 2]);
    }

    #[test]
    fn private_loopback_link_local_and_cgnat_addresses_are_refused() {
        for refused in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "100.127.255.255",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            // Multicast, reserved, benchmarking, protocol assignments.
            "224.0.0.1",
            "240.0.0.1",
            "198.18.0.1",
            "192.0.0.8",
            "ff02::1",
            // IPv4 inside IPv6 that a gateway would dial.
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::127.0.0.1",
            "2002:a00:1::1",
            "2002:7f00:1::",
            "::127.0.0.1",
        ] {
            let ip: IpAddr = refused.parse().unwrap();
            assert!(is_private_address(ip), "{refused} must be refused");
        }
        for allowed in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            let ip: IpAddr = allowed.parse().unwrap();
            assert!(!is_private_address(ip), "{allowed} must be allowed");
        }
    }

    #[test]
    fn the_body_carries_only_what_is_set() {
        let mut body = HookBody::new(HookEvent::TodoReady, "ops-ab12");
        body.todo_id = Some("td_1".into());
        body.queue = Some("inbox".into());
        assert_eq!(
            String::from_utf8(body.to_bytes()).unwrap(),
            r#"{"type":"todo.ready","endpoint":"ops-ab12","todo_id":"td_1","queue":"inbox"}"#
        );
        let mut digest = HookBody::new(HookEvent::Digest, "ops-ab12");
        digest.pending = Some(3);
        digest.reason = Some("clock_in");
        assert_eq!(
            String::from_utf8(digest.to_bytes()).unwrap(),
            r#"{"type":"digest","endpoint":"ops-ab12","pending":3,"reason":"clock_in"}"#
        );
    }
}
