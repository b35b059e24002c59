//! Whether a process group can no longer act, before its leader is reaped.
//!
//! A process that exits is reaped only once the kernel has torn down its
//! memory: for the Claude Code CLI, a runtime with a large heap, 20 to 35 ms
//! after its last thread has left user space (docs/performance.md). Whoever
//! waits for the reap, a bare `claude -p` as much as specbridge, waits for that
//! teardown. What reads the state the agent left behind (the after-snapshot,
//! the run store's comparison) can start as soon as no member of the group can
//! change anything any more, which is the moment every thread of every member
//! is exiting:
//!
//! - a thread marked exiting (`PF_EXITING`, set as `do_exit` begins) never
//!   returns to user space, and a zombie has no threads left;
//! - a thread that is exiting cannot fork, so once every member is exiting no
//!   new member can be born: the members are listed twice, and every one of
//!   the second listing must have been checked in the first (threads likewise);
//! - what the kernel still does for an exiting process does not change what a
//!   file holds — it frees memory and closes descriptors — except an
//!   asynchronous write of the kernel's AIO interface, which the teardown
//!   waits for and lets finish. So no process of the machine may hold an AIO
//!   context (`/proc/sys/fs/aio-nr` is 0); with one anywhere, the reap is
//!   waited for as before. (`io_uring` requests are cancelled and waited for
//!   before a thread is marked exiting.)
//!
//! Anything unreadable or unexpected answers "not inert": the caller then waits
//! for the reap, as it would have without this.

use super::group::{group_members, numbered_entries, stat_fields};

/// The kernel's flag of a task in `do_exit` (`include/linux/sched.h`), field 9
/// of `/proc/<pid>/stat`.
const PF_EXITING: u64 = 0x0000_0004;

/// Whether no member of group `pgid`, whose leader is `leader`, can act any more.
pub(crate) fn group_inert(pgid: i32, leader: u32) -> bool {
    group_inert_with(pgid, leader, "/proc", aio_contexts)
}

/// [`group_inert`] over the `/proc` at `proc`, with `aio` telling how many AIO
/// contexts the machine holds.
fn group_inert_with(pgid: i32, leader: u32, proc: &str, aio: impl Fn() -> Option<u64>) -> bool {
    // The leader first, alone: one read, made every poll while the agent is
    // still ending; then its threads. Only once they are all on their way out
    // is every process of the machine asked for its group.
    if !task_inert(&format!("{proc}/{leader}/stat")) || !threads_inert(leader, proc) {
        return false;
    }
    let Some(first) = group_members(pgid, proc) else {
        return false;
    };
    // The leader's threads were read above.
    let others = first.keys().filter(|pid| **pid != leader);
    if !others.copied().all(|pid| threads_inert(pid, proc)) {
        return false;
    }
    let Some(again) = group_members(pgid, proc) else {
        return false;
    };
    again.keys().all(|pid| first.contains_key(pid)) && aio() == Some(0)
}

