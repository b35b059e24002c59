//! Two pieces of work at once, on two cores, with nothing to lose on one.
//!
//! Validation, the audit, an agent attempt's start and an invocation's end each
//! have passes that read the same input and none of each other's results.
//! [`beside`] runs one on a scoped thread while the caller's thread runs the
//! other. A machine that will not give a thread (a process limit reached) gets
//! the same results one after the other: a missing thread is never an error, and
//! never a panic.

use std::sync::Mutex;
use std::thread;

/// `(aside(), here())`, `aside` on a thread of its own when one can be had.
/// A panic in `aside` is raised again on the caller's thread.
pub fn beside<A, B>(aside: impl FnOnce() -> A + Send, here: impl FnOnce() -> B) -> (A, B)
where
    A: Send,
{
    beside_or_inline(aside, here, true)
}

/// [`beside`]; with `on_a_thread` false, as when the spawn is refused.
fn beside_or_inline<A, B>(
    aside: impl FnOnce() -> A + Send,
    here: impl FnOnce() -> B,
    on_a_thread: bool,
) -> (A, B)
where
    A: Send,
{
    // `aside` goes to the thread through this slot, so that a refused spawn
    // leaves it here to run inline.
    let slot = Mutex::new(Some(aside));
    let take = || slot.lock().ok().and_then(|mut s| s.take());
    thread::scope(|scope| {
        let spawned = if on_a_thread {
            thread::Builder::new()
                .name("specbridge-beside".into())
                .spawn_scoped(scope, || take().map(|f| f()))
        } else {
            Err(std::io::Error::from(std::io::ErrorKind::WouldBlock))
        };
        let b = here();
        let a = match spawned {
            Ok(handle) => match handle.join() {
                Ok(Some(a)) => a,
                Ok(None) => unreachable!("the slot is filled before the spawn"),
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(_) => take().expect("a refused spawn ran nothing")(),
        };
        (a, b)
    })
}

/// How much less of the cores work beside an agent asks for than the agent: a
/// `nice` of 10 gives it about a tenth of a core the agent's threads want too
/// (the CLI's start is busy on both of a small machine's cores), and all of one
/// the agent leaves idle while it waits for its model.
const NICE_BESIDE_AGENT: i32 = 10;

/// Starts `work` on a thread named `name` whose work is all beside an agent
/// (the run store's walk, the output schema's compilation): it must not take
/// the cores the agent wants, yet should use those it leaves idle, so it runs
/// [`NICE_BESIDE_AGENT`] lower than the process, and so do the threads it
/// starts. The error is the spawn's.
pub fn spawn_beside_agent<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<thread::JoinHandle<T>> {
    thread::Builder::new().name(name.into()).spawn(move || {
        lower_this_thread(NICE_BESIDE_AGENT);
        work()
    })
}

/// Gives the calling thread `nice` more than the process's (threads it starts
/// later inherit it). A thread's priority cannot be raised again without
/// privileges: only for threads whose work is all beside. A failure leaves the
/// thread as it was.
fn lower_this_thread(nice: i32) {
    // SAFETY: setpriority of this thread alone (its tid), no memory involved.
    unsafe {
        let tid = libc::gettid();
        let now = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, now + nice);
    }
}

/// Below this many items [`in_two_halves`] works through them on the caller's
/// thread alone: a second thread costs more to start than it saves.
pub(crate) const HALVES_FROM: usize = 64;

/// `work` on the first half of `items` and on the second, at once ([`beside`])
/// from [`HALVES_FROM`] items on; below, `work` on them all and on none. For a
/// pass whose items are independent (a run's stage records read or checked),
/// its results kept apart so that the caller puts them back in order.
pub(crate) fn in_two_halves<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&[T]) -> R + Sync,
) -> (R, R) {
    if items.len() < HALVES_FROM {
        return (work(items), work(&[]));
    }
    let (first, second) = items.split_at(items.len() / 2);
    beside(|| work(first), || work(second))
}

/// Initialises `lazy` on a thread named `name`, for a caller that will need
/// it soon and has other work until then (a regex's compilation). Best effort:
/// a refused thread leaves the first user to initialise it, as it would have.
pub(crate) fn force_aside<T: Send + Sync>(name: &str, lazy: &'static std::sync::LazyLock<T>) {
    let _ = thread::Builder::new().name(name.into()).spawn(move || {
        std::sync::LazyLock::force(lazy);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_lowered_is_lowered_alone_and_passes_it_on() {
        let priority = || {
            // SAFETY: getpriority of this thread (its tid).
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
        };
        let here = priority();
        let (lowered, child) = std::thread::spawn(move || {
            lower_this_thread(5);
            (priority(), std::thread::spawn(priority).join().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (here + 5).min(19));
        assert_eq!(child, lowered, "a thread it starts inherits it");
        assert_eq!(priority(), here, "the caller's own thread is unchanged");
    }

    #[test]
    fn both_results_come_back_in_order() {
        let data = [1, 2, 3];
        let (a, b) = beside(|| data.iter().sum::<i32>(), || data.len());
        assert_eq!((a, b), (6, 3));
    }

    #[test]
    fn the_aside_work_runs_on_another_thread() {
        let here = thread::current().id();
        let (there, _) = beside(|| thread::current().id(), || ());
        assert_ne!(there, here);
    }

    #[test]
    fn a_refused_thread_runs_both_here_with_the_same_results() {
        let here = thread::current().id();
        let data = [1, 2, 3];
        let (a, b) = beside_or_inline(
            || (data.iter().sum::<i32>(), thread::current().id()),
            || data.len(),
            false,
        );
        assert_eq!((a, b), ((6, here), 3));
    }

    #[test]
    #[should_panic(expected = "aside failed")]
    fn a_panic_aside_reaches_the_caller() {
        beside(|| panic!("aside failed"), || ());
    }
}
