//! The saved login: one server URL and one human API token in
//! `credentials.json`, readable only by the user (`docs/cli.md`).

use std::fmt;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

const FILE_NAME: &str = "credentials.json";

/// A token that never shows up in `Debug` output (clap and anyhow print
/// `Debug` forms in some errors).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.trim().to_owned()))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Credentials {
    pub url: String,
    pub token: Secret,
}

/// `$SWITCHBOARD_CONFIG_DIR`, else `$XDG_CONFIG_HOME/switchboard`, else
/// `~/.config/switchboard`.
pub(super) fn config_dir() -> anyhow::Result<PathBuf> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("SWITCHBOARD_CONFIG_DIR") {
        return Ok(PathBuf::from(dir));
    }
    // The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
    if let Some(xdg) = non_empty("XDG_CONFIG_HOME").map(PathBuf::from)
        && xdg.is_absolute()
    {
        return Ok(xdg.join("switchboard"));
    }
    match non_empty("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".config").join("switchboard")),
        None => bail!("cannot find a config directory: set SWITCHBOARD_CONFIG_DIR or HOME"),
    }
}

pub(super) fn file_path() -> anyhow::Result<PathBuf> {
    Ok(config_dir()?.join(FILE_NAME))
}

/// The saved login, if any.
pub(super) fn load() -> anyhow::Result<Option<Credentials>> {
    let path = file_path()?;
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let credentials = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a saved login; run `switchboard login` again",
            path.display()
        )
    })?;
    Ok(Some(credentials))
}

/// Saves the login with mode 0600 and returns where.
pub(super) fn save(credentials: &Credentials) -> anyhow::Result<PathBuf> {
    let path = file_path()?;
    let dir = path.parent().expect("the file has a directory");
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let text = serde_json::to_string_pretty(credentials)? + "\n";
    write_private(&path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Writes a fresh 0600 file beside `path` and renames it over `path`: the
/// mode applies only when a file is created, so an existing file with wider
/// permissions is replaced rather than rewritten, and a crash never leaves a
/// half-written login.
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut temp_name = path.as_os_str().to_owned();
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = PathBuf::from(temp_name);
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// Removes the saved login; the path when there was one.
pub(super) fn remove() -> anyhow::Result<Option<PathBuf>> {
    let path = file_path()?;
    match fs::remove_file(&path) {
        Ok(()) => Ok(Some(path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let c = Credentials {
            url: "http://x".into(),
            token: Secret::new("sbh_secret"),
        };
        assert!(!format!("{c:?}").contains("sbh_secret"));
    }

    #[test]
    fn a_private_file_is_mode_0600_even_over_a_wider_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, b"new").unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
    }
}