/// How many AIO contexts the machine holds; `None` when that cannot be read.
fn aio_contexts() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/aio-nr")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether the task whose `stat` file is at `path` is exiting or gone.
fn task_inert(path: &str) -> bool {
    match std::fs::read_to_string(path) {
        Ok(stat) => stat_inert(&stat).unwrap_or(false),
        // Gone since it was listed: reaped, so it acts no more.
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Whether a `stat` line is that of a zombie or of a task marked exiting;
/// `None` for a line that does not parse.
fn stat_inert(stat: &str) -> Option<bool> {
    let mut fields = stat_fields(stat)?;
    let state = fields.next()?.chars().next()?;
    // ppid, pgrp, session, tty_nr, tpgid, then the flags.
    let flags: u64 = fields.nth(5)?.parse().ok()?;
    Some(matches!(state, 'Z' | 'X' | 'x') || flags & PF_EXITING != 0)
}

/// Whether every thread of process `pid` is exiting (or the process is gone),
/// its threads listed again after they were read.
///
/// Each thread's line is read at `/proc/<tid>/stat` (a folder every thread has,
/// though only processes are listed at the top), not under the process's own
/// `task/<tid>`: both give the thread's own state and flags, but a file looked
/// up under the process's folder is the process's to drop when it is reaped:
/// for the Claude Code CLI that made the reap take 3-4 ms in the kernel, on
/// the thread waiting to record the exit (docs/performance-log.md, "An agent's
/// end"). A thread's own folder goes with the thread. A thread id taken since
/// by another process can only make the answer "not yet": that process is
/// read as running, or as ending, which the thread is too.
fn threads_inert(pid: u32, proc: &str) -> bool {
    let dir = format!("{proc}/{pid}/task");
    let Some(first) = numbered_entries(&dir) else {
        return gone(pid, proc);
    };
    if !first
        .iter()
        .all(|tid| task_inert(&format!("{proc}/{tid}/stat")))
    {
        return false;
    }
    match numbered_entries(&dir) {
        Some(again) => again.is_subset(&first),
        None => gone(pid, proc),
    }
}

/// Whether process `pid` no longer exists.
fn gone(pid: u32, proc: &str) -> bool {
    matches!(
        std::fs::metadata(format!("{proc}/{pid}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    /// A `stat` line with `state`, group 40 and `flags` (the fields after the
    /// flags cut short, as the parser never reads them).
    fn line(pid: u32, state: char, flags: u64) -> String {
        format!("{pid} (a (b) c) {state} 1 40 40 0 -1 {flags} 0 0 0")
    }

    #[test]
    fn a_task_is_inert_when_exiting_or_a_zombie() {
        assert_eq!(stat_inert(&line(7, 'S', 0x0040_0100)), Some(false));
        assert_eq!(stat_inert(&line(7, 'R', 0x0040_0104)), Some(true));
        assert_eq!(stat_inert(&line(7, 'D', 0x0040_0104)), Some(true));
        assert_eq!(stat_inert(&line(7, 'Z', 0)), Some(true));
        assert_eq!(stat_inert("7 (x) S 1"), None);
        assert_eq!(
            super::super::group::parse_stat(&line(7, 'S', 0)),
            Some(('S', 40))
        );
    }

    /// A fake `/proc` of the processes given as (pid, state, flags, group),
    /// each with one thread of its own id, listed under `task` (its line is
    /// read from the process's own folder).
    fn fake_proc(processes: &[(u32, char, u64, i32)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (pid, state, flags, group) in processes {
            let stat = format!("{pid} (p) {state} 1 {group} {group} 0 -1 {flags} 0");
            std::fs::create_dir_all(dir.path().join(format!("{pid}/task/{pid}"))).unwrap();
            std::fs::write(dir.path().join(format!("{pid}/stat")), &stat).unwrap();
        }
        dir
    }

    fn inert(processes: &[(u32, char, u64, i32)], aio: Option<u64>) -> bool {
        let proc = fake_proc(processes);
        group_inert_with(40, 40, proc.path().to_str().unwrap(), || aio)
    }

    #[test]
    fn a_group_is_inert_only_when_every_member_is_on_its_way_out() {
        // The leader exiting, nothing else in its group: inert.
        assert!(inert(&[(40, 'R', PF_EXITING, 40), (9, 'S', 0, 9)], Some(0)));
        // The leader a zombie, a member still running: not yet.
        assert!(!inert(&[(40, 'Z', 0, 40), (41, 'S', 0, 40)], Some(0)));
        // Both exiting.
        assert!(inert(
            &[(40, 'Z', 0, 40), (41, 'R', PF_EXITING, 40)],
            Some(0)
        ));
        // The leader still running.
        assert!(!inert(&[(40, 'S', 0, 40)], Some(0)));
    }

    #[test]
    fn an_aio_context_anywhere_or_an_unreadable_count_means_waiting_for_the_reap() {
        let exiting = [(40, 'R', PF_EXITING, 40)];
        assert!(!inert(&exiting, Some(1)));
        assert!(!inert(&exiting, None));
    }

    #[test]
    fn a_thread_still_running_in_an_exiting_leader_keeps_the_group_alive() {
        let proc = fake_proc(&[(40, 'R', PF_EXITING, 40)]);
        // Listed under its process; its line read from its own folder, which
        // this fake lists at the top too (the real `/proc` does not), with its
        // thread group under it as the real one has.
        std::fs::create_dir_all(proc.path().join("40/task/43")).unwrap();
        std::fs::create_dir_all(proc.path().join("43/task/43")).unwrap();
        let stat = proc.path().join("43/stat");
        std::fs::write(&stat, line(43, 'S', 0)).unwrap();
        let at = proc.path().to_str().unwrap();
        assert!(!group_inert_with(40, 40, at, || Some(0)));
        std::fs::write(&stat, line(43, 'R', PF_EXITING)).unwrap();
        assert!(group_inert_with(40, 40, at, || Some(0)));
        // Gone: released, so it acts no more.
        std::fs::remove_dir_all(proc.path().join("43")).unwrap();
        assert!(group_inert_with(40, 40, at, || Some(0)));
    }

    #[test]
    fn a_live_child_is_not_inert_and_its_zombie_is() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        let pgid = pid as i32;
        assert!(!group_inert(pgid, pid));
        child.kill().unwrap();
        // Not reaped yet: once the kill has landed, the child is a zombie.
        let zombie = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| stat_fields(&s).and_then(|mut f| f.next()) == Some("Z"))
        });
        assert!(zombie, "the killed child never showed as a zombie");
        let aio_free = aio_contexts() == Some(0);
        assert_eq!(group_inert(pgid, pid), aio_free);
        child.wait().unwrap();
    }

    /// The state of process `pid` once it is no longer `from` (5 s at most).
    fn state_after(pid: u32, from: &str) -> Option<String> {
        (0..2500).find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
            let state = stat.and_then(|s| Some(stat_fields(&s)?.next()?.to_string()));
            (state.as_deref() != Some(from)).then_some(state).flatten()
        })
    }

    #[test]
    fn a_zombie_leader_with_a_live_member_is_not_inert_until_the_member_goes() {
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "sleep 30 >/dev/null & echo $!"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let (pid, pgid) = (leader.id(), leader.id() as i32);
        let mut out = String::new();
        std::io::Read::read_to_string(leader.stdout.as_mut().unwrap(), &mut out).unwrap();
        let member: u32 = out.trim().parse().unwrap();
        // The leader has exited and is not reaped; its member sleeps on.
        assert_eq!(state_after(pid, "S").as_deref(), Some("Z"));
        assert!(!group_inert(pgid, pid), "a live member can still act");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(member as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        // Gone, or a zombie of whoever adopted it.
        assert!(matches!(
            state_after(member, "S").as_deref(),
            None | Some("Z")
        ));
        assert_eq!(group_inert(pgid, pid), aio_contexts() == Some(0));
        leader.wait().unwrap();
    }
}
