//! One module per page of the board.

pub(crate) mod agents;
pub(crate) mod consent;
pub(crate) mod endpoint;
pub(crate) mod intake;
pub(crate) mod overview;
pub(crate) mod queues;
pub(crate) mod sign_in;
pub(crate) mod todos;
pub(crate) mod tokens;
pub(crate) mod vend;

use crate::ops::Answer;
use crate::store::StoreError;

/// A refused write as the message shown on the page: the one error
/// policy's text (an outage's or a bug's detail goes to the log only).
pub(crate) fn refusal(e: StoreError) -> String {
    Answer::logged(&e, "board").text()
}
