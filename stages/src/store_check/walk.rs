//! One walk of `.specbridge/`: every file's identity and every folder's listing,
//! and when an earlier walk's listing of a folder may stand in for listing it
//! again.
//!
//! Listing a folder costs five system calls (open, stat, two reads of its
//! entries, close) where reading its change time costs one, and a store's earlier
//! runs are mostly folders that never change again. So a walk given an earlier
//! state takes that state's listing of a folder whose device, inode and change
//! time are still the recorded ones, provided the recorded change time is before
//! the store's clock reading taken before the earlier walk began
//! ([`Folder::still_holds`]). Adding, removing or renaming an entry sets the
//! folder's change time to now, which no one but the kernel sets: a change after
//! the earlier walk began shows as a new change time, and one made in the same
//! clock tick as the recorded time (a coarse clock cannot tell them apart) is
//! ruled out by the strict comparison. Every file is still asked for its
//! identity: only the names are taken.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;

use specbridge_engine::store::layout;
use specbridge_engine::time::{ctime_ns, mtime_ns};

use super::state::{tree_lock, RunStoreState};

/// A folder as a walk found it: its device, inode and change time (ns), read
/// once its listing was complete, and the entries the walk recorded (`None`
/// where it could not list them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Folder {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) ctime: i128,
    pub(super) children: Option<Arc<[Child]>>,
}

/// An entry a walk recorded: a file (or symlink, never followed) or a folder.
/// The own run folder and `worktree.lock` are never recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Child {
    pub(super) name: Box<OsStr>,
    pub(super) dir: bool,
}

impl Folder {
    /// The folder at `dir` read now, with `children`. A folder that cannot be
    /// read back is gone: its change time is the latest there is.
    fn read(dir: &Path, children: Option<Arc<[Child]>>) -> Folder {
        match std::fs::symlink_metadata(dir) {
            Ok(meta) => Folder {
                dev: meta.dev(),
                ino: meta.ino(),
                ctime: ctime_ns(&meta),
                children,
            },
            Err(_) => Folder {
                dev: 0,
                ino: 0,
                ctime: i128::MAX,
                children: None,
            },
        }
    }

    /// Whether this folder, recorded by a walk that began after the store's
    /// clock read `clock`, still has the entries it had, judged by `now` (the
    /// folder at the same path read now).
    fn still_holds(&self, clock: i128, now: &std::fs::Metadata) -> bool {
        self.children.is_some()
            && self.ctime < clock
            && now.is_dir()
            && (now.dev(), now.ino(), ctime_ns(now)) == (self.dev, self.ino, self.ctime)
    }
}

/// An entry of a folder being walked: from its listing now, or from an earlier
/// walk's listing that still holds.
enum Entry<'k> {
    Listed(std::fs::DirEntry),
    Known(&'k Child),
}

impl Entry<'_> {
    fn name(&self) -> Cow<'_, OsStr> {
        match self {
            Entry::Listed(entry) => Cow::Owned(entry.file_name()),
            Entry::Known(child) => Cow::Borrowed(&child.name),
        }
    }
}

/// How the store is walked: which folder is the run's own (device and inode),
/// and the earlier state whose listings may be taken (walked with the same own
/// folder, so that it never lists it).
pub(super) struct Walker<'k> {
    pub(super) own: Option<(u64, u64)>,
    pub(super) known: Option<&'k RunStoreState>,
}

/// Run folders a walking thread takes at least: fewer are not worth a thread.
pub(super) const RUNS_A_THREAD: usize = 32;

impl<'k> Walker<'k> {
    /// Adds the files and folders under `dir` (whose path relative to the store
    /// is `rel`) to `out`, and `dir` itself.
    pub(super) fn walk(&self, dir: &Path, rel: &mut String, out: &mut RunStoreState) {
        let folder = match self.still_listed(dir, rel) {
            Some(known) => {
                let children = known.children.as_deref().unwrap_or_default();
                let entries: Vec<Entry<'k>> = children.iter().map(Entry::Known).collect();
                self.entries(&entries, dir, rel, out);
                known.clone()
            }
            None => match std::fs::read_dir(dir) {
                Ok(listing) => {
                    let entries: Vec<Entry<'k>> = listing.flatten().map(Entry::Listed).collect();
                    let children = self.entries(&entries, dir, rel, out);
                    // Read after the listing: an entry removed before it shows.
                    Folder::read(dir, Some(children.into()))
                }
                Err(_) => Folder::read(dir, None),
            },
        };
        if rel.is_empty() {
            out.root = Some(folder);
        } else {
            out.dirs.insert(rel.clone(), folder);
        }
    }

