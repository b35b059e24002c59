//! Taking an exclusive flock that a dead holder may still hold for a moment.
//!
//! A flock belongs to an open file description, and `fork` copies the descriptor
//! table: a child forked by a specbridge process holds every lock its parent
//! holds until its `exec` closes them (they are close-on-exec). When specbridge
//! dies (a crash, a kill) while one of its threads has forked a `git` that has
//! not reached `exec` yet, that child holds the run's lock and the working tree's
//! lock after its parent is gone. On a loaded machine that lasts milliseconds to
//! tens of milliseconds: a `resume` started at once was refused with "in use by
//! another specbridge process" when no specbridge was running. A real holder holds
//! the lock for as long as its run lasts, so waiting a moment before refusing
//! tells the two apart at the cost of a refusal coming [`GRACE`] later.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a held lock is tried again before it counts as held.
pub(super) const GRACE: Duration = Duration::from_secs(1);

/// Whether the lock was taken, or is held by someone else after [`GRACE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flock {
    Taken,
    Held,
}

/// The files (device, inode) whose lock a [`HeldHere`] of this process holds.
static HELD_HERE: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// Whether this process holds a run's or the working tree's lock on the file
/// with this device and inode. Such a file is never "held by another process",
/// wherever an agent it started linked it. While it is held its inode stays in
/// use, so no other file can have it meanwhile.
pub(super) fn held_here(dev: u64, ino: u64) -> bool {
    HELD_HERE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&(dev, ino))
}

/// Marks a lock this process took (with [`lock_exclusive`]) as its own until
/// dropped: kept by the run's and the working tree's lock beside their file.
#[derive(Debug)]
pub(super) struct HeldHere(Option<(u64, u64)>);

impl HeldHere {
    pub(super) fn new(file: &File) -> HeldHere {
        let key = file.metadata().ok().map(|m| (m.dev(), m.ino()));
        if let Some(key) = key {
            HELD_HERE
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(key);
        }
        HeldHere(key)
    }
}

impl Drop for HeldHere {
    fn drop(&mut self) {
        if let Some(key) = self.0 {
            let mut held = HELD_HERE.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(at) = held.iter().position(|k| *k == key) {
                held.swap_remove(at);
            }
        }
    }
}

/// Take an exclusive flock on `file`, trying again for up to [`GRACE`] while
/// another descriptor holds it.
pub(super) fn lock_exclusive(file: &File) -> std::io::Result<Flock> {
    flock_within(file, libc::LOCK_EX, GRACE)
}

/// How long a probe of another process's lock (`lock::held_by_another`) tries
/// again: a lock let go by then (a crashed run's child before its `exec`) had
/// no holder, and a run's holder holds it for as long as the run lasts.
pub(super) const PROBE_GRACE: Duration = Duration::from_millis(2);

/// Take a flock of kind `op` (`LOCK_EX`, `LOCK_SH`) on `file`, trying again
/// for up to `grace` while another descriptor holds one it waits for.
pub(super) fn flock_within(
    file: &File,
    op: libc::c_int,
    grace: Duration,
) -> std::io::Result<Flock> {
    let deadline = Instant::now() + grace;
    let mut pause = Duration::from_millis(1);
    loop {
        // SAFETY: flock on a descriptor the caller owns; no memory is shared.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(Flock::Taken);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(e);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(Flock::Held);
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &std::path::Path) -> File {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap()
    }

    /// A holder that goes away within the grace, as a forked child reaching exec.
    #[test]
    fn a_lock_let_go_within_the_grace_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let file = open(&path);
        let mut holder = crate::store::lock::held_by_another_process(&path, "0.2");
        assert_eq!(lock_exclusive(&file).unwrap(), Flock::Taken);
        holder.wait().unwrap();
    }

    #[test]
    fn a_lock_held_past_the_grace_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let first = open(&path);
        assert_eq!(lock_exclusive(&first).unwrap(), Flock::Taken);
        let started = Instant::now();
        assert_eq!(lock_exclusive(&open(&path)).unwrap(), Flock::Held);
        assert!(started.elapsed() >= GRACE, "refused before the grace ended");
        drop(first);
        assert_eq!(lock_exclusive(&open(&path)).unwrap(), Flock::Taken);
    }
}
