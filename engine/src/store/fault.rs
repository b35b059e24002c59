//! When a run's records can no longer be written: its folder vanished (deleted
//! while the run went on), or a write failed (a full disk, an I/O error).
//!
//! The first such failure stops every later write of the run. The records then
//! stay exactly what a crash at that write would have left — which resume
//! continues, as the crash sweep shows (docs/testing.md) — and never a record
//! after a missing one, nor an event after a torn line. The scheduler asks
//! [`Guard::failure`] and ends the run (docs/resume.md, "When the records cannot
//! be written").
//!
//! Also the test hooks that inject a crash or a failed write at the N-th store
//! write (docs/testing.md).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use super::run::StoreError;

/// Why a run's records stopped being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFailure {
    /// What failed, one line naming the file or folder.
    pub message: String,
    /// The run folder itself is gone: there is nothing left to resume.
    pub vanished: bool,
    /// The failure was an event append, which may have left a torn last line:
    /// nothing more may be appended.
    pub in_event_log: bool,
}

/// The run folder as it was created or opened, and the first failure.
#[derive(Debug)]
pub(super) struct Guard {
    dir: PathBuf,
    /// The folder, held open: while it is held its inode cannot be given to a
    /// folder made again under the same name, so the name still leading to
    /// `identity` means it is the same folder.
    _held: Option<std::fs::File>,
    /// The held folder's device and inode, taken once.
    identity: Option<(u64, u64)>,
    failure: Mutex<Option<StoreFailure>>,
}

impl Guard {
    pub(super) fn new(dir: &Path) -> Self {
        let held = std::fs::File::open(dir).ok();
        let identity = held
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| (m.dev(), m.ino()));
        Guard {
            dir: dir.to_path_buf(),
            _held: held,
            identity,
            failure: Mutex::new(None),
        }
    }

    /// Whether a write may go ahead: not after a failure, and only while the run
    /// folder is still the one this run created. Its cost is one `stat`.
    pub(super) fn check(&self, rel: &str) -> Result<(), StoreError> {
        self.stopped(rel)?;
        self.check_folder()
    }

    /// Refuses a write of `rel` once the records have stopped at a failure.
    pub(super) fn stopped(&self, rel: &str) -> Result<(), StoreError> {
        match self.failure() {
            Some(first) => Err(StoreError::Stopped {
                path: rel.to_string(),
                first: first.message,
            }),
            None => Ok(()),
        }
    }

    /// Only whether the run folder is still the one this run created: one
    /// `stat` of its name. A folder deleted has no name; one deleted and made
    /// again, or another moved in its place, has another inode while this one
    /// is held.
    pub(super) fn check_folder(&self) -> Result<(), StoreError> {
        if self.identity.is_none() || identity(&self.dir) != self.identity {
            let err = StoreError::FolderVanished {
                path: self.dir.clone(),
            };
            self.fail(&err, false);
            return Err(err);
        }
        Ok(())
    }

    /// Remember the first failure; later ones are its consequences.
    pub(super) fn fail(&self, err: &StoreError, in_event_log: bool) {
        let mut failure = self.failure.lock().expect("store failure lock");
        if failure.is_some() || matches!(err, StoreError::Stopped { .. }) {
            return;
        }
        *failure = Some(StoreFailure {
            // With every cause: the store's messages do not embed their source.
            message: crate::error_chain(err),
            vanished: matches!(err, StoreError::FolderVanished { .. }),
            in_event_log,
        });
    }

    pub(super) fn failure(&self) -> Option<StoreFailure> {
        self.failure.lock().expect("store failure lock").clone()
    }

    /// Check the folder now (the scheduler does while agents run, so that a
    /// deleted run folder ends the run without waiting for its next write).
    pub(super) fn watch(&self) -> Option<StoreFailure> {
        if self.failure().is_none() {
            let _vanished_is_recorded = self.check("");
        }
        self.failure()
    }
}

fn identity(dir: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(dir).ok().map(|m| (m.dev(), m.ino()))
}

