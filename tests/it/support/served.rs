//! A real `switchboard serve` with generous rates, its admin token and an
//! HTTP client: what the fault and abuse suites (`faults`, `hostile_http`)
//! start. Each suite adds the requests it needs in its own `impl Served`.

use crate::support::mcp::{Mcp, client};
use crate::support::server::Process;

/// Rates no test but a rate-limit test meets.
pub const FAST: [&str; 6] = [
    "--api-write-rate",
    "1000",
    "--api-read-rate",
    "1000",
    "--mcp-rate",
    "1000",
];

/// A `serve` process with generous rates and `extra` flags, and its admin token.
pub struct Served {
    pub process: Process,
    pub admin: String,
    pub http: reqwest::Client,
    pub dir: tempfile::TempDir,
}

/// Serves on a fresh directory (SQLite there, or `database`).
pub fn serve(database: Option<&str>, extra: &[&str]) -> Served {
    let dir = tempfile::tempdir().expect("temp dir");
    let process = start_in(&dir, database, extra);
    let admin = process
        .first_token()
        .expect("the first start prints the admin token");
    Served {
        process,
        admin,
        http: client(),
        dir,
    }
}

/// Starts `serve` in `dir` (again, after a stop) with [`FAST`] and `extra`.
pub fn start_in(dir: &tempfile::TempDir, database: Option<&str>, extra: &[&str]) -> Process {
    let mut args: Vec<&str> = FAST.to_vec();
    if let Some(url) = database {
        args.extend(["--database", url]);
    }
    args.extend(extra);
    Process::start(dir.path(), &args)
}

impl Served {
    pub fn mcp(&self, slug: &str, token: &str) -> Mcp {
        Mcp {
            http: self.http.clone(),
            url: self.process.url(&format!("/mcp/{slug}")),
            authorization: format!("Bearer {token}"),
        }
    }

    /// One sample of a `/metrics` series (full name with labels).
    pub async fn metric(&self, series: &str) -> f64 {
        super::metric(&self.http, &self.process.url("/metrics"), series).await
    }
}
