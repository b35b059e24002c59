//! The engine's own threads wait behind the commands and agents a run starts.
//!
//! Linux lets a thread that wakes preempt the one running on its core when it
//! has slept for long enough, and a run's threads sleep most of the time: on
//! the disk (the syncs of a batch), on a child's end, on each other. In a
//! chain of check stages each stage's `sh` was preempted 1.6 times on average,
//! mostly by them (and by the disk's completions they asked for), with the
//! other core idle in more than half of those (docs/performance.md).
//! `SCHED_BATCH` is the same fair class at the same `nice`, except that its
//! wakeups never preempt: such a thread runs on a core that is idle, or once
//! the task on its core sleeps or has had its slice. Nothing is given less CPU
//! over time; on a busy machine a wakeup may wait for the next tick.
//!
//! What a run starts for the user (a stage's command, an agent, a
//! verification: everything the supervisor spawns) is started under the
//! policy specbridge itself was started with ([`this_thread_as_started`], the
//! supervisor's spawner thread), not the engine's. Only a process started
//! under `SCHED_OTHER` is moved: one started under `chrt --batch`, `--idle` or
//! a real-time class keeps what it was given, for its threads and its
//! children alike. A refusal (a seccomp
//! filter, another kernel) leaves every thread as it was.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether [`engine_threads`] moved a thread: only then do spawns move back.
static MOVED: AtomicBool = AtomicBool::new(false);

/// Moves the calling thread behind the commands; every thread it starts from
/// now on inherits it. For the thread that builds a run's runtime (it runs the
/// scheduler too) before it does.
pub fn engine_threads() {
    if move_this_thread(libc::SCHED_OTHER, libc::SCHED_BATCH) {
        MOVED.store(true, Ordering::Relaxed);
    }
}

/// Moves the calling thread behind the commands, whoever started it: for a
/// thread whose work is all behind them (`store/sync_pool.rs`), which may be
/// started before [`engine_threads`] runs.
pub fn this_thread() {
    move_this_thread(libc::SCHED_OTHER, libc::SCHED_BATCH);
}

/// Moves the calling thread, for good, back under the policy specbridge was
/// started with, if [`engine_threads`] moved it behind: for the thread every
/// child is started from (`supervisor/spawner.rs`), so that a stage's command,
/// an agent or a verification inherits that policy and not the engine's. That
/// thread sleeps while a child runs, so the child has the core.
pub fn this_thread_as_started() {
    if MOVED.load(Ordering::Relaxed) {
        move_this_thread(libc::SCHED_BATCH, libc::SCHED_OTHER);
    }
}

/// Sets the calling thread's policy to `to` if it is exactly `from` (no
/// reset-on-fork flag either); whether it did.
fn move_this_thread(from: libc::c_int, to: libc::c_int) -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread alone; `param` outlives the call.
    unsafe { libc::sched_getscheduler(0) == from && libc::sched_setscheduler(0, to, &param) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> libc::c_int {
        // SAFETY: the calling thread's policy; no memory involved.
        unsafe { libc::sched_getscheduler(0) }
    }

    /// The policy of process `pid`'s main thread, as `/proc` shows it: field
    /// 41, counted from the state (field 3).
    fn policy_of(pid: u32) -> libc::c_int {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let mut fields = crate::supervisor::stat_fields(&stat).unwrap();
        fields.nth(41 - 3).unwrap().parse().unwrap()
    }

    /// The policy of a child spawned by a thread started from this one that
    /// moved itself with [`this_thread_as_started`], as the spawner does.
    fn spawned_as_started() -> libc::c_int {
        std::thread::spawn(|| {
            this_thread_as_started();
            let mut child = std::process::Command::new("sleep")
                .arg("5")
                .spawn()
                .expect("spawn sleep");
            let seen = policy_of(child.id());
            child.kill().unwrap();
            child.wait().unwrap();
            seen
        })
        .join()
        .unwrap()
    }

    #[test]
    fn a_thread_moved_passes_it_on_and_leaves_its_starter_alone() {
        let here = policy();
        assert_eq!(here, libc::SCHED_OTHER, "the tests start under SCHED_OTHER");
        let (moved, child) = std::thread::spawn(|| {
            this_thread();
            (policy(), std::thread::spawn(policy).join().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(moved, libc::SCHED_BATCH);
        assert_eq!(child, libc::SCHED_BATCH, "a thread it starts inherits it");
        assert_eq!(policy(), here, "the caller's own thread is unchanged");
    }

    #[test]
    fn what_a_moved_thread_spawns_runs_as_specbridge_was_started() {
        std::thread::spawn(|| {
            engine_threads();
            assert_eq!(policy(), libc::SCHED_BATCH);
            assert_eq!(
                spawned_as_started(),
                libc::SCHED_OTHER,
                "the child is not behind"
            );
            assert_eq!(
                policy(),
                libc::SCHED_BATCH,
                "the engine's thread is still behind"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_under_another_policy_keeps_it_and_so_do_its_children() {
        std::thread::spawn(|| {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: this thread alone; `param` outlives the call.
            assert_eq!(
                unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) },
                0
            );
            this_thread();
            engine_threads();
            assert_eq!(policy(), libc::SCHED_IDLE, "never moved up to SCHED_BATCH");
            assert_eq!(
                spawned_as_started(),
                libc::SCHED_IDLE,
                "nor its child up to SCHED_OTHER"
            );
            assert_eq!(policy(), libc::SCHED_IDLE);
        })
        .join()
        .unwrap();
    }
}
