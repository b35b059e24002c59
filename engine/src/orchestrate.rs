//! One run from start to end: create the run folder, write the pipeline and the
//! plan, schedule the stages, and settle `run.json`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::events::{RunEvent, RunFinished, RunStarted, Subscriber};
use crate::pipeline::{PipelineFile, RunOverrides, StageDef};
use crate::scheduler::{self, Node, RunOutcome, SchedulerOptions, StageExecutor};
use crate::status::{exit, RunStatus, StageStatus};
use crate::store::{
    now_rfc3339, Expansion, PipelineRef, PlanRecord, RunHandle, RunOptions, RunRecord, RunStore,
    RunnerInfo, StoreError, Totals, SCHEMA_VERSION,
};

/// The pipeline file as loaded: its path, its exact bytes, and its model.
#[derive(Debug, Clone)]
pub struct PipelineSource {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub file: PipelineFile,
}

#[derive(Debug, thiserror::Error)]
pub enum OrchestrateError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Scheduler(#[from] scheduler::SchedulerError),
    #[error(transparent)]
    TreeLock(#[from] crate::store::TreeLockError),
    #[error("--only {name}: no stage has this id{hint}")]
    UnknownOnly { name: String, hint: String },
}

/// The working-tree lock of a run or resume whose nodes include execute stages
/// (DESIGN §4). One function for both, so that they never disagree.
pub fn lock_working_tree(
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
    let by_id: BTreeMap<&str, &StageDef> = file.stages.iter().map(|s| (s.id.as_str(), s)).collect();
    let needs_of = |s: &StageDef| -> Vec<String> {
        let mut needs = s.needs.clone();
        if let Some(fe) = &s.for_each {
            if !needs.contains(&fe.stage) {
                needs.push(fe.stage.clone());
            }
        }
        needs
    };
    let mut keep: BTreeSet<String> = BTreeSet::new();
    if only.is_empty() {
        keep.extend(by_id.keys().map(|k| k.to_string()));
    } else {
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
    }
    Ok(file
        .stages
        .iter()
        .filter(|s| keep.contains(&s.id))
        .map(|s| {
            let mut n = Node::stage(&s.id, s.kind, needs_of(s));
            n.placeholder = s.for_each.is_some();
            n
        })
        .collect())
}

/// What a run needs besides the pipeline.
pub struct RunSpec {
    pub root: PathBuf,
    pub source: PipelineSource,
    pub options: RunOptions,
    pub runner: Option<RunnerInfo>,
    pub warnings: Vec<String>,
    pub executor: Arc<dyn StageExecutor>,
    /// Handed every event of the run as it is appended (the live display).
    pub subscriber: Option<Subscriber>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub run_id: String,
    pub run_dir: PathBuf,
    pub status: RunStatus,
    pub exit_code: i32,
    pub outcome: RunOutcome,
}

/// Create a run folder and run the pipeline in it. `spec.subscriber` sees every
/// event from the first on.
pub async fn execute_run(
    spec: RunSpec,
    on_created: impl FnOnce(&RunHandle),
) -> Result<RunResult, OrchestrateError> {
    let nodes = plan_nodes(&spec.source.file, &spec.options.only)?;
    // Before the run folder exists: a refused run leaves nothing behind.
    let mut tree_lock = lock_working_tree(&spec.root, "run", None, &nodes)?;
    let store = RunStore::new(&spec.root);
    // The one redactor of this run: the store applies it to every byte it writes.
    let run = Arc::new(store.create(crate::redact::Redactor::for_pipeline(&spec.source.file))?);
    if let Some(lock) = &mut tree_lock {
        lock.set_run(run.id())?;
    }
    if let Some(subscriber) = &spec.subscriber {
        run.subscribe(subscriber.clone());
    }
    on_created(&run);
    let started = Instant::now();

    run.event(RunEvent::RunStarted(RunStarted {
        run_id: run.id().to_string(),
        specbridge_version: Some(env!("CARGO_PKG_VERSION").to_string()),
    }))?;
    // As loaded, except secrets (a token in `commandArgs`, say), which the store
    // redacts: run.json keeps the sha256 of the original bytes.
    run.write_bytes("pipeline.yaml", &spec.source.bytes)?;
    let mut record = RunRecord {
        schema_version: SCHEMA_VERSION,
        run_id: run.id().to_string(),
        status: RunStatus::Running,
        pipeline: PipelineRef {
            name: spec.source.file.name.clone(),
            path: display_rel(&spec.root, &spec.source.path),
            sha256: crate::store::sha256_hex(&spec.source.bytes),
        },
        specbridge_version: env!("CARGO_PKG_VERSION").to_string(),
        root: spec.root.display().to_string(),
        started_at: now_rfc3339(),
        ended_at: None,
        duration_ms: None,
        exit_code: None,
        totals: Totals::default(),
        stage_counts: BTreeMap::new(),
        options: spec.options.clone(),
        runner: spec.runner.clone(),
        warnings: spec.warnings.clone(),
        resumes: Vec::new(),
    };
    run.write_json("run.json", &record)?;
    let mut plan = PlanRecord {
        schema_version: SCHEMA_VERSION,
        nodes: nodes.iter().map(|n| n.to_plan_node(None)).collect(),
        expansions: Vec::new(),
    };
    run.write_json("plan.json", &plan)?;

    let opts = SchedulerOptions {
        concurrency: spec.options.concurrency.max(1) as usize,
        fail_fast: spec.options.fail_fast,
        budget_usd: spec.options.budget_usd,
        spent_before_usd: 0.0,
    };
    let outcome = scheduler::run_plan(nodes, spec.executor.clone(), run.clone(), opts).await?;

    plan.nodes = final_nodes(&outcome);
    plan.expansions = expansions(&outcome, &spec.source.file);
    run.write_json("plan.json", &plan)?;

    let (status, exit_code) = settle(&outcome);
    record.status = status;
    record.ended_at = Some(now_rfc3339());
    record.duration_ms = Some(started.elapsed().as_millis() as u64);
    record.exit_code = Some(exit_code);
    record.totals = outcome.totals.clone();
    record.stage_counts = count_statuses(outcome.statuses.values().copied());
    run.write_json("run.json", &record)?;
    run.event(RunEvent::RunFinished(RunFinished {
        status,
        exit_code,
        totals: record.totals.clone(),
    }))?;
    Ok(RunResult {
        run_id: run.id().to_string(),
        run_dir: run.dir().to_path_buf(),
        status,
        exit_code,
        outcome,
    })
}

/// The plan as it finally stood: instances in place of placeholders, each node
/// with the input hash its stage reported.
pub fn final_nodes(outcome: &RunOutcome) -> Vec<crate::store::PlanNode> {
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
    let graph = crate::dag::StageGraph::from_needs(
        nodes
            .iter()
            .map(|n| (n.id.as_str(), n.needs.iter().map(String::as_str))),
    );
    let order = graph
        .topo_order()
        .unwrap_or_else(|_| nodes.iter().map(|n| n.id.clone()).collect());
    // By id, not by a scan per id: that is quadratic in the plan's size.
    let by_id: std::collections::HashMap<&str, &Node> =
        nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    order
        .iter()
        .filter_map(|id| by_id.get(id.as_str()).copied())
        .collect()
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
pub fn settle(outcome: &RunOutcome) -> (RunStatus, i32) {
    let exit_code = exit::most_severe(outcome.reports.values().map(|r| r.exit_code()));
    let status = if outcome.cancelled {
        RunStatus::Cancelled
    } else if exit_code == exit::OK && outcome.statuses.values().all(|s| s.passed()) {
        RunStatus::Succeeded
    } else {
        RunStatus::Failed
    };
    (status, exit_code)
}

pub fn count_statuses(statuses: impl Iterator<Item = StageStatus>) -> BTreeMap<String, u32> {
    let mut m = BTreeMap::new();
    for s in statuses {
        *m.entry(s.as_str().to_string()).or_insert(0) += 1;
    }
    m
}

/// `path` relative to `root` when it is inside it, else as given.
pub fn display_rel(root: &Path, path: &Path) -> String {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (r, p) = (canon(root), canon(path));
    p.strip_prefix(&r)
        .map(|x| x.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// What the command line gives `run` and `resume` alike.
#[derive(Debug, Clone, Default)]
pub struct GivenOptions {
    pub concurrency: Option<u32>,
    pub only: Vec<String>,
    pub fail_fast: bool,
    pub allow_dirty: bool,
    pub overrides: RunOverrides,
    /// `--run-budget-usd`: the whole run's budget, over the pipeline's.
    pub run_budget_usd: Option<f64>,
}

/// The options a run starts with (`recorded` is `None`) or a resume continues
/// with: the command line's over the recorded ones over the pipeline's. One
/// function for both, so that run and resume never disagree on a flag. Returns
/// the overrides merged key by key as well.
pub fn resolve_options(
    given: &GivenOptions,
    recorded: Option<&RunOptions>,
    file: &PipelineFile,
) -> (RunOptions, RunOverrides) {
    let recorded_overrides: RunOverrides = recorded
        .map(|r| {
            let map: serde_json::Map<String, Value> = r.overrides.clone().into_iter().collect();
            serde_json::from_value(Value::Object(map)).unwrap_or_default()
        })
        .unwrap_or_default();
    let o = &given.overrides;
    let overrides = RunOverrides {
        max_turns: o.max_turns.or(recorded_overrides.max_turns),
        max_budget_usd: o.max_budget_usd.or(recorded_overrides.max_budget_usd),
        timeout: o.timeout.or(recorded_overrides.timeout),
        model: o.model.clone().or(recorded_overrides.model),
    };
    let options = RunOptions {
        concurrency: given
            .concurrency
            .or(recorded.map(|r| r.concurrency))
            .or(file.concurrency)
            .unwrap_or(crate::pipeline::resolve::DEFAULT_CONCURRENCY)
            .max(1),
        only: match recorded {
            Some(r) => r.only.clone(),
            None => given.only.clone(),
        },
        fail_fast: given.fail_fast || recorded.is_some_and(|r| r.fail_fast),
        allow_dirty: given.allow_dirty || recorded.is_some_and(|r| r.allow_dirty),
        overrides: overrides_map(&overrides),
        budget_usd: given.run_budget_usd.or(file.budget.max_budget_usd),
    };
    (options, overrides)
}

/// Turn `--max-turns` style overrides into the record's map.
pub fn overrides_map(o: &crate::pipeline::RunOverrides) -> BTreeMap<String, Value> {
    match serde_json::to_value(o) {
        Ok(Value::Object(m)) => m.into_iter().collect(),
        _ => BTreeMap::new(),
    }
}
