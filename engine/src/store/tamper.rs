//! The run's own records, checked after every agent attempt (docs/claude-code-runner.md): every
//! announced file must still have the sha256 it was announced with, and the event
//! log must be exactly what this process appended. An agent that touched them is a
//! safety violation at once, not a later audit finding.
//!
//! The check is made after every attempt of a run that may hold thousands of
//! records, so it carries what it learnt from one call to the next
//! ([`RecordWatch`]) instead of reading the whole run each time, which made a
//! fan-out of N tasks cost N² (docs/performance-log.md):
//!
//! - the log is compared byte for byte, by length and sha256, with what its
//!   writer holds ([`EventLog::content`]); only lines not read before are
//!   parsed, for the records they announce;
//! - a record is hashed again unless its inode, size, modification and change
//!   times are those it had when its content was last found as announced, and
//!   that change time was by then old enough ([`Settle`]). Any write,
//!   truncation, `utimes` or `chmod` of a file sets its change time to the
//!   present, which no unprivileged process can set back, and a file put in
//!   its place is another inode; the settling time keeps a change made within
//!   the clock tick of an earlier one from looking like no change (git's rule
//!   for the stat data in its index, where it is called "racy").

use std::collections::{BTreeMap, HashMap};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::Digest;

use crate::events::RunEvent;
use crate::store::atomic::hash_reader;
use crate::store::events::{verify_chain, EventLog};
use crate::store::layout;
use folders::Folders;

/// How old a record's change time must be before its stat data stands for
/// its content, on a file system whose timestamps may be coarse: more than
/// any file system's timestamp granularity here (2 s for FAT) and than a
/// small clock step.
const SETTLE: Duration = Duration::from_secs(5);

/// The same, for a change time that is not a whole number of milliseconds:
/// its file system keeps finer timestamps than that (ext4, XFS, Btrfs, tmpfs
/// keep nanoseconds), so a change made later is stamped with the kernel's
/// coarse clock, a tick behind at most (10 ms at the slowest, `HZ=100`). Ten
/// ticks leave room for both. A fine file system's time falls on a whole
/// millisecond once in a million; that record waits [`SETTLE`] instead.
const SETTLE_FINE: Duration = Duration::from_millis(100);

/// How old a change time must be before it stands for the content, by the
/// precision the change time shows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settle {
    /// A change time finer than a millisecond.
    fine: Duration,
    /// Any other.
    coarse: Duration,
}

impl Settle {
    /// The same settling time whatever the precision (for tests).
    #[cfg(test)]
    pub(crate) fn always(after: Duration) -> Settle {
        Settle {
            fine: after,
            coarse: after,
        }
    }
}

impl Default for Settle {
    fn default() -> Self {
        Settle {
            fine: SETTLE_FINE,
            coarse: SETTLE,
        }
    }
}

/// One record that is no longer what specbridge wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordChange {
    /// Relative to the run folder.
    pub path: String,
    pub what: String,
}

impl std::fmt::Display for RecordChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the run record `{}` {}", self.path, self.what)
    }
}

/// What the checks of one run handle learnt so far.
#[derive(Debug)]
pub(crate) struct RecordWatch {
    settle: Settle,
    /// Bytes of the log whose lines were read for announcements.
    read_to: u64,
    /// The last announced sha256 of every record.
    announced: BTreeMap<String, String>,
    /// Records found as announced, with their stat data then.
    found: HashMap<String, Found>,
}

#[derive(Debug)]
struct Found {
    sha256: String,
    stamp: Stamp,
}

/// The stat data that changes with a file's content or identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(s: &nix::sys::stat::FileStat) -> Stamp {
        Stamp {
            dev: s.st_dev,
            ino: s.st_ino,
            len: u64::try_from(s.st_size).unwrap_or(u64::MAX),
            mtime: (s.st_mtime, s.st_mtime_nsec),
            ctime: (s.st_ctime, s.st_ctime_nsec),
        }
    }

    /// Whether the last change was long enough before `now` (an instant taken
    /// before this stamp was) for any later change to get a change time of
    /// its own.
    fn settled(&self, now: SystemTime, settle: Settle) -> bool {
        let Ok(now) = now.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let (secs, nanos) = self.ctime;
        let settle = if nanos % 1_000_000 != 0 {
            settle.fine
        } else {
            settle.coarse
        };
        let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) else {
            return false;
        };
        Duration::new(secs, nanos.min(999_999_999)) + settle <= now
    }
}

impl Default for RecordWatch {
    fn default() -> Self {
        RecordWatch::with_settle(Settle::default())
    }
}

impl RecordWatch {
    pub(crate) fn with_settle(settle: Settle) -> Self {
        RecordWatch {
            settle,
            read_to: 0,
            announced: BTreeMap::new(),
            found: HashMap::new(),
        }
    }

