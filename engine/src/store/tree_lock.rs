//! One writer of a repository's working tree at a time (docs/stage-kinds.md): every run and
//! resume that has execute stages holds an exclusive flock on
//! `.specbridge/worktree.lock` for as long as it runs. A second one is refused
//! (after a moment's grace, `store/flock.rs`), with the run id and pid of the
//! holder, before it creates or changes anything: two runs changing one tree
//! would attribute each other's changes.
//!
//! The kernel drops a flock when its holder dies, so a crashed run never leaves the
//! repository locked; the holder written into the file is only for the message.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::flock::{lock_exclusive, Flock, HeldHere};

use serde::{Deserialize, Serialize};

/// The lock file, relative to the repository root.
pub const TREE_LOCK_FILE: &str = ".specbridge/worktree.lock";

#[derive(Debug, thiserror::Error)]
pub enum TreeLockError {
    #[error("the working tree of {root} is in use by {holder}; execute stages of two runs would attribute each other's changes, so this one does not start (wait for it to end, or stop it)")]
    InUse { root: String, holder: String },
    #[error("failed to lock the working tree ({path})")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Who holds the lock, as written into the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeLockHolder {
    pub run_id: Option<String>,
    pub pid: u32,
    /// `run` or `resume`.
    pub command: String,
    pub since: String,
}

impl std::fmt::Display for TreeLockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.run_id {
            Some(id) => write!(
                f,
                "run {id} (`specbridge {}`, pid {}, since {})",
                self.command, self.pid, self.since
            ),
            None => write!(
                f,
                "another `specbridge {}` (pid {}, starting since {})",
                self.command, self.pid, self.since
            ),
        }
    }
}

/// The held lock; released on drop (or when the process dies).
#[derive(Debug)]
pub struct TreeLock {
    file: File,
    path: PathBuf,
    holder: TreeLockHolder,
    /// Declared after `file`: this process's own until the file is closed.
    _here: HeldHere,
}

impl TreeLock {
    /// Takes the lock, waiting at most a moment ([`super::flock`]) for a holder
    /// that is going away. `command` is `run` or `resume`; the run id
    /// is added with [`TreeLock::set_run`] once known.
    pub fn acquire(
        root: &Path,
        command: &str,
        run_id: Option<&str>,
    ) -> Result<TreeLock, TreeLockError> {
        let path = root.join(TREE_LOCK_FILE);
        let io = |source| TreeLockError::Io {
            path: path.clone(),
            source,
        };
        // `.specbridge/` is private to the user, like every run folder in it.
        if let Some(dir) = path.parent() {
            crate::store::private::ensure_private_dir(dir).map_err(io)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .mode(0o600)
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        if lock_exclusive(&file).map_err(io)? == Flock::Held {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let holder = serde_json::from_str::<TreeLockHolder>(&text).map_or_else(
                |_| "another specbridge process".to_string(),
                |h| h.to_string(),
            );
            return Err(TreeLockError::InUse {
                root: root.display().to_string(),
                holder,
            });
        }
        let mut lock = TreeLock {
            _here: HeldHere::new(&file),
            file,
            path: path.clone(),
            holder: TreeLockHolder {
                run_id: run_id.map(str::to_owned),
                pid: std::process::id(),
                command: command.to_owned(),
                since: crate::store::now_rfc3339(),
            },
        };
        lock.write_holder().map_err(io)?;
        Ok(lock)
    }

    /// Records the run id for the message others get.
    pub(crate) fn set_run(&mut self, run_id: &str) -> Result<(), TreeLockError> {
        self.holder.run_id = Some(run_id.to_owned());
        self.write_holder().map_err(|source| TreeLockError::Io {
            path: self.path.clone(),
            source,
        })
    }

    fn write_holder(&mut self) -> std::io::Result<()> {
        let text = serde_json::to_string(&self.holder).expect("holder serialises");
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(text.as_bytes())?;
        self.file.sync_data()
    }
}

/// The lock for a run or resume that has execute stages; `None` when it has none
/// (generate and check stages change nothing, and may run beside another run).
pub fn lock_tree_for(
    root: &Path,
    command: &str,
    run_id: Option<&str>,
    has_execute: bool,
) -> Result<Option<TreeLock>, TreeLockError> {
    if !has_execute {
        return Ok(None);
    }
    TreeLock::acquire(root, command, run_id).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_naming_the_first() {
        let root = tempfile::tempdir().unwrap();
        let mut first = TreeLock::acquire(root.path(), "run", None).unwrap();
        first.set_run("0191-first").unwrap();
        let err = TreeLock::acquire(root.path(), "resume", Some("0191-second")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("run 0191-first"), "{text}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        drop(first);
        TreeLock::acquire(root.path(), "run", None).unwrap();
        assert!(lock_tree_for(root.path(), "run", None, false)
            .unwrap()
            .is_none());
    }
}
