//! An agent attempt's before-snapshot, `git-before.json`: the working tree its
//! agent's changes are told from (docs/evidence.md).
//!
//! It must be complete before the agent can act, and an agent acts only on its
//! prompt, which the CLI is given once the attempt's first batch is on disk,
//! after about 100 ms of its own start-up (`invoke.rs`, "The prompt waits for
//! the records"). So a kind that decides nothing from the snapshot before the
//! spawn (generate) starts it beside the attempt's preparation, spawns the CLI
//! meanwhile, and waits for it at the prompt ([`BeforeSnapshot::record`], the
//! invocation's `before_prompt`): in a tree of 20,000 files that takes the
//! 40 ms of a `git status` off the stage's path. A kind that decides from it
//! what to spawn (execute: the session it continues, a dirty tree refused)
//! waits for it before the spawn ([`BeforeSnapshot::into_recorded`] first).
//!
//! A playback, which changes the tree itself, waits for it before it starts;
//! where the CLI may write inside the tree from its start (its home or
//! temporary folder there), the invocation calls `before_prompt` before the
//! spawn (`invoke.rs`, `cli_writes_in_tree`). What the CLI does before it has
//! its prompt is no agent's doing, and may be in the snapshot or not. Where
//! nothing was spawned (a CLI not found, a run cancelled first), the snapshot
//! is recorded once the invocation has returned.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use specbridge_engine::evidence::GitSnapshot;
use specbridge_engine::store::layout::attempt as file;
use specbridge_engine::store::RunHandle;

use crate::error::StageError;
use crate::snapshot_ahead::SnapshotAhead;
use crate::working_tree::{snapshot, write_snapshot, Taking};

/// An attempt's before-snapshot, from its start until it is recorded.
pub(crate) struct BeforeSnapshot<'a> {
    root: &'a Path,
    run: &'a RunHandle,
    attempt_rel: &'a str,
    state: Mutex<State>,
}

enum State {
    /// Being taken, or taken; `None`: to be taken when waited for.
    Pending(Option<Taking>),
    /// Queued as `git-before.json`.
    Recorded(GitSnapshot),
    /// Taking or recording it failed.
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
            state: Mutex::new(State::Pending(taking)),
        }
    }

    /// Waits for the snapshot and queues it as `git-before.json`, once; the
    /// reason where either failed. The invocation's `before_prompt`.
    pub(crate) fn record(&self) -> Result<(), String> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let State::Pending(taking) = &mut *state {
            let taken = match taking.take() {
                Some(taking) => taking.wait(self.root),
                None => snapshot(self.root),
            };
            *state = match taken.and_then(|before| {
                write_snapshot(self.run, self.attempt_rel, file::GIT_BEFORE, &before)
                    .map(|()| before)
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

    /// The snapshot as recorded: by the invocation before the prompt, else
    /// here and now (nothing was spawned, or the kind needs it before the
    /// spawn). Its error where taking or recording it failed.
    pub(crate) fn into_recorded(self) -> Result<GitSnapshot, StageError> {
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
