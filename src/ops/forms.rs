//! One-time form submissions (`docs/decisions.md`, "A create form is
//! submitted once"): a form that creates something carries a nonce minted
//! with the form; the first POST records it, and a replay (a second click,
//! a resent POST, a reload) is told what the first one made instead of
//! making it again — across instances, since the record is one guarded
//! insert in the database.

use crate::delivery::Delivery;
use crate::domain::Invalid;
use crate::store::{PriorSubmission, StoreResult};

/// The field a create form carries its nonce in.
pub const NONCE_FIELD: &str = "nonce";

/// What a submission is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submission {
    /// The nonce is new: go ahead, then [`settle`] it with what was made.
    First,
    /// The nonce was submitted before; what it made, if that finished.
    Repeat(PriorSubmission),
}

/// Mints a nonce for a form (128 random bits, URL-safe).
pub fn mint_nonce() -> String {
    crate::mint::random_token(16)
}

/// Records `nonce` for `form` of `human_id`, or says it was seen.
pub async fn submit(
    delivery: &Delivery,
    human_id: &str,
    form: &str,
    nonce: Option<&str>,
) -> StoreResult<Submission> {
    let nonce = nonce.unwrap_or("");
    if nonce.is_empty()
        || nonce.len() > 64
        || !nonce
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(Invalid::new(
            NONCE_FIELD,
            "this form has no valid one-time token; reload the page and submit it again",
        )
        .into());
    }
    Ok(
        match delivery
            .store()
            .claim_form_nonce(human_id, form, nonce)
            .await?
        {
            None => Submission::First,
            Some(prior) => Submission::Repeat(prior),
        },
    )
}

/// Records what the first submission of `nonce` made, for its replays.
pub async fn settle(
    delivery: &Delivery,
    human_id: &str,
    nonce: &str,
    result: &str,
) -> StoreResult<()> {
    delivery
        .store()
        .settle_form_nonce(human_id, nonce, result)
        .await
}
