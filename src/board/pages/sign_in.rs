//! Signing in and out: the form, a board session bound to the token pasted
//! into it, and revoking the session (`super::super::auth` says why).
//!
//! Under abuse (issue 48): the form carries a sign-in CSRF token (a random
//! nonce in a cookie of its own and in the form, which must match) and a
//! post is refused unless its `Origin`, when sent, is exactly this server;
//! attempts are rate-limited per client address; a session's token lives
//! no longer than the token pasted and dies when that one is revoked; and a
//! browser signed in with the same token already is not given another.

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use subtle::ConstantTimeEq;

use crate::board::BoardState;
use crate::board::auth::{COOKIE, SIGN_IN_LABEL, set_cookie};
use crate::board::error::BoardError;
use crate::board::form::{CSRF_FIELD, CsrfForm, read_fields};
use crate::board::render::render;
use crate::http::auth;
use crate::http::client_addr::ClientAddr;
use crate::http::host_guard::same_origin;
use crate::ops;

/// The cookie holding the sign-in form's CSRF nonce (the double-submit
/// token: a page of another origin can neither read it nor the form).
pub(crate) const SIGN_IN_COOKIE: &str = "sb_signin";
/// How long a sign-in form stays valid.
const SIGN_IN_FORM_SECS: u64 = 3600;
/// A sign-in post reads at most this much.
const MAX_SIGN_IN_BYTES: usize = 8 * 1024;

#[derive(askama::Template)]
#[template(path = "board/sign_in.html")]
struct SignInPage {
    error: Option<String>,
    csrf: String,
    /// Where to go once signed in (an OAuth authorization request).
    next: Option<String>,
}

/// Where a sign-in may go on to: only back to an authorization request of
/// this server (never another site: no open redirect).
fn safe_next(next: Option<&str>) -> Option<String> {
    let next = next?;
    let ok = (next == "/oauth/authorize" || next.starts_with("/oauth/authorize?"))
        && !next.contains('\\')
        && !next.chars().any(char::is_control);
    ok.then(|| next.to_owned())
}

#[derive(serde::Deserialize)]
pub(crate) struct Next {
    next: Option<String>,
}

/// The form, with a fresh nonce in its field and its cookie (or the one
/// this browser already holds, so that two tabs both work).
/// Already signed in and sent on to an authorization request: straight
/// there.
pub(crate) async fn sign_in_page(
    State(state): State<BoardState>,
    headers: HeaderMap,
    Query(Next { next }): Query<Next>,
) -> Response {
    let next = safe_next(next.as_deref());
    if let Some(next) = &next
        && let Some(secret) = auth::cookie(&headers, COOKIE)
        && let Ok(Some(_)) = auth::human(&*state.store, secret).await
    {
        return Redirect::to(next).into_response();
    }
    form_page(&state, &headers, StatusCode::OK, None, next)
}

fn form_page(
    state: &BoardState,
    headers: &HeaderMap,
    status: StatusCode,
    error: Option<String>,
    next: Option<String>,
) -> Response {
    let nonce = auth::cookie(headers, SIGN_IN_COOKIE)
        .filter(|n| well_formed_nonce(n))
        .map_or_else(ops::forms::mint_nonce, str::to_owned);
    let mut response = render(&SignInPage {
        error,
        csrf: nonce.clone(),
        next,
    });
    *response.status_mut() = status;
    response.headers_mut().append(
        header::SET_COOKIE,
        sign_in_cookie(state, &nonce, SIGN_IN_FORM_SECS),
    );
    response
}

fn well_formed_nonce(nonce: &str) -> bool {
    (16..=64).contains(&nonce.len())
        && nonce
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn sign_in_cookie(state: &BoardState, value: &str, max_age_secs: u64) -> HeaderValue {
    let secure = if state.board.public_url.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{SIGN_IN_COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/board/sign-in; \
         Max-Age={max_age_secs}{secure}"
    ))
    .expect("a nonce is a valid header value")
}

/// Whether a form post comes from a page of this server: its `Origin`,
/// when the browser sends one (every current browser does on a POST), is
/// exactly this server's, not merely another page on loopback.
pub(crate) fn from_this_origin(state: &BoardState, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    origin
        .to_str()
        .is_ok_and(|o| same_origin(o, host, &state.board.public_url))
}

