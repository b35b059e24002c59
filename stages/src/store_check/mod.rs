//! What an agent attempt changed under `.specbridge/` outside its own run folder
//! (docs/evidence.md): git snapshots never list the run store, so the store is
//! compared file by file (size, modification and change times, mode) before and
//! after the agent, and every difference is a `protected-path-changed` violation.
//! A run folder another process works on is its writer's to guard, and is left
//! out.
//!
//! A store keeps every earlier run, so the comparison walks thousands of files in
//! a repository used for a while (about 3.4 µs a file on the 2-core machine of
//! docs/performance.md: 20 ms for 300 earlier runs of one agent stage, where the
//! stage itself costs 22 ms of specbridge's time). So the agent never waits for
//! a walk: the state before an attempt is walked while the agent runs
//! ([`Beside`](state::Beside) says why that is sound) unless a [`StoreBaseline`]
//! is still exact, and the state after it on a thread beside the after-snapshot
//! ([`StoreCheck`]).

mod state;
#[cfg(test)]
mod tests;
mod walk;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use specbridge_engine::evidence::{ProtectionReason, Violation, ViolationKind, RUN_STORE_DIR};
use specbridge_engine::store::RunHandle;
use specbridge_engine::supervisor;

pub use state::RunStoreState;
use state::{held_runs, listed, run_of, Beside};

/// The latest state of the store a run took after an attempt, and how many
/// processes the run had started when that walk began ([`supervisor::spawned`]).
///
/// A state taken at any moment before an agent starts is a sound "before" for
/// it: whatever changed after that moment is found, and only the attribution
/// widens. It would widen to another process of this run — a check stage with
/// `sandbox: off`, a verification command, another agent — so a baseline is used
/// only while the run has started no process since its walk began: after each
/// attempt, the state the attempt's own check took becomes the "before" of the
/// next, so consecutive agent stages walk the store once each.
#[derive(Debug, Default)]
pub struct StoreBaseline {
    inner: Mutex<Option<Taken>>,
}

#[derive(Debug)]
struct Taken {
    state: Arc<RunStoreState>,
    spawned: u64,
}

/// The state of the store before an attempt's agent starts.
pub(crate) enum Before {
    /// Taken before the agent could change anything.
    Exact(Arc<RunStoreState>),
    /// Being walked beside the agent.
    Walking(JoinHandle<RunStoreState>),
    /// To be walked beside the agent once it is spawned ([`Before::walk_beside`]),
    /// with what was read before it: the store's clock among it.
    Ready(Box<BesideWalk>),
}

/// What a walk beside the agent starts from, all read before the spawn.
pub(crate) struct BesideWalk {
    store: PathBuf,
    own: PathBuf,
    live: HashSet<String>,
    beside: Beside,
}

impl BesideWalk {
    fn walk(self) -> RunStoreState {
        RunStoreState::beside_agent(&self.store, Some(&self.own), self.live, self.beside)
    }
}

impl Before {
    fn state(self) -> Arc<RunStoreState> {
        match self {
            Before::Exact(state) => state,
            Before::Walking(walk) => Arc::new(
                walk.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            ),
            Before::Ready(ready) => Arc::new(ready.walk()),
        }
    }

    /// A ready walk started, on a thread of its own at a lower priority (its
    /// own walking threads inherit it); any other state as it is.
    fn walk_beside(self) -> Before {
        match self {
            Before::Ready(ready) => Before::Walking(
                specbridge_engine::beside::spawn_beside_agent("specbridge-walk", move || {
                    ready.walk()
                })
                .expect("failed to spawn the thread of the walk beside the agent"),
            ),
            other => other,
        }
    }
}

/// What is read of the store while an attempt prepares, for its [`Before`].
pub(crate) enum BeforeAgent {
    Exact(Arc<RunStoreState>),
    /// The run folders held by another process and the top two levels of the
    /// store (`state::Beside`), read before the agent starts.
    Read {
        store: PathBuf,
        live: HashSet<String>,
        listed: HashSet<String>,
    },
}

impl BeforeAgent {
    /// Call last before the agent is spawned: reads the store's clock, which the
    /// walk that goes on beside the agent starts from once the agent is spawned
    /// ([`PendingCheck::agent_spawned`]). Only where the clock cannot be read is
    /// the store walked here.
    pub(crate) fn at_spawn(self, run: &RunHandle) -> Before {
        let (store, live, listed) = match self {
            BeforeAgent::Exact(state) => return Before::Exact(state),
            BeforeAgent::Read {
                store,
                live,
                listed,
            } => (store, live, listed),
        };
        let own = run.dir().to_path_buf();
        let Ok(since) = run.store_clock() else {
            return Before::Exact(Arc::new(RunStoreState::exact(
                &store,
                Some(&own),
                None,
                None,
            )));
        };
        Before::Ready(Box::new(BesideWalk {
            store,
            own,
            live,
            beside: Beside { since, listed },
        }))
    }
}

impl StoreBaseline {
    /// The start of the state before an attempt of `run`, while it prepares: the
    /// baseline while it is exact, else what must be read before the spawn. Read
    /// beside the working tree's snapshot: listing a folder the run just wrote
    /// updates its access time, which can wait for the file system's journal.
    pub(crate) fn before(&self, root: &Path, run: &RunHandle) -> BeforeAgent {
        if let Some(t) = self.lock().take() {
            if t.spawned == supervisor::spawned() {
                return BeforeAgent::Exact(t.state);
            }
        }
        let store = root.join(RUN_STORE_DIR);
        let listed = listed(&store, run.id());
        let runs = listed.iter().filter(|k| run_of(k) == Some(k.as_str()));
        BeforeAgent::Read {
            live: held_runs(&store, runs),
            listed,
            store,
        }
    }

