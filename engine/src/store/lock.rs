//! The OS lock a process holds on a run while it works on it. The kernel drops a
//! flock when its holder dies, so a crashed run can always be taken again.

use std::collections::HashSet;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::flock::{flock_within, held_here, lock_exclusive, Flock, HeldHere, PROBE_GRACE};

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
    file: File,
    path: PathBuf,
    /// Declared after `file`: this process's own until the file is closed.
    _here: HeldHere,
}

impl RunLock {
    /// Take the lock, waiting at most a moment ([`super::flock`]) for a holder
    /// that is going away.
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
        match lock_exclusive(&file) {
            Ok(Flock::Taken) => Ok(RunLock {
                _here: HeldHere::new(&file),
                file,
                path,
            }),
            Ok(Flock::Held) => Err(LockError::InUse {
                run: run_id.to_string(),
                path,
            }),
            Err(source) => Err(LockError::Io {
                run: run_id.to_string(),
                source,
            }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The run store's own clock now, in nanoseconds: the lock file's times are set
    /// to "now" and its change time read back. A change made to any file of the
    /// store after this call has a change time at or after it, whatever the file
    /// system's granularity, and on a network file system the server's clock
    /// speaks for both (a local clock read could be behind or ahead of it).
    pub fn store_clock(&self) -> std::io::Result<i128> {
        clock_of(&self.file)
    }

    /// The same clock, to be read on another thread: setting a file's times can
    /// wait for the file system's journal while records are being synced, which
    /// a thread beside the stage waits for instead of the stage. The handle is a
    /// second descriptor of the lock file, so the flock lasts while it lives too.
    pub fn clock(&self) -> std::io::Result<StoreClock> {
        Ok(StoreClock {
            file: self.file.try_clone()?,
        })
    }
}

/// The run store's clock, read off the thread that holds the run ([`RunLock::clock`]).
#[derive(Debug)]
pub struct StoreClock {
    file: File,
}

impl StoreClock {
    /// The clock now, as [`RunLock::store_clock`] reads it.
    pub fn now(&self) -> std::io::Result<i128> {
        clock_of(&self.file)
    }
}

fn clock_of(file: &File) -> std::io::Result<i128> {
    // SAFETY: futimens on a descriptor we own; a null `times` means "now" for
    // both the access and the modification time, and so for the change time.
    let rc = unsafe { libc::futimens(file.as_raw_fd(), std::ptr::null()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(crate::time::ctime_ns(&file.metadata()?))
}

/// The files another process holds a `flock` on right now, as (major, minor,
/// inode) of their device and inode, read from `/proc/locks`: what the tests
/// hold [`held_by_another`] to. Locks this process holds are not listed: what it
/// holds, an agent it started could link anywhere. Empty where `/proc/locks`
/// cannot be read.
///
/// Slow, whatever the number of locks: the kernel takes its lock table for
/// writing to list it, which waits for an RCU grace period (8 to 22 ms on the
/// 2-core machine of docs/performance.md; a second read right after is fast).
pub fn held_flocks() -> HashSet<(u32, u32, u64)> {
    let me = std::process::id();
    std::fs::read_to_string("/proc/locks")
        .map(|text| {
            text.lines()
                .filter_map(parse_lock_line)
                .filter(|(pid, _)| *pid != me)
                .map(|(_, file)| file)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether another process holds a `flock` on the regular file at `path` (a
/// symlink is not followed), such as a run's `.lock` while another process works
/// on the run: found by trying to take it, which costs a few system calls where
/// reading `/proc/locks` waits for an RCU grace period ([`held_flocks`]).
///
/// The probe is a shared lock, let go at once: specbridge holds a run with an
/// exclusive one, which a shared lock waits for, while probes (of this process,
/// of another, or a copy of one in a child forked before its `exec`) never
/// wait for each other. A `run` or `resume` of that run trying to take it
/// meanwhile tries again for a moment (`store::flock`). A file whose lock this
/// process holds (its run's, the working tree's) is never held by another,
/// wherever an agent linked it, as [`held_flocks`] leaves this process's locks
/// out. Anything that cannot be asked (a file that cannot be opened, replaced
/// while asked) is not held: a held run folder is left out of the run store's
/// check, so "not held" is the answer that checks more; so is a lock held only
/// shared, which no specbridge takes.
pub fn held_by_another(path: &Path) -> bool {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if !meta.is_file() || held_here(meta.dev(), meta.ino()) {
        return false;
    }
    // Not following a symlink put there since, not waiting on a FIFO, and not
    // touching its access time (the file is the user's own, as every record is).
    let open = |extra: i32| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | extra)
            .open(path)
    };
    let file = match open(libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(0),
        opened => opened,
    };
    let Ok(file) = file else {
        return false;
    };
    match file.metadata() {
        Ok(now) if (now.dev(), now.ino()) == (meta.dev(), meta.ino()) => {}
        _ => return false,
    }
    // Closing the file lets the probe's lock go.
    matches!(
        flock_within(&file, libc::LOCK_SH, PROBE_GRACE),
        Ok(Flock::Held)
    )
}

/// Whether `path` itself (a symlink is not followed) is a file `held` lists, such
/// as a run's `.lock` while another process works on the run.
pub fn is_held(path: &Path, held: &HashSet<(u32, u32, u64)>) -> bool {
    lock_key(path).is_some_and(|key| held.contains(&key))
}

/// How [`held_flocks`] names the file at `path` (a symlink is not followed):
/// (major, minor, inode) of its device and inode; `None` for anything but a
/// regular file.
pub fn lock_key(path: &Path) -> Option<(u32, u32, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    let dev = m.dev();
    m.is_file()
        .then(|| (libc::major(dev), libc::minor(dev), m.ino()))
}

/// `1: FLOCK  ADVISORY  WRITE 4321 fd:01:123456 0 EOF`: the holder's pid and the
/// held file's device (major and minor in hex) and inode. A waiter
/// (`1: -> FLOCK …`) holds nothing.
fn parse_lock_line(line: &str) -> Option<(u32, (u32, u32, u64))> {
    let mut fields = line.split_whitespace().skip(1);
    if fields.next()? != "FLOCK" {
        return None;
    }
    let pid = fields.nth(2)?.parse().ok()?;
    let file = fields.next()?;
    let mut parts = file.split(':');
    let major = u32::from_str_radix(parts.next()?, 16).ok()?;
    let minor = u32::from_str_radix(parts.next()?, 16).ok()?;
    let inode = parts.next()?.parse().ok()?;
    Some((pid, (major, minor, inode)))
}

/// util-linux `flock PATH sleep SECONDS`, in its own process group, once it holds
/// the lock on `path` (as another process's run would): the lock is held by
/// both, `flock` and `sleep`, until `sleep` ends.
#[cfg(test)]
pub(super) fn held_by_another_process(path: &Path, seconds: &str) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    let child = std::process::Command::new("flock")
        .arg(path)
        .args(["sleep", seconds])
        .process_group(0)
        .spawn()
        .expect("util-linux flock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_held(path, &held_flocks()) {
        assert!(Instant::now() < deadline, "flock never took the lock");
        std::thread::sleep(Duration::from_millis(5));
    }
    child
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines_give_the_files_under_flock() {
        assert_eq!(
            parse_lock_line("1: FLOCK  ADVISORY  WRITE 4321 fd:01:123456 0 EOF"),
            Some((4321, (0xfd, 0x01, 123_456)))
        );
        assert_eq!(
            parse_lock_line("2: POSIX  ADVISORY  WRITE 4321 fd:01:123456 0 EOF"),
            None
        );
        assert_eq!(
            parse_lock_line("1: -> FLOCK  ADVISORY  WRITE 99 fd:01:123456 0 EOF"),
            None
        );
        assert_eq!(parse_lock_line("garbage"), None);
    }

    #[test]
    fn a_lock_another_process_holds_is_seen_and_one_of_this_process_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(crate::store::layout::LOCK);
        let mine = RunLock::acquire(dir.path(), "r1").unwrap();
        assert!(!is_held(&lock, &held_flocks()), "this process's own lock");
        drop(mine);
        // Both `flock` and its `sleep` are ended below.
        let mut other = held_by_another_process(&lock, "30");
        // A symlink to a held lock is not a held lock.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&lock, &link).unwrap();
        assert!(!is_held(&link, &held_flocks()));
        let group = nix::unistd::Pid::from_raw(other.id() as i32);
        nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).unwrap();
        other.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while is_held(&lock, &held_flocks()) {
            assert!(
                std::time::Instant::now() < deadline,
                "still held once ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The probe answers what `/proc/locks` answers for every case the run store's
    /// check meets, and disturbs nobody.
    #[test]
    fn a_lock_is_held_by_another_exactly_when_the_lock_table_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let table = |p: &Path| is_held(p, &held_flocks());
        // Nobody: free, and a run takes it right after the probe.
        let own = dir.path().join("own");
        std::fs::create_dir(&own).unwrap();
        std::fs::write(own.join(crate::store::layout::LOCK), "").unwrap();
        assert!(!held_by_another(&own.join(crate::store::layout::LOCK)));
        let mine = RunLock::acquire(&own, "r1").unwrap();
        // This process's own lock, and a hard link to it, are not another's.
        let linked = dir.path().join("mine-linked");
        std::fs::hard_link(mine.path(), &linked).unwrap();
        assert!(!held_by_another(mine.path()) && !table(mine.path()));
        assert!(!held_by_another(&linked) && !table(&linked));
        let lock = dir.path().join(crate::store::layout::LOCK);
        let link = dir.path().join("hard");
        std::fs::write(&lock, "").unwrap();
        std::fs::hard_link(&lock, &link).unwrap();
        let mut other = held_by_another_process(&lock, "30");
        assert!(held_by_another(&lock) && table(&lock));
        assert!(held_by_another(&link) && table(&link), "the same file");
        // A symlink to it, a FIFO (not waited on), a folder, nothing: not held.
        let symlink = dir.path().join("symlink");
        std::os::unix::fs::symlink(&lock, &symlink).unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for p in [
            &symlink,
            &fifo,
            &dir.path().to_path_buf(),
            &dir.path().join("none"),
        ] {
            assert!(!held_by_another(p) && !table(p), "{}", p.display());
        }
        let group = nix::unistd::Pid::from_raw(other.id() as i32);
        nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).unwrap();
        other.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while table(&lock) {
            assert!(std::time::Instant::now() < deadline, "still held");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!held_by_another(&lock));
        drop(mine);
    }

    /// Only a lock this process still holds is its own: once let go, the same
    /// file held by another process is held (its inode could be any file's).
    #[test]
    fn a_run_lock_let_go_is_no_longer_this_process_s() {
        let dir = tempfile::tempdir().unwrap();
        let mine = RunLock::acquire(dir.path(), "r1").unwrap();
        let lock = mine.path().to_path_buf();
        drop(mine);
        let mut other = held_by_another_process(&lock, "30");
        assert!(held_by_another(&lock));
        let group = nix::unistd::Pid::from_raw(other.id() as i32);
        nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).unwrap();
        other.wait().unwrap();
    }

    /// A probe is a shared lock: a copy of one (another probe, a child forked
    /// while it was held) is not a holder, and no specbridge holds a run shared.
    #[test]
    fn a_shared_lock_is_not_a_run_held() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(crate::store::layout::LOCK);
        std::fs::write(&lock, "").unwrap();
        let shared = File::open(&lock).unwrap();
        // SAFETY: flock on a descriptor owned here.
        let rc = unsafe { libc::flock(shared.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        assert_eq!(rc, 0);
        assert!(!held_by_another(&lock));
    }

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
