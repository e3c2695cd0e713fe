//! The REST API end to end (`/api/v1`), against the real binary.

mod activity;
mod log_secrecy;
mod operator;
mod refusals;
mod security;