    /// The earlier walk's record of the folder at `rel`, if its listing still
    /// holds.
    fn still_listed(&self, dir: &Path, rel: &str) -> Option<&'k Folder> {
        let known = self.known?;
        let clock = known.clock?;
        let folder = match rel {
            "" => known.root.as_ref(),
            rel => known.dirs.get(rel),
        }?;
        let now = std::fs::symlink_metadata(dir).ok()?;
        folder.still_holds(clock, &now).then_some(folder)
    }

    /// Adds `entries` of the folder `dir` and returns those recorded. The run
    /// folders are shared out among up to one thread a core: a long history is
    /// most of the store, and each of its files is a `statx` that waits in the
    /// kernel, which the other core can do beside it.
    fn entries(
        &self,
        entries: &[Entry<'k>],
        dir: &Path,
        rel: &mut String,
        out: &mut RunStoreState,
    ) -> Vec<Child> {
        // Asked only here: `available_parallelism` reads the cgroup's files.
        let threads = match rel == layout::RUNS_DIR && entries.len() >= 2 * RUNS_A_THREAD {
            true => std::thread::available_parallelism()
                .map_or(1, std::num::NonZero::get)
                .min(4)
                .min(entries.len() / RUNS_A_THREAD),
            false => 1,
        };
        if threads == 1 {
            return entries
                .iter()
                .filter_map(|entry| self.entry(entry, dir, rel, out))
                .collect();
        }
        let base = rel.clone();
        let parts: Vec<(RunStoreState, Vec<Child>)> = std::thread::scope(|scope| {
            let walks: Vec<_> = entries
                .chunks(entries.len().div_ceil(threads))
                .map(|share| {
                    let mut rel = base.clone();
                    scope.spawn(move || {
                        let mut part = RunStoreState::default();
                        let children = share
                            .iter()
                            .filter_map(|entry| self.entry(entry, dir, &mut rel, &mut part))
                            .collect();
                        (part, children)
                    })
                })
                .collect();
            walks
                .into_iter()
                .map(|walk| {
                    walk.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        let mut children = Vec::with_capacity(entries.len());
        for (part, recorded) in parts {
            out.files.extend(part.files);
            out.dirs.extend(part.dirs);
            children.extend(recorded);
        }
        children
    }

    /// Adds one entry of the folder `dir` at `rel` (and what is under it), and
    /// returns it if it was recorded.
    fn entry(
        &self,
        entry: &Entry<'_>,
        dir: &Path,
        rel: &mut String,
        out: &mut RunStoreState,
    ) -> Option<Child> {
        let name = entry.name();
        let len = rel.len();
        if !rel.is_empty() {
            rel.push('/');
        }
        rel.push_str(&name.to_string_lossy());
        let path = dir.join(&name);
        // A symlink is recorded as the link it is, never followed.
        let dir_now = match entry {
            Entry::Listed(listed) => match listed.file_type() {
                Ok(t) if t.is_dir() && self.is_own(listed) => None,
                Ok(t) if t.is_dir() => Some(true),
                Ok(_) if tree_lock() == Some(rel.as_str()) => None,
                // `DirEntry::metadata` is a `statx` relative to the listed
                // folder that does not follow a symlink.
                Ok(_) => listed.metadata().ok().map(|meta| {
                    self.file(&meta, rel, out);
                    false
                }),
                Err(_) => None,
            },
            Entry::Known(child) if child.dir => Some(true),
            // The folder's change time says the entry is the one listed; a folder
            // in its place is walked all the same.
            Entry::Known(_) => std::fs::symlink_metadata(&path).ok().map(|meta| {
                if !meta.is_dir() {
                    self.file(&meta, rel, out);
                }
                meta.is_dir()
            }),
        };
        if dir_now == Some(true) {
            self.walk(&path, rel, out);
        }
        rel.truncate(len);
        dir_now.map(|dir| Child {
            name: name.into_owned().into_boxed_os_str(),
            dir,
        })
    }

    /// Records the file at `rel`.
    fn file(&self, meta: &std::fs::Metadata, rel: &str, out: &mut RunStoreState) {
        let id = (meta.len(), mtime_ns(meta), ctime_ns(meta), meta.mode());
        out.files.insert(rel.to_string(), id);
    }

    /// Whether a listed folder is the run's own: only one listed with the own
    /// folder's inode is asked for its device.
    fn is_own(&self, listed: &std::fs::DirEntry) -> bool {
        self.own.is_some_and(|(dev, ino)| {
            listed.ino() == ino
                && listed
                    .metadata()
                    .is_ok_and(|m| (m.dev(), m.ino()) == (dev, ino))
        })
    }
}
