//! One module per page of the board.

pub(crate) mod agents;
pub(crate) mod endpoint;
pub(crate) mod overview;
pub(crate) mod todos;
pub(crate) mod tokens;
pub(crate) mod vend;
