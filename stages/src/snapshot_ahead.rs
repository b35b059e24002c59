//! The working tree's snapshot taken ahead, from the session's start, for the
//! preflight's clean-tree check and the run's first agent attempt
//! (docs/evidence.md, "What each agent attempt records"; docs/performance.md).
//!
//! An attempt's before-snapshot is the state its agent starts from. A snapshot
//! taken earlier is that state as long as nothing of the run could have changed
//! the tree since: no process started and nothing written by specbridge itself
//! (a document, the run store's line in `.git/info/exclude` that a repository's
//! first run adds), which [`TreeEpoch`] tells. So it is used by the first agent
//! attempt to claim it, and only while the epoch is the one it began at;
//! otherwise the attempt takes its own. What the user changes meanwhile is found
//! either way, as it is in the milliseconds between any snapshot and the spawn.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use specbridge_engine::evidence::{GitSnapshot, TreeEpoch};

use crate::working_tree::{snapshot_on_thread, Taking};

/// At most one snapshot, for the preflight and the first agent attempt that
/// claims it.
#[derive(Debug, Default)]
pub struct SnapshotAhead {
    inner: Mutex<Option<Ahead>>,
}

#[derive(Debug)]
struct Ahead {
    /// Before the snapshot began.
    epoch: TreeEpoch,
    /// Whether an agent attempt may claim it, or only the preflight peek.
    claimable: bool,
    /// Being taken, or taken; `None` where taking it failed (whoever needs
    /// one takes its own, and reports what it meets).
    taking: Option<Taking>,
}

impl SnapshotAhead {
    /// Starts taking the snapshot of `root` on a thread; none where no thread can
    /// be had (whoever needs one then takes its own). Unless `claimable`, only
    /// the preflight may use it ([`SnapshotAhead::peek`]).
    pub fn start(root: &Path, claimable: bool) -> SnapshotAhead {
        let epoch = TreeEpoch::now();
        let thread = snapshot_on_thread(root, "specbridge-ahead");
        SnapshotAhead {
            inner: Mutex::new(thread.map(|t| Ahead {
                epoch,
                claimable,
                taking: Some(Taking::Thread(t)),
            })),
        }
    }

    /// The snapshot, waited for and left in place: what the preflight judges a
    /// clean start from. `None` where there is none or taking it failed.
    pub(crate) fn peek(&self) -> Option<GitSnapshot> {
        let mut inner = self.lock();
        let ahead = inner.as_mut()?;
        ahead.wait().cloned()
    }

    /// The snapshot, perhaps still being taken, to the first caller, while it
    /// is claimable and the tree's epoch is the one it began at; `None`
    /// otherwise, and to every later caller. Every agent attempt claims it
    /// before its own snapshot, used or not. Not waited for: the claim holds
    /// from the moment it is made (an agent spawned after it has not acted
    /// before its prompt), whenever the snapshot ends.
    pub(crate) fn claim(&self) -> Option<Taking> {
        let ahead = self.lock().take()?;
        // A thread still running finishes alone; its snapshot is of no use.
        ahead.still_the_tree().then_some(ahead.taking).flatten()
    }

    fn lock(&self) -> MutexGuard<'_, Option<Ahead>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Ahead {
    /// Claimable, and nothing of the run could have changed the tree since it
    /// began.
    fn still_the_tree(&self) -> bool {
        self.claimable && self.epoch == TreeEpoch::now()
    }

    /// The snapshot, waited for; `None` where taking it failed.
    fn wait(&mut self) -> Option<&GitSnapshot> {
        self.taking = match self.taking.take() {
            Some(Taking::Thread(thread)) => {
                thread.join().ok().and_then(Result::ok).map(Taking::Taken)
            }
            done => done,
        };
        match &self.taking {
            Some(Taking::Taken(taken)) => Some(taken),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::working_tree::tests::committed_repo;

    #[test]
    fn the_first_claim_gets_the_snapshot_and_later_ones_nothing() {
        let repo = committed_repo();
        std::fs::write(repo.path().join("dirty"), "x\n").unwrap();
        let ahead = SnapshotAhead::start(repo.path(), true);
        // Other tests of this process start processes; a claim is answered only
        // while the epoch is the one the snapshot began at.
        let before = TreeEpoch::now();
        ahead.lock().as_mut().unwrap().epoch = before;
        let claimed = ahead.claim().map(|t| t.wait(repo.path()).unwrap());
        if TreeEpoch::now() == before {
            let snap = claimed.expect("nothing was spawned or written meanwhile");
            assert!(snap.entries.contains_key("dirty"), "{:?}", snap.entries);
        }
        assert!(ahead.claim().is_none());
        assert!(SnapshotAhead::default().claim().is_none());
        assert!(SnapshotAhead::default().peek().is_none());
    }

    #[test]
    fn a_process_started_or_a_write_since_the_snapshot_began_voids_it() {
        let repo = committed_repo();
        let stale = SnapshotAhead::start(repo.path(), true);
        stale.lock().as_mut().unwrap().epoch = TreeEpoch::never();
        assert!(
            stale.peek().is_some(),
            "the preflight may still judge from it"
        );
        assert!(stale.claim().is_none(), "an epoch that moved voids it");
    }

    #[test]
    fn a_snapshot_for_the_preflight_alone_is_never_claimed() {
        let repo = committed_repo();
        let ahead = SnapshotAhead::start(repo.path(), false);
        assert!(ahead.peek().is_some());
        ahead.lock().as_mut().unwrap().epoch = TreeEpoch::now();
        assert!(ahead.claim().is_none());
    }

    #[test]
    fn the_preflight_peeks_and_the_first_attempt_still_claims() {
        let repo = committed_repo();
        let ahead = SnapshotAhead::start(repo.path(), true);
        let peeked = ahead.peek().expect("taken");
        assert_eq!(ahead.peek().as_ref(), Some(&peeked));
        // Other tests of this process start processes; a claim is answered only
        // while the count is the one the snapshot began with.
        let before = TreeEpoch::now();
        ahead.lock().as_mut().unwrap().epoch = before;
        let claimed = ahead.claim().map(|t| t.wait(repo.path()).unwrap());
        if TreeEpoch::now() == before {
            assert_eq!(claimed, Some(peeked));
        }
        assert!(
            ahead.peek().is_none() && ahead.claim().is_none(),
            "claimed once"
        );
        let outside = tempfile::tempdir().unwrap();
        assert!(
            SnapshotAhead::start(outside.path(), true).peek().is_none(),
            "no repository: nothing taken, the caller takes its own"
        );
    }
}
