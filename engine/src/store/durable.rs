//! Group commit for the event log: lines are written at once (so a process that
//! dies keeps every line it wrote, in order) and made durable by `fdatasync` only
//! where durability is needed — before a record is renamed into place (its
//! `record-intent` must be on disk first) and when the run handle is dropped.
//! Concurrent callers share one `fdatasync`: a caller whose line was written
//! before a sync started waits for that sync instead of starting its own.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

#[derive(Debug)]
pub(in crate::store) struct GroupCommit {
    file: File,
    /// The seq of the last line whose `write` returned.
    written: AtomicU64,
    state: Mutex<SyncState>,
    synced: Condvar,
    /// `fdatasync` calls made, for the tests that count them.
    syncs: AtomicU64,
}

#[derive(Debug, Default)]
struct SyncState {
    /// Every line up to this seq is on disk.
    durable: u64,
    /// A sync is in flight; its caller will wake the others.
    syncing: bool,
}

impl GroupCommit {
    /// Over a second descriptor of the log, so that a sync never needs the log's
    /// lock: appenders go on while it runs, and the next sync covers them.
    pub(crate) fn new(file: File, written: u64) -> Self {
        GroupCommit {
            file,
            written: AtomicU64::new(written),
            state: Mutex::new(SyncState {
                durable: written,
                syncing: false,
            }),
            synced: Condvar::new(),
            syncs: AtomicU64::new(0),
        }
    }

    /// Called by the appender after the line's `write` returned.
    pub(crate) fn wrote(&self, seq: u64) {
        self.written.fetch_max(seq, Ordering::Release);
    }

    /// Returns once every line up to `seq` (already written) is on disk.
    pub(crate) fn sync_through(&self, seq: u64) -> std::io::Result<()> {
        let mut state = self.state.lock().expect("group commit lock");
        loop {
            if state.durable >= seq {
                return Ok(());
            }
            if state.syncing {
                state = self.synced.wait(state).expect("group commit lock");
                continue;
            }
            state.syncing = true;
            drop(state);
            // Read before the sync: every line up to here was written, so this
            // sync covers it; lines written while it runs wait for the next.
            let target = self.written.load(Ordering::Acquire);
            self.syncs.fetch_add(1, Ordering::Relaxed);
            super::fault::slow_disk();
            let result = self.file.sync_data();
            state = self.state.lock().expect("group commit lock");
            state.syncing = false;
            if result.is_ok() {
                state.durable = state.durable.max(target);
            }
            self.synced.notify_all();
            result?;
        }
    }

    #[cfg(test)]
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// (durable seq, syncs made).
    #[cfg(test)]
    pub(crate) fn state_for_test(&self) -> (u64, u64) {
        (self.state.lock().unwrap().durable, self.syncs())
    }
}

/// Runs a write that waits for the disk. On a multi-thread runtime's worker the
/// worker is handed to the other tasks meanwhile, so running stages' output and
/// timers do not queue behind an fsync; elsewhere it simply runs.
pub(crate) fn off_the_worker<T>(write: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(write)
        }
        _ => write(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_covered_line_costs_no_sync_and_concurrent_callers_share_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("log")).unwrap();
        let gc = Arc::new(GroupCommit::new(file, 0));
        gc.sync_through(0).unwrap();
        assert_eq!(gc.syncs(), 0, "nothing written, nothing to sync");
        gc.wrote(1);
        gc.wrote(2);
        gc.sync_through(1).unwrap();
        gc.sync_through(2).unwrap();
        assert_eq!(gc.syncs(), 1, "the first sync covered both lines");
        gc.wrote(3);
        gc.sync_through(3).unwrap();
        assert_eq!(gc.syncs(), 2);

        // Threads that each write a line and wait for it: every wait returns
        // with its line covered, and no sync is left in flight.
        let mut handles = Vec::new();
        for i in 0..8u64 {
            let gc = gc.clone();
            handles.push(std::thread::spawn(move || {
                gc.wrote(4 + i);
                gc.sync_through(4 + i).unwrap();
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(gc.state.lock().unwrap().durable, 11);
        assert!(gc.syncs() <= 2 + 8);
        assert!(!gc.state.lock().unwrap().syncing);
    }
}
