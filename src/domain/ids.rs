//! Prefixed, time-ordered identifiers (`td_…`, `ep_…`) and random tokens.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// `prefix` + `_` + a UUIDv7, so ids sort by creation time.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

pub fn new_todo_id() -> String {
    new_id("td")
}

/// `n` random bytes, base64url without padding.
pub fn random_token(n: usize) -> String {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    URL_SAFE_NO_PAD.encode(buf)
}

/// Lowercase hex SHA-256: how every secret is stored.
pub fn sha256_hex(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_ordered() {
        let a = new_todo_id();
        let b = new_todo_id();
        assert!(a.starts_with("td_") && a.len() == 35, "{a}");
        assert!(a < b);
    }

    #[test]
    fn tokens_and_hashes() {
        assert_eq!(random_token(16).len(), 22);
        assert_ne!(random_token(16), random_token(16));
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
