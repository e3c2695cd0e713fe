//! The client commands, one module per resource. Each defines its clap
//! subcommands and runs them against the REST API (or, for `admin`, against
//! the database directly).

pub mod admin;
pub mod agent;
pub mod auth;
pub mod doctor;
pub mod endpoint;
pub mod shift;
pub mod todo;
pub mod token;
pub mod webhook;
