//! Form posts of the board: the body read (at most 64 KiB) as
//! `application/x-www-form-urlencoded` pairs, and the CSRF check every POST
//! of a signed-in human passes before its handler runs.

use axum::extract::{FromRequest, FromRequestParts, Request};
use subtle::ConstantTimeEq;

use super::BoardState;
use super::auth::Signed;
use super::error::BoardError;

/// Form bodies are small; anything larger is refused before parsing.
const MAX_FORM_BYTES: usize = 64 * 1024;
/// The hidden field every form of a signed-in page carries.
pub(crate) const CSRF_FIELD: &str = "csrf";

/// The fields of a form, in order; a name may repeat (checkboxes).
#[derive(Debug, Default)]
pub(crate) struct Fields(Vec<(String, String)>);

impl Fields {
    /// The first value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `name`, trimmed, when not empty.
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim).filter(|v| !v.is_empty())
    }

    /// Every value of `name` (the bulk forms' checkboxes).
    pub(crate) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

pub(crate) fn read_fields(body: &[u8]) -> Result<Fields, BoardError> {
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(body)
        .map(Fields)
        .map_err(|_| {
            BoardError::BadRequest("body: not a form (application/x-www-form-urlencoded)".into())
        })
}

/// A signed-in human's form post whose CSRF token matched; anything else is
/// refused before the handler runs (403 for a missing or wrong token).
pub(crate) struct CsrfForm {
    pub(crate) signed: Signed,
    pub(crate) fields: Fields,
}

impl FromRequest<BoardState> for CsrfForm {
    type Rejection = BoardError;

    async fn from_request(req: Request, state: &BoardState) -> Result<Self, BoardError> {
        let (mut parts, body) = req.into_parts();
        let signed = Signed::from_request_parts(&mut parts, state).await?;
        if !super::pages::sign_in::from_this_origin(state, &parts.headers) {
            return Err(BoardError::Forbidden(
                "origin: a form must be posted from this server's own pages".into(),
            ));
        }
        let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
            .await
            .map_err(|_| BoardError::BadRequest(format!("body: at most {MAX_FORM_BYTES} bytes")))?;
        let fields = read_fields(&bytes)?;
        let sent = fields.get(CSRF_FIELD).unwrap_or("");
        if !bool::from(sent.as_bytes().ct_eq(signed.csrf.as_bytes())) {
            return Err(BoardError::Forbidden(
                "csrf: this form has no valid CSRF token; reload the page and try again".into(),
            ));
        }
        // Checked after the CSRF token, so that a forged post spends
        // nothing of the human's budget.
        if let Err(wait) = state.board.writes.check(&signed.human.id) {
            return Err(BoardError::RateLimited(wait));
        }
        Ok(Self { signed, fields })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_keep_repeated_fields_and_trim_text() {
        let f = read_fields(b"ids=td_1&ids=td_2&label=+hi+&empty=").unwrap();
        assert_eq!(f.all("ids"), vec!["td_1", "td_2"]);
        assert_eq!(f.text("label"), Some("hi"));
        assert_eq!(f.text("empty"), None);
        assert_eq!(f.get("missing"), None);
    }
}
