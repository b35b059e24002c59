//! The partial work of an execute attempt cut off by a crash (docs/resume.md,
//! "A crash while an execute agent works").
//!
//! A specbridge killed while its execute agent works leaves the agent's change in
//! the working tree, and no `changed-files.json` to tell it by: the attempt
//! recorded the tree before it (`git-before.json`), perhaps the tree after it, but
//! not what of it was its own. While the attempt ran, the run held
//! the working tree (`.specbridge/worktree.lock`), and a run that had not crashed
//! would have counted every change between the two snapshots as the attempt's.
//! Resume does the same up to now: what differs from that attempt's
//! `git-before.json` is the cut-off attempt's partial work. It is kept — nothing is
//! discarded — and the next attempt of the stage continues on top of it, judged
//! from the same `git-before.json` (its `continuation.json` names that attempt as
//! its baseline), so the change is the stage's, shown in its diff and verified.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use specbridge_engine::events::line::{self, EventLine};
use specbridge_engine::events::{ProcessSpawned, RunEvent};
use specbridge_engine::evidence::GitSnapshot;
use specbridge_engine::pipeline::StageKind;
use specbridge_engine::store::layout;
use specbridge_engine::store::RunReader;

/// One cut-off attempt and the paths it left changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialWork {
    pub stage: String,
    pub attempt: u32,
    pub paths: Vec<String>,
}

impl PartialWork {
    /// One line for the terminal.
    pub fn describe(&self) -> String {
        format!(
            "kept as the partial work of `{}` attempt {} (cut off by a crash; it continues on top of it): {}",
            self.stage,
            self.attempt,
            self.paths.join(", ")
        )
    }
}

/// Every execute stage of the run in `run_dir` whose last attempt spawned its
/// agent and never recorded its change (`changed-files.json`), with the paths of
/// `now` that differ from that attempt's `git-before.json`.
pub(crate) fn cut_off_attempts(run_dir: &Path, now: &GitSnapshot) -> Vec<PartialWork> {
    let run = RunReader::at(run_dir);
    let spawned = spawned_attempts(&run);
    let mut out = Vec::new();
    let Ok(records) = run.stage_records() else {
        return out;
    };
    for record in records.into_values() {
        if record.kind != StageKind::Execute || record.attempts == 0 {
            continue;
        }
        let attempt = record.attempts;
        if !spawned.contains(&(record.stage_id.clone(), attempt)) {
            continue;
        }
        let dir = run.attempt(&record.stage_id, attempt);
        // `changed-files.json` is what tells the run's changes from others (the
        // ledger): a crash may come after `git-after.json`, before it.
        if dir.has(layout::attempt::CHANGED_FILES) {
            continue;
        }
        // An attempt that continued a cut-off one was judged from where that one
        // began: so is its partial work.
        let baseline = dir
            .json_opt::<Value>(layout::attempt::CONTINUATION)
            .and_then(|c| c.get("baselineAttempt").and_then(Value::as_u64))
            .map_or(attempt, |b| b as u32);
        let Some(before) = run
            .attempt(&record.stage_id, baseline)
            .json_opt::<GitSnapshot>(layout::attempt::GIT_BEFORE)
        else {
            continue;
        };
        let paths: Vec<String> = now
            .entries
            .iter()
            .filter(|(path, state)| {
                before
                    .entries
                    .get(*path)
                    .is_none_or(|was| !was.same_content(state))
            })
            .map(|(path, _)| path.clone())
            .collect();
        if !paths.is_empty() {
            out.push(PartialWork {
                stage: record.stage_id,
                attempt,
                paths,
            });
        }
    }
    out
}

/// `(stage, attempt)` of every agent the run's `process-spawned` events record.
fn spawned_attempts(run: &RunReader) -> BTreeSet<(String, u32)> {
    let mut out = BTreeSet::new();
    let _ = line::read_with(&run.events_path(), |_, parsed| {
        if let Ok(EventLine {
            event: RunEvent::ProcessSpawned(ProcessSpawned::Stage(p)),
            ..
        }) = parsed
        {
            out.insert((p.stage, p.attempt));
        }
    });
    out
}
