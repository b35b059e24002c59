//! The one thread every supervised child is started from.
//!
//! Linux sends a child its "parent death" signal — `PR_SET_PDEATHSIG`, which
//! bubblewrap's `--die-with-parent` sets for every confined command, and which
//! any program may set for itself — when the *thread* that started it ends,
//! not its process (prctl(2)). The runtime's threads do end while a run goes
//! on: a worker that waits for the disk (`store/durable.rs`, `block_in_place`)
//! hands its place to a new thread and goes on as a blocking thread, which the
//! runtime ends after 10 s idle. A command started from it was killed then,
//! mid-run: every confined check or verification of more than about ten
//! seconds. This thread is started at the first spawn and never ends, so a
//! child's parent lives as long as specbridge does: the child still dies with
//! specbridge, and only then.

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::Mutex;

type Job = Box<dyn FnOnce() + Send>;

/// The spawner's queue; `None` until the first spawn, or after its thread
/// could not be started (the next spawn tries again).
static SPAWNER: Mutex<Option<mpsc::Sender<Job>>> = Mutex::new(None);

/// Runs `spawn` on the spawner thread and returns what it returned; a panic in
/// it is resumed here. `Err` only when the thread cannot be started: a child
/// is never started from the calling thread instead.
pub(super) fn on_spawner_thread<T: Send + 'static>(
    spawn: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let (answer, answered) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        // The caller waits for this answer; a send fails only if it is gone.
        let _ = answer.send(panic::catch_unwind(AssertUnwindSafe(spawn)));
    });
    queue()?.send(job).expect("the spawner thread never ends");
    match answered.recv().expect("the spawner answers every job") {
        Ok(value) => Ok(value),
        Err(payload) => panic::resume_unwind(payload),
    }
}

/// The spawner's queue, its thread started on the first call.
fn queue() -> io::Result<mpsc::Sender<Job>> {
    let mut spawner = SPAWNER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(queue) = spawner.as_ref() {
        return Ok(queue.clone());
    }
    let (queue, jobs) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("specbridge-spawn".into())
        .spawn(move || {
            crate::background::this_thread_as_started();
            // The queue is held in `SPAWNER` for the process's life: this
            // loop, and the thread, end only with the process.
            for job in jobs {
                job();
            }
        })?;
    *spawner = Some(queue.clone());
    Ok(queue)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread_id() -> libc::pid_t {
        // SAFETY: no arguments; the calling thread's id.
        unsafe { libc::gettid() }
    }

    #[test]
    fn every_job_runs_on_one_thread_that_is_not_the_callers() {
        let first = on_spawner_thread(thread_id).unwrap();
        let from_another = std::thread::spawn(|| on_spawner_thread(thread_id).unwrap())
            .join()
            .unwrap();
        assert_ne!(first, thread_id());
        assert_eq!(first, from_another, "one spawner thread for the process");
    }

    #[test]
    fn a_panic_in_a_job_reaches_its_caller_and_the_spawner_goes_on() {
        let caught = panic::catch_unwind(|| on_spawner_thread(|| panic!("job failed")));
        let message = caught.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"job failed"));
        assert_eq!(on_spawner_thread(|| 7).unwrap(), 7);
    }

    #[test]
    fn a_child_that_dies_with_its_parent_outlives_the_thread_that_asked_for_it() {
        // The child asks for SIGKILL when its parent thread ends, then sleeps
        // longer than the asking thread lives. That thread ends once the
        // child has surely asked (a parent gone before the ask sends nothing).
        let mut child = std::thread::spawn(|| {
            let child = on_spawner_thread(|| {
                std::process::Command::new("setpriv")
                    .args(["--pdeathsig", "KILL", "sleep", "1"])
                    .spawn()
            })
            .unwrap()
            .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
            child
        })
        .join()
        .unwrap();
        let status = child.wait().unwrap();
        assert!(
            status.success(),
            "{status:?}: killed when the asking thread ended"
        );
    }
}
