//! The test and bench kit: what the integration tests (`tests/it/`) and the
//! benchmarks (`benches/`) both need, in one place. Compiled only with the
//! `testkit` feature, which the package's dev-dependency on itself turns on
//! for tests and benches; `cargo build` never compiles it (docs/development.md).
//!
//! - [`database`]: the URL of another database on the same server
//!   ([`replace_database`]), a throwaway PostgreSQL database made and dropped
//!   ([`ThrowawayDatabase`]), and the migrated template tests copy.
//! - [`pg_cluster`]: a throwaway PostgreSQL 15 cluster of one's own
//!   ([`PgCluster`]: `initdb` on a free port, stopped and started at will).
//! - [`process`]: `switchboard serve` as a child process, its address read
//!   from the "switchboard is serving" line ([`ServeProcess`]).
//! - [`peek`]: raw-SQL peeks past the storage contract ([`StorePeek`]: the
//!   store's pool and the hot-path counters; [`pg_settings`]).
//!
//! The kit may use every module of the crate (`scripts/check-layers`: the top
//! layer); nothing in the crate uses it.

pub mod database;
pub mod peek;
pub mod pg_cluster;
pub mod process;

pub use database::{ThrowawayDatabase, migrated_template, replace_database};
pub use peek::{StorePeek, pg_settings};
pub use pg_cluster::PgCluster;
pub use process::{ServeProcess, serving_address};

/// The PostgreSQL server the tests make their databases on (any database of
/// it; each test creates and drops its own). Unset: PostgreSQL tests skip.
pub const PG_ENV: &str = "SWITCHBOARD_TEST_DATABASE_URL";

/// Set by `.ci/run`: a missing PostgreSQL (URL or PostgreSQL 15 binaries) is
/// then a failure, not a skip.
pub const REQUIRE_PG_ENV: &str = "SWITCHBOARD_REQUIRE_POSTGRES";
