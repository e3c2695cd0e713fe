//! Signing in to the board, and who a board request is.
//!
//! Signing in with an `sbh_` token mints a *new* API token for that human
//! (label `board sign-in`, 12 h) and sets it as an `HttpOnly;
//! SameSite=Strict` cookie. Every board request authenticates that cookie
//! exactly as the API authenticates a bearer token, so revoking it (signing
//! out, or `DELETE /api/v1/tokens/{id}`) takes effect at once on every
//! instance, and no session table is needed. The token the human typed is
//! never stored in the browser.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::BoardState;
use super::error::BoardError;
use crate::domain::Timestamp;
use crate::http::auth::{self, SignedInHuman};
use crate::store::{ApiToken, Human};

/// The cookie holding the board's own API token.
pub(crate) const COOKIE: &str = auth::BOARD_COOKIE;
/// The label of the tokens the board mints, as `GET /api/v1/tokens` lists them.
pub(crate) const SIGN_IN_LABEL: &str = "board sign-in";
/// What the CSRF token is an HMAC of, keyed by the cookie's token.
const CSRF_LABEL: &[u8] = b"switchboard board csrf v1";

/// A signed-in human: their board token, and the CSRF token of its forms.
pub(crate) struct Signed {
    pub(crate) human: Human,
    pub(crate) token: ApiToken,
    /// When the token this session was signed in with expires (`None`:
    /// never): a token made on the board may not outlive it.
    pub(crate) authority_expires_at: Option<Timestamp>,
    pub(crate) csrf: String,
}

impl FromRequestParts<BoardState> for Signed {
    type Rejection = BoardError;

    async fn from_request_parts(parts: &mut Parts, state: &BoardState) -> Result<Self, BoardError> {
        // An htmx refresh of a page whose session ended must take the whole
        // page to the sign-in form, not swap the form into a live region.
        let refused = if parts.headers.contains_key("hx-request") {
            BoardError::SignInWholePage
        } else {
            BoardError::SignIn
        };
        let Some(secret) = auth::cookie(&parts.headers, COOKIE) else {
            return Err(refused);
        };
        let SignedInHuman {
            human,
            token,
            authority_expires_at,
        } = auth::human(&*state.store, secret).await?.ok_or(refused)?;
        // A page read spends the human's read budget, as an API read does
        // (a form post spends the write budget, in `CsrfForm`).
        if matches!(parts.method, Method::GET | Method::HEAD)
            && let Err(wait) = state.board.reads.check(&human.id)
        {
            return Err(BoardError::RateLimited(wait));
        }
        Ok(Self {
            human,
            token,
            authority_expires_at,
            csrf: csrf_token(secret),
        })
    }
}

/// The CSRF token of a session: HMAC-SHA256 of a fixed label keyed by the
/// session's secret. A page of another origin can neither read the cookie
/// nor the pages, so it cannot know it; it needs no storage.
pub(crate) fn csrf_token(secret: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(CSRF_LABEL);
    let bytes = mac.finalize().into_bytes();
    crate::domain::ids::lower_hex(&bytes)
}

pub(crate) fn set_cookie(state: &BoardState, value: &str, max_age_secs: u64) -> HeaderValue {
    let secure = if state.board.secure_cookies() {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age_secs}{secure}"
    ))
    .expect("a token is a valid header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csrf_token_is_a_keyed_hmac_of_the_session() {
        let a = csrf_token("sbh_one");
        assert_eq!(a, csrf_token("sbh_one"), "stable for a session");
        assert_ne!(a, csrf_token("sbh_two"), "another session, another token");
        assert_eq!(a.len(), 64);
        assert!(!a.contains("sbh_"), "it does not reveal the secret");
    }
}
