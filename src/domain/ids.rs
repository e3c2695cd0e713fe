//! The pure half of identifiers and secrets: how a secret is stored
//! (SHA-256) and how much of it may be shown. Minting them needs the clock
//! and the OS random source, so it lives outside the domain, in
//! [`crate::mint`].

use sha2::{Digest, Sha256};

/// How many leading characters of a secret may be shown for recognition.
pub const SHOWN_PREFIX_CHARS: usize = 12;

/// Lowercase hex SHA-256: how every secret is stored.
pub fn sha256_hex(secret: &str) -> String {
    lower_hex(&Sha256::digest(secret.as_bytes()))
}

/// Bytes as lowercase hex, two characters each. Every MCP request hashes
/// its credential with it, so it writes digits straight into the string
/// (`format!` per byte was ~2 % of the server's CPU in B2).
pub fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// The prefix of a human API token.
pub const HUMAN_TOKEN_PREFIX: &str = "sbh_";

/// Characters after the prefix: base64url (no padding) of 32 random bytes.
pub const HUMAN_TOKEN_BODY_CHARS: usize = 43;

/// Whether `token` has the shape of a human API token as Switchboard mints
/// them (`sbh_` + 43 base64url characters), so that a token supplied from
/// outside (`SWITCHBOARD_BOOTSTRAP_TOKEN`) is as strong as a minted one.
pub fn check_human_token_shape(token: &str) -> Result<(), String> {
    let Some(body) = token.strip_prefix(HUMAN_TOKEN_PREFIX) else {
        return Err(format!("must start with {HUMAN_TOKEN_PREFIX}"));
    };
    let base64url = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if body.chars().count() != HUMAN_TOKEN_BODY_CHARS || !body.chars().all(base64url) {
        return Err(format!(
            "must be {HUMAN_TOKEN_PREFIX} followed by {HUMAN_TOKEN_BODY_CHARS} base64url \
             characters (32 random bytes), e.g. the output of `switchboard admin token create`"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_token_shapes() {
        let good = format!("sbh_{}", "a".repeat(43));
        assert!(check_human_token_shape(&good).is_ok());
        assert!(check_human_token_shape(&format!("sbk_{}", "a".repeat(43))).is_err());
        assert!(check_human_token_shape(&format!("sbh_{}", "a".repeat(42))).is_err());
        assert!(check_human_token_shape(&format!("sbh_{}=", "a".repeat(42))).is_err());
        assert!(check_human_token_shape("sbh_").is_err());
    }

    #[test]
    fn hashes() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn hex_is_two_lowercase_digits_per_byte() {
        assert_eq!(lower_hex(&[]), "");
        assert_eq!(lower_hex(&[0x00, 0x0f, 0xa0, 0xff, 0x5c]), "000fa0ff5c");
        let every: Vec<u8> = (0..=255).collect();
        let expected: String = every.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lower_hex(&every), expected);
    }
}
