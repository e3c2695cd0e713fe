//! The exclusive server lock on an SQLite database.
//!
//! Only one `switchboard serve` may own an SQLite file: a second would be a
//! second writer the design does not expect. The lock is an OS file lock on
//! `<database>.lock`, released by the kernel when the process dies (no stale
//! lock after a crash); the file records who holds it, for the error message.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct ServerLock {
    file: File,
    path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "the SQLite database {database} is already served by another switchboard ({holder}); \
         stop it first, or point this one at another --database (lock file: {lock})"
    )]
    Held {
        database: String,
        holder: String,
        lock: String,
    },
    #[error("cannot open the lock file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl ServerLock {
    pub fn lock_path_for(database: &Path) -> PathBuf {
        let mut name = database.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Takes the lock for `database`, or explains who holds it.
    pub fn acquire(database: &Path, holder_description: &str) -> Result<Self, LockError> {
        let path = Self::lock_path_for(database);
        let io_err = |source| LockError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(LockError::Held {
                    database: database.display().to_string(),
                    holder: if holder.is_empty() {
                        "holder unknown".to_owned()
                    } else {
                        holder.to_owned()
                    },
                    lock: path.display().to_string(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(e)),
        }
        file.set_len(0).map_err(io_err)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        writeln!(file, "{holder_description}").map_err(io_err)?;
        file.flush().map_err(io_err)?;
        Ok(Self { file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ServerLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_with_the_first_named() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let first = ServerLock::acquire(&db, "pid 42 on 127.0.0.1:8080").unwrap();
        let err = ServerLock::acquire(&db, "pid 43").unwrap_err().to_string();
        assert!(err.contains("x.db"), "{err}");
        assert!(err.contains("pid 42 on 127.0.0.1:8080"), "{err}");
        drop(first);
        ServerLock::acquire(&db, "pid 43").expect("free again after the first is dropped");
    }
}
