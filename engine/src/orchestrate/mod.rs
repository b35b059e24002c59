//! The engine's side of one run's lifecycle (docs/architecture.md): the plan
//! ([`plan_nodes`]), the options ([`options`]), and the run folder from its start
//! (fresh here, or reopened by `resume`) through scheduling to the settled
//! `run.json` ([`lifecycle`]). `specbridge_stages::session` composes these with
//! the stage kinds.

pub mod lifecycle;
pub mod options;

pub use lifecycle::{begin_run, ActiveRun, ResumeReport, RunResult};
pub use options::{resolve_options, GivenOptions, OptionsError};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::pipeline::{PipelineFile, StageDef};
use crate::scheduler::{self, Node, RunOutcome};
use crate::status::{exit, RunStatus, StageStatus};
use crate::store::{now_rfc3339, Expansion, StoreError};

/// The pipeline file as loaded: its path, its exact bytes, and its model.
#[derive(Debug, Clone)]
pub struct PipelineSource {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    /// Shared with the run context: a large pipeline's model is megabytes, and
    /// a copy cost a dry-run of 10,000 stages a twentieth of its time.
    pub file: std::sync::Arc<PipelineFile>,
}

impl PipelineSource {
    /// The file's path relative to the repository `root` (as given when outside
    /// it): what `run.json` records, and the pipeline file agents may not touch.
    pub fn path_in(&self, root: &Path) -> String {
        display_rel(root, &self.path)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OrchestrateError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Scheduler(#[from] scheduler::SchedulerError),
    #[error(transparent)]
    TreeLock(#[from] crate::store::TreeLockError),
    /// The run's records stopped being written (folder gone, disk full): the run
    /// ended failed, exit 2.
    #[error(transparent)]
    RecordsFailed(#[from] crate::run_failure::RecordsFailed),
    #[error("--only {name}: no stage has this id{hint}")]
    UnknownOnly { name: String, hint: String },
}

/// The working-tree lock of a run or resume whose nodes include execute stages
/// (docs/stage-kinds.md). One function for both, so that they never disagree.
pub(crate) fn lock_working_tree(
    root: &Path,
    command: &str,
    run_id: Option<&str>,
    nodes: &[Node],
) -> Result<Option<crate::store::TreeLock>, crate::store::TreeLockError> {
    let has_execute = nodes
        .iter()
        .any(|n| n.kind == crate::pipeline::StageKind::Execute);
    crate::store::lock_tree_for(root, command, run_id, has_execute)
}

/// The stages to schedule: every stage (fan-out stages as placeholders that need
/// their source), or with `only`, the named stages and everything they need.
pub fn plan_nodes(file: &PipelineFile, only: &[String]) -> Result<Vec<Node>, OrchestrateError> {
    let needs_of = |s: &StageDef| -> Vec<String> {
        let mut needs = s.needs.clone();
        if let Some(fe) = &s.for_each {
            if !needs.contains(&fe.stage) {
                needs.push(fe.stage.clone());
            }
        }
        needs
    };
    // Without `--only` every stage is kept: no set of ids to build or ask.
    let keep = if only.is_empty() {
        None
    } else {
        let by_id: BTreeMap<&str, &StageDef> =
            file.stages.iter().map(|s| (s.id.as_str(), s)).collect();
        let mut keep: BTreeSet<String> = BTreeSet::new();
        let mut stack: Vec<String> = Vec::new();
        for name in only {
            if !by_id.contains_key(name.as_str()) {
                let hint = crate::pipeline::suggest::did_you_mean(name, by_id.keys().copied())
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                return Err(OrchestrateError::UnknownOnly {
                    name: name.clone(),
                    hint,
                });
            }
            stack.push(name.clone());
        }
        while let Some(id) = stack.pop() {
            if keep.insert(id.clone()) {
                if let Some(s) = by_id.get(id.as_str()) {
                    stack.extend(needs_of(s));
                }
            }
        }
        Some(keep)
    };
    Ok(file
        .stages
        .iter()
        .filter(|s| keep.as_ref().is_none_or(|k| k.contains(&s.id)))
        .map(|s| {
            let mut n = Node::stage(&s.id, s.kind, needs_of(s));
            n.placeholder = s.for_each.is_some();
            n
        })
        .collect())
}

/// The plan as it finally stood: instances in place of placeholders, each node
/// with the input hash its stage reported.
pub(crate) fn final_nodes(outcome: &RunOutcome) -> Vec<crate::store::PlanNode> {
    plan_order(&outcome.nodes)
        .into_iter()
        .map(|n| {
            let hash = outcome
                .reports
                .get(&n.id)
                .and_then(|r| r.input_hash.clone());
            n.to_plan_node(hash)
        })
        .collect()
}

/// Nodes in dependency order, ties broken by id: the order `plan.json`, the
/// summary and `runs show` list stages in.
pub fn plan_order(nodes: &[Node]) -> Vec<&Node> {
    plan_order_indexes(nodes)
        .into_iter()
        .map(|i| &nodes[i])
        .collect()
}

/// [`plan_order`] as indexes into `nodes`, for a caller that moves them. Nodes
/// whose needs have a cycle (validation refuses those) stay in the plan's order.
pub fn plan_order_indexes(nodes: &[Node]) -> Vec<usize> {
    let stages: Vec<(&str, _)> = nodes
        .iter()
        .map(|n| (n.id.as_str(), n.needs.iter().map(String::as_str)))
        .collect();
    crate::dag::order_indexes(&stages).unwrap_or_else(|| (0..nodes.len()).collect())
}

/// The fan-out expansions of a scheduled plan, for `plan.json`.
pub fn expansions(outcome: &RunOutcome, file: &PipelineFile) -> Vec<Expansion> {
    outcome
        .expansions
        .iter()
        .map(|(stage, instances)| {
            let fe = file
                .stages
                .iter()
                .find(|s| &s.id == stage)
                .and_then(|s| s.for_each.clone());
            Expansion {
                stage: stage.clone(),
                source: fe.as_ref().map(|f| f.stage.clone()).unwrap_or_default(),
                items_pointer: fe.map(|f| f.items).unwrap_or_default(),
                instances: instances.clone(),
                at: now_rfc3339(),
            }
        })
        .collect()
}

/// A scheduled plan's run status and exit code (the most severe of its stages).
pub(crate) fn status_of(outcome: &RunOutcome) -> (RunStatus, i32) {
    let exit_code = exit::most_severe(
        outcome
            .reports
            .values()
            .map(scheduler::StageReport::exit_code),
    );
    let status = if outcome.cancelled {
        RunStatus::Cancelled
    } else if exit_code == exit::OK && outcome.statuses.values().all(|s| s.passed()) {
        RunStatus::Succeeded
    } else {
        RunStatus::Failed
    };
    (status, exit_code)
}

pub(crate) fn count_statuses(statuses: impl Iterator<Item = StageStatus>) -> BTreeMap<String, u32> {
    let mut m = BTreeMap::new();
    for s in statuses {
        *m.entry(s.as_str().to_string()).or_insert(0) += 1;
    }
    m
}

/// `path` relative to `root` when it is inside it, else as given.
fn display_rel(root: &Path, path: &Path) -> String {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (r, p) = (canon(root), canon(path));
    p.strip_prefix(&r)
        .map_or_else(|_| path.display().to_string(), |x| x.display().to_string())
}
