//! The stat data of a run's records, asked folder by folder.
//!
//! A check asks every record of the run for its stat data. Asked by its full
//! path, each record walked the path from the root again, component by
//! component: in a fan-out of 400 tasks that walk was a quarter of the run's
//! time (docs/performance-log.md). Here a check opens each folder once
//! (`O_PATH`, as the records come in path order a folder's records come
//! together) and asks each record by its name in it. Symlinks are followed,
//! in the folders and the name alike, as a stat by path follows them.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{open, openat, AtFlags, OFlag};
use nix::sys::stat::{fstatat, FileStat, Mode};

pub(super) struct Folders {
    /// The run folder; `None` where it cannot be opened (every record is
    /// then read by its path).
    run: Option<OwnedFd>,
    /// The folder below the run folder asked last, relative to it, and its
    /// descriptor (`None` where it cannot be opened).
    last: Option<(String, Option<OwnedFd>)>,
}

const DIR: OFlag = OFlag::O_PATH
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_CLOEXEC);

impl Folders {
    pub(super) fn new(run_dir: &Path) -> Folders {
        let run = open(run_dir, DIR, Mode::empty())
            .ok()
            // SAFETY: `fd` was just returned by open and is owned by nothing else.
            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        Folders { run, last: None }
    }

    /// The stat data of the record at `rel` (relative to the run folder);
    /// `None` where it cannot be had, for the caller to read the file by its
    /// path and say what it finds.
    pub(super) fn stat(&mut self, rel: &str) -> Option<FileStat> {
        let run = self.run.as_ref()?.as_raw_fd();
        let Some((folder, name)) = rel.rsplit_once('/') else {
            return fstatat(Some(run), rel, AtFlags::empty()).ok();
        };
        if self.last.as_ref().map(|(f, _)| f.as_str()) != Some(folder) {
            let fd = openat(Some(run), folder, DIR, Mode::empty())
                .ok()
                // SAFETY: `fd` was just returned by openat and is owned by nothing else.
                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
            self.last = Some((folder.to_owned(), fd));
        }
        let dir = self.last.as_ref()?.1.as_ref()?.as_raw_fd();
        fstatat(Some(dir), name, AtFlags::empty()).ok()
    }
}
