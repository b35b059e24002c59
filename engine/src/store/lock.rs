//! The OS lock a process holds on a run while it works on it. The kernel drops a
//! flock when its holder dies, so a crashed run can always be taken again.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Why a run lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("run {run} is in use by another specbridge process (lock {path})")]
    InUse { run: String, path: PathBuf },
    #[error("failed to lock run {run}")]
    Io {
        run: String,
        #[source]
        source: std::io::Error,
    },
}

/// An exclusive lock on one run folder, released on drop.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    path: PathBuf,
}

impl RunLock {
    /// Take the lock without waiting.
    pub fn acquire(run_dir: &Path, run_id: &str) -> Result<RunLock, LockError> {
        let path = run_dir.join(crate::store::layout::LOCK);
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .mode(0o600)
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| LockError::Io {
                run: run_id.to_string(),
                source,
            })?;
        // SAFETY: flock on a file descriptor we own; no memory is shared.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(LockError::InUse {
                    run: run_id.to_string(),
                    path,
                });
            }
            return Err(LockError::Io {
                run: run_id.to_string(),
                source: e,
            });
        }
        Ok(RunLock { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path(), "r1").unwrap();
        let err = RunLock::acquire(dir.path(), "r1").unwrap_err();
        assert!(err.to_string().contains("run r1 is in use"), "{err}");
        drop(first);
        RunLock::acquire(dir.path(), "r1").unwrap();
    }
}
