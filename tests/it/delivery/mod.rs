//! Delivery in process, on both backends: doorbells and presence (helpers in
//! `support::delivery`).

mod doorbells;
mod presence;
