//! One module per page of the board.

pub(crate) mod agents;
pub(crate) mod endpoint;
pub(crate) mod overview;
pub(crate) mod sign_in;
pub(crate) mod todos;
pub(crate) mod tokens;
pub(crate) mod vend;

use crate::store::StoreError;

/// A refused write as the message shown on the page.
pub(crate) fn refusal(e: StoreError) -> String {
    match e {
        StoreError::InvalidArgument(invalid) => invalid.to_string(),
        StoreError::EndpointRevoked => "the endpoint is revoked".to_owned(),
        StoreError::Conflict(why) => why,
        StoreError::NotFound => "not found".to_owned(),
        other => {
            tracing::warn!(error = %other, "board: a write failed");
            "the write failed; try again".to_owned()
        }
    }
}