    /// A state taken after an attempt's agent ended, offered to the next attempt.
    fn offer(&self, taken: Taken) {
        *self.lock() = Some(taken);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Taken>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The run store compared around an agent attempt. Its state after the attempt is
/// taken on a thread of its own, beside the after-snapshot: both only read, and
/// both wait for the agent's process group to be gone, so the longer of the two
/// is on the stage's path instead of their sum. Where the "before" is complete by
/// then, that walk takes its listings of the folders that did not change
/// (`walk.rs`); where the agent ended before the walk beside it did, the two
/// walks go on side by side, each listing every folder, rather than one after the
/// other. The stage waits for the comparison only: which run folders other
/// processes hold, which the state needs as the next attempt's "before", is
/// read after the comparison is handed over.
pub(crate) struct StoreCheck {
    changed: Receiver<Vec<String>>,
    walks: JoinHandle<()>,
}

/// A [`StoreCheck`] to start once the agent has ended: at the invocation's
/// `on_exit`, beside its records (all in the run's own folder, which the walk
/// leaves out), or, where nothing was spawned, when it is asked for.
pub(crate) struct PendingCheck<'a> {
    root: &'a Path,
    run: &'a RunHandle,
    baseline: Arc<StoreBaseline>,
    before: Mutex<Option<Before>>,
    started: Mutex<Option<StoreCheck>>,
}

impl<'a> PendingCheck<'a> {
    pub(crate) fn new(
        root: &'a Path,
        run: &'a RunHandle,
        before: Before,
        baseline: Arc<StoreBaseline>,
    ) -> Self {
        PendingCheck {
            root,
            run,
            baseline,
            before: Mutex::new(Some(before)),
            started: Mutex::default(),
        }
    }

    /// The agent is spawned: a "before" still to be walked starts beside it.
    pub(crate) fn agent_spawned(&self) {
        let mut before = self.before.lock().unwrap_or_else(PoisonError::into_inner);
        *before = before.take().map(Before::walk_beside);
    }

    /// Starts the check, once.
    pub(crate) fn start(&self) {
        let before = self
            .before
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(before) = before {
            let check = StoreCheck::start(self.root, self.run, before, self.baseline.clone());
            *self.started.lock().unwrap_or_else(PoisonError::into_inner) = Some(check);
        }
    }

    /// The check, started now if it was not yet.
    pub(crate) fn into_check(self) -> StoreCheck {
        self.start();
        self.started
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .expect("started above, or earlier")
    }
}

impl StoreCheck {
    /// Starts taking the state after the attempt (its agent has ended); the state
    /// becomes `baseline`'s for the next attempt.
    pub(crate) fn start(
        root: &Path,
        run: &RunHandle,
        before: Before,
        baseline: Arc<StoreBaseline>,
    ) -> StoreCheck {
        let store = root.join(RUN_STORE_DIR);
        let own = run.dir().to_path_buf();
        let clock = run.clock();
        let (send, changed) = mpsc::channel();
        let walks = std::thread::spawn(move || {
            // Read here, not on the stage's path: it sets the lock's times.
            let clock = clock.ok().and_then(|clock| clock.now().ok());
            let (known, before) = match before {
                Before::Walking(walk) if !walk.is_finished() => (None, Err(walk)),
                complete => {
                    let state = complete.state();
                    (Some(Arc::clone(&state)), Ok(state))
                }
            };
            let spawned = supervisor::spawned();
            let after = Arc::new(RunStoreState::unheld(
                &store,
                Some(&own),
                clock,
                known.as_deref(),
            ));
            // Offered before its held run folders are read: the next attempt's
            // comparison waits for them, its preparation does not.
            baseline.offer(Taken {
                state: Arc::clone(&after),
                spawned,
            });
            let held = HeldGuard(&after);
            // A stage that ended early has gone: nobody to hand the paths to.
            if let Ok(before) = &before {
                let _ = send.send(after.changed_since(before));
            }
            after.read_held(&store);
            drop(held);
            if let Err(walk) = before {
                let _ = send.send(after.changed_since(&Before::Walking(walk).state()));
            }
        });
        StoreCheck { changed, walks }
    }

    /// The paths the attempt changed under `.specbridge/` (waits for the walks).
    pub(crate) fn changed(self) -> Vec<String> {
        match self.changed.recv() {
            Ok(changed) => changed,
            // The thread ended without a comparison: it panicked.
            Err(_) => match self.walks.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => unreachable!("the store's walks end by handing over their comparison"),
            },
        }
    }
}

/// Makes sure a state handed on is never waited for forever: where reading its
/// held run folders panicked, none counts as held, so every folder is compared
/// (a violation too many, never one too few).
struct HeldGuard<'a>(&'a RunStoreState);

impl Drop for HeldGuard<'_> {
    fn drop(&mut self) {
        self.0.live.set(HashSet::new());
    }
}

/// A violation for each run-store path the attempt changed.
pub(crate) fn run_store_violations(store: StoreCheck) -> Vec<Violation> {
    store
        .changed()
        .into_iter()
        .map(|path| {
            Violation::new(ViolationKind::ProtectedPathChanged {
                path,
                rule: RUN_STORE_DIR.to_string(),
                reason: ProtectionReason::RunStore,
            })
        })
        .collect()
}
