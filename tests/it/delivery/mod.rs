//! Delivery in process, on both backends: doorbells and presence (helpers in
//! `support::delivery`).

mod activity;
mod doorbells;
mod presence;