    /// Reads the log's lines past `read_to` in `tail` (whole lines only) for
    /// the records they announce.
    fn take_announcements(&mut self, tail: &[u8]) {
        let mut payload = Vec::new();
        let mut used = 0;
        for line in tail.split_inclusive(|&b| b == b'\n') {
            let Some(line) = line.strip_suffix(b"\n") else {
                break;
            };
            used += line.len() + 1;
            if let Some(RunEvent::RecordWritten(r)) =
                crate::events::line::event_of(line, &mut payload)
            {
                self.announced.insert(r.path, r.sha256);
            }
        }
        self.read_to += used as u64;
    }
}

/// Compares the folder with the log. The caller holds the log, so no record is
/// being written meanwhile.
pub(crate) fn changed_records(
    dir: &Path,
    log: &EventLog,
    watch: &mut RecordWatch,
) -> Vec<RecordChange> {
    let mut changes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let announced_now;
    let announced = match read_log(log.path(), watch.read_to, &mut buf) {
        Ok(read) if (read.len, read.sha256) == log.content() => {
            watch.take_announcements(&read.tail);
            &watch.announced
        }
        read => {
            changes.push(log_change(log, read.err()));
            // As the edited file now has them, for this answer only: the run
            // stops at this violation.
            announced_now = announced_in(log.path());
            &announced_now
        }
    };
    let now = SystemTime::now();
    let mut folders = Folders::new(dir);
    for (rel, sha) in announced {
        let found = watch.found.get(rel);
        if let Some(found) = found.filter(|f| f.sha256 == *sha) {
            if folders
                .stat(rel)
                .is_some_and(|s| Stamp::of(&s) == found.stamp)
            {
                continue;
            }
        }
        let what = match hash_file(&dir.join(rel), &mut buf) {
            Ok((now_sha, stamp)) if now_sha == *sha => {
                if stamp.settled(now, watch.settle) {
                    let sha256 = sha.clone();
                    watch.found.insert(rel.clone(), Found { sha256, stamp });
                } else {
                    watch.found.remove(rel);
                }
                continue;
            }
            Ok(_) => "changed after specbridge wrote it".to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                "was deleted after specbridge wrote it".to_string()
            }
            Err(e) => format!("cannot be read: {e}"),
        };
        watch.found.remove(rel);
        changes.push(RecordChange {
            path: rel.clone(),
            what,
        });
    }
    changes
}

/// The log read whole: its length, sha256, and its bytes from `from` on.
struct LogRead {
    len: u64,
    sha256: [u8; 32],
    tail: Vec<u8>,
}

fn read_log(path: &Path, from: u64, buf: &mut [u8]) -> std::io::Result<LogRead> {
    use std::io::Read;
    struct Tee<R> {
        inner: R,
        at: u64,
        from: u64,
        tail: Vec<u8>,
    }
    impl<R: Read> Read for Tee<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            let end = self.at + n as u64;
            if end > self.from {
                let skip = self.from.saturating_sub(self.at) as usize;
                self.tail.extend_from_slice(&buf[skip..n]);
            }
            self.at = end;
            Ok(n)
        }
    }
    let mut tee = Tee {
        inner: std::fs::File::open(path)?,
        at: 0,
        from,
        tail: Vec::new(),
    };
    let (h, len) = hash_reader(&mut tee, buf)?;
    Ok(LogRead {
        len,
        sha256: h.finalize().into(),
        tail: tee.tail,
    })
}

/// How a log that is not what was written differs, in the chain's words.
fn log_change(log: &EventLog, unread: Option<std::io::Error>) -> RecordChange {
    let what = match (unread, verify_chain(log.path())) {
        (Some(e), _) => format!("cannot be read: {e}"),
        (None, Err(e)) => format!("cannot be read: {}", crate::error_chain(&e)),
        (None, Ok(check)) => match check.problems.first() {
            Some(p) => format!("was edited (line {}: {})", p.line, p.message),
            None if check.events != log.last_seq() => format!(
                "was edited: it holds {} events where {} were written",
                check.events,
                log.last_seq()
            ),
            None => "was edited: its bytes are not those written".to_string(),
        },
    };
    RecordChange {
        path: layout::EVENTS.into(),
        what,
    }
}

/// A file's sha256 (hex) and its stat data, both from one open.
fn hash_file(path: &Path, buf: &mut [u8]) -> std::io::Result<(String, Stamp)> {
    let file = std::fs::File::open(path)?;
    let stamp = Stamp::of(&nix::sys::stat::fstat(file.as_raw_fd())?);
    let (h, _) = hash_reader(file, buf)?;
    Ok((hex::encode(h.finalize()), stamp))
}

/// The last announced sha256 of every record, read from the whole log.
fn announced_in(events: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in crate::events::line::read_all(events) {
        if let RunEvent::RecordWritten(r) = line.event {
            out.insert(r.path, r.sha256);
        }
    }
    out
}

mod folders;
#[cfg(test)]
mod tests;
