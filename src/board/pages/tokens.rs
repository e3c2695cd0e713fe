//! `/board/tokens`: the human's API tokens, a form for a new one (shown
//! once), and revoking.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Response;

use super::refusal;
use crate::board::BoardState;
use crate::board::auth::{SIGN_IN_LABEL, Signed};
use crate::board::error::BoardError;
use crate::board::form::CsrfForm;
use crate::board::view::{Layout, Messages, When, back, render};
use crate::ops;
use crate::store::{ApiToken, PageRequest};

pub(crate) struct TokenRow {
    pub(crate) id: String,
    pub(crate) prefix: String,
    pub(crate) label: String,
    pub(crate) created: When,
    /// `None`: never.
    pub(crate) expires: Option<When>,
    /// `None`: never.
    pub(crate) last_used: Option<When>,
    pub(crate) revoked: bool,
    /// The token this very board session uses.
    pub(crate) current: bool,
}

#[derive(Template)]
#[template(path = "board/tokens.html")]
struct TokensPage {
    layout: Layout,
    tokens: Vec<TokenRow>,
    /// A token just created: shown this once.
    revealed: Option<String>,
}

async fn show(
    state: &BoardState,
    signed: &Signed,
    layout: Layout,
    revealed: Option<String>,
) -> Result<Response, BoardError> {
    let page = state
        .store
        .list_api_tokens(
            &signed.human.id,
            &PageRequest {
                limit: 200,
                after: None,
            },
        )
        .await?;
    let now = state.store.clock().now();
    let utc = jiff::tz::TimeZone::UTC;
    let row = |t: &ApiToken| TokenRow {
        id: t.id.clone(),
        prefix: t.prefix.clone(),
        label: t.label.clone().unwrap_or_default(),
        created: When::at(t.created_at, now, &utc),
        expires: t.expires_at.map(|x| When::at(x, now, &utc)),
        last_used: t.last_used_at.map(|x| When::at(x, now, &utc)),
        revoked: t.revoked_at.is_some(),
        current: t.id == signed.token.id,
    };
    Ok(render(&TokensPage {
        layout,
        tokens: page.items.iter().map(row).collect(),
        revealed,
    }))
}

pub(crate) async fn page(
    State(state): State<BoardState>,
    signed: Signed,
    Query(messages): Query<Messages>,
) -> Result<Response, BoardError> {
    let layout = Layout::new(&signed, "tokens", "Tokens").with_messages(&messages);
    show(&state, &signed, layout, None).await
}

/// Creates a token (`label`, `expires_in`) and answers with the page that
/// shows it this once (no redirect: the secret is never in a URL).
pub(crate) async fn create(
    State(state): State<BoardState>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let signed = &form.signed;
    let mut layout = Layout::new(signed, "tokens", "Tokens");
    let label = form.fields.text("label").map(str::to_owned);
    if label.as_deref() == Some(SIGN_IN_LABEL) {
        layout.error = Some(format!(
            "label: {SIGN_IN_LABEL:?} is the board's own; choose another"
        ));
        return show(&state, signed, layout, None).await;
    }
    let expires_in = form.fields.text("expires_in");
    // Never past the token this session was signed in with.
    let bound = signed.authority_expires_at;
    match ops::tokens::issue(&state.delivery, &signed.human.id, bound, label, expires_in).await {
        Ok((token, _)) => {
            layout.notice = Some("token created: copy it now, it is not shown again".into());
            show(&state, signed, layout, Some(token)).await
        }
        Err(e) => {
            layout.error = Some(refusal(e));
            show(&state, signed, layout, None).await
        }
    }
}

pub(crate) async fn revoke(
    State(state): State<BoardState>,
    Path(id): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let outcome = ops::tokens::revoke(&state.delivery, &form.signed.human.id, &id)
        .await
        .map(|t| format!("token {} revoked", t.prefix))
        .map_err(refusal);
    let own = id == form.signed.token.id || form.signed.token.session_of.as_ref() == Some(&id);
    if own && outcome.is_ok() {
        // This session's own token, or the one it was signed in with:
        // signed out everywhere it was used.
        return Ok(axum::response::IntoResponse::into_response(
            axum::response::Redirect::to("/board/sign-in"),
        ));
    }
    Ok(back("/board/tokens", outcome))
}
