//! Who is calling, for every surface: the credential a request carries (an
//! `Authorization: Bearer …` header, or the board's cookie) and what it
//! authenticates — a signed-in human (an `sbh_` API token, whichever way it
//! came) or an endpoint (an `sbk_` credential, or an OAuth access token of
//! one of its connections: `docs/oauth.md`). A surface that needs a
//! signed-in human (the API, the board, a consent page) asks here, and
//! answers a refusal in its own shape.

use std::sync::Arc;

use axum::http::{HeaderMap, header};

use crate::domain::Timestamp;
use crate::domain::ids::sha256_hex;
use crate::domain::oauth::ACCESS_TOKEN_PREFIX;
use crate::store::prelude::*;
use crate::store::{ApiToken, Endpoint, Human, StoreResult};

/// The cookie that holds a board session's own API token.
pub const BOARD_COOKIE: &str = "sb_board";

/// A human, signed in with one of their live API tokens.
#[derive(Debug, Clone)]
pub struct SignedInHuman {
    pub human: Human,
    pub token: ApiToken,
    /// When what the token derives from expires (`None`: never); a token
    /// it mints may not outlive it (`AuthenticatedToken`).
    pub authority_expires_at: Option<Timestamp>,
}

impl SignedInHuman {
    /// A board session's own token (it signs in to the board only).
    pub fn is_board_session(&self) -> bool {
        self.token.session_of.is_some()
    }
}

/// The token of an `Authorization: Bearer …` header, if well formed.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

/// The value of one cookie of the request, if present and not empty.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

/// The human whose live API token `secret` is; `None` for anything else
/// (not an `sbh_` token, unknown, revoked, expired — all alike).
pub async fn human(store: &dyn Store, secret: &str) -> StoreResult<Option<SignedInHuman>> {
    if !secret.starts_with("sbh_") {
        return Ok(None);
    }
    Ok(store
        .authenticate_api_token(&sha256_hex(secret))
        .await?
        .map(|signed| SignedInHuman {
            human: signed.human,
            token: signed.token,
            authority_expires_at: signed.authority_expires_at,
        }))
}

/// The live endpoint whose credential `secret` is: its `sbk_` credential,
/// or an OAuth access token of one of its grants (`sbo_`, `docs/oauth.md`),
/// which authenticates exactly as the endpoint does. `None` for anything else.
pub async fn endpoint(store: &dyn Store, secret: &str) -> StoreResult<Option<Arc<Endpoint>>> {
    if secret.starts_with("sbk_") {
        store.authenticate_endpoint(&sha256_hex(secret)).await
    } else if secret.starts_with(ACCESS_TOKEN_PREFIX) {
        store.authenticate_oauth_token(&sha256_hex(secret)).await
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_header_is_read_whatever_the_schemes_case() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(header::AUTHORIZATION, "bEaReR  sbh_x ".parse().unwrap());
        assert_eq!(bearer(&headers), Some("sbh_x"));
        headers.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&headers), None);
        headers.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer(&headers), None);
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            "theme=dark; sb_board=sbh_x".parse().unwrap(),
        );
        headers.append(header::COOKIE, "other=1".parse().unwrap());
        assert_eq!(cookie(&headers, BOARD_COOKIE), Some("sbh_x"));
        assert_eq!(cookie(&headers, "other"), Some("1"));
        assert_eq!(cookie(&headers, "missing"), None);
        let mut empty = HeaderMap::new();
        empty.append(header::COOKIE, "sb_board=".parse().unwrap());
        assert_eq!(cookie(&empty, BOARD_COOKIE), None);
    }
}
