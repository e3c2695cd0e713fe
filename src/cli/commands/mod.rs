//! The client commands, one module per resource. Each defines its clap
//! subcommands and runs them against the REST API (or, for `admin`, against
//! the database directly).

pub(super) mod admin;
pub(super) mod agent;
pub(super) mod auth;
pub(super) mod delivery;
pub(super) mod doctor;
pub(super) mod endpoint;
pub(super) mod hook;
pub(super) mod quickstart;
pub(super) mod schedule;
pub(super) mod shift;
pub(super) mod todo;
pub(super) mod token;
pub(super) mod webhook;
