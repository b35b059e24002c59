//! Whether this process may have changed the working tree between two moments:
//! through a child (every one is started by the supervisor, which counts them)
//! or by itself (a generate stage's document, the run store's line in
//! `.git/info/exclude`, each counted where it is written). A snapshot taken at
//! one [`TreeEpoch`] shows the tree as the run left it at a later one only when
//! the two are equal (`stages/src/snapshot_ahead.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Writes this process made into the working tree or the repository's control
/// files.
static OWN_WRITES: AtomicU64 = AtomicU64::new(0);

/// A moment in what this process did that could change the working tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeEpoch {
    spawned: u64,
    written: u64,
}

impl TreeEpoch {
    /// Now. Read before a snapshot begins, so that anything started while it is
    /// taken makes a later epoch differ.
    pub fn now() -> TreeEpoch {
        TreeEpoch {
            spawned: crate::supervisor::spawned(),
            written: OWN_WRITES.load(Ordering::SeqCst),
        }
    }

    /// An epoch no moment of this process will ever be (for tests).
    #[doc(hidden)]
    pub fn never() -> TreeEpoch {
        TreeEpoch {
            spawned: u64::MAX,
            written: u64::MAX,
        }
    }
}

/// Called before this process writes into the working tree or `.git` itself.
pub(crate) fn note_own_write() {
    OWN_WRITES.fetch_add(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_own_write_moves_the_epoch() {
        let before = TreeEpoch::now();
        note_own_write();
        assert_ne!(TreeEpoch::now(), before);
        assert_ne!(TreeEpoch::now(), TreeEpoch::never());
    }
}