fn hook(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Test hook: `SPECBRIDGE_TEST_ABORT_AFTER_WRITES=N` aborts the process (SIGABRT,
/// no cleanup, as a crash) right after the N-th store write of this process — an
/// event appended or a record file renamed into place. Used by the crash-injection
/// tests (docs/testing.md); unset, it costs one relaxed atomic add per write.
pub(super) fn crash_point() {
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let limit = LIMIT.get_or_init(|| hook("SPECBRIDGE_TEST_ABORT_AFTER_WRITES"));
    if let Some(limit) = limit {
        if WRITES.fetch_add(1, Ordering::Relaxed) + 1 == *limit {
            std::process::abort();
        }
    }
}

/// Test hook: `SPECBRIDGE_TEST_FAIL_WRITES_AFTER=N` makes every store write after
/// the N-th of this process (an event append, a record file, a log opened) fail
/// with ENOSPC, as a disk that filled up and stays full would; `N:K` fails only the
/// K writes after the N-th, as a disk on which space was freed again. Used where
/// the test cannot mount a small tmpfs (docs/testing.md).
pub(super) fn injected_failure() -> std::io::Result<()> {
    static LIMIT: OnceLock<Option<(u64, u64)>> = OnceLock::new();
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let limit = LIMIT.get_or_init(|| {
        let v = std::env::var("SPECBRIDGE_TEST_FAIL_WRITES_AFTER").ok()?;
        match v.split_once(':') {
            Some((n, k)) => Some((n.parse().ok()?, k.parse().ok()?)),
            None => Some((v.parse().ok()?, u64::MAX)),
        }
    });
    let Some((after, count)) = *limit else {
        return Ok(());
    };
    let n = WRITES.fetch_add(1, Ordering::Relaxed) + 1;
    if n > after && n - after <= count {
        return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
    }
    Ok(())
}

/// Test hook: `SPECBRIDGE_TEST_SYNC_DELAY_MS=N` makes every sync of a record,
/// a folder or the event log wait N ms first, as a disk whose flushes take that
/// long would (docs/testing.md); unset, it costs one load of a `OnceLock`.
pub(super) fn slow_disk() {
    static DELAY: OnceLock<Option<u64>> = OnceLock::new();
    if let Some(ms) = DELAY.get_or_init(|| hook("SPECBRIDGE_TEST_SYNC_DELAY_MS")) {
        std::thread::sleep(std::time::Duration::from_millis(*ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run folder made in a new temporary folder (kept while it lives).
    fn run_folder() -> (tempfile::TempDir, PathBuf) {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        (base, dir)
    }

    #[test]
    fn a_folder_deleted_or_moved_aside_for_another_is_not_the_run_s() {
        let (base, dir) = run_folder();
        let deleted = Guard::new(&dir);
        std::fs::remove_dir(&dir).unwrap();
        assert!(deleted.check("a.json").is_err());

        std::fs::create_dir(&dir).unwrap();
        let moved = Guard::new(&dir);
        moved.check("a.json").unwrap();
        std::fs::rename(&dir, base.path().join("aside")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        let err = moved.check("a.json").unwrap_err();
        assert!(matches!(err, StoreError::FolderVanished { .. }), "{err}");

        // Moved away and back, it is the same folder.
        let back = Guard::new(&dir);
        std::fs::rename(&dir, base.path().join("away")).unwrap();
        std::fs::rename(base.path().join("away"), &dir).unwrap();
        back.check("a.json").unwrap();
    }

    #[test]
    fn a_folder_deleted_and_made_again_is_not_the_run_s() {
        let (_base, dir) = run_folder();
        let guard = Guard::new(&dir);
        guard.check("a.json").unwrap();
        std::fs::remove_dir(&dir).unwrap();
        std::fs::create_dir(&dir).unwrap();
        let err = guard.check("a.json").unwrap_err();
        assert!(matches!(err, StoreError::FolderVanished { .. }), "{err}");
        let failure = guard.failure().unwrap();
        assert!(failure.vanished);
        assert!(failure.message.contains("no longer exists"), "{failure:?}");
        // Every later write is refused with the first failure, naming its own file.
        let later = guard.check("b.json").unwrap_err().to_string();
        assert!(
            later.contains("b.json") && later.contains("no longer exists"),
            "{later}"
        );
    }
}
