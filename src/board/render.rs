//! A page template rendered into a response with the board's security headers.

use askama::Template;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

/// Board pages load only their own files: no inline script or style, no
/// other origin, never framed (the forms act on a fleet: no clickjacking).
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The board's policy with `form-action` also allowing `origin`: the
/// consent page's answer redirects to the OAuth client, and browsers hold
/// a form's redirects to `form-action` too.
pub(crate) fn csp_with_form_action(origin: &str) -> String {
    let origin: String = origin
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ';' && *c != ',' && *c != '\'')
        .collect();
    format!("{CSP} {origin}")
}

/// Renders a template as a page that is never cached (it holds a CSRF token
/// and live data).
pub(crate) fn render<T: Template>(page: &T) -> Response {
    match page.render() {
        Ok(html) => (
            [
                (header::CACHE_CONTROL, "no-store"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                (header::CONTENT_SECURITY_POLICY, CSP),
                (header::X_FRAME_OPTIONS, "DENY"),
                (header::REFERRER_POLICY, "same-origin"),
            ],
            Html(html),
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "board: a template failed to render");
            (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "the page could not be rendered",
            )
                .into_response()
        }
    }
}
