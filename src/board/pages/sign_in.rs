//! Signing in and out: the form, minting the board's own token into the
//! session cookie, and revoking it (`super::super::auth` says why).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

use crate::board::BoardState;
use crate::board::auth::{SIGN_IN_LABEL, set_cookie};
use crate::board::error::BoardError;
use crate::board::form::{CsrfForm, read_fields};
use crate::board::render::render;
use crate::http::auth;
use crate::ops;

#[derive(askama::Template)]
#[template(path = "board/sign_in.html")]
struct SignInPage {
    error: Option<String>,
}

pub(crate) async fn sign_in_page() -> Response {
    render(&SignInPage { error: None })
}

/// Checks the typed `sbh_` token and, when it is live, signs in with a new
/// token of the same human. A wrong token is 401 with the same message
/// whatever was wrong, and writes nothing.
pub(crate) async fn sign_in(State(state): State<BoardState>, body: axum::body::Bytes) -> Response {
    let refused = |message: &str| {
        let mut response = render(&SignInPage {
            error: Some(message.to_owned()),
        });
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        response
    };
    let fields = match read_fields(&body) {
        Ok(fields) => fields,
        Err(e) => return e.into_response(),
    };
    let typed = fields.get("token").map(str::trim).unwrap_or("");
    if typed.is_empty() {
        return refused("token: paste an API token (it starts with sbh_)");
    }
    let human = match auth::human(&*state.store, typed).await {
        Ok(Some(signed_in)) => signed_in.human,
        Ok(None) => return refused("token: that is not a live API token (it starts with sbh_)"),
        Err(e) => return BoardError::from(e).into_response(),
    };
    let lifetime = state.board.session_lifetime;
    let label = Some(SIGN_IN_LABEL.to_owned());
    let (secret, _) =
        match ops::tokens::issue_for(&state.delivery, &human.id, label, lifetime).await {
            Ok(issued) => issued,
            Err(e) => return BoardError::from(e).into_response(),
        };
    tracing::info!(human = %human.name, "board sign-in");
    let mut response = Redirect::to("/").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie(&state, &secret, lifetime.as_secs()),
    );
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
