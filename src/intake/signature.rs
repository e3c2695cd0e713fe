//! Signed webhooks: `X-Hub-Signature-256: sha256=<hex>` (GitHub's scheme,
//! also accepted as `X-Switchboard-Signature`) is HMAC-SHA256 of the raw
//! body, keyed with the webhook's signing secret.

use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Where a signature is looked for, in this order; only the first present counts.
pub const SIGNATURE_HEADERS: [&str; 2] = ["x-hub-signature-256", "x-switchboard-signature"];

const SCHEME: &str = "sha256=";

/// Whether the request carries a valid signature of `body` under `secret`.
/// Missing, malformed and wrong signatures are all just `false`: the caller
/// answers them alike.
pub fn verify(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    let Some(value) = SIGNATURE_HEADERS.iter().find_map(|name| headers.get(*name)) else {
        return false;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    let Some(hex) = value.trim().strip_prefix(SCHEME) else {
        return false;
    };
    // The length of a signature is public; only the bytes are compared in constant time.
    let Some(given) = decode_hex(hex) else {
        return false;
    };
    let expected = mac(secret, body);
    given.len() == expected.len() && bool::from(given.ct_eq(&expected))
}

/// The header value a sender puts on `body`: `sha256=<lowercase hex>`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    format!(
        "{SCHEME}{}",
        crate::domain::ids::lower_hex(&mac(secret, body))
    )
}

/// The secret is used as given (its text, not hex-decoded): that is what
/// GitHub and Gitea do with the secret a human pastes into their form.
fn mac(secret: &str, body: &[u8]) -> Vec<u8> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC accepts keys of any length");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let nibble = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    hex.as_bytes()
        .chunks(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(name: &'static str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn matches_githubs_published_example() {
        // https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
        let signature = sign("It's a Secret to Everybody", b"Hello, World!");
        assert_eq!(
            signature,
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
        let headers = with("x-hub-signature-256", &signature);
        assert!(verify(
            "It's a Secret to Everybody",
            &headers,
            b"Hello, World!"
        ));
    }

    #[test]
    fn accepts_the_switchboard_header_and_uppercase_hex() {
        let signature = sign("s3cret", b"{}")
            .to_uppercase()
            .replace("SHA256=", "sha256=");
        assert!(verify(
            "s3cret",
            &with("x-switchboard-signature", &signature),
            b"{}"
        ));
    }

    #[test]
    fn refuses_missing_wrong_and_malformed_signatures() {
        let body = b"payload";
        let good = sign("key", body);
        assert!(!verify("key", &HeaderMap::new(), body), "missing");
        assert!(!verify("other", &with("x-hub-signature-256", &good), body));
        assert!(!verify(
            "key",
            &with("x-hub-signature-256", &good),
            b"payloaD"
        ));
        let bare_hex = good.trim_start_matches(SCHEME);
        for bad in [
            bare_hex,
            "sha256=",
            "sha256=zz",
            "sha256=abc",
            &good[..good.len() - 2],
        ] {
            assert!(
                !verify("key", &with("x-hub-signature-256", bad), body),
                "{bad}"
            );
        }
        // The old SHA-1 header of GitHub is not a substitute.
        assert!(!verify("key", &with("x-hub-signature", &good), body));
    }

    #[test]
    fn only_the_first_present_header_counts() {
        let mut headers = with("x-hub-signature-256", "sha256=00");
        headers.insert(
            "x-switchboard-signature",
            HeaderValue::from_str(&sign("key", b"x")).unwrap(),
        );
        assert!(!verify("key", &headers, b"x"));
    }
}
