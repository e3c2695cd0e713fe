//! The integration tests, in one test binary (`cargo test --test it`): one
//! link of the crate instead of one per file. Modules follow the surfaces:
//! `api::` (the REST API), `mcp::` (MCP end to end), `delivery::` (doorbells
//! and presence in process), `cli::`, `binary` (the process itself), `edge`
//! (Host/Origin, proxies, request ids, the access log), `intake`, `metrics`,
//! `clients` (the real Claude Code and Codex CLI, set up as vend prints it),
//! `ops` (a write's consequences, alike from every surface), `maintenance`,
//! `faults` (the binary under faults and floods), `runner` (`switchboard work`
//! end to end), `cluster` and
//! `cluster_faults` (several real processes on PostgreSQL), `shift` and
//! `store_conformance` (both backends).
//! Shared helpers live in `support/`; `support::server` starts servers.
//!
//! Run a subset with a module prefix: `cargo test --test it mcp::transport::`.

mod api;
mod binary;
mod board;
mod bootstrap;
mod cli;
mod clients;
mod cluster;
mod cluster_faults;
mod delivery;
mod edge;
mod faults;
mod first_doorbell;
mod hooks;
mod hostile_http;
mod intake;
mod intake_history;
mod intake_rules;
mod maintenance;
mod mcp;
mod metrics;
mod oauth;
mod ops;
mod runner;
mod schedules;
mod shift;
mod store_conformance;
mod support;

// The conformance modules reach their shared helpers as `crate::common`.
use store_conformance::common;

/// With `autotests = false`, a test file outside `tests/it/` is silently not
/// built: every `.rs` file under `tests/` must be a module of this binary.
#[test]
fn every_test_file_is_in_tests_it() {
    fn rust_files(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("node_modules") {
                    rust_files(&path, found);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut found = Vec::new();
    rust_files(&tests, &mut found);
    let outside: Vec<_> = found
        .iter()
        .filter(|path| !path.starts_with(tests.join("it")))
        .collect();
    assert!(
        outside.is_empty(),
        "move these into tests/it/ and declare them as modules (docs/development.md): {outside:?}"
    );
}
