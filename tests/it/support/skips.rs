//! What a run skipped, said where a plain `cargo test` shows it (issue 45).
//!
//! The test harness keeps what a passing test prints (`println!`,
//! `eprintln!`) to itself, so the `SKIPPED …` line of each skipped test is
//! seen only with `--nocapture`. Each skip is also recorded here, and when
//! the test binary exits it writes one summary line per kind of skip
//! straight to its standard error, which the harness does not capture: the
//! last lines of `cargo test`'s output. Nothing is written when nothing was
//! skipped. Network use is said the same way, when it happens
//! ([`say`]: `npm ci` for the Node helpers).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Mutex, Once};

/// A kind of skip: what is missing, and how to run the tests it skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    PostgreSql,
    ThrowawayPostgreSql,
    Browser,
    Clients,
    Terminal,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::PostgreSql => "PostgreSQL",
            Kind::ThrowawayPostgreSql => "throwaway PostgreSQL",
            Kind::Browser => "browser",
            Kind::Clients => "clients",
            Kind::Terminal => "terminal",
        }
    }

    fn how_to_run(self) -> &'static str {
        match self {
            Kind::PostgreSql => {
                "set SWITCHBOARD_TEST_DATABASE_URL=postgres://USER@127.0.0.1:5432/DB to run \
                 them (README, \"PostgreSQL\")"
            }
            Kind::ThrowawayPostgreSql => {
                "they start their own cluster with /usr/lib/postgresql/15/bin/initdb \
                 (apt-get install postgresql-15)"
            }
            Kind::Browser => "they need /usr/bin/chromium (apt-get install chromium)",
            Kind::Clients => {
                "they need Node.js, npm and the network once (npm ci of the pinned Claude Code \
                 and Codex CLI); the first skip said why"
            }
            Kind::Terminal => "they need `script` (util-linux) to make a terminal",
        }
    }
}

static SKIPPED: Mutex<BTreeMap<Kind, Vec<String>>> = Mutex::new(BTreeMap::new());
static SUMMARY_AT_EXIT: Once = Once::new();

unsafe extern "C" {
    /// The C library's, which every Rust program on Linux links.
    fn atexit(callback: extern "C" fn()) -> std::os::raw::c_int;
}

/// Records that `test` was skipped for want of `kind`, and says so on the
/// test's own output (shown with `--nocapture`, or when it fails).
pub fn skipped(kind: Kind, test: &str, why: &str) {
    eprintln!("SKIPPED ({}): {test}: {why}", kind.label());
    SKIPPED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(kind)
        .or_default()
        .push(test.to_owned());
    SUMMARY_AT_EXIT.call_once(|| {
        // SAFETY: registers a plain function with no arguments; the C
        // library calls it once, when the process exits.
        unsafe {
            atexit(summary);
        }
    });
}

/// Writes `line` where plain `cargo test` shows it, at once.
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The summary, one line per kind. Runs at exit, when no test runs any
/// more; a lock still held (a test thread that died holding it) skips it.
extern "C" fn summary() {
    let Ok(skipped) = SKIPPED.try_lock() else {
        return;
    };
    let total: usize = skipped.values().map(Vec::len).sum();
    if total == 0 {
        return;
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err);
    for (kind, tests) in skipped.iter() {
        let _ = writeln!(
            err,
            "SKIPPED: {} {} test(s), e.g. {}: {}",
            tests.len(),
            kind.label(),
            tests[0],
            kind.how_to_run()
        );
    }
    let _ = writeln!(
        err,
        "SKIPPED: {total} test(s) in all passed without running; everything else ran. \
         `.ci/run` runs them all and fails instead of skipping."
    );
}

/// A throwaway PostgreSQL cluster (`switchboard::testkit::PgCluster`), or
/// `None` with the skip recorded when PostgreSQL 15 is not installed.
pub fn throwaway_cluster(test: &str) -> Option<switchboard::testkit::PgCluster> {
    let cluster = switchboard::testkit::PgCluster::start_new(test);
    if cluster.is_none() {
        skipped(
            Kind::ThrowawayPostgreSql,
            test,
            "/usr/lib/postgresql/15/bin/initdb is missing",
        );
    }
    cluster
}
