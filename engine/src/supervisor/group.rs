//! Signalling and watching a whole process group.
//!
//! A group counts as alive only while a member that is not a zombie exists: an
//! orphaned grandchild is reparented to PID 1, and where PID 1 does not reap (some
//! containers) its zombie would keep `kill(-pgid, 0)` succeeding forever.
//!
//! specbridge is the subreaper of what it starts ([`adopt_orphans`]): an orphan
//! of a supervised group is reparented to specbridge, not to PID 1, and once the
//! group's leader has been reaped, [`wait_gone`] reaps the group's exited
//! members itself. A group whose members have all exited is then seen gone by
//! one `kill(-pgid, 0)`, without the scan of `/proc` that telling zombies from
//! live members takes (about a millisecond on a quiet machine). Bubblewrap's
//! namespace init outlives every confined command's leader and becomes such a
//! zombie; a PID 1 that reaps every couple of seconds left it to the scan.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgrp, Pid};
use tokio::signal::unix::{signal, Signal as Signals, SignalKind};

use super::cancel::{CancelLevel, CancelToken};

/// How often a dying group is looked at again.
const POLL: Duration = Duration::from_millis(10);
/// How long to wait for the kernel to finish a SIGKILL before giving up watching.
const KILL_SETTLE: Duration = Duration::from_secs(5);

/// Whether `pgid` names a group that may be signalled: never group 0 or 1 (which
/// `kill` reads as "my group" and "init"), never our own.
fn signallable(pgid: i32) -> bool {
    pgid > 1 && Pid::from_raw(pgid) != getpgrp()
}

/// Makes this process the subreaper of its descendants (`PR_SET_CHILD_SUBREAPER`),
/// once; called before the first child is started. Where the kernel refuses, an
/// orphan goes to PID 1 as before and is told apart by the scan. A descendant
/// that left its stage's group (a daemon with a session of its own) is adopted
/// too but reaped by no group's wait: its zombie stays until specbridge exits
/// and PID 1 takes it over.
pub(crate) fn adopt_orphans() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(error) = nix::sys::prctl::set_child_subreaper(true) {
            tracing::debug!(%error, "failed to become the subreaper of started processes");
        }
    });
}

/// Reaps the exited members of group `pgid` that are this process's children:
/// orphans it adopted as their subreaper. Only for a group whose leader has been
/// reaped by its owner already, whose exit status this would otherwise take.
fn reap_adopted(pgid: i32) {
    if !signallable(pgid) {
        return;
    }
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG;
    // ECHILD (no child of ours in the group) or a live one: nothing (more) to reap.
    while let Ok(status) = waitid(Id::PGid(Pid::from_raw(pgid)), flags) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Whether any process of group `pgid` exists, a zombie included: one `kill`.
fn group_exists(pgid: i32) -> bool {
    signallable(pgid) && killpg(Pid::from_raw(pgid), None) != Err(Errno::ESRCH)
}

/// Whether a live (non-zombie) process of group `pgid` exists.
pub fn group_alive(pgid: i32) -> bool {
    if !signallable(pgid) {
        return false;
    }
    match killpg(Pid::from_raw(pgid), None) {
        Err(Errno::ESRCH) => false,
        // EPERM: the group exists but is not ours to look into.
        Err(_) => true,
        Ok(()) => live_members(pgid).unwrap_or(true),
    }
}

/// Sends `signal` to group `pgid`; a group that is already gone is not an error.
pub(crate) fn signal_group(pgid: i32, signal: Signal) {
    if !signallable(pgid) {
        return;
    }
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(error) => tracing::warn!(pgid, %signal, %error, "failed to signal process group"),
    }
}

/// Ends group `pgid` if any of it is alive: SIGTERM, then SIGKILL after `grace`.
/// Returns whether there was anything to end. Blocking; meant for cleaning up
/// after a crash, where the group id comes from an earlier run's records.
pub fn kill_group_if_alive(pgid: i32, grace: Duration) -> bool {
    if !group_alive(pgid) {
        return false;
    }
    signal_group(pgid, Signal::SIGTERM);
    if !wait_gone_blocking(pgid, grace) {
        signal_group(pgid, Signal::SIGKILL);
        wait_gone_blocking(pgid, KILL_SETTLE);
    }
    true
}

