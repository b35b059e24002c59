//! An attempt's before-snapshot, `git-before.json`: the working tree its
//! agent's changes are told from (docs/evidence.md).
//!
//! It must be complete before the agent can act, and an agent acts only on its
//! prompt, which the CLI is given once the attempt's first batch is on disk,
//! after about 100 ms of its own start-up (`invoke.rs`, "The prompt waits for
//! the records"). So an attempt whose kind decides nothing from the snapshot
//! about what to spawn starts it beside the attempt's preparation, spawns the
//! CLI meanwhile, and waits for it at the prompt ([`BeforeSnapshot::record`],
//! the invocation's `before_prompt`), where the kind's check of it runs too
//! (an execute stage refuses a tree made dirty behind the run's back): in a
//! tree of 20,000 files that takes the 40 ms of a `git status` off the
//! stage's path. One that decides from it what to spawn (an execute stage's
//! later attempts: the cut-off session they may continue) waits for it
//! before the spawn ([`BeforeSnapshot::into_recorded`] first).
//!
//! A playback, which changes the tree itself, waits for it before it starts;
//! where the CLI may write inside the tree from its start (its home or
//! temporary folder there), the invocation calls `before_prompt` before the
//! spawn (`invoke.rs`, `cli_writes_in_tree`). What the CLI does before it has
//! its prompt is no agent's doing, and may be in the snapshot or not. Where
//! nothing was spawned (a CLI not found, a run cancelled first), the snapshot
//! is recorded and checked once the invocation has returned.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use specbridge_engine::evidence::{repository_paths, GitSnapshot};
use specbridge_engine::store::layout::attempt as file;
use specbridge_engine::store::RunHandle;

use crate::error::StageError;
use crate::snapshot_ahead::SnapshotAhead;
use crate::working_tree::{snapshot, write_snapshot, Taking, TreeBefore};

/// The most entries the index may hold for a snapshot to be finished at the
/// prompt. The CLI waits for its prompt at most 3 s from its start, then
/// exits 1 having asked nothing ("no stdin data received in 3s", then "Input
/// must be provided"; 2.1.332, docs/claude-code-runner.md). A snapshot costs
/// about 2 µs an entry here with a warm cache (40 ms at 20,000), a cold cache
/// or a slow disk many times that: past this many, it is taken before the
/// spawn.
const AT_PROMPT_MAX_ENTRIES: u32 = 50_000;

/// A wait for a before-snapshot this long (at the prompt or before the spawn)
/// makes every later attempt of the process take its snapshot before the
/// spawn: the tree is slower than its size says.
const AT_PROMPT_MAX_WAIT: Duration = Duration::from_millis(500);

/// Set once a wait for a before-snapshot took [`AT_PROMPT_MAX_WAIT`] or longer.
static SLOW_AT_PROMPT: AtomicBool = AtomicBool::new(false);

/// Whether the before-snapshot of `root` may be finished while the CLI starts
/// up, by the size of its index and the waits before.
pub(crate) fn may_wait_at_prompt(root: &Path) -> bool {
    let entries = repository_paths(root)
        .ok()
        .and_then(|paths| index_entries(&paths.index_file));
    at_prompt(entries, SLOW_AT_PROMPT.load(Ordering::Relaxed))
}

/// [`may_wait_at_prompt`]'s rule: an index of a known size within the limit,
/// and no slow wait before.
fn at_prompt(entries: Option<u32>, slow_before: bool) -> bool {
    !slow_before && entries.is_some_and(|n| n <= AT_PROMPT_MAX_ENTRIES)
}

/// The number of entries in the index at `index`: its header's third word.
/// None where the header cannot be read; zero where there is no index yet.
fn index_entries(index: &Path) -> Option<u32> {
    let mut header = [0u8; 12];
    match std::fs::File::open(index) {
        Ok(mut file) => file.read_exact(&mut header).ok()?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(0),
        Err(_) => return None,
    }
    (&header[..4] == b"DIRC")
        .then(|| u32::from_be_bytes([header[8], header[9], header[10], header[11]]))
}

/// A kind's check of the before-snapshot before its agent may act
/// (`AttemptKind::check_before`): it may refuse the attempt, and gives the
/// tree the agent starts from, with the tree the attempt's patch is taken
/// against when not HEAD.
pub(crate) type Check<'a> = dyn Fn(GitSnapshot) -> Result<TreeBefore, StageError> + Sync + 'a;

/// An attempt's before-snapshot, from its start until it is recorded.
pub(crate) struct BeforeSnapshot<'a> {
    root: &'a Path,
    run: &'a RunHandle,
    attempt_rel: &'a str,
    /// Run once the snapshot is recorded, where the kind's check is left to
    /// it ([`BeforeSnapshot::checked_by`]).
    check: Option<&'a Check<'a>>,
    state: Mutex<State>,
}

enum State {
    /// Being taken, or taken; `None`: to be taken when waited for.
    Pending(Option<Taking>),
    /// Queued as `git-before.json`, and passed the check if it had one (the
    /// tree its patch is taken against).
    Recorded(TreeBefore),
    /// Taking, recording or checking it failed.
    Failed(StageError),
}

