//! `npm ci` for the Node helpers the tests drive (the MCP SDK client, the
//! board's browser driver): at most one install at a time across every test
//! process, and none once the folder is installed.
//!
//! nextest runs each test in a process of its own, so a per-process
//! `OnceLock` does not make it "once". On a checkout without `node_modules`,
//! each doorbell test ran its own `npm ci` in the same folder at the same
//! moment, and each install's first step (removing `node_modules`) pulled the
//! files from under the others: `ENOTEMPTY` from npm, `ERR_MODULE_NOT_FOUND`
//! from node. An exclusive lock on a file in cargo's target directory
//! serialises the installs; whoever gets it after the first finds the folder
//! installed and returns.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Installs `dir`'s `package-lock.json` unless it is installed already:
/// `package` (a path under `node_modules`) is there and npm finished (its
/// hidden lockfile, written last). The error says what npm said.
pub fn npm_ci_once(dir: &Path, package: &str) -> Result<(), String> {
    // Held until this returns; closing the file releases it, also when the
    // test process dies.
    let _installing = lock_installs(dir)?;
    let modules = dir.join("node_modules");
    if modules.join(package).exists() && modules.join(".package-lock.json").exists() {
        return Ok(());
    }
    // The one place the suite uses the network: said where plain `cargo
    // test` shows it, not only in a failing test's output.
    super::skips::say(&format!(
        "note: npm ci --prefix {}: installing its pinned packages from the npm registry \
         (network; once per checkout)",
        dir.strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(dir)
            .display()
    ));
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--prefix"])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run npm: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "npm ci --prefix {} failed:\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Takes the exclusive lock on `dir`'s install, waiting for whoever holds it.
fn lock_installs(dir: &Path) -> Result<File, String> {
    let path = lock_path(dir);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    file.lock()
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    Ok(file)
}

/// `<target>/tmp/npm-ci-<folder name>.lock`: outside the source tree.
fn lock_path(dir: &Path) -> PathBuf {
    let name = dir
        .file_name()
        .map_or_else(|| "node".into(), |n| n.to_string_lossy().into_owned());
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("npm-ci-{name}.lock"))
}
