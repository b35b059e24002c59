//! Threads kept for the syncs of a batch (`batch.rs`). A batch syncs every
//! temporary file and every folder it touched at once; a thread started for each
//! of them (six a stage in a chain of check stages) cost more than the syncs of
//! small files on a fast disk. A few threads are started once and kept.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

type Job = Box<dyn FnOnce() + Send>;

/// Enough for the syncs of a batch to overlap: a disk flushes them together.
const THREADS: usize = 4;

/// The pool's queue, started at first use; `None` when no thread could be started.
fn queue() -> Option<&'static Mutex<Sender<Job>>> {
    static QUEUE: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            let rx = Arc::new(Mutex::new(rx));
            let started = (0..THREADS)
                .filter(|i| {
                    let rx = Arc::clone(&rx);
                    std::thread::Builder::new()
                        .name(format!("specbridge-sync-{i}"))
                        .spawn(move || work(&rx))
                        .is_ok()
                })
                .count();
            (started > 0).then(|| Mutex::new(tx))
        })
        .as_ref()
}

fn work(jobs: &Mutex<Receiver<Job>>) {
    // Syncs wake these threads while a command runs: they wait for an idle
    // core instead of taking the command's. They may be started before the
    // run's threads are moved (`background.rs`).
    crate::background::this_thread();
    loop {
        let job = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        match job {
            // A job that panics answers nobody (its waiter sees that), and the
            // thread stays for the next one.
            Ok(job) => drop(catch_unwind(AssertUnwindSafe(job))),
            Err(_) => return,
        }
    }
}

/// A job started on the pool.
pub(super) struct Pending<T>(PendingInner<T>);

enum PendingInner<T> {
    Queued(Receiver<T>),
    /// Run at once by the caller: no pool could be had.
    Done(T),
}

/// Starts `job` on a kept thread. When none can be had it runs here, at once:
/// slower, never wrong.
pub(super) fn start<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Pending<T> {
    let (tx, rx) = channel();
    let boxed: Job = Box::new(move || {
        let _ = tx.send(job());
    });
    let sent = match queue() {
        Some(q) => q
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(boxed)
            .map_err(|e| e.0),
        None => Err(boxed),
    };
    match sent {
        Ok(()) => Pending(PendingInner::Queued(rx)),
        Err(job) => {
            job();
            Pending(PendingInner::Done(
                rx.recv().expect("a job run here answers"),
            ))
        }
    }
}

impl<T> Pending<T> {
    /// Its result; `None` if the job panicked.
    pub(super) fn wait(self) -> Option<T> {
        match self.0 {
            PendingInner::Queued(rx) => rx.recv().ok(),
            PendingInner::Done(t) => Some(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_on_kept_threads_and_answer_in_order_of_waiting() {
        let pending: Vec<_> = (0..20)
            .map(|i| {
                start(move || {
                    (
                        i,
                        std::thread::current()
                            .name()
                            .unwrap_or_default()
                            .to_string(),
                    )
                })
            })
            .collect();
        for (i, p) in pending.into_iter().enumerate() {
            let (n, thread) = p.wait().unwrap();
            assert_eq!(n, i);
            assert!(thread.starts_with("specbridge-sync-"), "{thread}");
        }
    }

    #[test]
    fn a_job_that_panics_answers_none_and_the_pool_goes_on() {
        let failed = start(|| -> u32 { panic!("on purpose") });
        assert_eq!(failed.wait(), None);
        let names: Vec<_> = (0..THREADS * 2).map(|_| start(|| 7)).collect();
        assert!(names.into_iter().all(|p| p.wait() == Some(7)));
    }
}