impl<'a> BeforeSnapshot<'a> {
    /// Claims the snapshot taken ahead of the run, or starts taking one, for
    /// the attempt at `attempt_rel`; waits for neither.
    pub(crate) fn start(
        ahead: &SnapshotAhead,
        root: &'a Path,
        run: &'a RunHandle,
        attempt_rel: &'a str,
    ) -> Self {
        let taking = ahead.claim().or_else(|| Taking::start(root));
        BeforeSnapshot {
            root,
            run,
            attempt_rel,
            check: None,
            state: Mutex::new(State::Pending(taking)),
        }
    }

    /// The same snapshot, checked by `check` once it is recorded.
    pub(crate) fn checked_by(self, check: &'a Check<'a>) -> Self {
        BeforeSnapshot {
            check: Some(check),
            ..self
        }
    }

    /// Waits for the snapshot, queues it as `git-before.json` and checks it,
    /// once; the reason where any of them failed. The invocation's
    /// `before_prompt`.
    pub(crate) fn record(&self) -> Result<(), String> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let State::Pending(taking) = &mut *state {
            let waited = Instant::now();
            let taken = match taking.take() {
                Some(taking) => taking.wait(self.root),
                None => snapshot(self.root),
            };
            if waited.elapsed() >= AT_PROMPT_MAX_WAIT {
                SLOW_AT_PROMPT.store(true, Ordering::Relaxed);
            }
            *state = match taken.and_then(|before| {
                write_snapshot(self.run, self.attempt_rel, file::GIT_BEFORE, &before)?;
                match self.check {
                    Some(check) => check(before),
                    None => Ok(TreeBefore {
                        snapshot: before,
                        patch_head: None,
                    }),
                }
            }) {
                Ok(before) => State::Recorded(before),
                Err(e) => State::Failed(e),
            };
        }
        match &*state {
            State::Failed(e) => Err(e.reason()),
            _ => Ok(()),
        }
    }

    /// The snapshot as recorded (and checked): by the invocation before the
    /// prompt, else here and now (nothing was spawned, or the kind needs it
    /// before the spawn), with the tree its check named. Its error where
    /// taking, recording or checking it failed.
    pub(crate) fn into_recorded(self) -> Result<TreeBefore, StageError> {
        // Any reason was kept in the state as well.
        let _ = self.record();
        let state = self
            .state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        match state {
            State::Recorded(before) => Ok(before),
            State::Failed(e) => Err(e),
            State::Pending(_) => unreachable!("recorded or failed above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::working_tree::tests::committed_repo;

    #[test]
    fn the_index_header_gives_its_entries() {
        let repo = committed_repo();
        let index = repo.path().join(".git/index");
        assert_eq!(index_entries(&index), Some(1));
        // Other tests of this process may have set the flag.
        let slow = SLOW_AT_PROMPT.load(Ordering::Relaxed);
        assert_eq!(may_wait_at_prompt(repo.path()), !slow);
        assert_eq!(
            index_entries(&repo.path().join(".git/no-index")),
            Some(0),
            "no index yet: nothing to refresh"
        );
        std::fs::write(&index, "DIRC\0\0").unwrap();
        assert_eq!(index_entries(&index), None, "a short header");
        std::fs::write(&index, "NOPE\0\0\0\x02\0\0\0\x07").unwrap();
        assert_eq!(index_entries(&index), None, "not an index");
        assert!(!may_wait_at_prompt(repo.path()));
    }

    /// A wait for the snapshot as long as [`AT_PROMPT_MAX_WAIT`] sends every later
    /// attempt's snapshot before the spawn; the snapshot is recorded all the same.
    #[test]
    fn a_slow_wait_at_the_prompt_sends_later_snapshots_before_the_spawn() {
        let repo = committed_repo();
        let run = specbridge_engine::store::RunStore::new(repo.path())
            .create(Default::default())
            .unwrap();
        let root = repo.path().to_path_buf();
        let slow = std::thread::spawn(move || {
            std::thread::sleep(AT_PROMPT_MAX_WAIT);
            GitSnapshot::take(&root)
        });
        let before = BeforeSnapshot {
            root: repo.path(),
            run: &run,
            attempt_rel: "stages/s/attempt-001",
            check: None,
            state: Mutex::new(State::Pending(Some(Taking::Thread(slow)))),
        };
        assert_eq!(before.record(), Ok(()));
        assert!(SLOW_AT_PROMPT.load(Ordering::Relaxed));
        assert!(!may_wait_at_prompt(repo.path()));
        assert!(before.into_recorded().unwrap().snapshot.entries.is_empty());
    }

    #[test]
    fn only_a_known_index_within_the_limit_and_no_slow_wait_before_wait_at_the_prompt() {
        assert!(at_prompt(Some(0), false));
        assert!(at_prompt(Some(AT_PROMPT_MAX_ENTRIES), false));
        assert!(!at_prompt(Some(AT_PROMPT_MAX_ENTRIES + 1), false));
        assert!(
            !at_prompt(None, false),
            "an unreadable index: before the spawn"
        );
        assert!(
            !at_prompt(Some(1), true),
            "a slow wait before: before the spawn"
        );
    }
}
