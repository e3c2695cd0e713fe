//! The REST API end to end (`/api/v1`), against the real binary.

mod log_secrecy;
mod operator;
mod security;