fn wait_gone_blocking(pgid: i32, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        if !group_alive(pgid) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Ends what is left of group `pgid`: SIGTERM then SIGKILL after `grace`, or SIGKILL
/// at once when `kill_now` or an immediate cancel says so.
pub(crate) async fn end_group(pgid: i32, grace: Duration, kill_now: bool, cancel: &CancelToken) {
    if !kill_now && cancel.level() < CancelLevel::Immediate {
        signal_group(pgid, Signal::SIGTERM);
        tokio::select! {
            gone = wait_gone(pgid, grace) => if gone { return },
            _ = cancel.wait_until(CancelLevel::Immediate) => {}
        }
    }
    signal_group(pgid, Signal::SIGKILL);
    wait_gone(pgid, KILL_SETTLE).await;
}

/// Whether group `pgid`, whose leader has been reaped, is gone within `limit`.
///
/// A member this process adopted tells it when it exits: it is this process's
/// child by then, so its exit is a SIGCHLD, and each SIGCHLD is a quick look
/// (reap, then one `kill`). Bubblewrap's namespace init is such a member: it
/// finishes exiting a fraction of a millisecond after the confined command's
/// leader, and waking only on a timer found it gone a timer tick or two later,
/// about 2 ms of every confined stage. The timer still looks after 1, 2, 4, 8 ms
/// and then every [`POLL`], for members whose exit is told to someone else (a
/// zombie of another member, or every orphan where the kernel refused the
/// subreaper): those looks but the first also tell live members from zombies
/// that are not this process's to reap, by the scan of `/proc`.
pub(crate) async fn wait_gone(pgid: i32, limit: Duration) -> bool {
    // Listened to before the first look, so that an exit between that look and
    // the wait is not missed. Without a listener the timer alone decides.
    let mut exits = signal(SignalKind::child()).ok();
    let start = tokio::time::Instant::now();
    let until = start + limit;
    let mut pause = Duration::from_millis(1);
    // The timer's looks keep their times however many SIGCHLDs come between.
    let mut next_timed = start + pause;
    let mut full = false;
    loop {
        reap_adopted(pgid);
        if !group_exists(pgid) {
            return true;
        }
        let now = tokio::time::Instant::now();
        if (full || now >= until) && !group_alive(pgid) {
            // Zombies only; those that are this process's go now.
            reap_adopted(pgid);
            return true;
        }
        if now >= until {
            return false;
        }
        tokio::select! {
            () = tokio::time::sleep_until(next_timed.min(until)) => {
                full = true;
                pause = (pause * 2).min(POLL);
                next_timed = tokio::time::Instant::now() + pause;
            }
            () = child_exited(&mut exits) => full = false,
        }
    }
}

/// The next SIGCHLD to this process (any child's); never, without a listener.
async fn child_exited(exits: &mut Option<Signals>) {
    match exits {
        Some(exits) => {
            exits.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Whether `/proc` lists a non-zombie member of group `pgid`; `None` without a
/// readable `/proc`.
fn live_members(pgid: i32) -> Option<bool> {
    let members = group_members(pgid, "/proc")?;
    Some(
        members
            .values()
            .any(|state| !matches!(state, 'Z' | 'X' | 'x')),
    )
}

/// The processes of group `pgid` that the `/proc` at `proc` lists, each with
/// its state; `None` where that folder cannot be listed.
pub(super) fn group_members(pgid: i32, proc: &str) -> Option<HashMap<u32, char>> {
    let members = numbered_entries(proc)?
        .into_iter()
        .filter_map(|pid| {
            // A process can end between listing and reading: then it is no
            // member any more, and that is not an error.
            let stat = std::fs::read_to_string(format!("{proc}/{pid}/stat")).ok()?;
            let (state, group) = parse_stat(&stat)?;
            (group == pgid).then_some((pid, state))
        })
        .collect();
    Some(members)
}

/// The entries of the folder `dir` named by a number (processes in `/proc`,
/// threads in `/proc/<pid>/task`); `None` where it cannot be listed.
pub(super) fn numbered_entries(dir: &str) -> Option<HashSet<u32>> {
    let entries = std::fs::read_dir(dir).ok()?;
    Some(
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect(),
    )
}

/// The fields of a `/proc/<pid>/stat` line from the state (field 3) on. The
/// command name before them sits in parentheses and may itself hold spaces and
/// parentheses, so they are counted from the last `)`.
pub(crate) fn stat_fields(stat: &str) -> Option<std::str::SplitWhitespace<'_>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace())
}

/// The state and process group from a `/proc/<pid>/stat` line.
pub(super) fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let mut fields = stat_fields(stat)?;
    let state = fields.next()?.chars().next()?;
    let _parent = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, group))
}

/// When process `pid` started, in clock ticks since boot (field 22 of
/// `/proc/PID/stat`). Unlike a wall-clock time it never drifts: the same
/// process always gives the same number, and a later process given the same id a
/// larger one.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // State is field 3, starttime field 22.
    stat_fields(&stat)?.nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let stat = "4242 (a) b (c)) S 1 4240 4240 0 -1 4194560 0 0";
        assert_eq!(parse_stat(stat), Some(('S', 4240)));
        assert_eq!(parse_stat("1 (init) Z 0 0 0"), Some(('Z', 0)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn own_group_init_and_zero_are_never_signalled() {
        assert!(!signallable(0));
        assert!(!signallable(1));
        assert!(!signallable(-5));
        assert!(!signallable(getpgrp().as_raw()));
        assert!(!group_alive(getpgrp().as_raw()));
    }

    #[test]
    fn our_own_group_has_live_members_in_proc() {
        // The test process itself is a live member of its group.
        assert_eq!(live_members(getpgrp().as_raw()), Some(true));
    }
}
