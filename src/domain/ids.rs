//! The pure half of identifiers and secrets: how a secret is stored
//! (SHA-256) and how much of it may be shown. Minting them needs the clock
//! and the OS random source, so it lives outside the domain, in
//! [`crate::mint`].

use sha2::{Digest, Sha256};

/// How many leading characters of a secret may be shown for recognition.
pub const SHOWN_PREFIX_CHARS: usize = 12;

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
    fn hashes() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