/// Checks the typed `sbh_` token and, when it is live, signs in with a
/// session of its own bound to it. A wrong token is 401 with the same
/// message whatever was wrong, and writes nothing.
pub(crate) async fn sign_in(State(state): State<BoardState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    if !from_this_origin(&state, headers) {
        return BoardError::Forbidden(
            "origin: a sign-in must come from this server's own sign-in page".into(),
        )
        .into_response();
    }
    let Ok(body) = axum::body::to_bytes(body, MAX_SIGN_IN_BYTES).await else {
        return BoardError::BadRequest(format!("body: at most {MAX_SIGN_IN_BYTES} bytes"))
            .into_response();
    };
    let fields = match read_fields(&body) {
        Ok(fields) => fields,
        Err(e) => return e.into_response(),
    };
    let next = safe_next(fields.get("next"));
    let refused = |message: &str| {
        form_page(
            &state,
            headers,
            StatusCode::UNAUTHORIZED,
            Some(message.to_owned()),
            next.clone(),
        )
    };
    let expected = auth::cookie(headers, SIGN_IN_COOKIE).unwrap_or("");
    let sent = fields.get(CSRF_FIELD).unwrap_or("");
    if expected.is_empty() || !bool::from(sent.as_bytes().ct_eq(expected.as_bytes())) {
        // A fresh form (and cookie, if it had none) to try again with.
        return form_page(
            &state,
            headers,
            StatusCode::FORBIDDEN,
            Some("csrf: this sign-in form is not valid any more; sign in again".into()),
            next.clone(),
        );
    }
    // Every real attempt, right or wrong, spends the client's budget.
    let client = ClientAddr::of(&parts).map_or_else(|| "unknown".to_owned(), |c| c.to_string());
    if let Err(wait) = state.board.sign_ins.check(&client) {
        return BoardError::RateLimited(wait).into_response();
    }
    let typed = fields.get("token").map(str::trim).unwrap_or("");
    if typed.is_empty() {
        return refused("token: paste an API token (it starts with sbh_)");
    }
    let not_live = "token: that is not a live API token (it starts with sbh_)";
    let pasted = match auth::human(&*state.store, typed).await {
        // A board session's own token is not an API token.
        Ok(Some(signed)) if !signed.is_board_session() => signed,
        Ok(_) => return refused(not_live),
        Err(e) => return BoardError::from(e).into_response(),
    };
    // Signed in with this very token already: the session stays as it is.
    if let Some(secret) = auth::cookie(headers, COOKIE)
        && let Ok(Some(current)) = auth::human(&*state.store, secret).await
        && current.token.session_of.as_deref() == Some(pasted.token.id.as_str())
    {
        return signed_in(&state, None, next.as_deref());
    }
    let label = Some(SIGN_IN_LABEL.to_owned());
    let issued = ops::tokens::issue_board_session(
        &state.delivery,
        &pasted.human.id,
        &pasted.token,
        pasted.authority_expires_at,
        label,
        state.board.session_lifetime,
    )
    .await;
    let (secret, record) = match issued {
        Ok(issued) => issued,
        // Revoked between the check and the write.
        Err(crate::store::StoreError::NotFound) => return refused(not_live),
        Err(e) => return BoardError::from(e).into_response(),
    };
    tracing::info!(human = %pasted.human.name, "board sign-in");
    let now = state.store.clock().now().as_millis();
    // The cookie lasts as long as the session's token (rounded up).
    let lasts = record
        .expires_at
        .map_or(state.board.session_lifetime.as_secs(), |at| {
            (at.as_millis().saturating_sub(now) as u64)
                .div_ceil(1000)
                .max(1)
        });
    signed_in(&state, Some((&secret, lasts)), next.as_deref())
}

/// To the overview (or on to the authorization request that sent the
/// human here), with the session's cookie (when a new one was made) and
/// the sign-in form's cookie cleared.
fn signed_in(state: &BoardState, session: Option<(&str, u64)>, next: Option<&str>) -> Response {
    let mut response = Redirect::to(next.unwrap_or("/")).into_response();
    let headers = response.headers_mut();
    if let Some((secret, lasts)) = session {
        headers.append(header::SET_COOKIE, set_cookie(state, secret, lasts));
    }
    headers.append(header::SET_COOKIE, sign_in_cookie(state, "", 0));
    response
}

/// Revokes the board's token of this session and clears the cookie.
pub(crate) async fn sign_out(State(state): State<BoardState>, form: CsrfForm) -> Response {
    // Already revoked elsewhere is fine: the cookie is cleared either way.
    let _ = ops::tokens::revoke(
        &state.delivery,
        &form.signed.human.id,
        &form.signed.token.id,
    )
    .await;
    let mut response = Redirect::to("/board/sign-in").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, set_cookie(&state, "", 0));
    response
}
